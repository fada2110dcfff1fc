// SPDX-License-Identifier: GPL-2.0
//! CNP-driven rate control (DCQCN style), the congestion control of CTP
//! (UB spec §6.6: per {destination Entity, VL}, feedback by CNP) and an
//! option for RTP.
//!
//! The spec names the mechanism but not its constants; ours are the
//! published DCQCN defaults, in integer arithmetic:
//!
//! - Notification point (receiver, [`CnpGenerator`]): a packet arriving
//!   with a congestion mark (FECN light/severe) causes a CNP, at most one
//!   per `cnp_interval_ns` per context.
//! - Reaction point (sender, [`RateController`]): on a CNP, target rate
//!   `Rt := Rc`, current rate `Rc := Rc × (1 − α/2)`, `α := (1 − g) α + g`;
//!   every `alpha_period_ns` without a CNP, `α := (1 − g) α`; every
//!   `increase_period_ns` without a CNP, a rate-increase step: the first
//!   `fast_recovery_steps` (F) steps move `Rc` half-way to `Rt` (fast
//!   recovery), the next F also raise `Rt` by `additive_step` (additive
//!   increase), later ones by a growing multiple of `hyper_step` (hyper
//!   increase). g = 1/16, α starts at 1.
//! - Pacing: [`RateController::next_send_time`] and
//!   [`RateController::on_send`] space packets at `Rc`.
//!
//! The caller keeps one controller per context (CTP: destination Entity and
//! VL; RTP: channel) and drives it with the current time.

/// Fixed-point one for α.
const ALPHA_ONE: u64 = 1024;

/// Constants of the rate controller.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DcqcnConfig {
    /// Line rate and upper bound, bytes per second.
    pub max_rate: u64,
    /// Lower bound, bytes per second.
    pub min_rate: u64,
    /// Additive increase of the target rate per step, bytes per second.
    pub additive_step: u64,
    /// Time between rate-increase steps, ns.
    pub increase_period_ns: u64,
    /// Time between α decays, ns.
    pub alpha_period_ns: u64,
    /// Fast-recovery steps before additive increase (F); after 2F steps
    /// the increase turns hyper: step k adds `hyper_step × (k − 2F + 1)`.
    pub fast_recovery_steps: u32,
    /// Hyper-increase unit, bytes per second.
    pub hyper_step: u64,
}

impl DcqcnConfig {
    /// DCQCN's published defaults for a link of `max_rate` bytes/s:
    /// 55 µs α timer and rate timer, 5 fast-recovery steps, additive step
    /// of 1/2000 of the line rate (50 Mb/s at 100 Gb/s; the DCQCN paper
    /// uses 40 Mb/s), minimum rate 1/1000 of the line rate.
    pub const fn defaults(max_rate: u64) -> Self {
        Self {
            max_rate,
            min_rate: max_rate / 1000,
            additive_step: max_rate / 2000,
            increase_period_ns: 55_000,
            alpha_period_ns: 55_000,
            fast_recovery_steps: 5,
            hyper_step: max_rate / 200,
        }
    }
}

/// Sender-side (reaction point) rate state.
#[derive(Clone, Copy, Debug)]
pub struct RateController {
    cfg: DcqcnConfig,
    rc: u64,
    rt: u64,
    alpha: u64,
    steps: u32,
    last_alpha: u64,
    last_increase: u64,
    next_send: u64,
    cnps: u64,
}

impl RateController {
    /// A controller starting at line rate at time `now`.
    pub const fn new(cfg: DcqcnConfig, now: u64) -> Self {
        Self {
            cfg,
            rc: cfg.max_rate,
            rt: cfg.max_rate,
            alpha: ALPHA_ONE,
            steps: 0,
            last_alpha: now,
            last_increase: now,
            next_send: now,
            cnps: 0,
        }
    }

    /// Current rate, bytes per second.
    pub const fn rate(&self) -> u64 {
        self.rc
    }

    /// Target rate, bytes per second.
    pub const fn target(&self) -> u64 {
        self.rt
    }

