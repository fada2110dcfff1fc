// SPDX-License-Identifier: GPL-2.0
//! `ub-tp abi-check`: every misuse of `/dev/ub_tp` gets exactly the errno
//! `drivers/ub/cdev.rs` returns for it, and a refused call changes nothing
//! (a refused `UB_TP_IOC_BIND` leaves the file unbound: the
//! `UB_TP_IOC_INFO` that follows still fails with `ENOTCONN`).
//!
//! [`CASES`] is the specification, one row per misuse; [`run_case`] runs
//! one row on fresh file descriptors with raw `ioctl`/`read`/`write`, and
//! [`verdict`] and [`Verdict::line`] turn the outcome into TAP-style
//! `ok N - ...` / `not ok N - ...: got X, want Y` lines. Rows marked
//! [`Case::todo`] are known kernel defects: they are run and reported
//! (`# TODO`) but do not fail the check, so that a fix shows up as an
//! unexpected pass.
//!
//! Needs root, the module loaded and device `--dev` present; no peer. The
//! rows that open a channel to [`UNANSWERED`] also need an IPv4 address on
//! the device (`ubctl addr add`): without one the kernel refuses them with
//! `EADDRNOTAVAIL` before it looks at the configuration. [`CTP_CASES`]
//! (`ub-tp abi-check --ctp`) bind CTP files, so they need a 16-bit CNA on
//! the device and no 24-bit one.

use std::ffi::CString;
use std::mem::size_of;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use crate::error::errno_name;
use crate::uapi::*;

/// An IPv4 address nobody answers (no guest of the test fabric has it), so
/// that a bind the kernel accepted would only time out.
pub const UNANSWERED: [u8; 4] = [10, 0, 99, 99];
/// Keys of the channels the check asks for: `KEY_BASE + case number`, far
/// from the keys the other selftests use.
pub const KEY_BASE: u32 = 0xab1c_0000;
/// A 16-bit CNA no host of the test fabric has (they are `(h+1) << 8`):
/// a CTP file bound to it sends into the void.
pub const UNANSWERED_CNA16: u16 = 0x7f00;
/// The key both of the rows that retry a timed-out connect use.
const KEY_RETRY: u32 = KEY_BASE + 0xffff;
/// A user address no process has mapped (the first page never is).
pub const BAD_POINTER: usize = 8;
/// The unprivileged user and group of the `EPERM` row (nobody/nogroup).
pub const NOBODY: u32 = 65534;

/// What a case expects of its call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Want {
    /// Fails with this errno.
    Errno(i32),
    /// Fails; which errno is recorded but not checked.
    AnyError,
}

/// What a case expects of the `UB_TP_IOC_INFO` that follows its call on
/// the same file descriptor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Then {
    /// No follow-up.
    Nothing,
    /// Still unbound: `ENOTCONN`.
    Unbound,
    /// Bound: `UB_TP_IOC_INFO` succeeds.
    Bound,
}

/// A change to the valid bind request [`base_bind`] builds.
pub type Edit = fn(&mut UbTpBind);

/// The call a case makes on a fresh file descriptor.
#[derive(Clone, Copy, Debug)]
pub enum Action {
    /// `UB_TP_IOC_INFO` with this version.
    Info {
        /// `ub_tp_info.version`.
        version: u32,
    },
    /// `UB_TP_IOC_INFO` with a pointer to unmapped memory.
    InfoAt(usize),
    /// `read()` into a 4096-byte buffer.
    Read,
    /// `write()` of 64 bytes.
    Write,
    /// `_IOWR('U', nr, size)` with a valid bind request as its argument.
    Ioctl {
        /// The ioctl number.
        nr: u8,
        /// The size encoded in the request number.
        size: usize,
    },
    /// `UB_TP_IOC_BIND` with the valid request changed by the edit.
    Bind(Edit),
    /// `UB_TP_IOC_BIND` with a pointer to unmapped memory.
    BindAt(usize),
    /// `UB_TP_IOC_BIND` with the request in a read-only page (the kernel
    /// can read it but not write the outputs back).
    BindReadOnly(Edit),
    /// `UB_TP_IOC_BIND` twice on one descriptor: the second call is the
    /// one checked (the first must succeed or say `EINPROGRESS`).
    BindTwice(Edit),
    /// `UB_TP_IOC_BIND` from a child that opened the device as root, then
    /// dropped to uid/gid [`NOBODY`] (which clears its capabilities).
    BindUnprivileged(Edit),
    /// A CTP bind to [`UNANSWERED_CNA16`] that must succeed (with a handle,
    /// 2^23 or above, in `tpn`, `peer_tpn` 0 and a `max_message`), then
    /// this step on the bound file.
    Ctp(CtpStep),
}

/// What [`Action::Ctp`] does on its bound CTP file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CtpStep {
    /// `write()` of `max_message + 1` bytes.
    WriteOversized,
    /// `write()` of 0 bytes.
    WriteEmpty,
    /// `read()` into a 4096-byte buffer (nothing was sent to us).
    Read,
    /// A CTP bind of a second file to the same remote (the one checked).
    SecondFile,
    /// A (valid RTP LISTEN) bind on the same file.
    BindAgain,
}

/// One row of the specification.
#[derive(Clone, Copy, Debug)]
pub struct Case {
    /// What is done and what must happen (the TAP description).
    pub what: &'static str,
    /// Open the device with `O_NONBLOCK`.
    pub nonblock: bool,
    /// The call.
    pub action: Action,
    /// Its expected failure.
    pub want: Want,
    /// The `UB_TP_IOC_INFO` after it.
    pub then: Then,
    /// A known kernel defect makes this row fail: why (reported, not
    /// counted as a failure).
    pub todo: Option<&'static str>,
    /// A blocking call the kernel takes that waits its `timeout_ms` on
    /// purpose (the rows are otherwise kept under 300 ms each).
    pub waits: bool,
}

const fn case(what: &'static str, action: Action, want: Want, then: Then) -> Case {
    Case {
        what,
        nonblock: false,
        action,
        want,
        then,
        todo: None,
        waits: false,
    }
}

/// `c`, marked as waiting its `timeout_ms` on purpose.
const fn waiting(c: Case) -> Case {
    Case { waits: true, ..c }
}

const fn nonblocking(c: Case) -> Case {
    Case {
        nonblock: true,
        ..c
    }
}

const fn refused(what: &'static str, edit: Edit, errno: i32) -> Case {
    case(what, Action::Bind(edit), Want::Errno(errno), Then::Unbound)
}

