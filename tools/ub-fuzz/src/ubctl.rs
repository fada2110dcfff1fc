// SPDX-License-Identifier: GPL-2.0
//! `ubctl` targets: its command line (what a user types) and its decoding
//! of the kernel's replies (what a kernel, or whatever answers on the
//! socket, sends).

use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::time::{Duration, Instant};

use clap::Parser;
use serde_json::Value;
use ubctl::addr::{Address, Prefix, CNA24_MAX};
use ubctl::attr::{self, decode_set, Attr, Obj, Val};
use ubctl::cli::{
    self, AddrCmd, Cli, DevArg, DevCmd, NpiCmd, Object, PortCmd, PortSel, RouteCmd, TpAdd, TpCmd,
    TpgCmd,
};
use ubctl::nl::{self, Incoming, KernelError, Request};
use ubctl::ping::{Pinger, Reply};
use ubctl::reply;
use ubctl::request::{self, Rto};
use ubctl::spec::{self, Set, Ty};

use crate::input::{Input, Output};

// ----- ubctl_args --------------------------------------------------------

/// The `checks:` of `Documentation/netlink/specs/ub.yaml`, by set and
/// attribute: the kernel's policy refuses what breaks them, so ubctl
/// must refuse it first, with a usage error (`ubctl::cli`).
const CHECKS: &[(&str, &str, u64, u64)] = &[
    ("addr", "cna", 0, 0xff_ffff),
    ("vl", "index", 0, 15),
    ("dev", "npi", 0, 0x1ff_ffff),
    ("port", "index", 0, 63),
    ("port", "admin-up", 0, 1),
    ("port", "num-retry-threshold", 2, u8::MAX as u64),
    ("port", "num-phy-reinit-threshold", 1, u8::MAX as u64),
    ("port", "want-sharing", 0, 1),
    ("route", "prefix-len", 0, 128),
    ("echo", "size", 0, 4096),
    ("tp", "fast-retransmit", 0, 1),
    ("tp", "mtu", 256, 4096),
    ("tp", "ooo-window", 128, 2048),
    ("tp", "rto-static-us", 512, 4_000_000),
    ("tp", "rto-base-us", 4, 2_097_152),
    ("tp", "lb-range", 0, 14),
    ("tp", "lb-key", 0, 0xffff),
    ("tp", "send-window", 1, 8_388_607),
    ("tp", "members", 2, 8),
];

/// `ipv4` and `ipv6` of `addr` have `exact-len` checks; the decoder's
/// `Val::V4`/`Val::V6` enforce them.
///
/// Checks `o`, decoded as `set`, against [`CHECKS`]; every enum value must
/// name an entry of its enum.
fn check_spec(set: &Set, o: &Obj, what: &str) {
    for (name, v) in &o.0 {
        let Some(def) = set.attrs.iter().find(|a| a.name == *name) else {
            panic!("{what}: {name} is not in {}", set.name);
        };
        match (v, def.ty) {
            (Val::Obj(inner), Ty::Nest(s) | Ty::MultiNest(s)) => check_spec(s, inner, what),
            (Val::List(l), Ty::MultiNest(s)) => l.iter().for_each(|i| check_spec(s, i, what)),
            (Val::Enum(n, x), Ty::Enum(_)) => {
                assert!(
                    n.is_some(),
                    "{what}: {}.{name} = {x} names no value",
                    set.name
                )
            }
            (Val::U(x), _) => {
                if let Some(&(_, _, lo, hi)) =
                    CHECKS.iter().find(|c| c.0 == set.name && c.1 == *name)
                {
                    assert!(
                        (lo..=hi).contains(x),
                        "{what}: {}.{name} = {x} outside {lo}..={hi}",
                        set.name
                    );
                }
            }
            (Val::V4(_) | Val::V6(_) | Val::Str(_) | Val::Bytes(_), _) => {}
            (v, t) => panic!("{what}: {}.{name} decoded as {v:?} for {t:?}", set.name),
        }
    }
}

