// SPDX-License-Identifier: GPL-2.0
//! The netlink socket, message framing and the extended ACK.
//!
//! Requests are built and serialised with neli (`Nlmsghdr`, `Genlmsghdr`,
//! `Nlattr`). What the kernel sends back is untrusted: [`decode_buffer`]
//! splits a datagram into messages only after checking each `nlmsg_len`
//! against what was received, hands data messages to neli, and reads
//! `NLMSG_ERROR`/`NLMSG_DONE` (the errno, the echoed request, the extended
//! ACK TLVs) itself so that a capped or truncated error is an error message,
//! not a panic inside a parser.

use std::io::Cursor;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use neli::consts::nl::NlmF;
use neli::consts::socket::{Msg, NlFamily};
use neli::genl::{Genlmsghdr, GenlmsghdrBuilder, NoUserHeader};
use neli::nl::{NlPayload, Nlmsghdr, NlmsghdrBuilder};
use neli::socket::NlSocket;
use neli::utils::Groups;
use neli::{FromBytes, ToBytes};
use thiserror::Error;

use crate::attr::{self, Attr, DecodeError, EncodeError, RawAttr, Value};
use crate::spec::{self, Set};

/// `NLMSG_ERROR`
const NLMSG_ERROR: u16 = 2;
/// `NLMSG_DONE`
const NLMSG_DONE: u16 = 3;
/// `NLMSG_NOOP`
const NLMSG_NOOP: u16 = 1;
/// `NLMSG_OVERRUN`
const NLMSG_OVERRUN: u16 = 4;
/// Size of `struct nlmsghdr`.
pub const NLMSG_HDRLEN: usize = 16;
/// Size of `struct genlmsghdr`.
pub const GENL_HDRLEN: usize = 4;
/// `NLM_F_CAPPED`: the error echoes only the request's header.
const NLM_F_CAPPED: u16 = 0x100;
/// `NLM_F_ACK_TLVS`: extended ACK attributes follow.
const NLM_F_ACK_TLVS: u16 = 0x200;

/// Extended ACK attribute types (`enum nlmsgerr_attrs`).
mod ext {
    pub const MSG: u16 = 1;
    pub const OFFS: u16 = 2;
    pub const MISS_TYPE: u16 = 5;
    pub const MISS_NEST: u16 = 6;
}

/// The generic netlink controller and its numbering (`genetlink.h`).
mod ctrl {
    pub const ID: u16 = 0x10;
    pub const CMD_GETFAMILY: u8 = 3;
    pub const ATTR_FAMILY_ID: u16 = 1;
    pub const ATTR_FAMILY_NAME: u16 = 2;
    pub const ATTR_MCAST_GROUPS: u16 = 7;
    pub const ATTR_MCAST_GRP_NAME: u16 = 1;
    pub const ATTR_MCAST_GRP_ID: u16 = 2;
}

/// What the kernel said about a failed request (`struct nlmsgerr` and its
/// extended ACK).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KernelError {
    /// The positive errno.
    pub errno: i32,
    /// `NLMSGERR_ATTR_MSG`
    pub msg: Option<String>,
    /// `NLMSGERR_ATTR_OFFS`: offset of the bad attribute from the start of
    /// the request's `nlmsghdr`.
    pub offset: Option<u32>,
    /// `NLMSGERR_ATTR_MISS_TYPE`: a required attribute that was missing.
    pub miss_type: Option<u32>,
    /// `NLMSGERR_ATTR_MISS_NEST`: offset of the nest it was missing from.
    pub miss_nest: Option<u32>,
}

