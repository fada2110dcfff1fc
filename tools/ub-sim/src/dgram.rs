// SPDX-License-Identifier: GPL-2.0
//! CTP and UTP traffic through the same path model, sent and received by
//! two host endpoints: no responses, no transport retransmission. CTP
//! relies on link-layer-protected hops; UTP simply loses what the network
//! loses.
//!
//! [`run_ctp_congestion`] is the one model here that still drives an
//! engine itself: the endpoint does not run CTP congestion control (DCQCN
//! on CNPs) yet, so the rate controller and the CNP generator are driven
//! directly.

use ub_proto::host::{DatagramKind, Delivery, DeliverySink, MessageSource, MsgRef};
use ub_proto::net::cci::Cci;
use ub_proto::net::nth::{NetHeader, Nth24, NLP24_CTPH};
use ub_proto::net::route::{select_port, FlowKey, RouteEntry};
use ub_proto::net::RoutingType;
use ub_proto::transport::msg::{finish_packet, open_packet, parse_ctp, write_ctp};
use ub_proto::transport::RetransmitMode;

use crate::rng::Rng;
use crate::{endpoint, host_addr, Format, Lb, PathCfg, Scenario};

/// Datagram transport.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// UTP over IPv4 format.
    Utp,
    /// CTP over the 24-bit CNA NTH.
    Ctp,
}

/// Outcome of a datagram run.
#[derive(Clone, Debug, Default)]
pub struct DgramReport {
    /// Packets put on the wire by the sender.
    pub transmissions: u64,
    /// Datagram IDs in delivery order.
    pub delivered: Vec<u32>,
    /// Packets dropped by the ICRC or header checks.
    pub icrc_drops: u64,
}

/// Datagram `id`: the pattern, with the ID in its first four bytes.
struct IdSource;

impl MessageSource for IdSource {
    fn read(&mut self, msg: MsgRef, offset: u32, out: &mut [u8]) {
        let MsgRef::Datagram { token } = msg else {
            return;
        };
        let id = (token as u32).to_be_bytes();
        for (i, b) in out.iter_mut().enumerate() {
            let off = offset + i as u32;
            *b = id
                .get(off as usize)
                .copied()
                .unwrap_or_else(|| crate::pattern(token, off));
        }
    }
}

/// Collects datagram IDs (datagrams of the wrong size count as drops).
struct Ids {
    size: usize,
    ids: Vec<u32>,
    bad: u64,
}

impl DeliverySink for Ids {
    fn deliver(&mut self, d: &Delivery<'_>) {
        if let Delivery::Datagram { bytes, .. } = d {
            match bytes {
                [a, b, c, e, ..] if bytes.len() == self.size => {
                    self.ids.push(u32::from_be_bytes([*a, *b, *c, *e]))
                }
                _ => self.bad += 1,
            }
        }
    }
}

/// Sends `n` datagrams of `size` bytes (≥ 4) from endpoint A to endpoint
/// B, one flow (per-flow hashing), and reports what B received.
pub fn run_datagrams(kind: Kind, paths: &[PathCfg], n: u32, size: u32, seed: u64) -> DgramReport {
    let mut sc = Scenario::new(
        RetransmitMode::Selective,
        false,
        Lb::PerFlow,
        paths.to_vec(),
    );
    let (dk, format) = match kind {
        Kind::Utp => (DatagramKind::Utp, Format::Ipv4),
        Kind::Ctp => (DatagramKind::Ctp, Format::Cna24),
    };
    sc.format = format;
    let mut a = endpoint(&sc, 0, seed);
    let mut b = endpoint(&sc, 1, seed.wrapping_add(1));
    let remote = host_addr(&sc, 1);
    let mut rng = Rng::new(seed);
    let mut rep = DgramReport::default();
    let mut arrivals: Vec<(u64, u64, u8, Vec<u8>)> = Vec::new();
    let mut nic_free = 0u64;
    let mut path_free = vec![0u64; paths.len()];
    let entry = RouteEntry {
        prefix: 0,
        prefix_len: 0,
        width: 32,
        ports: (1u64 << paths.len()) - 1,
        shortest: 0,
    };
    let mut buf = vec![0u8; crate::MAX_PACKET as usize];
    for id in 0..n {
        // The queue is drained after every send, so this only fails on a
        // size the format cannot carry: then nothing more is sent.
        if a.send_datagram(dk, remote, u64::from(id), size).is_err() {
            break;
        }
        while a.poll_event().is_some() {}
        while let Ok(Some(t)) = a.poll_transmit(0, &mut buf, &mut IdSource) {
            while a.poll_event().is_some() {}
            let len = t.len;
            let mut bytes = buf[..len].to_vec();
            let Ok((net, _)) = NetHeader::parse(t.meta.class, &bytes) else {
                continue;
            };
            let key = FlowKey {
                src: 1,
                dst: 2,
                lb: net.lb_key(),
                sl: 0,
            };
            rep.transmissions += 1;
            nic_free += (len as f64 / 12.5).ceil() as u64;
            let path = usize::from(
                select_port(&entry, RoutingType::default(), key.hash(42), id).unwrap_or(0),
            );
            let p = &paths[path];
            let ser = (len as f64 / p.rate).ceil() as u64;
            let start = path_free[path].max(nic_free);
            path_free[path] = start + ser;
            let mut arrive = start + ser + p.delay_ns;
            let mut lost = rng.chance(p.loss);
            let mut corrupt = rng.chance(p.corrupt);
            if p.lossless && (lost || corrupt) {
                arrive += 2 * p.delay_ns + ser;
                path_free[path] = arrive - p.delay_ns;
                lost = false;
                corrupt = false;
            }
            if lost {
                continue;
            }
            if corrupt {
                let bit = rng.below(bytes.len() as u64 * 8);
                bytes[(bit / 8) as usize] ^= 1 << (bit % 8);
            }
            let cfg = t.meta.class.cfg();
            if rng.chance(p.dup) {
                arrivals.push((arrive + ser, u64::from(id) * 2 + 1, cfg, bytes.clone()));
            }
            arrivals.push((arrive, u64::from(id) * 2, cfg, bytes));
        }
    }
    arrivals.sort_by_key(|a| (a.0, a.1));
    let mut sink = Ids {
        size: size as usize,
        ids: Vec::new(),
        bad: 0,
    };
    for (t, _, cfg, bytes) in arrivals {
        b.handle_packet(t, 0, cfg, &bytes, &mut sink);
    }
    let k = b.net_counters();
    rep.icrc_drops = k.icrc_drops + k.malformed + sink.bad;
    rep.delivered = sink.ids;
    rep
}

