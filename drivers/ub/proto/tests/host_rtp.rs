// SPDX-License-Identifier: GPL-2.0
//! Host endpoint data path: RTP in all four retransmission combinations,
//! both directions at once, over a network that loses, duplicates,
//! reorders and corrupts; TP channel groups with per-packet spraying;
//! CTP / UTP datagrams; the drop counters; and the call order that lets an
//! ACK that empties a full window release the next packet at once.

#![allow(
    clippy::unwrap_used,
    clippy::indexing_slicing,
    clippy::panic,
    reason = "test code"
)]

mod host_common;

use host_common::*;
use ub_proto::crc::crc32_le_portable;
use ub_proto::host::{
    Addr, ChannelConfig, DatagramKind, Event, LoadBalance, RtoConfig, SendError, Transmit,
    TransmitKind,
};
use ub_proto::net::icrc;
use ub_proto::net::nth::{IpHdr, IpNth, NetHeader, ICRC_LEN};
use ub_proto::net::PacketClass;
use ub_proto::transport::cm::ChannelState;
use ub_proto::transport::hdr::Rtph;
use ub_proto::transport::psn::Psn;
use ub_proto::transport::tpg::TpgPolicy;
use ub_proto::transport::RetransmitMode;

const COMBOS: [(RetransmitMode, bool); 4] = [
    (RetransmitMode::GoBackN, true),
    (RetransmitMode::GoBackN, false),
    (RetransmitMode::Selective, true),
    (RetransmitMode::Selective, false),
];

fn cfg(mode: RetransmitMode, fast: bool) -> ChannelConfig {
    let mut c = ChannelConfig::default_rtp();
    c.mode = mode;
    c.fast_retransmit = fast;
    c.rx_slots = if mode == RetransmitMode::GoBackN && fast {
        0
    } else {
        256
    };
    if !fast {
        c.lb = LoadBalance::PerPacket { range_log2: 2 };
    }
    c.rto = RtoConfig::Dynamic { base_us: 40, n: 1 };
    c.retry_limit = 30;
    c
}

/// 1 B to `max` bytes, and a few random sizes in between.
fn sizes(seed: u64, max: u32) -> Vec<(u64, u32)> {
    let mut v: Vec<u32> = vec![1, 2, 3, 4095, 4096, 4097, max];
    let mut r = Rng(seed);
    v.extend((0..8).map(|_| 1 + r.below(70_000) as u32));
    v.into_iter()
        .enumerate()
        .map(|(i, l)| (seed * 1000 + i as u64, l))
        .collect()
}

/// Sends `a_msgs` from A and `b_msgs` from B on one channel at once and
/// checks exactly-once in-order intact delivery both ways.
fn both_ways(net: &mut Net, ta: u32, tb: u32, a_msgs: &[(u64, u32)], b_msgs: &[(u64, u32)]) {
    let mut pending = [a_msgs.to_vec(), b_msgs.to_vec()];
    pending[0].reverse();
    pending[1].reverse();
    let tpn = [ta, tb];
    let want = [a_msgs.len(), b_msgs.len()];
    // Post with back-pressure, running the network in between.
    loop {
        for s in 0..2 {
            while let Some(&(token, len)) = pending[s].last() {
                match net.eps[s].send(tpn[s], token, len) {
                    Ok(()) => {
                        pending[s].pop();
                    }
                    Err(SendError::WouldBlock) => break,
                    Err(e) => panic!("send: {e:?}"),
                }
            }
        }
        let before = (net.acked(0), net.acked(1));
        let done = net.run_until(net.now + 50_000_000_000, |n| {
            (n.acked(0), n.acked(1)) != before || (n.acked(0) == want[0] && n.acked(1) == want[1])
        });
        assert!(done, "stalled at {} ns with {:?} acked", net.now, before);
        if net.acked(0) == want[0] && net.acked(1) == want[1] {
            break;
        }
    }
    check_delivery(net, 1, tb, a_msgs);
    check_delivery(net, 0, ta, b_msgs);
}

