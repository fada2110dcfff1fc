// SPDX-License-Identifier: GPL-2.0
//! RETRY_REQ_SM: the receiver side of link-level retransmission (UB spec
//! §4.7.4, Table "RETRY_REQ_SM").
//!
//! ```text
//! NORMAL --CRC/FEC failure--> REQ --set sent--> WAIT --Retry_Ack_Set--> NORMAL
//!                              ^                  |
//!                              +----timeout-------+
//! REQ: NUM_RETRY += 1 on entry; NUM_RETRY_THRESHOLD reached -> RETRAIN
//! RETRAIN: NUM_PHY_REINIT += 1 on entry; threshold reached -> ERROR;
//!          PHY retrained -> REQ
//! ERROR: held until a management reset
//! ```
//!
//! Every entry into REQ counts, the one at link up and after a mode
//! switch included (`link.rst`, "Counting retries").

use super::super::frame::FLIT_BYTES;
use super::trace::{emit, Machine, Tracer};
use super::RETRY_SET_BLOCKS;

/// RETRY_REQ_SM state (receiver side, §4.7.4).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RetryReqState {
    /// Receiving normally.
    Normal,
    /// A Retry_Req_Set is to be sent.
    Req,
    /// Waiting for the Retry_Ack_Set.
    Wait,
    /// Waiting for the PHY to retrain.
    Retrain,
    /// Retry failed for good; held until `Link::reset`.
    Error,
}

impl RetryReqState {
    /// The specification's name of the state.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Normal => "NORMAL",
            Self::Req => "REQ",
            Self::Wait => "WAIT",
            Self::Retrain => "RETRAIN",
            Self::Error => "ERROR",
        }
    }
}

/// Most bits in which a flit may differ from the good Retry_Ack copy and
/// still be taken for a damaged copy of the same set, in CRC mode. Every
/// other CRC-valid one-flit block differs from the copy in more bits (the
/// CRC30 detects every error of up to 3 bits in a flit: `link_defects`
/// checks all of them), so a real block is never swallowed. In non-CRC
/// mode the PHY's FEC turns errors into lost flits and nothing bounds the
/// distance between two blocks, so only exact copies are consumed there.
pub const ACK_COPY_MAX_DAMAGE: u32 = 3;

/// The rest of a Retry_Ack_Set after its first good copy (§4.7.3: the set
/// is one signal): consumed without being judged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct AckSetTail {
    /// The good copy.
    copy: [u8; FLIT_BYTES],
    /// Stream position of the good copy (see `Link::rx_position`).
    at: u64,
}

/// RETRY_REQ_SM's states with their data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum ReqSm {
    /// NORMAL; `tail` while the rest of the Retry_Ack_Set that ended WAIT
    /// may still be arriving.
    Normal { tail: Option<AckSetTail> },
    /// REQ: a Retry_Req_Set is to be sent.
    Req,
    /// WAIT for the Retry_Ack_Set until `deadline` (ns).
    Wait { deadline: u64 },
    /// RETRAIN: waiting for the PHY.
    Retrain,
    /// ERROR: latched.
    Error,
}

impl ReqSm {
    #[inline]
    const fn public(&self) -> RetryReqState {
        match self {
            Self::Normal { .. } => RetryReqState::Normal,
            Self::Req => RetryReqState::Req,
            Self::Wait { .. } => RetryReqState::Wait,
            Self::Retrain => RetryReqState::Retrain,
            Self::Error => RetryReqState::Error,
        }
    }
}

/// Where an entry into REQ or RETRAIN led; the engine turns it into events.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Entered {
    /// NUM_RETRY reached its threshold (DL Retry Rollover).
    pub(super) rollover: bool,
    /// The state entered: REQ, RETRAIN or ERROR.
    pub(super) to: RetryReqState,
}

