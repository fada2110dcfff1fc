// SPDX-License-Identifier: GPL-2.0
//! The host endpoint target: whole received packets into an endpoint with
//! live channels.

use std::collections::{HashMap, HashSet, VecDeque};

use ub_host::VecStorage;
use ub_proto::crc::crc32_le_portable;
use ub_proto::host::{
    Addr, ChannelConfig, DatagramKind, Delivery, DeliverySink, Endpoint, EndpointConfig, Event,
    LocalAddrs, MessageSource, MsgRef, NetCounters, Random, RtoConfig, TransmitKind, CM_UTP_NLP,
};
use ub_proto::net::cci::Cci;
use ub_proto::net::icrc;
use ub_proto::net::npi::{Npi, NpiMode};
use ub_proto::net::nth::{IpHdr, IpNth, NetHeader, Nth16, Nth24, ICRC_LEN, NLP24_CTPH, NLP24_RTPH};
use ub_proto::net::route::RouteEntry;
use ub_proto::net::PacketClass;
use ub_proto::transport::cc::{CcAlgorithm, CcConfig};
use ub_proto::transport::cm::{CmTiming, CM_MSG_LEN};
use ub_proto::transport::hdr::{CtpOpcode, Ctph, Rtph, TpOpcode, Utph, RTPH_LEN};
use ub_proto::transport::RetransmitMode;

use crate::input::{Input, Output};

/// SplitMix64: the endpoints' initial PSNs, the same on every run.
struct Rng(u64);

impl Random for Rng {
    fn random_u32(&mut self) -> u32 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        (z ^ (z >> 31)) as u32
    }
}

/// Message bytes are a pattern of the token; nothing is stored.
struct Pattern;

impl MessageSource for Pattern {
    fn read(&mut self, msg: MsgRef, offset: u32, out: &mut [u8]) {
        let token = match msg {
            MsgRef::Channel { token, .. } | MsgRef::Datagram { token } => token,
        };
        for (i, b) in out.iter_mut().enumerate() {
            *b = (token as u32)
                .wrapping_mul(31)
                .wrapping_add(offset + i as u32) as u8;
        }
    }
}

type Ep = Endpoint<VecStorage, Rng>;

/// Checks the delivery contract (`host::Delivery`): a channel's message
/// pieces are contiguous from offset 0, the last one gives the total
/// length; nothing is delivered on a channel whose `ChannelError` was
/// taken. `ub_host::Collector` checks the first two but keys its partial
/// messages by TPN for ever, and a TPN is reused once its channel is
/// closed (a message half received when it closed is abandoned), so the
/// target keeps its own.
#[derive(Default)]
struct ContractSink {
    /// Per TPN: bytes of the message being received.
    partial: HashMap<u32, u32>,
    /// TPNs whose `ChannelError` was taken, until their `Closed`.
    failed: HashSet<u32>,
}

impl ContractSink {
    fn on_event(&mut self, ev: &Event) {
        match *ev {
            Event::ChannelError { tpn, .. } => {
                self.failed.insert(tpn);
            }
            Event::Closed { tpn } => {
                self.failed.remove(&tpn);
                self.partial.remove(&tpn);
            }
            _ => {}
        }
    }
}

impl DeliverySink for ContractSink {
    fn deliver(&mut self, d: &Delivery<'_>) {
        let Delivery::Message {
            tpn,
            offset,
            bytes,
            complete,
            ..
        } = *d
        else {
            return;
        };
        assert!(
            !self.failed.contains(&tpn),
            "delivery on failed channel {tpn}"
        );
        let got = self.partial.entry(tpn).or_default();
        assert_eq!(offset, *got, "tpn {tpn}: a piece at the wrong offset");
        *got += bytes.len() as u32;
        if let Some(len) = complete {
            assert_eq!(len, *got, "tpn {tpn}: total length");
            *got = 0;
        }
    }
}

/// `UB_FUZZ_TRACE=1` prints every operation, packet and event (for
/// reading a crash: `cargo test -p ub-fuzz` on the reproducer).
fn tracing() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("UB_FUZZ_TRACE").is_some())
}

