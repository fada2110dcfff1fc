// SPDX-License-Identifier: GPL-2.0
//! `/dev/ub_tp`: TP Channels for user space (the ABI is
//! `include/uapi/linux/ub.h`, the design `Documentation/ub/tp.rst`).
//!
//! Each open file is unbound until `UB_TP_IOC_BIND` makes it one RTP
//! channel of a device, or (with `UB_TP_BIND_CTP`) a CTP end towards one
//! remote CNA (`ctp.rs`); `write()` then sends one whole message (one
//! datagram) and `read()` returns one whole message. Binding needs `CAP_NET_ADMIN` (a channel
//! holds kernel memory and talks to the fabric in the device's name).
//!
//! Every ioctl argument is untrusted: the structs carry their ABI version,
//! reserved fields must be zero, every field is range-checked, and a
//! refused call changes nothing.
//!
//! `poll`/`epoll` report a message to read (`POLLIN`), room to write
//! (`POLLOUT`), the channel's error (`POLLERR`) and its end (`POLLHUP`);
//! the kernel crate's `MiscDevice` has no `poll` hook yet, so
//! [`Registration`] adds one to the file operations the crate builds.
//!
//! Locking: [`TpFile::bound`] and [`TpFile::ctp`] (mutexes, taken in
//! that order) only guard what the file is bound to; readers, writers and pollers clone the channel's `Arc` and
//! drop the lock before they wait.

use kernel::{
    bindings,
    error::to_result,
    fs::{File, Kiocb},
    ioctl::_IOWR,
    iov::{IovIterDest, IovIterSource},
    miscdevice::{MiscDevice, MiscDeviceOptions, MiscDeviceRegistration},
    new_mutex,
    prelude::*,
    sync::{poll::PollTable, Arc, Mutex},
    transmute::{AsBytes, FromBytes},
    types::{ForeignOwnable, Opaque},
    uaccess::{UserPtr, UserSlice, UserSliceWriter},
};

use crate::channel::TpChannel;
use crate::ctp::CtpBound;
use crate::group::{TpGroup, GROUP_HEADER_LEN, MAX_MEMBERS};
use crate::host::{Addr, ChannelConfig, ChannelCounters, LoadBalance};
use crate::transport::cm::ChannelState;
use crate::transport::RetransmitMode;
use crate::ub_net::{tp_config, Net};

/// `UB_TP_ABI_VERSION`.
const ABI_VERSION: u32 = 1;
const UB_ADDR_NONE: u8 = 0;
const UB_ADDR_CNA16: u8 = 1;
const UB_ADDR_CNA24: u8 = 2;
const UB_ADDR_IPV4: u8 = 3;
const UB_ADDR_IPV6: u8 = 4;
const UB_TP_BIND_LISTEN: u32 = 1 << 0;
const UB_TP_BIND_CTP: u32 = 1 << 1;
/// The flags of an RTP bind ([`BindRequest`]; the in-kernel API makes RTP
/// channels only).
const RTP_BIND_FLAGS: u32 = UB_TP_BIND_LISTEN;
const UB_TP_GO_BACK_N: u8 = 0;
const UB_TP_SELECTIVE: u8 = 1;
const UB_TP_FAST_RETRANSMIT: u32 = 1 << 0;
const UB_TP_PER_PACKET: u32 = 1 << 1;
const UB_TP_ATTR_FLAGS: u32 = UB_TP_FAST_RETRANSMIT | UB_TP_PER_PACKET;
/// Default and largest wait of a bind for RTS.
const BIND_TIMEOUT_MS: u32 = 5_000;
const BIND_TIMEOUT_MAX_MS: u32 = 600_000;

/// `struct ub_addr`.
#[repr(C)]
#[derive(Clone, Copy)]
struct UbAddr {
    ty: u8,
    reserved: [u8; 3],
    addr: [u8; 16],
}

/// `struct ub_tp_bind`.
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct UbTpBind {
    version: u32,
    dev_index: u32,
    remote: UbAddr,
    key: u32,
    flags: u32,
    timeout_ms: u32,
    retransmit: u8,
    reserved0: [u8; 3],
    attr_flags: u32,
    mtu: u32,
    tpn: u32,
    peer_tpn: u32,
    max_message: u32,
    members: u32,
    reserved: [u32; 7],
}

