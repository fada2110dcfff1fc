// SPDX-License-Identifier: GPL-2.0
//! Network headers (UB spec §5.2): the 16-bit CNA NTH (8 bytes), the 24-bit
//! CNA NTH (10 bytes) and the IP format (CCI + NPI, then IPv4 or IPv6 and
//! UDP with destination port 4792).
//!
//! Offsets count from the first byte after the LPH. All multi-byte fields
//! are big-endian. [`NetHeader::parse`] checks everything the receiver must
//! check; [`NetHeader::write`] fills every length field from the size of
//! what follows, so a header is never written inconsistent.

use super::cci::Cci;
use super::npi::Npi;
use super::{get_array, get_u16, get_u24, get_u8, put, put_u16, put_u24, put_u8, Error};
use super::{PacketClass, RoutingType};

/// UDP destination port of UB over IP (IANA "unified-bus").
pub const UB_UDP_PORT: u16 = 4792;
/// Length of the 16-bit CNA NTH.
pub const NTH16_LEN: usize = 8;
/// Length of the 24-bit CNA NTH.
pub const NTH24_LEN: usize = 10;
/// Length of the CCI + NPI prefix of the IP format.
pub const IP_PREFIX_LEN: usize = 6;
/// Length of an IPv4 header without options (the only form UB allows).
pub const IPV4_LEN: usize = 20;
/// Length of an IPv6 header.
pub const IPV6_LEN: usize = 40;
/// Length of a UDP header.
pub const UDP_LEN: usize = 8;
/// Length of the ICRC trailer.
pub const ICRC_LEN: usize = 4;
/// The longest network header (IPv6 format).
pub const MAX_NET_HDR_LEN: usize = IP_PREFIX_LEN + IPV6_LEN + UDP_LEN;
/// Offset of the CCI in a 16-bit CNA NTH (after SCNA and DCNA).
pub const NTH16_CCI_OFFSET: usize = 4;
/// Offset of the LBF in a 16-bit CNA NTH.
pub const NTH16_LBF_OFFSET: usize = 6;
/// Offset of the CCI in a 24-bit CNA NTH (after SCNA and DCNA).
pub const NTH24_CCI_OFFSET: usize = 6;
/// Offset of the LBF in a 24-bit CNA NTH.
pub const NTH24_LBF_OFFSET: usize = 8;
/// Offset of the CCI in the IP format's CCI + NPI prefix.
pub const IP_CCI_OFFSET: usize = 0;

/// 16-bit CNA NTH (LPH.CFG 6 or 9).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Nth16 {
    /// Source CNA.
    pub scna: u16,
    /// Destination CNA.
    pub dcna: u16,
    /// Congestion control indicator.
    pub cci: Cci,
    /// Load-balance factor, freely chosen by the sender.
    pub lbf: u8,
    /// Service level (4 bits).
    pub sl: u8,
    /// Mgmt: UBFM privilege with CFG 6, must be 0 with CFG 9.
    pub mgmt: bool,
    /// Next-layer protocol (3 bits): with CFG 6, 0 = CTPH, 1 = 16-bit UPIH;
    /// with CFG 9, 0 = TAH.
    pub nlp: u8,
}

/// 24-bit CNA NTH (LPH.CFG 7).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Nth24 {
    /// Source CNA (24 bits).
    pub scna: u32,
    /// Destination CNA (24 bits).
    pub dcna: u32,
    /// Congestion control indicator.
    pub cci: Cci,
    /// Load-balance factor.
    pub lbf: u8,
    /// Service level (4 bits).
    pub sl: u8,
    /// Next-layer protocol (3 bits): 0 = CTPH, 2 = RTPH.
    pub nlp: u8,
}

/// NLP of a 24-bit CNA NTH followed by a CTPH.
pub const NLP24_CTPH: u8 = 0;
/// NLP of a 24-bit CNA NTH followed by an RTPH.
pub const NLP24_RTPH: u8 = 2;

