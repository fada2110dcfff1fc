// SPDX-License-Identifier: GPL-2.0
//! `ub-sim`: a deterministic discrete-event simulator that runs two
//! `ub-proto` host endpoints ([`ub_proto::host::Endpoint`]) end to end
//! over a configurable multipath network.
//!
//! Topology: host A → NIC (rate) → switch → one of N paths (each with its
//! own delay, rate, loss, duplication, corruption, congestion marking and
//! optional link-layer protection) → host B, and the same paths back. The
//! switch picks the path with [`ub_proto::net::route::select_port`]: by a
//! hash of the flow fields (per-flow, RT\[0\] = 0) or by a per-packet
//! counter (RT\[0\] = 1).
//!
//! Each host is one endpoint: channel setup in-band, senders, receivers,
//! reassembly, network headers, ICRC, TP channel groups — none of it is
//! driven by hand here. The simulator models only time, the NICs, the
//! switch and the paths, and drives each endpoint in its documented call
//! order (inputs, then events, then transmit, then timer). Packets are
//! real bytes (IPv4 format with UDP 4792 or the 24-bit CNA NTH). Message
//! contents are a pattern of (message, offset), so the receiving side
//! checks exactly-once, in-order delivery of every byte. Everything is
//! driven by one seeded PRNG and a time-ordered event queue: the same seed
//! gives the same run.

pub mod dgram;
pub mod plot;
pub mod rng;

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};

use ub_host::{Collector, VecStorage};
use ub_proto::host::{
    Addr, ChannelConfig, ChannelCounters, Endpoint, EndpointConfig, Event, LoadBalance, LocalAddrs,
    MessageSource, MsgRef, NetCounters, Random, RtoConfig, SendError, Transmit, TransmitKind,
};
use ub_proto::net::cci::Fecn;
use ub_proto::net::npi::{Npi, NpiMode};
use ub_proto::net::nth::{NetHeader, ICRC_LEN};
use ub_proto::net::route::{select_port, FlowKey, RouteEntry};
use ub_proto::net::{PacketClass, RoutingType};
use ub_proto::transport::cc::CcConfig;
use ub_proto::transport::cm::CmTiming;
use ub_proto::transport::hdr::{BitmapSize, CetphKind, Rspst, Rtph, Saetph, TpOpcode, RTPH_LEN};
use ub_proto::transport::tpg::{member_lbf, member_sport, TpgPolicy};
use ub_proto::transport::{RetransmitMode, RtoMode, StaticRto};

use rng::Rng;

/// One path between the switch and host B (used in both directions).
#[derive(Clone, Debug)]
pub struct PathCfg {
    /// Propagation delay, ns.
    pub delay_ns: u64,
    /// Rate, bytes per ns (12.5 = 100 Gb/s).
    pub rate: f64,
    /// Probability a packet is lost.
    pub loss: f64,
    /// Probability a packet is duplicated.
    pub dup: f64,
    /// Probability a packet gets one bit flipped.
    pub corrupt: f64,
    /// Link-layer protected: losses and corruption are repaired by the link
    /// (cost: one extra round trip) instead of reaching the transport.
    pub lossless: bool,
    /// Queue depth (bytes) above which packets are congestion-marked.
    pub mark_threshold: Option<u64>,
}

impl PathCfg {
    /// A clean 100 Gb/s path with `delay_ns`.
    pub fn clean(delay_ns: u64) -> Self {
        Self {
            delay_ns,
            rate: 12.5,
            loss: 0.0,
            dup: 0.0,
            corrupt: 0.0,
            lossless: false,
            mark_threshold: None,
        }
    }
}

/// Load balancing of the network (what the switch does with a channel's
/// packets). With per-packet spraying the channels of the non-fast
/// combinations also vary their source port per packet; the fast
/// combinations keep a per-flow channel, as Table 6-7 requires (the
/// endpoint refuses fast retransmission with per-packet load balancing),
/// so their per-packet rows show a network that sprays a per-flow channel,
/// which is why Table 6-7 forbids it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lb {
    /// Per-flow hashing (RT\[0\] = 0).
    PerFlow,
    /// Per-packet spraying (RT\[0\] = 1).
    PerPacket,
}

