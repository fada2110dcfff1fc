// SPDX-License-Identifier: GPL-2.0
//! `ub-sim`: a deterministic discrete-event simulator that runs `ub-proto`
//! transport engines end to end over a configurable multipath network.
//!
//! Topology: host A → NIC (rate) → switch → one of N paths (each with its
//! own delay, rate, loss, duplication, corruption, congestion marking and
//! optional link-layer protection) → host B, and the same paths back for
//! the responses. The switch picks the path with
//! [`ub_proto::net::route::select_port`]: by a hash of the flow fields
//! (per-flow, RT\[0\] = 0) or by a per-packet counter (RT\[0\] = 1).
//!
//! Host A runs an [`RtpSender`], host B an [`RtpReceiver`] and a
//! [`Reassembler`]; packets are real bytes (IPv4 format with UDP 4792 or
//! the 24-bit CNA NTH, RTPH, payload, ICRC). Message contents are a
//! pattern of (message, offset), so the receiver checks exactly-once,
//! in-order delivery of every byte. Everything is driven by one seeded
//! PRNG and a time-ordered event queue: the same seed gives the same run.

pub mod dgram;
pub mod plot;
pub mod rng;

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use ub_proto::crc::Crc32Update;
use ub_proto::net::cci::{Cci, Fecn};
use ub_proto::net::npi::Npi;
use ub_proto::net::nth::{IpHdr, IpNth, NetHeader, Nth24, NLP24_RTPH};
use ub_proto::net::route::{select_port, FlowKey, RouteEntry};
use ub_proto::net::{PacketClass, RoutingType};
use ub_proto::transport::cc::CcConfig;
use ub_proto::transport::hdr::{BitmapSize, CetphKind, Rspst, Rtph, Saetph, TpOpcode, RTPH_LEN};
use ub_proto::transport::msg::{finish_packet, open_packet, strip, Reassembler, Segment};
use ub_proto::transport::psn::Psn;
use ub_proto::transport::rx::{RtpReceiver, RxConfig, RxMode, RxStorage, RxVerdict, SlotMeta};
use ub_proto::transport::tpg::{member_lbf, member_sport, TpGroup, TpgPolicy};
use ub_proto::transport::tx::{RtpSender, TxConfig, TxEvent, TxSlot};
use ub_proto::transport::{RetransmitMode, RtoMode, StaticRto};

use rng::Rng;

/// The ICRC backend of every simulated host: the carry-less-multiply
/// CRC-32 (the results do not depend on it; the run time does).
pub(crate) const ICRC: Crc32Update = ub_host_crc::crc32_le;

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

/// Load balancing.
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
    /// Host A to host B (data).
    AtoB,
    /// Host B to host A (responses).
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
    /// Message sizes, sent in order.
    pub messages: Vec<u32>,
    /// Initial PSN of the channel.
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
    /// Messages delivered in order, each with its completion time.
    pub delivered: Vec<(u64, u64)>,
    /// Per-message latency (post to delivery), ns.
    pub latencies: Vec<u64>,
    /// Payload bytes delivered.
    pub bytes: u64,
    /// Time of the last delivery, ns.
    pub end_ns: u64,
    /// Packets dropped for a bad ICRC or header.
    pub icrc_drops: u64,
    /// Delivery errors (wrong order, wrong bytes, TPMSN mismatch, ...).
    pub errors: Vec<String>,
    /// The channel went to the error state.
    pub channel_error: bool,
    /// Messages acknowledged to the sender.
    pub acked: u64,
    /// Sender counters.
    pub tx: ub_proto::transport::tx::TxStats,
    /// Receiver counters.
    pub rx: ub_proto::transport::rx::RxStats,
    /// Data packets put on the wire (including retransmissions).
    pub data_packets: u64,
    /// Packet trace (if requested).
    pub trace: Vec<TraceEntry>,
    /// Largest number of unacknowledged packets seen.
    pub max_outstanding: u32,
    /// Times the sender's congestion window shrank.
    pub cc_decreases: u32,
    /// Final congestion window (largest over the channels).
    pub final_cw: u32,
    /// The event queue ran dry before completion (a stall: no timer armed).
    pub stalled: bool,
    /// Simulated time when the run stopped, ns.
    pub stop_ns: u64,
    /// Data packets first sent by each channel of the group.
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

const TPN_A: u32 = 0x00_0a0a;
const TPN_B: u32 = 0x00_0b0b;
const SPORT: u16 = 50_123;
const BUF: usize = 16_384;

