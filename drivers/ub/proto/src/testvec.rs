// SPDX-License-Identifier: GPL-2.0
//! Known-answer vectors, shared by both sides of the shared-source path.
//!
//! The Cargo tests check every vector against independent reference
//! implementations (the `crc` crate, and a bit-serial polynomial division
//! written separately from the table code); the KUnit suite of `ub.ko` checks
//! the kernel build of this crate against the same vectors. A vector that is
//! wrong fails on the host; a miscompiled kernel build fails in the guest.

use crate::crc::{Crc30, Crc32};

/// Input of a CRC vector.
#[derive(Clone, Copy, Debug)]
pub enum CrcInput {
    /// Literal bytes.
    Bytes(&'static [u8]),
    /// `len` bytes of [`pattern_byte`], long enough to stand for whole
    /// blocks without a large literal.
    Pattern(usize),
}

impl CrcInput {
    /// Calls `f` with the input, in pieces of at most 64 bytes.
    pub fn for_each_chunk(&self, mut f: impl FnMut(&[u8])) {
        match *self {
            CrcInput::Bytes(bytes) => f(bytes),
            CrcInput::Pattern(len) => {
                let mut buf = [0u8; 64];
                let mut done = 0;
                while done < len {
                    let n = core::cmp::min(buf.len(), len - done);
                    for (i, byte) in buf.iter_mut().take(n).enumerate() {
                        *byte = pattern_byte(done + i);
                    }
                    f(buf.get(..n).unwrap_or(&[]));
                    done += n;
                }
            }
        }
    }
}

/// Byte `i` of the deterministic test pattern.
pub const fn pattern_byte(i: usize) -> u8 {
    (i.wrapping_mul(31).wrapping_add(7) & 0xff) as u8
}

/// A block-CRC (CRC30) known answer.
#[derive(Clone, Copy, Debug)]
pub struct Crc30Vector {
    /// Whole bytes fed first.
    pub input: CrcInput,
    /// Value whose most significant `tail_bits` bits are fed after the bytes
    /// (a block's reserved bit and ERROR_FLAG).
    pub tail: u8,
    /// Number of bits of `tail` fed (0 or 2 in a real block).
    pub tail_bits: u32,
    /// Expected CRC30.
    pub crc30: u32,
}

impl Crc30Vector {
    /// The CRC30 that this build of [`crate::crc`] computes for the vector:
    /// what every consumer compares with [`Crc30Vector::crc30`].
    pub fn compute(&self) -> u32 {
        let mut crc = Crc30::new();
        self.input.for_each_chunk(|chunk| crc.update(chunk));
        crc.update_bits(self.tail, self.tail_bits);
        crc.finish()
    }
}

/// CRC30 known answers. The last three are the CRC-covered part of real
/// blocks: one flit (16 bytes and 2 bits), and a full 32-flit DLLDB with
/// ERROR_FLAG clear and set.
pub const CRC30_VECTORS: &[Crc30Vector] = &[
    Crc30Vector {
        input: CrcInput::Bytes(b""),
        tail: 0,
        tail_bits: 0,
        crc30: 0x3FFF_FFFF,
    },
    Crc30Vector {
        input: CrcInput::Bytes(b"123456789"),
        tail: 0,
        tail_bits: 0,
        crc30: CRC30_CHECK,
    },
    Crc30Vector {
        input: CrcInput::Bytes(&[0; 20]),
        tail: 0,
        tail_bits: 0,
        crc30: 0x030A_479A,
    },
    Crc30Vector {
        input: CrcInput::Bytes(&[0xff; 20]),
        tail: 0,
        tail_bits: 0,
        crc30: 0x007B_C1EC,
    },
    Crc30Vector {
        input: CrcInput::Pattern(256),
        tail: 0,
        tail_bits: 0,
        crc30: 0x3693_B6DC,
    },
    Crc30Vector {
        input: CrcInput::Pattern(16),
        tail: 0x00,
        tail_bits: 2,
        crc30: 0x177B_1DB4,
    },
    Crc30Vector {
        input: CrcInput::Pattern(636),
        tail: 0x00,
        tail_bits: 2,
        crc30: 0x182E_7E88,
    },
    Crc30Vector {
        input: CrcInput::Pattern(636),
        tail: 0x40,
        tail_bits: 2,
        crc30: 0x0D87_345D,
    },
];

/// CRC30 of the ASCII string "123456789" (the customary check input).
pub const CRC30_CHECK: u32 = 0x3C10_3723;

/// An ICRC (CRC-32) known answer.
#[derive(Clone, Copy, Debug)]
pub struct Crc32Vector {
    /// Bytes fed.
    pub input: CrcInput,
    /// Expected CRC-32.
    pub crc32: u32,
}

impl Crc32Vector {
    /// The CRC-32 that this build of [`crate::crc`] computes for the vector:
    /// what every consumer compares with [`Crc32Vector::crc32`].
    pub fn compute(&self) -> u32 {
        let mut crc = Crc32::new();
        self.input.for_each_chunk(|chunk| crc.update(chunk));
        crc.finish()
    }
}

/// The standard CRC-32 check value: the CRC of "123456789".
pub const CRC32_CHECK: u32 = 0xCBF4_3926;

/// ICRC (CRC-32) known answers.
pub const CRC32_VECTORS: &[Crc32Vector] = &[
    Crc32Vector {
        input: CrcInput::Bytes(b""),
        crc32: 0x0000_0000,
    },
    Crc32Vector {
        input: CrcInput::Bytes(b"123456789"),
        crc32: CRC32_CHECK,
    },
    Crc32Vector {
        input: CrcInput::Bytes(&[0; 32]),
        crc32: 0x190A_55AD,
    },
    Crc32Vector {
        input: CrcInput::Pattern(4096),
        crc32: 0x5D1C_4EE3,
    },
];