/// Encodes `req`'s attributes as the kernel receives them, decodes them
/// as the kernel's policy would see them (the spec's types), and checks
/// them against the spec's checks.
fn check_request(req: &Request, what: &str) {
    let Some(set) = req.set() else {
        panic!("{what}: command {} has no attribute set", req.cmd);
    };
    let bytes = match attr::encode(&req.attrs) {
        Ok(b) => b,
        Err(e) => panic!("{what}: {e}"),
    };
    let raw = match attr::parse_attrs(&bytes) {
        Ok(r) => r,
        Err(e) => panic!("{what}: the request does not parse back: {e}"),
    };
    assert_eq!(raw.len(), req.attrs.len(), "{what}");
    match decode_set(set, &raw) {
        Ok(o) => check_spec(set, &o, what),
        Err(e) => panic!("{what}: the request does not decode as {}: {e}", set.name),
    }
}

fn dev_index(d: &DevArg) -> u32 {
    match d {
        DevArg::Index(i) => *i,
        DevArg::Name(n) => {
            assert!(
                !n.is_empty() && !n.contains('/') && !n.chars().any(char::is_whitespace),
                "device name {n:?}"
            );
            0
        }
    }
}

fn port_sel(p: &PortSel) -> (u32, Option<u32>) {
    if let Some(n) = p.port {
        assert!(n <= cli::PORT_MAX, "port {n}");
    }
    (dev_index(&p.dev), p.port)
}

fn check_addr(a: Address) {
    if let Address::Cna24(c) = a {
        assert!(c <= CNA24_MAX, "cna24 {c:#x}");
    }
    // What ubctl prints of an address, it reads back.
    let back: Result<Address, _> = a.to_string().parse();
    assert_eq!(back, Ok(a), "{a} does not read back");
}

fn check_prefix(p: Prefix) {
    check_addr(p.addr);
    assert!(p.len <= p.addr.bits(), "{}/{}", p.addr, p.len);
}

fn check_channel(a: &TpAdd) {
    check_addr(a.remote);
    let ctp = a.cfg.transport == spec::TP_TRANSPORT.value_of("ctp");
    assert_eq!(a.key.is_some(), !ctp, "a key exactly when not CTP: {a:?}");
    if let Some(w) = a.cfg.ooo_window {
        assert!(w.is_power_of_two(), "ooo-window {w}");
    }
    if let Some(Rto::Static(us)) = a.cfg.rto {
        assert!([512, 16_000, 128_000, 4_000_000].contains(&us), "rto {us}");
    }
}

/// The words of a command line: the input split at spaces (bytes, so not
/// necessarily UTF-8; empty words included), at most 32.
fn words(data: &[u8]) -> Vec<OsString> {
    if data.is_empty() {
        return Vec::new();
    }
    data.split(|&b| b == b' ')
        .take(32)
        .map(|w| std::ffi::OsStr::from_bytes(w).to_os_string())
        .collect()
}