/// Network header format used for RTP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// CCI + NPI, IPv4, UDP 4792.
    Ipv4,
    /// 24-bit CNA NTH.
    Cna24,
}

/// Direction of a traced packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dir {
    /// Host A to host B (A's data, A's responses to B's data).
    AtoB,
    /// Host B to host A (B's responses, B's data).
    BtoA,
}

/// Transport summary of a traced packet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum What {
    /// Data packet.
    Data {
        /// PSN.
        psn: u32,
        /// TPMSN.
        tpmsn: u32,
        /// Last flag.
        last: bool,
        /// Sender marked it as a retransmission.
        rtx: bool,
    },
    /// TPACK with PSN.
    Ack(u32),
    /// TPNAK with PSN.
    Nak(u32),
    /// TPSACK: PSN, MaxRcvPSN and the bitmap bits from bit 0 up to
    /// MaxRcvPSN.
    Sack {
        /// RTPH.PSN.
        psn: u32,
        /// MaxRcvPSN.
        max_rcv: u32,
        /// Bitmap bits 0 ..= MaxRcvPSN − PSN.
        bits: Vec<bool>,
    },
    /// A connection-manager message (channel setup or teardown).
    Setup,
    /// Something else.
    Other,
}

/// What happened to a traced packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fate {
    /// Reached the other host.
    Sent,
    /// Dropped by the fault filter.
    Filtered,
}

/// One packet leaving a host.
#[derive(Clone, Debug)]
pub struct TraceEntry {
    /// Departure time, ns.
    pub t: u64,
    /// Direction.
    pub dir: Dir,
    /// Transport summary.
    pub what: What,
    /// Fate at the source.
    pub fate: Fate,
    /// Path chosen.
    pub path: usize,
}

/// A fault filter: returns true to drop the packet before it leaves.
pub type Filter = Box<dyn FnMut(u64, Dir, &What) -> bool>;

/// Everything a run needs.
pub struct Scenario {
    /// PRNG seed.
    pub seed: u64,
    /// Paths (at least one).
    pub paths: Vec<PathCfg>,
    /// Extra loss probability for responses only.
    pub ack_loss: f64,
    /// Load balancing.
    pub lb: Lb,
    /// Header format.
    pub format: Format,
    /// Retransmission mode.
    pub mode: RetransmitMode,
    /// Fast retransmission.
    pub fast: bool,
    /// Transport MTU.
    pub mtu: u32,
    /// Send window, packets (power of two).
    pub window: u32,
    /// OOO window W.
    pub ooo_window: u32,
    /// Receiver OOO slots (power of two ≤ W).
    pub rx_slots: u32,
    /// RTO.
    pub rto: RtoMode,
    /// Retry limit.
    pub retry_limit: u8,
    /// Responses coalesced per this many packets.
    pub ack_every: u16,
    /// Coalescing delay, ns.
    pub ack_delay_ns: u64,
    /// OOO packets per TPSACK.
    pub sack_threshold: u16,
    /// Largest TPSACK bitmap.
    pub sack_max: BitmapSize,
    /// Congestion control.
    pub cc: CcConfig,
    /// CETPH layout when CC is on.
    pub cetph: Option<CetphKind>,
    /// Host NIC rate, bytes per ns.
    pub nic_rate: f64,
    /// Message sizes, sent in order from A to B.
    pub messages: Vec<u32>,
    /// Message sizes sent from B to A at the same time, over the same
    /// channels.
    pub reverse_messages: Vec<u32>,
    /// Initial PSN of A's first channel (channel i: + 1000 i); B draws
    /// its own.
    pub initial_psn: u32,
    /// Stop at this time, ns.
    pub max_time_ns: u64,
    /// Fault filter.
    pub filter: Option<Filter>,
    /// Record a packet trace.
    pub trace: bool,
    /// TP channels in the group between A and B (1 = a single channel).
    pub channels: u32,
    /// How the group spreads messages over its channels.
    pub tpg_policy: TpgPolicy,
}

