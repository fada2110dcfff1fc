// SPDX-License-Identifier: GPL-2.0
//! Transport layer: PSN arithmetic, header codecs, the receiver per
//! retransmission mode (ub-spec-notes §5.4), the sender's RTO and retry
//! limit, window limits, reassembly, TPGs and connection management.

#![allow(
    clippy::indexing_slicing,
    clippy::unwrap_used,
    reason = "test code: a panic is a test failure"
)]

use ub_proto::net::cci::Cci;
use ub_proto::transport::cc::CcConfig;
use ub_proto::transport::cm::{
    cc_code, ChannelParams, ChannelState, CmMsg, CmSession, CmState, CmTiming,
};
use ub_proto::transport::hdr::{
    BitmapSize, Cetph, CetphKind, CtpOpcode, Ctph, Rspst, Rtph, Saetph, TpOpcode, Utph,
};
use ub_proto::transport::msg::{Reassembler, ReassemblyError, Segment};
use ub_proto::transport::psn::{classify, Psn, PsnClass, MAX_SEND_WINDOW};
use ub_proto::transport::rx::{
    DropReason, RtpReceiver, RxConfig, RxMode, RxStorage, RxVerdict, SlotMeta,
};
use ub_proto::transport::tpg::{member_sport, Membership, MembershipError, TpGroup, TpgPolicy};
use ub_proto::transport::tx::{RtpSender, TxConfig, TxEvent, TxSetupError, TxSlot};
use ub_proto::transport::{RetransmitMode, RtoMode, StaticRto};

#[test]
fn psn_arithmetic_wraps() {
    let a = Psn::new(0xff_fffe);
    assert_eq!(a.add(3).value(), 1);
    assert_eq!(Psn::new(1).sub(3).value(), 0xff_fffe);
    assert_eq!(Psn::new(1).diff(a), 3);
    assert_eq!(a.diff(Psn::new(1)), -3);
    assert!(a.before(Psn::new(1)));
    assert_eq!(Psn::new(0x80_0000).diff(Psn::new(0)), -(1 << 23));
    assert_eq!(Psn::new(0x7f_ffff).diff(Psn::new(0)), (1 << 23) - 1);
    assert_eq!(Psn::new(u32::MAX).value(), 0xff_ffff);
}

#[test]
fn psn_ranges() {
    let e = Psn::new(5);
    assert_eq!(classify(e, e, 128), PsnClass::InOrder);
    assert_eq!(classify(Psn::new(4), e, 128), PsnClass::Duplicate);
    // [EPSN - 8M, EPSN - 1] is duplicate, wrapping below zero.
    assert_eq!(classify(e.sub(1 << 23), e, 128), PsnClass::Duplicate);
    assert_eq!(classify(e.sub((1 << 23) + 1), e, 128), PsnClass::Invalid);
    assert_eq!(classify(e.add(1), e, 128), PsnClass::OutOfOrder(1));
    assert_eq!(classify(e.add(128), e, 128), PsnClass::OutOfOrder(128));
    assert_eq!(classify(e.add(129), e, 128), PsnClass::Invalid);
    assert_eq!(MAX_SEND_WINDOW, (1 << 23) - 1);
}

