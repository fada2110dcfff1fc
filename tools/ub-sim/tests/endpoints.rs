// SPDX-License-Identifier: GPL-2.0
//! Issue 8, acceptance 1: two host endpoints over the multipath network,
//! both directions at once: RTP in all four retransmission combinations
//! (per-flow for the fast ones, sprayed per packet otherwise), a TPG of
//! four channels with per-packet spraying, 1 B to 1 MiB messages at 0, 1
//! and 5 % loss with duplication, reordering (four paths of different
//! delays) and corruption: every message arrives exactly once, in order,
//! intact. (CTP over lossless hops and UTP: `delivery.rs`.)

#![allow(clippy::unwrap_used, clippy::indexing_slicing, reason = "test code")]

use ub_proto::transport::tpg::TpgPolicy;
use ub_proto::transport::RetransmitMode;
use ub_sim::{four_paths, run, Lb, Report, Scenario};

const COMBOS: [(RetransmitMode, bool); 4] = [
    (RetransmitMode::GoBackN, true),
    (RetransmitMode::GoBackN, false),
    (RetransmitMode::Selective, true),
    (RetransmitMode::Selective, false),
];

fn sizes(big: bool, salt: u32) -> Vec<u32> {
    let mut v = vec![1, 2, 3, 4095, 4096, 4097, 65_536, 12_345 + salt];
    if big {
        v.push(1 << 20);
    }
    v
}

fn ids(d: &[(u64, u64)], sorted: bool) -> Vec<u64> {
    let mut v: Vec<u64> = d.iter().map(|x| x.0).collect();
    if sorted {
        v.sort_unstable();
    }
    v
}

fn check(r: &Report, n: usize, m: usize, group: bool, what: &str) {
    assert!(r.errors.is_empty(), "{what}: {:?}", r.errors.first());
    assert!(!r.channel_error && !r.stalled, "{what}: error or stall");
    // A group keeps order per member; each member's order is checked by
    // the simulator (messages are matched to what that member carried).
    assert_eq!(
        ids(&r.delivered, group),
        (0..n as u64).collect::<Vec<_>>(),
        "{what}: A to B"
    );
    assert_eq!(
        ids(&r.reverse_delivered, group),
        (0..m as u64).collect::<Vec<_>>(),
        "{what}: B to A"
    );
    assert_eq!(
        (r.acked, r.reverse_acked),
        (n as u64, m as u64),
        "{what}: acks"
    );
}

#[test]
fn four_combinations_both_directions_at_0_1_5_percent_loss() {
    let mut corrupted = 0;
    for (mode, fast) in COMBOS {
        for (i, loss) in [0.0, 0.01, 0.05].into_iter().enumerate() {
            let lb = if fast { Lb::PerFlow } else { Lb::PerPacket };
            let mut sc = Scenario::new(mode, fast, lb, four_paths(loss, 0.02, 0.01));
            sc.ack_loss = loss;
            sc.seed = 11 + i as u64;
            sc.messages = sizes(i == 1, 0);
            sc.reverse_messages = sizes(i == 1, 7);
            let (n, m) = (sc.messages.len(), sc.reverse_messages.len());
            let r = run(sc);
            let what = format!("{mode:?} fast={fast} {lb:?} loss={loss}");
            eprintln!(
                "{what}: {} data packets, {} retransmitted, {} RTOs, {} ICRC/header drops",
                r.data_packets, r.tx.retransmitted, r.tx.timeouts, r.icrc_drops
            );
            check(&r, n, m, false, &what);
            if loss > 0.0 {
                assert!(r.tx.retransmitted > 0, "{what}: nothing retransmitted");
            }
            corrupted += r.icrc_drops;
        }
    }
    assert!(corrupted > 0, "corruption never reached the ICRC check");
}

#[test]
fn tpg_of_four_sprayed_per_packet_both_directions() {
    for loss in [0.0, 0.01, 0.05] {
        let mut sc = Scenario::new(
            RetransmitMode::Selective,
            false,
            Lb::PerPacket,
            four_paths(loss, 0.02, 0.01),
        );
        sc.channels = 4;
        sc.tpg_policy = TpgPolicy::RoundRobin;
        sc.ack_loss = loss;
        sc.messages = (0..24).map(|i| 1 + i * 7919).collect();
        sc.reverse_messages = (0..24).map(|i| 1 + i * 6007).collect();
        let (n, m) = (sc.messages.len(), sc.reverse_messages.len());
        let r = run(sc);
        check(&r, n, m, true, &format!("TPG loss={loss}"));
        assert_eq!(r.per_channel_packets.len(), 4);
        assert!(
            r.per_channel_packets.iter().all(|&p| p > 0),
            "{:?}",
            r.per_channel_packets
        );
    }
}
