// SPDX-License-Identifier: GPL-2.0
//! Property tests: two engines over a simulated wire with bit errors and
//! block erasures; random DLLDP sizes (1–512 flits) on several VLs, random
//! cell sizes, grains and credit modes. Every DLLDP must arrive exactly
//! once, in order per VL, byte-identical, with its ERROR_FLAG; after
//! quiescence every credit and retry-buffer counter must be back to its
//! initial value.
//!
//! Seeded and deterministic: a failure prints its seed.

#![allow(
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::float_arithmetic,
    reason = "test code: a panic is a test failure"
)]

mod link_harness;

use link_harness::{random_packet, Pkt, Rng, Sim};
use ub_proto::link::engine::{Event, LinkConfig, RetryReqState};
use ub_proto::link::frame::Mode;

#[derive(Clone, Copy, Debug)]
struct Case {
    seed: u64,
    ber: f64,
    drop_p: f64,
    mode: Mode,
    packets: usize,
    /// Steps between encapsulation mode switches (0: never).
    switch_every: u64,
}

fn random_mask(rng: &mut Rng, mandatory: u8) -> u8 {
    mandatory | (rng.next_u64() as u8)
}

fn random_config(rng: &mut Rng, mode: Mode, vls: u16) -> LinkConfig {
    let mut cfg = LinkConfig {
        mode,
        ..LinkConfig::default()
    };
    // Mandatory capabilities always present (spec §4.4), others random.
    cfg.caps.flow_ctrl_size = random_mask(rng, 0x08);
    cfg.caps.data_ack_grain = random_mask(rng, 0x20);
    cfg.caps.ctrl_ack_grain = random_mask(rng, 0x01);
    for vl in 0..16 {
        cfg.caps.data_credit_grain[vl] = random_mask(rng, 0x04);
        cfg.caps.ctrl_credit_grain[vl] = random_mask(rng, 0x01);
    }
    cfg.caps.vl_enable = vls;
    cfg.caps.rxbuf_vl_share = rng.chance(0.5);
    cfg.want_sharing = rng.chance(0.5);
    for vl in 0..16 {
        cfg.share_reserve[vl] = rng.range(0, 200) as u16;
    }
    cfg.caps.packet_min_interval = if rng.chance(0.3) {
        rng.range(1, 8) as u8
    } else {
        0
    };
    cfg.rx_buffer_bytes = rng.range(48 * 1024, 512 * 1024) * u64::from(vls.count_ones());
    cfg.credit_return_threshold = rng.range(8, 512) as u32;
    cfg.lockout_threshold = rng.range(2, 8) as u16;
    cfg.ack_threshold = rng.range(16, 512) as u16;
    cfg.ack_delay_flits = rng.range(32, 512) as u32;
    cfg.wait_timeout_ns = 5_000;
    cfg
}

