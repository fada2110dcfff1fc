// SPDX-License-Identifier: GPL-2.0
//! Transport layer targets: the transport headers, the RTP sender fed
//! acknowledgements (TPACK, TPNAK, TPSACK and their bitmaps), and the
//! connection manager's messages and sessions.

use std::collections::VecDeque;

use ub_proto::transport::cc::{CcAlgorithm, CcConfig};
use ub_proto::transport::cm::{
    ChannelParams, ChannelState, CmKind, CmMsg, CmSession, CmTiming, CM_MSG_LEN,
};
use ub_proto::transport::hdr::{
    padding_for, set_bitmap_bit, BitmapSize, Cetph, CetphKind, CtpOpcode, Ctph, Rspst, Rtph,
    Saetph, TpOpcode, Utph, CNP_CETPH_LEN, CTPH_LEN, RTPH_LEN, SAETPH_FIXED_LEN,
};
use ub_proto::transport::psn::Psn;
use ub_proto::transport::tx::{RtpSender, TxConfig, TxEvent, TxSlot};
use ub_proto::transport::{RetransmitMode, RtoMode, StaticRto};

use crate::input::{Input, Output};

/// Header kinds of [`transport_header`]'s selector.
mod hdr_kind {
    pub(super) const RTPH: u8 = 0;
    pub(super) const UTPH: u8 = 1;
    pub(super) const CTPH: u8 = 2;
    pub(super) const CETPH_LDCP: u8 = 3;
    pub(super) const CETPH_CAQM: u8 = 4;
    pub(super) const CETPH_CNP: u8 = 5;
    pub(super) const SAETPH: u8 = 6;
    pub(super) const COUNT: u8 = 7;
}

