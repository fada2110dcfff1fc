// SPDX-License-Identifier: GPL-2.0
//! The malformed-request batch of `ub-nlcheck` (data-path issue, acceptance
//! 3), kept apart from its I/O so the host tests can check every request.
//!
//! Each [`Case`] is one request the kernel must refuse, with what the
//! refusal must carry: the bad attribute (`NLMSGERR_ATTR_OFFS`) for policy
//! violations and unknown objects, the missing attribute
//! (`NLMSGERR_ATTR_MISS_TYPE`) for absent required ones, `EPERM` for a
//! mutating call without CAP_NET_ADMIN. Every refusal except the last must
//! also have a non-empty extended ACK message; genetlink's own
//! `GENL_ADMIN_PERM` check answers `-EPERM` before the family's handler
//! runs and sets no message, so for those the message is reported, not
//! required.

use crate::addr::Address;
use crate::attr::{Attr, Obj, Value};
use crate::nl::{Error, KernelError, Request, GENL_HDRLEN, NLMSG_HDRLEN};
use crate::spec::{addr, addr_type, cmd, dev, echo, port, route, tp};

/// What the refusal of a case must carry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Expect {
    /// The extended ACK's offset names this attribute (`set.attr[.inner]`).
    BadAttr(String),
    /// The extended ACK names this attribute as missing
    /// (`NLMSGERR_ATTR_MISS_TYPE`, with `MISS_NEST` inside a nest). For an
    /// attribute of a nest, pointing at the nest it is missing from
    /// (`NLMSGERR_ATTR_OFFS`) names it too and is accepted.
    Missing {
        /// `set.attr` of the missing attribute.
        attr: String,
        /// `set.attr` path of the nest it belongs in, if any.
        nest: Option<String>,
    },
    /// `EPERM` (the caller has no CAP_NET_ADMIN).
    Perm,
    /// A well-formed request that breaks a rule the policy cannot state
    /// (between attributes, or of the spec): this errno, an extended ACK
    /// message containing `msg`, pointing at `attr` (`set.attr`) if given.
    Rule {
        /// The errno (positive).
        errno: i32,
        /// Part of the extended ACK message.
        msg: &'static str,
        /// The attribute the extended ACK must point at.
        attr: Option<String>,
    },
}

/// One request the kernel must refuse.
#[derive(Clone, Debug)]
pub struct Case {
    /// KTAP test name.
    pub name: String,
    /// The request.
    pub req: Request,
    /// What the refusal must say.
    pub expect: Expect,
}

/// The device and port the batch aims at, and their current settings (so
/// that the unprivileged calls would change nothing even if accepted, and
/// the out-of-range ones would change a real port if the policy let them).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    /// A device that exists.
    pub dev: u32,
    /// A port of it that exists.
    pub port: u32,
    /// Its number of ports.
    pub ports: u32,
    /// The port's administrative state.
    pub admin_up: bool,
}

/// A device index no device has.
pub const NO_DEV: u32 = 0xffff_fff0;
/// A TPN no channel has (a device's TPNs count from 1 up to its table
/// size).
pub const NO_TPN: u32 = 0xffff_fff0;
/// The TPN the unprivileged `tp-set` and `tp-del` name: past the driver's
/// 64-channel table, so no channel has it, but not [`NO_TPN`], which the
/// host tests treat as the mark of a request aimed at a missing object
/// (these must be well-formed: genetlink checks the permission first).
pub const NO_TPN_UNPRIVILEGED: u32 = 1_000;

fn req(c: u8, attrs: Vec<Attr>) -> Request {
    Request {
        cmd: c,
        dump: false,
        attrs,
    }
}

fn raw(id: u16, b: &[u8]) -> Attr {
    Attr::bytes(id, b)
}

fn case(name: &str, r: Request, e: Expect) -> Case {
    Case {
        name: name.to_string(),
        req: r,
        expect: e,
    }
}

fn bad(s: &str) -> Expect {
    Expect::BadAttr(s.to_string())
}

fn missing(s: &str) -> Expect {
    Expect::Missing {
        attr: s.to_string(),
        nest: None,
    }
}

fn missing_in(s: &str, nest: &str) -> Expect {
    Expect::Missing {
        attr: s.to_string(),
        nest: Some(nest.to_string()),
    }
}

fn v4nest(b: &[u8]) -> Attr {
    Attr::nest(
        dev::ADDR,
        vec![Attr::u32(addr::TYPE, addr_type::IPV4), raw(addr::IPV4, b)],
    )
}

fn v6nest(b: &[u8]) -> Attr {
    Attr::nest(
        dev::ADDR,
        vec![Attr::u32(addr::TYPE, addr_type::IPV6), raw(addr::IPV6, b)],
    )
}

fn rule(errno: i32, msg: &'static str, attr: Option<&str>) -> Expect {
    Expect::Rule {
        errno,
        msg,
        attr: attr.map(str::to_string),
    }
}

/// The key of every channel the batch asks for.
pub const SPARE_KEY: u32 = 0x6e6c_6368;

/// `tp-new` to the spare IPv4 peer with key [`SPARE_KEY`] on device `d`,
/// with `more` attributes.
fn tp_new(d: u32, more: Vec<Attr>) -> Request {
    let mut attrs = vec![
        Attr::u32(tp::DEV_INDEX, d),
        Attr::nest(tp::PEER, Address::V4(SPARE_IPV4).attrs()),
        Attr::u32(tp::KEY, SPARE_KEY),
    ];
    attrs.extend(more);
    req(cmd::TP_NEW, attrs)
}

