// SPDX-License-Identifier: GPL-2.0
//! The sender's MarkPSN two-phase operation (UB spec §6.4.2.3.1,
//! ub-spec-notes §5.4, `Documentation/ub/transport.rst` "MarkPSN,
//! LastFirstRtx and HighRtxPSN"):
//!
//! - over a sender and a real receiver on an in-order wire, a second loss
//!   (a lost retransmission) is recovered without the RTO, with selective
//!   and with Go-Back-N fast retransmission;
//! - driven by hand-written TPSACKs, each rule: losses found before
//!   MarkPSN wait for the retransmission phase, a retransmission in flight
//!   is not sent again, an acknowledgement that empties the queue ends the
//!   retransmission phase, and the burst bounds never go stale.

#![allow(
    clippy::indexing_slicing,
    clippy::unwrap_used,
    reason = "test code: a panic is a test failure"
)]

use std::collections::HashMap;

use ub_proto::net::cci::Cci;
use ub_proto::transport::cc::CcConfig;
use ub_proto::transport::hdr::{set_bitmap_bit, BitmapSize, Rspst, Rtph, Saetph, TpOpcode};
use ub_proto::transport::psn::Psn;
use ub_proto::transport::rx::{RtpReceiver, RxConfig, RxMode, RxStorage, RxVerdict, SlotMeta};
use ub_proto::transport::tx::{RtpSender, TxConfig, TxEvent, TxPhase, TxSlot, TxStats};
use ub_proto::transport::{RetransmitMode, RtoMode, StaticRto};

/// First PSN: the tests cross the 2^24 wrap.
const INIT: u32 = 0xff_fff0;
const MTU: u32 = 64;
const RTO_NS: u64 = 512_000;
/// One packet leaves every `GAP_NS`; each direction takes `DELAY_NS`.
const GAP_NS: u64 = 100;
const DELAY_NS: u64 = 2_000;

fn p(k: u32) -> Psn {
    Psn::new(INIT).add(k)
}

fn tx_cfg(mode: RetransmitMode, fast: bool, window: u32) -> TxConfig {
    TxConfig {
        mode,
        fast_retransmit: fast,
        rto: RtoMode::Static(StaticRto::Us512),
        retry_limit: 7,
        max_window: window,
        mtu: MTU,
        local_tpn: 1,
        peer_tpn: 2,
        initial_psn: Psn::new(INIT),
        overhead: 20,
        cc: CcConfig::NONE,
        cetph: None,
    }
}

/// One data packet on the wire: when it left and what it was.
#[derive(Clone, Copy, Debug)]
struct Sent {
    t: u64,
    k: u32,
    rtx: bool,
}

struct Outcome {
    sends: Vec<Sent>,
    delivered: u32,
    stats: TxStats,
}

impl Outcome {
    fn sends_of(&self, k: u32) -> Vec<Sent> {
        self.sends.iter().copied().filter(|s| s.k == k).collect()
    }
}

