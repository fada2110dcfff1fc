// SPDX-License-Identifier: GPL-2.0
//! The Block_Mode_Chg handshake: switching between CRC and non-CRC
//! encapsulation (UB spec §4.3.3.8).
//!
//! ```text
//! IDLE --request or peer REQ--> REQUESTING --REQ sent--> AWAITING_REQ
//!                                   | (peer REQ already in)   | peer REQ
//!                                   +-------> FLUSHING <------+
//! FLUSHING --ACKs flushed in a Crd_Ack--> SENDING_ACK --ACK sent-->
//! AWAITING_ACK --peer ACK--> RETRAINING --mode_change_done--> IDLE
//! ```
//!
//! The peer's ACK can only follow its REQ, so it is recorded from
//! FLUSHING on; with it already in, SENDING_ACK goes straight to
//! RETRAINING. `mode_change_done` is accepted from AWAITING_ACK too: the
//! retrain is link-wide and the peer only asks for it after our ACK
//! (`link.rst`, "Mode switch").

use super::super::frame::Mode;
use super::trace::{emit, Machine, Tracer};

/// A step of the handshake, with the target mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum ModeChange {
    /// No switch in progress.
    Idle,
    /// Back-pressure on; the DLLDP in progress completes, then REQ.
    /// `peer_req`: the peer's REQ already arrived.
    Requesting { to: Mode, peer_req: bool },
    /// REQ sent; waiting for the peer's.
    AwaitingReq { to: Mode },
    /// Both REQs: every owed ACK goes out in a Crd_Ack.
    Flushing { to: Mode, peer_ack: bool },
    /// Flushed: this port's ACK goes out next.
    SendingAck { to: Mode, peer_ack: bool },
    /// ACK sent, nothing more is sent; waiting for the peer's ACK.
    AwaitingAck { to: Mode },
    /// Both ACKs: the PHY retrains; nothing is sent or received.
    Retraining { to: Mode },
}

impl ModeChange {
    const fn name(&self) -> &'static str {
        match self {
            Self::Idle => "IDLE",
            Self::Requesting { .. } => "REQUESTING",
            Self::AwaitingReq { .. } => "AWAITING_REQ",
            Self::Flushing { .. } => "FLUSHING",
            Self::SendingAck { .. } => "SENDING_ACK",
            Self::AwaitingAck { .. } => "AWAITING_ACK",
            Self::Retraining { .. } => "RETRAINING",
        }
    }
}

/// The handshake; [`ModeChangeSm::transition`] is its only writer.
#[derive(Clone, Copy, Debug)]
pub(super) struct ModeChangeSm {
    step: ModeChange,
}

const fn other(mode: Mode) -> Mode {
    match mode {
        Mode::Crc => Mode::NonCrc,
        Mode::NonCrc => Mode::Crc,
    }
}

impl ModeChangeSm {
    pub(super) const fn new() -> Self {
        Self {
            step: ModeChange::Idle,
        }
    }

    #[inline]
    pub(super) const fn step(&self) -> ModeChange {
        self.step
    }

    /// A switch is in progress (the network layer is back-pressured).
    #[inline]
    pub(super) const fn active(&self) -> bool {
        !matches!(self.step, ModeChange::Idle)
    }

    /// The PHY retrain runs: no block is sent or received.
    #[inline]
    pub(super) const fn retraining(&self) -> bool {
        matches!(self.step, ModeChange::Retraining { .. })
    }

    fn transition(&mut self, to: ModeChange, tracer: Option<Tracer>) {
        let from = self.step.name();
        self.step = to;
        emit(tracer, Machine::ModeChange, from, to.name(), "§4.3.3.8");
    }

    /// This port requests a switch away from `current`. `false` if one is
    /// already in progress.
    pub(super) fn request(&mut self, current: Mode, tracer: Option<Tracer>) -> bool {
        if self.active() {
            return false;
        }
        let to = ModeChange::Requesting {
            to: other(current),
            peer_req: false,
        };
        self.transition(to, tracer);
        true
    }

    /// The peer's REQ arrived (it starts the switch if this port had not).
    pub(super) fn peer_req(&mut self, current: Mode, tracer: Option<Tracer>) {
        let to = match self.step {
            ModeChange::Idle => ModeChange::Requesting {
                to: other(current),
                peer_req: true,
            },
            ModeChange::Requesting { to, .. } => ModeChange::Requesting { to, peer_req: true },
            ModeChange::AwaitingReq { to } => ModeChange::Flushing {
                to,
                peer_ack: false,
            },
            s => s,
        };
        self.transition(to, tracer);
    }

    /// The peer's ACK arrived. Returns the target mode if the PHY must now
    /// retrain.
    pub(super) fn peer_ack(&mut self, tracer: Option<Tracer>) -> Option<Mode> {
        let to = match self.step {
            ModeChange::Flushing { to, .. } => ModeChange::Flushing { to, peer_ack: true },
            ModeChange::SendingAck { to, .. } => ModeChange::SendingAck { to, peer_ack: true },
            ModeChange::AwaitingAck { to } => ModeChange::Retraining { to },
            s => s,
        };
        self.transition(to, tracer);
        match to {
            ModeChange::Retraining { to } => Some(to),
            _ => None,
        }
    }

    /// This port's REQ went out.
    pub(super) fn req_sent(&mut self, tracer: Option<Tracer>) {
        if let ModeChange::Requesting { to, peer_req } = self.step {
            let next = if peer_req {
                ModeChange::Flushing {
                    to,
                    peer_ack: false,
                }
            } else {
                ModeChange::AwaitingReq { to }
            };
            self.transition(next, tracer);
        }
    }

    /// The flush Crd_Ack went out.
    pub(super) fn flushed(&mut self, tracer: Option<Tracer>) {
        if let ModeChange::Flushing { to, peer_ack } = self.step {
            self.transition(ModeChange::SendingAck { to, peer_ack }, tracer);
        }
    }

    /// This port's ACK went out. Returns the target mode if the PHY must
    /// now retrain (the peer's ACK was already in).
    pub(super) fn ack_sent(&mut self, tracer: Option<Tracer>) -> Option<Mode> {
        let ModeChange::SendingAck { to, peer_ack } = self.step else {
            return None;
        };
        if peer_ack {
            self.transition(ModeChange::Retraining { to }, tracer);
            Some(to)
        } else {
            self.transition(ModeChange::AwaitingAck { to }, tracer);
            None
        }
    }

    /// The PHY retrain is done: the new mode, if this port had sent its
    /// ACK (otherwise the call is not for this switch and is ignored).
    pub(super) fn done(&mut self, tracer: Option<Tracer>) -> Option<Mode> {
        match self.step {
            ModeChange::AwaitingAck { to } | ModeChange::Retraining { to } => {
                self.transition(ModeChange::Idle, tracer);
                Some(to)
            }
            _ => None,
        }
    }

    /// Link down or reset.
    pub(super) fn clear(&mut self, tracer: Option<Tracer>) {
        self.transition(ModeChange::Idle, tracer);
    }
}
