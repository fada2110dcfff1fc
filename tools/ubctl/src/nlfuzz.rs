// SPDX-License-Identifier: GPL-2.0
//! Structure-aware fuzzing of the `ub` generic netlink family
//! (`ub-nlfuzz`).
//!
//! `ub-nlcheck` sends a fixed list of malformed requests and checks each
//! answer exactly; this module generates requests at random, for as long as
//! it is asked to, to find the inputs nobody thought of. Requests follow the
//! spec tables of [`crate::spec`] (so most of them get past the generic
//! netlink policy and reach the driver's own checks and operations) and
//! bend them on purpose:
//!
//! - every operation, including the notification-only commands and
//!   command numbers the family does not have, as a `do` or as a dump;
//! - any subset of the operation's attributes, repeated or missing, with
//!   values biased to what exists (device 0, ports 0 and 1, small TPNs and
//!   keys), to the bounds (0, the largest value of the type, the largest
//!   the driver accepts and one more) and to garbage;
//! - values of the wrong type or length, unknown attribute numbers, nests
//!   sent flat and flat values sent as nests, nests of nests;
//! - and, for one request in eight, damage to the encoded bytes: flipped
//!   bytes, an attribute length pointing past the message, a truncated
//!   message (with `nlmsg_len` fixed up, so that the family, not the
//!   netlink core, must cope).
//!
//! What must hold, checked on every request: the kernel answers it (an
//! ACK, a dump's end or an error) within [`ANSWER_TIMEOUT`], and every
//! message it sends decodes. Whether a kernel report (KASAN, UBSAN,
//! lockdep, kmemleak, a WARN) happened is judged by the harness that runs
//! the tool on the debug kernel; the selftest checks the device still
//! works afterwards. The generator is seeded: `--seed S` replays a run's
//! requests.

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::time::{Duration, Instant};

use neli::consts::nl::NlmF;

use crate::addr::{Address, Prefix};
use crate::attr::{Attr, Value};
use crate::nl::{encode_request, Conn, Error, KernelError, Request};
use crate::request::{self, PortChanges, Rto, TpConfig};
use crate::spec::{self, Set, Ty, OPS};
pub use ub_fuzz_rng::Rng;

/// `len` random bytes.
fn bytes(rng: &mut Rng, len: usize) -> Vec<u8> {
    (0..len).map(|_| rng.next_u64() as u8).collect()
}

/// How long the kernel may take to answer one request.
pub const ANSWER_TIMEOUT: Duration = Duration::from_secs(5);

/// Deepest nesting generated (the spec nests two levels).
const MAX_DEPTH: u32 = 3;

/// Values worth trying in a 32-bit field: what exists on a test guest
/// (device 0, ports 0 and 1, small numbers), the bounds the driver checks
/// (MTU 256 and 4096, the OOO window sizes, 24-bit PSNs and TPNs, the
/// largest send window and timeout) and one past them.
const U32_VALUES: &[u32] = &[
    0,
    1,
    2,
    3,
    4,
    7,
    8,
    15,
    16,
    100,
    128,
    255,
    256,
    512,
    1024,
    2048,
    4095,
    4096,
    4097,
    65_535,
    65_536,
    65_537,
    600_000,
    600_001,
    (1 << 23) - 1,
    1 << 23,
    (1 << 24) - 1,
    1 << 24,
    (1 << 25) - 1,
    0x7fff_ffff,
    0x8000_0000,
    u32::MAX - 1,
    u32::MAX,
];

/// A value for a field of 32 bits or fewer: one of [`U32_VALUES`] mostly,
/// else small or random.
fn int_value(rng: &mut Rng) -> u64 {
    match rng.below(8) {
        0..=3 => u64::from(rng.pick(U32_VALUES).copied().unwrap_or(0)),
        4..=5 => rng.below(8),
        6 => rng.below(1 << 24),
        _ => rng.next_u64(),
    }
}