/// Runs `packets` one-packet messages from a sender to a receiver over an
/// in-order wire (per-flow load balancing, one path). `lose(k, copy)`
/// drops copy `copy` (0 = the original) of packet `k`. Checks that every
/// packet is delivered exactly once, in order.
fn run(
    mode: RetransmitMode,
    fast: bool,
    packets: u32,
    mut lose: impl FnMut(u32, u32) -> bool,
) -> Outcome {
    let mut slots = vec![TxSlot::default(); 64];
    let mut tx = RtpSender::new(tx_cfg(mode, fast, 64), &mut slots[..]).unwrap();
    let mut bitmap = [0u64; 2];
    let mut meta = vec![SlotMeta::default(); 128];
    let mut data = vec![0u8; 128 * MTU as usize];
    let mut rx = RtpReceiver::new(
        RxConfig {
            mode: RxMode::for_combination(mode, fast),
            local_tpn: 2,
            peer_tpn: 1,
            initial_psn: Psn::new(INIT),
            ooo_window: 128,
            ack_every: 1,
            ack_delay_ns: 1_000,
            sack_threshold: 1,
            sack_max: BitmapSize::B1024,
            cc: None,
        },
        RxStorage {
            bitmap: &mut bitmap[..],
            meta: &mut meta[..],
            data: &mut data[..],
        },
    )
    .unwrap();
    let payload = vec![0u8; MTU as usize];
    // (arrival time, bytes): FIFO in each direction.
    let mut to_rx: Vec<(u64, Vec<u8>)> = vec![];
    let mut to_tx: Vec<(u64, Vec<u8>)> = vec![];
    let mut copies: HashMap<u32, u32> = HashMap::new();
    let mut out = Outcome {
        sends: vec![],
        delivered: 0,
        stats: TxStats::default(),
    };
    let mut posted = 0u32;
    let mut acked = 0u32;
    let mut expect = Psn::new(INIT);
    let mut now = 0u64;
    while acked < packets {
        assert!(now < 20 * RTO_NS, "stuck at {now} ns");
        while to_rx.first().is_some_and(|m| m.0 <= now) {
            let (_, b) = to_rx.remove(0);
            let h = Rtph::parse(&b).unwrap();
            if rx.handle_data(now, &h, &payload, MTU + 20, Cci::DEFAULT) == RxVerdict::Deliver {
                assert_eq!(h.psn, expect, "delivered out of order");
                expect = expect.next();
                out.delivered += 1;
            }
            while let Some(held) = rx.next_held() {
                assert_eq!(held.psn, expect, "delivered out of order");
                expect = expect.next();
                out.delivered += 1;
            }
        }
        let mut r = [0u8; 256];
        while let Some(n) = rx.poll_transmit(now, &mut r).unwrap() {
            to_tx.push((now + DELAY_NS, r[..n].to_vec()));
        }
        while to_tx.first().is_some_and(|m| m.0 <= now) {
            let (_, b) = to_tx.remove(0);
            tx.handle_response(now, &b).unwrap();
            while let Some(e) = tx.poll_event() {
                assert!(matches!(e, TxEvent::MessageAcked { .. }));
                acked += 1;
            }
        }
        tx.handle_timeout(now);
        if posted < packets && tx.can_post() {
            tx.post(u64::from(posted), MTU).unwrap();
            posted += 1;
        }
        let mut b = [0u8; 64];
        if let Some(pkt) = tx.poll_transmit(now, &mut b).unwrap() {
            let k = pkt.psn.distance_from(Psn::new(INIT));
            let c = copies.entry(k).or_insert(0);
            out.sends.push(Sent {
                t: now,
                k,
                rtx: pkt.retransmission,
            });
            if !lose(k, *c) {
                to_rx.push((now + DELAY_NS, b[..pkt.hdr_len].to_vec()));
            }
            *c += 1;
        }
        now += GAP_NS;
    }
    assert_eq!(out.delivered, packets);
    out.stats = *tx.stats();
    out
}

/// Selective + fast, per-flow: the first retransmission of packet 10 is
/// lost as well. Its second loss shows once a packet sent after the
/// retransmission burst (MarkPSN) is acknowledged, and it is resent then —
/// about one round trip later, long before the 512 µs RTO.
#[test]
fn selective_recovers_a_lost_retransmission_without_the_rto() {
    let o = run(RetransmitMode::Selective, true, 200, |k, c| {
        k == 10 && c < 2
    });
    let s = o.sends_of(10);
    assert_eq!(s.len(), 3, "original, lost retransmission, recovery: {s:?}");
    assert!(s[1].rtx && s[2].rtx);
    assert_eq!(o.stats.timeouts, 0, "no RTO");
    assert_eq!(o.stats.retransmitted, 2, "no duplicate retransmission");
    assert_eq!(o.stats.markpsn_queued, 1);
    // The second retransmission waits for MarkPSN: a packet sent after the
    // first retransmission must have made the round trip.
    assert!(s[2].t - s[1].t >= 2 * DELAY_NS, "{s:?}");
    assert!(s[2].t - s[0].t < RTO_NS / 10, "{s:?}");
    eprintln!(
        "packet 10 sent at {} ns, retransmitted at {} ns (lost), recovered at {} ns; RTO {} ns",
        s[0].t, s[1].t, s[2].t, RTO_NS
    );
}

/// Two packets of one burst (10 and 12) lose their retransmissions: both
/// are second losses, both recovered at MarkPSN, each resent once more.
#[test]
fn selective_recovers_every_lost_retransmission_of_a_burst() {
    let o = run(RetransmitMode::Selective, true, 200, |k, c| {
        (k == 10 || k == 12) && c < 2
    });
    for k in [10, 12] {
        assert_eq!(o.sends_of(k).len(), 3, "packet {k}: {:?}", o.sends_of(k));
    }
    assert_eq!(o.stats.timeouts, 0, "no RTO");
    assert_eq!(o.stats.retransmitted, 4);
    assert_eq!(o.stats.markpsn_queued, 2);
}

