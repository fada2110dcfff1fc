// SPDX-License-Identifier: GPL-2.0
//! DLLCBs, Init Block negotiation and credit accounting, including the
//! specification's worked examples.
#![allow(
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a panic is a test failure"
)]

use ub_proto::link::credit::{split_equally, CreditError, RxCredits, TxCredits};
use ub_proto::link::ctrl::*;
use ub_proto::link::frame::{FrameError, Mode, FLIT_BYTES, MAX_VLS};

fn sample_init() -> InitParams {
    InitParams {
        feature_id: 0x0102,
        rxbuf_vl_share: true,
        data_ack_grain: 0x30,
        ctrl_ack_grain: 0x03,
        flow_ctrl_size: 0x18,
        vl_enable: 0x00ff,
        retry_buf_depth: 0x1234,
        packet_min_interval: 7,
        ctrl_credit_grain: core::array::from_fn(|i| 0x10 + i as u8),
        data_credit_grain: core::array::from_fn(|i| 0x80 + i as u8),
    }
}

fn all_blocks() -> Vec<ControlBlock> {
    let mut words = [0u32; PARAM_EXCHG_MAX_WORDS];
    for (i, w) in words.iter_mut().enumerate().take(3) {
        *w = 0xdead_0000 + i as u32;
    }
    vec![
        ControlBlock::Null,
        ControlBlock::Nob,
        ControlBlock::RetryIdle,
        ControlBlock::RetryReq(RetryReq {
            rcv_ptr: 0xbeef,
            num_phy_reinit: 3,
            num_retry: 14,
        }),
        ControlBlock::RetryAck(RetryAck {
            num_retry: 9,
            num_free_buf: 0x1111,
            rd_ptr: 0x2222,
            wr_ptr: 0x3333,
        }),
        ControlBlock::CrdAck(CrdAck {
            initial: true,
            done: true,
            ack_num: 0xabcd,
            crd_num: core::array::from_fn(|i| (i as u8 * 4 + 3) & 0x3f),
        }),
        ControlBlock::CrdAck(CrdAck {
            initial: false,
            done: false,
            ack_num: 1,
            crd_num: [0; MAX_VLS],
        }),
        ControlBlock::ParamExchg(ParamExchg { len: 3, words }),
        ControlBlock::LaneManage(LaneManage {
            req_id: 5,
            power_down: true,
            change_rlw: false,
            change_tlw: true,
            rsp_id: 0xa,
            rx_lane_up: true,
            rsp_rlw: true,
            rsp_tlw: false,
            tlw: 4,
            rlw: 8,
        }),
        ControlBlock::BlockModeChg { ack: false },
        ControlBlock::BlockModeChg { ack: true },
        ControlBlock::Init(sample_init()),
    ]
}

#[test]
fn every_dllcb_roundtrips_in_both_modes() {
    for mode in [Mode::Crc, Mode::NonCrc] {
        for cb in all_blocks() {
            let mut buf = [0u8; 32 * FLIT_BYTES];
            let n = cb.encode(mode, &mut buf).unwrap();
            assert_eq!(n, cb.flits() * FLIT_BYTES);
            let (back, flag) = ControlBlock::decode(mode, &buf[..n]).unwrap();
            assert_eq!(back, cb, "{mode:?}");
            assert!(!flag);
            // Wrong length is rejected, not misread.
            assert!(ControlBlock::decode(mode, &buf[..n - FLIT_BYTES]).is_err());
        }
    }
}

#[test]
fn dllcb_codes_lengths_and_retry_buffer_membership() {
    use CtrlKind::*;
    let table = [
        (Null, 0, 0, 1, 1, false),
        (Nob, 0, 1, 1, 1, true),
        (RetryIdle, 1, 0, 1, 1, false),
        (RetryReq, 1, 1, 1, 1, false),
        (RetryAck, 1, 2, 1, 1, false),
        (CrdAck, 2, 4, 2, 2, true),
        (ParamExchg, 3, 0, 1, 32, true),
        (LaneManage, 4, 1, 1, 1, true),
        (BlockModeChg, 5, 0, 1, 1, true),
        (Init, 12, 8, 5, 32, true),
    ];
    for (kind, ctrl, sub, lo, hi, retried) in table {
        assert_eq!(kind.codes(), (ctrl, sub));
        assert_eq!(CtrlKind::from_codes(ctrl, sub), Some(kind));
        assert_eq!(kind.flit_range(), (lo, hi));
        assert_eq!(kind.is_retried(), retried, "{kind:?}");
    }
    assert_eq!(CtrlKind::from_codes(15, 15), None);
}