/// The `tp-new`, `tp-set` and `tp-del` cases: missing attributes, values
/// outside the policy, configurations the spec or the driver forbids, and
/// unknown channels. None may create a channel (the state comparison
/// counts the channels to the batch's peers).
fn tp_cases(d: u32) -> Vec<Case> {
    use libc::EINVAL;
    let peer = || Attr::nest(tp::PEER, Address::V4(SPARE_IPV4).attrs());
    let key = || Attr::u32(tp::KEY, SPARE_KEY);
    let on = |id| Attr::u8(id, 1);
    let per_packet = || Attr::u32(tp::LOAD_BALANCE, crate::spec::load_balance::PER_PACKET);
    let mut v = vec![
        case(
            "tp-new without tp.dev-index",
            req(cmd::TP_NEW, vec![peer(), key()]),
            missing("tp.dev-index"),
        ),
        case(
            "tp-new without tp.peer",
            req(cmd::TP_NEW, vec![Attr::u32(tp::DEV_INDEX, d), key()]),
            missing("tp.peer"),
        ),
        case(
            "tp-new without tp.key",
            req(cmd::TP_NEW, vec![Attr::u32(tp::DEV_INDEX, d), peer()]),
            missing("tp.key"),
        ),
        case(
            "tp-new without addr.type in tp.peer",
            req(
                cmd::TP_NEW,
                vec![
                    Attr::u32(tp::DEV_INDEX, d),
                    Attr::nest(tp::PEER, vec![raw(addr::IPV4, &[198, 51, 100, 254])]),
                    key(),
                ],
            ),
            missing_in("addr.type", "tp.peer"),
        ),
        case(
            "tp-new unknown device",
            tp_new(NO_DEV, vec![]),
            bad("tp.dev-index"),
        ),
        case(
            "tp-new ooo-window 4096 (policy max 2048)",
            tp_new(d, vec![Attr::u32(tp::OOO_WINDOW, 4096)]),
            bad("tp.ooo-window"),
        ),
        case(
            "tp-new send-window 0 (policy min 1)",
            tp_new(d, vec![Attr::u32(tp::SEND_WINDOW, 0)]),
            bad("tp.send-window"),
        ),
        case(
            "tp-new mtu 100 (policy min 256)",
            tp_new(d, vec![Attr::u32(tp::MTU, 100)]),
            bad("tp.mtu"),
        ),
        case(
            "tp-new rto-base-us 3 (policy min 4)",
            tp_new(d, vec![Attr::u32(tp::RTO_BASE_US, 3)]),
            bad("tp.rto-base-us"),
        ),
        case(
            "tp-new lb-range 15 (policy max 14)",
            tp_new(d, vec![per_packet(), Attr::u8(tp::LB_RANGE, 15)]),
            bad("tp.lb-range"),
        ),
        case(
            "tp-new mode 2 (past enum tp-mode)",
            tp_new(d, vec![Attr::u32(tp::MODE, 2)]),
            bad("tp.mode"),
        ),
        case(
            "tp-new ooo-window 384 (not a power of two)",
            tp_new(d, vec![Attr::u32(tp::OOO_WINDOW, 384)]),
            rule(EINVAL, "OOO window must be", Some("tp.ooo-window")),
        ),
        case(
            "tp-new fast-retransmit with per-packet load balancing",
            tp_new(d, vec![on(tp::FAST_RETRANSMIT), per_packet()]),
            rule(
                EINVAL,
                "fast retransmit cannot be combined with per-packet",
                Some("tp.fast-retransmit"),
            ),
        ),
        case(
            "tp-new rto-static-us 1000 (not a spec level)",
            tp_new(d, vec![Attr::u32(tp::RTO_STATIC_US, 1000)]),
            rule(EINVAL, "static RTO must be", Some("tp.rto-static-us")),
        ),
        case(
            "tp-new static and dynamic RTO",
            tp_new(
                d,
                vec![
                    Attr::u32(tp::RTO_STATIC_US, 512),
                    Attr::u32(tp::RTO_BASE_US, 100),
                ],
            ),
            rule(EINVAL, "exclude each other", Some("tp.rto-base-us")),
        ),
        case(
            "tp-new rto-n without rto-base-us",
            tp_new(d, vec![Attr::u8(tp::RTO_N, 2)]),
            rule(EINVAL, "needs rto-base-us", Some("tp.rto-n")),
        ),
        case(
            "tp-new lb-range without per-packet",
            tp_new(d, vec![Attr::u8(tp::LB_RANGE, 2)]),
            rule(EINVAL, "needs load-balance per-packet", Some("tp.lb-range")),
        ),
        case(
            "tp-new send-window 65537 (driver limit)",
            tp_new(d, vec![Attr::u32(tp::SEND_WINDOW, 65_537)]),
            rule(EINVAL, "driver's limit", Some("tp.send-window")),
        ),
        case(
            "tp-new transport ctp with a key",
            tp_new(d, vec![Attr::u32(tp::TRANSPORT, 1)]),
            rule(EINVAL, "has no key", Some("tp.key")),
        ),
        case(
            "tp-new transport ctp to an IPv4 peer",
            req(
                cmd::TP_NEW,
                vec![
                    Attr::u32(tp::DEV_INDEX, d),
                    peer(),
                    Attr::u32(tp::TRANSPORT, 1),
                ],
            ),
            rule(EINVAL, "16- or 24-bit CNA", Some("tp.peer")),
        ),
        case(
            "tp-new transport ctp with an RTP attribute (mode)",
            req(
                cmd::TP_NEW,
                vec![
                    Attr::u32(tp::DEV_INDEX, d),
                    Attr::nest(tp::PEER, Address::Cna16(SPARE_CNA).attrs()),
                    Attr::u32(tp::TRANSPORT, 1),
                    Attr::u32(tp::MODE, 0),
                ],
            ),
            rule(EINVAL, "RTP channel attribute", Some("tp.mode")),
        ),
        case(
            "tp-new RTP to a 16-bit CNA",
            req(
                cmd::TP_NEW,
                vec![
                    Attr::u32(tp::DEV_INDEX, d),
                    Attr::nest(tp::PEER, Address::Cna16(SPARE_CNA).attrs()),
                    key(),
                ],
            ),
            rule(EINVAL, "RTP needs", Some("tp.peer")),
        ),
    ];
    v.extend(set_del_cases(
        d,
        "tp",
        [cmd::TP_SET, cmd::TP_DEL],
        "no TP Channel with this TPN",
    ));
    v
}

