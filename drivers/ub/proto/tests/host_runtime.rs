// SPDX-License-Identifier: GPL-2.0
//! Host endpoint: what the driver changes at run time (netlink's address,
//! route and NPI operations) takes effect on the next packet, and a refused
//! change leaves everything as it was.

#![allow(clippy::unwrap_used, clippy::indexing_slicing, reason = "test code")]

mod host_common;

use host_common::*;
use ub_proto::host::{Addr, ConfigError, DatagramKind, LocalAddrs, MessageSource, MsgRef};
use ub_proto::net::npi::{Npi, NpiMode};
use ub_proto::net::route::RouteEntry;

struct Zeros;
impl MessageSource for Zeros {
    fn read(&mut self, _: MsgRef, _: u32, out: &mut [u8]) {
        out.fill(0);
    }
}

/// Ports chosen for `n` UTP datagrams to B.
fn ports_of_datagrams(e: &mut Ep, n: u64) -> Vec<u8> {
    let mut buf = vec![0u8; 9000];
    let mut ports = Vec::new();
    for token in 0..n {
        e.send_datagram(DatagramKind::Utp, Addr::Ipv4(B_IP), token, 64)
            .unwrap();
        while let Some(t) = e.poll_transmit(0, &mut buf, &mut Zeros).unwrap() {
            ports.push(t.port);
        }
        while e.poll_event().is_some() {}
    }
    ports
}

fn ip_route(ports: u64) -> RouteEntry {
    RouteEntry {
        prefix: u128::from(u32::from_be_bytes([10, 0, 0, 0])),
        prefix_len: 24,
        width: 32,
        ports,
        shortest: 0,
    }
}

#[test]
fn routes_are_replaced_removed_and_listed() {
    let mut e = endpoint(0, None, Store::default());
    let base = e.route_count();
    // Per flow: one datagram flow keeps one port.
    e.add_route_spraying(ip_route(0b11), false).unwrap();
    assert_eq!(e.route_count(), base + 1);
    let p = ports_of_datagrams(&mut e, 16);
    assert!(p.windows(2).all(|w| w[0] == w[1]), "{p:?}");
    // The same prefix again replaces it: now per packet over both ports.
    e.add_route_spraying(ip_route(0b11), true).unwrap();
    assert_eq!(e.route_count(), base + 1);
    let p = ports_of_datagrams(&mut e, 16);
    assert!(p.contains(&0) && p.contains(&1), "{p:?}");
    let (r, spray) = e.route_at(base).unwrap();
    assert_eq!((r.prefix_len, r.ports, spray), (24, 0b11, true));
    // Only port 1.
    e.add_route_spraying(ip_route(0b10), true).unwrap();
    assert!(ports_of_datagrams(&mut e, 8).iter().all(|&p| p == 1));
    assert!(e.remove_route(r.prefix, 24, 32));
    assert!(!e.remove_route(r.prefix, 24, 32), "already gone");
    assert_eq!(e.route_count(), base);
    assert!(e.route_at(base).is_none());
}

#[test]
fn without_a_route_datagrams_are_counted_as_no_route() {
    let mut e = endpoint(0, None, Store::default());
    while e.route_count() > 0 {
        let (r, _) = e.route_at(0).unwrap();
        assert!(e.remove_route(r.prefix, r.prefix_len, r.width));
    }
    assert!(ports_of_datagrams(&mut e, 3).is_empty());
    assert_eq!(e.net_counters().no_route_drops, 3);
}

#[test]
fn addresses_change_and_a_bad_npi_is_refused() {
    let mut e = endpoint(0, None, Store::default());
    let mut local = e.config().local;
    local.ipv4 = None;
    e.set_local(local).unwrap();
    // No IPv4 address: UTP to B is refused before anything is queued.
    assert!(e
        .send_datagram(DatagramKind::Utp, Addr::Ipv4(B_IP), 1, 8)
        .is_err());
    local.ipv4 = Some(A_IP);
    e.set_local(local).unwrap();
    assert_eq!(ports_of_datagrams(&mut e, 1).len(), 1);

    // Partition ID 0 is invalid (§5.3.3.1): refused, the old NPI stays.
    let before = *e.config();
    let zero = Npi::from_raw(0);
    assert_eq!(
        e.set_npi(NpiMode::Loose, zero),
        Err(ConfigError::Npi),
        "with an IP address, a zero partition is refused"
    );
    assert_eq!(e.config().npi, before.npi);
    let none = LocalAddrs::default();
    e.set_local(none).unwrap();
    e.set_npi(NpiMode::Loose, zero).unwrap();
    // Now an IP address cannot come back under the invalid NPI.
    assert_eq!(e.set_local(local), Err(ConfigError::Npi));
    assert_eq!(e.config().local, none);
}
