//! Smoke test of the "ub" generic netlink family of ub.ko, run inside a
//! test guest (selftests/ub/ub_netlink_smoke.sh) against the registry stub:
//! resolves the family through nlctrl, dumps devices and ports, round-trips
//! an address, pings through the echo op, and sends malformed and
//! unprivileged requests, each of which must fail with the expected errno
//! and extended ACK and change nothing. Prints KTAP.
//!
//! Raw AF_NETLINK on purpose: it checks the kernel side byte by byte with no
//! client library in between. The real client is `ubctl`.

use anyhow::{bail, Context, Result};
use std::process::ExitCode;

// Attribute and command values: include/uapi/linux/ub_netlink.h.
const UB_CMD_DEV_GET: u8 = 1;
const UB_CMD_PORT_GET: u8 = 2;
const UB_CMD_PORT_SET: u8 = 3;
const UB_CMD_PORT_CHANGE_NTF: u8 = 4;
const UB_CMD_ADDR_ADD: u8 = 5;
const UB_CMD_ADDR_DEL: u8 = 6;
const UB_CMD_ECHO: u8 = 11;
const UB_CMD_ECHO_REPLY: u8 = 12;
const UB_A_DEV_INDEX: u16 = 1;
const UB_A_DEV_NAME: u16 = 2;
const UB_A_DEV_ADDR: u16 = 5;
const UB_A_ADDR_TYPE: u16 = 1;
const UB_A_ADDR_CNA: u16 = 2;
const UB_A_ADDR_IPV4: u16 = 3;
const UB_ADDR_TYPE_CNA16: u32 = 0;
const UB_ADDR_TYPE_IPV4: u32 = 2;
const UB_A_PORT_DEV_INDEX: u16 = 1;
const UB_A_PORT_INDEX: u16 = 2;
const UB_A_PORT_ADMIN_UP: u16 = 3;
const UB_A_PORT_PHY_UP: u16 = 4;
const UB_A_PORT_EVENT: u16 = 25;
const UB_PORT_EVENT_LINK_UP: u32 = 0;
const UB_PORT_EVENT_LINK_DOWN: u32 = 1;
const UB_A_ECHO_DEV_INDEX: u16 = 1;
const UB_A_ECHO_DST: u16 = 2;
const UB_A_ECHO_ID: u16 = 3;
const UB_A_ECHO_SEQ: u16 = 4;

const GENL_ID_CTRL: u16 = 0x10;
const CTRL_CMD_GETFAMILY: u8 = 3;
const CTRL_ATTR_FAMILY_ID: u16 = 1;
const CTRL_ATTR_FAMILY_NAME: u16 = 2;
const CTRL_ATTR_MCAST_GROUPS: u16 = 7;
const CTRL_ATTR_MCAST_GRP_NAME: u16 = 1;
const CTRL_ATTR_MCAST_GRP_ID: u16 = 2;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const NLM_F_REQUEST: u16 = 1;
const NLM_F_ACK: u16 = 4;
const NLM_F_DUMP: u16 = 0x300;
const NLMSGERR_ATTR_MSG: u16 = 1;
const NLMSGERR_ATTR_OFFS: u16 = 2;
const NLMSGERR_ATTR_MISS_TYPE: u16 = 5;
const NLM_F_ACK_TLVS: u16 = 0x200;

/// Attributes of a request, encoded.
#[derive(Default, Clone)]
struct Attrs(Vec<u8>);

impl Attrs {
    fn put(mut self, ty: u16, data: &[u8]) -> Self {
        let len = 4 + data.len();
        self.0.extend_from_slice(&(len as u16).to_ne_bytes());
        self.0.extend_from_slice(&ty.to_ne_bytes());
        self.0.extend_from_slice(data);
        self.0.resize(self.0.len().next_multiple_of(4), 0);
        self
    }
    fn u8(self, ty: u16, v: u8) -> Self {
        self.put(ty, &[v])
    }
    fn u32(self, ty: u16, v: u32) -> Self {
        self.put(ty, &v.to_ne_bytes())
    }
    fn nest(self, ty: u16, inner: Attrs) -> Self {
        self.put(ty | 0x8000, &inner.0)
    }
}

