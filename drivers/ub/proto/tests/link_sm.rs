// SPDX-License-Identifier: GPL-2.0
//! State machine tests: DLL bring-up, RETRY_REQ_SM thresholds (15 retries
//! → RETRAIN, 4 re-inits → ERROR held until reset), WAIT timeout recovery,
//! lock-out avoidance with a tiny retry buffer, link down (§4.8.4),
//! ERROR_FLAG, PACKET_MIN_INTERVAL, credit back-pressure and timeouts.
#![allow(
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::float_arithmetic,
    reason = "test code: a panic is a test failure"
)]

mod link_harness;

use link_harness::{
    bad_flit, flit, random_packet, two_vl_config, up_pair, Collector, Pkt, Queues, Rng, Sim,
};
use ub_proto::link::ctrl::{ControlBlock, RetryAck, RetryReq};
use ub_proto::link::engine::{
    DllState, Event, LinkConfig, RetryAckState, RetryReqState, RETRY_SET_FLITS,
};
use ub_proto::link::frame::{Lph, Mode, FLIT_BYTES};

fn cfg() -> LinkConfig {
    two_vl_config()
}

fn ack_for(rcv: u16) -> [u8; FLIT_BYTES] {
    flit(ControlBlock::RetryAck(RetryAck {
        num_retry: 0,
        num_free_buf: 0,
        rd_ptr: rcv,
        wr_ptr: rcv,
    }))
}

#[test]
fn bring_up_sequence_and_negotiation() {
    let mut a_cfg = cfg();
    a_cfg.caps.flow_ctrl_size = 32 | 16;
    let mut b_cfg = cfg();
    b_cfg.caps.flow_ctrl_size = 64 | 32 | 16;
    let mut sim = Sim::new(a_cfg, b_cfg, 8192, 8192, 1);
    assert_eq!(sim.a.state(), DllState::Disabled);
    // Nothing is sent while disabled.
    let mut q = Queues::default();
    assert_eq!(sim.a.poll_transmit(0, &mut [0u8; 2000], &mut q), 0);
    assert!(sim.bring_up(10_000));
    for ev in [&sim.events_a, &sim.events_b] {
        let states: Vec<_> = ev
            .iter()
            .filter_map(|e| match e {
                Event::State(s) => Some(*s),
                _ => None,
            })
            .collect();
        assert_eq!(
            states,
            [DllState::ParamInit, DllState::CreditInit, DllState::Normal]
        );
        assert!(ev.contains(&Event::Negotiated));
    }
    assert_eq!(sim.a.negotiated().unwrap().cell_flits, 16);
    assert_eq!(sim.b.negotiated().unwrap().cell_flits, 16);
    // Initial credits: 256 KiB / (16 × 20 B) = 819 cells over 2 VLs.
    sim.run_while(200, |_| true);
    assert_eq!(sim.a.tx_credits().initial_total(), 819);
    assert_eq!(sim.b.rx_credits().granted()[0], 410);
    assert!(sim.a.tx_credits().is_full());
    assert!(sim.a.is_up() && !sim.a.backpressured());
}

/// Param_Init starts with a Retry_Req_Set and only sends the Init Block
/// after a Retry_Ack_Set arrived.
#[test]
fn param_init_aligns_with_retry_sets_first() {
    let mut sim = Sim::new(cfg(), cfg(), 512, 512, 1);
    sim.a.link_up(0);
    let mut q = Queues::default();
    let mut out = vec![0u8; 4096];
    let n = sim.a.poll_transmit(0, &mut out, &mut q);
    assert_eq!(n, RETRY_SET_FLITS * FLIT_BYTES);
    let (idle, _) = ControlBlock::decode(Mode::Crc, &out[..20]).unwrap();
    assert_eq!(idle, ControlBlock::RetryIdle);
    let (req, _) = ControlBlock::decode(Mode::Crc, &out[20..40]).unwrap();
    assert!(matches!(
        req,
        ControlBlock::RetryReq(RetryReq { rcv_ptr: 0, .. })
    ));
    assert_eq!(sim.a.retry_req_state(), RetryReqState::Wait);
    // Nothing more until the peer answers.
    assert_eq!(sim.a.poll_transmit(1, &mut out, &mut q), 0);
    let mut sink = Collector::default();
    sim.a
        .handle_receive(2, &flit(ControlBlock::RetryIdle), &mut sink);
    sim.a.handle_receive(2, &ack_for(0), &mut sink);
    assert_eq!(sim.a.retry_req_state(), RetryReqState::Normal);
    let n = sim.a.poll_transmit(3, &mut out, &mut q);
    assert_eq!(n, 5 * FLIT_BYTES);
    assert!(matches!(
        ControlBlock::decode(Mode::Crc, &out[..n]).unwrap().0,
        ControlBlock::Init(_)
    ));
    assert_eq!(sim.a.retry_buffer().used(), 5);
}

