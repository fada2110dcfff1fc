// SPDX-License-Identifier: GPL-2.0
//! UB switches: a data link engine on every port (behind the [`PortLink`]
//! seam), forwarding by network header with RT (per-flow hash or
//! per-packet spraying over equal paths), per-VL egress queues with a VL
//! arbiter, FECN/CAQM marking from queue depth, and injectable drop,
//! corruption, reordering and duplication.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};
use ub_proto::link::engine::{Delivery, Event, Link, LinkConfig, RxSink, TxPacket, TxSource};
use ub_proto::link::retry::RetrySlot;
use ub_proto::link::DllState;
use ub_proto::net::cci::Fecn;
use ub_proto::net::npi::Npi;
use ub_proto::net::nth::{IpHdr, NetHeader};
use ub_proto::net::route::{select_port, FlowKey, RouteEntry, RouteTable};
use ub_proto::net::{PacketClass, RoutingType};

use crate::rng::Rng;

/// Number of VLs a port queues separately.
pub const VLS: usize = 16;

/// A network packet as the link layer carries it (everything after the
/// LPH: network header, upper layers, ICRC).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packet {
    /// VL.
    pub vl: u8,
    /// LPH.CFG.
    pub cfg: u8,
    /// LPH.RT.
    pub rt: u8,
    /// ERROR_FLAG (poisoned).
    pub error_flag: bool,
    /// Bytes after the LPH.
    pub payload: Vec<u8>,
}

/// Per-VL packets offered to a [`PortLink`] for transmission.
pub trait PacketSource {
    /// Bit n set: VL n may send now (the VL arbiter's choice).
    fn ready(&self) -> u16;
    /// The head packet of `vl`.
    fn head(&self, vl: u8) -> Option<&Packet>;
    /// The head packet of `vl` was sent.
    fn pop(&mut self, vl: u8);
}

/// Link-level counters of a port.
#[derive(Debug, Default, Clone, Copy, Serialize)]
pub struct LinkCounters {
    /// DLL up.
    pub up: bool,
    /// Flits sent.
    pub tx_flits: u64,
    /// Flits received.
    pub rx_flits: u64,
    /// Packets received.
    pub rx_packets: u64,
    /// Flits retransmitted (link-level retry).
    pub retransmitted_flits: u64,
    /// Retry_Req sets sent (link retries requested).
    pub retry_requests: u64,
    /// Blocks failing their BCRC.
    pub crc_errors: u64,
    /// Flits reported lost by the PHY.
    pub fec_errors: u64,
    /// Malformed blocks.
    pub malformed: u64,
    /// Retrains.
    pub retrains: u64,
    /// Link resets (the engine gave up: RETRY_REQ_SM ERROR or a failed
    /// mode switch; the fabric took the link down and up again).
    pub link_resets: u64,
    /// Protocol errors.
    pub errors: u64,
}

/// The seam between the switch and a port's data link layer: feed
/// received flits, pull flits to send, deadlines. [`EnginePort`] runs
/// `ub_proto::link`; other implementations can replace it.
pub trait PortLink: Send {
    /// PHY LinkUp = 1.
    fn link_up(&mut self, now: u64);
    /// PHY LinkUp = 0.
    fn link_down(&mut self, now: u64);
    /// Received flits; whole received packets are appended to `out`.
    fn handle_receive(&mut self, now: u64, data: &[u8], out: &mut Vec<Packet>);
    /// The PHY lost `flits` flits.
    fn receive_error(&mut self, now: u64, flits: u32);
    /// Writes flits to send into `out`; returns the bytes written.
    fn poll_transmit(&mut self, now: u64, out: &mut [u8], src: &mut dyn PacketSource) -> usize;
    /// Next time [`PortLink::handle_timeout`] is due.
    fn poll_timeout(&self) -> Option<u64>;
    /// Timers.
    fn handle_timeout(&mut self, now: u64);
    /// Takes a pending request to retrain the PHY.
    fn take_retrain_request(&mut self) -> bool;
    /// The PHY finished retraining.
    fn retrained(&mut self, now: u64);
    /// Takes a pending request to initialise the link again
    /// (`Event::LinkResetRequest`); the port has then reset its data link
    /// layer, and the fabric takes the link down on both ends for
    /// [`crate::fabric::LINK_RESET_NS`] and up again.
    fn take_reset_request(&mut self) -> bool;
    /// DLL up (packets flow).
    fn is_up(&self) -> bool;
    /// Counters.
    fn counters(&self) -> LinkCounters;
}

/// Longest time a packet is held back for reordering (ns).
pub const HOLD_NS: u64 = 50_000;

/// Retry buffer depth of switch ports (flits).
pub const RETRY_DEPTH: usize = 1024;

/// Default WAIT timeout of a switch port facing a host (ns): 5 ms.
///
/// A host's end of the link is not hardware: the guest's driver runs the
/// link engine in a work item, 0.1–2 ms late under TCG, so a Retry_Ack_Set
/// can take that long. The spec recommends a WAIT timeout above twice the
/// link delay; with the engine's 10 µs the switch port used up
/// NUM_RETRY_THRESHOLD × NUM_PHY_REINIT_THRESHOLD WAIT timeouts (about
/// 0.6 ms) before a guest could answer once, and entered ERROR.
pub const HOST_WAIT_TIMEOUT_NS: u64 = 5_000_000;

