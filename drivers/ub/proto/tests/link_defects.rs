// SPDX-License-Identifier: GPL-2.0
//! The four defects an independent review of the link engine found (issue
//! 9, section 2), one test each (two for the fourth), every one failing on
//! the engine before its fix (5c8f712):
//!
//! 1. damaged copies of a Retry_Ack_Set started a new retry round;
//! 2. sharing-mode reserves could leave a VL unable to send a largest
//!    DLLDP although every credit was home;
//! 3. credits of a VL granted less than the return threshold were never
//!    returned while the peer kept transmitting;
//! 4. the first entry into REQ after link up or a mode switch was not
//!    counted, and a new Retry_Req_Set whose Retry_Idle was lost was taken
//!    for a copy of the last one.
#![allow(
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::float_arithmetic,
    reason = "test code: a panic is a test failure"
)]

mod link_harness;

use link_harness::{bad_flit, flit, two_vl_config, up_pair, Collector, Pkt, Queues, Sim};
use ub_proto::link::ctrl::{ControlBlock, RetryAck, RetryReq};
use ub_proto::link::engine::{LinkConfig, RetryReqState};
use ub_proto::link::frame::{check_block, max_payload, Mode, FLIT_BYTES};

fn cfg() -> LinkConfig {
    two_vl_config()
}

fn ack_for(rcv: u16) -> [u8; FLIT_BYTES] {
    flit(ControlBlock::RetryAck(RetryAck {
        num_retry: 1,
        num_free_buf: 100,
        rd_ptr: rcv,
        wr_ptr: rcv.wrapping_add(7),
    }))
}

/// Puts b into WAIT after a CRC failure; returns its RcvPtr.
fn b_waiting(sim: &mut Sim) -> u16 {
    let now = sim.now;
    let mut sink = Collector::default();
    sim.b.handle_receive(now, &bad_flit(), &mut sink);
    sim.b
        .poll_transmit(now, &mut vec![0u8; 8192], &mut Queues::default());
    assert_eq!(sim.b.retry_req_state(), RetryReqState::Wait);
    sim.b.rcv_ptr()
}

/// Defect 1. A Retry_Ack_Set of which the first copy and three later ones
/// are damaged (1 to 3 bit errors each) ends WAIT once, on the first good
/// copy; the damaged copies after it are consumed with the set, not
/// counted as CRC failures, and the retransmission after the set is
/// accepted. Fed whole and in 7-byte chunks.
#[test]
fn damaged_copies_of_a_retry_ack_set_are_consumed_with_it() {
    for chunk in [usize::MAX, 7] {
        let mut sim = up_pair();
        let rcv = b_waiting(&mut sim);
        let crc_errors = sim.b.counters().rx_crc_errors;
        let req_sets = sim.b.counters().retry_req_sets;
        let mut stream = flit(ControlBlock::RetryIdle).to_vec();
        for copy in 0..32 {
            let mut f = ack_for(rcv);
            match copy {
                0 | 7 => f[10] ^= 0x01,
                15 => {
                    f[3] ^= 0x80;
                    f[17] ^= 0x04;
                }
                31 => {
                    f[0] ^= 0x02;
                    f[12] ^= 0x40;
                    f[19] ^= 0x20;
                }
                _ => {}
            }
            stream.extend_from_slice(&f);
        }
        // The retransmission that follows the set: one NOB.
        stream.extend_from_slice(&flit(ControlBlock::Nob));
        let mut sink = Collector::default();
        for piece in stream.chunks(chunk.min(stream.len())) {
            sim.b.handle_receive(sim.now, piece, &mut sink);
        }
        assert_eq!(sim.b.retry_req_state(), RetryReqState::Normal);
        assert_eq!(sim.b.counters().rx_crc_errors, crc_errors);
        assert_eq!(sim.b.rcv_ptr(), rcv + 1, "the NOB after the set");
        sim.b
            .poll_transmit(sim.now, &mut vec![0u8; 8192], &mut Queues::default());
        assert_eq!(sim.b.counters().retry_req_sets, req_sets);
    }
}

