// SPDX-License-Identifier: GPL-2.0
//! The endpoint's call order in the simulator: events are drained before
//! packets are polled, so an acknowledgement that retires a full window
//! releases the next packets at once instead of after a stale timer.
//!
//! Before ub-sim ran on the endpoint it polled the sender first and took
//! the events after: the slots of the retired window were still taken, so
//! nothing was sent until something else woke the sender. With selective
//! retransmission without fast retransmit and one lost packet, the window
//! fills while the RTO runs, the RTO's retransmission retires all of it,
//! and the next message waited about another 430 us (worst latency 952 us
//! instead of 524 us). This test failed that way before the rebuild.

#![allow(clippy::unwrap_used, clippy::indexing_slicing, reason = "test code")]

use ub_proto::transport::RetransmitMode;
use ub_sim::{four_paths, run, Dir, Lb, Scenario, What};

const RTO_NS: u64 = 512_000;

#[test]
fn an_ack_that_retires_a_full_window_releases_the_next_packets_at_once() {
    let mut sc = Scenario::new(
        RetransmitMode::Selective,
        false,
        Lb::PerFlow,
        four_paths(0.0, 0.0, 0.0),
    );
    // The experiment's setting: 64 KiB messages over four paths.
    sc.messages = vec![65_536; 64];
    let victim = (sc.initial_psn + 300) & 0xff_ffff;
    sc.filter = Some(Box::new(
        move |_, dir, w| matches!((dir, w), (Dir::AtoB, What::Data { psn, rtx: false, .. }) if *psn == victim),
    ));
    let r = run(sc);
    assert!(r.errors.is_empty() && r.delivered.len() == 64);
    assert_eq!(r.tx.timeouts, 1, "one RTO repairs the loss");
    assert_eq!(r.max_outstanding, 256, "the window filled during the RTO");
    let worst = r.latencies.iter().max().copied().unwrap();
    eprintln!(
        "worst message latency, one loss repaired by the RTO: {} us",
        worst / 1000
    );
    // The RTO, plus a round trip and the message itself.
    assert!(worst < RTO_NS + 30_000, "worst latency {worst} ns");
}
