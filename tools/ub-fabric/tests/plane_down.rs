// SPDX-License-Identifier: GPL-2.0
//! One plane's cable pulled under sprayed UTP datagrams: the guests' ping
//! setup of the default topology (IPv4 10.0.(h+1).100, one route
//! 10.0.0.0/16 over both ports with per-packet spraying) while `vmH.1` is
//! down at the fabric. Only what was in flight may be lost: once the
//! driver saw the link down, every datagram either way arrives, the
//! switches carrying those for the host whose port is down over the
//! inter-switch link (sw1 → sw1.2 → sw0 → host port 0). Once the driver
//! saw the link up again, nothing is lost either (the switch does not
//! use the port before its DLL is in Normal) and the port carries its
//! share again.

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
/// Traffic in each phase: before the link goes down, after the driver
/// saw it down, after it saw it up again.
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
            npi_ingress: None,
            npi_egress: None,
        },
        now,
    )
    .expect("link command");
}

/// The datagrams both hosts send, one each way every [`SEND_EVERY_NS`].
#[derive(Default)]
struct Traffic {
    /// Per sender: (send time, token).
    sent: [Vec<(u64, u64)>; 2],
    next: u64,
}

impl Traffic {
    /// One step of the drivers and the fabric, sending first if `send`.
    fn step(&mut self, f: &mut Fabric, ds: &mut [Driver], now: u64, send: bool) {
        if send && now % SEND_EVERY_NS == 0 {
            for (h, d) in ds.iter_mut().enumerate() {
                let to = Addr::Ipv4(ipv4(1 - h));
                let token = self.next;
                d.stack_mut()
                    .ep
                    .send_datagram(DatagramKind::Utp, to, token, dgram_len(token))
                    .expect("send_datagram");
                self.sent[h].push((now, token));
                self.next += 1;
            }
        }
        for d in ds.iter_mut() {
            d.poll(f, now);
        }
        f.step(now);
    }

    /// Steps until `until` ns; returns the time reached.
    fn run(
        &mut self,
        f: &mut Fabric,
        ds: &mut [Driver],
        mut now: u64,
        until: u64,
        send: bool,
    ) -> u64 {
        while now < until {
            self.step(f, ds, now, send);
            now += DT;
        }
        now
    }

    /// Steps (sending) until the driver of `host` sees its port `port`'s
    /// DLL in Normal (`normal`) or out of it; returns that time.
    fn until_dll(
        &mut self,
        f: &mut Fabric,
        ds: &mut [Driver],
        mut now: u64,
        (host, port): (usize, usize),
        normal: bool,
    ) -> u64 {
        let limit = now + PHASE_NS;
        loop {
            self.step(f, ds, now, true);
            now += DT;
            if (ds[host].ports[port].link.state() == DllState::Normal) == normal {
                return now;
            }
            assert!(
                now < limit,
                "the driver never saw host {host} port {port} change"
            );
        }
    }
}

/// Checks what arrived of the datagrams sent in `[from, to)`: at most
/// those sent in the 100 µs before `from` (in flight when the driver saw
/// the change) lost, none sent from `from` on.
fn check_window(
    what: &str,
    t: &Traffic,
    got: &[BTreeSet<u64>; 2],
    from: u64,
    to: u64,
    switches: &str,
) {
    for (h, (sent, got)) in t.sent.iter().zip(got).enumerate() {
        let window: Vec<(u64, u64)> = sent
            .iter()
            .copied()
            .filter(|&(at, _)| at + 100_000 >= from && at < to)
            .collect();
        let lost: Vec<(u64, u64)> = window
            .iter()
            .copied()
            .filter(|(_, token)| !got.contains(token))
            .collect();
        let after: Vec<_> = lost.iter().filter(|(at, _)| *at >= from).collect();
        assert!(
            after.is_empty(),
            "{what}: host {h} → host {}: {} of {} datagrams lost, {} of them sent after the \
             driver saw it at {from} ns (first {:?}); switches {switches}",
            1 - h,
            lost.len(),
            window.len(),
            after.len(),
            after.first(),
        );
        assert!(window.len() > 250, "too little traffic: {}", window.len());
    }
}

/// Host `down_host` takes its port 1 down at the fabric while both hosts
/// send one UTP datagram to the other every [`SEND_EVERY_NS`], then up
/// again.
fn check(down_host: usize) {
    let topo = Topology::builtin("default").expect("default");
    let mut f = fabric(&topo);
    let (mut ds, now) = bring_up(&mut f);
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
    let mut t = Traffic::default();
    let start = now.next_multiple_of(SEND_EVERY_NS);
    let mut now = t.run(&mut f, &mut ds, start, start + PHASE_NS, true);
    let link = format!("vm{down_host}.1");
    let down_at = now;
    link_cmd(&mut f, &link, false, now);
    let seen_down = t.until_dll(&mut f, &mut ds, now, (down_host, 1), false);
    now = t.run(&mut f, &mut ds, seen_down, seen_down + PHASE_NS, true);
    let rx_port1_down = ds[down_host].stack().rx_per_port[1];
    link_cmd(&mut f, &link, true, now);
    let seen_up = t.until_dll(&mut f, &mut ds, now, (down_host, 1), true);
    now = t.run(&mut f, &mut ds, seen_up, seen_up + PHASE_NS, true);
    let end = now;
    t.run(&mut f, &mut ds, now, now + DRAIN_NS, false);
    let got = [received(&ds[1]), received(&ds[0])];
    let switches = format!(
        "(no_route, link_down_drops): {:?}",
        f.switches
            .iter()
            .map(|s| (s.counters.no_route, s.counters.link_down_drops))
            .collect::<Vec<_>>()
    );
    check_window("before", &t, &got, start + 100_000, down_at, &switches);
    check_window(
        &format!("{link} down"),
        &t,
        &got,
        seen_down,
        seen_up,
        &switches,
    );
    check_window(
        &format!("{link} up again"),
        &t,
        &got,
        seen_up,
        end,
        &switches,
    );
    // Back up, the port carries its share again.
    assert!(
        ds[down_host].stack().rx_per_port[1] > rx_port1_down + 50,
        "{link} up again: the port received {} packets",
        ds[down_host].stack().rx_per_port[1] - rx_port1_down
    );
}

#[test]
fn vm0_port1_down_loses_only_what_was_in_flight() {
    check(0);
}

#[test]
fn vm1_port1_down_loses_only_what_was_in_flight() {
    check(1);
}
