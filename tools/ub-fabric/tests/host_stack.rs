// SPDX-License-Identifier: GPL-2.0
//! The real host stack end to end on the emulated fabric: one
//! `ub_proto::host` endpoint per host, over the link engine on each of its
//! controller's ports, through the switches of the default topology
//! (two hosts, two ports each, two switch planes). RTP channels carry
//! messages both ways at once over links with bit errors (repaired hop by
//! hop by link retry) and switches that drop packets (repaired end to end
//! by transport retransmission).

mod common;

use common::{bring_up, fabric, pattern, run_until, Driver};
use serde_json::Value;
use ub_fabric::fabric::{Command, Fabric};
use ub_fabric::topology::{addr, Topology};
use ub_proto::crc::crc32_le_portable;
use ub_proto::host::{
    Addr, ChannelConfig, ChannelCounters, EndpointConfig, Event, LoadBalance, LocalAddrs, RtoConfig,
};
use ub_proto::net::npi::{Npi, NpiMode};
use ub_proto::net::route::RouteEntry;
use ub_proto::transport::cm::{ChannelState, CmTiming};
use ub_proto::transport::RetransmitMode;

/// The four RTP retransmission combinations.
const COMBOS: [(RetransmitMode, bool); 4] = [
    (RetransmitMode::Selective, true),
    (RetransmitMode::GoBackN, true),
    (RetransmitMode::Selective, false),
    (RetransmitMode::GoBackN, false),
];

/// How long a run goes on after the last acknowledgement (4 RTOs).
const DRAIN_NS: u64 = 2_048_000;

/// Largest network packet: a 4 KiB MTU plus headers (one DLLDP carries
/// it).
const MAX_PACKET: u32 = 4096 + 128;

/// Channel `i`'s configuration for one combination. Each channel has its
/// own load-balancing key so that per-flow hashing spreads the channels
/// over both ports. Without fast retransmission the data packets are
/// sprayed (per packet, over both ports and every switch path).
fn channel(i: u16, mode: RetransmitMode, fast: bool, spray: bool) -> ChannelConfig {
    let mut c = ChannelConfig::default_rtp();
    c.mode = mode;
    c.fast_retransmit = fast;
    c.rx_slots = if mode == RetransmitMode::GoBackN && fast {
        0
    } else {
        256
    };
    c.lb_key = 49_152 + i;
    if spray && !fast {
        c.lb = LoadBalance::PerPacket { range_log2: 2 };
    }
    c.mtu = 4096;
    c.max_message = 1 << 17;
    // The smallest static level: a whole window of every channel may sit
    // in one port's queue (4 × 256 packets of 4 KiB take ~330 µs at
    // 100 Gb/s), so a shorter RTO would fire on a clean path.
    c.rto = RtoConfig::Static { timeout_us: 512 };
    c.retry_limit = 30;
    c
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
        max_packet: MAX_PACKET,
        max_channels: 8,
        max_routes: 2,
        max_groups: 1,
        datagram_queue: 4,
        cm: CmTiming {
            retry_ns: 200_000,
            max_tries: 20,
        },
        // The responder offers the strongest combination; negotiation
        // settles on the initiator's (the weaker of the two).
        accept: Some(channel(0, RetransmitMode::Selective, true, false)),
        hash_seed: 0x5eed + h as u64,
        icrc: crc32_le_portable,
    }
}

/// Host `h`'s IPv4 address: inside its /24, which the switches route to
/// any of its ports (only `.1` and `.2` name a single port).
fn ipv4(h: usize) -> [u8; 4] {
    let mut a = addr::ipv4_primary(h);
    a[3] = 100;
    a
}

/// The network header format of a run's channels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Format {
    /// 24-bit CNA NTH.
    Cna24,
    /// IPv4 and UDP (port 4792) with the NPI.
    Ipv4,
}

/// The other host's address in `format`: its primary 24-bit CNA or its
/// IPv4 address, to which packets may arrive on any of its ports.
fn peer(h: usize, format: Format) -> Addr {
    match format {
        Format::Cna24 => Addr::Cna24(addr::cna24_primary(1 - h)),
        Format::Ipv4 => Addr::Ipv4(ipv4(1 - h)),
    }
}

