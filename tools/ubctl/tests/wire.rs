// SPDX-License-Identifier: GPL-2.0
//! Wire tests without a kernel: every request ubctl builds, byte for byte
//! against the spec's numbering (written here as literals, independently of
//! `ubctl::spec`), and the decoding of canned kernel replies: data, extended
//! ACKs (message, bad-attribute offset, missing attribute, capped), and
//! malformed input (truncated attributes, bad lengths, unknown attributes).

use neli::consts::nl::NlmF;
use ubctl::addr::{Address, Prefix};
use ubctl::attr::{decode_set, DecodeError, Obj, Val};
use ubctl::nl::{decode_buffer, encode_request, Error, Incoming, KernelError, Request};
use ubctl::request::{self, PortChanges, TpConfig};
use ubctl::spec;

const FAMILY: u16 = 0x1d;
const NESTED: u16 = 0x8000;

fn nla(ty: u16, payload: &[u8]) -> Vec<u8> {
    let len = 4 + payload.len();
    let mut v = Vec::new();
    v.extend_from_slice(&(len as u16).to_ne_bytes());
    v.extend_from_slice(&ty.to_ne_bytes());
    v.extend_from_slice(payload);
    while v.len() % 4 != 0 {
        v.push(0);
    }
    v
}

fn u32a(ty: u16, x: u32) -> Vec<u8> {
    nla(ty, &x.to_ne_bytes())
}

fn nest(ty: u16, parts: &[Vec<u8>]) -> Vec<u8> {
    nla(ty | NESTED, &parts.concat())
}

fn nlmsg(ty: u16, flags: u16, seq: u32, body: &[u8]) -> Vec<u8> {
    let mut v = Vec::new();
    v.extend_from_slice(&((16 + body.len()) as u32).to_ne_bytes());
    v.extend_from_slice(&ty.to_ne_bytes());
    v.extend_from_slice(&flags.to_ne_bytes());
    v.extend_from_slice(&seq.to_ne_bytes());
    v.extend_from_slice(&0u32.to_ne_bytes());
    v.extend_from_slice(body);
    v
}

fn genl(cmd: u8, attrs: &[Vec<u8>]) -> Vec<u8> {
    let mut v = vec![cmd, 1, 0, 0];
    v.extend_from_slice(&attrs.concat());
    v
}

const REQ_ACK: u16 = 0x1 | 0x4;
const REQ_DUMP: u16 = 0x1 | 0x4 | 0x300;

fn wire(r: &Request, seq: u32) -> Vec<u8> {
    let mut f = NlmF::ACK;
    if r.dump {
        f |= NlmF::DUMP;
    }
    encode_request(FAMILY, f, seq, r.cmd, &r.attrs).unwrap_or_default()
}

fn addr_cna16() -> Vec<Vec<u8>> {
    vec![u32a(1, 0), u32a(2, 0x0100)]
}

