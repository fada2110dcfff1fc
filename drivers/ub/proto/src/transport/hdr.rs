// SPDX-License-Identifier: GPL-2.0
//! Transport headers (UB spec §6.2): RTPH, UTPH, CTPH, the CETPH variants
//! and the SAETPH of selective acknowledgements.
//!
//! All multi-byte fields are big-endian. SAETPH bitmap order (the spec does
//! not say; our decision): bitmap bit `n` is bit `7 − n % 8` of byte
//! `n / 8`, i.e. the first bit on the wire is bit 0 ↔ RTPH.PSN.

use super::super::net::{
    get_array, get_u16, get_u24, get_u32, get_u8, put, put_u16, put_u24, put_u32,
};
use super::super::net::{put_u8, Error};
use super::psn::Psn;

/// Length of RTPH and UTPH.
pub const RTPH_LEN: usize = 16;
/// Length of the CTPH.
pub const CTPH_LEN: usize = 1;
/// Length of an LDCP or CAQM CETPH.
pub const CETPH_LEN: usize = 8;
/// Length of the CETPH of a CNP.
pub const CNP_CETPH_LEN: usize = 16;
/// Length of the SAETPH before its bitmap.
pub const SAETPH_FIXED_LEN: usize = 4;
/// Largest SAETPH bitmap, in bytes.
pub const MAX_BITMAP_BYTES: usize = 128;

/// RTPH/UTPH TPOpcode\[6:0\].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TpOpcode {
    /// 0x0: UTP packet.
    Utp,
    /// 0x1: reliable TP data packet.
    Data,
    /// 0x2: TPACK / TPNAK.
    Ack,
    /// 0x3: TPACK-CC / TPNAK-CC (CETPH follows).
    AckCc,
    /// 0x5: TPSACK (SAETPH follows).
    Sack,
    /// 0x6: TPSACK-CC (CETPH, then SAETPH).
    SackCc,
    /// 0x8: CNP (CETPH follows).
    Cnp,
}

impl TpOpcode {
    /// Decodes TPOpcode\[6:0\].
    pub const fn from_bits(v: u8) -> Result<Self, Error> {
        match v & 0x7f {
            0 => Ok(Self::Utp),
            1 => Ok(Self::Data),
            2 => Ok(Self::Ack),
            3 => Ok(Self::AckCc),
            5 => Ok(Self::Sack),
            6 => Ok(Self::SackCc),
            8 => Ok(Self::Cnp),
            _ => Err(Error::Invalid("TPOpcode")),
        }
    }

    /// TPOpcode\[6:0\].
    pub const fn bits(self) -> u8 {
        match self {
            Self::Utp => 0,
            Self::Data => 1,
            Self::Ack => 2,
            Self::AckCc => 3,
            Self::Sack => 5,
            Self::SackCc => 6,
            Self::Cnp => 8,
        }
    }

    /// Whether a CETPH follows the RTPH.
    pub const fn has_cetph(self) -> bool {
        matches!(self, Self::AckCc | Self::SackCc | Self::Cnp)
    }

    /// Whether a SAETPH follows (after the CETPH if any).
    pub const fn has_saetph(self) -> bool {
        matches!(self, Self::Sack | Self::SackCc)
    }
}

/// Response status of TPACK/TPNAK (RSPST, 3 bits) with its RSPINFO.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rspst {
    /// 000: success (TPACK).
    Ack,
    /// 001: receiver not ready; retry after 2 µs × 2^`timer` (0..=19).
    Rnr(u8),
    /// 010: page fault at the target; same timer coding.
    PageFault(u8),
    /// 011: completer error (TPNAK); RSPINFO 0 = PSN error.
    CompleterError(u8),
    /// 101: TPACK carrying a TA response (ROL piggyback).
    TaResponse(u8),
}

/// RSPINFO of a PSN-error TPNAK.
pub const RSPINFO_PSN_ERROR: u8 = 0;

impl Rspst {
    /// Decodes RSPST/RSPINFO from RTPH byte 12.
    pub const fn from_byte(b: u8) -> Result<Self, Error> {
        let info = b & 0x1f;
        match b >> 5 {
            0 => Ok(Self::Ack),
            1 if info <= 19 => Ok(Self::Rnr(info)),
            2 if info <= 19 => Ok(Self::PageFault(info)),
            3 => Ok(Self::CompleterError(info)),
            5 => Ok(Self::TaResponse(info)),
            _ => Err(Error::Invalid("RSPST/RSPINFO")),
        }
    }

    /// RTPH byte 12.
    pub const fn byte(self) -> u8 {
        match self {
            Self::Ack => 0,
            Self::Rnr(i) => (1 << 5) | (i & 0x1f),
            Self::PageFault(i) => (2 << 5) | (i & 0x1f),
            Self::CompleterError(i) => (3 << 5) | (i & 0x1f),
            Self::TaResponse(i) => (5 << 5) | (i & 0x1f),
        }
    }