/// Outcome of a CTP congestion run.
#[derive(Clone, Debug, Default)]
pub struct CtpCcReport {
    /// Datagrams delivered (all of them: the hop is lossless).
    pub delivered: u64,
    /// CNPs the receiver sent.
    pub cnps: u64,
    /// Largest queueing delay at the bottleneck, ns.
    pub max_queue_ns: u64,
    /// Time the last datagram arrived, ns.
    pub end_ns: u64,
    /// Delivered bytes per ns over the run.
    pub throughput: f64,
}

/// CTP from a 50 B/ns (400 Gb/s) sender through a 12.5 B/ns (100 Gb/s)
/// bottleneck that FECN-marks packets when its queue exceeds
/// `mark_threshold` bytes. With `cc`, the receiver answers marks with CNPs
/// (at most one per 50 µs) and the sender paces with a DCQCN rate
/// controller; without, it sends at line rate.
pub fn run_ctp_congestion(n: u32, size: u32, mark_threshold: u64, cc: bool) -> CtpCcReport {
    use ub_proto::net::cci::Fecn;
    use ub_proto::transport::dcqcn::{CnpGenerator, DcqcnConfig, RateController};

    const NIC: f64 = 50.0;
    const BOTTLENECK: f64 = 12.5;
    const DELAY: u64 = 2_000;
    let mut rep = CtpCcReport::default();
    let mut rate = RateController::new(DcqcnConfig::defaults(50_000_000_000), 0);
    let mut cnp_gen = CnpGenerator::new(50_000);
    // CNP arrival times at the sender, in order (single return path).
    let mut cnps: std::collections::VecDeque<u64> = std::collections::VecDeque::new();
    let mut now = 0u64;
    let mut link_free = 0u64;
    let net = NetHeader::Cna24(Nth24 {
        scna: 1,
        dcna: 2,
        cci: Cci::DEFAULT,
        lbf: 0,
        sl: 0,
        nlp: NLP24_CTPH,
    });
    let mut buf = vec![0u8; 16_384];
    let payload = vec![0x77u8; size as usize];
    for _ in 0..n {
        if cc {
            now = rate.next_send_time(now);
            while cnps.front().is_some_and(|&t| t <= now) {
                let t = cnps.pop_front().unwrap_or(now);
                rate.on_cnp(t);
                now = rate.next_send_time(now);
            }
        }
        let hoff = net.len();
        let tp_len = write_ctp(&mut buf[hoff..], 0, &payload).expect("fits");
        let len = finish_packet(ub_host_crc::crc32_le, &net, &mut buf, tp_len).expect("fits");
        let depart = now + (len as f64 / NIC).ceil() as u64;
        if cc {
            rate.on_send(now, len as u32);
        }
        now = depart;
        // Bottleneck queue.
        let start = link_free.max(depart);
        let queue_ns = start - depart;
        rep.max_queue_ns = rep.max_queue_ns.max(queue_ns);
        let queued_bytes = (queue_ns as f64 * BOTTLENECK) as u64;
        let ser = (len as f64 / BOTTLENECK).ceil() as u64;
        link_free = start + ser;
        let arrive = start + ser + DELAY;
        let mut bytes = buf[..len].to_vec();
        if queued_bytes > mark_threshold {
            let cci = net.cci().mark(Fecn::Light, true);
            bytes[6..8].copy_from_slice(&cci.to_u16().to_be_bytes());
        }
        // Receiver.
        let Ok((hdr, tp)) = open_packet(ub_host_crc::crc32_le, net.class(), &bytes) else {
            continue;
        };
        if parse_ctp(tp).is_ok() {
            rep.delivered += 1;
            rep.end_ns = arrive;
        }
        if cc && cnp_gen.on_packet(arrive, hdr.cci().congested()) {
            rep.cnps += 1;
            cnps.push_back(arrive + DELAY);
        }
    }
    rep.throughput = rep.delivered as f64 * f64::from(size) / rep.end_ns.max(1) as f64;
    rep
}
