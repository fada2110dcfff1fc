// SPDX-License-Identifier: GPL-2.0
//! The host endpoint: everything between a user's message and a port that
//! carries whole network packets, for one UB entity, as one sans-I/O
//! object (in the style of quinn-proto's `Endpoint` + `Connection` and
//! smoltcp's `Interface::poll`). The driver, the simulator and the fabric
//! tests all run this code; both ends of a channel run the same code and
//! traffic flows both ways at once.
//!
//! [`Endpoint`] owns the local addresses and NPI, routing over its ports,
//! the table of TP channels indexed by TPN with in-band setup and
//! teardown ([`super::transport::cm`]), TP channel groups, segmentation
//! and reassembly, the network header and ICRC, CTP and UTP datagrams,
//! and the counters of each layer. See [`Endpoint`] for the call order.
//!
//! Memory: the channel, route, group and datagram tables are allocated
//! once in [`Endpoint::new`]; each channel's send slots, out-of-order
//! slots and send queue when the channel is created (by
//! [`Endpoint::connect`] or by an incoming REQ); all through the caller's
//! [`Storage`], fallibly. Nothing is allocated per packet. A closed
//! channel drops its buffers and frees its TPN.
//!
//! Message bytes are never copied into the endpoint: [`Endpoint::send`]
//! takes a token, [`Endpoint::poll_transmit`] asks a [`MessageSource`] for
//! the bytes of each packet it builds, and [`Event::MessageAcked`] tells
//! the caller when the token may be freed. Received bytes go up piecewise,
//! in order, to a [`DeliverySink`] during [`Endpoint::handle_packet`];
//! only out-of-order packets are held (in the receive slots).

mod config;
pub mod echo;
mod endpoint;

pub use config::{
    Addr, ChannelConfig, ConfigError, EndpointConfig, LoadBalance, LocalAddrs, RtoConfig,
};
pub use endpoint::{Endpoint, CM_UTP_NLP};

use super::net::nth::LinkMeta;
use super::transport::cm::ChannelState;

/// A fixed-size table has no free entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TableFull;

/// A buffer could not be allocated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AllocError;

/// Where the endpoint's tables and per-channel buffers come from: `Vec` on
/// hosts, `KVec` (with the GFP flags of the calling context) in the
/// kernel. Called by [`Endpoint::new`] and whenever a channel is created,
/// never per packet.
pub trait Storage {
    /// An owned buffer of `T`s.
    type Buf<T>: core::ops::DerefMut<Target = [T]>;
    /// A buffer of `n` elements, each made by `fill`, or [`AllocError`].
    fn alloc<T>(&mut self, n: usize, fill: impl FnMut() -> T) -> Result<Self::Buf<T>, AllocError>;
}

/// A source of random numbers (initial PSNs): `get_random_u32` in the
/// kernel, a seeded PRNG in the simulator.
pub trait Random {
    /// A uniformly distributed 32-bit value.
    fn random_u32(&mut self) -> u32;
}

/// What a message token refers to, when the endpoint asks for its bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MsgRef {
    /// A message posted with [`Endpoint::send`] on channel `tpn`.
    Channel {
        /// TPN.
        tpn: u32,
        /// Token given to `send`.
        token: u64,
    },
    /// A datagram posted with [`Endpoint::send_datagram`].
    Datagram {
        /// Token given to `send_datagram`.
        token: u64,
    },
}

/// The caller's message store: it keeps each posted message's bytes until
/// [`Event::MessageAcked`] / [`Event::DatagramSent`] (or the channel's
/// [`Event::Closed`]) and copies them into packets on demand.
pub trait MessageSource {
    /// Copies bytes `offset .. offset + out.len()` of message `msg` into
    /// `out` (always within the length given when it was posted).
    fn read(&mut self, msg: MsgRef, offset: u32, out: &mut [u8]);
}