/// `struct ub_tp_info`.
#[repr(C)]
#[derive(Clone, Copy)]
struct UbTpInfo {
    version: u32,
    state: u32,
    error: u32,
    tpn: u32,
    peer_tpn: u32,
    rx_queued: u32,
    tx_messages: u64,
    tx_acked: u64,
    rx_messages: u64,
    tx_packets: u64,
    rx_packets: u64,
    rtx_fast: u64,
    rtx_rto: u64,
    rtx_mark_psn: u64,
    rtx_go_back_n: u64,
    rto_expiries: u64,
    rx_duplicates: u64,
    rx_invalid_psn: u64,
    members: u32,
    reserved1: u32,
    rx_dropped: u64,
    reserved: [u64; 4],
}

impl UbTpInfo {
    /// All fields zero.
    const fn zeroed() -> Self {
        Self {
            version: 0,
            state: 0,
            error: 0,
            tpn: 0,
            peer_tpn: 0,
            rx_queued: 0,
            tx_messages: 0,
            tx_acked: 0,
            rx_messages: 0,
            tx_packets: 0,
            rx_packets: 0,
            rtx_fast: 0,
            rtx_rto: 0,
            rtx_mark_psn: 0,
            rtx_go_back_n: 0,
            rto_expiries: 0,
            rx_duplicates: 0,
            rx_invalid_psn: 0,
            members: 0,
            reserved1: 0,
            rx_dropped: 0,
            reserved: [0; 4],
        }
    }

    /// Adds a channel's transport counters (a group's are its members').
    fn add(&mut self, c: &ChannelCounters) {
        self.tx_packets += c.tx_packets;
        self.rx_packets += c.rx_packets;
        self.rtx_fast += c.rtx_fast;
        self.rtx_rto += c.rtx_rto;
        self.rtx_mark_psn += c.rtx_mark_psn;
        self.rtx_go_back_n += c.rtx_go_back_n;
        self.rto_expiries += c.rto_expiries;
        self.rx_duplicates += c.rx_duplicates;
        self.rx_invalid_psn += c.rx_invalid_psn;
    }
}

// The C header's layout, without padding (so every byte is a field).
const _: () = assert!(core::mem::size_of::<UbAddr>() == 20);
const _: () = assert!(core::mem::size_of::<UbTpBind>() == 96);
const _: () = assert!(core::mem::size_of::<UbTpInfo>() == 168);

// SAFETY: Integers and arrays of integers only, no padding (the sizes are
// asserted above): every bit pattern is a valid value.
unsafe impl FromBytes for UbAddr {}
// SAFETY: As above; no padding, so no uninitialised byte is exposed.
unsafe impl AsBytes for UbAddr {}
// SAFETY: As for `UbAddr`.
unsafe impl FromBytes for UbTpBind {}
// SAFETY: As for `UbAddr`.
unsafe impl AsBytes for UbTpBind {}
// SAFETY: As for `UbAddr`.
unsafe impl FromBytes for UbTpInfo {}
// SAFETY: As for `UbAddr`.
unsafe impl AsBytes for UbTpInfo {}

const UB_TP_IOC_BIND: u32 = _IOWR::<UbTpBind>(b'U' as u32, 0x01);
const UB_TP_IOC_INFO: u32 = _IOWR::<UbTpInfo>(b'U' as u32, 0x02);

/// The address `a` names, `None` for `UB_ADDR_NONE`; `EINVAL` for an
/// unknown type or bytes past the address.
fn parse_addr(a: &UbAddr) -> Result<Option<Addr>> {
    if a.reserved != [0; 3] {
        return Err(EINVAL);
    }
    let (addr, n) = match a.ty {
        UB_ADDR_NONE => (None, 0),
        UB_ADDR_CNA16 => (
            Some(Addr::Cna16(u16::from_be_bytes([a.addr[0], a.addr[1]]))),
            2,
        ),
        UB_ADDR_CNA24 => (
            Some(Addr::Cna24(u32::from_be_bytes([
                0, a.addr[0], a.addr[1], a.addr[2],
            ]))),
            3,
        ),
        UB_ADDR_IPV4 => (
            Some(Addr::Ipv4([a.addr[0], a.addr[1], a.addr[2], a.addr[3]])),
            4,
        ),
        UB_ADDR_IPV6 => (Some(Addr::Ipv6(a.addr)), 16),
        _ => return Err(EINVAL),
    };
    if a.addr.iter().skip(n).any(|&b| b != 0) {
        return Err(EINVAL);
    }
    Ok(addr)
}