/// Drives b's RETRY_REQ_SM through `n` failures at the same RcvPtr, each
/// answered by a Retry_Ack_Set.
fn fail_times(sim: &mut Sim, n: u8, now: &mut u64) {
    let mut q = Queues::default();
    let mut out = vec![0u8; 8192];
    let mut sink = Collector::default();
    for _ in 0..n {
        let rcv = sim.b.rcv_ptr();
        assert_eq!(sim.b.retry_req_state(), RetryReqState::Normal);
        sim.b.handle_receive(*now, &bad_flit(), &mut sink);
        if sim.b.retry_req_state() != RetryReqState::Req {
            return;
        }
        let k = sim.b.poll_transmit(*now, &mut out, &mut q);
        assert!(k >= RETRY_SET_FLITS * FLIT_BYTES);
        let (req, _) = ControlBlock::decode(Mode::Crc, &out[20..40]).unwrap();
        let ControlBlock::RetryReq(r) = req else {
            panic!("{req:?}")
        };
        assert_eq!(r.rcv_ptr, rcv);
        assert_eq!(r.num_retry, sim.b.num_retry());
        assert_eq!(sim.b.retry_req_state(), RetryReqState::Wait);
        sim.b.handle_receive(*now, &ack_for(rcv), &mut sink);
        *now += 1000;
    }
}

#[test]
fn fifteen_failures_on_same_rcv_ptr_retrain_then_four_reinits_error() {
    let mut sim = up_pair();
    let mut now = sim.now;
    let rcv = sim.b.rcv_ptr();
    fail_times(&mut sim, 14, &mut now);
    assert_eq!(sim.b.num_retry(), 14);
    assert_eq!(sim.b.retry_req_state(), RetryReqState::Normal);
    sim.b.poll_event();
    while sim.b.poll_event().is_some() {}
    // The 15th failure at the same RcvPtr: RETRAIN, rollover reported.
    let mut sink = Collector::default();
    sim.b.handle_receive(now, &bad_flit(), &mut sink);
    assert_eq!(sim.b.retry_req_state(), RetryReqState::Retrain);
    assert_eq!(sim.b.num_phy_reinit(), 1);
    assert_eq!(sim.b.rcv_ptr(), rcv);
    assert_eq!(sim.b.poll_event(), Some(Event::RetryRollover));
    assert_eq!(sim.b.poll_event(), Some(Event::RetrainRequest));
    // Nothing is sent or received while retraining.
    let mut q = Queues::default();
    assert_eq!(sim.b.poll_transmit(now, &mut [0u8; 4096], &mut q), 0);
    // Retrain done → REQ (NUM_RETRY restarted).
    sim.b.phy_retrained(now);
    assert_eq!(sim.b.retry_req_state(), RetryReqState::Req);
    assert_eq!(sim.b.num_retry(), 1);
    let mut out = vec![0u8; 4096];
    sim.b.poll_transmit(now, &mut out, &mut q);
    sim.b.handle_receive(now, &ack_for(rcv), &mut sink);
    // Re-inits 2 and 3 retrain; the 4th enters ERROR.
    for reinit in 2..=4u8 {
        fail_times(&mut sim, 14, &mut now);
        sim.b.handle_receive(now, &bad_flit(), &mut sink);
        if reinit < 4 {
            assert_eq!(sim.b.retry_req_state(), RetryReqState::Retrain);
            assert_eq!(sim.b.num_phy_reinit(), reinit);
            sim.b.phy_retrained(now);
            sim.b.poll_transmit(now, &mut out, &mut q);
            sim.b.handle_receive(now, &ack_for(rcv), &mut sink);
        }
    }
    assert_eq!(sim.b.retry_req_state(), RetryReqState::Error);
    let mut saw_error = false;
    while let Some(e) = sim.b.poll_event() {
        saw_error |= e == Event::RetryError;
    }
    assert!(saw_error);
    assert_eq!(sim.b.counters().retrains, 3);
    // ERROR is held: no TX, link flaps do not clear it.
    assert_eq!(sim.b.poll_transmit(now, &mut out, &mut q), 0);
    sim.b.link_down(now, &mut sink);
    sim.b.link_up(now);
    assert_eq!(sim.b.state(), DllState::Disabled);
    assert_eq!(sim.b.retry_req_state(), RetryReqState::Error);
    // Only a management reset clears it; the link then comes up again.
    sim.b.reset();
    assert_eq!(sim.b.retry_req_state(), RetryReqState::Normal);
    sim.a.link_down(now, &mut sink);
    sim.ab.flush();
    sim.ba.flush();
    assert!(sim.bring_up(10_000));
}