/// Received data handed up during [`Endpoint::handle_packet`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Delivery<'a> {
    /// The next piece of an RTP message, in order: pieces of one channel
    /// come in PSN order, never twice, and a message's pieces are
    /// contiguous from offset 0. `complete` is set on the last piece: the
    /// message is delivered (this is the "message delivered" event; it
    /// comes with the bytes so that nothing needs buffering).
    Message {
        /// Channel.
        tpn: u32,
        /// TPMSN of the message.
        tpmsn: u32,
        /// Offset of `bytes` in the message.
        offset: u32,
        /// The bytes.
        bytes: &'a [u8],
        /// `Some(total length)` on the last piece.
        complete: Option<u32>,
    },
    /// A CTP or UTP datagram (one packet, no order, UTP may lose it).
    Datagram {
        /// Which transport carried it.
        kind: DatagramKind,
        /// Sender's address.
        from: Addr,
        /// Payload.
        bytes: &'a [u8],
    },
}

/// Receives what the endpoint hands up.
pub trait DeliverySink {
    /// One piece of received data.
    fn deliver(&mut self, d: &Delivery<'_>);
}

/// CTP or UTP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DatagramKind {
    /// Compact transport: relies on lossless (link-protected) hops; CNA
    /// formats.
    Ctp,
    /// Unreliable transport: may be lost; IP format.
    Utp,
}

/// Why a channel failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorCause {
    /// The RTO expired once more than the retry limit allows.
    RetryLimit,
    /// The peer answered with an unrecoverable completer error.
    PeerError,
    /// The peer opened the channel anew (it lost its end, e.g. restarted).
    PeerReset,
    /// The peer refused the channel (REJ) or never answered the setup.
    SetupFailed,
    /// The peer broke the message stream (TPMSN or length mismatch).
    Protocol,
}

/// Something the caller must know; drain with [`Endpoint::poll_event`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// A peer opened channel `tpn` to us (we accepted its REQ).
    Incoming {
        /// TPN of the new channel.
        tpn: u32,
        /// The peer.
        remote: Addr,
        /// The key both ends named the channel by.
        key: u32,
    },
    /// Channel `tpn` changed state (RESET → RTR → RTS, SUSPENDED, ERR).
    StateChanged {
        /// TPN.
        tpn: u32,
        /// New state.
        state: ChannelState,
    },
    /// Channel `tpn` failed and is in ERR: nothing more is sent or
    /// delivered; every message not yet acknowledged is abandoned.
    ChannelError {
        /// TPN.
        tpn: u32,
        /// Why.
        cause: ErrorCause,
    },
    /// Every packet of message `token` was acknowledged: free its bytes.
    MessageAcked {
        /// TPN.
        tpn: u32,
        /// Token given to `send`.
        token: u64,
    },
    /// A datagram was put on the wire: free its bytes.
    DatagramSent {
        /// Token given to `send_datagram`.
        token: u64,
    },
    /// Channel `tpn`'s send queue has room again after a
    /// [`SendError::WouldBlock`].
    Writable {
        /// TPN.
        tpn: u32,
    },
    /// Channel `tpn` is closed; its TPN and memory are free and its
    /// unacknowledged tokens abandoned.
    Closed {
        /// TPN (free for reuse from now on).
        tpn: u32,
    },
}

/// Why a message cannot be sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendError {
    /// The send queue is full: retry after [`Event::Writable`]. Nothing was
    /// queued.
    WouldBlock,
    /// No such channel (or group).
    NoChannel,
    /// The channel is not in RTS (still being set up, suspended, in ERR or
    /// closing).
    NotReady,
    /// Zero bytes (RTP), or more than the MTU (datagram).
    Length,
    /// The address has no format this transport runs over.
    Format,
}

/// Why a channel cannot be opened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpenError {
    /// The configuration breaks a rule.
    Config(ConfigError),
    /// Every TPN is in use.
    TableFull,
    /// The channel's buffers could not be allocated.
    Alloc,
    /// A channel with this peer and key exists already.
    Exists,
    /// The channel with this peer and key is being torn down (its DREQ is
    /// unanswered): the key is free again at its [`Event::Closed`].
    Closing,
}

impl From<ConfigError> for OpenError {
    fn from(e: ConfigError) -> Self {
        Self::Config(e)
    }
}

