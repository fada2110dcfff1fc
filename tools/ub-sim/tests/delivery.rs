// SPDX-License-Identifier: GPL-2.0
//! Acceptance 1: exactly-once, in-order delivery of messages from 1 B to
//! 1 MiB for the four retransmission combinations, under loss, reordering
//! over four paths, duplication, corruption, ACK loss, tail loss and loss
//! of retransmissions; CTP over lossless hops; UTP never retransmits.

#![allow(clippy::unwrap_used, clippy::indexing_slicing, reason = "test code")]

use std::collections::HashSet;

use ub_proto::transport::RetransmitMode;
use ub_sim::dgram::{run_datagrams, Kind};
use ub_sim::rng::Rng;
use ub_sim::{four_paths, run, Dir, Lb, PathCfg, Report, Scenario, What};

const COMBOS: [(RetransmitMode, bool); 4] = [
    (RetransmitMode::GoBackN, true),
    (RetransmitMode::GoBackN, false),
    (RetransmitMode::Selective, true),
    (RetransmitMode::Selective, false),
];

fn sizes() -> Vec<u32> {
    vec![
        1,
        2,
        3,
        100,
        4095,
        4096,
        4097,
        8192,
        65_536,
        1 << 20,
        5,
        12_345,
    ]
}

fn check(r: &Report, sc_msgs: usize, what: &str) {
    assert!(
        r.errors.is_empty(),
        "{what}: {:?}",
        &r.errors[..r.errors.len().min(3)]
    );
    assert!(!r.channel_error, "{what}: channel error");
    let ids: Vec<u64> = r.delivered.iter().map(|d| d.0).collect();
    assert_eq!(
        ids,
        (0..sc_msgs as u64).collect::<Vec<_>>(),
        "{what}: not exactly once in order"
    );
    assert_eq!(r.acked, sc_msgs as u64, "{what}: not all acknowledged");
    assert!(r.max_outstanding <= 256, "{what}: window exceeded");
}

fn exactly_once(mode: RetransmitMode, fast: bool) {
    for lb in [Lb::PerFlow, Lb::PerPacket] {
        for (loss, dup, corrupt, ack_loss) in [
            // The middle of the range is covered by `ub-sim sweep`.
            (0.0, 0.0, 0.0, 0.0),
            (0.05, 0.02, 0.02, 0.05),
        ] {
            let mut sc = Scenario::new(mode, fast, lb, four_paths(loss, dup, corrupt));
            sc.ack_loss = ack_loss;
            sc.messages = sizes();
            sc.seed = 7;
            let n = sc.messages.len();
            let t = std::time::Instant::now();
            let r = run(sc);
            let what = format!("{mode:?} fast={fast} {lb:?} loss={loss}");
            eprintln!(
                "{what}: {} data packets, {} retransmitted, {} RTOs, {} ICRC drops, {:?}",
                r.data_packets,
                r.tx.retransmitted,
                r.tx.timeouts,
                r.icrc_drops,
                t.elapsed()
            );
            check(&r, n, &what);
            if corrupt > 0.0 {
                assert!(r.icrc_drops > 0, "{what}: corruption was never caught");
            }
            if loss > 0.0 {
                assert!(r.tx.retransmitted > 0, "{what}");
            }
        }
    }
}

#[test]
fn exactly_once_gbn_fast() {
    exactly_once(RetransmitMode::GoBackN, true);
}

#[test]
fn exactly_once_gbn() {
    exactly_once(RetransmitMode::GoBackN, false);
}

#[test]
fn exactly_once_selective_fast() {
    exactly_once(RetransmitMode::Selective, true);
}

#[test]
fn exactly_once_selective() {
    exactly_once(RetransmitMode::Selective, false);
}

