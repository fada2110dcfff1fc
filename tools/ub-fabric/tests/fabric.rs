// SPDX-License-Identifier: GPL-2.0
//! Host integration tests: the driver double drives controllers through
//! their registers and DMA rings over the built-in topologies.

mod common;

use common::{bring_up, fabric, run_until, Driver};
use serde_json::Value;
use ub_fabric::fabric::{Command, Fabric};
use ub_fabric::topology::Topology;

fn set_ber_everywhere(f: &mut Fabric, ber: f64) {
    let names: Vec<String> = f.topology().links.iter().map(|l| l.a.clone()).collect();
    for link in names {
        f.apply(
            &Command::Link {
                link,
                ber: Some(ber),
                fec_fail: None,
                delay_ns: None,
                rate_fps: None,
                up: None,
                flap: false,
                npi_ingress: None,
                npi_egress: None,
            },
            0,
        )
        .expect("link command");
    }
}

fn sum(v: &Value, pick: &dyn Fn(&Value) -> Option<u64>) -> u64 {
    let mut total = 0;
    if let Some(sw) = v["switches"].as_array() {
        for s in sw {
            for p in s["ports"].as_array().into_iter().flatten() {
                total += pick(p).unwrap_or(0);
            }
        }
    }
    total
}

/// Sends `n` packets per port from vm0 to vm1 (port CNAs: port 0 over
/// plane 0, port 1 over plane 1), returns the drivers, the fabric and
/// the end time.
fn two_plane_traffic(seed: u64, ber: f64, n: u32) -> (Fabric, Vec<Driver>, u64) {
    let mut topo = Topology::builtin("default").expect("default");
    topo.seed = seed;
    let mut f = fabric(&topo);
    set_ber_everywhere(&mut f, ber);
    let (mut ds, t0) = bring_up(&mut f);
    ds[0].send(0, 1, Some(0), 1, n, 200, 0);
    ds[0].send(1, 1, Some(1), 2, n, 200, 0);
    let want = 2 * n as usize;
    let t = run_until(&mut f, &mut ds, t0, 1_000, t0 + 50_000_000, |_, ds| {
        ds[1].received() >= want
    });
    (f, ds, t)
}

fn in_order(got: &[(u16, u32)], flow: u16) -> Vec<u32> {
    got.iter()
        .filter(|(f, _)| *f == flow)
        .map(|(_, s)| *s)
        .collect()
}

#[test]
fn ids_and_registers_after_probe() {
    let topo = Topology::builtin("default").expect("default");
    let mut f = fabric(&topo);
    let (ds, _) = bring_up(&mut f);
    assert_eq!(ds.len(), 2);
    let c = f.hosts[0].ctrl.port_counters(0).expect("port");
    assert!(c.interrupts > 0, "link-up raised an MSI-X message");
}

#[test]
fn ber_is_repaired_hop_by_hop() {
    let n = 300;
    let (f, ds, t) = two_plane_traffic(7, 1e-5, n);
    let rx = &ds[1];
    let got: Vec<(u16, u32)> = rx.ports.iter().flat_map(|p| p.sink.got.clone()).collect();
    for flow in [1u16, 2] {
        let seqs = in_order(&got, flow);
        assert_eq!(
            seqs,
            (0..n).collect::<Vec<_>>(),
            "flow {flow}: zero loss, in order"
        );
    }
    let v = f.counters();
    let retries = sum(&v, &|p| p["link"]["retry_requests"].as_u64());
    let crc = sum(&v, &|p| p["link"]["crc_errors"].as_u64());
    let driver_retries: u64 = ds
        .iter()
        .flat_map(|d| d.ports.iter())
        .map(|p| p.link.counters().retry_req_sets)
        .sum();
    let flips: u64 = v["links"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|l| {
            l["a_to_b"]["bit_flips"].as_u64().unwrap_or(0)
                + l["b_to_a"]["bit_flips"].as_u64().unwrap_or(0)
        })
        .sum();
    eprintln!(
        "BER 1e-5: {} packets in {} us; {flips} bit flips, switch CRC errors {crc}, \
         switch retry requests {retries}, driver retry requests {driver_retries}",
        2 * n,
        t / 1000
    );
    assert!(flips > 0);
    assert!(retries + driver_retries > 0, "link-level retries happened");
    let icrc: u64 = rx.ports.iter().map(|p| p.sink.icrc_errors).sum();
    assert_eq!(icrc, 0, "no corrupted packet reached the endpoint");
}