/// The `OP-set` and `OP-del` cases (`tp` or `tpg`, commands `set_del`) of
/// the channel or group [`NO_TPN`] names (`no_such`: the refusal of
/// `OP-del`'s): a missing TPN or device, values outside the policy, a
/// state that cannot be set, an attribute fixed at setup, nothing to set.
fn set_del_cases(d: u32, op: &str, [set, del]: [u8; 2], no_such: &'static str) -> Vec<Case> {
    use libc::{EINVAL, ENOENT, EOPNOTSUPP};
    let named = |c, more: Vec<Attr>| {
        let mut attrs = vec![Attr::u32(tp::DEV_INDEX, d), Attr::u32(tp::TPN, NO_TPN)];
        attrs.extend(more);
        req(c, attrs)
    };
    let state = |s| Attr::u32(tp::STATE, s);
    const RTS: u32 = 2;
    const ERR: u32 = 4;
    let on_no_dev = |c, more: Vec<Attr>| {
        let mut attrs = vec![Attr::u32(tp::DEV_INDEX, NO_DEV), Attr::u32(tp::TPN, 1)];
        attrs.extend(more);
        req(c, attrs)
    };
    vec![
        case(
            &format!("{op}-set without tp.tpn"),
            req(set, vec![Attr::u32(tp::DEV_INDEX, d), state(RTS)]),
            missing("tp.tpn"),
        ),
        case(
            &format!("{op}-set unknown device"),
            on_no_dev(set, vec![state(RTS)]),
            bad("tp.dev-index"),
        ),
        case(
            &format!("{op}-set unknown TPN"),
            named(set, vec![state(RTS)]),
            bad("tp.tpn"),
        ),
        case(
            &format!("{op}-set state 6 (past enum tp-state)"),
            named(set, vec![Attr::u32(tp::STATE, 6)]),
            bad("tp.state"),
        ),
        case(
            &format!("{op}-set state err"),
            named(set, vec![state(ERR)]),
            rule(EINVAL, "suspended or rts only", Some("tp.state")),
        ),
        case(
            &format!("{op}-set mtu (fixed at setup)"),
            named(set, vec![state(RTS), Attr::u32(tp::MTU, 1024)]),
            rule(
                EOPNOTSUPP,
                "fixed when the channel is set up",
                Some("tp.mtu"),
            ),
        ),
        case(
            &format!("{op}-set without a setting"),
            named(set, vec![]),
            rule(EINVAL, "without any setting", None),
        ),
        case(
            &format!("{op}-del without tp.tpn"),
            req(del, vec![Attr::u32(tp::DEV_INDEX, d)]),
            missing("tp.tpn"),
        ),
        case(
            &format!("{op}-del unknown device"),
            on_no_dev(del, vec![]),
            bad("tp.dev-index"),
        ),
        case(
            &format!("{op}-del unknown TPN"),
            named(del, vec![]),
            rule(ENOENT, no_such, Some("tp.tpn")),
        ),
    ]
}

/// `tpg-new` of a group of `members` to the spare IPv4 peer with key
/// [`SPARE_KEY`] on device `d`, with `more` attributes.
fn tpg_new(d: u32, members: u32, more: Vec<Attr>) -> Request {
    let mut r = tp_new(d, more);
    r.cmd = cmd::TPG_NEW;
    r.attrs.push(Attr::u32(tp::MEMBERS, members));
    r
}

