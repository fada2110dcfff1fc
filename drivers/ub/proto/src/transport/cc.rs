// SPDX-License-Identifier: GPL-2.0
//! Window-based congestion control of an RTP channel (UB spec §6.6).
//!
//! The sender keeps `cw`, `data_size_sent` and `data_size_recvd` (the
//! latter returned by the receiver in CETPH.Ack_Seq); `inflight = sent −
//! recvd` and a packet may go only if it fits in `cw − inflight`. The
//! update rules are the spec's: a Go-Back-N TPNAK-CC sets `sent` to its
//! Ack_Seq, a selective retransmission subtracts the resent packet, a
//! timeout sets `inflight` to 0.
//!
//! Two algorithms adjust `cw`:
//! - CAQM (Table 6-11): the sender asks for an increase `Hint` in every
//!   packet; switches clear I or set C; the receiver accumulates C marks and
//!   granted hints; the sender then: C>0, I=0 → decrease; C>0, I=1 → add
//!   the granted hint, then decrease; C=0, I=1 → add the hint; C=0, I=0 →
//!   unchanged. The decrease amount is not specified; ours is
//!   `C × β × MTU` with β = 1/2 (the ns-3-UB default), floored at one MTU,
//!   and the hint unit is 32 bytes.
//! - LDCP: DCTCP-like. Per window of acknowledged data the sender measures
//!   the marked fraction `F` (from CETPH.Ce_Seq), updates
//!   `α ← (1 − g) α + g F` with g = 1/16, and multiplies `cw` by `1 − α/2`
//!   if anything was marked, else adds one MTU.
//!
//! With per-packet load balancing only path-wide congestion should reduce
//! the window: `path_wide_permille` ignores decreases while the marked
//! fraction stays below that threshold (one congested path out of N marks
//! about 1/N of the packets).
//!
//! Amounts are in CC units: bytes for CAQM, 2-byte "sequences" for LDCP
//! (packet sizes rounded up), as the spec's CETPH.Ack_Seq defines them.

use super::super::net::cci::{Cci, Fecn};
use super::hdr::Cetph;

/// Fixed-point scale of fractions (1.0 = 1024).
const ONE: u32 = 1024;

/// Congestion-control algorithm and its constants.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CcAlgorithm {
    /// No congestion control: the window is the only limit.
    None,
    /// CAQM.
    Caqm {
        /// Bytes per Hint unit (agreed with the switches).
        hint_unit: u32,
    },
    /// LDCP.
    Ldcp,
}

/// Congestion-control configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CcConfig {
    /// Algorithm.
    pub alg: CcAlgorithm,
    /// Initial window, bytes.
    pub initial_cw: u32,
    /// Largest window, bytes.
    pub max_cw: u32,
    /// Transport MTU (payload bytes per packet), bytes.
    pub mtu: u32,
    /// Ignore decreases while fewer than this many per mille of the data is
    /// marked (0: react to any mark). Use with per-packet load balancing.
    pub path_wide_permille: u32,
}

impl CcConfig {
    /// No congestion control.
    pub const NONE: CcConfig = CcConfig {
        alg: CcAlgorithm::None,
        initial_cw: u32::MAX,
        max_cw: u32::MAX,
        mtu: 4096,
        path_wide_permille: 0,
    };
}

/// Sender-side congestion state.
#[derive(Clone, Copy, Debug)]
pub struct CcState {
    cfg: CcConfig,
    cw: u32,
    sent: u32,
    recvd: u32,
    ce_seen: u32,
    alpha: u32,
    round_end: u32,
    round_acked: u32,
    round_marked: u32,
    decreases: u32,
}

impl CcState {
    /// Fresh state.
    pub const fn new(cfg: CcConfig) -> Self {
        let cw = if cfg.initial_cw > cfg.max_cw {
            cfg.max_cw
        } else {
            cfg.initial_cw
        };
        Self {
            cfg,
            cw,
            sent: 0,
            recvd: 0,
            ce_seen: 0,
            alpha: ONE,
            round_end: 0,
            round_acked: 0,
            round_marked: 0,
            decreases: 0,
        }
    }