/// A plausible IPv4 address: the test guests' 10.0.x.y mostly.
fn ipv4(rng: &mut Rng) -> Vec<u8> {
    if rng.one_in(4) {
        bytes(rng, 4)
    } else {
        vec![
            10,
            0,
            rng.below(4) as u8,
            rng.pick(&[1, 2, 100, 255]).copied().unwrap_or(1),
        ]
    }
}

/// A well-typed value of type `ty`, or (one time in ten) a value of
/// another type or length.
fn value(rng: &mut Rng, ty: Ty, depth: u32) -> Value {
    if rng.one_in(10) {
        return wrong_value(rng, depth);
    }
    match ty {
        Ty::U8 => Value::U8(int_value(rng) as u8),
        Ty::U32 => Value::U32(int_value(rng) as u32),
        Ty::U64 => Value::U64(if rng.one_in(4) {
            rng.next_u64()
        } else {
            int_value(rng)
        }),
        Ty::Enum(def) => {
            let n = def.entries.len() as u64;
            Value::U32(if rng.one_in(6) {
                int_value(rng) as u32
            } else {
                rng.below(n) as u32
            })
        }
        Ty::Ipv4 => Value::Bytes(ipv4(rng)),
        Ty::Ipv6 => Value::Bytes(if rng.one_in(3) {
            bytes(rng, 16)
        } else {
            let mut a = vec![0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
            a.push(rng.below(4) as u8 + 1);
            a
        }),
        Ty::String => {
            let len = usize::try_from(if rng.one_in(8) {
                rng.below(600)
            } else {
                rng.below(24)
            })
            .unwrap_or(0);
            let s: String = (0..len)
                .map(|_| char::from(b'a' + (rng.below(26) as u8)))
                .collect();
            if rng.one_in(5) {
                // No terminating NUL.
                Value::Bytes(s.into_bytes())
            } else {
                Value::Str(s)
            }
        }
        Ty::Binary | Ty::Pad => {
            let max = if rng.one_in(8) { 2048 } else { 24 };
            let len = usize::try_from(rng.below(max)).unwrap_or(0);
            Value::Bytes(bytes(rng, len))
        }
        Ty::Nest(set) | Ty::MultiNest(set) => {
            if depth >= MAX_DEPTH || rng.one_in(12) {
                let len = usize::try_from(rng.below(16)).unwrap_or(0);
                Value::Bytes(bytes(rng, len))
            } else {
                Value::Nest(attrs(rng, set, depth + 1))
            }
        }
    }
}

/// A value of a random type: what a request gets for a field it
/// misdeclares.
fn wrong_value(rng: &mut Rng, depth: u32) -> Value {
    match rng.below(6) {
        0 => Value::U8(rng.next_u64() as u8),
        1 => Value::U32(int_value(rng) as u32),
        2 => Value::U64(rng.next_u64()),
        3 if depth < MAX_DEPTH => {
            let set = rng.pick(OPS).map(|o| o.set);
            match set {
                Some(s) => Value::Nest(attrs(rng, s, depth + 1)),
                None => Value::Nest(Vec::new()),
            }
        }
        4 => Value::Str(String::new()),
        _ => {
            let len = usize::try_from(rng.below(9)).unwrap_or(0);
            Value::Bytes(bytes(rng, len))
        }
    }
}

/// Attributes for a message of `set`: up to six of its attributes (an
/// attribute may repeat), and now and then one the set does not have.
fn attrs(rng: &mut Rng, set: &Set, depth: u32) -> Vec<Attr> {
    let n = rng.below(7);
    let mut out = Vec::new();
    for _ in 0..n {
        if rng.one_in(16) {
            let id = rng
                .pick(&[0u16, set.attrs.len() as u16 + 1, 0x3fff])
                .copied()
                .unwrap_or(0);
            out.push(Attr {
                id,
                value: wrong_value(rng, depth),
            });
            continue;
        }
        if let Some(def) = rng.pick(set.attrs) {
            out.push(Attr {
                id: def.id,
                value: value(rng, def.ty, depth),
            });
        }
    }
    out
}

/// One generated request.
#[derive(Clone, Debug)]
pub struct Generated {
    /// Generic netlink command (maybe one the family does not have).
    pub cmd: u8,
    /// Sent as a dump.
    pub dump: bool,
    /// Its attributes, before any damage.
    pub attrs: Vec<Attr>,
    /// Damage done to the encoded bytes, if any.
    pub damage: Option<Damage>,
}

/// Byte-level damage to an encoded request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Damage {
    /// Flip `count` random bytes after the generic netlink header.
    Flip {
        /// Bytes flipped.
        count: u32,
        /// Seed of the positions and masks.
        seed: u64,
    },
    /// Set the first attribute's `nla_len` to this.
    NlaLen(u16),
    /// Cut the message to this many bytes after the generic netlink
    /// header.
    Truncate(u32),
}

