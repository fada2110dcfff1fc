// SPDX-License-Identifier: GPL-2.0
//! Shared test harness for the link engine: packet queues, a collecting
//! sink, a deterministic RNG and a simulated wire joining two engines with
//! delay, bit errors and block erasures. Included by `link_sim.rs`,
//! `link_sm.rs` and the `link` bench.

#![allow(
    dead_code,
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::float_arithmetic,
    unreachable_pub,
    missing_docs,
    reason = "test code: a panic is a test failure"
)]

use std::collections::VecDeque;

use ub_proto::link::ctrl::ControlBlock;
use ub_proto::link::engine::{Delivery, Event, Link, LinkConfig, RxSink, TxPacket, TxSource};
use ub_proto::link::frame::{Mode, FLIT_BYTES};
use ub_proto::link::retry::RetrySlot;
use ub_proto::link::DllState;

/// xorshift64*: deterministic, dependency-free.
#[derive(Clone, Debug)]
pub struct Rng(pub u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
    pub fn range(&mut self, lo: u64, hi_incl: u64) -> u64 {
        lo + self.below(hi_incl - lo + 1)
    }
    pub fn chance(&mut self, p: f64) -> bool {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64 <= p && p > 0.0
    }
    /// Geometric gap (number of trials before the next success) for
    /// probability `p`.
    pub fn gap(&mut self, p: f64) -> u64 {
        if p <= 0.0 {
            return u64::MAX;
        }
        let u = ((self.next_u64() >> 11) as f64 + 1.0) / (1u64 << 53) as f64;
        (u.ln() / (1.0 - p).ln()) as u64
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pkt {
    pub cfg: u8,
    pub rt: u8,
    pub error_flag: bool,
    pub payload: Vec<u8>,
}

/// Per-VL FIFO queues.
#[derive(Debug, Default)]
pub struct Queues {
    pub q: [VecDeque<Pkt>; 16],
}

impl Queues {
    pub fn push(&mut self, vl: u8, p: Pkt) {
        self.q[usize::from(vl)].push_back(p);
    }
    pub fn is_empty(&self) -> bool {
        self.q.iter().all(VecDeque::is_empty)
    }
    pub fn len(&self) -> usize {
        self.q.iter().map(VecDeque::len).sum()
    }
}

impl TxSource for Queues {
    fn ready(&self) -> u16 {
        let mut m = 0;
        for (i, q) in self.q.iter().enumerate() {
            if !q.is_empty() {
                m |= 1 << i;
            }
        }
        m
    }
    fn head(&self, vl: u8) -> Option<TxPacket<'_>> {
        self.q.get(usize::from(vl))?.front().map(|p| TxPacket {
            cfg: p.cfg,
            rt: p.rt,
            error_flag: p.error_flag,
            payload: &p.payload,
        })
    }
    fn pop(&mut self, vl: u8) {
        self.q[usize::from(vl)].pop_front();
    }
}

/// Reassembles deliveries per VL.
#[derive(Debug, Default)]
pub struct Collector {
    pub got: [Vec<Pkt>; 16],
    cur: Option<(u8, Pkt, u16)>,
    pub pieces: u64,
    pub bytes: u64,
    pub params: u64,
    /// Skip storing payloads (benchmarks).
    pub count_only: bool,
    pub delivered: u64,
}

impl RxSink for Collector {
    fn deliver(&mut self, d: &Delivery<'_>) {
        self.pieces += 1;
        self.bytes += d.data.len() as u64;
        if self.count_only {
            if d.last {
                self.delivered += 1;
            }
            return;
        }
        if d.first {
            assert!(self.cur.is_none(), "interleaved DLLDPs");
            self.cur = Some((
                d.vl,
                Pkt {
                    cfg: d.cfg,
                    rt: d.rt,
                    error_flag: false,
                    payload: Vec::with_capacity(usize::from(d.total_len)),
                },
                d.total_len,
            ));
        }
        let (vl, pkt, total) = self.cur.as_mut().expect("piece without a first piece");
        assert_eq!(*vl, d.vl);
        pkt.payload.extend_from_slice(d.data);
        if d.last {
            assert_eq!(pkt.payload.len(), usize::from(*total), "length mismatch");
            pkt.error_flag = d.error_flag;
            let (vl, pkt, _) = self.cur.take().unwrap();
            self.got[usize::from(vl)].push(pkt);
            self.delivered += 1;
        }
    }
    fn param_exchg(&mut self, _b: &ub_proto::link::ctrl::ParamExchg) {
        self.params += 1;
    }
}

#[derive(Debug)]
enum Item {
    Bytes(Vec<u8>),
    Lost(u32),
}

/// One direction of a wire.
#[derive(Debug, Default)]
pub struct Wire {
    q: VecDeque<(u64, Item)>,
    /// Bit error rate.
    pub ber: f64,
    /// Probability per transmitted chunk of erasing a run of flits.
    pub drop_p: f64,
    next_err: u64,
    pub flipped: u64,
    pub erased: u64,
    pub bytes: u64,
    /// Drop everything (cut cable) while set.
    pub cut: bool,
}

impl Wire {
    fn send(&mut self, at: u64, data: &[u8], mode: Mode, rng: &mut Rng) {
        self.bytes += data.len() as u64;
        if self.cut {
            return;
        }
        let mut data = data.to_vec();
        let flits = data.len() / FLIT_BYTES;
        // Erasure of a run of flits (a "dropped block" the PHY noticed).
        let mut erase: Option<(usize, usize)> = None;
        if flits > 0 && rng.chance(self.drop_p) {
            let start = rng.below(flits as u64) as usize;
            let len = rng.range(1, 33).min((flits - start) as u64) as usize;
            erase = Some((start, len));
        }
        // Bit errors: flip in CRC mode; in non-CRC mode the FEC reports the
        // flit as lost instead.
        let mut bad_flits = vec![false; flits];
        if self.ber > 0.0 {
            let bits = data.len() as u64 * 8;
            let mut pos = 0u64;
            loop {
                if self.next_err == 0 {
                    self.next_err = rng.gap(self.ber).saturating_add(1);
                }
                if pos + self.next_err > bits {
                    self.next_err -= bits - pos;
                    break;
                }
                pos += self.next_err;
                self.next_err = 0;
                let bit = pos - 1;
                self.flipped += 1;
                match mode {
                    Mode::Crc => data[(bit / 8) as usize] ^= 1 << (bit % 8),
                    Mode::NonCrc => bad_flits[(bit / 8) as usize / FLIT_BYTES] = true,
                }
            }
        }
        if let Some((s, l)) = erase {
            for f in &mut bad_flits[s..s + l] {
                *f = true;
            }
        }
        // Split into good runs and erasures.
        let mut i = 0;
        while i < flits {
            let bad = bad_flits[i];
            let mut j = i;
            while j < flits && bad_flits[j] == bad {
                j += 1;
            }
            if bad {
                self.erased += (j - i) as u64;
                self.q.push_back((at, Item::Lost((j - i) as u32)));
            } else {
                self.q.push_back((
                    at,
                    Item::Bytes(data[i * FLIT_BYTES..j * FLIT_BYTES].to_vec()),
                ));
            }
            i = j;
        }
    }

    /// Drops everything in flight.
    pub fn flush(&mut self) {
        self.q.clear();
    }

    fn deliver<S: std::ops::DerefMut<Target = [RetrySlot]>>(
        &mut self,
        now: u64,
        to: &mut Link<S>,
        sink: &mut Collector,
    ) {
        while let Some((at, _)) = self.q.front() {
            if *at > now {
                break;
            }
            let (_, item) = self.q.pop_front().unwrap();
            match item {
                Item::Bytes(b) => to.handle_receive(now, &b, sink),
                Item::Lost(n) => to.receive_error(now, n),
            }
        }
    }

    pub fn in_flight(&self) -> usize {
        self.q.len()
    }
}

pub type TestLink = Link<Vec<RetrySlot>>;

pub fn new_link(cfg: LinkConfig, depth: usize) -> TestLink {
    Link::new(cfg, vec![RetrySlot::EMPTY; depth]).expect("retry buffer too small")
}

/// Two engines joined by two wires.
pub struct Sim {
    pub a: TestLink,
    pub b: TestLink,
    pub qa: Queues,
    pub qb: Queues,
    pub ca: Collector,
    pub cb: Collector,
    pub ab: Wire,
    pub ba: Wire,
    pub now: u64,
    /// Nanoseconds per step.
    pub step: u64,
    /// Wire delay in nanoseconds.
    pub delay: u64,
    /// Flits each engine may send per step.
    pub budget: usize,
    pub rng: Rng,
    pub mode: Mode,
    pub events_a: Vec<Event>,
    pub events_b: Vec<Event>,
    /// Retrain completes after this long.
    pub retrain_ns: u64,
    retrain_a: Option<u64>,
    retrain_b: Option<u64>,
    mode_a: Option<u64>,
    mode_b: Option<u64>,
    /// Answer retrain requests automatically.
    pub auto_retrain: bool,
    buf: Vec<u8>,
}

impl Sim {
    pub fn new(
        cfg_a: LinkConfig,
        cfg_b: LinkConfig,
        depth_a: usize,
        depth_b: usize,
        seed: u64,
    ) -> Self {
        Self {
            mode: cfg_a.mode,
            a: new_link(cfg_a, depth_a),
            b: new_link(cfg_b, depth_b),
            qa: Queues::default(),
            qb: Queues::default(),
            ca: Collector::default(),
            cb: Collector::default(),
            ab: Wire::default(),
            ba: Wire::default(),
            now: 0,
            step: 100,
            delay: 300,
            budget: 64,
            rng: Rng::new(seed),
            events_a: Vec::new(),
            events_b: Vec::new(),
            retrain_ns: 2_000,
            retrain_a: None,
            retrain_b: None,
            mode_a: None,
            mode_b: None,
            auto_retrain: true,
            buf: vec![0; 256 * FLIT_BYTES],
        }
    }

    pub fn link_up(&mut self) {
        self.a.link_up(self.now);
        self.b.link_up(self.now);
    }

    /// Advances one step.
    pub fn step(&mut self) {
        self.now += self.step;
        let now = self.now;
        for (link, retrain, mode) in [
            (&mut self.a, &mut self.retrain_a, &mut self.mode_a),
            (&mut self.b, &mut self.retrain_b, &mut self.mode_b),
        ] {
            if let Some(t) = *mode {
                if t <= now {
                    *mode = None;
                    link.mode_change_done(now);
                }
            }
            if let Some(d) = link.poll_timeout() {
                if d <= now {
                    link.handle_timeout(now);
                }
            }
            if let Some(t) = *retrain {
                if t <= now {
                    *retrain = None;
                    link.phy_retrained(now);
                }
            }
        }
        let budget = self.budget * FLIT_BYTES;
        let n = self
            .a
            .poll_transmit(now, &mut self.buf[..budget], &mut self.qa);
        self.ab.send(
            now + self.delay,
            &self.buf[..n],
            self.a.mode(),
            &mut self.rng,
        );
        let n = self
            .b
            .poll_transmit(now, &mut self.buf[..budget], &mut self.qb);
        self.ba.send(
            now + self.delay,
            &self.buf[..n],
            self.b.mode(),
            &mut self.rng,
        );
        self.ab.deliver(now, &mut self.b, &mut self.cb);
        self.ba.deliver(now, &mut self.a, &mut self.ca);
        while let Some(e) = self.a.poll_event() {
            if e == Event::RetrainRequest && self.auto_retrain {
                self.retrain_a = Some(now + self.retrain_ns);
            }
            if matches!(e, Event::ModeChangeRetrain(_)) {
                // The PHY retrain is link-wide: both ends finish it.
                self.mode_a.get_or_insert(now + self.retrain_ns);
                self.mode_b.get_or_insert(now + self.retrain_ns);
            }
            self.events_a.push(e);
        }
        while let Some(e) = self.b.poll_event() {
            if e == Event::RetrainRequest && self.auto_retrain {
                self.retrain_b = Some(now + self.retrain_ns);
            }
            if matches!(e, Event::ModeChangeRetrain(_)) {
                self.mode_a.get_or_insert(now + self.retrain_ns);
                self.mode_b.get_or_insert(now + self.retrain_ns);
            }
            self.events_b.push(e);
        }
    }

    /// Steps until both engines are in DLL_Normal (or `max` steps).
    pub fn bring_up(&mut self, max: usize) -> bool {
        self.link_up();
        for _ in 0..max {
            self.step();
            if self.a.state() == DllState::Normal && self.b.state() == DllState::Normal {
                return true;
            }
        }
        false
    }

    /// Steps while `cond` holds (at most `max` steps); returns the steps.
    pub fn run_while(&mut self, max: usize, mut cond: impl FnMut(&Self) -> bool) -> usize {
        let mut i = 0;
        while i < max && cond(self) {
            self.step();
            i += 1;
        }
        i
    }

    /// `true` when nothing is queued, in flight or being retransmitted.
    pub fn drained(&self) -> bool {
        self.qa.is_empty()
            && self.qb.is_empty()
            && self.ab.in_flight() == 0
            && self.ba.in_flight() == 0
    }
}

/// A random packet of `flits` flits worth of payload (1..=512 flits).
pub fn random_packet(rng: &mut Rng, mode: Mode, max_flits: u64, poison_p: f64) -> Pkt {
    let flits = rng.range(1, max_flits);
    let max = ub_proto::link::frame::max_payload(mode);
    // Payload that yields about `flits` flits.
    let approx = (flits as usize * FLIT_BYTES).saturating_sub(rng.range(4, 24) as usize);
    let len = approx.clamp(1, max);
    let mut payload = vec![0u8; len];
    for b in payload.iter_mut() {
        *b = rng.next_u64() as u8;
    }
    let cfgs = [3u8, 4, 5, 6, 7, 9];
    Pkt {
        cfg: cfgs[rng.below(6) as usize],
        rt: rng.below(4) as u8,
        error_flag: rng.chance(poison_p),
        payload,
    }
}

/// Two VLs and a 256 KiB receive buffer: the configuration of the state
/// machine tests (`link_sm.rs`, `link_defects.rs`).
pub fn two_vl_config() -> LinkConfig {
    let mut c = LinkConfig::default();
    c.caps.vl_enable = 0b11;
    c.rx_buffer_bytes = 256 * 1024;
    c
}

/// Two engines of [`two_vl_config`] brought up, with the initial ACK and
/// credit exchange settled.
pub fn up_pair() -> Sim {
    let mut sim = Sim::new(two_vl_config(), two_vl_config(), 512, 512, 7);
    assert!(sim.bring_up(10_000));
    sim.run_while(200, |_| true);
    sim
}

/// One control block as a CRC-mode flit.
pub fn flit(cb: ControlBlock) -> [u8; FLIT_BYTES] {
    let mut f = [0u8; FLIT_BYTES];
    cb.encode(Mode::Crc, &mut f).unwrap();
    f
}

/// A NOB with a bit error.
pub fn bad_flit() -> [u8; FLIT_BYTES] {
    let mut f = flit(ControlBlock::Nob);
    f[9] ^= 0x10;
    f
}
