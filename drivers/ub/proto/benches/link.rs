// SPDX-License-Identifier: GPL-2.0
//! Link engine throughput: two engines on one core, A streaming DLLDPs to
//! B over a wire with bit errors (BER 0 and 1e-5), B answering with
//! credits, ACKs and retry requests. Prints flits per second through the
//! pair, and goodput efficiency (payload bytes / wire bytes on A→B) next
//! to the framing's theoretical maximum for the same packet sizes.
//!
//! `cargo bench -p ub-proto --bench link` (a `harness = false` bench).
//!
//! Besides wall-clock flits/s it prints flits per second of *on-CPU* time
//! of the bench thread (Linux `/proc/thread-self/schedstat`; wall time
//! elsewhere): on a shared machine that figure is what compares two
//! builds, since waiting for a core is not counted.

#![allow(
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::float_arithmetic,
    missing_docs,
    reason = "benchmark code"
)]

use std::time::Instant;

use ub_proto::link::engine::{Delivery, Link, LinkConfig, RxSink, TxPacket, TxSource};
use ub_proto::link::frame::{Mode, Plength, FLIT_BYTES};
use ub_proto::link::retry::RetrySlot;
use ub_proto::link::DllState;

/// Endless packets of the given sizes, round robin over `vls` VLs.
struct Source {
    payload: Vec<u8>,
    sizes: Vec<usize>,
    next: [usize; 16],
    vls: u8,
    sent: u64,
    limit: u64,
}

impl TxSource for Source {
    fn ready(&self) -> u16 {
        if self.sent >= self.limit {
            0
        } else {
            (1u16 << self.vls) - 1
        }
    }
    fn head(&self, vl: u8) -> Option<TxPacket<'_>> {
        let i = self.next[usize::from(vl)];
        let len = self.sizes[i % self.sizes.len()];
        Some(TxPacket {
            cfg: 6,
            rt: 0,
            error_flag: false,
            payload: &self.payload[..len],
        })
    }
    fn pop(&mut self, vl: u8) {
        self.next[usize::from(vl)] += 1;
        self.sent += 1;
    }
}

struct Idle;
impl TxSource for Idle {
    fn ready(&self) -> u16 {
        0
    }
    fn head(&self, _vl: u8) -> Option<TxPacket<'_>> {
        None
    }
    fn pop(&mut self, _vl: u8) {}
}

#[derive(Default)]
struct Count {
    bytes: u64,
    packets: u64,
}
impl RxSink for Count {
    fn deliver(&mut self, d: &Delivery<'_>) {
        self.bytes += d.data.len() as u64;
        self.packets += u64::from(d.last);
    }
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    /// Bits until the next error at `ber`.
    fn gap(&mut self, ber: f64) -> u64 {
        if ber <= 0.0 {
            return u64::MAX;
        }
        let u = ((self.next() >> 11) as f64 + 1.0) / (1u64 << 53) as f64;
        (u.ln() / (1.0 - ber).ln()) as u64 + 1
    }
}

/// Nanoseconds this thread has run on a CPU, if the kernel tells.
fn on_cpu_ns() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    s.split_whitespace().next()?.parse().ok()
}

struct Result {
    flits_per_s: f64,
    flits_per_cpu_s: f64,
    efficiency: f64,
    theoretical: f64,
    retransmitted: u64,
    crc_errors: u64,
}

