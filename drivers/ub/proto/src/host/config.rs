// SPDX-License-Identifier: GPL-2.0
//! Endpoint and channel configuration, and the rules the specification
//! sets on them. Every value the spec forbids or bounds is refused with a
//! [`ConfigError`] naming the rule, before anything is allocated.

#[cfg(doc)]
use super::super::crc::crc32_le_portable;
use super::super::crc::Crc32Update;
use super::super::net::npi::{Npi, NpiMode};
use super::super::net::nth::{ICRC_LEN, IPV4_LEN, IPV6_LEN, IP_PREFIX_LEN, NTH24_LEN, UDP_LEN};
use super::super::transport::cc::{CcAlgorithm, CcConfig};
use super::super::transport::cm::{cc_code, ChannelParams, CmTiming};
use super::super::transport::hdr::{BitmapSize, CetphKind, RTPH_LEN};
use super::super::transport::psn::{MAX_SEND_WINDOW, PSN_SPACE};
use super::super::transport::{
    RetransmitMode, RtoMode, StaticRto, MAX_OOO_WINDOW, RTO_BASE_MAX_US, RTO_BASE_MIN_US,
};

/// A network address of a UB entity, in one of the header formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Addr {
    /// 16-bit CNA (CFG 6: CTP only).
    Cna16(u16),
    /// 24-bit CNA (CFG 7: RTP, CTP, and the connection manager).
    Cna24(u32),
    /// IPv4 (CFG 3: RTP, UTP, the connection manager).
    Ipv4([u8; 4]),
    /// IPv6 (CFG 4: RTP, UTP, the connection manager).
    Ipv6([u8; 16]),
}

impl Addr {
    /// The address as a number and its width in bits (for routing and
    /// for ordering the two ends of a simultaneous open).
    pub fn key(&self) -> (u128, u8) {
        match *self {
            Self::Cna16(a) => (u128::from(a), 16),
            Self::Cna24(a) => (u128::from(a & 0xff_ffff), 24),
            Self::Ipv4(a) => (u128::from(u32::from_be_bytes(a)), 32),
            Self::Ipv6(a) => (u128::from_be_bytes(a), 128),
        }
    }

    /// Length of the network header in front of a transport header to this
    /// address.
    pub const fn net_header_len(&self) -> usize {
        match self {
            Self::Cna16(_) => super::super::net::nth::NTH16_LEN,
            Self::Cna24(_) => NTH24_LEN,
            Self::Ipv4(_) => IP_PREFIX_LEN + IPV4_LEN + UDP_LEN,
            Self::Ipv6(_) => IP_PREFIX_LEN + IPV6_LEN + UDP_LEN,
        }
    }

    const fn same_format(&self, other: &Addr) -> bool {
        matches!(
            (self, other),
            (Self::Cna16(_), Self::Cna16(_))
                | (Self::Cna24(_), Self::Cna24(_))
                | (Self::Ipv4(_), Self::Ipv4(_))
                | (Self::Ipv6(_), Self::Ipv6(_))
        )
    }
}

/// The addresses of this UB entity (the primary CNA: packets to it may
/// arrive on any port). A format without an address is not used.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LocalAddrs {
    /// 16-bit primary CNA.
    pub cna16: Option<u16>,
    /// 24-bit primary CNA.
    pub cna24: Option<u32>,
    /// IPv4 address.
    pub ipv4: Option<[u8; 4]>,
    /// IPv6 address.
    pub ipv6: Option<[u8; 16]>,
    /// EID of the entity (kept for the layers above; the endpoint sends no
    /// EIDH: its transport headers carry NLP 0).
    pub eid: u128,
}

impl LocalAddrs {
    /// Our address in the format of `remote`, if we have one.
    pub fn matching(&self, remote: &Addr) -> Option<Addr> {
        let a = match remote {
            Addr::Cna16(_) => Addr::Cna16(self.cna16?),
            Addr::Cna24(_) => Addr::Cna24(self.cna24?),
            Addr::Ipv4(_) => Addr::Ipv4(self.ipv4?),
            Addr::Ipv6(_) => Addr::Ipv6(self.ipv6?),
        };
        a.same_format(remote).then_some(a)
    }
}

