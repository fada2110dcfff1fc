// SPDX-License-Identifier: GPL-2.0
//! [`Endpoint`]: the channel table, routing, and the packet paths in both
//! directions.

use super::super::net::cci::Cci;
use super::super::net::icrc;
use super::super::net::npi::{Npi, NpiMode};
use super::super::net::nth::{
    IpHdr, IpNth, LinkMeta, NetHeader, Nth16, Nth24, ICRC_LEN, NLP24_CTPH, NLP24_RTPH,
};
use super::super::net::route::{select_port, FlowKey, RouteEntry, RouteTable};
use super::super::net::{Error, PacketClass, RoutingType};
use super::super::transport::cc::{CcConfig, CcState};
use super::super::transport::cm::{
    cc_code, ChannelState, CmKind, CmMsg, CmSession, CmState, CM_MSG_LEN,
};
use super::super::transport::hdr::{
    padding_for, CtpOpcode, Ctph, Rspst, Rtph, TpOpcode, Utph, CTPH_LEN, RTPH_LEN,
};
use super::super::transport::msg::{strip, Reassembler, Segment};
use super::super::transport::psn::Psn;
use super::super::transport::rx::{
    RtpReceiver, RxConfig, RxMode, RxStats, RxStorage, RxVerdict, SlotMeta,
};
use super::super::transport::tpg::{spray_sport, TpGroup, TpgPolicy, MAX_MEMBERS};
use super::super::transport::tx::{RtpSender, TxConfig, TxEvent, TxSlot, TxStats};
use super::config::{Addr, ChannelConfig, ConfigError, EndpointConfig, LoadBalance, LocalAddrs};
use super::{
    ChannelCounters, DatagramKind, Delivery, DeliverySink, EndpointError, ErrorCause, Event,
    GroupError, MessageSource, MsgRef, NetCounters, OpenError, Random, SendError, Storage,
    TableFull, Transmit, TransmitKind,
};

/// UTPH.NLP of connection-manager datagrams. The spec reserves NLP 2; this
/// implementation uses it to tell its in-band connection manager (whose
/// exchange the spec leaves out of scope) from user datagrams.
pub const CM_UTP_NLP: u8 = 2;

/// Stateless answers (REJ to a REQ we cannot take, DREP to a DREQ for a
/// channel already gone) waiting to be sent; more are dropped, and the
/// peer's retry asks again.
const STATELESS_SLOTS: usize = 8;

type Sender<S> = RtpSender<<S as Storage>::Buf<TxSlot>>;
type Receiver<S> =
    RtpReceiver<<S as Storage>::Buf<u64>, <S as Storage>::Buf<SlotMeta>, <S as Storage>::Buf<u8>>;

/// Buffers allocated when a channel is created, before its engines exist.
struct Bufs<S: Storage> {
    slots: S::Buf<TxSlot>,
    bitmap: S::Buf<u64>,
    meta: S::Buf<SlotMeta>,
    data: S::Buf<u8>,
}

/// The engines of an established channel.
struct Engines<S: Storage> {
    tx: Sender<S>,
    rx: Receiver<S>,
    reasm: Reassembler,
}

#[derive(Clone, Copy, Debug, Default)]
struct Queued {
    token: u64,
    len: u32,
}

/// One TP channel end.
struct Channel<S: Storage> {
    tpn: u32,
    key: u32,
    remote: Addr,
    local: Addr,
    cfg: ChannelConfig,
    cm: CmSession,
    bufs: Option<Bufs<S>>,
    eng: Option<Engines<S>>,
    queue: S::Buf<Queued>,
    q_head: usize,
    q_len: usize,
    blocked: bool,
    writable_pending: bool,
    incoming_pending: bool,
    announced: ChannelState,
    error: Option<ErrorCause>,
    error_reported: bool,
    group: Option<u16>,
    spray: u32,
    probe: Option<(Psn, u64)>,
    srtt: u64,
    counters: ChannelCounters,
}

impl<S: Storage> Channel<S> {
    fn state(&self) -> ChannelState {
        if self.error.is_some() {
            ChannelState::Err
        } else {
            self.cm.channel()
        }
    }

    fn fail(&mut self, cause: ErrorCause) {
        if self.error.is_none() {
            self.error = Some(cause);
            self.cm.set_error();
        }
    }

    fn accepts_sends(&self) -> bool {
        self.error.is_none()
            && matches!(
                self.cm.state(),
                CmState::ReqSent | CmState::RepSent | CmState::Established
            )
    }

    fn queue_full(&self) -> bool {
        self.q_len >= self.queue.len()
    }

    fn load(&self) -> u64 {
        let outstanding = self.eng.as_ref().map_or(0, |e| e.tx.outstanding());
        u64::from(outstanding).saturating_add(self.q_len as u64)
    }

    /// Builds the engines from the agreed parameters (once both PSNs and
    /// TPNs are known), consuming the buffers allocated at creation.
    fn build_engines(&mut self) {
        let Some(b) = self.bufs.take() else { return };
        let p = *self.cm.params();
        let cc_on = p.cc != cc_code::NONE;
        let cetph = if cc_on { self.cfg.cetph() } else { None };
        let peer_tpn = self.cm.peer_tpn();
        let txc = TxConfig {
            mode: p.mode,
            fast_retransmit: p.fast_retransmit,
            rto: p.rto,
            retry_limit: p.retry_limit,
            max_window: self.cfg.send_window,
            mtu: p.mtu,
            local_tpn: self.tpn,
            peer_tpn,
            initial_psn: self.cm.local_psn(),
            overhead: (RTPH_LEN + ICRC_LEN) as u32,
            cc: if cc_on {
                CcConfig {
                    mtu: p.mtu,
                    ..self.cfg.cc
                }
            } else {
                CcConfig::NONE
            },
            cetph,
        };
        let rxc = RxConfig {
            mode: RxMode::for_combination(p.mode, p.fast_retransmit),
            local_tpn: self.tpn,
            peer_tpn,
            initial_psn: self.cm.peer_psn(),
            ooo_window: p.ooo_window,
            ack_every: self.cfg.ack_every,
            ack_delay_ns: self.cfg.ack_delay_ns,
            sack_threshold: self.cfg.sack_threshold,
            sack_max: self.cfg.sack_max,
            cc: cetph,
        };
        let tx = RtpSender::new(txc, b.slots);
        let rx = RtpReceiver::new(
            rxc,
            RxStorage {
                bitmap: b.bitmap,
                meta: b.meta,
                data: b.data,
            },
        );
        match (tx, rx) {
            (Ok(tx), Ok(rx)) => {
                self.eng = Some(Engines {
                    tx,
                    rx,
                    reasm: Reassembler::new(0, p.mtu, self.cfg.max_message),
                });
            }
            // The peer agreed to parameters our storage cannot serve.
            _ => self.fail(ErrorCause::SetupFailed),
        }
    }

    /// Follows the connection manager after it handled something.
    fn after_cm(&mut self) {
        match self.cm.state() {
            CmState::Established | CmState::RepSent => self.build_engines(),
            CmState::Failed => self.fail(ErrorCause::SetupFailed),
            _ => {}
        }
    }

    /// Hands the next in-order piece up; false if the peer broke the
    /// message stream.
    fn deliver(
        reasm: &mut Reassembler,
        counters: &mut ChannelCounters,
        tpn: u32,
        tpmsn: u32,
        last: bool,
        bytes: &[u8],
        sink: &mut impl DeliverySink,
    ) -> bool {
        let len = u32::try_from(bytes.len()).unwrap_or(u32::MAX);
        let (offset, complete) = match reasm.on_packet(tpmsn, last, len) {
            Ok(Segment::Partial { offset, .. }) => (offset, None),
            Ok(Segment::Complete { offset, len, .. }) => (offset, Some(len)),
            Err(_) => return false,
        };
        counters.rx_bytes = counters.rx_bytes.saturating_add(u64::from(len));
        if complete.is_some() {
            counters.messages_delivered = counters.messages_delivered.saturating_add(1);
        }
        sink.deliver(&Delivery::Message {
            tpn,
            tpmsn,
            offset,
            bytes,
            complete,
        });
        true
    }
}

/// A CTP / UTP datagram waiting to be sent (or sent, waiting for its
/// event).
#[derive(Clone, Copy, Debug)]
struct Dgram {
    kind: DatagramKind,
    remote: Addr,
    token: u64,
    len: u32,
}