    /// Whether congestion control is on.
    pub const fn enabled(&self) -> bool {
        !matches!(self.cfg.alg, CcAlgorithm::None)
    }

    /// CC units of a packet of `bytes` bytes.
    pub const fn units(&self, bytes: u32) -> u32 {
        match self.cfg.alg {
            CcAlgorithm::Ldcp => bytes.div_ceil(2),
            _ => bytes,
        }
    }

    /// Current window, bytes.
    pub const fn cw(&self) -> u32 {
        self.cw
    }

    /// Number of window decreases so far.
    pub const fn decreases(&self) -> u32 {
        self.decreases
    }

    /// `data_size_sent − data_size_recvd`, CC units (0 if the receiver
    /// reports more than was counted as sent).
    pub const fn inflight(&self) -> u32 {
        let d = self.sent.wrapping_sub(self.recvd);
        if d > (1 << 31) {
            0
        } else {
            d
        }
    }

    /// Whether a packet of `bytes` may be sent now. With nothing in flight
    /// one packet is always allowed, so a tiny window cannot stall.
    pub fn can_send(&self, bytes: u32) -> bool {
        if !self.enabled() {
            return true;
        }
        let inflight = self.inflight();
        inflight == 0 || inflight.saturating_add(self.units(bytes)) <= self.units(self.cw)
    }

    /// Accounts a packet sent (new or retransmitted).
    pub fn on_send(&mut self, bytes: u32) {
        self.sent = self.sent.wrapping_add(self.units(bytes));
    }

    /// Selective retransmission: the packet to be resent leaves inflight.
    pub fn on_requeue(&mut self, bytes: u32) {
        if self.inflight() >= self.units(bytes) {
            self.sent = self.sent.wrapping_sub(self.units(bytes));
        } else {
            self.sent = self.recvd;
        }
    }

    /// Go-Back-N TPNAK-CC: `data_size_sent := Ack_Seq`.
    pub fn on_nak(&mut self, ack_seq: Option<u32>) {
        self.sent = ack_seq.unwrap_or(self.recvd);
        self.recvd = self.sent;
    }

    /// Timeout: inflight := 0.
    pub fn on_timeout(&mut self) {
        self.sent = self.recvd;
    }

    /// The CCI to put into an outgoing data packet.
    pub fn cci(&self) -> Cci {
        match self.cfg.alg {
            CcAlgorithm::Caqm { hint_unit } => {
                // Ask for an additive increase of about MTU²/cw bytes.
                let mtu = u64::from(self.cfg.mtu);
                let want = (mtu.saturating_mul(mtu) / u64::from(self.cw.max(1)))
                    .div_ceil(u64::from(hint_unit.max(1)))
                    .clamp(1, 255);
                Cci::Caqm {
                    loc: false,
                    enable: true,
                    c: false,
                    i: true,
                    hint: u8::try_from(want).unwrap_or(u8::MAX),
                }
            }
            _ => Cci::Fecn {
                loc: false,
                fecn: Fecn::NoCongestion,
            },
        }
    }

    fn clamp_cw(&mut self, cw: u64) {
        let min = u64::from(self.cfg.mtu);
        let max = u64::from(self.cfg.max_cw).max(min);
        self.cw = u32::try_from(cw.clamp(min, max)).unwrap_or(u32::MAX);
    }

