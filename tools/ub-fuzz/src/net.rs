// SPDX-License-Identifier: GPL-2.0
//! Network layer target: the NTH in every format and the ICRC.

use ub_proto::crc::crc32_le_portable;
use ub_proto::net::cci::{Cci, Fecn};
use ub_proto::net::icrc;
use ub_proto::net::npi::Npi;
use ub_proto::net::nth::{
    IpHdr, IpNth, NetHeader, Nth16, Nth24, ICRC_LEN, IP_PREFIX_LEN, NLP24_RTPH,
};
use ub_proto::net::PacketClass;

use crate::input::{Input, Output};

/// The CCI bits [`Cci::to_u16`] writes as zero, by mode (CCI\[15:13\]):
/// CAQM bit 11; FECN bits 11..2; FECN_RTT and the reserved modes none
/// (a reserved mode is kept verbatim).
const fn cci_reserved(v: u16) -> u16 {
    match v >> 13 {
        0b000 => 0x0800,
        0b100 => 0x0ffc,
        _ => 0,
    }
}

/// Bytes of the header that re-encoding may change, as (offset, mask of
/// reserved or recomputed bits), besides the CCI.
fn reserved_bits(h: &NetHeader, orig: &[u8]) -> Vec<(usize, u8)> {
    match h {
        NetHeader::Cna16 { .. } => Vec::new(),
        // Byte 9: SL[7:4], reserved bit 3, NLP[2:0].
        NetHeader::Cna24(_) => vec![(9, 0x08)],
        NetHeader::Ip(ip) => {
            // Byte 2 of the prefix: bits 7..1 reserved (bit 0 is NPI[24]).
            let mut v = vec![(2, 0xfe)];
            if let IpHdr::V4 { .. } = ip.ip {
                // Flags: the receiver checks only the fragment bits; the
                // sender always writes DF. If DF or the reserved flag
                // differs, so does the header checksum.
                let flags = IP_PREFIX_LEN + 6;
                if orig.get(flags) != Some(&0x40) {
                    v.extend([
                        (flags, 0xc0),
                        (IP_PREFIX_LEN + 10, 0xff),
                        (IP_PREFIX_LEN + 11, 0xff),
                    ]);
                }
            }
            v
        }
    }
}

/// The network header in every format (16- and 24-bit CNA NTH, IPv4 and
/// IPv6 with UDP) and the ICRC.
///
/// Input: a selector byte (low nibble: LPH.CFG; bit 4: seal the ICRC
/// first; bits 5-7: a congestion level for the re-marking check), then
/// the network packet (everything after the LPH, ICRC included).
///
/// Asserts: a header that parses has the class it was parsed as and the
/// length it reports; if the packet has room for an ICRC after it, it
/// re-encodes (`NetHeader::write`, with the upper-layer length the packet
/// implies) to the same bytes but for the reserved bits, the CCI's
/// reserved bits, and the IPv4 flags and checksum when the flags were not
/// DF alone; the re-encoded header parses to the same value. A sealed
/// packet verifies, and still verifies after a switch re-marks its CCI
/// (`Cci::mark` + `write_cci`): the ICRC masks the fields a switch may
/// rewrite.
pub fn net_header(data: &[u8]) {
    let mut inp = Input::new(data);
    let sel = inp.u8();
    let Ok(class) = PacketClass::from_cfg(sel & 0xf) else {
        return;
    };
    assert_eq!(class.cfg(), sel & 0xf);
    let mut pkt = inp.rest().to_vec();
    let sealed = sel & 0x10 != 0
        && class.has_icrc()
        && icrc::seal(crc32_le_portable, class, &mut pkt).is_ok();
    if sealed {
        assert_eq!(icrc::verify(crc32_le_portable, class, &pkt), Ok(()));
    }
    let Ok((h, len)) = NetHeader::parse(class, &pkt) else {
        return;
    };
    assert_eq!(h.class(), class);
    assert_eq!(len, h.len());
    assert!(len <= pkt.len());

    let icrc_len = if class.has_icrc() { ICRC_LEN } else { 0 };
    if let Some(upper) = pkt.len().checked_sub(len + icrc_len) {
        let mut out = pkt.clone();
        assert_eq!(h.write(&mut out, upper), Ok(len), "{h:?}");
        assert_eq!(NetHeader::parse(class, &out), Ok((h, len)));
        let mut want = pkt.clone();
        let at = h.cci_offset();
        let cci = u16::from_be_bytes([pkt[at], pkt[at + 1]]);
        want[at..at + 2].copy_from_slice(&(cci & !cci_reserved(cci)).to_be_bytes());
        assert_eq!(Cci::from_u16(cci).to_u16(), cci & !cci_reserved(cci));
        for (off, mask) in reserved_bits(&h, &pkt) {
            want[off] &= !mask;
            out[off] &= !mask;
        }
        assert_eq!(out, want, "{h:?} re-encoded");
    }

    // Re-marking needs a packet long enough for its header and ICRC: in a
    // shorter one the "trailer" overlaps the header (such a packet parses,
    // and an endpoint drops it as malformed, not as an ICRC error).
    if sealed && pkt.len() >= len + ICRC_LEN {
        let levels = [
            Fecn::Unmarkable,
            Fecn::NoCongestion,
            Fecn::Light,
            Fecn::Severe,
        ];
        let mut marked = h;
        marked.set_cci(
            h.cci()
                .mark(levels[usize::from(sel >> 5) % 4], sel & 0x80 != 0),
        );
        assert!(marked.write_cci(&mut pkt).is_ok());
        assert_eq!(
            icrc::verify(crc32_le_portable, class, &pkt),
            Ok(()),
            "re-marking the CCI broke the ICRC"
        );
        assert_eq!(
            NetHeader::parse(class, &pkt).map(|(h, _)| h.cci()),
            Ok(marked.cci())
        );
    }
}