/// One message the kernel sent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Incoming {
    /// A generic netlink message of the family (a reply, an event).
    Genl {
        /// `nlmsg_seq` (0 for notifications).
        seq: u32,
        /// Generic netlink command.
        cmd: u8,
        /// Its attributes.
        attrs: Vec<RawAttr>,
    },
    /// The ACK of request `seq`.
    Ack {
        /// Sequence of the request.
        seq: u32,
    },
    /// The end of the dump `seq` (an error if the dump failed).
    Done {
        /// Sequence of the request.
        seq: u32,
        /// The dump's error, if it failed.
        err: Option<KernelError>,
    },
    /// Request `seq` failed.
    Err {
        /// Sequence of the request.
        seq: u32,
        /// What the kernel said.
        err: KernelError,
    },
    /// `NLMSG_OVERRUN`: the kernel dropped messages.
    Overrun,
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    b.get(at..at.checked_add(2)?)
        .and_then(|s| <[u8; 2]>::try_from(s).ok())
        .map(u16::from_ne_bytes)
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    b.get(at..at.checked_add(4)?)
        .and_then(|s| <[u8; 4]>::try_from(s).ok())
        .map(u32::from_ne_bytes)
}

fn malformed(what: &str) -> DecodeError {
    DecodeError::Malformed(what.to_string())
}

/// Read the body of an `NLMSG_ERROR` (or a `NLMSG_DONE` with an error):
/// `int error`, the echoed request (header only if capped), TLVs.
fn parse_error(body: &[u8], flags: u16, echoes_request: bool) -> Result<KernelError, DecodeError> {
    let code = u32_at(body, 0).ok_or_else(|| malformed("error message without an errno"))?;
    let code = i32::from_ne_bytes(code.to_ne_bytes());
    let mut pos = 4usize;
    if echoes_request {
        let echoed_len =
            u32_at(body, pos).ok_or_else(|| malformed("error without the request's header"))?;
        let echoed = if flags & NLM_F_CAPPED != 0 || code == 0 {
            NLMSG_HDRLEN
        } else {
            usize::try_from(echoed_len).map_err(|_| malformed("echoed request length"))?
        };
        if echoed < NLMSG_HDRLEN {
            return Err(malformed("echoed request shorter than its header"));
        }
        pos = pos
            .checked_add(attr::nla_align(echoed))
            .filter(|p| *p <= body.len())
            .ok_or_else(|| malformed("echoed request longer than the error message"))?;
    }
    let mut err = KernelError {
        errno: code.checked_neg().unwrap_or(i32::MAX),
        ..KernelError::default()
    };
    if flags & NLM_F_ACK_TLVS != 0 {
        let tlvs = body.get(pos..).unwrap_or(&[]);
        for a in attr::parse_attrs(tlvs)? {
            let p = a.payload.as_slice();
            let as_u32 = || <[u8; 4]>::try_from(p).ok().map(u32::from_ne_bytes);
            match a.id {
                ext::MSG => {
                    let s = p.split(|b| *b == 0).next().unwrap_or(&[]);
                    let s = String::from_utf8_lossy(s).into_owned();
                    if !s.is_empty() {
                        err.msg = Some(s);
                    }
                }
                ext::OFFS => err.offset = as_u32(),
                ext::MISS_TYPE => err.miss_type = as_u32(),
                ext::MISS_NEST => err.miss_nest = as_u32(),
                _ => {} // cookie, policy: not shown
            }
        }
    }
    Ok(err)
}