fn run(case: Case) {
    let Case {
        seed,
        ber,
        drop_p,
        mode,
        packets,
        switch_every,
    } = case;
    let mut rng = Rng::new(seed);
    let vls_a = (1u16 << rng.range(1, 4)) - 1;
    let vls_b = (1u16 << rng.range(1, 4)) - 1;
    let cfg_a = random_config(&mut rng, mode, vls_a);
    let cfg_b = random_config(&mut rng, mode, vls_b);
    let depth_a = rng.range(64, 1024) as usize;
    let depth_b = rng.range(64, 1024) as usize;
    let mut sim = Sim::new(cfg_a, cfg_b, depth_a, depth_b, seed ^ 0xABCD);
    sim.ab.ber = ber;
    sim.ba.ber = ber;
    sim.ab.drop_p = drop_p;
    sim.ba.drop_p = drop_p;
    assert!(sim.bring_up(200_000), "seed {seed}: link did not come up");
    let vls = u64::from((vls_a & vls_b).count_ones());
    let mut sent_a: [Vec<Pkt>; 16] = Default::default();
    let mut sent_b: [Vec<Pkt>; 16] = Default::default();
    for i in 0..packets {
        let vl = rng.below(vls) as u8;
        let max_flits = if rng.chance(0.3) { 512 } else { 40 };
        // With mode switches, sizes must fit both modes.
        let size_mode = if switch_every > 0 { Mode::Crc } else { mode };
        let p = random_packet(&mut rng, size_mode, max_flits, 0.05);
        if i % 3 == 2 {
            sent_b[usize::from(vl)].push(p.clone());
            sim.qb.push(vl, p);
        } else {
            sent_a[usize::from(vl)].push(p.clone());
            sim.qa.push(vl, p);
        }
    }
    let total_a: usize = sent_a.iter().map(Vec::len).sum();
    let total_b: usize = sent_b.iter().map(Vec::len).sum();
    let mut switches = 0u64;
    let mut steps = 0u64;
    while steps < 3_000_000
        && ((sim.cb.delivered as usize) < total_a || (sim.ca.delivered as usize) < total_b)
    {
        sim.step();
        steps += 1;
        if switch_every > 0 && steps % switch_every == 0 {
            let side = if rng.chance(0.5) {
                &mut sim.a
            } else {
                &mut sim.b
            };
            if side.request_mode_change().is_ok() {
                switches += 1;
            }
        }
    }
    if switch_every > 0 {
        assert!(switches > 0, "seed {seed}: no mode switch happened");
    }
    assert!(
        (sim.cb.delivered as usize) == total_a && (sim.ca.delivered as usize) == total_b,
        "seed {seed}: stuck after {steps} steps: delivered {}/{} and {}/{}; a {:?} {:?}, b {:?} {:?}\na {:?}\nb {:?}\na {:?} {:?} {:?}\nb {:?} {:?} {:?}\nev a {:?}\nev b {:?}",
        sim.cb.delivered,
        total_a,
        sim.ca.delivered,
        total_b,
        sim.a.state(),
        sim.a.retry_req_state(),
        sim.b.state(),
        sim.b.retry_req_state(),
        sim.a.counters(),
        sim.b.counters(),
        sim.a.tx_credits(),
        sim.a.retry_buffer(),
        sim.a.rx_credits(),
        sim.b.tx_credits(),
        sim.b.retry_buffer(),
        sim.b.rx_credits(),
        &sim.events_a[sim.events_a.len().saturating_sub(12)..],
        &sim.events_b[sim.events_b.len().saturating_sub(12)..],
    );
    // Quiescence: let every ACK and credit return settle.
    sim.ab.ber = 0.0;
    sim.ba.ber = 0.0;
    sim.ab.drop_p = 0.0;
    sim.ba.drop_p = 0.0;
    sim.run_while(20_000, |_| true);
    for vl in 0..16 {
        assert_eq!(
            sim.cb.got[vl], sent_a[vl],
            "seed {seed}: a→b VL {vl} differs"
        );
        assert_eq!(
            sim.ca.got[vl], sent_b[vl],
            "seed {seed}: b→a VL {vl} differs"
        );
    }
    // The per-link counters agree with what was sent and delivered.
    for (name, tx, rx, sent) in [
        ("a→b", &sim.a, &sim.b, &sent_a),
        ("b→a", &sim.b, &sim.a, &sent_b),
    ] {
        let n = sent.iter().map(Vec::len).sum::<usize>() as u64;
        let bytes: u64 = sent.iter().flatten().map(|p| p.payload.len() as u64).sum();
        let poisoned = sent.iter().flatten().filter(|p| p.error_flag).count() as u64;
        let (t, r) = (tx.counters(), rx.counters());
        assert_eq!((t.tx_dlldps, r.rx_dlldps), (n, n), "seed {seed} {name}");
        assert_eq!(
            (t.tx_payload_bytes, r.rx_payload_bytes),
            (bytes, bytes),
            "seed {seed} {name}"
        );
        assert_eq!(r.rx_poisoned, poisoned, "seed {seed} {name}");
        assert_eq!(r.rx_dropped_dlldps, 0, "seed {seed} {name}");
        assert!(t.tx_flits >= r.rx_blocks, "seed {seed} {name}");
        if ber == 0.0 && drop_p == 0.0 {
            assert_eq!(t.tx_retransmitted_flits, 0, "seed {seed} {name}");
            assert_eq!(r.rx_crc_errors, 0, "seed {seed} {name}");
        }
    }
    for (name, me, peer) in [("a", &sim.a, &sim.b), ("b", &sim.b, &sim.a)] {
        assert_eq!(
            me.retry_req_state(),
            RetryReqState::Normal,
            "seed {seed} {name}"
        );
        assert!(
            me.tx_credits().is_full(),
            "seed {seed} {name}: credits {:?}\npeer rx {:?}\n{:?}\n{:?}",
            me.tx_credits(),
            peer.rx_credits(),
            me.counters(),
            peer.counters()
        );
        assert_eq!(
            me.counters().credits_spent,
            me.counters().credits_received,
            "seed {seed} {name}"
        );
        assert_eq!(
            me.counters().credits_received,
            peer.counters().credits_returned,
            "seed {seed} {name}"
        );
        assert!(
            me.rx_credits().is_idle(),
            "seed {seed} {name}: {:?}",
            me.rx_credits()
        );
        let rb = me.retry_buffer();
        assert!(!rb.retransmitting(), "seed {seed} {name}");
        // Everything still held is exactly the ACK-only Crd_Acks the peer
        // owes acknowledgements for (these are never acknowledged on
        // their own; see link.rst).
        assert_eq!(
            u32::from(rb.used()),
            peer.owed_acks(),
            "seed {seed} {name}: retry buffer {rb:?} vs peer owed {}",
            peer.owed_acks()
        );
        assert_eq!(
            peer.owed_acks(),
            peer.owed_pure_acks(),
            "seed {seed} {name}"
        );
        assert!(
            rb.used() <= 64,
            "seed {seed} {name}: {} flits held",
            rb.used()
        );
        assert_eq!(
            me.counters().errors,
            0,
            "seed {seed} {name}: {:?}",
            me.counters()
        );
    }
    for e in sim.events_a.iter().chain(&sim.events_b) {
        assert!(
            !matches!(
                e,
                Event::Protocol(_)
                    | Event::CreditOverflow(_)
                    | Event::ReceiveOverflow(_)
                    | Event::RetryError
                    | Event::CreditReturnTimeout
            ),
            "seed {seed}: {e:?}"
        );
    }
}