/// Progress at a new RcvPtr clears NUM_RETRY: 14 failures, one good block,
/// 14 more failures never retrain.
#[test]
fn progress_clears_num_retry() {
    let mut sim = up_pair();
    let mut now = sim.now;
    fail_times(&mut sim, 14, &mut now);
    let mut sink = Collector::default();
    let rcv = sim.b.rcv_ptr();
    sim.b
        .handle_receive(now, &flit(ControlBlock::Nob), &mut sink);
    assert_eq!(sim.b.rcv_ptr(), rcv + 1);
    assert_eq!(sim.b.num_retry(), 0);
    fail_times(&mut sim, 14, &mut now);
    assert_eq!(sim.b.retry_req_state(), RetryReqState::Normal);
    assert_eq!(sim.b.counters().retrains, 0);
}

/// Retry_Ack sets lost: the WAIT timeout re-requests, and traffic still
/// arrives exactly once.
#[test]
fn lost_retry_ack_sets_recovered_by_wait_timeout() {
    // Unit level: no answer → timeout → a second Retry_Req_Set.
    let mut sim = up_pair();
    let now = sim.now;
    let mut sink = Collector::default();
    let mut q = Queues::default();
    let mut out = vec![0u8; 4096];
    sim.b.handle_receive(now, &bad_flit(), &mut sink);
    sim.b.poll_transmit(now, &mut out, &mut q);
    assert_eq!(sim.b.retry_req_state(), RetryReqState::Wait);
    let deadline = sim.b.poll_timeout().unwrap();
    assert_eq!(deadline, now + LinkConfig::default().wait_timeout_ns);
    sim.b.handle_timeout(deadline - 1);
    assert_eq!(sim.b.retry_req_state(), RetryReqState::Wait);
    sim.b.handle_timeout(deadline);
    assert_eq!(sim.b.retry_req_state(), RetryReqState::Req);
    assert_eq!(sim.b.num_retry(), 2);
    assert_eq!(sim.b.counters().retry_timeouts, 1);
    while let Some(e) = sim.b.poll_event() {
        if e == Event::RetryAckTimeout {
            break;
        }
    }
    // A Retry_Ack for another RcvPtr (a stale set) is ignored in WAIT.
    sim.b.poll_transmit(deadline, &mut out, &mut q);
    sim.b.handle_receive(
        deadline,
        &ack_for(sim.b.rcv_ptr().wrapping_add(3)),
        &mut sink,
    );
    assert_eq!(sim.b.retry_req_state(), RetryReqState::Wait);
    sim.b
        .handle_receive(deadline, &ack_for(sim.b.rcv_ptr()), &mut sink);
    assert_eq!(sim.b.retry_req_state(), RetryReqState::Normal);

    // System level: cut the a→b wire whenever b starts waiting, so whole
    // Retry_Ack_Sets (and the retransmissions after them) are lost.
    let mut sim = Sim::new(cfg(), cfg(), 512, 512, 3);
    assert!(sim.bring_up(10_000));
    sim.ab.ber = 2e-5;
    let mut rng = Rng::new(5);
    let mut sent: Vec<Pkt> = Vec::new();
    for _ in 0..60 {
        let p = random_packet(&mut rng, Mode::Crc, 200, 0.0);
        sent.push(p.clone());
        sim.qa.push(0, p);
    }
    let mut cuts = 0;
    let mut cut_until = 0;
    for _ in 0..400_000 {
        if sim.b.retry_req_state() == RetryReqState::Wait && cut_until == 0 && cuts < 5 {
            sim.ab.cut = true;
            cut_until = sim.now + 3_000;
            cuts += 1;
        }
        if cut_until != 0 && sim.now >= cut_until {
            sim.ab.cut = false;
        }
        if sim.b.retry_req_state() == RetryReqState::Normal {
            cut_until = 0;
        }
        sim.step();
        if sim.cb.delivered as usize == sent.len() {
            break;
        }
    }
    assert!(cuts > 0);
    assert!(sim.b.counters().retry_timeouts >= 1);
    assert_eq!(sim.cb.got[0], sent);
}

