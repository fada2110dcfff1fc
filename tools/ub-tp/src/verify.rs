// SPDX-License-Identifier: GPL-2.0
//! The receiver's bookkeeping for a checksummed stream: every message intact,
//! of the length the SPEC says, in order (seq 0, 1, 2, ...), exactly once.
//!
//! Call order: [`Verifier::new`], then [`Verifier::accept`] for each message
//! read, then [`Verifier::summary`]; [`Summary::ok`] says whether the stream
//! was perfect.

use serde::Serialize;

use crate::message::{self, Corrupt, HEADER_LEN};
use crate::sizes::SizeSpec;

/// What one message was.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The expected message, intact.
    Good(u64),
    /// Damaged (or, for a message shorter than 16 bytes, possibly out of
    /// place: it cannot tell).
    Corrupt(Corrupt),
    /// Intact, but of another length than the SPEC gives for its seq.
    WrongLength {
        /// Its seq.
        seq: u64,
        /// Its length.
        got: usize,
        /// The SPEC's.
        want: usize,
    },
    /// Intact, a seq already received.
    Duplicate(u64),
    /// Intact, past the expected seq: the ones between were skipped.
    OutOfOrder {
        /// Its seq.
        seq: u64,
        /// The one expected.
        expected: u64,
    },
}

/// The counts so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Summary {
    /// Intact messages in order.
    pub received: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Damaged messages (wrong length included).
    pub corrupt: u64,
    /// Messages past the expected seq.
    pub out_of_order: u64,
    /// Messages seen before.
    pub duplicates: u64,
}

impl Summary {
    /// `count` messages arrived, each intact, in order, exactly once.
    pub fn ok(&self, count: u64) -> bool {
        self.received == count
            && self.corrupt == 0
            && self.out_of_order == 0
            && self.duplicates == 0
    }
}

/// Checks a stream of messages as they are read.
#[derive(Clone, Debug)]
pub struct Verifier {
    sizes: SizeSpec,
    seed: u64,
    expected: u64,
    summary: Summary,
}

impl Verifier {
    /// A stream of sizes from `sizes` and payloads from `seed`.
    pub fn new(sizes: SizeSpec, seed: u64) -> Self {
        Verifier {
            sizes,
            seed,
            expected: 0,
            summary: Summary::default(),
        }
    }

    /// The seq the next message should carry.
    pub fn expected(&self) -> u64 {
        self.expected
    }

    /// The length the next message should have.
    pub fn expected_len(&self) -> usize {
        self.sizes.size(self.expected, self.seed)
    }

    /// Classifies `msg` and counts it.
    pub fn accept(&mut self, msg: &[u8]) -> Verdict {
        let v = self.classify(msg);
        let s = &mut self.summary;
        match v {
            Verdict::Good(seq) => {
                s.received += 1;
                s.bytes += msg.len() as u64;
                self.expected = seq.wrapping_add(1);
            }
            Verdict::Corrupt(_) | Verdict::WrongLength { .. } => {
                s.corrupt += 1;
                // A short message has no seq of its own: count it as the
                // expected one, so one bad message is one error.
                if msg.len() < HEADER_LEN {
                    self.expected = self.expected.wrapping_add(1);
                }
            }
            Verdict::Duplicate(_) => s.duplicates += 1,
            Verdict::OutOfOrder { seq, .. } => {
                s.out_of_order += 1;
                self.expected = seq.wrapping_add(1);
            }
        }
        v
    }

    fn classify(&self, msg: &[u8]) -> Verdict {
        let seq = match message::check(msg, self.seed, self.expected) {
            Ok(seq) => seq,
            Err(c) => return Verdict::Corrupt(c),
        };
        let want = self.sizes.size(seq, self.seed);
        if msg.len() != want {
            return Verdict::WrongLength {
                seq,
                got: msg.len(),
                want,
            };
        }
        if seq < self.expected {
            Verdict::Duplicate(seq)
        } else if seq > self.expected {
            Verdict::OutOfOrder {
                seq,
                expected: self.expected,
            }
        } else {
            Verdict::Good(seq)
        }
    }

    /// The counts so far.
    pub fn summary(&self) -> Summary {
        self.summary
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::encode;

    const SEED: u64 = 5;

    fn stream(spec: &str) -> (SizeSpec, impl Fn(u64) -> Vec<u8>) {
        let s: SizeSpec = spec.parse().unwrap_or_else(|e| panic!("{e}"));
        let t = s.clone();
        (s, move |i| encode(i, t.size(i, SEED), SEED))
    }

    #[test]
    fn a_perfect_stream_is_ok() {
        let (s, m) = stream("1,15,16,17,4096,1-70000");
        let mut v = Verifier::new(s, SEED);
        let mut bytes = 0;
        for i in 0..200 {
            let msg = m(i);
            bytes += msg.len() as u64;
            assert_eq!(v.accept(&msg), Verdict::Good(i));
        }
        let sum = v.summary();
        assert!(sum.ok(200), "{sum:?}");
        assert!(!sum.ok(201));
        assert_eq!(sum.bytes, bytes);
    }

    #[test]
    fn duplicates_gaps_damage_and_lengths_are_counted() {
        let (s, m) = stream("64");
        let mut v = Verifier::new(s, SEED);
        assert_eq!(v.accept(&m(0)), Verdict::Good(0));
        assert_eq!(v.accept(&m(0)), Verdict::Duplicate(0));
        assert_eq!(
            v.accept(&m(2)),
            Verdict::OutOfOrder {
                seq: 2,
                expected: 1
            }
        );
        let mut bad = m(3);
        bad[40] ^= 4;
        assert!(matches!(v.accept(&bad), Verdict::Corrupt(_)));
        assert_eq!(v.accept(&m(3)), Verdict::Good(3));
        // Intact but of another length than the SPEC's.
        assert_eq!(
            v.accept(&encode(4, 65, SEED)),
            Verdict::WrongLength {
                seq: 4,
                got: 65,
                want: 64
            }
        );
        let sum = v.summary();
        assert_eq!(
            sum,
            Summary {
                received: 2,
                bytes: 128,
                corrupt: 2,
                out_of_order: 1,
                duplicates: 1
            }
        );
        assert!(!sum.ok(2));
    }

    #[test]
    fn short_messages_out_of_place_are_errors() {
        let (s, m) = stream("1");
        let mut v = Verifier::new(s, SEED);
        assert_eq!(v.accept(&m(0)), Verdict::Good(0));
        // Message 0 again, where 1 is expected.
        let dup = m(0);
        assert!(
            m(1) != dup,
            "1-byte messages 0 and 1 should differ for this test"
        );
        assert!(matches!(v.accept(&dup), Verdict::Corrupt(_)));
        // Counted as message 1: the stream goes on with 2.
        assert_eq!(v.accept(&m(2)), Verdict::Good(2));
        assert!(!v.summary().ok(3));
    }
}