/// Iterates over the attributes in `buf`: (type without flags, payload).
fn attrs(mut buf: &[u8]) -> impl Iterator<Item = (u16, &[u8])> {
    std::iter::from_fn(move || {
        let len = usize::from(u16::from_ne_bytes(buf.get(0..2)?.try_into().ok()?));
        let ty = u16::from_ne_bytes(buf.get(2..4)?.try_into().ok()?) & 0x3fff;
        let payload = buf.get(4..len)?;
        buf = buf.get(len.next_multiple_of(4)..).unwrap_or(&[]);
        Some((ty, payload))
    })
}

fn attr(buf: &[u8], ty: u16) -> Option<&[u8]> {
    attrs(buf).find(|(t, _)| *t == ty).map(|(_, p)| p)
}

fn u32_of(p: &[u8]) -> Option<u32> {
    Some(u32::from_ne_bytes(p.get(0..4)?.try_into().ok()?))
}

/// One received message: its type, flags, and payload after the nlmsghdr.
struct Msg {
    ty: u16,
    flags: u16,
    payload: Vec<u8>,
}

impl Msg {
    /// Generic netlink command and attributes.
    fn genl(&self) -> (u8, &[u8]) {
        (
            self.payload.first().copied().unwrap_or(0),
            self.payload.get(4..).unwrap_or(&[]),
        )
    }
}

/// The outcome of a request: the messages before the ACK/DONE, the errno,
/// the extack message, offset of the bad attribute and missing type.
#[derive(Default)]
struct Outcome {
    msgs: Vec<Msg>,
    errno: i32,
    ext_msg: Option<String>,
    bad_offset: Option<u32>,
    missing: Option<u32>,
}

struct Sock {
    fd: i32,
    seq: u32,
}

impl Sock {
    fn new() -> Result<Self> {
        // SAFETY: Plain socket(2) call.
        let fd = unsafe { libc::socket(libc::AF_NETLINK, libc::SOCK_RAW, libc::NETLINK_GENERIC) };
        if fd < 0 {
            bail!("socket(AF_NETLINK): {}", std::io::Error::last_os_error());
        }
        let one: libc::c_int = 1;
        // SAFETY: `one` is a valid int for the option's size.
        let r = unsafe {
            libc::setsockopt(
                fd,
                libc::SOL_NETLINK,
                libc::NETLINK_EXT_ACK,
                (&one as *const libc::c_int).cast(),
                4,
            )
        };
        if r < 0 {
            bail!("NETLINK_EXT_ACK: {}", std::io::Error::last_os_error());
        }
        // Bind (port ID chosen by the kernel): an unbound socket has port
        // ID 0, which is also the sender of notifications, and netlink
        // skips the sender's port ID when it delivers a multicast.
        // SAFETY: A zeroed sockaddr_nl with its family set is valid.
        let r = unsafe {
            let mut sa: libc::sockaddr_nl = std::mem::zeroed();
            sa.nl_family = libc::AF_NETLINK as u16;
            libc::bind(
                fd,
                (&sa as *const libc::sockaddr_nl).cast(),
                std::mem::size_of::<libc::sockaddr_nl>() as u32,
            )
        };
        if r < 0 {
            bail!("bind: {}", std::io::Error::last_os_error());
        }
        Ok(Self { fd, seq: 1 })
    }

    fn send(&mut self, family: u16, flags: u16, cmd: u8, a: &Attrs) -> Result<u32> {
        self.seq += 1;
        let mut m = Vec::new();
        let len = 16 + 4 + a.0.len();
        m.extend_from_slice(&(len as u32).to_ne_bytes());
        m.extend_from_slice(&family.to_ne_bytes());
        m.extend_from_slice(&(flags | NLM_F_REQUEST).to_ne_bytes());
        m.extend_from_slice(&self.seq.to_ne_bytes());
        m.extend_from_slice(&0u32.to_ne_bytes());
        m.extend_from_slice(&[cmd, 1, 0, 0]);
        m.extend_from_slice(&a.0);
        // SAFETY: `m` is readable for its length; the kernel address is
        // the zeroed default sockaddr_nl.
        let r = unsafe {
            let mut sa: libc::sockaddr_nl = std::mem::zeroed();
            sa.nl_family = libc::AF_NETLINK as u16;
            libc::sendto(
                self.fd,
                m.as_ptr().cast(),
                m.len(),
                0,
                (&sa as *const libc::sockaddr_nl).cast(),
                std::mem::size_of::<libc::sockaddr_nl>() as u32,
            )
        };
        if r < 0 {
            bail!("sendto: {}", std::io::Error::last_os_error());
        }
        Ok(self.seq)
    }