/// Whole-endpoint configuration.
#[derive(Clone, Copy, Debug)]
pub struct EndpointConfig {
    /// Our addresses.
    pub local: LocalAddrs,
    /// Partition enforcement (IP format).
    pub npi_mode: NpiMode,
    /// Our NPI (the netdev's NPI in loose mode; ignored in strict mode,
    /// which uses the entity's).
    pub npi: Npi,
    /// Number of ports (1..=64).
    pub ports: u8,
    /// Largest network packet (after the LPH, ICRC included) every port
    /// carries; also the smallest `out` buffer `poll_transmit` accepts.
    pub max_packet: u32,
    /// Size of the TP channel table: TPNs 1..=max_channels.
    pub max_channels: u32,
    /// Size of the routing table.
    pub max_routes: u16,
    /// Size of the TP channel group table.
    pub max_groups: u16,
    /// CTP / UTP datagrams queued for sending.
    pub datagram_queue: u16,
    /// Retry timing of the connection manager.
    pub cm: CmTiming,
    /// Channel parameters offered to peers that open a channel to us;
    /// `None` refuses every incoming REQ.
    pub accept: Option<ChannelConfig>,
    /// Seed of the per-flow hash (decorrelates nodes).
    pub hash_seed: u64,
    /// The CRC-32 backend for every ICRC seal and check
    /// ([`Endpoint::icrc`](super::Endpoint) is the one place that uses it):
    /// the kernel's `crc32_le` in `ub.ko`, `ub-host-crc` (carry-less
    /// multiply) on hosts, [`crc32_le_portable`] as the fallback.
    pub icrc: Crc32Update,
}

/// Load balancing of one channel's packets (UB spec §6.5).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LoadBalance {
    /// Every packet carries the channel's UDP source port / LBF and
    /// RT\[0\] = 0, so it keeps one path.
    PerFlow,
    /// Data packets vary the source port / LBF over `2^range_log2` values
    /// and carry RT\[0\] = 1 (switches may spray them).
    PerPacket {
        /// log2 of the number of source ports used (0..=14).
        range_log2: u8,
    },
}

/// The RTO as configured: the spec's four static levels or the dynamic
/// formula. Given in microseconds so that a level that is not one of the
/// four can be refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RtoConfig {
    /// Static RTO, one of 512 µs, 16 ms, 128 ms, 4 s.
    Static {
        /// The level, µs.
        timeout_us: u32,
    },
    /// `base_us × 2^(n × Times)`.
    Dynamic {
        /// Base time, µs (4 … 2 097 152).
        base_us: u32,
        /// Coefficient N.
        n: u8,
    },
}

impl RtoConfig {
    /// The transport's RTO mode, or the rule the configuration breaks.
    pub fn mode(self) -> Result<RtoMode, ConfigError> {
        match self {
            Self::Static { timeout_us } => Ok(RtoMode::Static(match timeout_us {
                512 => StaticRto::Us512,
                16_000 => StaticRto::Ms16,
                128_000 => StaticRto::Ms128,
                4_000_000 => StaticRto::S4,
                other => return Err(ConfigError::StaticRtoLevel(other)),
            })),
            Self::Dynamic { base_us, n } => {
                if !(RTO_BASE_MIN_US..=RTO_BASE_MAX_US).contains(&base_us) {
                    return Err(ConfigError::RtoBase(base_us));
                }
                Ok(RtoMode::Dynamic { base_us, n })
            }
        }
    }
}