/// ubctl's command line: clap's parser (`ubctl::cli::Cli`) and the
/// keyword parsers `main` runs before it opens a socket
/// (`parse_port_settings`, `parse_route_options`, `parse_npi_settings`,
/// `parse_tp_add`, `parse_tpg_add`, `parse_tp_set`), then the request each
/// command sends (`ubctl::request`).
///
/// Input: the arguments after `ubctl`, separated by spaces.
///
/// Asserts: no panic, a refusal renders as a message; a command line that
/// parses gives devices that are an index or a name without `/` or
/// blanks, ports up to `PORT_MAX`, CNAs that fit, prefixes no longer than
/// their address, addresses that print and read back the same, a key
/// exactly for a non-CTP channel, OOO windows that are powers of two, a
/// named static RTO, echo sizes up to `ECHO_SIZE_MAX`, finite intervals up
/// to an hour; settings that parse change something; and the request it
/// would send, encoded and decoded with the spec's types, meets every
/// `checks:` of the spec and names a value of every enum it carries.
pub fn ubctl_args(data: &[u8]) {
    let args = words(data);
    let cli = match Cli::try_parse_from(std::iter::once(OsString::from("ubctl")).chain(args)) {
        Ok(c) => c,
        Err(e) => {
            // Help, version and usage errors alike render.
            let _ = e.render().to_string();
            return;
        }
    };
    let mut reqs: Vec<Request> = Vec::new();
    match &cli.object {
        Object::Dev {
            cmd: DevCmd::Show { dev },
        }
        | Object::Addr {
            cmd: AddrCmd::Show { dev },
        }
        | Object::Stats { dev } => {
            reqs.push(request::dev_get(dev.as_ref().map(dev_index)));
        }
        Object::Port { cmd } => match cmd {
            PortCmd::Show { port } => {
                let (d, p) = port.as_ref().map(port_sel).unzip();
                reqs.push(request::port_get(d, p.flatten()));
            }
            PortCmd::Set { port, settings } => {
                let (d, p) = port_sel(port);
                let Some(p) = p else {
                    panic!("port set without a port: {port:?}");
                };
                if let Ok(c) = cli::parse_port_settings(settings) {
                    assert_ne!(c, request::PortChanges::default(), "{settings:?}");
                    reqs.push(request::port_set(d, p, c));
                }
            }
        },
        Object::Addr { cmd } => match cmd {
            AddrCmd::Add { dev, addr } | AddrCmd::Del { dev, addr } => {
                check_addr(*addr);
                let add = matches!(cmd, AddrCmd::Add { .. });
                reqs.push(request::addr_change(add, dev_index(dev), *addr));
            }
            AddrCmd::Show { .. } => {}
        },
        Object::Route { cmd } => match cmd {
            RouteCmd::Add {
                dev,
                prefix,
                options,
            } => {
                check_prefix(*prefix);
                if let Ok((ports, lb)) = cli::parse_route_options(options) {
                    if let Some(lb) = lb {
                        assert!(spec::LOAD_BALANCE.name_of(lb).is_some(), "lb {lb}");
                    }
                    reqs.push(request::route_add(dev_index(dev), *prefix, ports, lb));
                }
            }
            RouteCmd::Del { dev, prefix } => {
                check_prefix(*prefix);
                reqs.push(request::route_del(dev_index(dev), *prefix));
            }
            RouteCmd::Show { dev } => reqs.push(request::route_get(dev.as_ref().map(dev_index))),
        },
        Object::Npi {
            cmd: NpiCmd::Set { dev, settings },
        } => {
            if let Ok((mode, npi)) = cli::parse_npi_settings(settings) {
                assert!(mode.is_some() || npi.is_some(), "{settings:?}");
                // `main` fills the missing one from the device.
                let (mode, npi) = (mode.or(Some(0)), npi.or(Some(0)));
                reqs.push(request::npi_set(dev_index(dev), mode, npi));
            }
        }
        Object::Tp { cmd } => match cmd {
            TpCmd::Show { dev, tpn } => {
                reqs.push(request::tp_get(dev.as_ref().map(dev_index), *tpn));
            }
            TpCmd::Add { dev, settings } => {
                if let Ok(a) = cli::parse_tp_add(settings) {
                    check_channel(&a);
                    reqs.push(request::tp_new(dev_index(dev), a.remote, a.key, &a.cfg));
                }
            }
            TpCmd::Set { dev, tpn, settings } => {
                if let Ok(s) = cli::parse_tp_set(settings) {
                    reqs.push(request::tp_set_state(dev_index(dev), *tpn, s));
                }
            }
            TpCmd::Del { dev, tpn } => reqs.push(request::tp_del(dev_index(dev), *tpn)),
        },
        Object::Tpg { cmd } => match cmd {
            TpgCmd::Show { dev, tpn } => {
                reqs.push(request::tpg_get(dev.as_ref().map(dev_index), *tpn));
            }
            TpgCmd::Add { dev, settings } => {
                if let Ok(g) = cli::parse_tpg_add(settings) {
                    check_channel(&g.channel);
                    let Some(key) = g.channel.key else {
                        panic!("tpg add without a key: {g:?}");
                    };
                    let c = &g.channel;
                    reqs.push(request::tpg_new(
                        dev_index(dev),
                        c.remote,
                        key,
                        g.members,
                        &c.cfg,
                    ));
                }
            }
            TpgCmd::Set { dev, tpn, settings } => {
                if let Ok(s) = cli::parse_tp_set(settings) {
                    reqs.push(request::tpg_set_state(dev_index(dev), *tpn, s));
                }
            }
            TpgCmd::Del { dev, tpn } => reqs.push(request::tpg_del(dev_index(dev), *tpn)),
        },
        Object::Ping(p) => {
            assert!(p.size <= cli::ECHO_SIZE_MAX, "size {}", p.size);
            for d in [p.interval, p.timeout] {
                assert!(d <= Duration::from_secs(3600), "{d:?}");
            }
            assert!(
                matches!(p.dst, Address::V4(_) | Address::V6(_)),
                "{:?}",
                p.dst
            );
            check_addr(p.dst);
            let dev = p.dev.as_ref().map_or(0, dev_index);
            reqs.push(request::echo(dev, p.dst, 1, 1, p.size));
        }
        // Printing a completion script reads no argument but the shell
        // (a value clap checked); the script is the same every time.
        Object::Monitor { .. } | Object::Completion { .. } => {}
    }
    for r in &reqs {
        check_request(r, &format!("{:?}", cli.object));
    }
}