impl Scenario {
    /// A scenario with the given combination over `paths` and defaults
    /// for everything else.
    pub fn new(mode: RetransmitMode, fast: bool, lb: Lb, paths: Vec<PathCfg>) -> Self {
        Self {
            seed: 1,
            paths,
            ack_loss: 0.0,
            lb,
            format: Format::Ipv4,
            mode,
            fast,
            mtu: 4096,
            window: 256,
            ooo_window: 256,
            rx_slots: 256,
            rto: RtoMode::Static(StaticRto::Us512),
            retry_limit: 7,
            ack_every: 1,
            ack_delay_ns: 2_000,
            sack_threshold: 1,
            sack_max: BitmapSize::B1024,
            cc: CcConfig::NONE,
            cetph: None,
            nic_rate: 12.5,
            messages: vec![4096; 16],
            reverse_messages: Vec::new(),
            initial_psn: 0xff_fff0,
            max_time_ns: 10_000_000_000,
            filter: None,
            trace: false,
            channels: 1,
            tpg_policy: TpgPolicy::RoundRobin,
        }
    }
}

/// Outcome of a run.
#[derive(Clone, Debug, Default)]
pub struct Report {
    /// Messages delivered in order at B (message index, completion time).
    pub delivered: Vec<(u64, u64)>,
    /// Messages of `reverse_messages` delivered in order at A.
    pub reverse_delivered: Vec<(u64, u64)>,
    /// Reverse messages acknowledged to B.
    pub reverse_acked: u64,
    /// Network counters of A and B.
    pub net: [NetCounters; 2],
    /// Transport counters of every channel of A, then of B.
    pub channels: Vec<ChannelCounters>,
    /// Per-message latency (post to delivery), ns.
    pub latencies: Vec<u64>,
    /// Payload bytes delivered.
    pub bytes: u64,
    /// Time of the last delivery, ns.
    pub end_ns: u64,
    /// Packets dropped for a bad ICRC or header (both endpoints).
    pub icrc_drops: u64,
    /// Delivery errors (wrong order, wrong bytes, TPMSN mismatch, ...).
    pub errors: Vec<String>,
    /// The channel went to the error state.
    pub channel_error: bool,
    /// Messages acknowledged to the sender.
    pub acked: u64,
    /// Sender counters, summed over every channel of both endpoints.
    pub tx: ub_proto::transport::tx::TxStats,
    /// Receiver counters, summed likewise.
    pub rx: ub_proto::transport::rx::RxStats,
    /// Data packets put on the wire by either endpoint (retransmissions
    /// included).
    pub data_packets: u64,
    /// Packet trace (if requested).
    pub trace: Vec<TraceEntry>,
    /// Largest number of unacknowledged packets seen.
    pub max_outstanding: u32,
    /// Times the sender's congestion window shrank.
    pub cc_decreases: u32,
    /// Final congestion window (largest over the channels that sent).
    pub final_cw: u32,
    /// The event queue ran dry before completion (a stall: no timer armed).
    pub stalled: bool,
    /// Simulated time when the run stopped, ns.
    pub stop_ns: u64,
    /// Data packets first sent by each of A's channels.
    pub per_channel_packets: Vec<u64>,
}

impl Report {
    /// Goodput in Gb/s.
    pub fn goodput_gbps(&self) -> f64 {
        if self.end_ns == 0 {
            0.0
        } else {
            self.bytes as f64 * 8.0 / self.end_ns as f64
        }
    }

    /// The `q`-quantile of the message latencies, µs.
    pub fn latency_quantile_us(&self, q: f64) -> f64 {
        if self.latencies.is_empty() {
            return f64::NAN;
        }
        let mut v = self.latencies.clone();
        v.sort_unstable();
        let i = ((v.len() as f64 * q).ceil() as usize).clamp(1, v.len()) - 1;
        v[i] as f64 / 1000.0
    }
}

/// Byte `off` of message `msg` (the content pattern).
pub fn pattern(msg: u64, off: u32) -> u8 {
    (msg.wrapping_mul(131)
        .wrapping_add(u64::from(off).wrapping_mul(7))
        ^ (u64::from(off) >> 8)) as u8
}

/// Tokens of B's messages: the message index plus this.
const REVERSE: u64 = 1 << 40;
/// UDP source port (or LBF) of A's first channel.
const SPORT: u16 = 50_123;
/// Largest network packet the simulated ports carry.
const MAX_PACKET: u32 = 16_384;

/// The simulator's PRNG as the endpoints' random source.
pub struct SimRandom(pub Rng);

impl Random for SimRandom {
    fn random_u32(&mut self) -> u32 {
        self.0.next_u64() as u32
    }
}

