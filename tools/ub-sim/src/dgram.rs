// SPDX-License-Identifier: GPL-2.0
//! CTP and UTP traffic through the same path model: no responses, no
//! transport retransmission. CTP relies on link-layer-protected hops; UTP
//! simply loses what the network loses.

use ub_proto::net::cci::Cci;
use ub_proto::net::npi::Npi;
use ub_proto::net::nth::{IpHdr, IpNth, NetHeader, Nth24, NLP24_CTPH};
use ub_proto::net::route::{select_port, FlowKey, RouteEntry};
use ub_proto::net::RoutingType;
use ub_proto::transport::msg::{
    finish_packet, open_packet, parse_ctp, parse_utp, write_ctp, write_utp,
};

use crate::rng::Rng;
use crate::PathCfg;
use crate::ICRC;

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

/// Sends `n` datagrams of `size` bytes (≥ 4) from A to B, one flow
/// (per-flow hashing), and reports what B received.
pub fn run_datagrams(kind: Kind, paths: &[PathCfg], n: u32, size: u32, seed: u64) -> DgramReport {
    let mut rng = Rng::new(seed);
    let mut rep = DgramReport::default();
    let mut arrivals: Vec<(u64, u64, Vec<u8>)> = Vec::new();
    let mut nic_free = 0u64;
    let mut path_free = vec![0u64; paths.len()];
    let entry = RouteEntry {
        prefix: 0,
        prefix_len: 0,
        width: 32,
        ports: (1u64 << paths.len()) - 1,
        shortest: 0,
    };
    let net = match kind {
        Kind::Utp => NetHeader::Ip(IpNth {
            cci: Cci::DEFAULT,
            npi: Npi::DEFAULT,
            ip: IpHdr::V4 {
                dscp: 0,
                ecn: 0,
                ident: 0,
                ttl: 64,
                src: [10, 0, 0, 1],
                dst: [10, 0, 0, 2],
            },
            sport: 49_999,
        }),
        Kind::Ctp => NetHeader::Cna24(Nth24 {
            scna: 1,
            dcna: 2,
            cci: Cci::DEFAULT,
            lbf: 3,
            sl: 0,
            nlp: NLP24_CTPH,
        }),
    };
    let key = FlowKey {
        src: 1,
        dst: 2,
        lb: net.lb_key(),
        sl: 0,
    };
    let mut buf = vec![0u8; 16_384];
    for id in 0..n {
        let mut payload: Vec<u8> = (0..size)
            .map(|o| crate::pattern(u64::from(id), o))
            .collect();
        payload[..4].copy_from_slice(&id.to_be_bytes());
        let hoff = net.len();
        let tp_len = match kind {
            Kind::Utp => write_utp(&mut buf[hoff..], 0, &payload),
            Kind::Ctp => write_ctp(&mut buf[hoff..], 0, &payload),
        }
        .expect("fits");
        let len = finish_packet(ICRC, &net, &mut buf, tp_len).expect("fits");
        let mut bytes = buf[..len].to_vec();
        rep.transmissions += 1;
        nic_free += (len as f64 / 12.5).ceil() as u64;
        let path =
            usize::from(select_port(&entry, RoutingType::default(), key.hash(42), id).unwrap_or(0));
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
        if rng.chance(p.dup) {
            arrivals.push((arrive + ser, u64::from(id) * 2 + 1, bytes.clone()));
        }
        arrivals.push((arrive, u64::from(id) * 2, bytes));
    }
    arrivals.sort_by_key(|a| (a.0, a.1));
    for (_, _, bytes) in arrivals {
        let Ok((_, tp)) = open_packet(ICRC, net.class(), &bytes) else {
            rep.icrc_drops += 1;
            continue;
        };
        let payload = match kind {
            Kind::Utp => parse_utp(tp).map(|x| x.1),
            Kind::Ctp => parse_ctp(tp).map(|x| x.1),
        };
        match payload {
            Ok(p) if p.len() == size as usize => {
                let id = u32::from_be_bytes([p[0], p[1], p[2], p[3]]);
                rep.delivered.push(id);
            }
            _ => rep.icrc_drops += 1,
        }
    }
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
        let len = finish_packet(ICRC, &net, &mut buf, tp_len).expect("fits");
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
        let Ok((hdr, tp)) = open_packet(ICRC, net.class(), &bytes) else {
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