#[test]
fn header_round_trips() {
    let h = Rtph {
        opcode: TpOpcode::Data,
        last: true,
        padding: 3,
        nlp: 1,
        src_tpn: 0xabcdef,
        dst_tpn: 0x123456,
        ack_req: true,
        fake: false,
        psn: Psn::new(0xfe_dcba),
        rspst: Rspst::Ack,
        tpmsn: 0x654321,
    };
    let mut b = [0u8; 16];
    h.write(&mut b).unwrap();
    assert_eq!(b[0], 0x81);
    assert_eq!(b[1], 0x31);
    assert_eq!(&b[9..12], &[0xfe, 0xdc, 0xba]);
    assert_eq!(Rtph::parse(&b).unwrap(), h);
    for r in [
        Rspst::Ack,
        Rspst::Rnr(19),
        Rspst::PageFault(3),
        Rspst::CompleterError(0),
        Rspst::TaResponse(2),
    ] {
        assert_eq!(Rspst::from_byte(r.byte()).unwrap(), r);
    }
    assert!(Rspst::from_byte(4 << 5).is_err());
    assert!(Rspst::from_byte((1 << 5) | 20).is_err());
    let c = Ctph {
        opcode: CtpOpcode::Cnp,
        padding: 2,
        nlp: 2,
    };
    let mut cb = [0u8; 1];
    c.write(&mut cb).unwrap();
    assert_eq!(cb[0], 0x62);
    assert_eq!(Ctph::parse(&cb).unwrap(), c);
    let u = Utph { padding: 1, nlp: 3 };
    let mut ub = [0xffu8; 16];
    u.write(&mut ub).unwrap();
    assert_eq!(Utph::parse(&ub).unwrap(), u);
    for c in [
        Cetph::Ldcp {
            ack_seq: 0xdead_beef,
            ce_seq: 7,
        },
        Cetph::Caqm {
            ack_seq: 1,
            loc: true,
            i: true,
            c: 9,
            hint: 300,
        },
    ] {
        let mut b = [0u8; 8];
        c.write(&mut b).unwrap();
        let kind = if matches!(c, Cetph::Ldcp { .. }) {
            CetphKind::Ldcp
        } else {
            CetphKind::Caqm
        };
        assert_eq!(Cetph::parse(kind, &b).unwrap(), c);
    }
    let cnp = Cetph::Cnp { ecn: 3, loc: true };
    let mut b = [0u8; 16];
    cnp.write(&mut b).unwrap();
    assert_eq!(Cetph::parse_cnp(&b).unwrap(), cnp);
    // SAETPH: sizes 64..1024 bits, MSB-first bitmap.
    for (code, bits) in [(0, 64), (1, 128), (2, 256), (3, 512), (4, 1024)] {
        let s = BitmapSize::from_code(code).unwrap();
        assert_eq!(s.bits(), bits);
        let mut b = vec![0u8; 4 + bits as usize / 8];
        let n = Saetph::write_fixed(s, Psn::new(77), &mut b).unwrap();
        assert_eq!(n, b.len());
        b[4] = 0xa0;
        let (p, _) = Saetph::parse(&b).unwrap();
        assert_eq!(p.max_rcv_psn, Psn::new(77));
        assert!(p.bit(0) && !p.bit(1) && p.bit(2) && !p.bit(bits));
    }
    assert!(BitmapSize::from_code(5).is_err());
    assert_eq!(BitmapSize::fitting(65, BitmapSize::B1024), BitmapSize::B128);
    assert_eq!(
        BitmapSize::fitting(5000, BitmapSize::B256),
        BitmapSize::B256
    );
}

fn rx_cfg(mode: RxMode) -> RxConfig {
    RxConfig {
        mode,
        local_tpn: 2,
        peer_tpn: 1,
        initial_psn: Psn::new(0xff_fffe),
        ooo_window: 128,
        ack_every: 1,
        ack_delay_ns: 1000,
        sack_threshold: 1,
        sack_max: BitmapSize::B64,
        cc: None,
    }
}

struct RxBuf {
    bitmap: Vec<u64>,
    meta: Vec<SlotMeta>,
    data: Vec<u8>,
}

impl RxBuf {
    fn new(slots: usize) -> Self {
        Self {
            bitmap: vec![0; slots.div_ceil(64).max(1)],
            meta: vec![SlotMeta::default(); slots],
            data: vec![0; slots * 64],
        }
    }
    fn store(&mut self) -> RxStorage<&mut [u64], &mut [SlotMeta], &mut [u8]> {
        RxStorage {
            bitmap: &mut self.bitmap[..],
            meta: &mut self.meta[..],
            data: &mut self.data[..],
        }
    }
}

fn pkt(psn: u32) -> Rtph {
    Rtph::data(1, 2, Psn::new(psn), 0, false)
}

/// Decoded response: (opcode, rspst, psn, sack bits).
fn resp(
    rx: &mut RtpReceiver<&mut [u64], &mut [SlotMeta], &mut [u8]>,
    now: u64,
) -> Option<(TpOpcode, Rspst, u32, Vec<bool>)> {
    let mut b = [0u8; 256];
    let n = rx.poll_transmit(now, &mut b).unwrap()?;
    let h = Rtph::parse(&b[..n]).unwrap();
    let bits = if h.opcode == TpOpcode::Sack {
        let (s, _) = Saetph::parse(&b[16..n]).unwrap();
        (0..=s.max_rcv_psn.distance_from(h.psn))
            .map(|k| s.bit(k))
            .collect()
    } else {
        vec![]
    };
    Some((h.opcode, h.rspst, h.psn.value(), bits))
}

const E: u32 = 0xff_fffe;