/// Configuration of one RTP channel end (ours; the peer proposes or
/// accepts its own, [`ChannelParams::negotiate`] settles the common part).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChannelConfig {
    /// Go-Back-N or selective retransmission.
    pub mode: RetransmitMode,
    /// Fast retransmission (TPNAK / TPSACK driven).
    pub fast_retransmit: bool,
    /// Load balancing of data packets.
    pub lb: LoadBalance,
    /// UDP source port (IP format) or LBF (low 8 bits, CNA format) of the
    /// channel; TPG members differ here. For the accepting side's template
    /// (`EndpointConfig::accept`) each accepted channel XORs the low 8 bits
    /// with the peer's TPN, so accepted channels spread over the paths.
    pub lb_key: u16,
    /// Service level (4 bits) of the channel's packets.
    pub sl: u8,
    /// Receive OOO window W: 128, 256, 512, 1024 or 2048.
    pub ooo_window: u32,
    /// Receive slots for out-of-order packets (a power of two ≤ W; 0 for
    /// Go-Back-N with fast retransmission, which holds nothing).
    pub rx_slots: u32,
    /// Send window, packets (1 ..= 8M − 1); slots are allocated for the
    /// next power of two.
    pub send_window: u32,
    /// Messages queued behind the one being segmented (≥ 1).
    pub send_queue: u16,
    /// RTO.
    pub rto: RtoConfig,
    /// Consecutive RTO expiries tolerated; the next one puts the channel
    /// in ERR (see `Documentation/ub/transport.rst`).
    pub retry_limit: u8,
    /// Transport MTU: payload bytes per packet.
    pub mtu: u32,
    /// Largest message accepted on receive.
    pub max_message: u32,
    /// First PSN we send; `None` draws it from the endpoint's random source
    /// over 0 ..= 16M − 1 as the spec asks.
    pub initial_psn: Option<u32>,
    /// Respond after this many accepted packets (≥ 1).
    pub ack_every: u16,
    /// Longest delay of a coalesced response, ns.
    pub ack_delay_ns: u64,
    /// Out-of-order packets per TPSACK (≥ 1).
    pub sack_threshold: u16,
    /// Largest TPSACK bitmap.
    pub sack_max: BitmapSize,
    /// Congestion control.
    pub cc: CcConfig,
}

impl ChannelConfig {
    /// Selective retransmission with fast retransmit, per-flow, W = 256,
    /// window 256, static RTO 512 µs, retry limit 7, MTU 4096.
    pub const fn default_rtp() -> Self {
        Self {
            mode: RetransmitMode::Selective,
            fast_retransmit: true,
            lb: LoadBalance::PerFlow,
            lb_key: 49_152,
            sl: 0,
            ooo_window: 256,
            rx_slots: 256,
            send_window: 256,
            send_queue: 64,
            rto: RtoConfig::Static { timeout_us: 512 },
            retry_limit: 7,
            mtu: 4096,
            max_message: 1 << 20,
            initial_psn: None,
            ack_every: 1,
            ack_delay_ns: 2_000,
            sack_threshold: 1,
            sack_max: BitmapSize::B1024,
            cc: CcConfig::NONE,
        }
    }

    /// The CETPH layout of the configured congestion control.
    pub const fn cetph(&self) -> Option<CetphKind> {
        match self.cc.alg {
            CcAlgorithm::None => None,
            CcAlgorithm::Caqm { .. } => Some(CetphKind::Caqm),
            CcAlgorithm::Ldcp => Some(CetphKind::Ldcp),
        }
    }

    /// What we propose to (or accept from) the peer.
    pub fn params(&self) -> Result<ChannelParams, ConfigError> {
        Ok(ChannelParams {
            mode: self.mode,
            fast_retransmit: self.fast_retransmit,
            ooo_window: self.ooo_window,
            rto: self.rto.mode()?,
            retry_limit: self.retry_limit,
            mtu: self.mtu,
            cc: match self.cc.alg {
                CcAlgorithm::None => cc_code::NONE,
                CcAlgorithm::Caqm { .. } => cc_code::CAQM,
                CcAlgorithm::Ldcp => cc_code::LDCP,
            },
        })
    }

    /// Send slots to allocate (the window rounded up to a power of two).
    pub fn send_slots(&self) -> u32 {
        self.send_window.checked_next_power_of_two().unwrap_or(0)
    }

