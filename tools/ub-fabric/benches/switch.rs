// SPDX-License-Identifier: GPL-2.0
//! Flits per second forwarded through one switch (host side, no guest):
//! two `ub-proto` link engines play the endpoints, wired straight to two
//! ports of a [`Switch`] (each port running its own link engine), and
//! one endpoint streams 16-bit CNA packets to the other.
//!
//! `cargo bench -p ub-fabric --bench switch [-- PACKETS BODY_BYTES]`

use std::collections::VecDeque;
use std::time::Instant;

use ub_fabric::switch::{Packet, Switch, SwitchParams};
use ub_proto::link::engine::{
    Delivery, Link, LinkConfig, RxSink, TxPacket, TxSource, MIN_TX_BUFFER,
};
use ub_proto::link::retry::RetrySlot;
use ub_proto::link::DllState;
use ub_proto::net::cci::Cci;
use ub_proto::net::nth::{NetHeader, Nth16, ICRC_LEN, NTH16_LEN};
use ub_proto::net::route::RouteEntry;

#[derive(Default)]
struct Src(VecDeque<Vec<u8>>);

impl TxSource for Src {
    fn ready(&self) -> u16 {
        u16::from(!self.0.is_empty())
    }
    fn head(&self, vl: u8) -> Option<TxPacket<'_>> {
        if vl != 0 {
            return None;
        }
        self.0.front().map(|p| TxPacket {
            cfg: 6,
            rt: 0,
            error_flag: false,
            payload: p,
        })
    }
    fn pop(&mut self, _vl: u8) {
        self.0.pop_front();
    }
}

#[derive(Default)]
struct Count(u64);

impl RxSink for Count {
    fn deliver(&mut self, d: &Delivery<'_>) {
        if d.last {
            self.0 += 1;
        }
    }
}

fn packet(body: usize) -> Vec<u8> {
    let h = NetHeader::Cna16 {
        nth: Nth16 {
            scna: 0x0101,
            dcna: 0x0201,
            cci: Cci::DEFAULT,
            lbf: 0,
            sl: 0,
            mgmt: false,
            nlp: 0,
        },
        coherent: false,
    };
    let mut p = vec![0u8; NTH16_LEN + body + ICRC_LEN];
    let _ = h.write(&mut p, body + ICRC_LEN);
    p
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let packets: usize = args.first().and_then(|a| a.parse().ok()).unwrap_or(100_000);
    let body: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(256);

    let mut sw = Switch::new("sw", 2, SwitchParams::default(), 1, 0);
    sw.routes = vec![RouteEntry {
        prefix: 0x0200,
        prefix_len: 8,
        width: 16,
        ports: 0b10,
        shortest: 0b10,
    }];
    let mk = || Link::new(LinkConfig::default(), vec![RetrySlot::EMPTY; 1024]).expect("engine");
    let mut a = mk();
    let mut b = mk();
    let mut src = Src::default();
    let mut empty = Src::default();
    let mut sink = Count::default();
    let mut sink_a = Count::default();
    let now = 0u64;
    a.link_up(now);
    b.link_up(now);
    for p in &mut sw.ports {
        p.link.link_up(now);
    }
    let mut buf = vec![0u8; MIN_TX_BUFFER];
    let mut pkts: Vec<Packet> = Vec::new();
    let mut forwarded_flits = 0u64;
    let mut t = 0u64;
    let mut step = |a: &mut Link<Vec<RetrySlot>>,
                    b: &mut Link<Vec<RetrySlot>>,
                    sw: &mut Switch,
                    src: &mut Src,
                    empty: &mut Src,
                    sink: &mut Count,
                    sink_a: &mut Count,
                    t: u64,
                    fwd: &mut u64| {
        // a -> sw.0
        for _ in 0..8 {
            let n = a.poll_transmit(t, &mut buf, src);
            if n == 0 {
                break;
            }
            sw.ports[0].link.handle_receive(t, &buf[..n], &mut pkts);
        }
        for p in pkts.drain(..) {
            sw.forward(t, 0, p);
        }
        // sw.1 -> b
        for _ in 0..8 {
            let port = &mut sw.ports[1];
            let n = port.link.poll_transmit(t, &mut buf, &mut port.egress);
            if n == 0 {
                break;
            }
            *fwd += (n / 20) as u64;
            b.handle_receive(t, &buf[..n], sink);
        }
        // Return paths (credits, ACKs).
        let n = b.poll_transmit(t, &mut buf, empty);
        if n > 0 {
            let port = &mut sw.ports[1];
            port.link.handle_receive(t, &buf[..n], &mut Vec::new());
        }
        let port = &mut sw.ports[0];
        let n = port.link.poll_transmit(t, &mut buf, &mut port.egress);
        if n > 0 {
            a.handle_receive(t, &buf[..n], sink_a);
        }
        for l in [&mut *a, &mut *b] {
            if l.poll_timeout().is_some_and(|d| d <= t) {
                l.handle_timeout(t);
            }
            while l.poll_event().is_some() {}
        }
        for p in &mut sw.ports {
            if p.link.poll_timeout().is_some_and(|d| d <= t) {
                p.link.handle_timeout(t);
            }
        }
    };
    // Bring the links up.
    while !(a.state() == DllState::Normal
        && b.state() == DllState::Normal
        && sw.ports.iter().all(|p| p.link.is_up()))
    {
        t += 100;
        step(
            &mut a,
            &mut b,
            &mut sw,
            &mut src,
            &mut empty,
            &mut sink,
            &mut sink_a,
            t,
            &mut forwarded_flits,
        );
        assert!(t < 10_000_000, "links did not come up");
    }
    let p = packet(body);
    for _ in 0..packets {
        src.0.push_back(p.clone());
    }
    forwarded_flits = 0;
    let start = Instant::now();
    while (sink.0 as usize) < packets {
        t += 100;
        step(
            &mut a,
            &mut b,
            &mut sw,
            &mut src,
            &mut empty,
            &mut sink,
            &mut sink_a,
            t,
            &mut forwarded_flits,
        );
        assert!(t < 100_000_000_000, "stalled: {} of {packets}", sink.0);
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "switch: {packets} packets of {} bytes, {forwarded_flits} flits forwarded in {secs:.3} s: \
         {:.2} Mflit/s, {:.0} packets/s (one core, includes both endpoint engines)",
        p.len(),
        forwarded_flits as f64 / secs / 1e6,
        packets as f64 / secs
    );
    println!(
        "switch counters: {}",
        serde_json::to_string(&sw.counters).unwrap_or_default()
    );
}