/// An endpoint as the simulator runs it.
pub type SimEndpoint = Endpoint<VecStorage, SimRandom>;

/// Message contents are the pattern: nothing is stored.
struct PatternSource;

impl MessageSource for PatternSource {
    fn read(&mut self, msg: MsgRef, offset: u32, out: &mut [u8]) {
        let token = match msg {
            MsgRef::Channel { token, .. } | MsgRef::Datagram { token } => token,
        };
        for (i, b) in out.iter_mut().enumerate() {
            *b = pattern(token, offset + i as u32);
        }
    }
}

/// One host: its endpoint and what the simulation tracks about it.
struct Host {
    ep: SimEndpoint,
    sink: Collector,
    /// Our channels, in the order they came up (A: as connected; B: as
    /// they arrived).
    tpns: Vec<u32>,
    group: Option<u16>,
    /// Per channel: indices of the messages posted on it, not yet
    /// delivered at the other side.
    posted: HashMap<u32, VecDeque<u64>>,
    /// Messages this host sends.
    messages: Vec<u32>,
    next_msg: usize,
    post_time: Vec<u64>,
    acked: u64,
    nic_free: u64,
    wake_at: u64,
}

#[derive(Debug)]
enum Ev {
    /// A packet arrives at host `to`.
    Arrive {
        to: usize,
        class: PacketClass,
        bytes: Vec<u8>,
    },
    /// Re-run host `h`'s endpoint.
    Wake { h: usize },
}

struct Queue {
    heap: BinaryHeap<Reverse<(u64, u64, usize)>>,
    evs: Vec<Option<Ev>>,
    seq: u64,
}

impl Queue {
    fn push(&mut self, t: u64, ev: Ev) {
        self.evs.push(Some(ev));
        self.heap.push(Reverse((t, self.seq, self.evs.len() - 1)));
        self.seq += 1;
    }

    fn pop(&mut self) -> Option<(u64, Ev)> {
        let Reverse((t, _, i)) = self.heap.pop()?;
        Some((t, self.evs[i].take()?))
    }
}

fn summarize(tp: &[u8], kind: TransmitKind) -> What {
    if kind == TransmitKind::Setup {
        return What::Setup;
    }
    let Ok(h) = Rtph::parse(tp) else {
        return What::Other;
    };
    match h.opcode {
        TpOpcode::Data => What::Data {
            psn: h.psn.value(),
            tpmsn: h.tpmsn,
            last: h.last,
            rtx: matches!(
                kind,
                TransmitKind::Data {
                    retransmission: true,
                    ..
                }
            ),
        },
        TpOpcode::Ack | TpOpcode::AckCc => {
            if h.rspst.is_psn_nak() {
                What::Nak(h.psn.value())
            } else if h.rspst == Rspst::Ack {
                What::Ack(h.psn.value())
            } else {
                What::Other
            }
        }
        TpOpcode::Sack | TpOpcode::SackCc => {
            let off = if h.opcode == TpOpcode::SackCc {
                RTPH_LEN + 8
            } else {
                RTPH_LEN
            };
            match tp.get(off..).map(Saetph::parse) {
                Some(Ok((s, _))) => {
                    let span = s.max_rcv_psn.distance_from(h.psn);
                    let n = span.min(s.size.bits() - 1);
                    What::Sack {
                        psn: h.psn.value(),
                        max_rcv: s.max_rcv_psn.value(),
                        bits: (0..=n).map(|k| s.bit(k)).collect(),
                    }
                }
                _ => What::Other,
            }
        }
        _ => What::Other,
    }
}

struct World {
    sc: Scenario,
    rng: Rng,
    q: Queue,
    hosts: [Host; 2],
    rep: Report,
    path_free: Vec<[u64; 2]>,
    spray: [u32; 2],
    buf: Vec<u8>,
}

