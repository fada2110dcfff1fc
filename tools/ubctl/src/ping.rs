// SPDX-License-Identifier: GPL-2.0
//! Echo bookkeeping: which requests are outstanding, and the ping-like
//! summary (transmitted, received, loss, rtt min/avg/max/mdev).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use serde::Serialize;

/// Requests in flight and the replies seen so far.
#[derive(Debug)]
pub struct Pinger {
    /// The `id` attribute of our requests.
    pub id: u32,
    outstanding: HashMap<u32, Instant>,
    stats: Stats,
}

/// What a reply was.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reply {
    /// First answer to an outstanding request; its round-trip time.
    New(Duration),
    /// Not ours, already answered, or too late: ignored.
    Ignored,
}

impl Pinger {
    /// A pinger sending with `id`.
    pub fn new(id: u32) -> Self {
        Pinger {
            id,
            outstanding: HashMap::new(),
            stats: Stats::default(),
        }
    }

    /// Request `seq` went out at `now`.
    pub fn sent(&mut self, seq: u32, now: Instant) {
        self.stats.transmitted = self.stats.transmitted.saturating_add(1);
        self.outstanding.insert(seq, now);
    }

    /// Request `seq` was refused by the kernel (counts as an error).
    pub fn failed(&mut self, seq: u32) {
        if self.outstanding.remove(&seq).is_some() {
            self.stats.errors = self.stats.errors.saturating_add(1);
        }
    }

    /// A reply `(id, seq)` arrived at `now`; `kernel_rtt` is the kernel's
    /// measurement if it sent one (preferred: no scheduling delay in it).
    pub fn reply(
        &mut self,
        id: u32,
        seq: u32,
        now: Instant,
        kernel_rtt: Option<Duration>,
    ) -> Reply {
        if id != self.id {
            return Reply::Ignored;
        }
        let Some(sent) = self.outstanding.remove(&seq) else {
            return Reply::Ignored;
        };
        let rtt = kernel_rtt.unwrap_or_else(|| now.saturating_duration_since(sent));
        self.stats.record(rtt);
        Reply::New(rtt)
    }

    /// Forget requests sent before `now - timeout`: lost.
    pub fn expire(&mut self, now: Instant, timeout: Duration) {
        self.outstanding
            .retain(|_, sent| now.saturating_duration_since(*sent) < timeout);
    }

    /// Whether any request still waits for its reply.
    pub fn waiting(&self) -> bool {
        !self.outstanding.is_empty()
    }

    /// The counts so far.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }
}

/// Counts and round-trip sums.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Stats {
    /// Requests sent.
    pub transmitted: u64,
    /// Replies matched.
    pub received: u64,
    /// Requests the kernel refused.
    pub errors: u64,
    min_ns: u64,
    max_ns: u64,
    sum_ns: u128,
    sum_sq_ns: u128,
}

/// The summary line's figures.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct Summary {
    /// Requests sent.
    pub transmitted: u64,
    /// Replies matched.
    pub received: u64,
    /// Requests the kernel refused.
    pub errors: u64,
    /// Lost, in percent of transmitted (0 if nothing was sent).
    pub loss_percent: f64,
    /// Smallest rtt, ms.
    pub rtt_min_ms: Option<f64>,
    /// Mean rtt, ms.
    pub rtt_avg_ms: Option<f64>,
    /// Largest rtt, ms.
    pub rtt_max_ms: Option<f64>,
    /// Mean deviation as ping computes it: sqrt(E[x^2] - E[x]^2), ms.
    pub rtt_mdev_ms: Option<f64>,
}

impl Stats {
    /// Add one round-trip time.
    pub fn record(&mut self, rtt: Duration) {
        let ns = u64::try_from(rtt.as_nanos()).unwrap_or(u64::MAX);
        if self.received == 0 || ns < self.min_ns {
            self.min_ns = ns;
        }
        self.max_ns = self.max_ns.max(ns);
        self.received = self.received.saturating_add(1);
        self.sum_ns = self.sum_ns.saturating_add(u128::from(ns));
        self.sum_sq_ns = self
            .sum_sq_ns
            .saturating_add(u128::from(ns) * u128::from(ns));
    }

