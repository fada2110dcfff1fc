// SPDX-License-Identifier: GPL-2.0
//! The report `scripts/demo` prints after its two guests ran
//! `selftests/ub/ub_demo.sh`: where each fault was absorbed, per layer.
//!
//! Each guest's KTAP stream carries `# demo:` lines (the selftest's header
//! documents them): `stats-before JSON` and `stats-after JSON` (`ubctl -j
//! stats`), and `stream NAME JSON` (`ub-tp send|recv -j --info`, one per
//! stream and end). ub-fabric's `counters` (scripts/fabric-guest-test
//! saves them as counters.json) add the fabric's side of every link and
//! what the switches dropped and reordered.
//!
//! Counters are read leniently (a missing one counts 0: the tools gain
//! counters over time), but a stream's message counts are not: a stream
//! without both ends' lines, or that lost, duplicated or corrupted a
//! message, fails the report.

use std::fmt::Write as _;

use serde_json::Value;

/// What one guest printed on its `# demo:` lines.
#[derive(Debug, Default)]
pub struct GuestLog {
    /// The guest's name in the fabric (`vm0`).
    pub name: String,
    /// `ubctl -j stats` before the faults.
    pub before: Option<Value>,
    /// `ubctl -j stats` after the streams.
    pub after: Option<Value>,
    /// Each stream's name and this end's `ub-tp -j` object, in order.
    pub streams: Vec<(String, Value)>,
    /// `# demo:` lines that did not parse, for the report.
    pub bad_lines: Vec<String>,
}

const MARK: &str = "# demo: ";

/// Reads the `# demo:` lines of a guest's KTAP stream (other lines are
/// ignored; KTAP indents a subtest's lines).
pub fn parse_guest(name: &str, ktap: &str) -> GuestLog {
    let mut g = GuestLog {
        name: name.to_string(),
        ..GuestLog::default()
    };
    for line in ktap.lines() {
        let Some(pos) = line.find(MARK) else { continue };
        let rest = &line[pos + MARK.len()..];
        let (kind, rest) = rest.split_once(' ').unwrap_or((rest, ""));
        let parsed = match kind {
            "stats-before" | "stats-after" => serde_json::from_str(rest).ok().map(|v| {
                if kind == "stats-before" {
                    g.before = Some(v);
                } else {
                    g.after = Some(v);
                }
            }),
            "stream" => rest.split_once(' ').and_then(|(n, j)| {
                serde_json::from_str(j)
                    .ok()
                    .map(|v| g.streams.push((n.to_string(), v)))
            }),
            _ => None,
        };
        if parsed.is_none() {
            g.bad_lines.push(line.trim().to_string());
        }
    }
    g
}

/// The report's text and whether every stream delivered every message
/// exactly once, intact.
#[derive(Debug)]
pub struct Report {
    /// The table, ready to print.
    pub text: String,
    /// Nothing lost, duplicated or corrupted, and every guest reported.
    pub ok: bool,
}

fn num(v: &Value, path: &[&str]) -> u64 {
    let mut v = v;
    for k in path {
        match v.get(k) {
            Some(x) => v = x,
            None => return 0,
        }
    }
    v.as_u64().unwrap_or(0)
}

/// Device 0 of a `ubctl -j stats` array.
fn dev0(stats: &Value) -> Option<&Value> {
    stats.as_array().and_then(|a| a.first())
}

/// A counter of the guest's device 0 that grew during the streams: after
/// minus before (after alone without a before).
fn net_delta(g: &GuestLog, key: &str) -> u64 {
    let get = |s: &Option<Value>| {
        s.as_ref()
            .and_then(dev0)
            .map_or(0, |d| num(d, &["net-stats", key]))
    };
    get(&g.after).saturating_sub(get(&g.before))
}

