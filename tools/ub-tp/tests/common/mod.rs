// SPDX-License-Identifier: GPL-2.0
//! A device-free stand-in for a bound channel pair: a `SOCK_SEQPACKET`
//! socket pair keeps message boundaries as a TP Channel does.

use std::os::fd::{FromRawFd, OwnedFd};

use ub_tp::Channel;

pub const MAX: usize = 65536;

pub fn pair() -> (Channel, Channel) {
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for the two descriptors socketpair() writes.
    let r = unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    };
    assert_eq!(r, 0, "socketpair: {}", std::io::Error::last_os_error());
    for fd in fds {
        let size: libc::c_int = 4 << 20;
        // SAFETY: `size` is a live c_int of the length passed.
        unsafe {
            libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_SNDBUF,
                (&size as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
    }
    // SAFETY: socketpair() returned two new descriptors nothing else owns.
    let (a, b) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    (Channel::from_fd(a, MAX), Channel::from_fd(b, MAX))
}