/// Attaches an endpoint to each driver, with one route to every 24-bit
/// CNA and one to every IPv4 address, both over both ports.
fn attach(ds: &mut [Driver], seed: u64) {
    for (h, d) in ds.iter_mut().enumerate() {
        d.attach_endpoint(endpoint_config(h), seed * 10 + h as u64);
        for width in [24, 32] {
            d.stack_mut()
                .ep
                .add_route(RouteEntry {
                    prefix: 0,
                    prefix_len: 0,
                    width,
                    ports: 0b11,
                    shortest: 0b11,
                })
                .expect("route");
        }
    }
}

/// Opens one channel per configuration from host 0; returns the TPN pairs
/// (host 0's, host 1's) once both ends are in RTS, and the time.
fn open(
    f: &mut Fabric,
    ds: &mut [Driver],
    now: u64,
    format: Format,
    cfgs: &[ChannelConfig],
) -> (Vec<(u32, u32)>, u64) {
    let tpns: Vec<u32> = cfgs
        .iter()
        .enumerate()
        .map(|(k, c)| {
            ds[0]
                .stack_mut()
                .ep
                .connect(now, peer(0, format), k as u32 + 1, *c)
                .expect("connect")
        })
        .collect();
    let t = run_until(f, ds, now, 1_000, now + 20_000_000, |_, ds| {
        tpns.iter().enumerate().all(|(k, &t)| {
            ds[0].stack().ep.state(t) == Some(ChannelState::Rts)
                && incoming(&ds[1], k as u32 + 1)
                    .is_some_and(|b| ds[1].stack().ep.state(b) == Some(ChannelState::Rts))
        })
    });
    let pairs = tpns
        .iter()
        .enumerate()
        .map(|(k, &a)| {
            let b = incoming(&ds[1], k as u32 + 1).expect("channel reached host 1");
            assert_eq!(
                ds[0].stack().ep.state(a),
                Some(ChannelState::Rts),
                "tpn {a}"
            );
            assert_eq!(
                ds[1].stack().ep.state(b),
                Some(ChannelState::Rts),
                "tpn {b}"
            );
            (a, b)
        })
        .collect();
    (pairs, t)
}

/// The TPN host `d` gave the channel named `key`.
fn incoming(d: &Driver, key: u32) -> Option<u32> {
    d.stack().events.iter().find_map(|(_, e)| match *e {
        Event::Incoming { tpn, key: k, .. } if k == key => Some(tpn),
        _ => None,
    })
}

/// Messages (token, length) of various sizes: 1 B, around the MTU,
/// several packets, up to 64 KiB, and seeded random sizes.
fn messages(seed: u64, tag: u64, n_random: usize) -> Vec<(u64, u32)> {
    let mut r = common::SplitMix(seed ^ tag.wrapping_mul(0x9e37));
    let mut v: Vec<u32> = vec![1, 2, 17, 4095, 4096, 4097, 12_288, 65_536];
    v.extend((0..n_random).map(|_| 1 + (r.next_u64() % 20_000) as u32));
    v.into_iter()
        .enumerate()
        .map(|(i, l)| (tag * 1000 + i as u64, l))
        .collect()
}

/// Workload of one run: per channel pair, what each host sends.
struct Plan {
    pairs: Vec<(u32, u32)>,
    sent: Vec<[Vec<(u64, u32)>; 2]>,
}

impl Plan {
    fn post(ds: &mut [Driver], pairs: Vec<(u32, u32)>, seed: u64, n_random: usize) -> Self {
        let mut sent = Vec::new();
        for (k, &(a, b)) in pairs.iter().enumerate() {
            let ma = messages(seed, 10 + 2 * k as u64, n_random);
            let mb = messages(seed, 11 + 2 * k as u64, n_random);
            ds[0].stack_mut().post(a, &ma);
            ds[1].stack_mut().post(b, &mb);
            sent.push([ma, mb]);
        }
        Self { pairs, sent }
    }

