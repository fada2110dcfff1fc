// SPDX-License-Identifier: GPL-2.0
//! Rust mirrors of `include/uapi/linux/ub.h` (the `/dev/ub_tp` ABI).
//!
//! The layouts are checked twice: by the `const` asserts below (sizes and
//! offsets worked out from the header by hand) and by `tests/abi.rs`, which
//! compiles a C program against the header and compares what the C compiler
//! says with these types.

use std::mem::{offset_of, size_of};

/// UDP destination port of UB over IPv4/IPv6.
pub const UB_UDP_DPORT: u16 = 4792;
/// The version of the structs below this crate was built for.
pub const UB_TP_ABI_VERSION: u32 = 1;

/// `ub_addr.type`: no address (`UB_TP_BIND_LISTEN` only: any peer).
pub const UB_ADDR_NONE: u8 = 0;
/// `ub_addr.type`: a 16-bit CNA.
pub const UB_ADDR_CNA16: u8 = 1;
/// `ub_addr.type`: a 24-bit CNA.
pub const UB_ADDR_CNA24: u8 = 2;
/// `ub_addr.type`: an IPv4 address.
pub const UB_ADDR_IPV4: u8 = 3;
/// `ub_addr.type`: an IPv6 address.
pub const UB_ADDR_IPV6: u8 = 4;

/// `ub_tp_bind.flags`: wait for the peer to open the channel.
pub const UB_TP_BIND_LISTEN: u32 = 1 << 0;
/// `ub_tp_bind.flags`: a CTP end towards a remote CNA, no channel.
pub const UB_TP_BIND_CTP: u32 = 1 << 1;
/// Every `ub_tp_bind.flags` bit the ABI defines.
pub const UB_TP_BIND_FLAGS: u32 = UB_TP_BIND_LISTEN | UB_TP_BIND_CTP;

/// `ub_tp_bind.retransmit`: Go-Back-N.
pub const UB_TP_GO_BACK_N: u8 = 0;
/// `ub_tp_bind.retransmit`: selective retransmission.
pub const UB_TP_SELECTIVE: u8 = 1;

/// `ub_tp_bind.attr_flags`: TPNAK / TPSACK driven fast retransmission.
pub const UB_TP_FAST_RETRANSMIT: u32 = 1 << 0;
/// `ub_tp_bind.attr_flags`: spray packets over the paths.
pub const UB_TP_PER_PACKET: u32 = 1 << 1;
/// Every `ub_tp_bind.attr_flags` bit the ABI defines.
pub const UB_TP_ATTR_FLAGS: u32 = UB_TP_FAST_RETRANSMIT | UB_TP_PER_PACKET;

/// `ub_tp_info.state`: RESET.
pub const UB_TP_STATE_RESET: u32 = 0;
/// `ub_tp_info.state`: ready to receive.
pub const UB_TP_STATE_RTR: u32 = 1;
/// `ub_tp_info.state`: ready to send.
pub const UB_TP_STATE_RTS: u32 = 2;
/// `ub_tp_info.state`: suspended.
pub const UB_TP_STATE_SUSPENDED: u32 = 3;
/// `ub_tp_info.state`: failed (`ub_tp_info.error` says why).
pub const UB_TP_STATE_ERR: u32 = 4;
/// `ub_tp_info.state`: the peer closed its end.
pub const UB_TP_STATE_CLOSED: u32 = 5;

/// Bytes of received messages a channel holds unread (beyond: ENOBUFS).
pub const UB_TP_RX_QUEUE_BYTES: u32 = 16 << 20;

/// Largest `ub_tp_bind.timeout_ms` the kernel takes.
pub const UB_TP_TIMEOUT_MAX_MS: u32 = 600_000;
/// `ub_tp_bind.mtu` bounds (0 means 4096).
pub const UB_TP_MTU_MIN: u32 = 256;
/// `ub_tp_bind.mtu` upper bound.
pub const UB_TP_MTU_MAX: u32 = 4096;
/// Most members of a TP Channel Group (`ub_tp_bind.members`).
pub const UB_TP_MAX_MEMBERS: u32 = 8;
/// The first handle of a CTP end (the bind's and INFO's `tpn` of a CTP
/// file): above every TPN of an RTP channel, within 24 bits.
pub const UB_TP_CTP_HANDLE_BASE: u32 = 1 << 23;
/// Bytes of the group header in front of each message of a group (what a
/// group's `max_message` is smaller by).
pub const UB_TP_GROUP_HEADER: u32 = 8;