impl From<AllocError> for OpenError {
    fn from(_: AllocError) -> Self {
        Self::Alloc
    }
}

/// Why an endpoint cannot be built.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EndpointError {
    /// The configuration breaks a rule.
    Config(ConfigError),
    /// A table could not be allocated.
    Alloc,
}

/// Why a group cannot be formed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GroupError {
    /// 0 or more than 32 members.
    Members,
    /// A member does not exist.
    NoChannel,
    /// A member is in another group already.
    AlreadyMember,
    /// The group table is full.
    TableFull,
}

/// A packet written by [`Endpoint::poll_transmit`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transmit {
    /// Port to send it on.
    pub port: u8,
    /// LPH.CFG and LPH.RT for the link layer.
    pub meta: LinkMeta,
    /// Service level (the port maps it to a VL).
    pub sl: u8,
    /// Length of the network packet at the start of `out`.
    pub len: usize,
    /// What it is.
    pub kind: TransmitKind,
}

/// What a transmitted packet carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TransmitKind {
    /// RTP data.
    Data {
        /// Channel.
        tpn: u32,
        /// PSN.
        psn: u32,
        /// A retransmission.
        retransmission: bool,
    },
    /// TPACK / TPNAK / TPSACK.
    Response {
        /// Channel.
        tpn: u32,
    },
    /// A connection-manager message.
    Setup,
    /// A CTP or UTP datagram.
    Datagram,
}

/// Network-layer counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NetCounters {
    /// Packets handed to `handle_packet`.
    pub rx_packets: u64,
    /// Packets written by `poll_transmit`.
    pub tx_packets: u64,
    /// Dropped: ICRC mismatch.
    pub icrc_drops: u64,
    /// Dropped: the NPI check failed.
    pub npi_drops: u64,
    /// Not sent: no port is up on a route to the destination.
    pub no_route_drops: u64,
    /// Dropped: unparsable network or transport header, unknown class.
    pub malformed: u64,
    /// Dropped: addressed to another entity.
    pub not_for_us: u64,
    /// Dropped: no channel with that TPN (or a setup message for none).
    pub unknown_channel: u64,
    /// Dropped: an RTP packet for a live channel from another address or
    /// source TPN than the channel's peer (forged or stale).
    pub wrong_peer: u64,
}

/// Transport counters of one channel.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ChannelCounters {
    /// Data packets sent (retransmissions included).
    pub tx_packets: u64,
    /// Payload bytes sent (retransmissions included).
    pub tx_bytes: u64,
    /// Data packets received (duplicates included).
    pub rx_packets: u64,
    /// Data packets dropped as duplicates (PSN already received).
    pub rx_duplicates: u64,
    /// Data packets dropped because their PSN lies outside every valid
    /// range (neither in the window nor a recent duplicate).
    pub rx_invalid_psn: u64,
    /// Payload bytes delivered up.
    pub rx_bytes: u64,
    /// Messages acknowledged.
    pub messages_acked: u64,
    /// Messages delivered.
    pub messages_delivered: u64,
    /// Selective retransmissions of first losses reported by a TPNAK or
    /// TPSACK (or asked for by an RNR response). The sender records each
    /// cause as it queues the packet (`transport::tx::RtxCause`).
    pub rtx_fast: u64,
    /// Retransmissions after an RTO expiry (selective).
    pub rtx_rto: u64,
    /// Selective retransmissions of packets already retransmitted once
    /// (second losses, found through MarkPSN before any RTO).
    pub rtx_mark_psn: u64,
    /// Go-Back-N retransmissions (after a TPNAK or an RTO).
    pub rtx_go_back_n: u64,
    /// TPACKs sent.
    pub tpack_sent: u64,
    /// TPNAKs sent.
    pub tpnak_sent: u64,
    /// TPSACKs sent.
    pub tpsack_sent: u64,
    /// TPACKs received.
    pub tpack_rcvd: u64,
    /// TPNAKs received.
    pub tpnak_rcvd: u64,
    /// TPSACKs received.
    pub tpsack_rcvd: u64,
    /// RTO expiries.
    pub rto_expiries: u64,
    /// Current congestion window, bytes (u32::MAX without CC).
    pub cw: u32,
    /// Inflight, CC units.
    pub inflight: u32,
    /// Unacknowledged packets.
    pub outstanding: u32,
    /// Largest number of unacknowledged packets so far.
    pub max_outstanding: u32,
    /// Smoothed RTT, ns (0 before the first sample).
    pub srtt_ns: u64,
}