/// RTPH, UTPH, CTPH, the three CETPH layouts and the SAETPH with its
/// bitmap.
///
/// Input: a selector byte (`hdr_kind`), then the header.
///
/// Asserts: every header that parses re-encodes to the same bytes except
/// its reserved bits, which are written as zero: RTPH byte 8 bits 5..0
/// and the RSPINFO of RSPST 000;
/// UTPH bytes 2..16; CAQM CETPH byte 4 bits 7..2; CNP CETPH byte 0 bits
/// 4..0 and bytes 1..16; SAETPH byte 0 bits 7..3. The re-encoded header
/// parses to the same value; a SAETPH bitmap read with `Saetph::bit` and
/// written back with `set_bitmap_bit` is the same bitmap, and no bit past
/// its size reads as set.
pub fn transport_header(data: &[u8]) {
    let mut inp = Input::new(data);
    let sel = inp.u8() % hdr_kind::COUNT;
    let b = inp.rest();
    match sel {
        hdr_kind::RTPH => {
            let Ok(h) = Rtph::parse(b) else { return };
            let mut out = [0u8; RTPH_LEN];
            assert_eq!(h.write(&mut out), Ok(RTPH_LEN));
            let mut want = [0u8; RTPH_LEN];
            want.copy_from_slice(&b[..RTPH_LEN]);
            want[8] &= 0xc0;
            if want[12] >> 5 == 0 {
                // RSPST 000 (TPACK, and every data packet) has no RSPINFO:
                // `Rspst::Ack` keeps none, and writes zeros.
                want[12] = 0;
            }
            assert_eq!(out, want, "RTPH re-encoding of {h:?}");
            assert_eq!(Rtph::parse(&out), Ok(h));
            assert!(!h.last || h.opcode == TpOpcode::Data);
            assert_eq!(TpOpcode::from_bits(h.opcode.bits()), Ok(h.opcode));
            assert_eq!(Rspst::from_byte(h.rspst.byte()), Ok(h.rspst));
        }
        hdr_kind::UTPH => {
            let Ok(h) = Utph::parse(b) else { return };
            let mut out = [0xffu8; RTPH_LEN];
            assert_eq!(h.write(&mut out), Ok(RTPH_LEN));
            let mut want = [0u8; RTPH_LEN];
            want[1] = b[1];
            assert_eq!(out, want, "UTPH re-encoding");
            assert_eq!(Utph::parse(&out), Ok(h));
        }
        hdr_kind::CTPH => {
            let Ok(h) = Ctph::parse(b) else { return };
            let mut out = [0u8; CTPH_LEN];
            assert_eq!(h.write(&mut out), Ok(CTPH_LEN));
            assert_eq!(out[0], b[0], "CTPH re-encoding");
            assert!(matches!(h.opcode, CtpOpcode::Data | CtpOpcode::Cnp));
        }
        hdr_kind::CETPH_LDCP | hdr_kind::CETPH_CAQM => {
            let kind = if sel == hdr_kind::CETPH_LDCP {
                CetphKind::Ldcp
            } else {
                CetphKind::Caqm
            };
            let Ok(c) = Cetph::parse(kind, b) else { return };
            let mut out = vec![0u8; c.len()];
            assert_eq!(c.write(&mut out), Ok(c.len()));
            let mut want = b[..c.len()].to_vec();
            if kind == CetphKind::Caqm {
                want[4] &= 0x03;
            }
            assert_eq!(out, want, "CETPH re-encoding of {c:?}");
            assert_eq!(Cetph::parse(kind, &out), Ok(c));
            assert!(c.ack_seq().is_some());
        }
        hdr_kind::CETPH_CNP => {
            let Ok(c) = Cetph::parse_cnp(b) else { return };
            let mut out = [0xffu8; CNP_CETPH_LEN];
            assert_eq!(c.write(&mut out), Ok(CNP_CETPH_LEN));
            let mut want = [0u8; CNP_CETPH_LEN];
            want[0] = b[0] & 0xe0;
            assert_eq!(out, want, "CNP CETPH re-encoding");
            assert_eq!(Cetph::parse_cnp(&out), Ok(c));
        }
        _ => {
            let Ok((s, len)) = Saetph::parse(b) else {
                return;
            };
            assert_eq!(len, SAETPH_FIXED_LEN + s.size.bytes());
            assert_eq!(s.bitmap.len(), s.size.bytes());
            assert_eq!(BitmapSize::from_code(s.size.code()), Ok(s.size));
            assert_eq!(
                BitmapSize::fitting(s.size.bits(), BitmapSize::B1024),
                s.size
            );
            let mut out = vec![0xffu8; len];
            assert_eq!(
                Saetph::write_fixed(s.size, s.max_rcv_psn, &mut out),
                Ok(len)
            );
            for n in 0..s.size.bits() {
                if s.bit(n) {
                    set_bitmap_bit(&mut out[SAETPH_FIXED_LEN..], n);
                }
            }
            for n in s.size.bits()..s.size.bits() + 64 {
                assert!(!s.bit(n), "bit {n} past a {:?} bitmap", s.size);
            }
            let mut want = b[..len].to_vec();
            want[0] &= 0x07;
            assert_eq!(out, want, "SAETPH re-encoding");
            assert_eq!(Saetph::parse(&out), Ok((s, len)));
        }
    }
}

const LOCAL_TPN: u32 = 0x00_0123;
const PEER_TPN: u32 = 0x00_0456;

/// Operations of [`transport_ack`]'s input.
mod ack_op {
    pub(super) const POST: u8 = 0;
    pub(super) const RESPONSE: u8 = 1;
    pub(super) const TIME: u8 = 2;
    pub(super) const DEADLINE: u8 = 3;
    pub(super) const TRANSMIT: u8 = 4;
    pub(super) const PEER_CLOSED: u8 = 5;
    pub(super) const COUNT: u8 = 6;
}

/// What [`transport_ack`] knows the sender must have done.
struct AckModel {
    /// Tokens posted and not yet acknowledged, in posting order.
    posted: VecDeque<u64>,
    next_token: u64,
    new_packets: u64,
    errors: u32,
}

