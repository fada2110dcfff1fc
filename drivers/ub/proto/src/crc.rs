// SPDX-License-Identifier: GPL-2.0
//! The two CRCs of UB: the link layer's block CRC (CRC30) and the network
//! layer's invariant CRC (ICRC, CRC-32).
//!
//! Both are table-driven, slicing-by-16: sixteen tables per CRC, computed at
//! compile time (16 KiB each), so the kernel and the host run the same code,
//! the tables cost nothing at run time, and sixteen bytes fold into the
//! register per step. Of the formulations that need nothing but `core` this
//! is the fastest measured (`proto.rst` gives the figures), for two reasons:
//! only the four lookups of the bytes the register overlays wait for the
//! register (the other twelve are computed a step ahead, see `update`),
//! and a step of any length from 4 to 16 bytes uses the same tables, so the
//! tail of a block costs two steps instead of a byte-wise loop. Wider
//! slicing measured no better while its tables crowd the data out of L1.
//!
//! The ICRC's CRC-32 is also a pluggable backend, [`Crc32Update`]: the
//! slicing code here ([`crc32_le_portable`]) is the fallback and the
//! reference every other backend is tested against; `ub.ko` plugs in the
//! kernel's own `crc32_le`, host programs a carry-less-multiply one (the
//! `ub-host-crc` crate).

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

/// CRC-32 generator polynomial of the ICRC (UB spec §5.3.7), normal form.
pub const CRC32_POLY: u32 = 0x04C1_1DB7;
/// The same polynomial bit-reversed, as the reflected algorithm uses it.
const CRC32_POLY_REFLECTED: u32 = CRC32_POLY.reverse_bits();

/// Bytes folded into the register per table step, and tables per CRC.
const SLICES: usize = 16;

/// The tables of one CRC: `[0]` is the byte-wise table, and `[k][i]`
/// advances entry `i` of `[k - 1]` by one more zero byte. In a step of `n`
/// bytes, the byte `k` places before the last goes through table `k`.
type Tables = [[u32; 256]; SLICES];

/// The bit order of a CRC, which fixes how its register lines up with the
/// input bytes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Order {
    /// MSB of byte 0 first, register left-aligned (the CRC30).
    MsbFirst,
    /// LSB of byte 0 first, register reflected (the CRC-32 of the ICRC).
    Reflected,
}

const CRC30_TABLES: Tables = slicing_tables(crc30_table(), Order::MsbFirst);
const CRC32_TABLES: Tables = slicing_tables(crc32_table(), Order::Reflected);

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

/// Derives the slicing tables from a byte-wise table.
#[expect(
    clippy::indexing_slicing,
    reason = "compile-time loops bounded by the table sizes"
)]
const fn slicing_tables(byte_table: [u32; 256], order: Order) -> Tables {
    let mut tables = [[0u32; 256]; SLICES];
    tables[0] = byte_table;
    let mut k = 1;
    while k < SLICES {
        let mut i = 0;
        while i < 256 {
            let prev = tables[k - 1][i];
            tables[k][i] = match order {
                Order::Reflected => (prev >> 8) ^ byte_table[(prev & 0xff) as usize],
                Order::MsbFirst => (prev << 8) ^ byte_table[(prev >> 24) as usize],
            };
            i += 1;
        }
        k += 1;
    }
    tables
}

/// Entry `index` of a table: a `u8` index is always in bounds.
#[inline(always)]
#[expect(
    clippy::indexing_slicing,
    reason = "a u8 index is below the table length"
)]
fn lookup(table: &[u32; 256], index: u8) -> u32 {
    table[usize::from(index)]
}

/// The register's bytes in the order the input bytes meet them.
#[inline(always)]
fn register_bytes(order: Order, reg: u32) -> [u8; 4] {
    match order {
        Order::MsbFirst => reg.to_be_bytes(),
        Order::Reflected => reg.to_le_bytes(),
    }
}

/// The part of a step of `N` bytes (4 to [`SLICES`]) that does not depend
/// on the register: bytes 4 to `N - 1`, byte `k` through table `N - 1 - k`.
#[inline(always)]
#[expect(
    clippy::indexing_slicing,
    reason = "constant indices below N, within both arrays"
)]
fn data_part<const N: usize>(tables: &Tables, chunk: &[u8; N]) -> u32 {
    let mut acc = 0;
    // Loops over constant bounds, which the compiler unrolls; an iterator
    // chain here is not unrolled and runs three times slower.
    for k in 4..N {
        acc ^= lookup(&tables[N - 1 - k], chunk[k]);
    }
    acc
}