impl ChannelCounters {
    /// Adds the counters of another channel, as a TP Channel Group shows
    /// its members': every count and the gauges `cw`, `inflight` and
    /// `outstanding` add up (saturating: a `cw` of `u32::MAX`, no
    /// congestion control, stays unbounded); `max_outstanding` and
    /// `srtt_ns` are the larger member's.
    pub fn add(&mut self, o: &Self) {
        for (a, b) in [
            (&mut self.tx_packets, o.tx_packets),
            (&mut self.tx_bytes, o.tx_bytes),
            (&mut self.rx_packets, o.rx_packets),
            (&mut self.rx_duplicates, o.rx_duplicates),
            (&mut self.rx_invalid_psn, o.rx_invalid_psn),
            (&mut self.rx_bytes, o.rx_bytes),
            (&mut self.messages_acked, o.messages_acked),
            (&mut self.messages_delivered, o.messages_delivered),
            (&mut self.rtx_fast, o.rtx_fast),
            (&mut self.rtx_rto, o.rtx_rto),
            (&mut self.rtx_mark_psn, o.rtx_mark_psn),
            (&mut self.rtx_go_back_n, o.rtx_go_back_n),
            (&mut self.tpack_sent, o.tpack_sent),
            (&mut self.tpnak_sent, o.tpnak_sent),
            (&mut self.tpsack_sent, o.tpsack_sent),
            (&mut self.tpack_rcvd, o.tpack_rcvd),
            (&mut self.tpnak_rcvd, o.tpnak_rcvd),
            (&mut self.tpsack_rcvd, o.tpsack_rcvd),
            (&mut self.rto_expiries, o.rto_expiries),
        ] {
            *a = a.saturating_add(b);
        }
        for (a, b) in [
            (&mut self.cw, o.cw),
            (&mut self.inflight, o.inflight),
            (&mut self.outstanding, o.outstanding),
        ] {
            *a = a.saturating_add(b);
        }
        self.max_outstanding = self.max_outstanding.max(o.max_outstanding);
        self.srtt_ns = self.srtt_ns.max(o.srtt_ns);
    }
}

#[cfg(test)]
mod tests {
    use super::ChannelCounters;

    /// A group's counters: counts and gauges add up, `cw` saturates (no
    /// congestion control is unbounded), the maxima are the larger
    /// member's.
    #[test]
    fn channel_counters_add_as_a_group_shows_them() {
        let a = ChannelCounters {
            tx_packets: 10,
            rx_bytes: 100,
            rtx_rto: 1,
            rto_expiries: u64::MAX,
            cw: u32::MAX,
            inflight: 3,
            outstanding: 4,
            max_outstanding: 9,
            srtt_ns: 2_000,
            ..ChannelCounters::default()
        };
        let b = ChannelCounters {
            tx_packets: 5,
            rx_bytes: 50,
            rtx_rto: 2,
            rto_expiries: 1,
            cw: 1,
            inflight: 2,
            outstanding: 6,
            max_outstanding: 7,
            srtt_ns: 3_000,
            tpack_rcvd: 8,
            ..ChannelCounters::default()
        };
        let mut sum = a;
        sum.add(&b);
        assert_eq!(
            sum,
            ChannelCounters {
                tx_packets: 15,
                rx_bytes: 150,
                rtx_rto: 3,
                rto_expiries: u64::MAX,
                cw: u32::MAX,
                inflight: 5,
                outstanding: 10,
                max_outstanding: 9,
                srtt_ns: 3_000,
                tpack_rcvd: 8,
                ..ChannelCounters::default()
            }
        );
        // Adding nothing changes nothing.
        let mut same = a;
        same.add(&ChannelCounters::default());
        assert_eq!(same, a);
    }
}