/// The channel configuration a scenario asks for.
fn channel_config(sc: &Scenario, lb_key: u16, initial_psn: Option<u32>) -> ChannelConfig {
    ChannelConfig {
        mode: sc.mode,
        fast_retransmit: sc.fast,
        lb: if sc.lb == Lb::PerPacket && !sc.fast {
            LoadBalance::PerPacket { range_log2: 2 }
        } else {
            LoadBalance::PerFlow
        },
        lb_key,
        sl: 0,
        ooo_window: sc.ooo_window,
        rx_slots: sc.rx_slots,
        send_window: sc.window,
        // One message waits while the previous one is segmented; the
        // simulator posts just in time (`send_ready`) so that latency is
        // measured from the moment a message starts.
        send_queue: 1,
        rto: match sc.rto {
            RtoMode::Static(s) => RtoConfig::Static {
                timeout_us: (s.ns() / 1000) as u32,
            },
            RtoMode::Dynamic { base_us, n } => RtoConfig::Dynamic { base_us, n },
        },
        retry_limit: sc.retry_limit,
        mtu: sc.mtu,
        max_message: u32::MAX,
        initial_psn,
        ack_every: sc.ack_every,
        ack_delay_ns: sc.ack_delay_ns,
        sack_threshold: sc.sack_threshold,
        sack_max: sc.sack_max,
        cc: sc.cc,
    }
}

pub(crate) fn host_addr(sc: &Scenario, h: usize) -> Addr {
    match sc.format {
        Format::Ipv4 => Addr::Ipv4([10, 0, 0, 1 + h as u8]),
        Format::Cna24 => Addr::Cna24(0x10 * (1 + h as u32)),
    }
}

pub(crate) fn endpoint(sc: &Scenario, h: usize, seed: u64) -> SimEndpoint {
    let local = match host_addr(sc, h) {
        Addr::Ipv4(a) => LocalAddrs {
            ipv4: Some(a),
            ..LocalAddrs::default()
        },
        Addr::Cna24(c) => LocalAddrs {
            cna24: Some(c),
            ..LocalAddrs::default()
        },
        _ => LocalAddrs::default(),
    };
    let cfg = EndpointConfig {
        local,
        npi_mode: NpiMode::Strict(Npi::DEFAULT),
        npi: Npi::DEFAULT,
        ports: 1,
        max_packet: MAX_PACKET,
        max_channels: 64,
        max_routes: 1,
        max_groups: 1,
        datagram_queue: 4,
        cm: CmTiming {
            retry_ns: 200_000,
            max_tries: 60,
        },
        accept: Some(channel_config(sc, SPORT, None)),
        hash_seed: 42 + h as u64,
        icrc: ub_host_crc::crc32_le,
    };
    let mut ep = SimEndpoint::new(cfg, VecStorage, SimRandom(Rng::new(seed))).expect("endpoint");
    let (_, width) = host_addr(sc, 1 - h).key();
    ep.add_route(RouteEntry {
        prefix: 0,
        prefix_len: 0,
        width,
        ports: 1,
        shortest: 0,
    })
    .expect("one route");
    ep
}

impl World {
    fn schedule_wake(&mut self, h: usize, t: u64) {
        if self.hosts[h].wake_at > t {
            self.hosts[h].wake_at = t;
            self.q.push(t, Ev::Wake { h });
        }
    }