/// Bytes of `struct nlmsghdr` + `struct genlmsghdr`.
const HEADERS: usize = 16 + 4;

impl Damage {
    /// Applies the damage to an encoded message and fixes up `nlmsg_len`.
    pub fn apply(self, msg: &mut Vec<u8>) {
        match self {
            Damage::Flip { count, seed } => {
                let mut rng = Rng::new(seed);
                let body = msg.len().saturating_sub(HEADERS) as u64;
                for _ in 0..count {
                    let at = HEADERS + usize::try_from(rng.below(body)).unwrap_or(0);
                    if let Some(b) = msg.get_mut(at) {
                        *b ^= (rng.next_u64() as u8) | 1;
                    }
                }
            }
            Damage::NlaLen(len) => {
                if let Some(b) = msg.get_mut(HEADERS..HEADERS + 2) {
                    b.copy_from_slice(&len.to_ne_bytes());
                }
            }
            Damage::Truncate(keep) => {
                let keep = HEADERS + usize::try_from(keep).unwrap_or(0);
                msg.truncate(keep.min(msg.len()));
            }
        }
        let len = u32::try_from(msg.len()).unwrap_or(u32::MAX);
        if let Some(b) = msg.get_mut(0..4) {
            b.copy_from_slice(&len.to_ne_bytes());
        }
    }
}

/// A plausible address: the test guests' (10.0.x.y, CNA16 0x0100 and
/// 0x0200), one the fabric does not route, or any.
fn address(rng: &mut Rng) -> Address {
    match rng.below(6) {
        0..=2 => {
            let v = ipv4(rng);
            Address::V4(Ipv4Addr::new(v[0], v[1], v[2], v[3]))
        }
        3 => Address::Cna16(*rng.pick(&[0x0100u16, 0x0200, 0x0900]).unwrap_or(&0x100)),
        4 => Address::Cna24(rng.below(1 << 24) as u32),
        _ => Address::V6(Ipv6Addr::from(u128::from(rng.next_u64()) << 64 | 1)),
    }
}

