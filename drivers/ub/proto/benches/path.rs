// SPDX-License-Identifier: GPL-2.0
//! Packets per second per core of the whole RTP data path: sender and
//! receiver engines, the network header (IPv4 format) written and parsed,
//! and the ICRC sealed and checked, for 64 B, 4 KiB and 64 KiB messages at
//! MTU 4 KiB, next to the engines alone in the same run.
//!
//! `cargo bench -p ub-proto --bench path` (`-- --quick` for a short run;
//! `PATH_BENCH_PROFILE=<message bytes>` runs only that case, long, with the
//! carry-less-multiply backend, for a profiler).
//!
//! The ICRC runs on each CRC-32 backend a host has ([`Crc32Update`]): the
//! carry-less-multiply one of `ub-host-crc`, which host programs use, and
//! the portable slicing code of `ub_proto::crc`, the reference, which is
//! also what a kernel without an optimised `crc32_le` runs at. The kernel
//! backend can only run in the kernel. Figures are per core: on-CPU time of
//! this thread (Linux schedstat), so other work on the machine does not
//! count; the best of three runs. "engines" is what `benches/transport.rs`
//! measures: post, segmentation, RTPH write and parse, PSN check,
//! reassembly, responses and their processing.

#![allow(
    clippy::unwrap_used,
    clippy::indexing_slicing,
    clippy::float_arithmetic,
    clippy::panic,
    reason = "benchmark code on the host"
)]

use std::hint::black_box;
use std::time::Instant;

use ub_proto::crc::{crc32_le_portable, Crc32Update};
use ub_proto::net::cci::Cci;
use ub_proto::net::npi::Npi;
use ub_proto::net::nth::{IpHdr, IpNth, NetHeader};
use ub_proto::transport::cc::CcConfig;
use ub_proto::transport::hdr::{BitmapSize, Rtph, RTPH_LEN};
use ub_proto::transport::msg::{finish_packet, open_packet, strip, Reassembler};
use ub_proto::transport::psn::Psn;
use ub_proto::transport::rx::{RtpReceiver, RxConfig, RxMode, RxStorage, RxVerdict, SlotMeta};
use ub_proto::transport::tx::{RtpSender, TxConfig, TxSlot};
use ub_proto::transport::{RetransmitMode, RtoMode, StaticRto};

const MTU: u32 = 4096;
/// Largest message: the reassembler's bound.
const MAX_MSG: u32 = 64 << 10;
/// One response per this many packets.
const ACK_EVERY: u16 = 8;

/// Nanoseconds this thread has spent on a CPU (Linux schedstat).
fn cpu_ns() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    s.split_whitespace().next()?.parse().ok()
}

/// What a packet goes through between the two engines.
#[derive(Clone, Copy)]
enum Path {
    /// The transport part only, handed over as is.
    Engines,
    /// Network header and ICRC on both sides, the ICRC by this backend.
    Full(Crc32Update),
}

/// Seconds this thread spent on a CPU since `cpu0` (read at `start`), or
/// the wall time where schedstat, which advances in scheduler ticks, is
/// too coarse for the run or missing.
fn seconds(cpu0: Option<u64>, start: Instant) -> f64 {
    let wall = start.elapsed().as_secs_f64();
    cpu_ns()
        .zip(cpu0)
        .map(|(b, a)| (b - a) as f64 / 1e9)
        .filter(|&cpu| cpu > 0.05)
        .unwrap_or(wall)
}