#[test]
fn every_request_is_encoded_as_the_spec_numbers_it() {
    let v4: Address = "10.0.0.2".parse().unwrap_or(Address::Cna16(0));
    let v6: Address = "fd00::2".parse().unwrap_or(Address::Cna16(0));
    let mut v6b = vec![0xfdu8, 0];
    v6b.extend_from_slice(&[0; 13]);
    v6b.push(2);
    let cases: Vec<(&str, Request, Vec<u8>)> = vec![
        (
            "dev-get do",
            request::dev_get(Some(3)),
            nlmsg(FAMILY, REQ_ACK, 7, &genl(1, &[u32a(1, 3)])),
        ),
        (
            "dev-get dump",
            request::dev_get(None),
            nlmsg(FAMILY, REQ_DUMP, 7, &genl(1, &[])),
        ),
        (
            "port-get do",
            request::port_get(Some(1), Some(2)),
            nlmsg(FAMILY, REQ_ACK, 7, &genl(2, &[u32a(1, 1), u32a(2, 2)])),
        ),
        (
            "port-get dump of a device",
            request::port_get(Some(1), None),
            nlmsg(FAMILY, REQ_DUMP, 7, &genl(2, &[u32a(1, 1)])),
        ),
        (
            "port-get dump",
            request::port_get(None, None),
            nlmsg(FAMILY, REQ_DUMP, 7, &genl(2, &[])),
        ),
        (
            "port-set",
            request::port_set(
                0,
                1,
                PortChanges {
                    admin_up: Some(false),
                    retry_threshold: Some(4),
                    reinit_threshold: Some(3),
                    sharing: Some(true),
                },
            ),
            nlmsg(
                FAMILY,
                REQ_ACK,
                7,
                &genl(
                    3,
                    &[
                        u32a(1, 0),
                        u32a(2, 1),
                        nla(3, &[0]),
                        nla(10, &[4]),
                        nla(11, &[3]),
                        nla(12, &[1]),
                    ],
                ),
            ),
        ),
        (
            "addr-add cna16",
            request::addr_change(true, 0, Address::Cna16(0x100)),
            nlmsg(
                FAMILY,
                REQ_ACK,
                7,
                &genl(5, &[u32a(1, 0), nest(5, &addr_cna16())]),
            ),
        ),
        (
            "addr-del cna24",
            request::addr_change(false, 2, Address::Cna24(0x000100)),
            nlmsg(
                FAMILY,
                REQ_ACK,
                7,
                &genl(6, &[u32a(1, 2), nest(5, &[u32a(1, 1), u32a(2, 0x100)])]),
            ),
        ),
        (
            "addr-add ipv4",
            request::addr_change(true, 0, v4),
            nlmsg(
                FAMILY,
                REQ_ACK,
                7,
                &genl(
                    5,
                    &[u32a(1, 0), nest(5, &[u32a(1, 2), nla(3, &[10, 0, 0, 2])])],
                ),
            ),
        ),
        (
            "addr-add ipv6",
            request::addr_change(true, 0, v6),
            nlmsg(
                FAMILY,
                REQ_ACK,
                7,
                &genl(5, &[u32a(1, 0), nest(5, &[u32a(1, 3), nla(4, &v6b)])]),
            ),
        ),
        (
            "route-add",
            request::route_add(0, Prefix { addr: v4, len: 24 }, Some(0b11), Some(1)),
            nlmsg(
                FAMILY,
                REQ_ACK,
                7,
                &genl(
                    7,
                    &[
                        u32a(1, 0),
                        nest(2, &[u32a(1, 2), nla(3, &[10, 0, 0, 2])]),
                        u32a(3, 24),
                        nla(4, &3u64.to_ne_bytes()),
                        u32a(5, 1),
                    ],
                ),
            ),
        ),
        (
            "route-del",
            request::route_del(
                0,
                Prefix {
                    addr: Address::Cna16(0x100),
                    len: 16,
                },
            ),
            nlmsg(
                FAMILY,
                REQ_ACK,
                7,
                &genl(8, &[u32a(1, 0), nest(2, &addr_cna16()), u32a(3, 16)]),
            ),
        ),
        (
            "route-get",
            request::route_get(Some(1)),
            nlmsg(FAMILY, REQ_DUMP, 7, &genl(9, &[u32a(1, 1)])),
        ),
        (
            "echo",
            request::echo(0, v4, 0xabcd, 5, 56),
            nlmsg(
                FAMILY,
                REQ_ACK,
                7,
                &genl(
                    11,
                    &[
                        u32a(1, 0),
                        nest(2, &[u32a(1, 2), nla(3, &[10, 0, 0, 2])]),
                        u32a(3, 0xabcd),
                        u32a(4, 5),
                        u32a(5, 56),
                    ],
                ),
            ),
        ),
        (
            "tp-get do",
            request::tp_get(Some(0), Some(3)),
            nlmsg(FAMILY, REQ_ACK, 7, &genl(13, &[u32a(1, 0), u32a(2, 3)])),
        ),
        (
            "tp-get dump of a device",
            request::tp_get(Some(1), None),
            nlmsg(FAMILY, REQ_DUMP, 7, &genl(13, &[u32a(1, 1)])),
        ),
        (
            "tp-get dump",
            request::tp_get(None, None),
            nlmsg(FAMILY, REQ_DUMP, 7, &genl(13, &[])),
        ),
        (
            "tpg-get do",
            request::tpg_get(Some(0), Some(3)),
            nlmsg(FAMILY, REQ_ACK, 7, &genl(18, &[u32a(1, 0), u32a(2, 3)])),
        ),
        (
            "tpg-get dump of a device",
            request::tpg_get(Some(1), None),
            nlmsg(FAMILY, REQ_DUMP, 7, &genl(18, &[u32a(1, 1)])),
        ),
        (
            "tpg-get dump",
            request::tpg_get(None, None),
            nlmsg(FAMILY, REQ_DUMP, 7, &genl(18, &[])),
        ),
        (
            "tpg-new: tp-new's attributes, then members",
            request::tpg_new(
                0,
                v4,
                140,
                4,
                &TpConfig {
                    fast_retransmit: Some(false),
                    load_balance: Some(1),
                    lb_range: Some(4),
                    ..TpConfig::default()
                },
            ),
            nlmsg(
                FAMILY,
                REQ_ACK,
                7,
                &genl(
                    20,
                    &[
                        u32a(1, 0),
                        nest(4, &[u32a(1, 2), nla(3, &[10, 0, 0, 2])]),
                        u32a(5, 140),
                        nla(9, &[0]),
                        u32a(21, 1),
                        nla(22, &[4]),
                        u32a(25, 4),
                    ],
                ),
            ),
        ),
        (
            "tpg-set",
            request::tpg_set_state(0, 3, 3),
            nlmsg(
                FAMILY,
                REQ_ACK,
                7,
                &genl(21, &[u32a(1, 0), u32a(2, 3), u32a(6, 3)]),
            ),
        ),
        (
            "tpg-del",
            request::tpg_del(0, 3),
            nlmsg(FAMILY, REQ_ACK, 7, &genl(22, &[u32a(1, 0), u32a(2, 3)])),
        ),
    ];
    for (name, req, want) in cases {
        assert_eq!(wire(&req, 7), want, "{name}");
    }
}