fn open(net: &mut Net, c: ChannelConfig, cna: bool, key: u32) -> (u32, u32) {
    let ta = net.eps[0].connect(net.now, addr(1, cna), key, c).unwrap();
    assert!(net.run_until(net.now + 100_000_000, |n| n.eps[0].state(ta)
        == Some(ChannelState::Rts)));
    let tb = net.events[1]
        .iter()
        .rev()
        .find_map(|(_, e)| match e {
            Event::Incoming { tpn, key: k, .. } if *k == key => Some(*tpn),
            _ => None,
        })
        .unwrap();
    (ta, tb)
}

fn lossy(seed: u64, loss: u32, c: ChannelConfig) -> Net {
    let mut net = Net::new(
        endpoint(0, Some(c), Store::default()),
        endpoint(1, Some(c), Store::default()),
    );
    net.rng = Rng(seed);
    net.loss = loss;
    net.dup = 20_000;
    net.corrupt = 10_000;
    net.jitter = 3_000;
    net
}

#[test]
fn four_combinations_both_directions_under_loss_duplication_reordering_corruption() {
    for (i, (mode, fast)) in COMBOS.into_iter().enumerate() {
        for (j, loss) in [0, 10_000, 50_000].into_iter().enumerate() {
            let seed = (i * 3 + j) as u64 + 1;
            let c = cfg(mode, fast);
            let mut net = lossy(seed, loss, c);
            if fast {
                // Per-flow load balancing keeps a channel on one path, in
                // order; reordering is what per-packet spraying brings.
                net.jitter = 0;
            }
            let (ta, tb) = open(&mut net, c, j == 1, 1);
            // The 1 MiB message once per combination (debug builds are slow).
            let max = if j == 1 { 1 << 20 } else { 100_000 };
            both_ways(&mut net, ta, tb, &sizes(seed, max), &sizes(seed + 100, max));
            let k = net.eps[0].counters(ta).unwrap();
            if loss > 0 {
                let rtx = k.rtx_fast + k.rtx_rto + k.rtx_mark_psn + k.rtx_go_back_n;
                assert!(
                    rtx > 0,
                    "{mode:?} fast {fast}: no retransmission at loss {loss} ppm"
                );
                let icrc =
                    net.eps[0].net_counters().icrc_drops + net.eps[1].net_counters().icrc_drops;
                assert!(icrc > 0, "corruption reached the ICRC check");
            }
        }
    }
}

#[test]
fn tpg_of_four_with_per_packet_spraying_delivers_every_message_once() {
    let mut c = cfg(RetransmitMode::Selective, false);
    c.lb = LoadBalance::PerPacket { range_log2: 3 };
    let mut net = lossy(9, 10_000, c);
    let mut members = Vec::new();
    for key in 0..4 {
        let mut m = c;
        m.lb_key = 50_000 + 8 * key as u16;
        members.push(open(&mut net, m, false, key));
    }
    let a: Vec<u32> = members.iter().map(|m| m.0).collect();
    let g = net.eps[0].create_group(&a, TpgPolicy::RoundRobin).unwrap();
    let msgs = sizes(3, 200_000);
    let mut per_member: Vec<Vec<(u64, u32)>> = vec![Vec::new(); 4];
    for &(token, len) in &msgs {
        let tpn = net.eps[0].send_group(g, token, len).unwrap();
        let i = a.iter().position(|&t| t == tpn).unwrap();
        per_member[i].push((token, len));
    }
    assert!(
        per_member.iter().all(|m| !m.is_empty()),
        "spread over all members"
    );
    assert!(net.run_until(60_000_000_000, |n| n.acked(0) == msgs.len()));
    for (i, (_, tb)) in members.iter().enumerate() {
        check_delivery(&net, 1, *tb, &per_member[i]);
    }
    // Data packets of one member used several source ports.
    let mut ports = std::collections::HashSet::new();
    for s in net.trace.iter().filter(|s| s.from == 0) {
        if let TransmitKind::Data { .. } = s.tx.kind {
            assert!(s.tx.meta.rt.per_packet);
            ports.insert(s.tx.port);
        }
    }
    assert_eq!(ports.len(), 2, "sprayed over both ports");
}