#[test]
fn switch_drops_reach_the_endpoints_as_loss() {
    let topo = Topology::builtin("default").expect("default");
    let mut f = fabric(&topo);
    f.apply(
        &Command::Switch {
            switch: "sw0".into(),
            drop: Some(0.05),
            corrupt: None,
            reorder: None,
            duplicate: None,
        },
        0,
    )
    .expect("switch command");
    let (mut ds, t0) = bring_up(&mut f);
    let n = 400;
    ds[0].send(0, 1, Some(0), 1, n, 100, 0);
    run_until(&mut f, &mut ds, t0, 1_000, t0 + 20_000_000, |_, ds| {
        ds[0].queued() == 0
    });
    // Let the tail drain.
    let t = run_until(
        &mut f,
        &mut ds,
        t0 + 20_000_000,
        1_000,
        t0 + 20_200_000,
        |_, _| false,
    );
    let got = ds[1].received() as u64;
    let v = f.counters();
    let drops = v["switches"][0]["counters"]["injected_drops"]
        .as_u64()
        .expect("drops");
    eprintln!("drop 5%: sent {n}, received {got}, switch dropped {drops} (t={t})");
    assert!(drops > 0);
    assert_eq!(
        got + drops,
        u64::from(n),
        "every drop is a loss at the endpoint"
    );
}

#[test]
fn runs_are_reproducible_from_the_seed() {
    let (a, _, ta) = two_plane_traffic(11, 1e-5, 100);
    let (b, _, tb) = two_plane_traffic(11, 1e-5, 100);
    let (c, _, _) = two_plane_traffic(12, 1e-5, 100);
    assert_eq!(ta, tb);
    assert_eq!(a.counters(), b.counters(), "same seed, same counters");
    assert_ne!(
        a.counters()["links"],
        c.counters()["links"],
        "other seed differs"
    );
}

#[test]
fn per_packet_spraying_uses_all_paths_per_flow_keeps_one() {
    let topo = Topology::builtin("default").expect("default");
    let mut f = fabric(&topo);
    let (mut ds, t0) = bring_up(&mut f);
    // To vm1's primary CNA, RT = 01 (per packet, all paths): sw0 sprays
    // between its port to vm1 and the inter-switch link.
    ds[0].send(0, 1, None, 1, 200, 64, 0b01);
    // RT = 00 (per flow): one path for the whole flow.
    ds[0].send(0, 1, None, 2, 200, 64, 0b00);
    let t = run_until(&mut f, &mut ds, t0, 1_000, t0 + 20_000_000, |_, ds| {
        ds[1].received() >= 400
    });
    assert_eq!(ds[1].received(), 400, "all delivered by t={t}");
    let v = f.counters();
    assert!(v["switches"][0]["counters"]["sprayed"].as_u64() >= Some(200));
    let sw1 = v["switches"][1]["counters"]["forwarded"]
        .as_u64()
        .unwrap_or(0);
    assert!(sw1 > 0, "some sprayed packets took the longer path via sw1");
    // Per-flow packets all arrive on one port, in order.
    let on_port: Vec<usize> = ds[1]
        .ports
        .iter()
        .map(|p| p.sink.got.iter().filter(|(fl, _)| *fl == 2).count())
        .collect();
    assert!(on_port.contains(&200), "flow 2 used one path: {on_port:?}");
    for p in &ds[1].ports {
        let s = in_order(&p.sink.got, 2);
        assert!(s.windows(2).all(|w| w[0] < w[1]));
    }
}

#[test]
fn back_to_back_link_with_bit_errors() {
    let topo = Topology::builtin("back-to-back").expect("b2b");
    let mut f = fabric(&topo);
    set_ber_everywhere(&mut f, 1e-5);
    let (mut ds, t0) = bring_up(&mut f);
    ds[0].send(0, 1, Some(0), 9, 300, 300, 0);
    ds[1].send(0, 0, Some(0), 8, 300, 300, 0);
    run_until(&mut f, &mut ds, t0, 1_000, t0 + 30_000_000, |_, ds| {
        ds[0].received() >= 300 && ds[1].received() >= 300
    });
    assert_eq!(
        in_order(&ds[1].ports[0].sink.got, 9),
        (0..300).collect::<Vec<_>>()
    );
    assert_eq!(
        in_order(&ds[0].ports[0].sink.got, 8),
        (0..300).collect::<Vec<_>>()
    );
}

#[test]
fn link_flap_and_recovery() {
    let topo = Topology::builtin("default").expect("default");
    let mut f = fabric(&topo);
    let (mut ds, t0) = bring_up(&mut f);
    f.apply(
        &Command::Link {
            link: "vm0.0".into(),
            ber: None,
            fec_fail: None,
            delay_ns: None,
            rate_fps: None,
            up: None,
            flap: true,
            npi_ingress: None,
            npi_egress: None,
        },
        t0,
    )
    .expect("flap");
    let t1 = run_until(&mut f, &mut ds, t0, 1_000, t0 + 50_000, |_, _| false);
    assert!(!ds[0].ports[0].link.is_up(), "port 0 went down");
    assert!(ds[0].ports[1].link.is_up(), "port 1 untouched");
    let t2 = run_until(&mut f, &mut ds, t1, 1_000, t1 + 5_000_000, |_, ds| {
        ds[0].all_up()
    });
    assert!(ds[0].all_up(), "port 0 came back by {t2}");
    let c = f.hosts[0].ctrl.port_counters(0).expect("port");
    assert_eq!(c.link_downs, 1);
    ds[0].send(0, 1, Some(0), 3, 50, 64, 0);
    run_until(&mut f, &mut ds, t2, 1_000, t2 + 5_000_000, |_, ds| {
        ds[1].received() >= 50
    });
    assert_eq!(ds[1].received(), 50);
}