/// The RTP sender (`transport::tx::RtpSender`) fed responses: TPACK,
/// TPNAK, TPSACK, with or without CETPH, and their bitmaps.
///
/// Input: a configuration byte (Go-Back-N or selective, fast
/// retransmission, no CC / LDCP / CAQM), the initial PSN (so the 24-bit
/// wrap is reached), the window, then operations: post a message, feed a
/// response, let time pass, transmit, the peer's DREQ. A response's bytes
/// are the input's, with (by its flags) the destination TPN, the PSN
/// (relative to the oldest unacknowledged PSN), the opcode, RSPST and the
/// SAETPH's MaxRcvPSN made plausible so that the logic behind the parser
/// is reached.
///
/// Asserts: nothing outside the window is outstanding; the oldest
/// unacknowledged PSN only moves forward and never past the next new
/// PSN; messages are acknowledged in the order they were posted, each
/// once, and `ChannelError` comes at most once; every packet sent is a
/// new PSN or a retransmission of an outstanding one, at most an MTU,
/// with a data RTPH naming both TPNs and the padding its length needs;
/// the retransmission counters add up to `retransmitted`, `sent` counts
/// the new packets and `max_outstanding` stays within the window.
pub fn transport_ack(data: &[u8]) {
    let mut inp = Input::new(data);
    let c = inp.u8();
    let mode = if c & 1 == 0 {
        RetransmitMode::GoBackN
    } else {
        RetransmitMode::Selective
    };
    let (alg, cetph) = match (c >> 2) % 3 {
        0 => (CcAlgorithm::None, None),
        1 => (CcAlgorithm::Ldcp, Some(CetphKind::Ldcp)),
        _ => (CcAlgorithm::Caqm { hint_unit: 64 }, Some(CetphKind::Caqm)),
    };
    let cc = if alg == CcAlgorithm::None {
        CcConfig::NONE
    } else {
        CcConfig {
            alg,
            initial_cw: 4096,
            max_cw: 1 << 20,
            mtu: 256,
            path_wide_permille: 0,
        }
    };
    let initial_psn = Psn::new(inp.u24());
    let window = u32::from(inp.u8() % 64) + 1;
    let cfg = TxConfig {
        mode,
        fast_retransmit: c & 2 != 0,
        rto: RtoMode::Static(StaticRto::Us512),
        retry_limit: 3,
        max_window: window,
        mtu: 256,
        local_tpn: LOCAL_TPN,
        peer_tpn: PEER_TPN,
        initial_psn,
        overhead: 20,
        cc,
        cetph,
    };
    let slots = vec![TxSlot::default(); window.next_power_of_two() as usize];
    let tx = RtpSender::new(cfg, slots);
    let Ok(mut tx) = tx else {
        panic!("sender refused: {cfg:?}");
    };
    let mut m = AckModel {
        posted: VecDeque::new(),
        next_token: 1,
        new_packets: 0,
        errors: 0,
    };
    let mut now = 1_000_000u64;
    let mut out = [0u8; RTPH_LEN];
    let mut steps = 0;
    while !inp.is_empty() && steps < 256 {
        steps += 1;
        let una = tx.una();
        let nxt = tx.next_psn();
        let outstanding = tx.outstanding();
        match inp.u8() % ack_op::COUNT {
            ack_op::POST => {
                let len = u32::from(inp.u16() % 2000) + 1;
                if tx.post(m.next_token, len).is_ok() {
                    m.posted.push_back(m.next_token);
                    m.next_token += 1;
                }
                transmit(&mut tx, now, &mut out, &mut m, 64);
            }
            ack_op::RESPONSE => {
                let resp = response(&mut inp, una);
                let _ = tx.handle_response(now, &resp);
            }
            ack_op::TIME => {
                now += u64::from(inp.u16()) * 256;
                tx.handle_timeout(now);
            }
            ack_op::DEADLINE => {
                if let Some(d) = tx.poll_timeout() {
                    now = now.max(d);
                    tx.handle_timeout(now);
                }
            }
            ack_op::TRANSMIT => {
                let n = usize::from(inp.u8() % 64);
                transmit(&mut tx, now, &mut out, &mut m, n);
            }
            _ => {
                let d = u32::from(inp.u16());
                let _ = tx.handle_peer_closed(now, una.add(d).sub(1 << 15));
            }
        }
        // Forward distances from the old una: a move backwards, or past
        // the next new PSN, shows as a distance beyond nxt's.
        assert!(
            tx.una().distance_from(una) <= tx.next_psn().distance_from(una),
            "una moved from {una:?} to {:?} (nxt {nxt:?} -> {:?}, {outstanding} outstanding)",
            tx.una(),
            tx.next_psn()
        );
        assert!(
            tx.next_psn().distance_from(nxt) <= window,
            "nxt moved from {nxt:?} to {:?}",
            tx.next_psn()
        );
        assert!(
            tx.outstanding() <= window,
            "{} outstanding",
            tx.outstanding()
        );
        while let Some(e) = tx.poll_event() {
            match e {
                TxEvent::MessageAcked { token, .. } => {
                    assert_eq!(Some(token), m.posted.pop_front(), "ack out of order");
                }
                TxEvent::ChannelError => {
                    m.errors += 1;
                    assert_eq!(m.errors, 1, "ChannelError twice");
                }
            }
        }
        let s = tx.stats();
        assert_eq!(
            s.retransmitted,
            s.rtx_fast + s.rtx_mark_psn + s.rtx_rto + s.rtx_go_back_n
        );
        assert_eq!(s.sent, m.new_packets);
        assert!(s.max_outstanding <= window);
    }
}