/// What a `struct ub_tp_bind` asks for, checked: the character device's
/// bind and the in-kernel API (`kapi.rs`) share it.
pub(crate) struct BindRequest {
    /// The device.
    pub(crate) dev_index: u32,
    /// The key both ends name the channel by.
    pub(crate) key: u32,
    /// Wait for the peer to open the channel.
    pub(crate) listen: bool,
    /// The peer (`None`: anyone, for a listen).
    pub(crate) remote: Option<Addr>,
    /// The channel's configuration.
    pub(crate) cfg: ChannelConfig,
    /// Channels of the TP Channel Group the file becomes (1: one channel,
    /// no group).
    pub(crate) members: u32,
}

impl BindRequest {
    /// Checks every field of `b` (its version included): `EINVAL` for a
    /// reserved field that is not zero, an unknown flag or value, a
    /// combination the transport refuses; `EDESTADDRREQ` for a connect
    /// without a peer; `EPROTONOSUPPORT` for another ABI version.
    pub(crate) fn parse(b: &UbTpBind) -> Result<Self> {
        if b.version != ABI_VERSION {
            return Err(EPROTONOSUPPORT);
        }
        if b.reserved != [0; 7]
            || b.reserved0 != [0; 3]
            || b.members > MAX_MEMBERS
            || b.flags & !RTP_BIND_FLAGS != 0
            || b.attr_flags & !UB_TP_ATTR_FLAGS != 0
            || !matches!(b.retransmit, UB_TP_GO_BACK_N | UB_TP_SELECTIVE)
            || !(b.mtu == 0 || (256..=4096).contains(&b.mtu))
            || b.timeout_ms > BIND_TIMEOUT_MAX_MS
        {
            return Err(EINVAL);
        }
        let listen = b.flags & UB_TP_BIND_LISTEN != 0;
        let remote = parse_addr(&b.remote)?;
        if remote.is_none() && !listen {
            return Err(EDESTADDRREQ);
        }
        let mut cfg = tp_config();
        cfg.mode = if b.retransmit == UB_TP_SELECTIVE {
            RetransmitMode::Selective
        } else {
            RetransmitMode::GoBackN
        };
        cfg.fast_retransmit = b.attr_flags & UB_TP_FAST_RETRANSMIT != 0;
        if cfg.mode == RetransmitMode::GoBackN && cfg.fast_retransmit {
            // Go-Back-N with fast retransmission holds nothing out of order.
            cfg.rx_slots = 0;
        }
        if b.attr_flags & UB_TP_PER_PACKET != 0 {
            if cfg.fast_retransmit {
                // Spraying reorders on purpose: every reorder would look
                // like a loss (refused for listening binds too).
                return Err(EINVAL);
            }
            // 16 source ports (or LBFs): enough for the switches to spread
            // the channel over every path.
            cfg.lb = LoadBalance::PerPacket { range_log2: 4 };
        }
        if b.mtu != 0 {
            cfg.mtu = b.mtu;
        }
        Ok(Self {
            dev_index: b.dev_index,
            key: b.key,
            listen,
            remote,
            cfg,
            members: b.members.max(1),
        })
    }
}

/// A file's one channel, as the list of its channels.
fn one(ch: Arc<TpChannel>) -> Result<KVec<Arc<TpChannel>>> {
    let mut v = KVec::with_capacity(1, GFP_KERNEL)?;
    v.push_within_capacity(ch).map_err(|_| ENOMEM)?;
    Ok(v)
}

