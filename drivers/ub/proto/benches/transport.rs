// SPDX-License-Identifier: GPL-2.0
//! Per-packet processing cost of the RTP sender + receiver with no loss:
//! 4 KiB messages at MTU 4 KiB (one packet per message), one response per
//! packet (the worst case) and coalesced per 8 packets.
//!
//! `cargo bench -p ub-proto --bench transport`
//!
//! "transport" covers post, segmentation, RTPH write, RTPH parse, PSN
//! check, reassembly, response write/parse, acknowledgement and completion.
//! "full" adds the IPv4-format network header (write and parse) and the
//! ICRC over the whole 4 KiB packet on both sides, which dominates.

#![allow(
    clippy::unwrap_used,
    clippy::indexing_slicing,
    clippy::float_arithmetic,
    reason = "benchmark code on the host"
)]

use std::hint::black_box;
use std::time::Instant;

use ub_proto::crc::crc32_le_portable;
use ub_proto::net::cci::Cci;
use ub_proto::net::npi::Npi;
use ub_proto::net::nth::{IpHdr, IpNth, NetHeader};
use ub_proto::transport::cc::CcConfig;
use ub_proto::transport::hdr::{BitmapSize, Rtph};
use ub_proto::transport::msg::{finish_packet, open_packet, Reassembler};
use ub_proto::transport::psn::Psn;
use ub_proto::transport::rx::{RtpReceiver, RxConfig, RxMode, RxStorage, RxVerdict, SlotMeta};
use ub_proto::transport::tx::{RtpSender, TxConfig, TxSlot};
use ub_proto::transport::{RetransmitMode, RtoMode, StaticRto};

const MTU: u32 = 4096;

/// Nanoseconds this thread has spent on a CPU (Linux schedstat), so that
/// the figure is per core even when other work shares the machine.
fn cpu_ns() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    s.split_whitespace().next()?.parse().ok()
}

/// Packets per second of wall time and of on-CPU time.
struct Rate {
    wall: f64,
    cpu: Option<f64>,
}

fn bench(mode: RetransmitMode, fast: bool, ack_every: u16, full: bool, packets: u64) -> Rate {
    let mut slots = vec![TxSlot::default(); 256];
    let mut tx = RtpSender::new(
        TxConfig {
            mode,
            fast_retransmit: fast,
            rto: RtoMode::Static(StaticRto::Us512),
            retry_limit: 7,
            max_window: 256,
            mtu: MTU,
            local_tpn: 1,
            peer_tpn: 2,
            initial_psn: Psn::new(0xff_0000),
            overhead: 20,
            cc: CcConfig::NONE,
            cetph: None,
        },
        &mut slots,
    )
    .unwrap();
    let mut bitmap = vec![0u64; 4];
    let mut meta = vec![SlotMeta::default(); 256];
    let mut data = vec![0u8; 256 * MTU as usize];
    let mut rx = RtpReceiver::new(
        RxConfig {
            mode: RxMode::for_combination(mode, fast),
            local_tpn: 2,
            peer_tpn: 1,
            initial_psn: Psn::new(0xff_0000),
            ooo_window: 256,
            ack_every,
            ack_delay_ns: 1_000_000,
            sack_threshold: 1,
            sack_max: BitmapSize::B1024,
            cc: None,
        },
        RxStorage {
            bitmap: &mut bitmap,
            meta: &mut meta,
            data: &mut data,
        },
    )
    .unwrap();
    let mut re = Reassembler::new(0, MTU, MTU);
    let net = NetHeader::Ip(IpNth {
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
        sport: 50000,
    });
    let hoff = net.len();
    let mut wire = vec![0xa5u8; 8192];
    let mut ack = [0u8; 256];
    let payload = vec![0x5au8; MTU as usize];
    let mut delivered = 0u64;
    let cpu0 = cpu_ns();
    let start = Instant::now();
    for i in 0..packets {
        let now = i * 330;
        tx.post(i, MTU).unwrap();
        let p = tx.poll_transmit(now, &mut wire[hoff..]).unwrap().unwrap();
        let (h, body) = if full {
            let tp_len = p.hdr_len + p.len as usize;
            let n = finish_packet(crc32_le_portable, &net, &mut wire, tp_len).unwrap();
            let (_, tp) = open_packet(crc32_le_portable, net.class(), &wire[..n]).unwrap();
            (Rtph::parse(tp).unwrap(), &tp[16..])
        } else {
            (
                Rtph::parse(&wire[hoff..]).unwrap(),
                &payload[..p.len as usize],
            )
        };
        if rx.handle_data(now, &h, body, p.len + 20, Cci::DEFAULT) == RxVerdict::Deliver {
            black_box(re.on_packet(h.tpmsn, h.last, body.len() as u32).unwrap());
            delivered += 1;
        }
        if let Some(n) = rx.poll_transmit(now, &mut ack).unwrap() {
            tx.handle_response(now, &ack[..n]).unwrap();
            while let Some(e) = tx.poll_event() {
                black_box(e);
            }
        }
    }
    let el = start.elapsed().as_secs_f64();
    let cpu = cpu_ns()
        .zip(cpu0)
        .map(|(b, a)| packets as f64 / ((b - a) as f64 / 1e9));
    assert_eq!(delivered, packets);
    Rate {
        wall: packets as f64 / el,
        cpu,
    }
}

fn show(label: &str, r: &Rate) {
    let cpu = r
        .cpu
        .map(|c| format!("{:>6.2} M/s on-CPU ({:>6.1} ns)", c / 1e6, 1e9 / c))
        .unwrap_or_default();
    println!(
        "  {label}: {:>6.2} M packets/s wall ({:>6.1} ns/packet), {cpu}",
        r.wall / 1e6,
        1e9 / r.wall
    );
}

fn main() {
    let n = 2_000_000;
    println!("RTP sender + receiver, 4 KiB messages, MTU 4 KiB, no loss, one core");
    for (mode, fast, name) in [
        (RetransmitMode::GoBackN, true, "GBN+fast"),
        (RetransmitMode::GoBackN, false, "GBN"),
        (RetransmitMode::Selective, true, "selective+fast"),
        (RetransmitMode::Selective, false, "selective"),
    ] {
        for ack_every in [1u16, 8] {
            let t = bench(mode, fast, ack_every, false, n);
            show(&format!("transport {name:<15} ack every {ack_every}"), &t);
        }
    }
    let buf = vec![0x3cu8; 4096];
    let reps = 20_000u32;
    let start = Instant::now();
    for _ in 0..reps {
        black_box(ub_proto::crc::crc32(black_box(&buf)));
    }
    let ns = start.elapsed().as_secs_f64() * 1e9 / f64::from(reps);
    println!(
        "  crc::crc32 over 4 KiB (the ICRC): {ns:.0} ns = {:.2} GB/s",
        4096.0 / ns
    );
    for ack_every in [1u16, 8] {
        let t = bench(RetransmitMode::Selective, true, ack_every, true, n / 20);
        show(
            &format!("full (+IPv4 header, ICRC seal and verify of 4 KiB) selective+fast ack every {ack_every}"),
            &t,
        );
    }
}