/// Sends up to `n` packets and checks each.
fn transmit<S: core::ops::DerefMut<Target = [TxSlot]>>(
    tx: &mut RtpSender<S>,
    now: u64,
    out: &mut [u8; RTPH_LEN],
    m: &mut AckModel,
    n: usize,
) {
    for _ in 0..n {
        let (una, nxt) = (tx.una(), tx.next_psn());
        let p = match tx.poll_transmit(now, out) {
            Ok(Some(p)) => p,
            Ok(None) => return,
            Err(e) => panic!("poll_transmit: {e:?}"),
        };
        if p.retransmission {
            assert!(
                !p.psn.before(una) && p.psn.before(nxt),
                "{p:?} not outstanding"
            );
        } else {
            assert_eq!(p.psn, nxt, "a new packet out of sequence");
            m.new_packets += 1;
        }
        assert!(p.len >= 1 && p.len <= 256, "{p:?}");
        assert_eq!(p.hdr_len, RTPH_LEN);
        let h = Rtph::parse(&out[..]);
        let Ok(h) = h else {
            panic!("the sender wrote an RTPH it cannot parse: {h:?}");
        };
        assert_eq!(
            (h.opcode, h.src_tpn, h.dst_tpn, h.psn, h.tpmsn, h.last),
            (TpOpcode::Data, LOCAL_TPN, PEER_TPN, p.psn, p.tpmsn, p.last)
        );
        assert_eq!(h.padding, p.padding);
        assert_eq!(p.padding, padding_for(RTPH_LEN + p.len as usize));
    }
}

/// Builds a response from the input (see [`transport_ack`]).
fn response(inp: &mut Input<'_>, una: Psn) -> Vec<u8> {
    let flags = inp.u8();
    let delta = inp.u16();
    let len = usize::from(inp.u8());
    let mut r = inp.bytes(len).to_vec();
    if r.len() < RTPH_LEN {
        r.resize(RTPH_LEN, 0);
    }
    if flags & 1 != 0 {
        r[5..8].copy_from_slice(&LOCAL_TPN.to_be_bytes()[1..]);
    }
    if flags & 2 != 0 {
        // Mostly just around una: a few packets back to a window ahead.
        let psn = una.add(u32::from(delta % 512)).sub(64);
        r[9..12].copy_from_slice(&psn.value().to_be_bytes()[1..]);
    }
    if flags & 4 != 0 {
        r[0] = [2, 3, 5, 6][usize::from(flags >> 6)];
        r[1] &= 0x3f;
    }
    if flags & 8 != 0 {
        r[12] = [0x00, 0x60, 0x21, 0x41, 0xa0, 0x61][usize::from(flags >> 5) % 6];
    }
    if flags & 16 != 0 {
        // MaxRcvPSN of a SAETPH, wherever it is (after a CETPH or not).
        let at = if r[0] & 0x7f == 6 {
            RTPH_LEN + 8
        } else {
            RTPH_LEN
        };
        if r.len() < at + 4 {
            r.resize(at + 4, 0);
        }
        r[at] &= 0x07;
        let max = una.add(u32::from(delta % 300));
        r[at + 1..at + 4].copy_from_slice(&max.value().to_be_bytes()[1..]);
    }
    r
}

/// Operations of [`cm`]'s input.
mod cm_op {
    pub(super) const TO_INITIATOR: u8 = 0;
    pub(super) const TO_RESPONDER: u8 = 1;
    pub(super) const TIME: u8 = 2;
    pub(super) const EXCHANGE: u8 = 3;
    pub(super) const USER: u8 = 4;
    pub(super) const COUNT: u8 = 5;
}