/// Go-Back-N + fast: the go-back after the loss of packet 10 resends 10,
/// 11, 12, …; the resent 12 is lost. The receiver has acknowledged 10 and
/// 11 since its last TPNAK, so 13 draws a new TPNAK(12) and the sender goes
/// back again without the RTO. (If the go-back's *first* packet is lost
/// again, the receiver — one TPNAK until it sends a TPACK — stays silent
/// and the RTO recovers it: checked below.)
#[test]
fn gbn_recovers_a_lost_retransmission_without_the_rto() {
    let o = run(RetransmitMode::GoBackN, true, 200, |k, c| {
        (k == 10 && c == 0) || (k == 12 && c == 1)
    });
    assert_eq!(o.stats.timeouts, 0, "no RTO");
    let s = o.sends_of(12);
    assert_eq!(s.len(), 3, "{s:?}");
    assert!(s[2].t - s[0].t < RTO_NS / 10, "{s:?}");

    let o = run(RetransmitMode::GoBackN, true, 200, |k, c| k == 10 && c < 2);
    assert_eq!(o.stats.timeouts, 1, "the spec's GBN receiver NAKs once");
}

/// A TPSACK/TPACK as the receiver would write it: cumulative `base`,
/// MaxRcvPSN `max_rcv`, `received` among the PSNs after `base`.
fn sack(base: Psn, max_rcv: Psn, received: impl Fn(Psn) -> bool) -> Vec<u8> {
    let mut b = vec![0u8; 16 + 4 + 128];
    let mut h = Rtph::data(2, 1, base, 0, false);
    h.opcode = TpOpcode::Sack;
    h.rspst = Rspst::Ack;
    h.write(&mut b).unwrap();
    let span = max_rcv.distance_from(base);
    let size = BitmapSize::fitting(span + 1, BitmapSize::B1024);
    let n = Saetph::write_fixed(size, max_rcv, &mut b[16..]).unwrap();
    set_bitmap_bit(&mut b[20..], 0);
    for k in 1..=span {
        if received(base.add(k)) {
            set_bitmap_bit(&mut b[20..], k);
        }
    }
    b.truncate(16 + n);
    b
}

fn tpack(psn: Psn) -> Vec<u8> {
    let mut b = vec![0u8; 16];
    let mut h = Rtph::data(2, 1, psn, 0, false);
    h.opcode = TpOpcode::Ack;
    h.write(&mut b).unwrap();
    b
}

/// The next packet from `tx` at `now`: `Some((PSN, retransmission))`. A
/// macro, so that the test does not name the sender's storage type.
macro_rules! next {
    ($tx:expr, $now:expr) => {{
        let mut b = [0u8; 64];
        $tx.poll_transmit($now, &mut b)
            .unwrap()
            .map(|p| (p.psn, p.retransmission))
    }};
}

/// Posts and sends packets `from..to` (one-packet messages).
macro_rules! send_new {
    ($tx:expr, $now:expr, $from:expr, $to:expr) => {
        for k in $from..$to {
            $tx.post(u64::from(k), MTU).unwrap();
            assert_eq!(next!($tx, $now), Some((p(k), false)), "new packet {k}");
        }
    };
}

/// Everything received but the PSNs in `lost`.
fn all_but(lost: &[u32]) -> impl Fn(Psn) -> bool + '_ {
    move |q| !lost.iter().any(|&k| q == p(k))
}

