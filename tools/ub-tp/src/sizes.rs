// SPDX-License-Identifier: GPL-2.0
//! Message size sequences both ends derive from the same `--sizes` SPEC and
//! `--seed`, so the receiver knows every message's length.
//!
//! SPEC is a comma-separated list of items, used in turn (message `i` takes
//! item `i % items`); an item is a size (`4096`, `64K`, `1M`) or a range
//! `MIN-MAX`, from which message `i` takes a pseudo-random size, spread
//! log-uniformly: a bit length uniform over those of MIN..=MAX, then a size
//! uniform among the sizes of that bit length within the range. Everything is
//! integer arithmetic on `mix64(seed, i)`, so both ends agree exactly.

use std::fmt;
use std::str::FromStr;

use crate::message::mix64;

/// One SPEC item.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Item {
    /// Always this size.
    Fixed(usize),
    /// A log-uniform pick in `min..=max`.
    Range(usize, usize),
}

/// A parsed `--sizes` SPEC.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SizeSpec {
    items: Vec<Item>,
}

/// Why a SPEC did not parse.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    /// An empty SPEC or item.
    #[error("an empty size in '{0}' (e.g. 1,64,4096 or 1-1M)")]
    Empty(String),
    /// Not a number.
    #[error("'{0}' is not a size (a number, optionally with K or M: 64K)")]
    NotASize(String),
    /// A size of 0: a message has at least one byte.
    #[error("a message has at least 1 byte ('{0}')")]
    Zero(String),
    /// `MIN-MAX` with MIN > MAX.
    #[error("range '{0}' ends below its start")]
    Backwards(String),
}

fn parse_size(s: &str) -> Result<usize, SpecError> {
    let bad = || SpecError::NotASize(s.to_owned());
    let (num, mul) = match s.as_bytes().last() {
        Some(b'K' | b'k') => (&s[..s.len() - 1], 1024),
        Some(b'M' | b'm') => (&s[..s.len() - 1], 1 << 20),
        _ => (s, 1),
    };
    let n: usize = num.parse().map_err(|_| bad())?;
    let n = n.checked_mul(mul).ok_or_else(bad)?;
    if n == 0 {
        return Err(SpecError::Zero(s.to_owned()));
    }
    Ok(n)
}

impl FromStr for SizeSpec {
    type Err = SpecError;

    fn from_str(s: &str) -> Result<Self, SpecError> {
        let mut items = Vec::new();
        for part in s.split(',') {
            let part = part.trim();
            if part.is_empty() {
                return Err(SpecError::Empty(s.to_owned()));
            }
            let item = match part.split_once('-') {
                Some((a, b)) => {
                    let (a, b) = (parse_size(a.trim())?, parse_size(b.trim())?);
                    if a > b {
                        return Err(SpecError::Backwards(part.to_owned()));
                    }
                    Item::Range(a, b)
                }
                None => Item::Fixed(parse_size(part)?),
            };
            items.push(item);
        }
        Ok(SizeSpec { items })
    }
}

impl fmt::Display for SizeSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, it) in self.items.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            match it {
                Item::Fixed(n) => write!(f, "{n}")?,
                Item::Range(a, b) => write!(f, "{a}-{b}")?,
            }
        }
        Ok(())
    }
}

fn bit_len(n: usize) -> u32 {
    usize::BITS - n.leading_zeros()
}

fn pick(min: usize, max: usize, r: u64) -> usize {
    let (lo_bits, hi_bits) = (bit_len(min), bit_len(max));
    let span_bits = u64::from(hi_bits - lo_bits + 1);
    let bits = lo_bits + (r % span_bits) as u32;
    // Sizes of `bits` bits: 2^(bits-1) ..= 2^bits - 1, clipped to the range.
    let lo = min.max(1usize << (bits - 1));
    let hi = if bits >= usize::BITS {
        max
    } else {
        max.min((1usize << bits) - 1)
    };
    let width = (hi - lo) as u64 + 1;
    lo + (mix64(r) % width) as usize
}