#[test]
fn tail_loss_and_loss_of_retransmissions() {
    for (mode, fast) in COMBOS {
        for lb in [Lb::PerFlow, Lb::PerPacket] {
            let mut sc = Scenario::new(mode, fast, lb, four_paths(0.0, 0.0, 0.0));
            sc.messages = vec![4096 * 3, 10, 4096 * 2 + 1];
            let n = sc.messages.len();
            // PSNs: 3 + 1 + 3 packets from the initial PSN (which wraps).
            let first = sc.initial_psn;
            let tail = (first + 6) & 0xff_ffff;
            let mid = (first + 1) & 0xff_ffff;
            let mut rng = Rng::new(3);
            let mut tail_drops = 0;
            sc.filter = Some(Box::new(move |_, dir, w| match (dir, w) {
                // Lose the very last packet twice (tail loss, then its
                // retransmission), and a middle packet's first copy.
                (Dir::AtoB, What::Data { psn, .. }) if *psn == tail && tail_drops < 2 => {
                    tail_drops += 1;
                    true
                }
                (
                    Dir::AtoB,
                    What::Data {
                        psn, rtx: false, ..
                    },
                ) if *psn == mid => true,
                // Lose 30 % of all other retransmissions and of all responses.
                (Dir::AtoB, What::Data { rtx: true, .. }) => rng.chance(0.3),
                (Dir::BtoA, _) => rng.chance(0.3),
                _ => false,
            }));
            let r = run(sc);
            check(&r, n, &format!("{mode:?} fast={fast} {lb:?} tail"));
            assert!(r.tx.timeouts >= 1, "tail loss needs the RTO");
        }
    }
}

#[test]
fn ctp_over_lossless_hops_delivers_everything_in_order_once() {
    let mut paths = four_paths(0.05, 0.0, 0.05);
    for p in &mut paths {
        p.lossless = true;
    }
    let r = run_datagrams(Kind::Ctp, &paths, 2000, 256, 5);
    assert_eq!(r.transmissions, 2000, "CTP never retransmits");
    assert_eq!(r.delivered, (0..2000).collect::<Vec<_>>());
    assert_eq!(r.icrc_drops, 0);
    // Over unprotected hops CTP loses packets and the ICRC drops corrupted ones.
    let r = run_datagrams(Kind::Ctp, &four_paths(0.05, 0.0, 0.05), 2000, 256, 5);
    assert!(r.delivered.len() < 2000 && r.icrc_drops > 0);
}

#[test]
fn utp_never_retransmits() {
    let paths = vec![PathCfg {
        loss: 0.1,
        dup: 0.05,
        corrupt: 0.05,
        ..PathCfg::clean(1000)
    }];
    let r = run_datagrams(Kind::Utp, &paths, 1000, 64, 9);
    assert_eq!(r.transmissions, 1000);
    let unique: HashSet<u32> = r.delivered.iter().copied().collect();
    assert!(unique.len() < 1000, "losses are not repaired");
    assert!(
        r.delivered.len() > unique.len(),
        "network duplicates pass through UTP"
    );
    assert!(r.icrc_drops > 0);
}

/// CTP congestion control: a 400 Gb/s sender into a 100 Gb/s bottleneck.
/// Without CNP feedback the queue grows with every packet; with DCQCN the
/// queue stays short and the bottleneck stays busy.
#[test]
fn ctp_cnp_rate_control_bounds_the_bottleneck_queue() {
    let open = ub_sim::dgram::run_ctp_congestion(6_000, 4096, 64 * 1024, false);
    let cc = ub_sim::dgram::run_ctp_congestion(6_000, 4096, 64 * 1024, true);
    eprintln!("without CC: {open:?}\nwith CC: {cc:?}");
    assert_eq!(open.delivered, 6_000);
    assert_eq!(cc.delivered, 6_000);
    assert!(cc.cnps > 0);
    assert!(
        open.max_queue_ns > 1_000_000,
        "open loop queue {}",
        open.max_queue_ns
    );
    assert!(
        cc.max_queue_ns * 10 < open.max_queue_ns,
        "CC queue {}",
        cc.max_queue_ns
    );
    assert!(
        cc.throughput > 0.7 * 12.5,
        "CC throughput {} B/ns",
        cc.throughput
    );
}
