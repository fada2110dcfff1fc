// SPDX-License-Identifier: GPL-2.0
//! The transition trace: every state machine of the engine reports each
//! move `from → to` with its spec section, through one hook.
#![allow(
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::float_arithmetic,
    reason = "test code: a panic is a test failure"
)]

mod link_harness;

use std::sync::Mutex;

use link_harness::Sim;
use ub_proto::link::engine::{LinkConfig, Machine, Transition};

static SEEN: Mutex<Vec<Transition>> = Mutex::new(Vec::new());

fn record(t: &Transition) {
    SEEN.lock().unwrap().push(*t);
}

fn moves(seen: &[Transition], m: Machine) -> Vec<(&'static str, &'static str)> {
    seen.iter()
        .filter(|t| t.machine == m)
        .map(|t| (t.from, t.to))
        .collect()
}

/// Bring-up as the trace shows it: the DLL walks Disabled → Param_Init →
/// Credit_Init → Normal, RETRY_REQ_SM aligns (REQ → WAIT → NORMAL) before
/// the Init exchange moves, and RETRY_ACK_SM answers the peer's set.
#[test]
fn bring_up_is_traced_machine_by_machine() {
    let mut sim = Sim::new(LinkConfig::default(), LinkConfig::default(), 512, 512, 1);
    sim.a.set_tracer(Some(record));
    assert!(sim.bring_up(10_000));
    sim.a.set_tracer(None);
    let seen = SEEN.lock().unwrap().clone();
    assert_eq!(
        moves(&seen, Machine::Dll),
        [
            ("DLL_Disabled", "DLL_Param_Init"),
            ("DLL_Param_Init", "DLL_Credit_Init"),
            ("DLL_Credit_Init", "DLL_Normal"),
        ]
    );
    let req = moves(&seen, Machine::RetryReq);
    assert_eq!(
        req[..3],
        [("NORMAL", "REQ"), ("REQ", "WAIT"), ("WAIT", "NORMAL")]
    );
    assert!(moves(&seen, Machine::RetryAck).contains(&("NORMAL", "ACK")));
    let init = moves(&seen, Machine::Init);
    assert_eq!(init.first(), Some(&("IDLE", "PARAMS")));
    assert_eq!(init.last().map(|m| m.1), Some("DONE"));
    // Every move names its section, and no move is a non-move.
    assert!(seen
        .iter()
        .all(|t| t.section.starts_with("§4.") && t.from != t.to));
    // Nothing is traced once the hook is removed.
    let n = seen.len();
    sim.run_while(100, |_| true);
    assert_eq!(SEEN.lock().unwrap().len(), n);
}