/// `struct ub_addr`: the address bytes in network order at the start of
/// `addr`, the rest zero.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UbAddr {
    /// `UB_ADDR_*`.
    pub type_: u8,
    /// Must be zero.
    pub reserved: [u8; 3],
    /// The address bytes.
    pub addr: [u8; 16],
}

/// `struct ub_tp_bind`: the argument of `UB_TP_IOC_BIND`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UbTpBind {
    /// In: `UB_TP_ABI_VERSION`.
    pub version: u32,
    /// In: the device (`ubctl dev show`).
    pub dev_index: u32,
    /// In: the peer.
    pub remote: UbAddr,
    /// In: the channel's name at both ends.
    pub key: u32,
    /// In: `UB_TP_BIND_*`.
    pub flags: u32,
    /// In: how long to wait for RTS (0: 5000, at most 600000).
    pub timeout_ms: u32,
    /// In: `UB_TP_GO_BACK_N` or `UB_TP_SELECTIVE`.
    pub retransmit: u8,
    /// Must be zero.
    pub reserved0: [u8; 3],
    /// In: `UB_TP_FAST_RETRANSMIT`, `UB_TP_PER_PACKET`.
    pub attr_flags: u32,
    /// In: payload bytes per packet, 256..4096 (0: 4096).
    pub mtu: u32,
    /// Out: this end's TPN.
    pub tpn: u32,
    /// Out: the peer's TPN.
    pub peer_tpn: u32,
    /// Out: the largest message write() and read() carry.
    pub max_message: u32,
    /// In: 0 or 1: one channel; 2..=`UB_TP_MAX_MEMBERS`: a TP Channel
    /// Group of that many channels, keys `key`..`key + members - 1`.
    pub members: u32,
    /// Must be zero.
    pub reserved: [u32; 7],
}

/// `struct ub_tp_info`: the argument of `UB_TP_IOC_INFO`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UbTpInfo {
    /// In: `UB_TP_ABI_VERSION`.
    pub version: u32,
    /// Out: `UB_TP_STATE_*`.
    pub state: u32,
    /// Out: the errno read() and write() fail with in ERR, else 0.
    pub error: u32,
    /// Out: this end's TPN.
    pub tpn: u32,
    /// Out: the peer's TPN.
    pub peer_tpn: u32,
    /// Out: messages received, not yet read.
    pub rx_queued: u32,
    /// Out: messages accepted by write().
    pub tx_messages: u64,
    /// Out: messages the peer acknowledged.
    pub tx_acked: u64,
    /// Out: messages delivered by the transport.
    pub rx_messages: u64,
    /// Out: data packets sent, retransmissions included.
    pub tx_packets: u64,
    /// Out: data packets received, duplicates included.
    pub rx_packets: u64,
    /// Out: retransmissions after a TPNAK/TPSACK.
    pub rtx_fast: u64,
    /// Out: selective retransmissions after an RTO.
    pub rtx_rto: u64,
    /// Out: second losses found through MarkPSN.
    pub rtx_mark_psn: u64,
    /// Out: Go-Back-N retransmissions.
    pub rtx_go_back_n: u64,
    /// Out: RTO expiries.
    pub rto_expiries: u64,
    /// Out: data packets dropped, PSN already received.
    pub rx_duplicates: u64,
    /// Out: data packets dropped, PSN outside the window.
    pub rx_invalid_psn: u64,
    /// Out: the channels of the file (1, or a group's members).
    pub members: u32,
    /// Out: zero.
    pub reserved1: u32,
    /// Out: CTP: datagrams dropped, the receive queue was full.
    pub rx_dropped: u64,
    /// Out: zero.
    pub reserved: [u64; 4],
}