/// The `tpg-new`, `tpg-get`, `tpg-set` and `tpg-del` cases: missing
/// attributes, a member count outside the policy, the channel rules
/// `tp-new` has (each member is such a channel), and unknown groups. None
/// may create a channel.
fn tpg_cases(d: u32) -> Vec<Case> {
    use libc::EINVAL;
    let peer = || Attr::nest(tp::PEER, Address::V4(SPARE_IPV4).attrs());
    let key = || Attr::u32(tp::KEY, SPARE_KEY);
    let four = || Attr::u32(tp::MEMBERS, 4);
    let mut v = vec![
        case(
            "tpg-new without tp.members",
            req(
                cmd::TPG_NEW,
                vec![Attr::u32(tp::DEV_INDEX, d), peer(), key()],
            ),
            missing("tp.members"),
        ),
        case(
            "tpg-new without tp.key",
            req(
                cmd::TPG_NEW,
                vec![Attr::u32(tp::DEV_INDEX, d), peer(), four()],
            ),
            missing("tp.key"),
        ),
        case(
            "tpg-new without tp.peer",
            req(
                cmd::TPG_NEW,
                vec![Attr::u32(tp::DEV_INDEX, d), key(), four()],
            ),
            missing("tp.peer"),
        ),
        case(
            "tpg-new without tp.dev-index",
            req(cmd::TPG_NEW, vec![peer(), key(), four()]),
            missing("tp.dev-index"),
        ),
        case(
            "tpg-new members 1 (policy min 2)",
            tpg_new(d, 1, vec![]),
            bad("tp.members"),
        ),
        case(
            "tpg-new members 9 (policy max 8)",
            tpg_new(d, 9, vec![]),
            bad("tp.members"),
        ),
        case(
            "tpg-new u8 tp.members",
            {
                let mut r = tp_new(d, vec![Attr::u8(tp::MEMBERS, 4)]);
                r.cmd = cmd::TPG_NEW;
                r
            },
            bad("tp.members"),
        ),
        case(
            "tpg-new unknown device",
            tpg_new(NO_DEV, 4, vec![]),
            bad("tp.dev-index"),
        ),
        case(
            "tpg-new ooo-window 4096 (policy max 2048)",
            tpg_new(d, 4, vec![Attr::u32(tp::OOO_WINDOW, 4096)]),
            bad("tp.ooo-window"),
        ),
        case(
            "tpg-new fast-retransmit with per-packet load balancing",
            tpg_new(
                d,
                4,
                vec![
                    Attr::u8(tp::FAST_RETRANSMIT, 1),
                    Attr::u32(tp::LOAD_BALANCE, crate::spec::load_balance::PER_PACKET),
                ],
            ),
            rule(
                EINVAL,
                "fast retransmit cannot be combined with per-packet",
                Some("tp.fast-retransmit"),
            ),
        ),
        case(
            "tpg-new send-window 65537 (driver limit)",
            tpg_new(d, 4, vec![Attr::u32(tp::SEND_WINDOW, 65_537)]),
            rule(EINVAL, "driver's limit", Some("tp.send-window")),
        ),
        case(
            "tpg-new transport ctp",
            tpg_new(d, 4, vec![Attr::u32(tp::TRANSPORT, 1)]),
            rule(EINVAL, "members are RTP channels", Some("tp.transport")),
        ),
        case(
            "tpg-new RTP to a 16-bit CNA",
            req(
                cmd::TPG_NEW,
                vec![
                    Attr::u32(tp::DEV_INDEX, d),
                    Attr::nest(tp::PEER, Address::Cna16(SPARE_CNA).attrs()),
                    key(),
                    four(),
                ],
            ),
            rule(EINVAL, "RTP needs", Some("tp.peer")),
        ),
        case(
            "tpg-get without tp.tpn",
            req(cmd::TPG_GET, vec![Attr::u32(tp::DEV_INDEX, d)]),
            missing("tp.tpn"),
        ),
        case(
            "tpg-get unknown device",
            req(
                cmd::TPG_GET,
                vec![Attr::u32(tp::DEV_INDEX, NO_DEV), Attr::u32(tp::TPN, 1)],
            ),
            bad("tp.dev-index"),
        ),
        case(
            "tpg-get unknown group",
            req(
                cmd::TPG_GET,
                vec![Attr::u32(tp::DEV_INDEX, d), Attr::u32(tp::TPN, NO_TPN)],
            ),
            bad("tp.tpn"),
        ),
    ];
    v.extend(set_del_cases(
        d,
        "tpg",
        [cmd::TPG_SET, cmd::TPG_DEL],
        "no TP Channel Group",
    ));
    v
}

/// An address no test setup uses, for add/del attempts.
pub const SPARE_CNA: u16 = 0xfffe;
/// An IPv4 address no test setup uses (TEST-NET-2), for echo requests.
pub const SPARE_IPV4: std::net::Ipv4Addr = std::net::Ipv4Addr::new(198, 51, 100, 254);