#[test]
fn receiver_gbn_fast_drops_ooo_and_naks_once() {
    let mut buf = RxBuf::new(0);
    let mut rx = RtpReceiver::new(rx_cfg(RxMode::GoBackNNak), buf.store()).unwrap();
    let ack = |p| Some((TpOpcode::Ack, Rspst::Ack, p, vec![]));
    let nak = |p| Some((TpOpcode::Ack, Rspst::CompleterError(0), p, vec![]));
    assert_eq!(
        rx.handle_data(0, &pkt(E), b"a", 1, Cci::DEFAULT),
        RxVerdict::Deliver
    );
    assert_eq!(resp(&mut rx, 0), ack(E));
    // E+1 lost; E+2, E+3 out of order: dropped, one TPNAK(EPSN).
    assert_eq!(
        rx.handle_data(0, &pkt(E + 2), b"c", 1, Cci::DEFAULT),
        RxVerdict::Drop(DropReason::OutOfOrder)
    );
    assert_eq!(resp(&mut rx, 0), nak(E + 1));
    assert_eq!(
        rx.handle_data(0, &pkt(0x1), b"d", 1, Cci::DEFAULT),
        RxVerdict::Drop(DropReason::OutOfOrder)
    );
    assert_eq!(resp(&mut rx, 0), None, "at most one TPNAK until a TPACK");
    // Duplicate: TPACK(EPSN-1).
    assert_eq!(
        rx.handle_data(0, &pkt(E), b"a", 1, Cci::DEFAULT),
        RxVerdict::Drop(DropReason::Duplicate)
    );
    assert_eq!(resp(&mut rx, 0), ack(E));
    // A TPACK was sent again: the next OOO packet may NAK again.
    assert_eq!(
        rx.handle_data(0, &pkt(E + 3), b"d", 1, Cci::DEFAULT),
        RxVerdict::Drop(DropReason::OutOfOrder)
    );
    assert_eq!(resp(&mut rx, 0), nak(E + 1));
    // Invalid: silent.
    assert_eq!(
        rx.handle_data(0, &pkt(E + 500), b"x", 1, Cci::DEFAULT),
        RxVerdict::Drop(DropReason::InvalidPsn)
    );
    assert_eq!(resp(&mut rx, 0), None);
    assert_eq!(
        rx.handle_data(0, &pkt(E + 1), b"b", 1, Cci::DEFAULT),
        RxVerdict::Deliver
    );
    assert_eq!(resp(&mut rx, 0), ack(E + 1));
}

#[test]
fn receiver_gbn_without_fast_holds_ooo_silently() {
    let mut buf = RxBuf::new(128);
    let mut rx = RtpReceiver::new(rx_cfg(RxMode::GoBackNOoo), buf.store()).unwrap();
    assert_eq!(
        rx.handle_data(0, &pkt(E + 1), b"b", 1, Cci::DEFAULT),
        RxVerdict::Held
    );
    assert_eq!(resp(&mut rx, 0), None, "OOO: no response");
    assert_eq!(
        rx.handle_data(0, &pkt(E + 1), b"b", 1, Cci::DEFAULT),
        RxVerdict::Drop(DropReason::Duplicate)
    );
    assert_eq!(resp(&mut rx, 0), None, "OOO seen: no response");
    assert_eq!(
        rx.handle_data(0, &pkt(E + 3), b"d", 1, Cci::DEFAULT),
        RxVerdict::Held
    );
    assert_eq!(
        rx.handle_data(0, &pkt(E), b"a", 1, Cci::DEFAULT),
        RxVerdict::Deliver
    );
    // EPSN advanced over the held E+1.
    assert_eq!(rx.epsn(), Psn::new(E + 2));
    let held = rx.next_held().unwrap();
    assert_eq!((held.psn, held.payload), (Psn::new(E + 1), &b"b"[..]));
    assert!(rx.next_held().is_none());
    assert_eq!(
        resp(&mut rx, 0),
        Some((TpOpcode::Ack, Rspst::Ack, E + 1, vec![]))
    );
    assert_eq!(
        rx.handle_data(0, &pkt(E + 2), b"c", 1, Cci::DEFAULT),
        RxVerdict::Deliver
    );
    assert_eq!(rx.next_held().unwrap().payload, b"d");
    assert_eq!(
        resp(&mut rx, 0),
        Some((TpOpcode::Ack, Rspst::Ack, 1, vec![]))
    );
}

