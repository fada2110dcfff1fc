// SPDX-License-Identifier: GPL-2.0
//! Network layer: NTH formats, CCI, ICRC masking, NPI rules, routing.

#![allow(
    clippy::indexing_slicing,
    clippy::unwrap_used,
    reason = "test code: a panic is a test failure"
)]

use ub_proto::crc::{crc32, crc32_le_portable};
use ub_proto::net::cci::{Cci, Fecn};
use ub_proto::net::icrc::{self, RESIDUE};
use ub_proto::net::npi::{Npi, NpiError, NpiMode};
use ub_proto::net::nth::{IpHdr, IpNth, NetHeader, Nth16, Nth24, UB_UDP_PORT};
use ub_proto::net::route::{select_port, FlowKey, RouteEntry, RouteTable};
use ub_proto::net::{Error, PacketClass, RoutingType};
use ub_proto::transport::msg::{finish_packet, open_packet};

fn headers() -> Vec<NetHeader> {
    let cci = Cci::Caqm {
        loc: false,
        enable: true,
        c: false,
        i: true,
        hint: 7,
    };
    vec![
        NetHeader::Cna16 {
            nth: Nth16 {
                scna: 0x1234,
                dcna: 0xabcd,
                cci,
                lbf: 9,
                sl: 5,
                mgmt: true,
                nlp: 1,
            },
            coherent: false,
        },
        NetHeader::Cna24(Nth24 {
            scna: 0x12_3456,
            dcna: 0xfe_dcba,
            cci: Cci::DEFAULT,
            lbf: 200,
            sl: 15,
            nlp: 2,
        }),
        NetHeader::Ip(IpNth {
            cci,
            npi: Npi::new(0x42, true),
            ip: IpHdr::V4 {
                dscp: 10,
                ecn: 1,
                ident: 77,
                ttl: 64,
                src: [10, 0, 0, 1],
                dst: [10, 0, 0, 2],
            },
            sport: 50000,
        }),
        NetHeader::Ip(IpNth {
            cci: Cci::FecnRtt {
                loc: true,
                timestamp: 0x2aa,
                fecn: Fecn::Light,
            },
            npi: Npi::DEFAULT,
            ip: IpHdr::V6 {
                traffic_class: 0x28,
                flow_label: 0xabcde,
                hop_limit: 9,
                src: [1; 16],
                dst: [2; 16],
            },
            sport: 60001,
        }),
    ]
}

fn build(h: &NetHeader, upper: &[u8]) -> Vec<u8> {
    let mut buf = vec![0u8; 256];
    let off = h.len();
    buf[off..off + upper.len()].copy_from_slice(upper);
    let n = finish_packet(crc32_le_portable, h, &mut buf, upper.len()).unwrap();
    buf.truncate(n);
    buf
}

#[test]
fn header_lengths_match_the_spec() {
    let hs = headers();
    assert_eq!(hs[0].len(), 8);
    assert_eq!(hs[1].len(), 10);
    assert_eq!(hs[2].len(), 6 + 20 + 8);
    assert_eq!(hs[3].len(), 6 + 40 + 8);
    assert_eq!(hs[0].class().cfg(), 6);
    assert_eq!(hs[1].class().cfg(), 7);
    assert_eq!(hs[2].class().cfg(), 3);
    assert_eq!(hs[3].class().cfg(), 4);
}

#[test]
fn headers_round_trip_and_packets_verify() {
    let upper: Vec<u8> = (0..37u8).collect();
    for h in headers() {
        let pkt = build(&h, &upper);
        let (parsed, tp) = open_packet(crc32_le_portable, h.class(), &pkt).unwrap();
        assert_eq!(parsed, h);
        assert_eq!(tp, &upper[..]);
    }
}