    /// Queues a second batch (other tokens) behind the first on every
    /// channel, both ways.
    fn post_more(&mut self, ds: &mut [Driver], seed: u64, n_random: usize) {
        for k in 0..self.pairs.len() {
            for (h, d) in ds.iter_mut().enumerate() {
                let m = messages(seed, 100 + 2 * k as u64 + h as u64, n_random);
                d.stack_mut().post(self.tpn(k, h), &m);
                self.sent[k][h].extend(m);
            }
        }
    }

    fn tpn(&self, k: usize, h: usize) -> u32 {
        if h == 0 {
            self.pairs[k].0
        } else {
            self.pairs[k].1
        }
    }

    /// Every message delivered on the receiving side and acknowledged on
    /// the sending side.
    fn done(&self, ds: &[Driver]) -> bool {
        (0..self.pairs.len()).all(|k| {
            (0..2).all(|h| {
                let want = self.sent[k][h].len();
                let rx = &ds[1 - h].stack().app;
                let got = rx.on_channel(self.tpn(k, 1 - h)).len();
                let tpn = self.tpn(k, h);
                let acked = ds[h]
                    .stack()
                    .count_events(|e| matches!(e, Event::MessageAcked { tpn: t, .. } if *t == tpn));
                got >= want && acked >= want
            })
        })
    }

    /// Whether a channel failed (the run can stop: `check` will say why).
    fn failed(&self, ds: &[Driver]) -> bool {
        ds.iter().any(|d| {
            d.stack()
                .count_events(|e| matches!(e, Event::ChannelError { .. }))
                > 0
        })
    }

    /// Exactly once, in order, intact, both ways; no channel error.
    fn check(&self, ds: &[Driver]) {
        for d in ds {
            let st = d.stack();
            assert!(st.app.errors.is_empty(), "{:?}", st.app.errors);
            let errs = st.count_events(|e| matches!(e, Event::ChannelError { .. }));
            assert_eq!(errs, 0, "host {}: channel errors", d.host);
        }
        for k in 0..self.pairs.len() {
            for h in 0..2 {
                let want = &self.sent[k][h];
                let rx_tpn = self.tpn(k, 1 - h);
                let got = ds[1 - h].stack().app.on_channel(rx_tpn);
                assert_eq!(
                    got.len(),
                    want.len(),
                    "channel {k}, host {h} -> {}: exactly once",
                    1 - h
                );
                for (i, ((tpmsn, bytes), &(token, len))) in got.iter().zip(want).enumerate() {
                    assert_eq!(*tpmsn as usize, i, "channel {k}: in order");
                    assert_eq!(bytes.len(), len as usize, "channel {k} message {i}: length");
                    let bad = (0..len).find(|&o| bytes[o as usize] != pattern(token, o));
                    assert_eq!(bad, None, "channel {k} message {i}: intact");
                }
                let acked = ds[h].stack().count_events(
                    |e| matches!(e, Event::MessageAcked { tpn, .. } if *tpn == self.tpn(k, h)),
                );
                assert_eq!(acked, want.len(), "channel {k}, host {h}: each acked once");
            }
        }
    }

    /// Channel counters of pair `k` at host `h`.
    fn counters(&self, ds: &[Driver], k: usize, h: usize) -> ChannelCounters {
        ds[h]
            .stack()
            .ep
            .counters(self.tpn(k, h))
            .expect("channel exists")
    }
}

/// Every channel error, per host.
fn errors(ds: &[Driver]) -> Vec<(usize, u64, Event)> {
    ds.iter()
        .flat_map(|d| {
            d.stack()
                .events
                .iter()
                .filter(|(_, e)| matches!(e, Event::ChannelError { .. }))
                .map(|&(t, e)| (d.host, t, e))
        })
        .collect()
}

fn retransmissions(c: &ChannelCounters) -> u64 {
    c.rtx_fast + c.rtx_rto + c.rtx_mark_psn + c.rtx_go_back_n
}