    /// Whether this is the PSN-error TPNAK of Go-Back-N.
    pub const fn is_psn_nak(self) -> bool {
        matches!(self, Self::CompleterError(RSPINFO_PSN_ERROR))
    }
}

/// Reliable transport header (16 bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rtph {
    /// TPOpcode\[6:0\].
    pub opcode: TpOpcode,
    /// TPOpcode\[7\]: last packet of a transaction operation (data only).
    pub last: bool,
    /// Padding bytes after the payload (2 bits).
    pub padding: u8,
    /// Next-layer protocol (4 bits).
    pub nlp: u8,
    /// Source TPN (24 bits).
    pub src_tpn: u32,
    /// Destination TPN (24 bits).
    pub dst_tpn: u32,
    /// A: the sender asks for an immediate separate response.
    pub ack_req: bool,
    /// F: fake (keep-alive) packet.
    pub fake: bool,
    /// PSN.
    pub psn: Psn,
    /// RSPST/RSPINFO (responses; `Ack` in data packets).
    pub rspst: Rspst,
    /// TPMSN (24 bits).
    pub tpmsn: u32,
}

impl Rtph {
    /// A data-packet header with everything else zero.
    pub const fn data(src_tpn: u32, dst_tpn: u32, psn: Psn, tpmsn: u32, last: bool) -> Self {
        Self {
            opcode: TpOpcode::Data,
            last,
            padding: 0,
            nlp: 0,
            src_tpn,
            dst_tpn,
            ack_req: false,
            fake: false,
            psn,
            rspst: Rspst::Ack,
            tpmsn,
        }
    }

    /// Parses the first 16 bytes of `buf`.
    pub fn parse(buf: &[u8]) -> Result<Self, Error> {
        let b: [u8; RTPH_LEN] = get_array(buf, 0)?;
        let [b0, b1, s0, s1, s2, d0, d1, d2, b8, p0, p1, p2, b12, m0, m1, m2] = b;
        if b1 >> 6 != 0 {
            return Err(Error::Invalid("TPVer"));
        }
        let opcode = TpOpcode::from_bits(b0)?;
        let last = b0 & 0x80 != 0;
        if last && opcode != TpOpcode::Data {
            return Err(Error::Invalid("TPOpcode last flag"));
        }
        Ok(Self {
            opcode,
            last,
            padding: (b1 >> 4) & 3,
            nlp: b1 & 0xf,
            src_tpn: u32::from_be_bytes([0, s0, s1, s2]),
            dst_tpn: u32::from_be_bytes([0, d0, d1, d2]),
            ack_req: b8 & 0x80 != 0,
            fake: b8 & 0x40 != 0,
            psn: Psn::new(u32::from_be_bytes([0, p0, p1, p2])),
            rspst: Rspst::from_byte(b12)?,
            tpmsn: u32::from_be_bytes([0, m0, m1, m2]),
        })
    }

    /// Writes the header into the first 16 bytes of `out`.
    pub fn write(&self, out: &mut [u8]) -> Result<usize, Error> {
        let [_, s0, s1, s2] = self.src_tpn.to_be_bytes();
        let [_, d0, d1, d2] = self.dst_tpn.to_be_bytes();
        let [_, p0, p1, p2] = self.psn.value().to_be_bytes();
        let [_, m0, m1, m2] = self.tpmsn.to_be_bytes();
        let b: [u8; RTPH_LEN] = [
            self.opcode.bits() | (u8::from(self.last) << 7),
            ((self.padding & 3) << 4) | (self.nlp & 0xf),
            s0,
            s1,
            s2,
            d0,
            d1,
            d2,
            (u8::from(self.ack_req) << 7) | (u8::from(self.fake) << 6),
            p0,
            p1,
            p2,
            self.rspst.byte(),
            m0,
            m1,
            m2,
        ];
        put(out, 0, &b)?;
        Ok(RTPH_LEN)
    }
}

/// Unreliable transport header (16 bytes): opcode 0, padding, NLP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Utph {
    /// Padding bytes after the payload.
    pub padding: u8,
    /// Next-layer protocol.
    pub nlp: u8,
}

impl Utph {
    /// Parses the first 16 bytes of `buf`.
    pub fn parse(buf: &[u8]) -> Result<Self, Error> {
        if buf.len() < RTPH_LEN {
            return Err(Error::Truncated);
        }
        if get_u8(buf, 0)? != 0 {
            return Err(Error::Invalid("UTPH TPOpcode"));
        }
        let b1 = get_u8(buf, 1)?;
        if b1 >> 6 != 0 {
            return Err(Error::Invalid("TPVer"));
        }
        Ok(Self {
            padding: (b1 >> 4) & 3,
            nlp: b1 & 0xf,
        })
    }