    /// The switch and the paths: `bytes` left host `from` at `depart`.
    fn send(&mut self, now: u64, from: usize, t: Transmit) {
        let n = t.len;
        let mut bytes = self.buf[..n].to_vec();
        let class = t.meta.class;
        let Ok((net, hlen)) = NetHeader::parse(class, &bytes) else {
            self.rep
                .errors
                .push("endpoint sent an unparsable packet".into());
            return;
        };
        let what = summarize(&bytes[hlen..n - ICRC_LEN], t.kind);
        if matches!(t.kind, TransmitKind::Data { .. }) {
            self.rep.data_packets += 1;
        }
        let ser = ((n as f64) / self.sc.nic_rate).ceil() as u64;
        let depart = self.hosts[from].nic_free.max(now) + ser;
        self.hosts[from].nic_free = depart;
        let entry = RouteEntry {
            prefix: 0,
            prefix_len: 0,
            width: 32,
            ports: (1u64 << self.sc.paths.len()) - 1,
            shortest: 0,
        };
        let rt = RoutingType {
            per_packet: self.sc.lb == Lb::PerPacket,
            shortest_only: false,
        };
        let to_b = from == 0;
        let key = FlowKey {
            src: u128::from(to_b),
            dst: u128::from(!to_b),
            lb: net.lb_key(),
            sl: 0,
        };
        self.spray[from] = self.spray[from].wrapping_add(1);
        let path =
            usize::from(select_port(&entry, rt, key.hash(42), self.spray[from]).unwrap_or(0));
        let dir = if to_b { Dir::AtoB } else { Dir::BtoA };
        let filtered = match self.sc.filter.as_mut() {
            Some(f) => f(now, dir, &what),
            None => false,
        };
        if self.sc.trace {
            self.rep.trace.push(TraceEntry {
                t: now,
                dir,
                what,
                fate: if filtered { Fate::Filtered } else { Fate::Sent },
                path,
            });
        }
        if filtered {
            return;
        }
        let p = self.sc.paths[path].clone();
        let side = from;
        let ser = ((n as f64) / p.rate).ceil() as u64;
        let start = self.path_free[path][side].max(depart);
        let queued = ((start - depart) as f64 * p.rate) as u64;
        self.path_free[path][side] = start + ser;
        let mut arrive = start + ser + p.delay_ns;
        if let Some(th) = p.mark_threshold {
            if queued > th {
                // Rewrite the CCI in place: it is masked out of the ICRC.
                let mut marked = net;
                marked.set_cci(net.cci().mark(Fecn::Light, true));
                let _ = marked.write_cci(&mut bytes);
            }
        }
        let loss = p.loss + if to_b { 0.0 } else { self.sc.ack_loss };
        let mut lost = self.rng.chance(loss);
        let mut corrupt = self.rng.chance(p.corrupt);
        if p.lossless && (lost || corrupt) {
            // The link layer repairs it (Go-Back-N from the bad block): one
            // extra round trip for this packet, and the link stays busy, so
            // the packets behind it keep their order.
            arrive += 2 * p.delay_ns + ser;
            self.path_free[path][side] = arrive - p.delay_ns;
            lost = false;
            corrupt = false;
        }
        if lost {
            return;
        }
        if corrupt {
            let bit = self.rng.below(bytes.len() as u64 * 8);
            bytes[(bit / 8) as usize] ^= 1 << (bit % 8);
        }
        let to = 1 - from;
        if self.rng.chance(p.dup) {
            self.q.push(
                arrive + ser,
                Ev::Arrive {
                    to,
                    class,
                    bytes: bytes.clone(),
                },
            );
        }
        self.q.push(arrive, Ev::Arrive { to, class, bytes });
    }

    /// Posts this host's next messages: on its channel when it would
    /// start at once, or through its group.
    fn post(&mut self, h: usize, now: u64) {
        loop {
            let host = &mut self.hosts[h];
            if host.next_msg >= host.messages.len() || host.tpns.is_empty() {
                return;
            }
            let ready = host.tpns.iter().any(|&t| host.ep.send_ready(t));
            if !ready || (host.tpns.len() > 1 && host.group.is_none()) {
                return;
            }
            let i = host.next_msg;
            let len = host.messages[i];
            let token = i as u64 + if h == 0 { 0 } else { REVERSE };
            let r = match host.group {
                Some(g) => host.ep.send_group(g, token, len),
                None => host
                    .ep
                    .send(host.tpns[0], token, len)
                    .map(|()| host.tpns[0]),
            };
            match r {
                Ok(tpn) => {
                    host.posted.entry(tpn).or_default().push_back(i as u64);
                    host.post_time[i] = now;
                    host.next_msg += 1;
                }
                Err(SendError::WouldBlock) => return,
                Err(e) => {
                    self.rep.errors.push(format!("host {h}: send: {e:?}"));
                    return;
                }
            }
        }
    }

    fn on_event(&mut self, h: usize, ev: Event) {
        match ev {
            Event::Incoming { tpn, .. } => {
                let host = &mut self.hosts[h];
                host.tpns.push(tpn);
                let n = self.sc.channels.clamp(1, 32) as usize;
                if host.tpns.len() == n && n > 1 && !host.messages.is_empty() {
                    host.group = host.ep.create_group(&host.tpns, self.sc.tpg_policy).ok();
                }
            }
            Event::MessageAcked { .. } => {
                self.hosts[h].acked += 1;
                if h == 0 {
                    self.rep.acked += 1;
                } else {
                    self.rep.reverse_acked += 1;
                }
            }
            Event::ChannelError { .. } => self.rep.channel_error = true,
            _ => {}
        }
    }