#[test]
fn ip_format_fields_follow_tables_5_4_to_5_6() {
    let h = &headers()[2];
    let pkt = build(h, &[0u8; 12]);
    let ip = &pkt[6..];
    assert_eq!(ip[0], 0x45, "IHL 5, no options");
    assert_eq!(
        u16::from_be_bytes([ip[2], ip[3]]) as usize,
        ip.len(),
        "total length through ICRC"
    );
    assert_eq!(ip[6] & 0xe0, 0x40, "DF");
    assert_eq!(ip[9], 17);
    let udp = &ip[20..];
    assert_eq!(u16::from_be_bytes([udp[2], udp[3]]), UB_UDP_PORT);
    assert_eq!(u16::from_be_bytes([udp[4], udp[5]]) as usize, udp.len());
    assert_eq!(&udp[6..8], &[0, 0], "UDP checksum 0");
    // NPI: byte 2 bit 0 is NPI[24].
    assert_eq!(pkt[2], 1);
    assert_eq!(&pkt[3..6], &[0, 0, 0x42]);
    // Another destination port is not UB.
    let mut other = pkt.clone();
    other[6 + 20 + 3] ^= 1;
    assert_eq!(
        NetHeader::parse(PacketClass::Ipv4, &other),
        Err(Error::Invalid("UDP destination port"))
    );
}

/// A switch assigning partitions rewrites the NPI in place: the packet
/// parses with the new NPI and its ICRC still verifies (the prefix is not
/// covered); a CNA header has no NPI to rewrite, and ID 0 is refused.
#[test]
fn npi_rewritten_in_place_keeps_the_packet_sealed() {
    let upper: Vec<u8> = (0..29u8).collect();
    for h in headers() {
        let mut pkt = build(&h, &upper);
        let before = pkt.clone();
        let npi = Npi::new(0x00ab_cdef, true);
        match h {
            NetHeader::Ip(ref ip) => {
                h.write_npi(&mut pkt, npi).unwrap();
                let (parsed, tp) = open_packet(crc32_le_portable, h.class(), &pkt).unwrap();
                assert_eq!(tp, &upper[..]);
                let NetHeader::Ip(p) = parsed else {
                    unreachable!("an IP header parsed as {parsed:?}")
                };
                assert_eq!(p.npi, npi);
                assert_eq!(IpNth { npi: ip.npi, ..p }, *ip, "nothing else changed");
                assert_eq!(pkt[6..], before[6..]);
                assert_eq!(
                    h.write_npi(&mut pkt, Npi::new(0, false)),
                    Err(Error::Invalid("NPI"))
                );
            }
            _ => {
                assert!(h.write_npi(&mut pkt, npi).is_err());
                assert_eq!(pkt, before);
            }
        }
    }
}