fn run(sizes: &[usize], ber: f64, packets: u64, mode: Mode) -> Result {
    let mut cfg = LinkConfig {
        mode,
        ..LinkConfig::default()
    };
    cfg.caps.vl_enable = 0b11;
    cfg.rx_buffer_bytes = 4 << 20;
    cfg.credit_return_threshold = 64;
    let depth = 4096;
    let mut a = Link::new(cfg, vec![RetrySlot::EMPTY; depth]).unwrap();
    let mut b = Link::new(cfg, vec![RetrySlot::EMPTY; depth]).unwrap();
    let mut src = Source {
        payload: (0..16384u32).map(|i| (i * 7) as u8).collect(),
        sizes: sizes.to_vec(),
        next: [0; 16],
        vls: 2,
        sent: 0,
        limit: packets,
    };
    let (mut ca, mut cb) = (Count::default(), Count::default());
    // A→B in-flight window: one transmit call of up to 64 flits, the
    // go-back-N cost of each error.
    let mut buf_a = vec![0u8; 64 * FLIT_BYTES];
    let mut buf_b = vec![0u8; 256 * FLIT_BYTES];
    let mut rng = Rng(0x1234_5678_9abc_def1);
    let mut next_err = rng.gap(ber);
    let mut now = 0u64;
    a.link_up(now);
    b.link_up(now);
    while a.state() != DllState::Normal || b.state() != DllState::Normal {
        now += 1000;
        let n = a.poll_transmit(now, &mut buf_a, &mut Idle);
        b.handle_receive(now, &buf_a[..n], &mut cb);
        let m = b.poll_transmit(now, &mut buf_b, &mut Idle);
        a.handle_receive(now, &buf_b[..m], &mut ca);
    }
    let wire0 = a.counters().tx_flits;
    let start = Instant::now();
    let cpu0 = on_cpu_ns();
    // 1 flit = 1 ns of simulated time (a 160 Gb/s link).
    while cb.packets < packets {
        let n = a.poll_transmit(now, &mut buf_a, &mut src);
        let bits = n as u64 * 8;
        let mut pos = 0;
        while pos + next_err <= bits {
            pos += next_err;
            let bit = (pos - 1) as usize;
            buf_a[bit / 8] ^= 1 << (bit % 8);
            next_err = rng.gap(ber);
        }
        next_err -= bits - pos;
        b.handle_receive(now, &buf_a[..n], &mut cb);
        let m = b.poll_transmit(now, &mut buf_b, &mut Idle);
        a.handle_receive(now, &buf_b[..m], &mut ca);
        now += (n / FLIT_BYTES).max(1) as u64;
        if let Some(d) = a.poll_timeout() {
            if d <= now {
                a.handle_timeout(now);
            }
        }
        if let Some(d) = b.poll_timeout() {
            if d <= now {
                b.handle_timeout(now);
            }
        }
    }
    let secs = start.elapsed().as_secs_f64();
    let cpu_secs = match (cpu0, on_cpu_ns()) {
        (Some(a), Some(b)) if b > a => (b - a) as f64 / 1e9,
        _ => secs,
    };
    if std::env::var("LINK_BENCH_DEBUG").is_ok() {
        eprintln!("a {:?}\nb {:?}", a.counters(), b.counters());
    }
    let wire = a.counters().tx_flits - wire0;
    let payload: u64 = cb.bytes;
    let theoretical_wire: u64 = (0..packets)
        .map(|i| {
            let len = sizes[(i / 2) as usize % sizes.len()];
            let (_, l) = Plength::encode(mode, len).unwrap();
            l.flits() as u64
        })
        .sum();
    let theo_payload: u64 = (0..packets)
        .map(|i| sizes[(i / 2) as usize % sizes.len()] as u64)
        .sum();
    Result {
        flits_per_s: wire as f64 / secs,
        flits_per_cpu_s: wire as f64 / cpu_secs,
        efficiency: payload as f64 / (wire * FLIT_BYTES as u64) as f64,
        theoretical: theo_payload as f64 / (theoretical_wire * FLIT_BYTES as u64) as f64,
        retransmitted: a.counters().tx_retransmitted_flits,
        crc_errors: b.counters().rx_crc_errors,
    }
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let scale = if quick { 10 } else { 1 };
    let mut mix = Vec::new();
    let mut r = Rng(42);
    for _ in 0..101 {
        mix.push((r.next() % 10_142) as usize + 1);
    }
    let cases: [(&str, Vec<usize>); 6] = [
        ("64 B", vec![64]),
        ("256 B", vec![256]),
        ("1 KiB", vec![1024]),
        ("4 KiB", vec![4096]),
        ("max 10142 B", vec![10_142]),
        ("random 1-10142 B", mix),
    ];
    println!(
        "{:<18} {:>9} {:>14} {:>14} {:>11} {:>11} {:>9} {:>10} {:>8}",
        "packets",
        "BER",
        "flits/s",
        "cpu flits/s",
        "goodput",
        "theory",
        "gap",
        "retx flits",
        "CRC err"
    );
    // LINK_BENCH_ONLY=<name> runs one packet size (for profiling).
    let only = std::env::var("LINK_BENCH_ONLY").ok();
    for (name, sizes) in &cases {
        if only.as_deref().is_some_and(|o| o != *name) {
            continue;
        }
        let avg: usize = sizes.iter().sum::<usize>() / sizes.len();
        let packets = (40_000_000 / (avg as u64 + 40) / scale).max(1000);
        for (ber, mode) in [(0.0, Mode::Crc), (1e-5, Mode::Crc), (0.0, Mode::NonCrc)] {
            let r = run(sizes, ber, packets, mode);
            let tag = if mode == Mode::NonCrc {
                " (no CRC)"
            } else {
                ""
            };
            println!(
                "{:<18} {:>9.0e} {:>12.2} M {:>12.2} M {:>10.3}% {:>10.3}% {:>8.3}% {:>10} {:>8}{}",
                name,
                ber,
                r.flits_per_s / 1e6,
                r.flits_per_cpu_s / 1e6,
                r.efficiency * 100.0,
                r.theoretical * 100.0,
                (r.theoretical - r.efficiency) * 100.0,
                r.retransmitted,
                r.crc_errors,
                tag
            );
        }
    }
}