const MAX_PACKET: usize = 1500;
const WINDOW: u32 = 16;

fn addrs(side: usize) -> LocalAddrs {
    let s = side as u8 + 1;
    LocalAddrs {
        cna16: Some(0x100 * u16::from(s)),
        cna24: Some(0x1_0000 * u32::from(s)),
        ipv4: Some([10, 0, 0, s]),
        ipv6: Some([0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, s]),
        eid: u128::from(s),
    }
}

fn chan_cfg(mode: RetransmitMode, fast: bool, ldcp: bool) -> ChannelConfig {
    let mut c = ChannelConfig::default_rtp();
    c.mode = mode;
    c.fast_retransmit = fast;
    c.ooo_window = 128;
    c.rx_slots = if mode == RetransmitMode::GoBackN && fast {
        0
    } else {
        8
    };
    c.send_window = WINDOW;
    c.send_queue = 4;
    c.mtu = 512;
    c.max_message = 1 << 16;
    c.rto = RtoConfig::Dynamic { base_us: 50, n: 1 };
    c.retry_limit = 6;
    c.sack_threshold = 2;
    if ldcp {
        c.cc = CcConfig {
            alg: CcAlgorithm::Ldcp,
            initial_cw: 8192,
            max_cw: 1 << 20,
            mtu: 512,
            path_wide_permille: 0,
        };
    }
    c
}

fn endpoint(side: usize) -> Ep {
    let cfg = EndpointConfig {
        local: addrs(side),
        npi_mode: NpiMode::Strict(Npi::DEFAULT),
        npi: Npi::DEFAULT,
        ports: 1,
        max_packet: MAX_PACKET as u32,
        max_channels: 8,
        max_routes: 4,
        max_groups: 2,
        datagram_queue: 4,
        cm: CmTiming {
            retry_ns: 200_000,
            max_tries: 5,
        },
        accept: Some(chan_cfg(RetransmitMode::Selective, true, true)),
        hash_seed: side as u64,
        icrc: crc32_le_portable,
    };
    let ep = Ep::new(cfg, VecStorage, Rng(side as u64 + 7));
    let Ok(mut ep) = ep else {
        panic!("endpoint refused: {:?}", ep.err());
    };
    for width in [16u8, 24, 32, 128] {
        let r = ep.add_route(RouteEntry {
            prefix: 0,
            prefix_len: 0,
            width,
            ports: 1,
            shortest: 0,
        });
        assert!(r.is_ok());
    }
    ep
}

/// The channels the setup opens from side 0: (format, configuration).
fn channel_plan() -> [(Addr, ChannelConfig); 3] {
    let b = addrs(1);
    [
        (
            Addr::Ipv4(b.ipv4.unwrap_or_default()),
            chan_cfg(RetransmitMode::Selective, true, false),
        ),
        (
            Addr::Cna24(b.cna24.unwrap_or_default()),
            chan_cfg(RetransmitMode::GoBackN, true, false),
        ),
        (
            Addr::Ipv6(b.ipv6.unwrap_or_default()),
            chan_cfg(RetransmitMode::Selective, false, true),
        ),
    ]
}

/// A live channel: its TPN at each side and the key it was opened with.
#[derive(Clone, Copy, Debug)]
struct Chan {
    tpn: [u32; 2],
    key: u32,
    remote_of_0: Addr,
}

/// A packet on the way: destination side, LPH.CFG, bytes.
type Wire = (usize, u8, Vec<u8>);

/// Two endpoints, the network between them, and what the target knows
/// they must have done.
struct World {
    eps: [Ep; 2],
    sinks: [ContractSink; 2],
    now: u64,
    wire: VecDeque<Wire>,
    /// Every packet the endpoints sent during the setup (for replay).
    trace: Vec<Wire>,
    record: bool,
    chans: Vec<Chan>,
    /// Packets handed to each endpoint's `handle_packet`.
    rx: [u64; 2],
    /// Tokens each side sent and has not seen acknowledged.
    unacked: [HashSet<u64>; 2],
    next_token: u64,
    buf: Vec<u8>,
}