/// A connect (not a listen) to [`UNANSWERED`].
fn connect_unanswered(b: &mut UbTpBind) {
    b.flags = 0;
    b.remote = UbAddr {
        type_: UB_ADDR_IPV4,
        ..UbAddr::default()
    };
    b.remote.addr[..4].copy_from_slice(&UNANSWERED);
}

/// A CTP bind to [`UNANSWERED_CNA16`]: no key, no RTP attribute.
fn ctp_unanswered(b: &mut UbTpBind) {
    b.flags = UB_TP_BIND_CTP;
    b.key = 0;
    b.remote = UbAddr {
        type_: UB_ADDR_CNA16,
        ..UbAddr::default()
    };
    b.remote.addr[..2].copy_from_slice(&UNANSWERED_CNA16.to_be_bytes());
}

/// The specification: every misuse and the errno `drivers/ub/cdev.rs`
/// gives it. Bind rows start from [`base_bind`] (a valid LISTEN from
/// anyone, `timeout_ms` 200) with the case's own key, so a row the kernel
/// wrongly accepted would end in `ETIMEDOUT` (or `EAGAIN` with
/// `O_NONBLOCK`), never hang.
pub const CASES: &[Case] = &[
    // Unbound descriptors (TpFile::bound; INFO checks the version first).
    case(
        "INFO on an unbound fd: ENOTCONN",
        Action::Info {
            version: UB_TP_ABI_VERSION,
        },
        Want::Errno(libc::ENOTCONN),
        Then::Nothing,
    ),
    case(
        "INFO version 0 on an unbound fd: EPROTONOSUPPORT (the version is checked first)",
        Action::Info { version: 0 },
        Want::Errno(libc::EPROTONOSUPPORT),
        Then::Unbound,
    ),
    case(
        "read() on an unbound fd: ENOTCONN",
        Action::Read,
        Want::Errno(libc::ENOTCONN),
        Then::Unbound,
    ),
    case(
        "write() on an unbound fd: ENOTCONN",
        Action::Write,
        Want::Errno(libc::ENOTCONN),
        Then::Unbound,
    ),
    // Request numbers (TpDevice::ioctl matches the whole number).
    case(
        "unknown ioctl _IOWR('U', 0x7f): ENOTTY",
        Action::Ioctl {
            nr: 0x7f,
            size: size_of::<UbTpBind>(),
        },
        Want::Errno(libc::ENOTTY),
        Then::Unbound,
    ),
    case(
        "BIND number with a size 4 bytes short: ENOTTY",
        Action::Ioctl {
            nr: 0x01,
            size: size_of::<UbTpBind>() - 4,
        },
        Want::Errno(libc::ENOTTY),
        Then::Unbound,
    ),
    case(
        "BIND number with a size 4 bytes long: ENOTTY",
        Action::Ioctl {
            nr: 0x01,
            size: size_of::<UbTpBind>() + 4,
        },
        Want::Errno(libc::ENOTTY),
        Then::Unbound,
    ),
    // TpFile::bind, in the order it checks.
    refused(
        "BIND version 0: EPROTONOSUPPORT",
        |b| b.version = 0,
        libc::EPROTONOSUPPORT,
    ),
    refused(
        "BIND version 2: EPROTONOSUPPORT",
        |b| b.version = 2,
        libc::EPROTONOSUPPORT,
    ),
    refused(
        "BIND with reserved[6] non-zero: EINVAL",
        |b| b.reserved[6] = 1,
        libc::EINVAL,
    ),
    refused(
        "BIND with members 9 (more than UB_TP_MAX_MEMBERS): EINVAL",
        |b| b.members = UB_TP_MAX_MEMBERS + 1,
        libc::EINVAL,
    ),
    refused(
        "BIND with reserved0[2] non-zero: EINVAL",
        |b| b.reserved0[2] = 1,
        libc::EINVAL,
    ),
    refused(
        "BIND with an unknown flags bit (1 << 2): EINVAL",
        |b| b.flags |= 1 << 2,
        libc::EINVAL,
    ),
    // parse_ctp_bind (before the device is looked at: no address needed).
    refused(
        "CTP BIND with LISTEN: EINVAL",
        |b| {
            ctp_unanswered(b);
            b.flags |= UB_TP_BIND_LISTEN;
        },
        libc::EINVAL,
    ),
    refused(
        "CTP BIND to an IPv4 remote: EINVAL (CTP runs over CNA only)",
        |b| {
            ctp_unanswered(b);
            connect_unanswered(b);
            b.flags = UB_TP_BIND_CTP;
        },
        libc::EINVAL,
    ),
    refused(
        "CTP BIND without a remote: EINVAL",
        |b| {
            ctp_unanswered(b);
            b.remote = UbAddr::default();
        },
        libc::EINVAL,
    ),
    refused(
        "CTP BIND with a key: EINVAL",
        |b| {
            ctp_unanswered(b);
            b.key = 1;
        },
        libc::EINVAL,
    ),
    refused(
        "CTP BIND with retransmit SELECTIVE: EINVAL",
        |b| {
            ctp_unanswered(b);
            b.retransmit = UB_TP_SELECTIVE;
        },
        libc::EINVAL,
    ),
    refused(
        "CTP BIND with attr_flags FAST_RETRANSMIT: EINVAL",
        |b| {
            ctp_unanswered(b);
            b.attr_flags = UB_TP_FAST_RETRANSMIT;
        },
        libc::EINVAL,
    ),
    refused(
        "CTP BIND with mtu 1024: EINVAL",
        |b| {
            ctp_unanswered(b);
            b.mtu = 1024;
        },
        libc::EINVAL,
    ),
    refused(
        "BIND with an unknown attr_flags bit (1 << 2): EINVAL",
        |b| b.attr_flags = 1 << 2,
        libc::EINVAL,
    ),
    refused(
        "BIND with retransmit 2: EINVAL",
        |b| b.retransmit = 2,
        libc::EINVAL,
    ),
    refused("BIND with mtu 100: EINVAL", |b| b.mtu = 100, libc::EINVAL),
    refused("BIND with mtu 8192: EINVAL", |b| b.mtu = 8192, libc::EINVAL),
    refused(
        "BIND with timeout_ms 600001: EINVAL",
        |b| b.timeout_ms = UB_TP_TIMEOUT_MAX_MS + 1,
        libc::EINVAL,
    ),
    // parse_addr.
    refused(
        "BIND with remote.type 9: EINVAL",
        |b| b.remote.type_ = 9,
        libc::EINVAL,
    ),
    refused(
        "BIND with an IPv4 remote and a non-zero addr[4]: EINVAL",
        |b| {
            b.remote.type_ = UB_ADDR_IPV4;
            b.remote.addr[..4].copy_from_slice(&UNANSWERED);
            b.remote.addr[4] = 1;
        },
        libc::EINVAL,
    ),
    refused(
        "BIND with remote.reserved[0] non-zero: EINVAL",
        |b| b.remote.reserved[0] = 1,
        libc::EINVAL,
    ),
    refused(
        "BIND without LISTEN and remote.type NONE: EDESTADDRREQ",
        |b| b.flags = 0,
        libc::EDESTADDRREQ,
    ),
    refused(
        "BIND on device 999: ENODEV",
        |b| b.dev_index = 999,
        libc::ENODEV,
    ),
    // Net::channel_connect -> Endpoint::check_format (before the address
    // and configuration checks, so no address is needed).
    refused(
        "connect BIND to a CNA16 address: EINVAL (RTP runs over IP or CNA24 only)",
        |b| {
            b.flags = 0;
            b.remote.type_ = UB_ADDR_CNA16;
            b.remote.addr[..2].copy_from_slice(&[0x01, 0x00]);
        },
        libc::EINVAL,
    ),
    // Net::channel_connect -> Endpoint::connect -> ChannelConfig::validate.
    refused(
        "BIND GO_BACK_N with fast retransmit and per-packet to 10.0.99.99: EINVAL",
        |b| {
            connect_unanswered(b);
            b.retransmit = UB_TP_GO_BACK_N;
            b.attr_flags = UB_TP_FAST_RETRANSMIT | UB_TP_PER_PACKET;
        },
        libc::EINVAL,
    ),
    refused(
        "BIND SELECTIVE with fast retransmit and per-packet to 10.0.99.99: EINVAL",
        |b| {
            connect_unanswered(b);
            b.retransmit = UB_TP_SELECTIVE;
            b.attr_flags = UB_TP_FAST_RETRANSMIT | UB_TP_PER_PACKET;
        },
        libc::EINVAL,
    ),
    nonblocking(refused(
        "LISTEN BIND with fast retransmit and per-packet: EINVAL",
        |b| b.attr_flags = UB_TP_FAST_RETRANSMIT | UB_TP_PER_PACKET,
        libc::EINVAL,
    )),
    // Binds the kernel takes but that cannot complete without a peer.
    case(
        "legal connect BIND to 10.0.99.99 (timeout_ms 300) fails, nothing bound",
        Action::Bind(|b| {
            connect_unanswered(b);
            b.key = KEY_RETRY;
            b.timeout_ms = 300;
        }),
        Want::AnyError,
        Then::Unbound,
    ),
    // ub.h: a failed bind's channel is torn down; the key is free again
    // once the teardown is done (up to 3 s), not at once: a non-blocking
    // connect does not wait for it.
    nonblocking(case(
        "the same connect BIND again at once, O_NONBLOCK: EBUSY (still closing), nothing bound",
        Action::Bind(|b| {
            connect_unanswered(b);
            b.key = KEY_RETRY;
        }),
        Want::Errno(libc::EBUSY),
        Then::Unbound,
    )),
    // A blocking connect waits for the teardown (its 15 DREQs, 3 s) within
    // its timeout_ms, then opens the channel anew: with nobody answering,
    // the 2 s left run out in the setup (ETIMEDOUT), not at the key (EBUSY).
    waiting(case(
        "the same connect BIND again, blocking (timeout_ms 5000): waits out the teardown, then ETIMEDOUT in the setup, nothing bound",
        Action::Bind(|b| {
            connect_unanswered(b);
            b.key = KEY_RETRY;
            b.timeout_ms = 5000;
        }),
        Want::Errno(libc::ETIMEDOUT),
        Then::Unbound,
    )),
    nonblocking(case(
        "connect BIND to 10.0.99.99, O_NONBLOCK: EINPROGRESS, bound",
        Action::Bind(connect_unanswered),
        Want::Errno(libc::EINPROGRESS),
        Then::Bound,
    )),
    nonblocking(case(
        "a second BIND on a bound fd: EISCONN, still bound",
        Action::BindTwice(connect_unanswered),
        Want::Errno(libc::EISCONN),
        Then::Bound,
    )),
    nonblocking(case(
        "connect BIND from read-only memory, O_NONBLOCK: EFAULT, nothing bound",
        Action::BindReadOnly(connect_unanswered),
        Want::Errno(libc::EFAULT),
        Then::Unbound,
    )),
    nonblocking(case(
        "LISTEN BIND with O_NONBLOCK and no peer: EAGAIN",
        Action::Bind(|_| {}),
        Want::Errno(libc::EAGAIN),
        Then::Unbound,
    )),
    case(
        "LISTEN BIND with timeout_ms 200 and no peer: ETIMEDOUT",
        Action::Bind(|_| {}),
        Want::Errno(libc::ETIMEDOUT),
        Then::Unbound,
    ),
    // Privilege (CAP_NET_ADMIN).
    case(
        "LISTEN BIND as uid/gid 65534 (no CAP_NET_ADMIN): EPERM",
        Action::BindUnprivileged(|_| {}),
        Want::Errno(libc::EPERM),
        Then::Unbound,
    ),
    // Bad user pointers.
    case(
        "BIND with arg 8 (unmapped): EFAULT",
        Action::BindAt(BAD_POINTER),
        Want::Errno(libc::EFAULT),
        Then::Unbound,
    ),
    case(
        "INFO with arg 8 (unmapped): EFAULT",
        Action::InfoAt(BAD_POINTER),
        Want::Errno(libc::EFAULT),
        Then::Unbound,
    ),
];

