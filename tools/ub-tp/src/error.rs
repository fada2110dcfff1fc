// SPDX-License-Identifier: GPL-2.0
//! Channel errors: the errno the kernel returned, which call returned it,
//! and what it means on a TP Channel (the list in `include/uapi/linux/ub.h`).
//!
//! The errno is kept (`Error::errno`) so that callers can react to
//! `EMSGSIZE` or `EAGAIN`; `Display` gives the header's meaning.

use std::fmt;
use std::io;

/// What the channel was doing when it failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// open() of the device node.
    Open,
    /// `UB_TP_IOC_BIND`.
    Bind,
    /// `UB_TP_IOC_INFO`.
    Info,
    /// write() of one message.
    Send,
    /// read() of one message.
    Recv,
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Op::Open => "open",
            Op::Bind => "bind",
            Op::Info => "info",
            Op::Send => "send",
            Op::Recv => "receive",
        })
    }
}

/// A channel operation's failure.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The kernel refused the call with an errno.
    #[error("{op}: {}", describe(*op, *errno))]
    Os {
        /// The call.
        op: Op,
        /// The errno.
        errno: i32,
    },
    /// write() took part of the message (the ABI says it never does).
    #[error("send: the device took {written} of {len} bytes (a message is written whole)")]
    ShortWrite {
        /// Bytes taken.
        written: usize,
        /// Message length.
        len: usize,
    },
    /// The options cannot make a valid `struct ub_tp_bind`; nothing was sent.
    #[error("bind: {0}")]
    Invalid(String),
    /// poll() said the call would not block, and it then failed with
    /// EAGAIN (a broken `poll` hook: without one, poll() always says ready).
    #[error("{op}: poll() reported revents {revents:#x}, then the call said EAGAIN")]
    PollLied {
        /// The call.
        op: Op,
        /// What poll() reported.
        revents: i16,
    },
    /// Poll mode waited longer than its limit.
    #[error("{op}: nothing in {ms} ms (poll() timed out)")]
    PollTimeout {
        /// The call.
        op: Op,
        /// The limit.
        ms: u128,
    },
    /// The kernel answered with something the ABI does not allow.
    #[error("{op}: the device broke the ABI: {what}")]
    Abi {
        /// The call.
        op: Op,
        /// What was wrong.
        what: String,
    },
}

/// This crate's result.
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// The errno, for an `Os` error.
    pub fn errno(&self) -> Option<i32> {
        match self {
            Error::Os { errno, .. } => Some(*errno),
            _ => None,
        }
    }

    /// read() had a buffer shorter than the next message (it stays queued:
    /// retry with [`crate::Channel::max_message`] bytes), or write() got more
    /// than `max_message`.
    pub fn is_message_too_big(&self) -> bool {
        self.errno() == Some(libc::EMSGSIZE)
    }

    /// `O_NONBLOCK`: nothing to read, or the send queue is full.
    pub fn is_would_block(&self) -> bool {
        self.errno() == Some(libc::EAGAIN)
    }

    /// The errno of the last failed system call, for `op`.
    pub(crate) fn last_os(op: Op) -> Error {
        Error::Os {
            op,
            errno: io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(libc::EIO),
        }
    }
}

impl From<Error> for io::Error {
    fn from(e: Error) -> io::Error {
        match e {
            Error::Os { errno, .. } => io::Error::from_raw_os_error(errno),
            other => io::Error::other(other.to_string()),
        }
    }
}

/// The name of the errnos a TP Channel returns.
pub fn errno_name(errno: i32) -> Option<&'static str> {
    Some(match errno {
        libc::ENOTCONN => "ENOTCONN",
        libc::EAGAIN => "EAGAIN",
        libc::EMSGSIZE => "EMSGSIZE",
        libc::EINVAL => "EINVAL",
        libc::ETIMEDOUT => "ETIMEDOUT",
        libc::ECONNRESET => "ECONNRESET",
        libc::ECONNREFUSED => "ECONNREFUSED",
        libc::EPROTO => "EPROTO",
        libc::ENOBUFS => "ENOBUFS",
        libc::ECONNABORTED => "ECONNABORTED",
        libc::EPIPE => "EPIPE",
        libc::EINPROGRESS => "EINPROGRESS",
        libc::ENOTTY => "ENOTTY",
        libc::ENOENT => "ENOENT",
        libc::ENODEV => "ENODEV",
        libc::EACCES => "EACCES",
        libc::EPERM => "EPERM",
        libc::EISCONN => "EISCONN",
        libc::EFAULT => "EFAULT",
        libc::EINTR => "EINTR",
        libc::EPROTONOSUPPORT => "EPROTONOSUPPORT",
        libc::EDESTADDRREQ => "EDESTADDRREQ",
        libc::EADDRINUSE => "EADDRINUSE",
        libc::EBUSY => "EBUSY",
        libc::EADDRNOTAVAIL => "EADDRNOTAVAIL",
        libc::ENETUNREACH => "ENETUNREACH",
        libc::EHOSTUNREACH => "EHOSTUNREACH",
        libc::ENOMEM => "ENOMEM",
        libc::ENXIO => "ENXIO",
        _ => return None,
    })
}