    /// The figures of the summary.
    pub fn summary(&self) -> Summary {
        let ms = |ns: f64| ns / 1e6;
        let loss = if self.transmitted == 0 {
            0.0
        } else {
            let lost = self.transmitted.saturating_sub(self.received);
            lost as f64 * 100.0 / self.transmitted as f64
        };
        let (min, avg, max, mdev) = if self.received == 0 {
            (None, None, None, None)
        } else {
            let n = self.received as f64;
            let mean = self.sum_ns as f64 / n;
            let var = (self.sum_sq_ns as f64 / n - mean * mean).max(0.0);
            (
                Some(ms(self.min_ns as f64)),
                Some(ms(mean)),
                Some(ms(self.max_ns as f64)),
                Some(ms(var.sqrt())),
            )
        };
        Summary {
            transmitted: self.transmitted,
            received: self.received,
            errors: self.errors,
            loss_percent: loss,
            rtt_min_ms: min,
            rtt_avg_ms: avg,
            rtt_max_ms: max,
            rtt_mdev_ms: mdev,
        }
    }
}

impl Summary {
    /// ping's two summary lines.
    pub fn text(&self, dst: &str, elapsed: Duration) -> String {
        let mut s = format!("--- {dst} ubctl ping statistics ---\n");
        s.push_str(&format!(
            "{} packets transmitted, {} received",
            self.transmitted, self.received
        ));
        if self.errors > 0 {
            s.push_str(&format!(", +{} errors", self.errors));
        }
        s.push_str(&format!(
            ", {}% packet loss, time {}ms\n",
            fmt_loss(self.loss_percent),
            elapsed.as_millis()
        ));
        if let (Some(a), Some(b), Some(c), Some(d)) = (
            self.rtt_min_ms,
            self.rtt_avg_ms,
            self.rtt_max_ms,
            self.rtt_mdev_ms,
        ) {
            s.push_str(&format!(
                "rtt min/avg/max/mdev = {a:.3}/{b:.3}/{c:.3}/{d:.3} ms\n"
            ));
        }
        s
    }
}

/// ping prints whole percents unless the loss is fractional.
fn fmt_loss(p: f64) -> String {
    if p.fract() == 0.0 {
        format!("{p:.0}")
    } else {
        format!("{p:.4}").trim_end_matches('0').to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_arithmetic_matches_ping() {
        let mut s = Stats {
            transmitted: 4,
            ..Stats::default()
        };
        for ms in [1u64, 2, 3] {
            s.record(Duration::from_millis(ms));
        }
        let sum = s.summary();
        assert_eq!(sum.received, 3);
        assert_eq!(sum.loss_percent, 25.0);
        assert_eq!(sum.rtt_min_ms, Some(1.0));
        assert_eq!(sum.rtt_max_ms, Some(3.0));
        assert_eq!(sum.rtt_avg_ms, Some(2.0));
        // sqrt((1+4+9)/3 - 4) = sqrt(2/3)
        let mdev = sum.rtt_mdev_ms.unwrap_or(0.0);
        assert!((mdev - (2.0f64 / 3.0).sqrt()).abs() < 1e-9, "{mdev}");
        let t = sum.text("10.0.0.2", Duration::from_millis(3004));
        assert!(
            t.contains("4 packets transmitted, 3 received, 25% packet loss, time 3004ms"),
            "{t}"
        );
        assert!(
            t.contains("rtt min/avg/max/mdev = 1.000/2.000/3.000/0.816 ms"),
            "{t}"
        );
    }

    #[test]
    fn nothing_back_is_full_loss_without_rtt() {
        let s = Stats {
            transmitted: 3,
            ..Stats::default()
        };
        let sum = s.summary();
        assert_eq!(sum.loss_percent, 100.0);
        assert_eq!(sum.rtt_avg_ms, None);
        assert!(!sum.text("x", Duration::ZERO).contains("rtt"));
        assert_eq!(Stats::default().summary().loss_percent, 0.0);
        let s = Stats {
            transmitted: 3,
            received: 2,
            ..Stats::default()
        };
        assert!(s
            .summary()
            .text("x", Duration::ZERO)
            .contains("33.3333% packet loss"));
    }

    #[test]
    fn replies_are_matched_by_id_and_seq_once() {
        let t0 = Instant::now();
        let mut p = Pinger::new(7);
        p.sent(1, t0);
        p.sent(2, t0);
        let later = t0 + Duration::from_millis(5);
        assert_eq!(
            p.reply(8, 1, later, None),
            Reply::Ignored,
            "another pinger's id"
        );
        assert_eq!(
            p.reply(7, 1, later, None),
            Reply::New(Duration::from_millis(5))
        );
        assert_eq!(p.reply(7, 1, later, None), Reply::Ignored, "duplicate");
        assert_eq!(p.reply(7, 9, later, None), Reply::Ignored, "never sent");
        p.expire(t0 + Duration::from_secs(2), Duration::from_secs(1));
        assert!(!p.waiting());
        assert_eq!(p.reply(7, 2, later, None), Reply::Ignored, "too late");
        assert_eq!(p.stats().received, 1);
        assert_eq!(p.stats().summary().loss_percent, 50.0);
    }
}