fn drops(n: &NetCounters) -> u64 {
    n.icrc_drops + n.npi_drops + n.malformed + n.not_for_us + n.unknown_channel + n.wrong_peer
}

impl World {
    /// Two endpoints with three channels (IPv4 selective, 24-bit CNA
    /// Go-Back-N, IPv6 selective with LDCP), messages exchanged both
    /// ways and a UTP and a CTP datagram delivered.
    fn new(record: bool) -> Self {
        let mut w = Self {
            eps: [endpoint(0), endpoint(1)],
            sinks: [ContractSink::default(), ContractSink::default()],
            now: 0,
            wire: VecDeque::new(),
            trace: Vec::new(),
            record,
            chans: Vec::new(),
            rx: [0; 2],
            unacked: [HashSet::new(), HashSet::new()],
            next_token: 1,
            buf: vec![0; MAX_PACKET],
        };
        for (i, (remote, cfg)) in channel_plan().into_iter().enumerate() {
            let key = 100 + i as u32;
            let t = w.eps[0].connect(w.now, remote, key, cfg);
            let Ok(tpn) = t else {
                panic!("connect {remote:?}: {t:?}");
            };
            w.chans.push(Chan {
                tpn: [tpn, 0],
                key,
                remote_of_0: remote,
            });
        }
        w.run(2_000_000_000, 10_000);
        for c in 0..w.chans.len() {
            let ch = w.chans[c];
            assert!(ch.tpn[1] != 0, "channel {c} was never accepted");
            for (side, len) in [(0, 700), (0, 90), (1, 1100)] {
                w.send(side, c, len);
            }
        }
        let b = addrs(1);
        for (kind, to) in [
            (DatagramKind::Utp, Addr::Ipv4(b.ipv4.unwrap_or_default())),
            (DatagramKind::Ctp, Addr::Cna24(b.cna24.unwrap_or_default())),
            (DatagramKind::Ctp, Addr::Cna16(b.cna16.unwrap_or_default())),
        ] {
            let token = w.next_token;
            w.next_token += 1;
            assert!(w.eps[0].send_datagram(kind, to, token, 33).is_ok());
        }
        w.run(w.now + 2_000_000_000, 10_000);
        assert!(
            w.unacked.iter().all(HashSet::is_empty),
            "the setup's messages were not all acknowledged"
        );
        w
    }

    fn send(&mut self, side: usize, c: usize, len: u32) {
        let token = self.next_token;
        self.next_token += 1;
        if self.eps[side]
            .send(self.chans[c].tpn[side], token, len)
            .is_ok()
        {
            self.unacked[side].insert(token);
        }
        self.flush(side);
    }

    /// Steps 1 and 2 of the call order for one side, checking every
    /// event and every packet.
    fn flush(&mut self, s: usize) {
        while let Some(ev) = self.eps[s].poll_event() {
            if tracing() && !self.record {
                eprintln!("  side {s} event {ev:?}");
            }
            self.sinks[s].on_event(&ev);
            match ev {
                Event::MessageAcked { token, .. } => {
                    assert!(
                        self.unacked[s].remove(&token),
                        "token {token} acked twice or never sent"
                    );
                }
                Event::Closed { tpn } => {
                    assert_eq!(
                        self.eps[s].state(tpn),
                        None,
                        "closed channel {tpn} still there"
                    );
                }
                Event::Incoming { tpn, key, .. } if s == 1 => {
                    if let Some(c) = self
                        .chans
                        .iter_mut()
                        .find(|c| c.key == key && c.tpn[1] == 0)
                    {
                        c.tpn[1] = tpn;
                    }
                }
                _ => {}
            }
        }
        for _ in 0..256 {
            let t = self.eps[s].poll_transmit(self.now, &mut self.buf, &mut Pattern);
            let t = match t {
                Ok(Some(t)) => t,
                Ok(None) => break,
                Err(e) => panic!("poll_transmit: {e:?}"),
            };
            assert!(t.len <= MAX_PACKET, "{t:?}");
            let pkt = &self.buf[..t.len];
            check_sent(s, t.meta.class, pkt, &t.kind);
            let w = (1 - s, t.meta.class.cfg(), pkt.to_vec());
            if self.record {
                self.trace.push(w.clone());
            }
            self.wire.push_back(w);
        }
    }