fn error_msg(req: &Request, code: i32, flags: u16, capped: bool, tlvs: &[Vec<u8>]) -> Vec<u8> {
    let echoed = wire(req, 9);
    let mut body = code.to_ne_bytes().to_vec();
    if capped {
        body.extend_from_slice(echoed.get(..16).unwrap_or(&[]));
    } else {
        body.extend_from_slice(&echoed);
    }
    body.extend_from_slice(&tlvs.concat());
    nlmsg(2, flags, 9, &body)
}

fn only_err(buf: &[u8]) -> KernelError {
    match decode_buffer(buf).as_deref() {
        Ok([Incoming::Err { seq: 9, err }]) => err.clone(),
        other => panic!("not one error: {other:?}"),
    }
}

#[test]
fn extack_message_and_offset_name_the_bad_attribute() {
    let req = request::port_set(
        0,
        1,
        PortChanges {
            retry_threshold: Some(0),
            ..PortChanges::default()
        },
    );
    // nlmsghdr 16 + genlmsghdr 4 + dev-index 8 + index 8 -> threshold at 36.
    let buf = error_msg(
        &req,
        -22,
        0x200,
        false,
        &[nla(1, b"integer out of range\0"), u32a(2, 36)],
    );
    let err = only_err(&buf);
    assert_eq!(err.errno, 22);
    assert_eq!(err.msg.as_deref(), Some("integer out of range"));
    assert_eq!(err.offset, Some(36));
    let text = Error::kernel(&req, err).to_string();
    assert_eq!(
        text,
        "port-set: Invalid argument: integer out of range [attribute port.num-retry-threshold]"
    );
}

#[test]
fn extack_offset_inside_a_nest_names_the_nested_attribute() {
    let req = request::addr_change(true, 0, "10.0.0.1".parse().unwrap_or(Address::Cna16(0)));
    // 20 + index 8 + nest header 4 + type 8 -> ipv4 at 40.
    let err = only_err(&error_msg(
        &req,
        -22,
        0x200,
        false,
        &[nla(1, b"bad length\0"), u32a(2, 40)],
    ));
    assert_eq!(
        Error::kernel(&req, err).to_string(),
        "addr-add: Invalid argument: bad length [attribute dev.addr.ipv4]"
    );
}