#[test]
fn receiver_selective_sacks_and_raises_max_rcv_psn_when_it_cannot_record() {
    let mut buf = RxBuf::new(4);
    let mut rx = RtpReceiver::new(rx_cfg(RxMode::Selective), buf.store()).unwrap();
    assert_eq!(
        rx.handle_data(0, &pkt(E), b"a", 1, Cci::DEFAULT),
        RxVerdict::Deliver
    );
    assert_eq!(
        resp(&mut rx, 0),
        Some((TpOpcode::Ack, Rspst::Ack, E, vec![]))
    );
    assert_eq!(
        rx.handle_data(0, &pkt(E + 2), b"c", 1, Cci::DEFAULT),
        RxVerdict::Held
    );
    assert_eq!(
        resp(&mut rx, 0),
        Some((TpOpcode::Sack, Rspst::Ack, E, vec![true, false, true]))
    );
    // Four slots from the head (E+1): E+5 cannot be recorded.
    assert_eq!(
        rx.handle_data(0, &pkt(E + 6), b"g", 1, Cci::DEFAULT),
        RxVerdict::Drop(DropReason::Unrecordable)
    );
    assert_eq!(rx.max_rcv_psn(), Psn::new(E + 6));
    assert_eq!(
        resp(&mut rx, 0),
        Some((
            TpOpcode::Sack,
            Rspst::Ack,
            E,
            vec![true, false, true, false, false, false, false]
        ))
    );
    // Duplicate while gaps remain: TPSACK.
    assert_eq!(
        rx.handle_data(0, &pkt(E), b"a", 1, Cci::DEFAULT),
        RxVerdict::Drop(DropReason::Duplicate)
    );
    assert!(matches!(resp(&mut rx, 0), Some((TpOpcode::Sack, ..))));
    // Fill the hole: in-order, still a gap up to MaxRcvPSN → TPSACK.
    assert_eq!(
        rx.handle_data(0, &pkt(E + 1), b"b", 1, Cci::DEFAULT),
        RxVerdict::Deliver
    );
    assert_eq!(rx.next_held().unwrap().payload, b"c");
    // EPSN-1 wrapped to 0; E+6 = 4 was dropped, so the gap remains.
    assert_eq!(
        resp(&mut rx, 0),
        Some((
            TpOpcode::Sack,
            Rspst::Ack,
            0,
            vec![true, false, false, false, false]
        ))
    );
    for p in 1..=4 {
        assert_eq!(
            rx.handle_data(0, &pkt(p), b"x", 1, Cci::DEFAULT),
            RxVerdict::Deliver
        );
    }
    // Now nothing beyond EPSN-1 is missing: plain TPACK.
    assert_eq!(
        resp(&mut rx, 0),
        Some((TpOpcode::Ack, Rspst::Ack, 4, vec![]))
    );
    // Invalid: silent.
    assert_eq!(
        rx.handle_data(0, &pkt(4000), b"x", 1, Cci::DEFAULT),
        RxVerdict::Drop(DropReason::InvalidPsn)
    );
    assert_eq!(resp(&mut rx, 0), None);
}

#[test]
fn receiver_coalesces_acks_and_honours_the_sack_threshold() {
    let mut cfg = rx_cfg(RxMode::Selective);
    cfg.ack_every = 4;
    cfg.sack_threshold = 3;
    let mut buf = RxBuf::new(128);
    let mut rx = RtpReceiver::new(cfg, buf.store()).unwrap();
    for k in 0..3 {
        rx.handle_data(100, &pkt(E + k), b"x", 1, Cci::DEFAULT);
        assert_eq!(resp(&mut rx, 100), None);
    }
    assert_eq!(rx.poll_timeout(), Some(1100));
    // The delay expires: one TPACK for three packets.
    assert_eq!(
        resp(&mut rx, 1100),
        Some((TpOpcode::Ack, Rspst::Ack, 0, vec![]))
    );
    // A=1 forces an immediate response.
    let mut h = pkt(E + 3);
    h.ack_req = true;
    rx.handle_data(2000, &h, b"x", 1, Cci::DEFAULT);
    assert_eq!(
        resp(&mut rx, 2000),
        Some((TpOpcode::Ack, Rspst::Ack, 1, vec![]))
    );
    // OOO packets: TPSACK only from the third on.
    for k in [5, 6] {
        rx.handle_data(3000, &pkt(E + k), b"x", 1, Cci::DEFAULT);
        assert_eq!(resp(&mut rx, 3000), None);
    }
    rx.handle_data(3000, &pkt(E + 7), b"x", 1, Cci::DEFAULT);
    assert!(matches!(resp(&mut rx, 3000), Some((TpOpcode::Sack, ..))));
}

fn tx_cfg(mode: RetransmitMode, fast: bool, rto: RtoMode, retry_limit: u8) -> TxConfig {
    TxConfig {
        mode,
        fast_retransmit: fast,
        rto,
        retry_limit,
        max_window: 16,
        mtu: 1024,
        local_tpn: 1,
        peer_tpn: 2,
        initial_psn: Psn::new(0xff_fffc),
        overhead: 20,
        cc: CcConfig::NONE,
        cetph: None,
    }
}

