// SPDX-License-Identifier: GPL-2.0
//! Transport layer (UB spec chapter 6).
//!
//! - [`psn`]: 24-bit PSN arithmetic and the receive ranges.
//! - [`hdr`]: RTPH, UTPH, CTPH, CETPH, SAETPH codecs.
//! - [`rx`]: the RTP receiver (EPSN, OOO bitmap, MaxRcvPSN, responses).
//! - [`tx`]: the RTP sender (window, Go-Back-N or selective, fast
//!   retransmission, MarkPSN/LastFirstRtx, RTO, retry limit).
//! - [`cc`]: congestion control (cw/inflight, CAQM, LDCP).
//! - [`dcqcn`]: CNP-driven rate control (CTP, optionally RTP).
//! - [`msg`]: message reassembly, CTP and UTP framing.
//! - [`tpg`]: TP Channel Groups and source-port / LBF spreading.
//! - [`cm`]: the in-band connection-management exchange and channel states.
//!
//! As in [`super::net`], paths are relative because the kernel compiles the
//! crate as a module.

pub mod cc;
pub mod cm;
pub mod dcqcn;
pub mod hdr;
pub mod msg;
pub mod psn;
pub mod rx;
pub mod tpg;
pub mod tx;

/// Largest OOO window the spec allows.
pub const MAX_OOO_WINDOW: u32 = 2048;

/// Retransmission algorithm of a channel (UB spec §6.4.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RetransmitMode {
    /// Go-Back-N.
    GoBackN,
    /// Selective retransmission.
    Selective,
}

/// The four static RTO levels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StaticRto {
    /// 512 µs.
    Us512,
    /// 16 ms.
    Ms16,
    /// 128 ms.
    Ms128,
    /// 4 s.
    S4,
}

impl StaticRto {
    /// The timeout, ns.
    pub const fn ns(self) -> u64 {
        match self {
            Self::Us512 => 512_000,
            Self::Ms16 => 16_000_000,
            Self::Ms128 => 128_000_000,
            Self::S4 => 4_000_000_000,
        }
    }
}

/// Retransmission timeout policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RtoMode {
    /// A fixed level chosen at channel creation.
    Static(StaticRto),
    /// `Base_time × 2^(N × Times)`, Times = consecutive timeouts so far.
    Dynamic {
        /// Base time, µs (4 … 2 097 152).
        base_us: u32,
        /// The coefficient N.
        n: u8,
    },
}

/// Smallest dynamic RTO base, µs.
pub const RTO_BASE_MIN_US: u32 = 4;
/// Largest dynamic RTO base, µs.
pub const RTO_BASE_MAX_US: u32 = 2_097_152;

impl RtoMode {
    /// The RTO after `times` consecutive timeouts, ns (saturating).
    pub const fn timeout_ns(self, times: u32) -> u64 {
        match self {
            Self::Static(s) => s.ns(),
            Self::Dynamic { base_us, n } => {
                let base = (base_us as u64).saturating_mul(1000);
                let shift = (n as u32).saturating_mul(times);
                if shift >= 64 || base.leading_zeros() < shift {
                    u64::MAX
                } else {
                    base << shift
                }
            }
        }
    }

    /// Whether the parameters are within the spec's ranges.
    pub const fn is_valid(self) -> bool {
        match self {
            Self::Static(_) => true,
            Self::Dynamic { base_us, .. } => {
                base_us >= RTO_BASE_MIN_US && base_us <= RTO_BASE_MAX_US
            }
        }
    }
}