#[test]
fn an_ack_that_empties_a_full_window_releases_the_next_packet_at_once() {
    let mut c = ChannelConfig::default_rtp();
    c.send_window = 4;
    c.ack_every = 4;
    c.ack_delay_ns = 1_000_000;
    let mut net = Net::new(
        endpoint(0, Some(c), Store::default()),
        endpoint(1, Some(c), Store::default()),
    );
    let (ta, tb) = open(&mut net, c, false, 1);
    let t0 = net.now;
    net.eps[0].send(ta, 1, 8 * 4096).unwrap();
    assert!(net.run_until(100_000_000, |n| n.acked(0) == 1));
    check_delivery(&net, 1, tb, &[(1, 8 * 4096)]);
    // Two windows, two round trips of 2 µs each way: no RTO (512 µs) and
    // no coalescing delay (1 ms) was waited for.
    assert!(net.now - t0 < 20_000, "took {} ns", net.now - t0);
    assert_eq!(net.eps[0].counters(ta).unwrap().rto_expiries, 0);
}

#[test]
fn datagrams_ctp_and_utp() {
    let mut net = Net::new(
        endpoint(0, None, Store::default()),
        endpoint(1, None, Store::default()),
    );
    net.eps[0]
        .send_datagram(DatagramKind::Utp, addr(1, false), 5, 1000)
        .unwrap();
    net.eps[0]
        .send_datagram(DatagramKind::Ctp, addr(1, true), 6, 10)
        .unwrap();
    net.eps[0]
        .send_datagram(DatagramKind::Ctp, Addr::Cna16(0x20), 7, 0)
        .unwrap();
    assert_eq!(
        net.eps[0].send_datagram(DatagramKind::Utp, addr(1, true), 8, 1),
        Err(SendError::Format)
    );
    assert_eq!(
        net.eps[0].send_datagram(DatagramKind::Ctp, addr(1, false), 8, 1),
        Err(SendError::Format)
    );
    assert!(net.run_until(1_000_000, |n| n.sinks[1].datagrams.len() == 3));
    let d = &net.sinks[1].datagrams;
    assert_eq!(d[0].0, DatagramKind::Utp);
    assert_eq!(d[0].1, addr(0, false));
    assert_eq!(d[0].2, (0..1000).map(|o| pattern(5, o)).collect::<Vec<_>>());
    assert_eq!(d[1].0, DatagramKind::Ctp);
    assert_eq!(d[1].2.len(), 10);
    assert_eq!(d[2].1, Addr::Cna16(0x10));
    let sent = net.events[0]
        .iter()
        .filter(|(_, e)| matches!(e, Event::DatagramSent { .. }))
        .count();
    assert_eq!(sent, 3);
}

#[test]
fn the_largest_datagram_fills_one_packet_and_one_byte_more_is_refused() {
    let mut net = Net::new(
        endpoint(0, None, Store::default()),
        endpoint(1, None, Store::default()),
    );
    let ep = &mut net.eps[0];
    assert_eq!(ep.max_datagram(DatagramKind::Ctp, addr(1, false)), None);
    assert_eq!(ep.max_datagram(DatagramKind::Utp, addr(1, true)), None);
    let max = ep.max_datagram(DatagramKind::Ctp, addr(1, true)).unwrap();
    let max16 = ep
        .max_datagram(DatagramKind::Ctp, Addr::Cna16(0x20))
        .unwrap();
    // The 16-bit network header is 2 bytes shorter than the 24-bit one.
    assert_eq!(max16, max + 2);
    assert_eq!(
        ep.send_datagram(DatagramKind::Ctp, addr(1, true), 1, max + 1),
        Err(SendError::Length)
    );
    ep.send_datagram(DatagramKind::Ctp, addr(1, true), 2, max)
        .unwrap();
    assert!(net.run_until(1_000_000, |n| n.sinks[1].datagrams.len() == 1));
    let d = &net.sinks[1].datagrams[0];
    assert_eq!(d.0, DatagramKind::Ctp);
    assert_eq!(d.2, (0..max).map(|o| pattern(2, o)).collect::<Vec<_>>());
}

