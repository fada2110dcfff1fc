// SPDX-License-Identifier: GPL-2.0
//! Deterministic random-input test of the receive path (the "fuzz target"
//! of issue 3): well over a million inputs of arbitrary bytes, CRC-valid
//! garbage blocks and mutated real traffic, fed to engines in every DLL
//! state. Nothing may panic; malformed input is counted and dropped.
//!
//! `LINK_FUZZ_SCALE=n` multiplies the number of inputs.
#![allow(
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a panic is a test failure"
)]

mod link_harness;

use link_harness::{random_packet, Queues, Rng, Sim, TestLink};
use ub_proto::link::ctrl::ControlBlock;
use ub_proto::link::engine::{LinkConfig, NullSink};
use ub_proto::link::frame::{seal_block, Lph, Mode, Plength, FLIT_BYTES};

/// Engines to start from: disabled, waiting in Param_Init, up, and up
/// with a DLLDP half received.
fn templates(mode: Mode) -> Vec<TestLink> {
    let cfg = LinkConfig {
        mode,
        ..LinkConfig::default()
    };
    let mut v = Vec::new();
    let mut sim = Sim::new(cfg, cfg, 256, 256, 1);
    v.push(sim.b.clone());
    sim.link_up();
    sim.b
        .poll_transmit(0, &mut [0u8; 4096], &mut Queues::default());
    v.push(sim.b.clone());
    let mut sim = Sim::new(cfg, cfg, 256, 256, 2);
    assert!(sim.bring_up(10_000));
    sim.run_while(100, |_| true);
    v.push(sim.b.clone());
    let mut rng = Rng::new(3);
    let mut p = random_packet(&mut rng, mode, 512, 0.0);
    p.payload.resize(5000, 1);
    sim.qa.push(0, p);
    sim.run_while(100_000, |s| s.cb.pieces == 0);
    v.push(sim.b.clone());
    v
}

/// A stream of real blocks (to mutate).
fn real_traffic(mode: Mode) -> Vec<u8> {
    let cfg = LinkConfig {
        mode,
        ..LinkConfig::default()
    };
    let mut sim = Sim::new(cfg, cfg, 512, 512, 4);
    assert!(sim.bring_up(10_000));
    let mut rng = Rng::new(4);
    let mut q = Queues::default();
    for i in 0..30 {
        q.push(i % 3, random_packet(&mut rng, mode, 64, 0.2));
    }
    let mut out = vec![0u8; 400 * 1024];
    let n = sim.a.poll_transmit(sim.now, &mut out, &mut q);
    out.truncate(n);
    out
}

fn random_bytes(rng: &mut Rng, len: usize) -> Vec<u8> {
    (0..len).map(|_| rng.next_u64() as u8).collect()
}

/// A block with random contents but a valid header shape and trailer, so
/// the decoders behind the CRC check are reached.
fn crc_valid_garbage(rng: &mut Rng, mode: Mode) -> Vec<u8> {
    let flits = match rng.below(4) {
        0 => 1,
        1 => 2,
        2 => rng.range(1, 32) as usize,
        _ => rng.range(1, 5) as usize,
    };
    let mut b = random_bytes(rng, flits * FLIT_BYTES);
    match rng.below(3) {
        0 => {
            // LCH with the fixed bits right and a random CTRL/SUB_CTRL.
            b[0] = (((flits - 1) as u8) << 2) | 0b10;
            b[1] = 0;
            if rng.below(2) == 0 {
                let kinds = [0x00u8, 0x01, 0x10, 0x11, 0x12, 0x24, 0x30, 0x41, 0x50, 0xc8];
                b[2] = kinds[rng.below(kinds.len() as u64) as usize];
            }
        }
        1 => {
            // LPH with a PLENGTH matching the flit count (random end code).
            let cfgs = [3u8, 4, 5, 6, 7, 9];
            b[1] = (b[1] & 0xf0) | cfgs[rng.below(6) as usize];
            let pl = Plength::from_raw((((flits - 1) as u16) << 5) | (rng.below(32) as u16));
            let lph = Lph::decode(&b[..4]).unwrap();
            let lph = Lph { plength: pl, ..lph };
            b[..4].copy_from_slice(&lph.encode());
        }
        _ => {}
    }
    seal_block(mode, &mut b, true, rng.below(8) == 0);
    b
}

