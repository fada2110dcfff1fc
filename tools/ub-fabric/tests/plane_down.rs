// SPDX-License-Identifier: GPL-2.0
//! One plane's cable pulled under sprayed UTP datagrams: the guests' ping
//! setup of the default topology (IPv4 10.0.(h+1).100, one route
//! 10.0.0.0/16 over both ports with per-packet spraying) while `vmH.1` is
//! down at the fabric. Only what was in flight may be lost: once the
//! driver saw the link down, every datagram either way arrives, the
//! switches carrying those for the host whose port is down over the
//! inter-switch link (sw1 → sw1.2 → sw0 → host port 0).

mod common;

use std::collections::BTreeSet;

use common::{bring_up, fabric, pattern, Driver};
use ub_fabric::fabric::{Command, Fabric};
use ub_fabric::topology::{addr, Topology};
use ub_proto::crc::crc32_le_portable;
use ub_proto::host::{Addr, DatagramKind, EndpointConfig, LocalAddrs};
use ub_proto::link::DllState;
use ub_proto::net::npi::{Npi, NpiMode};
use ub_proto::net::route::RouteEntry;
use ub_proto::transport::cm::CmTiming;

/// One datagram each way every `SEND_EVERY_NS`.
const SEND_EVERY_NS: u64 = 10_000;
/// Fabric and driver step.
const DT: u64 = 1_000;
/// Traffic before the link goes down, and after the driver saw it down.
const PHASE_NS: u64 = 3_000_000;
/// Time after the last send for the last datagrams to arrive.
const DRAIN_NS: u64 = 1_000_000;

/// The guest's address: 10.0.(h+1).100, inside the /24 the switches
/// route to host `h` over any of its ports.
fn ipv4(h: usize) -> [u8; 4] {
    let mut a = addr::ipv4_primary(h);
    a[3] = 100;
    a
}

fn endpoint_config(h: usize) -> EndpointConfig {
    EndpointConfig {
        local: LocalAddrs {
            cna16: Some(addr::cna16_primary(h)),
            cna24: Some(addr::cna24_primary(h)),
            ipv4: Some(ipv4(h)),
            ipv6: None,
            eid: h as u128,
        },
        npi_mode: NpiMode::Strict(Npi::DEFAULT),
        npi: Npi::DEFAULT,
        ports: 2,
        max_packet: 4096 + 128,
        max_channels: 1,
        max_routes: 1,
        max_groups: 1,
        datagram_queue: 64,
        cm: CmTiming {
            retry_ns: 200_000,
            max_tries: 20,
        },
        accept: None,
        hash_seed: 0x5eed + h as u64,
        icrc: crc32_le_portable,
    }
}

/// Datagram `token` is `64 + token` bytes of [`pattern`], so its length
/// tells which one arrived and its bytes that it arrived intact.
fn dgram_len(token: u64) -> u32 {
    64 + token as u32
}

/// Tokens of the datagrams host `h` received intact.
fn received(d: &Driver) -> BTreeSet<u64> {
    let mut got = BTreeSet::new();
    for (kind, _, bytes) in &d.stack().app.datagrams {
        assert_eq!(*kind, DatagramKind::Utp);
        let token = bytes.len() as u64 - 64;
        let intact = bytes
            .iter()
            .enumerate()
            .all(|(i, &b)| b == pattern(token, i as u32));
        assert!(intact, "datagram {token} corrupted");
        assert!(got.insert(token), "datagram {token} delivered twice");
    }
    got
}

fn link_cmd(f: &mut Fabric, link: &str, up: bool, now: u64) {
    f.apply(
        &Command::Link {
            link: link.into(),
            ber: None,
            fec_fail: None,
            delay_ns: None,
            rate_fps: None,
            up: Some(up),
            flap: false,
        },
        now,
    )
    .expect("link command");
}

/// What one run measured, per direction (index = sending host).
struct Run {
    /// Datagrams sent, per sender, with the send time.
    sent: [Vec<(u64, u64)>; 2],
    /// Tokens received, per sender.
    got: [BTreeSet<u64>; 2],
    /// When the driver double of the host whose port went down saw it
    /// (DLL out of Normal, port marked down in its endpoint).
    seen_down: u64,
    /// Switch counters: (no_route, link_down_drops) per switch.
    switch_drops: Vec<(u64, u64)>,
}