    /// Receives until the ACK, error or DONE of request `seq`.
    fn outcome(&mut self, seq: u32) -> Result<Outcome> {
        let mut out = Outcome::default();
        let mut buf = vec![0u8; 65536];
        loop {
            // SAFETY: `buf` is writable for its length.
            let n = unsafe { libc::recv(self.fd, buf.as_mut_ptr().cast(), buf.len(), 0) };
            if n < 0 {
                bail!("recv: {}", std::io::Error::last_os_error());
            }
            let mut rest = buf.get(..n as usize).unwrap_or(&[]);
            while rest.len() >= 16 {
                let len = u32_of(rest).context("short header")? as usize;
                let ty = u16::from_ne_bytes([rest[4], rest[5]]);
                let flags = u16::from_ne_bytes([rest[6], rest[7]]);
                let mseq = u32_of(&rest[8..]).context("short header")?;
                let payload = rest.get(16..len).context("truncated message")?.to_vec();
                rest = rest.get(len.next_multiple_of(4)..).unwrap_or(&[]);
                if mseq != seq && ty != NLMSG_ERROR {
                    // Unsolicited (e.g. an echo reply): keep it too.
                    out.msgs.push(Msg { ty, flags, payload });
                    continue;
                }
                match ty {
                    NLMSG_ERROR | NLMSG_DONE => {
                        // The kernel writes a negative errno (0 for an ACK).
                        out.errno = u32_of(&payload).context("short error")? as i32;
                        // NLMSG_ERROR: errno + the request's header (+ its
                        // payload unless capped) + TLVs; DONE: errno + TLVs.
                        let tlv_at = if ty == NLMSG_DONE {
                            4
                        } else {
                            let req_len = u32_of(&payload[4..]).unwrap_or(16) as usize;
                            if out.errno == 0 || flags & 0x100 != 0 {
                                20
                            } else {
                                4 + req_len
                            }
                        };
                        if flags & NLM_F_ACK_TLVS != 0 {
                            let tlvs = payload.get(tlv_at..).unwrap_or(&[]);
                            out.ext_msg = attr(tlvs, NLMSGERR_ATTR_MSG).map(|m| {
                                String::from_utf8_lossy(m)
                                    .trim_end_matches('\0')
                                    .to_string()
                            });
                            out.bad_offset = attr(tlvs, NLMSGERR_ATTR_OFFS).and_then(u32_of);
                            out.missing = attr(tlvs, NLMSGERR_ATTR_MISS_TYPE).and_then(u32_of);
                        }
                        return Ok(out);
                    }
                    _ => out.msgs.push(Msg { ty, flags, payload }),
                }
            }
        }
    }

    fn request(&mut self, family: u16, flags: u16, cmd: u8, a: &Attrs) -> Result<Outcome> {
        let seq = self.send(family, flags, cmd, a)?;
        self.outcome(seq)
    }

    /// The family's id and the id of its multicast group `group`.
    fn family(&mut self, name: &str, group: &str) -> Result<(u16, Option<u32>)> {
        let mut n = name.as_bytes().to_vec();
        n.push(0);
        let o = self.request(
            GENL_ID_CTRL,
            NLM_F_ACK,
            CTRL_CMD_GETFAMILY,
            &Attrs::default().put(CTRL_ATTR_FAMILY_NAME, &n),
        )?;
        if o.errno != 0 {
            bail!("family {name}: errno {}", o.errno);
        }
        let m = o.msgs.first().context("no family reply")?;
        let id = attr(m.genl().1, CTRL_ATTR_FAMILY_ID).context("no family id")?;
        let id = u16::from_ne_bytes(id.get(0..2).context("short id")?.try_into()?);
        let mut grp = group.as_bytes().to_vec();
        grp.push(0);
        let grp_id = attr(m.genl().1, CTRL_ATTR_MCAST_GROUPS).and_then(|groups| {
            attrs(groups)
                .find(|(_, g)| attr(g, CTRL_ATTR_MCAST_GRP_NAME) == Some(&grp[..]))
                .and_then(|(_, g)| attr(g, CTRL_ATTR_MCAST_GRP_ID).and_then(u32_of))
        });
        Ok((id, grp_id))
    }