/// What `errno` means for a TP Channel (`include/uapi/linux/ub.h`), for the
/// errnos the header lists and those the open and the ioctls give; `None`
/// for others (the caller prints the system's `strerror`).
pub fn errno_meaning(op: Op, errno: i32) -> Option<&'static str> {
    Some(match (op, errno) {
        (Op::Open, libc::ENOENT) => "no /dev/ub_tp (is ub.ko loaded?)",
        (Op::Open, libc::ENODEV | libc::ENXIO) => "no TP Channel device behind the node",
        (Op::Open | Op::Bind, libc::EACCES | libc::EPERM) => {
            "permission denied (the device node's mode, or CAP_NET_ADMIN to create channels)"
        }
        (Op::Bind | Op::Info, libc::ENOTTY) => "not a TP Channel device (the ioctl is unknown)",
        (Op::Bind, libc::ENODEV) => "no UB device with this index (ubctl dev show)",
        (Op::Bind, libc::EINVAL) => {
            "the kernel refused the bind request (an unknown flag, a bad address or attribute, a non-zero reserved field, or another ABI version)"
        }
        (Op::Bind, libc::EISCONN) => "this file descriptor is bound already",
        (Op::Bind, libc::EINPROGRESS) => {
            "O_NONBLOCK: the channel is being set up (poll info() until RTS)"
        }
        (Op::Bind, libc::EADDRINUSE) => "a channel with this key to this peer exists already",
        (Op::Bind, libc::EBUSY) => {
            "the channel this key had with this peer is still closing (try again)"
        }
        (Op::Bind, libc::ETIMEDOUT) => "the channel did not reach RTS within the timeout",
        (Op::Send | Op::Recv | Op::Info, libc::ENOTCONN) => {
            "not bound yet (UB_TP_IOC_BIND)"
        }
        (_, libc::EAGAIN) => "O_NONBLOCK: nothing to read, or the send queue is full",
        (Op::Send, libc::EMSGSIZE) => "the message is longer than max_message",
        (Op::Recv, libc::EMSGSIZE) => {
            "the buffer is shorter than the next message (it stays queued)"
        }
        (Op::Send, libc::EINVAL) => "a message of 0 bytes",
        (_, libc::ETIMEDOUT) => "the channel failed: retry limit (no path to the peer)",
        (_, libc::ECONNRESET) => "the channel failed: the peer restarted its end or failed it",
        (_, libc::ECONNREFUSED) => {
            "the channel failed: the peer refused the channel or never answered"
        }
        (_, libc::EPROTO) => "the channel failed: the peer broke the message stream",
        (_, libc::ECONNABORTED) => {
            "the channel was torn down locally by an administrator (ubctl tp del)"
        }
        (_, libc::ENOBUFS) => {
            "the channel failed: more was received than it may hold unread (16 MiB)"
        }
        (Op::Send, libc::EPIPE) => "the peer closed the channel",
        _ => return None,
    })
}

/// `errno`'s meaning, its name and the system's text.
pub fn describe(op: Op, errno: i32) -> String {
    let sys = io::Error::from_raw_os_error(errno);
    let sys = sys.to_string();
    let sys = sys.split(" (os error").next().unwrap_or(&sys).to_owned();
    match (errno_meaning(op, errno), errno_name(errno)) {
        (Some(m), Some(n)) => format!("{m} ({n})"),
        (None, Some(n)) => format!("{sys} ({n})"),
        (Some(m), None) => format!("{m} (errno {errno})"),
        (None, None) => format!("{sys} (errno {errno})"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_errnos_read_as_the_header_says() {
        let e = Error::Os {
            op: Op::Recv,
            errno: libc::ETIMEDOUT,
        };
        assert_eq!(
            e.to_string(),
            "receive: the channel failed: retry limit (no path to the peer) (ETIMEDOUT)"
        );
        for errno in [
            libc::ENOTCONN,
            libc::EAGAIN,
            libc::EMSGSIZE,
            libc::EINVAL,
            libc::ETIMEDOUT,
            libc::ECONNRESET,
            libc::ECONNREFUSED,
            libc::EPROTO,
            libc::ENOBUFS,
            libc::ECONNABORTED,
            libc::EPIPE,
        ] {
            assert!(
                errno_meaning(Op::Send, errno).is_some(),
                "write() errno {errno} has no meaning"
            );
            if errno != libc::EPIPE && errno != libc::EINVAL {
                assert!(
                    errno_meaning(Op::Recv, errno).is_some(),
                    "read() errno {errno}"
                );
            }
        }
    }

    #[test]
    fn msgsize_is_told_apart_and_kept_in_io_error() {
        let e = Error::Os {
            op: Op::Recv,
            errno: libc::EMSGSIZE,
        };
        assert!(e.is_message_too_big());
        assert!(!e.is_would_block());
        assert!(e.to_string().contains("stays queued"));
        let io: io::Error = e.into();
        assert_eq!(io.raw_os_error(), Some(libc::EMSGSIZE));
    }

    #[test]
    fn unknown_errno_falls_back_to_strerror() {
        let s = describe(Op::Recv, libc::ENOSPC);
        assert!(s.contains("errno"), "{s}");
        assert!(!s.contains("os error"), "{s}");
    }
}