/// The device and remote of a `UB_TP_BIND_CTP` bind, checked:
/// `EPROTONOSUPPORT` for another ABI version; `EINVAL` for a reserved
/// field or an unknown flag set, a remote that is not a CNA, or any field
/// only RTP has (listen, retransmit, attr_flags, mtu, key, members) set.
fn parse_ctp_bind(b: &UbTpBind) -> Result<(u32, Addr)> {
    if b.version != ABI_VERSION {
        return Err(EPROTONOSUPPORT);
    }
    if b.reserved != [0; 7]
        || b.reserved0 != [0; 3]
        || b.flags != UB_TP_BIND_CTP
        || b.members != 0
        || b.retransmit != 0
        || b.attr_flags != 0
        || b.mtu != 0
        || b.key != 0
        || b.timeout_ms > BIND_TIMEOUT_MAX_MS
    {
        return Err(EINVAL);
    }
    match parse_addr(&b.remote)? {
        Some(a @ (Addr::Cna16(_) | Addr::Cna24(_))) => Ok((b.dev_index, a)),
        _ => Err(EINVAL),
    }
}

/// The `UB_TP_STATE_*` of a channel.
fn state_code(s: ChannelState, closed: bool) -> u32 {
    if closed {
        return 5;
    }
    match s {
        ChannelState::Reset => 0,
        ChannelState::Rtr => 1,
        ChannelState::Rts => 2,
        ChannelState::Suspended => 3,
        ChannelState::Err => 4,
    }
}

/// Whether the file was opened not to wait (`O_NONBLOCK`).
fn kiocb_nonblock<T: ForeignOwnable>(k: &Kiocb<'_, T>) -> bool {
    let raw = k.as_raw();
    // SAFETY: `raw` is the kiocb of the read or write being served, valid
    // for the call, and its `ki_filp` is the file it is on, held open by
    // the caller for the call.
    let f_flags = unsafe { (*(*raw).ki_filp).f_flags };
    f_flags & bindings::O_NONBLOCK != 0
}

/// What a file is bound to.
#[derive(Clone)]
enum Target {
    /// One RTP channel.
    Channel(Arc<TpChannel>),
    /// A TP Channel Group (`group.rs`).
    Group(Arc<TpGroup>),
}

/// A channel or group bound to a file.
#[derive(Clone)]
struct Bound {
    net: Arc<Net>,
    target: Target,
    max_message: u32,
}

impl Bound {
    /// The channels the file holds.
    fn channels(&self) -> &[Arc<TpChannel>] {
        match &self.target {
            Target::Channel(c) => core::slice::from_ref(c),
            Target::Group(g) => &g.members,
        }
    }

    /// Tears the file's channels down.
    fn close(&self) {
        crate::group::close_members(&self.net, self.channels());
    }
}

/// One open `/dev/ub_tp` (see the module documentation).
#[pin_data(PinnedDrop)]
pub(crate) struct TpFile {
    #[pin]
    bound: Mutex<Option<Bound>>,
    /// The CTP end the file is bound to (`UB_TP_BIND_CTP`), if it is one.
    #[pin]
    ctp: Mutex<Option<CtpBound>>,
}

#[pinned_drop]
impl PinnedDrop for TpFile {
    fn drop(self: Pin<&mut Self>) {
        if let Some(b) = self.bound.lock().take() {
            b.close();
        }
        if let Some(c) = self.ctp.lock().take() {
            c.net.ctp_close(&c.end);
        }
    }
}

impl TpFile {
    fn bound(&self) -> Result<Bound> {
        self.bound.lock().clone().ok_or(ENOTCONN)
    }

    /// The CTP end, if the file is bound to one.
    fn ctp(&self) -> Option<CtpBound> {
        self.ctp.lock().clone()
    }

    /// Whether the file is bound (to a channel or a CTP end).
    fn is_bound(&self) -> bool {
        self.bound.lock().is_some() || self.ctp.lock().is_some()
    }