/// A well-formed request as ubctl builds it, with plausible arguments:
/// what gets past the family's policy and reaches the driver's operations,
/// which the mutations in [`generate`] then bend one attribute at a time.
fn well_formed(rng: &mut Rng) -> Request {
    let dev = if rng.one_in(8) { 1 } else { 0 };
    let port = rng.below(3) as u32;
    let small = |rng: &mut Rng| *rng.pick(&[0u32, 1, 2, 3, 100, 4096]).unwrap_or(&0);
    let opt = |rng: &mut Rng| rng.one_in(2);
    let tp_config = |rng: &mut Rng| TpConfig {
        transport: opt(rng).then(|| rng.below(2) as u32),
        mode: opt(rng).then(|| rng.below(2) as u32),
        fast_retransmit: opt(rng).then(|| rng.one_in(2)),
        ooo_window: opt(rng).then(|| *rng.pick(&[128u32, 256, 300, 2048]).unwrap_or(&128)),
        rto: opt(rng).then(|| {
            if rng.one_in(2) {
                Rto::Static(*rng.pick(&[512u32, 16_000, 700]).unwrap_or(&512))
            } else {
                Rto::Dynamic {
                    base_us: *rng.pick(&[4u32, 100, 2_097_152, 3]).unwrap_or(&4),
                    n: rng.below(9) as u8,
                }
            }
        }),
        retry_limit: opt(rng).then(|| rng.below(9) as u8),
        mtu: opt(rng).then(|| *rng.pick(&[256u32, 1024, 4096, 100]).unwrap_or(&256)),
        cc: opt(rng).then(|| rng.below(3) as u32),
        load_balance: opt(rng).then(|| rng.below(3) as u32),
        lb_range: opt(rng).then(|| rng.below(10) as u8),
        lb_key: opt(rng).then(|| rng.next_u64() as u16),
        send_window: opt(rng).then(|| *rng.pick(&[1u32, 256, 65_536, 65_537]).unwrap_or(&1)),
    };
    match rng.below(19) {
        0 => request::dev_get(opt(rng).then_some(dev)),
        1 => request::port_get(opt(rng).then_some(dev), opt(rng).then_some(port)),
        2 => request::port_set(
            dev,
            port,
            PortChanges {
                // Mostly up: a port taken down stays down for the rest of
                // the run, which would starve everything behind it.
                admin_up: opt(rng).then(|| !rng.one_in(8)),
                retry_threshold: opt(rng).then(|| rng.below(20) as u8),
                reinit_threshold: opt(rng).then(|| rng.below(20) as u8),
                sharing: opt(rng).then(|| rng.one_in(2)),
            },
        ),
        3 | 4 => request::addr_change(rng.one_in(2), dev, address(rng)),
        5 => request::route_add(
            dev,
            Prefix {
                addr: address(rng),
                len: rng.below(40) as u32,
            },
            opt(rng).then(|| rng.below(8)),
            opt(rng).then(|| rng.below(3) as u32),
        ),
        6 => request::route_del(
            dev,
            Prefix {
                addr: address(rng),
                len: rng.below(33) as u32,
            },
        ),
        7 => request::route_get(opt(rng).then_some(dev)),
        8 => request::npi_set(
            dev,
            opt(rng).then(|| rng.below(3) as u32),
            // Mostly the default partition: another one cuts this guest off
            // from its own echoes for the rest of the run.
            opt(rng).then(|| if rng.one_in(6) { small(rng) } else { 1 }),
        ),
        9 => request::echo(dev, address(rng), small(rng), small(rng), small(rng)),
        10 => request::tp_get(
            opt(rng).then_some(dev),
            opt(rng).then(|| rng.below(8) as u32),
        ),
        11 | 12 => {
            let c = tp_config(rng);
            request::tp_new(
                dev,
                address(rng),
                opt(rng).then(|| 7000 + rng.below(8) as u32),
                &c,
            )
        }
        13 => request::tp_set_state(dev, rng.below(8) as u32, rng.below(6) as u32),
        14 => request::tp_del(
            dev,
            rng.below(8) as u32 + if rng.one_in(4) { 1 << 23 } else { 0 },
        ),
        15 => request::tpg_get(
            opt(rng).then_some(dev),
            opt(rng).then(|| rng.below(8) as u32),
        ),
        16 => {
            let c = tp_config(rng);
            request::tpg_new(
                dev,
                address(rng),
                7100 + rng.below(8) as u32,
                rng.below(10) as u32,
                &c,
            )
        }
        17 => request::tpg_set_state(dev, rng.below(8) as u32, rng.below(6) as u32),
        _ => request::tpg_del(dev, rng.below(8) as u32),
    }
}

