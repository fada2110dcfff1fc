// SPDX-License-Identifier: GPL-2.0
//! Link (re-)initialisation with a slow peer and lost Init blocks: an
//! engine is never left waiting for its peer without a timer, and when
//! it gives up it says so (`Event::LinkResetRequest`), after which the
//! driver's link reset brings both ends up again.
//!
//! Two engines back to back; each end is "polled" by its driver only
//! every `period` ns (the guest driver's work runs 0.1–2 ms late), and
//! the bytes sent to it wait in its receive queue until then.
#![allow(
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a panic is a test failure"
)]

use ub_proto::link::ctrl::ControlBlock;
use ub_proto::link::engine::{
    DllState, Event, Link, LinkConfig, NullSink, RetryReqState, TxPacket, TxSource, MIN_TX_BUFFER,
};
use ub_proto::link::frame::{Lch, Mode, FLIT_BYTES};
use ub_proto::link::retry::RetrySlot;

struct NoPackets;

impl TxSource for NoPackets {
    fn ready(&self) -> u16 {
        0
    }
    fn head(&self, _vl: u8) -> Option<TxPacket<'_>> {
        None
    }
    fn pop(&mut self, _vl: u8) {}
}

/// One end: its engine, its driver's poll period and its receive queue.
struct End {
    link: Link<Vec<RetrySlot>>,
    period: u64,
    next: u64,
    inbox: Vec<u8>,
    events: Vec<Event>,
    /// PHY up for this end's driver (it calls `link_up` when it sees it).
    phy_seen_up: bool,
}

impl End {
    fn new(cfg: LinkConfig, period: u64) -> Self {
        Self {
            link: Link::new(cfg, vec![RetrySlot::EMPTY; 1024]).unwrap(),
            period,
            next: 0,
            inbox: Vec::new(),
            events: Vec::new(),
            phy_seen_up: false,
        }
    }
}

/// Two ends and the PHY between them. `drop_init_from_b` drops B's Init
/// Blocks (silently, as if the PHY had not noticed) that many times.
struct Pair {
    a: End,
    b: End,
    now: u64,
    phy_up: bool,
    drop_init_from_b: u32,
    link_resets: u32,
}

const STEP: u64 = 1_000;

impl Pair {
    fn new(a: End, b: End) -> Self {
        Self {
            a,
            b,
            now: 0,
            phy_up: true,
            drop_init_from_b: 0,
            link_resets: 0,
        }
    }

    /// Drops the Init Blocks of `bytes` (whole blocks) while the budget
    /// lasts.
    fn filter(bytes: &[u8], budget: &mut u32) -> Vec<u8> {
        let mut out = Vec::new();
        let mut off = 0;
        while off < bytes.len() {
            let rest = &bytes[off..];
            let n = Lch::decode(rest).map_or(1, |l| usize::from(l.flits).max(1)) * FLIT_BYTES;
            let block = &rest[..n.min(rest.len())];
            let init = matches!(
                ControlBlock::decode(Mode::Crc, block),
                Ok((ControlBlock::Init(_), _))
            );
            if init && *budget > 0 {
                *budget -= 1;
            } else {
                out.extend_from_slice(block);
            }
            off += n;
        }
        out
    }

    /// One driver pass of `e` at `now`: link state, received data, timers,
    /// transmission, events. Returns what it sent.
    fn poll(e: &mut End, now: u64, phy_up: bool) -> Vec<u8> {
        if phy_up && !e.phy_seen_up {
            e.link.link_up(now);
        } else if !phy_up && e.phy_seen_up {
            e.link.link_down(now, &mut NullSink);
        }
        e.phy_seen_up = phy_up;
        let data = std::mem::take(&mut e.inbox);
        e.link.handle_receive(now, &data, &mut NullSink);
        if e.link.poll_timeout().is_some_and(|t| t <= now) {
            e.link.handle_timeout(now);
        }
        let mut out = vec![0u8; MIN_TX_BUFFER];
        let mut sent = Vec::new();
        loop {
            let n = e.link.poll_transmit(now, &mut out, &mut NoPackets);
            if n == 0 {
                break;
            }
            sent.extend_from_slice(&out[..n]);
        }
        while let Some(ev) = e.link.poll_event() {
            e.events.push(ev);
        }
        sent
    }