/// Lock-out avoidance: the smallest retry buffers, bidirectional traffic
/// of the largest DLLDPs, bit errors: never deadlocks.
#[test]
fn tiny_retry_buffer_never_deadlocks() {
    for (seed, depth_a, depth_b, ber) in [
        (1, 39, 39, 0.0),
        (2, 39, 42, 1e-5),
        (3, 48, 39, 3e-5),
        (4, 40, 40, 1e-4),
    ] {
        let c = cfg();
        let mut sim = Sim::new(c, c, depth_a, depth_b, seed);
        assert!(sim.bring_up(10_000));
        sim.ab.ber = ber;
        sim.ba.ber = ber;
        let mut rng = Rng::new(seed);
        let (mut na, mut nb) = (0, 0);
        for i in 0..40 {
            let p = random_packet(&mut rng, Mode::Crc, 512, 0.0);
            if i % 2 == 0 {
                sim.qa.push((i % 4 / 2) as u8, p);
                na += 1;
            } else {
                sim.qb.push(0, p);
                nb += 1;
            }
        }
        let steps = sim.run_while(2_000_000, |s| s.cb.delivered < na || s.ca.delivered < nb);
        assert!(
            sim.cb.delivered == na && sim.ca.delivered == nb,
            "depth {depth_a}/{depth_b}: deadlock after {steps} steps {}/{na} {}/{nb}\na {:?} {:?} owed {} pure {} {:?}\nb {:?} {:?} owed {} pure {} {:?}\n{:?}\n{:?}",
            sim.cb.delivered, sim.ca.delivered,
            sim.a.retry_buffer(), sim.a.retry_req_state(), sim.a.owed_acks(), sim.a.owed_pure_acks(), sim.a.tx_credits(),
            sim.b.retry_buffer(), sim.b.retry_req_state(), sim.b.owed_acks(), sim.b.owed_pure_acks(), sim.b.tx_credits(),
            sim.a.counters(), sim.b.counters()
        );
        assert!(sim.a.counters().lockouts > 0 || sim.b.counters().lockouts > 0);
    }
}