/// The CTP rows that bind a file (`ub-tp abi-check --ctp`): the device
/// needs a 16-bit CNA and no 24-bit one.
pub const CTP_CASES: &[Case] = &[
    refused(
        "CTP BIND to a CNA24 remote, no local CNA24: EADDRNOTAVAIL",
        |b| {
            ctp_unanswered(b);
            b.remote.type_ = UB_ADDR_CNA24;
            b.remote.addr[..3].copy_from_slice(&[0x00, 0x7f, 0x00]);
        },
        libc::EADDRNOTAVAIL,
    ),
    case(
        "CTP write() of max_message + 1 bytes: EMSGSIZE, still bound",
        Action::Ctp(CtpStep::WriteOversized),
        Want::Errno(libc::EMSGSIZE),
        Then::Bound,
    ),
    case(
        "CTP write() of 0 bytes: EINVAL, still bound",
        Action::Ctp(CtpStep::WriteEmpty),
        Want::Errno(libc::EINVAL),
        Then::Bound,
    ),
    nonblocking(case(
        "CTP read(), O_NONBLOCK, nothing received: EAGAIN",
        Action::Ctp(CtpStep::Read),
        Want::Errno(libc::EAGAIN),
        Then::Bound,
    )),
    case(
        "a second CTP file to the same remote: EADDRINUSE (the first stays bound)",
        Action::Ctp(CtpStep::SecondFile),
        Want::Errno(libc::EADDRINUSE),
        Then::Bound,
    ),
    case(
        "a BIND on a bound CTP file: EISCONN",
        Action::Ctp(CtpStep::BindAgain),
        Want::Errno(libc::EISCONN),
        Then::Bound,
    ),
    // Closing the files above freed the remote: binding it works again.
    case(
        "the same remote again after close: bound, then a second BIND EISCONN",
        Action::Ctp(CtpStep::BindAgain),
        Want::Errno(libc::EISCONN),
        Then::Bound,
    ),
];

