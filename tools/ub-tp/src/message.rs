// SPDX-License-Identifier: GPL-2.0
//! A checksummed message stream: every byte of a message is a function of
//! (seed, seq, length), so the receiver detects a flipped bit, a truncated
//! or extended message, and a message out of place.
//!
//! A message of [`HEADER_LEN`] bytes or more:
//!
//! ```text
//!  0..4   tag     MAGIC ^ low 32 bits of mix(seed, seq, len), little endian
//!  4..8   len     the message's length, u32 little endian
//!  8..16  seq     u64 little endian
//! 16..    payload splitmix64 stream seeded from mix(seed, seq), little endian
//! ```
//!
//! It names its own seq: [`check`] finds it, so the receiver tells a
//! duplicate or a gap from corruption. The tag covers seq and len, so a
//! 16-byte message (no payload) still detects a flipped seq bit (up to a
//! 2^-32 chance per corruption).
//!
//! A message shorter than 16 bytes cannot carry a header. Its byte 0 is
//! `(h & 0xf0) | len` and byte i (1..len) is byte `i` of
//! `mix(seed, seq, len)`'s output stream, where `h` is that stream's byte 0:
//! the receiver must know the seq it expects ([`check`]'s `expected`), and a
//! mismatch is reported as [`Corrupt::Short`] (corrupt or out of place: a
//! short message cannot tell). Truncation always shows in byte 0's length.

/// `"UBTP"` read as a little-endian u32.
pub const MAGIC: u32 = u32::from_le_bytes(*b"UBTP");
/// Bytes of the header of a message of 16 bytes or more.
pub const HEADER_LEN: usize = 16;

/// How a message failed [`check`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Corrupt {
    /// An empty buffer (read() returns 0 only at the end of the stream).
    #[error("an empty message")]
    Empty,
    /// The length field is not the number of bytes received.
    #[error("the message is {got} bytes, its header says {header}")]
    Length {
        /// Bytes received.
        got: usize,
        /// The header's length field.
        header: u32,
    },
    /// The tag does not match the header's seq and length.
    #[error("the header's tag does not match (seq {seq} as received)")]
    Tag {
        /// The seq field as received.
        seq: u64,
    },
    /// A payload byte differs.
    #[error("message seq {seq}: byte {offset} is {got:#04x}, expected {want:#04x}")]
    Payload {
        /// The header's seq.
        seq: u64,
        /// The first wrong byte.
        offset: usize,
        /// Its value.
        got: u8,
        /// What it should be.
        want: u8,
    },
    /// A message shorter than the header is not the one expected.
    #[error("a {len}-byte message is not message seq {expected}")]
    Short {
        /// Its length.
        len: usize,
        /// The seq the receiver expected.
        expected: u64,
    },
}

/// The splitmix64 finaliser: a cheap bijective 64-bit mixer.
pub const fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A splitmix64 stream: cheap, deterministic, good enough to make payload
/// bytes position- and message-dependent.
#[derive(Clone, Debug)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// The stream from `seed`.
    pub fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }

    /// The next 64 bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        mix64(self.0)
    }

    /// Fills `buf` with the stream, 8 bytes little endian per step.
    pub fn fill(&mut self, buf: &mut [u8]) {
        let mut chunks = buf.chunks_exact_mut(8);
        for c in &mut chunks {
            c.copy_from_slice(&self.next_u64().to_le_bytes());
        }
        let rest = chunks.into_remainder();
        if !rest.is_empty() {
            let v = self.next_u64().to_le_bytes();
            for (d, s) in rest.iter_mut().zip(v) {
                *d = s;
            }
        }
    }
}

fn payload_seed(seed: u64, seq: u64) -> u64 {
    mix64(seed ^ mix64(seq.wrapping_add(0x5542_5450)))
}

fn tag(seed: u64, seq: u64, len: u32) -> u32 {
    // Truncation keeps the low 32 bits on purpose.
    MAGIC ^ (mix64(payload_seed(seed, seq) ^ u64::from(len)) as u32)
}

fn short_stream(seed: u64, seq: u64, len: usize) -> SplitMix64 {
    SplitMix64::new(payload_seed(seed, seq) ^ (len as u64).wrapping_mul(0x100_0000_01b3))
}

/// Writes message `seq` of `buf.len()` bytes into `buf` (nothing for an
/// empty buffer; a length beyond `u32::MAX` is not a message the ABI
/// carries, its length field wraps).
pub fn encode_into(seq: u64, seed: u64, buf: &mut [u8]) {
    let len = buf.len();
    if len < HEADER_LEN {
        short_stream(seed, seq, len).fill(buf);
        if let Some(b0) = buf.first_mut() {
            // len < 16 fits the low nibble.
            *b0 = (*b0 & 0xf0) | (len as u8);
        }
        return;
    }
    let len32 = len as u32;
    let (head, payload) = buf.split_at_mut(HEADER_LEN);
    head[0..4].copy_from_slice(&tag(seed, seq, len32).to_le_bytes());
    head[4..8].copy_from_slice(&len32.to_le_bytes());
    head[8..16].copy_from_slice(&seq.to_le_bytes());
    SplitMix64::new(payload_seed(seed, seq)).fill(payload);
}

/// Message `seq` of `len` bytes.
pub fn encode(seq: u64, len: usize, seed: u64) -> Vec<u8> {
    let mut v = vec![0; len];
    encode_into(seq, seed, &mut v);
    v
}

