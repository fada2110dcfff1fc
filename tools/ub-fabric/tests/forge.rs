// SPDX-License-Identifier: GPL-2.0
//! Forged RTP data packets (`Command::Forge`) against the real host stack:
//! one `ub_proto::host` endpoint per host over the link engines of its
//! ports (the driver double of `tests/common`), the default topology, an
//! RTP channel over IPv4 from host 1 to host 0. The forged packets are
//! queued at the switch port facing host 0, framed by that port's data link
//! engine and checked by host 0's link engine and endpoint like any other
//! packet: only the transport's peer check and PSN window may refuse them.

mod common;

use common::{bring_up, fabric, pattern, run_until, Driver};
use serde_json::Value;
use ub_fabric::fabric::{Command, Fabric};
use ub_fabric::topology::{addr, Topology};
use ub_proto::crc::crc32_le_portable;
use ub_proto::host::{Addr, ChannelConfig, EndpointConfig, Event, LocalAddrs, RtoConfig};
use ub_proto::net::npi::{Npi, NpiMode};
use ub_proto::net::route::RouteEntry;
use ub_proto::transport::cm::{ChannelState, CmTiming};
use ub_proto::transport::RetransmitMode;

/// Host `h`'s IPv4 address, inside the /24 the switches route to any of
/// its ports (as the guests' selftests configure it).
fn ipv4(h: usize) -> [u8; 4] {
    let mut a = addr::ipv4_primary(h);
    a[3] = 100;
    a
}

fn channel() -> ChannelConfig {
    let mut c = ChannelConfig::default_rtp();
    c.mode = RetransmitMode::Selective;
    c.fast_retransmit = true;
    c.rx_slots = 256;
    c.mtu = 4096;
    c.max_message = 1 << 17;
    c.rto = RtoConfig::Static { timeout_us: 512 };
    c.retry_limit = 30;
    c
}

fn endpoint_config(h: usize) -> EndpointConfig {
    EndpointConfig {
        local: LocalAddrs {
            cna16: None,
            cna24: None,
            ipv4: Some(ipv4(h)),
            ipv6: None,
            eid: h as u128,
        },
        npi_mode: NpiMode::Strict(Npi::DEFAULT),
        npi: Npi::DEFAULT,
        ports: 2,
        max_packet: 4096 + 128,
        max_channels: 4,
        max_routes: 1,
        max_groups: 1,
        datagram_queue: 4,
        cm: CmTiming {
            retry_ns: 200_000,
            max_tries: 20,
        },
        accept: Some(channel()),
        hash_seed: 0x5eed + h as u64,
        icrc: crc32_le_portable,
    }
}

/// Both hosts up with an endpoint each and a route to the fabric's IPv4
/// addresses over both ports; host 1 opens a channel to host 0. Returns
/// the fabric, the drivers, (host 0's TPN, host 1's TPN) and the time.
fn setup(seed: u64) -> (Fabric, Vec<Driver>, (u32, u32), u64) {
    let mut topo = Topology::builtin("default").expect("default");
    topo.seed = seed;
    let mut f = fabric(&topo);
    let (mut ds, t0) = bring_up(&mut f);
    for (h, d) in ds.iter_mut().enumerate() {
        d.attach_endpoint(endpoint_config(h), seed * 10 + h as u64);
        d.stack_mut()
            .ep
            .add_route(RouteEntry {
                prefix: 0,
                prefix_len: 0,
                width: 32,
                ports: 0b11,
                shortest: 0b11,
            })
            .expect("route");
    }
    let b = ds[1]
        .stack_mut()
        .ep
        .connect(t0, Addr::Ipv4(ipv4(0)), 113, channel())
        .expect("connect");
    let incoming = |d: &Driver| {
        d.stack().events.iter().find_map(|(_, e)| match *e {
            Event::Incoming { tpn, key: 113, .. } => Some(tpn),
            _ => None,
        })
    };
    let t = run_until(&mut f, &mut ds, t0, 1_000, t0 + 20_000_000, |_, ds| {
        ds[1].stack().ep.state(b) == Some(ChannelState::Rts)
            && incoming(&ds[0])
                .is_some_and(|a| ds[0].stack().ep.state(a) == Some(ChannelState::Rts))
    });
    let a = incoming(&ds[0]).expect("the channel reached host 0");
    assert_eq!(ds[0].stack().ep.state(a), Some(ChannelState::Rts));
    (f, ds, (a, b), t)
}