/// Defect 1, the guarantee behind consuming damaged copies unjudged: no
/// CRC-valid flit lies within 3 bits of another, so a flit within
/// `ACK_COPY_MAX_DAMAGE` bits of the good copy is never a real one-flit
/// block. The code is linear, so one base flit checks every flit.
#[test]
fn crc30_detects_every_error_of_up_to_three_bits_in_a_flit() {
    let good = ack_for(0x1234);
    assert!(check_block(Mode::Crc, &good, true).is_ok());
    let bits = FLIT_BYTES * 8;
    let flip = |f: &mut [u8; FLIT_BYTES], b: usize| f[b / 8] ^= 0x80 >> (b % 8);
    let mut checked = 0u64;
    for i in 0..bits {
        let mut f1 = good;
        flip(&mut f1, i);
        assert!(check_block(Mode::Crc, &f1, true).is_err(), "bit {i}");
        for j in i + 1..bits {
            let mut f2 = f1;
            flip(&mut f2, j);
            assert!(check_block(Mode::Crc, &f2, true).is_err(), "bits {i} {j}");
            for k in j + 1..bits {
                let mut f3 = f2;
                flip(&mut f3, k);
                assert!(check_block(Mode::Crc, &f3, true).is_err());
                checked += 1;
            }
        }
    }
    assert_eq!(checked, 160 * 159 * 158 / 6);
    assert_eq!(ub_proto::link::engine::ACK_COPY_MAX_DAMAGE, 3);
}

/// Defect 2. VL0's configured reserve would take every credit; VL1 has
/// none. The carve keeps one largest DLLDP in SHARE_CRD, so VL1 still
/// sends a largest DLLDP.
#[test]
fn sharing_mode_lets_every_vl_send_a_largest_dlldp() {
    let mut c = cfg();
    c.want_sharing = true;
    c.share_reserve[0] = u16::MAX;
    let mut sim = Sim::new(c, c, 1024, 1024, 5);
    assert!(sim.bring_up(10_000));
    sim.run_while(200, |_| true);
    assert!(sim.a.tx_credits().sharing());
    assert!(sim.a.tx_credits().is_full());
    let p = Pkt {
        cfg: 3,
        rt: 0,
        error_flag: false,
        payload: vec![7; max_payload(Mode::Crc)],
    };
    sim.qa.push(1, p.clone());
    sim.run_while(20_000, |s| s.cb.delivered == 0);
    assert!(sim.cb.got[1] == vec![p], "VL1 never sent its largest DLLDP");
    // And everything comes home again.
    sim.run_while(2_000, |_| true);
    assert!(sim.a.tx_credits().is_full());
}

/// Defect 3. b grants VL1 100 cells, below the return threshold (256) and
/// below VL1's DLLDP credit grain (128, so no LPH can return them), and
/// streams to a without pause, returning a's ACKs in its LPHs. a needs
/// its VL1 credits back several times over; the credit-return delay
/// sends them in Crd_Acks.
#[test]
fn credits_below_every_threshold_come_back_while_the_peer_transmits() {
    let mut a_cfg = cfg();
    a_cfg.caps.data_credit_grain[1] = 0x80;
    let mut b_cfg = a_cfg;
    b_cfg.rx_buffer_bytes = 32_000;
    let mut sim = Sim::new(a_cfg, b_cfg, 1024, 1024, 9);
    assert!(sim.bring_up(10_000));
    sim.run_while(200, |_| true);
    assert_eq!(sim.b.negotiated().unwrap().data_credit_grain[1], 128);
    assert_eq!(sim.b.rx_credits().granted()[1], 100);
    for _ in 0..3000 {
        sim.qb.push(
            0,
            Pkt {
                cfg: 3,
                rt: 0,
                error_flag: false,
                payload: vec![1; 600],
            },
        );
    }
    let sent: Vec<Pkt> = (0..300)
        .map(|i| Pkt {
            cfg: 4,
            rt: 0,
            error_flag: false,
            payload: vec![i as u8; 150],
        })
        .collect();
    for p in &sent {
        sim.qa.push(1, p.clone());
    }
    sim.run_while(20_000, |s| s.cb.delivered < 300);
    assert!(!sim.qb.is_empty(), "b transmitted the whole time");
    assert_eq!(sim.cb.got[1], sent);
}

