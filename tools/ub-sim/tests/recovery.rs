// SPDX-License-Identifier: GPL-2.0
//! Acceptance 2–4 in the simulator: the §6 walk-through with exact packet
//! assertions, MarkPSN recovery before the RTO, bitmap exhaustion without
//! needless retransmission, and congestion control.

#![allow(clippy::unwrap_used, clippy::indexing_slicing, reason = "test code")]

use std::collections::HashMap;

use ub_proto::transport::cc::{CcAlgorithm, CcConfig};
use ub_proto::transport::hdr::CetphKind;
use ub_proto::transport::{RetransmitMode, RtoMode, StaticRto};
use ub_sim::{four_paths, run, Dir, Fate, Lb, PathCfg, Scenario, TraceEntry, What};

const RTO_NS: u64 = 512_000;

fn data(t: &TraceEntry) -> Option<(u32, bool)> {
    match (&t.dir, &t.what, t.fate) {
        (Dir::AtoB, What::Data { psn, rtx, .. }, _) => Some((*psn, *rtx)),
        _ => None,
    }
}

fn responses(trace: &[TraceEntry]) -> Vec<(u64, What)> {
    trace
        .iter()
        .filter(|t| t.dir == Dir::BtoA && t.what != What::Setup)
        .map(|t| (t.t, t.what.clone()))
        .collect()
}

/// Per-packet LB, selective retransmission, no fast retransmission; PSN
/// m+1 is lost. The receiver answers TPSACK(PSN = m, bitmap 1,0,1); the
/// sender waits for the RTO, retransmits m+1 only, and the receiver answers
/// TPACK(m+3).
#[test]
fn walk_through_selective_without_fast_retransmit() {
    let m: u32 = 0xff_fffe; // m+2 wraps to 0
    let p = |k: u32| (m + k) & 0xff_ffff;
    // Equal delays keep the arrival order of the sprayed packets fixed.
    let mut sc = Scenario::new(
        RetransmitMode::Selective,
        false,
        Lb::PerPacket,
        (0..4).map(|_| PathCfg::clean(2000)).collect(),
    );
    sc.initial_psn = m;
    sc.messages = vec![4096; 4];
    sc.trace = true;
    let lost = p(1);
    sc.filter = Some(Box::new(
        move |_, dir, w| matches!((dir, w), (Dir::AtoB, What::Data { psn, rtx: false, .. }) if *psn == lost),
    ));
    let r = run(sc);
    assert!(r.errors.is_empty() && r.delivered.len() == 4);
    for t in &r.trace {
        eprintln!(
            "{:>8} ns {:?} {:?} {:?} path {}",
            t.t, t.dir, t.fate, t.what, t.path
        );
    }

    // Data packets, in order: m, m+1 (lost), m+2, m+3, then m+1 again.
    let d: Vec<(u32, bool)> = r.trace.iter().filter_map(data).collect();
    assert_eq!(
        d,
        vec![
            (p(0), false),
            (p(1), false),
            (p(2), false),
            (p(3), false),
            (p(1), true)
        ]
    );
    let filtered: Vec<_> = r
        .trace
        .iter()
        .filter(|t| t.fate == Fate::Filtered)
        .collect();
    assert_eq!(filtered.len(), 1);

    // Responses, exactly.
    let resp = responses(&r.trace);
    let kinds: Vec<What> = resp.iter().map(|x| x.1.clone()).collect();
    assert_eq!(
        kinds,
        vec![
            What::Ack(p(0)),
            What::Sack {
                psn: p(0),
                max_rcv: p(2),
                bits: vec![true, false, true]
            },
            What::Sack {
                psn: p(0),
                max_rcv: p(3),
                bits: vec![true, false, true, true]
            },
            What::Ack(p(3)),
        ]
    );
    // The sender waited for the RTO: armed by the TPACK(m) progress, fired
    // RTO later; nothing was resent on the TPSACKs.
    let t_ack_m = resp[0].0;
    let t_rtx = r
        .trace
        .iter()
        .find(|t| data(t) == Some((p(1), true)))
        .unwrap()
        .t;
    let t_sack = resp[1].0;
    assert!(t_rtx > t_sack + RTO_NS / 2, "retransmitted before the RTO");
    assert!(
        t_rtx >= t_ack_m + RTO_NS && t_rtx < t_ack_m + RTO_NS + 10_000,
        "t_rtx {t_rtx} t_ack {t_ack_m}"
    );
    assert_eq!(r.tx.timeouts, 1);
    assert_eq!(r.tx.retransmitted, 1);
}