/// The link configuration of a switch port facing a host: the engine's
/// defaults with a WAIT timeout of `wait_timeout_ns` (see
/// [`HOST_WAIT_TIMEOUT_NS`]).
pub fn host_port_config(wait_timeout_ns: u64) -> LinkConfig {
    LinkConfig {
        wait_timeout_ns,
        ..LinkConfig::default()
    }
}

/// Why [`Switch::inject`] queued nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum InjectError {
    /// The switch has no such port.
    #[error("no such switch port")]
    NoPort,
    /// The port's data link is not up (DLL_Normal).
    #[error("the switch port's data link is not up")]
    LinkDown,
}

/// Why [`Switch::route`] found no egress port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum NoEgress {
    /// No route to the destination (or only back to the ingress port).
    NoRoute,
    /// The route's every other port has its link down.
    LinkDown,
}

/// A [`PortLink`] running the `ub-proto` data link engine.
pub struct EnginePort {
    link: Link<Vec<RetrySlot>>,
    retrain: bool,
    reset: bool,
    rx: Reassembler,
}

impl std::fmt::Debug for EnginePort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EnginePort")
            .field("state", &self.link.state())
            .finish()
    }
}

impl EnginePort {
    /// A port engine with `cfg`.
    pub fn new(cfg: LinkConfig) -> Option<Self> {
        Some(Self {
            link: Link::new(cfg, vec![RetrySlot::EMPTY; RETRY_DEPTH]).ok()?,
            retrain: false,
            reset: false,
            rx: Reassembler::default(),
        })
    }

    /// The engine's configuration.
    pub fn config(&self) -> &LinkConfig {
        self.link.config()
    }

    fn events(&mut self) {
        while let Some(ev) = self.link.poll_event() {
            match ev {
                Event::RetrainRequest => self.retrain = true,
                Event::LinkResetRequest => self.reset = true,
                _ => {}
            }
        }
    }
}

/// Reassembles engine deliveries into packets.
#[derive(Debug, Default)]
pub struct Reassembler {
    cur: Option<Packet>,
    /// Finished packets.
    pub done: Vec<Packet>,
}

impl RxSink for Reassembler {
    fn deliver(&mut self, d: &Delivery<'_>) {
        if d.first || self.cur.is_none() {
            self.cur = Some(Packet {
                vl: d.vl,
                cfg: d.cfg,
                rt: d.rt,
                error_flag: false,
                payload: Vec::with_capacity(usize::from(d.total_len)),
            });
        }
        if let Some(p) = self.cur.as_mut() {
            p.payload.extend_from_slice(d.data);
        }
        if d.last {
            if let Some(mut p) = self.cur.take() {
                p.error_flag = d.error_flag;
                self.done.push(p);
            }
        }
    }
}

struct TxAdapter<'a>(&'a mut dyn PacketSource);

impl TxSource for TxAdapter<'_> {
    fn ready(&self) -> u16 {
        self.0.ready()
    }
    fn head(&self, vl: u8) -> Option<TxPacket<'_>> {
        self.0.head(vl).map(|p| TxPacket {
            cfg: p.cfg,
            rt: p.rt,
            error_flag: p.error_flag,
            payload: &p.payload,
        })
    }
    fn pop(&mut self, vl: u8) {
        self.0.pop(vl);
    }
}

impl PortLink for EnginePort {
    fn link_up(&mut self, now: u64) {
        self.link.link_up(now);
        self.events();
    }
    fn link_down(&mut self, now: u64) {
        self.link.link_down(now, &mut self.rx);
        self.rx.done.clear();
        self.rx.cur = None;
        self.events();
    }
    fn handle_receive(&mut self, now: u64, data: &[u8], out: &mut Vec<Packet>) {
        self.link.handle_receive(now, data, &mut self.rx);
        out.append(&mut self.rx.done);
        self.events();
    }
    fn receive_error(&mut self, now: u64, flits: u32) {
        self.link.receive_error(now, flits);
        self.events();
    }
    fn poll_transmit(&mut self, now: u64, out: &mut [u8], src: &mut dyn PacketSource) -> usize {
        let n = self.link.poll_transmit(now, out, &mut TxAdapter(src));
        self.events();
        n
    }
    fn poll_timeout(&self) -> Option<u64> {
        self.link.poll_timeout()
    }
    fn handle_timeout(&mut self, now: u64) {
        self.link.handle_timeout(now);
        self.events();
    }
    fn take_retrain_request(&mut self) -> bool {
        std::mem::take(&mut self.retrain)
    }
    fn retrained(&mut self, now: u64) {
        self.link.phy_retrained(now);
        self.events();
    }
    fn take_reset_request(&mut self) -> bool {
        if !std::mem::take(&mut self.reset) {
            return false;
        }
        // The data link layer starts over; the fabric takes the PHY down
        // and up, so the peer starts over too.
        self.link.reset();
        self.rx.done.clear();
        self.rx.cur = None;
        self.retrain = false;
        self.events();
        true
    }
    fn is_up(&self) -> bool {
        self.link.state() == DllState::Normal
    }
    fn counters(&self) -> LinkCounters {
        let c = self.link.counters();
        LinkCounters {
            up: self.is_up(),
            tx_flits: c.tx_flits,
            rx_flits: c.rx_flits,
            rx_packets: c.rx_dlldps,
            retransmitted_flits: c.tx_retransmitted_flits,
            retry_requests: c.retry_req_sets,
            crc_errors: c.rx_crc_errors,
            fec_errors: c.rx_fec_errors,
            malformed: c.rx_malformed,
            retrains: c.retrains,
            link_resets: c.link_reset_requests,
            errors: c.errors,
        }
    }
}