fn link_cmd(f: &mut Fabric, link: &str, ber: Option<f64>, up: Option<bool>, now: u64) {
    f.apply(
        &Command::Link {
            link: link.into(),
            ber,
            fec_fail: None,
            delay_ns: None,
            rate_fps: None,
            up,
            flap: false,
            npi_ingress: None,
            npi_egress: None,
        },
        now,
    )
    .expect("link command");
}

/// Faults of a run: BER on every link, injected faults at every switch.
#[derive(Clone, Copy, Debug, Default)]
struct Faults {
    ber: f64,
    drop: f64,
    duplicate: f64,
    reorder: f64,
    corrupt: f64,
}

impl Faults {
    /// BER `ber` on every link and `drop` at every switch.
    fn ber_and_drops(ber: f64, drop: f64) -> Self {
        Self {
            ber,
            drop,
            ..Self::default()
        }
    }

    fn apply(&self, f: &mut Fabric, now: u64) {
        let ends: Vec<String> = f.topology().links.iter().map(|l| l.a.clone()).collect();
        for e in &ends {
            link_cmd(f, e, Some(self.ber), None, now);
        }
        let names: Vec<String> = f
            .topology()
            .switches
            .iter()
            .map(|s| s.name.clone())
            .collect();
        for switch in names {
            f.apply(
                &Command::Switch {
                    switch,
                    drop: Some(self.drop),
                    corrupt: Some(self.corrupt),
                    reorder: Some(self.reorder),
                    duplicate: Some(self.duplicate),
                },
                now,
            )
            .expect("switch command");
        }
    }
}

/// Link-level retries: retry requests sent by switch ports and by the
/// hosts' link engines.
fn link_retries(f: &Fabric, ds: &[Driver]) -> u64 {
    let v = f.counters();
    let mut total = 0;
    for s in v["switches"].as_array().into_iter().flatten() {
        for p in s["ports"].as_array().into_iter().flatten() {
            total += p["link"]["retry_requests"].as_u64().unwrap_or(0);
        }
    }
    total
        + ds.iter()
            .flat_map(|d| d.ports.iter())
            .map(|p| p.link.counters().retry_req_sets)
            .sum::<u64>()
}

fn switch_counter(f: &Fabric, name: &str) -> u64 {
    let v: Value = f.counters();
    v["switches"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|s| s["counters"][name].as_u64().unwrap_or(0))
        .sum()
}

/// What a run leaves to check.
struct Outcome {
    f: Fabric,
    ds: Vec<Driver>,
    plan: Plan,
    /// End time, ns.
    t: u64,
    /// Link retries when the links came up (the DLL's bring-up exchanges
    /// one retry handshake per port).
    retries_at_start: u64,
}

/// One run of `cfgs` over `topo` with `faults`.
fn run(
    topo: &Topology,
    format: Format,
    faults: Faults,
    cfgs: &[ChannelConfig],
    n_random: usize,
) -> Outcome {
    let mut f = fabric(topo);
    let (mut ds, t0) = bring_up(&mut f);
    attach(&mut ds, topo.seed);
    // Faults from the channel setup on: the connection manager's
    // messages cross the same lossy switches.
    faults.apply(&mut f, t0);
    let retries_at_start = link_retries(&f, &ds);
    let (pairs, t1) = open(&mut f, &mut ds, t0, format, cfgs);
    let plan = Plan::post(&mut ds, pairs, topo.seed, n_random);
    let t = run_until(&mut f, &mut ds, t1, 1_000, t1 + 200_000_000, |_, ds| {
        plan.done(ds) || plan.failed(ds)
    });
    assert!(!plan.failed(&ds), "a channel failed: {:?}", errors(&ds));
    assert!(
        plan.done(&ds),
        "not every message delivered and acked by {t} ns"
    );
    // Run on past several RTOs so that a late duplicate would show.
    run_until(&mut f, &mut ds, t, 1_000, t + DRAIN_NS, |_, _| false);
    Outcome {
        f,
        ds,
        plan,
        t,
        retries_at_start,
    }
}

fn default_topo(seed: u64) -> Topology {
    let mut topo = Topology::builtin("default").expect("default");
    topo.seed = seed;
    topo
}