#[test]
fn dynamic_rto_sequence_and_retry_limit() {
    let rto = RtoMode::Dynamic { base_us: 20, n: 3 };
    let mut slots = vec![TxSlot::default(); 16];
    let mut tx = RtpSender::new(
        tx_cfg(RetransmitMode::Selective, false, rto, 6),
        &mut slots[..],
    )
    .unwrap();
    tx.post(7, 100).unwrap();
    let mut out = [0u8; 64];
    let first = tx.poll_transmit(0, &mut out).unwrap().unwrap();
    assert!(!first.retransmission && first.last);
    let mut now = 0;
    let mut intervals = vec![];
    while let Some(d) = tx.poll_timeout() {
        intervals.push((d - now) / 1000);
        now = d;
        tx.handle_timeout(now);
        if let Some(p) = tx.poll_transmit(now, &mut out).unwrap() {
            assert!(p.retransmission && p.psn == first.psn);
        }
    }
    assert_eq!(intervals, [20, 160, 1280, 10240, 81920, 655360, 5242880]);
    assert!(tx.is_error());
    assert_eq!(tx.poll_event(), Some(TxEvent::ChannelError));
    assert_eq!(tx.poll_event(), None);
    assert_eq!(tx.stats().retransmitted, 6);
    assert!(tx.post(8, 1).is_err());
}

#[test]
fn static_rto_levels() {
    assert_eq!(RtoMode::Static(StaticRto::Us512).timeout_ns(5), 512_000);
    assert_eq!(RtoMode::Static(StaticRto::Ms16).timeout_ns(0), 16_000_000);
    assert_eq!(RtoMode::Static(StaticRto::Ms128).timeout_ns(0), 128_000_000);
    assert_eq!(RtoMode::Static(StaticRto::S4).timeout_ns(0), 4_000_000_000);
    assert_eq!(
        RtoMode::Dynamic {
            base_us: 2_097_152,
            n: 15
        }
        .timeout_ns(9),
        u64::MAX
    );
    assert!(!RtoMode::Dynamic { base_us: 3, n: 1 }.is_valid());
}

#[test]
fn window_limits() {
    let rto = RtoMode::Static(StaticRto::Us512);
    let mut cfg = tx_cfg(RetransmitMode::GoBackN, true, rto, 3);
    let mut slots = vec![TxSlot::default(); 16];
    cfg.max_window = MAX_SEND_WINDOW + 1;
    assert_eq!(
        RtpSender::new(cfg, &mut slots[..]).err(),
        Some(TxSetupError::Window)
    );
    cfg.max_window = 17;
    assert_eq!(
        RtpSender::new(cfg, &mut slots[..]).err(),
        Some(TxSetupError::Window)
    );
    let mut odd = vec![TxSlot::default(); 12];
    assert_eq!(
        RtpSender::new(cfg, &mut odd[..]).err(),
        Some(TxSetupError::Slots)
    );
    cfg.max_window = 8;
    let mut tx = RtpSender::new(cfg, &mut slots[..]).unwrap();
    tx.post(1, 1024 * 100).unwrap();
    let mut out = [0u8; 64];
    let mut n = 0;
    while tx.poll_transmit(0, &mut out).unwrap().is_some() {
        n += 1;
        assert!(tx.outstanding() <= 8);
    }
    assert_eq!(n, 8);
}

/// Drives a sender and a receiver against each other over a lossless
/// in-memory wire (used for the GBN TPNAK path and segmentation).
#[test]
fn gbn_fast_retransmit_on_tpnak_and_segmentation() {
    let rto = RtoMode::Static(StaticRto::Ms16);
    let mut slots = vec![TxSlot::default(); 16];
    let mut tx = RtpSender::new(
        tx_cfg(RetransmitMode::GoBackN, true, rto, 3),
        &mut slots[..],
    )
    .unwrap();
    let mut rcfg = rx_cfg(RxMode::GoBackNNak);
    rcfg.initial_psn = Psn::new(0xff_fffc);
    rcfg.local_tpn = 2;
    let mut buf = RxBuf::new(0);
    let mut rx = RtpReceiver::new(rcfg, buf.store()).unwrap();
    let mut re = Reassembler::new(0, 1024, 1 << 20);
    tx.post(1, 3000).unwrap();
    let mut out = [0u8; 64];
    let mut sent = vec![];
    while let Some(p) = tx.poll_transmit(0, &mut out).unwrap() {
        sent.push((Rtph::parse(&out).unwrap(), p.len));
    }
    assert_eq!(
        sent.iter().map(|s| s.1).collect::<Vec<_>>(),
        [1024, 1024, 952]
    );
    assert_eq!(
        sent.iter().map(|s| s.0.last).collect::<Vec<_>>(),
        [false, false, true]
    );
    // Lose the second packet.
    let mut completed = vec![];
    for (i, (h, len)) in sent.iter().enumerate() {
        if i == 1 {
            continue;
        }
        if rx.handle_data(10, h, &vec![0; *len as usize], 1, Cci::DEFAULT) == RxVerdict::Deliver {
            completed.push(re.on_packet(h.tpmsn, h.last, *len).unwrap());
        }
        let mut b = [0u8; 64];
        while let Some(n) = rx.poll_transmit(10, &mut b).unwrap() {
            tx.handle_response(20, &b[..n]).unwrap();
        }
    }
    // TPNAK(psn of the second) → go back: resend 2nd and 3rd.
    let mut resent = vec![];
    while let Some(p) = tx.poll_transmit(30, &mut out).unwrap() {
        assert!(p.retransmission);
        let h = Rtph::parse(&out).unwrap();
        resent.push(h.psn);
        if rx.handle_data(40, &h, &vec![0; p.len as usize], 1, Cci::DEFAULT) == RxVerdict::Deliver {
            completed.push(re.on_packet(h.tpmsn, h.last, p.len).unwrap());
        }
    }
    assert_eq!(resent, [Psn::new(0xff_fffd), Psn::new(0xff_fffe)]);
    assert_eq!(
        completed.last(),
        Some(&Segment::Complete {
            tpmsn: 0,
            offset: 2048,
            len: 3000
        })
    );
    let mut b = [0u8; 64];
    while let Some(n) = rx.poll_transmit(50, &mut b).unwrap() {
        tx.handle_response(60, &b[..n]).unwrap();
    }
    assert_eq!(
        tx.poll_event(),
        Some(TxEvent::MessageAcked { token: 1, tpmsn: 0 })
    );
    assert!(tx.is_idle());
    assert_eq!(tx.poll_timeout(), None);
}