const TXN: u32 = 0x7777;

fn local_params() -> ChannelParams {
    ChannelParams {
        mode: RetransmitMode::Selective,
        fast_retransmit: true,
        ooo_window: 256,
        rto: RtoMode::Static(StaticRto::Us512),
        retry_limit: 7,
        mtu: 4096,
        cc: 0,
    }
}

/// One session under test and what it has sent.
struct Side {
    s: Option<CmSession>,
    tpn: u32,
    /// The session's transaction ID: the initiator's own, the REQ's for
    /// the responder (the fuzz input may have chosen it).
    txn: Option<u32>,
    sent: VecDeque<CmMsg>,
    reqs: u32,
    dreqs: u32,
}

/// Connection-manager messages (REQ, REP, RTU, REJ, DREQ, DREP) and the
/// two ends of a session fed them.
///
/// Input: a 32-byte message, then operations: a message for the initiator
/// or the responder (parsed from the input, its transaction ID and TPNs
/// optionally made the session's), time passing, the two ends exchanging
/// what they sent, user calls (close, suspend, resume, error, data seen).
///
/// Asserts: a message that parses re-encodes to the same 32 bytes except
/// the reserved ones (flags bits 7..2, bytes 11, 15, 30, 31, and the RTO
/// base of a static RTO), and parses back to the same value; every message
/// a session sends parses and carries its transaction ID and TPN; the
/// initiator sends at most `max_tries` REQs and each end at most
/// `max_tries` DREQs; a channel in ERR leaves it only for RESET.
pub fn cm(data: &[u8]) {
    let mut inp = Input::new(data);
    let first = inp.bytes(CM_MSG_LEN);
    if let Ok(m) = CmMsg::parse(first) {
        let mut out = [0u8; CM_MSG_LEN];
        assert_eq!(m.write(&mut out), Ok(CM_MSG_LEN));
        let mut want = [0u8; CM_MSG_LEN];
        want.copy_from_slice(first);
        want[3] &= 0x03;
        want[11] = 0;
        want[15] = 0;
        want[30] = 0;
        want[31] = 0;
        if matches!(m.params.rto, RtoMode::Static(_)) {
            want[24..28].fill(0);
        }
        assert_eq!(out, want, "CM re-encoding of {m:?}");
        assert_eq!(CmMsg::parse(&out), Ok(m));
    }

    let timing = CmTiming {
        retry_ns: 1000,
        max_tries: 3,
    };
    let mut now = 0u64;
    let mut ini = Side {
        s: Some(CmSession::connect(
            now,
            timing,
            TXN,
            3,
            Psn::new(100),
            local_params(),
        )),
        tpn: 3,
        txn: Some(TXN),
        sent: VecDeque::new(),
        reqs: 0,
        dreqs: 0,
    };
    let mut resp = Side {
        s: None,
        tpn: 9,
        txn: None,
        sent: VecDeque::new(),
        reqs: 0,
        dreqs: 0,
    };
    let mut steps = 0;
    while !inp.is_empty() && steps < 256 {
        steps += 1;
        let before = [ini.s.map(|s| s.channel()), resp.s.map(|s| s.channel())];
        match inp.u8() % cm_op::COUNT {
            op @ (cm_op::TO_INITIATOR | cm_op::TO_RESPONDER) => {
                let flags = inp.u8();
                let mut b = [0u8; CM_MSG_LEN];
                let raw = inp.bytes(CM_MSG_LEN);
                b[..raw.len()].copy_from_slice(raw);
                let Ok(mut m) = CmMsg::parse(&b) else {
                    continue;
                };
                if flags & 1 != 0 {
                    m.txn = TXN;
                }
                if flags & 2 != 0 {
                    (m.src_tpn, m.dst_tpn) = if op == cm_op::TO_INITIATOR {
                        (resp.tpn, ini.tpn)
                    } else {
                        (ini.tpn, resp.tpn)
                    };
                }
                let side = if op == cm_op::TO_INITIATOR {
                    &mut ini
                } else {
                    &mut resp
                };
                deliver(side, now, timing, &m);
            }
            cm_op::TIME => {
                now += u64::from(inp.u16());
                for side in [&mut ini, &mut resp] {
                    if let Some(s) = side.s.as_mut() {
                        s.handle_timeout(now);
                    }
                }
            }
            cm_op::EXCHANGE => {
                let n = usize::from(inp.u8() % 4) + 1;
                for _ in 0..n {
                    send_all(&mut ini, now);
                    send_all(&mut resp, now);
                    while let Some(m) = ini.sent.pop_front() {
                        deliver(&mut resp, now, timing, &m);
                    }
                    while let Some(m) = resp.sent.pop_front() {
                        deliver(&mut ini, now, timing, &m);
                    }
                }
            }
            _ => {
                let what = inp.u8();
                let side = if what & 1 == 0 { &mut ini } else { &mut resp };
                if let Some(s) = side.s.as_mut() {
                    match (what >> 1) % 6 {
                        0 => s.close(now),
                        1 => s.close_after(now, Psn::new(u32::from(inp.u16()))),
                        2 => s.suspend(),
                        3 => s.resume(),
                        4 => s.set_error(),
                        _ => s.handle_data(),
                    }
                }
            }
        }
        send_all(&mut ini, now);
        send_all(&mut resp, now);
        assert!(ini.reqs <= u32::from(timing.max_tries), "{} REQs", ini.reqs);
        for side in [&ini, &resp] {
            assert!(
                side.dreqs <= u32::from(timing.max_tries),
                "{} DREQs",
                side.dreqs
            );
        }
        let after = [ini.s.map(|s| s.channel()), resp.s.map(|s| s.channel())];
        for (b, a) in before.into_iter().zip(after) {
            if b == Some(ChannelState::Err) {
                assert!(
                    matches!(a, Some(ChannelState::Err | ChannelState::Reset)),
                    "ERR -> {a:?}"
                );
            }
        }
    }
}