fn first_difference(got: &[u8], stream: &mut SplitMix64) -> Option<(usize, u8, u8)> {
    let mut want = [0u8; 8];
    for (i, c) in got.chunks(8).enumerate() {
        stream.fill(&mut want);
        if c != &want[..c.len()] {
            let (j, (g, w)) = c.iter().zip(want).enumerate().find(|(_, (g, w))| *g != w)?;
            return Some((i * 8 + j, *g, w));
        }
    }
    None
}

/// Checks a received message: the seq it carries, or how it is corrupt.
/// `expected` is the seq the receiver waits for; only messages shorter than
/// [`HEADER_LEN`] need it (see the module documentation), longer ones name
/// their own seq, which may differ from `expected`.
pub fn check(buf: &[u8], seed: u64, expected: u64) -> Result<u64, Corrupt> {
    let len = buf.len();
    if len == 0 {
        return Err(Corrupt::Empty);
    }
    if len < HEADER_LEN {
        let mut want = [0u8; HEADER_LEN];
        let want = want.get_mut(..len).ok_or(Corrupt::Empty)?;
        encode_into(expected, seed, want);
        return if buf == want {
            Ok(expected)
        } else {
            Err(Corrupt::Short { len, expected })
        };
    }
    let (head, payload) = buf.split_at(HEADER_LEN);
    let word = |r: std::ops::Range<usize>| -> [u8; 4] {
        let mut w = [0; 4];
        w.copy_from_slice(&head[r]);
        w
    };
    let got_tag = u32::from_le_bytes(word(0..4));
    let header = u32::from_le_bytes(word(4..8));
    let mut s = [0; 8];
    s.copy_from_slice(&head[8..16]);
    let seq = u64::from_le_bytes(s);
    if u32::try_from(len).ok() != Some(header) {
        return Err(Corrupt::Length { got: len, header });
    }
    if got_tag != tag(seed, seq, header) {
        return Err(Corrupt::Tag { seq });
    }
    match first_difference(payload, &mut SplitMix64::new(payload_seed(seed, seq))) {
        Some((off, got, want)) => Err(Corrupt::Payload {
            seq,
            offset: HEADER_LEN + off,
            got,
            want,
        }),
        None => Ok(seq),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEED: u64 = 0x1234_5678;

    fn lengths() -> impl Iterator<Item = usize> {
        (1..=64).chain([100, 4095, 4096, 4097, 65536, 1 << 20])
    }

    #[test]
    fn every_length_round_trips() {
        for len in lengths() {
            for seq in [0, 1, 2, 1000, u64::MAX] {
                let m = encode(seq, len, SEED);
                assert_eq!(m.len(), len);
                assert_eq!(check(&m, SEED, seq), Ok(seq), "len {len} seq {seq}");
            }
        }
    }

    #[test]
    fn long_messages_name_their_seq() {
        let m = encode(42, 100, SEED);
        assert_eq!(check(&m, SEED, 0), Ok(42));
        // Another seed is another stream.
        assert!(check(&m, SEED + 1, 42).is_err());
    }

    #[test]
    fn a_flipped_bit_anywhere_is_detected() {
        for len in (1..=64).chain([100, 257]) {
            for seq in [0, 7, 123_456] {
                let m = encode(seq, len, SEED);
                for bit in 0..len * 8 {
                    let mut c = m.clone();
                    c[bit / 8] ^= 1 << (bit % 8);
                    assert!(
                        check(&c, SEED, seq).is_err(),
                        "len {len} seq {seq}: bit {bit} flip not seen"
                    );
                }
            }
        }
        // Big messages: a sample of positions, including the last byte.
        let m = encode(9, 1 << 20, SEED);
        for pos in [0, 5, 9, 16, 17, 4096, 65535, (1 << 20) - 1] {
            let mut c = m.clone();
            c[pos] ^= 0x80;
            assert!(check(&c, SEED, 9).is_err(), "byte {pos}");
        }
    }

    #[test]
    fn truncation_and_extension_are_detected() {
        for len in lengths().filter(|&l| l > 1) {
            let m = encode(3, len, SEED);
            for cut in [1, len / 2, len - 1] {
                if cut == 0 {
                    continue;
                }
                assert!(check(&m[..cut], SEED, 3).is_err(), "len {len} cut to {cut}");
            }
            let mut longer = m.clone();
            longer.push(0);
            assert!(check(&longer, SEED, 3).is_err(), "len {len} extended");
        }
        assert_eq!(check(&[], SEED, 0), Err(Corrupt::Empty));
        let m = encode(3, 100, SEED);
        assert_eq!(
            check(&m[..50], SEED, 3),
            Err(Corrupt::Length {
                got: 50,
                header: 100
            })
        );
    }

    #[test]
    fn a_message_out_of_place_is_detected() {
        // Short messages compare with the expected seq.
        for len in 1..HEADER_LEN {
            let m = encode(5, len, SEED);
            assert_eq!(
                check(&m, SEED, 6),
                Err(Corrupt::Short { len, expected: 6 }),
                "len {len}"
            );
        }
        // A long header moved onto another message's payload.
        let mut a = encode(5, 64, SEED);
        let b = encode(6, 64, SEED);
        a[HEADER_LEN..].copy_from_slice(&b[HEADER_LEN..]);
        assert!(matches!(check(&a, SEED, 5), Err(Corrupt::Payload { .. })));
    }

    #[test]
    fn payload_error_names_the_byte() {
        let mut m = encode(1, 40, SEED);
        m[33] ^= 0xff;
        match check(&m, SEED, 1) {
            Err(Corrupt::Payload { seq, offset, .. }) => {
                assert_eq!((seq, offset), (1, 33));
            }
            other => panic!("{other:?}"),
        }
    }
}