/// Split one received datagram into messages and decode them.
pub fn decode_buffer(buf: &[u8]) -> Result<Vec<Incoming>, DecodeError> {
    let mut out = Vec::new();
    let mut pos = 0usize;
    while pos < buf.len() {
        let rest = buf.get(pos..).unwrap_or(&[]);
        let len = u32_at(rest, 0).ok_or_else(|| malformed("truncated message header"))?;
        let len = usize::try_from(len).map_err(|_| malformed("message length"))?;
        if len < NLMSG_HDRLEN || len > rest.len() {
            return Err(DecodeError::Malformed(format!(
                "message length {len} with {} bytes received",
                rest.len()
            )));
        }
        let msg = rest.get(..len).ok_or_else(|| malformed("message length"))?;
        let ty = u16_at(msg, 4).ok_or_else(|| malformed("header"))?;
        let flags = u16_at(msg, 6).ok_or_else(|| malformed("header"))?;
        let seq = u32_at(msg, 8).ok_or_else(|| malformed("header"))?;
        let body = msg.get(NLMSG_HDRLEN..).unwrap_or(&[]);
        match ty {
            NLMSG_NOOP => {}
            NLMSG_OVERRUN => out.push(Incoming::Overrun),
            NLMSG_ERROR => {
                let err = parse_error(body, flags, true)?;
                if err.errno == 0 {
                    out.push(Incoming::Ack { seq });
                } else {
                    out.push(Incoming::Err { seq, err });
                }
            }
            NLMSG_DONE => {
                let err = if body.is_empty() {
                    None
                } else {
                    Some(parse_error(body, flags, false)?).filter(|e| e.errno != 0)
                };
                out.push(Incoming::Done { seq, err });
            }
            _ => {
                let m = Nlmsghdr::<u16, Genlmsghdr<u8, u16>>::from_bytes(&mut Cursor::new(msg))
                    .map_err(|e| DecodeError::Malformed(e.to_string()))?;
                let Some(g) = m.get_payload() else {
                    return Err(malformed("message without a generic netlink header"));
                };
                out.push(Incoming::Genl {
                    seq,
                    cmd: *g.cmd(),
                    attrs: attr::from_genl_buffer(g.attrs()),
                });
            }
        }
        pos = pos.saturating_add(attr::nla_align(len));
    }
    Ok(out)
}

/// Serialise a generic netlink request with neli.
pub fn encode_request(
    family: u16,
    flags: NlmF,
    seq: u32,
    cmd: u8,
    attrs: &[Attr],
) -> Result<Vec<u8>, EncodeError> {
    let genl = GenlmsghdrBuilder::<u8, u16, NoUserHeader>::default()
        .cmd(cmd)
        .version(spec::FAMILY_VERSION)
        .attrs(attr::to_genl_buffer(attrs)?)
        .build()
        .map_err(|e| EncodeError(e.to_string()))?;
    let msg = NlmsghdrBuilder::default()
        .nl_type(family)
        .nl_flags(flags | NlmF::REQUEST)
        .nl_seq(seq)
        .nl_pid(0)
        .nl_payload(NlPayload::Payload(genl))
        .build()
        .map_err(|e| EncodeError(e.to_string()))?;
    let mut cur = Cursor::new(Vec::new());
    msg.to_bytes(&mut cur)
        .map_err(|e| EncodeError(e.to_string()))?;
    Ok(cur.into_inner())
}

/// A request to the `ub` family.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    /// Command number.
    pub cmd: u8,
    /// `NLM_F_DUMP`
    pub dump: bool,
    /// Attributes.
    pub attrs: Vec<Attr>,
}

impl Request {
    /// The spec's name of the operation.
    pub fn op_name(&self) -> String {
        spec::op(self.cmd).map_or_else(|| format!("command {}", self.cmd), |o| o.name.to_string())
    }

    /// The attribute set of the request.
    pub fn set(&self) -> Option<&'static Set> {
        spec::op(self.cmd).map(|o| o.set)
    }

    /// Name the attribute at `offset` (from the `nlmsghdr`) of this request.
    pub fn name_at(&self, offset: u32) -> Option<String> {
        let off = usize::try_from(offset).ok()?;
        let rel = off.checked_sub(NLMSG_HDRLEN + GENL_HDRLEN)?;
        attr::name_at_offset(&self.attrs, self.set(), rel)
    }

    /// Name attribute `id` of the set (for a missing attribute).
    pub fn name_of_type(&self, id: u32, nest_offset: Option<u32>) -> String {
        let nest_set = nest_offset.and_then(|o| {
            let name = self.name_at(o)?;
            let set = self.set()?;
            let mut cur = set;
            for part in name.split('.').skip(1) {
                let d = cur.attrs.iter().find(|a| a.name == part)?;
                match d.ty {
                    spec::Ty::Nest(s) | spec::Ty::MultiNest(s) => cur = s,
                    _ => return None,
                }
            }
            Some(cur)
        });
        let set = if nest_offset.is_some() {
            nest_set
        } else {
            self.set()
        };
        let id16 = u16::try_from(id).ok();
        match (set, id16.and_then(|i| set.and_then(|s| s.get(i)))) {
            (Some(s), Some(d)) => format!("{}.{}", s.name, d.name),
            (Some(s), None) => format!("{}.<type {id}>", s.name),
            _ => format!("<type {id}>"),
        }
    }
}