    fn step(&mut self) {
        let now = self.now;
        if now >= self.a.next {
            self.a.next = now + self.a.period;
            let sent = Self::poll(&mut self.a, now, self.phy_up);
            if self.phy_up {
                self.b.inbox.extend_from_slice(&sent);
            }
        }
        if now >= self.b.next {
            self.b.next = now + self.b.period;
            let sent = Self::poll(&mut self.b, now, self.phy_up);
            let sent = Self::filter(&sent, &mut self.drop_init_from_b);
            if self.phy_up {
                self.a.inbox.extend_from_slice(&sent);
            }
        }
        // The drivers' answers to the events.
        let retrain = [&self.a, &self.b]
            .iter()
            .any(|e| e.events.contains(&Event::RetrainRequest));
        let reset = [&self.a, &self.b]
            .iter()
            .any(|e| e.events.contains(&Event::LinkResetRequest));
        for e in [&mut self.a, &mut self.b] {
            e.events
                .retain(|ev| !matches!(ev, Event::RetrainRequest | Event::LinkResetRequest));
        }
        if reset {
            // The driver takes the PHY down (both ends see LinkUp = 0),
            // resets its engine and brings the PHY up again.
            self.link_resets += 1;
            for e in [&mut self.a, &mut self.b] {
                e.inbox.clear();
                e.link.link_down(now, &mut NullSink);
                if e.link.retry_req_state() == RetryReqState::Error {
                    e.link.reset();
                }
                e.phy_seen_up = false;
            }
        } else if retrain {
            // A PHY retrain: what was in flight is lost, both ends told.
            for e in [&mut self.a, &mut self.b] {
                e.inbox.clear();
                e.link.phy_retrained(now);
            }
        }
        self.now += STEP;
    }

    fn run_until_up(&mut self, limit: u64) -> bool {
        let end = self.now + limit;
        while self.now < end {
            self.step();
            if self.a.link.is_up() && self.b.link.is_up() {
                return true;
            }
        }
        false
    }

    /// Every end that is not up has a timer, a driver action pending or
    /// unread input.
    fn assert_never_stuck(&self) {
        for (name, e) in [("a", &self.a), ("b", &self.b)] {
            let l = &e.link;
            if l.state() == DllState::Normal || l.state() == DllState::Disabled {
                continue;
            }
            let waiting_for_driver = matches!(
                l.retry_req_state(),
                RetryReqState::Req | RetryReqState::Retrain | RetryReqState::Error
            );
            assert!(
                l.poll_timeout().is_some() || waiting_for_driver,
                "{name} waits for its peer in {} / {:?} with no timer",
                l.state().name(),
                l.retry_req_state()
            );
        }
    }
}

fn guest_cfg() -> LinkConfig {
    LinkConfig {
        wait_timeout_ns: 2_000_000,
        credit_return_delay_ns: 200_000,
        credit_timeout_ns: 500_000_000,
        ..LinkConfig::default()
    }
}

/// A peer's Init Block lost without a PHY report: before `Timer::Init`
/// the receiver waited in DLL_Param_Init forever with no timer.
#[test]
fn a_lost_init_block_is_requested_again() {
    let cfg = LinkConfig::default();
    let mut p = Pair::new(End::new(cfg, STEP), End::new(cfg, STEP));
    p.drop_init_from_b = 1;
    let mut stuck_checked = false;
    let end = 5_000_000;
    while p.now < end && !(p.a.link.is_up() && p.b.link.is_up()) {
        p.step();
        p.assert_never_stuck();
        stuck_checked |= p.a.link.state() == DllState::ParamInit
            && p.a.link.retry_req_state() == RetryReqState::Normal;
    }
    assert!(stuck_checked, "A waited for B's Init Block");
    assert!(
        p.a.link.is_up() && p.b.link.is_up(),
        "not up by {} ns",
        p.now
    );
    assert_eq!(p.a.link.counters().init_timeouts, 1);
    assert_eq!(p.drop_init_from_b, 0);
}