/// What a good Retry_Ack block means to the receiver.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum AckVerdict {
    /// WAIT ended: the retransmission from RcvPtr follows.
    Resumed,
    /// In NORMAL, a set for another RcvPtr: the peer restarted behind this
    /// port; treat as an error and re-request.
    Realign,
    /// Stale or a copy already acted on: discard.
    Ignored,
}

/// RETRY_REQ_SM with RcvPtr and its counters; [`RetryReq::transition`] is
/// the only writer of the state.
#[derive(Clone, Copy, Debug)]
pub(super) struct RetryReq {
    sm: ReqSm,
    rcv_ptr: u16,
    num_retry: u8,
    num_phy_reinit: u8,
    num_retry_threshold: u8,
    num_phy_reinit_threshold: u8,
    wait_timeout_ns: u64,
}

impl RetryReq {
    pub(super) const fn new(
        num_retry_threshold: u8,
        num_phy_reinit_threshold: u8,
        wait_timeout_ns: u64,
    ) -> Self {
        Self {
            sm: ReqSm::Normal { tail: None },
            rcv_ptr: 0,
            num_retry: 0,
            num_phy_reinit: 0,
            num_retry_threshold,
            num_phy_reinit_threshold,
            wait_timeout_ns,
        }
    }

    #[inline]
    pub(super) const fn state(&self) -> RetryReqState {
        self.sm.public()
    }

    /// NORMAL with no Retry_Ack_Set tail pending: blocks are parsed whole.
    #[inline]
    pub(super) const fn is_receiving(&self) -> bool {
        matches!(self.sm, ReqSm::Normal { tail: None })
    }

    #[inline]
    pub(super) const fn rcv_ptr(&self) -> u16 {
        self.rcv_ptr
    }

    #[inline]
    pub(super) const fn num_retry(&self) -> u8 {
        self.num_retry
    }

    #[inline]
    pub(super) const fn num_phy_reinit(&self) -> u8 {
        self.num_phy_reinit
    }

    /// The WAIT deadline, in the timer table.
    #[inline]
    pub(super) const fn wait_deadline(&self) -> Option<u64> {
        match self.sm {
            ReqSm::Wait { deadline } => Some(deadline),
            _ => None,
        }
    }

    fn transition(&mut self, to: ReqSm, section: &'static str, tracer: Option<Tracer>) {
        let from = self.sm.public().name();
        self.sm = to;
        emit(tracer, Machine::RetryReq, from, to.public().name(), section);
    }

    /// Entry into REQ (§4.7.4): after a CRC or FEC failure, a WAIT
    /// timeout, a PHY retrain, link up or a mode switch. NUM_RETRY += 1;
    /// at NUM_RETRY_THRESHOLD it restarts at 0 and RETRAIN is entered.
    pub(super) fn enter_req(&mut self, tracer: Option<Tracer>) -> Entered {
        self.num_retry = self.num_retry.saturating_add(1);
        if self.num_retry >= self.num_retry_threshold {
            self.num_retry = 0;
            let mut e = self.enter_retrain(tracer);
            e.rollover = true;
            e
        } else {
            self.transition(ReqSm::Req, "§4.7.4", tracer);
            Entered {
                rollover: false,
                to: RetryReqState::Req,
            }
        }
    }

    /// Entry into RETRAIN (§4.7.4): NUM_PHY_REINIT += 1; at
    /// NUM_PHY_REINIT_THRESHOLD it restarts at 0 and ERROR is entered.
    pub(super) fn enter_retrain(&mut self, tracer: Option<Tracer>) -> Entered {
        self.num_retry = 0;
        self.num_phy_reinit = self.num_phy_reinit.saturating_add(1);
        let to = if self.num_phy_reinit >= self.num_phy_reinit_threshold {
            self.num_phy_reinit = 0;
            ReqSm::Error
        } else {
            ReqSm::Retrain
        };
        self.transition(to, "§4.7.4", tracer);
        Entered {
            rollover: false,
            to: to.public(),
        }
    }

