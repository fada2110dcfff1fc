// SPDX-License-Identifier: GPL-2.0
//! Ties ubctl's numbering (`ubctl::spec`) to
//! `Documentation/netlink/specs/ub.yaml`: the numbers are recomputed from
//! the YAML with YNL's rules (nlspec.py: attributes from 1 in listed order
//! unless `value:`, enum entries from `value-start` or 0, operations from 1
//! in order, unified message ids) and every set, attribute, type, enum and
//! operation must match both ways.

use serde_yaml::Value;
use ubctl::spec::{self, Ty};

fn spec_yaml() -> Value {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../Documentation/netlink/specs/ub.yaml"
    );
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn s<'a>(v: &'a Value, k: &str) -> Option<&'a str> {
    v.get(k).and_then(Value::as_str)
}

fn list<'a>(v: &'a Value, k: &str) -> &'a [Value] {
    v.get(k)
        .and_then(Value::as_sequence)
        .map_or(&[], |x| x.as_slice())
}

fn expected_ty(a: &Value) -> String {
    let t = s(a, "type").unwrap_or("?");
    let mut d = t.to_string();
    if let Some(e) = s(a, "enum") {
        d = format!("{t} enum {e}");
    }
    if let Some(h) = s(a, "display-hint") {
        d = format!("{t} hint {h}");
    }
    if let Some(n) = s(a, "nested-attributes") {
        let multi = a
            .get("multi-attr")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        d = format!("{t} {} {n}", if multi { "multi" } else { "single" });
    }
    d
}

fn ours_ty(t: Ty) -> String {
    match t {
        Ty::Enum(e) => format!("u32 enum {}", e.name),
        Ty::Ipv4 => "binary hint ipv4".to_string(),
        Ty::Ipv6 => "binary hint ipv6".to_string(),
        Ty::Nest(n) => format!("nest single {}", n.name),
        Ty::MultiNest(n) => format!("nest multi {}", n.name),
        other => other.spec_name().to_string(),
    }
}