/// A link counter of port `port` of the guest's device 0 at the end of the
/// run (since ub.ko was loaded, as the fabric's counters are since it
/// started).
fn port_total(g: &GuestLog, port: u64, key: &str) -> u64 {
    let get = |s: &Option<Value>| {
        s.as_ref()
            .and_then(dev0)
            .and_then(|d| d.get("ports"))
            .and_then(Value::as_array)
            .and_then(|ps| {
                ps.iter()
                    .find(|p| p.get("index").and_then(Value::as_u64) == Some(port))
            })
            .map_or(0, |p| num(p, &["link-stats", key]))
    };
    get(&g.after)
}

/// The receiving end of a hop (`vm0.1`, `sw1.2`): its CRC errors and the
/// retry requests it sent.
fn receiver_repairs(end: &str, guests: &[GuestLog], fabric: &Value) -> Option<(u64, u64)> {
    let (node, port) = end.rsplit_once('.')?;
    let port: u64 = port.parse().ok()?;
    if let Some(g) = guests.iter().find(|g| g.name == node) {
        return Some((
            port_total(g, port, "rx-crc-errors"),
            port_total(g, port, "retry-req-sets"),
        ));
    }
    let sw = fabric
        .get("switches")?
        .as_array()?
        .iter()
        .find(|s| s.get("name").and_then(Value::as_str) == Some(node))?;
    let link = sw
        .get("ports")?
        .as_array()?
        .get(usize::try_from(port).ok()?)?
        .get("link")?;
    Some((num(link, &["crc_errors"]), num(link, &["retry_requests"])))
}

fn link_layer(out: &mut String, guests: &[GuestLog], fabric: Option<&Value>) {
    let _ = writeln!(
        out,
        "link layer: bit errors repaired hop by hop (CRC error -> retry request -> resent flits)"
    );
    let _ = writeln!(
        out,
        "  {:<16} {:>10} {:>10} {:>11} {:>15}",
        "hop", "bit flips", "bad flits", "CRC errors", "retry requests"
    );
    let links = fabric
        .and_then(|f| f.get("links"))
        .and_then(Value::as_array);
    if let (Some(f), Some(links)) = (fabric, links) {
        for l in links {
            let (Some(a), Some(b)) = (
                l.get("a").and_then(Value::as_str),
                l.get("b").and_then(Value::as_str),
            ) else {
                continue;
            };
            for (from, to, dir) in [(a, b, "a_to_b"), (b, a, "b_to_a")] {
                let (crc, rr) = receiver_repairs(to, guests, f).unwrap_or((0, 0));
                let _ = writeln!(
                    out,
                    "  {:<16} {:>10} {:>10} {:>11} {:>15}",
                    format!("{from} -> {to}"),
                    num(l, &[dir, "bit_flips"]),
                    num(l, &[dir, "corrupted_flits"]),
                    crc,
                    rr
                );
            }
        }
        let _ = writeln!(
            out,
            "  (the whole run, bring-up included; the receiving end counts CRC errors and asks for the retry)"
        );
    } else {
        for g in guests {
            for port in 0..2 {
                let _ = writeln!(
                    out,
                    "  {:<16} {:>10} {:>10} {:>11} {:>15}",
                    format!("-> {}.{port}", g.name),
                    "-",
                    "-",
                    port_total(g, port, "rx-crc-errors"),
                    port_total(g, port, "retry-req-sets")
                );
            }
        }
    }
}

const NET_DROPS: [&str; 7] = [
    "icrc-drops",
    "malformed",
    "wrong-peer",
    "no-route-drops",
    "not-for-us",
    "unknown-channel",
    "npi-drops",
];