/// The valid request the bind rows edit: a LISTEN from anyone on `dev`
/// for `key`, waiting 200 ms.
pub fn base_bind(dev: u32, key: u32) -> UbTpBind {
    UbTpBind {
        version: UB_TP_ABI_VERSION,
        dev_index: dev,
        key,
        flags: UB_TP_BIND_LISTEN,
        timeout_ms: 200,
        retransmit: UB_TP_GO_BACK_N,
        ..UbTpBind::default()
    }
}

/// What a case's call and its follow-up returned: `Ok(())` or the errno.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    /// The call.
    pub got: Result<(), i32>,
    /// The `UB_TP_IOC_INFO` after it (`None` if not asked for).
    pub then: Option<Result<(), i32>>,
}

/// Why a case could not be run (the device could not be opened, ...).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SetupError(pub String);

fn errno() -> i32 {
    std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

/// A system call's result: `Err(errno)` if it `failed`.
fn result(failed: bool) -> Result<(), i32> {
    if failed {
        Err(errno())
    } else {
        Ok(())
    }
}

fn setup(what: &str, e: i32) -> SetupError {
    SetupError(format!("{what}: {}", errno_text(e)))
}

fn open(path: &Path, nonblock: bool) -> Result<OwnedFd, SetupError> {
    let c = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| SetupError(format!("{} contains a NUL byte", path.display())))?;
    let mut flags = libc::O_RDWR | libc::O_CLOEXEC;
    if nonblock {
        flags |= libc::O_NONBLOCK;
    }
    // SAFETY: `c` is a NUL-terminated string that outlives the call.
    let fd = unsafe { libc::open(c.as_ptr(), flags) };
    if fd < 0 {
        return Err(setup(&format!("open {}", path.display()), errno()));
    }
    // SAFETY: open() returned a new descriptor nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `ioctl(fd, cmd, arg)`: `arg` is passed as is (it may point nowhere; the
/// kernel must then fail with `EFAULT`, never touch our memory elsewhere).
fn ioctl(fd: RawFd, cmd: u32, arg: usize) -> Result<(), i32> {
    // SAFETY: the kernel reads and writes at most the size `cmd` encodes at
    // `arg`; every caller passes either a live buffer at least that large
    // or an address nothing is mapped at (the kernel then faults cleanly).
    let r = unsafe { libc::ioctl(fd, cmd as _, arg) };
    result(r < 0)
}

fn bind(fd: RawFd, b: &mut UbTpBind) -> Result<(), i32> {
    ioctl(fd, UB_TP_IOC_BIND, b as *mut UbTpBind as usize)
}

fn info(fd: RawFd, version: u32) -> Result<(), i32> {
    let mut i = UbTpInfo {
        version,
        ..UbTpInfo::default()
    };
    ioctl(fd, UB_TP_IOC_INFO, &mut i as *mut UbTpInfo as usize)
}

/// One anonymous page, unmapped on drop.
struct Page {
    ptr: *mut libc::c_void,
    len: usize,
}

impl Page {
    fn new() -> Result<Page, SetupError> {
        let len = 4096;
        // SAFETY: a fresh private anonymous mapping; no existing memory is
        // affected.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(setup("mmap", errno()));
        }
        Ok(Page { ptr, len })
    }

    /// Copies `b` to the start of the page.
    fn put(&self, b: &UbTpBind) {
        // SAFETY: the page is mapped writable, page-aligned (so aligned for
        // `UbTpBind`) and larger than it.
        unsafe { self.ptr.cast::<UbTpBind>().write(*b) };
    }

    fn read_only(&self) -> Result<(), SetupError> {
        // SAFETY: the page is ours; only its protection changes.
        if unsafe { libc::mprotect(self.ptr, self.len, libc::PROT_READ) } != 0 {
            return Err(setup("mprotect", errno()));
        }
        Ok(())
    }

    fn addr(&self) -> usize {
        self.ptr as usize
    }
}

impl Drop for Page {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, unmapped once.
        unsafe { libc::munmap(self.ptr, self.len) };
    }
}