fn forge(f: &mut Fabric, now: u64, json: Value) -> Value {
    let cmd: Command = serde_json::from_value(json.clone()).expect("a forge command");
    let v = f.apply(&cmd, now).unwrap_or_else(|e| panic!("{json}: {e}"));
    assert_eq!(v["ok"], true, "{v}");
    v
}

/// Messages host 1 sends: enough packets that every armed forgery meets
/// one of the channel's packets on its way.
fn messages() -> Vec<(u64, u32)> {
    (0..40).map(|i| (1000 + i, 3000 + 977 * i as u32)).collect()
}

/// Every variant of issue 11's acceptance 6 at once, on a live channel:
/// a wrong source address, a wrong source TPN (both with the next PSN the
/// channel expects, so that only the peer check stands between them and
/// the reader), a packet built from its fields alone with a wrong source,
/// the peer's own packet with a PSN 2^22 ahead, and replays. Each is
/// counted where the endpoint says, nothing forged is delivered, and the
/// genuine stream arrives exactly once, in order, intact.
#[test]
fn forged_packets_are_counted_and_never_delivered() {
    let (mut f, mut ds, (a, b), t) = setup(11);
    let msgs = messages();
    ds[1].stack_mut().post(b, &msgs);
    // Armed before the stream: each fires on the channel's first packet
    // queued towards host 0 (on either port).
    for j in [
        serde_json::json!({"cmd": "forge", "port": "vm0", "dst_tpn": a,
                           "src": "10.0.9.100", "psn_ahead": 1, "count": 3}),
        serde_json::json!({"cmd": "forge", "port": "vm0", "dst_tpn": a,
                           "src_tpn": (b + 1) & 0xff_ffff, "psn_ahead": 1, "count": 2}),
        serde_json::json!({"cmd": "forge", "port": "vm0", "dst_tpn": a,
                           "psn_ahead": 1 << 22, "count": 2}),
        serde_json::json!({"cmd": "forge", "port": "vm0", "dst_tpn": a,
                           "replay": true, "count": 2}),
    ] {
        let v = forge(&mut f, t, j);
        assert!(v["armed"].is_object(), "{v}");
    }
    let v = f.counters();
    assert_eq!(v["forge"]["armed"].as_array().map(Vec::len), Some(4), "{v}");
    // One built from its fields alone, sent at once.
    let v = forge(
        &mut f,
        t,
        serde_json::json!({"cmd": "forge", "port": "vm0.1", "dst_tpn": a,
                           "src": "10.0.9.100", "dst": "10.0.1.100",
                           "src_tpn": b, "psn": 0, "count": 1}),
    );
    assert_eq!(v["injected"], 1, "{v}");
    let t = run_until(&mut f, &mut ds, t, 1_000, t + 200_000_000, |_, ds| {
        ds[0].stack().app.on_channel(a).len() >= msgs.len()
    });
    run_until(&mut f, &mut ds, t, 1_000, t + 4_000_000, |_, _| false);

    let v = f.counters();
    assert_eq!(v["forge"]["armed"].as_array().map(Vec::len), Some(0), "{v}");
    assert_eq!(v["forge"]["counters"]["fired"], 4, "{v}");
    assert_eq!(v["forge"]["counters"]["injected"], 3 + 2 + 2 + 2 + 1, "{v}");
    assert_eq!(v["forge"]["counters"]["expired"], 0, "{v}");
    let st = ds[0].stack();
    let net = st.ep.net_counters();
    assert_eq!(net.wrong_peer, 3 + 2 + 1, "{net:?}");
    assert_eq!(
        (
            net.icrc_drops,
            net.malformed,
            net.npi_drops,
            net.not_for_us,
            net.unknown_channel
        ),
        (0, 0, 0, 0, 0),
        "sealed and addressed as the endpoint expects: {net:?}"
    );
    let c = st.ep.counters(a).expect("the channel");
    assert_eq!(c.rx_invalid_psn, 2, "{c:?}");
    assert_eq!(c.rx_duplicates, 2, "{c:?}");
    assert_eq!(st.ep.state(a), Some(ChannelState::Rts));
    // Exactly once, in order, intact; nothing from the forger.
    let got = st.app.on_channel(a);
    assert_eq!(got.len(), msgs.len(), "exactly once");
    for (i, ((tpmsn, bytes), &(token, len))) in got.iter().zip(&msgs).enumerate() {
        assert_eq!(*tpmsn as usize, i, "in order");
        assert_eq!(bytes.len(), len as usize, "message {i}: length");
        let bad = (0..len).find(|&o| bytes[o as usize] != pattern(token, o));
        assert_eq!(bad, None, "message {i}: intact");
    }
    assert!(st.app.errors.is_empty(), "{:?}", st.app.errors);
    assert_eq!(
        st.count_events(|e| matches!(e, Event::ChannelError { .. })),
        0
    );
    // Nor did they disturb the sender: no fault, so no retransmission.
    let tx = ds[1].stack().ep.counters(b).expect("the sending channel");
    assert_eq!(
        (tx.rtx_fast, tx.rtx_rto, tx.rtx_mark_psn, tx.rtx_go_back_n),
        (0, 0, 0, 0),
        "{tx:?}"
    );
    // The forged packets crossed host 0's links framed like any other:
    // no link error on its ports.
    for p in &ds[0].ports {
        let k = p.link.counters();
        assert_eq!((k.rx_crc_errors, k.rx_malformed), (0, 0), "{k:?}");
    }
}