/// How the VL arbiter picks the next VL.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum Arbiter {
    /// Round robin over non-empty VLs, one packet each.
    #[default]
    RoundRobin,
    /// Highest VL first.
    StrictPriority,
}

/// The egress queues of one port.
#[derive(Debug, Default)]
pub struct Egress {
    q: [VecDeque<Packet>; VLS],
    bytes: [usize; VLS],
    rr: u8,
    arbiter: Arbiter,
    /// A packet held back to be sent after the next one (reordering).
    held: Option<(u64, Packet)>,
}

impl Egress {
    fn choose(&self) -> Option<u8> {
        let nonempty = |v: usize| !self.q[v].is_empty();
        match self.arbiter {
            Arbiter::StrictPriority => (0..VLS).rev().find(|&v| nonempty(v)).map(|v| v as u8),
            Arbiter::RoundRobin => (0..VLS)
                .map(|i| (usize::from(self.rr) + i) % VLS)
                .find(|&v| nonempty(v))
                .map(|v| v as u8),
        }
    }

    fn push(&mut self, p: Packet) {
        let vl = usize::from(p.vl) % VLS;
        self.bytes[vl] += p.payload.len();
        self.q[vl].push_back(p);
    }

    /// Bytes queued on `vl`.
    pub fn depth(&self, vl: u8) -> usize {
        self.bytes[usize::from(vl) % VLS]
    }

    /// Packets queued.
    pub fn len(&self) -> usize {
        self.q.iter().map(VecDeque::len).sum()
    }

    /// Whether nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn clear(&mut self) -> usize {
        let n = self.len() + usize::from(self.held.is_some());
        for q in &mut self.q {
            q.clear();
        }
        self.bytes = [0; VLS];
        self.held = None;
        n
    }
}

impl PacketSource for Egress {
    fn ready(&self) -> u16 {
        self.choose().map_or(0, |v| 1 << v)
    }
    fn head(&self, vl: u8) -> Option<&Packet> {
        self.q.get(usize::from(vl))?.front()
    }
    fn pop(&mut self, vl: u8) {
        let v = usize::from(vl) % VLS;
        if let Some(p) = self.q[v].pop_front() {
            self.bytes[v] -= p.payload.len();
        }
        self.rr = ((v + 1) % VLS) as u8;
    }
}

/// Faults a switch injects into forwarded packets (probabilities).
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct SwitchFaults {
    /// Drop a packet.
    pub drop: f64,
    /// Flip one byte after the network header (the ICRC catches it).
    pub corrupt: f64,
    /// Hold a packet back behind the next one on the same egress port.
    pub reorder: f64,
    /// Send a packet twice.
    pub duplicate: f64,
}

/// Switch settings.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct SwitchParams {
    /// VL arbiter.
    pub arbiter: Arbiter,
    /// Egress bytes per VL above which packets are marked "light".
    pub mark_light_bytes: usize,
    /// Egress bytes per VL above which packets are marked "severe".
    pub mark_severe_bytes: usize,
    /// Egress bytes per VL above which packets are dropped.
    pub queue_limit_bytes: usize,
    /// Faults.
    pub faults: SwitchFaults,
    /// WAIT timeout of the ports facing a host (ns, see
    /// [`HOST_WAIT_TIMEOUT_NS`]); set when the fabric is built.
    pub host_wait_timeout_ns: u64,
}

impl Default for SwitchParams {
    fn default() -> Self {
        Self {
            arbiter: Arbiter::RoundRobin,
            mark_light_bytes: 16 * 1024,
            mark_severe_bytes: 64 * 1024,
            queue_limit_bytes: 4 * 1024 * 1024,
            faults: SwitchFaults::default(),
            host_wait_timeout_ns: HOST_WAIT_TIMEOUT_NS,
        }
    }
}

/// Writes `npi` into `p`, whose header is `hdr`, if it is an IP-format
/// packet (CNA formats carry no NPI and pass unchanged), and counts it.
fn rewrite_npi(hdr: &NetHeader, p: &mut Packet, npi: Npi, counters: &mut SwitchCounters) {
    if hdr.write_npi(&mut p.payload, npi).is_ok() {
        counters.npi_rewrites += 1;
    }
}

