// SPDX-License-Identifier: GPL-2.0
//! Host endpoint: in-band channel setup (including both ends opening at
//! once), teardown that frees the TPN and the memory, and ERR after
//! exactly the retry limit at the times the RTO sequence gives.

#![allow(clippy::unwrap_used, clippy::indexing_slicing, reason = "test code")]

mod host_common;

use host_common::*;
use ub_proto::host::{ChannelConfig, ErrorCause, Event, OpenError, RtoConfig, TransmitKind};
use ub_proto::transport::cm::ChannelState;
use ub_proto::transport::{RetransmitMode, RtoMode, StaticRto};

fn pair() -> (Net, Store, Store) {
    let (sa, sb) = (Store::default(), Store::default());
    let a = endpoint(0, Some(ChannelConfig::default_rtp()), sa.clone());
    let b = endpoint(1, Some(ChannelConfig::default_rtp()), sb.clone());
    (Net::new(a, b), sa, sb)
}

fn rts(net: &Net, s: usize, tpn: u32) -> bool {
    net.eps[s].state(tpn) == Some(ChannelState::Rts)
}

/// A pair with channel `key` from A to B set up (A in RTS, B told of it);
/// A's TPN.
fn established(key: u32) -> (Net, u32) {
    let (mut net, _, _) = pair();
    let ta = net.eps[0]
        .connect(0, addr(1, false), key, ChannelConfig::default_rtp())
        .unwrap();
    assert!(net.run_until(1_000_000, |n| rts(n, 0, ta) && n.incoming_tpn(1).is_some()));
    (net, ta)
}

#[test]
fn connect_reaches_rts_on_both_ends_and_carries_both_directions() {
    let (mut net, _, _) = pair();
    let ta = net.eps[0]
        .connect(0, addr(1, false), 7, ChannelConfig::default_rtp())
        .unwrap();
    // Messages may be queued before the channel is up.
    net.eps[0].send(ta, 1, 5000).unwrap();
    assert!(net.run_until(1_000_000, |n| n.incoming_tpn(1).is_some()));
    let tb = net.incoming_tpn(1).unwrap();
    net.eps[1].send(tb, 2, 9000).unwrap();
    assert!(net.run_until(2_000_000, |n| n.acked(0) == 1 && n.acked(1) == 1));
    assert!(rts(&net, 0, ta) && rts(&net, 1, tb));
    assert_eq!(net.eps[0].peer_tpn(ta), Some(tb));
    assert_eq!(net.eps[1].peer_tpn(tb), Some(ta));
    check_delivery(&net, 1, tb, &[(1, 5000)]);
    check_delivery(&net, 0, ta, &[(2, 9000)]);
    // Each end drew its own initial PSN and installed the peer's.
    assert!(net.has_event(0, |e| *e
        == Event::StateChanged {
            tpn: ta,
            state: ChannelState::Rts
        }));
}

#[test]
fn both_ends_opening_the_same_channel_converge_on_one() {
    let (mut net, _, _) = pair();
    let ta = net.eps[0]
        .connect(0, addr(1, false), 42, ChannelConfig::default_rtp())
        .unwrap();
    let tb = net.eps[1]
        .connect(0, addr(0, false), 42, ChannelConfig::default_rtp())
        .unwrap();
    net.eps[0].send(ta, 10, 100_000).unwrap();
    net.eps[1].send(tb, 20, 70_000).unwrap();
    assert!(net.run_until(5_000_000, |n| n.acked(0) == 1 && n.acked(1) == 1));
    assert_eq!(net.eps[0].channels(), 1, "A has one channel");
    assert_eq!(net.eps[1].channels(), 1, "B has one channel");
    assert_eq!(net.eps[0].peer_tpn(ta), Some(tb));
    assert_eq!(net.eps[1].peer_tpn(tb), Some(ta));
    assert!(rts(&net, 0, ta) && rts(&net, 1, tb));
    check_delivery(&net, 1, tb, &[(10, 100_000)]);
    check_delivery(&net, 0, ta, &[(20, 70_000)]);
    // Neither end reports an incoming channel: both asked for it.
    assert_eq!(net.incoming_tpn(0), None);
    assert_eq!(net.incoming_tpn(1), None);
}