/// §4.8.4: link down completes a half-delivered DLLDP with zeros and
/// ERROR_FLAG, clears credits, resets every retry pointer, goes to
/// DLL_Disabled; the link then comes up again cleanly.
#[test]
fn link_down_resets_all_state() {
    let mut sim = up_pair();
    let mut rng = Rng::new(9);
    let big = random_packet(&mut rng, Mode::Crc, 512, 0.0);
    let big = Pkt {
        payload: vec![0x5a; 8000],
        ..big
    };
    sim.qa.push(0, big.clone());
    sim.qa.push(1, big.clone());
    sim.run_while(100_000, |s| s.cb.pieces == 0);
    assert!(sim.cb.delivered == 0 && sim.cb.pieces > 0, "not mid-packet");
    let now = sim.now;
    sim.b.link_down(now, &mut sim.cb);
    sim.a.link_down(now, &mut sim.ca);
    // The partial DLLDP was completed, poisoned, with the right length
    // and zero padding.
    assert_eq!(sim.cb.delivered, 1);
    let got = &sim.cb.got[0][0];
    assert!(got.error_flag);
    assert_eq!(got.payload.len(), big.payload.len());
    assert!(got.payload.ends_with(&[0, 0, 0, 0]));
    assert!(got.payload.starts_with(&[0x5a; 600]));
    for l in [&sim.a, &sim.b] {
        assert_eq!(l.state(), DllState::Disabled);
        assert_eq!(l.retry_req_state(), RetryReqState::Normal);
        assert_eq!(l.retry_ack_state(), RetryAckState::Normal);
        let rb = l.retry_buffer();
        assert_eq!(
            (rb.wr_ptr(), rb.tail_ptr(), rb.rd_ptr(), rb.num_free()),
            (0, 0, 0, rb.depth())
        );
        assert_eq!(l.rcv_ptr(), 0);
        assert_eq!(l.tx_credits().total(), 0);
        assert_eq!(l.tx_credits().initial_total(), 0);
        assert!(l.rx_credits().is_idle());
        assert!(l.negotiated().is_none());
        assert_eq!(l.owed_acks(), 0);
        assert!(l.backpressured());
    }
    // The network layer discards its queue (§4.8.4); the link comes back.
    sim.qa = Queues::default();
    sim.ab.flush();
    sim.ba.flush();
    assert!(sim.bring_up(10_000));
    sim.cb = Collector::default();
    sim.qa.push(1, big.clone());
    sim.run_while(100_000, |s| s.cb.delivered == 0);
    assert_eq!(sim.cb.got[1], vec![big]);
}

/// ERROR_FLAG: delivered flagged, never retried.
#[test]
fn poisoned_packet_is_passed_up_flagged() {
    let mut sim = up_pair();
    let p = Pkt {
        cfg: 6,
        rt: 1,
        error_flag: true,
        payload: vec![7; 3000],
    };
    sim.qa.push(0, p.clone());
    sim.run_while(10_000, |s| s.cb.delivered == 0);
    assert_eq!(sim.cb.got[0], vec![p]);
    assert_eq!(sim.b.counters().rx_poisoned, 1);
    assert_eq!(sim.a.counters().tx_retransmitted_flits, 0);
    assert_eq!(sim.b.counters().retry_req_sets, 1); // only the bring-up one
}

/// The peer's PACKET_MIN_INTERVAL is respected with NOBs.
#[test]
fn packet_min_interval_inserts_nobs() {
    let mut b_cfg = cfg();
    b_cfg.caps.packet_min_interval = 6;
    let mut sim = Sim::new(cfg(), b_cfg, 512, 512, 1);
    assert!(sim.bring_up(10_000));
    sim.run_while(100, |_| true);
    let mut q = Queues::default();
    for _ in 0..20 {
        q.push(
            0,
            Pkt {
                cfg: 3,
                rt: 0,
                error_flag: false,
                payload: vec![1; 20],
            },
        );
    }
    let mut out = vec![0u8; 64 * 1024];
    let n = sim.a.poll_transmit(sim.now, &mut out, &mut q);
    // Walk the blocks: DLLDP headers at least 6 flits apart.
    let mut at = 0;
    let mut last_hdr: Option<usize> = None;
    let mut nobs = 0;
    while at < n / FLIT_BYTES {
        let f = &out[at * 20..];
        if f[1] & 0xf == 0 {
            let (cb, _) = ControlBlock::decode(
                Mode::Crc,
                &out[at * 20..(at + usize::from((f[0] >> 2) & 0x1f) + 1) * 20],
            )
            .unwrap();
            nobs += usize::from(cb == ControlBlock::Nob);
            at += cb.flits();
        } else {
            if let Some(h) = last_hdr {
                assert!(at - h >= 6, "headers at {h} and {at}");
            }
            last_hdr = Some(at);
            let lph = Lph::decode(f).unwrap();
            at += lph.plength.decode(Mode::Crc).unwrap().flits();
        }
    }
    assert_eq!(q.len(), 0);
    assert!(nobs >= 19 * 4, "{nobs} NOBs");
    assert_eq!(sim.a.counters().tx_nobs as usize, nobs);
    // The receiver drops NOBs and delivers the packets.
    sim.b.handle_receive(sim.now, &out[..n], &mut sim.cb);
    assert_eq!(sim.cb.delivered, 20);
}