    /// The Retry_Req_Set went out: REQ → WAIT.
    pub(super) fn set_sent(&mut self, now: u64, tracer: Option<Tracer>) {
        if self.sm == ReqSm::Req {
            let deadline = now.saturating_add(self.wait_timeout_ns);
            self.transition(ReqSm::Wait { deadline }, "§4.7.4", tracer);
        }
    }

    /// A good Retry_Ack block `flit` with `rd_ptr`, at receive-flit
    /// position `at`.
    pub(super) fn retry_ack(
        &mut self,
        rd_ptr: u16,
        flit: &[u8; FLIT_BYTES],
        at: u64,
        tracer: Option<Tracer>,
    ) -> AckVerdict {
        match self.sm {
            ReqSm::Wait { .. } if rd_ptr == self.rcv_ptr => {
                let tail = Some(AckSetTail { copy: *flit, at });
                self.transition(ReqSm::Normal { tail }, "§4.7.4", tracer);
                AckVerdict::Resumed
            }
            ReqSm::Normal { .. } if rd_ptr != self.rcv_ptr => AckVerdict::Realign,
            _ => AckVerdict::Ignored,
        }
    }

    /// In NORMAL right after WAIT: `true` if `flit` (at stream position
    /// `at`) is one more copy of the Retry_Ack_Set that ended WAIT, intact
    /// or damaged in at most `max_damage` bits ([`ACK_COPY_MAX_DAMAGE`] in
    /// CRC mode, 0 in non-CRC mode), and so consumed. The first flit that
    /// is not ends the tail.
    #[inline]
    pub(super) fn consume_ack_tail(
        &mut self,
        flit: &[u8; FLIT_BYTES],
        at: u64,
        max_damage: u32,
        tracer: Option<Tracer>,
    ) -> bool {
        let ReqSm::Normal { tail: Some(t) } = self.sm else {
            return false;
        };
        // The set has RETRY_SET_BLOCKS copies: at most that many minus one
        // follow the first good one.
        let within = at.wrapping_sub(t.at) < RETRY_SET_BLOCKS as u64;
        let damage: u32 = flit
            .iter()
            .zip(t.copy.iter())
            .map(|(a, b)| (a ^ b).count_ones())
            .sum();
        if within && damage <= max_damage {
            return true;
        }
        self.transition(ReqSm::Normal { tail: None }, "§4.7.3", tracer);
        false
    }

    /// A retried block of `flits` was accepted: RcvPtr advances modulo
    /// `modulus` (the peer's RETRY_BUF_DEPTH) and the retry counters clear
    /// (progress was made).
    #[inline]
    pub(super) fn accept(&mut self, flits: usize, modulus: u32) {
        let m = modulus.max(1);
        // RcvPtr < 2^16 and a block has at most 32 flits: no overflow.
        let next = u32::from(self.rcv_ptr).saturating_add(flits as u32);
        self.rcv_ptr = (next % m) as u16;
        self.num_retry = 0;
        self.num_phy_reinit = 0;
    }

    /// PHY retrained: RETRAIN → REQ. Returns the entry, or `None` if not
    /// in RETRAIN.
    pub(super) fn retrained(&mut self, tracer: Option<Tracer>) -> Option<Entered> {
        (self.sm == ReqSm::Retrain).then(|| self.enter_req(tracer))
    }

    /// Link down (ERROR stays latched) or reset (`keep_error` false):
    /// NORMAL with RcvPtr and the counters at 0.
    pub(super) fn clear(&mut self, keep_error: bool, tracer: Option<Tracer>) {
        let to = if keep_error && self.sm == ReqSm::Error {
            ReqSm::Error
        } else {
            ReqSm::Normal { tail: None }
        };
        self.rcv_ptr = 0;
        self.num_retry = 0;
        self.num_phy_reinit = 0;
        let section = if keep_error { "§4.8.4" } else { "§4.7.4" };
        self.transition(to, section, tracer);
    }
}