#[test]
fn extack_missing_attribute_and_capped_errors() {
    let req = request::port_get(Some(0), None);
    // Capped: only the request's header is echoed; MISS_TYPE names port.index.
    let err = only_err(&error_msg(
        &req,
        -22,
        0x200 | 0x100,
        true,
        &[nla(1, b"Missing attribute\0"), u32a(5, 2)],
    ));
    assert_eq!(err.miss_type, Some(2));
    assert!(Error::kernel(&req, err)
        .to_string()
        .ends_with("Missing attribute [attribute port.index missing]"));
    // Missing inside a nest: MISS_NEST points at dev.addr.
    let req = request::addr_change(true, 0, Address::Cna16(1));
    let err = only_err(&error_msg(
        &req,
        -22,
        0x200,
        false,
        &[u32a(5, 1), u32a(6, 28)],
    ));
    assert!(Error::kernel(&req, err)
        .to_string()
        .contains("[attribute addr.type missing]"));
    // EPERM without a message (genetlink's GENL_ADMIN_PERM check) still says why.
    let err = only_err(&error_msg(&req, -1, 0, false, &[]));
    assert_eq!(
        Error::kernel(&req, err).to_string(),
        "addr-add: Operation not permitted (needs CAP_NET_ADMIN)"
    );
}

#[test]
fn acks_and_dump_ends() {
    let req = request::dev_get(Some(0));
    let ack = error_msg(&req, 0, 0x100, true, &[]);
    assert_eq!(decode_buffer(&ack), Ok(vec![Incoming::Ack { seq: 9 }]));
    let done = nlmsg(3, 0x2, 9, &0i32.to_ne_bytes());
    assert_eq!(
        decode_buffer(&done),
        Ok(vec![Incoming::Done { seq: 9, err: None }])
    );
    let mut body = (-19i32).to_ne_bytes().to_vec();
    body.extend_from_slice(&nla(1, b"no such device\0"));
    let failed = nlmsg(3, 0x2 | 0x200, 9, &body);
    match decode_buffer(&failed).as_deref() {
        Ok([Incoming::Done { err: Some(e), .. }]) => {
            assert_eq!(e.errno, 19);
            assert_eq!(e.msg.as_deref(), Some("no such device"));
        }
        other => panic!("{other:?}"),
    }
}

fn dev_reply() -> Vec<u8> {
    let addr2 = nest(5, &[u32a(1, 2), nla(3, &[10, 0, 0, 1]), u32a(77, 1)]);
    let stats = nest(
        8,
        &[
            nla(1, &5u64.to_ne_bytes()),
            nla(99, &[1, 2, 3]),
            nla(10, &7u64.to_ne_bytes()),
        ],
    );
    let body = genl(
        1,
        &[
            u32a(1, 0),
            nla(2, b"0000:00:03.0\0"),
            u32a(3, 2),
            u32a(4, 0x10000),
            nest(5, &addr_cna16()),
            addr2,
            u32a(6, 0),
            nla(200, b"from a newer kernel"),
            u32a(7, 0),
            stats,
        ],
    );
    nlmsg(FAMILY, 0x2, 9, &body)
}