/// Generates one request: half of them well-formed ones (see
/// [`well_formed`]) sent as they are or with one attribute changed,
/// dropped or added; the other half built from the spec tables alone.
pub fn generate(rng: &mut Rng) -> Generated {
    if rng.one_in(2) {
        let mut req = well_formed(rng);
        let set = spec::op(req.cmd).map(|o| o.set);
        match (rng.below(10), set) {
            (0..=3, _) | (_, None) => {}
            (4..=6, Some(set)) => {
                let i = usize::try_from(rng.below(req.attrs.len() as u64)).unwrap_or(0);
                if let Some(a) = req.attrs.get_mut(i) {
                    if let Some(def) = set.get(a.id) {
                        a.value = value(rng, def.ty, 0);
                    }
                }
            }
            (7..=8, _) => {
                if !req.attrs.is_empty() {
                    let i = usize::try_from(rng.below(req.attrs.len() as u64)).unwrap_or(0);
                    req.attrs.remove(i);
                }
            }
            (_, Some(set)) => req.attrs.extend(attrs(rng, set, 0).into_iter().take(1)),
        }
        return Generated {
            cmd: req.cmd,
            dump: req.dump != rng.one_in(10),
            attrs: req.attrs,
            damage: None,
        };
    }
    let (cmd, set) = if rng.one_in(40) {
        // A command number the family does not have.
        let cmd = rng
            .pick(&[0u8, OPS.len() as u8 + 1, 0x7f, 0xff])
            .copied()
            .unwrap_or(0);
        (cmd, rng.pick(OPS).map(|o| o.set))
    } else {
        match rng.pick(OPS) {
            Some(op) => (op.cmd, Some(op.set)),
            None => (0, None),
        }
    };
    let attrs = set.map(|s| attrs(rng, s, 0)).unwrap_or_default();
    let damage = if rng.one_in(8) {
        Some(match rng.below(3) {
            0 => Damage::Flip {
                count: 1 + rng.below(4) as u32,
                seed: rng.next_u64(),
            },
            1 => Damage::NlaLen(rng.pick(&[0u16, 1, 3, 4, 5, 0xffff]).copied().unwrap_or(0)),
            _ => Damage::Truncate(rng.below(24) as u32),
        })
    } else {
        None
    };
    Generated {
        cmd,
        dump: rng.one_in(4),
        attrs,
        damage,
    }
}

/// How the kernel answered one request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answer {
    /// ACKed (a `do`) or ended without error (a dump), after this many
    /// replies.
    Done(usize),
    /// Refused with this error.
    Refused(KernelError),
}

/// Sends one generated request and waits for its answer.
pub fn send(conn: &mut Conn, g: &Generated) -> Result<Answer, Error> {
    let mut flags = NlmF::ACK;
    if g.dump {
        flags |= NlmF::DUMP;
    }
    let damage = g.damage;
    let seq = conn.send_raw(|family, seq| {
        let mut msg = encode_request(family, flags, seq, g.cmd, &g.attrs)?;
        if let Some(d) = damage {
            d.apply(&mut msg);
        }
        Ok(msg)
    })?;
    let what = format!("command {} (seq {seq})", g.cmd);
    let a = conn.answer(seq, true, ANSWER_TIMEOUT, &what)?;
    Ok(match a.error {
        None => Answer::Done(a.replies.len()),
        Some(e) => Answer::Refused(e),
    })
}

/// What a run did.
#[derive(Clone, Debug, Default)]
pub struct Report {
    /// Requests sent.
    pub requests: u64,
    /// Of those, with byte-level damage.
    pub damaged: u64,
    /// ACKed or ended without error.
    pub accepted: u64,
    /// Refusals by errno.
    pub refused: BTreeMap<i32, u64>,
    /// Refusals that carried an extended ACK message.
    pub with_message: u64,
    /// Requests, accepted ones, by command number.
    pub per_cmd: BTreeMap<u8, (u64, u64)>,
    /// Times the socket's buffer overran (the kernel dropped messages to
    /// us, e.g. a burst of echo replies): not a failure of the kernel.
    pub overruns: u64,
}