#[derive(Debug)]
enum Ev {
    /// A packet arrives at a host.
    Arrive {
        to_b: bool,
        class: PacketClass,
        bytes: Vec<u8>,
    },
    /// Re-run a host's engine.
    Wake { b: bool },
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

fn summarize(tp: &[u8]) -> What {
    let Ok(h) = Rtph::parse(tp) else {
        return What::Other;
    };
    match h.opcode {
        TpOpcode::Data => What::Data {
            psn: h.psn.value(),
            tpmsn: h.tpmsn,
            last: h.last,
            rtx: false,
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

/// One TP channel: the sender at A, the receiver at B.
struct Chan<'a> {
    tx: RtpSender<'a>,
    rx: RtpReceiver<'a>,
    reasm: Reassembler,
    /// UDP source port (IP format) or LBF (CNA) of this member.
    lb: u16,
    /// Message IDs posted to this channel, in order, not yet delivered.
    ids: VecDeque<u64>,
    cur_msg: Vec<u8>,
}

struct World<'a> {
    sc: Scenario,
    rng: Rng,
    q: Queue,
    chans: Vec<Chan<'a>>,
    group: TpGroup,
    rr: usize,
    rep: Report,
    nic_free: [u64; 2],
    path_free: Vec<[u64; 2]>,
    spray: [u32; 2],
    next_msg: usize,
    post_time: Vec<u64>,
    delivered_count: usize,
    wake_at: [u64; 2],
    buf: Vec<u8>,
}

impl World<'_> {
    fn net_header(&self, to_b: bool, cci: Cci, lb: u16) -> NetHeader {
        match self.sc.format {
            Format::Ipv4 => NetHeader::Ip(IpNth {
                cci,
                npi: Npi::DEFAULT,
                ip: IpHdr::V4 {
                    dscp: 0,
                    ecn: 0,
                    ident: 0,
                    ttl: 64,
                    src: if to_b { [10, 0, 0, 1] } else { [10, 0, 0, 2] },
                    dst: if to_b { [10, 0, 0, 2] } else { [10, 0, 0, 1] },
                },
                sport: lb,
            }),
            Format::Cna24 => NetHeader::Cna24(Nth24 {
                scna: if to_b { 0x10 } else { 0x20 },
                dcna: if to_b { 0x20 } else { 0x10 },
                cci,
                lbf: (lb & 0xff) as u8,
                sl: 0,
                nlp: NLP24_RTPH,
            }),
        }
    }

    fn schedule_wake(&mut self, b: bool, t: u64) {
        let i = usize::from(b);
        if self.wake_at[i] > t {
            self.wake_at[i] = t;
            self.q.push(t, Ev::Wake { b });
        }
    }

    /// Sends a packet whose transport part is at `buf[hdr..hdr + tp_len]`.
    fn send(&mut self, now: u64, to_b: bool, net: NetHeader, tp_len: usize, rtx: bool) {
        let mut buf = std::mem::take(&mut self.buf);
        let n = finish_packet(ICRC, &net, &mut buf, tp_len).expect("packet fits");
        let bytes = buf[..n].to_vec();
        self.buf = buf;
        let hlen = net.len();
        let mut what = summarize(&bytes[hlen..n - 4]);
        if let What::Data { rtx: r, .. } = &mut what {
            *r = rtx;
        }
        let side = usize::from(!to_b);
        let ser = ((n as f64) / self.sc.nic_rate).ceil() as u64;
        let depart = self.nic_free[side].max(now) + ser;
        self.nic_free[side] = depart;
        // Switch: choose a path.
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
        let key = FlowKey {
            src: u128::from(to_b),
            dst: u128::from(!to_b),
            lb: net.lb_key(),
            sl: 0,
        };
        self.spray[side] = self.spray[side].wrapping_add(1);
        let path =
            usize::from(select_port(&entry, rt, key.hash(42), self.spray[side]).unwrap_or(0));
        let filtered = match self.sc.filter.as_mut() {
            Some(f) => f(now, if to_b { Dir::AtoB } else { Dir::BtoA }, &what),
            None => false,
        };
        if self.sc.trace {
            self.rep.trace.push(TraceEntry {
                t: now,
                dir: if to_b { Dir::AtoB } else { Dir::BtoA },
                what,
                fate: if filtered { Fate::Filtered } else { Fate::Sent },
                path,
            });
        }
        if filtered {
            return;
        }
        self.transit(depart, to_b, net, bytes, path);
    }

    fn transit(
        &mut self,
        depart: u64,
        to_b: bool,
        net: NetHeader,
        mut bytes: Vec<u8>,
        path: usize,
    ) {
        let p = self.sc.paths[path].clone();
        let side = usize::from(!to_b);
        let ser = ((bytes.len() as f64) / p.rate).ceil() as u64;
        let start = self.path_free[path][side].max(depart);
        let queued = ((start - depart) as f64 * p.rate) as u64;
        self.path_free[path][side] = start + ser;
        let mut arrive = start + ser + p.delay_ns;
        let class = net.class();
        if let Some(th) = p.mark_threshold {
            if queued > th {
                // Rewrite the CCI in place: it is masked out of the ICRC.
                let cci = net.cci().mark(Fecn::Light, true);
                let off = match class {
                    PacketClass::Cna24 => 6,
                    _ => 0,
                };
                bytes[off..off + 2].copy_from_slice(&cci.to_u16().to_be_bytes());
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
        if self.rng.chance(p.dup) {
            self.q.push(
                arrive + ser,
                Ev::Arrive {
                    to_b,
                    class,
                    bytes: bytes.clone(),
                },
            );
        }
        self.q.push(arrive, Ev::Arrive { to_b, class, bytes });
    }

    /// Posts waiting messages to the group's members (transactions, not
    /// packets, are spread).
    fn post_messages(&mut self, now: u64) {
        while self.next_msg < self.sc.messages.len() {
            let chans = &self.chans;
            let pick = self.group.select(
                |i| u64::from(chans[i as usize].tx.outstanding()),
                |i| chans[i as usize].tx.can_post(),
            );
            let Some(i) = pick else { break };
            let len = self.sc.messages[self.next_msg];
            let c = &mut self.chans[i as usize];
            if c.tx.post(self.next_msg as u64, len).is_err() {
                break;
            }
            c.ids.push_back(self.next_msg as u64);
            self.post_time[self.next_msg] = now;
            self.next_msg += 1;
        }
    }

    fn drive_a(&mut self, now: u64) {
        for c in &mut self.chans {
            c.tx.handle_timeout(now);
        }
        let n = self.chans.len();
        'nic: loop {
            self.post_messages(now);
            if self.nic_free[0] > now {
                let t = self.nic_free[0];
                self.schedule_wake(false, t);
                break;
            }
            // The NIC serves the channels in turn.
            for k in 0..n {
                let i = (self.rr + k) % n;
                let mut buf = std::mem::take(&mut self.buf);
                let hoff = self.net_header(true, Cci::DEFAULT, 0).len();
                let r = self.chans[i].tx.poll_transmit(now, &mut buf[hoff..]);
                let Ok(Some(pkt)) = r else {
                    self.buf = buf;
                    continue;
                };
                let start = hoff + pkt.hdr_len;
                for j in 0..pkt.len {
                    buf[start + j as usize] = pattern(pkt.token, pkt.offset + j);
                }
                let pad_start = start + pkt.len as usize;
                buf[pad_start..pad_start + usize::from(pkt.padding)].fill(0);
                let tp_len = pkt.hdr_len + pkt.len as usize + usize::from(pkt.padding);
                self.buf = buf;
                self.rep.data_packets += 1;
                let net = self.net_header(true, pkt.cci, self.chans[i].lb);
                self.send(now, true, net, tp_len, pkt.retransmission);
                self.rr = (i + 1) % n;
                continue 'nic;
            }
            break;
        }
        for c in &mut self.chans {
            while let Some(ev) = c.tx.poll_event() {
                match ev {
                    TxEvent::MessageAcked { .. } => self.rep.acked += 1,
                    TxEvent::ChannelError => self.rep.channel_error = true,
                }
            }
        }
        let next = self.chans.iter().filter_map(|c| c.tx.poll_timeout()).min();
        if let Some(d) = next {
            self.schedule_wake(false, d.max(now));
        }
    }

    fn deliver(&mut self, ch: usize, now: u64, tpmsn: u32, last: bool, payload: &[u8]) {
        let c = &mut self.chans[ch];
        match c.reasm.on_packet(tpmsn, last, payload.len() as u32) {
            Ok(Segment::Partial { offset, .. }) => {
                if offset as usize != c.cur_msg.len() {
                    self.rep
                        .errors
                        .push(format!("offset {offset} != {}", c.cur_msg.len()));
                }
                c.cur_msg.extend_from_slice(payload);
            }
            Ok(Segment::Complete { len, .. }) => {
                c.cur_msg.extend_from_slice(payload);
                let Some(id) = c.ids.pop_front() else {
                    self.rep
                        .errors
                        .push(format!("channel {ch}: message nobody posted"));
                    return;
                };
                let want = self.sc.messages.get(id as usize).copied();
                if want != Some(len) || c.cur_msg.len() != len as usize {
                    self.rep
                        .errors
                        .push(format!("message {id}: length {len}, wanted {want:?}"));
                } else if let Some(off) =
                    (0..len).find(|&o| c.cur_msg[o as usize] != pattern(id, o))
                {
                    self.rep
                        .errors
                        .push(format!("message {id}: byte {off} wrong"));
                }
                c.cur_msg.clear();
                self.rep.delivered.push((id, now));
                if let Some(&t0) = self.post_time.get(id as usize) {
                    self.rep.latencies.push(now - t0);
                }
                self.rep.bytes += u64::from(len);
                self.rep.end_ns = now;
                self.delivered_count += 1;
            }
            Err(e) => self.rep.errors.push(format!("reassembly: {e:?}")),
        }
    }

    fn on_arrive_b(&mut self, now: u64, class: PacketClass, bytes: &[u8]) {
        let Ok((net, tp)) = open_packet(ICRC, class, bytes) else {
            self.rep.icrc_drops += 1;
            return;
        };
        let Ok(h) = Rtph::parse(tp) else {
            self.rep.icrc_drops += 1;
            return;
        };
        let Some(ch) = h
            .dst_tpn
            .checked_sub(TPN_B)
            .map(|i| i as usize)
            .filter(|&i| i < self.chans.len())
        else {
            return;
        };
        let Ok(payload) = strip(tp, RTPH_LEN, h.padding) else {
            return;
        };
        let units = (tp.len() + 4) as u32;
        if self.chans[ch]
            .rx
            .handle_data(now, &h, payload, units, net.cci())
            == RxVerdict::Deliver
        {
            let payload = payload.to_vec();
            self.deliver(ch, now, h.tpmsn, h.last, &payload);
        }
        while let Some(p) = self.chans[ch].rx.next_held() {
            let (tpmsn, last, data) = (p.tpmsn, p.last, p.payload.to_vec());
            self.deliver(ch, now, tpmsn, last, &data);
        }
    }

    fn drive_b(&mut self, now: u64) {
        for i in 0..self.chans.len() {
            loop {
                let mut buf = std::mem::take(&mut self.buf);
                let hoff = self.net_header(false, Cci::DEFAULT, 0).len();
                let r = self.chans[i].rx.poll_transmit(now, &mut buf[hoff..]);
                self.buf = buf;
                let Ok(Some(n)) = r else { break };
                let net = self.net_header(false, Cci::DEFAULT, self.chans[i].lb);
                self.send(now, false, net, n, false);
            }
        }
        let next = self.chans.iter().filter_map(|c| c.rx.poll_timeout()).min();
        if let Some(d) = next {
            self.schedule_wake(true, d.max(now));
        }
    }

    fn on_arrive_a(&mut self, now: u64, class: PacketClass, bytes: &[u8]) {
        let Ok((_, tp)) = open_packet(ICRC, class, bytes) else {
            self.rep.icrc_drops += 1;
            return;
        };
        let Ok(h) = Rtph::parse(tp) else {
            self.rep.icrc_drops += 1;
            return;
        };
        if let Some(c) = h
            .dst_tpn
            .checked_sub(TPN_A)
            .and_then(|i| self.chans.get_mut(i as usize))
        {
            let _ = c.tx.handle_response(now, tp);
        }
    }

    fn done(&self) -> bool {
        self.rep.channel_error
            || (self.delivered_count == self.sc.messages.len()
                && self.next_msg == self.sc.messages.len()
                && self.chans.iter().all(|c| c.tx.is_idle()))
    }

    fn run(&mut self) {
        self.drive_a(0);
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
                Ev::Arrive {
                    to_b: true,
                    class,
                    bytes,
                } => {
                    self.on_arrive_b(now, class, &bytes);
                    self.drive_b(now);
                }
                Ev::Arrive {
                    to_b: false,
                    class,
                    bytes,
                } => {
                    self.on_arrive_a(now, class, &bytes);
                    self.drive_a(now);
                }
                Ev::Wake { b } => {
                    let i = usize::from(b);
                    if self.wake_at[i] == now {
                        self.wake_at[i] = u64::MAX;
                    }
                    if b {
                        self.drive_b(now);
                    } else {
                        self.drive_a(now);
                    }
                }
            }
            if self.done() {
                break;
            }
        }
    }
}