/// Prints the counters; returns (link retries, transport retransmissions)
/// of the data phase.
fn report(label: &str, o: &Outcome) -> (u64, u64) {
    let (f, ds, plan, t) = (&o.f, &o.ds[..], &o.plan, o.t);
    let retries = link_retries(f, ds) - o.retries_at_start;
    let mut rtx = 0;
    for k in 0..plan.pairs.len() {
        for h in 0..2 {
            let c = plan.counters(ds, k, h);
            rtx += retransmissions(&c);
            eprintln!(
                "{label}: channel {k} host {h}: {} pkts, rtx fast {} rto {} mark {} gbn {}, \
                 ack/nak/sack sent {}/{}/{} received {}/{}/{}, rto expiries {}",
                c.tx_packets,
                c.rtx_fast,
                c.rtx_rto,
                c.rtx_mark_psn,
                c.rtx_go_back_n,
                c.tpack_sent,
                c.tpnak_sent,
                c.tpsack_sent,
                c.tpack_rcvd,
                c.tpnak_rcvd,
                c.tpsack_rcvd,
                c.rto_expiries
            );
        }
    }
    eprintln!(
        "{label}: done at {} us; link retries {retries}, switch drops {}, transport rtx {rtx}; \
         per port tx {:?} / {:?}",
        t / 1000,
        switch_counter(f, "injected_drops"),
        ds[0].stack().tx_per_port,
        ds[1].stack().tx_per_port,
    );
    (retries, rtx)
}

/// Acceptance 3 of issue 8: endpoint + link over the default topology at
/// BER 1e-5 on every link plus 1 % switch drops, all four RTP
/// combinations both ways at once.
#[test]
fn rtp_is_exactly_once_over_ber_and_switch_drops() {
    let cfgs: Vec<ChannelConfig> = COMBOS
        .iter()
        .enumerate()
        .map(|(i, &(m, fast))| channel(i as u16, m, fast, true))
        .collect();
    let o = run(
        &default_topo(3),
        Format::Cna24,
        Faults::ber_and_drops(1e-5, 0.01),
        &cfgs,
        40,
    );
    o.plan.check(&o.ds);
    let (retries, rtx) = report("BER 1e-5 + 1% drops", &o);
    let (f, ds, plan) = (&o.f, &o.ds, &o.plan);
    assert!(retries > 0, "the links repaired bit errors by retry");
    assert!(switch_counter(f, "injected_drops") > 0);
    assert!(rtx > 0, "the transport repaired switch drops");
    for (k, &(m, fast)) in COMBOS.iter().enumerate() {
        let r: u64 = (0..2)
            .map(|h| retransmissions(&plan.counters(ds, k, h)))
            .sum();
        assert!(r > 0, "{m:?} fast={fast}: some loss was retransmitted");
    }
    let icrc: u64 = ds
        .iter()
        .map(|d| d.stack().ep.net_counters().icrc_drops)
        .sum();
    assert_eq!(icrc, 0, "the links let no corrupted packet through");
}

/// The same over the IP format (IPv4, UDP 4792, NPI): the switches route
/// on the IPv4 destination, the endpoints check the NPI.
#[test]
fn rtp_over_ipv4_through_the_fabric() {
    let cfgs: Vec<ChannelConfig> = COMBOS[..2]
        .iter()
        .enumerate()
        .map(|(i, &(m, fast))| channel(i as u16, m, fast, true))
        .collect();
    let o = run(
        &default_topo(4),
        Format::Ipv4,
        Faults::ber_and_drops(1e-5, 0.01),
        &cfgs,
        40,
    );
    o.plan.check(&o.ds);
    let (retries, rtx) = report("IPv4, BER 1e-5 + 1% drops", &o);
    assert!(retries > 0 && rtx > 0);
    for d in &o.ds {
        let n = d.stack().ep.net_counters();
        assert_eq!((n.icrc_drops, n.npi_drops, n.malformed), (0, 0, 0));
    }
}