#[test]
fn corrupted_foreign_and_other_partition_packets_are_dropped_and_counted() {
    let mut net = Net::new(
        endpoint(0, None, Store::default()),
        endpoint(1, None, Store::default()),
    );
    net.eps[0]
        .send_datagram(DatagramKind::Utp, addr(1, false), 1, 100)
        .unwrap();
    net.flush(0);
    // Capture the packet from the trace by building it again.
    let mut buf = vec![0u8; 9000];
    net.eps[0]
        .send_datagram(DatagramKind::Utp, addr(1, false), 2, 100)
        .unwrap();
    while net.eps[0].poll_event().is_some() {}
    let t = net.eps[0]
        .poll_transmit(0, &mut buf, &mut Pattern)
        .unwrap()
        .unwrap();
    let pkt = buf[..t.len].to_vec();
    let cfg = t.meta.class.cfg();
    let mut sink = Sink::default();
    let b = &mut net.eps[1];
    // Intact: delivered.
    b.handle_packet(0, 0, cfg, &pkt, &mut sink);
    assert_eq!(sink.datagrams.len(), 1);
    // A flipped payload bit: ICRC drop.
    let mut bad = pkt.clone();
    let last = bad.len() - 10;
    bad[last] ^= 4;
    b.handle_packet(0, 0, cfg, &bad, &mut sink);
    assert_eq!(b.net_counters().icrc_drops, 1);
    // Another partition: the NPI is outside the ICRC coverage, so the
    // packet passes the ICRC and fails the NPI check.
    let mut other = pkt.clone();
    other[5] ^= 0x02;
    b.handle_packet(0, 0, cfg, &other, &mut sink);
    assert_eq!(b.net_counters().npi_drops, 1);
    // Garbage.
    b.handle_packet(0, 0, cfg, &pkt[..10], &mut sink);
    b.handle_packet(0, 0, 1, &pkt, &mut sink);
    assert_eq!(b.net_counters().malformed, 2);
    assert_eq!(sink.datagrams.len(), 1, "nothing else delivered");
    // Addressed to someone else: A receiving its own packet.
    net.eps[0].handle_packet(0, 0, cfg, &pkt, &mut sink);
    assert_eq!(net.eps[0].net_counters().not_for_us, 1);
}

#[test]
fn ports_down_leave_the_set_and_all_down_counts_no_route() {
    let c = ChannelConfig::default_rtp();
    let mut net = Net::new(
        endpoint(0, Some(c), Store::default()),
        endpoint(1, Some(c), Store::default()),
    );
    let (ta, tb) = open(&mut net, c, false, 1);
    net.eps[0].set_port_up(0, false);
    net.eps[0].send(ta, 1, 40_000).unwrap();
    assert!(net.run_until(100_000_000, |n| n.acked(0) == 1));
    check_delivery(&net, 1, tb, &[(1, 40_000)]);
    assert!(net
        .trace
        .iter()
        .filter(|s| s.from == 0 && matches!(s.tx.kind, TransmitKind::Data { .. }))
        .all(|s| s.tx.port == 1));
    net.eps[0].set_port_up(1, false);
    net.eps[0].send(ta, 2, 100).unwrap();
    net.flush(0);
    assert!(net.eps[0].net_counters().no_route_drops > 0);
    net.eps[0].set_port_up(0, true);
    assert!(net.run_until(net.now + 100_000_000, |n| n.acked(0) == 2));
}

#[test]
fn a_full_queue_refuses_with_would_block_and_says_when_it_has_room() {
    let mut c = ChannelConfig::default_rtp();
    c.send_queue = 2;
    let mut net = Net::new(
        endpoint(0, Some(c), Store::default()),
        endpoint(1, Some(c), Store::default()),
    );
    let (ta, tb) = open(&mut net, c, false, 1);
    net.eps[0].send(ta, 1, 100_000).unwrap();
    net.eps[0].send(ta, 2, 100_000).unwrap();
    assert_eq!(net.eps[0].send(ta, 3, 1), Err(SendError::WouldBlock));
    assert!(net.run_until(10_000_000, |n| n
        .has_event(0, |e| *e == Event::Writable { tpn: ta })));
    net.eps[0].send(ta, 3, 1).unwrap();
    assert!(net.run_until(100_000_000, |n| n.acked(0) == 3));
    check_delivery(&net, 1, tb, &[(1, 100_000), (2, 100_000), (3, 1)]);
    assert_eq!(net.eps[0].send(ta, 4, 0), Err(SendError::Length));
    assert_eq!(net.eps[0].send(99, 4, 1), Err(SendError::NoChannel));
}