#[test]
fn simultaneous_open_converges_even_when_the_first_requests_are_lost() {
    let (mut net, _, _) = pair();
    let mut lost = 0;
    net.filter = Some(Box::new(move |_, _, t| {
        if t.kind == TransmitKind::Setup && lost < 2 {
            lost += 1;
            return true;
        }
        false
    }));
    let ta = net.eps[0]
        .connect(0, addr(1, true), 9, ChannelConfig::default_rtp())
        .unwrap();
    let tb = net.eps[1]
        .connect(0, addr(0, true), 9, ChannelConfig::default_rtp())
        .unwrap();
    assert!(net.run_until(5_000_000, |n| rts(n, 0, ta) && rts(n, 1, tb)));
    assert_eq!(net.eps[0].peer_tpn(ta), Some(tb));
    assert_eq!(net.eps[1].peer_tpn(tb), Some(ta));
    assert_eq!((net.eps[0].channels(), net.eps[1].channels()), (1, 1));
}

#[test]
fn close_frees_the_tpn_and_the_memory_on_both_ends() {
    let (mut net, sa, sb) = pair();
    let base = (sa.live.get(), sb.live.get());
    let ta = net.eps[0]
        .connect(0, addr(1, false), 1, ChannelConfig::default_rtp())
        .unwrap();
    net.eps[0].send(ta, 1, 20_000).unwrap();
    assert!(net.run_until(2_000_000, |n| n.acked(0) == 1));
    let tb = net.incoming_tpn(1).unwrap();
    assert!(sa.live.get() > base.0 && sb.live.get() > base.1);
    net.eps[0].close(net.now, ta).unwrap();
    assert!(net.run_until(5_000_000, |n| n
        .has_event(0, |e| *e == Event::Closed { tpn: ta })
        && n.has_event(1, |e| *e == Event::Closed { tpn: tb })));
    assert_eq!(net.eps[0].state(ta), None);
    assert_eq!(net.eps[1].state(tb), None);
    assert_eq!((sa.live.get(), sb.live.get()), base, "channel memory freed");
    // The TPN is free again.
    let again = net.eps[0]
        .connect(net.now, addr(1, false), 2, ChannelConfig::default_rtp())
        .unwrap();
    assert_eq!(again, ta);
}

#[test]
fn a_key_being_closed_is_refused_as_closing_then_opens_again() {
    let (mut net, ta) = established(3);
    // Open: the key is taken. Closing: taken until the DREP comes.
    let again =
        |n: &mut Net| n.eps[0].connect(n.now, addr(1, false), 3, ChannelConfig::default_rtp());
    assert_eq!(again(&mut net), Err(OpenError::Exists));
    net.eps[0].close(net.now, ta).unwrap();
    assert_eq!(again(&mut net), Err(OpenError::Closing));
    assert!(net.run_until(net.now + 5_000_000, |n| n
        .has_event(0, |e| *e == Event::Closed { tpn: ta })));
    let t2 = again(&mut net).unwrap();
    assert!(net.run_until(net.now + 5_000_000, |n| rts(n, 0, t2)));
}

/// A closes; B's DREP is lost, and B (its end freed) opens the same key
/// at once: B's REQ finds A's end still waiting for the DREP. A ignores it
/// (a REJ would fail B's new channel); its DREQ retry closes its end, and
/// B's REQ retry opens the new channel.
#[test]
fn a_request_for_a_key_we_are_closing_waits_for_the_close() {
    let (mut net, ta) = established(4);
    let tb = net.incoming_tpn(1).unwrap();
    let mut drep_lost = false;
    net.filter = Some(Box::new(move |_, from, t| {
        if from == 1 && t.kind == TransmitKind::Setup && !drep_lost {
            drep_lost = true;
            return true;
        }
        false
    }));
    net.eps[0].close(net.now, ta).unwrap();
    assert!(net.run_until(net.now + 1_000_000, |n| n
        .has_event(1, |e| *e == Event::Closed { tpn: tb })));
    assert!(net.eps[0].state(ta).is_some(), "A still waits for its DREP");
    let t2 = net.eps[1]
        .connect(net.now, addr(0, false), 4, ChannelConfig::default_rtp())
        .unwrap();
    assert!(net.run_until(net.now + 5_000_000, |n| rts(n, 1, t2)));
    assert!(net.has_event(0, |e| *e == Event::Closed { tpn: ta }));
    assert!(!net.has_event(0, |e| matches!(e, Event::ChannelError { .. })));
    assert!(!net.has_event(1, |e| matches!(e, Event::ChannelError { .. })));
    let incoming = net.events[0]
        .iter()
        .filter(|(_, e)| matches!(e, Event::Incoming { key: 4, .. }))
        .count();
    assert_eq!(incoming, 1, "B's new channel reached A once");
}