/// Per-channel storage, allocated before the engines borrow it.
struct Storage {
    tx_slots: Vec<TxSlot>,
    bitmap: Vec<u64>,
    meta: Vec<SlotMeta>,
    data: Vec<u8>,
}

/// Runs a scenario to completion (all messages acknowledged), channel
/// error, or `max_time_ns`.
pub fn run(sc: Scenario) -> Report {
    let slots = sc.rx_slots as usize;
    let nch = sc.channels.clamp(1, 32);
    let mut stores: Vec<Storage> = (0..nch)
        .map(|_| Storage {
            tx_slots: vec![TxSlot::default(); sc.window as usize],
            bitmap: vec![0u64; slots.div_ceil(64)],
            meta: vec![SlotMeta::default(); slots],
            data: vec![0u8; slots * sc.mtu as usize],
        })
        .collect();
    let mut chans = Vec::new();
    for (i, st) in stores.iter_mut().enumerate() {
        let i = i as u32;
        let txc = TxConfig {
            mode: sc.mode,
            fast_retransmit: sc.fast,
            rto: sc.rto,
            retry_limit: sc.retry_limit,
            max_window: sc.window,
            mtu: sc.mtu,
            local_tpn: TPN_A + i,
            peer_tpn: TPN_B + i,
            initial_psn: Psn::new(sc.initial_psn.wrapping_add(i * 1000)),
            overhead: (RTPH_LEN + 4) as u32,
            cc: sc.cc,
            cetph: sc.cetph,
        };
        let rxc = RxConfig {
            mode: RxMode::for_combination(sc.mode, sc.fast),
            local_tpn: TPN_B + i,
            peer_tpn: TPN_A + i,
            initial_psn: Psn::new(sc.initial_psn.wrapping_add(i * 1000)),
            ooo_window: sc.ooo_window,
            ack_every: sc.ack_every,
            ack_delay_ns: sc.ack_delay_ns,
            sack_threshold: sc.sack_threshold,
            sack_max: sc.sack_max,
            cc: sc.cetph,
        };
        let tx = RtpSender::new(txc, &mut st.tx_slots).expect("sender config");
        let rx = RtpReceiver::new(
            rxc,
            RxStorage {
                bitmap: &mut st.bitmap,
                meta: &mut st.meta,
                data: &mut st.data,
            },
        )
        .expect("receiver config");
        let lb = match sc.format {
            Format::Ipv4 => member_sport(SPORT, i),
            Format::Cna24 => u16::from(member_lbf(SPORT as u8, i)),
        };
        chans.push(Chan {
            tx,
            rx,
            reasm: Reassembler::new(0, sc.mtu, u32::MAX),
            lb,
            ids: VecDeque::new(),
            cur_msg: Vec::new(),
        });
    }
    let npaths = sc.paths.len();
    let nmsg = sc.messages.len();
    let group = TpGroup::new(nch, sc.tpg_policy).expect("1..=32 members");
    let mut w = World {
        rng: Rng::new(sc.seed),
        q: Queue {
            heap: BinaryHeap::new(),
            evs: Vec::new(),
            seq: 0,
        },
        chans,
        group,
        rr: 0,
        rep: Report::default(),
        nic_free: [0; 2],
        path_free: vec![[0; 2]; npaths],
        spray: [0; 2],
        next_msg: 0,
        post_time: vec![0; nmsg],
        delivered_count: 0,
        wake_at: [u64::MAX; 2],
        buf: vec![0u8; BUF],
        sc,
    };
    w.run();
    for c in &w.chans {
        let (t, r) = (c.tx.stats(), c.rx.stats());
        w.rep.tx.sent += t.sent;
        w.rep.tx.retransmitted += t.retransmitted;
        w.rep.tx.timeouts += t.timeouts;
        w.rep.tx.fast_queued += t.fast_queued;
        w.rep.tx.max_outstanding = w.rep.tx.max_outstanding.max(t.max_outstanding);
        w.rep.rx.in_order += r.in_order;
        w.rep.rx.held += r.held;
        w.rep.rx.duplicates += r.duplicates;
        w.rep.rx.ooo_dropped += r.ooo_dropped;
        w.rep.rx.unrecordable += r.unrecordable;
        w.rep.rx.invalid += r.invalid;
        w.rep.rx.acks += r.acks;
        w.rep.rx.naks += r.naks;
        w.rep.rx.sacks += r.sacks;
        w.rep.cc_decreases += c.tx.cc().decreases();
        w.rep.final_cw = w.rep.final_cw.max(c.tx.cc().cw());
        w.rep.per_channel_packets.push(c.tx.stats().sent);
    }
    w.rep.max_outstanding = w.rep.tx.max_outstanding;
    w.rep
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