// Worked out from the header: ub_addr is 1 + 3 + 16 bytes, byte aligned.
const _: () = assert!(size_of::<UbAddr>() == 20);
const _: () = assert!(offset_of!(UbAddr, addr) == 4);
// ub_tp_bind: two u32, the 20-byte address at 8, then 4-aligned fields up to
// max_message at 60, members and seven reserved u32: 96 bytes.
const _: () = assert!(size_of::<UbTpBind>() == 96);
const _: () = assert!(offset_of!(UbTpBind, remote) == 8);
const _: () = assert!(offset_of!(UbTpBind, key) == 28);
const _: () = assert!(offset_of!(UbTpBind, flags) == 32);
const _: () = assert!(offset_of!(UbTpBind, timeout_ms) == 36);
const _: () = assert!(offset_of!(UbTpBind, retransmit) == 40);
const _: () = assert!(offset_of!(UbTpBind, attr_flags) == 44);
const _: () = assert!(offset_of!(UbTpBind, mtu) == 48);
const _: () = assert!(offset_of!(UbTpBind, tpn) == 52);
const _: () = assert!(offset_of!(UbTpBind, peer_tpn) == 56);
const _: () = assert!(offset_of!(UbTpBind, max_message) == 60);
const _: () = assert!(offset_of!(UbTpBind, members) == 64);
const _: () = assert!(offset_of!(UbTpBind, reserved) == 68);
// ub_tp_info: six u32 (24 bytes, so the u64s start 8-aligned), twelve u64
// counters (96), members and a reserved u32, rx_dropped, four reserved
// u64 (32): 168 bytes.
const _: () = assert!(size_of::<UbTpInfo>() == 168);
const _: () = assert!(offset_of!(UbTpInfo, rx_queued) == 20);
const _: () = assert!(offset_of!(UbTpInfo, tx_messages) == 24);
const _: () = assert!(offset_of!(UbTpInfo, rto_expiries) == 96);
const _: () = assert!(offset_of!(UbTpInfo, rx_duplicates) == 104);
const _: () = assert!(offset_of!(UbTpInfo, rx_invalid_psn) == 112);
const _: () = assert!(offset_of!(UbTpInfo, members) == 120);
const _: () = assert!(offset_of!(UbTpInfo, rx_dropped) == 128);
const _: () = assert!(offset_of!(UbTpInfo, reserved) == 136);

const IOC_NRBITS: u32 = 8;
const IOC_TYPEBITS: u32 = 8;
const IOC_SIZEBITS: u32 = 14;
const IOC_NRSHIFT: u32 = 0;
const IOC_TYPESHIFT: u32 = IOC_NRSHIFT + IOC_NRBITS;
const IOC_SIZESHIFT: u32 = IOC_TYPESHIFT + IOC_TYPEBITS;
const IOC_DIRSHIFT: u32 = IOC_SIZESHIFT + IOC_SIZEBITS;
const IOC_WRITE: u32 = 1;
const IOC_READ: u32 = 2;

/// The kernel's `_IOWR(ty, nr, size)` (asm-generic encoding, as on x86 and
/// arm64). Panics at compile time if `size` does not fit the 14-bit field.
pub const fn iowr(ty: u8, nr: u8, size: usize) -> u32 {
    assert!(size < (1 << IOC_SIZEBITS));
    ((IOC_READ | IOC_WRITE) << IOC_DIRSHIFT)
        | ((size as u32) << IOC_SIZESHIFT)
        | ((ty as u32) << IOC_TYPESHIFT)
        | ((nr as u32) << IOC_NRSHIFT)
}

/// `UB_TP_IOC_BIND`: `_IOWR('U', 0x01, struct ub_tp_bind)`.
pub const UB_TP_IOC_BIND: u32 = iowr(b'U', 0x01, size_of::<UbTpBind>());
/// `UB_TP_IOC_INFO`: `_IOWR('U', 0x02, struct ub_tp_info)`.
pub const UB_TP_IOC_INFO: u32 = iowr(b'U', 0x02, size_of::<UbTpInfo>());

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ioctl_numbers_follow_iowr() {
        // Worked out by hand: dir 3 << 30 | 96 << 16 | 'U' << 8 | 1.
        assert_eq!(UB_TP_IOC_BIND, 0xc060_5501);
        assert_eq!(UB_TP_IOC_INFO, 0xc0a8_5502);
    }
}