/// A pending credit return at the threshold back-pressures the network
/// layer and forces a Crd_Ack before anything else.
#[test]
fn credit_return_threshold_backpressures_and_forces_crd_ack() {
    let mut b_cfg = cfg();
    b_cfg.credit_return_threshold = 1;
    let mut sim = Sim::new(cfg(), b_cfg, 512, 512, 1);
    assert!(sim.bring_up(10_000));
    sim.run_while(100, |_| true);
    let mut q = Queues::default();
    q.push(
        0,
        Pkt {
            cfg: 3,
            rt: 0,
            error_flag: false,
            payload: vec![1; 100],
        },
    );
    let mut out = vec![0u8; 8192];
    let n = sim.a.poll_transmit(sim.now, &mut out, &mut q);
    assert!(n > 0);
    assert!(!sim.b.backpressured());
    sim.b.handle_receive(sim.now, &out[..n], &mut sim.cb);
    assert!(sim.b.backpressured());
    let mut qb = Queues::default();
    qb.push(
        0,
        Pkt {
            cfg: 3,
            rt: 0,
            error_flag: false,
            payload: vec![1; 100],
        },
    );
    let m = sim.b.poll_transmit(sim.now, &mut out, &mut qb);
    assert!(m > 0);
    let (cb, _) = ControlBlock::decode(Mode::Crc, &out[..40]).unwrap();
    assert!(matches!(cb, ControlBlock::CrdAck(c) if !c.initial && c.crd_num[0] > 0));
    assert!(!sim.b.backpressured());
}

/// Without credit returns a stalled sender reports the credit-return
/// timeout and counts the stall.
#[test]
fn credit_return_timeout_is_reported() {
    let mut a_cfg = cfg();
    a_cfg.credit_timeout_ns = 50_000;
    let mut sim = Sim::new(a_cfg, cfg(), 8192, 512, 1);
    assert!(sim.bring_up(10_000));
    sim.run_while(100, |_| true);
    // b never answers from now on.
    sim.ba.cut = true;
    for _ in 0..200 {
        sim.qa.push(
            0,
            Pkt {
                cfg: 3,
                rt: 0,
                error_flag: false,
                payload: vec![2; 2000],
            },
        );
    }
    sim.run_while(5_000, |_| true);
    assert!(sim.a.counters().credit_stalls >= 1);
    assert!(sim.a.counters().credit_timeouts >= 1);
    assert!(sim.events_a.contains(&Event::CreditReturnTimeout));
}

/// Credit stalls are counted per VL, once per wait (not per attempt), on
/// the VLs that wait only (the configuration enables VLs 0 and 1).
#[test]
fn credit_stalls_are_counted_per_vl_once_per_wait() {
    let mut a_cfg = cfg();
    a_cfg.credit_timeout_ns = u64::MAX / 4;
    // A small receive buffer at b and deep retry buffers: each VL runs out
    // of credit long before a's retry window fills.
    let mut b_cfg = cfg();
    b_cfg.rx_buffer_bytes = 32 * 1024;
    let mut sim = Sim::new(a_cfg, b_cfg, 8192, 8192, 1);
    assert!(sim.bring_up(10_000));
    sim.run_while(100, |_| true);
    assert_eq!(sim.a.counters().vl_credit_stalls, [0; 16]);
    let pkt = |vl: u8| Pkt {
        cfg: 3,
        rt: 0,
        error_flag: false,
        payload: vec![vl; 2000],
    };
    // b returns no credit from now on: VL 1 runs dry, then waits, however
    // often the engine tries it.
    sim.ba.cut = true;
    for _ in 0..100 {
        sim.qa.push(1, pkt(1));
    }
    sim.run_while(5_000, |_| true);
    let stalls = sim.a.counters().vl_credit_stalls;
    assert_eq!(stalls[1], 1, "one wait: {stalls:?}");
    assert_eq!(
        stalls.iter().sum::<u64>(),
        1,
        "only VL 1 waited: {stalls:?}"
    );
    assert_eq!(sim.a.counters().credit_stalls, 1);
    // VL 0 still has credit and sends, then runs dry too: its own wait.
    let sent = sim.a.counters().tx_dlldps;
    for _ in 0..100 {
        sim.qa.push(0, pkt(0));
    }
    sim.run_while(5_000, |_| true);
    assert!(sim.a.counters().tx_dlldps > sent, "VL 0 waited behind VL 1");
    let stalls = sim.a.counters().vl_credit_stalls;
    assert_eq!((stalls[0], stalls[1]), (1, 1), "{stalls:?}");
    assert_eq!(stalls.iter().sum::<u64>(), 2, "{stalls:?}");
}

