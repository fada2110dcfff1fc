// SPDX-License-Identifier: GPL-2.0
//! 24-bit packet sequence numbers (UB spec §6.4.1).
//!
//! PSNs are modular: every operation wraps at 2^24, comparisons are made on
//! the signed distance in \[-8M, 8M) ("serial number arithmetic").

/// Number of distinct PSNs.
pub const PSN_SPACE: u32 = 1 << 24;
/// Half the PSN space (8M): the duplicate range is \[EPSN − 8M, EPSN − 1\].
pub const PSN_HALF: u32 = 1 << 23;
/// Largest allowed send window: max sent PSN − min unacked PSN ≤ 8M − 1.
pub const MAX_SEND_WINDOW: u32 = PSN_HALF - 1;
const MASK: u32 = PSN_SPACE - 1;

/// A 24-bit packet sequence number.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Psn(u32);

impl Psn {
    /// A PSN from the low 24 bits of `v`.
    pub const fn new(v: u32) -> Self {
        Self(v & MASK)
    }

    /// The 24-bit value.
    pub const fn value(self) -> u32 {
        self.0
    }

    /// `self + n` modulo 2^24.
    #[must_use]
    pub const fn add(self, n: u32) -> Self {
        Self(self.0.wrapping_add(n) & MASK)
    }

    /// `self − n` modulo 2^24.
    #[must_use]
    pub const fn sub(self, n: u32) -> Self {
        Self(self.0.wrapping_sub(n) & MASK)
    }

    /// The next PSN.
    #[must_use]
    pub const fn next(self) -> Self {
        self.add(1)
    }

    /// Forward distance from `from` to `self`, in \[0, 2^24).
    pub const fn distance_from(self, from: Psn) -> u32 {
        self.0.wrapping_sub(from.0) & MASK
    }

    /// Signed distance `self − other` in \[−8M, 8M).
    pub const fn diff(self, other: Psn) -> i32 {
        let d = self.distance_from(other);
        if d >= PSN_HALF {
            // d < 2^24, so the result is within [-8M, 0).
            (d as i32).wrapping_sub(PSN_SPACE as i32)
        } else {
            d as i32
        }
    }

    /// Whether `self` precedes `other` (modular).
    pub const fn before(self, other: Psn) -> bool {
        self.diff(other) < 0
    }

    /// Whether `self` follows `other` (modular).
    pub const fn after(self, other: Psn) -> bool {
        self.diff(other) > 0
    }

    /// The later of two PSNs (modular).
    #[must_use]
    pub const fn max(self, other: Psn) -> Psn {
        if self.after(other) {
            self
        } else {
            other
        }
    }
}

/// Where a received PSN falls relative to the expected PSN (EPSN).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PsnClass {
    /// PSN = EPSN.
    InOrder,
    /// PSN in \[EPSN − 8M, EPSN − 1\].
    Duplicate,
    /// PSN in \[EPSN + 1, EPSN + W\]; the value is PSN − EPSN.
    OutOfOrder(u32),
    /// Anything else.
    Invalid,
}

/// Classifies `psn` against `epsn` with OOO window `window` (0 when
/// out-of-order reception is disabled).
pub const fn classify(psn: Psn, epsn: Psn, window: u32) -> PsnClass {
    let d = psn.distance_from(epsn);
    if d == 0 {
        PsnClass::InOrder
    } else if d >= PSN_SPACE - PSN_HALF {
        PsnClass::Duplicate
    } else if d <= window {
        PsnClass::OutOfOrder(d)
    } else {
        PsnClass::Invalid
    }
}