    /// Writes the header (reserved bytes zero).
    pub fn write(&self, out: &mut [u8]) -> Result<usize, Error> {
        put(out, 0, &[0u8; RTPH_LEN])?;
        put_u8(out, 1, ((self.padding & 3) << 4) | (self.nlp & 0xf))?;
        Ok(RTPH_LEN)
    }
}

/// CTPH opcode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CtpOpcode {
    /// 00: CTP data packet.
    Data,
    /// 01: CNP.
    Cnp,
}

/// Compact transport header (1 byte).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ctph {
    /// Data or CNP.
    pub opcode: CtpOpcode,
    /// Padding bytes.
    pub padding: u8,
    /// Next-layer protocol.
    pub nlp: u8,
}

impl Ctph {
    /// Parses the first byte of `buf`.
    pub fn parse(buf: &[u8]) -> Result<Self, Error> {
        let b = get_u8(buf, 0)?;
        let opcode = match b >> 6 {
            0 => CtpOpcode::Data,
            1 => CtpOpcode::Cnp,
            _ => return Err(Error::Invalid("CTPH TPOpcode")),
        };
        Ok(Self {
            opcode,
            padding: (b >> 4) & 3,
            nlp: b & 0xf,
        })
    }

    /// Writes the header byte.
    pub fn write(&self, out: &mut [u8]) -> Result<usize, Error> {
        let op = match self.opcode {
            CtpOpcode::Data => 0,
            CtpOpcode::Cnp => 1,
        };
        put_u8(
            out,
            0,
            (op << 6) | ((self.padding & 3) << 4) | (self.nlp & 0xf),
        )?;
        Ok(CTPH_LEN)
    }
}

/// Padding that makes `tph_and_payload` bytes a multiple of 4.
pub const fn padding_for(tph_and_payload: usize) -> u8 {
    ((4 - (tph_and_payload % 4)) % 4) as u8
}

/// Congestion-control extension header, by negotiated algorithm.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cetph {
    /// LDCP: cumulative received and congestion-marked sequences.
    Ldcp {
        /// Cumulative received data (CC units).
        ack_seq: u32,
        /// Cumulative congestion-marked data (CC units).
        ce_seq: u32,
    },
    /// CAQM: cumulative received data and the accumulated switch feedback.
    Caqm {
        /// Cumulative received data (CC units).
        ack_seq: u32,
        /// LoC copied from the NTH CCI.
        loc: bool,
        /// I: an increase was granted.
        i: bool,
        /// Number of C-marked packets since the last response.
        c: u8,
        /// Sum of the granted increments since the last response.
        hint: u16,
    },
    /// CNP: DCQCN-style ECN level and LoC (16 bytes, the rest reserved).
    Cnp {
        /// ECN level: 0 none, 1 minor, 3 severe.
        ecn: u8,
        /// LoC.
        loc: bool,
    },
}

/// Which CETPH layout a channel negotiated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CetphKind {
    /// LDCP layout.
    Ldcp,
    /// CAQM layout.
    Caqm,
}

impl Cetph {
    /// Encoded length.
    pub const fn len(&self) -> usize {
        match self {
            Self::Cnp { .. } => CNP_CETPH_LEN,
            _ => CETPH_LEN,
        }
    }

    /// Always false (for clippy's `len` convention).
    pub const fn is_empty(&self) -> bool {
        false
    }

    /// The cumulative received amount, if this variant carries one.
    pub const fn ack_seq(&self) -> Option<u32> {
        match self {
            Self::Ldcp { ack_seq, .. } | Self::Caqm { ack_seq, .. } => Some(*ack_seq),
            Self::Cnp { .. } => None,
        }
    }

    /// Parses a response CETPH of layout `kind`.
    pub fn parse(kind: CetphKind, buf: &[u8]) -> Result<Self, Error> {
        let ack_seq = get_u32(buf, 0)?;
        Ok(match kind {
            CetphKind::Ldcp => Self::Ldcp {
                ack_seq,
                ce_seq: get_u32(buf, 4)?,
            },
            CetphKind::Caqm => {
                let b4 = get_u8(buf, 4)?;
                Self::Caqm {
                    ack_seq,
                    loc: b4 & 2 != 0,
                    i: b4 & 1 != 0,
                    c: get_u8(buf, 5)?,
                    hint: get_u16(buf, 6)?,
                }
            }
        })
    }

    /// Parses a CNP's CETPH.
    pub fn parse_cnp(buf: &[u8]) -> Result<Self, Error> {
        if buf.len() < CNP_CETPH_LEN {
            return Err(Error::Truncated);
        }
        let b0 = get_u8(buf, 0)?;
        Ok(Self::Cnp {
            ecn: b0 >> 6,
            loc: b0 & 0x20 != 0,
        })
    }