impl Default for Dgram {
    fn default() -> Self {
        Self {
            kind: DatagramKind::Utp,
            remote: Addr::Cna16(0),
            token: 0,
            len: 0,
        }
    }
}

/// A TP channel group.
#[derive(Clone, Copy, Debug)]
struct Group {
    tpg: TpGroup,
    members: [u32; MAX_MEMBERS as usize],
}

/// What a packet about to be finished needs from its channel.
struct Out {
    local: Addr,
    remote: Addr,
    cci: Cci,
    lb: u16,
    sl: u8,
    per_packet: bool,
    /// A datagram: the route's own load balancing applies
    /// ([`Endpoint::add_route_spraying`]).
    datagram: bool,
    spray: u32,
    upper: Upper,
}

/// The transport carried, which fixes the NTH.NLP of CNA formats.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Upper {
    /// RTPH or UTPH.
    Rtph,
    /// CTPH.
    Ctph,
}

/// Which way [`Endpoint::icrc`] works.
enum IcrcOp<'a> {
    Seal(PacketClass, &'a mut [u8]),
    Check(PacketClass, &'a [u8]),
}

/// A sans-I/O UB endpoint for one UB entity (one controller with one or
/// more ports).
///
/// # Call order
///
/// Every time something happens — a packet arrived
/// ([`Endpoint::handle_packet`]), the deadline passed
/// ([`Endpoint::handle_timeout`]), or the user called the API
/// ([`Endpoint::connect`], [`Endpoint::send`], [`Endpoint::close`], ...):
///
/// 1. drain [`Endpoint::poll_event`] until `None` (acknowledged messages
///    free their slots here, so this must come before step 2: a sender
///    whose window an ACK just emptied can only send again once the ACK's
///    events are taken);
/// 2. call [`Endpoint::poll_transmit`] until `None`, handing each packet
///    to its port;
/// 3. arm the timer from [`Endpoint::poll_timeout`] and call
///    `handle_timeout` when it passes.
///
/// Following this order, nothing waits for a timer that it does not
/// need: a packet that can be sent is sent in step 2 of the same round.
///
/// # Ports
///
/// A port carries whole network packets (everything after the LPH, ICRC
/// included) with their LPH.CFG and RT: a link engine's per-VL queue, a
/// simulated path, a UDP socket. [`Transmit`] says which port, CFG, RT and
/// SL; `handle_packet` takes the CFG the link layer decoded.
pub struct Endpoint<S: Storage, R: Random> {
    cfg: EndpointConfig,
    store: S,
    rng: R,
    chans: S::Buf<Option<Channel<S>>>,
    routes: S::Buf<RouteEntry>,
    /// Per route (same index as `routes`): datagrams spray packet by packet.
    route_spray: S::Buf<bool>,
    n_routes: usize,
    groups: S::Buf<Option<Group>>,
    dgrams: S::Buf<Dgram>,
    dg_head: usize,
    dg_len: usize,
    dg_sent: usize,
    stateless: [Option<(Addr, CmMsg)>; STATELESS_SLOTS],
    ports_up: u64,
    tx_cursor: usize,
    ev_cursor: usize,
    dg_spray: u32,
    net: NetCounters,
}

impl<S: Storage, R: Random> Endpoint<S, R> {
    /// An endpoint with its tables allocated from `store`; initial PSNs
    /// come from `rng`. Every port starts up, the routing table empty.
    pub fn new(cfg: EndpointConfig, mut store: S, rng: R) -> Result<Self, EndpointError> {
        if cfg.ports == 0 || cfg.ports > 64 {
            return Err(EndpointError::Config(ConfigError::Ports(cfg.ports)));
        }
        if cfg.max_channels == 0 || cfg.max_channels >= (1 << 24) {
            return Err(EndpointError::Config(ConfigError::Channels(
                cfg.max_channels,
            )));
        }
        let ip = cfg.local.ipv4.is_some() || cfg.local.ipv6.is_some();
        if ip && cfg.npi_mode.tx_npi(cfg.npi).is_err() {
            return Err(EndpointError::Config(ConfigError::Npi));
        }
        if let Some(acc) = &cfg.accept {
            // The largest header of the formats we have bounds the MTU.
            let hlen = [
                cfg.local.ipv6.map(Addr::Ipv6),
                cfg.local.ipv4.map(Addr::Ipv4),
                cfg.local.cna24.map(Addr::Cna24),
            ]
            .iter()
            .flatten()
            .map(|a| a.net_header_len())
            .max()
            .unwrap_or(0);
            acc.validate(hlen, cfg.max_packet)
                .map_err(EndpointError::Config)?;
        }
        let n = usize::try_from(cfg.max_channels).map_err(|_| EndpointError::Alloc)?;
        let chans = store.alloc(n, || None).map_err(|_| EndpointError::Alloc)?;
        let empty = RouteEntry {
            prefix: 0,
            prefix_len: 0,
            width: 0,
            ports: 0,
            shortest: 0,
        };
        let routes = store
            .alloc(usize::from(cfg.max_routes), || empty)
            .map_err(|_| EndpointError::Alloc)?;
        let route_spray = store
            .alloc(usize::from(cfg.max_routes), || false)
            .map_err(|_| EndpointError::Alloc)?;
        let groups = store
            .alloc(usize::from(cfg.max_groups), || None)
            .map_err(|_| EndpointError::Alloc)?;
        let dgrams = store
            .alloc(usize::from(cfg.datagram_queue), Dgram::default)
            .map_err(|_| EndpointError::Alloc)?;
        let ports_up = u64::MAX.checked_shr(64 - u32::from(cfg.ports)).unwrap_or(0);
        Ok(Self {
            cfg,
            store,
            rng,
            chans,
            routes,
            route_spray,
            n_routes: 0,
            groups,
            dgrams,
            dg_head: 0,
            dg_len: 0,
            dg_sent: 0,
            stateless: [None; STATELESS_SLOTS],
            ports_up,
            tx_cursor: 0,
            ev_cursor: 0,
            dg_spray: 0,
            net: NetCounters::default(),
        })
    }

    /// The configuration.
    pub const fn config(&self) -> &EndpointConfig {
        &self.cfg
    }

    /// Network-layer counters.
    pub const fn net_counters(&self) -> &NetCounters {
        &self.net
    }

    /// Adds a route: destinations matching `entry` leave by its ports
    /// (bit n = port n; ports beyond the endpoint's are ignored). CTP and
    /// UTP datagrams on it keep one port per flow.
    pub fn add_route(&mut self, entry: RouteEntry) -> Result<(), TableFull> {
        self.add_route_spraying(entry, false)
    }

    /// [`Endpoint::add_route`], with the load balancing of the datagrams
    /// it carries: `per_packet` sprays them over the equal-cost set packet
    /// by packet (RTP channels choose for themselves, per channel). A
    /// route with the same prefix, length and width replaces the old one.
    pub fn add_route_spraying(
        &mut self,
        entry: RouteEntry,
        per_packet: bool,
    ) -> Result<(), TableFull> {
        let i = self
            .route_index(entry.prefix, entry.prefix_len, entry.width)
            .unwrap_or(self.n_routes);
        let slot = self.routes.get_mut(i).ok_or(TableFull)?;
        *slot = entry;
        if let Some(spray) = self.route_spray.get_mut(i) {
            *spray = per_packet;
        }
        self.n_routes = self.n_routes.max(i.saturating_add(1));
        Ok(())
    }

    fn route_index(&self, prefix: u128, prefix_len: u8, width: u8) -> Option<usize> {
        self.routes
            .get(..self.n_routes)?
            .iter()
            .position(|r| r.prefix == prefix && r.prefix_len == prefix_len && r.width == width)
    }

    /// Removes the route with exactly this prefix, length and width;
    /// `false` if there is none. The order of the others is kept.
    pub fn remove_route(&mut self, prefix: u128, prefix_len: u8, width: u8) -> bool {
        let Some(i) = self.route_index(prefix, prefix_len, width) else {
            return false;
        };
        let n = self.n_routes;
        if let Some(tail) = self.routes.get_mut(i..n) {
            tail.rotate_left(1);
        }
        if let Some(tail) = self.route_spray.get_mut(i..n) {
            tail.rotate_left(1);
        }
        self.n_routes = n.saturating_sub(1);
        true
    }

    /// Route `i` (in table order) and whether its datagrams spray per
    /// packet, or `None` past the last.
    pub fn route_at(&self, i: usize) -> Option<(RouteEntry, bool)> {
        let r = self.routes.get(..self.n_routes)?.get(i)?;
        Some((*r, self.route_spray.get(i).copied().unwrap_or(false)))
    }

    /// Number of routes.
    pub const fn route_count(&self) -> usize {
        self.n_routes
    }

    /// Replaces the local addresses. An address that a live channel uses
    /// cannot be removed or changed ([`ConfigError::AddressInUse`]), and
    /// an IP address needs a valid NPI; on error nothing changes.
    pub fn set_local(&mut self, local: LocalAddrs) -> Result<(), ConfigError> {
        let ip = local.ipv4.is_some() || local.ipv6.is_some();
        if ip && self.cfg.npi_mode.tx_npi(self.cfg.npi).is_err() {
            return Err(ConfigError::Npi);
        }
        let in_use = self
            .chans
            .iter()
            .flatten()
            .any(|c| local.matching(&c.remote) != Some(c.local));
        if in_use {
            return Err(ConfigError::AddressInUse);
        }
        self.cfg.local = local;
        Ok(())
    }

    /// Sets the partition enforcement mode and NPI (IP format). Refused
    /// with [`ConfigError::Npi`] if the endpoint has an IP address and the
    /// NPI is invalid in that mode; on error nothing changes.
    pub fn set_npi(&mut self, mode: NpiMode, npi: Npi) -> Result<(), ConfigError> {
        let ip = self.cfg.local.ipv4.is_some() || self.cfg.local.ipv6.is_some();
        if ip && mode.tx_npi(npi).is_err() {
            return Err(ConfigError::Npi);
        }
        self.cfg.npi_mode = mode;
        self.cfg.npi = npi;
        Ok(())
    }

    /// Marks a port up or down; a port that is down is left out of every
    /// equal-cost set.
    pub fn set_port_up(&mut self, port: u8, up: bool) {
        let Some(bit) = 1u64.checked_shl(u32::from(port)) else {
            return;
        };
        if up && port < self.cfg.ports {
            self.ports_up |= bit;
        } else {
            self.ports_up &= !bit;
        }
    }

    fn index(tpn: u32) -> Option<usize> {
        usize::try_from(tpn.checked_sub(1)?).ok()
    }

    fn chan(&self, tpn: u32) -> Option<&Channel<S>> {
        self.chans.get(Self::index(tpn)?)?.as_ref()
    }

    fn chan_mut(&mut self, tpn: u32) -> Option<&mut Channel<S>> {
        self.chans.get_mut(Self::index(tpn)?)?.as_mut()
    }

    fn find(&self, remote: &Addr, key: u32) -> Option<usize> {
        self.chans.iter().position(|c| {
            c.as_ref()
                .is_some_and(|c| c.remote == *remote && c.key == key)
        })
    }

    /// State of channel `tpn`.
    pub fn state(&self, tpn: u32) -> Option<ChannelState> {
        self.chan(tpn).map(Channel::state)
    }

    /// The peer's TPN of channel `tpn` (0 until the setup told it).
    pub fn peer_tpn(&self, tpn: u32) -> Option<u32> {
        self.chan(tpn).map(|c| c.cm.peer_tpn())
    }

    /// The parameters both ends agreed for channel `tpn` (the proposal
    /// until then).
    pub fn params(&self, tpn: u32) -> Option<super::super::transport::cm::ChannelParams> {
        self.chan(tpn).map(|c| *c.cm.params())
    }

    /// Our first PSN on channel `tpn`.
    pub fn initial_psn(&self, tpn: u32) -> Option<u32> {
        self.chan(tpn).map(|c| c.cm.local_psn().value())
    }

    /// Number of channels in the table.
    pub fn channels(&self) -> usize {
        self.chans.iter().filter(|c| c.is_some()).count()
    }

    /// Transport counters of channel `tpn`.
    pub fn counters(&self, tpn: u32) -> Option<ChannelCounters> {
        let c = self.chan(tpn)?;
        let mut k = c.counters;
        if let Some(e) = &c.eng {
            let rs = e.rx.stats();
            k.tpack_sent = rs.acks;
            k.tpnak_sent = rs.naks;
            k.tpsack_sent = rs.sacks;
            k.rx_duplicates = rs.duplicates;
            k.rx_invalid_psn = rs.invalid;
            let ts = e.tx.stats();
            k.rto_expiries = ts.timeouts;
            // The sender records why it resends each packet.
            k.rtx_fast = ts.rtx_fast;
            k.rtx_mark_psn = ts.rtx_mark_psn;
            k.rtx_rto = ts.rtx_rto;
            k.rtx_go_back_n = ts.rtx_go_back_n;
            k.cw = e.tx.cc().cw();
            k.inflight = e.tx.cc().inflight();
            k.outstanding = e.tx.outstanding();
            k.max_outstanding = e.tx.stats().max_outstanding;
        }
        k.srtt_ns = c.srtt;
        Some(k)
    }

    /// Whether [`send`](Self::send) would queue a message on channel `tpn`
    /// now. When it would not because the channel's queue is full, the
    /// channel reports [`Event::Writable`] once it has room, as after a
    /// refused `send`: a caller can sleep until then (a file's `poll`).
    /// A channel that does not accept sends yet reports its RTS through
    /// [`Event::StateChanged`] instead.
    pub fn can_send(&mut self, tpn: u32) -> bool {
        let Some(c) = self.chan_mut(tpn) else {
            return false;
        };
        if !c.accepts_sends() {
            return false;
        }
        if c.queue_full() {
            c.blocked = true;
            return false;
        }
        true
    }

    /// Whether a message sent on channel `tpn` now would start being
    /// segmented at the next `poll_transmit` (its queue is empty and its
    /// sender free). Lets a caller that measures latency post just in time
    /// instead of queueing ahead.
    pub fn send_ready(&self, tpn: u32) -> bool {
        self.chan(tpn).is_some_and(|c| {
            c.accepts_sends() && c.q_len == 0 && c.eng.as_ref().is_none_or(|e| e.tx.can_post())
        })
    }

    /// The sender engine's own counters of channel `tpn`.
    pub fn sender_stats(&self, tpn: u32) -> Option<TxStats> {
        Some(*self.chan(tpn)?.eng.as_ref()?.tx.stats())
    }

    /// The receiver engine's own counters of channel `tpn`.
    pub fn receiver_stats(&self, tpn: u32) -> Option<RxStats> {
        Some(*self.chan(tpn)?.eng.as_ref()?.rx.stats())
    }

    /// The congestion state of channel `tpn`'s sender.
    pub fn congestion(&self, tpn: u32) -> Option<CcState> {
        Some(*self.chan(tpn)?.eng.as_ref()?.tx.cc())
    }

    /// Allocates a channel in the table (buffers included).
    fn alloc_channel(
        &mut self,
        remote: Addr,
        local: Addr,
        key: u32,
        cfg: ChannelConfig,
        cm: impl FnOnce(u32, Psn) -> CmSession,
    ) -> Result<(usize, u32), OpenError> {
        let idx = self
            .chans
            .iter()
            .position(Option::is_none)
            .ok_or(OpenError::TableFull)?;
        let tpn = u32::try_from(idx)
            .ok()
            .and_then(|i| i.checked_add(1))
            .ok_or(OpenError::TableFull)?;
        let slots = usize::try_from(cfg.send_slots()).map_err(|_| OpenError::Alloc)?;
        let rx = usize::try_from(cfg.rx_slots).map_err(|_| OpenError::Alloc)?;
        let mtu = usize::try_from(cfg.mtu).map_err(|_| OpenError::Alloc)?;
        let bufs = Bufs {
            slots: self.store.alloc(slots, TxSlot::default)?,
            bitmap: self.store.alloc(rx.div_ceil(64), || 0u64)?,
            meta: self.store.alloc(rx, SlotMeta::default)?,
            data: self
                .store
                .alloc(rx.checked_mul(mtu).ok_or(OpenError::Alloc)?, || 0u8)?,
        };
        let queue = self
            .store
            .alloc(usize::from(cfg.send_queue), Queued::default)?;
        let psn = Psn::new(
            cfg.initial_psn
                .unwrap_or_else(|| self.rng.random_u32() & 0xff_ffff),
        );
        let ch = Channel {
            tpn,
            key,
            remote,
            local,
            cfg,
            cm: cm(tpn, psn),
            bufs: Some(bufs),
            eng: None,
            queue,
            q_head: 0,
            q_len: 0,
            blocked: false,
            writable_pending: false,
            incoming_pending: false,
            announced: ChannelState::Reset,
            error: None,
            error_reported: false,
            group: None,
            spray: 0,
            probe: None,
            srtt: 0,
            counters: ChannelCounters::default(),
        };
        let slot = self.chans.get_mut(idx).ok_or(OpenError::TableFull)?;
        *slot = Some(ch);
        Ok((idx, tpn))
    }

    fn check_format(&self, remote: &Addr, cfg: &ChannelConfig) -> Result<Addr, ConfigError> {
        if matches!(remote, Addr::Cna16(_)) {
            return Err(ConfigError::RtpFormat);
        }
        let local = self
            .cfg
            .local
            .matching(remote)
            .ok_or(ConfigError::NoLocalAddress)?;
        cfg.validate(remote.net_header_len(), self.cfg.max_packet)?;
        Ok(local)
    }

    /// Opens an RTP channel to `remote`, named `key` by both ends (if the
    /// peer opens the same key towards us at the same time, the two
    /// attempts converge on one channel). Returns the TPN; the channel
    /// reaches RTS when the peer answers ([`Event::StateChanged`]).
    /// Messages may be queued with `send` at once.
    pub fn connect(
        &mut self,
        now: u64,
        remote: Addr,
        key: u32,
        cfg: ChannelConfig,
    ) -> Result<u32, OpenError> {
        let local = self.check_format(&remote, &cfg)?;
        if let Some(c) = self
            .find(&remote, key)
            .and_then(|i| self.chans.get(i)?.as_ref())
        {
            return Err(if c.cm.closing() {
                OpenError::Closing
            } else {
                OpenError::Exists
            });
        }
        let proposal = cfg.params()?;
        let timing = self.cfg.cm;
        let (_, tpn) = self.alloc_channel(remote, local, key, cfg, |tpn, psn| {
            CmSession::connect(now, timing, key, tpn, psn, proposal)
        })?;
        Ok(tpn)
    }

    /// Starts tearing channel `tpn` down (DREQ / DREP). Unsent and
    /// unacknowledged messages are abandoned; [`Event::Closed`] says when
    /// the TPN and memory are free.
    pub fn close(&mut self, now: u64, tpn: u32) -> Result<(), SendError> {
        let c = self.chan_mut(tpn).ok_or(SendError::NoChannel)?;
        c.q_len = 0;
        match &c.eng {
            Some(e) => c.cm.close_after(now, e.rx.epsn()),
            None => c.cm.close(now),
        }
        Ok(())
    }

    /// Pauses sending on channel `tpn` (RTS → SUSPENDED).
    pub fn suspend(&mut self, tpn: u32) -> Result<(), SendError> {
        self.chan_mut(tpn).ok_or(SendError::NoChannel)?.cm.suspend();
        Ok(())
    }

    /// Resumes sending on channel `tpn` (SUSPENDED → RTS).
    pub fn resume(&mut self, tpn: u32) -> Result<(), SendError> {
        self.chan_mut(tpn).ok_or(SendError::NoChannel)?.cm.resume();
        Ok(())
    }

    /// Queues a message of `len` bytes, named `token`, on channel `tpn`.
    /// [`SendError::WouldBlock`] when the queue is full (nothing is
    /// dropped); the bytes are read through the [`MessageSource`] when
    /// packets are built and may be freed at [`Event::MessageAcked`].
    pub fn send(&mut self, tpn: u32, token: u64, len: u32) -> Result<(), SendError> {
        let c = self.chan_mut(tpn).ok_or(SendError::NoChannel)?;
        if !c.accepts_sends() {
            return Err(SendError::NotReady);
        }
        if len == 0 || len > c.cfg.max_message {
            return Err(SendError::Length);
        }
        if c.queue_full() {
            c.blocked = true;
            return Err(SendError::WouldBlock);
        }
        let n = c.queue.len();
        let i = c.q_head.checked_add(c.q_len).map_or(0, |x| x % n.max(1));
        if let Some(q) = c.queue.get_mut(i) {
            *q = Queued { token, len };
            c.q_len = c.q_len.saturating_add(1);
        }
        Ok(())
    }

    /// Forms a TP channel group over existing channels; returns its
    /// number. Messages sent to the group go whole to one member each.
    /// Closing a member dissolves the group (its number is free again).
    pub fn create_group(&mut self, members: &[u32], policy: TpgPolicy) -> Result<u16, GroupError> {
        let n = u32::try_from(members.len()).map_err(|_| GroupError::Members)?;
        let tpg = TpGroup::new(n, policy).ok_or(GroupError::Members)?;
        for &m in members {
            let c = self.chan(m).ok_or(GroupError::NoChannel)?;
            if c.group.is_some() || members.iter().filter(|&&x| x == m).count() > 1 {
                return Err(GroupError::AlreadyMember);
            }
        }
        let gi = self
            .groups
            .iter()
            .position(Option::is_none)
            .ok_or(GroupError::TableFull)?;
        let gid = u16::try_from(gi).map_err(|_| GroupError::TableFull)?;
        let mut g = Group {
            tpg,
            members: [0; MAX_MEMBERS as usize],
        };
        for (dst, &m) in g.members.iter_mut().zip(members) {
            *dst = m;
        }
        for &m in members {
            if let Some(c) = self.chan_mut(m) {
                c.group = Some(gid);
            }
        }
        if let Some(slot) = self.groups.get_mut(gi) {
            *slot = Some(g);
        }
        Ok(gid)
    }

    /// Sends a message on group `group`: the group picks a member (a whole
    /// transaction per member, never split) and the message is queued
    /// there. Returns the member's TPN.
    pub fn send_group(&mut self, group: u16, token: u64, len: u32) -> Result<u32, SendError> {
        let tpn = self.group_pick(group)?;
        self.send(tpn, token, len).map(|()| tpn)
    }

    /// The member of group `group` the next message goes to (the group's
    /// policy over the members that accept a message now), for a caller
    /// that must store the message with that member before [`send`]ing it
    /// there. [`SendError::WouldBlock`] when every member is full or
    /// failed: each of them then reports [`Event::Writable`] when it has
    /// room again.
    ///
    /// [`send`]: Self::send
    pub fn group_pick(&mut self, group: u16) -> Result<u32, SendError> {
        let Self { groups, chans, .. } = self;
        let g = groups
            .get_mut(usize::from(group))
            .and_then(Option::as_mut)
            .ok_or(SendError::NoChannel)?;
        let members = g.members;
        let chan = |i: u32| -> Option<&Channel<S>> {
            let tpn = *members.get(usize::try_from(i).ok()?)?;
            chans.get(Self::index(tpn)?)?.as_ref()
        };
        let pick = g.tpg.select(
            |i| chan(i).map_or(u64::MAX, Channel::load),
            |i| chan(i).is_some_and(|c| c.accepts_sends() && !c.queue_full()),
        );
        let Some(i) = pick else {
            // Every member full (or failed): block on all of them.
            for &tpn in members
                .iter()
                .take(usize::try_from(g.tpg.members()).unwrap_or(0))
            {
                if let Some(c) = Self::index(tpn)
                    .and_then(|x| chans.get_mut(x))
                    .and_then(Option::as_mut)
                {
                    c.blocked = true;
                }
            }
            return Err(SendError::WouldBlock);
        };
        members
            .get(usize::try_from(i).unwrap_or(usize::MAX))
            .copied()
            .ok_or(SendError::NoChannel)
    }

    /// The largest payload [`send_datagram`](Self::send_datagram) takes for
    /// a datagram of `kind` to `remote` (one packet of the ports' size, with
    /// its network and transport headers, the largest padding and the
    /// ICRC); `None` if `kind` does not run over `remote`'s format (UTP over
    /// IP, CTP over CNA).
    pub fn max_datagram(&self, kind: DatagramKind, remote: Addr) -> Option<u32> {
        let hdr = match kind {
            DatagramKind::Utp if matches!(remote, Addr::Ipv4(_) | Addr::Ipv6(_)) => RTPH_LEN,
            DatagramKind::Ctp if matches!(remote, Addr::Cna16(_) | Addr::Cna24(_)) => CTPH_LEN,
            _ => return None,
        };
        let max = (self.cfg.max_packet as usize)
            .saturating_sub(remote.net_header_len() + hdr + 3 + ICRC_LEN);
        Some(u32::try_from(max).unwrap_or(u32::MAX))
    }

    /// Queues a datagram of `len` bytes: UTP to an IP address, CTP to a
    /// CNA. One packet, no acknowledgement; [`Event::DatagramSent`] frees
    /// the token once it is on the wire.
    pub fn send_datagram(
        &mut self,
        kind: DatagramKind,
        remote: Addr,
        token: u64,
        len: u32,
    ) -> Result<(), SendError> {
        let max = self.max_datagram(kind, remote).ok_or(SendError::Format)?;
        if self.cfg.local.matching(&remote).is_none() {
            return Err(SendError::Format);
        }
        if len > max {
            return Err(SendError::Length);
        }
        let n = self.dgrams.len();
        if self.dg_len >= n {
            return Err(SendError::WouldBlock);
        }
        let i = self.dg_head.saturating_add(self.dg_len) % n.max(1);
        if let Some(d) = self.dgrams.get_mut(i) {
            *d = Dgram {
                kind,
                remote,
                token,
                len,
            };
            self.dg_len = self.dg_len.saturating_add(1);
        }
        Ok(())
    }

    // ----- receive -----------------------------------------------------

    /// The single place where the endpoint seals and checks ICRCs.
    fn icrc(&self, op: IcrcOp<'_>) -> Result<(), Error> {
        match op {
            IcrcOp::Seal(class, pkt) => icrc::seal(self.cfg.icrc, class, pkt),
            IcrcOp::Check(class, pkt) => icrc::verify(self.cfg.icrc, class, pkt),
        }
    }

    /// A packet arrived on `port` with LPH.CFG `cfg`; `bytes` is the whole
    /// network packet (after the LPH, ICRC included). Received data goes to
    /// `sink` before this returns; then follow the call order.
    pub fn handle_packet(
        &mut self,
        now: u64,
        port: u8,
        cfg: u8,
        bytes: &[u8],
        sink: &mut impl DeliverySink,
    ) {
        // Packets to the primary CNA may arrive on any port.
        let _ = port;
        self.net.rx_packets = self.net.rx_packets.saturating_add(1);
        let Ok(class) = PacketClass::from_cfg(cfg) else {
            self.net.malformed = self.net.malformed.saturating_add(1);
            return;
        };
        if !class.has_icrc() {
            // TP bypass and network control are not endpoint traffic.
            self.net.malformed = self.net.malformed.saturating_add(1);
            return;
        }
        let Ok((net, hlen)) = NetHeader::parse(class, bytes) else {
            self.net.malformed = self.net.malformed.saturating_add(1);
            return;
        };
        if self.icrc(IcrcOp::Check(class, bytes)).is_err() {
            self.net.icrc_drops = self.net.icrc_drops.saturating_add(1);
            return;
        }
        let end = bytes.len().saturating_sub(ICRC_LEN);
        let Some(tp) = bytes.get(hlen..end) else {
            self.net.malformed = self.net.malformed.saturating_add(1);
            return;
        };
        let (from, to) = match net {
            NetHeader::Cna16 { nth, .. } => (Addr::Cna16(nth.scna), Addr::Cna16(nth.dcna)),
            NetHeader::Cna24(nth) => (Addr::Cna24(nth.scna), Addr::Cna24(nth.dcna)),
            NetHeader::Ip(IpNth {
                ip: IpHdr::V4 { src, dst, .. },
                ..
            }) => (Addr::Ipv4(src), Addr::Ipv4(dst)),
            NetHeader::Ip(IpNth {
                ip: IpHdr::V6 { src, dst, .. },
                ..
            }) => (Addr::Ipv6(src), Addr::Ipv6(dst)),
        };
        if self.cfg.local.matching(&to) != Some(to) {
            self.net.not_for_us = self.net.not_for_us.saturating_add(1);
            return;
        }
        if let NetHeader::Ip(ip) = net {
            if self.cfg.npi_mode.rx_check(ip.npi, self.cfg.npi).is_err() {
                self.net.npi_drops = self.net.npi_drops.saturating_add(1);
                return;
            }
        }
        let ctp = match net {
            NetHeader::Cna16 { nth, .. } => {
                if nth.nlp != 0 {
                    // Enumeration / management (UPIH): not ours.
                    self.net.malformed = self.net.malformed.saturating_add(1);
                    return;
                }
                true
            }
            NetHeader::Cna24(nth) => nth.nlp == NLP24_CTPH,
            NetHeader::Ip(_) => false,
        };
        if ctp {
            self.on_ctp(from, tp, sink);
        } else if tp.first() == Some(&0) {
            self.on_utp(now, from, matches!(net, NetHeader::Ip(_)), tp, sink);
        } else {
            self.on_rtp(now, from, net.cci(), tp, sink);
        }
    }

    fn on_ctp(&mut self, from: Addr, tp: &[u8], sink: &mut impl DeliverySink) {
        let Ok(h) = Ctph::parse(tp) else {
            self.net.malformed = self.net.malformed.saturating_add(1);
            return;
        };
        if h.opcode == CtpOpcode::Cnp {
            // CTP congestion control is not run by the endpoint.
            return;
        }
        let Ok(payload) = strip(tp, CTPH_LEN, h.padding) else {
            self.net.malformed = self.net.malformed.saturating_add(1);
            return;
        };
        sink.deliver(&Delivery::Datagram {
            kind: DatagramKind::Ctp,
            from,
            bytes: payload,
        });
    }

    fn on_utp(&mut self, now: u64, from: Addr, ip: bool, tp: &[u8], sink: &mut impl DeliverySink) {
        let Ok(h) = Utph::parse(tp) else {
            self.net.malformed = self.net.malformed.saturating_add(1);
            return;
        };
        let Ok(payload) = strip(tp, RTPH_LEN, h.padding) else {
            self.net.malformed = self.net.malformed.saturating_add(1);
            return;
        };
        if h.nlp == CM_UTP_NLP {
            match CmMsg::parse(payload) {
                Ok(m) => self.on_cm(now, from, &m),
                Err(_) => self.net.malformed = self.net.malformed.saturating_add(1),
            }
        } else if ip {
            sink.deliver(&Delivery::Datagram {
                kind: DatagramKind::Utp,
                from,
                bytes: payload,
            });
        } else {
            // UTP runs only over the IP format.
            self.net.malformed = self.net.malformed.saturating_add(1);
        }
    }

    fn push_stateless(&mut self, to: Addr, m: CmMsg) {
        if let Some(s) = self.stateless.iter_mut().find(|s| s.is_none()) {
            *s = Some((to, m));
        }
    }

    fn on_cm(&mut self, now: u64, from: Addr, m: &CmMsg) {
        let timing = self.cfg.cm;
        if m.kind == CmKind::Req {
            if let Some(i) = self.find(&from, m.txn) {
                let Some(c) = self.chans.get_mut(i).and_then(Option::as_mut) else {
                    return;
                };
                if c.cm.closing() {
                    // Our end of this key is being torn down and the peer
                    // opens it anew: it answered our DREQ already (its
                    // DREP may be behind this REQ, on another path) or it
                    // restarted. A REJ would fail the new channel; the
                    // REQ is ignored instead, and its retry (one CM retry
                    // interval later) finds our end gone.
                    return;
                }
                if c.cm.state() == CmState::ReqSent {
                    // Both ends opened the same channel at once. The end
                    // with the larger address stays the initiator (its REQ
                    // is answered); the other turns its half-open channel
                    // into the responder, keeping its TPN and PSN.
                    if c.local.key().0 > from.key().0 {
                        return;
                    }
                    let local = match c.cfg.params() {
                        Ok(p) => p,
                        Err(_) => return,
                    };
                    if m.params.negotiate(&local).is_none() {
                        c.fail(ErrorCause::SetupFailed);
                        return;
                    }
                    let (tpn, psn) = (c.tpn, c.cm.local_psn());
                    if let Some(s) = CmSession::accept(now, timing, m, tpn, psn, &local) {
                        c.cm = s;
                        c.after_cm();
                    }
                } else if c.cm.peer_tpn() != m.src_tpn || c.cm.peer_psn() != m.psn {
                    // A REQ for this key that is not a repeat of the one we
                    // answered: the peer lost its end (it restarted) and
                    // opens anew. Ours is dead; the new REQ is refused until
                    // the user has closed the old channel.
                    c.fail(ErrorCause::PeerReset);
                    let rej = CmMsg {
                        kind: CmKind::Rej,
                        txn: m.txn,
                        src_tpn: 0,
                        dst_tpn: m.src_tpn,
                        psn: Psn::new(0),
                        params: m.params,
                    };
                    self.push_stateless(from, rej);
                } else {
                    c.cm.handle_msg(now, m);
                    c.after_cm();
                }
                return;
            }
            self.on_incoming(now, from, m);
            return;
        }
        let known = Self::index(m.dst_tpn)
            .and_then(|i| self.chans.get_mut(i))
            .and_then(Option::as_mut)
            .filter(|c| c.remote == from && c.key == m.txn && c.cm.is_from_peer(m));
        let Some(c) = known else {
            self.net.unknown_channel = self.net.unknown_channel.saturating_add(1);
            if m.kind == CmKind::Dreq {
                // The channel is gone already: confirm again.
                self.push_stateless(
                    from,
                    CmMsg {
                        kind: CmKind::Drep,
                        src_tpn: m.dst_tpn,
                        dst_tpn: m.src_tpn,
                        ..*m
                    },
                );
            }
            return;
        };
        if m.kind == CmKind::Dreq && c.cm.state() != CmState::Closed {
            // What the peer received before it closed is acknowledged,
            // even if its last TPACKs were lost.
            if let Some(e) = c.eng.as_mut() {
                e.tx.handle_peer_closed(now, m.psn);
            }
        }
        c.cm.handle_msg(now, m);
        if m.kind == CmKind::Dreq && c.cm.state() == CmState::Closed {
            // Answer now: the channel is freed at the next poll_event.
            let drep = CmMsg {
                kind: CmKind::Drep,
                txn: c.key,
                src_tpn: c.tpn,
                dst_tpn: m.src_tpn,
                psn: c.cm.local_psn(),
                params: *c.cm.params(),
            };
            self.push_stateless(from, drep);
            return;
        }
        c.after_cm();
    }

    fn on_incoming(&mut self, now: u64, from: Addr, m: &CmMsg) {
        let reject = |params| CmMsg {
            kind: CmKind::Rej,
            txn: m.txn,
            src_tpn: 0,
            dst_tpn: m.src_tpn,
            psn: Psn::new(0),
            params,
        };
        let Some(acc) = self.cfg.accept else {
            self.push_stateless(from, reject(m.params));
            return;
        };
        let (Ok(local_params), Ok(local)) = (acc.params(), self.check_format(&from, &acc)) else {
            self.push_stateless(from, reject(m.params));
            return;
        };
        if m.params.negotiate(&local_params).is_none() {
            self.push_stateless(from, reject(local_params));
            return;
        }
        // Accepted channels share one configuration; without a key of their
        // own they would all hash onto one port and one switch path. The
        // peer's TPN tells them apart; the high bits of the key (the UDP
        // source-port range) stay as configured.
        let acc = ChannelConfig {
            lb_key: acc.lb_key ^ (m.src_tpn & 0xff) as u16,
            ..acc
        };
        let timing = self.cfg.cm;
        let r = self.alloc_channel(from, local, m.txn, acc, |tpn, psn| {
            CmSession::accept(now, timing, m, tpn, psn, &local_params).unwrap_or(
                CmSession::connect(now, timing, m.txn, tpn, psn, local_params),
            )
        });
        match r {
            Ok((i, _)) => {
                if let Some(c) = self.chans.get_mut(i).and_then(Option::as_mut) {
                    c.incoming_pending = true;
                    c.after_cm();
                }
            }
            Err(_) => self.push_stateless(from, reject(local_params)),
        }
    }

    fn on_rtp(&mut self, now: u64, from: Addr, cci: Cci, tp: &[u8], sink: &mut impl DeliverySink) {
        let Ok(h) = Rtph::parse(tp) else {
            self.net.malformed = self.net.malformed.saturating_add(1);
            return;
        };
        let Some(c) = Self::index(h.dst_tpn)
            .and_then(|i| self.chans.get_mut(i))
            .and_then(Option::as_mut)
            .filter(|c| c.eng.is_some())
        else {
            self.net.unknown_channel = self.net.unknown_channel.saturating_add(1);
            return;
        };
        // Only the channel's peer may feed it: the TPN is a small number
        // anyone on the fabric can guess, the source address and TPN are
        // what the setup agreed.
        if c.remote != from || c.cm.peer_tpn() != h.src_tpn {
            self.net.wrong_peer = self.net.wrong_peer.saturating_add(1);
            return;
        }
        if c.error.is_some() {
            return;
        }
        match h.opcode {
            TpOpcode::Data => {
                if c.cm.state() == CmState::RepSent {
                    // Data implies the RTU was lost.
                    c.cm.handle_data();
                }
                let Ok(payload) = strip(tp, RTPH_LEN, h.padding) else {
                    self.net.malformed = self.net.malformed.saturating_add(1);
                    return;
                };
                c.counters.rx_packets = c.counters.rx_packets.saturating_add(1);
                let units = u32::try_from(tp.len().saturating_add(ICRC_LEN)).unwrap_or(u32::MAX);
                let tpn = c.tpn;
                let Some(Engines { rx, reasm, .. }) = c.eng.as_mut() else {
                    return;
                };
                let mut ok = true;
                if rx.handle_data(now, &h, payload, units, cci) == RxVerdict::Deliver {
                    ok = Channel::<S>::deliver(
                        reasm,
                        &mut c.counters,
                        tpn,
                        h.tpmsn,
                        h.last,
                        payload,
                        sink,
                    );
                }
                while ok {
                    let Some(p) = rx.next_held() else { break };
                    ok = Channel::<S>::deliver(
                        reasm,
                        &mut c.counters,
                        tpn,
                        p.tpmsn,
                        p.last,
                        p.payload,
                        sink,
                    );
                }
                if !ok {
                    c.fail(ErrorCause::Protocol);
                }
            }
            TpOpcode::Ack | TpOpcode::AckCc | TpOpcode::Sack | TpOpcode::SackCc => {
                let k = &mut c.counters;
                if h.opcode.has_saetph() {
                    k.tpsack_rcvd = k.tpsack_rcvd.saturating_add(1);
                } else if h.rspst.is_psn_nak() {
                    k.tpnak_rcvd = k.tpnak_rcvd.saturating_add(1);
                } else if h.rspst == Rspst::Ack {
                    k.tpack_rcvd = k.tpack_rcvd.saturating_add(1);
                }
                let Some(e) = c.eng.as_mut() else { return };
                if e.tx.handle_response(now, tp).is_err() {
                    self.net.malformed = self.net.malformed.saturating_add(1);
                    return;
                }
                if let Some((p, t)) = c.probe {
                    if p.before(e.tx.una()) {
                        let sample = now.saturating_sub(t);
                        c.srtt = if c.srtt == 0 {
                            sample
                        } else {
                            c.srtt - c.srtt / 8 + sample / 8
                        };
                        c.probe = None;
                    }
                }
                if e.tx.is_error() {
                    c.fail(ErrorCause::PeerError);
                }
            }
            _ => self.net.malformed = self.net.malformed.saturating_add(1),
        }
    }

    /// Runs every timer that has expired at `now` (RTOs, setup retries,
    /// coalesced responses). Then follow the call order.
    pub fn handle_timeout(&mut self, now: u64) {
        for c in self.chans.iter_mut().flatten() {
            c.cm.handle_timeout(now);
            c.after_cm();
            if let Some(e) = c.eng.as_mut() {
                let before = e.tx.stats().timeouts;
                e.tx.handle_timeout(now);
                if e.tx.stats().timeouts != before {
                    c.probe = None;
                }
                if e.tx.is_error() {
                    let cause = if e.tx.stats().timeouts != before {
                        ErrorCause::RetryLimit
                    } else {
                        ErrorCause::PeerError
                    };
                    c.fail(cause);
                }
            }
        }
    }

    /// The earliest deadline at which `handle_timeout` has work.
    pub fn poll_timeout(&self) -> Option<u64> {
        let mut next: Option<u64> = None;
        let mut take = |d: Option<u64>| {
            if let Some(d) = d {
                next = Some(next.map_or(d, |n| n.min(d)));
            }
        };
        for c in self.chans.iter().flatten() {
            take(c.cm.poll_timeout());
            if let Some(e) = &c.eng {
                if c.error.is_none() {
                    take(e.tx.poll_timeout());
                    take(e.rx.poll_timeout());
                }
            }
        }
        next
    }

    /// The next event; call until `None` after every input (see the call
    /// order on [`Endpoint`]).
    pub fn poll_event(&mut self) -> Option<Event> {
        if self.dg_sent > 0 {
            let d = self.dgrams.get(self.dg_head).copied().unwrap_or_default();
            self.dg_head = self.dg_head.saturating_add(1) % self.dgrams.len().max(1);
            self.dg_sent = self.dg_sent.saturating_sub(1);
            self.dg_len = self.dg_len.saturating_sub(1);
            return Some(Event::DatagramSent { token: d.token });
        }
        let n = self.chans.len();
        for k in 0..n {
            let i = self.ev_cursor.saturating_add(k) % n;
            if let Some(ev) = self.channel_event(i) {
                self.ev_cursor = i;
                return Some(ev);
            }
        }
        None
    }

    fn channel_event(&mut self, i: usize) -> Option<Event> {
        let slot = self.chans.get_mut(i)?;
        let c = slot.as_mut()?;
        let tpn = c.tpn;
        if c.incoming_pending {
            c.incoming_pending = false;
            return Some(Event::Incoming {
                tpn,
                remote: c.remote,
                key: c.key,
            });
        }
        if let (Some(cause), false) = (c.error, c.error_reported) {
            c.error_reported = true;
            c.announced = ChannelState::Err;
            return Some(Event::ChannelError { tpn, cause });
        }
        let st = c.state();
        if st != c.announced {
            c.announced = st;
            return Some(Event::StateChanged { tpn, state: st });
        }
        if let Some(e) = c.eng.as_mut() {
            while let Some(ev) = e.tx.poll_event() {
                if let TxEvent::MessageAcked { token, .. } = ev {
                    c.counters.messages_acked = c.counters.messages_acked.saturating_add(1);
                    return Some(Event::MessageAcked { tpn, token });
                }
            }
        }
        if c.writable_pending {
            c.writable_pending = false;
            return Some(Event::Writable { tpn });
        }
        if c.cm.state() == CmState::Closed {
            let group = c.group;
            // Dropping the channel frees its buffers; the TPN is free.
            *slot = None;
            if let Some(g) = group.and_then(|g| self.groups.get_mut(usize::from(g))) {
                *g = None;
            }
            for c in self.chans.iter_mut().flatten() {
                if c.group.is_some() && c.group == group {
                    c.group = None;
                }
            }
            return Some(Event::Closed { tpn });
        }
        None
    }

    // ----- transmit ----------------------------------------------------

    /// Writes the next packet into `out` (at least `max_packet` bytes) and
    /// says where it goes, or `None` when nothing can be sent now. Message
    /// bytes are read from `src`.
    pub fn poll_transmit(
        &mut self,
        now: u64,
        out: &mut [u8],
        src: &mut impl MessageSource,
    ) -> Result<Option<Transmit>, Error> {
        if out.len() < self.cfg.max_packet as usize {
            return Err(Error::NoSpace);
        }
        while let Some(i) = self.stateless.iter().position(Option::is_some) {
            let Some((to, m)) = self.stateless.get_mut(i).and_then(Option::take) else {
                break;
            };
            if let Some(t) = self.cm_packet(to, 0, 0, &m, out)? {
                return Ok(Some(t));
            }
        }
        let n = self.chans.len();
        for k in 0..n {
            let i = self.tx_cursor.saturating_add(k) % n;
            if let Some(t) = self.transmit_channel(i, now, out, src)? {
                self.tx_cursor = i.saturating_add(1) % n;
                return Ok(Some(t));
            }
        }
        self.transmit_datagram(out, src)
    }

    /// Routes a packet: the port, or `None` (counted) when no port on a
    /// route to `remote` is up.
    fn route(&mut self, o: &Out) -> Option<u8> {
        let (dst, width) = o.remote.key();
        let table = RouteTable::new(self.routes.get(..self.n_routes).unwrap_or(&[]));
        let port = table.lookup(dst, width).and_then(|e| {
            let spray = o.datagram
                && self
                    .route_index(e.prefix, e.prefix_len, e.width)
                    .and_then(|i| self.route_spray.get(i))
                    .copied()
                    .unwrap_or(false);
            let up = RouteEntry {
                ports: e.ports & self.ports_up,
                shortest: e.shortest & self.ports_up,
                ..*e
            };
            let key = FlowKey {
                src: o.local.key().0,
                dst,
                lb: o.lb,
                sl: o.sl,
            };
            let rt = RoutingType {
                per_packet: o.per_packet || spray,
                shortest_only: false,
            };
            select_port(&up, rt, key.hash(self.cfg.hash_seed), o.spray)
        });
        if port.is_none() {
            self.net.no_route_drops = self.net.no_route_drops.saturating_add(1);
        }
        port
    }

    /// Writes the network header in front of the transport part
    /// (`tp_len` bytes at `out[o.remote.net_header_len()..]`), seals the
    /// ICRC and routes. `None` if the packet cannot leave.
    fn finish(
        &mut self,
        o: &Out,
        out: &mut [u8],
        tp_len: usize,
        kind: TransmitKind,
    ) -> Result<Option<Transmit>, Error> {
        let net = match (o.local, o.remote) {
            (Addr::Cna16(s), Addr::Cna16(d)) => NetHeader::Cna16 {
                nth: Nth16 {
                    scna: s,
                    dcna: d,
                    cci: o.cci,
                    lbf: (o.lb & 0xff) as u8,
                    sl: o.sl,
                    mgmt: false,
                    nlp: 0,
                },
                coherent: false,
            },
            (Addr::Cna24(s), Addr::Cna24(d)) => NetHeader::Cna24(Nth24 {
                scna: s,
                dcna: d,
                cci: o.cci,
                lbf: (o.lb & 0xff) as u8,
                sl: o.sl,
                nlp: if o.upper == Upper::Ctph {
                    NLP24_CTPH
                } else {
                    NLP24_RTPH
                },
            }),
            (Addr::Ipv4(s), Addr::Ipv4(d)) => NetHeader::Ip(IpNth {
                cci: o.cci,
                npi: self.tx_npi()?,
                ip: IpHdr::V4 {
                    dscp: o.sl,
                    ecn: 0,
                    ident: 0,
                    ttl: 64,
                    src: s,
                    dst: d,
                },
                sport: o.lb,
            }),
            (Addr::Ipv6(s), Addr::Ipv6(d)) => NetHeader::Ip(IpNth {
                cci: o.cci,
                npi: self.tx_npi()?,
                ip: IpHdr::V6 {
                    traffic_class: o.sl << 2,
                    flow_label: 0,
                    hop_limit: 64,
                    src: s,
                    dst: d,
                },
                sport: o.lb,
            }),
            _ => return Err(Error::Invalid("address format")),
        };
        let hlen = net.write(out, tp_len)?;
        let total = hlen
            .checked_add(tp_len)
            .and_then(|n| n.checked_add(ICRC_LEN))
            .ok_or(Error::NoSpace)?;
        let class = net.class();
        self.icrc(IcrcOp::Seal(
            class,
            out.get_mut(..total).ok_or(Error::NoSpace)?,
        ))?;
        let Some(port) = self.route(o) else {
            return Ok(None);
        };
        self.net.tx_packets = self.net.tx_packets.saturating_add(1);
        Ok(Some(Transmit {
            port,
            meta: LinkMeta {
                class,
                rt: RoutingType {
                    per_packet: o.per_packet,
                    shortest_only: false,
                },
            },
            sl: o.sl,
            len: total,
            kind,
        }))
    }

    fn tx_npi(&self) -> Result<super::super::net::npi::Npi, Error> {
        self.cfg
            .npi_mode
            .tx_npi(self.cfg.npi)
            .map_err(|_| Error::Invalid("NPI"))
    }

    fn cm_packet(
        &mut self,
        to: Addr,
        lb: u16,
        sl: u8,
        m: &CmMsg,
        out: &mut [u8],
    ) -> Result<Option<Transmit>, Error> {
        let Some(local) = self.cfg.local.matching(&to) else {
            return Ok(None);
        };
        let mut msg = [0u8; CM_MSG_LEN];
        m.write(&mut msg)?;
        self.cm_bytes(local, to, lb, sl, &msg, out)
    }

    fn cm_bytes(
        &mut self,
        local: Addr,
        to: Addr,
        lb: u16,
        sl: u8,
        msg: &[u8],
        out: &mut [u8],
    ) -> Result<Option<Transmit>, Error> {
        let hlen = to.net_header_len();
        let tp = out.get_mut(hlen..).ok_or(Error::NoSpace)?;
        let padding = padding_for(RTPH_LEN.saturating_add(msg.len()));
        let h = Utph {
            padding,
            nlp: CM_UTP_NLP,
        };
        let n = h.write(tp)?;
        let end = n.saturating_add(msg.len());
        tp.get_mut(n..end)
            .ok_or(Error::NoSpace)?
            .copy_from_slice(msg);
        let tp_len = end.saturating_add(usize::from(padding));
        tp.get_mut(end..tp_len).ok_or(Error::NoSpace)?.fill(0);
        let o = Out {
            local,
            remote: to,
            cci: Cci::DEFAULT,
            lb,
            sl,
            per_packet: false,
            datagram: false,
            spray: 0,
            upper: Upper::Rtph,
        };
        self.finish(&o, out, tp_len, TransmitKind::Setup)
    }

    /// The next packet of channel `i`: a CM message, a response, or data.
    fn transmit_channel(
        &mut self,
        i: usize,
        now: u64,
        out: &mut [u8],
        src: &mut impl MessageSource,
    ) -> Result<Option<Transmit>, Error> {
        loop {
            let Some(c) = self.chans.get_mut(i).and_then(Option::as_mut) else {
                return Ok(None);
            };
            let (local, remote, lb_key, sl, tpn) =
                (c.local, c.remote, c.cfg.lb_key, c.cfg.sl, c.tpn);
            let hlen = remote.net_header_len();
            let mut o = Out {
                local,
                remote,
                cci: Cci::DEFAULT,
                lb: lb_key,
                sl,
                per_packet: false,
                datagram: false,
                spray: 0,
                upper: Upper::Rtph,
            };
            // 1. Connection management.
            let mut msg = [0u8; CM_MSG_LEN];
            if let Some(n) = c.cm.poll_transmit(now, &mut msg)? {
                let m = msg.get(..n).unwrap_or(&[]);
                match self.cm_bytes(local, remote, lb_key, sl, m, out)? {
                    Some(t) => return Ok(Some(t)),
                    None => continue,
                }
            }
            let st = c.state();
            let Some(e) = c.eng.as_mut() else {
                return Ok(None);
            };
            let cm = c.cm.state();
            if st == ChannelState::Err || !matches!(cm, CmState::RepSent | CmState::Established) {
                return Ok(None);
            }
            let tp = out.get_mut(hlen..).ok_or(Error::NoSpace)?;
            // 2. Responses of our receiver.
            if let Some(n) = e.rx.poll_transmit(now, tp)? {
                match self.finish(&o, out, n, TransmitKind::Response { tpn })? {
                    Some(t) => return Ok(Some(t)),
                    None => continue,
                }
            }
            if st != ChannelState::Rts || cm != CmState::Established {
                return Ok(None);
            }
            // 3. Data of our sender, posting the next queued message first.
            if e.tx.can_post() && c.q_len > 0 {
                let q = c.queue.get(c.q_head).copied().unwrap_or_default();
                if e.tx.post(q.token, q.len).is_ok() {
                    c.q_head = c.q_head.saturating_add(1) % c.queue.len().max(1);
                    c.q_len = c.q_len.saturating_sub(1);
                    if c.blocked {
                        c.blocked = false;
                        c.writable_pending = true;
                    }
                }
            }
            let Some(pkt) = e.tx.poll_transmit(now, tp)? else {
                return Ok(None);
            };
            let start = pkt.hdr_len;
            let len = usize::try_from(pkt.len).map_err(|_| Error::NoSpace)?;
            let pend = start.checked_add(len).ok_or(Error::NoSpace)?;
            src.read(
                MsgRef::Channel {
                    tpn,
                    token: pkt.token,
                },
                pkt.offset,
                tp.get_mut(start..pend).ok_or(Error::NoSpace)?,
            );
            let tp_len = pend.saturating_add(usize::from(pkt.padding));
            tp.get_mut(pend..tp_len).ok_or(Error::NoSpace)?.fill(0);
            let k = &mut c.counters;
            k.tx_packets = k.tx_packets.saturating_add(1);
            k.tx_bytes = k.tx_bytes.saturating_add(u64::from(pkt.len));
            if pkt.retransmission {
                c.probe = None;
            } else if c.probe.is_none() {
                c.probe = Some((pkt.psn, now));
            }
            o.cci = pkt.cci;
            if let LoadBalance::PerPacket { range_log2 } = c.cfg.lb {
                c.spray = c.spray.wrapping_add(1);
                o.per_packet = true;
                o.spray = c.spray;
                o.lb = match remote {
                    Addr::Ipv4(_) | Addr::Ipv6(_) => spray_sport(lb_key, range_log2, c.spray),
                    _ => {
                        let mask = 1u32.checked_shl(u32::from(range_log2)).map_or(0, |m| m - 1);
                        lb_key.wrapping_add((c.spray & mask) as u16) & 0xff
                    }
                };
            }
            let kind = TransmitKind::Data {
                tpn,
                psn: pkt.psn.value(),
                retransmission: pkt.retransmission,
            };
            match self.finish(&o, out, tp_len, kind)? {
                Some(t) => return Ok(Some(t)),
                None => continue,
            }
        }
    }

    fn transmit_datagram(
        &mut self,
        out: &mut [u8],
        src: &mut impl MessageSource,
    ) -> Result<Option<Transmit>, Error> {
        while self.dg_sent < self.dg_len {
            let n = self.dgrams.len().max(1);
            let i = self.dg_head.saturating_add(self.dg_sent) % n;
            let d = self.dgrams.get(i).copied().unwrap_or_default();
            // Sent or not, its turn is over (a datagram without a route is
            // lost, as UTP may be).
            self.dg_sent = self.dg_sent.saturating_add(1);
            let Some(local) = self.cfg.local.matching(&d.remote) else {
                continue;
            };
            let hlen = d.remote.net_header_len();
            let tp = out.get_mut(hlen..).ok_or(Error::NoSpace)?;
            let len = usize::try_from(d.len).map_err(|_| Error::NoSpace)?;
            let (hdr, upper) = match d.kind {
                DatagramKind::Utp => {
                    let padding = padding_for(RTPH_LEN.saturating_add(len));
                    (Utph { padding, nlp: 0 }.write(tp)?, Upper::Rtph)
                }
                DatagramKind::Ctp => {
                    let padding = padding_for(CTPH_LEN.saturating_add(len));
                    let h = Ctph {
                        opcode: CtpOpcode::Data,
                        padding,
                        nlp: 0,
                    };
                    (h.write(tp)?, Upper::Ctph)
                }
            };
            let end = hdr.checked_add(len).ok_or(Error::NoSpace)?;
            src.read(
                MsgRef::Datagram { token: d.token },
                0,
                tp.get_mut(hdr..end).ok_or(Error::NoSpace)?,
            );
            let tp_len = end.saturating_add(usize::from(padding_for(end)));
            tp.get_mut(end..tp_len).ok_or(Error::NoSpace)?.fill(0);
            self.dg_spray = self.dg_spray.wrapping_add(1);
            let o = Out {
                local,
                remote: d.remote,
                cci: Cci::DEFAULT,
                lb: 49_152,
                sl: 0,
                per_packet: false,
                datagram: true,
                spray: self.dg_spray,
                upper,
            };
            if let Some(t) = self.finish(&o, out, tp_len, TransmitKind::Datagram)? {
                return Ok(Some(t));
            }
        }
        Ok(None)
    }
}