pub(crate) fn seeds() -> Vec<Vec<u8>> {
    let cci = Cci::Fecn {
        loc: false,
        fecn: Fecn::NoCongestion,
    };
    let headers = [
        NetHeader::Cna16 {
            nth: Nth16 {
                scna: 0x10,
                dcna: 0x20,
                cci,
                lbf: 3,
                sl: 1,
                mgmt: false,
                nlp: 0,
            },
            coherent: false,
        },
        NetHeader::Cna16 {
            nth: Nth16 {
                scna: 0x10,
                dcna: 0x20,
                cci: Cci::Caqm {
                    loc: true,
                    enable: true,
                    c: false,
                    i: true,
                    hint: 9,
                },
                lbf: 3,
                sl: 0,
                mgmt: false,
                nlp: 0,
            },
            coherent: true,
        },
        NetHeader::Cna24(Nth24 {
            scna: 0x10,
            dcna: 0x20,
            cci: Cci::FecnRtt {
                loc: false,
                timestamp: 77,
                fecn: Fecn::Light,
            },
            lbf: 9,
            sl: 2,
            nlp: NLP24_RTPH,
        }),
        NetHeader::Ip(IpNth {
            cci,
            npi: Npi::DEFAULT,
            ip: IpHdr::V4 {
                dscp: 10,
                ecn: 0,
                ident: 7,
                ttl: 64,
                src: [10, 0, 0, 1],
                dst: [10, 0, 0, 2],
            },
            sport: 49_152,
        }),
        NetHeader::Ip(IpNth {
            cci,
            npi: Npi::new(5, true),
            ip: IpHdr::V6 {
                traffic_class: 0x28,
                flow_label: 0x12345,
                hop_limit: 32,
                src: [0xfd; 16],
                dst: [0xfe; 16],
            },
            sport: 4000,
        }),
    ];
    let mut v = Vec::new();
    for h in headers {
        for upper in [0usize, 17] {
            let icrc_len = if h.class().has_icrc() { ICRC_LEN } else { 0 };
            let mut pkt = vec![0u8; h.len() + upper + icrc_len];
            if h.write(&mut pkt, upper).is_err() {
                continue;
            }
            let mut o = Output::default();
            v.push(o.u8(h.class().cfg() | 0x10 | 0x40).raw(&pkt).done());
        }
    }
    v
}
