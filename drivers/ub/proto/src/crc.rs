// SPDX-License-Identifier: GPL-2.0
//! The two CRCs of UB: the link layer's block CRC (CRC30) and the network
//! layer's invariant CRC (ICRC, CRC-32).
//!
//! Both are table driven with tables computed at compile time, so the kernel
//! and the host run the same code and the tables cost nothing at run time.

/// CRC30 generator polynomial of the block CRC, without the x^30 term:
/// x^30+x^28+x^26+x^24+x^23+x^21+x^19+x^16+x^14+x^11+x^9+x^7+x^6+x^4+x^2+1
/// (UB spec §4.7.2).
pub const CRC30_POLY: u32 = 0x15A9_4AD5;
/// Initial value of the block CRC: all ones.
pub const CRC30_INIT: u32 = 0x3FFF_FFFF;
/// The 30 bits a CRC30 value occupies.
pub const CRC30_MASK: u32 = 0x3FFF_FFFF;

/// The CRC30 register is kept left-aligned in a `u32` (shifted up by two
/// bits) so the usual MSB-first byte-wise table algorithm applies unchanged.
const CRC30_SHIFT: u32 = 2;

const CRC30_TABLE: [u32; 256] = crc30_table();

#[expect(
    clippy::indexing_slicing,
    reason = "compile-time loop bounded by the table length"
)]
const fn crc30_table() -> [u32; 256] {
    let poly = CRC30_POLY << CRC30_SHIFT;
    let mut table = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut reg = (i as u32) << 24;
        let mut bit = 0;
        while bit < 8 {
            reg = if reg & 0x8000_0000 != 0 {
                (reg << 1) ^ poly
            } else {
                reg << 1
            };
            bit += 1;
        }
        table[i] = reg;
        i += 1;
    }
    table
}

/// Incremental block CRC (CRC30): MSB of byte 0 first, initial value all
/// ones, result neither reflected nor inverted.
///
/// A block's CRC covers every bit before the CRC30 field, which ends two
/// bits into a byte (reserved bit and ERROR_FLAG); [`Crc30::update_bits`]
/// feeds those.
///
/// # Examples
///
/// ```
/// use ub_proto::crc::Crc30;
/// let mut crc = Crc30::new();
/// crc.update(b"1234");
/// crc.update(b"56789");
/// assert_eq!(crc.finish(), ub_proto::crc::crc30(b"123456789"));
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Crc30 {
    /// CRC register, left-aligned (see `CRC30_SHIFT`).
    reg: u32,
}

impl Default for Crc30 {
    fn default() -> Self {
        Self::new()
    }
}

impl Crc30 {
    /// A CRC register holding the initial value.
    pub const fn new() -> Self {
        Self {
            reg: CRC30_INIT << CRC30_SHIFT,
        }
    }

    /// Feeds whole bytes.
    pub fn update(&mut self, data: &[u8]) {
        let mut reg = self.reg;
        for &byte in data {
            let index = ((reg >> 24) ^ u32::from(byte)) & 0xff;
            // `index` is masked to 0..=255, the table's length.
            #[expect(clippy::indexing_slicing, reason = "index masked to the table length")]
            let entry = CRC30_TABLE[index as usize];
            reg = (reg << 8) ^ entry;
        }
        self.reg = reg;
    }

    /// Feeds the `count` most significant bits of `bits` (0 to 8), MSB first.
    pub fn update_bits(&mut self, bits: u8, count: u32) {
        let poly = CRC30_POLY << CRC30_SHIFT;
        let count = if count > 8 { 8 } else { count };
        let mut reg = self.reg;
        let mut i = 0;
        while i < count {
            let input = (u32::from(bits) >> (7 - i)) & 1;
            let top = (reg >> 31) ^ input;
            reg <<= 1;
            if top != 0 {
                reg ^= poly;
            }
            i += 1;
        }
        self.reg = reg;
    }

    /// The CRC30 of everything fed so far, in the low 30 bits.
    pub const fn finish(&self) -> u32 {
        self.reg >> CRC30_SHIFT
    }
}

/// CRC30 of `data` (whole bytes).
pub fn crc30(data: &[u8]) -> u32 {
    let mut crc = Crc30::new();
    crc.update(data);
    crc.finish()
}

/// CRC-32 generator polynomial of the ICRC (UB spec §5.3.7), normal form.
pub const CRC32_POLY: u32 = 0x04C1_1DB7;
/// The same polynomial bit-reversed, as the reflected algorithm uses it.
const CRC32_POLY_REFLECTED: u32 = CRC32_POLY.reverse_bits();

const CRC32_TABLE: [u32; 256] = crc32_table();

#[expect(
    clippy::indexing_slicing,
    reason = "compile-time loop bounded by the table length"
)]
const fn crc32_table() -> [u32; 256] {
    let mut table = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut reg = i as u32;
        let mut bit = 0;
        while bit < 8 {
            reg = if reg & 1 != 0 {
                (reg >> 1) ^ CRC32_POLY_REFLECTED
            } else {
                reg >> 1
            };
            bit += 1;
        }
        table[i] = reg;
        i += 1;
    }
    table
}

/// Incremental ICRC (CRC-32).
///
/// The specification feeds each byte bit-reversed into an MSB-first CRC-32
/// with initial value all ones, then bit-reverses and inverts the result.
/// That is exactly the reflected CRC-32 of Ethernet and zlib, which is how
/// it is computed here (the tests prove the equivalence bit by bit).
///
/// Masking the mutable header fields to all ones before the computation is
/// the network layer's job; this type only computes the CRC.
#[derive(Clone, Copy, Debug)]
pub struct Crc32 {
    reg: u32,
}

impl Default for Crc32 {
    fn default() -> Self {
        Self::new()
    }
}

impl Crc32 {
    /// A CRC register holding the initial value (all ones).
    pub const fn new() -> Self {
        Self { reg: u32::MAX }
    }

    /// Feeds whole bytes.
    pub fn update(&mut self, data: &[u8]) {
        let mut reg = self.reg;
        for &byte in data {
            let index = (reg ^ u32::from(byte)) & 0xff;
            // `index` is masked to 0..=255, the table's length.
            #[expect(clippy::indexing_slicing, reason = "index masked to the table length")]
            let entry = CRC32_TABLE[index as usize];
            reg = (reg >> 8) ^ entry;
        }
        self.reg = reg;
    }

    /// The ICRC of everything fed so far.
    pub const fn finish(&self) -> u32 {
        !self.reg
    }
}

/// ICRC (CRC-32) of `data`.
pub fn crc32(data: &[u8]) -> u32 {
    let mut crc = Crc32::new();
    crc.update(data);
    crc.finish()
}