/// Packets per second per core of `packets` packets of messages of
/// `msg_len` bytes through `path`.
fn run(msg_len: u32, path: Path, packets: u64) -> f64 {
    let mut slots = vec![TxSlot::default(); 256];
    let mut tx = RtpSender::new(
        TxConfig {
            mode: RetransmitMode::Selective,
            fast_retransmit: true,
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
        &mut slots[..],
    )
    .unwrap();
    let mut bitmap = [0u64; 4];
    let mut meta = vec![SlotMeta::default(); 256];
    let mut data = vec![0u8; 256 * MTU as usize];
    let mut rx = RtpReceiver::new(
        RxConfig {
            mode: RxMode::for_combination(RetransmitMode::Selective, true),
            local_tpn: 2,
            peer_tpn: 1,
            initial_psn: Psn::new(0xff_0000),
            ooo_window: 256,
            ack_every: ACK_EVERY,
            ack_delay_ns: 1_000_000,
            sack_threshold: 1,
            sack_max: BitmapSize::B1024,
            cc: None,
        },
        RxStorage {
            bitmap: &mut bitmap[..],
            meta: &mut meta[..],
            data: &mut data[..],
        },
    )
    .unwrap();
    let mut re = Reassembler::new(0, MTU, MAX_MSG);
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
    // The payload is whatever the buffer holds: the path under test does
    // not copy it (a device would move it by DMA), but the ICRC covers it.
    let mut wire = vec![0xa5u8; 2 * MTU as usize];
    let mut ack = [0u8; 256];
    let payload = vec![0x5au8; MTU as usize];
    let mut token = 0u64;
    let mut delivered = 0u64;
    let cpu0 = cpu_ns();
    let start = Instant::now();
    for i in 0..packets {
        let now = i * 100;
        if tx.can_post() {
            tx.post(token, msg_len).unwrap();
            token += 1;
        }
        let Some(p) = tx.poll_transmit(now, &mut wire[hoff..]).unwrap() else {
            panic!("sender stalled at packet {i}");
        };
        let (h, body) = match path {
            Path::Engines => (
                Rtph::parse(&wire[hoff..]).unwrap(),
                &payload[..p.len as usize],
            ),
            Path::Full(crc32) => {
                let tp_len = p.hdr_len + p.len as usize + usize::from(p.padding);
                let n = finish_packet(crc32, &net, &mut wire, tp_len).unwrap();
                let (_, tp) = open_packet(crc32, net.class(), &wire[..n]).unwrap();
                let h = Rtph::parse(tp).unwrap();
                (h, strip(tp, RTPH_LEN, h.padding).unwrap())
            }
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
    let secs = seconds(cpu0, start);
    assert_eq!(delivered, packets);
    packets as f64 / secs
}

/// The best of `reps` runs.
fn best(reps: u32, f: impl Fn() -> f64) -> f64 {
    (0..reps).map(|_| f()).fold(0.0, f64::max)
}

/// Packets per second, and nanoseconds per packet.
fn cell(rate: f64) -> String {
    format!("{:>6.2} M ({:>5.0} ns)", rate / 1e6, 1e9 / rate)
}

/// Bytes per second of one backend over `len` bytes, on-CPU time.
fn crc_rate(crc32: Crc32Update, len: usize, quick: bool) -> f64 {
    let buf: Vec<u8> = (0..len).map(|i| (i * 31 + 7) as u8).collect();
    let reps = ((if quick { 100_000_000 } else { 1_000_000_000 }) / len).max(100);
    let mut best = 0.0f64;
    for _ in 0..3 {
        let cpu0 = cpu_ns();
        let start = Instant::now();
        let mut reg = 0u32;
        for _ in 0..reps {
            reg = crc32(black_box(reg), black_box(&buf));
        }
        black_box(reg);
        let secs = seconds(cpu0, start);
        best = best.max((reps * len) as f64 / secs);
    }
    best
}

fn main() {
    if let Ok(only) = std::env::var("PATH_BENCH_PROFILE") {
        // Profiling aid: one case, long, nothing else.
        let len: u32 = only.parse().unwrap();
        let r = run(len, Path::Full(ub_host_crc::crc32_le), 3_000_000);
        println!("{}", cell(r));
        return;
    }
    let quick = std::env::args().any(|a| a == "--quick");
    let scale = if quick { 10 } else { 1 };
    let backends: [(&str, Crc32Update); 2] = [
        ("clmul (ub-host-crc)", ub_host_crc::crc32_le),
        ("portable", crc32_le_portable),
    ];
    println!(
        "RTP data path, one core: selective + fast retransmit, a response every {ACK_EVERY} \
         packets, MTU 4 KiB, no loss; packets/s per core (on-CPU time, best of 3)"
    );
    print!("{:<10} {:>20}", "message", "engines only");
    for (name, _) in &backends {
        print!("   {:>28}", format!("+ header + ICRC, {name}"));
    }
    println!();
    for (label, len) in [("64 B", 64u32), ("4 KiB", 4096), ("64 KiB", 64 << 10)] {
        let packet = u64::from(len.min(MTU));
        let engines_packets = 1_000_000 / scale;
        let full_packets = (400_000_000 / packet).clamp(20_000, 1_000_000) / scale;
        let engines = best(3, || run(len, Path::Engines, engines_packets));
        print!("{label:<10} {:>20}", cell(engines));
        for (_, crc32) in backends {
            let full = best(3, || run(len, Path::Full(crc32), full_packets));
            print!("   {:>28}", cell(full));
        }
        println!();
    }
    println!("CRC-32 backends alone, GB/s per core:");
    for (name, crc32) in backends {
        print!("  {name:<20}");
        for len in [64usize, 4096, 64 << 10] {
            print!("  {:>6} B: {:>6.2}", len, crc_rate(crc32, len, quick) / 1e9);
        }
        println!();
    }
}
