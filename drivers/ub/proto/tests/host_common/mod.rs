// SPDX-License-Identifier: GPL-2.0
//! A two-endpoint harness for the host endpoint tests: counted storage, a
//! seeded random source, a pattern message store, a recording sink and a
//! tiny event-driven network (delay, jitter, loss, duplication,
//! corruption, a drop filter) that drives both endpoints in the
//! documented call order.

#![allow(
    dead_code,
    unreachable_pub,
    reason = "a helper module of several test files"
)]
#![allow(clippy::unwrap_used, clippy::indexing_slicing, reason = "test code")]

use std::cell::Cell;
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap};
use std::ops::{Deref, DerefMut};
use std::rc::Rc;

use ub_proto::crc::crc32_le_portable;
use ub_proto::host::{
    Addr, AllocError, ChannelConfig, DatagramKind, Delivery, DeliverySink, Endpoint,
    EndpointConfig, Event, LocalAddrs, MessageSource, MsgRef, Random, Storage, Transmit,
};
use ub_proto::net::npi::{Npi, NpiMode};
use ub_proto::net::route::RouteEntry;
use ub_proto::transport::cm::CmTiming;

/// A `Vec` that counts the bytes alive in its store.
pub struct Counted<T> {
    v: Vec<T>,
    live: Rc<Cell<usize>>,
}

impl<T> Deref for Counted<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        &self.v
    }
}

impl<T> DerefMut for Counted<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        &mut self.v
    }
}

impl<T> Drop for Counted<T> {
    fn drop(&mut self) {
        let n = self.v.len() * std::mem::size_of::<T>();
        self.live.set(self.live.get() - n);
    }
}

/// Storage that counts live bytes and can be told to fail.
#[derive(Clone, Default)]
pub struct Store {
    pub live: Rc<Cell<usize>>,
    pub fail: Rc<Cell<bool>>,
}

impl Storage for Store {
    type Buf<T> = Counted<T>;
    fn alloc<T>(&mut self, n: usize, fill: impl FnMut() -> T) -> Result<Counted<T>, AllocError> {
        if self.fail.get() {
            return Err(AllocError);
        }
        let mut v = Vec::new();
        v.try_reserve_exact(n).map_err(|_| AllocError)?;
        v.extend(std::iter::repeat_with(fill).take(n));
        self.live
            .set(self.live.get() + n * std::mem::size_of::<T>());
        Ok(Counted {
            v,
            live: self.live.clone(),
        })
    }
}