/// Defect 4, first half. §4.7.4: NUM_RETRY += 1 on *every* entry into
/// REQ. The link-up entry counts: its Retry_Req_Set carries NUM_RETRY 1,
/// and with a silent peer RETRAIN comes after NUM_RETRY_THRESHOLD (15)
/// entries in all, i.e. after 14 WAIT timeouts.
#[test]
fn the_link_up_entry_into_req_counts_toward_the_threshold() {
    let mut sim = Sim::new(cfg(), cfg(), 512, 512, 1);
    let mut q = Queues::default();
    let mut out = vec![0u8; 4096];
    sim.a.link_up(0);
    assert_eq!(sim.a.num_retry(), 1);
    sim.a.poll_transmit(0, &mut out, &mut q);
    let (req, _) = ControlBlock::decode(Mode::Crc, &out[20..40]).unwrap();
    assert!(matches!(
        req,
        ControlBlock::RetryReq(RetryReq { num_retry: 1, .. })
    ));
    let mut timeouts = 0;
    while sim.a.retry_req_state() != RetryReqState::Retrain {
        assert!(timeouts < 100);
        let d = sim.a.poll_timeout().unwrap();
        sim.a.handle_timeout(d);
        timeouts += 1;
        sim.a.poll_transmit(d, &mut out, &mut q);
    }
    assert_eq!(timeouts, 14);
}

/// Found by `ub-nlfuzz` (a `port-set` of NUM_RETRY_THRESHOLD 1 on a guest):
/// since the link-up entry into REQ counts, a threshold of 1 retrained at
/// once on every link up and the port never came up (it ended in ERROR).
/// A link refuses such a threshold with a typed error, and the lowest one
/// it takes brings the link up.
#[test]
fn a_retry_threshold_that_could_never_bring_the_link_up_is_refused() {
    use ub_proto::link::engine::{Link, LinkSetupError, MIN_NUM_RETRY_THRESHOLD};
    use ub_proto::link::retry::RetrySlot;
    for threshold in [0, 1] {
        let c = LinkConfig {
            num_retry_threshold: threshold,
            ..cfg()
        };
        assert_eq!(
            Link::new(c, vec![RetrySlot::EMPTY; 512]).err(),
            Some(LinkSetupError::RetryThresholdTooLow { threshold })
        );
    }
    let lowest = LinkConfig {
        num_retry_threshold: MIN_NUM_RETRY_THRESHOLD,
        ..cfg()
    };
    let mut sim = Sim::new(lowest, lowest, 512, 512, 3);
    assert!(
        sim.bring_up(10_000),
        "the lowest threshold brings the link up"
    );
    assert_eq!(sim.a.retry_req_state(), RetryReqState::Normal);
}

/// Defect 4, first half, after a mode switch: the entry into REQ that
/// realigns the pointers in the new mode counts too.
#[test]
fn the_mode_switch_entry_into_req_counts_toward_the_threshold() {
    let mut sim = up_pair();
    assert_eq!(sim.a.num_retry(), 0);
    sim.a.request_mode_change().unwrap();
    sim.run_while(100_000, |s| s.a.mode() == Mode::Crc);
    assert_eq!(sim.a.mode(), Mode::NonCrc);
    assert_eq!(sim.a.num_retry(), 1);
}

