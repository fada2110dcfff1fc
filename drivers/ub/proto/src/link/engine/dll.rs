// SPDX-License-Identifier: GPL-2.0
//! The DLL state machine (UB spec §4.2, link down §4.8.4).
//!
//! `Disabled → Param_Init` on PHY LinkUp; `Param_Init → Credit_Init` and
//! `Credit_Init → Normal` when the [`super::init`] exchange completes its
//! steps; any state `→ Disabled` on LinkUp = 0 or a management reset. The
//! DLL state is what the network layer sees (DLL_Status_Up only in
//! Normal); the progress *inside* Param_Init and Credit_Init is the Init
//! exchange's, whose steps carry that data.

use super::trace::{emit, Machine, Tracer};

/// DLL state (§4.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DllState {
    /// PHY down or after reset.
    Disabled,
    /// Retry alignment and Init Block exchange.
    ParamInit,
    /// Initial credit exchange.
    CreditInit,
    /// DLLDPs flow (DLL_Status_Up).
    Normal,
}

impl DllState {
    /// The specification's name of the state.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Disabled => "DLL_Disabled",
            Self::ParamInit => "DLL_Param_Init",
            Self::CreditInit => "DLL_Credit_Init",
            Self::Normal => "DLL_Normal",
        }
    }
}

/// The DLL state machine; [`Dll::transition`] is its only writer.
#[derive(Clone, Copy, Debug)]
pub(super) struct Dll {
    state: DllState,
}

impl Dll {
    pub(super) const fn new() -> Self {
        Self {
            state: DllState::Disabled,
        }
    }

    #[inline]
    pub(super) const fn state(&self) -> DllState {
        self.state
    }

    /// Moves to `to`; returns `true` if the state changed (the engine then
    /// raises `Event::State`).
    pub(super) fn transition(&mut self, to: DllState, tracer: Option<Tracer>) -> bool {
        let from = self.state;
        if from == to {
            return false;
        }
        let section = if to == DllState::Disabled {
            "§4.8.4"
        } else {
            "§4.2"
        };
        self.state = to;
        emit(tracer, Machine::Dll, from.name(), to.name(), section);
        true
    }
}