/// Per-switch forwarding counters.
#[derive(Debug, Default, Clone, Copy, Serialize)]
pub struct SwitchCounters {
    /// Packets received.
    pub rx_packets: u64,
    /// Packets forwarded (queued on an egress port).
    pub forwarded: u64,
    /// Packets whose network header did not parse.
    pub bad_header: u64,
    /// Packets without a route.
    pub no_route: u64,
    /// Packets dropped by a full queue.
    pub queue_drops: u64,
    /// Packets dropped because the egress link is down.
    pub link_down_drops: u64,
    /// Injected drops.
    pub injected_drops: u64,
    /// Injected corruptions.
    pub injected_corruptions: u64,
    /// Injected reorderings.
    pub injected_reorders: u64,
    /// Injected duplicates.
    pub injected_duplicates: u64,
    /// Packets marked FECN (light or severe) or CAQM C.
    pub marked: u64,
    /// Per-packet sprays (RT\[0\] = 1).
    pub sprayed: u64,
    /// Per-flow hashed choices.
    pub hashed: u64,
    /// Forged packets queued at a port (`Switch::inject`).
    pub injected_forgeries: u64,
    /// NPIs rewritten at a port's edge (ingress or egress).
    pub npi_rewrites: u64,
}

/// The destination of a packet for routing: address and width in bits.
pub fn route_key(hdr: &NetHeader) -> (u128, u8, u128) {
    match hdr {
        NetHeader::Cna16 { nth, .. } => (u128::from(nth.dcna), 16, u128::from(nth.scna)),
        NetHeader::Cna24(nth) => (u128::from(nth.dcna), 24, u128::from(nth.scna)),
        NetHeader::Ip(ip) => match ip.ip {
            IpHdr::V4 { src, dst, .. } => (
                u128::from(u32::from_be_bytes(dst)),
                32,
                u128::from(u32::from_be_bytes(src)),
            ),
            IpHdr::V6 { src, dst, .. } => (u128::from_be_bytes(dst), 128, u128::from_be_bytes(src)),
        },
    }
}

/// Service level of a header (IP: DSCP's top bits).
fn service_level(hdr: &NetHeader) -> u8 {
    match hdr {
        NetHeader::Cna16 { nth, .. } => nth.sl,
        NetHeader::Cna24(nth) => nth.sl,
        NetHeader::Ip(ip) => match ip.ip {
            IpHdr::V4 { dscp, .. } => dscp >> 2,
            IpHdr::V6 { traffic_class, .. } => traffic_class >> 4,
        },
    }
}

/// Parses the network header of a packet (the one place the fabric reads
/// NTHs; it uses `ub_proto::net`).
pub fn parse_header(p: &Packet) -> Option<NetHeader> {
    let class = PacketClass::from_cfg(p.cfg).ok()?;
    NetHeader::parse(class, &p.payload).ok().map(|(h, _)| h)
}

/// One switch port.
pub struct SwitchPort {
    /// The port's data link layer.
    pub link: Box<dyn PortLink>,
    /// Egress queues.
    pub egress: Egress,
    /// The peer is a host (LoC: last hop).
    pub to_host: bool,
    /// PHY LinkUp.
    pub phy_up: bool,
    /// The NPI written into every IP-format packet received on this port
    /// (a switch assigning partitions at its edge, UB spec §5.3.3.1).
    pub npi_ingress: Option<Npi>,
    /// The NPI written into every IP-format packet sent on this port.
    pub npi_egress: Option<Npi>,
}

impl std::fmt::Debug for SwitchPort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SwitchPort")
            .field("up", &self.link.is_up())
            .field("queued", &self.egress.len())
            .finish()
    }
}

/// A UB switch.
#[derive(Debug)]
pub struct Switch {
    /// Name.
    pub name: String,
    /// Ports.
    pub ports: Vec<SwitchPort>,
    /// Routing table.
    pub routes: Vec<RouteEntry>,
    /// Settings (changeable at run time).
    pub params: SwitchParams,
    /// Counters.
    pub counters: SwitchCounters,
    rng: Rng,
    spray: u32,
    seed: u64,
}

/// The data link configuration of every switch port. The peers of a
/// switch include guests whose driver runs the link from a work item under
/// TCG, answering in 0.1–2 ms rather than the microseconds of hardware: with
/// the engine's 10 µs WAIT timeout a switch port spent its whole retry
/// budget (NUM_RETRY_THRESHOLD rounds, NUM_PHY_REINIT_THRESHOLD retrains)
/// before a guest's first answer and never initialised. The WAIT timeout
/// is the guest driver's (`drivers/ub/port.rs`), so both ends retry at the
/// same pace.
pub fn switch_link_config() -> LinkConfig {
    LinkConfig {
        wait_timeout_ns: 2_000_000,
        credit_return_delay_ns: 200_000,
        credit_timeout_ns: 500_000_000,
        ..LinkConfig::default()
    }
}