    /// `UB_TP_IOC_BIND` with `UB_TP_BIND_CTP`: no handshake, bound at once.
    /// `b` was read once by [`bind`](Self::bind); the answer goes to
    /// `writer`.
    fn bind_ctp(&self, mut b: UbTpBind, mut writer: UserSliceWriter) -> Result<isize> {
        let (dev_index, remote) = parse_ctp_bind(&b)?;
        // SAFETY: `capable` only reads the current task's credentials.
        if !unsafe { bindings::capable(bindings::CAP_NET_ADMIN as i32) } {
            return Err(EPERM);
        }
        if self.is_bound() {
            return Err(EISCONN);
        }
        let net = crate::registry::get(dev_index).ok_or(ENODEV)?;
        let (end, max_message) = net.ctp_bind(remote)?;
        // The end's handle, as netlink lists it (CTP has no TPN).
        b.tpn = end.handle;
        b.peer_tpn = 0;
        b.max_message = max_message;
        // As for RTP: an answer that cannot be written leaves the file
        // unbound.
        if let Err(e) = writer.write(&b) {
            net.ctp_close(&end);
            return Err(e);
        }
        let g = self.bound.lock();
        let mut c = self.ctp.lock();
        if g.is_some() || c.is_some() {
            drop((c, g));
            net.ctp_close(&end);
            return Err(EISCONN);
        }
        *c = Some(CtpBound {
            net,
            end,
            max_message,
        });
        Ok(0)
    }

    /// `UB_TP_IOC_INFO` of a CTP file: RTS (ERR once the device is gone)
    /// and the datagram counters.
    fn info_ctp(c: &CtpBound, mut writer: UserSliceWriter) -> Result<isize> {
        let g = c.end.inner.lock();
        let state = if g.error.is_some() {
            ChannelState::Err
        } else {
            ChannelState::Rts
        };
        let info = UbTpInfo {
            version: ABI_VERSION,
            state: state_code(state, false),
            error: g.error.map(|e| e.to_errno().unsigned_abs()).unwrap_or(0),
            tpn: c.end.handle,
            rx_queued: u32::try_from(g.rx.len()).unwrap_or(u32::MAX),
            tx_messages: g.tx_messages,
            rx_messages: g.rx_messages,
            tx_packets: g.tx_packets,
            rx_packets: g.rx_packets,
            rx_dropped: g.rx_dropped,
            ..UbTpInfo::zeroed()
        };
        drop(g);
        writer.write(&info)?;
        Ok(0)
    }

    fn bind(&self, file: &File, arg: usize) -> Result<isize> {
        let size = core::mem::size_of::<UbTpBind>();
        let (mut reader, mut writer) =
            UserSlice::new(UserPtr::from_addr(arg), size).reader_writer();
        let mut b: UbTpBind = reader.read()?;
        if b.flags & UB_TP_BIND_CTP != 0 {
            return self.bind_ctp(b, writer);
        }
        let req = BindRequest::parse(&b)?;
        // SAFETY: `capable` only reads the current task's credentials.
        if !unsafe { bindings::capable(bindings::CAP_NET_ADMIN as i32) } {
            return Err(EPERM);
        }
        if self.is_bound() {
            return Err(EISCONN);
        }
        let net = crate::registry::get(b.dev_index).ok_or(ENODEV)?;
        let (listen, remote, cfg) = (req.listen, req.remote, req.cfg);
        let nonblock = file.flags() & kernel::fs::file::flags::O_NONBLOCK != 0;
        let timeout = if b.timeout_ms == 0 {
            BIND_TIMEOUT_MS
        } else {
            b.timeout_ms
        };
        // One deadline for the whole call: waiting for the peer, then for
        // RTS.
        let start = crate::port::now_ns();
        let n = req.members;
        // A connect waits (within the deadline) for a channel of the same
        // peer and key that is still closing.
        let wait_ms = if nonblock { 0 } else { timeout };
        let members = match remote {
            Some(r) if !listen && n > 1 => {
                crate::group::connect_members(&net, r, b.key, n, cfg, wait_ms)?
            }
            from if n > 1 => net.channel_listen_group(from, b.key, n, timeout, nonblock)?,
            from => {
                let ch = match from {
                    Some(r) if !listen => net.channel_connect(r, b.key, cfg, wait_ms)?,
                    from => net.channel_listen(from, b.key, timeout, nonblock)?,
                };
                one(ch.clone()).inspect_err(|_| net.channel_close(&ch))?
            }
        };
        let close = |e: Error| {
            crate::group::close_members(&net, &members);
            e
        };
        if !nonblock {
            for ch in members.iter() {
                let spent_ms = crate::port::now_ns().saturating_sub(start) / 1_000_000;
                let left = u64::from(timeout).saturating_sub(spent_ms).max(1);
                ch.wait_rts(u32::try_from(left).unwrap_or(timeout))
                    .map_err(close)?;
            }
        }
        let first = members.first().ok_or(EINVAL)?.clone();
        let (target, max_message) = if n > 1 {
            let g = TpGroup::new(&net, &members).map_err(close)?;
            let max = cfg.max_message.saturating_sub(GROUP_HEADER_LEN as u32);
            (Target::Group(g), max)
        } else {
            (Target::Channel(first.clone()), cfg.max_message)
        };
        b.tpn = first.tpn;
        b.peer_tpn = net.channel_stats(&first).0.unwrap_or(0);
        b.max_message = max_message;
        // The answer goes out before the file is bound: a bind whose answer
        // cannot be written (EFAULT) leaves the file unbound.
        writer.write(&b).map_err(close)?;
        {
            let mut g = self.bound.lock();
            if g.is_some() || self.ctp.lock().is_some() {
                drop(g);
                return Err(close(EISCONN));
            }
            *g = Some(Bound {
                net: net.clone(),
                target,
                max_message,
            });
        }
        if nonblock
            && members
                .iter()
                .any(|c| c.inner.lock().state != ChannelState::Rts)
        {
            return Err(EINPROGRESS);
        }
        Ok(0)
    }