    /// CNPs received.
    pub const fn cnps(&self) -> u64 {
        self.cnps
    }

    fn clamp(&self, r: u64) -> u64 {
        r.clamp(self.cfg.min_rate.max(1), self.cfg.max_rate.max(1))
    }

    /// A CNP arrived at `now`.
    pub fn on_cnp(&mut self, now: u64) {
        self.advance(now);
        self.cnps = self.cnps.saturating_add(1);
        self.rt = self.rc;
        let cut = self.rc.saturating_mul(self.alpha) / (2 * ALPHA_ONE);
        self.rc = self.clamp(self.rc.saturating_sub(cut));
        // alpha <- (1 - g) alpha + g, g = 1/16
        self.alpha = (self.alpha - self.alpha / 16).saturating_add(ALPHA_ONE / 16);
        self.steps = 0;
        self.last_alpha = now;
        self.last_increase = now;
    }

    /// Applies the timers up to `now` (called by every other method too).
    /// Bounded work whatever the time elapsed.
    pub fn advance(&mut self, now: u64) {
        let ap = self.cfg.alpha_period_ns.max(1);
        let n = now.saturating_sub(self.last_alpha) / ap;
        self.last_alpha = self.last_alpha.saturating_add(n.saturating_mul(ap));
        // After 200 decays α is 0 in this fixed point anyway.
        for _ in 0..n.min(200) {
            self.alpha -= self.alpha.div_ceil(16);
        }
        let ip = self.cfg.increase_period_ns.max(1);
        let n = now.saturating_sub(self.last_increase) / ip;
        self.last_increase = self.last_increase.saturating_add(n.saturating_mul(ip));
        for _ in 0..n.min(64) {
            self.increase_step();
        }
        if n > 64 {
            // By now the increase is hyper and Rc has converged to Rt: at
            // least one more hyper step per period.
            let more = self.cfg.hyper_step.saturating_mul(n - 64);
            self.rt = self.clamp(self.rt.saturating_add(more));
            self.rc = self.rt;
        }
    }

    fn increase_step(&mut self) {
        let f = self.cfg.fast_recovery_steps;
        let hyper_from = f.saturating_mul(2);
        if self.steps >= hyper_from {
            let k = u64::from(self.steps - hyper_from).saturating_add(1);
            let inc = self.cfg.hyper_step.saturating_mul(k);
            self.rt = self.clamp(self.rt.saturating_add(inc));
        } else if self.steps >= f {
            self.rt = self.clamp(self.rt.saturating_add(self.cfg.additive_step));
        }
        self.steps = self.steps.saturating_add(1);
        self.rc = self.clamp(self.rc / 2 + self.rt / 2);
    }

    /// Earliest time a packet may leave.
    pub fn next_send_time(&mut self, now: u64) -> u64 {
        self.advance(now);
        self.next_send.max(now)
    }

    /// Accounts a packet of `bytes` sent at `now`.
    pub fn on_send(&mut self, now: u64, bytes: u32) {
        self.advance(now);
        let gap = u64::from(bytes).saturating_mul(1_000_000_000) / self.rc.max(1);
        self.next_send = self.next_send.max(now).saturating_add(gap);
    }
}

/// Receiver-side (notification point) CNP pacing for one context.
#[derive(Clone, Copy, Debug)]
pub struct CnpGenerator {
    interval_ns: u64,
    last: Option<u64>,
}

impl CnpGenerator {
    /// At most one CNP per `interval_ns` (DCQCN uses 50 µs).
    pub const fn new(interval_ns: u64) -> Self {
        Self {
            interval_ns,
            last: None,
        }
    }

    /// A packet arrived at `now`, `marked` or not: whether to send a CNP.
    pub fn on_packet(&mut self, now: u64, marked: bool) -> bool {
        if !marked {
            return false;
        }
        if self
            .last
            .is_some_and(|t| now.saturating_sub(t) < self.interval_ns)
        {
            return false;
        }
        self.last = Some(now);
        true
    }
}