/// Runs the fuzzer until `duration` has passed or `max` requests were sent.
/// Stops at the first request the kernel does not answer or whose answer
/// does not decode, with the iteration and the request in the error.
pub fn run(conn: &mut Conn, seed: u64, duration: Duration, max: u64) -> Result<Report, String> {
    let mut rng = Rng::new(seed);
    let mut report = Report::default();
    let start = Instant::now();
    while report.requests < max && start.elapsed() < duration {
        let g = generate(&mut rng);
        report.requests += 1;
        report.damaged += u64::from(g.damage.is_some());
        let per = report.per_cmd.entry(g.cmd).or_default();
        per.0 += 1;
        match send(conn, &g) {
            Ok(Answer::Done(_)) => {
                report.accepted += 1;
                per.1 += 1;
            }
            Ok(Answer::Refused(e)) => {
                *report.refused.entry(e.errno).or_default() += 1;
                report.with_message += u64::from(e.msg.is_some());
            }
            Err(Error::Io(e)) if e.raw_os_error() == Some(libc::ENOBUFS) => report.overruns += 1,
            Err(e) => {
                return Err(format!(
                    "request {} (seed {seed}): {e}; request: {g:?}",
                    report.requests
                ))
            }
        }
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "test code")]

    use super::*;
    use crate::nl::decode_buffer;

    /// The same seed gives the same requests (a failing run is replayable).
    #[test]
    fn a_seed_replays_its_requests() {
        let a: Vec<_> = {
            let mut r = Rng::new(7);
            (0..200)
                .map(|_| format!("{:?}", generate(&mut r)))
                .collect()
        };
        let b: Vec<_> = {
            let mut r = Rng::new(7);
            (0..200)
                .map(|_| format!("{:?}", generate(&mut r)))
                .collect()
        };
        assert_eq!(a, b);
    }

    /// The generator reaches every operation, dumps and `do`s, damaged and
    /// whole messages, unknown commands, and requests whose attributes the
    /// encoder takes; every encoded message, damaged or not, keeps its
    /// `nlmsg_len` equal to its length (else the netlink core, not the
    /// family, would refuse it).
    #[test]
    fn the_generator_covers_the_family_and_keeps_lengths_right() {
        let mut r = Rng::new(1);
        let mut cmds = std::collections::BTreeSet::new();
        let (mut dumps, mut damaged, mut unknown, mut encoded) = (0, 0, 0, 0);
        for _ in 0..20_000 {
            let g = generate(&mut r);
            cmds.insert(g.cmd);
            dumps += u32::from(g.dump);
            damaged += u32::from(g.damage.is_some());
            unknown += u32::from(!OPS.iter().any(|o| o.cmd == g.cmd));
            let Ok(mut msg) = encode_request(30, NlmF::ACK, 9, g.cmd, &g.attrs) else {
                continue;
            };
            encoded += 1;
            if let Some(d) = g.damage {
                d.apply(&mut msg);
            }
            let len = u32::from_ne_bytes(msg[0..4].try_into().unwrap());
            assert_eq!(len as usize, msg.len(), "{g:?}");
            if g.damage.is_none() {
                // An undamaged request is well-formed netlink.
                assert!(decode_buffer(&msg).is_ok(), "{g:?}");
            }
        }
        for op in OPS {
            assert!(cmds.contains(&op.cmd), "never generated {}", op.name);
        }
        assert!(
            dumps > 2000 && damaged > 800 && unknown > 100,
            "{dumps} {damaged} {unknown}"
        );
        assert!(encoded > 19_000, "only {encoded} encodable");
    }

    #[test]
    fn damage_is_applied_where_it_says() {
        let base =
            encode_request(30, NlmF::ACK, 9, 1, &[Attr::u32(1, 5), Attr::u32(2, 6)]).unwrap();
        let mut m = base.clone();
        Damage::Truncate(4).apply(&mut m);
        assert_eq!(m.len(), HEADERS + 4);
        assert_eq!(&m[4..HEADERS], &base[4..HEADERS]);
        let mut m = base.clone();
        Damage::NlaLen(0xffff).apply(&mut m);
        assert_eq!(&m[HEADERS..HEADERS + 2], &[0xff, 0xff]);
        assert_eq!(m.len(), base.len());
        let mut m = base.clone();
        Damage::Flip { count: 3, seed: 5 }.apply(&mut m);
        assert_eq!(&m[..HEADERS], &base[..HEADERS], "headers untouched");
        assert_ne!(m, base);
    }
}