#[test]
fn allocation_failure_is_a_typed_error_and_leaves_nothing() {
    let (mut net, sa, _) = pair();
    let base = sa.live.get();
    sa.fail.set(true);
    let r = net.eps[0].connect(0, addr(1, false), 1, ChannelConfig::default_rtp());
    assert_eq!(r, Err(ub_proto::host::OpenError::Alloc));
    assert_eq!(net.eps[0].channels(), 0);
    assert_eq!(sa.live.get(), base);
}

/// Every path dies after setup; one message is outstanding. The channel
/// retransmits exactly `retry_limit` times, at the RTO times, and reports
/// ERR (RetryLimit) at the expiry after the last retransmission.
fn retry_limit_case(rto: RtoConfig, mode: RetransmitMode, limit: u8) {
    let mut cfg = ChannelConfig::default_rtp();
    cfg.rto = rto;
    cfg.retry_limit = limit;
    cfg.mode = mode;
    let (sa, sb) = (Store::default(), Store::default());
    let a = endpoint(0, Some(cfg), sa);
    let b = endpoint(1, Some(cfg), sb);
    let mut net = Net::new(a, b);
    let ta = net.eps[0].connect(0, addr(1, false), 3, cfg).unwrap();
    assert!(net.run_until(1_000_000, |n| rts(n, 0, ta)));
    net.filter = Some(Box::new(|_, _, _| true));
    net.eps[0].send(ta, 1, 100).unwrap();
    assert!(net.run_until(u64::MAX / 4, |n| n
        .has_event(0, |e| matches!(e, Event::ChannelError { .. }))));
    let sends: Vec<u64> = net
        .trace
        .iter()
        .filter(|s| s.from == 0 && matches!(s.tx.kind, TransmitKind::Data { .. }))
        .map(|s| s.t)
        .collect();
    let mode = rto.mode().unwrap();
    let t0 = sends[0];
    let mut expect = vec![t0];
    let mut t = t0;
    for i in 0..=u32::from(limit) {
        t += mode.timeout_ns(i);
        expect.push(t);
    }
    let t_err = expect.pop().unwrap();
    assert_eq!(
        sends, expect,
        "original + {limit} retransmissions at the RTO times"
    );
    let (t, ev) = net.events[0]
        .iter()
        .find(|(_, e)| matches!(e, Event::ChannelError { .. }))
        .unwrap();
    assert_eq!(
        *ev,
        Event::ChannelError {
            tpn: ta,
            cause: ErrorCause::RetryLimit
        }
    );
    assert_eq!(*t, t_err, "ERR at the expiry after the last retransmission");
    assert_eq!(net.eps[0].state(ta), Some(ChannelState::Err));
    let k = net.eps[0].counters(ta).unwrap();
    assert_eq!(k.rto_expiries, u64::from(limit) + 1);
    assert_eq!(k.tx_packets, u64::from(limit) + 1);
    // Nothing more is sent, no timer is left.
    assert_eq!(net.eps[0].poll_timeout(), None);
}

#[test]
fn err_after_exactly_the_retry_limit_static_rto() {
    for mode in [RetransmitMode::GoBackN, RetransmitMode::Selective] {
        retry_limit_case(RtoConfig::Static { timeout_us: 512 }, mode, 3);
        retry_limit_case(RtoConfig::Static { timeout_us: 16_000 }, mode, 0);
    }
    assert_eq!(
        RtoConfig::Static { timeout_us: 512 }.mode(),
        Ok(RtoMode::Static(StaticRto::Us512))
    );
}

