// SPDX-License-Identifier: GPL-2.0
//! Network layer (UB spec chapter 5).
//!
//! Everything here is a pure codec or a pure decision function: network
//! headers ([`nth`]), the congestion-control indicator ([`cci`]), the
//! invariant CRC with its field masking ([`icrc`]), network partitions
//! ([`npi`]) and routing with multipath selection ([`route`]). The network
//! layer checks and drops; it never repairs (that is the transport's job).
//!
//! Paths inside this module are relative (`super::`) because the kernel
//! compiles the crate as a module of `ub.ko`, where `crate::` is the driver.

pub mod cci;
pub mod icrc;
pub mod npi;
pub mod nth;
pub mod route;

/// Why a header could not be parsed or written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Error {
    /// The input ends before the header does.
    Truncated,
    /// The output buffer is too small for what must be written.
    NoSpace,
    /// A field holds a value the specification reserves or forbids; the
    /// string names the field.
    Invalid(&'static str),
    /// The ICRC trailer does not match the packet.
    BadIcrc,
}

/// The packet class carried in LPH.CFG (UB spec Table B-1), which tells the
/// network layer which header format follows the LPH.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PacketClass {
    /// CFG 3: CCI + NPI, then IPv4 and UDP.
    Ipv4,
    /// CFG 4: CCI + NPI, then IPv6 and UDP.
    Ipv6,
    /// CFG 5: network control packets (not implemented here).
    NetControl,
    /// CFG 6: 16-bit CNA NTH, non-coherent memory / management / enumeration.
    Cna16,
    /// CFG 7: 24-bit CNA NTH (CTP or RTP).
    Cna24,
    /// CFG 9: 16-bit CNA NTH, coherent memory, TP bypass, no ICRC.
    Cna16Coherent,
}

impl PacketClass {
    /// Decodes LPH.CFG. CFG 0 (DLLCB) and the reserved values are errors:
    /// they never reach the network layer.
    pub const fn from_cfg(cfg: u8) -> Result<Self, Error> {
        match cfg {
            3 => Ok(Self::Ipv4),
            4 => Ok(Self::Ipv6),
            5 => Ok(Self::NetControl),
            6 => Ok(Self::Cna16),
            7 => Ok(Self::Cna24),
            9 => Ok(Self::Cna16Coherent),
            _ => Err(Error::Invalid("LPH.CFG")),
        }
    }

    /// The LPH.CFG value of this class.
    pub const fn cfg(self) -> u8 {
        match self {
            Self::Ipv4 => 3,
            Self::Ipv6 => 4,
            Self::NetControl => 5,
            Self::Cna16 => 6,
            Self::Cna24 => 7,
            Self::Cna16Coherent => 9,
        }
    }

    /// Whether packets of this class end with an ICRC (all but CFG 9 and 5).
    pub const fn has_icrc(self) -> bool {
        !matches!(self, Self::Cna16Coherent | Self::NetControl)
    }
}

/// Routing type, the 2-bit RT field the network layer hands to the data
/// link layer for the LPH (UB spec Table 5-7).
///
/// RT\[0\] selects per-packet (1) or per-flow (0) load balancing, RT\[1\]
/// shortest paths only (1) or all available paths (0). In-order delivery
/// needs per-flow.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct RoutingType {
    /// RT\[0\]: spray packets of one flow over the candidate ports.
    pub per_packet: bool,
    /// RT\[1\]: restrict the candidates to the shortest paths.
    pub shortest_only: bool,
}

impl RoutingType {
    /// Decodes the low two bits of `bits`.
    pub const fn from_bits(bits: u8) -> Self {
        Self {
            per_packet: bits & 1 != 0,
            shortest_only: bits & 2 != 0,
        }
    }

    /// The 2-bit encoding.
    pub const fn bits(self) -> u8 {
        (self.per_packet as u8) | ((self.shortest_only as u8) << 1)
    }
}

/// Reads `N` bytes at `off`.
pub(crate) fn get_array<const N: usize>(buf: &[u8], off: usize) -> Result<[u8; N], Error> {
    let end = off.checked_add(N).ok_or(Error::Truncated)?;
    let s = buf.get(off..end).ok_or(Error::Truncated)?;
    let mut a = [0u8; N];
    a.copy_from_slice(s);
    Ok(a)
}

/// Reads one byte at `off`.
pub(crate) fn get_u8(buf: &[u8], off: usize) -> Result<u8, Error> {
    buf.get(off).copied().ok_or(Error::Truncated)
}

/// Reads a big-endian `u16` at `off`.
pub(crate) fn get_u16(buf: &[u8], off: usize) -> Result<u16, Error> {
    Ok(u16::from_be_bytes(get_array(buf, off)?))
}

/// Reads a big-endian 24-bit value at `off`.
pub(crate) fn get_u24(buf: &[u8], off: usize) -> Result<u32, Error> {
    let [a, b, c] = get_array(buf, off)?;
    Ok(u32::from_be_bytes([0, a, b, c]))
}

/// Reads a big-endian `u32` at `off`.
pub(crate) fn get_u32(buf: &[u8], off: usize) -> Result<u32, Error> {
    Ok(u32::from_be_bytes(get_array(buf, off)?))
}

/// Writes `src` at `off`.
pub(crate) fn put(buf: &mut [u8], off: usize, src: &[u8]) -> Result<(), Error> {
    let end = off.checked_add(src.len()).ok_or(Error::NoSpace)?;
    buf.get_mut(off..end)
        .ok_or(Error::NoSpace)?
        .copy_from_slice(src);
    Ok(())
}

/// Writes one byte at `off`.
pub(crate) fn put_u8(buf: &mut [u8], off: usize, v: u8) -> Result<(), Error> {
    put(buf, off, &[v])
}

/// Writes a big-endian `u16` at `off`.
pub(crate) fn put_u16(buf: &mut [u8], off: usize, v: u16) -> Result<(), Error> {
    put(buf, off, &v.to_be_bytes())
}

/// Writes the low 24 bits of `v`, big-endian, at `off`.
pub(crate) fn put_u24(buf: &mut [u8], off: usize, v: u32) -> Result<(), Error> {
    let [_, a, b, c] = v.to_be_bytes();
    put(buf, off, &[a, b, c])
}

/// Writes a big-endian `u32` at `off`.
pub(crate) fn put_u32(buf: &mut [u8], off: usize, v: u32) -> Result<(), Error> {
    put(buf, off, &v.to_be_bytes())
}
