// SPDX-License-Identifier: GPL-2.0
//! Placeholder of the `ub` generic netlink family (the real one is merged
//! from its own branch): the core's outgoing calls.

use crate::snapshot::{EchoReply, PortEvent, PortSnapshot, ReplyTo};

/// Announces a port change on the monitor group.
pub(crate) fn notify_port(_port: &PortSnapshot, _ev: PortEvent) {}

/// Sends an echo reply to the requesting socket.
pub(crate) fn echo_reply(_to: &ReplyTo, _reply: &EchoReply) {}
