// SPDX-License-Identifier: GPL-2.0
//! TP Channel Groups in the simulator: transactions (messages) spread over
//! member channels that differ by UDP source port, which per-flow hashing
//! maps to different paths; every message arrives exactly once.

#![allow(clippy::unwrap_used, clippy::indexing_slicing, reason = "test code")]

use std::collections::HashSet;

use ub_proto::transport::tpg::TpgPolicy;
use ub_proto::transport::RetransmitMode;
use ub_sim::{four_paths, run, Dir, Lb, Scenario, What};

#[test]
fn tpg_spreads_messages_over_members_and_paths() {
    for policy in [TpgPolicy::RoundRobin, TpgPolicy::LeastLoaded] {
        let mut sc = Scenario::new(
            RetransmitMode::Selective,
            true,
            Lb::PerFlow,
            four_paths(0.01, 0.0, 0.0),
        );
        sc.channels = 4;
        sc.tpg_policy = policy;
        sc.messages = (0..64).map(|i| 1 + i * 997).collect();
        sc.trace = true;
        let r = run(sc);
        assert!(r.errors.is_empty(), "{policy:?}: {:?}", r.errors.first());
        let ids: HashSet<u64> = r.delivered.iter().map(|d| d.0).collect();
        assert_eq!(ids.len(), 64);
        assert_eq!(r.delivered.len(), 64, "exactly once");
        assert!(
            r.per_channel_packets.iter().all(|&p| p > 0),
            "{policy:?}: {:?}",
            r.per_channel_packets
        );
        // Per-flow hashing of four different source ports uses several paths.
        let paths: HashSet<usize> = r
            .trace
            .iter()
            .filter(|t| t.dir == Dir::AtoB && matches!(t.what, What::Data { .. }))
            .map(|t| t.path)
            .collect();
        assert!(paths.len() >= 2, "{paths:?}");
    }
}
