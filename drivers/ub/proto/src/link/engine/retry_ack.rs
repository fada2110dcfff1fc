// SPDX-License-Identifier: GPL-2.0
//! RETRY_ACK_SM: the sender side of link-level retransmission (UB spec
//! §4.7.4, Table "RETRY_ACK_SM").
//!
//! ```text
//! NORMAL --Retry_Req_Set--> ACK(set to send) --set sent--> ACK(resending)
//!                              ^   a new Retry_Req_Set restarts ACK  |
//! NORMAL <--------- RdPtr reached WrPtr -----------------------------+
//! ```
//!
//! The resending itself is the retry buffer's RdPtr; this machine says
//! whether a Retry_Ack_Set is owed and when ACK ends. It also recognises
//! Retry_Req_Sets: each of the 32 copies of one set must restart ACK only
//! once (`link.rst`, "Recognising retry sets").

use super::trace::{emit, Machine, Tracer};
use super::RETRY_SET_BLOCKS;

/// RETRY_ACK_SM state (sender side).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RetryAckState {
    /// Sending normally.
    Normal,
    /// Answering a Retry_Req_Set: Retry_Ack_Set, then retransmission.
    Ack,
}

impl RetryAckState {
    /// The specification's name of the state.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Normal => "NORMAL",
            Self::Ack => "ACK",
        }
    }
}

/// RETRY_ACK_SM's states with their data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum AckSm {
    /// NORMAL.
    Normal,
    /// ACK. `set_sent`: the Retry_Ack_Set (echoing `num_retry`) is out and
    /// the retransmission runs.
    Ack { set_sent: bool, num_retry: u8 },
}

impl AckSm {
    #[inline]
    const fn public(&self) -> RetryAckState {
        match self {
            Self::Normal => RetryAckState::Normal,
            Self::Ack { .. } => RetryAckState::Ack,
        }
    }

    const fn name(&self) -> &'static str {
        match self {
            Self::Normal => "NORMAL",
            Self::Ack {
                set_sent: false, ..
            } => "ACK",
            Self::Ack { set_sent: true, .. } => "ACK_RESENDING",
        }
    }
}

/// The Retry_Req_Set acted on last.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct SetSeen {
    /// (RcvPtr, NUM_RETRY, NUM_PHY_REINIT).
    key: (u16, u8, u8),
    /// Stream position of the copy acted on (see `Link::rx_position`).
    at: u64,
}

/// RETRY_ACK_SM and the Retry_Req_Set recogniser; [`RetryAck::transition`]
/// is the only writer of the state.
#[derive(Clone, Copy, Debug)]
pub(super) struct RetryAck {
    sm: AckSm,
    last_set: Option<SetSeen>,
    idle_since_set: bool,
}

impl RetryAck {
    pub(super) const fn new() -> Self {
        Self {
            sm: AckSm::Normal,
            last_set: None,
            idle_since_set: true,
        }
    }

    #[inline]
    pub(super) const fn state(&self) -> RetryAckState {
        self.sm.public()
    }

    fn transition(&mut self, to: AckSm, tracer: Option<Tracer>) {
        let from = self.sm.name();
        self.sm = to;
        emit(tracer, Machine::RetryAck, from, to.name(), "§4.7.4");
    }

    /// A good Retry_Idle: whatever Retry_Req follows starts a new set.
    pub(super) fn retry_idle(&mut self) {
        self.idle_since_set = true;
    }

    /// A good Retry_Req with `key` at receive-flit position `at`: `true`
    /// if it starts a new set (to be answered), `false` for another copy
    /// of the set already acted on. A copy is a block with the same key
    /// within the set's 32 blocks of the one acted on, with no Retry_Idle
    /// since: so a new set whose Retry_Idle was lost is still recognised
    /// even when its key repeats the last one (RcvPtr moved by a multiple
    /// of the depth).
    pub(super) fn new_set(&mut self, key: (u16, u8, u8), at: u64) -> bool {
        let copy = !self.idle_since_set
            && self
                .last_set
                .is_some_and(|s| s.key == key && at.wrapping_sub(s.at) < RETRY_SET_BLOCKS as u64);
        if copy {
            return false;
        }
        self.idle_since_set = false;
        self.last_set = Some(SetSeen { key, at });
        true
    }

    /// A new Retry_Req_Set was accepted: (re)enter ACK, a Retry_Ack_Set
    /// echoing `num_retry` is owed.
    pub(super) fn start(&mut self, num_retry: u8, tracer: Option<Tracer>) {
        let to = AckSm::Ack {
            set_sent: false,
            num_retry,
        };
        self.transition(to, tracer);
    }

    /// The NUM_RETRY of the Retry_Ack_Set owed, if one is.
    #[inline]
    pub(super) const fn set_owed(&self) -> Option<u8> {
        match self.sm {
            AckSm::Ack {
                set_sent: false,
                num_retry,
            } => Some(num_retry),
            _ => None,
        }
    }

    /// The Retry_Ack_Set went out; `resending` is false when there is
    /// nothing to retransmit (ACK then ends at once).
    pub(super) fn set_sent(&mut self, resending: bool, tracer: Option<Tracer>) {
        if let AckSm::Ack {
            set_sent: false,
            num_retry,
        } = self.sm
        {
            let to = if resending {
                AckSm::Ack {
                    set_sent: true,
                    num_retry,
                }
            } else {
                AckSm::Normal
            };
            self.transition(to, tracer);
        }
    }

    /// RdPtr reached WrPtr: back to NORMAL.
    #[inline]
    pub(super) fn resent(&mut self, tracer: Option<Tracer>) {
        if let AckSm::Ack { set_sent: true, .. } = self.sm {
            self.transition(AckSm::Normal, tracer);
        }
    }

    /// Link down or reset.
    pub(super) fn clear(&mut self, tracer: Option<Tracer>) {
        self.transition(AckSm::Normal, tracer);
        self.last_set = None;
        self.idle_since_set = true;
    }
}