#[test]
fn reassembler_rejects_bad_streams() {
    let mut r = Reassembler::new(5, 100, 250);
    assert_eq!(
        r.on_packet(5, false, 100),
        Ok(Segment::Partial {
            tpmsn: 5,
            offset: 0
        })
    );
    assert_eq!(
        r.on_packet(6, true, 1),
        Err(ReassemblyError::TpmsnMismatch {
            expected: 5,
            got: 6
        })
    );
    assert_eq!(r.on_packet(5, false, 99), Err(ReassemblyError::BadLength));
    assert_eq!(
        r.on_packet(5, false, 100),
        Ok(Segment::Partial {
            tpmsn: 5,
            offset: 100
        })
    );
    assert_eq!(r.on_packet(5, true, 100), Err(ReassemblyError::TooLong));
    assert_eq!(
        r.on_packet(5, true, 50),
        Ok(Segment::Complete {
            tpmsn: 5,
            offset: 200,
            len: 250
        })
    );
    assert_eq!(r.on_packet(6, true, 0), Err(ReassemblyError::BadLength));
}

#[test]
fn tp_channel_groups() {
    let mut rr = TpGroup::new(4, TpgPolicy::RoundRobin).unwrap();
    let picks: Vec<u32> = (0..6)
        .map(|_| rr.select(|_| 0, |i| i != 2).unwrap())
        .collect();
    assert_eq!(picks, [0, 1, 3, 0, 1, 3]);
    let mut ll = TpGroup::new(3, TpgPolicy::LeastLoaded).unwrap();
    let loads = [5u64, 2, 2];
    assert_eq!(ll.select(|i| loads[i as usize], |_| true), Some(1));
    assert_eq!(ll.select(|i| loads[i as usize], |i| i != 1), Some(2));
    assert!(TpGroup::new(33, TpgPolicy::RoundRobin).is_none());
    let mut owners = vec![None; 4];
    let mut m = Membership::new(&mut owners);
    m.join(0, 1).unwrap();
    assert_eq!(m.join(0, 2), Err(MembershipError::AlreadyMember));
    m.leave(0);
    m.join(0, 2).unwrap();
    assert_eq!(m.group_of(0), Some(2));
    let ports: Vec<u16> = (0..4).map(|i| member_sport(65534, i)).collect();
    assert_eq!(ports, [65534, 65535, 49152, 49153]);
}

fn params(mode: RetransmitMode, window: u32, mtu: u32) -> ChannelParams {
    ChannelParams {
        mode,
        fast_retransmit: true,
        ooo_window: window,
        rto: RtoMode::Dynamic { base_us: 20, n: 3 },
        retry_limit: 7,
        mtu,
        cc: cc_code::CAQM,
    }
}