#[test]
fn crd_ack_field_positions() {
    let mut crd_num = [0u8; MAX_VLS];
    crd_num[0] = 0x3f;
    crd_num[15] = 0x21;
    let cb = ControlBlock::CrdAck(CrdAck {
        initial: true,
        done: false,
        ack_num: 0x0102,
        crd_num,
    });
    let mut buf = [0u8; 40];
    cb.encode(Mode::Crc, &mut buf).unwrap();
    // T in byte 3 bit 0, SD bit 1; ACK_NUM bytes 4–5; CRD_NUM bytes 6–17
    // with VL0 in bits 5:0 (byte 17) and VL15 in bits 95:90 (byte 6).
    assert_eq!(buf[3], 0b01);
    assert_eq!(&buf[4..6], &[1, 2]);
    assert_eq!(buf[17], 0x3f);
    assert_eq!(buf[6] >> 2, 0x21);
}

#[test]
fn dllcb_decode_rejects_malformed() {
    let mut buf = [0u8; 40];
    ControlBlock::Nob.encode(Mode::Crc, &mut buf).unwrap();
    // CRC failure.
    let mut bad = buf;
    bad[7] ^= 1;
    assert_eq!(
        ControlBlock::decode(Mode::Crc, &bad[..20]),
        Err(FrameError::Crc)
    );
    // Unknown CTRL/SUB_CTRL.
    let mut bad = buf;
    bad[2] = 0xff;
    assert_eq!(
        ControlBlock::decode(Mode::NonCrc, &bad[..20]),
        Err(FrameError::BadLch)
    );
    // A Crd_Ack must be 2 flits; an Init Block 5–32.
    let mut bad = [0u8; 20];
    bad[..4].copy_from_slice(&[0b10, 0, 0x24, 0]);
    assert_eq!(
        ControlBlock::decode(Mode::NonCrc, &bad),
        Err(FrameError::BadCtrlLength)
    );
    bad[..4].copy_from_slice(&[(3 << 2) | 0b10, 0, 0xc8, 0]);
    assert_eq!(
        ControlBlock::decode(Mode::NonCrc, &bad),
        Err(FrameError::BadCtrlLength)
    );
    // Block_Mode_Chg TYPE other than REQ/ACK.
    let mut b = [0u8; 20];
    ControlBlock::BlockModeChg { ack: true }
        .encode(Mode::NonCrc, &mut b)
        .unwrap();
    b[3] = 7;
    assert_eq!(
        ControlBlock::decode(Mode::NonCrc, &b),
        Err(FrameError::BadField)
    );
}

#[test]
fn init_block_layout() {
    let mut buf = [0u8; 5 * FLIT_BYTES];
    ControlBlock::Init(sample_init())
        .encode(Mode::Crc, &mut buf)
        .unwrap();
    assert_eq!(&buf[0..4], &[(4 << 2) | 0b10, 0, 0xc8, 0]);
    assert_eq!(&buf[7..9], &[0x01, 0x02]); // FEATURE_ID
    assert_eq!(buf[9], 1); // RXBUF_VL_SHARE
    assert_eq!(&buf[10..13], &[0x30, 0x03, 0x18]);
    assert_eq!(&buf[13..15], &[0x00, 0xff]); // VL_ENABLE
    assert_eq!(&buf[16..18], &[0x12, 0x34]); // RETRY_BUF_DEPTH
    assert_eq!(buf[20 + 17], 0x10); // CTRL_CREDIT_GRAIN VL0
    assert_eq!(buf[20 + 4], 0x10 + 13); // VL13
    assert_eq!(buf[40 + 15], 0x80); // DATA_CREDIT_GRAIN VL0
    assert_eq!(buf[40 + 16], 0x10 + 15); // CTRL VL15
    assert_eq!(buf[40 + 17], 0x10 + 14); // CTRL VL14
    assert_eq!(buf[60 + 13], 7); // PACKET_MIN_INTERVAL
    assert_eq!(buf[60 + 14], 0x80 + 15); // DATA VL15
    assert_eq!(buf[60 + 17], 0x80 + 12); // DATA VL12
}

/// §4.4 examples: {32,16} vs {64,32,16} → 16; {32} vs {16} → fallback 8.
#[test]
fn spec_example_negotiation() {
    assert_eq!(
        negotiate_mask(32 | 16, 64 | 32 | 16, fallback::FLOW_CTRL_SIZE),
        16
    );
    assert_eq!(negotiate_mask(32, 16, fallback::FLOW_CTRL_SIZE), 8);
    let mut a = sample_init();
    let mut b = sample_init();
    a.flow_ctrl_size = 32 | 16;
    b.flow_ctrl_size = 64 | 32 | 16;
    assert_eq!(negotiate(&a, &b, false).cell_flits, 16);
    a.flow_ctrl_size = 32;
    b.flow_ctrl_size = 16;
    assert_eq!(negotiate(&a, &b, false).cell_flits, 8);
}