/// Param_Exchg blocks reach the network layer's sink in DLL_Normal.
#[test]
fn param_exchg_is_passed_up() {
    let mut sim = up_pair();
    let mut words = [0u32; 32];
    words[0] = 0x1234_5678;
    sim.a
        .send_param_exchg(ub_proto::link::ctrl::ParamExchg { len: 2, words })
        .unwrap();
    sim.run_while(100, |_| true);
    assert_eq!(sim.cb.params, 1);
}

/// A DLLDP without credit for it is a receive-buffer overflow: reported,
/// dropped, and its (unowed) credit is not returned.
#[test]
fn receive_overflow_is_detected() {
    let mut sim = Sim::new(cfg(), cfg(), 8192, 512, 7);
    assert!(sim.bring_up(10_000));
    sim.run_while(200, |_| true);
    // b advertised RXBUF_VL_SHARE, so only the total is bounded.
    let granted: u32 = sim.b.rx_credits().granted().iter().sum();
    // Forge DLLDPs from a fresh engine that believes it has more credit:
    // here simply replay one DLLDP of a many times (after a's own send).
    let mut q = Queues::default();
    q.push(
        0,
        Pkt {
            cfg: 3,
            rt: 0,
            error_flag: false,
            payload: vec![3; 2000],
        },
    );
    let mut out = vec![0u8; 16 * 1024];
    let n = sim.a.poll_transmit(sim.now, &mut out, &mut q);
    let cost = u32::try_from(n / FLIT_BYTES).unwrap().div_ceil(8);
    let mut sink = Collector::default();
    for _ in 0..=granted / cost {
        sim.b.handle_receive(sim.now, &out[..n], &mut sink);
    }
    let c = *sim.b.counters();
    assert!(
        sim.b
            .poll_event_until(|e| matches!(e, Event::ReceiveOverflow(0))),
        "{n} {cost} {granted} {c:?}"
    );
}

trait PollUntil {
    fn poll_event_until(&mut self, f: impl Fn(&Event) -> bool) -> bool;
}

impl PollUntil for link_harness::TestLink {
    fn poll_event_until(&mut self, f: impl Fn(&Event) -> bool) -> bool {
        while let Some(e) = self.poll_event() {
            if f(&e) {
                return true;
            }
        }
        false
    }
}

/// Block_Mode_Chg handshake (§4.3.3.8) under bidirectional traffic with
/// bit errors: CRC → non-CRC → CRC → non-CRC, nothing lost or duplicated.
#[test]
fn mode_switch_handshake_under_traffic() {
    let mut sim = Sim::new(cfg(), cfg(), 1024, 1024, 21);
    assert!(sim.bring_up(10_000));
    sim.ab.ber = 1e-5;
    sim.ba.ber = 1e-5;
    let mut rng = Rng::new(21);
    let (mut sent_a, mut sent_b) = (Vec::new(), Vec::new());
    for round in 0..3 {
        for i in 0..40 {
            let p = random_packet(&mut rng, sim.a.mode(), 100, 0.05);
            if i % 2 == 0 {
                sent_a.push(p.clone());
                sim.qa.push(0, p);
            } else {
                sent_b.push(p.clone());
                sim.qb.push(0, p);
            }
        }
        // Switch in the middle of the traffic (b initiates once).
        sim.run_while(30, |_| true);
        let before = sim.a.mode();
        if round == 1 {
            sim.b.request_mode_change().unwrap();
        } else {
            sim.a.request_mode_change().unwrap();
        }
        assert!(sim.a.backpressured() || sim.b.backpressured());
        let steps = sim.run_while(200_000, |s| s.a.mode() == before || s.b.mode() == before);
        assert!(
            sim.a.mode() != before && sim.b.mode() != before,
            "round {round}: no switch after {steps} steps"
        );
        let (na, nb) = (sent_a.len() as u64, sent_b.len() as u64);
        sim.run_while(400_000, |s| s.cb.delivered < na || s.ca.delivered < nb);
        assert_eq!(sim.cb.got[0], sent_a, "round {round}");
        assert_eq!(sim.ca.got[0], sent_b, "round {round}");
    }
    assert_eq!(sim.a.mode(), Mode::NonCrc);
    assert!(sim.events_a.contains(&Event::ModeChanged(Mode::NonCrc)));
    assert!(!sim.events_a.contains(&Event::ModeChangeFailed));
    assert!(!sim.events_b.contains(&Event::ModeChangeFailed));
    assert_eq!(sim.a.counters().errors + sim.b.counters().errors, 0);
}