    /// What a `read()` or `write()` would do now, as `POLL*` bits; the
    /// poll table waits on the channel's wait queue, which every change a
    /// reader or writer waits for wakes.
    fn poll(&self, file: &File, table: &PollTable<'_>) -> u32 {
        if let Some(c) = self.ctp() {
            return c.poll(file, table);
        }
        let Some(b) = self.bound.lock().clone() else {
            // Nothing can be read or written before a bind, and a bind is
            // a call of its own: a poller must not sleep for ever.
            return bindings::POLLHUP;
        };
        let (readable, writable, error, closed) = match &b.target {
            Target::Channel(ch) => {
                table.register_wait(file, &ch.changed);
                let writable = b.net.channel_writable(ch);
                let g = ch.inner.lock();
                (g.rx.len() > 0, writable, g.error.is_some(), g.closed)
            }
            Target::Group(grp) => {
                table.register_wait(file, &grp.wake.changed);
                let writable = grp.writable(&b.net);
                let mut error = false;
                let mut closed = true;
                for c in grp.members.iter() {
                    let g = c.inner.lock();
                    error |= g.error.is_some();
                    closed &= g.closed;
                }
                (grp.readable(), writable, error, closed)
            }
        };
        let mut mask = 0;
        if readable {
            mask |= bindings::POLLIN | bindings::POLLRDNORM;
        }
        if error {
            // read() returns what was received, then the errno; write()
            // fails at once.
            mask |= bindings::POLLERR
                | bindings::POLLIN
                | bindings::POLLRDNORM
                | bindings::POLLOUT
                | bindings::POLLWRNORM;
        } else if closed {
            // read() returns what was received, then 0.
            mask |=
                bindings::POLLHUP | bindings::POLLRDHUP | bindings::POLLIN | bindings::POLLRDNORM;
        } else if writable {
            mask |= bindings::POLLOUT | bindings::POLLWRNORM;
        }
        mask
    }

    fn info(&self, arg: usize) -> Result<isize> {
        let size = core::mem::size_of::<UbTpInfo>();
        let (mut reader, mut writer) =
            UserSlice::new(UserPtr::from_addr(arg), size).reader_writer();
        let req: UbTpInfo = reader.read()?;
        if req.version != ABI_VERSION {
            return Err(EPROTONOSUPPORT);
        }
        if let Some(c) = self.ctp() {
            return Self::info_ctp(&c, writer);
        }
        let b = self.bound()?;
        let chans = b.channels();
        let first = chans.first().ok_or(EINVAL)?;
        let mut info = UbTpInfo {
            version: ABI_VERSION,
            tpn: first.tpn,
            members: u32::try_from(chans.len()).unwrap_or(0),
            ..UbTpInfo::zeroed()
        };
        let mut closed = true;
        let mut error = None;
        for ch in chans {
            let (peer_tpn, c) = b.net.channel_stats(ch);
            if core::ptr::eq(ch, first) {
                info.peer_tpn = peer_tpn.unwrap_or(0);
            }
            info.add(&c.unwrap_or_default());
            let g = ch.inner.lock();
            closed &= g.closed;
            error = error.or(g.error);
            info.rx_queued = info
                .rx_queued
                .saturating_add(u32::try_from(g.rx.len()).unwrap_or(u32::MAX));
            info.tx_messages += g.tx_messages;
            info.tx_acked += g.tx_acked;
            info.rx_messages += g.rx_messages;
        }
        let state = match &b.target {
            Target::Channel(ch) => ch.inner.lock().state,
            Target::Group(g) => g.state(),
        };
        info.state = state_code(state, closed);
        info.error = error.map(|e| e.to_errno().unsigned_abs()).unwrap_or(0);
        writer.write(&info)?;
        Ok(0)
    }
}

