// SPDX-License-Identifier: GPL-2.0
//! Transition trace: every state change of every machine of the engine,
//! `from → to`, with the section of the specification that defines it.
//!
//! The engine stays allocation-free and `Clone`, so the hook is a plain
//! function ([`Tracer`]); the kernel driver passes one that calls
//! `pr_debug!`, tests pass one that records into a static.

/// The state machines of the link engine, one module each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Machine {
    /// DLL state (§4.2), `engine::dll`.
    Dll,
    /// Init Block and initial-credit exchange (§4.3.3.9, §4.4, §4.6),
    /// `engine::init`.
    Init,
    /// RETRY_REQ_SM, receiver side of retransmission (§4.7.4),
    /// `engine::retry_req`.
    RetryReq,
    /// RETRY_ACK_SM, sender side of retransmission (§4.7.4),
    /// `engine::retry_ack`.
    RetryAck,
    /// Block_Mode_Chg handshake (§4.3.3.8), `engine::mode_change`.
    ModeChange,
}

impl Machine {
    /// The machine's name as the specification writes it.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Dll => "DLL",
            Self::Init => "INIT",
            Self::RetryReq => "RETRY_REQ_SM",
            Self::RetryAck => "RETRY_ACK_SM",
            Self::ModeChange => "BLOCK_MODE_CHG",
        }
    }
}

/// One transition of one machine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transition {
    /// Which machine moved.
    pub machine: Machine,
    /// State left.
    pub from: &'static str,
    /// State entered.
    pub to: &'static str,
    /// The section of the UB Base Specification 2.0 defining the move.
    pub section: &'static str,
}

/// Receives every [`Transition`] (see [`super::Link::set_tracer`]).
pub type Tracer = fn(&Transition);

/// Calls the tracer, if any, when `from` and `to` differ.
pub(super) fn emit(
    tracer: Option<Tracer>,
    machine: Machine,
    from: &'static str,
    to: &'static str,
    section: &'static str,
) {
    if let Some(f) = tracer {
        if from != to {
            f(&Transition {
                machine,
                from,
                to,
                section,
            });
        }
    }
}
