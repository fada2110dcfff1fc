// SPDX-License-Identifier: GPL-2.0
//! The engine's timers, in one table.
//!
//! Each deadline lives with the state it belongs to (the WAIT deadline in
//! RETRY_REQ_SM's `Wait`, the partial-block deadline with the partial
//! block, ...); [`super::Link::timers`] collects them into a
//! [`TimerTable`], the one place that lists every timer. `poll_timeout`
//! is its [`TimerTable::next_deadline`] and `handle_timeout` acts on its
//! expired entries in the order of [`Timer::ALL`].

/// The engine's timers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Timer {
    /// RETRY_REQ_SM WAIT (§4.7.4): no Retry_Ack_Set within
    /// `wait_timeout_ns` → REQ again (`Event::RetryAckTimeout`).
    Wait,
    /// A partial block older than `wait_timeout_ns` is a CRC failure: a
    /// header corrupted into announcing a longer block than the peer sent.
    PartialBlock,
    /// Lock-out poke: blocked at the lock-out threshold with no ACK for
    /// half the WAIT timeout → one NOB from the reserve.
    LockoutPoke,
    /// Credit-return timeout (§4.6, DL protocol error): a packet waited
    /// `credit_timeout_ns` for credit (`Event::CreditReturnTimeout`).
    CreditStall,
    /// Credit-return delay: credits this port owes the peer have waited
    /// `credit_return_delay_ns`; a Crd_Ack returns them at the next
    /// `poll_transmit`. The bound in time that complements the bound in
    /// count (`credit_return_threshold`).
    CreditReturn,
    /// Init timeout: in DLL_Param_Init or DLL_Credit_Init with
    /// RETRY_REQ_SM in NORMAL, nothing came from the peer for
    /// `wait_timeout_ns` since link up, the end of the retry alignment or
    /// the last accepted retried block → REQ (a Retry_Req_Set from
    /// RcvPtr, counted), so a peer's Init Block or Crd_Ack(T=1) lost
    /// without a PHY report is resent, and a peer that never answers
    /// leads to RETRAIN and ERROR instead of a silent stall.
    Init,
}

impl Timer {
    /// Number of timers.
    pub const COUNT: usize = 6;
    /// Every timer, in the order `handle_timeout` serves them.
    pub const ALL: [Self; Self::COUNT] = [
        Self::PartialBlock,
        Self::Wait,
        Self::Init,
        Self::CreditStall,
        Self::CreditReturn,
        Self::LockoutPoke,
    ];

    #[inline]
    const fn index(self) -> usize {
        match self {
            Self::Wait => 0,
            Self::PartialBlock => 1,
            Self::LockoutPoke => 2,
            Self::CreditStall => 3,
            Self::CreditReturn => 4,
            Self::Init => 5,
        }
    }
}

/// The deadline (ns) of every armed timer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TimerTable {
    deadlines: [Option<u64>; Timer::COUNT],
}

impl TimerTable {
    /// Arms (`Some`) or disarms (`None`) `timer` in the table.
    #[inline]
    pub(super) fn set(&mut self, timer: Timer, deadline: Option<u64>) {
        if let Some(d) = self.deadlines.get_mut(timer.index()) {
            *d = deadline;
        }
    }

    /// The deadline of `timer`, if armed.
    #[inline]
    pub fn get(&self, timer: Timer) -> Option<u64> {
        self.deadlines.get(timer.index()).copied().flatten()
    }

    /// `true` if `timer` is armed and due at `now`.
    #[inline]
    pub fn expired(&self, timer: Timer, now: u64) -> bool {
        self.get(timer).is_some_and(|d| now >= d)
    }

    /// The earliest deadline of all.
    #[inline]
    pub fn next_deadline(&self) -> Option<u64> {
        self.deadlines.iter().flatten().copied().min()
    }
}