/// The two phases alternate on MarkPSN: a first loss found while the
/// latest burst is still unconfirmed (MaxRcvPSN < MarkPSN) is queued but
/// waits; the acknowledgement of MarkPSN starts the retransmission phase,
/// which resends it together with the second loss it revealed.
#[test]
fn losses_found_before_markpsn_wait_for_the_retransmission_phase() {
    let mut slots = vec![TxSlot::default(); 64];
    let mut tx =
        RtpSender::new(tx_cfg(RetransmitMode::Selective, true, 64), &mut slots[..]).unwrap();
    send_new!(tx, 0, 0, 20);
    // 3 is lost. MarkPSN is still the first PSN, so the first TPSACK
    // starts a retransmission phase at once.
    tx.handle_response(1000, &sack(p(2), p(5), all_but(&[3])))
        .unwrap();
    assert_eq!(tx.phase(), TxPhase::Retransmit);
    assert_eq!(next!(tx, 1000), Some((p(3), true)));
    assert_eq!(tx.phase(), TxPhase::NewPackets);
    assert_eq!(tx.mark_psn(), p(20));
    assert_eq!(tx.last_first_rtx(), Some(p(3)));
    assert_eq!(tx.high_rtx_psn(), Some(p(3)));
    send_new!(tx, 1000, 20, 25);
    // Sent before MarkPSN: 10 is a first loss, 3 is still on its way.
    tx.handle_response(2000, &sack(p(2), p(15), all_but(&[3, 10])))
        .unwrap();
    assert_eq!(tx.phase(), TxPhase::NewPackets);
    send_new!(tx, 2000, 25, 26);
    // MarkPSN arrived: 3's retransmission is lost too. Both go, in order.
    tx.handle_response(3000, &sack(p(2), p(20), all_but(&[3, 10])))
        .unwrap();
    assert_eq!(tx.phase(), TxPhase::Retransmit);
    assert_eq!(next!(tx, 3000), Some((p(3), true)));
    assert_eq!(next!(tx, 3000), Some((p(10), true)));
    assert_eq!(tx.phase(), TxPhase::NewPackets);
    assert_eq!(tx.mark_psn(), p(26));
    assert_eq!(tx.last_first_rtx(), Some(p(3)));
    assert_eq!(tx.high_rtx_psn(), Some(p(10)));
    let st = *tx.stats();
    assert_eq!(
        (st.retransmitted, st.fast_queued, st.markpsn_queued),
        (3, 3, 1)
    );
    assert_eq!(st.timeouts, 0);
}

/// HighRtxPSN stops duplicates: TPSACKs written before a retransmission
/// arrived keep reporting its hole, in the retransmission phase and after
/// it, and the sender does not resend it until MarkPSN is acknowledged. A
/// first loss found in the middle of a burst (above HighRtxPSN) joins it.
#[test]
fn a_retransmission_in_flight_is_not_sent_again() {
    let mut slots = vec![TxSlot::default(); 64];
    let mut tx =
        RtpSender::new(tx_cfg(RetransmitMode::Selective, true, 64), &mut slots[..]).unwrap();
    send_new!(tx, 0, 0, 20);
    tx.handle_response(1000, &sack(p(2), p(9), all_but(&[3, 6])))
        .unwrap();
    assert_eq!(next!(tx, 1000), Some((p(3), true)));
    // Mid-burst, an older view: 3 is not queued again; 15 is a first loss.
    tx.handle_response(1100, &sack(p(2), p(16), all_but(&[3, 6, 15])))
        .unwrap();
    assert_eq!(next!(tx, 1100), Some((p(6), true)));
    assert_eq!(next!(tx, 1100), Some((p(15), true)));
    assert_eq!(tx.phase(), TxPhase::NewPackets);
    assert_eq!(tx.last_first_rtx(), Some(p(3)));
    assert_eq!(tx.high_rtx_psn(), Some(p(15)));
    send_new!(tx, 1100, 20, 21);
    // After the burst, before MarkPSN (20): none is resent.
    tx.handle_response(1200, &sack(p(2), p(19), all_but(&[3, 6, 15])))
        .unwrap();
    send_new!(tx, 1200, 21, 22);
    assert_eq!(tx.stats().retransmitted, 3);
    // The retransmissions arrive: nothing more to resend.
    tx.handle_response(1300, &tpack(p(21))).unwrap();
    assert_eq!(tx.outstanding(), 0);
    assert_eq!(next!(tx, 1300), None);
    assert_eq!(tx.stats().retransmitted, 3);
    assert_eq!(tx.stats().markpsn_queued, 0);
}

/// The retransmission phase ends when its queue empties, also when a
/// TPSACK (not a resend) empties it: MarkPSN moves to the next new PSN and
/// the burst actually sent ({3}) is what awaits confirmation.
#[test]
fn an_acknowledgement_that_empties_the_queue_ends_the_retransmission_phase() {
    let mut slots = vec![TxSlot::default(); 64];
    let mut tx =
        RtpSender::new(tx_cfg(RetransmitMode::Selective, true, 64), &mut slots[..]).unwrap();
    send_new!(tx, 0, 0, 20);
    tx.handle_response(1000, &sack(p(2), p(9), all_but(&[3, 6])))
        .unwrap();
    assert_eq!(next!(tx, 1000), Some((p(3), true)));
    assert_eq!(tx.phase(), TxPhase::Retransmit);
    // 6 was only late.
    tx.handle_response(1100, &sack(p(2), p(12), all_but(&[3])))
        .unwrap();
    assert_eq!(tx.phase(), TxPhase::NewPackets);
    assert_eq!(tx.mark_psn(), p(20));
    assert!(!tx.mark_psn_reached());
    assert_eq!(tx.last_first_rtx(), Some(p(3)));
    assert_eq!(tx.high_rtx_psn(), Some(p(3)));
    send_new!(tx, 1100, 20, 22);
    tx.handle_response(1200, &sack(p(2), p(19), all_but(&[3])))
        .unwrap();
    send_new!(tx, 1200, 22, 23);
    // MarkPSN acknowledged: 3's retransmission was lost.
    tx.handle_response(1300, &sack(p(2), p(20), all_but(&[3])))
        .unwrap();
    assert!(tx.mark_psn_reached());
    assert_eq!(next!(tx, 1300), Some((p(3), true)));
    assert_eq!(tx.stats().retransmitted, 2);
}