/// Every fault a switch can inject at once (drops, duplicates, reordering,
/// corruption after the header) on top of BER 1e-5: the endpoints drop
/// the corrupted packets on their ICRC, ignore the duplicates and put the
/// reordered ones back in order.
#[test]
fn rtp_survives_every_switch_fault() {
    let cfgs: Vec<ChannelConfig> = COMBOS
        .iter()
        .enumerate()
        .map(|(i, &(m, fast))| channel(i as u16, m, fast, true))
        .collect();
    let faults = Faults {
        ber: 1e-5,
        drop: 0.01,
        duplicate: 0.01,
        reorder: 0.01,
        corrupt: 0.01,
    };
    let o = run(&default_topo(6), Format::Cna24, faults, &cfgs, 24);
    o.plan.check(&o.ds);
    let (_, rtx) = report("every switch fault", &o);
    assert!(rtx > 0);
    let corrupted = switch_counter(&o.f, "injected_corruptions");
    let icrc: u64 =
        o.ds.iter()
            .map(|d| d.stack().ep.net_counters().icrc_drops)
            .sum();
    eprintln!(
        "every switch fault: {corrupted} corrupted, {} duplicated, {} reordered; \
         {icrc} ICRC drops at the endpoints",
        switch_counter(&o.f, "injected_duplicates"),
        switch_counter(&o.f, "injected_reorders"),
    );

    let dups = switch_counter(&o.f, "injected_duplicates");
    assert!(corrupted > 0 && dups > 0);
    // A corrupted packet may be duplicated after it (two ICRC drops), or
    // dropped by the next switch on a two-switch path (none).
    assert!(
        icrc > 0 && icrc <= corrupted + dups,
        "corrupted packets are dropped on their ICRC"
    );
}

/// Without faults nothing is retransmitted, by the link or the transport.
#[test]
fn clean_path_needs_no_retransmission() {
    let cfgs: Vec<ChannelConfig> = COMBOS
        .iter()
        .enumerate()
        .map(|(i, &(m, fast))| channel(i as u16, m, fast, false))
        .collect();
    let o = run(&default_topo(5), Format::Cna24, Faults::default(), &cfgs, 6);
    o.plan.check(&o.ds);
    let (retries, rtx) = report("clean", &o);
    let (ds, plan) = (&o.ds, &o.plan);
    assert_eq!(retries, 0, "no link retry");
    assert_eq!(rtx, 0, "no transport retransmission");
    for k in 0..plan.pairs.len() {
        for h in 0..2 {
            let c = plan.counters(ds, k, h);
            assert_eq!(c.rto_expiries, 0, "channel {k} host {h}: no RTO");
            assert!(c.tx_packets > 0);
        }
    }
    // Four channels per host, accepted ones included, spread over both
    // ports: accepted channels get a load-balancing key of their own.
    for (h, d) in ds.iter().enumerate() {
        let per_port = &d.stack().tx_per_port;
        assert!(
            per_port.iter().all(|&n| n > 0),
            "host {h} sends on every port: {per_port:?}"
        );
    }
    for d in ds {
        let n = d.stack().ep.net_counters();
        assert_eq!(
            (
                n.icrc_drops,
                n.malformed,
                n.no_route_drops,
                n.unknown_channel
            ),
            (0, 0, 0, 0)
        );
    }
}