/// The IP header of the IP format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IpHdr {
    /// IPv4 (CFG 3).
    V4 {
        /// DSCP (priority).
        dscp: u8,
        /// ECN bits (unused inside a UB domain; any value).
        ecn: u8,
        /// Identification.
        ident: u16,
        /// Time to live.
        ttl: u8,
        /// Source address.
        src: [u8; 4],
        /// Destination address.
        dst: [u8; 4],
    },
    /// IPv6 (CFG 4).
    V6 {
        /// Traffic class (DSCP and ECN).
        traffic_class: u8,
        /// Flow label (20 bits).
        flow_label: u32,
        /// Hop limit.
        hop_limit: u8,
        /// Source address.
        src: [u8; 16],
        /// Destination address.
        dst: [u8; 16],
    },
}

/// The IP format: CCI, NPI, IP header and UDP ports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IpNth {
    /// Congestion control indicator.
    pub cci: Cci,
    /// Network partition ID.
    pub npi: Npi,
    /// IPv4 or IPv6 header.
    pub ip: IpHdr,
    /// UDP source port (free; used for load balancing / channel spreading).
    pub sport: u16,
}

/// Any network header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NetHeader {
    /// 16-bit CNA NTH; `coherent` selects CFG 9 over CFG 6.
    Cna16 {
        /// The header.
        nth: Nth16,
        /// CFG 9 (coherent, no ICRC) instead of CFG 6.
        coherent: bool,
    },
    /// 24-bit CNA NTH (CFG 7).
    Cna24(Nth24),
    /// IP format (CFG 3 or 4 by the IP version).
    Ip(IpNth),
}