/// Without traffic on its channel an armed forgery expires and sends
/// nothing; refusals change nothing.
#[test]
fn armed_forgeries_expire_and_refusals_change_nothing() {
    let (mut f, mut ds, (a, _), t) = setup(12);
    forge(
        &mut f,
        t,
        serde_json::json!({"cmd": "forge", "port": "vm0.0", "dst_tpn": a,
                           "src": "10.0.9.100", "within_ms": 1}),
    );
    let before = f.counters();
    for bad in [
        serde_json::json!({"cmd": "forge", "port": "vm9", "dst_tpn": a}),
        serde_json::json!({"cmd": "forge", "port": "sw0.0", "dst_tpn": a}),
        serde_json::json!({"cmd": "forge", "port": "vm0.2", "dst_tpn": a}),
        serde_json::json!({"cmd": "forge", "port": "vm0", "dst_tpn": 1 << 24}),
        serde_json::json!({"cmd": "forge", "port": "vm0", "dst_tpn": a, "psn": 1, "psn_ahead": 1}),
        serde_json::json!({"cmd": "forge", "port": "vm0", "dst_tpn": a, "replay": true, "src_tpn": 1}),
        serde_json::json!({"cmd": "forge", "port": "vm0", "dst_tpn": a, "count": 0}),
        serde_json::json!({"cmd": "forge", "port": "vm0", "dst_tpn": a, "count": 1001}),
        serde_json::json!({"cmd": "forge", "port": "vm0", "dst_tpn": a, "payload_len": 4097}),
        serde_json::json!({"cmd": "forge", "port": "vm0", "dst_tpn": a, "within_ms": 0}),
        serde_json::json!({"cmd": "forge", "port": "vm0", "dst_tpn": a, "src": "10.0.9.1", "dst": "fd00::1"}),
        serde_json::json!({"cmd": "forge", "port": "vm0", "dst_tpn": a, "src": "cna16:0x0100"}),
        serde_json::json!({"cmd": "forge", "port": "vm0", "dst_tpn": a, "src": "nowhere"}),
        serde_json::json!({"cmd": "forge", "port": "vm0", "dst_tpn": a, "src": "10.0.9.1",
                           "dst": "10.0.1.100", "src_tpn": 1, "psn": 0}),
        serde_json::json!({"cmd": "forge", "port": "vm0.0", "dst_tpn": a, "src": "10.0.9.1",
                           "dst": "10.0.1.100", "src_tpn": 1, "psn": 0, "within_ms": 5}),
        serde_json::json!({"cmd": "forge", "port": "vm0", "dst_tpn": a, "extra": 1}),
    ] {
        let r = serde_json::from_value::<Command>(bad.clone())
            .map_err(|e| e.to_string())
            .and_then(|c| f.apply(&c, t).map_err(|e| e.to_string()));
        let e = r.expect_err(&bad.to_string());
        assert!(!e.is_empty());
        assert_eq!(f.counters(), before, "{bad} changed nothing");
    }
    // 16 armed at most.
    for _ in 1..16 {
        forge(
            &mut f,
            t,
            serde_json::json!({"cmd": "forge", "port": "vm0", "dst_tpn": a, "within_ms": 2}),
        );
    }
    let full = serde_json::json!({"cmd": "forge", "port": "vm0", "dst_tpn": a});
    let cmd: Command = serde_json::from_value(full).expect("parses");
    assert!(f.apply(&cmd, t).is_err(), "a 17th is refused");
    // Nothing flows on the channel: every one expires.
    run_until(&mut f, &mut ds, t, 1_000, t + 3_000_000, |_, _| false);
    let v = f.counters();
    assert_eq!(v["forge"]["counters"]["expired"], 16, "{v}");
    assert_eq!(v["forge"]["counters"]["injected"], 0, "{v}");
    assert_eq!(ds[0].stack().ep.net_counters().wrong_peer, 0);
}