    /// Joins multicast group `group`; receives time out after 3 s.
    fn subscribe(&mut self, group: u32) -> Result<()> {
        // SAFETY: `group` is a valid u32 for the option's size.
        let r = unsafe {
            libc::setsockopt(
                self.fd,
                libc::SOL_NETLINK,
                libc::NETLINK_ADD_MEMBERSHIP,
                (&group as *const u32).cast(),
                4,
            )
        };
        if r < 0 {
            bail!(
                "NETLINK_ADD_MEMBERSHIP: {}",
                std::io::Error::last_os_error()
            );
        }
        let tv = libc::timeval {
            tv_sec: 3,
            tv_usec: 0,
        };
        // SAFETY: `tv` is a valid timeval for the option's size.
        let r = unsafe {
            libc::setsockopt(
                self.fd,
                libc::SOL_SOCKET,
                libc::SO_RCVTIMEO,
                (&tv as *const libc::timeval).cast(),
                std::mem::size_of::<libc::timeval>() as u32,
            )
        };
        if r < 0 {
            bail!("SO_RCVTIMEO: {}", std::io::Error::last_os_error());
        }
        Ok(())
    }

    /// The next notification (generic netlink command and attributes).
    fn next_event(&mut self) -> Result<(u8, Vec<u8>)> {
        let mut buf = vec![0u8; 65536];
        // SAFETY: `buf` is writable for its length.
        let n = unsafe { libc::recv(self.fd, buf.as_mut_ptr().cast(), buf.len(), 0) };
        if n < 20 {
            bail!("no notification: {}", std::io::Error::last_os_error());
        }
        let len = (u32_of(&buf).context("short")? as usize).min(n as usize);
        Ok((buf[16], buf.get(20..len).unwrap_or(&[]).to_vec()))
    }
}

/// State that no refused request may change: the device and port dumps.
fn state(s: &mut Sock, fam: u16) -> Result<Vec<Vec<u8>>> {
    let mut all = Vec::new();
    for cmd in [UB_CMD_DEV_GET, UB_CMD_PORT_GET] {
        let o = s.request(fam, NLM_F_DUMP, cmd, &Attrs::default())?;
        if o.errno != 0 {
            bail!("dump {cmd}: errno {}", o.errno);
        }
        all.extend(o.msgs.into_iter().map(|m| m.payload));
    }
    Ok(all)
}

struct Ktap {
    n: u32,
    failed: u32,
}

impl Ktap {
    fn check(&mut self, name: &str, r: Result<()>) {
        self.n += 1;
        match r {
            Ok(()) => println!("ok {} {name}", self.n),
            Err(e) => {
                self.failed += 1;
                println!("# {name}: {e:#}");
                println!("not ok {} {name}", self.n);
            }
        }
    }
}

/// Expects `o` to fail with `errno` and an extended ACK message containing
/// `msg`, pointing at an attribute if `bad` (or naming missing type `miss`).
fn refused(o: &Outcome, errno: i32, msg: &str, bad: bool, miss: Option<u32>) -> Result<()> {
    println!(
        "# errno {} msg {:?} offset {:?} missing {:?}",
        o.errno, o.ext_msg, o.bad_offset, o.missing
    );
    if o.errno != errno {
        bail!("errno {} instead of {errno}", o.errno);
    }
    match &o.ext_msg {
        Some(m) if m.contains(msg) => {}
        other => bail!("extack message {other:?}, expected {msg:?}"),
    }
    if bad && o.bad_offset.is_none() {
        bail!("no bad attribute in the extended ACK");
    }
    if miss.is_some() && o.missing != miss {
        bail!("missing type {:?} instead of {miss:?}", o.missing);
    }
    Ok(())
}

fn ipv4(a: [u8; 4]) -> Attrs {
    Attrs::default()
        .u32(UB_A_ADDR_TYPE, UB_ADDR_TYPE_IPV4)
        .put(UB_A_ADDR_IPV4, &a)
}