/// Runs case `n` (1-based; its key is `KEY_BASE + n`) on fresh descriptors
/// of `path` for device `dev`.
pub fn run_case(path: &Path, dev: u32, n: u32, c: &Case) -> Result<Outcome, SetupError> {
    let key = KEY_BASE.wrapping_add(n);
    let request = |edit: Edit| {
        let mut b = base_bind(dev, key);
        edit(&mut b);
        b
    };
    if let Action::BindUnprivileged(edit) = c.action {
        return bind_unprivileged(path, c.nonblock, request(edit));
    }
    let fd = open(path, c.nonblock)?;
    let fd = fd.as_raw_fd();
    let got = match c.action {
        Action::Info { version } => info(fd, version),
        Action::InfoAt(addr) => ioctl(fd, UB_TP_IOC_INFO, addr),
        Action::Read => {
            let mut buf = [0u8; 4096];
            // SAFETY: `buf` is valid for writes of its length.
            let r = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
            result(r < 0)
        }
        Action::Write => {
            let buf = [0x55u8; 64];
            // SAFETY: `buf` is valid for reads of its length.
            let r = unsafe { libc::write(fd, buf.as_ptr().cast(), buf.len()) };
            result(r < 0)
        }
        Action::Ioctl { nr, size } => {
            // A whole page holds a valid request, so that a kernel which
            // took the number anyway would read and write our memory only.
            let page = Page::new()?;
            page.put(&request(|_| {}));
            ioctl(fd, iowr(b'U', nr, size), page.addr())
        }
        Action::Bind(edit) => bind(fd, &mut request(edit)),
        Action::BindAt(addr) => ioctl(fd, UB_TP_IOC_BIND, addr),
        Action::BindReadOnly(edit) => {
            let page = Page::new()?;
            page.put(&request(edit));
            page.read_only()?;
            ioctl(fd, UB_TP_IOC_BIND, page.addr())
        }
        Action::BindTwice(edit) => {
            match bind(fd, &mut request(edit)) {
                Ok(()) | Err(libc::EINPROGRESS) => {}
                Err(e) => return Err(setup("the first BIND", e)),
            }
            // Another key, so that only "bound already" can refuse it.
            let mut again = request(edit);
            again.key = key.wrapping_add(0x8000);
            bind(fd, &mut again)
        }
        // Run in a child above.
        Action::BindUnprivileged(_) => return Err(SetupError("not run".to_owned())),
        Action::Ctp(step) => {
            let mut b = request(ctp_unanswered);
            bind(fd, &mut b)
                .map_err(|e| setup("the CTP BIND (does the device have a 16-bit CNA?)", e))?;
            if b.tpn < UB_TP_CTP_HANDLE_BASE || b.peer_tpn != 0 || b.max_message == 0 {
                return Err(SetupError(format!(
                    "the CTP BIND answered tpn {} peer_tpn {} max_message {}",
                    b.tpn, b.peer_tpn, b.max_message
                )));
            }
            let write = |len: usize| {
                let buf = vec![0x55u8; len];
                // SAFETY: `buf` is valid for reads of its length.
                let r = unsafe { libc::write(fd, buf.as_ptr().cast(), buf.len()) };
                result(r < 0)
            };
            match step {
                CtpStep::WriteOversized => write(b.max_message as usize + 1),
                CtpStep::WriteEmpty => write(0),
                CtpStep::Read => {
                    let mut buf = [0u8; 4096];
                    // SAFETY: `buf` is valid for writes of its length.
                    let r = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
                    result(r < 0)
                }
                CtpStep::SecondFile => {
                    let fd2 = open(path, c.nonblock)?;
                    bind(fd2.as_raw_fd(), &mut request(ctp_unanswered))
                }
                CtpStep::BindAgain => bind(fd, &mut request(|_| {})),
            }
        }
    };
    let then = match c.then {
        Then::Nothing => None,
        Then::Unbound | Then::Bound => Some(info(fd, UB_TP_ABI_VERSION)),
    };
    Ok(Outcome { got, then })
}

/// The child's report: the bind's and the INFO's result (0 or the errno),
/// or a negative setup stage and its errno.
fn bind_unprivileged(path: &Path, nonblock: bool, b: UbTpBind) -> Result<Outcome, SetupError> {
    let c = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| SetupError(format!("{} contains a NUL byte", path.display())))?;
    let mut flags = libc::O_RDWR | libc::O_CLOEXEC;
    if nonblock {
        flags |= libc::O_NONBLOCK;
    }
    let mut pipe = [0 as RawFd; 2];
    // SAFETY: `pipe` has room for the two descriptors.
    if unsafe { libc::pipe2(pipe.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(setup("pipe", errno()));
    }
    // SAFETY: pipe2() returned two new descriptors nothing else owns.
    let (rx, tx) = unsafe { (OwnedFd::from_raw_fd(pipe[0]), OwnedFd::from_raw_fd(pipe[1])) };
    // SAFETY: the child only makes system calls (no allocation, no lock)
    // and leaves with _exit.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(setup("fork", errno()));
    }
    if pid == 0 {
        child(&c, flags, b, tx.as_raw_fd());
    }
    drop(tx);
    let mut report = [0i32; 2];
    let want = size_of::<[i32; 2]>();
    // SAFETY: `report` is valid for writes of `want` bytes.
    let n = unsafe { libc::read(rx.as_raw_fd(), report.as_mut_ptr().cast(), want) };
    let read_errno = errno();
    let mut status = 0;
    // SAFETY: `pid` is our child; `status` is writable.
    while unsafe { libc::waitpid(pid, &mut status, 0) } < 0 {
        if errno() != libc::EINTR {
            return Err(setup("waitpid", errno()));
        }
    }
    if n < 0 {
        return Err(setup("read the child's report", read_errno));
    }
    if n.unsigned_abs() != want || !libc::WIFEXITED(status) || libc::WEXITSTATUS(status) != 0 {
        return Err(SetupError(format!(
            "the child died without its report (wait status {status:#x})"
        )));
    }
    let stage = ["open the device", "setgroups", "setresgid", "setresuid"];
    match report {
        [s, e] if s < 0 => {
            let what = usize::try_from(s.unsigned_abs())
                .ok()
                .and_then(|i| stage.get(i.checked_sub(1)?))
                .copied()
                .unwrap_or("setup");
            Err(setup(&format!("child: {what}"), e))
        }
        [g, t] => Ok(Outcome {
            got: if g == 0 { Ok(()) } else { Err(g) },
            then: Some(if t == 0 { Ok(()) } else { Err(t) }),
        }),
    }
}

/// The forked child of [`bind_unprivileged`]: opens the device as root,
/// drops to [`NOBODY`], binds, asks INFO, writes the two results to `tx`.
fn child(path: &CString, flags: libc::c_int, mut b: UbTpBind, tx: RawFd) -> ! {
    fn report_to(tx: RawFd, r: [i32; 2]) -> ! {
        // SAFETY: `r` is valid for reads of its size; _exit ends the child
        // without running the parent's atexit handlers or destructors.
        unsafe {
            libc::write(tx, r.as_ptr().cast(), size_of::<[i32; 2]>());
            libc::_exit(0)
        }
    }
    let report = |r| report_to(tx, r);
    let code = |r: Result<(), i32>| r.err().unwrap_or(0);
    // SAFETY: `path` is NUL-terminated and outlives the call.
    let fd = unsafe { libc::open(path.as_ptr(), flags) };
    if fd < 0 {
        report([-1, errno()]);
    }
    // SAFETY: plain system calls on this process's credentials.
    unsafe {
        if libc::setgroups(0, std::ptr::null()) != 0 {
            report([-2, errno()]);
        }
        if libc::setresgid(NOBODY, NOBODY, NOBODY) != 0 {
            report([-3, errno()]);
        }
        if libc::setresuid(NOBODY, NOBODY, NOBODY) != 0 {
            report([-4, errno()]);
        }
    }
    let got = code(bind(fd, &mut b));
    let then = code(info(fd, UB_TP_ABI_VERSION));
    report([got, then])
}

/// An errno as its name (`EINVAL`), or `errno N`.
pub fn errno_text(e: i32) -> String {
    errno_name(e).map_or_else(|| format!("errno {e}"), str::to_owned)
}

fn result_text(r: Result<(), i32>) -> String {
    match r {
        Ok(()) => "success".to_owned(),
        Err(e) => errno_text(e),
    }
}