#[test]
fn spec_tables_match_the_yaml() {
    let y = spec_yaml();
    assert_eq!(s(&y, "name"), Some(spec::FAMILY_NAME));
    assert_eq!(s(&y, "protocol"), Some("genetlink"));

    // Attribute sets, both ways.
    let sets = list(&y, "attribute-sets");
    assert_eq!(
        sets.iter().filter_map(|x| s(x, "name")).collect::<Vec<_>>(),
        spec::SETS.iter().map(|x| x.name).collect::<Vec<_>>(),
        "attribute sets"
    );
    for set in sets {
        let name = s(set, "name").unwrap_or("?");
        let ours = spec::SETS.iter().find(|x| x.name == name);
        let Some(ours) = ours else {
            panic!("set {name} unknown to ubctl")
        };
        let mut val = 1u64;
        let mut theirs = Vec::new();
        for a in list(set, "attributes") {
            if let Some(v) = a.get("value").and_then(Value::as_u64) {
                val = v;
            }
            theirs.push((s(a, "name").unwrap_or("?").to_string(), val, expected_ty(a)));
            val += 1;
        }
        let mine: Vec<_> = ours
            .attrs
            .iter()
            .map(|a| (a.name.to_string(), u64::from(a.id), ours_ty(a.ty)))
            .collect();
        assert_eq!(mine, theirs, "attribute set {name}");
    }

    // Enums.
    let enums: Vec<&Value> = list(&y, "definitions")
        .iter()
        .filter(|d| s(d, "type") == Some("enum"))
        .collect();
    assert_eq!(enums.len(), spec::ENUMS.len(), "number of enums");
    for e in enums {
        let name = s(e, "name").unwrap_or("?");
        let ours = spec::ENUMS.iter().find(|x| x.name == name);
        let Some(ours) = ours else {
            panic!("enum {name} unknown to ubctl")
        };
        let start = e.get("value-start").and_then(Value::as_u64).unwrap_or(0);
        for (i, entry) in list(e, "entries").iter().enumerate() {
            let ename = entry.as_str().or_else(|| s(entry, "name")).unwrap_or("?");
            let value = entry
                .get("value")
                .and_then(Value::as_u64)
                .unwrap_or(start + i as u64);
            assert_eq!(
                ours.value_of(ename).map(u64::from),
                Some(value),
                "enum {name} entry {ename}"
            );
        }
        assert_eq!(
            ours.entries.len(),
            list(e, "entries").len(),
            "enum {name} size"
        );
    }
    assert_eq!(
        spec::addr_type::CNA16,
        spec::ADDR_TYPE.value_of("cna16").unwrap_or(99)
    );
    assert_eq!(
        spec::addr_type::CNA24,
        spec::ADDR_TYPE.value_of("cna24").unwrap_or(99)
    );
    assert_eq!(
        spec::addr_type::IPV4,
        spec::ADDR_TYPE.value_of("ipv4").unwrap_or(99)
    );
    assert_eq!(
        spec::addr_type::IPV6,
        spec::ADDR_TYPE.value_of("ipv6").unwrap_or(99)
    );
    assert_eq!(
        spec::load_balance::PER_FLOW,
        spec::LOAD_BALANCE.value_of("per-flow").unwrap_or(99)
    );
    assert_eq!(
        spec::load_balance::PER_PACKET,
        spec::LOAD_BALANCE.value_of("per-packet").unwrap_or(99)
    );

    // Operations: unified message ids from 1.
    let ops = y.get("operations").map(|o| list(o, "list")).unwrap_or(&[]);
    let mut val = 1u64;
    let mut theirs = Vec::new();
    for op in ops {
        if let Some(v) = op.get("value").and_then(Value::as_u64) {
            val = v;
        }
        // An op without its own attribute-set uses the one it notifies
        // for (port-change-ntf: notify port-get).
        let set = s(op, "attribute-set").map(str::to_string).or_else(|| {
            let n = s(op, "notify")?;
            ops.iter()
                .find(|o| s(o, "name") == Some(n))
                .and_then(|o| s(o, "attribute-set"))
                .map(str::to_string)
        });
        theirs.push((
            s(op, "name").unwrap_or("?").to_string(),
            val,
            set.unwrap_or_default(),
        ));
        val += 1;
    }
    let mine: Vec<_> = spec::OPS
        .iter()
        .map(|o| (o.name.to_string(), u64::from(o.cmd), o.set.name.to_string()))
        .collect();
    assert_eq!(mine, theirs, "operations");

    // Multicast group.
    let groups = y
        .get("mcast-groups")
        .map(|g| list(g, "list"))
        .unwrap_or(&[]);
    assert!(
        groups
            .iter()
            .any(|g| s(g, "name") == Some(spec::MCGRP_MONITOR)),
        "mcast group {}",
        spec::MCGRP_MONITOR
    );
}

/// The limits ubctl enforces before sending must be the spec's `checks`.
#[test]
fn cli_limits_are_the_spec_checks() {
    let y = spec_yaml();
    let check = |set: &str, attr: &str, k: &str| -> Option<u64> {
        list(&y, "attribute-sets")
            .iter()
            .find(|x| s(x, "name") == Some(set))
            .and_then(|x| {
                list(x, "attributes")
                    .iter()
                    .find(|a| s(a, "name") == Some(attr))
            })
            .and_then(|a| a.get("checks"))
            .and_then(|c| c.get(k))
            .and_then(Value::as_u64)
    };
    assert_eq!(
        check("port", "index", "max"),
        Some(u64::from(ubctl::cli::PORT_MAX))
    );
    assert_eq!(
        check("echo", "size", "max"),
        Some(u64::from(ubctl::cli::ECHO_SIZE_MAX))
    );
    assert_eq!(
        check("addr", "cna", "max"),
        Some(u64::from(ubctl::addr::CNA24_MAX))
    );
    assert_eq!(
        check("port", "num-retry-threshold", "min"),
        Some(u64::from(ubctl::cli::RETRY_THRESHOLD_MIN))
    );
    assert_eq!(
        check("port", "num-phy-reinit-threshold", "min"),
        Some(u64::from(ubctl::cli::REINIT_THRESHOLD_MIN))
    );
    assert_eq!(check("route", "prefix-len", "max"), Some(128));
    assert_eq!(
        check("dev", "npi", "max"),
        Some(u64::from(ubctl::cli::NPI_MAX))
    );
    use ubctl::cli as c;
    assert_eq!(check("tp", "mtu", "min"), Some(u64::from(c::TP_MTU_MIN)));
    assert_eq!(check("tp", "mtu", "max"), Some(u64::from(c::TP_MTU_MAX)));
    assert_eq!(
        check("tp", "send-window", "max"),
        Some(u64::from(c::TP_SEND_WINDOW_MAX))
    );
    assert_eq!(
        check("tp", "lb-range", "max"),
        Some(u64::from(c::TP_LB_RANGE_MAX))
    );
    assert_eq!(
        check("tp", "rto-base-us", "min"),
        Some(u64::from(c::TP_RTO_BASE_MIN_US))
    );
    assert_eq!(
        check("tp", "rto-base-us", "max"),
        Some(u64::from(c::TP_RTO_BASE_MAX_US))
    );
    assert_eq!(check("tp", "ooo-window", "min"), Some(128));
    assert_eq!(check("tp", "ooo-window", "max"), Some(2048));
    assert_eq!(
        check("tp", "members", "min"),
        Some(u64::from(c::TPG_MEMBERS_MIN))
    );
    assert_eq!(
        check("tp", "members", "max"),
        Some(u64::from(c::TPG_MEMBERS_MAX))
    );
}