/// The requests to send with CAP_NET_ADMIN: each malformed, or aimed at
/// an object that does not exist.
pub fn privileged_cases(t: &Target) -> Vec<Case> {
    let (d, p) = (t.dev, t.port);
    let cna = || Attr::nest(dev::ADDR, Address::Cna16(SPARE_CNA).attrs());
    let dst = |id| Attr::nest(id, Address::Cna16(SPARE_CNA).attrs());
    // Echo rides on UTP: its destination must be an IP address.
    let ip_dst = |id| Attr::nest(id, Address::V4(SPARE_IPV4).attrs());
    let admin = u8::from(t.admin_up);
    let mut v = vec![
        // Missing required attributes.
        case(
            "dev-get without dev.index",
            req(cmd::DEV_GET, vec![]),
            missing("dev.index"),
        ),
        case(
            "port-get without port.dev-index",
            req(cmd::PORT_GET, vec![Attr::u32(port::INDEX, p)]),
            missing("port.dev-index"),
        ),
        case(
            "port-get without port.index",
            req(cmd::PORT_GET, vec![Attr::u32(port::DEV_INDEX, d)]),
            missing("port.index"),
        ),
        case(
            "port-set without port.index",
            req(
                cmd::PORT_SET,
                vec![
                    Attr::u32(port::DEV_INDEX, d),
                    Attr::u8(port::ADMIN_UP, admin),
                ],
            ),
            missing("port.index"),
        ),
        case(
            "addr-add without dev.addr",
            req(cmd::ADDR_ADD, vec![Attr::u32(dev::INDEX, d)]),
            missing("dev.addr"),
        ),
        case(
            "addr-add without addr.type",
            req(
                cmd::ADDR_ADD,
                vec![
                    Attr::u32(dev::INDEX, d),
                    Attr::nest(dev::ADDR, vec![Attr::u32(addr::CNA, 1)]),
                ],
            ),
            missing_in("addr.type", "dev.addr"),
        ),
        case(
            "route-add without route.dst",
            req(
                cmd::ROUTE_ADD,
                vec![
                    Attr::u32(route::DEV_INDEX, d),
                    Attr::u32(route::PREFIX_LEN, 16),
                ],
            ),
            missing("route.dst"),
        ),
        case(
            "route-add without route.prefix-len",
            req(
                cmd::ROUTE_ADD,
                vec![Attr::u32(route::DEV_INDEX, d), dst(route::DST)],
            ),
            missing("route.prefix-len"),
        ),
        case(
            "tp-get without tp.dev-index",
            req(cmd::TP_GET, vec![Attr::u32(tp::TPN, 1)]),
            missing("tp.dev-index"),
        ),
        case(
            "tp-get without tp.tpn",
            req(cmd::TP_GET, vec![Attr::u32(tp::DEV_INDEX, d)]),
            missing("tp.tpn"),
        ),
        case(
            "echo without echo.dst",
            req(
                cmd::ECHO,
                vec![
                    Attr::u32(echo::DEV_INDEX, d),
                    Attr::u32(echo::ID, 1),
                    Attr::u32(echo::SEQ, 1),
                ],
            ),
            missing("echo.dst"),
        ),
        // Binaries of the wrong size.
        case(
            "addr-add ipv4 of 3 bytes",
            req(
                cmd::ADDR_ADD,
                vec![Attr::u32(dev::INDEX, d), v4nest(&[10, 0, 0])],
            ),
            bad("dev.addr.ipv4"),
        ),
        case(
            "addr-add ipv4 of 5 bytes",
            req(
                cmd::ADDR_ADD,
                vec![Attr::u32(dev::INDEX, d), v4nest(&[10, 0, 0, 9, 9])],
            ),
            bad("dev.addr.ipv4"),
        ),
        case(
            "addr-add ipv6 of 15 bytes",
            req(
                cmd::ADDR_ADD,
                vec![Attr::u32(dev::INDEX, d), v6nest(&[0xfd; 15])],
            ),
            bad("dev.addr.ipv6"),
        ),
        case(
            "addr-add ipv6 of 17 bytes",
            req(
                cmd::ADDR_ADD,
                vec![Attr::u32(dev::INDEX, d), v6nest(&[0xfd; 17])],
            ),
            bad("dev.addr.ipv6"),
        ),
        // Wrong-typed integers (strict validation: exact lengths).
        case(
            "port-get u64 port.dev-index",
            req(
                cmd::PORT_GET,
                vec![
                    Attr::u64(port::DEV_INDEX, u64::from(d)),
                    Attr::u32(port::INDEX, p),
                ],
            ),
            bad("port.dev-index"),
        ),
        case(
            "tp-get u64 tp.tpn",
            req(
                cmd::TP_GET,
                vec![Attr::u32(tp::DEV_INDEX, d), Attr::u64(tp::TPN, 1)],
            ),
            bad("tp.tpn"),
        ),
        case(
            "dev-get u8 dev.index",
            req(cmd::DEV_GET, vec![Attr::u8(dev::INDEX, 0)]),
            bad("dev.index"),
        ),
        case(
            "port-set u32 port.admin-up",
            req(
                cmd::PORT_SET,
                vec![
                    Attr::u32(port::DEV_INDEX, d),
                    Attr::u32(port::INDEX, p),
                    Attr::u32(port::ADMIN_UP, u32::from(admin)),
                ],
            ),
            bad("port.admin-up"),
        ),
        case(
            "route-add u32 route.ports",
            req(
                cmd::ROUTE_ADD,
                vec![
                    Attr::u32(route::DEV_INDEX, d),
                    dst(route::DST),
                    Attr::u32(route::PREFIX_LEN, 16),
                    Attr::u32(route::PORTS, 1),
                ],
            ),
            bad("route.ports"),
        ),
        case(
            "addr-add dev.addr not a nest",
            req(
                cmd::ADDR_ADD,
                vec![Attr::u32(dev::INDEX, d), Attr::u32(dev::ADDR, 1)],
            ),
            bad("dev.addr"),
        ),
        // Unknown attribute types.
        case(
            "port-get unknown attribute 99",
            req(
                cmd::PORT_GET,
                vec![
                    Attr::u32(port::DEV_INDEX, d),
                    Attr::u32(port::INDEX, p),
                    Attr::u32(99, 0),
                ],
            ),
            bad("port.<unknown type 99>"),
        ),
        case(
            "port-set attribute one past the set",
            req(
                cmd::PORT_SET,
                vec![
                    Attr::u32(port::DEV_INDEX, d),
                    Attr::u32(port::INDEX, p),
                    Attr::u32(26, 0),
                ],
            ),
            bad("port.<unknown type 26>"),
        ),
        case(
            "addr-add unknown attribute in addr nest",
            req(
                cmd::ADDR_ADD,
                vec![
                    Attr::u32(dev::INDEX, d),
                    Attr::nest(
                        dev::ADDR,
                        vec![
                            Attr::u32(addr::TYPE, addr_type::CNA16),
                            Attr::u32(addr::CNA, u32::from(SPARE_CNA)),
                            Attr::u32(9, 0),
                        ],
                    ),
                ],
            ),
            bad("dev.addr.<unknown type 9>"),
        ),
        // Out of the spec's ranges (`checks`, and enums' ranges).
        case(
            "port-get port.index 64",
            req(
                cmd::PORT_GET,
                vec![Attr::u32(port::DEV_INDEX, d), Attr::u32(port::INDEX, 64)],
            ),
            bad("port.index"),
        ),
        case(
            "port-set port.admin-up 2",
            req(
                cmd::PORT_SET,
                vec![
                    Attr::u32(port::DEV_INDEX, d),
                    Attr::u32(port::INDEX, p),
                    Attr::u8(port::ADMIN_UP, 2),
                ],
            ),
            bad("port.admin-up"),
        ),
        case(
            "port-set num-retry-threshold 0",
            req(
                cmd::PORT_SET,
                vec![
                    Attr::u32(port::DEV_INDEX, d),
                    Attr::u32(port::INDEX, p),
                    Attr::u8(port::NUM_RETRY_THRESHOLD, 0),
                ],
            ),
            bad("port.num-retry-threshold"),
        ),
        // A threshold of 1 retrains at the link-up alignment, every time:
        // the link never came up (found by ub-nlfuzz).
        case(
            "port-set num-retry-threshold 1",
            req(
                cmd::PORT_SET,
                vec![
                    Attr::u32(port::DEV_INDEX, d),
                    Attr::u32(port::INDEX, p),
                    Attr::u8(port::NUM_RETRY_THRESHOLD, 1),
                ],
            ),
            bad("port.num-retry-threshold"),
        ),
        case(
            "port-set num-phy-reinit-threshold 0",
            req(
                cmd::PORT_SET,
                vec![
                    Attr::u32(port::DEV_INDEX, d),
                    Attr::u32(port::INDEX, p),
                    Attr::u8(port::NUM_PHY_REINIT_THRESHOLD, 0),
                ],
            ),
            bad("port.num-phy-reinit-threshold"),
        ),
        case(
            "port-set want-sharing 2",
            req(
                cmd::PORT_SET,
                vec![
                    Attr::u32(port::DEV_INDEX, d),
                    Attr::u32(port::INDEX, p),
                    Attr::u8(port::WANT_SHARING, 2),
                ],
            ),
            bad("port.want-sharing"),
        ),
        case(
            "addr-add cna 0x1000000",
            req(
                cmd::ADDR_ADD,
                vec![
                    Attr::u32(dev::INDEX, d),
                    Attr::nest(
                        dev::ADDR,
                        vec![
                            Attr::u32(addr::TYPE, addr_type::CNA24),
                            Attr::u32(addr::CNA, 0x0100_0000),
                        ],
                    ),
                ],
            ),
            bad("dev.addr.cna"),
        ),
        case(
            "addr-add addr.type 4",
            req(
                cmd::ADDR_ADD,
                vec![
                    Attr::u32(dev::INDEX, d),
                    Attr::nest(
                        dev::ADDR,
                        vec![Attr::u32(addr::TYPE, 4), Attr::u32(addr::CNA, 1)],
                    ),
                ],
            ),
            bad("dev.addr.type"),
        ),
        case(
            "route-add prefix-len 129",
            req(
                cmd::ROUTE_ADD,
                vec![
                    Attr::u32(route::DEV_INDEX, d),
                    dst(route::DST),
                    Attr::u32(route::PREFIX_LEN, 129),
                ],
            ),
            bad("route.prefix-len"),
        ),
        case(
            "route-add load-balance 2",
            req(
                cmd::ROUTE_ADD,
                vec![
                    Attr::u32(route::DEV_INDEX, d),
                    dst(route::DST),
                    Attr::u32(route::PREFIX_LEN, 16),
                    Attr::u32(route::LOAD_BALANCE, 2),
                ],
            ),
            bad("route.load-balance"),
        ),
        case(
            "npi-set npi 0x2000000",
            req(
                cmd::NPI_SET,
                vec![Attr::u32(dev::INDEX, d), Attr::u32(dev::NPI, 0x0200_0000)],
            ),
            bad("dev.npi"),
        ),
        case(
            "npi-set npi-mode 2",
            req(
                cmd::NPI_SET,
                vec![Attr::u32(dev::INDEX, d), Attr::u32(dev::NPI_MODE, 2)],
            ),
            bad("dev.npi-mode"),
        ),
        case(
            "echo size 4097",
            req(
                cmd::ECHO,
                vec![
                    Attr::u32(echo::DEV_INDEX, d),
                    ip_dst(echo::DST),
                    Attr::u32(echo::ID, 1),
                    Attr::u32(echo::SEQ, 1),
                    Attr::u32(echo::SIZE, 4097),
                ],
            ),
            bad("echo.size"),
        ),
        // Objects that do not exist.
        case(
            "dev-get unknown device",
            req(cmd::DEV_GET, vec![Attr::u32(dev::INDEX, NO_DEV)]),
            bad("dev.index"),
        ),
        case(
            "port-get unknown device",
            req(
                cmd::PORT_GET,
                vec![
                    Attr::u32(port::DEV_INDEX, NO_DEV),
                    Attr::u32(port::INDEX, 0),
                ],
            ),
            bad("port.dev-index"),
        ),
        case(
            "port-set unknown device",
            req(
                cmd::PORT_SET,
                vec![
                    Attr::u32(port::DEV_INDEX, NO_DEV),
                    Attr::u32(port::INDEX, 0),
                    Attr::u8(port::ADMIN_UP, 1),
                ],
            ),
            bad("port.dev-index"),
        ),
        case(
            "addr-add unknown device",
            req(cmd::ADDR_ADD, vec![Attr::u32(dev::INDEX, NO_DEV), cna()]),
            bad("dev.index"),
        ),
        case(
            "addr-del unknown device",
            req(cmd::ADDR_DEL, vec![Attr::u32(dev::INDEX, NO_DEV), cna()]),
            bad("dev.index"),
        ),
        case(
            "route-add unknown device",
            req(
                cmd::ROUTE_ADD,
                vec![
                    Attr::u32(route::DEV_INDEX, NO_DEV),
                    dst(route::DST),
                    Attr::u32(route::PREFIX_LEN, 16),
                    Attr::u64(route::PORTS, 1),
                ],
            ),
            bad("route.dev-index"),
        ),
        case(
            "npi-set unknown device",
            req(
                cmd::NPI_SET,
                vec![
                    Attr::u32(dev::INDEX, NO_DEV),
                    Attr::u32(dev::NPI_MODE, 0),
                    Attr::u32(dev::NPI, 1),
                ],
            ),
            bad("dev.index"),
        ),
        case(
            "tp-get unknown device",
            req(
                cmd::TP_GET,
                vec![Attr::u32(tp::DEV_INDEX, NO_DEV), Attr::u32(tp::TPN, 1)],
            ),
            bad("tp.dev-index"),
        ),
        case(
            "tp-get unknown TPN",
            req(
                cmd::TP_GET,
                vec![Attr::u32(tp::DEV_INDEX, d), Attr::u32(tp::TPN, NO_TPN)],
            ),
            bad("tp.tpn"),
        ),
        case(
            "echo unknown device",
            req(
                cmd::ECHO,
                vec![
                    Attr::u32(echo::DEV_INDEX, NO_DEV),
                    ip_dst(echo::DST),
                    Attr::u32(echo::ID, 1),
                    Attr::u32(echo::SEQ, 1),
                ],
            ),
            bad("echo.dev-index"),
        ),
    ];
    v.extend(tp_cases(d));
    v.extend(tpg_cases(d));
    if t.ports <= 63 {
        v.push(case(
            "port-get port past the device's ports",
            req(
                cmd::PORT_GET,
                vec![
                    Attr::u32(port::DEV_INDEX, d),
                    Attr::u32(port::INDEX, t.ports),
                ],
            ),
            bad("port.index"),
        ));
    }
    v
}