/// SplitMix64.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// True with probability `ppm` per million.
    pub fn chance(&mut self, ppm: u32) -> bool {
        self.next() % 1_000_000 < u64::from(ppm)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

impl Random for Rng {
    fn random_u32(&mut self) -> u32 {
        self.next() as u32
    }
}

pub type Ep = Endpoint<Store, Rng>;

/// Byte `off` of message `token`.
pub fn pattern(token: u64, off: u32) -> u8 {
    (token
        .wrapping_mul(131)
        .wrapping_add(u64::from(off).wrapping_mul(7))
        ^ (u64::from(off) >> 8)) as u8
}

/// Message contents are the pattern; nothing is stored.
pub struct Pattern;

impl MessageSource for Pattern {
    fn read(&mut self, msg: MsgRef, offset: u32, out: &mut [u8]) {
        let token = match msg {
            MsgRef::Channel { token, .. } | MsgRef::Datagram { token } => token,
        };
        for (i, b) in out.iter_mut().enumerate() {
            *b = pattern(token, offset + i as u32);
        }
    }
}

/// Records what an endpoint delivers.
#[derive(Default)]
pub struct Sink {
    /// Per channel: bytes of the message being assembled.
    pub partial: HashMap<u32, Vec<u8>>,
    /// Per channel: complete messages in delivery order (tpmsn, bytes).
    pub messages: BTreeMap<u32, Vec<(u32, Vec<u8>)>>,
    pub datagrams: Vec<(DatagramKind, Addr, Vec<u8>)>,
    pub errors: Vec<String>,
}

impl DeliverySink for Sink {
    fn deliver(&mut self, d: &Delivery<'_>) {
        match *d {
            Delivery::Message {
                tpn,
                tpmsn,
                offset,
                bytes,
                complete,
            } => {
                let cur = self.partial.entry(tpn).or_default();
                if offset as usize != cur.len() {
                    self.errors
                        .push(format!("tpn {tpn}: offset {offset} != {}", cur.len()));
                }
                cur.extend_from_slice(bytes);
                if let Some(len) = complete {
                    let m = std::mem::take(cur);
                    if m.len() != len as usize {
                        self.errors
                            .push(format!("tpn {tpn}: length {len} != {}", m.len()));
                    }
                    self.messages.entry(tpn).or_default().push((tpmsn, m));
                }
            }
            Delivery::Datagram { kind, from, bytes } => {
                self.datagrams.push((kind, from, bytes.to_vec()))
            }
        }
    }
}

pub const A_IP: [u8; 4] = [10, 0, 0, 1];
pub const B_IP: [u8; 4] = [10, 0, 0, 2];
pub const A_CNA: u32 = 0x10;
pub const B_CNA: u32 = 0x20;

pub fn addr(side: usize, cna: bool) -> Addr {
    match (side, cna) {
        (0, false) => Addr::Ipv4(A_IP),
        (_, false) => Addr::Ipv4(B_IP),
        (0, true) => Addr::Cna24(A_CNA),
        (_, true) => Addr::Cna24(B_CNA),
    }
}

pub fn ep_config(side: usize, accept: Option<ChannelConfig>) -> EndpointConfig {
    EndpointConfig {
        local: LocalAddrs {
            cna16: Some(if side == 0 { 0x10 } else { 0x20 }),
            cna24: Some(if side == 0 { A_CNA } else { B_CNA }),
            ipv4: Some(if side == 0 { A_IP } else { B_IP }),
            ipv6: None,
            eid: side as u128,
        },
        npi_mode: NpiMode::Strict(Npi::DEFAULT),
        npi: Npi::DEFAULT,
        ports: 2,
        max_packet: 9000,
        max_channels: 16,
        max_routes: 4,
        max_groups: 4,
        datagram_queue: 16,
        cm: CmTiming {
            retry_ns: 200_000,
            max_tries: 5,
        },
        accept,
        hash_seed: side as u64,
        icrc: crc32_le_portable,
    }
}

pub fn endpoint(side: usize, accept: Option<ChannelConfig>, store: Store) -> Ep {
    endpoint_seeded(side, accept, store, side as u64 + 77)
}

/// An endpoint whose random source (initial PSNs) starts at `seed`.
pub fn endpoint_seeded(side: usize, accept: Option<ChannelConfig>, store: Store, seed: u64) -> Ep {
    let mut e = Ep::new(ep_config(side, accept), store, Rng(seed)).unwrap();
    for width in [16u8, 24, 32] {
        e.add_route(RouteEntry {
            prefix: 0,
            prefix_len: 0,
            width,
            ports: 0b11,
            shortest: 0,
        })
        .unwrap();
    }
    e
}

/// Fate of a packet in the network.
pub type Filter = Box<dyn FnMut(u64, usize, &Transmit) -> bool>;

/// A packet on the wire, seen by the trace.
#[derive(Clone, Debug)]
pub struct Sent {
    pub t: u64,
    pub from: usize,
    pub tx: Transmit,
    pub dropped: bool,
}

/// A packet in flight: arrival time, sequence, destination side, port,
/// LPH.CFG, bytes.
type InFlight = (u64, u64, usize, u8, u8, Vec<u8>);

/// Two endpoints and the network between them.
pub struct Net {
    pub eps: [Ep; 2],
    pub sinks: [Sink; 2],
    pub events: [Vec<(u64, Event)>; 2],
    pub now: u64,
    pub delay: u64,
    pub jitter: u64,
    /// Probabilities per million packets.
    pub loss: u32,
    pub dup: u32,
    pub corrupt: u32,
    pub rng: Rng,
    pub filter: Option<Filter>,
    pub trace: Vec<Sent>,
    q: BinaryHeap<Reverse<InFlight>>,
    seq: u64,
    buf: Vec<u8>,
}

impl Net {
    pub fn new(a: Ep, b: Ep) -> Self {
        Self {
            eps: [a, b],
            sinks: [Sink::default(), Sink::default()],
            events: [Vec::new(), Vec::new()],
            now: 0,
            delay: 2_000,
            jitter: 0,
            loss: 0,
            dup: 0,
            corrupt: 0,
            rng: Rng(1),
            filter: None,
            trace: Vec::new(),
            q: BinaryHeap::new(),
            seq: 0,
            buf: vec![0; 9000],
        }
    }

    /// Steps 1 and 2 of the call order for endpoint `s`.
    pub fn flush(&mut self, s: usize) {
        while let Some(ev) = self.eps[s].poll_event() {
            self.events[s].push((self.now, ev));
        }
        loop {
            let t = self.eps[s]
                .poll_transmit(self.now, &mut self.buf, &mut Pattern)
                .unwrap();
            let Some(t) = t else { break };
            let dropped = self.filter.as_mut().is_some_and(|f| f(self.now, s, &t))
                || self.rng.chance(self.loss);
            self.trace.push(Sent {
                t: self.now,
                from: s,
                tx: t,
                dropped,
            });
            if dropped {
                continue;
            }
            let mut bytes = self.buf[..t.len].to_vec();
            if self.rng.chance(self.corrupt) {
                let bit = self.rng.below(bytes.len() as u64 * 8);
                bytes[(bit / 8) as usize] ^= 1 << (bit % 8);
            }
            let copies = if self.rng.chance(self.dup) { 2 } else { 1 };
            for _ in 0..copies {
                let at = self.now + self.delay + self.rng.below(self.jitter + 1);
                self.q.push(Reverse((
                    at,
                    self.seq,
                    1 - s,
                    t.port,
                    t.meta.class.cfg(),
                    bytes.clone(),
                )));
                self.seq += 1;
            }
        }
    }

    /// Runs until `done` holds or time passes `until`; returns whether
    /// `done` held.
    pub fn run_until(&mut self, until: u64, mut done: impl FnMut(&Net) -> bool) -> bool {
        loop {
            self.flush(0);
            self.flush(1);
            if done(self) {
                return true;
            }
            let mut next = self.q.peek().map(|r| r.0 .0);
            for e in &self.eps {
                if let Some(d) = e.poll_timeout() {
                    next = Some(next.map_or(d, |n: u64| n.min(d)));
                }
            }
            let Some(next) = next else { return false };
            let next = next.max(self.now);
            if next > until {
                return false;
            }
            self.now = next;
            while self.q.peek().is_some_and(|r| r.0 .0 <= self.now) {
                let Reverse((_, _, to, port, cfg, bytes)) = self.q.pop().unwrap();
                self.eps[to].handle_packet(self.now, port, cfg, &bytes, &mut self.sinks[to]);
                // The call order after every input.
                self.flush(to);
            }
            for s in 0..2 {
                if self.eps[s].poll_timeout().is_some_and(|d| d <= self.now) {
                    self.eps[s].handle_timeout(self.now);
                }
            }
        }
    }

    pub fn has_event(&self, s: usize, f: impl Fn(&Event) -> bool) -> bool {
        self.events[s].iter().any(|(_, e)| f(e))
    }

    /// The TPN B gave the channel A opened (from B's Incoming event).
    pub fn incoming_tpn(&self, s: usize) -> Option<u32> {
        self.events[s].iter().find_map(|(_, e)| match e {
            Event::Incoming { tpn, .. } => Some(*tpn),
            _ => None,
        })
    }

    pub fn acked(&self, s: usize) -> usize {
        self.events[s]
            .iter()
            .filter(|(_, e)| matches!(e, Event::MessageAcked { .. }))
            .count()
    }
}

/// Checks that side `s` received exactly `msgs` (token, len) on `tpn`, in
/// order, intact.
pub fn check_delivery(net: &Net, s: usize, tpn: u32, msgs: &[(u64, u32)]) {
    let sink = &net.sinks[s];
    assert!(sink.errors.is_empty(), "{:?}", sink.errors);
    let got = sink.messages.get(&tpn).map(Vec::as_slice).unwrap_or(&[]);
    assert_eq!(got.len(), msgs.len(), "side {s} tpn {tpn}: message count");
    for (i, ((tpmsn, bytes), &(token, len))) in got.iter().zip(msgs).enumerate() {
        assert_eq!(*tpmsn as usize, i, "order");
        assert_eq!(bytes.len(), len as usize, "message {i} length");
        let bad = (0..len).find(|&o| bytes[o as usize] != pattern(token, o));
        assert_eq!(bad, None, "message {i} (token {token}) corrupted");
    }
}