#[test]
fn negotiation_of_every_field_and_fallbacks() {
    let mut a = sample_init();
    let mut b = sample_init();
    a.feature_id = 3;
    b.feature_id = 2;
    a.vl_enable = 0b1011_0111;
    b.vl_enable = 0b1111_1111;
    a.rxbuf_vl_share = false;
    b.rxbuf_vl_share = true;
    a.data_ack_grain = 0;
    a.ctrl_ack_grain = 0x40;
    b.ctrl_ack_grain = 0x20;
    a.data_credit_grain[3] = 0x01;
    b.data_credit_grain[3] = 0x02;
    a.ctrl_credit_grain[4] = 0x06;
    b.ctrl_credit_grain[4] = 0x0c;
    let n = negotiate(&a, &b, true);
    assert_eq!(n.feature_id, 2);
    // Contiguous VLs from VL0 in the intersection: VL0–VL2.
    assert_eq!((n.vl_enable, n.vls), (0b111, 3));
    // a may share (b's buffer allows it); b's receive side is a's.
    assert!(n.tx_sharing);
    assert!(!n.rx_sharing);
    assert!(!negotiate(&a, &b, false).tx_sharing);
    let n_b = negotiate(&b, &a, true);
    assert!(!n_b.tx_sharing);
    assert_eq!(n.data_ack_grain, 32); // fallback
    assert_eq!(n.ctrl_ack_grain, 1); // fallback
    assert_eq!(n.data_credit_grain[3], 4); // fallback
    assert_eq!(n.ctrl_credit_grain[4], 4); // smallest common
    assert_eq!(n.peer_retry_buf_depth, 0x1234);
    assert_eq!(n.peer_packet_min_interval, 7);
    // No VL0 in common → VL0 alone.
    a.vl_enable = 0b10;
    assert_eq!(negotiate(&a, &b, false).vl_enable, 1);
    a.feature_id = 0;
    assert_eq!(negotiate(&a, &b, false).feature_id, 1);
}

/// §4.6 sharing example: 6553 cells, 128 reserved for VL0 and VL1 →
/// SHARE_CRD = 6297; consumption shared-first, returns refill reserved
/// pools first in the configured order.
#[test]
fn spec_example_sharing_6297() {
    let mut reserve = [0u16; MAX_VLS];
    reserve[0] = 128;
    reserve[1] = 128;
    let order: [u8; MAX_VLS] = core::array::from_fn(|i| i as u8);
    let mut c = TxCredits::new(true, 0b11, reserve, order);
    c.add_initial(0, 3277);
    c.add_initial(1, 3276);
    c.finish_init();
    assert_eq!(c.initial_total(), 6553);
    assert_eq!(c.shared(), 6297);
    assert_eq!(c.available(0), 6297 + 128);
    // Shared first.
    assert!(c.try_consume(0, 6297));
    assert_eq!(c.shared(), 0);
    assert_eq!(c.available(0), 128);
    assert_eq!(c.available(1), 128);
    // Then reserved.
    assert!(c.try_consume(1, 100));
    assert_eq!(c.available(1), 28);
    assert!(!c.try_consume(1, 29));
    // Returns top up VL1's reserve first, then the shared pool.
    c.on_return(0, 150).unwrap();
    assert_eq!(c.available(1), 128 + 50);
    assert_eq!(c.shared(), 50);
    c.on_return(0, 6247).unwrap();
    assert!(c.is_full());
    assert_eq!(c.on_return(0, 1), Err(CreditError::ReturnOverflow));
}

#[test]
fn exclusive_mode_and_errors() {
    let mut c = TxCredits::new(
        false,
        0xffff,
        [0; MAX_VLS],
        core::array::from_fn(|i| i as u8),
    );
    c.add_initial(0, 10);
    c.add_initial(2, 5);
    c.finish_init();
    assert!(c.try_consume(0, 8));
    assert!(!c.try_consume(0, 3));
    assert!(!c.try_consume(1, 1));
    assert!(c.try_consume(2, 5));
    c.on_return(0, 8).unwrap();
    assert_eq!(c.on_return(0, 1), Err(CreditError::ReturnOverflow));
    let mut granted = [0u32; MAX_VLS];
    granted[0] = 4;
    let mut r = RxCredits::new(granted, false);
    r.on_receive(0, 3).unwrap();
    assert_eq!(r.on_receive(0, 2), Err(CreditError::ReceiveOverflow));
    assert_eq!(r.on_receive(1, 1), Err(CreditError::ReceiveOverflow));
    r.on_free(0, 3);
    assert_eq!(r.pending(0), 3);
    r.returned(0, 3);
    assert!(r.is_idle());
}

#[test]
fn cost_is_ceil_flits_over_cell() {
    use ub_proto::link::frame::Plength;
    for n in [1usize, 2, 4, 8, 16, 32, 64, 128] {
        for len in [0usize, 100, 632, 5000, 10_000] {
            let (_, l) = Plength::encode(Mode::Crc, len).unwrap();
            assert_eq!(l.cost(n), l.flits().div_ceil(n));
        }
    }
    let g = [1u16; MAX_VLS];
    let s = split_equally(6553, 2, &g);
    assert_eq!((s[0], s[1], s[2]), (3277, 3276, 0));
    let mut g4 = [4u16; MAX_VLS];
    g4[1] = 8;
    let s = split_equally(100, 3, &g4);
    assert_eq!((s[0], s[1], s[2]), (32, 32, 32));
}
