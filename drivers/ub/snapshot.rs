// SPDX-License-Identifier: GPL-2.0
//! What netlink reads from and hands to the driver core ([`crate::registry`]):
//! plain copies, no locks, no references into the core.
//!
//! A snapshot is taken by the core under its own locks and returned by
//! value, so a netlink handler never holds a driver lock while it builds or
//! sends a message (and a slow reader cannot stall a port). Everything a
//! handler refuses, the core refuses, or user space asked for in a wrong
//! way, comes back as a [`Refusal`] that names the attribute at fault.

use crate::host::{Addr, ChannelCounters, NetCounters};
use crate::link::ctrl::Negotiated;
use crate::link::engine::{Counters, DllState, RetryReqState};
use crate::net::npi::NpiMode;
use crate::transport::cm::{ChannelParams, ChannelState};
use kernel::prelude::*;

/// Bytes of [`DevSnapshot::name`] (a PCI name such as `0000:00:03.0` is 12).
pub(crate) const NAME_LEN: usize = 32;
/// Local addresses of one device: at most one per [`Addr`] format.
pub(crate) const MAX_ADDRS: usize = 4;
/// VLs of one port (UB spec 4.6).
pub(crate) const MAX_VLS: usize = 16;

/// One device (controller) as the `dev-get` reply shows it.
#[derive(Clone, Copy)]
pub(crate) struct DevSnapshot {
    /// Device index, stable while the device is bound.
    pub(crate) index: u32,
    /// PCI device name, `name_len` bytes, no NUL.
    pub(crate) name: [u8; NAME_LEN],
    /// Bytes of `name` in use.
    pub(crate) name_len: usize,
    /// Number of ports.
    pub(crate) ports: u32,
    /// Register interface version (major in 31:16).
    pub(crate) version: u32,
    /// Local addresses; `None` slots are unused.
    pub(crate) addrs: [Option<Addr>; MAX_ADDRS],
    /// Partition enforcement mode.
    pub(crate) npi_mode: NpiMode,
    /// The NPI (25-bit wire value) configured with `npi-set`.
    pub(crate) npi: u32,
    /// Network layer counters.
    pub(crate) net: NetCounters,
    /// Echo requests answered.
    pub(crate) echo_requests: u64,
    /// Echo replies received.
    pub(crate) echo_replies: u64,
    /// Echo requests not answered and replies not reported.
    pub(crate) echo_dropped: u64,
}

impl DevSnapshot {
    /// The name bytes in use (all of `name` if `name_len` is too large).
    pub(crate) fn name(&self) -> &[u8] {
        self.name.get(..self.name_len).unwrap_or(&self.name)
    }
}

/// Credits of one VL of a port.
#[derive(Clone, Copy, Default)]
pub(crate) struct VlSnapshot {
    /// Cells this port may still send on the VL.
    pub(crate) tx_credits: u32,
    /// Cells this port owes the peer (not yet returned).
    pub(crate) rx_owed: u32,
    /// Initial credit of the VL (cells).
    pub(crate) initial: u32,
    /// Times the VL's next DLLDP had to wait for credit.
    pub(crate) credit_stalls: u64,
}

/// What the driver refused from the device on one port, and how it
/// recovered (the spec's `dev-stats`; everything the device writes is
/// untrusted).
#[derive(Clone, Copy, Default)]
pub(crate) struct DevCounters {
    /// Ring head index outside the ring or the in-flight window.
    pub(crate) bad_head: u64,
    /// `done_len` above the posted length or not whole flits.
    pub(crate) bad_len: u64,
    /// Unknown status bits or a completion without DONE.
    pub(crate) bad_status: u64,
    /// A descriptor completed twice (head moved back).
    pub(crate) double_completion: u64,
    /// Interrupts with no cause, or past the rate limit.
    pub(crate) irq_storm: u64,
    /// Flits the link layer could not frame.
    pub(crate) garbage_flits: u64,
    /// TX descriptors the device failed.
    pub(crate) tx_desc_errors: u64,
    /// RX descriptors the device failed.
    pub(crate) rx_desc_errors: u64,
    /// Flits the device reported lost before a buffer.
    pub(crate) rx_lost_flits: u64,
    /// Times the driver reset the port's rings.
    pub(crate) ring_resets: u64,
    /// MSI-X messages taken on the port's vector.
    pub(crate) interrupts: u64,
}