/// Errors of talking to the family.
#[derive(Debug, Error)]
pub enum Error {
    /// The kernel refused a request.
    #[error("{}", describe(.op, .err, .bad_attr))]
    Kernel {
        /// Operation name.
        op: String,
        /// What the kernel said.
        err: KernelError,
        /// The attribute the extended ACK pointed at, named.
        bad_attr: Option<String>,
    },
    /// The family is not registered (ub.ko not loaded).
    #[error("generic netlink family \"{0}\" not found (is ub.ko loaded?)")]
    NoFamily(String),
    /// Socket I/O.
    #[error("netlink socket: {0}")]
    Io(#[from] std::io::Error),
    /// Request encoding.
    #[error(transparent)]
    Encode(#[from] EncodeError),
    /// The kernel's reply did not decode.
    #[error("unexpected reply from the kernel: {0}")]
    Decode(#[from] DecodeError),
    /// No answer in time.
    #[error("{0}: no answer from the kernel")]
    Timeout(String),
    /// Interrupted by a signal.
    #[error("interrupted")]
    Interrupted,
}

/// The C library's text for `errno`, without Rust's ` (os error N)`.
pub fn strerror(errno: i32) -> String {
    let s = std::io::Error::from_raw_os_error(errno).to_string();
    // "Invalid argument (os error 22)" -> "Invalid argument"
    match s.rsplit_once(" (os error") {
        Some((head, _)) => head.to_string(),
        None => s,
    }
}

fn describe(op: &str, err: &KernelError, bad_attr: &Option<String>) -> String {
    let mut s = format!("{op}: {}", strerror(err.errno));
    match &err.msg {
        Some(m) => {
            s.push_str(": ");
            s.push_str(m);
        }
        None if err.errno == libc::EPERM => s.push_str(" (needs CAP_NET_ADMIN)"),
        None => {}
    }
    if let Some(a) = bad_attr {
        s.push_str(&format!(" [attribute {a}]"));
    }
    s
}

impl Error {
    /// Build the error for request `req` from the kernel's answer, naming
    /// the attribute it points at.
    pub fn kernel(req: &Request, err: KernelError) -> Self {
        let bad_attr = match (err.offset, err.miss_type) {
            (Some(off), _) => Some(
                req.name_at(off)
                    .unwrap_or_else(|| format!("at offset {off}")),
            ),
            (None, Some(t)) => Some(format!("{} missing", req.name_of_type(t, err.miss_nest))),
            (None, None) => None,
        };
        Error::Kernel {
            op: req.op_name(),
            err,
            bad_attr,
        }
    }
}

/// Set by SIGINT; long-running commands stop and summarise.
pub static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_sigint(_: libc::c_int) {
    INTERRUPTED.store(true, Ordering::SeqCst);
}

/// Make SIGINT set [`INTERRUPTED`] instead of killing the process (for
/// `ping` and `monitor`, which print a summary or flush on the way out).
pub fn catch_sigint() {
    let handler: extern "C" fn(libc::c_int) = on_sigint;
    // SAFETY: the handler only stores to an atomic, which is
    // async-signal-safe; `signal` has no other preconditions.
    unsafe {
        libc::signal(libc::SIGINT, handler as libc::sighandler_t);
    }
}

/// A connection to the `ub` family.
pub struct Conn {
    sock: NlSocket,
    family: u16,
    monitor_group: Option<u32>,
    seq: u32,
    buf: Vec<u8>,
}

/// How long a request waits for its answer.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

impl Conn {
    /// Open a socket with extended ACKs on and resolve the family (and its
    /// `monitor` group) through nlctrl.
    pub fn open() -> Result<Self, Error> {
        let sock = NlSocket::connect(NlFamily::Generic, None, Groups::empty())?;
        sock.enable_ext_ack(true)?;
        let mut c = Conn {
            sock,
            family: ctrl::ID,
            monitor_group: None,
            seq: 1,
            buf: vec![0u8; 64 * 1024],
        };
        let req = Request {
            cmd: ctrl::CMD_GETFAMILY,
            dump: false,
            attrs: vec![Attr {
                id: ctrl::ATTR_FAMILY_NAME,
                value: Value::Str(spec::FAMILY_NAME.to_string()),
            }],
        };
        let replies = match c.transact_to(ctrl::ID, &req) {
            Ok(r) => r,
            Err(Error::Kernel { err, .. }) if err.errno == libc::ENOENT => {
                return Err(Error::NoFamily(spec::FAMILY_NAME.to_string()))
            }
            Err(e) => return Err(e),
        };
        let (family, group) = parse_family(&replies)?;
        c.family = family;
        c.monitor_group = group;
        Ok(c)
    }

    /// The family id nlctrl gave.
    pub fn family(&self) -> u16 {
        self.family
    }

    /// Asks for a receive buffer of `bytes` (the kernel doubles it for its
    /// bookkeeping): beyond `net.core.rmem_max` with `CAP_NET_ADMIN`
    /// (`SO_RCVBUFFORCE`), else up to that limit. For a reader that may
    /// fall behind a stream of kernel messages (ping's replies).
    pub fn grow_rcvbuf(&self, bytes: i32) -> Result<(), Error> {
        let fd = self.sock.as_raw_fd();
        let set = |opt: libc::c_int| {
            // SAFETY: `fd` is this connection's open socket; the option
            // value is a valid c_int that lives across the call, and its
            // size is passed.
            unsafe {
                libc::setsockopt(
                    fd,
                    libc::SOL_SOCKET,
                    opt,
                    (&bytes as *const i32).cast(),
                    std::mem::size_of::<i32>() as libc::socklen_t,
                )
            }
        };
        if set(libc::SO_RCVBUFFORCE) == 0 || set(libc::SO_RCVBUF) == 0 {
            return Ok(());
        }
        Err(Error::Io(std::io::Error::last_os_error()))
    }

    /// Join the `monitor` multicast group.
    pub fn join_monitor(&self) -> Result<(), Error> {
        let g = self.monitor_group.ok_or_else(|| {
            Error::Decode(DecodeError::Missing(format!(
                "multicast group \"{}\"",
                spec::MCGRP_MONITOR
            )))
        })?;
        self.sock.add_mcast_membership(Groups::new_groups(&[g]))?;
        Ok(())
    }

    /// Send `req` and return its sequence number (answers arrive through
    /// [`Conn::recv`]).
    pub fn send(&mut self, req: &Request) -> Result<u32, Error> {
        self.send_to(self.family, req)
    }

    fn send_to(&mut self, family: u16, req: &Request) -> Result<u32, Error> {
        self.seq = self.seq.wrapping_add(1).max(1);
        let mut flags = NlmF::ACK;
        if req.dump {
            flags |= NlmF::DUMP;
        }
        let bytes = encode_request(family, flags, self.seq, req.cmd, &req.attrs)?;
        self.sock.send(&bytes, Msg::empty())?;
        Ok(self.seq)
    }

    /// Send the message `build` makes from the family id and the next
    /// sequence number, as it is (`ub-nlfuzz` sends damaged ones), and
    /// return that sequence number.
    pub fn send_raw(
        &mut self,
        build: impl FnOnce(u16, u32) -> Result<Vec<u8>, Error>,
    ) -> Result<u32, Error> {
        self.seq = self.seq.wrapping_add(1).max(1);
        let bytes = build(self.family, self.seq)?;
        self.sock.send(&bytes, Msg::empty())?;
        Ok(self.seq)
    }

    /// Wait up to `timeout` (forever if `None`) for one datagram and decode
    /// it. An empty vector means the time ran out.
    pub fn recv(&mut self, timeout: Option<Duration>) -> Result<Vec<Incoming>, Error> {
        let ms = match timeout {
            None => -1,
            Some(d) => libc::c_int::try_from(d.as_millis()).unwrap_or(libc::c_int::MAX),
        };
        let mut pfd = libc::pollfd {
            fd: self.sock.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: `pfd` is a valid, initialised pollfd that lives across the
        // call, and the count passed is 1.
        let n = unsafe { libc::poll(&mut pfd, 1, ms) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                return Err(Error::Interrupted);
            }
            return Err(Error::Io(e));
        }
        if n == 0 {
            return Ok(Vec::new());
        }
        let (len, _) = self.sock.recv(&mut self.buf[..], Msg::empty())?;
        let got = self.buf.get(..len).unwrap_or(&[]);
        Ok(decode_buffer(got)?)
    }

    /// Send `req` and collect its replies until its ACK or end of dump.
    pub fn transact(&mut self, req: &Request) -> Result<Vec<Vec<RawAttr>>, Error> {
        self.transact_to(self.family, req)
    }

    fn transact_to(&mut self, family: u16, req: &Request) -> Result<Vec<Vec<RawAttr>>, Error> {
        let seq = self.send_to(family, req)?;
        let a = self.answer(seq, !req.dump, REQUEST_TIMEOUT, &req.op_name())?;
        match a.error {
            None => Ok(a.replies),
            Some(e) => Err(Error::kernel(req, e)),
        }
    }

    /// Collects the answer to request `seq`: its replies until its ACK
    /// (if `ack_ends`, as for a `do`), the end of its dump, or its error,
    /// within `timeout` (a timeout names it `what`). Anything else that
    /// arrives meanwhile (an event, an old answer) is passed over.
    pub fn answer(
        &mut self,
        seq: u32,
        ack_ends: bool,
        timeout: Duration,
        what: &str,
    ) -> Result<Answer, Error> {
        let deadline = Instant::now() + timeout;
        let mut replies = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(Error::Timeout(what.to_string()));
            }
            for m in self.recv(Some(left))? {
                let error = match m {
                    Incoming::Genl { seq: s, attrs, .. } if s == seq => {
                        replies.push(attrs);
                        continue;
                    }
                    Incoming::Ack { seq: s } if s == seq && ack_ends => None,
                    Incoming::Done { seq: s, err } if s == seq => err,
                    Incoming::Err { seq: s, err } if s == seq => Some(err),
                    _ => continue,
                };
                return Ok(Answer { replies, error });
            }
        }
    }
}

/// How the kernel answered one request.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Answer {
    /// Its replies (the messages of a dump, the reply of a `do`).
    pub replies: Vec<Vec<RawAttr>>,
    /// The error that ended it, if it failed.
    pub error: Option<KernelError>,
}