/// The misc device (`/dev/ub_tp`).
pub(crate) struct TpDevice;

/// `/dev/ub_tp`'s registration, held by the module: the kernel crate's
/// misc device with a `poll` hook added.
///
/// The crate builds `TpDevice`'s file operations (open, release, read,
/// write, ioctl) as a static; this copies them into `fops`, adds
/// [`poll`], and registers `misc` with the copy. The copy keeps the
/// static's `owner` (this module), so an open file holds the module, and
/// with it this registration, in memory.
///
/// # Invariants
///
/// `misc` is registered (`misc_register`) from a successful `register`
/// until drop, with its `fops` pointing at `fops`; both are pinned.
#[pin_data(PinnedDrop)]
pub(crate) struct Registration {
    #[pin]
    fops: Opaque<bindings::file_operations>,
    #[pin]
    misc: Opaque<bindings::miscdevice>,
}

// SAFETY: `misc_deregister` may run on another thread than
// `misc_register`; after registration the VFS only reads `fops` and the misc
// core owns `misc`.
unsafe impl Send for Registration {}
// SAFETY: No `&self` method exists; the kernel serialises what it does with
// `misc`.
unsafe impl Sync for Registration {}

impl Registration {
    /// Registers the misc device `opts` names.
    pub(crate) fn register(opts: MiscDeviceOptions) -> impl PinInit<Self, Error> {
        try_pin_init!(&this in Self {
            fops <- Opaque::ffi_init(move |slot: *mut bindings::file_operations| {
                // SAFETY: `into_raw` points `fops` at the crate's static
                // vtable of `TpDevice`, valid for ever.
                let mut f = unsafe { *opts.into_raw::<TpDevice>().fops };
                f.poll = Some(poll);
                // SAFETY: The initialiser may write to `slot`.
                unsafe { slot.write(f) };
            }),
            misc <- Opaque::try_ffi_init(move |slot: *mut bindings::miscdevice| {
                let mut raw = opts.into_raw::<TpDevice>();
                // SAFETY: `this` is the struct being initialised, pinned;
                // its `fops` was initialised just before (fields are
                // initialised in order) and lives as long as `misc`.
                raw.fops = Opaque::cast_into(unsafe { core::ptr::addr_of!((*this.as_ptr()).fops) });
                // SAFETY: The initialiser may write to `slot`. The crate's
                // open trampoline treats the `struct miscdevice` as a
                // `MiscDeviceRegistration<TpDevice>`, which is
                // `repr(transparent)` over the same `Opaque<miscdevice>`
                // this field is. `slot` stays valid until `drop`
                // deregisters it (the struct is pinned).
                // INVARIANT: On `Ok`, `misc` is registered with `fops`.
                unsafe {
                    slot.write(raw);
                    to_result(bindings::misc_register(slot))
                }
            }),
        })
    }
}

#[pinned_drop]
impl PinnedDrop for Registration {
    fn drop(self: Pin<&mut Self>) {
        // SAFETY: `misc` is registered (type invariant) and deregistered
        // exactly once, here.
        unsafe { bindings::misc_deregister(self.misc.get()) };
    }
}