    /// Checks every rule; `net_header_len` is the network header of the
    /// channel's format, `max_packet` the largest packet the ports carry.
    pub fn validate(&self, net_header_len: usize, max_packet: u32) -> Result<(), ConfigError> {
        if !self.ooo_window.is_power_of_two() || !(128..=MAX_OOO_WINDOW).contains(&self.ooo_window)
        {
            return Err(ConfigError::OooWindow(self.ooo_window));
        }
        if self.send_window == 0 || self.send_window > MAX_SEND_WINDOW {
            return Err(ConfigError::SendWindow(self.send_window));
        }
        self.rto.mode()?;
        if self.fast_retransmit && matches!(self.lb, LoadBalance::PerPacket { .. }) {
            return Err(ConfigError::FastRetransmitWithPerPacketLb);
        }
        if let Some(psn) = self.initial_psn {
            if psn >= PSN_SPACE {
                return Err(ConfigError::Psn(psn));
            }
        }
        if let LoadBalance::PerPacket { range_log2 } = self.lb {
            if range_log2 > 14 {
                return Err(ConfigError::SprayRange(range_log2));
            }
        }
        let holds = !(self.mode == RetransmitMode::GoBackN && self.fast_retransmit);
        if (self.rx_slots != 0 && !self.rx_slots.is_power_of_two())
            || self.rx_slots > self.ooo_window
            || (holds && self.rx_slots == 0)
        {
            return Err(ConfigError::RxSlots(self.rx_slots));
        }
        if self.send_queue == 0 || self.ack_every == 0 || self.sack_threshold == 0 {
            return Err(ConfigError::Zero);
        }
        if self.sl > 15 {
            return Err(ConfigError::ServiceLevel(self.sl));
        }
        // Header + RTPH + MTU + up to 3 padding bytes + ICRC.
        let max_mtu = u64::from(max_packet)
            .saturating_sub((net_header_len + RTPH_LEN + 3 + ICRC_LEN) as u64)
            .min(u64::from(u16::MAX));
        if self.mtu == 0 || u64::from(self.mtu) > max_mtu {
            return Err(ConfigError::Mtu {
                mtu: self.mtu,
                max: u32::try_from(max_mtu).unwrap_or(0),
            });
        }
        if self.max_message == 0 {
            return Err(ConfigError::Zero);
        }
        Ok(())
    }
}

/// Why a configuration is refused: each variant names the rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConfigError {
    /// OOO window not in {128, 256, 512, 1024, 2048} (§6.4.1).
    OooWindow(u32),
    /// Send window 0 or above 8M − 1 (§6.4.1: max sent − min unacked ≤ 8M − 1).
    SendWindow(u32),
    /// Dynamic RTO base outside 4 ..= 2 097 152 µs (§6.4.2.4).
    RtoBase(u32),
    /// Static RTO not one of 512 µs, 16 ms, 128 ms, 4 s (§6.4.2.4), µs.
    StaticRtoLevel(u32),
    /// Fast retransmission with per-packet load balancing (Table 6-7).
    FastRetransmitWithPerPacketLb,
    /// A PSN outside 24 bits (§6.4.1).
    Psn(u32),
    /// The MTU is zero or the ports cannot carry a full packet of it.
    Mtu {
        /// Requested MTU.
        mtu: u32,
        /// Largest MTU the ports carry in this format.
        max: u32,
    },
    /// Receive slots not a power of two, above W, or zero where
    /// out-of-order packets are held.
    RxSlots(u32),
    /// Source-port spraying range above 2^14.
    SprayRange(u8),
    /// Service level above 15.
    ServiceLevel(u8),
    /// A count that must be at least 1 is 0.
    Zero,
    /// RTP runs only over the IP format or the 24-bit CNA NTH (§6.1, App. B).
    RtpFormat,
    /// UTP runs only over the IP format; CTP only over CNA formats (§6.1).
    DatagramFormat,
    /// We have no address in the remote address's format.
    NoLocalAddress,
    /// Port count outside 1 ..= 64.
    Ports(u8),
    /// Channel table empty or larger than the 24-bit TPN space.
    Channels(u32),
    /// The NPI of the IP format has partition ID 0 (§5.3.3.1).
    Npi,
    /// A live channel uses the address being removed or changed.
    AddressInUse,
}