/// `can_send` answers as `send` would, without queueing, and a `false`
/// for a full queue arms the same `Writable` event a refused send does
/// (what a file's poll sleeps on).
#[test]
fn can_send_says_what_send_would_and_arms_writable() {
    let mut c = ChannelConfig::default_rtp();
    c.send_queue = 2;
    let mut net = Net::new(
        endpoint(0, Some(c), Store::default()),
        endpoint(1, Some(c), Store::default()),
    );
    assert!(!net.eps[0].can_send(99), "no channel");
    let (ta, tb) = open(&mut net, c, false, 1);
    assert!(net.eps[0].can_send(ta));
    net.eps[0].send(ta, 1, 100_000).unwrap();
    assert!(net.eps[0].can_send(ta));
    net.eps[0].send(ta, 2, 100_000).unwrap();
    assert!(!net.eps[0].can_send(ta), "the queue is full");
    // Nothing was refused: only can_send armed the event.
    assert!(net.run_until(10_000_000, |n| n
        .has_event(0, |e| *e == Event::Writable { tpn: ta })));
    assert!(net.eps[0].can_send(ta));
    net.eps[0].send(ta, 3, 1).unwrap();
    assert!(net.run_until(100_000_000, |n| n.acked(0) == 3));
    check_delivery(&net, 1, tb, &[(1, 100_000), (2, 100_000), (3, 1)]);
    net.eps[0].close(net.now, ta).unwrap();
    assert!(!net.eps[0].can_send(ta), "closing");
}

#[test]
fn counters_show_each_layer() {
    for (mode, fast) in [
        (RetransmitMode::GoBackN, true),
        (RetransmitMode::Selective, true),
    ] {
        let c = cfg(mode, fast);
        let mut net = Net::new(
            endpoint(0, Some(c), Store::default()),
            endpoint(1, Some(c), Store::default()),
        );
        let (ta, tb) = open(&mut net, c, false, 1);
        let mut dropped = false;
        net.filter = Some(Box::new(move |_, from, t| {
            if from == 0 && !dropped && matches!(t.kind, TransmitKind::Data { .. }) {
                dropped = true;
                return true;
            }
            false
        }));
        net.eps[0].send(ta, 1, 40_000).unwrap();
        assert!(net.run_until(100_000_000, |n| n.acked(0) == 1));
        check_delivery(&net, 1, tb, &[(1, 40_000)]);
        let a = net.eps[0].counters(ta).unwrap();
        let b = net.eps[1].counters(tb).unwrap();
        assert_eq!(a.messages_acked, 1);
        assert_eq!(b.messages_delivered, 1);
        assert_eq!(b.rx_bytes, 40_000);
        assert_eq!(
            a.tx_packets,
            10 + a.rtx_go_back_n + a.rtx_fast + a.rtx_rto + a.rtx_mark_psn
        );
        assert_eq!(a.rto_expiries, 0, "{mode:?}: repaired without the RTO");
        if mode == RetransmitMode::GoBackN {
            assert!(a.rtx_go_back_n > 0 && a.rtx_fast == 0);
            assert_eq!(b.tpnak_sent, 1);
            assert_eq!(a.tpnak_rcvd, 1);
        } else {
            assert_eq!((a.rtx_fast, a.rtx_go_back_n), (1, 0));
            assert!(b.tpsack_sent > 0);
            assert_eq!(a.tpsack_rcvd, b.tpsack_sent);
        }
        assert_eq!(a.tpack_rcvd, b.tpack_sent);
        // The RTT is sampled from packets sent once only (Karn): the lost
        // message gave none, the next one does. One 2 us hop each way.
        assert_eq!(a.srtt_ns, 0);
        net.eps[0].send(ta, 2, 100).unwrap();
        assert!(net.run_until(net.now + 100_000_000, |n| n.acked(0) == 2));
        let a = net.eps[0].counters(ta).unwrap();
        assert!((4_000..10_000).contains(&a.srtt_ns), "srtt {}", a.srtt_ns);
        assert_eq!(a.outstanding, 0);
        assert_eq!(a.cw, u32::MAX, "no congestion control");
    }
}