/// RFC 1071 word by word: the reference the header code is checked against.
fn rfc1071(bytes: &[u8]) -> u16 {
    let mut sum: u32 = 0;
    for w in bytes.chunks(2) {
        sum += u32::from(u16::from_be_bytes([w[0], *w.get(1).unwrap_or(&0)]));
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

#[test]
fn ipv4_header_checksum_is_rfc_1071_and_any_damage_is_refused() {
    let mut x = 0x2545_F491_4F6C_DD1Du64;
    for _ in 0..2000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let b = x.to_le_bytes();
        let h = NetHeader::Ip(IpNth {
            cci: Cci::DEFAULT,
            npi: Npi::DEFAULT,
            ip: IpHdr::V4 {
                dscp: b[0] >> 2,
                ecn: b[0] & 3,
                ident: u16::from_le_bytes([b[1], b[2]]),
                ttl: b[3],
                src: [b[4], b[5], b[6], b[7]],
                dst: [b[7], b[6], b[5], b[4] ^ 0xff],
            },
            sport: u16::from_le_bytes([b[2], b[3]]),
        });
        let pkt = build(&h, &b[..usize::from(b[5] % 8)]);
        let mut ip: [u8; 20] = pkt[6..26].try_into().unwrap();
        let written = u16::from_be_bytes([ip[10], ip[11]]);
        ip[10] = 0;
        ip[11] = 0;
        assert_eq!(written, rfc1071(&ip), "header {ip:02x?}");
        // One flipped bit anywhere in the header (the TTL and ToS too,
        // which the ICRC masks) is caught by the checksum.
        let bit = usize::from(b[6]) % 160;
        let mut bad = pkt.clone();
        bad[6 + bit / 8] ^= 1 << (bit % 8);
        assert!(
            NetHeader::parse(PacketClass::Ipv4, &bad).is_err(),
            "bit {bit} of {ip:02x?}"
        );
    }
}

#[test]
fn cci_modes_round_trip() {
    let cases = [
        Cci::Caqm {
            loc: true,
            enable: true,
            c: true,
            i: false,
            hint: 0xff,
        },
        Cci::Fecn {
            loc: false,
            fecn: Fecn::Severe,
        },
        Cci::FecnRtt {
            loc: true,
            timestamp: 0x3ff,
            fecn: Fecn::NoCongestion,
        },
    ];
    for c in cases {
        assert_eq!(Cci::from_u16(c.to_u16()), c);
    }
    assert_eq!(
        Cci::Fecn {
            loc: false,
            fecn: Fecn::Unmarkable
        }
        .to_u16()
            >> 13,
        0b100
    );
    assert_eq!(
        Cci::FecnRtt {
            loc: false,
            timestamp: 0,
            fecn: Fecn::Unmarkable
        }
        .to_u16()
            >> 13,
        0b010
    );
    // Re-marking keeps the worst congestion and never marks unmarkable.
    assert_eq!(Fecn::Light.remark(Fecn::Severe), Some(Fecn::Severe));
    assert_eq!(Fecn::Severe.remark(Fecn::Light), None);
    assert_eq!(Fecn::Unmarkable.remark(Fecn::Severe), None);
    let marked = Cci::DEFAULT.mark(Fecn::Light, true);
    assert_eq!(
        marked,
        Cci::Fecn {
            loc: true,
            fecn: Fecn::Light
        }
    );
    assert!(marked.congested());
}

/// Offsets (within the network packet) of bytes whose change must leave
/// the ICRC unchanged, and bit masks.
fn masked_bits(class: PacketClass) -> Vec<(usize, u8)> {
    match class {
        PacketClass::Cna16 => vec![(4, 0xff), (5, 0xff), (6, 0xff)],
        PacketClass::Cna24 => vec![(6, 0xff), (7, 0xff), (8, 0xff)],
        // Plus the CCI/NPI prefix, which is not covered at all.
        PacketClass::Ipv4 => (0..6)
            .map(|i| (i, 0xff))
            .chain([
                (7, 0xff),
                (14, 0xff),
                (16, 0xff),
                (17, 0xff),
                (32, 0xff),
                (33, 0xff),
            ])
            .collect(),
        PacketClass::Ipv6 => (0..6)
            .map(|i| (i, 0xff))
            .chain([
                (6, 0x0f),
                (7, 0xff),
                (8, 0xff),
                (9, 0xff),
                (13, 0xff),
                (52, 0xff),
                (53, 0xff),
            ])
            .collect(),
        _ => vec![],
    }
}

#[test]
fn icrc_masked_fields_do_not_change_it_and_every_other_covered_bit_does() {
    let upper: Vec<u8> = (0..40u8).map(|i| i.wrapping_mul(13)).collect();
    for h in headers() {
        let class = h.class();
        let pkt = build(&h, &upper);
        let start = icrc::coverage_start(class);
        let body_end = pkt.len() - 4;
        let good = icrc::compute(crc32_le_portable, class, &pkt[start..body_end]);
        let masks = masked_bits(class);
        for byte in 0..body_end {
            for bit in 0..8 {
                let mut p = pkt.clone();
                p[byte] ^= 1 << bit;
                let masked = masks.iter().any(|&(o, m)| o == byte && m & (1 << bit) != 0);
                let crc = icrc::compute(crc32_le_portable, class, &p[start..body_end]);
                if masked {
                    assert_eq!(crc, good, "{class:?} byte {byte} bit {bit} is masked");
                } else {
                    assert_ne!(crc, good, "{class:?} byte {byte} bit {bit} is covered");
                }
            }
        }
    }
}

#[test]
fn icrc_trailer_is_little_endian_with_constant_residue() {
    for h in headers() {
        let class = h.class();
        let pkt = build(&h, b"hello, unified bus");
        let start = icrc::coverage_start(class);
        let body_end = pkt.len() - 4;
        let crc = icrc::compute(crc32_le_portable, class, &pkt[start..body_end]);
        assert_eq!(&pkt[body_end..], &crc.to_le_bytes());
        // Residue over masked covered bytes + trailer.
        let mut masked = pkt[start..].to_vec();
        let clean = icrc::compute(crc32_le_portable, class, &masked[..masked.len() - 4]);
        // Recompute on a copy whose masked fields are already ones.
        for &(o, m) in &masked_bits(class) {
            if o >= start {
                masked[o - start] |= m;
            }
        }
        assert_eq!(crc32(&masked[..masked.len() - 4]), clean);
        assert_eq!(crc32(&masked), RESIDUE);
        // Corruption of the payload is caught.
        let mut bad = pkt.clone();
        bad[body_end - 1] ^= 0x10;
        assert_eq!(
            icrc::verify(crc32_le_portable, class, &bad),
            Err(Error::BadIcrc)
        );
    }
}

#[test]
fn icrc_known_answer_for_a_cna16_packet() {
    // 16-bit CNA NTH with CCI and LBF as all ones, followed by "123456789":
    // the ICRC is the plain CRC-32 of exactly those bytes.
    let nth = [0x00, 0x01, 0x00, 0x02, 0xff, 0xff, 0xff, 0x50];
    let mut covered = nth.to_vec();
    covered.extend_from_slice(b"123456789");
    assert_eq!(
        icrc::compute(crc32_le_portable, PacketClass::Cna16, &covered),
        crc32(&covered)
    );
    covered[4] = 0;
    covered[6] = 0x12;
    assert_eq!(
        icrc::compute(crc32_le_portable, PacketClass::Cna16, &covered),
        crc32(&[&nth[..], b"123456789"].concat())
    );
}

#[test]
fn coherent_cna16_has_no_icrc() {
    let h = NetHeader::Cna16 {
        nth: Nth16 {
            scna: 1,
            dcna: 2,
            cci: Cci::DEFAULT,
            lbf: 0,
            sl: 0,
            mgmt: false,
            nlp: 0,
        },
        coherent: true,
    };
    let pkt = build(&h, b"abcd");
    assert_eq!(pkt.len(), 8 + 4);
    assert_eq!(
        open_packet(crc32_le_portable, PacketClass::Cna16Coherent, &pkt)
            .unwrap()
            .1,
        b"abcd"
    );
}

#[test]
fn npi_rules_table() {
    let hi = |id| Npi::new(id, false);
    let lo = |id| Npi::new(id, true);
    // (a, b, expected)
    let table: &[(Npi, Npi, Result<(), NpiError>)] = &[
        (hi(5), hi(5), Ok(())),
        (hi(5), lo(5), Ok(())),
        (lo(5), hi(5), Ok(())),
        (lo(5), lo(5), Err(NpiError::BothLow)),
        (hi(5), hi(6), Err(NpiError::OtherPartition)),
        (lo(5), hi(6), Err(NpiError::OtherPartition)),
        (hi(0), hi(0), Err(NpiError::Invalid)),
        (lo(0), hi(5), Err(NpiError::Invalid)),
        (Npi::DEFAULT, hi(1), Ok(())),
        (Npi::DEFAULT, lo(1), Ok(())),
    ];
    for &(a, b, want) in table {
        assert_eq!(a.may_communicate(b), want, "{a:?} {b:?}");
        assert_eq!(b.may_communicate(a), want, "symmetric {a:?} {b:?}");
        // Loose mode: the netdev's NPI against the packet's.
        assert_eq!(NpiMode::Loose.rx_check(b, a), want, "loose {a:?} {b:?}");
    }
    // Strict mode: the Entity's NPI is the only one accepted and is what
    // every packet carries.
    let strict = NpiMode::Strict(hi(7));
    let strict_table: &[(Npi, Result<(), NpiError>)] = &[
        (hi(7), Ok(())),
        (lo(7), Ok(())),
        (hi(8), Err(NpiError::NotOwnNpi)),
        (lo(8), Err(NpiError::NotOwnNpi)),
        (hi(0), Err(NpiError::Invalid)),
    ];
    for &(pkt, want) in strict_table {
        // The netdev NPI is ignored in strict mode.
        assert_eq!(strict.rx_check(pkt, hi(99)), want, "strict {pkt:?}");
    }
    let strict_low = NpiMode::Strict(lo(7));
    assert_eq!(strict_low.rx_check(lo(7), hi(7)), Err(NpiError::BothLow));
    assert_eq!(strict_low.rx_check(hi(7), hi(7)), Ok(()));
    assert_eq!(strict.tx_npi(hi(3)), Ok(hi(7)));
    assert_eq!(NpiMode::Loose.tx_npi(hi(3)), Ok(hi(3)));
    assert_eq!(NpiMode::Loose.tx_npi(hi(0)), Err(NpiError::Invalid));
    assert_eq!(NpiMode::Strict(hi(0)).tx_npi(hi(3)), Err(NpiError::Invalid));
    // Packets with NPI 0 never parse.
    let mut h = headers()[2];
    if let NetHeader::Ip(ip) = &mut h {
        ip.npi = Npi::new(0, false);
    }
    let mut buf = [0u8; 64];
    assert_eq!(h.write(&mut buf, 0), Err(Error::Invalid("NPI")));
}

#[test]
fn routing_type_bits() {
    for bits in 0..4u8 {
        assert_eq!(RoutingType::from_bits(bits).bits(), bits);
    }
    assert!(RoutingType::from_bits(1).per_packet);
    assert!(RoutingType::from_bits(2).shortest_only);
}

#[test]
fn longest_prefix_match_and_multipath_selection() {
    let entries = [
        RouteEntry {
            prefix: 0,
            prefix_len: 0,
            width: 24,
            ports: 0b0001,
            shortest: 0b0001,
        },
        RouteEntry {
            prefix: 0x12_0000,
            prefix_len: 8,
            width: 24,
            ports: 0b1111,
            shortest: 0b0011,
        },
        RouteEntry {
            prefix: 0x12_3400,
            prefix_len: 16,
            width: 24,
            ports: 0b0100,
            shortest: 0b0100,
        },
    ];
    let t = RouteTable::new(&entries);
    assert_eq!(t.lookup(0x12_3456, 24).unwrap().ports, 0b0100);
    assert_eq!(t.lookup(0x12_9999, 24).unwrap().ports, 0b1111);
    assert_eq!(t.lookup(0x99_9999, 24).unwrap().ports, 0b0001);
    assert!(t.lookup(0x1234, 16).is_none());
    let e = t.lookup(0x12_9999, 24).unwrap();
    // Per-packet spraying visits every port evenly.
    let mut counts = [0u32; 4];
    for n in 0..400 {
        counts[select_port(e, RoutingType::from_bits(1), 0, n).unwrap() as usize] += 1;
    }
    assert_eq!(counts, [100; 4]);
    // Shortest only.
    for n in 0..10 {
        let p = select_port(e, RoutingType::from_bits(3), 0, n).unwrap();
        assert!(p < 2);
    }
    // Per-flow: one flow, one port; many flows spread.
    let mut seen = [0u32; 4];
    for lb in 0..1000u16 {
        let key = FlowKey {
            src: 1,
            dst: 2,
            lb,
            sl: 0,
        };
        let h = key.hash(7);
        let p = select_port(e, RoutingType::from_bits(0), h, 0).unwrap();
        assert_eq!(p, select_port(e, RoutingType::from_bits(0), h, 99).unwrap());
        seen[p as usize] += 1;
    }
    assert!(seen.iter().all(|&c| c > 200), "{seen:?}");
}