/// IPv4 header checksum (RFC 1071) of a 20-byte header whose checksum field
/// is included as written.
fn ipv4_checksum(h: &[u8; IPV4_LEN]) -> u16 {
    // The one's-complement sum of the ten 16-bit words, taken as five
    // 32-bit words in a 64-bit accumulator and folded down at the end:
    // one's-complement addition is associative at any width, and five
    // loads instead of ten keep this off the per-packet profile.
    let mut sum: u64 = 0;
    for word in h.chunks_exact(4) {
        if let [a, b, c, d] = *word {
            sum += u64::from(u32::from_be_bytes([a, b, c, d]));
        }
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

impl NetHeader {
    /// Packet class (LPH.CFG) of this header.
    pub const fn class(&self) -> PacketClass {
        match self {
            Self::Cna16 { coherent: true, .. } => PacketClass::Cna16Coherent,
            Self::Cna16 { .. } => PacketClass::Cna16,
            Self::Cna24(_) => PacketClass::Cna24,
            Self::Ip(IpNth {
                ip: IpHdr::V4 { .. },
                ..
            }) => PacketClass::Ipv4,
            Self::Ip(_) => PacketClass::Ipv6,
        }
    }

    /// Length of the encoded header.
    pub const fn len(&self) -> usize {
        match self {
            Self::Cna16 { .. } => NTH16_LEN,
            Self::Cna24(_) => NTH24_LEN,
            Self::Ip(IpNth {
                ip: IpHdr::V4 { .. },
                ..
            }) => IP_PREFIX_LEN + IPV4_LEN + UDP_LEN,
            Self::Ip(_) => IP_PREFIX_LEN + IPV6_LEN + UDP_LEN,
        }
    }

    /// Always false: a header has at least 8 bytes (for clippy's `len`
    /// convention).
    pub const fn is_empty(&self) -> bool {
        false
    }

    /// The CCI.
    pub const fn cci(&self) -> Cci {
        match self {
            Self::Cna16 { nth, .. } => nth.cci,
            Self::Cna24(nth) => nth.cci,
            Self::Ip(ip) => ip.cci,
        }
    }

    /// Replaces the CCI (what a switch or a congestion-control sender does).
    pub fn set_cci(&mut self, cci: Cci) {
        match self {
            Self::Cna16 { nth, .. } => nth.cci = cci,
            Self::Cna24(nth) => nth.cci = cci,
            Self::Ip(ip) => ip.cci = cci,
        }
    }

    /// Offset of the CCI in this header's bytes.
    pub const fn cci_offset(&self) -> usize {
        match self {
            Self::Cna16 { .. } => NTH16_CCI_OFFSET,
            Self::Cna24(_) => NTH24_CCI_OFFSET,
            Self::Ip(_) => IP_CCI_OFFSET,
        }
    }

    /// Rewrites the CCI of the serialized header at the start of `pkt` with
    /// this header's CCI (what a marking switch does), leaving every other
    /// byte alone.
    pub fn write_cci(&self, pkt: &mut [u8]) -> Result<(), Error> {
        put_u16(pkt, self.cci_offset(), self.cci().to_u16())
    }

    /// Rewrites the NPI of the serialized IP-format header at the start of
    /// `pkt` with `npi`, leaving every other byte alone: what a switch that
    /// assigns partitions at its edge does (UB spec §5.3.3.1). The NPI lies
    /// in the 6-byte prefix, which the ICRC does not cover, so the packet
    /// stays sealed. Refused for a CNA header (it has no NPI) and for an
    /// NPI with partition ID 0.
    pub fn write_npi(&self, pkt: &mut [u8], npi: Npi) -> Result<(), Error> {
        if !matches!(self, Self::Ip(_)) {
            return Err(Error::Invalid("NPI in a CNA-format header"));
        }
        if !npi.is_valid() {
            return Err(Error::Invalid("NPI"));
        }
        let raw = npi.raw();
        let b2 = get_u8(pkt, 2)?;
        put_u8(pkt, 2, (b2 & !1) | ((raw >> 24) & 1) as u8)?;
        put_u24(pkt, 3, raw)
    }

    /// The per-flow load-balance key of this header: LBF for CNA formats,
    /// the UDP source port for the IP format.
    pub const fn lb_key(&self) -> u16 {
        match self {
            Self::Cna16 { nth, .. } => nth.lbf as u16,
            Self::Cna24(nth) => nth.lbf as u16,
            Self::Ip(ip) => ip.sport,
        }
    }

    /// Writes the header into `out` for an upper-layer part (transport
    /// header and payload, without ICRC) of `upper_len` bytes, and returns
    /// the header length. IP and UDP length fields include the ICRC when the
    /// class has one; the IPv4 header checksum is computed.
    pub fn write(&self, out: &mut [u8], upper_len: usize) -> Result<usize, Error> {
        let icrc = if self.class().has_icrc() { ICRC_LEN } else { 0 };
        match self {
            Self::Cna16 { nth, coherent } => {
                if *coherent && nth.mgmt {
                    return Err(Error::Invalid("NTH.Mgmt"));
                }
                put_u16(out, 0, nth.scna)?;
                put_u16(out, 2, nth.dcna)?;
                put_u16(out, NTH16_CCI_OFFSET, nth.cci.to_u16())?;
                put_u8(out, NTH16_LBF_OFFSET, nth.lbf)?;
                put_u8(
                    out,
                    7,
                    ((nth.sl & 0xf) << 4) | (u8::from(nth.mgmt) << 3) | (nth.nlp & 7),
                )?;
                Ok(NTH16_LEN)
            }
            Self::Cna24(nth) => {
                put_u24(out, 0, nth.scna)?;
                put_u24(out, 3, nth.dcna)?;
                put_u16(out, NTH24_CCI_OFFSET, nth.cci.to_u16())?;
                put_u8(out, NTH24_LBF_OFFSET, nth.lbf)?;
                put_u8(out, 9, ((nth.sl & 0xf) << 4) | (nth.nlp & 7))?;
                Ok(NTH24_LEN)
            }
            Self::Ip(h) => {
                if !h.npi.is_valid() {
                    return Err(Error::Invalid("NPI"));
                }
                put_u16(out, IP_CCI_OFFSET, h.cci.to_u16())?;
                let npi = h.npi.raw();
                put_u8(out, 2, ((npi >> 24) & 1) as u8)?;
                put_u24(out, 3, npi)?;
                let udp_len = UDP_LEN
                    .checked_add(upper_len)
                    .and_then(|n| n.checked_add(icrc))
                    .ok_or(Error::Invalid("length"))?;
                let udp_len16 = u16::try_from(udp_len).map_err(|_| Error::Invalid("length"))?;
                let udp_off = match h.ip {
                    IpHdr::V4 {
                        dscp,
                        ecn,
                        ident,
                        ttl,
                        src,
                        dst,
                    } => {
                        let total = u16::try_from(udp_len.saturating_add(IPV4_LEN))
                            .map_err(|_| Error::Invalid("length"))?;
                        let [t0, t1] = total.to_be_bytes();
                        let [i0, i1] = ident.to_be_bytes();
                        let [s0, s1, s2, s3] = src;
                        let [d0, d1, d2, d3] = dst;
                        let mut v4: [u8; IPV4_LEN] = [
                            0x45,
                            (dscp << 2) | (ecn & 3),
                            t0,
                            t1,
                            i0,
                            i1,
                            0x40, // DF, fragment offset 0
                            0,
                            ttl,
                            17,
                            0,
                            0,
                            s0,
                            s1,
                            s2,
                            s3,
                            d0,
                            d1,
                            d2,
                            d3,
                        ];
                        let ck = ipv4_checksum(&v4).to_be_bytes();
                        v4[10] = ck[0];
                        v4[11] = ck[1];
                        put(out, IP_PREFIX_LEN, &v4)?;
                        IP_PREFIX_LEN + IPV4_LEN
                    }
                    IpHdr::V6 {
                        traffic_class,
                        flow_label,
                        hop_limit,
                        src,
                        dst,
                    } => {
                        let word = (6u32 << 28)
                            | (u32::from(traffic_class) << 20)
                            | (flow_label & 0xf_ffff);
                        put(out, IP_PREFIX_LEN, &word.to_be_bytes())?;
                        let payload = udp_len16;
                        put_u16(out, IP_PREFIX_LEN + 4, payload)?;
                        put_u8(out, IP_PREFIX_LEN + 6, 17)?;
                        put_u8(out, IP_PREFIX_LEN + 7, hop_limit)?;
                        put(out, IP_PREFIX_LEN + 8, &src)?;
                        put(out, IP_PREFIX_LEN + 24, &dst)?;
                        IP_PREFIX_LEN + IPV6_LEN
                    }
                };
                put_u16(out, udp_off, h.sport)?;
                put_u16(out, udp_off + 2, UB_UDP_PORT)?;
                put_u16(out, udp_off + 4, udp_len16)?;
                put_u16(out, udp_off + 6, 0)?;
                Ok(udp_off + UDP_LEN)
            }
        }
    }

    /// Parses the network header of a packet of class `class` (from the
    /// LPH) and returns it with its length. `pkt` is the whole network
    /// packet (ICRC included); IP and UDP lengths are checked against it.
    pub fn parse(class: PacketClass, pkt: &[u8]) -> Result<(Self, usize), Error> {
        match class {
            PacketClass::Cna16 | PacketClass::Cna16Coherent => {
                let b7 = get_u8(pkt, 7)?;
                let nth = Nth16 {
                    scna: get_u16(pkt, 0)?,
                    dcna: get_u16(pkt, 2)?,
                    cci: Cci::from_u16(get_u16(pkt, NTH16_CCI_OFFSET)?),
                    lbf: get_u8(pkt, NTH16_LBF_OFFSET)?,
                    sl: b7 >> 4,
                    mgmt: b7 & 8 != 0,
                    nlp: b7 & 7,
                };
                let coherent = class == PacketClass::Cna16Coherent;
                if coherent && (nth.mgmt || nth.nlp != 0) {
                    return Err(Error::Invalid("NTH.NLP/Mgmt"));
                }
                if !coherent && nth.nlp > 1 {
                    return Err(Error::Invalid("NTH.NLP"));
                }
                Ok((Self::Cna16 { nth, coherent }, NTH16_LEN))
            }
            PacketClass::Cna24 => {
                let b9 = get_u8(pkt, 9)?;
                let nth = Nth24 {
                    scna: get_u24(pkt, 0)?,
                    dcna: get_u24(pkt, 3)?,
                    cci: Cci::from_u16(get_u16(pkt, NTH24_CCI_OFFSET)?),
                    lbf: get_u8(pkt, NTH24_LBF_OFFSET)?,
                    sl: b9 >> 4,
                    nlp: b9 & 7,
                };
                if nth.nlp != NLP24_CTPH && nth.nlp != NLP24_RTPH {
                    return Err(Error::Invalid("NTH.NLP"));
                }
                Ok((Self::Cna24(nth), NTH24_LEN))
            }
            PacketClass::Ipv4 | PacketClass::Ipv6 => Self::parse_ip(class, pkt),
            PacketClass::NetControl => Err(Error::Invalid("LPH.CFG")),
        }
    }

    fn parse_ip(class: PacketClass, pkt: &[u8]) -> Result<(Self, usize), Error> {
        let cci = Cci::from_u16(get_u16(pkt, IP_CCI_OFFSET)?);
        let npi = Npi::from_raw((u32::from(get_u8(pkt, 2)? & 1) << 24) | get_u24(pkt, 3)?);
        let ip_len = pkt
            .len()
            .checked_sub(IP_PREFIX_LEN)
            .ok_or(Error::Truncated)?;
        let (ip, udp_off) = if class == PacketClass::Ipv4 {
            let v4: [u8; IPV4_LEN] = get_array(pkt, IP_PREFIX_LEN)?;
            let [vihl, tos, t0, t1, i0, i1, f0, f1, ttl, proto, _, _, s0, s1, s2, s3, d0, d1, d2, d3] =
                v4;
            if vihl != 0x45 {
                return Err(Error::Invalid("IPv4 version/IHL"));
            }
            if proto != 17 {
                return Err(Error::Invalid("IPv4 protocol"));
            }
            if (u16::from_be_bytes([f0, f1]) & 0x3fff) != 0 {
                return Err(Error::Invalid("IPv4 fragment"));
            }
            if ipv4_checksum(&v4) != 0 {
                return Err(Error::Invalid("IPv4 checksum"));
            }
            if usize::from(u16::from_be_bytes([t0, t1])) != ip_len {
                return Err(Error::Invalid("IPv4 total length"));
            }
            (
                IpHdr::V4 {
                    dscp: tos >> 2,
                    ecn: tos & 3,
                    ident: u16::from_be_bytes([i0, i1]),
                    ttl,
                    src: [s0, s1, s2, s3],
                    dst: [d0, d1, d2, d3],
                },
                IP_PREFIX_LEN + IPV4_LEN,
            )
        } else {
            let word = u32::from_be_bytes(get_array(pkt, IP_PREFIX_LEN)?);
            if word >> 28 != 6 {
                return Err(Error::Invalid("IPv6 version"));
            }
            if get_u8(pkt, IP_PREFIX_LEN + 6)? != 17 {
                return Err(Error::Invalid("IPv6 next header"));
            }
            let payload = usize::from(get_u16(pkt, IP_PREFIX_LEN + 4)?);
            if payload.checked_add(IPV6_LEN) != Some(ip_len) {
                return Err(Error::Invalid("IPv6 payload length"));
            }
            (
                IpHdr::V6 {
                    traffic_class: ((word >> 20) & 0xff) as u8,
                    flow_label: word & 0xf_ffff,
                    hop_limit: get_u8(pkt, IP_PREFIX_LEN + 7)?,
                    src: get_array(pkt, IP_PREFIX_LEN + 8)?,
                    dst: get_array(pkt, IP_PREFIX_LEN + 24)?,
                },
                IP_PREFIX_LEN + IPV6_LEN,
            )
        };
        let sport = get_u16(pkt, udp_off)?;
        if get_u16(pkt, udp_off + 2)? != UB_UDP_PORT {
            // Not UB: an ordinary TCP/IP packet carried on a UB link.
            return Err(Error::Invalid("UDP destination port"));
        }
        let udp_len = usize::from(get_u16(pkt, udp_off + 4)?);
        if Some(udp_len) != pkt.len().checked_sub(udp_off) {
            return Err(Error::Invalid("UDP length"));
        }
        if get_u16(pkt, udp_off + 6)? != 0 {
            return Err(Error::Invalid("UDP checksum"));
        }
        if !npi.is_valid() {
            return Err(Error::Invalid("NPI"));
        }
        Ok((
            Self::Ip(IpNth {
                cci,
                npi,
                ip,
                sport,
            }),
            udp_off + UDP_LEN,
        ))
    }
}

/// Metadata the network layer hands down to the link layer with a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LinkMeta {
    /// Packet class for LPH.CFG.
    pub class: PacketClass,
    /// Routing type for LPH.RT.
    pub rt: RoutingType,
}