#[test]
fn rtp_and_utp_over_ipv6() {
    let ip6 = |h: u8| {
        let mut a = [0u8; 16];
        a[0] = 0xfd;
        a[15] = h;
        a
    };
    let c = cfg(RetransmitMode::Selective, true);
    let mk = |side: usize| {
        let mut cfg6 = ep_config(side, Some(c));
        cfg6.local.ipv6 = Some(ip6(side as u8 + 1));
        let mut e = Ep::new(cfg6, Store::default(), Rng(side as u64)).unwrap();
        e.add_route(ub_proto::net::route::RouteEntry {
            prefix: 0,
            prefix_len: 0,
            width: 128,
            ports: 1,
            shortest: 0,
        })
        .unwrap();
        e
    };
    let mut net = Net::new(mk(0), mk(1));
    net.loss = 20_000;
    let ta = net.eps[0].connect(0, Addr::Ipv6(ip6(2)), 6, c).unwrap();
    net.eps[0].send(ta, 1, 300_000).unwrap();
    net.eps[0]
        .send_datagram(DatagramKind::Utp, Addr::Ipv6(ip6(2)), 2, 500)
        .unwrap();
    assert!(net.run_until(1_000_000_000, |n| n.acked(0) == 1));
    let tb = net.incoming_tpn(1).unwrap();
    check_delivery(&net, 1, tb, &[(1, 300_000)]);
    assert!(net
        .trace
        .iter()
        .all(|s| s.tx.meta.class == ub_proto::net::PacketClass::Ipv6));
}

/// The data packets A sends for `msgs` (token, length), captured before
/// they reach B: (LPH.CFG, bytes).
fn capture_data(net: &mut Net, ta: u32, msgs: &[(u64, u32)]) -> Vec<(u8, Vec<u8>)> {
    for &(token, len) in msgs {
        net.eps[0].send(ta, token, len).unwrap();
    }
    let mut buf = vec![0u8; 9000];
    let mut out = Vec::new();
    loop {
        while net.eps[0].poll_event().is_some() {}
        let Some(t) = net.eps[0]
            .poll_transmit(net.now, &mut buf, &mut Pattern)
            .unwrap()
        else {
            break;
        };
        if matches!(t.kind, TransmitKind::Data { .. }) {
            out.push((t.meta.class.cfg(), buf[..t.len].to_vec()));
        }
    }
    out
}

/// `pkt` with its network header and RTPH rewritten by `net` and `tp`,
/// the IP and UDP checksums and the ICRC computed again, as a forger on
/// the fabric would send it.
fn forge(
    cfg: u8,
    pkt: &[u8],
    net: impl FnOnce(&mut NetHeader),
    tp: impl FnOnce(&mut Rtph),
) -> Vec<u8> {
    let class = PacketClass::from_cfg(cfg).unwrap();
    let (mut nh, hlen) = NetHeader::parse(class, pkt).unwrap();
    let mut p = pkt.to_vec();
    let mut h = Rtph::parse(&p[hlen..]).unwrap();
    net(&mut nh);
    tp(&mut h);
    let upper = p.len() - hlen - ICRC_LEN;
    nh.write(&mut p, upper).unwrap();
    h.write(&mut p[hlen..]).unwrap();
    icrc::seal(crc32_le_portable, class, &mut p).unwrap();
    p
}