/// A peer that never comes up: the fast end goes through REQ, RETRAIN
/// and ERROR and then asks for a link reset, instead of stopping with no
/// timer and no request.
#[test]
fn a_silent_peer_ends_in_a_link_reset_request() {
    let cfg = LinkConfig::default();
    let mut a = End::new(cfg, STEP);
    a.link.link_up(0);
    a.phy_seen_up = true;
    let mut q = NoPackets;
    let mut out = vec![0u8; MIN_TX_BUFFER];
    let mut events = Vec::new();
    let mut now = 0;
    while now < 100_000_000 && !events.contains(&Event::LinkResetRequest) {
        a.link.poll_transmit(now, &mut out, &mut q);
        if a.link.poll_timeout().is_some_and(|t| t <= now) {
            a.link.handle_timeout(now);
        }
        while let Some(ev) = a.link.poll_event() {
            if ev == Event::RetrainRequest {
                a.link.phy_retrained(now);
            }
            events.push(ev);
        }
        now += STEP;
    }
    assert_eq!(a.link.retry_req_state(), RetryReqState::Error);
    let error = events.iter().position(|e| *e == Event::RetryError);
    let reset = events.iter().position(|e| *e == Event::LinkResetRequest);
    assert!(error.is_some() && reset > error, "{events:?}");
    assert_eq!(a.link.counters().link_reset_requests, 1);
    // The driver's link reset: link down, reset, link up. It comes up
    // with a peer that answers.
    a.link.link_down(now, &mut NullSink);
    a.link.reset();
    let mut p = Pair::new(a, End::new(cfg, STEP));
    p.now = now;
    assert!(p.run_until_up(1_000_000));
}

/// A fast end (the engine's 10 µs WAIT) facing a slow peer (polled every
/// 2 ms): it gives up and requests link resets, again and again, but is
/// never stuck; with a WAIT timeout above the peer's latency (the
/// fabric's host ports use 5 ms) the link comes up.
#[test]
fn a_slow_peer_needs_a_wait_timeout_above_its_latency() {
    let mut p = Pair::new(
        End::new(LinkConfig::default(), STEP),
        End::new(guest_cfg(), 2_000_000),
    );
    let end = 50_000_000;
    while p.now < end {
        p.step();
        p.assert_never_stuck();
    }
    assert!(p.link_resets > 0, "the fast end gave up and said so");
    let fast = LinkConfig {
        wait_timeout_ns: 5_000_000,
        ..LinkConfig::default()
    };
    for period in [100_000, 500_000, 1_000_000, 2_000_000] {
        let mut p = Pair::new(End::new(fast, STEP), End::new(guest_cfg(), period));
        assert!(p.run_until_up(50_000_000), "period {period}");
        assert_eq!(p.link_resets, 0);
    }
}

/// Link down and up in various orders and timings on both ends, with a
/// slow end: the pair always comes back up.
#[test]
fn link_down_and_up_in_any_order_come_back() {
    let fast = LinkConfig {
        wait_timeout_ns: 5_000_000,
        ..LinkConfig::default()
    };
    let mut p = Pair::new(End::new(fast, STEP), End::new(guest_cfg(), 1_500_000));
    assert!(p.run_until_up(50_000_000));
    for (i, gap) in [0u64, 10_000, 1_000_000, 50_000_000]
        .into_iter()
        .enumerate()
    {
        // The PHY goes down; which end's driver notices first varies.
        p.phy_up = false;
        if i % 2 == 0 {
            p.a.link.link_down(p.now, &mut NullSink);
            p.a.phy_seen_up = false;
        } else {
            p.b.link.link_down(p.now, &mut NullSink);
            p.b.phy_seen_up = false;
        }
        p.a.inbox.clear();
        p.b.inbox.clear();
        let until = p.now + gap;
        while p.now < until {
            p.step();
        }
        // The slow driver may not have looked: it sees the flap now.
        for e in [&mut p.a, &mut p.b] {
            if e.phy_seen_up {
                e.link.link_down(p.now, &mut NullSink);
                e.phy_seen_up = false;
            }
        }
        p.phy_up = true;
        let t0 = p.now;
        let mut up = false;
        while p.now < t0 + 50_000_000 {
            p.step();
            p.assert_never_stuck();
            if p.a.link.is_up() && p.b.link.is_up() {
                up = true;
                break;
            }
        }
        assert!(up, "gap {gap}: not back up");
    }
}
