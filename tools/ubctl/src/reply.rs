// SPDX-License-Identifier: GPL-2.0
//! Typed views of the kernel's replies and their text form.
//!
//! Replies decode into [`Obj`]s keyed by the spec's attribute names (so the
//! JSON keys are the spec's names, stable by construction); this module
//! picks the fields each command shows and lays them out iproute2-style.

use crate::attr::{addr_text, decode_set, DecodeError, Obj, RawAttr, Val};
use crate::spec::Set;

/// Decode every reply of a request as members of `set`.
pub fn decode_all(set: &'static Set, replies: &[Vec<RawAttr>]) -> Result<Vec<Obj>, DecodeError> {
    replies.iter().map(|r| decode_set(set, r)).collect()
}

/// Nests holding counters: shown only with `-s`.
pub const STATS_KEYS: &[&str] = &["net-stats", "link-stats", "dev-stats", "stats"];

/// Drop the counters unless `stats`.
pub fn filter_stats(o: &Obj, stats: bool) -> Obj {
    if stats {
        o.clone()
    } else {
        o.without(STATS_KEYS)
    }
}

fn flag(v: Option<u64>) -> &'static str {
    match v {
        Some(0) => "down",
        Some(_) => "up",
        None => "?",
    }
}

fn kv(o: &Obj, skip: &[&str]) -> String {
    let mut parts = Vec::new();
    for (k, v) in &o.0 {
        if skip.contains(k) || matches!(v, Val::Obj(_) | Val::List(_)) {
            continue;
        }
        parts.push(format!("{k} {v}"));
    }
    parts.join(" ")
}

fn counters(name: &str, v: Option<&Val>, out: &mut String) {
    if let Some(Val::Obj(c)) = v {
        out.push_str(&format!("\n    {name}:"));
        for (k, n) in &c.0 {
            out.push_str(&format!(" {k} {n}"));
        }
    }
}

/// `dev show`: `0: 0000:00:03.0 ports 2 version 0x00010000 npi-mode strict npi 0`
/// then the addresses.
pub fn dev_text(o: &Obj) -> String {
    let mut s = format!(
        "{}: {}",
        o.uint("index")
            .map_or_else(|| "?".to_string(), |i| i.to_string()),
        o.str("name").unwrap_or("?")
    );
    if let Some(p) = o.uint("ports") {
        s.push_str(&format!(" ports {p}"));
    }
    if let Some(v) = o.uint("version") {
        s.push_str(&format!(" version {v:#010x}"));
    }
    let rest = kv(o, &["index", "name", "ports", "version"]);
    if !rest.is_empty() {
        s.push(' ');
        s.push_str(&rest);
    }
    if let Some(Val::List(l)) = o.get("addr") {
        let a: Vec<String> = l.iter().map(addr_text).collect();
        s.push_str(&format!("\n    addr {}", a.join(" ")));
    }
    counters("net-stats", o.get("net-stats"), &mut s);
    s
}

/// `port show`: `0/1: admin up phy up dll-state normal ...`, the negotiated
/// parameters, the credits per VL, and with `-s` the counters.
pub fn port_text(o: &Obj) -> String {
    let id = format!(
        "{}/{}",
        o.uint("dev-index")
            .map_or_else(|| "?".to_string(), |i| i.to_string()),
        o.uint("index")
            .map_or_else(|| "?".to_string(), |i| i.to_string())
    );
    let mut s = format!(
        "{id}: admin {} phy {}",
        flag(o.uint("admin-up")),
        flag(o.uint("phy-up"))
    );
    let rest = kv(o, &["dev-index", "index", "admin-up", "phy-up"]);
    if !rest.is_empty() {
        s.push(' ');
        s.push_str(&rest);
    }
    if let Some(Val::List(l)) = o.get("vl") {
        for vl in l {
            s.push_str(&format!(
                "\n    vl {}",
                kv(vl, &[]).trim_start_matches("index ")
            ));
        }
    }
    counters("link-stats", o.get("link-stats"), &mut s);
    counters("dev-stats", o.get("dev-stats"), &mut s);
    s
}

/// `stats`: a port's counters under `0/1:`.
pub fn port_counters_text(o: &Obj) -> String {
    let mut s = format!(
        "{}/{}:",
        o.uint("dev-index")
            .map_or_else(|| "?".to_string(), |i| i.to_string()),
        o.uint("index")
            .map_or_else(|| "?".to_string(), |i| i.to_string())
    );
    counters("link-stats", o.get("link-stats"), &mut s);
    counters("dev-stats", o.get("dev-stats"), &mut s);
    s
}

/// `route show`: `dev 0 10.0.0.0/24 ports 0,1 per-flow`.
pub fn route_text(o: &Obj) -> String {
    let dst = match o.get("dst") {
        Some(Val::Obj(a)) => addr_text(a),
        _ => "?".to_string(),
    };
    let mut s = format!(
        "dev {} {dst}/{}",
        o.uint("dev-index")
            .map_or_else(|| "?".to_string(), |i| i.to_string()),
        o.uint("prefix-len")
            .map_or_else(|| "?".to_string(), |i| i.to_string())
    );
    if let Some(mask) = o.uint("ports") {
        s.push_str(&format!(" ports {}", ports_list(mask)));
    }
    if let Some(lb) = o.get("load-balance") {
        s.push_str(&format!(" {lb}"));
    }
    s
}