/// The part of a step of `N` bytes that depends on the register, which
/// overlays the first four bytes.
#[inline(always)]
#[expect(
    clippy::indexing_slicing,
    reason = "constant indices below 4 <= N, within the three arrays"
)]
fn register_part<const N: usize>(tables: &Tables, order: Order, reg: u32, chunk: &[u8; N]) -> u32 {
    let head = register_bytes(order, reg);
    let mut acc = 0;
    for k in 0..4 {
        acc ^= lookup(&tables[N - 1 - k], chunk[k] ^ head[k]);
    }
    acc
}

/// Feeds `data` into the register `reg` of the CRC whose tables are
/// `tables`.
#[inline(always)]
fn update(tables: &Tables, order: Order, mut reg: u32, data: &[u8]) -> u32 {
    // A step is `register_part ^ data_part`. The compiler turns any tree of
    // XORs into one chain, and when that chain starts at the register, all
    // sixteen XORs lie on the path from one step's register to the next,
    // which then sets the speed (about one byte per cycle, no better than
    // slicing-by-8). So the data part of each step is computed during the
    // step before, and only four lookups and four XORs lie on that path:
    // this more than doubles the speed on long inputs.
    let mut chunks = data
        .chunks_exact(SLICES)
        .filter_map(|chunk| <&[u8; SLICES]>::try_from(chunk).ok());
    if let Some(first) = chunks.next() {
        let mut chunk = first;
        let mut ahead = data_part(tables, chunk);
        for next in chunks {
            reg = register_part(tables, order, reg, chunk) ^ ahead;
            ahead = data_part(tables, next);
            chunk = next;
        }
        reg = register_part(tables, order, reg, chunk) ^ ahead;
    }
    // The rest, fewer than SLICES bytes: a step of eight, one of four (the
    // same tables serve a step of any length), then byte by byte.
    let mut rest = data.chunks_exact(SLICES).remainder();
    if let Some((chunk, tail)) = rest.split_first_chunk::<8>() {
        reg = data_part(tables, chunk) ^ register_part(tables, order, reg, chunk);
        rest = tail;
    }
    if let Some((chunk, tail)) = rest.split_first_chunk::<4>() {
        reg = register_part(tables, order, reg, chunk);
        rest = tail;
    }
    let [t0, ..] = tables;
    for &byte in rest {
        reg = match order {
            Order::MsbFirst => (reg << 8) ^ lookup(t0, (reg >> 24) as u8 ^ byte),
            Order::Reflected => (reg >> 8) ^ lookup(t0, reg as u8 ^ byte),
        };
    }
    reg
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
        self.reg = update(&CRC30_TABLES, Order::MsbFirst, self.reg, data);
    }

    /// Feeds the `count` most significant bits of `bits` (0 to 8), MSB first.
    ///
    /// One lookup in the byte-wise table, without a branch: entry `t` of
    /// that table is `t(x) * x^32 mod P` for any `t` below 256, so it also
    /// serves to shift out fewer than eight bits.
    pub fn update_bits(&mut self, bits: u8, count: u32) {
        let count = if count > 8 { 8 } else { count };
        if count == 0 {
            return;
        }
        let [t0, ..] = &CRC30_TABLES;
        let top = (self.reg >> (32 - count)) ^ (u32::from(bits) >> (8 - count));
        self.reg = (self.reg << count) ^ lookup(t0, top as u8);
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

/// One CRC-32 (ICRC polynomial, reflected) update step with the semantics
/// of the kernel's `crc32_le(crc, p, len)`: no pre- or post-inversion.
///
/// The ICRC code takes one of these as its backend, so that each build
/// plugs in the fastest implementation it has: [`crc32_le_portable`]
/// everywhere, the kernel's `crc32_le` in `ub.ko`, a carry-less-multiply
/// one on the host (`ub-host-crc`). Every backend must return exactly what
/// [`crc32_le_portable`] returns, for every register value and input.
pub type Crc32Update = fn(u32, &[u8]) -> u32;

/// The portable [`Crc32Update`]: slicing-by-16 in `core` only, the fallback
/// and the reference the other backends are tested against.
///
/// # Examples
///
/// ```
/// use ub_proto::crc::crc32_le_portable;
/// // The standard CRC-32 inverts before and after.
/// assert_eq!(!crc32_le_portable(!0, b"123456789"), 0xCBF4_3926);
/// ```
pub fn crc32_le_portable(crc: u32, data: &[u8]) -> u32 {
    update(&CRC32_TABLES, Order::Reflected, crc, data)
}

/// Incremental ICRC (CRC-32), on the portable backend.
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
        self.reg = crc32_le_portable(self.reg, data);
    }

    /// The ICRC of everything fed so far.
    pub const fn finish(&self) -> u32 {
        !self.reg
    }
}

/// ICRC (CRC-32) of `data`, on the portable backend.
pub fn crc32(data: &[u8]) -> u32 {
    let mut crc = Crc32::new();
    crc.update(data);
    crc.finish()
}