/// The burst bounds are dropped once the burst is acknowledged, so that
/// they cannot go stale: 2^23 packets later a PSN would compare on the
/// wrong side of an old HighRtxPSN.
#[test]
fn burst_bounds_are_dropped_once_acknowledged_and_never_go_stale() {
    let mut slots = vec![TxSlot::default(); 64];
    let mut tx =
        RtpSender::new(tx_cfg(RetransmitMode::Selective, true, 64), &mut slots[..]).unwrap();
    send_new!(tx, 0, 0, 20);
    tx.handle_response(1000, &sack(p(2), p(5), all_but(&[3])))
        .unwrap();
    assert_eq!(next!(tx, 1000), Some((p(3), true)));
    tx.handle_response(2000, &tpack(p(19))).unwrap();
    while tx.poll_event().is_some() {}
    assert_eq!(tx.high_rtx_psn(), None);
    assert_eq!(tx.last_first_rtx(), None);
    // A long gap without losses: 2^23 + 64 packets, 64 per message.
    let gap: u32 = (1 << 23) + 64;
    let mut now = 3000;
    for m in 0..gap / 64 {
        tx.post(u64::from(m), 64 * MTU).unwrap();
        let mut last = None;
        let mut b = [0u8; 64];
        while let Some(pkt) = tx.poll_transmit(now, &mut b).unwrap() {
            last = Some(pkt.psn);
        }
        tx.handle_response(now, &tpack(last.unwrap())).unwrap();
        while tx.poll_event().is_some() {}
        now += 1000;
    }
    let base = 20 + gap;
    assert_eq!(tx.next_psn(), p(base));
    // A first loss now is resent at once and is the new HighRtxPSN.
    send_new!(tx, now, base, base + 20);
    tx.handle_response(now, &sack(p(base + 2), p(base + 5), all_but(&[base + 3])))
        .unwrap();
    assert_eq!(next!(tx, now), Some((p(base + 3), true)));
    assert_eq!(tx.high_rtx_psn(), Some(p(base + 3)));
    assert_eq!(tx.last_first_rtx(), Some(p(base + 3)));
    assert_eq!(tx.stats().timeouts, 0);
}

/// An RNR TPNAK names the PSN the receiver could not take: it is resent
/// when the hold ends, without waiting for MarkPSN, even while the latest
/// burst (which retransmitted that very PSN) is unconfirmed.
#[test]
fn an_rnr_resends_at_once_after_its_hold() {
    let mut slots = vec![TxSlot::default(); 64];
    let mut tx =
        RtpSender::new(tx_cfg(RetransmitMode::Selective, true, 64), &mut slots[..]).unwrap();
    send_new!(tx, 0, 0, 20);
    tx.handle_response(1000, &sack(p(2), p(5), all_but(&[3])))
        .unwrap();
    assert_eq!(next!(tx, 1000), Some((p(3), true)));
    assert!(!tx.mark_psn_reached());
    let mut b = vec![0u8; 16];
    let mut h = Rtph::data(2, 1, p(3), 0, false);
    h.opcode = TpOpcode::Ack;
    h.rspst = Rspst::Rnr(0); // hold 2 µs
    h.write(&mut b).unwrap();
    tx.handle_response(1100, &b).unwrap();
    assert_eq!(tx.una(), p(3));
    assert_eq!(tx.phase(), TxPhase::Retransmit);
    assert_eq!(next!(tx, 1200), None, "held");
    assert_eq!(next!(tx, 3100), Some((p(3), true)));
    assert_eq!(tx.phase(), TxPhase::NewPackets);
    assert_eq!(tx.mark_psn(), p(20));
}