#[test]
fn fec_failures_are_reported_and_repaired() {
    let topo = Topology::builtin("back-to-back").expect("b2b");
    let mut f = fabric(&topo);
    f.apply(
        &Command::Link {
            link: "vm0.0".into(),
            ber: None,
            fec_fail: Some(2e-3),
            delay_ns: None,
            rate_fps: None,
            up: None,
            flap: false,
            npi_ingress: None,
            npi_egress: None,
        },
        0,
    )
    .expect("fec");
    let (mut ds, t0) = bring_up(&mut f);
    ds[0].send(0, 1, Some(0), 4, 300, 300, 0);
    run_until(&mut f, &mut ds, t0, 1_000, t0 + 30_000_000, |_, ds| {
        ds[1].received() >= 300
    });
    assert_eq!(
        in_order(&ds[1].ports[0].sink.got, 4),
        (0..300).collect::<Vec<_>>()
    );
    let c = f.hosts[1].ctrl.port_counters(0).expect("port");
    assert!(c.phy_fec_fails > 0 && c.rx_lost_flits > 0, "{c:?}");
}

#[test]
fn congestion_marks_fecn_at_the_bottleneck() {
    let topo = Topology::builtin("default").expect("default");
    let mut f = fabric(&topo);
    // vm1.0 becomes a slow link: sw0's egress toward it backs up.
    f.apply(
        &Command::Link {
            link: "vm1.0".into(),
            ber: None,
            fec_fail: None,
            delay_ns: None,
            rate_fps: Some(20e6),
            up: None,
            flap: false,
            npi_ingress: None,
            npi_egress: None,
        },
        0,
    )
    .expect("rate");
    let (mut ds, t0) = bring_up(&mut f);
    // Incast: both of vm0's ports send to vm1 port 0 (plane 1's traffic
    // crosses the inter-switch link).
    ds[0].send(0, 1, Some(0), 1, 400, 512, 0);
    ds[0].send(1, 1, Some(0), 2, 400, 512, 0);
    run_until(&mut f, &mut ds, t0, 1_000, t0 + 200_000_000, |_, ds| {
        ds[1].received() >= 800
    });
    assert_eq!(ds[1].received(), 800);
    let marked = f.counters()["switches"][0]["counters"]["marked"]
        .as_u64()
        .unwrap_or(0);
    let seen = ds[1].ports[0].sink.congested;
    eprintln!("incast over a 20 Mflit/s link: sw0 marked {marked}, receiver saw {seen} FECN marks");
    assert!(marked > 0 && seen > 0);
    // The rate register reports the new line rate.
    let rate = f.hosts[1].ctrl.read32(
        ub_proto::controller::port_reg(0, ub_proto::controller::PHY_FLIT_RATE::OFFSET)
            .expect("reg"),
    );
    assert_eq!(rate, 20_000);
}

#[test]
fn duplicates_and_reordering_reach_the_endpoints() {
    let topo = Topology::builtin("default").expect("default");
    let mut f = fabric(&topo);
    f.apply(
        &Command::Switch {
            switch: "sw0".into(),
            drop: None,
            corrupt: Some(0.02),
            reorder: Some(0.05),
            duplicate: Some(0.05),
        },
        0,
    )
    .expect("faults");
    let (mut ds, t0) = bring_up(&mut f);
    ds[0].send(0, 1, Some(0), 1, 400, 64, 0);
    run_until(&mut f, &mut ds, t0, 1_000, t0 + 20_000_000, |_, ds| {
        ds[0].queued() == 0
    });
    run_until(
        &mut f,
        &mut ds,
        t0 + 20_000_000,
        1_000,
        t0 + 20_200_000,
        |_, _| false,
    );
    let v = f.counters();
    let c = &v["switches"][0]["counters"];
    let dups = c["injected_duplicates"].as_u64().unwrap_or(0);
    let reorders = c["injected_reorders"].as_u64().unwrap_or(0);
    let corrupt = c["injected_corruptions"].as_u64().unwrap_or(0);
    let sink = &ds[1].ports[0].sink;
    let seqs = in_order(&sink.got, 1);
    let out_of_order = seqs.windows(2).filter(|w| w[1] < w[0]).count() as u64;
    eprintln!(
        "sw0 faults: {dups} duplicates, {reorders} reorders, {corrupt} corruptions; \
         receiver: {} good, {} ICRC errors, {out_of_order} out of order",
        seqs.len(),
        sink.icrc_errors
    );
    assert_eq!(
        sink.icrc_errors, corrupt,
        "every corruption caught by the ICRC"
    );
    assert_eq!(
        seqs.len() as u64 + corrupt,
        400 + dups,
        "duplicates arrive twice"
    );
    assert!(out_of_order > 0 && out_of_order <= reorders);
}