/// `0,1` for the bit mask 0b11.
pub fn ports_list(mask: u64) -> String {
    let v: Vec<String> = (0..64u32)
        .filter(|b| mask & (1u64 << b) != 0)
        .map(|b| b.to_string())
        .collect();
    v.join(",")
}

/// One `monitor` line: `port 0/1 link-down dll-state disabled phy down`.
pub fn event_text(o: &Obj) -> String {
    let ev = o
        .get("event")
        .map_or_else(|| "change".to_string(), |v| v.to_string());
    format!(
        "port {}/{} {ev} {}",
        o.uint("dev-index")
            .map_or_else(|| "?".to_string(), |i| i.to_string()),
        o.uint("index")
            .map_or_else(|| "?".to_string(), |i| i.to_string()),
        kv(&o.without(STATS_KEYS), &["dev-index", "index", "event"])
    )
    .trim_end()
    .to_string()
}

/// `error 110 (Connection timed out)` for a TP Channel's errno, nothing for
/// 0 or no error.
fn tp_error(o: &Obj) -> String {
    match o.uint("error").and_then(|e| i32::try_from(e).ok()) {
        None | Some(0) => String::new(),
        Some(e) => format!(" error {e} ({})", crate::nl::strerror(e)),
    }
}

/// `0/3 rts peer 10.0.2.100 key 101`: a TP Channel's identity and state.
fn tp_head(o: &Obj) -> String {
    let peer = match o.get("peer") {
        Some(Val::Obj(a)) => addr_text(a),
        _ => "?".to_string(),
    };
    // A CTP end has no key.
    let key = match o.uint("key") {
        Some(k) => format!(" key {k}"),
        None => String::new(),
    };
    format!(
        "{}/{} {} peer {peer}{key}{}",
        o.uint("dev-index")
            .map_or_else(|| "?".to_string(), |i| i.to_string()),
        o.uint("tpn")
            .map_or_else(|| "?".to_string(), |i| i.to_string()),
        o.get("state")
            .map_or_else(|| "?".to_string(), |v| v.to_string()),
        tp_error(o)
    )
}

/// `tp show`: `0/3: rts peer 10.0.2.100 key 101 peer-tpn 5 mode selective
/// fast-retransmit 1 mtu 4096 claimed 1 rx-queued 0`, an error if it
/// failed, and with `-s` the counters.
pub fn tp_text(o: &Obj) -> String {
    let head = tp_head(o);
    let (id, rest_of_head) = head.split_once(' ').unwrap_or((head.as_str(), ""));
    let mut s = format!("{id}: {rest_of_head}");
    let rest = kv(o, &["dev-index", "tpn", "peer", "key", "state", "error"]);
    if !rest.is_empty() {
        s.push(' ');
        s.push_str(&rest);
    }
    counters("stats", o.get("stats"), &mut s);
    s
}

/// One `monitor` line for a TP Channel: `tp 0/3 closed peer 10.0.2.100 key
/// 101`, or `... err peer ... error 110 (Connection timed out)`.
pub fn tp_event_text(o: &Obj) -> String {
    format!("tp {}", tp_head(o))
}

/// `tpg show`: `0/3: rts peer 10.0.2.100 key 140 members 4 claimed 1
/// rx-queued 0`, an error if a member failed, one line per member (`member
/// 0/3: rts key 140 peer-tpn 7`), and with `-s` the members' counters
/// summed.
pub fn tpg_text(o: &Obj) -> String {
    let mut s = tp_text(&o.without(&["stats"]));
    if let Some(Val::List(members)) = o.get("member") {
        let dev = o
            .uint("dev-index")
            .map_or_else(|| "?".to_string(), |i| i.to_string());
        for m in members {
            s.push_str(&format!(
                "\n    member {dev}/{}: {} {}{}",
                m.uint("tpn")
                    .map_or_else(|| "?".to_string(), |i| i.to_string()),
                m.get("state")
                    .map_or_else(|| "?".to_string(), |v| v.to_string()),
                kv(m, &["tpn", "state", "error"]),
                tp_error(m)
            ));
        }
    }
    counters("stats", o.get("stats"), &mut s);
    s
}

/// One `monitor` line for a TP Channel Group: `tpg 0/3 rts peer 10.0.2.100
/// key 140 members 4`, `closed` once it ended.
pub fn tpg_event_text(o: &Obj) -> String {
    let members = o
        .uint("members")
        .map_or_else(|| "?".to_string(), |n| n.to_string());
    format!("tpg {} members {members}", tp_head(o))
}

/// One `monitor` JSON line: `{"object":"port"|"tp", ...the attributes}`.
pub fn event_json(object: &str, o: &Obj) -> Result<String, serde_json::Error> {
    let mut m = serde_json::Map::new();
    m.insert(
        "object".to_string(),
        serde_json::Value::String(object.to_string()),
    );
    if let serde_json::Value::Object(attrs) = serde_json::to_value(o)? {
        m.extend(attrs);
    }
    serde_json::to_string(&serde_json::Value::Object(m))
}