/// Every mutating operation, well-formed, to send after CAP_NET_ADMIN is
/// gone. Each would change nothing or only the spare address/route if a
/// broken permission check let it through (the state comparison sees it).
pub fn unprivileged_cases(t: &Target) -> Vec<Case> {
    let (d, p) = (t.dev, t.port);
    let spare = Address::Cna16(SPARE_CNA);
    let pfx = crate::addr::Prefix {
        addr: spare,
        len: 16,
    };
    let perm = |name: &str, r: Request| case(&format!("unprivileged {name}"), r, Expect::Perm);
    vec![
        perm(
            "port-set",
            crate::request::port_set(
                d,
                p,
                crate::request::PortChanges {
                    admin_up: Some(t.admin_up),
                    ..Default::default()
                },
            ),
        ),
        perm("addr-add", crate::request::addr_change(true, d, spare)),
        perm("addr-del", crate::request::addr_change(false, d, spare)),
        perm(
            "route-add",
            crate::request::route_add(d, pfx, Some(1), None),
        ),
        perm("route-del", crate::request::route_del(d, pfx)),
        perm("npi-set", crate::request::npi_set(d, Some(0), Some(1))),
        perm("tp-new", tp_new(d, vec![])),
        perm(
            "tp-set",
            crate::request::tp_set_state(d, NO_TPN_UNPRIVILEGED, 2),
        ),
        perm("tp-del", crate::request::tp_del(d, NO_TPN_UNPRIVILEGED)),
        perm("tpg-new", tpg_new(d, 2, vec![])),
        perm(
            "tpg-set",
            crate::request::tpg_set_state(d, NO_TPN_UNPRIVILEGED, 2),
        ),
        perm("tpg-del", crate::request::tpg_del(d, NO_TPN_UNPRIVILEGED)),
    ]
}

