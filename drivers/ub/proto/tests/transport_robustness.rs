// SPDX-License-Identifier: GPL-2.0
//! Robustness: random and mutated input to every parser and engine must
//! never panic (the test profile has overflow checks on, like the kernel)
//! and engines must keep their invariants.

#![allow(
    clippy::indexing_slicing,
    clippy::unwrap_used,
    reason = "test code: a panic is a test failure"
)]

use ub_proto::crc::crc32_le_portable;
use ub_proto::net::cci::Cci;
use ub_proto::net::nth::NetHeader;
use ub_proto::net::{icrc, PacketClass};
use ub_proto::transport::cc::{CcAlgorithm, CcConfig};
use ub_proto::transport::cm::CmMsg;
use ub_proto::transport::hdr::{BitmapSize, Cetph, CetphKind, Ctph, Rtph, Saetph, Utph};
use ub_proto::transport::msg::{open_packet, Reassembler};
use ub_proto::transport::psn::Psn;
use ub_proto::transport::rx::{RtpReceiver, RxConfig, RxMode, RxStorage, SlotMeta};
use ub_proto::transport::tx::{RtpSender, TxConfig, TxSlot};
use ub_proto::transport::{RetransmitMode, RtoMode};

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

#[test]
fn parsers_never_panic_on_random_input() {
    let mut r = Rng(0x1234_5678);
    let classes = [
        PacketClass::Ipv4,
        PacketClass::Ipv6,
        PacketClass::Cna16,
        PacketClass::Cna24,
        PacketClass::Cna16Coherent,
        PacketClass::NetControl,
    ];
    for i in 0..20_000 {
        let len = (r.next() % 200) as usize;
        let b = r.bytes(len);
        for c in classes {
            let _ = NetHeader::parse(c, &b);
            let _ = open_packet(crc32_le_portable, c, &b);
            let _ = icrc::verify(crc32_le_portable, c, &b);
        }
        let _ = Rtph::parse(&b);
        let _ = Utph::parse(&b);
        let _ = Ctph::parse(&b);
        let _ = Saetph::parse(&b);
        let _ = Cetph::parse(CetphKind::Ldcp, &b);
        let _ = Cetph::parse(CetphKind::Caqm, &b);
        let _ = Cetph::parse_cnp(&b);
        let _ = CmMsg::parse(&b);
        let _ = Cci::from_u16(i as u16).to_u16();
    }
}

fn cfgs() -> Vec<(RetransmitMode, bool)> {
    vec![
        (RetransmitMode::GoBackN, true),
        (RetransmitMode::GoBackN, false),
        (RetransmitMode::Selective, true),
        (RetransmitMode::Selective, false),
    ]
}

#[test]
fn receivers_survive_random_psns_and_keep_delivering_in_order() {
    let mut r = Rng(99);
    for (mode, fast) in cfgs() {
        for cc in [None, Some(CetphKind::Caqm), Some(CetphKind::Ldcp)] {
            let mut bitmap = [0u64; 2];
            let mut meta = vec![SlotMeta::default(); 128];
            let mut data = vec![0u8; 128 * 32];
            let init = Psn::new(r.next() as u32);
            let mut rx = RtpReceiver::new(
                RxConfig {
                    mode: RxMode::for_combination(mode, fast),
                    local_tpn: 2,
                    peer_tpn: 1,
                    initial_psn: init,
                    ooo_window: 256,
                    ack_every: (r.next() % 4) as u16,
                    ack_delay_ns: 100,
                    sack_threshold: (r.next() % 3) as u16,
                    sack_max: BitmapSize::B1024,
                    cc,
                },
                RxStorage {
                    bitmap: &mut bitmap[..],
                    meta: &mut meta[..],
                    data: &mut data[..],
                },
            )
            .unwrap();
            let mut next_expected = init;
            let mut out = [0u8; 256];
            for t in 0..5000u64 {
                // Mostly near EPSN, sometimes anywhere.
                let off = if r.next() % 10 == 0 {
                    r.next() as u32
                } else {
                    ((r.next() % 300) as u32).wrapping_sub(20)
                };
                let psn = rx.epsn().add(off);
                let mut h = Rtph::data(1, 2, psn, 0, false);
                h.ack_req = r.next() % 7 == 0;
                let payload = psn.value().to_be_bytes();
                let cci = Cci::from_u16(r.next() as u16);
                let v = rx.handle_data(t, &h, &payload, (r.next() % 5000) as u32, cci);
                if v == ub_proto::transport::rx::RxVerdict::Deliver {
                    assert_eq!(psn, next_expected);
                    next_expected = next_expected.next();
                }
                while let Some(p) = rx.next_held() {
                    assert_eq!(p.psn, next_expected);
                    assert_eq!(p.payload, p.psn.value().to_be_bytes());
                    next_expected = next_expected.next();
                }
                while let Some(n) = rx.poll_transmit(t, &mut out).unwrap() {
                    assert!(n >= 16);
                }
            }
        }
    }
}

