// SPDX-License-Identifier: GPL-2.0
//! The user-space side of the `ub` generic netlink family.
//!
//! `spec` holds the family's numbering (tied to
//! `Documentation/netlink/specs/ub.yaml` by a test), `attr` the attribute
//! tree ubctl builds requests from and reads replies into, `request` one
//! builder per operation, `reply` the typed, checked decoding of the kernel's
//! replies (untrusted input), `nl` the socket and the extended ACK, `ping`
//! the echo bookkeeping and its summary. `ubctl` and `ub-nlcheck` are thin
//! binaries over this library.

pub mod addr;
pub mod attr;
pub mod cli;
pub mod nl;
pub mod nlcheck;
pub mod nlfuzz;
pub mod ping;
pub mod reply;
pub mod request;
pub mod spec;
