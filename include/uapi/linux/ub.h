/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */
/*
 * UnifiedBus (UB) user-space ABI.
 *
 * Shared by ub.ko, the user-space tools (tools/ub-tp) and the selftests.
 * The "ub" generic netlink family is in <linux/ub_netlink.h>, generated from
 * Documentation/netlink/specs/ub.yaml by scripts/ynl-regen.
 *
 * TP Channels: /dev/ub_tp (Documentation/ub/tp.rst). Each open file
 * descriptor becomes one RTP channel with UB_TP_IOC_BIND, or with
 * UB_TP_BIND_CTP one CTP end towards a remote CNA; write() then sends
 * one whole message (one datagram) and read() returns one whole message.
 * Every struct is fixed-size and starts with the ABI version; reserved
 * fields must be zero.
 *
 * Errors of read() and write() (besides EFAULT, EINTR):
 *   ENOTCONN    not bound yet (UB_TP_IOC_BIND);
 *   EAGAIN      O_NONBLOCK: nothing to read, or the send queue is full;
 *   EMSGSIZE    write() of more than max_message bytes; read() into a
 *               buffer shorter than the next message (it stays queued);
 *   EINVAL      write() of 0 bytes;
 *   in ERR, once every message received before the error has been read:
 *   ETIMEDOUT   the retry limit ran out (no path to the peer);
 *   ECONNRESET  the peer restarted its end or failed it;
 *   ECONNREFUSED the peer refused the channel or never answered;
 *   EPROTO      the peer broke the message stream;
 *   ENOBUFS     more was received than the channel may hold unread
 *               (UB_TP_RX_QUEUE_BYTES): the channel failed rather than
 *               drop a message it had acknowledged;
 *   ECONNABORTED the channel was torn down locally by an administrator
 *               (netlink tp-del, "ubctl tp del").
 * A channel the peer closed reads 0 (end of stream) after its messages;
 * write() then fails with EPIPE.
 *
 * poll()/epoll: POLLIN | POLLRDNORM when a message is queued; POLLOUT |
 * POLLWRNORM when write() would take a message now; in ERR, POLLERR with
 * POLLIN and POLLOUT (read() returns the queued messages, then the errno;
 * write() fails at once); a channel the peer closed, POLLHUP | POLLRDHUP |
 * POLLIN. A file not yet bound reports POLLHUP alone.
 *
 * A CTP file (UB_TP_BIND_CTP) has no handshake and no end of stream: it
 * is in RTS from the bind on; write() blocks (EAGAIN with O_NONBLOCK)
 * while the device's datagram store has no free slot; read() and poll()
 * behave as above; the device going (unbind, rmmod) fails read() (after
 * the queued datagrams) and write() with ENODEV. CTP relies on the link
 * layer for every hop: nothing is acknowledged or retransmitted, and a
 * datagram that finds the receive queue full is dropped (rx_dropped).
 */
#ifndef _UAPI_LINUX_UB_H
#define _UAPI_LINUX_UB_H

#include <linux/ioctl.h>
#include <linux/types.h>
#include <linux/ub_netlink.h>

/* UDP destination port of UB over IPv4/IPv6 (IANA "unified-bus"). */
#define UB_UDP_DPORT	4792

/* The version of the structs below; a caller names the one it was built for. */
#define UB_TP_ABI_VERSION	1

/* ub_addr.type */
#define UB_ADDR_NONE	0	/* UB_TP_BIND_LISTEN only: any peer */
#define UB_ADDR_CNA16	1
#define UB_ADDR_CNA24	2
#define UB_ADDR_IPV4	3
#define UB_ADDR_IPV6	4

/*
 * An address: its bytes in network order at the start of addr (2 for CNA16,
 * 3 for CNA24, 4 for IPv4, 16 for IPv6), the rest zero.
 */
struct ub_addr {
	__u8 type;
	__u8 reserved[3];
	__u8 addr[16];
};

/* ub_tp_bind.flags */
#define UB_TP_BIND_LISTEN	(1U << 0)	/* wait for the peer to open it */
#define UB_TP_BIND_CTP		(1U << 1)	/* CTP datagrams to remote, no channel */
#define UB_TP_BIND_FLAGS	(UB_TP_BIND_LISTEN | UB_TP_BIND_CTP)