fn run(t: &mut Ktap) -> Result<()> {
    let mut s = Sock::new()?;
    let (fam, monitor) = s
        .family("ub", "monitor")
        .context("resolving the ub family through nlctrl")?;
    println!("# family ub has id {fam}, group monitor {monitor:?}");
    t.check(
        "family ub resolved, with its monitor group",
        monitor.map(|_| ()).context("no monitor group"),
    );

    t.check(
        "dev-get dump lists the stub device",
        (|| {
            let o = s.request(fam, NLM_F_DUMP, UB_CMD_DEV_GET, &Attrs::default())?;
            let devs: Vec<_> = o
                .msgs
                .iter()
                .filter(|m| m.genl().0 == UB_CMD_DEV_GET)
                .collect();
            if o.errno != 0 || devs.len() != 1 {
                bail!("errno {} with {} devices", o.errno, devs.len());
            }
            let a = devs[0].genl().1;
            let name = attr(a, UB_A_DEV_NAME).context("no name")?;
            println!(
                "# dev {:?} name {:?}",
                attr(a, UB_A_DEV_INDEX).and_then(u32_of),
                String::from_utf8_lossy(name)
            );
            if name != b"stub\0" {
                bail!("name {name:?}");
            }
            Ok(())
        })(),
    );
    t.check(
        "port-get dump lists 2 ports, each with dev-index and index",
        (|| {
            let o = s.request(fam, NLM_F_DUMP, UB_CMD_PORT_GET, &Attrs::default())?;
            let idx: Vec<_> = o
                .msgs
                .iter()
                .filter_map(|m| attr(m.genl().1, UB_A_PORT_INDEX).and_then(u32_of))
                .collect();
            if o.errno != 0 || idx != [0, 1] {
                bail!("errno {} ports {idx:?}", o.errno);
            }
            Ok(())
        })(),
    );

    let before = state(&mut s, fam)?;
    // (name, command, attributes, errno, extack message part, whether a
    // bad attribute is named, the missing attribute type)
    type Case = (
        &'static str,
        u8,
        Attrs,
        i32,
        &'static str,
        bool,
        Option<u32>,
    );
    let cases: Vec<Case> = vec![
        (
            "port-set without dev-index: missing attribute",
            UB_CMD_PORT_SET,
            Attrs::default()
                .u32(UB_A_PORT_INDEX, 0)
                .u8(UB_A_PORT_ADMIN_UP, 0),
            -libc::EINVAL,
            "Missing attribute",
            false,
            Some(u32::from(UB_A_PORT_DEV_INDEX)),
        ),
        (
            "port-set of a port that does not exist",
            UB_CMD_PORT_SET,
            Attrs::default()
                .u32(UB_A_PORT_DEV_INDEX, 0)
                .u32(UB_A_PORT_INDEX, 7)
                .u8(UB_A_PORT_ADMIN_UP, 0),
            -libc::ENODEV,
            "no port with this index",
            true,
            None,
        ),
        (
            "port-set with admin-up out of range (policy)",
            UB_CMD_PORT_SET,
            Attrs::default()
                .u32(UB_A_PORT_DEV_INDEX, 0)
                .u32(UB_A_PORT_INDEX, 0)
                .u8(UB_A_PORT_ADMIN_UP, 2),
            -libc::ERANGE,
            "",
            true,
            None,
        ),
        (
            "port-set with a wrong-typed dev-index (u8 for u32)",
            UB_CMD_PORT_SET,
            Attrs::default()
                .u8(UB_A_PORT_DEV_INDEX, 0)
                .u32(UB_A_PORT_INDEX, 0)
                .u8(UB_A_PORT_ADMIN_UP, 0),
            -libc::EINVAL,
            "",
            true,
            None,
        ),
        (
            "port-set with a read-only attribute (phy-up)",
            UB_CMD_PORT_SET,
            Attrs::default()
                .u32(UB_A_PORT_DEV_INDEX, 0)
                .u32(UB_A_PORT_INDEX, 0)
                .u8(UB_A_PORT_PHY_UP, 0),
            -libc::EINVAL,
            "",
            true,
            None,
        ),
        (
            "port-set with an unknown attribute",
            UB_CMD_PORT_SET,
            Attrs::default()
                .u32(UB_A_PORT_DEV_INDEX, 0)
                .u32(UB_A_PORT_INDEX, 0)
                .u8(40, 0),
            -libc::EINVAL,
            "",
            true,
            None,
        ),
        (
            "port-set with nothing to change",
            UB_CMD_PORT_SET,
            Attrs::default()
                .u32(UB_A_PORT_DEV_INDEX, 0)
                .u32(UB_A_PORT_INDEX, 0),
            -libc::EINVAL,
            "without any setting",
            false,
            None,
        ),
        (
            "addr-add with an oversized ipv4",
            UB_CMD_ADDR_ADD,
            Attrs::default().u32(UB_A_DEV_INDEX, 0).nest(
                UB_A_DEV_ADDR,
                Attrs::default()
                    .u32(UB_A_ADDR_TYPE, UB_ADDR_TYPE_IPV4)
                    .put(UB_A_ADDR_IPV4, &[10, 0, 0, 1, 5]),
            ),
            -libc::ERANGE,
            "",
            true,
            None,
        ),
        (
            "addr-add of a 16-bit CNA above 0xffff",
            UB_CMD_ADDR_ADD,
            Attrs::default().u32(UB_A_DEV_INDEX, 0).nest(
                UB_A_DEV_ADDR,
                Attrs::default()
                    .u32(UB_A_ADDR_TYPE, UB_ADDR_TYPE_CNA16)
                    .u32(UB_A_ADDR_CNA, 0x12345),
            ),
            -libc::EINVAL,
            "16-bit CNA above 0xffff",
            true,
            None,
        ),
        (
            "addr-add to a device that does not exist",
            UB_CMD_ADDR_ADD,
            Attrs::default()
                .u32(UB_A_DEV_INDEX, 9)
                .nest(UB_A_DEV_ADDR, ipv4([10, 0, 0, 1])),
            -libc::ENODEV,
            "no UB device",
            true,
            None,
        ),
        (
            "echo to a CNA (not IP)",
            UB_CMD_ECHO,
            Attrs::default()
                .u32(UB_A_ECHO_DEV_INDEX, 0)
                .nest(
                    UB_A_ECHO_DST,
                    Attrs::default()
                        .u32(UB_A_ADDR_TYPE, UB_ADDR_TYPE_CNA16)
                        .u32(UB_A_ADDR_CNA, 5),
                )
                .u32(UB_A_ECHO_ID, 1)
                .u32(UB_A_ECHO_SEQ, 1),
            -libc::EINVAL,
            "IP destination",
            true,
            None,
        ),
    ];
    for (name, cmd, a, errno, msg, bad, miss) in &cases {
        let o = s.request(fam, NLM_F_ACK, *cmd, a)?;
        t.check(name, refused(&o, *errno, msg, *bad, *miss));
    }
    t.check(
        "unprivileged port-set and addr-add: EPERM",
        unprivileged(fam),
    );
    t.check(
        "refused requests changed nothing (dumps identical)",
        (|| {
            if state(&mut s, fam)? != before {
                bail!("the dumps differ");
            }
            Ok(())
        })(),
    );

    t.check(
        "addr-add then dev-get shows the address; again: EEXIST; addr-del",
        (|| {
            let add = Attrs::default()
                .u32(UB_A_DEV_INDEX, 0)
                .nest(UB_A_DEV_ADDR, ipv4([10, 0, 0, 1]));
            let o = s.request(fam, NLM_F_ACK, UB_CMD_ADDR_ADD, &add)?;
            if o.errno != 0 {
                bail!("addr-add: errno {} {:?}", o.errno, o.ext_msg);
            }
            let o = s.request(
                fam,
                NLM_F_ACK,
                UB_CMD_DEV_GET,
                &Attrs::default().u32(UB_A_DEV_INDEX, 0),
            )?;
            let m = o.msgs.first().context("no dev-get reply")?;
            let nest = attr(m.genl().1, UB_A_DEV_ADDR).context("no addr in dev-get")?;
            if attr(nest, UB_A_ADDR_IPV4) != Some(&[10, 0, 0, 1][..]) {
                bail!("addr nest {nest:?}");
            }
            let o = s.request(fam, NLM_F_ACK, UB_CMD_ADDR_ADD, &add)?;
            refused(&o, -libc::EEXIST, "already has an address", true, None)?;
            let o = s.request(fam, NLM_F_ACK, UB_CMD_ADDR_DEL, &add)?;
            if o.errno != 0 {
                bail!("addr-del: errno {}", o.errno);
            }
            Ok(())
        })(),
    );
    t.check(
        "port-set admin down/up: port-change-ntf link-down/link-up on monitor",
        (|| {
            let mut mon = Sock::new()?;
            mon.subscribe(monitor.context("no monitor group")?)?;
            for (up, event) in [(0u8, UB_PORT_EVENT_LINK_DOWN), (1, UB_PORT_EVENT_LINK_UP)] {
                let a = Attrs::default()
                    .u32(UB_A_PORT_DEV_INDEX, 0)
                    .u32(UB_A_PORT_INDEX, 1)
                    .u8(UB_A_PORT_ADMIN_UP, up);
                let o = s.request(fam, NLM_F_ACK, UB_CMD_PORT_SET, &a)?;
                if o.errno != 0 {
                    bail!("port-set: errno {} {:?}", o.errno, o.ext_msg);
                }
                let (cmd, a) = mon.next_event()?;
                let got = attr(&a, UB_A_PORT_EVENT).and_then(u32_of);
                let port = attr(&a, UB_A_PORT_INDEX).and_then(u32_of);
                println!("# monitor: cmd {cmd} port {port:?} event {got:?}");
                if cmd != UB_CMD_PORT_CHANGE_NTF || got != Some(event) || port != Some(1) {
                    bail!("expected event {event} on port 1");
                }
            }
            Ok(())
        })(),
    );
    t.check(
        "echo: the reply comes back as echo-reply with id and seq",
        (|| {
            let a = Attrs::default()
                .u32(UB_A_ECHO_DEV_INDEX, 0)
                .nest(UB_A_ECHO_DST, ipv4([10, 0, 0, 2]))
                .u32(UB_A_ECHO_ID, 77)
                .u32(UB_A_ECHO_SEQ, 5);
            let o = s.request(fam, NLM_F_ACK, UB_CMD_ECHO, &a)?;
            if o.errno != 0 {
                bail!("echo: errno {} {:?}", o.errno, o.ext_msg);
            }
            let r = o
                .msgs
                .iter()
                .find(|m| m.genl().0 == UB_CMD_ECHO_REPLY)
                .context("no echo-reply before the ACK")?;
            let a = r.genl().1;
            let (id, seq) = (attr(a, 3).and_then(u32_of), attr(a, 4).and_then(u32_of));
            println!(
                "# echo-reply id {id:?} seq {seq:?} flags {:#x} type {}",
                r.flags, r.ty
            );
            if (id, seq) != (Some(77), Some(5)) {
                bail!("id/seq {id:?}/{seq:?}");
            }
            Ok(())
        })(),
    );
    Ok(())
}