pub(crate) fn seeds_args() -> Vec<Vec<u8>> {
    [
        "dev show",
        "-j -p dev show 0000:00:03.0",
        "-s port show 0/1",
        "port set 0/1 down retry-threshold 4 reinit-threshold 2 sharing on",
        "port set 0/1 up",
        "addr add 0 cna16:0x0100",
        "addr add 0 cna24:0x000100",
        "addr del 0 fd00::1",
        "addr show",
        "route add 0 10.0.0.0/24 ports 0,1 per-packet",
        "route add 0 fd00::/120 per-flow",
        "route del 0 cna24:0x000100/24",
        "route show 1",
        "npi set 0 mode loose npi 0x10",
        "npi set 0000:00:03.0 npi 33554431",
        "ping -c 3 -s 100 -i 0.2 -W 1 -I 0 10.0.0.2",
        "monitor -c 1",
        "stats 0",
        "tp show 0 3",
        "tp add 0 remote 10.0.0.1 key 7 retransmit sr fast-retransmit off ooo-window 512 rto dynamic base 20 n 3 retry-limit 5 mtu 1024 cc ldcp lb per-packet range 3 sport 50000 send-window 1000",
        "tp add 0 remote cna16:0x0102 transport ctp rto static 16ms",
        "tp set 0 3 state suspended",
        "tp del 0000:00:03.0 3",
        "-j tpg add 0 remote 10.0.0.1 key 7 members 4 lb per-flow",
        "tpg set 0 3 state rts",
        "tpg del 0 3",
        "-j -s tpg show",
        "completion bash",
        "--help",
    ]
    .iter()
    .map(|s| s.as_bytes().to_vec())
    .collect()
}

// ----- ubctl_replies -----------------------------------------------------

/// Whether `a` is `b` read back: the same but for floating-point numbers,
/// which may differ in their last bit (serde_json's default float parser
/// is not exact: without its `float_roundtrip` feature it may be one ULP
/// off, found by this target on a `ping -j` summary).
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) if x.is_f64() || y.is_f64() => {
            match (x.as_f64(), y.as_f64()) {
                (Some(x), Some(y)) => x == y || (x - y).abs() <= x.abs().max(y.abs()) * 1e-15,
                _ => false,
            }
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same(x, y))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .zip(y)
                    .all(|((kx, vx), (ky, vy))| kx == ky && same(vx, vy))
        }
        _ => a == b,
    }
}

/// A JSON text must parse, back to the value it was printed from.
fn check_json(text: &str, want: &Value, what: &str) {
    match serde_json::from_str::<Value>(text) {
        Ok(v) => assert!(same(&v, want), "{what}: {text} reads back as {v}"),
        Err(e) => panic!("{what}: {text} is not JSON: {e}"),
    }
}