/// How a case went.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    /// Case number (1-based).
    pub n: usize,
    /// Whether the case passed.
    pub ok: bool,
    /// The case's description.
    pub what: &'static str,
    /// Why it failed, or what it returned for [`Want::AnyError`].
    pub detail: Option<String>,
    /// The known kernel defect, for a TODO row.
    pub todo: Option<&'static str>,
}

/// Judges case `n` from its outcome.
pub fn verdict(n: usize, c: &Case, r: &Result<Outcome, SetupError>) -> Verdict {
    let v = |ok, detail| Verdict {
        n,
        ok,
        what: c.what,
        detail,
        todo: c.todo,
    };
    let o = match r {
        Ok(o) => o,
        Err(SetupError(e)) => return v(false, Some(format!("could not run: {e}"))),
    };
    let call_ok = match (c.want, o.got) {
        (Want::Errno(w), Err(g)) => w == g,
        (Want::Errno(_), Ok(())) => false,
        (Want::AnyError, g) => g.is_err(),
    };
    let want_then = match c.then {
        Then::Nothing => None,
        Then::Unbound => Some(Err(libc::ENOTCONN)),
        Then::Bound => Some(Ok(())),
    };
    let then_ok = want_then.is_none() || o.then == want_then;
    if call_ok && then_ok {
        let note = matches!(c.want, Want::AnyError).then(|| format!("got {}", result_text(o.got)));
        return v(true, note);
    }
    let want = match c.want {
        Want::Errno(w) => errno_text(w),
        Want::AnyError => "an error".to_owned(),
    };
    let detail = match (want_then, o.then) {
        (Some(wt), Some(gt)) if !then_ok => format!(
            "got {} then INFO {}, want {want} then INFO {}",
            result_text(o.got),
            result_text(gt),
            result_text(wt)
        ),
        _ => format!("got {}, want {want}", result_text(o.got)),
    };
    v(false, Some(detail))
}

impl Verdict {
    /// The TAP line: `ok N - what`, `not ok N - what: got X, want Y`, with
    /// `# TODO why` on a known kernel defect.
    pub fn line(&self) -> String {
        let mut s = format!(
            "{}ok {} - {}",
            if self.ok { "" } else { "not " },
            self.n,
            self.what
        );
        if let (false, Some(d)) = (self.ok, &self.detail) {
            s += &format!(": {d}");
        }
        if let Some(t) = self.todo {
            s += &format!(" # TODO kernel: {t}");
        }
        if let (true, Some(d)) = (self.ok, &self.detail) {
            s += &format!("\n# {d}");
        }
        s
    }

    /// Whether the case makes the check fail (a failed TODO row does not).
    pub fn counts_as_failure(&self) -> bool {
        !self.ok && self.todo.is_none()
    }
}

/// The summary line of a run.
pub fn summary(vs: &[Verdict]) -> String {
    let passed = vs.iter().filter(|v| v.ok).count();
    let failed = vs.iter().filter(|v| v.counts_as_failure()).count();
    let todo = vs.iter().filter(|v| !v.ok && v.todo.is_some()).count();
    format!(
        "# abi-check: {} cases, {passed} passed, {failed} failed, {todo} known kernel defects (TODO)",
        vs.len()
    )
}

/// Whether a run passed: every case did, known kernel defects aside.
pub fn passed(vs: &[Verdict]) -> bool {
    !vs.iter().any(Verdict::counts_as_failure)
}

