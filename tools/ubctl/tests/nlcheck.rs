// SPDX-License-Identifier: GPL-2.0
//! ub-nlcheck's batch on the host: every request encodes, every malformed
//! one really violates `ub.yaml` at the attribute it expects the kernel to
//! name, and the judge passes exactly the refusals that carry what the
//! issue asks (message, bad or missing attribute, EPERM).

use serde_yaml::Value as Y;
use ubctl::attr::{Attr, Value};
use ubctl::nl::{encode_request, Error, KernelError};
use ubctl::nlcheck::{
    judge, offset_of, privileged_cases, unprivileged_cases, Case, Expect, Target, NO_DEV, NO_TPN,
};
use ubctl::spec::{self, Ty};

const T: Target = Target {
    dev: 0,
    port: 1,
    ports: 2,
    admin_up: true,
};

fn spec_yaml() -> Y {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../Documentation/netlink/specs/ub.yaml"
    );
    serde_yaml::from_str(&std::fs::read_to_string(path).unwrap_or_default()).unwrap_or(Y::Null)
}

fn yattr<'a>(y: &'a Y, set: &str, attr: &str) -> Option<&'a Y> {
    y.get("attribute-sets")?
        .as_sequence()?
        .iter()
        .find(|s| s.get("name").and_then(Y::as_str) == Some(set))?
        .get("attributes")?
        .as_sequence()?
        .iter()
        .find(|a| a.get("name").and_then(Y::as_str) == Some(attr))
}

/// The attribute at `path` in the request, and the set it belongs to.
fn find<'a>(case: &'a Case, path: &str) -> Option<(&'static spec::Set, &'a Attr)> {
    let parts: Vec<&str> = path.split('.').collect();
    let mut set = case.req.set()?;
    let mut attrs = &case.req.attrs;
    let (_, rest) = parts.split_first()?;
    for (i, p) in rest.iter().enumerate() {
        let a = attrs.iter().find(|a| {
            set.get(a.id).map_or_else(
                || format!("<unknown type {}>", a.id),
                |d| d.name.to_string(),
            ) == *p
        })?;
        if i + 1 == rest.len() {
            return Some((set, a));
        }
        match (set.get(a.id).map(|d| d.ty), &a.value) {
            (Some(Ty::Nest(s) | Ty::MultiNest(s)), Value::Nest(c)) => {
                set = s;
                attrs = c;
            }
            _ => return None,
        }
    }
    None
}

fn as_u64(v: &Value) -> Option<u64> {
    match v {
        Value::U8(x) => Some(u64::from(*x)),
        Value::U16(x) => Some(u64::from(*x)),
        Value::U32(x) => Some(u64::from(*x)),
        Value::U64(x) => Some(*x),
        _ => None,
    }
}

/// Why the attribute at `path` breaks the spec (None: it does not).
fn violation(y: &Y, case: &Case, path: &str) -> Option<String> {
    let (set, a) = find(case, path)?;
    let Some(def) = set.get(a.id) else {
        return Some("unknown attribute type".into());
    };
    let len = match &a.value {
        Value::U8(_) => 1,
        Value::U16(_) => 2,
        Value::U32(_) => 4,
        Value::U64(_) => 8,
        Value::Bytes(b) => b.len(),
        Value::Str(s) => s.len() + 1,
        Value::Nest(_) => usize::MAX,
    };
    let want = match def.ty {
        Ty::U8 => Some(1),
        Ty::U32 | Ty::Enum(_) => Some(4),
        Ty::U64 => Some(8),
        Ty::Ipv4 => Some(4),
        Ty::Ipv6 => Some(16),
        Ty::Nest(_) | Ty::MultiNest(_) => Some(usize::MAX),
        _ => None,
    };
    if want.is_some_and(|w| w != len) {
        return Some(format!("length {len} for a {}", def.ty.spec_name()));
    }
    let v = as_u64(&a.value)?;
    if let Ty::Enum(e) = def.ty {
        if v >= e.entries.len() as u64 {
            return Some(format!("{v} is past enum {}", e.name));
        }
    }
    let checks = yattr(y, set.name, def.name).and_then(|x| x.get("checks"));
    if let Some(max) = checks.and_then(|c| c.get("max")).and_then(Y::as_u64) {
        if v > max {
            return Some(format!("{v} > max {max}"));
        }
    }
    if let Some(min) = checks.and_then(|c| c.get("min")).and_then(Y::as_u64) {
        if v < min {
            return Some(format!("{v} < min {min}"));
        }
    }
    if v == u64::from(NO_DEV)
        || (def.name == "tpn" && v == u64::from(NO_TPN))
        || (def.name == "index" && v == u64::from(T.ports))
    {
        return Some("no such object".into());
    }
    None
}