    /// Processes the CETPH of a response.
    pub fn on_ack(&mut self, cetph: Option<Cetph>) {
        let Some(c) = cetph else { return };
        let acked = match c.ack_seq() {
            Some(seq) => {
                let d = seq.wrapping_sub(self.recvd);
                if d == 0 || d > (1 << 31) {
                    0
                } else {
                    self.recvd = seq;
                    d
                }
            }
            None => 0,
        };
        match (self.cfg.alg, c) {
            (CcAlgorithm::Caqm { hint_unit }, Cetph::Caqm { i, c, hint, .. }) => {
                let mut cw = u64::from(self.cw);
                if i {
                    cw = cw.saturating_add(u64::from(hint).saturating_mul(u64::from(hint_unit)));
                }
                if c > 0 {
                    let pkts = (acked / self.units(self.cfg.mtu).max(1)).max(1);
                    let permille = u32::from(c).saturating_mul(1000) / pkts;
                    if permille >= self.cfg.path_wide_permille {
                        let dec = u64::from(c).saturating_mul(u64::from(self.cfg.mtu)) / 2;
                        cw = cw.saturating_sub(dec);
                        self.decreases = self.decreases.saturating_add(1);
                    }
                }
                self.clamp_cw(cw);
            }
            (CcAlgorithm::Ldcp, Cetph::Ldcp { ce_seq, .. }) => {
                let marked = ce_seq.wrapping_sub(self.ce_seen);
                let marked = if marked > (1 << 31) { 0 } else { marked };
                self.ce_seen = ce_seq;
                self.round_acked = self.round_acked.saturating_add(acked);
                self.round_marked = self.round_marked.saturating_add(marked);
                if self.recvd.wrapping_sub(self.round_end) < (1 << 31) {
                    self.end_ldcp_round();
                }
            }
            _ => {}
        }
    }

    fn end_ldcp_round(&mut self) {
        let acked = self.round_acked.max(1);
        let frac = u32::try_from(
            u64::from(self.round_marked.min(acked)) * u64::from(ONE) / u64::from(acked),
        )
        .unwrap_or(ONE);
        // alpha <- alpha * 15/16 + frac / 16
        self.alpha = (self.alpha - self.alpha / 16).saturating_add(frac / 16);
        let mut cw = u64::from(self.cw);
        if self.round_marked > 0 && frac.saturating_mul(1000) / ONE >= self.cfg.path_wide_permille {
            cw = cw.saturating_sub(cw * u64::from(self.alpha) / u64::from(2 * ONE));
            self.decreases = self.decreases.saturating_add(1);
        } else {
            cw = cw.saturating_add(u64::from(self.cfg.mtu));
        }
        self.clamp_cw(cw);
        self.round_acked = 0;
        self.round_marked = 0;
        self.round_end = self.recvd.wrapping_add(self.units(self.cw));
    }
}

/// Receiver-side congestion feedback accumulated between responses.
#[derive(Clone, Copy, Debug, Default)]
pub struct CcFeedback {
    /// data_size_recvd, CC units (wrapping).
    pub recvd: u32,
    /// Cumulative congestion-marked data (LDCP), CC units.
    pub ce: u32,
    /// C-marked packets since the last response (CAQM).
    pub c: u8,
    /// Granted hints since the last response (CAQM).
    pub hint: u16,
    /// LoC of the last marked packet.
    pub loc: bool,
}

impl CcFeedback {
    /// Accounts an accepted packet of `units` CC units that arrived with
    /// `cci`.
    pub fn on_accept(&mut self, units: u32, cci: Cci) {
        self.recvd = self.recvd.wrapping_add(units);
        match cci {
            Cci::Caqm {
                c, i, hint, loc, ..
            } => {
                if c {
                    self.c = self.c.saturating_add(1);
                    self.loc = loc;
                } else if i {
                    self.hint = self.hint.saturating_add(u16::from(hint));
                }
            }
            other => {
                if other.congested() {
                    self.ce = self.ce.wrapping_add(units);
                }
            }
        }
    }

    /// The CETPH of the next response; clears the per-response CAQM
    /// accumulators.
    pub fn take(&mut self, kind: super::hdr::CetphKind) -> Cetph {
        match kind {
            super::hdr::CetphKind::Ldcp => Cetph::Ldcp {
                ack_seq: self.recvd,
                ce_seq: self.ce,
            },
            super::hdr::CetphKind::Caqm => {
                let h = Cetph::Caqm {
                    ack_seq: self.recvd,
                    loc: self.loc,
                    i: self.hint > 0,
                    c: self.c,
                    hint: self.hint,
                };
                self.c = 0;
                self.hint = 0;
                self.loc = false;
                h
            }
        }
    }
}