impl Switch {
    /// A switch with `ports` engine ports.
    pub fn new(name: &str, ports: usize, params: SwitchParams, seed: u64, stream: u64) -> Self {
        let ports = (0..ports)
            .map(|_| {
                let link: Box<dyn PortLink> = match EnginePort::new(switch_link_config()) {
                    Some(e) => Box::new(e),
                    None => unreachable!("RETRY_DEPTH is above the engine's minimum"),
                };
                let egress = Egress {
                    arbiter: params.arbiter,
                    ..Egress::default()
                };
                SwitchPort {
                    link,
                    egress,
                    to_host: false,
                    phy_up: false,
                    npi_ingress: None,
                    npi_egress: None,
                }
            })
            .collect();
        Self {
            name: name.to_string(),
            ports,
            routes: Vec::new(),
            params,
            counters: SwitchCounters::default(),
            rng: Rng::new(seed, stream),
            spray: 0,
            seed: seed ^ stream,
        }
    }

    /// Sets the arbiter of every port.
    pub fn set_params(&mut self, params: SwitchParams) {
        self.params = params;
        for p in &mut self.ports {
            p.egress.arbiter = params.arbiter;
        }
    }

    /// Port `port` faces a host: LoC marking, and an engine whose WAIT
    /// timeout leaves the host's driver time to answer
    /// ([`host_port_config`]). Called while the fabric is built.
    pub fn face_host(&mut self, port: usize) {
        let cfg = host_port_config(self.params.host_wait_timeout_ns);
        if let Some(p) = self.ports.get_mut(port) {
            p.to_host = true;
            if let Some(e) = EnginePort::new(cfg) {
                p.link = Box::new(e);
            }
        }
    }

    /// Drops everything queued for `port` (its link went down).
    pub fn flush_port(&mut self, port: usize) {
        if let Some(p) = self.ports.get_mut(port) {
            let n = p.egress.clear();
            self.counters.link_down_drops += n as u64;
        }
    }

    /// Bit `p` set for each port `p` (below 64) whose link is up.
    fn up_ports(&self) -> u64 {
        self.ports
            .iter()
            .take(64)
            .enumerate()
            .filter(|(_, p)| p.link.is_up())
            .fold(0, |m, (i, _)| m | 1 << i)
    }

    /// Chooses the egress port of a packet received on `ingress` among
    /// the ports of its route whose link is up.
    fn route(&mut self, hdr: &NetHeader, rt: u8, ingress: usize) -> Result<usize, NoEgress> {
        let (dst, width, src) = route_key(hdr);
        let entry = RouteTable::new(&self.routes)
            .lookup(dst, width)
            .copied()
            .ok_or(NoEgress::NoRoute)?;
        // Neither back where the packet came from nor over a port whose
        // link is down: a down port stays in the static table, and a
        // packet routed to it would be dropped (`link_down_drops`) while
        // another port of the set (the inter-switch link) reaches the
        // destination.
        let not_back = !(1u64 << ingress.min(63));
        let usable = not_back & self.up_ports();
        let e = RouteEntry {
            ports: entry.ports & usable,
            shortest: entry.shortest & usable,
            ..entry
        };
        let rt = RoutingType::from_bits(rt);
        let key = FlowKey {
            src,
            dst,
            lb: hdr.lb_key(),
            sl: service_level(hdr),
        };
        let hash = key.hash(self.seed);
        self.spray = self.spray.wrapping_add(1);
        if rt.per_packet {
            self.counters.sprayed += 1;
        } else {
            self.counters.hashed += 1;
        }
        if e.ports == 0 && entry.ports & not_back != 0 {
            return Err(NoEgress::LinkDown);
        }
        select_port(&e, rt, hash, self.spray)
            .map(usize::from)
            .ok_or(NoEgress::NoRoute)
    }

    /// Forwards a packet received on `ingress`. Returns the egress port
    /// if the packet was queued last there (not dropped, not held back for
    /// reordering).
    pub fn forward(&mut self, now: u64, ingress: usize, mut p: Packet) -> Option<usize> {
        self.counters.rx_packets += 1;
        let f = self.params.faults;
        if self.rng.chance(f.drop) {
            self.counters.injected_drops += 1;
            return None;
        }
        let Some(mut hdr) = parse_header(&p) else {
            self.counters.bad_header += 1;
            return None;
        };
        if let Some(npi) = self.ports.get(ingress).and_then(|x| x.npi_ingress) {
            rewrite_npi(&hdr, &mut p, npi, &mut self.counters);
        }
        let out = match self.route(&hdr, p.rt, ingress) {
            Ok(out) => out,
            Err(NoEgress::NoRoute) => {
                self.counters.no_route += 1;
                return None;
            }
            Err(NoEgress::LinkDown) => {
                self.counters.link_down_drops += 1;
                return None;
            }
        };
        let Some(port) = self.ports.get_mut(out) else {
            self.counters.no_route += 1;
            return None;
        };
        if !port.link.is_up() {
            self.counters.link_down_drops += 1;
            return None;
        }
        if let Some(npi) = port.npi_egress {
            rewrite_npi(&hdr, &mut p, npi, &mut self.counters);
        }
        let vl = p.vl;
        let depth = port.egress.depth(vl);
        if depth + p.payload.len() > self.params.queue_limit_bytes {
            self.counters.queue_drops += 1;
            return None;
        }
        // Congestion marking from the egress queue depth.
        let local = if depth >= self.params.mark_severe_bytes {
            Fecn::Severe
        } else if depth >= self.params.mark_light_bytes {
            Fecn::Light
        } else {
            Fecn::NoCongestion
        };
        let old = hdr.cci();
        let new = old.mark(local, port.to_host);
        if new != old {
            if new.congested() && !old.congested() {
                self.counters.marked += 1;
            }
            hdr.set_cci(new);
            // The header was parsed from this payload, so its CCI is there.
            let _ = hdr.write_cci(&mut p.payload);
        }
        if self.rng.chance(f.corrupt) && p.payload.len() > hdr.len() {
            let span = (p.payload.len() - hdr.len()) as u64;
            let at = hdr.len() + self.rng.below(span) as usize;
            p.payload[at] ^= 0x5a;
            self.counters.injected_corruptions += 1;
        }
        let dup = self.rng.chance(f.duplicate);
        let hold = self.rng.chance(f.reorder);
        self.counters.forwarded += 1;
        if dup {
            self.counters.injected_duplicates += 1;
            port.egress.push(p.clone());
        }
        if hold && port.egress.held.is_none() {
            self.counters.injected_reorders += 1;
            port.egress.held = Some((now, p));
            return None;
        }
        port.egress.push(p);
        if let Some((_, h)) = port.egress.held.take() {
            port.egress.push(h);
            return None;
        }
        Some(out)
    }