/// Runs `n` seeds (`LINK_SIM_SCALE` multiplies `n` for longer soak runs).
fn cases(seed0: u64, n: u64, ber: f64, drop_p: f64, mode: Mode, packets: usize) {
    let scale = std::env::var("LINK_SIM_SCALE")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(1);
    let only: Option<u64> = std::env::var("LINK_SIM_SEED")
        .ok()
        .and_then(|v| v.parse().ok());
    for s in 0..n * scale {
        if only.is_some_and(|o| o != seed0 + s) {
            continue;
        }
        run(Case {
            seed: seed0 + s,
            ber,
            drop_p,
            mode,
            packets,
            switch_every: 0,
        });
    }
}

#[test]
fn lossless_ber_0() {
    cases(1000, 6, 0.0, 0.0, Mode::Crc, 150);
}

#[test]
fn lossless_ber_1e6() {
    cases(2000, 6, 1e-6, 0.0, Mode::Crc, 150);
}

#[test]
fn lossless_ber_1e5_with_drops() {
    cases(3000, 8, 1e-5, 0.002, Mode::Crc, 150);
}

#[test]
fn lossless_ber_1e4_with_drops() {
    cases(4000, 10, 1e-4, 0.005, Mode::Crc, 60);
}

#[test]
fn lossless_non_crc_mode_clean() {
    cases(6000, 2, 0.0, 0.0, Mode::NonCrc, 100);
}

#[test]
fn lossless_non_crc_mode_fec_errors() {
    cases(5000, 4, 1e-5, 0.002, Mode::NonCrc, 100);
}

/// Encapsulation mode switches (Block_Mode_Chg handshake) at random points
/// of the traffic, with bit errors and erasures.
#[test]
fn lossless_across_mode_switches() {
    let scale = std::env::var("LINK_SIM_SCALE")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(1);
    for s in 0..4 * scale {
        run(Case {
            seed: 7000 + s,
            ber: if s % 2 == 0 { 1e-5 } else { 0.0 },
            drop_p: 0.001,
            mode: if s % 3 == 0 { Mode::NonCrc } else { Mode::Crc },
            packets: 250,
            switch_every: 40 + 13 * (s % 8),
        });
    }
}