fn deliver(side: &mut Side, now: u64, timing: CmTiming, m: &CmMsg) {
    match side.s.as_mut() {
        Some(s) => s.handle_msg(now, m),
        None => {
            side.s = CmSession::accept(now, timing, m, side.tpn, Psn::new(200), &local_params());
            if side.s.is_some() {
                side.txn = Some(m.txn);
            }
        }
    }
}

fn send_all(side: &mut Side, now: u64) {
    let Some(s) = side.s.as_mut() else { return };
    let mut out = [0u8; CM_MSG_LEN];
    for _ in 0..8 {
        let n = match s.poll_transmit(now, &mut out) {
            Ok(Some(n)) => n,
            Ok(None) => return,
            Err(e) => panic!("poll_transmit: {e:?}"),
        };
        assert_eq!(n, CM_MSG_LEN);
        let m = CmMsg::parse(&out);
        let Ok(m) = m else {
            panic!("a session sent a message it cannot parse: {m:?}");
        };
        assert_eq!(m.src_tpn, side.tpn);
        match m.kind {
            CmKind::Req => side.reqs += 1,
            CmKind::Dreq => side.dreqs += 1,
            _ => {}
        }
        assert_eq!(
            Some(m.txn),
            side.txn,
            "{m:?} from a session of {:?}",
            side.txn
        );
        side.sent.push_back(m);
    }
}