/// Fields the two ports share no capability for fall back to the values
/// every port must support (§4.4), and the link works with them.
#[test]
fn fallback_values_are_used_when_negotiation_fails() {
    let mut a_cfg = cfg();
    a_cfg.caps.flow_ctrl_size = 0x20;
    a_cfg.caps.data_ack_grain = 0x01;
    a_cfg.caps.ctrl_credit_grain = [0x02; 16];
    a_cfg.caps.data_credit_grain = [0x01; 16];
    a_cfg.caps.vl_enable = 0b10;
    let mut b_cfg = cfg();
    b_cfg.caps.flow_ctrl_size = 0x10;
    let mut sim = Sim::new(a_cfg, b_cfg, 8192, 8192, 1);
    assert!(sim.bring_up(10_000));
    for l in [&sim.a, &sim.b] {
        let n = l.negotiated().unwrap();
        assert_eq!(n.cell_flits, 8);
        assert_eq!(n.ctrl_credit_grain[0], 1);
        assert_eq!(n.data_credit_grain[0], 4);
        assert_eq!(n.data_ack_grain, 32);
        assert_eq!(n.vl_enable, 1);
    }
    let mut rng = Rng::new(1);
    let p = random_packet(&mut rng, Mode::Crc, 512, 0.0);
    sim.qa.push(0, p.clone());
    sim.run_while(100_000, |s| s.cb.delivered == 0);
    assert_eq!(sim.cb.got[0], vec![p]);
}

/// A header corrupted into announcing a longer block than the peer sent:
/// on an idle link the rest never comes. The partial block is given up
/// after the WAIT timeout and retried, so nothing behind it is lost.
#[test]
fn partial_block_timeout_recovers_a_swallowed_block() {
    let mut sim = up_pair();
    let now = sim.now;
    let mut sink = Collector::default();
    // An LPH announcing one 32-flit block.
    let mut f = [0u8; FLIT_BYTES];
    let lph = Lph {
        base: ub_proto::link::frame::Lbh {
            crd: false,
            ack: false,
            crd_vl: 0,
            vl: 0,
            cfg: 3,
        },
        rt: 0,
        plength: ub_proto::link::frame::Plength::from_raw((31 << 5) | 3),
    };
    f[..4].copy_from_slice(&lph.encode());
    sim.b.handle_receive(now, &f, &mut sink);
    // A real block now vanishes into the partial one.
    sim.b
        .handle_receive(now, &flit(ControlBlock::Nob), &mut sink);
    let rcv = sim.b.rcv_ptr();
    let deadline = sim.b.poll_timeout().unwrap();
    assert_eq!(deadline, now + LinkConfig::default().wait_timeout_ns);
    sim.b.handle_timeout(deadline - 1);
    assert_eq!(sim.b.retry_req_state(), RetryReqState::Normal);
    sim.b.handle_timeout(deadline);
    assert_eq!(sim.b.retry_req_state(), RetryReqState::Req);
    assert_eq!(sim.b.counters().rx_block_timeouts, 1);
    assert_eq!(sim.b.rcv_ptr(), rcv);
}
