// SPDX-License-Identifier: GPL-2.0
//! Init Block and initial-credit exchange (UB spec §4.2, §4.3.3.9, §4.4,
//! §4.6; completion criteria are our choice, `link.rst` §11 item 1).
//!
//! `Idle → Params` on link up. In `Params` the Init Block goes out once
//! the retry alignment is done (RETRY_REQ_SM back in NORMAL); the peer's
//! Init Block arrives as the negotiation result. Both done: `Credits`,
//! which announces the initial credits in Crd_Ack(T=1) blocks, the last
//! with SD=1. Own SD sent and peer's SD received: `Done`. The DLL state is
//! the projection `InitStep::dll_state` of this machine.

use super::super::frame::MAX_VLS;
use super::dll::DllState;
use super::trace::{emit, Machine, Tracer};

/// A step of the exchange; each carries what it still needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum InitStep {
    /// Link down: nothing exchanged.
    Idle,
    /// DLL_Param_Init. `sent`: this port's Init Block is out.
    Params { sent: bool },
    /// DLL_Credit_Init. `left`: initial cells per VL still to announce;
    /// `sd_sent`: this port's last Crd_Ack(T=1), SD=1, is out;
    /// `peer_sd`: the peer's arrived.
    Credits {
        left: [u32; MAX_VLS],
        sd_sent: bool,
        peer_sd: bool,
    },
    /// DLL_Normal: both exchanges complete.
    Done,
}

impl InitStep {
    const fn name(&self) -> &'static str {
        match self {
            Self::Idle => "IDLE",
            Self::Params { sent: false } => "PARAMS",
            Self::Params { sent: true } => "PARAMS_SENT",
            Self::Credits { sd_sent: false, .. } => "CREDITS",
            Self::Credits { sd_sent: true, .. } => "CREDITS_SD_SENT",
            Self::Done => "DONE",
        }
    }

    /// The DLL state this step belongs to.
    #[inline]
    pub(super) const fn dll_state(&self) -> DllState {
        match self {
            Self::Idle => DllState::Disabled,
            Self::Params { .. } => DllState::ParamInit,
            Self::Credits { .. } => DllState::CreditInit,
            Self::Done => DllState::Normal,
        }
    }
}

/// The exchange; [`InitExchange::transition`] is its only writer.
#[derive(Clone, Copy, Debug)]
pub(super) struct InitExchange {
    step: InitStep,
}

impl InitExchange {
    pub(super) const fn new() -> Self {
        Self {
            step: InitStep::Idle,
        }
    }

    #[inline]
    pub(super) const fn step(&self) -> &InitStep {
        &self.step
    }

    fn transition(&mut self, to: InitStep, section: &'static str, tracer: Option<Tracer>) {
        let from = self.step.name();
        self.step = to;
        emit(tracer, Machine::Init, from, to.name(), section);
    }

    /// Link up: start with the Init Block to send.
    pub(super) fn start(&mut self, tracer: Option<Tracer>) {
        if self.step == InitStep::Idle {
            self.transition(InitStep::Params { sent: false }, "§4.2", tracer);
        }
    }

    /// Link down or reset.
    pub(super) fn stop(&mut self, tracer: Option<Tracer>) {
        self.transition(InitStep::Idle, "§4.8.4", tracer);
    }

    /// This port's Init Block went out. `granted` is `Some` once the
    /// peer's Init Block is in (its initial credits are then known).
    pub(super) fn init_sent(&mut self, granted: Option<[u32; MAX_VLS]>, tracer: Option<Tracer>) {
        if let InitStep::Params { sent: false } = self.step {
            self.transition(InitStep::Params { sent: true }, "§4.3.3.9", tracer);
            if let Some(g) = granted {
                self.peer_init(g, tracer);
            }
        }
    }

    /// The peer's Init Block arrived and was negotiated; `granted` are the
    /// initial credits this port announces.
    pub(super) fn peer_init(&mut self, granted: [u32; MAX_VLS], tracer: Option<Tracer>) {
        if let InitStep::Params { sent: true } = self.step {
            let to = InitStep::Credits {
                left: granted,
                sd_sent: false,
                peer_sd: false,
            };
            self.transition(to, "§4.4", tracer);
        }
    }

    /// Takes the next Crd_Ack(T=1)'s counts: per VL, up to 63 grains of
    /// `grain[vl]` cells. Returns the counts and whether this is the last
    /// block (SD=1), or `None` outside Credit_Init.
    pub(super) fn take_initial(
        &mut self,
        grain: &[u16; MAX_VLS],
        tracer: Option<Tracer>,
    ) -> Option<([u8; MAX_VLS], bool)> {
        let InitStep::Credits {
            mut left,
            sd_sent,
            peer_sd,
        } = self.step
        else {
            return None;
        };
        if sd_sent {
            return None;
        }
        let mut counts = [0u8; MAX_VLS];
        for ((slot, l), &g) in counts.iter_mut().zip(left.iter_mut()).zip(grain) {
            let k = u32::from(g.max(1));
            let n = (*l / k).min(63);
            *l -= n * k;
            *slot = n as u8;
        }
        let done = left.iter().all(|&l| l == 0);
        let to = InitStep::Credits {
            left,
            sd_sent: done,
            peer_sd,
        };
        self.transition(to, "§4.6", tracer);
        Some((counts, done))
    }

    /// The peer's last Crd_Ack(T=1) (SD=1) arrived.
    pub(super) fn peer_sd(&mut self, tracer: Option<Tracer>) {
        if let InitStep::Credits {
            left,
            sd_sent,
            peer_sd: false,
        } = self.step
        {
            let to = InitStep::Credits {
                left,
                sd_sent,
                peer_sd: true,
            };
            self.transition(to, "§4.6", tracer);
        }
    }

    /// Credit_Init complete (own SD sent, peer's SD in): `Done`. Returns
    /// `true` on that transition.
    pub(super) fn finish(&mut self, tracer: Option<Tracer>) -> bool {
        if let InitStep::Credits {
            sd_sent: true,
            peer_sd: true,
            ..
        } = self.step
        {
            self.transition(InitStep::Done, "§4.2", tracer);
            return true;
        }
        false
    }

    /// `true` once this port has sent its SD (it may then return credits
    /// and ACKs in ordinary Crd_Acks).
    #[inline]
    pub(super) const fn credit_init_done(&self) -> bool {
        matches!(
            self.step,
            InitStep::Done | InitStep::Credits { sd_sent: true, .. }
        )
    }
}