#[test]
fn connection_management_with_lost_messages() {
    let timing = CmTiming {
        retry_ns: 1_000_000,
        max_tries: 5,
    };
    let mut a = CmSession::connect(
        0,
        timing,
        0x1234,
        0xa,
        Psn::new(0x11_1111),
        params(RetransmitMode::Selective, 2048, 4096),
    );
    let local_b = params(RetransmitMode::Selective, 512, 1024);
    let mut b: Option<CmSession> = None;
    let mut buf = [0u8; 64];
    let mut now = 0;
    let mut dropped = 0;
    // Lose the first REQ, the first REP and the first RTU.
    let mut drops = [true, true, true];
    for _ in 0..20 {
        if let Some(n) = a.poll_transmit(now, &mut buf).unwrap() {
            let m = CmMsg::parse(&buf[..n]).unwrap();
            let i = match m.kind {
                ub_proto::transport::cm::CmKind::Req => 0,
                _ => 2,
            };
            if drops[i] {
                drops[i] = false;
                dropped += 1;
            } else if let Some(s) = b.as_mut() {
                s.handle_msg(now, &m);
            } else {
                b = CmSession::accept(now, timing, &m, 0xb, Psn::new(0x22_2222), &local_b);
            }
        }
        if let Some(s) = b.as_mut() {
            if let Some(n) = s.poll_transmit(now, &mut buf).unwrap() {
                let m = CmMsg::parse(&buf[..n]).unwrap();
                if drops[1] {
                    drops[1] = false;
                    dropped += 1;
                } else {
                    a.handle_msg(now, &m);
                }
            }
            s.handle_timeout(now);
        }
        a.handle_timeout(now);
        now += 1_000_000;
    }
    let b = b.unwrap();
    assert_eq!(dropped, 3);
    assert_eq!(
        (a.state(), a.channel()),
        (CmState::Established, ChannelState::Rts)
    );
    assert_eq!(
        (b.state(), b.channel()),
        (CmState::Established, ChannelState::Rts)
    );
    assert_eq!(a.peer_psn(), Psn::new(0x22_2222));
    assert_eq!(b.peer_psn(), Psn::new(0x11_1111));
    assert_eq!(a.peer_tpn(), 0xb);
    assert_eq!(b.peer_tpn(), 0xa);
    assert_eq!(a.params(), b.params());
    assert_eq!(a.params().ooo_window, 512);
    assert_eq!(a.params().mtu, 1024);
    assert_eq!(a.params().mode, RetransmitMode::Selective);
}

#[test]
fn connection_management_gives_up_and_tears_down() {
    let timing = CmTiming {
        retry_ns: 100,
        max_tries: 3,
    };
    let mut a = CmSession::connect(
        0,
        timing,
        1,
        0xa,
        Psn::new(1),
        params(RetransmitMode::GoBackN, 128, 4096),
    );
    let mut buf = [0u8; 64];
    let mut sent = 0;
    for now in (0..1000).step_by(50) {
        a.handle_timeout(now);
        if a.poll_transmit(now, &mut buf).unwrap().is_some() {
            sent += 1;
        }
    }
    assert_eq!(sent, 3);
    assert_eq!(
        (a.state(), a.channel()),
        (CmState::Failed, ChannelState::Err)
    );
    // Teardown of an established pair.
    let mut a = CmSession::connect(
        0,
        timing,
        2,
        0xa,
        Psn::new(1),
        params(RetransmitMode::GoBackN, 128, 4096),
    );
    let n = a.poll_transmit(0, &mut buf).unwrap().unwrap();
    let req = CmMsg::parse(&buf[..n]).unwrap();
    let mut b = CmSession::accept(
        0,
        timing,
        &req,
        0xb,
        Psn::new(2),
        &params(RetransmitMode::Selective, 256, 4096),
    )
    .unwrap();
    assert_eq!(b.channel(), ChannelState::Rtr);
    let n = b.poll_transmit(0, &mut buf).unwrap().unwrap();
    a.handle_msg(0, &CmMsg::parse(&buf[..n]).unwrap());
    assert_eq!(a.params().mode, RetransmitMode::GoBackN);
    // RTU lost; the first data packet moves B to RTS.
    b.handle_data();
    assert_eq!(b.channel(), ChannelState::Rts);
    a.suspend();
    assert_eq!(a.channel(), ChannelState::Suspended);
    a.resume();
    a.close(10);
    let n = a.poll_transmit(10, &mut buf).unwrap().unwrap();
    b.handle_msg(10, &CmMsg::parse(&buf[..n]).unwrap());
    assert_eq!(
        (b.state(), b.channel()),
        (CmState::Closed, ChannelState::Reset)
    );
    let n = b.poll_transmit(10, &mut buf).unwrap().unwrap();
    a.handle_msg(10, &CmMsg::parse(&buf[..n]).unwrap());
    assert_eq!(
        (a.state(), a.channel()),
        (CmState::Closed, ChannelState::Reset)
    );
    assert!(ChannelState::Reset.can_move_to(ChannelState::Rtr));
    assert!(!ChannelState::Reset.can_move_to(ChannelState::Rts));
    assert!(!ChannelState::Err.can_move_to(ChannelState::Rts));
}