/// Judge the answer to `c`: `Ok(diagnostic)` if the refusal carries what it
/// must, `Err(reason)` otherwise.
pub fn judge(c: &Case, answer: &Result<(), Error>) -> Result<String, String> {
    let err: &KernelError = match answer {
        Ok(()) => return Err("accepted".to_string()),
        Err(Error::Kernel { err, .. }) => err,
        Err(e) => return Err(format!("no kernel error: {e}")),
    };
    let said = match answer {
        Err(e) => e.to_string(),
        Ok(()) => String::new(),
    };
    let has_msg = err.msg.as_deref().is_some_and(|m| !m.trim().is_empty());
    match &c.expect {
        Expect::Perm => {
            if err.errno != libc::EPERM {
                return Err(format!("errno {} instead of EPERM: {said}", err.errno));
            }
            if has_msg {
                Ok(said)
            } else {
                Ok(format!(
                    "{said} (no extack message: genetlink's GENL_ADMIN_PERM check)"
                ))
            }
        }
        Expect::Rule { errno, msg, attr } => {
            if err.errno != *errno {
                return Err(format!("errno {} instead of {errno}: {said}", err.errno));
            }
            let m = err.msg.as_deref().unwrap_or("");
            if !m.contains(msg) {
                return Err(format!("extack message lacks '{msg}': {said}"));
            }
            let got = err.offset.and_then(|o| c.req.name_at(o));
            match (attr, got) {
                (None, _) => Ok(said),
                (Some(w), Some(g)) if g == *w => Ok(said),
                (Some(w), Some(g)) => Err(format!("extack points at {g}, not {w}: {said}")),
                (Some(w), None) => Err(format!("extack names no attribute (want {w}): {said}")),
            }
        }
        Expect::BadAttr(want) => {
            if !has_msg {
                return Err(format!("no extack message: {said}"));
            }
            let got = err.offset.and_then(|o| c.req.name_at(o));
            match got {
                Some(g) if g == *want => Ok(said),
                Some(g) => Err(format!("extack points at {g}, not {want}: {said}")),
                None => Err(format!("extack names no attribute (want {want}): {said}")),
            }
        }
        Expect::Missing { attr, nest } => {
            if !has_msg {
                return Err(format!("no extack message: {said}"));
            }
            if let Some(t) = err.miss_type {
                let g = c.req.name_of_type(t, err.miss_nest);
                return if g == *attr {
                    Ok(said)
                } else {
                    Err(format!("extack says {g} is missing, not {attr}: {said}"))
                };
            }
            let at = err.offset.and_then(|o| c.req.name_at(o));
            match (nest, at) {
                (Some(n), Some(a)) if a == *n => Ok(format!("{said} (the nest, not MISS_TYPE)")),
                _ => Err(format!(
                    "extack names no missing attribute (want {attr}): {said}"
                )),
            }
        }
    }
}