fn network_layer(out: &mut String, guests: &[GuestLog], fabric: Option<&Value>) {
    let _ = writeln!(
        out,
        "network layer: packets the switches dropped or reordered, the endpoints refused"
    );
    let switches = fabric
        .and_then(|f| f.get("switches"))
        .and_then(Value::as_array);
    for s in switches.into_iter().flatten() {
        let c = |k: &str| num(s, &["counters", k]);
        let _ = writeln!(
            out,
            "  {:<6} injected drops {}, injected reorders {}, link-down drops {}, no route {}, queue drops {}",
            s.get("name").and_then(Value::as_str).unwrap_or("?"),
            c("injected_drops"),
            c("injected_reorders"),
            c("link_down_drops"),
            c("no_route"),
            c("queue_drops")
        );
    }
    for g in guests {
        let drops: Vec<String> = NET_DROPS
            .iter()
            .map(|k| format!("{k} {}", net_delta(g, k)))
            .collect();
        let _ = writeln!(out, "  {:<6} {}", g.name, drops.join(", "));
    }
}

/// One stream's two ends.
struct Stream<'a> {
    name: &'a str,
    send: Option<&'a Value>,
    recv: Option<&'a Value>,
}

fn streams(guests: &[GuestLog]) -> Vec<Stream<'_>> {
    let mut all: Vec<Stream<'_>> = Vec::new();
    for g in guests {
        for (name, v) in &g.streams {
            let i = match all.iter().position(|s| s.name == name) {
                Some(i) => i,
                None => {
                    all.push(Stream {
                        name,
                        send: None,
                        recv: None,
                    });
                    all.len() - 1
                }
            };
            let Some(s) = all.get_mut(i) else { continue };
            match v.get("role").and_then(Value::as_str) {
                Some("send") => s.send = Some(v),
                Some("recv") => s.recv = Some(v),
                _ => {}
            }
        }
    }
    all
}