#[test]
fn receiver_holds_in_order_packets_until_earlier_held_ones_are_drained() {
    let mut buf = RxBuf::new(128);
    let mut rx = RtpReceiver::new(rx_cfg(RxMode::Selective), buf.store()).unwrap();
    assert_eq!(
        rx.handle_data(0, &pkt(E + 1), b"b", 1, Cci::DEFAULT),
        RxVerdict::Held
    );
    assert_eq!(
        rx.handle_data(0, &pkt(E), b"a", 1, Cci::DEFAULT),
        RxVerdict::Deliver
    );
    // Not drained yet: E+2 is in order but must not overtake E+1.
    assert_eq!(
        rx.handle_data(0, &pkt((E + 2) & 0xff_ffff), b"c", 1, Cci::DEFAULT),
        RxVerdict::Held
    );
    let order: Vec<Vec<u8>> =
        std::iter::from_fn(|| rx.next_held().map(|p| p.payload.to_vec())).collect();
    assert_eq!(order, [b"b".to_vec(), b"c".to_vec()]);
    assert_eq!(rx.epsn(), Psn::new(1));
}

#[test]
fn caqm_sender_follows_table_6_11() {
    use ub_proto::transport::cc::{CcAlgorithm, CcState};
    let cfg = CcConfig {
        alg: CcAlgorithm::Caqm { hint_unit: 32 },
        initial_cw: 100_000,
        max_cw: 1_000_000,
        mtu: 4096,
        path_wide_permille: 0,
    };
    let ack = |seq, c, i, hint| {
        Some(Cetph::Caqm {
            ack_seq: seq,
            loc: false,
            i,
            c,
            hint,
        })
    };
    // C=0, I=0: unchanged.
    let mut s = CcState::new(cfg);
    s.on_ack(ack(4096, 0, false, 0));
    assert_eq!(s.cw(), 100_000);
    // C=0, I=1: + Hint × unit.
    s.on_ack(ack(8192, 0, true, 10));
    assert_eq!(s.cw(), 100_320);
    // C>0, I=0: − C × MTU / 2.
    s.on_ack(ack(12288, 2, false, 0));
    assert_eq!(s.cw(), 100_320 - 4096);
    // C>0, I=1: + Hint, then decrease.
    s.on_ack(ack(16384, 1, true, 4));
    assert_eq!(s.cw(), 100_320 - 4096 + 128 - 2048);
    // Floor: one MTU.
    s.on_ack(ack(20480, 255, false, 0));
    assert_eq!(s.cw(), 4096);
    // inflight = sent − recvd; timeout clears it.
    let mut s = CcState::new(cfg);
    s.on_send(5000);
    s.on_send(3000);
    assert_eq!(s.inflight(), 8000);
    assert!(s.can_send(4096) && !s.can_send(100_000));
    s.on_ack(ack(5000, 0, false, 0));
    assert_eq!(s.inflight(), 3000);
    s.on_requeue(3000);
    assert_eq!(s.inflight(), 0);
    s.on_send(3000);
    s.on_timeout();
    assert_eq!(s.inflight(), 0);
    // The data CCI asks for an increase.
    assert!(matches!(
        s.cci(),
        Cci::Caqm {
            enable: true,
            c: false,
            i: true,
            ..
        }
    ));
}

#[test]
fn dcqcn_rate_control_and_cnp_pacing() {
    use ub_proto::transport::dcqcn::{CnpGenerator, DcqcnConfig, RateController};
    let line = 12_500_000_000; // 100 Gb/s in bytes/s
    let cfg = DcqcnConfig::defaults(line);
    let mut rc = RateController::new(cfg, 0);
    assert_eq!(rc.rate(), line);
    // First CNP: alpha = 1, so the rate halves.
    rc.on_cnp(1000);
    assert_eq!(rc.rate(), line / 2);
    assert_eq!(rc.target(), line);
    // A second CNP right away cuts again, by alpha/2 (alpha still ~1).
    rc.on_cnp(2000);
    assert!(rc.rate() < line / 4 + line / 50 && rc.rate() > line / 4 - line / 50);
    // Pacing: 4096 bytes at the current rate.
    let r = rc.rate();
    let t0 = rc.next_send_time(2000);
    rc.on_send(t0, 4096);
    assert_eq!(rc.next_send_time(2000), t0 + 4096 * 1_000_000_000 / r);
    // Without CNPs the rate recovers: fast recovery toward the target, then
    // additive increase back to line rate.
    let mut now = 2000;
    let mut last = rc.rate();
    for _ in 0..5 {
        now += 55_000;
        rc.advance(now);
        assert!(rc.rate() > last);
        last = rc.rate();
    }
    rc.advance(now + 1_000_000_000);
    assert_eq!(rc.rate(), line);
    // Long idle periods cost bounded work and never overflow.
    rc.advance(u64::MAX);
    assert_eq!(rc.rate(), line);
    // Notification point: at most one CNP per interval.
    let mut g = CnpGenerator::new(50_000);
    assert!(!g.on_packet(0, false));
    assert!(g.on_packet(10, true));
    assert!(!g.on_packet(20_000, true));
    assert!(g.on_packet(60_010, true));
}