#[test]
fn err_after_exactly_the_retry_limit_dynamic_rto() {
    // The spec's example: N = 3, base 20 µs: 20, 160, 1280, 10240 µs ...
    for mode in [RetransmitMode::GoBackN, RetransmitMode::Selective] {
        retry_limit_case(RtoConfig::Dynamic { base_us: 20, n: 3 }, mode, 4);
        retry_limit_case(RtoConfig::Dynamic { base_us: 4, n: 1 }, mode, 7);
    }
}

#[test]
fn a_peer_that_never_answers_fails_the_setup() {
    let (mut net, _, _) = pair();
    net.filter = Some(Box::new(|_, _, _| true));
    let ta = net.eps[0]
        .connect(0, addr(1, false), 5, ChannelConfig::default_rtp())
        .unwrap();
    assert!(net.run_until(10_000_000, |n| n.has_event(0, |e| *e
        == Event::ChannelError {
            tpn: ta,
            cause: ErrorCause::SetupFailed
        })));
    // max_tries REQs, one retry interval apart.
    let reqs = net
        .trace
        .iter()
        .filter(|s| s.tx.kind == TransmitKind::Setup)
        .count();
    assert_eq!(reqs, 5);
}

#[test]
fn a_peer_that_restarts_and_opens_anew_resets_our_channel() {
    let (mut net, ta) = established(8);
    // B restarts: a fresh endpoint (new random PSNs) opens the same key.
    net.eps[1] = endpoint_seeded(1, Some(ChannelConfig::default_rtp()), Store::default(), 5);
    let tb = net.eps[1]
        .connect(net.now, addr(0, false), 8, ChannelConfig::default_rtp())
        .unwrap();
    assert!(net.run_until(net.now + 1_000_000, |n| n.has_event(0, |e| *e
        == Event::ChannelError {
            tpn: ta,
            cause: ErrorCause::PeerReset
        })));
    // The new attempt is refused until A closes its dead channel.
    assert!(net.run_until(net.now + 1_000_000, |n| n.eps[1].state(tb)
        == Some(ChannelState::Err)));
    net.eps[0].close(net.now, ta).unwrap();
    assert!(net.run_until(net.now + 10_000_000, |n| n
        .has_event(0, |e| *e == Event::Closed { tpn: ta })));
    // B's failed attempt is closed too (A's DREQ may have done it, as it
    // names the same TPN and key).
    if net.eps[1].close(net.now, tb).is_ok() {
        assert!(net.run_until(net.now + 10_000_000, |n| n
            .has_event(1, |e| *e == Event::Closed { tpn: tb })));
    }
    let tb = net.eps[1]
        .connect(net.now, addr(0, false), 8, ChannelConfig::default_rtp())
        .unwrap();
    assert!(net.run_until(net.now + 10_000_000, |n| rts(n, 1, tb)));
}

#[test]
fn suspended_channels_send_nothing_until_resumed() {
    let (mut net, _, _) = pair();
    let ta = net.eps[0]
        .connect(0, addr(1, false), 4, ChannelConfig::default_rtp())
        .unwrap();
    assert!(net.run_until(1_000_000, |n| rts(n, 0, ta)));
    let tb = net.incoming_tpn(1).unwrap();
    net.eps[0].suspend(ta).unwrap();
    net.eps[0].send(ta, 1, 10_000).unwrap();
    let t = net.now;
    net.run_until(t + 5_000_000, |_| false);
    assert_eq!(net.eps[0].state(ta), Some(ChannelState::Suspended));
    assert!(net
        .trace
        .iter()
        .all(|s| !matches!(s.tx.kind, TransmitKind::Data { .. })));
    assert!(net.has_event(0, |e| *e
        == Event::StateChanged {
            tpn: ta,
            state: ChannelState::Suspended
        }));
    net.eps[0].resume(ta).unwrap();
    assert!(net.run_until(net.now + 5_000_000, |n| n.acked(0) == 1));
    check_delivery(&net, 1, tb, &[(1, 10_000)]);
}