/// Runs every case of `cases` against `path` and device `dev`, printing one
/// line per case with `out` and a summary; whether every case passed.
pub fn run(path: &Path, dev: u32, cases: &[Case], mut out: impl FnMut(&str)) -> bool {
    out(&format!("1..{}", cases.len()));
    let mut vs = Vec::with_capacity(cases.len());
    for (i, c) in cases.iter().enumerate() {
        let n = i + 1;
        let r = run_case(path, dev, u32::try_from(n).unwrap_or(u32::MAX), c);
        if matches!(&r, Ok(o) if o.got == Err(libc::EADDRNOTAVAIL)) {
            out(&format!(
                "# EADDRNOTAVAIL: device {dev} has no IPv4 address (ubctl addr add {dev} ADDR)"
            ));
        }
        let v = verdict(n, c, &r);
        out(&v.line());
        vs.push(v);
    }
    out(&summary(&vs));
    passed(&vs)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The device index the model takes as present.
    const DEV: u32 = 0;

    /// What `TpFile::bind` in `drivers/ub/cdev.rs` and, for a connect,
    /// `ChannelConfig::validate` refuse, in the order they check (the
    /// privilege check aside: the tests run the model as root). `None`:
    /// the request is valid and goes on to the channel setup.
    fn kernel_refusal(b: &UbTpBind) -> Option<i32> {
        if b.version != UB_TP_ABI_VERSION {
            return Some(libc::EPROTONOSUPPORT);
        }
        if b.flags & UB_TP_BIND_CTP != 0 {
            // parse_ctp_bind: only the remote CNA and the device.
            let len = match b.remote.type_ {
                UB_ADDR_CNA16 => 2,
                UB_ADDR_CNA24 => 3,
                _ => return Some(libc::EINVAL),
            };
            if b.reserved != [0; 7]
                || b.reserved0 != [0; 3]
                || b.flags != UB_TP_BIND_CTP
                || b.members != 0
                || (b.retransmit, b.attr_flags, b.mtu, b.key) != (0, 0, 0, 0)
                || b.timeout_ms > UB_TP_TIMEOUT_MAX_MS
                || b.remote.reserved != [0; 3]
                || b.remote.addr.iter().skip(len).any(|&x| x != 0)
            {
                return Some(libc::EINVAL);
            }
            return (b.dev_index != DEV).then_some(libc::ENODEV);
        }
        if b.reserved != [0; 7]
            || b.reserved0 != [0; 3]
            || b.members > UB_TP_MAX_MEMBERS
            || b.flags & !UB_TP_BIND_FLAGS != 0
            || b.attr_flags & !UB_TP_ATTR_FLAGS != 0
            || b.retransmit > UB_TP_SELECTIVE
            || !(b.mtu == 0 || (UB_TP_MTU_MIN..=UB_TP_MTU_MAX).contains(&b.mtu))
            || b.timeout_ms > UB_TP_TIMEOUT_MAX_MS
        {
            return Some(libc::EINVAL);
        }
        let len = match b.remote.type_ {
            UB_ADDR_NONE => 0,
            UB_ADDR_CNA16 => 2,
            UB_ADDR_CNA24 => 3,
            UB_ADDR_IPV4 => 4,
            UB_ADDR_IPV6 => 16,
            _ => return Some(libc::EINVAL),
        };
        if b.remote.reserved != [0; 3] || b.remote.addr.iter().skip(len).any(|&x| x != 0) {
            return Some(libc::EINVAL);
        }
        let listen = b.flags & UB_TP_BIND_LISTEN != 0;
        if b.remote.type_ == UB_ADDR_NONE && !listen {
            return Some(libc::EDESTADDRREQ);
        }
        if b.dev_index != DEV {
            return Some(libc::ENODEV);
        }
        if !listen && b.remote.type_ == UB_ADDR_CNA16 {
            return Some(libc::EINVAL);
        }
        let both = UB_TP_FAST_RETRANSMIT | UB_TP_PER_PACKET;
        if b.attr_flags & both == both {
            return Some(libc::EINVAL);
        }
        None
    }

    fn edited(n: usize, edit: Edit) -> UbTpBind {
        let mut b = base_bind(DEV, KEY_BASE + n as u32);
        edit(&mut b);
        b
    }

    fn numbered() -> impl Iterator<Item = (usize, &'static Case)> {
        CASES.iter().enumerate().map(|(i, c)| (i + 1, c))
    }

    #[test]
    fn the_base_request_is_valid() {
        assert_eq!(kernel_refusal(&base_bind(DEV, KEY_BASE)), None);
        let mut c = base_bind(DEV, KEY_BASE);
        connect_unanswered(&mut c);
        assert_eq!(kernel_refusal(&c), None);
        assert_eq!(c.remote.addr[..4], UNANSWERED);
    }

    #[test]
    fn each_refusal_row_trips_exactly_the_check_it_names() {
        let mut checked = 0;
        for (n, c) in numbered() {
            let Action::Bind(edit) = c.action else {
                continue;
            };
            let b = edited(n, edit);
            let model = kernel_refusal(&b);
            match (c.want, c.todo) {
                (Want::Errno(e), None)
                    if [
                        libc::EPROTONOSUPPORT,
                        libc::EINVAL,
                        libc::EDESTADDRREQ,
                        libc::ENODEV,
                    ]
                    .contains(&e) =>
                {
                    assert_eq!(model, Some(e), "case {n} ({}): {b:?}", c.what);
                    assert_ne!(
                        b,
                        base_bind(DEV, KEY_BASE + n as u32),
                        "case {n} edits nothing"
                    );
                    checked += 1;
                }
                // Valid requests: the failure comes from the channel setup
                // (or, for a TODO row, from the kernel's defect).
                _ => assert_eq!(model, None, "case {n} ({}) is refused early", c.what),
            }
        }
        assert!(checked >= 17, "only {checked} refusal rows");
    }

    #[test]
    fn rows_the_kernel_accepts_cannot_hang() {
        for (n, c) in numbered() {
            let edit = match c.action {
                Action::Bind(e)
                | Action::BindReadOnly(e)
                | Action::BindTwice(e)
                | Action::BindUnprivileged(e) => e,
                _ => continue,
            };
            let b = edited(n, edit);
            if kernel_refusal(&b).is_none() {
                let wait = if b.timeout_ms == 0 {
                    5000
                } else {
                    b.timeout_ms
                };
                assert!(
                    c.nonblock || c.waits || wait <= 300,
                    "case {n} ({}) may wait {wait} ms",
                    c.what
                );
            }
        }
    }

    #[test]
    fn every_refused_bind_is_followed_by_an_unbound_check() {
        for (n, c) in numbered() {
            let binds = !matches!(
                c.action,
                Action::Info { .. } | Action::InfoAt(_) | Action::Read | Action::Write
            );
            let binds_ok = matches!(c.want, Want::Errno(libc::EINPROGRESS | libc::EISCONN));
            if binds && !binds_ok {
                assert_eq!(c.then, Then::Unbound, "case {n} ({})", c.what);
            }
            if binds_ok {
                assert_eq!(c.then, Then::Bound, "case {n} ({})", c.what);
            }
        }
    }

    #[test]
    fn rows_are_named_once_and_their_errnos_print_by_name() {
        for (n, c) in numbered() {
            assert!(!c.what.is_empty(), "case {n}");
            assert_eq!(
                CASES.iter().filter(|d| d.what == c.what).count(),
                1,
                "{}",
                c.what
            );
            if let Want::Errno(e) = c.want {
                assert!(errno_name(e).is_some(), "case {n}: errno {e} has no name");
                assert!(
                    c.what.contains(errno_name(e).unwrap_or("?")),
                    "case {n} does not say it wants {}",
                    errno_text(e)
                );
            }
        }
    }

    #[test]
    fn the_ctp_rows_bind_a_valid_ctp_file_and_check_it_stays_bound() {
        assert_eq!(kernel_refusal(&edited(1, ctp_unanswered)), None);
        for (i, c) in CTP_CASES.iter().enumerate() {
            match c.action {
                Action::Ctp(_) => assert_eq!(c.then, Then::Bound, "{}", c.what),
                Action::Bind(edit) => {
                    // Valid as far as parsing goes: the device refuses it.
                    assert_eq!(kernel_refusal(&edited(i + 1, edit)), None, "{}", c.what);
                    assert_eq!(c.then, Then::Unbound, "{}", c.what);
                }
                _ => panic!("{}: a CTP row binds", c.what),
            }
            if let Want::Errno(e) = c.want {
                assert!(c.what.contains(errno_name(e).unwrap_or("?")), "{}", c.what);
            }
            let named = CASES.iter().chain(CTP_CASES).filter(|d| d.what == c.what);
            assert_eq!(named.count(), 1, "{}", c.what);
        }
        // What the brief names: an oversized write, a busy remote.
        for e in [libc::EMSGSIZE, libc::EADDRINUSE, libc::EADDRNOTAVAIL] {
            assert!(CTP_CASES.iter().any(|c| c.want == Want::Errno(e)));
        }
    }

    #[test]
    fn keys_do_not_collide() {
        let last = KEY_BASE + CASES.len() as u32;
        assert!(KEY_RETRY > last);
        // BindTwice's second key.
        for n in 1..=CASES.len() as u32 {
            let k = KEY_BASE.wrapping_add(n).wrapping_add(0x8000);
            assert!(k > last && k != KEY_RETRY);
        }
    }

    #[test]
    fn the_issue_s_cases_are_all_there() {
        let want = [
            (libc::ENOTCONN, 1),
            (libc::ENOTTY, 2),
            (libc::EPROTONOSUPPORT, 2),
            (libc::EINVAL, 12),
            (libc::EDESTADDRREQ, 1),
            (libc::ENODEV, 1),
            (libc::EAGAIN, 1),
            (libc::ETIMEDOUT, 1),
            (libc::EPERM, 1),
            (libc::EFAULT, 2),
        ];
        for (e, at_least) in want {
            let n = CASES
                .iter()
                .filter(|c| c.want == Want::Errno(e) && c.todo.is_none())
                .count();
            assert!(n >= at_least, "{} rows want {}", n, errno_text(e));
        }
        assert!(CASES.iter().any(|c| c.want == Want::AnyError));
    }

    fn row(want: Want, then: Then, todo: Option<&'static str>) -> Case {
        Case {
            what: "thing",
            nonblock: false,
            action: Action::Read,
            want,
            then,
            todo,
            waits: false,
        }
    }

    fn judged(c: Case, got: Result<(), i32>, then: Option<Result<(), i32>>) -> Verdict {
        verdict(3, &c, &Ok(Outcome { got, then }))
    }

    #[test]
    fn lines_say_what_was_got_and_wanted() {
        let c = row(Want::Errno(libc::EINVAL), Then::Unbound, None);
        let v = judged(c, Err(libc::EINVAL), Some(Err(libc::ENOTCONN)));
        assert_eq!(v.line(), "ok 3 - thing");
        assert!(!v.counts_as_failure());

        let v = judged(c, Err(libc::ENOTTY), Some(Err(libc::ENOTCONN)));
        assert_eq!(v.line(), "not ok 3 - thing: got ENOTTY, want EINVAL");
        assert!(v.counts_as_failure());

        let v = judged(c, Ok(()), Some(Err(libc::ENOTCONN)));
        assert_eq!(v.line(), "not ok 3 - thing: got success, want EINVAL");

        // The errno is right but the refused call bound the fd.
        let v = judged(c, Err(libc::EINVAL), Some(Ok(())));
        assert_eq!(
            v.line(),
            "not ok 3 - thing: got EINVAL then INFO success, want EINVAL then INFO ENOTCONN"
        );

        let c = row(Want::Errno(libc::ENOTCONN), Then::Nothing, None);
        assert_eq!(
            judged(c, Err(4242), None).line(),
            "not ok 3 - thing: got errno 4242, want ENOTCONN"
        );

        let v = verdict(3, &c, &Err(SetupError("open /dev/ub_tp: ENOENT".into())));
        assert_eq!(
            v.line(),
            "not ok 3 - thing: could not run: open /dev/ub_tp: ENOENT"
        );
    }

    #[test]
    fn any_error_rows_record_what_they_got() {
        let c = row(Want::AnyError, Then::Unbound, None);
        let v = judged(c, Err(libc::ETIMEDOUT), Some(Err(libc::ENOTCONN)));
        assert_eq!(v.line(), "ok 3 - thing\n# got ETIMEDOUT");
        let v = judged(c, Ok(()), Some(Ok(())));
        assert_eq!(
            v.line(),
            "not ok 3 - thing: got success then INFO success, want an error then INFO ENOTCONN"
        );
    }

    #[test]
    fn known_kernel_defects_are_reported_but_do_not_fail_the_run() {
        let c = row(Want::Errno(libc::EFAULT), Then::Unbound, Some("why"));
        let bad = judged(c, Err(libc::EFAULT), Some(Ok(())));
        assert_eq!(
            bad.line(),
            "not ok 3 - thing: got EFAULT then INFO success, want EFAULT then INFO ENOTCONN \
             # TODO kernel: why"
        );
        assert!(!bad.counts_as_failure());
        let fixed = judged(c, Err(libc::EFAULT), Some(Err(libc::ENOTCONN)));
        assert_eq!(fixed.line(), "ok 3 - thing # TODO kernel: why");

        let plain = row(Want::Errno(libc::EFAULT), Then::Nothing, None);
        let good = judged(plain, Err(libc::EFAULT), None);
        let failed = judged(plain, Err(libc::EIO), None);
        assert!(passed(&[good.clone(), bad.clone(), fixed.clone()]));
        assert!(!passed(&[good.clone(), bad.clone(), failed.clone()]));
        assert_eq!(
            summary(&[good, bad, fixed, failed]),
            "# abi-check: 4 cases, 2 passed, 1 failed, 1 known kernel defects (TODO)"
        );
    }

    // The runner against a device that is not /dev/ub_tp: it reports what
    // the device really returned.
    #[test]
    fn the_runner_reports_the_device_s_errnos() {
        let null = Path::new("/dev/null");
        let info = case(
            "i",
            Action::Info { version: 1 },
            Want::Errno(0),
            Then::Unbound,
        );
        let o = run_case(null, 0, 1, &info);
        assert_eq!(
            o,
            Ok(Outcome {
                got: Err(libc::ENOTTY),
                then: Some(Err(libc::ENOTTY))
            })
        );
        let read = case("r", Action::Read, Want::Errno(0), Then::Nothing);
        assert_eq!(
            run_case(null, 0, 1, &read),
            Ok(Outcome {
                got: Ok(()),
                then: None
            })
        );
        for a in [Action::BindAt(BAD_POINTER), Action::BindReadOnly(|_| {})] {
            let c = case("b", a, Want::Errno(0), Then::Nothing);
            assert_eq!(
                run_case(null, 0, 1, &c).map(|o| o.got),
                Ok(Err(libc::ENOTTY))
            );
        }
        let missing = run_case(Path::new("/nonexistent/ub_tp"), 0, 1, &read);
        assert!(
            matches!(&missing, Err(SetupError(e)) if e.contains("ENOENT")),
            "{missing:?}"
        );
        let mut lines = Vec::new();
        assert!(!run(null, 0, &CASES[..3], |l| lines.push(l.to_owned())));
        assert_eq!(lines.first().map(String::as_str), Some("1..3"));
        assert_eq!(lines.len(), 5, "{lines:?}");
        assert!(lines[1].starts_with("not ok 1 - "), "{lines:?}");
    }

    #[test]
    fn the_unprivileged_child_reports_back() {
        let c = case(
            "u",
            Action::BindUnprivileged(|_| {}),
            Want::Errno(0),
            Then::Unbound,
        );
        let o = run_case(Path::new("/dev/null"), 0, 1, &c);
        // SAFETY: geteuid only reads this process's credentials.
        if unsafe { libc::geteuid() } == 0 {
            assert_eq!(
                o,
                Ok(Outcome {
                    got: Err(libc::ENOTTY),
                    then: Some(Err(libc::ENOTTY))
                })
            );
        } else {
            assert!(
                matches!(&o, Err(SetupError(e)) if e.contains("child: setgroups: EPERM")),
                "{o:?}"
            );
        }
    }
}