/// A child that gives up root (and with it CAP_NET_ADMIN) tries mutating
/// ops: the generated GENL_ADMIN_PERM flag must refuse them.
fn unprivileged(fam: u16) -> Result<()> {
    // SAFETY: fork in a single-threaded process; the child only makes
    // system calls and exits.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        bail!("fork: {}", std::io::Error::last_os_error());
    }
    if pid == 0 {
        let code = (|| -> Result<i32> {
            // SAFETY: plain setuid(2).
            if unsafe { libc::setuid(65534) } != 0 {
                return Ok(2);
            }
            let mut s = Sock::new()?;
            let set = Attrs::default()
                .u32(UB_A_PORT_DEV_INDEX, 0)
                .u32(UB_A_PORT_INDEX, 0)
                .u8(UB_A_PORT_ADMIN_UP, 0);
            let add = Attrs::default()
                .u32(UB_A_DEV_INDEX, 0)
                .nest(UB_A_DEV_ADDR, ipv4([10, 9, 9, 9]));
            let a = s.request(fam, NLM_F_ACK, UB_CMD_PORT_SET, &set)?;
            let b = s.request(fam, NLM_F_ACK, UB_CMD_ADDR_ADD, &add)?;
            // Reads stay allowed.
            let c = s.request(fam, NLM_F_DUMP, UB_CMD_DEV_GET, &Attrs::default())?;
            println!(
                "# unprivileged: port-set {} addr-add {} dev-get dump {}",
                a.errno, b.errno, c.errno
            );
            Ok(
                if a.errno == -libc::EPERM && b.errno == -libc::EPERM && c.errno == 0 {
                    0
                } else {
                    1
                },
            )
        })()
        .unwrap_or(3);
        // SAFETY: exits the child without running the parent's atexit state.
        unsafe { libc::_exit(code) };
    }
    let mut status = 0;
    // SAFETY: waits for our own child.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    if !libc::WIFEXITED(status) || libc::WEXITSTATUS(status) != 0 {
        bail!("child status {status:#x}");
    }
    Ok(())
}

fn main() -> ExitCode {
    println!("TAP version 13");
    let mut t = Ktap { n: 0, failed: 0 };
    if let Err(e) = run(&mut t) {
        t.check("netlink session", Err(e));
    }
    println!("1..{}", t.n);
    if t.failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