/// Everything ubctl prints of one decoded object, as JSON (`-j`, `-j
/// -p`, `monitor -j`, `stats -j`) and as text.
fn print_obj(o: &Obj) {
    let value = match serde_json::to_value(o) {
        Ok(v) => v,
        Err(e) => panic!("{o:?} has no JSON value: {e}"),
    };
    assert!(value.is_object(), "{value}");
    for stats in [false, true] {
        let f = reply::filter_stats(o, stats);
        let v = serde_json::to_value(&f).unwrap_or(Value::Null);
        for pretty in [false, true] {
            let text = if pretty {
                serde_json::to_string_pretty(&vec![&f])
            } else {
                serde_json::to_string(&vec![&f])
            };
            let Ok(text) = text else {
                panic!("{f:?} does not print as JSON");
            };
            check_json(&text, &Value::Array(vec![v.clone()]), "show -j");
        }
    }
    for kind in ["port", "tp", "tpg"] {
        let Ok(line) = reply::event_json(kind, o) else {
            panic!("{o:?} does not print as a monitor event");
        };
        assert!(!line.contains('\n'), "a monitor event is one line: {line}");
        let mut want = serde_json::Map::new();
        want.insert("object".into(), Value::String(kind.into()));
        if let Value::Object(m) = &value {
            want.extend(m.clone());
        }
        check_json(&line, &Value::Object(want), "monitor -j");
    }
    // `stats -j`: the device's counters with its ports'.
    let mut j =
        serde_json::to_value(o.only(&["index", "name", "net-stats"])).unwrap_or(Value::Null);
    if let Value::Object(m) = &mut j {
        let p = vec![o.only(&["index", "link-stats", "dev-stats"])];
        m.insert(
            "ports".into(),
            serde_json::to_value(p).unwrap_or(Value::Null),
        );
    }
    check_json(&j.to_string(), &j, "stats -j");
    // The text forms.
    for text in [
        reply::dev_text,
        reply::port_text,
        reply::port_counters_text,
        reply::route_text,
        reply::event_text,
        reply::tp_text,
        reply::tp_event_text,
        reply::tpg_text,
        reply::tpg_event_text,
    ] {
        let _ = text(o);
    }
    for (_, v) in &o.0 {
        let _ = v.to_string();
        if let Val::Obj(a) = v {
            let _ = attr::addr_text(a);
        }
    }
}

/// `ping`: an echo reply matched against the requests in flight.
fn ping(o: &Obj) {
    let (Some(id), Some(seq)) = (o.uint("id"), o.uint("seq")) else {
        return;
    };
    let (Ok(id), Ok(seq)) = (u32::try_from(id), u32::try_from(seq)) else {
        return;
    };
    let mut p = Pinger::new(id);
    let now = Instant::now();
    p.sent(seq, now);
    let krtt = o.uint("rtt-ns").map(Duration::from_nanos);
    let first = p.reply(id, seq, now, krtt);
    assert!(matches!(first, Reply::New(_)), "{first:?}");
    assert_eq!(
        p.reply(id, seq, now, krtt),
        Reply::Ignored,
        "a second reply"
    );
    let sum = p.stats().summary();
    assert_eq!((sum.transmitted, sum.received), (1, 1));
    let _ = sum.text("10.0.0.1", Duration::from_secs(1));
    let Ok(v) = serde_json::to_value(&sum) else {
        panic!("{sum:?} has no JSON value");
    };
    check_json(&v.to_string(), &v, "ping -j");
}

/// The requests an error may answer: one per command, with attributes
/// (nests included) for the extended ACK's offsets to point into.
fn requests() -> Vec<Request> {
    let a = Address::V4(std::net::Ipv4Addr::new(10, 0, 0, 1));
    let cfg = request::TpConfig {
        mtu: Some(1024),
        rto: Some(Rto::Dynamic { base_us: 20, n: 3 }),
        ..Default::default()
    };
    vec![
        request::dev_get(Some(0)),
        request::port_set(
            0,
            1,
            request::PortChanges {
                admin_up: Some(true),
                ..Default::default()
            },
        ),
        request::addr_change(true, 0, a),
        request::route_add(0, Prefix { addr: a, len: 24 }, Some(3), Some(1)),
        request::npi_set(0, Some(1), Some(16)),
        request::echo(0, a, 1, 2, 56),
        request::tp_new(0, a, Some(7), &cfg),
        request::tpg_new(0, a, 7, 4, &cfg),
        request::tp_set_state(0, 3, 2),
        Request {
            cmd: 200,
            dump: false,
            attrs: vec![Attr::u32(1, 5)],
        },
    ]
}