/// Selective + fast retransmission, per-flow: the first retransmission of
/// a lost packet is lost again. MarkPSN detects it when a packet sent after
/// the retransmission is acknowledged, long before the RTO.
#[test]
fn markpsn_recovers_a_lost_retransmission_before_the_rto() {
    let mut sc = Scenario::new(
        RetransmitMode::Selective,
        true,
        Lb::PerFlow,
        vec![PathCfg::clean(2000)],
    );
    sc.messages = vec![4096; 200];
    sc.trace = true;
    let first = sc.initial_psn;
    let victim = (first + 10) & 0xff_ffff;
    let mut copies = 0;
    sc.filter = Some(Box::new(move |_, dir, w| match (dir, w) {
        (Dir::AtoB, What::Data { psn, .. }) if *psn == victim && copies < 2 => {
            copies += 1;
            true
        }
        _ => false,
    }));
    let r = run(sc);
    assert!(r.errors.is_empty() && r.delivered.len() == 200);
    let sends: Vec<&TraceEntry> = r
        .trace
        .iter()
        .filter(|t| data(t).is_some_and(|d| d.0 == victim))
        .collect();
    assert_eq!(
        sends.len(),
        3,
        "original, lost retransmission, recovering retransmission"
    );
    let t0 = sends[0].t;
    let t2 = sends[2].t;
    assert_eq!(r.tx.timeouts, 0, "no RTO needed");
    assert!(
        t2 - t0 < RTO_NS / 10,
        "recovered after {} ns, RTO is {RTO_NS} ns",
        t2 - t0
    );
    eprintln!("MarkPSN: lost packet first sent at {t0} ns, recovered by the 2nd retransmission at {t2} ns ({} us after; RTO {} us)", (t2 - t0) / 1000, RTO_NS / 1000);
    // And with MarkPSN tracking off (fast retransmit disabled) the same
    // loss needs the RTO.
    let mut sc = Scenario::new(
        RetransmitMode::Selective,
        false,
        Lb::PerFlow,
        vec![PathCfg::clean(2000)],
    );
    sc.messages = vec![4096; 200];
    let mut copies = 0;
    sc.filter = Some(Box::new(move |_, dir, w| match (dir, w) {
        (Dir::AtoB, What::Data { psn, .. }) if *psn == victim && copies < 2 => {
            copies += 1;
            true
        }
        _ => false,
    }));
    let r = run(sc);
    assert!(r.errors.is_empty() && r.tx.timeouts >= 2);
}

/// The receiver can record only 64 out-of-order packets although W = 256:
/// the rest are dropped (MaxRcvPSN still rises) and the sender resends
/// exactly what was dropped, once each.
#[test]
fn bitmap_exhaustion_drops_without_needless_retransmission() {
    // A long path: a whole window is in flight before the hole is repaired.
    let mut sc = Scenario::new(
        RetransmitMode::Selective,
        true,
        Lb::PerFlow,
        vec![PathCfg::clean(50_000)],
    );
    sc.rx_slots = 64;
    sc.messages = vec![4096; 300];
    sc.trace = true;
    let victim = sc.initial_psn;
    sc.filter = Some(Box::new(
        move |_, dir, w| matches!((dir, w), (Dir::AtoB, What::Data { psn, rtx: false, .. }) if *psn == victim),
    ));
    let r = run(sc);
    assert!(r.errors.is_empty() && r.delivered.len() == 300);
    assert!(r.rx.unrecordable > 0, "the bitmap was never exhausted");
    let mut per_psn: HashMap<u32, u32> = HashMap::new();
    for (psn, rtx) in r.trace.iter().filter_map(data) {
        if rtx {
            *per_psn.entry(psn).or_default() += 1;
        }
    }
    assert!(
        per_psn.values().all(|&c| c == 1),
        "a PSN was retransmitted twice"
    );
    assert_eq!(
        r.tx.retransmitted,
        1 + r.rx.unrecordable,
        "only lost and dropped packets are resent"
    );
    assert_eq!(
        r.rx.duplicates, 0,
        "no retransmission of a packet the receiver held"
    );
    eprintln!(
        "bitmap exhaustion: {} packets unrecordable, {} retransmissions",
        r.rx.unrecordable, r.tx.retransmitted
    );
}