#[test]
fn senders_survive_random_responses() {
    let mut r = Rng(7);
    for (mode, fast) in cfgs() {
        for (alg, cetph) in [
            (CcAlgorithm::None, None),
            (CcAlgorithm::Caqm { hint_unit: 32 }, Some(CetphKind::Caqm)),
            (CcAlgorithm::Ldcp, Some(CetphKind::Ldcp)),
        ] {
            let mut slots = vec![TxSlot::default(); 64];
            let mut tx = RtpSender::new(
                TxConfig {
                    mode,
                    fast_retransmit: fast,
                    rto: RtoMode::Dynamic {
                        base_us: 4,
                        n: (r.next() % 16) as u8,
                    },
                    retry_limit: 255,
                    max_window: 64,
                    mtu: 100,
                    local_tpn: 1,
                    peer_tpn: 2,
                    initial_psn: Psn::new(r.next() as u32),
                    overhead: 20,
                    cc: CcConfig {
                        alg,
                        initial_cw: 1000,
                        max_cw: 100_000,
                        mtu: 100,
                        path_wide_permille: 0,
                    },
                    cetph,
                },
                &mut slots[..],
            )
            .unwrap();
            let mut out = [0u8; 64];
            let mut now = 0u64;
            for _ in 0..3000 {
                now += r.next() % 100_000;
                if tx.can_post() {
                    let _ = tx.post(r.next(), (r.next() % 1000) as u32);
                }
                while tx.poll_transmit(now, &mut out).unwrap().is_some() {
                    assert!(tx.outstanding() <= 64);
                }
                // A random response, often a plausible one.
                let mut b = r.bytes(16 + 8 + 4 + 128);
                let una = tx.una().value();
                let plausible = r.next() % 2 == 0;
                if plausible {
                    let h = Rtph {
                        opcode: [
                            ub_proto::transport::hdr::TpOpcode::Ack,
                            ub_proto::transport::hdr::TpOpcode::AckCc,
                            ub_proto::transport::hdr::TpOpcode::Sack,
                            ub_proto::transport::hdr::TpOpcode::SackCc,
                        ][(r.next() % 4) as usize],
                        last: false,
                        padding: 0,
                        nlp: 0,
                        src_tpn: 2,
                        dst_tpn: 1,
                        ack_req: false,
                        fake: false,
                        psn: Psn::new(una.wrapping_add((r.next() % 80) as u32).wrapping_sub(10)),
                        rspst: ub_proto::transport::hdr::Rspst::from_byte((r.next() % 256) as u8)
                            .unwrap_or(ub_proto::transport::hdr::Rspst::Ack),
                        tpmsn: 0,
                    };
                    h.write(&mut b).unwrap();
                    let sack_at = if h.opcode.has_cetph() { 24 } else { 16 };
                    b[sack_at] %= 5;
                }
                let _ = tx.handle_response(now, &b);
                tx.handle_timeout(now);
                while tx.poll_event().is_some() {}
                assert!(tx.outstanding() <= 64);
            }
        }
    }
}

#[test]
fn reassembler_survives_random_streams() {
    let mut r = Rng(3);
    let mut re = Reassembler::new(0, 64, 1000);
    for _ in 0..10_000 {
        let _ = re.on_packet(
            (r.next() % 4) as u32,
            r.next() % 3 == 0,
            (r.next() % 70) as u32,
        );
    }
}

/// Nanoseconds per retransmission of a selective RTO burst over `n`
/// outstanding packets: the burst is timed in chunks of 64
/// retransmissions and the median chunk counts, so that the chunks other
/// work on the machine interrupted do not (the best of `reps` bursts).
fn rto_burst_ns_per_packet(n: u32, reps: u32) -> u128 {
    const CHUNK: u32 = 64;
    let mut best = u128::MAX;
    for _ in 0..reps {
        let mut slots = vec![TxSlot::default(); n as usize];
        let mut tx = RtpSender::new(
            TxConfig {
                mode: RetransmitMode::Selective,
                fast_retransmit: true,
                rto: RtoMode::Static(ub_proto::transport::StaticRto::Us512),
                retry_limit: 7,
                max_window: n,
                mtu: 64,
                local_tpn: 1,
                peer_tpn: 2,
                initial_psn: Psn::new(0xff_ff00),
                overhead: 20,
                cc: CcConfig::NONE,
                cetph: None,
            },
            &mut slots[..],
        )
        .unwrap();
        tx.post(1, n * 64).unwrap();
        let mut out = [0u8; 64];
        while tx.poll_transmit(0, &mut out).unwrap().is_some() {}
        let rto = tx.poll_timeout().unwrap();
        tx.handle_timeout(rto);
        let mut chunks = vec![];
        for _ in 0..n / CHUNK {
            let start = std::time::Instant::now();
            for _ in 0..CHUNK {
                let p = tx.poll_transmit(rto, &mut out).unwrap().unwrap();
                assert!(p.retransmission);
            }
            chunks.push(start.elapsed().as_nanos() / u128::from(CHUNK));
        }
        assert_eq!(tx.poll_transmit(rto, &mut out).unwrap(), None);
        chunks.sort_unstable();
        best = best.min(chunks[chunks.len() / 2]);
    }
    best
}

/// The work per retransmission of an RTO burst does not grow with the
/// number of packets outstanding (it once did: `poll_transmit` rescanned
/// from the oldest unacknowledged PSN for each one, so the middle of a
/// burst of 16384 cost 32 times as much as the middle of one of 512). A
/// ratio, so that a busy machine does not matter.
#[test]
fn selective_rto_burst_costs_the_same_per_packet_at_any_window() {
    let small = rto_burst_ns_per_packet(512, 5);
    let large = rto_burst_ns_per_packet(16384, 2);
    eprintln!("RTO burst, per retransmission: {small} ns at 512 outstanding, {large} ns at 16384");
    assert!(
        large < 6 * small.max(1),
        "per retransmission: {small} ns at 512 outstanding, {large} ns at 16384"
    );
}