#[test]
fn every_case_encodes_and_is_malformed_where_it_says() {
    let y = spec_yaml();
    let cases = privileged_cases(&T);
    assert!(cases.len() >= 30, "{}", cases.len());
    for c in &cases {
        assert!(
            encode_request(
                0x20,
                neli::consts::nl::NlmF::ACK,
                1,
                c.req.cmd,
                &c.req.attrs
            )
            .is_ok(),
            "{}",
            c.name
        );
        match &c.expect {
            Expect::BadAttr(path) => {
                let off = offset_of(&c.req, path)
                    .unwrap_or_else(|| panic!("{}: {path} not in the request", c.name));
                assert_eq!(
                    c.req.name_at(off).as_deref(),
                    Some(path.as_str()),
                    "{}",
                    c.name
                );
                assert!(
                    violation(&y, c, path).is_some(),
                    "{}: {path} breaks nothing in the spec",
                    c.name
                );
            }
            Expect::Missing { attr, nest } => {
                let path = match nest {
                    Some(n) => format!(
                        "{n}.{}",
                        attr.split_once('.').map_or(attr.as_str(), |x| x.1)
                    ),
                    None => attr.clone(),
                };
                assert!(find(c, &path).is_none(), "{}: {path} is present", c.name);
                if let Some(n) = nest {
                    assert!(find(c, n).is_some(), "{}: nest {n} is absent", c.name);
                }
            }
            Expect::Rule { attr, .. } => {
                // Well-formed: every attribute passes the policy, so the
                // handler's rule is what refuses it.
                for a in &c.req.attrs {
                    let set = c.req.set().map_or("", |s| s.name);
                    let name = c.req.set().and_then(|s| s.get(a.id)).map(|d| d.name);
                    let path = format!("{set}.{}", name.unwrap_or("?"));
                    assert!(
                        violation(&y, c, &path).is_none() || path.ends_with(".tpn"),
                        "{}: {path} breaks the policy",
                        c.name
                    );
                }
                if let Some(a) = attr {
                    assert!(offset_of(&c.req, a).is_some(), "{}: {a} absent", c.name);
                }
            }
            Expect::Perm => panic!("{}: a privileged case expecting EPERM", c.name),
        }
    }
    // The brief's named cases are all there.
    for n in [
        "addr-add ipv4 of 3 bytes",
        "addr-add ipv4 of 5 bytes",
        "port-get u64 port.dev-index",
        "port-get unknown attribute 99",
        "port-set num-retry-threshold 0",
        "dev-get unknown device",
        "tp-get unknown TPN",
        "tp-get without tp.tpn",
        "tp-new without tp.peer",
        "tp-new ooo-window 384 (not a power of two)",
        "tp-new fast-retransmit with per-packet load balancing",
        "tp-set unknown TPN",
        "tp-set mtu (fixed at setup)",
        "tp-del unknown TPN",
    ] {
        assert!(cases.iter().any(|c| c.name == n), "{n}");
    }
}

#[test]
fn unprivileged_cases_are_every_mutating_operation_and_well_formed() {
    let y = spec_yaml();
    let admin_ops: Vec<&str> = y
        .get("operations")
        .and_then(|o| o.get("list"))
        .and_then(Y::as_sequence)
        .map(|l| {
            l.iter()
                .filter(|o| {
                    o.get("flags")
                        .and_then(Y::as_sequence)
                        .is_some_and(|f| f.iter().any(|x| x.as_str() == Some("admin-perm")))
                })
                .filter_map(|o| o.get("name").and_then(Y::as_str))
                .collect()
        })
        .unwrap_or_default();
    assert!(admin_ops.len() >= 6, "{admin_ops:?}");
    let cases = unprivileged_cases(&T);
    let ops: Vec<String> = cases.iter().map(|c| c.req.op_name()).collect();
    assert_eq!(ops, admin_ops);
    for c in &cases {
        assert_eq!(c.expect, Expect::Perm);
        for path in c
            .req
            .attrs
            .iter()
            .filter_map(|a| c.req.set()?.get(a.id))
            .map(|d| format!("{}.{}", c.req.set().map_or("", |s| s.name), d.name))
        {
            assert!(
                violation(&y, c, &path).is_none(),
                "{}: {path} is malformed",
                c.name
            );
        }
    }
}

fn kerr(errno: i32, msg: Option<&str>) -> KernelError {
    KernelError {
        errno,
        msg: msg.map(str::to_string),
        ..KernelError::default()
    }
}

fn answer(c: &Case, e: KernelError) -> Result<(), Error> {
    Err(Error::kernel(&c.req, e))
}