fn congested_paths(mark: bool) -> Vec<PathCfg> {
    // The NIC is 4x faster than one path: a single path congests.
    (0..4)
        .map(|i| PathCfg {
            rate: 12.5,
            mark_threshold: if mark { Some(64 * 1024) } else { None },
            ..PathCfg::clean(1000 + 500 * i)
        })
        .collect()
}

#[test]
fn caqm_and_ldcp_shrink_the_window_on_marks_and_still_deliver_exactly_once() {
    for (alg, cetph) in [
        (CcAlgorithm::Caqm { hint_unit: 32 }, CetphKind::Caqm),
        (CcAlgorithm::Ldcp, CetphKind::Ldcp),
    ] {
        let mut sc = Scenario::new(
            RetransmitMode::Selective,
            true,
            Lb::PerFlow,
            congested_paths(true),
        );
        sc.nic_rate = 50.0;
        sc.cc = CcConfig {
            alg,
            initial_cw: 1 << 20,
            max_cw: 4 << 20,
            mtu: 4096,
            path_wide_permille: 0,
        };
        sc.cetph = Some(cetph);
        sc.messages = vec![65_536; 64];
        let r = run(sc);
        assert!(r.errors.is_empty() && r.delivered.len() == 64, "{alg:?}");
        assert!(r.cc_decreases > 0, "{alg:?}: never decreased");
        assert!(r.final_cw < 1 << 20, "{alg:?}: cw {}", r.final_cw);
    }
}

/// Per-packet spraying over four paths of which one is congested: with the
/// path-wide threshold the channel ignores the marks of that one path; with
/// the threshold off it shrinks its window.
#[test]
fn per_packet_lb_reacts_only_to_path_wide_congestion() {
    let run_with = |permille| {
        let mut paths = congested_paths(false);
        paths[2].rate = 1.0;
        paths[2].mark_threshold = Some(16 * 1024);
        let mut sc = Scenario::new(RetransmitMode::Selective, false, Lb::PerPacket, paths);
        sc.nic_rate = 12.5;
        sc.cc = CcConfig {
            alg: CcAlgorithm::Ldcp,
            initial_cw: 1 << 20,
            max_cw: 1 << 20,
            mtu: 4096,
            path_wide_permille: permille,
        };
        sc.cetph = Some(CetphKind::Ldcp);
        sc.messages = vec![65_536; 32];
        sc.rto = RtoMode::Static(StaticRto::Ms16);
        let r = run(sc);
        assert!(r.errors.is_empty() && r.delivered.len() == 32);
        r.cc_decreases
    };
    assert!(run_with(0) > 0);
    assert_eq!(run_with(500), 0);
}

#[test]
fn window_never_exceeds_its_limit() {
    let mut sc = Scenario::new(
        RetransmitMode::GoBackN,
        false,
        Lb::PerPacket,
        four_paths(0.01, 0.0, 0.0),
    );
    sc.window = 32;
    sc.messages = vec![65_536; 20];
    let r = run(sc);
    assert!(r.errors.is_empty() && r.delivered.len() == 20);
    assert_eq!(r.max_outstanding, 32);
}