    /// Hands a packet to side `s` and checks the counters it moved.
    fn receive(&mut self, s: usize, cfg: u8, bytes: &[u8]) {
        if tracing() && !self.record {
            let tp = NetHeader::parse(
                PacketClass::from_cfg(cfg).unwrap_or(PacketClass::Cna24),
                bytes,
            )
            .ok()
            .and_then(|(_, n)| Rtph::parse(bytes.get(n..)?).ok());
            eprintln!("  to side {s}: cfg {cfg}, {} bytes, {tp:?}", bytes.len());
        }
        let before = *self.eps[s].net_counters();
        self.eps[s].handle_packet(self.now, 0, cfg, bytes, &mut self.sinks[s]);
        self.rx[s] += 1;
        let after = *self.eps[s].net_counters();
        assert_eq!(after.rx_packets - before.rx_packets, 1);
        assert!(
            drops(&after) - drops(&before) <= 1,
            "one packet counted as several drops: {before:?} -> {after:?}"
        );
        self.flush(s);
    }

    /// Delivers what is on the wire and serves timers, until `until` or
    /// `rounds` deliveries.
    fn run(&mut self, until: u64, rounds: usize) {
        self.flush(0);
        self.flush(1);
        for _ in 0..rounds {
            if let Some((to, cfg, bytes)) = self.wire.pop_front() {
                self.receive(to, cfg, &bytes);
                continue;
            }
            let next = self.eps.iter().filter_map(Endpoint::poll_timeout).min();
            let Some(next) = next.filter(|&n| n <= until) else {
                return;
            };
            self.now = self.now.max(next);
            for s in 0..2 {
                if self.eps[s].poll_timeout().is_some_and(|d| d <= self.now) {
                    self.eps[s].handle_timeout(self.now);
                }
                self.flush(s);
            }
        }
    }

    fn check(&self) {
        for s in 0..2 {
            let n = self.eps[s].net_counters();
            assert_eq!(n.rx_packets, self.rx[s]);
            assert!(drops(n) <= n.rx_packets, "{n:?}");
            for tpn in 1..=8 {
                let Some(k) = self.eps[s].counters(tpn) else {
                    continue;
                };
                assert!(k.rx_duplicates + k.rx_invalid_psn <= k.rx_packets, "{k:?}");
                assert!(k.messages_delivered <= k.rx_packets, "{k:?}");
                assert!(
                    k.outstanding <= k.max_outstanding && k.max_outstanding <= WINDOW,
                    "{k:?}"
                );
                assert!(
                    k.rtx_fast + k.rtx_rto + k.rtx_mark_psn + k.rtx_go_back_n <= k.tx_packets,
                    "{k:?}"
                );
            }
        }
    }