#[test]
fn the_judge_wants_message_and_the_right_attribute() {
    let cases = privileged_cases(&T);
    let by = |n: &str| cases.iter().find(|c| c.name == n).cloned();
    let Some(ip3) = by("addr-add ipv4 of 3 bytes") else {
        panic!("case missing")
    };
    let right = offset_of(&ip3.req, "dev.addr.ipv4");
    let wrong = offset_of(&ip3.req, "dev.index");
    let with = |off: Option<u32>, msg: Option<&str>| {
        let mut e = kerr(22, msg);
        e.offset = off;
        judge(&ip3, &answer(&ip3, e))
    };
    assert!(with(right, Some("invalid attribute length")).is_ok());
    assert!(with(wrong, Some("invalid attribute length"))
        .unwrap_err()
        .contains("points at dev.index"));
    assert!(with(None, Some("invalid attribute length"))
        .unwrap_err()
        .contains("names no attribute"));
    assert!(with(right, None).unwrap_err().contains("no extack message"));
    assert!(with(right, Some(" "))
        .unwrap_err()
        .contains("no extack message"));
    assert_eq!(judge(&ip3, &Ok(())), Err("accepted".to_string()));
    assert!(judge(&ip3, &Err(Error::Timeout("x".into())))
        .unwrap_err()
        .contains("no kernel error"));

    let Some(miss) = by("addr-add without addr.type") else {
        panic!("case missing")
    };
    let nest_off = offset_of(&miss.req, "dev.addr");
    let mut e = kerr(22, Some("Missing attribute"));
    e.miss_type = Some(u32::from(spec::addr::TYPE));
    e.miss_nest = nest_off;
    assert!(judge(&miss, &answer(&miss, e.clone())).is_ok());
    e.miss_nest = None; // then it would be dev.<type 1> = dev.index
    assert!(judge(&miss, &answer(&miss, e)).is_err());
    // Pointing at the nest it is missing from names it as well...
    let mut e = kerr(22, Some("address without its type attribute"));
    e.offset = nest_off;
    assert!(judge(&miss, &answer(&miss, e.clone())).is_ok());
    // ...but not at some other attribute.
    e.offset = offset_of(&miss.req, "dev.index");
    assert!(judge(&miss, &answer(&miss, e)).is_err());
    // A top-level missing attribute needs MISS_TYPE.
    let Some(top) = by("route-add without route.dst") else {
        panic!("case missing")
    };
    let mut e = kerr(22, Some("Missing attribute"));
    e.offset = offset_of(&top.req, "route.dev-index");
    assert!(judge(&top, &answer(&top, e)).is_err());

    let perm = &unprivileged_cases(&T)[0];
    assert!(judge(perm, &answer(perm, kerr(1, None))).is_ok_and(|d| d.contains("GENL_ADMIN_PERM")));
    assert!(judge(perm, &answer(perm, kerr(22, Some("x"))))
        .unwrap_err()
        .contains("instead of EPERM"));
}

#[test]
fn snapshot_ignores_counters_and_link_state_only() {
    use ubctl::attr::{Obj, Val};
    let port = |up: u64, crc: u64, dll: u32| {
        Obj(vec![
            ("dev-index", Val::U(0)),
            ("index", Val::U(1)),
            ("admin-up", Val::U(up)),
            ("dll-state", Val::Enum(None, dll)),
            (
                "link-stats",
                Val::Obj(Obj(vec![("rx-crc-errors", Val::U(crc))])),
            ),
        ])
    };
    let a = ubctl::nlcheck::snapshot(&[], &[port(1, 0, 3)], &[], &[]);
    assert_eq!(a, ubctl::nlcheck::snapshot(&[], &[port(1, 9, 1)], &[], &[]));
    assert_ne!(a, ubctl::nlcheck::snapshot(&[], &[port(0, 0, 3)], &[], &[]));
    // A channel the batch made (its key) changes the state; another user's
    // channel, or a channel's counters and state moving, does not.
    let chan = |key: u32, state: u32| {
        Obj(vec![
            ("key", Val::U(u64::from(key))),
            ("state", Val::Enum(None, state)),
        ])
    };
    let none = ubctl::nlcheck::snapshot(&[], &[], &[], &[chan(7, 2)]);
    assert_eq!(none, ubctl::nlcheck::snapshot(&[], &[], &[], &[]));
    let made = ubctl::nlcheck::snapshot(&[], &[], &[], &[chan(ubctl::nlcheck::SPARE_KEY, 0)]);
    assert_ne!(none, made);
}

#[test]
fn the_judge_checks_a_rule_refusal_errno_message_and_attribute() {
    let cases = privileged_cases(&T);
    let Some(c) = cases
        .iter()
        .find(|c| c.name == "tp-new fast-retransmit with per-packet load balancing")
    else {
        panic!("case missing")
    };
    let right = offset_of(&c.req, "tp.fast-retransmit");
    let msg =
        "fast retransmit cannot be combined with per-packet load balancing (UB spec table 6-7)";
    let with = |errno: i32, off: Option<u32>, m: Option<&str>| {
        let mut e = kerr(errno, m);
        e.offset = off;
        judge(c, &answer(c, e))
    };
    assert!(with(libc::EINVAL, right, Some(msg)).is_ok());
    assert!(with(libc::EOPNOTSUPP, right, Some(msg))
        .unwrap_err()
        .contains("instead of"));
    assert!(with(libc::EINVAL, right, Some("invalid"))
        .unwrap_err()
        .contains("lacks"));
    assert!(with(libc::EINVAL, offset_of(&c.req, "tp.key"), Some(msg))
        .unwrap_err()
        .contains("points at tp.key"));
    assert!(with(libc::EINVAL, None, Some(msg))
        .unwrap_err()
        .contains("names no attribute"));
}