    /// Writes the header.
    pub fn write(&self, out: &mut [u8]) -> Result<usize, Error> {
        match *self {
            Self::Ldcp { ack_seq, ce_seq } => {
                put_u32(out, 0, ack_seq)?;
                put_u32(out, 4, ce_seq)?;
            }
            Self::Caqm {
                ack_seq,
                loc,
                i,
                c,
                hint,
            } => {
                put_u32(out, 0, ack_seq)?;
                put_u8(out, 4, (u8::from(loc) << 1) | u8::from(i))?;
                put_u8(out, 5, c)?;
                put_u16(out, 6, hint)?;
            }
            Self::Cnp { ecn, loc } => {
                put(out, 0, &[0u8; CNP_CETPH_LEN])?;
                put_u8(out, 0, ((ecn & 3) << 6) | (u8::from(loc) << 5))?;
            }
        }
        Ok(self.len())
    }
}

/// SAETPH bitmap size.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum BitmapSize {
    /// 64 bits.
    B64,
    /// 128 bits.
    B128,
    /// 256 bits.
    B256,
    /// 512 bits.
    B512,
    /// 1024 bits.
    B1024,
}

impl BitmapSize {
    /// Decodes the 3-bit code.
    pub const fn from_code(c: u8) -> Result<Self, Error> {
        match c & 7 {
            0 => Ok(Self::B64),
            1 => Ok(Self::B128),
            2 => Ok(Self::B256),
            3 => Ok(Self::B512),
            4 => Ok(Self::B1024),
            _ => Err(Error::Invalid("BitMapSize")),
        }
    }

    /// The 3-bit code.
    pub const fn code(self) -> u8 {
        match self {
            Self::B64 => 0,
            Self::B128 => 1,
            Self::B256 => 2,
            Self::B512 => 3,
            Self::B1024 => 4,
        }
    }

    /// Bits in the bitmap.
    pub const fn bits(self) -> u32 {
        64u32 << self.code()
    }

    /// Bytes in the bitmap.
    pub const fn bytes(self) -> usize {
        8usize << self.code()
    }

    /// The smallest size holding `bits` bits, at most `cap`.
    pub fn fitting(bits: u32, cap: BitmapSize) -> Self {
        for s in [Self::B64, Self::B128, Self::B256, Self::B512, Self::B1024] {
            if s >= cap || s.bits() >= bits {
                return s;
            }
        }
        cap
    }
}

/// A parsed SAETPH: size, MaxRcvPSN and a view of the bitmap.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Saetph<'a> {
    /// Bitmap size.
    pub size: BitmapSize,
    /// Highest PSN ever received.
    pub max_rcv_psn: Psn,
    /// The bitmap bytes (exactly `size.bytes()` long).
    pub bitmap: &'a [u8],
}

impl<'a> Saetph<'a> {
    /// Parses a SAETPH; returns it and its length.
    pub fn parse(buf: &'a [u8]) -> Result<(Self, usize), Error> {
        let size = BitmapSize::from_code(get_u8(buf, 0)?)?;
        let max_rcv_psn = Psn::new(get_u24(buf, 1)?);
        let end = SAETPH_FIXED_LEN
            .checked_add(size.bytes())
            .ok_or(Error::Truncated)?;
        let bitmap = buf.get(SAETPH_FIXED_LEN..end).ok_or(Error::Truncated)?;
        Ok((
            Self {
                size,
                max_rcv_psn,
                bitmap,
            },
            end,
        ))
    }

    /// Bit `n` (bit 0 ↔ RTPH.PSN); out-of-range bits read as 0.
    pub fn bit(&self, n: u32) -> bool {
        let byte = usize::try_from(n / 8).unwrap_or(usize::MAX);
        self.bitmap
            .get(byte)
            .is_some_and(|b| b & (0x80 >> (n % 8)) != 0)
    }

    /// Writes the fixed part; the caller fills the bitmap with
    /// [`set_bitmap_bit`] afterwards. Returns the total length.
    pub fn write_fixed(size: BitmapSize, max_rcv_psn: Psn, out: &mut [u8]) -> Result<usize, Error> {
        let end = SAETPH_FIXED_LEN
            .checked_add(size.bytes())
            .ok_or(Error::NoSpace)?;
        let region = out.get_mut(..end).ok_or(Error::NoSpace)?;
        region.fill(0);
        put_u8(region, 0, size.code())?;
        put_u24(region, 1, max_rcv_psn.value())?;
        Ok(end)
    }
}

/// Sets bit `n` of a bitmap stored in `bitmap` (SAETPH order).
pub fn set_bitmap_bit(bitmap: &mut [u8], n: u32) {
    let byte = usize::try_from(n / 8).unwrap_or(usize::MAX);
    if let Some(b) = bitmap.get_mut(byte) {
        *b |= 0x80 >> (n % 8);
    }
}