/// Defect 4, second half. Two Retry_Req_Sets with the same (RcvPtr,
/// NUM_RETRY, NUM_PHY_REINIT) — the requester's RcvPtr moved by a whole
/// buffer depth between them — the second one's Retry_Idle damaged: each
/// set is answered exactly once, although nothing but the set's position
/// tells them apart.
#[test]
fn a_new_retry_req_set_whose_retry_idle_was_lost_is_answered() {
    let mut sim = up_pair();
    let now = sim.now;
    let mut q = Queues::default();
    let mut out = vec![0u8; 8192];
    let mut sink = Collector::default();
    let req = flit(ControlBlock::RetryReq(RetryReq {
        rcv_ptr: sim.a.retry_buffer().wr_ptr(),
        num_phy_reinit: 0,
        num_retry: 1,
    }));
    let before = sim.a.counters().retry_ack_sets;
    for (set, idle) in [flit(ControlBlock::RetryIdle), bad_flit()]
        .into_iter()
        .enumerate()
    {
        sim.a.handle_receive(now, &idle, &mut sink);
        for _ in 0..32 {
            sim.a.handle_receive(now, &req, &mut sink);
            sim.a.poll_transmit(now, &mut out, &mut q);
        }
        assert_eq!(
            sim.a.counters().retry_ack_sets,
            before + set as u64 + 1,
            "set {set}"
        );
    }
}

/// Defect 1, non-CRC mode: without a BCRC a delivered flit is never a
/// damaged copy (the PHY's FEC reports errors as lost flits), and a real
/// one-flit block can lie within 3 bits of the Retry_Ack: here a
/// Param_Exchg whose word repeats the Ack's bytes 8-11. Only exact copies
/// are consumed in that mode, so the Param_Exchg after the set is
/// accepted and delivered.
#[test]
fn non_crc_mode_consumes_only_exact_copies_of_the_retry_ack() {
    let mut c = cfg();
    c.mode = Mode::NonCrc;
    let mut sim = Sim::new(c, c, 512, 512, 7);
    assert!(sim.bring_up(10_000));
    sim.run_while(200, |_| true);
    let now = sim.now;
    let mut sink = Collector::default();
    let encode = |cb: ControlBlock| {
        let mut f = [0u8; FLIT_BYTES];
        cb.encode(Mode::NonCrc, &mut f).unwrap();
        f
    };
    // Move RcvPtr to a power of two (one bit set) with NOBs.
    while sim.b.rcv_ptr().count_ones() != 1 {
        sim.b
            .handle_receive(now, &encode(ControlBlock::Nob), &mut sink);
    }
    sim.b.receive_error(now, 1);
    sim.b
        .poll_transmit(now, &mut vec![0u8; 8192], &mut Queues::default());
    assert_eq!(sim.b.retry_req_state(), RetryReqState::Wait);
    let rcv = sim.b.rcv_ptr();
    let ack = encode(ControlBlock::RetryAck(RetryAck {
        num_retry: 0,
        num_free_buf: 0x0102,
        rd_ptr: rcv,
        wr_ptr: 0,
    }));
    let mut words = [0u32; 32];
    words[0] = u32::from_be_bytes([ack[8], ack[9], ack[10], ack[11]]);
    let param = encode(ControlBlock::ParamExchg(ub_proto::link::ctrl::ParamExchg {
        len: 1,
        words,
    }));
    let distance: u32 = ack
        .iter()
        .zip(param.iter())
        .map(|(a, b)| (a ^ b).count_ones())
        .sum();
    assert!(distance <= ub_proto::link::engine::ACK_COPY_MAX_DAMAGE);
    // The Retry_Idle and the first four copies are lost (FEC), the other
    // 28 arrive, then the Param_Exchg.
    sim.b.receive_error(now, 5);
    let mut stream = Vec::new();
    for _ in 0..28 {
        stream.extend_from_slice(&ack);
    }
    stream.extend_from_slice(&param);
    sim.b.handle_receive(now, &stream, &mut sink);
    assert_eq!(sim.b.retry_req_state(), RetryReqState::Normal);
    assert_eq!(sim.b.rcv_ptr(), rcv + 1, "the Param_Exchg after the set");
    assert_eq!(sink.params, 1);
}