/// One port as the `port-get` reply and the `port-change-ntf` show it.
#[derive(Clone, Copy)]
pub(crate) struct PortSnapshot {
    /// Index of the port's device.
    pub(crate) dev_index: u32,
    /// Port number on its device.
    pub(crate) index: u32,
    /// Administrative state.
    pub(crate) admin_up: bool,
    /// PHY LinkUp.
    pub(crate) phy_up: bool,
    /// Lanes of the PHY.
    pub(crate) lanes: u32,
    /// Rate of one lane.
    pub(crate) lane_rate_mbps: u32,
    /// Data link layer state.
    pub(crate) dll: DllState,
    /// RETRY_REQ_SM state.
    pub(crate) retry: RetryReqState,
    /// NUM_RETRY.
    pub(crate) num_retry: u8,
    /// NUM_RETRY_THRESHOLD.
    pub(crate) num_retry_threshold: u8,
    /// NUM_PHY_REINIT_THRESHOLD.
    pub(crate) num_phy_reinit_threshold: u8,
    /// Send in credit sharing mode when the peer allows it.
    pub(crate) want_sharing: bool,
    /// The Init Block negotiation result, once the link got that far.
    pub(crate) negotiated: Option<Negotiated>,
    /// This port's retry buffer depth (blocks).
    pub(crate) retry_buf_depth: u32,
    /// Credits per VL; the first `vl_count` are in use.
    pub(crate) vls: [VlSnapshot; MAX_VLS],
    /// VLs in use in `vls`.
    pub(crate) vl_count: u8,
    /// Link engine counters.
    pub(crate) link: Counters,
    /// Times the link went down.
    pub(crate) link_downs: u64,
    /// What the driver refused from the device.
    pub(crate) dev: DevCounters,
}

impl PortSnapshot {
    /// The VLs in use.
    pub(crate) fn vls(&self) -> &[VlSnapshot] {
        self.vls
            .get(..usize::from(self.vl_count))
            .unwrap_or(&self.vls)
    }
}

/// A `port-set` request: `None` leaves a setting as it is.
#[derive(Clone, Copy, Default, PartialEq, Eq, Debug)]
pub(crate) struct PortSettings {
    /// Administrative state.
    pub(crate) admin_up: Option<bool>,
    /// NUM_RETRY_THRESHOLD (at least 1).
    pub(crate) num_retry_threshold: Option<u8>,
    /// NUM_PHY_REINIT_THRESHOLD (at least 1).
    pub(crate) num_phy_reinit_threshold: Option<u8>,
    /// Credit sharing wish (takes effect at the next Init Block exchange).
    pub(crate) want_sharing: Option<bool>,
}

impl PortSettings {
    /// Whether the request changes nothing.
    pub(crate) fn is_empty(&self) -> bool {
        *self == Self::default()
    }
}

/// One route of a device.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct RouteSnapshot {
    /// Index of the route's device.
    pub(crate) dev_index: u32,
    /// Destination prefix (host bits beyond `prefix_len` are zero).
    pub(crate) dst: Addr,
    /// Prefix length in bits (at most the address width).
    pub(crate) prefix_len: u8,
    /// Ports of the equal-cost set (bit n = port n).
    pub(crate) ports: u64,
    /// Spread packets (true) or flows (false) over the ports.
    pub(crate) per_packet: bool,
}

/// An `echo` request.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct EchoRequest {
    /// Device to send from.
    pub(crate) dev_index: u32,
    /// Destination (an IP address: echo rides on UTP).
    pub(crate) dst: Addr,
    /// Chosen by the requester; echoed back.
    pub(crate) id: u32,
    /// Sequence number; echoed back.
    pub(crate) seq: u32,
    /// Payload bytes.
    pub(crate) size: u32,
}

/// An echo reply, for [`crate::netlink::echo_reply`].
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct EchoReply {
    /// Device the reply arrived on.
    pub(crate) dev_index: u32,
    /// The request's id.
    pub(crate) id: u32,
    /// The request's sequence number.
    pub(crate) seq: u32,
    /// Payload bytes.
    pub(crate) size: u32,
    /// Round-trip time measured by the kernel.
    pub(crate) rtt_ns: u64,
    /// The address that answered.
    pub(crate) src: Addr,
    /// The port the reply arrived on.
    pub(crate) port: u32,
}

/// Where an echo reply goes: the netlink socket (port ID) that sent the
/// request, in the initial network namespace.
///
/// Plain data, safe to keep after the handler returned and to drop
/// anywhere: it holds no reference. The `echo` handler refuses requests
/// from other network namespaces, so the init net (which never goes away)
/// is the only namespace a reply is sent in. If the socket has closed by
/// the time the reply comes, the unicast fails and the reply is dropped; a
/// new socket that got the same port ID meanwhile receives an `echo-reply`
/// it did not ask for (as with any netlink unicast to a port ID), which it
/// tells apart by `id`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct ReplyTo {
    /// Netlink port ID of the requesting socket (in the init net).
    pub(crate) portid: u32,
}