    /// The network header of a packet from side `1 - s` to side `s` in
    /// the format of `remote_of_0`.
    fn header(&self, s: usize, fmt: Addr, transport: Transport, lb: u8) -> NetHeader {
        let (from, to) = (addrs(1 - s), addrs(s));
        let cci = Cci::DEFAULT;
        match fmt {
            Addr::Cna16(_) => NetHeader::Cna16 {
                nth: Nth16 {
                    scna: from.cna16.unwrap_or_default(),
                    dcna: to.cna16.unwrap_or_default(),
                    cci,
                    lbf: lb,
                    sl: 0,
                    mgmt: false,
                    nlp: 0,
                },
                coherent: false,
            },
            Addr::Cna24(_) => NetHeader::Cna24(Nth24 {
                scna: from.cna24.unwrap_or_default(),
                dcna: to.cna24.unwrap_or_default(),
                cci,
                lbf: lb,
                sl: 0,
                nlp: if transport == Transport::Ctp {
                    NLP24_CTPH
                } else {
                    NLP24_RTPH
                },
            }),
            Addr::Ipv4(_) => NetHeader::Ip(IpNth {
                cci,
                npi: Npi::DEFAULT,
                ip: IpHdr::V4 {
                    dscp: 0,
                    ecn: 0,
                    ident: 0,
                    ttl: 64,
                    src: from.ipv4.unwrap_or_default(),
                    dst: to.ipv4.unwrap_or_default(),
                },
                sport: 49_152 + u16::from(lb),
            }),
            Addr::Ipv6(_) => NetHeader::Ip(IpNth {
                cci,
                npi: Npi::DEFAULT,
                ip: IpHdr::V6 {
                    traffic_class: 0,
                    flow_label: 0,
                    hop_limit: 64,
                    src: from.ipv6.unwrap_or_default(),
                    dst: to.ipv6.unwrap_or_default(),
                },
                sport: 49_152 + u16::from(lb),
            }),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Transport {
    Rtp,
    Ctp,
}

/// Every packet an endpoint sends must be one a receiver accepts: a
/// header that parses, a valid ICRC, a transport header of its kind.
fn check_sent(s: usize, class: PacketClass, pkt: &[u8], kind: &TransmitKind) {
    let parsed = NetHeader::parse(class, pkt);
    let Ok((h, hlen)) = parsed else {
        panic!("side {s} sent an unparsable packet ({class:?}): {parsed:?}");
    };
    assert_eq!(
        icrc::verify(crc32_le_portable, class, pkt),
        Ok(()),
        "side {s} sent a bad ICRC"
    );
    let local = addrs(s);
    let from = match h {
        NetHeader::Cna16 { nth, .. } => Addr::Cna16(nth.scna),
        NetHeader::Cna24(nth) => Addr::Cna24(nth.scna),
        NetHeader::Ip(IpNth {
            ip: IpHdr::V4 { src, .. },
            ..
        }) => Addr::Ipv4(src),
        NetHeader::Ip(IpNth {
            ip: IpHdr::V6 { src, .. },
            ..
        }) => Addr::Ipv6(src),
    };
    assert_eq!(
        local.matching(&from),
        Some(from),
        "side {s} sent from {from:?}"
    );
    let tp = &pkt[hlen..pkt.len() - ICRC_LEN];
    match *kind {
        TransmitKind::Data { psn, .. } => {
            let r = Rtph::parse(tp);
            assert!(
                matches!(r, Ok(h) if h.opcode == TpOpcode::Data && h.psn.value() == psn),
                "{kind:?}: {r:?}"
            );
        }
        TransmitKind::Response { .. } => {
            let r = Rtph::parse(tp);
            assert!(
                matches!(r, Ok(h) if h.opcode != TpOpcode::Data && h.opcode != TpOpcode::Utp),
                "{kind:?}: {r:?}"
            );
        }
        TransmitKind::Setup => {
            let u = Utph::parse(tp);
            assert!(matches!(u, Ok(u) if u.nlp == CM_UTP_NLP), "{u:?}");
        }
        TransmitKind::Datagram => {}
    }
}

/// Operations of [`host_packet`]'s input.
mod op {
    pub(super) const RAW: u8 = 0;
    pub(super) const RTP: u8 = 1;
    pub(super) const CM: u8 = 2;
    pub(super) const DATAGRAM: u8 = 3;
    pub(super) const REPLAY: u8 = 4;
    pub(super) const TIME: u8 = 5;
    pub(super) const RUN: u8 = 6;
    pub(super) const USER: u8 = 7;
    pub(super) const COUNT: u8 = 8;
}

thread_local! {
    /// The packets of the setup, recorded once per thread (the setup is
    /// deterministic, so they are what every world exchanged).
    static TRACE: Vec<Wire> = World::new(true).trace;
}

/// Whole received packets into the host endpoint (`host::Endpoint`) with
/// live channels.
///
/// The setup (the same for every input) builds two endpoints, opens three
/// RTP channels from one to the other (IPv4 selective with fast
/// retransmission, 24-bit CNA Go-Back-N, IPv6 selective with LDCP
/// congestion control), exchanges messages both ways and delivers UTP and
/// CTP datagrams. Then the input's operations run: a raw packet of any
/// LPH.CFG (its ICRC optionally made valid); an RTP packet on a live
/// channel (header from the peer's address, the input's transport bytes
/// with, by flags, the channel's TPNs, a PSN near the expected one and a
/// valid opcode); a CM message for a live channel; a CTP or UTP datagram;
/// a packet of the setup replayed with bytes changed; time passing; the
/// real network running; user calls (send, close, suspend, resume,
/// connect). At the end the network runs until it is quiet.
///
/// Asserts: no panic; each `handle_packet` counts one received packet
/// and at most one drop, and drops never exceed packets; the delivery
/// contract holds (pieces contiguous from offset 0, the total length on
/// the last, nothing after a channel's `ChannelError`); every packet an endpoint sends
/// parses, carries a valid ICRC, comes from its own address and has the
/// transport header of its kind; a message is acknowledged at most once
/// and only if it was sent; a channel is gone once its `Closed` event is
/// taken; per channel, duplicates and invalid PSNs never exceed the
/// packets received, deliveries never exceed packets, outstanding packets
/// stay within the window, retransmissions never exceed transmissions.
pub fn host_packet(data: &[u8]) {
    let mut inp = Input::new(data);
    let mut w = World::new(false);
    let mut steps = 0;
    while !inp.is_empty() && steps < 64 {
        steps += 1;
        let sel = inp.u8();
        let s = usize::from(sel >> 7);
        if tracing() {
            eprintln!("op {} on side {s}", sel % op::COUNT);
        }
        match sel % op::COUNT {
            op::RAW => {
                let cfg = inp.u8();
                let n = usize::from(inp.u16()) % (MAX_PACKET + 64);
                let mut bytes = inp.bytes(n).to_vec();
                if cfg & 0x80 != 0 {
                    if let Ok(class) = PacketClass::from_cfg(cfg & 0xf) {
                        let _ = icrc::seal(crc32_le_portable, class, &mut bytes);
                    }
                }
                w.receive(s, cfg & 0xf, &bytes);
            }
            op::RTP => {
                let c = w.chans[usize::from(inp.u8()) % w.chans.len()];
                let flags = inp.u8();
                let delta = u32::from(inp.u8());
                let n = usize::from(inp.u16()) % 1024;
                let mut tp = inp.bytes(n).to_vec();
                if tp.len() < RTPH_LEN {
                    tp.resize(RTPH_LEN, 0);
                }
                if flags & 1 != 0 {
                    tp[2..5].copy_from_slice(&c.tpn[1 - s].to_be_bytes()[1..]);
                    tp[5..8].copy_from_slice(&c.tpn[s].to_be_bytes()[1..]);
                }
                if flags & 2 != 0 {
                    // Near the next PSN of whichever end the packet plays:
                    // the peer's data, or the responses to our data.
                    let (who, tpn) = if tp[0] & 0x7f == 1 {
                        (1 - s, c.tpn[1 - s])
                    } else {
                        (s, c.tpn[s])
                    };
                    let first = w.eps[who].initial_psn(tpn).unwrap_or(0);
                    let sent = w.eps[who].sender_stats(tpn).map_or(0, |t| t.sent) as u32;
                    let psn = first
                        .wrapping_add(sent)
                        .wrapping_add(delta)
                        .wrapping_sub(16);
                    tp[9..12].copy_from_slice(&(psn & 0xff_ffff).to_be_bytes()[1..]);
                }
                if flags & 4 != 0 {
                    tp[0] =
                        [0x01, 0x81, 0x02, 0x03, 0x05, 0x06, 0x81, 0x01][usize::from(flags >> 5)];
                    tp[1] &= 0x3f;
                    tp[8] &= 0xc0;
                }
                let h = w.header(s, c.remote_of_0, Transport::Rtp, flags & 8);
                let (cfg, pkt) = wrap(&h, &tp, flags & 16 == 0);
                w.receive(s, cfg, &pkt);
            }
            op::CM => {
                let c = w.chans[usize::from(inp.u8()) % w.chans.len()];
                let flags = inp.u8();
                let mut m = [0u8; CM_MSG_LEN];
                let raw = inp.bytes(CM_MSG_LEN);
                m[..raw.len()].copy_from_slice(raw);
                if flags & 1 != 0 {
                    m[0] = 0xcb;
                    m[1] = 1;
                    m[2] = m[2] % 6 + 1;
                    m[19] = 7 + m[19] % 5;
                    m[22] &= 1;
                    m[23] &= 3;
                }
                if flags & 2 != 0 {
                    m[4..8].copy_from_slice(&c.key.to_be_bytes());
                    m[8..11].copy_from_slice(&c.tpn[1 - s].to_be_bytes()[1..]);
                    m[12..15].copy_from_slice(&c.tpn[s].to_be_bytes()[1..]);
                }
                let mut tp = [0u8; RTPH_LEN + CM_MSG_LEN];
                let utph = Utph {
                    padding: 0,
                    nlp: CM_UTP_NLP,
                };
                let _ = utph.write(&mut tp);
                tp[RTPH_LEN..].copy_from_slice(&m);
                let h = w.header(s, c.remote_of_0, Transport::Rtp, 0);
                let (cfg, pkt) = wrap(&h, &tp, true);
                w.receive(s, cfg, &pkt);
            }
            op::DATAGRAM => {
                let flags = inp.u8();
                let n = usize::from(inp.u16()) % 1400;
                let body = inp.bytes(n);
                let me = addrs(s);
                let (fmt, transport, mut tp) = match flags % 3 {
                    0 => {
                        let mut tp = vec![0u8; RTPH_LEN];
                        let _ = (Utph {
                            padding: (flags >> 2) & 3,
                            nlp: (flags >> 4) & 0xf,
                        })
                        .write(&mut tp);
                        (Addr::Ipv4(me.ipv4.unwrap_or_default()), Transport::Rtp, tp)
                    }
                    k => {
                        let mut tp = vec![0u8; 1];
                        let _ = (Ctph {
                            opcode: if flags & 0x40 != 0 {
                                CtpOpcode::Cnp
                            } else {
                                CtpOpcode::Data
                            },
                            padding: (flags >> 2) & 3,
                            nlp: 0,
                        })
                        .write(&mut tp);
                        let fmt = if k == 1 {
                            Addr::Cna24(me.cna24.unwrap_or_default())
                        } else {
                            Addr::Cna16(me.cna16.unwrap_or_default())
                        };
                        (fmt, Transport::Ctp, tp)
                    }
                };
                tp.extend_from_slice(body);
                let h = w.header(s, fmt, transport, 0);
                let (cfg, pkt) = wrap(&h, &tp, true);
                w.receive(s, cfg, &pkt);
            }
            op::REPLAY => {
                let i = usize::from(inp.u16());
                let edits = usize::from(inp.u8() % 4);
                let mut replay = TRACE.with(|t| {
                    if t.is_empty() {
                        None
                    } else {
                        t.get(i % t.len()).cloned()
                    }
                });
                let Some((to, cfg, bytes)) = replay.as_mut() else {
                    continue;
                };
                for _ in 0..edits {
                    let at = usize::from(inp.u16());
                    let v = inp.u8();
                    if !bytes.is_empty() {
                        let n = bytes.len();
                        bytes[at % n] = v;
                    }
                }
                if sel & 0x40 != 0 {
                    if let Ok(class) = PacketClass::from_cfg(*cfg) {
                        let _ = icrc::seal(crc32_le_portable, class, bytes);
                    }
                }
                let (to, cfg, bytes) = (*to, *cfg, std::mem::take(bytes));
                w.receive(to, cfg, &bytes);
            }
            op::TIME => {
                w.now += u64::from(inp.u16()) * 1000;
                for side in 0..2 {
                    if w.eps[side].poll_timeout().is_some_and(|d| d <= w.now) {
                        w.eps[side].handle_timeout(w.now);
                    }
                    w.flush(side);
                }
            }
            op::RUN => {
                let rounds = usize::from(inp.u8());
                w.run(w.now + 10_000_000, rounds);
            }
            _ => {
                let c = usize::from(inp.u8()) % w.chans.len();
                let what = inp.u8();
                let tpn = w.chans[c].tpn[s];
                match what % 6 {
                    0 | 1 => w.send(s, c, u32::from(inp.u16()) % 5000 + 1),
                    2 => {
                        let _ = w.eps[s].close(w.now, tpn);
                    }
                    3 => {
                        let _ = w.eps[s].suspend(tpn);
                    }
                    4 => {
                        let _ = w.eps[s].resume(tpn);
                    }
                    _ => {
                        let (remote, cfg) = channel_plan()[c];
                        let _ = w.eps[0].connect(w.now, remote, u32::from(what), cfg);
                    }
                }
                w.flush(s);
            }
        }
        w.check();
    }
    w.run(w.now + 1_000_000_000, 20_000);
    w.check();
}

/// The network packet of header `h` and transport part `tp`, its ICRC
/// sealed when `seal` (otherwise zero).
fn wrap(h: &NetHeader, tp: &[u8], seal: bool) -> (u8, Vec<u8>) {
    let class = h.class();
    let mut pkt = vec![0u8; h.len() + tp.len() + ICRC_LEN];
    if h.write(&mut pkt, tp.len()).is_err() {
        return (class.cfg(), Vec::new());
    }
    pkt[h.len()..h.len() + tp.len()].copy_from_slice(tp);
    if seal {
        let _ = icrc::seal(crc32_le_portable, class, &mut pkt);
    }
    (class.cfg(), pkt)
}

pub(crate) fn seeds() -> Vec<Vec<u8>> {
    let trace = World::new(true).trace;
    let mut v = Vec::new();
    // Each recorded packet replayed as is, in a few groups.
    for start in (0..trace.len()).step_by(8).take(6) {
        let mut o = Output::default();
        for i in start..(start + 8).min(trace.len()) {
            o.u8(op::REPLAY).u16(i as u16).u8(0);
        }
        o.u8(op::RUN).u8(50);
        v.push(o.done());
    }
    // Raw packets as sent, for the fuzzer to mutate byte by byte.
    for (to, cfg, bytes) in trace.iter().step_by(5).take(8) {
        let mut o = Output::default();
        o.u8(op::RAW | ((*to as u8) << 7))
            .u8(*cfg | 0x80)
            .u16(bytes.len() as u16)
            .raw(bytes);
        v.push(o.done());
    }
    // Forged traffic on each channel: data at the expected PSN, an ACK,
    // a SACK, a repeated REQ, a DREQ; datagrams; user calls.
    for c in 0..3u8 {
        let mut o = Output::default();
        let data = [1u8, 0x30, 0, 0, 0, 0, 0, 0, 0x80, 0, 0, 0, 0, 0, 0, 0];
        o.u8(op::RTP | 0x80)
            .u8(c)
            .u8(1 | 2 | 4 | 0x20)
            .u8(16)
            .u16(40)
            .raw(&data)
            .raw(&[7; 24]);
        o.u8(op::RTP)
            .u8(c)
            .u8(1 | 2 | 4 | 0x40)
            .u8(16)
            .u16(16)
            .raw(&data);
        o.u8(op::RTP)
            .u8(c)
            .u8(1 | 2 | 4 | 0x80)
            .u8(20)
            .u16(16 + 4 + 8);
        o.raw(&data).raw(&[0, 0, 0, 0, 0xff, 0, 0, 0, 0, 0, 0, 0]);
        o.u8(op::CM | 0x80)
            .u8(c)
            .u8(3)
            .raw(&[0xcb, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        o.raw(&[0, 0, 0, 8, 2, 0, 0, 1, 0, 0, 0, 0, 7, 0, 0, 0]);
        o.u8(op::CM)
            .u8(c)
            .u8(3)
            .raw(&[0xcb, 1, 5, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        o.raw(&[0, 0, 0, 8, 2, 0, 0, 1, 0, 0, 0, 0, 7, 0, 0, 0]);
        o.u8(op::DATAGRAM | 0x80).u8(c).u16(20).raw(&[9; 20]);
        o.u8(op::USER).u8(c).u8(0).u16(3000).u8(op::TIME).u16(300);
        o.u8(op::USER | 0x80).u8(c).u8(2).u8(op::RUN).u8(200);
        v.push(o.done());
    }
    v
}
