// SPDX-License-Identifier: GPL-2.0
//! Per-packet processing cost of the RTP sender + receiver with no loss:
//! 4 KiB messages at MTU 4 KiB (one packet per message), one response per
//! packet (the worst case) and coalesced per 8 packets.
//!
//! `cargo bench -p ub-proto --bench transport`
//!
//! "transport" covers post, segmentation, RTPH write, RTPH parse, PSN
//! check, reassembly, response write/parse, acknowledgement and completion.
//! The whole path (network header and ICRC added) is `benches/path.rs`.
//!
//! "selective RTO burst" measures the cost per retransmission when an RTO
//! queues every outstanding packet (1024, 8192, 65536 of them), for this
//! sender and for the one before the retransmission cursor
//! (`reference/tx_before.rs`), which rescanned from the oldest
//! unacknowledged PSN for each retransmission. Run only that part with
//! `cargo bench -p ub-proto --bench transport -- rto`.

#![allow(
    clippy::unwrap_used,
    clippy::indexing_slicing,
    clippy::float_arithmetic,
    reason = "benchmark code on the host"
)]

use std::hint::black_box;
use std::time::Instant;

use ub_proto::net::cci::Cci;
use ub_proto::transport::cc::CcConfig;
use ub_proto::transport::hdr::{BitmapSize, Rtph};
use ub_proto::transport::msg::Reassembler;
use ub_proto::transport::psn::Psn;
use ub_proto::transport::rx::{RtpReceiver, RxConfig, RxMode, RxStorage, RxVerdict, SlotMeta};
use ub_proto::transport::tx::{RtpSender, TxConfig, TxSlot};
use ub_proto::transport::{RetransmitMode, RtoMode, StaticRto};

const MTU: u32 = 4096;

#[path = "reference/tx_before.rs"]
mod tx_before;

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

fn bench(mode: RetransmitMode, fast: bool, ack_every: u16, packets: u64) -> Rate {
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
        &mut slots[..],
    )
    .unwrap();
    let mut bitmap = [0u64; 4];
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
            bitmap: &mut bitmap[..],
            meta: &mut meta[..],
            data: &mut data[..],
        },
    )
    .unwrap();
    let mut re = Reassembler::new(0, MTU, MTU);
    let mut wire = vec![0xa5u8; 8192];
    let mut ack = [0u8; 256];
    let payload = vec![0x5au8; MTU as usize];
    let mut delivered = 0u64;
    let cpu0 = cpu_ns();
    let start = Instant::now();
    for i in 0..packets {
        let now = i * 330;
        tx.post(i, MTU).unwrap();
        let p = tx.poll_transmit(now, &mut wire).unwrap().unwrap();
        let h = Rtph::parse(&wire).unwrap();
        let body = &payload[..p.len as usize];
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

/// One selective RTO burst over `outstanding` packets: wall nanoseconds per
/// retransmission, for the sender built by `$new` (the current one or the
/// reference), minimum over `reps` runs (the minimum drops the runs other
/// work on the machine interrupted; schedstat is too coarse for bursts of
/// microseconds).
macro_rules! rto_burst {
    ($tx:ident, $new:expr, $slot:expr, $outstanding:expr, $reps:expr) => {{
        let n: u32 = $outstanding;
        let mut best = f64::INFINITY;
        for _ in 0..$reps {
            let mut slots = vec![$slot; n as usize];
            let mut $tx = $new(&mut slots[..]);
            $tx.post(1, n * 64).unwrap();
            let mut out = [0u8; 64];
            let mut sent = 0;
            while $tx.poll_transmit(0, &mut out).unwrap().is_some() {
                sent += 1;
            }
            assert_eq!(sent, n);
            let rto = $tx.poll_timeout().unwrap();
            $tx.handle_timeout(rto);
            let start = Instant::now();
            let mut resent = 0;
            while let Some(p) = $tx.poll_transmit(rto, &mut out).unwrap() {
                black_box(p);
                resent += 1;
            }
            let ns = start.elapsed().as_nanos() as f64;
            assert_eq!(resent, n);
            best = best.min(ns / f64::from(n));
        }
        best
    }};
}

fn burst_cfg(window: u32) -> TxConfig {
    TxConfig {
        mode: RetransmitMode::Selective,
        fast_retransmit: true,
        rto: RtoMode::Static(StaticRto::Us512),
        retry_limit: 7,
        max_window: window,
        mtu: 64,
        local_tpn: 1,
        peer_tpn: 2,
        initial_psn: Psn::new(0xff_0000),
        overhead: 20,
        cc: CcConfig::NONE,
        cetph: None,
    }
}

fn rto_bursts() {
    println!("selective RTO burst: cost per retransmission (min of runs)");
    let mut first: Option<(f64, f64)> = None;
    for n in [1024u32, 8192, 65536] {
        let after = rto_burst!(
            tx,
            |s| RtpSender::new(burst_cfg(n), s).unwrap(),
            TxSlot::default(),
            n,
            20
        );
        let c = burst_cfg(n);
        let before = rto_burst!(
            tx,
            |s| tx_before::RtpSender::new(
                tx_before::TxConfig {
                    mode: c.mode,
                    fast_retransmit: c.fast_retransmit,
                    rto: c.rto,
                    retry_limit: c.retry_limit,
                    max_window: c.max_window,
                    mtu: c.mtu,
                    local_tpn: c.local_tpn,
                    peer_tpn: c.peer_tpn,
                    initial_psn: c.initial_psn,
                    overhead: c.overhead,
                    cc: c.cc,
                    cetph: c.cetph,
                },
                s
            )
            .unwrap(),
            tx_before::TxSlot::default(),
            n,
            match n {
                1024 => 10,
                8192 => 3,
                _ => 1,
            }
        );
        let (b0, a0) = *first.get_or_insert((before, after));
        println!(
            "  {n:>6} outstanding: before {before:>9.1} ns ({:>5.1}x the 1024 figure), \
             after {after:>6.1} ns ({:>4.1}x); before/after {:>7.1}x",
            before / b0,
            after / a0,
            before / after
        );
    }
}

fn main() {
    rto_bursts();
    if std::env::args().any(|a| a == "rto") {
        return;
    }
    let n = 2_000_000;
    println!("RTP sender + receiver, 4 KiB messages, MTU 4 KiB, no loss, one core");
    for (mode, fast, name) in [
        (RetransmitMode::GoBackN, true, "GBN+fast"),
        (RetransmitMode::GoBackN, false, "GBN"),
        (RetransmitMode::Selective, true, "selective+fast"),
        (RetransmitMode::Selective, false, "selective"),
    ] {
        for ack_every in [1u16, 8] {
            let t = bench(mode, fast, ack_every, n);
            show(&format!("transport {name:<15} ack every {ack_every}"), &t);
        }
    }
}