fn kernel_error(err: &KernelError, reqs: &[Request]) {
    for r in reqs {
        let e = nl::Error::kernel(r, err.clone());
        let _ = e.to_string();
    }
    let _ = nl::strerror(err.errno);
}

/// How [`ubctl_replies`] reads its input's first byte.
mod sel {
    /// Set `nlmsg_len` of the first message to the bytes that follow (so
    /// that a mutated length does not stop the fuzzer cold).
    pub const FIX_LEN: u8 = 1;
}

/// ubctl's decoding of what the kernel sends: a datagram into
/// `nl::decode_buffer`, each generic netlink message's attributes decoded
/// as every attribute set of the spec (`attr::decode_set`: `main` decodes
/// a reply as its request's set, whatever command it says it is), printed
/// the ways ubctl prints them (`-j`, `-j -p`, `-s` or not, `monitor -j`,
/// `stats -j`, the text forms, `ping`'s match and summary), and read as
/// nlctrl's answer (`nl::parse_family`); errors and ends of dumps named
/// against a request of each command (`nl::Error::kernel`, which turns the
/// extended ACK's offsets into attribute names).
///
/// Input: a selector byte (bit 0: set the first message's `nlmsg_len` to
/// the datagram's length), then the datagram.
///
/// Asserts: no panic; whatever decodes prints as JSON that parses back to
/// the value printed (`serde_json::to_value` of the same object), a
/// monitor event on one line with its `object` first; every object that
/// decodes holds only attributes of its set, with the spec's type; a reply
/// `ping` matches counts once.
pub fn ubctl_replies(data: &[u8]) {
    let mut inp = Input::new(data);
    let s = inp.u8();
    let mut buf = inp.rest().to_vec();
    if s & sel::FIX_LEN != 0 && buf.len() >= 4 {
        let n = buf.len() as u32;
        buf[..4].copy_from_slice(&n.to_ne_bytes());
    }
    let Ok(msgs) = nl::decode_buffer(&buf) else {
        return;
    };
    let reqs = requests();
    for m in &msgs {
        match m {
            Incoming::Genl { cmd, attrs, .. } => {
                let _ = nl::parse_family(std::slice::from_ref(attrs)).map_err(|e| e.to_string());
                for set in spec::SETS {
                    match reply::decode_all(set, std::slice::from_ref(attrs)) {
                        Ok(objs) => {
                            for o in &objs {
                                check_spec_types(set, o);
                                print_obj(o);
                                if set.name == spec::ECHO.name {
                                    ping(o);
                                }
                            }
                        }
                        Err(e) => {
                            let _ = e.to_string();
                        }
                    }
                }
                let _ = spec::op(*cmd).map(|o| o.name);
            }
            Incoming::Err { err, .. } => kernel_error(err, &reqs),
            Incoming::Done { err: Some(err), .. } => kernel_error(err, &reqs),
            Incoming::Done { err: None, .. } | Incoming::Ack { .. } | Incoming::Overrun => {}
        }
    }
}

/// An object decoded as `set` holds attributes of `set` only, each with
/// the value kind of its spec type.
fn check_spec_types(set: &Set, o: &Obj) {
    for (name, v) in &o.0 {
        let Some(def) = set.attrs.iter().find(|a| a.name == *name) else {
            panic!("{name} is not in {}", set.name);
        };
        let ok = match (def.ty, v) {
            (Ty::U8 | Ty::U32 | Ty::U64, Val::U(_)) => true,
            (Ty::Enum(_), Val::Enum(..)) => true,
            (Ty::Ipv4, Val::V4(_)) | (Ty::Ipv6, Val::V6(_)) => true,
            (Ty::Binary, Val::Bytes(_)) | (Ty::String, Val::Str(_)) => true,
            (Ty::Nest(s), Val::Obj(inner)) => {
                check_spec_types(s, inner);
                true
            }
            (Ty::MultiNest(s), Val::List(l)) => {
                l.iter().for_each(|i| check_spec_types(s, i));
                true
            }
            _ => false,
        };
        assert!(ok, "{}.{name}: {v:?} for {:?}", set.name, def.ty);
    }
}