fn feed(link: &mut TestLink, now: u64, data: &[u8], rng: &mut Rng) {
    let mut sink = NullSink;
    // Random chunking, so partial flits are exercised too.
    let mut rest = data;
    while !rest.is_empty() {
        let take = if rng.below(4) == 0 {
            rng.range(1, rest.len() as u64) as usize
        } else {
            rest.len()
        };
        let (a, b) = rest.split_at(take);
        link.handle_receive(now, a, &mut sink);
        rest = b;
    }
    if rng.below(16) == 0 {
        link.receive_error(now, 1);
    }
}

fn run(mode: Mode, inputs: u64, seed: u64) -> (u64, u64) {
    let templates = templates(mode);
    let traffic = real_traffic(mode);
    let mut rng = Rng::new(seed);
    let mut link = templates[0].clone();
    let mut out = vec![0u8; 64 * 1024];
    let mut q = Queues::default();
    let mut now = 1_000_000;
    let (mut bad, mut flits) = (0u64, 0u64);
    for i in 0..inputs {
        if i % 16 == 0 {
            let c = link.counters();
            bad += c.rx_crc_errors
                + c.rx_malformed
                + c.errors
                + c.rx_discarded_flits
                + c.rx_fec_errors;
            flits += c.rx_flits;
            link = templates[rng.below(templates.len() as u64) as usize].clone();
        }
        now += rng.below(2_000);
        let input = match rng.below(5) {
            0 => {
                let len = rng.range(0, 100) as usize;
                random_bytes(&mut rng, len)
            }
            1 | 2 => crc_valid_garbage(&mut rng, mode),
            3 => {
                // A slice of real traffic with a few bit flips.
                let start = rng.below(traffic.len() as u64 / 20) as usize * 20;
                let len = rng.range(1, 40) as usize * 20;
                let mut v = traffic[start..(start + len).min(traffic.len())].to_vec();
                for _ in 0..rng.below(3) {
                    if !v.is_empty() {
                        let bit = rng.below(v.len() as u64 * 8) as usize;
                        v[bit / 8] ^= 1 << (bit % 8);
                    }
                }
                v
            }
            _ => {
                // Retry blocks with random fields (bad RcvPtr etc.).
                let mut f = random_bytes(&mut rng, 20);
                f[0] = 0b10;
                f[1] = 0;
                f[2] = [0x10u8, 0x11, 0x12][rng.below(3) as usize];
                seal_block(mode, &mut f, true, false);
                f
            }
        };
        feed(&mut link, now, &input, &mut rng);
        if rng.below(4) == 0 {
            link.handle_timeout(now);
            let _ = link.poll_transmit(now, &mut out, &mut q);
            while link.poll_event().is_some() {}
        }
        if rng.below(64) == 0 {
            link.phy_retrained(now);
        }
    }
    (bad, flits)
}

#[test]
fn receive_path_survives_a_million_random_inputs() {
    let scale = std::env::var("LINK_FUZZ_SCALE")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(1);
    // Every input is counted somewhere: as a CRC error, a malformed header,
    // a protocol error, or flits discarded while not accepting blocks.
    let n = 800_000 * scale;
    let (bad, flits) = run(Mode::Crc, n, 11);
    assert!(
        bad > n / 2,
        "malformed input must be counted ({bad} of {n})"
    );
    assert!(flits > n);
    let n = 250_000 * scale;
    let (bad, _) = run(Mode::NonCrc, n, 12);
    assert!(
        bad > n / 4,
        "malformed input must be counted ({bad} of {n})"
    );
}

/// The decoders on their own, on arbitrary bytes of every length.
#[test]
fn decoders_never_panic() {
    let mut rng = Rng::new(99);
    for _ in 0..200_000 {
        let len = rng.range(0, 700) as usize;
        let b = random_bytes(&mut rng, len);
        for mode in [Mode::Crc, Mode::NonCrc] {
            let _ = ControlBlock::decode(mode, &b);
            let _ = ub_proto::link::frame::check_block(mode, &b, true);
            if let Ok(lph) = Lph::decode(&b) {
                let _ = lph.plength.decode(mode);
            }
        }
        let _ = ub_proto::link::frame::Lch::decode(&b);
    }
}