/// One TP Channel as the `tp-get` reply shows it, copied by
/// `Net::tp_snapshots` under the endpoint's lock and the channel's.
#[derive(Clone, Copy)]
pub(crate) struct TpSnapshot {
    /// Index of the channel's device.
    pub(crate) dev_index: u32,
    /// What the channel's notifications carry too.
    pub(crate) id: TpEvent,
    /// The peer's TPN (0 until the setup told it).
    pub(crate) peer_tpn: u32,
    /// The parameters both ends agreed (the proposal until then); `None`
    /// if the endpoint no longer has the channel.
    pub(crate) params: Option<ChannelParams>,
    /// Bound to a file or an in-kernel user.
    pub(crate) claimed: bool,
    /// Messages received and not yet read.
    pub(crate) rx_queued: u32,
    /// The endpoint's transport counters (`None` as for `params`, and for
    /// a CTP end).
    pub(crate) counters: Option<ChannelCounters>,
    /// A CTP end's datagram counters (`None` for an RTP channel).
    pub(crate) ctp: Option<CtpCounters>,
    /// Messages the user sent.
    pub(crate) tx_messages: u64,
    /// Of those, messages acknowledged.
    pub(crate) tx_acked: u64,
    /// Whole messages received.
    pub(crate) rx_messages: u64,
}

/// What a CTP end counted (`ctp.rs`).
#[derive(Clone, Copy, Default, Debug)]
pub(crate) struct CtpCounters {
    /// Datagrams the endpoint sent.
    pub(crate) tx_packets: u64,
    /// Datagrams received from the remote (queued or dropped).
    pub(crate) rx_packets: u64,
    /// Of those, dropped: the receive queue was full.
    pub(crate) rx_dropped: u64,
}

/// A TP Channel's identity and state: a `tp-change-ntf`, and the head of
/// a [`TpSnapshot`].
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct TpEvent {
    /// TPN on this device (a CTP end's handle).
    pub(crate) tpn: u32,
    /// The peer's address.
    pub(crate) peer: Addr,
    /// The key both ends name the channel by (none for CTP).
    pub(crate) key: u32,
    /// A CTP end (`tpn` is its handle, `key` means nothing), not an RTP
    /// channel.
    pub(crate) ctp: bool,
    /// The channel's state.
    pub(crate) state: ChannelState,
    /// The endpoint freed the channel (reported as the `closed` state).
    pub(crate) closed: bool,
    /// The errno the channel failed with (positive), 0 if none.
    pub(crate) error: u32,
}

/// Most members of a TP Channel Group (the spec's `members` check).
pub(crate) const MAX_MEMBERS: usize = crate::group::MAX_MEMBERS as usize;

/// One TP Channel Group as the `tpg-get` reply shows it, copied by
/// `Net::tpg_snapshots` under the endpoint's lock and each member's.
#[derive(Clone, Copy)]
pub(crate) struct TpgSnapshot {
    /// Index of the group's device.
    pub(crate) dev_index: u32,
    /// What the group's notifications carry too.
    pub(crate) id: TpgEvent,
    /// Bound to a file (a group made by `tpg-new` waits unclaimed).
    pub(crate) claimed: bool,
    /// Messages received by the members and not yet read.
    pub(crate) rx_queued: u32,
    /// The members' transport counters, summed (`ChannelCounters::add`).
    pub(crate) counters: ChannelCounters,
    /// Messages the user sent, over every member.
    pub(crate) tx_messages: u64,
    /// Of those, messages acknowledged.
    pub(crate) tx_acked: u64,
    /// Whole messages received, over every member.
    pub(crate) rx_messages: u64,
    /// The members in key order; the first `id.members` are in use.
    pub(crate) member: [TpgMember; MAX_MEMBERS],
}

impl TpgSnapshot {
    /// The members in use.
    pub(crate) fn members(&self) -> &[TpgMember] {
        self.member
            .get(..usize::try_from(self.id.members).unwrap_or(0))
            .unwrap_or(&self.member)
    }
}

/// One member of a [`TpgSnapshot`].
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct TpgMember {
    /// The member channel's identity and state.
    pub(crate) id: TpEvent,
    /// The peer's TPN (0 until the setup told it).
    pub(crate) peer_tpn: u32,
}

/// A TP Channel Group's identity and state: a `tpg-change-ntf`, and the
/// head of a [`TpgSnapshot`].
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct TpgEvent {
    /// The group as a channel: the first member's TPN (the group's name),
    /// the peer, the group's key (its first member's), the group's state
    /// (RTS once every member is, ERR once one failed), `closed` once the
    /// group ended, and the first member error.
    pub(crate) head: TpEvent,
    /// Number of members.
    pub(crate) members: u32,
}