pub(crate) fn seeds_header() -> Vec<Vec<u8>> {
    let mut v = Vec::new();
    let mut rtph = [0u8; RTPH_LEN];
    let h = Rtph::data(LOCAL_TPN, PEER_TPN, Psn::new(0xff_fffe), 7, true);
    if h.write(&mut rtph).is_ok() {
        v.push(Output::default().u8(hdr_kind::RTPH).raw(&rtph).done());
    }
    let ack = Rtph {
        opcode: TpOpcode::SackCc,
        last: false,
        rspst: Rspst::Rnr(3),
        ..h
    };
    if ack.write(&mut rtph).is_ok() {
        v.push(Output::default().u8(hdr_kind::RTPH).raw(&rtph).done());
    }
    let mut utph = [0u8; RTPH_LEN];
    if (Utph { padding: 2, nlp: 2 }).write(&mut utph).is_ok() {
        v.push(Output::default().u8(hdr_kind::UTPH).raw(&utph).done());
    }
    v.push(Output::default().u8(hdr_kind::CTPH).u8(0x5a).done());
    for (kind, c) in [
        (
            hdr_kind::CETPH_LDCP,
            Cetph::Ldcp {
                ack_seq: 1000,
                ce_seq: 10,
            },
        ),
        (
            hdr_kind::CETPH_CAQM,
            Cetph::Caqm {
                ack_seq: 5,
                loc: true,
                i: true,
                c: 2,
                hint: 300,
            },
        ),
        (hdr_kind::CETPH_CNP, Cetph::Cnp { ecn: 3, loc: true }),
    ] {
        let mut out = [0u8; CNP_CETPH_LEN];
        if let Ok(n) = c.write(&mut out) {
            v.push(Output::default().u8(kind).raw(&out[..n]).done());
        }
    }
    for size in [BitmapSize::B64, BitmapSize::B1024] {
        let mut out = vec![0u8; SAETPH_FIXED_LEN + size.bytes()];
        if Saetph::write_fixed(size, Psn::new(77), &mut out).is_ok() {
            for n in [0, 3, 9, size.bits() - 1] {
                set_bitmap_bit(&mut out[SAETPH_FIXED_LEN..], n);
            }
            v.push(Output::default().u8(hdr_kind::SAETPH).raw(&out).done());
        }
    }
    v
}

pub(crate) fn seeds_ack() -> Vec<Vec<u8>> {
    let mut v = Vec::new();
    for c in [0u8, 1, 2, 3, 4 | 1, 8 | 3] {
        let mut o = Output::default();
        // Near the PSN wrap, window 16.
        o.u8(c).u24(0xff_fff0).u8(15);
        o.u8(ack_op::POST).u16(1500);
        o.u8(ack_op::POST).u16(600);
        // TPACK of the first three packets (PSN una + 2: delta 66).
        o.u8(ack_op::RESPONSE).u8(1 | 2 | 4 | 8).u16(66).u8(16);
        o.raw(&[2, 0, 0, 4, 0x56, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        // TPNAK at una, TPSACK with a bitmap.
        o.u8(ack_op::RESPONSE)
            .u8(1 | 2 | 4 | 8 | 0x20)
            .u16(64)
            .u8(16);
        o.raw(&[2; 16]);
        o.u8(ack_op::RESPONSE)
            .u8(1 | 2 | 4 | 0x80 | 16)
            .u16(64)
            .u8(32);
        o.raw(&[5, 0, 0, 4, 0x56, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        o.raw(&[0, 0, 0, 5, 0b1010_0000, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        o.u8(ack_op::DEADLINE).u8(ack_op::TRANSMIT).u8(20);
        o.u8(ack_op::TIME)
            .u16(9000)
            .u8(ack_op::PEER_CLOSED)
            .u16(1 << 15);
        v.push(o.done());
    }
    v
}

pub(crate) fn seeds_cm() -> Vec<Vec<u8>> {
    let mut v = Vec::new();
    let base = CmMsg {
        kind: CmKind::Req,
        txn: TXN,
        src_tpn: 3,
        dst_tpn: 0,
        psn: Psn::new(100),
        params: local_params(),
    };
    for kind in [
        CmKind::Req,
        CmKind::Rep,
        CmKind::Rtu,
        CmKind::Rej,
        CmKind::Dreq,
        CmKind::Drep,
    ] {
        let mut m = [0u8; CM_MSG_LEN];
        let msg = CmMsg {
            kind,
            params: ChannelParams {
                rto: RtoMode::Dynamic { base_us: 40, n: 1 },
                ..base.params
            },
            ..base
        };
        if msg.write(&mut m).is_err() {
            continue;
        }
        let mut o = Output::default();
        o.raw(&m);
        // A whole setup and teardown, with this message thrown in.
        o.u8(cm_op::EXCHANGE).u8(3);
        o.u8(cm_op::TO_RESPONDER).u8(3).raw(&m);
        o.u8(cm_op::TO_INITIATOR).u8(3).raw(&m);
        o.u8(cm_op::USER).u8(0).u8(cm_op::EXCHANGE).u8(3);
        o.u8(cm_op::TIME).u16(5000).u8(cm_op::EXCHANGE).u8(0);
        v.push(o.done());
    }
    v
}