fn attrs_of(buf: &[u8]) -> Vec<ubctl::attr::RawAttr> {
    match decode_buffer(buf) {
        Ok(v) => match v.into_iter().next() {
            Some(Incoming::Genl { attrs, .. }) => attrs,
            other => panic!("{other:?}"),
        },
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn a_device_reply_decodes_and_unknown_attributes_are_skipped() {
    let d = decode_set(&spec::DEV, &attrs_of(&dev_reply())).unwrap_or_default();
    assert_eq!(
        serde_json::to_string(&d).unwrap_or_default(),
        concat!(
            r#"{"index":0,"name":"0000:00:03.0","ports":2,"version":65536,"#,
            r#""addr":[{"type":"cna16","cna":256},{"type":"ipv4","ipv4":"10.0.0.1"}],"#,
            r#""npi-mode":"strict","npi":0,"net-stats":{"rx-packets":5,"echo-replies":7}}"#
        )
    );
    let text = ubctl::reply::dev_text(&ubctl::reply::filter_stats(&d, false));
    assert_eq!(
        text,
        "0: 0000:00:03.0 ports 2 version 0x00010000 npi-mode strict npi 0\n    addr cna16:0x0100 10.0.0.1"
    );
}

#[test]
fn a_port_reply_json_shape() {
    let vl = |i: u32| nest(22, &[u32a(1, i), u32a(2, 100), u32a(3, 0), u32a(4, 128)]);
    let body = genl(
        2,
        &[
            u32a(1, 0),
            u32a(2, 1),
            nla(3, &[1]),
            nla(4, &[1]),
            u32a(7, 3),
            u32a(8, 9), // retry-state beyond the enum: shown as a number
            nla(10, &[4]),
            vl(0),
            vl(1),
            nest(23, &[nla(16, &2u64.to_ne_bytes())]),
            u32a(25, 1),
        ],
    );
    let p = decode_set(&spec::PORT, &attrs_of(&nlmsg(FAMILY, 0, 0, &body))).unwrap_or_default();
    assert_eq!(
        serde_json::to_string(&ubctl::reply::filter_stats(&p, false)).unwrap_or_default(),
        concat!(
            r#"{"dev-index":0,"index":1,"admin-up":1,"phy-up":1,"dll-state":"normal","retry-state":9,"#,
            r#""num-retry-threshold":4,"vl":[{"index":0,"tx-credits":100,"rx-owed":0,"initial":128},"#,
            r#"{"index":1,"tx-credits":100,"rx-owed":0,"initial":128}],"event":"link-down"}"#
        )
    );
    assert_eq!(
        p.get("link-stats"),
        Some(&Val::Obj(Obj(vec![("retrains", Val::U(2))])))
    );
    assert_eq!(
        ubctl::reply::event_text(&p),
        "port 0/1 link-down admin-up 1 phy-up 1 dll-state normal retry-state unknown(9) num-retry-threshold 4"
    );
}

fn u64a(ty: u16, x: u64) -> Vec<u8> {
    nla(ty, &x.to_ne_bytes())
}

/// A `tp-get` reply as the kernel writes it (fill_tp): identity and state,
/// parameters, the stats nest with pads between u64s.
fn tp_reply() -> Vec<u8> {
    let peer = nest(4, &[u32a(1, 2), nla(3, &[10, 0, 2, 100])]);
    let stats = nest(
        13,
        &[
            nla(28, &[]), // pad
            u64a(1, 40),
            u64a(3, 12),
            u64a(7, 2),
            u32a(18, u32::MAX),
            u64a(25, 40),
        ],
    );
    let body = genl(
        13,
        &[
            u32a(1, 0),
            u32a(2, 3),
            peer,
            u32a(5, 101),
            u32a(6, 2),
            u32a(7, 0),
            u32a(3, 5),
            u32a(8, 1),
            nla(9, &[1]),
            u32a(10, 4096),
            nla(11, &[1]),
            u32a(12, 0),
            stats,
        ],
    );
    nlmsg(FAMILY, 0x2, 9, &body)
}

#[test]
fn a_tp_reply_json_and_text() {
    let t = decode_set(&spec::TP, &attrs_of(&tp_reply())).unwrap_or_default();
    assert_eq!(
        serde_json::to_string(&t).unwrap_or_default(),
        concat!(
            r#"{"dev-index":0,"tpn":3,"peer":{"type":"ipv4","ipv4":"10.0.2.100"},"key":101,"#,
            r#""state":"rts","error":0,"peer-tpn":5,"mode":"selective","fast-retransmit":1,"#,
            r#""mtu":4096,"claimed":1,"rx-queued":0,"stats":{"tx-packets":40,"rx-packets":12,"#,
            r#""rtx-fast":2,"cw":4294967295,"tx-messages":40}}"#
        )
    );
    let plain = ubctl::reply::filter_stats(&t, false);
    assert!(plain.get("stats").is_none());
    assert_eq!(
        ubctl::reply::tp_text(&plain),
        "0/3: rts peer 10.0.2.100 key 101 peer-tpn 5 mode selective fast-retransmit 1 mtu 4096 claimed 1 rx-queued 0"
    );
    assert_eq!(
        ubctl::reply::tp_text(&t).lines().nth(1),
        Some("    stats: tx-packets 40 rx-packets 12 rtx-fast 2 cw 4294967295 tx-messages 40")
    );
}

#[test]
fn tp_events_on_the_monitor() {
    let peer = nest(4, &[u32a(1, 2), nla(3, &[10, 0, 2, 100])]);
    let ev = |state: u32, error: u32| {
        let body = genl(
            14,
            &[
                u32a(1, 0),
                u32a(2, 3),
                peer.clone(),
                u32a(5, 106),
                u32a(6, state),
                u32a(7, error),
            ],
        );
        decode_set(&spec::TP, &attrs_of(&nlmsg(FAMILY, 0, 0, &body))).unwrap_or_default()
    };
    assert_eq!(
        ubctl::reply::tp_event_text(&ev(5, 0)),
        "tp 0/3 closed peer 10.0.2.100 key 106"
    );
    // ETIMEDOUT (110 on Linux).
    let failed = ubctl::reply::tp_event_text(&ev(4, 110));
    assert!(
        failed.starts_with("tp 0/3 err peer 10.0.2.100 key 106 error 110 ("),
        "{failed}"
    );
    assert!(!failed.contains("os error"), "{failed}");
    // A state this ubctl does not know is shown as a number.
    assert_eq!(
        ubctl::reply::tp_event_text(&ev(9, 0)),
        "tp 0/3 unknown(9) peer 10.0.2.100 key 106"
    );
    assert_eq!(
        ubctl::reply::event_json("tp", &ev(2, 0)).unwrap_or_default(),
        concat!(
            r#"{"object":"tp","dev-index":0,"tpn":3,"#,
            r#""peer":{"type":"ipv4","ipv4":"10.0.2.100"},"key":106,"state":"rts","error":0}"#
        )
    );
}

/// A `tpg-get` reply as the kernel writes it (fill_tpg): the group as a
/// channel, its members, the summed stats, one nest per member.
fn tpg_reply() -> Vec<u8> {
    let peer = nest(4, &[u32a(1, 2), nla(3, &[10, 0, 2, 100])]);
    let member = |tpn: u32, key: u32, state: u32, error: u32| {
        nest(
            26,
            &[
                u32a(1, tpn),
                u32a(2, tpn + 10),
                u32a(3, key),
                u32a(4, state),
                u32a(5, error),
            ],
        )
    };
    let body = genl(
        18,
        &[
            u32a(1, 0),
            u32a(2, 3),
            peer,
            u32a(5, 140),
            u32a(6, 4),
            u32a(7, 103),
            u32a(25, 2),
            nla(11, &[1]),
            u32a(12, 0),
            nest(13, &[u64a(1, 80), u64a(25, 60)]),
            member(3, 140, 2, 0),
            member(4, 141, 4, 103),
        ],
    );
    nlmsg(FAMILY, 0x2, 9, &body)
}

#[test]
fn a_tpg_reply_json_and_text() {
    let g = decode_set(&spec::TP, &attrs_of(&tpg_reply())).unwrap_or_default();
    assert_eq!(
        serde_json::to_string(&g).unwrap_or_default(),
        concat!(
            r#"{"dev-index":0,"tpn":3,"peer":{"type":"ipv4","ipv4":"10.0.2.100"},"key":140,"#,
            r#""state":"err","error":103,"members":2,"claimed":1,"rx-queued":0,"#,
            r#""stats":{"tx-packets":80,"tx-messages":60},"member":["#,
            r#"{"tpn":3,"peer-tpn":13,"key":140,"state":"rts","error":0},"#,
            r#"{"tpn":4,"peer-tpn":14,"key":141,"state":"err","error":103}]}"#
        )
    );
    let text = ubctl::reply::tpg_text(&g);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 4, "{text}");
    assert!(
        lines[0].starts_with("0/3: err peer 10.0.2.100 key 140 error 103 ("),
        "{text}"
    );
    assert!(
        lines[0].ends_with(") members 2 claimed 1 rx-queued 0"),
        "{text}"
    );
    assert_eq!(lines[1], "    member 0/3: rts peer-tpn 13 key 140");
    assert!(
        lines[2].starts_with("    member 0/4: err peer-tpn 14 key 141 error 103 ("),
        "{text}"
    );
    assert_eq!(lines[3], "    stats: tx-packets 80 tx-messages 60");
    let plain = ubctl::reply::filter_stats(&g, false);
    assert_eq!(ubctl::reply::tpg_text(&plain).lines().count(), 3);
}

#[test]
fn tpg_events_on_the_monitor() {
    let peer = nest(4, &[u32a(1, 2), nla(3, &[10, 0, 2, 100])]);
    let body = genl(
        19,
        &[
            u32a(1, 0),
            u32a(2, 3),
            peer,
            u32a(5, 140),
            u32a(6, 5),
            u32a(7, 0),
            u32a(25, 4),
        ],
    );
    let ev = decode_set(&spec::TP, &attrs_of(&nlmsg(FAMILY, 0, 0, &body))).unwrap_or_default();
    assert_eq!(
        ubctl::reply::tpg_event_text(&ev),
        "tpg 0/3 closed peer 10.0.2.100 key 140 members 4"
    );
    assert_eq!(
        ubctl::reply::event_json("tpg", &ev).unwrap_or_default(),
        concat!(
            r#"{"object":"tpg","dev-index":0,"tpn":3,"#,
            r#""peer":{"type":"ipv4","ipv4":"10.0.2.100"},"key":140,"state":"closed","error":0,"members":4}"#
        )
    );
}

#[test]
fn malformed_replies_are_errors_not_panics() {
    // A u32 attribute of 3 bytes.
    let short = nlmsg(FAMILY, 0, 0, &genl(1, &[u32a(1, 0), nla(3, &[1, 2, 3])]));
    assert_eq!(
        decode_set(&spec::DEV, &attrs_of(&short)),
        Err(DecodeError::BadLength {
            attr: "dev.ports".into(),
            expected: "4 (u32)",
            got: 3
        })
    );
    // An ipv4 of 5 bytes inside an addr nest.
    let bad_ip = nlmsg(
        FAMILY,
        0,
        0,
        &genl(1, &[nest(5, &[u32a(1, 2), nla(3, &[1, 2, 3, 4, 5])])]),
    );
    let e = decode_set(&spec::DEV, &attrs_of(&bad_ip));
    assert!(
        matches!(e, Err(DecodeError::InNest { ref attr, .. }) if attr == "dev.addr"),
        "{e:?}"
    );
    // An attribute whose length runs past the message.
    let mut trunc = nlmsg(FAMILY, 0, 0, &genl(1, &[u32a(1, 0)]));
    let n = trunc.len();
    trunc[n - 8] = 40; // nla_len 40 in a 8-byte attribute
    assert!(decode_buffer(&trunc).is_err());
    // A nest whose contents are truncated.
    let mut inner = u32a(1, 2);
    inner[0] = 12;
    let bad_nest = nlmsg(FAMILY, 0, 0, &genl(1, &[nla(5 | NESTED, &inner)]));
    assert!(decode_set(&spec::DEV, &attrs_of(&bad_nest)).is_err());
    // nlmsg_len beyond the datagram, and below the header size.
    let mut long = dev_reply();
    long[0] = 0xff;
    long[1] = 0xff;
    assert!(decode_buffer(&long).is_err());
    let mut tiny = dev_reply();
    tiny[..4].copy_from_slice(&8u32.to_ne_bytes());
    assert!(decode_buffer(&tiny).is_err());
    // An error message cut inside the echoed request.
    let req = request::dev_get(Some(0));
    let mut cut = error_msg(&req, -22, 0, false, &[]);
    cut.truncate(30);
    cut[..4].copy_from_slice(&30u32.to_ne_bytes());
    assert!(decode_buffer(&cut).is_err());
    // Garbage of every length never panics.
    let good = dev_reply();
    for n in 0..good.len() {
        let mut b = good[..n].to_vec();
        if b.len() >= 4 {
            b[..4].copy_from_slice(&(n as u32).to_ne_bytes());
        }
        if let Ok(msgs) = decode_buffer(&b) {
            for m in msgs {
                if let Incoming::Genl { attrs, .. } = m {
                    let _ = decode_set(&spec::DEV, &attrs);
                }
            }
        }
    }
}

#[test]
fn nlctrl_reply_gives_family_and_monitor_group() {
    let grp = |i: u16, name: &[u8], id: u32| nest(i, &[nla(1, name), u32a(2, id)]);
    let body = genl(
        1,
        &[
            nla(1, &FAMILY.to_ne_bytes()),
            nla(2, b"ub\0"),
            nest(7, &[grp(1, b"other\0", 5), grp(2, b"monitor\0", 9)]),
        ],
    );
    let attrs = attrs_of(&nlmsg(0x10, 0, 9, &body));
    let got = ubctl::nl::parse_family(&[attrs]).ok();
    assert_eq!(got, Some((FAMILY, Some(9))));
}