/// Read nlctrl's answer: the family id and the `monitor` group's id.
pub fn parse_family(replies: &[Vec<RawAttr>]) -> Result<(u16, Option<u32>), Error> {
    let first = replies
        .first()
        .ok_or_else(|| Error::NoFamily(spec::FAMILY_NAME.to_string()))?;
    let mut family = None;
    let mut group = None;
    for a in first {
        match a.id {
            ctrl::ATTR_FAMILY_ID => {
                family = <[u8; 2]>::try_from(a.payload.as_slice())
                    .ok()
                    .map(u16::from_ne_bytes)
            }
            ctrl::ATTR_MCAST_GROUPS => {
                for g in attr::parse_attrs(&a.payload)? {
                    let inner = attr::parse_attrs(&g.payload)?;
                    let name = inner.iter().find(|x| x.id == ctrl::ATTR_MCAST_GRP_NAME);
                    let id = inner.iter().find(|x| x.id == ctrl::ATTR_MCAST_GRP_ID);
                    if let (Some(n), Some(i)) = (name, id) {
                        let n = n.payload.split(|b| *b == 0).next().unwrap_or(&[]);
                        if n == spec::MCGRP_MONITOR.as_bytes() {
                            group = <[u8; 4]>::try_from(i.payload.as_slice())
                                .ok()
                                .map(u32::from_ne_bytes);
                        }
                    }
                }
            }
            _ => {}
        }
    }
    let family = family.ok_or_else(|| DecodeError::Missing("nlctrl family-id".to_string()))?;
    Ok((family, group))
}