/// Where attribute `path` (`set.attr[.inner]`) starts in `req`, counted from
/// the `nlmsghdr` as the kernel's offsets are; for tests.
pub fn offset_of(req: &Request, path: &str) -> Option<u32> {
    fn walk(
        attrs: &[Attr],
        set: Option<&crate::spec::Set>,
        parts: &[&str],
        base: usize,
    ) -> Option<usize> {
        let (first, rest) = parts.split_first()?;
        let mut pos = base;
        for a in attrs {
            let def = set.and_then(|s| s.get(a.id));
            let name = def.map_or_else(
                || format!("<unknown type {}>", a.id),
                |d| d.name.to_string(),
            );
            if name == *first {
                if rest.is_empty() {
                    return Some(pos);
                }
                let inner = match def.map(|d| d.ty) {
                    Some(crate::spec::Ty::Nest(s)) | Some(crate::spec::Ty::MultiNest(s)) => Some(s),
                    _ => None,
                };
                if let Value::Nest(children) = &a.value {
                    return walk(children, inner, rest, pos + crate::attr::NLA_HDRLEN);
                }
                return None;
            }
            pos += a.encoded_len();
        }
        None
    }
    let parts: Vec<&str> = path.split('.').collect();
    let (set_name, rest) = parts.split_first()?;
    let set = req.set()?;
    if set.name != *set_name {
        return None;
    }
    walk(&req.attrs, Some(set), rest, NLMSG_HDRLEN + GENL_HDRLEN)
        .and_then(|o| u32::try_from(o).ok())
}

/// Configuration attributes of a port (what the batch must not change;
/// link state, credits and counters move on their own).
pub const PORT_CONFIG: &[&str] = &[
    "dev-index",
    "index",
    "admin-up",
    "num-retry-threshold",
    "num-phy-reinit-threshold",
    "want-sharing",
];

/// The state the batch must leave unchanged, one line per object:
/// devices without counters (index, name, ports, addresses, NPI), ports'
/// configuration, routes.
pub fn snapshot(devs: &[Obj], ports: &[Obj], routes: &[Obj], chans: &[Obj]) -> Vec<String> {
    let mut v = Vec::new();
    let js = |o: &Obj| serde_json::to_string(o).unwrap_or_else(|e| format!("<{e}>"));
    for d in devs {
        v.push(format!("dev {}", js(&d.without(&["net-stats"]))));
    }
    for p in ports {
        v.push(format!("port {}", js(&p.only(PORT_CONFIG))));
    }
    for r in routes {
        v.push(format!("route {}", js(r)));
    }
    // Channels come and go with other users; the batch's own keys name
    // any it would have made (a group's members take the keys after it).
    let made = chans
        .iter()
        .filter(|c| {
            c.uint("key")
                .is_some_and(|k| k.wrapping_sub(u64::from(SPARE_KEY)) < 8)
        })
        .count();
    v.push(format!("tp channels with the batch's keys: {made}"));
    v
}