/// `poll` of a `/dev/ub_tp` file.
///
/// # Safety
///
/// Called by the VFS for an open file of [`Registration`] (its private
/// data is the `Pin<KBox<TpFile>>` `TpDevice::open` returned, stored there
/// by the crate's open trampoline), with a poll table that is null or valid
/// for the call.
unsafe extern "C" fn poll(
    file: *mut bindings::file,
    table: *mut bindings::poll_table_struct,
) -> bindings::__poll_t {
    // SAFETY: The private data is the `TpFile` stored at open; `release`,
    // which frees it, cannot run while the VFS is in a call on the file.
    let me = unsafe { <Pin<KBox<TpFile>> as ForeignOwnable>::borrow((*file).private_data) };
    // SAFETY: The file is valid for the call, and there is no `fdget_pos`
    // region on this thread.
    let file = unsafe { File::from_raw_file(file) };
    // SAFETY: The table is null or valid for the call (as the caller
    // promises).
    let table = unsafe { PollTable::from_raw(table) };
    me.poll(file, &table)
}

#[vtable]
impl MiscDevice for TpDevice {
    type Ptr = Pin<KBox<TpFile>>;

    fn open(_file: &File, _misc: &MiscDeviceRegistration<Self>) -> Result<Self::Ptr> {
        KBox::try_pin_init(
            try_pin_init!(TpFile {
                bound <- new_mutex!(None),
                ctp <- new_mutex!(None),
            }),
            GFP_KERNEL,
        )
    }

    fn ioctl(me: Pin<&TpFile>, file: &File, cmd: u32, arg: usize) -> Result<isize> {
        match cmd {
            UB_TP_IOC_BIND => me.bind(file, arg),
            UB_TP_IOC_INFO => me.info(arg),
            _ => Err(ENOTTY),
        }
    }

    fn read_iter(kiocb: Kiocb<'_, Self::Ptr>, iov: &mut IovIterDest<'_>) -> Result<usize> {
        let nonblock = kiocb_nonblock(&kiocb);
        if let Some(c) = kiocb.file().ctp() {
            return c.read(iov, nonblock);
        }
        let b = kiocb.file().bound()?;
        let ch = match &b.target {
            Target::Channel(ch) => ch,
            Target::Group(g) => return g.recv(iov, nonblock),
        };
        loop {
            let seen = ch.inner.lock().events;
            if let Some(m) = ch.take_message(iov.len())? {
                let n = iov.copy_to_iter(&m);
                if n < m.len() {
                    // Nothing is lost: the message goes back to the head.
                    ch.untake_message(m);
                    return Err(EFAULT);
                }
                return Ok(n);
            }
            {
                let g = ch.inner.lock();
                if let Some(e) = g.error {
                    return Err(e);
                }
                if g.closed {
                    return Ok(0);
                }
            }
            if nonblock {
                return Err(EAGAIN);
            }
            ch.wait_change(seen)?;
        }
    }

    fn write_iter(kiocb: Kiocb<'_, Self::Ptr>, iov: &mut IovIterSource<'_>) -> Result<usize> {
        let nonblock = kiocb_nonblock(&kiocb);
        if let Some(c) = kiocb.file().ctp() {
            return c.write(iov, nonblock);
        }
        let b = kiocb.file().bound()?;
        let len = iov.len();
        if len == 0 {
            return Err(EINVAL);
        }
        if len > usize::try_from(b.max_message).unwrap_or(0) {
            return Err(EMSGSIZE);
        }
        // A group's messages start with the group header (`group.rs`).
        let head = match b.target {
            Target::Channel(_) => 0,
            Target::Group(_) => GROUP_HEADER_LEN,
        };
        let mut m = KVVec::with_capacity(head + len, GFP_KERNEL)?;
        m.resize(head, 0, GFP_KERNEL)?;
        if iov.copy_from_iter_vec(&mut m, GFP_KERNEL)? != len {
            return Err(EFAULT);
        }
        let ch = match &b.target {
            Target::Channel(ch) => ch,
            Target::Group(g) => return g.send(&b.net, m, nonblock).map(|()| len),
        };
        loop {
            let seen = ch.inner.lock().events;
            match b.net.channel_send(ch, m) {
                Ok(()) => return Ok(len),
                Err((e, Some(back))) if e == EAGAIN => {
                    if nonblock {
                        return Err(EAGAIN);
                    }
                    m = back;
                    ch.wait_change(seen)?;
                }
                Err((e, _)) => return Err(e),
            }
        }
    }
}