#[test]
fn only_the_peer_feeds_a_channel_and_only_inside_its_window() {
    let c = cfg(RetransmitMode::Selective, true);
    let mut net = Net::new(
        endpoint(0, Some(c), Store::default()),
        endpoint(1, Some(c), Store::default()),
    );
    let (ta, tb) = open(&mut net, c, false, 5);
    let msgs = [(1, 100), (2, 100), (3, 100)];
    let pkts = capture_data(&mut net, ta, &msgs);
    assert_eq!(pkts.len(), 3, "one packet per message");
    let delivered = |net: &Net| net.sinks[1].messages.get(&tb).map_or(0, Vec::len);
    let now = net.now;
    let (cfg0, p0) = &pkts[0];
    net.eps[1].handle_packet(now, 0, *cfg0, p0, &mut net.sinks[1]);
    assert_eq!(delivered(&net), 1, "the genuine first packet");

    let (cfg1, p1) = &pkts[1];
    // Another host on the fabric with the right TPNs: its source address
    // gives it away (the ICRC is sealed again, so only the peer check can
    // catch it).
    let from_elsewhere = forge(
        *cfg1,
        p1,
        |nh| {
            if let NetHeader::Ip(IpNth {
                ip: IpHdr::V4 { src, .. },
                ..
            }) = nh
            {
                src[3] = 9;
            }
        },
        |_| {},
    );
    net.eps[1].handle_packet(now, 0, *cfg1, &from_elsewhere, &mut net.sinks[1]);
    // The right address with another source TPN (a stale or guessed one).
    let other_tpn = forge(*cfg1, p1, |_| {}, |h| h.src_tpn ^= 1);
    net.eps[1].handle_packet(now, 0, *cfg1, &other_tpn, &mut net.sinks[1]);
    assert_eq!(
        net.eps[1].net_counters().wrong_peer,
        2,
        "{:?}",
        net.eps[1].net_counters()
    );
    assert_eq!(net.eps[1].net_counters().unknown_channel, 0);
    // The peer's own address and TPNs, but a PSN a quarter of the sequence
    // space ahead: beyond the OOO window, so invalid (PSNs behind the
    // expected one by up to half the space count as duplicates).
    let far_psn = forge(
        *cfg1,
        p1,
        |_| {},
        |h| h.psn = Psn::new(h.psn.value().wrapping_add(1 << 22)),
    );
    net.eps[1].handle_packet(now, 0, *cfg1, &far_psn, &mut net.sinks[1]);
    assert_eq!(net.eps[1].counters(tb).unwrap().rx_invalid_psn, 1);
    // A replay of the first packet: a duplicate, dropped.
    net.eps[1].handle_packet(now, 0, *cfg0, p0, &mut net.sinks[1]);
    assert_eq!(net.eps[1].counters(tb).unwrap().rx_duplicates, 1);
    assert_eq!(delivered(&net), 1, "nothing forged or replayed delivered");

    // The channel is unharmed: the genuine packets still land, in order.
    for (cfg, p) in &pkts[1..] {
        net.eps[1].handle_packet(now, 0, *cfg, p, &mut net.sinks[1]);
    }
    check_delivery(&net, 1, tb, &msgs);
    assert_eq!(net.eps[1].state(tb), Some(ChannelState::Rts));
}

/// The receiver reads everything and closes while its TPACKs are lost:
/// its DREQ says what it received, so the sender still counts every
/// message acknowledged before the channel closes (a sender waiting for its
/// acknowledgements would otherwise wait for ever, or report loss that did
/// not happen).
#[test]
fn a_closing_receiver_acknowledges_what_it_got_in_its_dreq() {
    let c = cfg(RetransmitMode::Selective, true);
    let mut net = Net::new(
        endpoint(0, Some(c), Store::default()),
        endpoint(1, Some(c), Store::default()),
    );
    let (ta, tb) = open(&mut net, c, false, 9);
    // From now on every response B sends is lost.
    net.filter = Some(Box::new(|_, from, t: &Transmit| {
        from == 1 && matches!(t.kind, TransmitKind::Response { .. })
    }));
    let msgs = [(1, 100), (2, 5000), (3, 100)];
    for &(token, len) in &msgs {
        net.eps[0].send(ta, token, len).unwrap();
    }
    assert!(net.run_until(net.now + 5_000_000, |n| n.sinks[1]
        .messages
        .get(&tb)
        .is_some_and(|m| m.len() == 3)));
    assert_eq!(net.acked(0), 0, "no TPACK reached A");
    net.eps[1].close(net.now, tb).unwrap();
    assert!(net.run_until(net.now + 100_000_000, |n| n
        .has_event(0, |e| *e == Event::Closed { tpn: ta })));
    assert_eq!(net.acked(0), 3, "the DREQ acknowledged all three");
    check_delivery(&net, 1, tb, &msgs);
}