    /// Runs host `h`'s endpoint in its call order: timers, events, then
    /// transmit while the NIC is free, then the next deadline.
    fn drive(&mut self, h: usize, now: u64) {
        if self.hosts[h].ep.poll_timeout().is_some_and(|d| d <= now) {
            self.hosts[h].ep.handle_timeout(now);
        }
        loop {
            while let Some(ev) = self.hosts[h].ep.poll_event() {
                self.on_event(h, ev);
            }
            self.post(h, now);
            if self.hosts[h].nic_free > now {
                let t = self.hosts[h].nic_free;
                self.schedule_wake(h, t);
                break;
            }
            let mut buf = std::mem::take(&mut self.buf);
            let r = self.hosts[h]
                .ep
                .poll_transmit(now, &mut buf, &mut PatternSource);
            self.buf = buf;
            match r {
                Ok(Some(t)) => self.send(now, h, t),
                Ok(None) => break,
                Err(e) => {
                    self.rep.errors.push(format!("host {h}: transmit: {e:?}"));
                    break;
                }
            }
        }
        if let Some(d) = self.hosts[h].ep.poll_timeout() {
            // A deadline that is already due waits for the NIC.
            let t = if d <= now {
                self.hosts[h].nic_free.max(now + 1)
            } else {
                d
            };
            self.schedule_wake(h, t);
        }
    }

    fn on_arrive(&mut self, now: u64, to: usize, class: PacketClass, bytes: &[u8]) {
        let host = &mut self.hosts[to];
        host.ep
            .handle_packet(now, 0, class.cfg(), bytes, &mut host.sink);
        let done = std::mem::take(&mut host.sink.messages);
        self.rep.errors.append(&mut host.sink.errors);
        let done = done
            .into_iter()
            .flat_map(|(tpn, msgs)| msgs.into_iter().map(move |(_, m)| (tpn, m)));
        for (rx_tpn, msg) in done {
            let from = 1 - to;
            let tx_tpn = self.hosts[to].ep.peer_tpn(rx_tpn).unwrap_or(0);
            let Some(id) = self.hosts[from]
                .posted
                .get_mut(&tx_tpn)
                .and_then(VecDeque::pop_front)
            else {
                self.rep.errors.push(format!(
                    "host {to}: channel {rx_tpn}: message nobody posted"
                ));
                continue;
            };
            let token = id + if from == 0 { 0 } else { REVERSE };
            let want = self.hosts[from].messages.get(id as usize).copied();
            let len = msg.len() as u32;
            if want != Some(len) {
                self.rep
                    .errors
                    .push(format!("message {id}: length {len}, wanted {want:?}"));
            } else if let Some(off) = (0..len).find(|&o| msg[o as usize] != pattern(token, o)) {
                self.rep
                    .errors
                    .push(format!("message {id}: byte {off} wrong"));
            }
            if from == 0 {
                self.rep.delivered.push((id, now));
                if let Some(&t0) = self.hosts[0].post_time.get(id as usize) {
                    self.rep.latencies.push(now - t0);
                }
                self.rep.bytes += u64::from(len);
                self.rep.end_ns = now;
            } else {
                self.rep.reverse_delivered.push((id, now));
            }
        }
    }

    fn done(&self) -> bool {
        self.rep.channel_error
            || (self.rep.delivered.len() == self.hosts[0].messages.len()
                && self.rep.reverse_delivered.len() == self.hosts[1].messages.len()
                && self
                    .hosts
                    .iter()
                    .all(|h| h.acked == h.messages.len() as u64))
    }

