// SPDX-License-Identifier: GPL-2.0
//! The invariant CRC (ICRC, UB spec §5.3.7).
//!
//! Coverage starts at the IP header (CFG 3/4, so the CCI + NPI prefix is not
//! covered) or at the NTH (CFG 6/7) and ends just before the 4-byte trailer.
//! CFG 9 packets carry no ICRC. Before the CRC is computed, the fields a
//! switch may rewrite are replaced by all ones: the NTH CCI and LBF; the
//! IPv4 ToS, TTL and header checksum; the IPv6 traffic class, flow label and
//! hop limit; the UDP checksum.
//!
//! The CRC is the reflected CRC-32 of [`crate::crc`], computed by the
//! backend the caller passes (a [`Crc32Update`]: the kernel's `crc32_le` in
//! `ub.ko`, a carry-less-multiply one on the host, or the portable
//! [`crate::crc::crc32_le_portable`]); every function here takes it, so a
//! build chooses its backend once, where it configures its endpoint.
//!
//! **Trailer byte order** (the spec's figure is missing, so this is our
//! decision): little-endian, the least significant byte first, as Ethernet
//! sends its FCS and RoCEv2 its ICRC. With that order the CRC over the
//! masked covered bytes followed by the trailer is the constant
//! [`RESIDUE`], which the tests check.

use super::super::crc::Crc32Update;
use super::nth::{
    ICRC_LEN, IPV4_LEN, IPV6_LEN, IP_PREFIX_LEN, NTH16_CCI_OFFSET, NTH16_LBF_OFFSET,
    NTH24_CCI_OFFSET, NTH24_LBF_OFFSET, UDP_LEN,
};
use super::{Error, PacketClass};

/// CRC-32 residue of a masked packet followed by its little-endian ICRC.
pub const RESIDUE: u32 = 0x2144_DF1C;

/// Bytes of the covered range that may contain masked fields.
const MASK_SPAN: usize = IPV6_LEN + UDP_LEN;

/// Where coverage starts, within the network packet (after the LPH).
pub const fn coverage_start(class: PacketClass) -> usize {
    match class {
        PacketClass::Ipv4 | PacketClass::Ipv6 => IP_PREFIX_LEN,
        _ => 0,
    }
}

/// Sets the masked fields of the first bytes of the covered range to ones.
fn apply_mask(class: PacketClass, head: &mut [u8]) {
    let mut set = |off: usize, bits: u8| {
        if let Some(b) = head.get_mut(off) {
            *b |= bits;
        }
    };
    match class {
        PacketClass::Cna16 => {
            set(NTH16_CCI_OFFSET, 0xff);
            set(NTH16_CCI_OFFSET + 1, 0xff);
            set(NTH16_LBF_OFFSET, 0xff);
        }
        PacketClass::Cna24 => {
            set(NTH24_CCI_OFFSET, 0xff);
            set(NTH24_CCI_OFFSET + 1, 0xff);
            set(NTH24_LBF_OFFSET, 0xff);
        }
        PacketClass::Ipv4 => {
            set(1, 0xff); // ToS
            set(8, 0xff); // TTL
            set(10, 0xff); // header checksum
            set(11, 0xff);
            set(IPV4_LEN + 6, 0xff); // UDP checksum
            set(IPV4_LEN + 7, 0xff);
        }
        PacketClass::Ipv6 => {
            set(0, 0x0f); // traffic class, high nibble
            set(1, 0xff); // traffic class low nibble, flow label
            set(2, 0xff);
            set(3, 0xff);
            set(7, 0xff); // hop limit
            set(IPV6_LEN + 6, 0xff); // UDP checksum
            set(IPV6_LEN + 7, 0xff);
        }
        PacketClass::NetControl | PacketClass::Cna16Coherent => {}
    }
}

/// The ICRC of `covered` (the covered range of a packet of class `class`,
/// trailer excluded), with the masked fields taken as all ones, computed
/// by `crc32`.
pub fn compute(crc32: Crc32Update, class: PacketClass, covered: &[u8]) -> u32 {
    let split = core::cmp::min(MASK_SPAN, covered.len());
    let (head, tail) = covered.split_at(split);
    let mut buf = [0u8; MASK_SPAN];
    let mut reg = u32::MAX;
    if let Some(b) = buf.get_mut(..split) {
        b.copy_from_slice(head);
        apply_mask(class, b);
        reg = crc32(reg, b);
    }
    !crc32(reg, tail)
}

/// Splits a network packet into covered range and trailer.
fn split(class: PacketClass, pkt: &[u8]) -> Result<(&[u8], [u8; ICRC_LEN]), Error> {
    if !class.has_icrc() {
        return Err(Error::Invalid("class without ICRC"));
    }
    let body_end = pkt.len().checked_sub(ICRC_LEN).ok_or(Error::Truncated)?;
    let (body, trailer) = pkt.split_at_checked(body_end).ok_or(Error::Truncated)?;
    let covered = body.get(coverage_start(class)..).ok_or(Error::Truncated)?;
    let mut t = [0u8; ICRC_LEN];
    t.copy_from_slice(trailer);
    Ok((covered, t))
}

/// Writes the ICRC, computed by `crc32`, into the last four bytes of the
/// network packet `pkt` (everything after the LPH, trailer included).
pub fn seal(crc32: Crc32Update, class: PacketClass, pkt: &mut [u8]) -> Result<(), Error> {
    let (covered, _) = split(class, pkt)?;
    let crc = compute(crc32, class, covered);
    let end = pkt.len();
    let start = end.checked_sub(ICRC_LEN).ok_or(Error::Truncated)?;
    pkt.get_mut(start..end)
        .ok_or(Error::Truncated)?
        .copy_from_slice(&crc.to_le_bytes());
    Ok(())
}

/// Checks the ICRC of the network packet `pkt` with `crc32`;
/// `Err(BadIcrc)` means drop.
pub fn verify(crc32: Crc32Update, class: PacketClass, pkt: &[u8]) -> Result<(), Error> {
    let (covered, trailer) = split(class, pkt)?;
    if compute(crc32, class, covered) == u32::from_le_bytes(trailer) {
        Ok(())
    } else {
        Err(Error::BadIcrc)
    }
}