    /// Sets the NPIs port `port` writes into IP-format packets it receives
    /// (`ingress`) and sends (`egress`); `None` stops rewriting.
    pub fn set_port_npi(&mut self, port: usize, ingress: Option<Npi>, egress: Option<Npi>) -> bool {
        match self.ports.get_mut(port) {
            Some(p) => {
                p.npi_ingress = ingress;
                p.npi_egress = egress;
                true
            }
            None => false,
        }
    }

    /// Queues packets that did not come in on any port (forged ones,
    /// `crate::forge`) at the tail of `port`'s egress, where its data link
    /// engine sends them like forwarded packets. Refused (nothing queued)
    /// if the port does not exist or its data link is not up.
    pub fn inject(&mut self, port: usize, pkts: Vec<Packet>) -> Result<usize, InjectError> {
        let p = self.ports.get_mut(port).ok_or(InjectError::NoPort)?;
        if !p.link.is_up() {
            return Err(InjectError::LinkDown);
        }
        let n = pkts.len();
        for pkt in pkts {
            p.egress.push(pkt);
        }
        self.counters.injected_forgeries += n as u64;
        Ok(n)
    }

    /// Releases packets held for reordering that found no successor
    /// within [`HOLD_NS`].
    pub fn release_held(&mut self, now: u64) {
        for port in &mut self.ports {
            if port
                .egress
                .held
                .as_ref()
                .is_some_and(|(t, _)| now >= t.saturating_add(HOLD_NS))
            {
                if let Some((_, h)) = port.egress.held.take() {
                    port.egress.push(h);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ub_proto::net::cci::Cci;
    use ub_proto::net::nth::{IpNth, Nth16, Nth24, ICRC_LEN};

    /// A [`PortLink`] that is always up and never sends: packets stay in
    /// the egress queues for inspection.
    struct FakeLink;

    impl PortLink for FakeLink {
        fn link_up(&mut self, _now: u64) {}
        fn link_down(&mut self, _now: u64) {}
        fn handle_receive(&mut self, _now: u64, _data: &[u8], _out: &mut Vec<Packet>) {}
        fn receive_error(&mut self, _now: u64, _flits: u32) {}
        fn poll_transmit(
            &mut self,
            _now: u64,
            _out: &mut [u8],
            _src: &mut dyn PacketSource,
        ) -> usize {
            0
        }
        fn poll_timeout(&self) -> Option<u64> {
            None
        }
        fn handle_timeout(&mut self, _now: u64) {}
        fn take_retrain_request(&mut self) -> bool {
            false
        }
        fn retrained(&mut self, _now: u64) {}
        fn take_reset_request(&mut self) -> bool {
            false
        }
        fn is_up(&self) -> bool {
            true
        }
        fn counters(&self) -> LinkCounters {
            LinkCounters::default()
        }
    }

    fn switch(params: SwitchParams) -> Switch {
        let mut sw = Switch::new("t", 3, params, 1, 0);
        for p in &mut sw.ports {
            p.link = Box::new(FakeLink);
        }
        sw.routes = vec![
            RouteEntry {
                prefix: 0x0200,
                prefix_len: 8,
                width: 16,
                ports: 0b110,
                shortest: 0b010,
            },
            RouteEntry {
                prefix: 0x0200,
                prefix_len: 16,
                width: 24,
                ports: 0b100,
                shortest: 0b100,
            },
            RouteEntry {
                prefix: u128::from(u32::from_be_bytes([10, 0, 2, 0])),
                prefix_len: 24,
                width: 32,
                ports: 0b010,
                shortest: 0b010,
            },
        ];
        sw
    }

    fn build(h: NetHeader, body: usize, vl: u8, rt: u8) -> Packet {
        let mut payload = vec![0u8; h.len() + body + ICRC_LEN];
        h.write(&mut payload, body).expect("header");
        Packet {
            vl,
            cfg: h.class().cfg(),
            rt,
            error_flag: false,
            payload,
        }
    }

    /// An IPv4 header from 10.0.1.1 to 10.0.2.1 (port 1's route).
    fn ipv4(npi: Npi) -> NetHeader {
        NetHeader::Ip(IpNth {
            cci: Cci::DEFAULT,
            npi,
            ip: IpHdr::V4 {
                dscp: 0,
                ecn: 0,
                ident: 1,
                ttl: 64,
                src: [10, 0, 1, 1],
                dst: [10, 0, 2, 1],
            },
            sport: 4000,
        })
    }

    /// A 24-bit CNA header to 0x0201 (port 2's route).
    fn cna24() -> NetHeader {
        NetHeader::Cna24(Nth24 {
            scna: 0x101,
            dcna: 0x0201,
            cci: Cci::DEFAULT,
            lbf: 0,
            sl: 0,
            nlp: 2,
        })
    }

    fn cna16(dst: u16, lbf: u8, rt: u8) -> Packet {
        let h = NetHeader::Cna16 {
            nth: Nth16 {
                scna: 0x0101,
                dcna: dst,
                cci: Cci::DEFAULT,
                lbf,
                sl: 0,
                mgmt: false,
                nlp: 0,
            },
            coherent: false,
        };
        build(h, 64, 0, rt)
    }

    #[test]
    fn forwards_ip_and_cna24_by_header() {
        let mut sw = switch(SwitchParams::default());
        sw.forward(0, 0, build(ipv4(Npi::new(1, false)), 32, 0, 0));
        assert_eq!(sw.ports[1].egress.len(), 1);
        sw.forward(0, 0, build(cna24(), 32, 0, 0));
        assert_eq!(sw.ports[2].egress.len(), 1);
        let mut bad = cna16(0x0201, 0, 0);
        bad.payload.truncate(5);
        sw.forward(0, 0, bad);
        assert_eq!(sw.counters.bad_header, 1);
        sw.forward(0, 0, cna16(0x0901, 0, 0));
        assert_eq!(sw.counters.no_route, 1);
    }

    /// A switch assigning partitions at its edge: what it receives on a
    /// port with an ingress NPI leaves with that NPI, what it sends on a
    /// port with an egress NPI gets that one (the egress one wins); CNA
    /// packets, which have no NPI, pass unchanged; each rewrite counts.
    #[test]
    fn edge_ports_rewrite_the_npi_of_ip_packets() {
        let npi_of = |p: &Packet| match parse_header(p) {
            Some(NetHeader::Ip(ip)) => Some(ip.npi),
            _ => None,
        };
        let mut sw = switch(SwitchParams::default());
        let five = Npi::new(5, false);
        let one_low = Npi::new(1, true);
        assert!(sw.set_port_npi(0, Some(five), None));
        sw.forward(0, 0, build(ipv4(Npi::DEFAULT), 32, 0, 0));
        let out = sw.ports[1].egress.head(0).expect("forwarded");
        assert_eq!(npi_of(out), Some(five));
        assert_eq!(sw.counters.npi_rewrites, 1);
        assert!(sw.set_port_npi(1, None, Some(one_low)));
        sw.forward(0, 0, build(ipv4(Npi::DEFAULT), 32, 0, 0));
        let last = sw.ports[1].egress.q[0].back().expect("forwarded");
        assert_eq!(npi_of(last), Some(one_low));
        assert_eq!(sw.counters.npi_rewrites, 3);
        // No NPI in a CNA packet: forwarded as it came.
        let c24 = build(cna24(), 32, 0, 0);
        sw.forward(0, 0, c24.clone());
        assert_eq!(sw.ports[2].egress.head(0), Some(&c24));
        assert_eq!(sw.counters.npi_rewrites, 3);
        // Turned off: untouched again.
        assert!(sw.set_port_npi(0, None, None) && sw.set_port_npi(1, None, None));
        sw.forward(0, 0, build(ipv4(Npi::DEFAULT), 32, 0, 0));
        let last = sw.ports[1].egress.q[0].back().expect("forwarded");
        assert_eq!(npi_of(last), Some(Npi::DEFAULT));
        assert!(!sw.set_port_npi(9, None, None), "no port 9");
    }

    #[test]
    fn rt_selects_flow_hash_spray_and_shortest() {
        let mut sw = switch(SwitchParams::default());
        for _ in 0..100 {
            sw.forward(0, 0, cna16(0x0201, 7, 0b00));
        }
        let (a, b) = (sw.ports[1].egress.len(), sw.ports[2].egress.len());
        assert!(a == 100 || b == 100, "per flow: one path ({a}, {b})");
        let mut sw = switch(SwitchParams::default());
        for _ in 0..100 {
            sw.forward(0, 0, cna16(0x0201, 7, 0b01));
        }
        let (a, b) = (sw.ports[1].egress.len(), sw.ports[2].egress.len());
        assert!(a > 30 && b > 30, "per packet: sprayed ({a}, {b})");
        let mut sw = switch(SwitchParams::default());
        for _ in 0..50 {
            sw.forward(0, 0, cna16(0x0201, 7, 0b11));
        }
        assert_eq!(sw.ports[1].egress.len(), 50, "shortest only");
        // Never back out of the ingress port.
        let mut sw = switch(SwitchParams::default());
        for _ in 0..50 {
            sw.forward(0, 1, cna16(0x0201, 7, 0b01));
        }
        assert_eq!(sw.ports[1].egress.len(), 0);
    }

    #[test]
    fn fecn_marking_follows_queue_depth() {
        let params = SwitchParams {
            mark_light_bytes: 500,
            mark_severe_bytes: 1500,
            ..SwitchParams::default()
        };
        let mut sw = switch(params);
        sw.ports[1].to_host = true;
        for _ in 0..30 {
            sw.forward(0, 0, cna16(0x0201, 0, 0b11));
        }
        let q = &sw.ports[1].egress.q[0];
        let cci = |p: &Packet| Cci::from_u16(u16::from_be_bytes([p.payload[4], p.payload[5]]));
        assert_eq!(cci(&q[0]), Cci::DEFAULT, "empty queue: unmarked");
        assert_eq!(
            cci(&q[29]),
            Cci::Fecn {
                loc: true,
                fecn: Fecn::Severe
            }
        );
        assert!(q.iter().any(|p| cci(p)
            == Cci::Fecn {
                loc: true,
                fecn: Fecn::Light
            }));
        assert!(sw.counters.marked > 0);
        // The ICRC does not cover the CCI: marked packets stay valid.
    }

    #[test]
    fn caqm_sets_c_and_clears_i_when_congested() {
        let params = SwitchParams {
            mark_light_bytes: 200,
            mark_severe_bytes: 100_000,
            ..SwitchParams::default()
        };
        let mut sw = switch(params);
        let caqm = Cci::Caqm {
            loc: false,
            enable: true,
            c: false,
            i: true,
            hint: 7,
        };
        for _ in 0..10 {
            let h = NetHeader::Cna16 {
                nth: Nth16 {
                    scna: 0x0101,
                    dcna: 0x0201,
                    cci: caqm,
                    lbf: 0,
                    sl: 0,
                    mgmt: false,
                    nlp: 0,
                },
                coherent: false,
            };
            sw.forward(0, 0, build(h, 64, 0, 0b11));
        }
        let q = &sw.ports[1].egress.q[0];
        let cci = |p: &Packet| Cci::from_u16(u16::from_be_bytes([p.payload[4], p.payload[5]]));
        assert_eq!(cci(&q[0]), caqm, "uncongested: untouched");
        assert_eq!(
            cci(&q[9]),
            Cci::Caqm {
                loc: false,
                enable: true,
                c: true,
                i: false,
                hint: 7
            }
        );
    }

    #[test]
    fn vl_arbiter_round_robin_and_strict_priority() {
        let mut e = Egress::default();
        for vl in [0u8, 0, 3, 3] {
            e.push(Packet {
                vl,
                cfg: 6,
                rt: 0,
                error_flag: false,
                payload: vec![0; 8],
            });
        }
        let mut order = Vec::new();
        while e.ready() != 0 {
            let vl = e.ready().trailing_zeros() as u8;
            order.push(vl);
            e.pop(vl);
        }
        assert_eq!(order, [0, 3, 0, 3]);
        let mut e = Egress {
            arbiter: Arbiter::StrictPriority,
            ..Egress::default()
        };
        for vl in [0u8, 0, 3, 3] {
            e.push(Packet {
                vl,
                cfg: 6,
                rt: 0,
                error_flag: false,
                payload: vec![0; 8],
            });
        }
        let mut order = Vec::new();
        while e.ready() != 0 {
            let vl = e.ready().trailing_zeros() as u8;
            order.push(vl);
            e.pop(vl);
        }
        assert_eq!(order, [3, 3, 0, 0]);
    }

    #[test]
    fn injected_faults() {
        let faults = SwitchFaults {
            drop: 0.0,
            corrupt: 1.0,
            reorder: 0.0,
            duplicate: 1.0,
        };
        let mut sw = switch(SwitchParams {
            faults,
            ..SwitchParams::default()
        });
        let p = cna16(0x0201, 0, 0b11);
        sw.forward(0, 0, p.clone());
        assert_eq!(sw.ports[1].egress.len(), 2, "duplicated");
        assert_ne!(sw.ports[1].egress.q[0][0].payload, p.payload, "corrupted");
        let faults = SwitchFaults {
            reorder: 1.0,
            ..SwitchFaults::default()
        };
        let mut sw = switch(SwitchParams {
            faults,
            ..SwitchParams::default()
        });
        sw.forward(0, 0, cna16(0x0201, 1, 0b11));
        assert_eq!(sw.ports[1].egress.len(), 0, "the first is held");
        sw.forward(0, 0, cna16(0x0201, 2, 0b11));
        let q = &sw.ports[1].egress.q[0];
        assert_eq!(q.len(), 2);
        assert_eq!(q[0].payload[6], 2, "the first went behind the second");
        // A held packet without a successor is released after HOLD_NS.
        sw.forward(0, 0, cna16(0x0201, 3, 0b11));
        assert_eq!(sw.ports[1].egress.len(), 2);
        sw.release_held(HOLD_NS + 1);
        assert_eq!(sw.ports[1].egress.len(), 3);
    }
}