    fn run(&mut self) {
        let n = self.sc.channels.clamp(1, 32);
        let remote = host_addr(&self.sc, 1);
        for i in 0..n {
            let lb = match self.sc.format {
                Format::Ipv4 => member_sport(SPORT, i),
                Format::Cna24 => u16::from(member_lbf(SPORT as u8, i)),
            };
            let psn = self.sc.initial_psn.wrapping_add(i * 1000) & 0xff_ffff;
            let cfg = channel_config(&self.sc, lb, Some(psn));
            match self.hosts[0].ep.connect(0, remote, i, cfg) {
                Ok(tpn) => self.hosts[0].tpns.push(tpn),
                Err(e) => {
                    self.rep.errors.push(format!("connect: {e:?}"));
                    return;
                }
            }
        }
        if n > 1 {
            let tpns = self.hosts[0].tpns.clone();
            self.hosts[0].group = self.hosts[0]
                .ep
                .create_group(&tpns, self.sc.tpg_policy)
                .ok();
        }
        self.drive(0, 0);
        loop {
            let Some((now, ev)) = self.q.pop() else {
                self.rep.stalled = !self.done();
                break;
            };
            self.rep.stop_ns = now;
            if now > self.sc.max_time_ns {
                break;
            }
            match ev {
                Ev::Arrive { to, class, bytes } => {
                    self.on_arrive(now, to, class, &bytes);
                    self.drive(to, now);
                }
                Ev::Wake { h } => {
                    if self.hosts[h].wake_at == now {
                        self.hosts[h].wake_at = u64::MAX;
                    }
                    self.drive(h, now);
                }
            }
            if self.done() {
                break;
            }
        }
    }

    fn finish(mut self) -> Report {
        for (h, host) in self.hosts.iter().enumerate() {
            let net = *host.ep.net_counters();
            self.rep.icrc_drops += net.icrc_drops + net.malformed;
            self.rep.net[h] = net;
            for &tpn in &host.tpns {
                let (Some(t), Some(r)) = (host.ep.sender_stats(tpn), host.ep.receiver_stats(tpn))
                else {
                    continue;
                };
                let w = &mut self.rep;
                w.tx.sent += t.sent;
                w.tx.retransmitted += t.retransmitted;
                w.tx.timeouts += t.timeouts;
                w.tx.fast_queued += t.fast_queued;
                w.tx.max_outstanding = w.tx.max_outstanding.max(t.max_outstanding);
                w.rx.in_order += r.in_order;
                w.rx.held += r.held;
                w.rx.duplicates += r.duplicates;
                w.rx.ooo_dropped += r.ooo_dropped;
                w.rx.unrecordable += r.unrecordable;
                w.rx.invalid += r.invalid;
                w.rx.acks += r.acks;
                w.rx.naks += r.naks;
                w.rx.sacks += r.sacks;
                if let Some(cc) = host.ep.congestion(tpn).filter(|_| t.sent > 0) {
                    w.cc_decreases += cc.decreases();
                    w.final_cw = w.final_cw.max(cc.cw());
                }
                if h == 0 {
                    w.per_channel_packets.push(t.sent);
                }
                if let Some(k) = host.ep.counters(tpn) {
                    w.channels.push(k);
                }
            }
        }
        self.rep.max_outstanding = self.rep.tx.max_outstanding;
        self.rep
    }
}

/// Runs a scenario to completion (all messages both ways delivered and
/// acknowledged), channel error, or `max_time_ns`.
pub fn run(sc: Scenario) -> Report {
    let npaths = sc.paths.len();
    let host = |h: usize, messages: Vec<u32>| Host {
        ep: endpoint(&sc, h, sc.seed.wrapping_mul(31).wrapping_add(h as u64)),
        sink: Collector::default(),
        tpns: Vec::new(),
        group: None,
        posted: HashMap::new(),
        post_time: vec![0; messages.len()],
        messages,
        next_msg: 0,
        acked: 0,
        nic_free: 0,
        wake_at: u64::MAX,
    };
    let hosts = [
        host(0, sc.messages.clone()),
        host(1, sc.reverse_messages.clone()),
    ];
    let mut w = World {
        rng: Rng::new(sc.seed),
        q: Queue {
            heap: BinaryHeap::new(),
            evs: Vec::new(),
            seq: 0,
        },
        hosts,
        rep: Report::default(),
        path_free: vec![[0; 2]; npaths],
        spray: [0; 2],
        buf: vec![0u8; MAX_PACKET as usize],
        sc,
    };
    w.run();
    w.finish()
}

/// Four paths of different delays (1, 1.5, 2, 2.5 µs) with the given
/// impairments.
pub fn four_paths(loss: f64, dup: f64, corrupt: f64) -> Vec<PathCfg> {
    [1000, 1500, 2000, 2500]
        .into_iter()
        .map(|d| PathCfg {
            loss,
            dup,
            corrupt,
            ..PathCfg::clean(d)
        })
        .collect()
}
