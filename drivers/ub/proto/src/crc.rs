// SPDX-License-Identifier: GPL-2.0
//! The two CRCs of UB: the link layer's block CRC (CRC30) and the network
//! layer's invariant CRC (ICRC, CRC-32).
//!
//! Both use slicing-by-8 tables computed at compile time (8 KiB each), so the
//! kernel and the host run the same code, the tables cost nothing at run
//! time, and eight bytes fold into the register per step.

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

/// Slicing-by-8 tables: `CRC30_TABLES[0]` is the byte-wise table, and
/// `CRC30_TABLES[k][i]` advances entry `i` of table `k - 1` by one more zero
/// byte, so eight input bytes fold into the register with eight lookups.
const CRC30_TABLES: [[u32; 256]; 8] = slicing_tables(crc30_table(), false);

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
        let [t0, t1, t2, t3, t4, t5, t6, t7] = &CRC30_TABLES;
        let mut reg = self.reg;
        let mut words = data.chunks_exact(8);
        for word in &mut words {
            let word = u64::from_be_bytes(<[u8; 8]>::try_from(word).unwrap_or_default());
            let hi = reg ^ (word >> 32) as u32;
            let lo = word as u32;
            reg = lookup(t7, hi >> 24)
                ^ lookup(t6, hi >> 16)
                ^ lookup(t5, hi >> 8)
                ^ lookup(t4, hi)
                ^ lookup(t3, lo >> 24)
                ^ lookup(t2, lo >> 16)
                ^ lookup(t1, lo >> 8)
                ^ lookup(t0, lo);
        }
        for &byte in words.remainder() {
            reg = (reg << 8) ^ lookup(t0, (reg >> 24) ^ u32::from(byte));
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

/// Slicing-by-8 tables of the reflected CRC-32, built like
/// [`CRC30_TABLES`] but shifting the other way.
const CRC32_TABLES: [[u32; 256]; 8] = slicing_tables(crc32_table(), true);

/// Derives the slicing-by-8 tables from a byte-wise table.
#[expect(
    clippy::indexing_slicing,
    reason = "compile-time loops bounded by the table sizes"
)]
const fn slicing_tables(byte_table: [u32; 256], reflected: bool) -> [[u32; 256]; 8] {
    let mut tables = [[0u32; 256]; 8];
    tables[0] = byte_table;
    let mut k = 1;
    while k < 8 {
        let mut i = 0;
        while i < 256 {
            let prev = tables[k - 1][i];
            tables[k][i] = if reflected {
                (prev >> 8) ^ byte_table[(prev & 0xff) as usize]
            } else {
                (prev << 8) ^ byte_table[(prev >> 24) as usize]
            };
            i += 1;
        }
        k += 1;
    }
    tables
}

/// Entry `index & 0xff` of a table: the mask keeps every lookup in bounds.
#[inline(always)]
fn lookup(table: &[u32; 256], index: u32) -> u32 {
    #[expect(clippy::indexing_slicing, reason = "index masked to the table length")]
    table[(index & 0xff) as usize]
}

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
        let [t0, t1, t2, t3, t4, t5, t6, t7] = &CRC32_TABLES;
        let mut reg = self.reg;
        let mut words = data.chunks_exact(8);
        for word in &mut words {
            let word = u64::from_le_bytes(<[u8; 8]>::try_from(word).unwrap_or_default());
            let lo = reg ^ word as u32;
            let hi = (word >> 32) as u32;
            reg = lookup(t7, lo)
                ^ lookup(t6, lo >> 8)
                ^ lookup(t5, lo >> 16)
                ^ lookup(t4, lo >> 24)
                ^ lookup(t3, hi)
                ^ lookup(t2, hi >> 8)
                ^ lookup(t1, hi >> 16)
                ^ lookup(t0, hi >> 24);
        }
        for &byte in words.remainder() {
            reg = (reg >> 8) ^ lookup(t0, reg ^ u32::from(byte));
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
