// SPDX-License-Identifier: GPL-2.0
//! Plain values exchanged between the driver core and the netlink family:
//! what a dump shows and what a request asks. No locks, no references into
//! live objects: the core fills them under its locks, netlink encodes them
//! after.

// Until the netlink family is merged, part of this is unused.
#![allow(dead_code)]

use kernel::prelude::*;

use crate::host::{Addr, NetCounters};
use crate::link::ctrl::Negotiated;
use crate::link::engine::{Counters, RetryReqState};
use crate::link::DllState;
use crate::proto::net::npi::NpiMode;

/// One device (`dev-get`).
#[derive(Clone, Copy)]
pub(crate) struct DevSnapshot {
    /// Device index.
    pub(crate) index: u32,
    /// PCI name, `name_len` bytes.
    pub(crate) name: [u8; 32],
    /// Bytes of `name` in use.
    pub(crate) name_len: usize,
    /// Number of ports.
    pub(crate) ports: u32,
    /// Register interface version.
    pub(crate) version: u32,
    /// Local addresses: 16-bit CNA, 24-bit CNA, IPv4, IPv6.
    pub(crate) addrs: [Option<Addr>; 4],
    /// Partition enforcement.
    pub(crate) npi_mode: NpiMode,
    /// NPI.
    pub(crate) npi: u32,
    /// Network layer counters.
    pub(crate) net: NetCounters,
    /// Echo requests answered.
    pub(crate) echo_requests: u64,
    /// Echo replies received.
    pub(crate) echo_replies: u64,
}

/// Credits of one VL.
#[derive(Clone, Copy, Default)]
pub(crate) struct VlSnapshot {
    /// Cells this port may still send.
    pub(crate) tx_credits: u32,
    /// Cells owed to the peer.
    pub(crate) rx_owed: u32,
    /// Cells granted to the peer at init.
    pub(crate) initial: u32,
}

/// What the driver refused from the device on a port.
#[derive(Clone, Copy, Default)]
pub(crate) struct DevCounters {
    /// Ring head outside the ring.
    pub(crate) bad_head: u64,
    /// `done_len` above the posted length or not whole flits.
    pub(crate) bad_len: u64,
    /// Unknown status bits or DONE clear.
    pub(crate) bad_status: u64,
    /// Head moved back (slots completed twice).
    pub(crate) double_completion: u64,
    /// Interrupts without a cause.
    pub(crate) irq_storm: u64,
    /// Flits the link could not frame.
    pub(crate) garbage_flits: u64,
    /// TX descriptors the device failed.
    pub(crate) tx_desc_errors: u64,
    /// RX descriptors the device failed.
    pub(crate) rx_desc_errors: u64,
    /// Flits reported lost before a buffer.
    pub(crate) rx_lost_flits: u64,
    /// Ring resets.
    pub(crate) ring_resets: u64,
    /// MSI-X messages taken.
    pub(crate) interrupts: u64,
}

/// One port (`port-get`).
#[derive(Clone, Copy)]
pub(crate) struct PortSnapshot {
    pub(crate) dev_index: u32,
    pub(crate) index: u32,
    pub(crate) admin_up: bool,
    pub(crate) phy_up: bool,
    pub(crate) lanes: u32,
    pub(crate) lane_rate_mbps: u32,
    pub(crate) dll: DllState,
    pub(crate) retry: RetryReqState,
    pub(crate) num_retry: u8,
    pub(crate) num_retry_threshold: u8,
    pub(crate) num_phy_reinit_threshold: u8,
    pub(crate) want_sharing: bool,
    pub(crate) negotiated: Option<Negotiated>,
    pub(crate) retry_buf_depth: u32,
    pub(crate) vls: [VlSnapshot; 16],
    pub(crate) vl_count: u8,
    pub(crate) link: Counters,
    pub(crate) link_downs: u64,
    pub(crate) dev: DevCounters,
}

/// `port-set`: unset fields stay.
#[derive(Clone, Copy, Default)]
pub(crate) struct PortSettings {
    pub(crate) admin_up: Option<bool>,
    pub(crate) num_retry_threshold: Option<u8>,
    pub(crate) num_phy_reinit_threshold: Option<u8>,
    pub(crate) want_sharing: Option<bool>,
}

/// One route.
#[derive(Clone, Copy)]
pub(crate) struct RouteSnapshot {
    pub(crate) dev_index: u32,
    pub(crate) dst: Addr,
    pub(crate) prefix_len: u8,
    pub(crate) ports: u64,
    pub(crate) per_packet: bool,
}

/// An `echo` request.
#[derive(Clone, Copy)]
pub(crate) struct EchoRequest {
    pub(crate) dev_index: u32,
    pub(crate) dst: Addr,
    pub(crate) id: u32,
    pub(crate) seq: u32,
    pub(crate) size: u32,
}

/// An echo reply for the requester.
#[derive(Clone, Copy)]
pub(crate) struct EchoReply {
    pub(crate) dev_index: u32,
    pub(crate) id: u32,
    pub(crate) seq: u32,
    pub(crate) size: u32,
    pub(crate) rtt_ns: u64,
    pub(crate) src: Addr,
    pub(crate) port: u32,
}

/// Where an echo reply goes: the requesting socket's port ID (in the
/// initial network namespace).
#[derive(Clone, Copy)]
pub(crate) struct ReplyTo {
    pub(crate) portid: u32,
}

/// Why a port notification is sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PortEvent {
    LinkUp,
    LinkDown,
    Retrain,
    Stopped,
    Recovered,
    DeviceError,
}

/// The request attribute a refusal points at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Field {
    DevIndex,
    PortIndex,
    AdminUp,
    NumRetryThreshold,
    NumPhyReinitThreshold,
    WantSharing,
    Addr,
    Dst,
    PrefixLen,
    Ports,
    LoadBalance,
    NpiMode,
    Npi,
    Size,
}

/// A refused request: the errno, the extended ACK message, and the
/// attribute at fault.
#[derive(Clone, Copy)]
pub(crate) struct Refusal {
    pub(crate) errno: Error,
    pub(crate) msg: &'static CStr,
    pub(crate) field: Option<Field>,
}