impl SizeSpec {
    /// The size of message `seq` for `seed`.
    pub fn size(&self, seq: u64, seed: u64) -> usize {
        let n = self.items.len() as u64;
        let item = usize::try_from(seq % n.max(1))
            .ok()
            .and_then(|i| self.items.get(i));
        match item {
            Some(Item::Fixed(s)) => *s,
            Some(Item::Range(a, b)) => pick(*a, *b, mix64(seed ^ mix64(seq))),
            None => 1,
        }
    }

    /// The SPEC with every size above `max` brought down to `max` (a CTP
    /// stream's sizes, capped at the datagram size both ends learn from
    /// their bind: the two ends still derive the same sequence).
    pub fn capped(&self, max: usize) -> SizeSpec {
        let max = max.max(1);
        let items = self
            .items
            .iter()
            .map(|i| match *i {
                Item::Fixed(s) => Item::Fixed(s.min(max)),
                Item::Range(a, b) => Item::Range(a.min(max), b.min(max)),
            })
            .collect();
        SizeSpec { items }
    }

    /// The largest size the SPEC produces.
    pub fn max(&self) -> usize {
        self.items
            .iter()
            .map(|i| match i {
                Item::Fixed(s) => *s,
                Item::Range(_, b) => *b,
            })
            .max()
            .unwrap_or(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(s: &str) -> SizeSpec {
        s.parse().unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    #[test]
    fn capping_keeps_smaller_sizes_and_brings_larger_ones_down() {
        let c = spec("1,64,8192,100-1M").capped(4336);
        assert_eq!(c, spec("1,64,4336,100-4336"));
        assert_eq!(c.max(), 4336);
        assert!((0..400).all(|seq| (1..=4336).contains(&c.size(seq, 7))));
        assert_eq!(spec("1-1M").capped(0).max(), 1);
    }

    #[test]
    fn lists_cycle() {
        let s = spec("1,64,4096,65536,1048576");
        let got: Vec<_> = (0..7).map(|i| s.size(i, 0)).collect();
        assert_eq!(got, [1, 64, 4096, 65536, 1 << 20, 1, 64]);
        assert_eq!(s.max(), 1 << 20);
        assert_eq!(spec("4K,1M").size(1, 0), 1 << 20);
        assert_eq!(s.to_string(), "1,64,4096,65536,1048576");
    }

    #[test]
    fn ranges_stay_inside_are_deterministic_and_spread_per_octave() {
        let s = spec("1-1048576");
        let mut per_bits = [0u32; 22];
        for i in 0..21_000 {
            let n = s.size(i, 99);
            assert!((1..=1 << 20).contains(&n));
            assert_eq!(n, s.size(i, 99));
            per_bits[bit_len(n) as usize] += 1;
        }
        // 21 bit lengths, ~1000 each: every octave is used about equally.
        for (b, &c) in per_bits.iter().enumerate().skip(1) {
            assert!((700..1300).contains(&c), "bit length {b}: {c}");
        }
        // Another seed, another sequence.
        assert!((0..100).any(|i| s.size(i, 99) != s.size(i, 100)));
        let t = spec("100-200");
        assert!((0..1000).all(|i| (100..=200).contains(&t.size(i, 3))));
        assert_eq!(spec("7-7").size(5, 1), 7);
    }

    #[test]
    fn bad_specs_are_refused() {
        assert!(matches!("".parse::<SizeSpec>(), Err(SpecError::Empty(_))));
        assert!(matches!(
            "1,,2".parse::<SizeSpec>(),
            Err(SpecError::Empty(_))
        ));
        assert!(matches!("0".parse::<SizeSpec>(), Err(SpecError::Zero(_))));
        assert!(matches!(
            "x".parse::<SizeSpec>(),
            Err(SpecError::NotASize(_))
        ));
        assert!(matches!(
            "K".parse::<SizeSpec>(),
            Err(SpecError::NotASize(_))
        ));
        assert!(matches!(
            "9-3".parse::<SizeSpec>(),
            Err(SpecError::Backwards(_))
        ));
        assert!(matches!(
            "99999999999999999999M".parse::<SizeSpec>(),
            Err(SpecError::NotASize(_))
        ));
    }
}