fn transport_layer(out: &mut String, all: &[Stream<'_>]) {
    let _ = writeln!(
        out,
        "transport layer: what reached the endpoints as loss, repaired end to end"
    );
    let _ = writeln!(
        out,
        "  {:<16} {:>8} {:>6} {:>6} {:>9} {:>10} {:>9} {:>11}",
        "stream", "packets", "fast", "rto", "mark-psn", "go-back-n", "rto-exp", "rx-dups"
    );
    for s in all {
        let tx = |k: &str| s.send.map_or(0, |v| num(v, &["info", k]));
        let rx = |k: &str| s.recv.map_or(0, |v| num(v, &["info", k]));
        let _ = writeln!(
            out,
            "  {:<16} {:>8} {:>6} {:>6} {:>9} {:>10} {:>9} {:>11}",
            s.name,
            tx("tx_packets"),
            tx("rtx_fast"),
            tx("rtx_rto"),
            tx("rtx_mark_psn"),
            tx("rtx_go_back_n"),
            tx("rto_expiries"),
            rx("rx_duplicates")
        );
    }
    let _ = writeln!(
        out,
        "  (the sender's retransmissions by cause and RTO expiries; the receiver's duplicate packets dropped)"
    );
}

/// Builds the report from the guests' lines and, when given, ub-fabric's
/// counters.
pub fn report(guests: &[GuestLog], fabric: Option<&Value>) -> Report {
    let mut out = String::new();
    let mut problems: Vec<String> = Vec::new();
    for g in guests {
        if g.before.is_none() || g.after.is_none() {
            problems.push(format!(
                "{} printed no counters (did its selftest fail?)",
                g.name
            ));
        }
        for l in &g.bad_lines {
            problems.push(format!("{}: unreadable line: {l}", g.name));
        }
    }
    let all = streams(guests);
    if all.is_empty() {
        problems.push("no stream reported".to_string());
    }
    link_layer(&mut out, guests, fabric);
    network_layer(&mut out, guests, fabric);
    transport_layer(&mut out, &all);

    let _ = writeln!(out, "messages");
    let _ = writeln!(
        out,
        "  {:<16} {:>6} {:>6} {:>15} {:>8} {:>13} {:>11} {:>6}",
        "stream",
        "sent",
        "acked",
        "delivered once",
        "corrupt",
        "out-of-order",
        "duplicates",
        "lost"
    );
    let (mut sent_all, mut once_all, mut lost_all) = (0u64, 0u64, 0u64);
    for s in &all {
        let (Some(tx), Some(rx)) = (s.send, s.recv) else {
            problems.push(format!(
                "stream {}: no {} line",
                s.name,
                if s.send.is_none() {
                    "sender"
                } else {
                    "receiver"
                }
            ));
            continue;
        };
        let count = num(rx, &["count"]).max(num(tx, &["count"]));
        let sent = num(tx, &["sent"]);
        let acked = num(tx, &["acked"]);
        let received = num(rx, &["received"]);
        let corrupt = num(rx, &["corrupt"]);
        let ooo = num(rx, &["out_of_order"]);
        let dups = num(rx, &["duplicates"]);
        let lost = sent.saturating_sub(received);
        let _ = writeln!(
            out,
            "  {:<16} {:>6} {:>6} {:>15} {:>8} {:>13} {:>11} {:>6}",
            s.name, sent, acked, received, corrupt, ooo, dups, lost
        );
        for (end, v) in [("sender", tx), ("receiver", rx)] {
            if v.get("ok").and_then(Value::as_bool) != Some(true) {
                let e = v
                    .get("error")
                    .and_then(Value::as_str)
                    .unwrap_or("no error given");
                problems.push(format!("stream {}: the {end} failed: {e}", s.name));
            }
        }
        if sent != count || acked != count || received != count {
            problems.push(format!(
                "stream {}: {count} messages, {sent} sent, {acked} acknowledged, {received} delivered",
                s.name
            ));
        }
        if corrupt + ooo + dups > 0 {
            problems.push(format!(
                "stream {}: {corrupt} corrupt, {ooo} out of order, {dups} duplicated",
                s.name
            ));
        }
        sent_all = sent_all.saturating_add(sent);
        once_all = once_all.saturating_add(received);
        lost_all = lost_all.saturating_add(lost);
    }
    let _ = writeln!(
        out,
        "messages sent {sent_all} / delivered exactly once {once_all} / lost: {lost_all}"
    );
    for p in &problems {
        let _ = writeln!(out, "FAILED: {p}");
    }
    if problems.is_empty() {
        let _ = writeln!(
            out,
            "ok: every message arrived exactly once, in order, intact"
        );
    }
    Report {
        text: out,
        ok: problems.is_empty(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stats(crc: u64, rr: u64, icrc: u64) -> String {
        format!(
            r#"[{{"index":0,"name":"0000:00:03.0","net-stats":{{"icrc-drops":{icrc},"malformed":0}},"ports":[{{"index":0,"link-stats":{{"rx-crc-errors":{crc},"retry-req-sets":{rr}}}}},{{"index":1,"link-stats":{{"rx-crc-errors":0,"retry-req-sets":1}}}}]}}]"#
        )
    }
    const SEND: &str = r#"{"role":"send","ok":true,"error":null,"count":3,"sent":3,"bytes":9,"acked":3,"info":{"tx_packets":5,"rtx_fast":1,"rtx_rto":0,"rtx_mark_psn":0,"rtx_go_back_n":2,"rto_expiries":1}}"#;

    fn recv(received: u64, dups: u64) -> String {
        format!(
            r#"{{"role":"recv","ok":true,"error":null,"count":3,"received":{received},"bytes":9,"corrupt":0,"out_of_order":0,"duplicates":{dups},"info":{{"rx_duplicates":4}}}}"#
        )
    }

    fn guests(recv_line: &str) -> Vec<GuestLog> {
        let vm0 = format!(
            "TAP version 13\n    # demo: stats-before {}\n    # ub-tp recv: x\n    # demo: stream gbn {recv_line}\n    ok 4 gbn\n    # demo: stats-after {}\n",
            stats(1, 1, 0),
            stats(11, 9, 2)
        );
        let vm1 = format!(
            "    # demo: stats-before {}\n    # demo: stream gbn {SEND}\n    # demo: stats-after {}\n",
            stats(0, 1, 0),
            stats(5, 4, 0)
        );
        vec![parse_guest("vm0", &vm0), parse_guest("vm1", &vm1)]
    }

    #[test]
    fn parses_the_demo_lines_and_nothing_else() {
        let g = guests(&recv(3, 0));
        assert!(g[0].before.is_some() && g[0].after.is_some());
        assert_eq!(g[0].streams.len(), 1);
        assert_eq!(g[0].streams[0].0, "gbn");
        assert!(g[0].bad_lines.is_empty());
        let bad = parse_guest("vm0", "  # demo: stream gbn {not json\n  # demo: what 1\n");
        assert_eq!(bad.bad_lines.len(), 2);
        assert!(!report(&[bad], None).ok);
    }

    #[test]
    fn a_clean_run_reports_the_counters_and_passes() {
        let r = report(&guests(&recv(3, 0)), None);
        assert!(r.ok, "{}", r.text);
        assert!(
            r.text
                .contains("messages sent 3 / delivered exactly once 3 / lost: 0"),
            "{}",
            r.text
        );
        // vm0's port 0 at the end: CRC errors 11, retry requests 9;
        // icrc-drops 2 during the streams.
        assert!(r.text.contains("-> vm0.0"), "{}", r.text);
        assert!(r.text.contains("         11               9"), "{}", r.text);
        assert!(r.text.contains("icrc-drops 2"), "{}", r.text);
        // The sender's retransmissions by cause.
        assert!(r.text.contains("gbn                     5      1      0         0          2         1           4"), "{}", r.text);
    }

    #[test]
    fn a_lost_or_duplicated_message_fails() {
        let r = report(&guests(&recv(2, 0)), None);
        assert!(!r.ok);
        assert!(r.text.contains("lost: 1"), "{}", r.text);
        let r = report(&guests(&recv(3, 1)), None);
        assert!(!r.ok);
        assert!(r.text.contains("1 duplicated"), "{}", r.text);
    }

    #[test]
    fn a_missing_end_or_guest_fails() {
        let mut g = guests(&recv(3, 0));
        g[1].streams.clear();
        let r = report(&g, None);
        assert!(!r.ok);
        assert!(r.text.contains("stream gbn: no sender line"), "{}", r.text);
        let r = report(&[parse_guest("vm0", "")], None);
        assert!(!r.ok);
        assert!(r.text.contains("vm0 printed no counters"));
    }

    #[test]
    fn a_failed_end_fails_with_its_error() {
        let rx = recv(3, 0).replace(
            r#""ok":true,"error":null"#,
            r#""ok":false,"error":"ETIMEDOUT""#,
        );
        let r = report(&guests(&rx), None);
        assert!(!r.ok);
        assert!(
            r.text.contains("the receiver failed: ETIMEDOUT"),
            "{}",
            r.text
        );
    }

    #[test]
    fn the_fabric_adds_every_hop_and_the_switches() {
        let fabric: Value = serde_json::from_str(
            r#"{"links":[{"a":"vm0.0","b":"sw0.0","a_to_b":{"bit_flips":7,"corrupted_flits":6},"b_to_a":{"bit_flips":3,"corrupted_flits":3}}],
                "switches":[{"name":"sw0","counters":{"injected_drops":12,"injected_reorders":13},"ports":[{"link":{"crc_errors":6,"retry_requests":5}}]}]}"#,
        )
        .unwrap();
        let r = report(&guests(&recv(3, 0)), Some(&fabric));
        assert!(r.ok, "{}", r.text);
        // Into the switch: its own counters; into the guest: the guest's.
        assert!(
            r.text
                .contains("vm0.0 -> sw0.0            7          6           6               5"),
            "{}",
            r.text
        );
        assert!(
            r.text
                .contains("sw0.0 -> vm0.0            3          3          11               9"),
            "{}",
            r.text
        );
        assert!(
            r.text
                .contains("sw0    injected drops 12, injected reorders 13"),
            "{}",
            r.text
        );
    }
}