/// Host `down_host` takes its port 1 down at the fabric while both hosts
/// send one UTP datagram to the other every [`SEND_EVERY_NS`].
fn run(down_host: usize) -> Run {
    let topo = Topology::builtin("default").expect("default");
    let mut f = fabric(&topo);
    let (mut ds, mut now) = bring_up(&mut f);
    for (h, d) in ds.iter_mut().enumerate() {
        d.attach_endpoint(endpoint_config(h), 77 + h as u64);
        d.stack_mut()
            .ep
            .add_route_spraying(
                RouteEntry {
                    prefix: u128::from(u32::from_be_bytes([10, 0, 0, 0])),
                    prefix_len: 16,
                    width: 32,
                    ports: 0b11,
                    shortest: 0b11,
                },
                true,
            )
            .expect("route");
    }
    let mut sent: [Vec<(u64, u64)>; 2] = [Vec::new(), Vec::new()];
    let mut token = 0u64;
    let mut step = |f: &mut Fabric, ds: &mut [Driver], now: u64, send: bool| {
        if send && now % SEND_EVERY_NS == 0 {
            for h in 0..2 {
                let to = Addr::Ipv4(ipv4(1 - h));
                ds[h]
                    .stack_mut()
                    .ep
                    .send_datagram(DatagramKind::Utp, to, token, dgram_len(token))
                    .expect("send_datagram");
                sent[h].push((now, token));
                token += 1;
            }
        }
        for d in ds.iter_mut() {
            d.poll(f, now);
        }
        f.step(now);
    };
    now = now.next_multiple_of(SEND_EVERY_NS);
    let start = now;
    while now < start + PHASE_NS {
        step(&mut f, &mut ds, now, true);
        now += DT;
    }
    link_cmd(&mut f, &format!("vm{down_host}.1"), false, now);
    let seen_down = loop {
        step(&mut f, &mut ds, now, true);
        now += DT;
        if ds[down_host].ports[1].link.state() != DllState::Normal {
            break now;
        }
        assert!(
            now < start + 2 * PHASE_NS,
            "the driver never saw the link down"
        );
    };
    let end = seen_down + PHASE_NS;
    while now < end {
        step(&mut f, &mut ds, now, true);
        now += DT;
    }
    while now < end + DRAIN_NS {
        step(&mut f, &mut ds, now, false);
        now += DT;
    }
    drop(step);
    let got = [received(&ds[1]), received(&ds[0])];
    let switch_drops = f
        .switches
        .iter()
        .map(|s| (s.counters.no_route, s.counters.link_down_drops))
        .collect();
    Run {
        sent,
        got,
        seen_down,
        switch_drops,
    }
}

/// Checks a run: nothing lost before the link went down, at most what
/// was in flight around it, nothing sent after the driver saw it.
fn check(down_host: usize) {
    let r = run(down_host);
    for h in 0..2 {
        let lost: Vec<(u64, u64)> = r.sent[h]
            .iter()
            .copied()
            .filter(|(_, t)| !r.got[h].contains(t))
            .collect();
        let total = r.sent[h].len();
        let after: Vec<_> = lost.iter().filter(|(at, _)| *at >= r.seen_down).collect();
        assert!(
            after.is_empty(),
            "vm{down_host}.1 down: host {h} → host {}: {} of {total} datagrams lost, {} of them \
             sent after the driver saw the link down at {} ns (first {:?}); switches \
             (no_route, link_down_drops): {:?}",
            1 - h,
            lost.len(),
            after.len(),
            r.seen_down,
            after.first(),
            r.switch_drops
        );
        // What was in flight: sent within 100 µs before the driver saw it.
        let in_flight = r.sent[h]
            .iter()
            .filter(|(at, _)| *at + 100_000 >= r.seen_down && *at < r.seen_down)
            .count();
        assert!(
            lost.len() <= in_flight,
            "vm{down_host}.1 down: host {h}: {} lost, more than the {in_flight} in flight: {lost:?}",
            lost.len()
        );
        assert!(total > 500, "too little traffic: {total}");
    }
}

#[test]
fn vm0_port1_down_loses_only_what_was_in_flight() {
    check(0);
}

#[test]
fn vm1_port1_down_loses_only_what_was_in_flight() {
    check(1);
}