/// Why a `port-change-ntf` was sent (the spec's `port-event`).
// The driver sends link-up and link-down so far; the other kinds are the
// spec's, kept for the port events not yet announced.
#[allow(dead_code)]
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum PortEvent {
    /// The link reached DLL_Normal.
    LinkUp,
    /// The link went down.
    LinkDown,
    /// The link is retraining.
    Retrain,
    /// The driver stopped the port (device misbehaviour it could not
    /// recover from).
    Stopped,
    /// The driver recovered the port (rings reset).
    Recovered,
    /// The device did something the driver refused (counted in `dev-stats`).
    DeviceError,
}

/// A request attribute, independent of the attribute set that carries it.
///
/// [`crate::netlink`] maps it to the attribute of the operation's set so
/// that the extended ACK points at the attribute at fault.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Field {
    /// The device index.
    DevIndex,
    /// The port index.
    PortIndex,
    /// `admin-up`.
    AdminUp,
    /// `num-retry-threshold`.
    NumRetryThreshold,
    /// `num-phy-reinit-threshold`.
    NumPhyReinitThreshold,
    /// `want-sharing`.
    WantSharing,
    /// A local address (`addr` of `addr-add`/`addr-del`).
    Addr,
    /// A destination (`dst` of routes and echo).
    Dst,
    /// `prefix-len`.
    PrefixLen,
    /// `ports` of a route.
    Ports,
    /// `load-balance` of a route.
    LoadBalance,
    /// `npi-mode`.
    NpiMode,
    /// `npi`.
    Npi,
    /// `size` of an echo request.
    Size,
    /// The TPN of a TP Channel.
    Tpn,
    /// The peer of a TP Channel (`peer` of `tp-new`).
    Peer,
    /// `key` of a TP Channel.
    Key,
    /// `state` of `tp-set`.
    State,
    /// `transport` (RTP or CTP) of `tp-new`.
    Transport,
    /// `mode` (retransmission algorithm) of a TP Channel.
    Mode,
    /// `fast-retransmit` of a TP Channel.
    FastRetransmit,
    /// `mtu` of a TP Channel.
    Mtu,
    /// `ooo-window` of a TP Channel.
    OooWindow,
    /// `rto-static-us` of a TP Channel.
    RtoStatic,
    /// `rto-base-us` of a TP Channel.
    RtoBase,
    /// `rto-n` of a TP Channel.
    RtoN,
    /// `retry-limit` of a TP Channel.
    RetryLimit,
    /// `cc` of a TP Channel.
    Cc,
    /// `lb-range` of a TP Channel.
    LbRange,
    /// `lb-key` of a TP Channel.
    LbKey,
    /// `send-window` of a TP Channel.
    SendWindow,
    /// `members` of a TP Channel Group.
    Members,
}

/// Why a request was refused. Nothing has changed when one is returned.
///
/// `msg` goes into the extended ACK (netlink keeps the pointer, hence
/// `'static`); `field`, when set, makes the extended ACK point at that
/// attribute of the request.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Refusal {
    /// The error the request fails with.
    pub(crate) errno: kernel::error::Error,
    /// Human-readable reason.
    pub(crate) msg: &'static CStr,
    /// The attribute at fault, if one is.
    pub(crate) field: Option<Field>,
}

impl Refusal {
    /// A refusal caused by the attribute `field`.
    pub(crate) const fn of(field: Field, errno: kernel::error::Error, msg: &'static CStr) -> Self {
        Self {
            errno,
            msg,
            field: Some(field),
        }
    }

    /// A refusal not caused by any one attribute.
    pub(crate) const fn general(errno: kernel::error::Error, msg: &'static CStr) -> Self {
        Self {
            errno,
            msg,
            field: None,
        }
    }

    /// No device with that index.
    pub(crate) const fn no_device() -> Self {
        Self::of(Field::DevIndex, ENODEV, c"no UB device with this index")
    }

    /// No port with that index on the device.
    pub(crate) const fn no_port() -> Self {
        Self::of(
            Field::PortIndex,
            ENODEV,
            c"no port with this index on the device",
        )
    }

    /// No TP Channel with that TPN on the device.
    pub(crate) const fn no_channel() -> Self {
        Self::of(
            Field::Tpn,
            ENOENT,
            c"the device has no TP Channel with this TPN",
        )
    }

    /// No TP Channel Group whose first member has that TPN on the device.
    pub(crate) const fn no_group() -> Self {
        Self::of(
            Field::Tpn,
            ENOENT,
            c"the device has no TP Channel Group whose first member has this TPN",
        )
    }
}