/// One netlink message: header (`nlmsg_len` set), `body`.
fn nlmsg(ty: u16, flags: u16, seq: u32, body: &[u8]) -> Vec<u8> {
    let len = (nl::NLMSG_HDRLEN + body.len()) as u32;
    let mut m = Vec::new();
    m.extend_from_slice(&len.to_ne_bytes());
    m.extend_from_slice(&ty.to_ne_bytes());
    m.extend_from_slice(&flags.to_ne_bytes());
    m.extend_from_slice(&seq.to_ne_bytes());
    m.extend_from_slice(&0u32.to_ne_bytes());
    m.extend_from_slice(body);
    while m.len() % 4 != 0 {
        m.push(0);
    }
    m
}

/// A generic netlink message of family 0x20: `cmd` and `attrs`.
fn genl(cmd: u8, attrs: &[Attr]) -> Vec<u8> {
    let mut body = vec![cmd, spec::FAMILY_VERSION, 0, 0];
    body.extend(attr::encode(attrs).unwrap_or_default());
    nlmsg(0x20, 0, 1, &body)
}

/// What the kernel sends for each reply set, roughly: the fields ubctl
/// shows.
fn reply_attrs() -> Vec<(u8, Vec<Attr>)> {
    use spec::{addr, dev, echo, port, route, tp, tpg_member, vl};
    let a4 = vec![
        Attr::u32(addr::TYPE, spec::addr_type::IPV4),
        Attr::bytes(addr::IPV4, &[10, 0, 0, 1]),
    ];
    let c16 = vec![
        Attr::u32(addr::TYPE, spec::addr_type::CNA16),
        Attr::u32(addr::CNA, 0x100),
    ];
    let stats = |id| Attr::nest(id, vec![Attr::u64(1, 5), Attr::u64(2, 7)]);
    vec![
        (
            spec::cmd::DEV_GET,
            vec![
                Attr::u32(dev::INDEX, 0),
                Attr::bytes(dev::NAME, b"0000:00:03.0\0"),
                Attr::u32(dev::PORTS, 2),
                Attr::u32(dev::NPI, 16),
                Attr::nest(dev::ADDR, a4.clone()),
                Attr::nest(dev::ADDR, c16.clone()),
                stats(dev::NET_STATS),
            ],
        ),
        (
            spec::cmd::PORT_CHANGE_NTF,
            vec![
                Attr::u32(port::DEV_INDEX, 0),
                Attr::u32(port::INDEX, 1),
                Attr::u8(port::ADMIN_UP, 1),
                Attr::u8(port::PHY_UP, 1),
                Attr::u32(port::DLL_STATE, 3),
                Attr::nest(
                    port::VL,
                    vec![Attr::u32(vl::INDEX, 0), Attr::u32(vl::TX_CREDITS, 9)],
                ),
                Attr::nest(port::VL, vec![Attr::u32(vl::INDEX, 1)]),
                stats(port::LINK_STATS),
                stats(port::DEV_STATS),
            ],
        ),
        (
            spec::cmd::ROUTE_GET,
            vec![
                Attr::u32(route::DEV_INDEX, 0),
                Attr::nest(route::DST, a4.clone()),
                Attr::u32(route::PREFIX_LEN, 24),
                Attr::u64(route::PORTS, 3),
                Attr::u32(route::LOAD_BALANCE, 1),
            ],
        ),
        (
            spec::cmd::ECHO_REPLY,
            vec![
                Attr::u32(echo::DEV_INDEX, 0),
                Attr::nest(echo::SRC, a4.clone()),
                Attr::u32(echo::ID, 7),
                Attr::u32(echo::SEQ, 1),
                Attr::u32(echo::SIZE, 56),
                Attr::u64(echo::RTT_NS, 12_345),
                Attr::u32(echo::PORT, 1),
            ],
        ),
        (
            spec::cmd::TPG_CHANGE_NTF,
            vec![
                Attr::u32(tp::DEV_INDEX, 0),
                Attr::u32(tp::TPN, 3),
                Attr::nest(tp::PEER, c16),
                Attr::u32(tp::KEY, 140),
                Attr::u32(tp::STATE, 2),
                Attr::u32(tp::ERROR, 110),
                Attr::u32(tp::MEMBERS, 2),
                Attr::nest(
                    tp::MEMBER,
                    vec![
                        Attr::u32(tpg_member::TPN, 3),
                        Attr::u32(tpg_member::STATE, 2),
                    ],
                ),
                Attr::nest(
                    tp::MEMBER,
                    vec![
                        Attr::u32(tpg_member::TPN, 4),
                        Attr::u32(tpg_member::STATE, 4),
                    ],
                ),
                stats(tp::STATS),
            ],
        ),
    ]
}