/// Plane 0 fails mid-run (both hosts' port 0 go down): the drivers mark
/// the port down in their endpoints, routing moves every channel to
/// port 1 and the transport retransmits what died with the plane. When
/// the plane comes back, port 0 carries traffic again. Two
/// independent planes (no inter-switch link): the fabric's switch routes
/// are static, so a path through the dead plane would stay a black hole.
#[test]
fn traffic_moves_to_the_other_plane_when_a_port_goes_down_and_back() {
    let mut topo = default_topo(9);
    topo.links.retain(|l| !l.a.starts_with("sw"));
    let cfgs: Vec<ChannelConfig> = (0..4)
        .map(|i| {
            let (m, fast) = COMBOS[i % 2];
            channel(i as u16, m, fast, false)
        })
        .collect();
    let mut f = fabric(&topo);
    let (mut ds, t0) = bring_up(&mut f);
    attach(&mut ds, topo.seed);
    let (pairs, t1) = open(&mut f, &mut ds, t0, Format::Cna24, &cfgs);
    let plan = Plan::post(&mut ds, pairs, topo.seed, 24);
    // Run until about a third of host 0's messages are acknowledged.
    let total: usize = plan.sent.iter().map(|s| s[0].len()).sum();
    let t2 = run_until(&mut f, &mut ds, t1, 1_000, t1 + 50_000_000, |_, ds| {
        ds[0]
            .stack()
            .count_events(|e| matches!(e, Event::MessageAcked { .. }))
            >= total / 3
    });
    assert!(!plan.done(&ds), "the failure comes mid-run");
    for d in &ds {
        let h = d.host;
        assert!(d.stack().tx_per_port[0] > 0, "host {h} used port 0 before");
    }
    link_cmd(&mut f, "vm0.0", None, Some(false), t2);
    link_cmd(&mut f, "vm1.0", None, Some(false), t2);
    // The drivers see the PHY link drop at their next poll.
    let t3 = run_until(&mut f, &mut ds, t2, 1_000, t2 + 10_000, |_, _| false);
    let at_down = [
        ds[0].stack().tx_per_port.clone(),
        ds[1].stack().tx_per_port.clone(),
    ];
    let t = run_until(&mut f, &mut ds, t3, 1_000, t3 + 200_000_000, |_, ds| {
        plan.done(ds) || plan.failed(ds)
    });
    assert!(!plan.failed(&ds), "a channel failed: {:?}", errors(&ds));
    assert!(plan.done(&ds), "not every message delivered by {t} ns");
    run_until(&mut f, &mut ds, t, 1_000, t + DRAIN_NS, |_, _| false);
    plan.check(&ds);
    let o = Outcome {
        f,
        ds,
        plan,
        t,
        retries_at_start: 0,
    };
    let (_, rtx) = report("plane 0 down", &o);
    let ds = &o.ds;
    for h in 0..2 {
        let now = &ds[h].stack().tx_per_port;
        assert_eq!(now[0], at_down[h][0], "host {h}: nothing more on port 0");
        assert!(
            now[1] > at_down[h][1],
            "host {h}: traffic went on over port 1"
        );
    }
    assert!(rtx > 0, "what died with the plane was retransmitted");

    // Plane 0 comes back: once the DLLs are up again the drivers mark
    // port 0 up and per-flow routing may use it again.
    let Outcome {
        mut f,
        mut ds,
        mut plan,
        t,
        ..
    } = o;
    link_cmd(&mut f, "vm0.0", None, Some(true), t);
    link_cmd(&mut f, "vm1.0", None, Some(true), t);
    let t4 = run_until(&mut f, &mut ds, t, 1_000, t + 2_000_000, |_, ds| {
        ds.iter().all(Driver::all_up)
    });
    assert!(ds.iter().all(Driver::all_up), "plane 0 back up by {t4} ns");
    let at_up = [
        ds[0].stack().tx_per_port.clone(),
        ds[1].stack().tx_per_port.clone(),
    ];
    plan.post_more(&mut ds, topo.seed, 24);
    let t5 = run_until(&mut f, &mut ds, t4, 1_000, t4 + 200_000_000, |_, ds| {
        plan.done(ds) || plan.failed(ds)
    });
    assert!(!plan.failed(&ds), "a channel failed: {:?}", errors(&ds));
    assert!(plan.done(&ds), "second batch not delivered by {t5} ns");
    run_until(&mut f, &mut ds, t5, 1_000, t5 + DRAIN_NS, |_, _| false);
    plan.check(&ds);
    let on_port0: u64 = ds
        .iter()
        .zip(&at_up)
        .map(|(d, before)| d.stack().tx_per_port[0] - before[0])
        .sum();
    eprintln!(
        "plane 0 back: second batch done at {} us, {on_port0} packets on port 0 since",
        t5 / 1000
    );
    assert!(on_port0 > 0, "port 0 carries traffic again");
}