/* ub_tp_bind.retransmit: the RTP retransmission mode */
#define UB_TP_GO_BACK_N		0
#define UB_TP_SELECTIVE		1

/* ub_tp_bind.attr_flags */
#define UB_TP_FAST_RETRANSMIT	(1U << 0)	/* TPNAK / TPSACK driven */
#define UB_TP_PER_PACKET	(1U << 1)	/* spray packets over the paths */
#define UB_TP_ATTR_FLAGS	(UB_TP_FAST_RETRANSMIT | UB_TP_PER_PACKET)

/*
 * UB_TP_IOC_BIND: makes the file descriptor one RTP channel on device
 * dev_index, named key at both ends. Without UB_TP_BIND_LISTEN the channel
 * is opened to remote (a peer opening the same key to us at the same time,
 * or before, converges on the same channel); with it, the call waits for a
 * peer to open key to us (from remote, or from anyone if remote.type is
 * UB_ADDR_NONE). RTP runs over IPv4, IPv6 and CNA24 addresses (a CNA16
 * remote is refused with EINVAL). A listening end takes the channel as the
 * peer proposed it (retransmit, attr_flags and mtu apply to connects; the
 * forbidden fast retransmit with per-packet spraying is refused either
 * way). A bind that fails (timeout, signal) tears its channel down, as a
 * close does; the key is free for a new connect to that peer once the
 * teardown is done (its DREQ answered, or about 3 s at most): a connect
 * that finds the key still closing waits for it within timeout_ms, then
 * fails with EBUSY (at once with O_NONBLOCK); EADDRINUSE if a live channel
 * has the key. Blocks until the channel is in RTS, at most timeout_ms
 * (0: 5000); with O_NONBLOCK it returns at once (EINPROGRESS) and poll-free
 * callers retry UB_TP_IOC_INFO until the state is RTS.
 *
 * members 2..UB_TP_MAX_MEMBERS makes the file a TP Channel Group of that
 * many RTP channels to the same peer, keys key .. key + members - 1 (member
 * i on its own UDP source ports or LBFs), bound with the same rules: a
 * listening group waits until one peer has opened every member and claims
 * them at once (with O_NONBLOCK: EAGAIN until then). write() gives each
 * message, whole, to the least-loaded member; read() returns the messages
 * in the order they were written, across members (each carries an 8-byte
 * group header, UB_TP_GROUP_HEADER, so max_message is that much smaller).
 * A member in ERR fails the group: read() returns the messages that can
 * still be delivered in order, then the member's errno; write() fails at
 * once. tpn and peer_tpn are the first member's. Documentation/ub/tp.rst,
 * "TP Channel Groups".
 * With UB_TP_BIND_CTP the file becomes a CTP end towards remote, which
 * must be a UB_ADDR_CNA16 or UB_ADDR_CNA24 address; listen, retransmit,
 * attr_flags, mtu and key must be 0 (EINVAL otherwise; timeout_ms is not
 * used). The bind returns at once: tpn is the CTP end's handle (2^23 and
 * above; the tpn netlink's tp-get lists it under, as CTP packets carry no
 * TPN), peer_tpn is 0, max_message is the largest datagram payload for that
 * address format. One CTP file per device and remote address (EADDRINUSE);
 * an end tp-new made for the remote (ubctl tp add ... transport ctp) is
 * claimed by the bind, with the datagrams it queued. The device needs a
 * local address of the remote's format (EADDRNOTAVAIL). Closing the file
 * frees the address; tp-del of the end makes read() (after the queued
 * datagrams) and write() fail with ECONNABORTED. The in-kernel API
 * (<linux/ub.h>) opens RTP channels only.
 */