pub(crate) fn seeds_replies() -> Vec<Vec<u8>> {
    let mut v = Vec::new();
    let mut dump = Vec::new();
    for (cmd, attrs) in reply_attrs() {
        let m = genl(cmd, &attrs);
        dump.extend_from_slice(&m);
        let mut o = Output::default();
        o.u8(0).raw(&m);
        v.push(o.done());
    }
    // A whole dump: the replies, then NLMSG_DONE.
    dump.extend(nlmsg(3, 2, 1, &0i32.to_ne_bytes()));
    v.push([&[0u8][..], &dump].concat());
    // Errors: plain, with the extended ACK (message, offset, missing
    // attribute and nest), capped; an ACK; a failed dump; an overrun.
    let req = genl(spec::cmd::TP_NEW, &requests()[6].attrs);
    let tlv = |id: u16, p: &[u8]| {
        let mut t = Vec::new();
        t.extend_from_slice(&((4 + p.len()) as u16).to_ne_bytes());
        t.extend_from_slice(&id.to_ne_bytes());
        t.extend_from_slice(p);
        while t.len() % 4 != 0 {
            t.push(0);
        }
        t
    };
    for (errno, flags, echo, tlvs) in [
        (-22i32, 0u16, req.clone(), Vec::new()),
        (
            -22,
            0x200,
            req.clone(),
            [tlv(1, b"bad mtu\0"), tlv(2, &32u32.to_ne_bytes())].concat(),
        ),
        (
            -22,
            0x300,
            req[..16].to_vec(),
            [tlv(5, &3u32.to_ne_bytes()), tlv(6, &24u32.to_ne_bytes())].concat(),
        ),
        (0, 0x100, req[..16].to_vec(), Vec::new()),
    ] {
        let body = [&errno.to_ne_bytes()[..], &echo, &tlvs].concat();
        v.push([&[0u8][..], &nlmsg(2, flags, 1, &body)].concat());
    }
    v.push(
        [
            &[0u8][..],
            &nlmsg(
                3,
                0x200,
                1,
                &[&(-95i32).to_ne_bytes()[..], &tlv(1, b"no\0")].concat(),
            ),
        ]
        .concat(),
    );
    v.push([&[0u8][..], &nlmsg(4, 0, 0, &[])].concat());
    // nlctrl's answer to getfamily (family id, the monitor group).
    let grp = Attr::nest(
        1,
        vec![
            Attr::bytes(1, format!("{}\0", spec::MCGRP_MONITOR).as_bytes()),
            Attr::u32(2, 9),
        ],
    );
    let fam = [
        Attr::bytes(1, &0x20u16.to_ne_bytes()),
        Attr::bytes(2, b"ub\0"),
        Attr::nest(7, vec![grp]),
    ];
    let mut body = vec![1u8, 2, 0, 0];
    body.extend(attr::encode(&fam).unwrap_or_default());
    v.push([&[0u8][..], &nlmsg(0x10, 0, 1, &body)].concat());
    v
}
