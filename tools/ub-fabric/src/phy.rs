// SPDX-License-Identifier: GPL-2.0
//! The PHY / wire model: one direction of a link carries flits at a line
//! rate, after a propagation delay, with bit errors (BER), FEC-failure
//! events (runs of flits the receiver's PHY could not decode and reports
//! as lost) and link down/up. Deterministic from its seed.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

use crate::rng::Rng;

/// Bytes in a flit.
pub const FLIT: usize = 20;

/// Parameters of a link (both directions).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct PhyParams {
    /// Line rate in flits per second.
    pub rate_fps: f64,
    /// Propagation delay in nanoseconds.
    pub delay_ns: u64,
    /// Bit error rate: probability that a bit is flipped.
    pub ber: f64,
    /// Probability per flit of an FEC decode failure (the PHY loses a run
    /// of 1 to 4 flits and reports it).
    pub fec_fail: f64,
    /// Time a retrain takes, in nanoseconds.
    pub retrain_ns: u64,
}

impl Default for PhyParams {
    fn default() -> Self {
        Self {
            rate_fps: 625e6,
            delay_ns: 1000,
            ber: 0.0,
            fec_fail: 0.0,
            retrain_ns: 20_000,
        }
    }
}

/// What arrives at the far end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Arrival {
    /// Flits.
    Data(Vec<u8>),
    /// Flits the PHY lost (FEC failure).
    Lost(u32),
}

/// Counters of one direction.
#[derive(Debug, Default, Clone, Copy, Serialize)]
pub struct WireCounters {
    /// Flits sent.
    pub flits: u64,
    /// Bits flipped.
    pub bit_flips: u64,
    /// Flits carrying at least one flipped bit.
    pub corrupted_flits: u64,
    /// FEC failure events.
    pub fec_fails: u64,
    /// Flits lost to FEC failures.
    pub fec_lost_flits: u64,
    /// Flits discarded because the link went down or retrained.
    pub dropped_flits: u64,
}

/// One direction of a link.
#[derive(Debug)]
pub struct Wire {
    /// Parameters (changeable at run time).
    pub params: PhyParams,
    rng: Rng,
    busy_until: u64,
    queue: VecDeque<(u64, Arrival)>,
    next_err_bit: u64,
    next_fec_flit: u64,
    /// Counters.
    pub counters: WireCounters,
    /// Bit flips not yet reported to the receiving PHY's error monitor.
    pub unreported_flips: u64,
}

impl Wire {
    /// A wire with `params`, seeded.
    pub fn new(params: PhyParams, seed: u64, stream: u64) -> Self {
        let mut rng = Rng::new(seed, stream);
        let next_err_bit = rng.gap(params.ber);
        let next_fec_flit = rng.gap(params.fec_fail);
        Self {
            params,
            rng,
            busy_until: 0,
            queue: VecDeque::new(),
            next_err_bit,
            next_fec_flit,
            counters: WireCounters::default(),
            unreported_flips: 0,
        }
    }

    /// Changes the parameters; the error processes restart from the new
    /// rates.
    pub fn set_params(&mut self, params: PhyParams) {
        self.params = params;
        self.next_err_bit = self.rng.gap(params.ber);
        self.next_fec_flit = self.rng.gap(params.fec_fail);
    }

    /// When the transmitter is free again.
    pub fn busy_until(&self) -> u64 {
        self.busy_until
    }

    /// Nanoseconds to serialise `flits`.
    fn ser_ns(&self, flits: usize) -> u64 {
        if self.params.rate_fps <= 0.0 {
            return 0;
        }
        (flits as f64 * 1e9 / self.params.rate_fps).ceil() as u64
    }

    /// Sends whole flits at `now` (a trailing partial flit is dropped).
    /// Returns the time the last flit leaves.
    pub fn send(&mut self, now: u64, data: &[u8]) -> u64 {
        let flits = data.len() / FLIT;
        if flits == 0 {
            return self.busy_until.max(now);
        }
        // Saturating: a delay or a serialisation time near u64::MAX (a
        // topology's or a control command's `delay_ns`, a tiny
        // `rate_fps`) means "never", not an overflow.
        let start = self.busy_until.max(now);
        let end = start.saturating_add(self.ser_ns(flits));
        self.busy_until = end;
        let at = end.saturating_add(self.params.delay_ns);
        self.counters.flits += flits as u64;
        let mut buf = data[..flits * FLIT].to_vec();
        // Bit errors.
        let bits = (buf.len() * 8) as u64;
        let mut pos = 0u64;
        let mut last_flit = usize::MAX;
        while self.params.ber > 0.0 {
            let left = bits - pos;
            if self.next_err_bit >= left {
                self.next_err_bit -= left;
                break;
            }
            pos += self.next_err_bit;
            let byte = (pos / 8) as usize;
            buf[byte] ^= 0x80 >> (pos % 8);
            self.counters.bit_flips += 1;
            self.unreported_flips += 1;
            if byte / FLIT != last_flit {
                last_flit = byte / FLIT;
                self.counters.corrupted_flits += 1;
            }
            pos += 1;
            self.next_err_bit = self.rng.gap(self.params.ber);
        }
        // FEC failures: erase runs of flits.
        let mut f = 0usize;
        let mut seg_start = 0usize;
        while self.params.fec_fail > 0.0 {
            let left = (flits - f) as u64;
            if self.next_fec_flit >= left {
                self.next_fec_flit -= left;
                break;
            }
            f += self.next_fec_flit as usize;
            let run = (1 + self.rng.below(4) as usize).min(flits - f);
            if f > seg_start {
                self.queue
                    .push_back((at, Arrival::Data(buf[seg_start * FLIT..f * FLIT].to_vec())));
            }
            self.queue.push_back((at, Arrival::Lost(run as u32)));
            self.counters.fec_fails += 1;
            self.counters.fec_lost_flits += run as u64;
            f += run;
            seg_start = f;
            self.next_fec_flit = self.rng.gap(self.params.fec_fail);
        }
        if seg_start < flits {
            self.queue
                .push_back((at, Arrival::Data(buf[seg_start * FLIT..].to_vec())));
        }
        end
    }

    /// Everything that arrived by `now`.
    pub fn receive(&mut self, now: u64, out: &mut Vec<Arrival>) {
        while let Some((t, _)) = self.queue.front() {
            if *t > now {
                break;
            }
            if let Some((_, a)) = self.queue.pop_front() {
                out.push(a);
            }
        }
    }

    /// The next arrival time, if anything is in flight.
    pub fn next_arrival(&self) -> Option<u64> {
        self.queue.front().map(|(t, _)| *t)
    }

    /// Discards everything in flight (link down / retrain); returns the
    /// flits discarded.
    pub fn flush(&mut self, now: u64) -> u64 {
        let mut n = 0u64;
        for (_, a) in self.queue.drain(..) {
            n += match a {
                Arrival::Data(d) => (d.len() / FLIT) as u64,
                Arrival::Lost(k) => u64::from(k),
            };
        }
        self.counters.dropped_flits += n;
        self.busy_until = self.busy_until.min(now);
        n
    }
}