/// `NAME -> value` of every enumerator in a C header (C's rules: from 0 in
/// each enum, `= N` resets, `= OTHER_NAME` refers back).
fn c_enums(text: &str) -> std::collections::HashMap<String, i64> {
    let mut out = std::collections::HashMap::new();
    let mut in_enum = false;
    let mut next = 0i64;
    for line in text.lines() {
        let l = line.trim();
        if l.starts_with("enum") && l.ends_with('{') {
            in_enum = true;
            next = 0;
            continue;
        }
        if in_enum && l.starts_with('}') {
            in_enum = false;
            continue;
        }
        if !in_enum || l.is_empty() || l.starts_with("/*") || l.starts_with('*') {
            continue;
        }
        let item = l.trim_end_matches(',');
        let (name, val) = match item.split_once('=') {
            Some((n, v)) => {
                let v = v.trim();
                let parsed = v
                    .strip_prefix("0x")
                    .map_or_else(|| v.parse().ok(), |h| i64::from_str_radix(h, 16).ok())
                    .or_else(|| {
                        out.get(
                            v.trim_start_matches('(')
                                .split_whitespace()
                                .next()
                                .unwrap_or(""),
                        )
                        .copied()
                    });
                (n.trim(), parsed.unwrap_or(next))
            }
            None => (item, next),
        };
        out.insert(name.to_string(), val);
        next = val + 1;
    }
    out
}

fn c_name(parts: &[&str]) -> String {
    parts
        .iter()
        .map(|p| p.to_uppercase().replace('-', "_"))
        .collect::<Vec<_>>()
        .join("_")
}

/// When the kernel side has generated the uapi header (wip/nl:
/// `include/uapi/linux/ub_netlink.h`), ubctl's numbers must be the
/// generator's too: a second tie, to YNL's own output.
#[test]
fn spec_tables_match_the_generated_uapi_header() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../include/uapi/linux/ub_netlink.h"
    );
    let Ok(text) = std::fs::read_to_string(path) else {
        eprintln!("{path} not generated yet: only the YAML is checked");
        return;
    };
    let e = c_enums(&text);
    let mut checked = 0;
    for set in spec::SETS {
        for a in set.attrs {
            let n = c_name(&["ub-a", set.name, a.name]);
            assert_eq!(e.get(&n).copied(), Some(i64::from(a.id)), "{n}");
            checked += 1;
        }
    }
    for op in spec::OPS {
        let n = c_name(&["ub-cmd", op.name]);
        assert_eq!(e.get(&n).copied(), Some(i64::from(op.cmd)), "{n}");
        checked += 1;
    }
    for en in spec::ENUMS {
        for (i, entry) in en.entries.iter().enumerate() {
            let n = c_name(&["ub", en.name, entry]);
            assert_eq!(e.get(&n).copied(), Some(i as i64), "{n}");
            checked += 1;
        }
    }
    assert!(checked > 100, "{checked}");
}