struct ub_tp_bind {
	__u32 version;		/* in: UB_TP_ABI_VERSION */
	__u32 dev_index;	/* in: the device (ubctl dev show) */
	struct ub_addr remote;	/* in: the peer */
	__u32 key;		/* in: the channel's name at both ends */
	__u32 flags;		/* in: UB_TP_BIND_* */
	__u32 timeout_ms;	/* in: wait for RTS (0: 5000, at most 600000) */
	__u8 retransmit;	/* in: UB_TP_GO_BACK_N or UB_TP_SELECTIVE */
	__u8 reserved0[3];
	__u32 attr_flags;	/* in: UB_TP_FAST_RETRANSMIT, UB_TP_PER_PACKET */
	__u32 mtu;		/* in: payload bytes per packet, 256..4096 (0: 4096) */
	__u32 tpn;		/* out: this end's TPN */
	__u32 peer_tpn;		/* out: the peer's TPN */
	__u32 max_message;	/* out: the largest message write() and read() carry */
	__u32 members;		/* in: 0 or 1: one channel; 2..8: a group */
	__u32 reserved[7];	/* must be zero */
};

/*
 * The first handle of a CTP end (ub_tp_bind.tpn and ub_tp_info.tpn of a
 * CTP file, tpn in netlink): CTP packets carry no TPN, and handles lie
 * above every TPN of an RTP channel, within 24 bits.
 */
#define UB_TP_CTP_HANDLE_BASE	(1U << 23)

/* Most members of a TP Channel Group (ub_tp_bind.members). */
#define UB_TP_MAX_MEMBERS	8
/* Bytes of the group header in front of each message of a group. */
#define UB_TP_GROUP_HEADER	8

/* ub_tp_info.state */
#define UB_TP_STATE_RESET	0
#define UB_TP_STATE_RTR		1
#define UB_TP_STATE_RTS		2
#define UB_TP_STATE_SUSPENDED	3
#define UB_TP_STATE_ERR		4
#define UB_TP_STATE_CLOSED	5

/*
 * UB_TP_IOC_INFO: the channel's state and counters. For a group: RTS once
 * every member is, ERR once one is; the error of the first failed member;
 * the counters summed over the members. A CTP file: RTS (ERR
 * once the device is gone); tx_messages written, tx_packets sent by the
 * endpoint, rx_packets received from remote, rx_messages queued for
 * read(), rx_dropped; the other counters 0.
 */
struct ub_tp_info {
	__u32 version;		/* in: UB_TP_ABI_VERSION */
	__u32 state;		/* out: UB_TP_STATE_* */
	__u32 error;		/* out: the errno read() and write() fail with in ERR, else 0 */
	__u32 tpn;		/* out */
	__u32 peer_tpn;		/* out */
	__u32 rx_queued;	/* out: messages received, not yet read */
	__u64 tx_messages;	/* out: messages accepted by write() */
	__u64 tx_acked;		/* out: messages the peer acknowledged */
	__u64 rx_messages;	/* out: messages delivered by the transport */
	__u64 tx_packets;	/* out: data packets sent, retransmissions included */
	__u64 rx_packets;	/* out: data packets received, duplicates included */
	__u64 rtx_fast;		/* out: retransmissions after a TPNAK/TPSACK */
	__u64 rtx_rto;		/* out: selective retransmissions after an RTO */
	__u64 rtx_mark_psn;	/* out: second losses found through MarkPSN */
	__u64 rtx_go_back_n;	/* out: Go-Back-N retransmissions */
	__u64 rto_expiries;	/* out */
	__u64 rx_duplicates;	/* out: data packets dropped, PSN already received */
	__u64 rx_invalid_psn;	/* out: data packets dropped, PSN outside the window */
	__u32 members;		/* out: the file's channels (1, a group's; CTP: 0) */
	__u32 reserved1;	/* out: zero */
	__u64 rx_dropped;	/* out: CTP: datagrams dropped, receive queue full */
	__u64 reserved[4];	/* out: zero */
};

/* Bytes of received messages a channel holds unread (see ENOBUFS above). */
#define UB_TP_RX_QUEUE_BYTES	(16U << 20)

#define UB_TP_IOC_BIND	_IOWR('U', 0x01, struct ub_tp_bind)
#define UB_TP_IOC_INFO	_IOWR('U', 0x02, struct ub_tp_info)

#endif /* _UAPI_LINUX_UB_H */
