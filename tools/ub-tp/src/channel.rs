// SPDX-License-Identifier: GPL-2.0
//! A TP Channel: one bound file descriptor of `/dev/ub_tp`.
//!
//! Call order: [`Channel::bind`] (or [`Channel::connect`] /
//! [`Channel::listen`], or [`Channel::bind_ctp`] for a CTP end, which has
//! no setup), which returns once the channel is in RTS (or at once
//! with `nonblocking`, then poll [`Channel::info`] until RTS); then any mix
//! of [`Channel::send`], [`Channel::recv`] / [`Channel::recv_into`] and
//! [`Channel::info`]; drop closes the channel (the peer reads end of stream
//! after its messages). A failed channel keeps delivering what it received
//! before the failure, then every call fails with the channel's errno.

use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::addr::Addr;
use crate::error::{Error, Op, Result};
use crate::uapi::*;

/// The smallest buffer [`Channel::recv`] reads into.
const MIN_RECV_BUFFER: usize = 4096;
/// The largest: a channel holds no more unread.
const RECV_BUFFER_MAX: usize = UB_TP_RX_QUEUE_BYTES as usize;

/// The device node.
pub const DEFAULT_PATH: &str = "/dev/ub_tp";

/// The RTP retransmission mode.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Retransmit {
    /// Go-Back-N.
    #[default]
    GoBackN,
    /// Selective retransmission.
    Selective,
}

impl std::str::FromStr for Retransmit {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "gbn" | "go-back-n" => Ok(Retransmit::GoBackN),
            "sr" | "selective" => Ok(Retransmit::Selective),
            _ => Err(format!("'{s}' is not a retransmission mode (gbn, sr)")),
        }
    }
}

/// What [`Channel::bind`] asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BindOptions {
    /// The device node (default [`DEFAULT_PATH`]).
    pub path: PathBuf,
    /// The peer: required to connect; to listen, `None` takes any peer.
    pub remote: Option<Addr>,
    /// The channel's name at both ends.
    pub key: u32,
    /// Wait for the peer to open the channel (`UB_TP_BIND_LISTEN`).
    pub listen: bool,
    /// Open with `O_NONBLOCK`: bind returns at once (`EINPROGRESS`) and
    /// read/write return `EAGAIN` instead of waiting.
    pub nonblocking: bool,
    /// How long bind waits for RTS, in ms (0: the kernel's 5000).
    pub timeout_ms: u32,
    /// The RTP retransmission mode.
    pub retransmit: Retransmit,
    /// TPNAK / TPSACK driven fast retransmission.
    pub fast_retransmit: bool,
    /// Spray packets over the paths.
    pub per_packet: bool,
    /// Payload bytes per packet, 256..=4096 (0: 4096).
    pub mtu: u32,
    /// 0 or 1: one channel; 2..=8: a TP Channel Group of that many
    /// channels, keys `key`..`key + members - 1`.
    pub members: u32,
    /// A CTP end towards `remote` (a CNA) instead of an RTP channel
    /// (`UB_TP_BIND_CTP`): no key, no listen, no RTP attribute.
    pub ctp: bool,
}

impl Default for BindOptions {
    fn default() -> Self {
        BindOptions {
            path: PathBuf::from(DEFAULT_PATH),
            remote: None,
            key: 0,
            listen: false,
            nonblocking: false,
            timeout_ms: 0,
            retransmit: Retransmit::GoBackN,
            fast_retransmit: false,
            per_packet: false,
            mtu: 0,
            members: 0,
            ctp: false,
        }
    }
}

impl BindOptions {
    /// The `struct ub_tp_bind` for `dev_index`, or why the options cannot
    /// make one (checked here so that a mistake gets a clear message rather
    /// than the kernel's EINVAL).
    pub fn to_raw(&self, dev_index: u32) -> Result<UbTpBind> {
        if self.ctp {
            return self.to_raw_ctp(dev_index);
        }
        let remote = match (self.remote, self.listen) {
            (Some(a), _) => a.to_raw(),
            (None, true) => UbAddr::default(),
            (None, false) => {
                return Err(Error::Invalid(
                    "connecting needs the peer's address".to_owned(),
                ))
            }
        };
        if self.timeout_ms > UB_TP_TIMEOUT_MAX_MS {
            return Err(Error::Invalid(format!(
                "timeout {} ms is longer than {UB_TP_TIMEOUT_MAX_MS} ms",
                self.timeout_ms
            )));
        }
        if self.mtu != 0 && !(UB_TP_MTU_MIN..=UB_TP_MTU_MAX).contains(&self.mtu) {
            return Err(Error::Invalid(format!(
                "MTU {} is outside {UB_TP_MTU_MIN}..={UB_TP_MTU_MAX}",
                self.mtu
            )));
        }
        if self.members > UB_TP_MAX_MEMBERS {
            return Err(Error::Invalid(format!(
                "a group has at most {UB_TP_MAX_MEMBERS} members, not {}",
                self.members
            )));
        }
        let mut attr_flags = 0;
        if self.fast_retransmit {
            attr_flags |= UB_TP_FAST_RETRANSMIT;
        }
        if self.per_packet {
            attr_flags |= UB_TP_PER_PACKET;
        }
        Ok(UbTpBind {
            version: UB_TP_ABI_VERSION,
            dev_index,
            remote,
            key: self.key,
            flags: if self.listen { UB_TP_BIND_LISTEN } else { 0 },
            timeout_ms: self.timeout_ms,
            retransmit: match self.retransmit {
                Retransmit::GoBackN => UB_TP_GO_BACK_N,
                Retransmit::Selective => UB_TP_SELECTIVE,
            },
            attr_flags,
            mtu: self.mtu,
            members: self.members,
            ..UbTpBind::default()
        })
    }

    /// [`to_raw`](Self::to_raw) of a CTP bind: only the remote CNA (and the
    /// device) may be given.
    fn to_raw_ctp(&self, dev_index: u32) -> Result<UbTpBind> {
        let remote = match self.remote {
            Some(a @ (Addr::Cna16(_) | Addr::Cna24(_))) => a.to_raw(),
            Some(a) => {
                return Err(Error::Invalid(format!(
                    "CTP runs over CNA addresses, not {a}"
                )))
            }
            None => return Err(Error::Invalid("CTP needs the remote's CNA".to_owned())),
        };
        let rtp_only = [
            (self.listen, "listen"),
            (self.key != 0, "a key"),
            (
                self.retransmit != Retransmit::GoBackN,
                "a retransmission mode",
            ),
            (self.fast_retransmit, "fast retransmission"),
            (self.per_packet, "per-packet spraying"),
            (self.mtu != 0, "an MTU"),
        ];
        if let Some((_, what)) = rtp_only.iter().find(|(set, _)| *set) {
            return Err(Error::Invalid(format!(
                "CTP has no channel: {what} applies to RTP only"
            )));
        }
        Ok(UbTpBind {
            version: UB_TP_ABI_VERSION,
            dev_index,
            remote,
            flags: UB_TP_BIND_CTP,
            timeout_ms: self.timeout_ms.min(UB_TP_TIMEOUT_MAX_MS),
            ..UbTpBind::default()
        })
    }
}

/// `ub_tp_info.state`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum State {
    /// RESET.
    Reset,
    /// Ready to receive.
    Rtr,
    /// Ready to send.
    Rts,
    /// Suspended.
    Suspended,
    /// Failed.
    Err,
    /// The peer closed its end.
    Closed,
    /// A state this crate does not know (a newer kernel).
    Unknown(u32),
}

impl From<u32> for State {
    fn from(v: u32) -> State {
        match v {
            UB_TP_STATE_RESET => State::Reset,
            UB_TP_STATE_RTR => State::Rtr,
            UB_TP_STATE_RTS => State::Rts,
            UB_TP_STATE_SUSPENDED => State::Suspended,
            UB_TP_STATE_ERR => State::Err,
            UB_TP_STATE_CLOSED => State::Closed,
            other => State::Unknown(other),
        }
    }
}

/// A channel's state and counters (`UB_TP_IOC_INFO`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Info {
    /// The state.
    pub state: State,
    /// In ERR: the errno read() and write() fail with, else 0.
    pub error: i32,
    /// This end's TPN.
    pub tpn: u32,
    /// The peer's TPN.
    pub peer_tpn: u32,
    /// Messages received, not yet read.
    pub rx_queued: u32,
    /// Messages accepted by write().
    pub tx_messages: u64,
    /// Messages the peer acknowledged.
    pub tx_acked: u64,
    /// Messages delivered by the transport.
    pub rx_messages: u64,
    /// Data packets sent, retransmissions included.
    pub tx_packets: u64,
    /// Data packets received, duplicates included.
    pub rx_packets: u64,
    /// Retransmissions after a TPNAK/TPSACK.
    pub rtx_fast: u64,
    /// Selective retransmissions after an RTO.
    pub rtx_rto: u64,
    /// Second losses found through MarkPSN.
    pub rtx_mark_psn: u64,
    /// Go-Back-N retransmissions.
    pub rtx_go_back_n: u64,
    /// RTO expiries.
    pub rto_expiries: u64,
    /// Data packets dropped as duplicates (PSN already received).
    pub rx_duplicates: u64,
    /// Data packets dropped because their PSN lies outside the window.
    pub rx_invalid_psn: u64,
    /// The file's channels: 1, or a group's members (whose counters the
    /// others sum).
    pub members: u32,
    /// CTP: datagrams dropped because the receive queue was full.
    pub rx_dropped: u64,
}

impl Info {
    /// The safe form of what the kernel wrote (it names no version of its
    /// own, so only the error field is checked).
    pub fn from_raw(raw: &UbTpInfo) -> Result<Info> {
        let error = i32::try_from(raw.error).map_err(|_| Error::Abi {
            op: Op::Info,
            what: format!("error {} is not an errno", raw.error),
        })?;
        Ok(Info {
            state: State::from(raw.state),
            error,
            tpn: raw.tpn,
            peer_tpn: raw.peer_tpn,
            rx_queued: raw.rx_queued,
            tx_messages: raw.tx_messages,
            tx_acked: raw.tx_acked,
            rx_messages: raw.rx_messages,
            tx_packets: raw.tx_packets,
            rx_packets: raw.rx_packets,
            rtx_fast: raw.rtx_fast,
            rtx_rto: raw.rtx_rto,
            rtx_mark_psn: raw.rtx_mark_psn,
            rtx_go_back_n: raw.rtx_go_back_n,
            rto_expiries: raw.rto_expiries,
            rx_duplicates: raw.rx_duplicates,
            rx_invalid_psn: raw.rx_invalid_psn,
            members: raw.members,
            rx_dropped: raw.rx_dropped,
        })
    }
}

/// One bound TP Channel.
#[derive(Debug)]
pub struct Channel {
    fd: OwnedFd,
    tpn: u32,
    peer_tpn: u32,
    max_message: u32,
    /// Poll mode ([`Channel::use_poll`]).
    polled: bool,
    /// Poll mode's limit on one wait.
    poll_timeout: Option<std::time::Duration>,
    /// Times poll mode waited in poll().
    poll_waits: std::cell::Cell<u64>,
}

fn open(path: &Path, nonblocking: bool) -> Result<OwnedFd> {
    let c = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| Error::Invalid(format!("{} contains a NUL byte", path.display())))?;
    let mut flags = libc::O_RDWR | libc::O_CLOEXEC;
    if nonblocking {
        flags |= libc::O_NONBLOCK;
    }
    // SAFETY: `c` is a NUL-terminated string that outlives the call.
    let fd = unsafe { libc::open(c.as_ptr(), flags) };
    if fd < 0 {
        return Err(Error::last_os(Op::Open));
    }
    // SAFETY: open() returned a new descriptor nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

impl Channel {
    /// Opens the device and binds the descriptor to one RTP channel on
    /// device `dev_index` (`UB_TP_IOC_BIND`).
    pub fn bind(dev_index: u32, opts: &BindOptions) -> Result<Channel> {
        let mut raw = opts.to_raw(dev_index)?;
        let fd = open(&opts.path, opts.nonblocking)?;
        // SAFETY: `raw` is a live, writable `struct ub_tp_bind` of the size
        // the request number encodes.
        let r = unsafe {
            libc::ioctl(
                fd.as_raw_fd(),
                UB_TP_IOC_BIND as _,
                &mut raw as *mut UbTpBind,
            )
        };
        if r < 0 {
            let e = Error::last_os(Op::Bind);
            // O_NONBLOCK: the setup goes on; the outputs come from info().
            if !(opts.nonblocking && e.errno() == Some(libc::EINPROGRESS)) {
                return Err(e);
            }
        }
        Ok(Channel {
            fd,
            tpn: raw.tpn,
            peer_tpn: raw.peer_tpn,
            max_message: raw.max_message,
            polled: false,
            poll_timeout: None,
            poll_waits: std::cell::Cell::new(0),
        })
    }

    /// Adopts a descriptor that is bound already (inherited from the
    /// process that bound it, say) and carries messages of at most
    /// `max_message` bytes; `tpn()` and `peer_tpn()` read 0 (ask `info()`).
    /// Any descriptor with message boundaries works, which is how the tests
    /// run the stream code over a `SOCK_SEQPACKET` socket pair.
    pub fn from_fd(fd: OwnedFd, max_message: usize) -> Channel {
        Channel {
            fd,
            tpn: 0,
            peer_tpn: 0,
            max_message: u32::try_from(max_message).unwrap_or(u32::MAX),
            polled: false,
            poll_timeout: None,
            poll_waits: std::cell::Cell::new(0),
        }
    }

    /// Opens channel `key` to `remote`.
    pub fn connect(dev_index: u32, remote: Addr, key: u32, opts: &BindOptions) -> Result<Channel> {
        let opts = BindOptions {
            remote: Some(remote),
            key,
            listen: false,
            ..opts.clone()
        };
        Channel::bind(dev_index, &opts)
    }

    /// Binds a CTP end towards `remote` (a CNA): datagrams of at most
    /// [`max_message`](Self::max_message) bytes, one per send() and
    /// recv(), repaired by the link layer only (no acknowledgement, no
    /// end of stream). `opts` gives the device node and `nonblocking`.
    pub fn bind_ctp(dev_index: u32, remote: Addr, opts: &BindOptions) -> Result<Channel> {
        let opts = BindOptions {
            remote: Some(remote),
            ctp: true,
            ..opts.clone()
        };
        Channel::bind(dev_index, &opts)
    }

    /// Waits for a peer (`from`, or anyone) to open channel `key` to us.
    pub fn listen(
        dev_index: u32,
        from: Option<Addr>,
        key: u32,
        opts: &BindOptions,
    ) -> Result<Channel> {
        let opts = BindOptions {
            remote: from,
            key,
            listen: true,
            ..opts.clone()
        };
        Channel::bind(dev_index, &opts)
    }

    /// Poll mode: the descriptor becomes `O_NONBLOCK`, and [`send`],
    /// [`recv`] and [`recv_into`] wait in poll() (`POLLOUT`, `POLLIN`)
    /// instead of in the kernel whenever the call would block. A call that
    /// says EAGAIN after poll() reported the descriptor ready fails with
    /// [`Error::PollLied`]: one reader and one writer per channel, so
    /// nothing else can take what poll() saw. A wait longer than `timeout`
    /// (`None`: no limit) fails with [`Error::PollTimeout`].
    ///
    /// [`send`]: Channel::send
    /// [`recv`]: Channel::recv
    /// [`recv_into`]: Channel::recv_into
    pub fn use_poll(&mut self, timeout: Option<std::time::Duration>) -> Result<()> {
        let fd = self.fd.as_raw_fd();
        // SAFETY: F_GETFL and F_SETFL on a descriptor this channel owns.
        let ok = unsafe {
            let flags = libc::fcntl(fd, libc::F_GETFL);
            flags >= 0 && libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) >= 0
        };
        if !ok {
            return Err(Error::last_os(Op::Open));
        }
        self.polled = true;
        self.poll_timeout = timeout;
        Ok(())
    }

    /// Whether poll mode is on.
    pub fn is_polled(&self) -> bool {
        self.polled
    }

    /// Runs `call`; in poll mode, waits in poll() for `events` and calls
    /// again for as long as it says EAGAIN, and only once per readiness.
    fn polled<T>(
        &self,
        op: Op,
        events: libc::c_short,
        mut call: impl FnMut() -> Result<T>,
    ) -> Result<T> {
        let mut ready: libc::c_short = 0;
        loop {
            match call() {
                Err(e) if self.polled && e.is_would_block() => {
                    if ready != 0 {
                        return Err(Error::PollLied { op, revents: ready });
                    }
                    self.poll_waits.set(self.poll_waits.get() + 1);
                    ready = self.wait(events, self.poll_timeout, op)?;
                    if ready == 0 {
                        let ms = self.poll_timeout.map_or(0, |t| t.as_millis());
                        return Err(Error::PollTimeout { op, ms });
                    }
                }
                r => return r,
            }
        }
    }

    /// How often poll mode waited in poll() for a call that would block.
    pub fn poll_waits(&self) -> u64 {
        self.poll_waits.get()
    }

    /// Waits in poll() for `events` (`POLLIN`, `POLLOUT`), at most
    /// `timeout` (`None`: for ever): the revents, 0 if the time ran out.
    pub fn wait(
        &self,
        events: libc::c_short,
        timeout: Option<std::time::Duration>,
        op: Op,
    ) -> Result<libc::c_short> {
        let ms = timeout.map_or(-1, |t| {
            libc::c_int::try_from(t.as_millis()).unwrap_or(libc::c_int::MAX)
        });
        let mut p = libc::pollfd {
            fd: self.fd.as_raw_fd(),
            events,
            revents: 0,
        };
        loop {
            // SAFETY: `p` is one live pollfd, as the count says.
            let r = unsafe { libc::poll(&mut p, 1, ms) };
            if r >= 0 {
                return Ok(if r > 0 { p.revents } else { 0 });
            }
            let e = Error::last_os(op);
            if e.errno() != Some(libc::EINTR) {
                return Err(e);
            }
        }
    }

    /// Sends `msg` as one message (one write()).
    pub fn send(&self, msg: &[u8]) -> Result<()> {
        self.polled(Op::Send, libc::POLLOUT, || self.send_once(msg))
    }

    fn send_once(&self, msg: &[u8]) -> Result<()> {
        // SAFETY: `msg` is valid for reads of `msg.len()` bytes.
        let n = unsafe { libc::write(self.fd.as_raw_fd(), msg.as_ptr().cast(), msg.len()) };
        if n < 0 {
            return Err(Error::last_os(Op::Send));
        }
        let written = n.unsigned_abs();
        if written != msg.len() {
            return Err(Error::ShortWrite {
                written,
                len: msg.len(),
            });
        }
        Ok(())
    }

    /// Reads the next message into `buf`: its length, or 0 at the end of
    /// the stream (the peer closed; messages are never empty). A buffer
    /// shorter than the message fails with EMSGSIZE
    /// ([`Error::is_message_too_big`]) and the message stays queued.
    pub fn recv_into(&self, buf: &mut [u8]) -> Result<usize> {
        self.polled(Op::Recv, libc::POLLIN, || self.recv_into_once(buf))
    }

    fn recv_into_once(&self, buf: &mut [u8]) -> Result<usize> {
        // SAFETY: `buf` is valid for writes of `buf.len()` bytes.
        let n = unsafe { libc::read(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        if n < 0 {
            return Err(Error::last_os(Op::Recv));
        }
        let n = n.unsigned_abs();
        if n > buf.len() {
            return Err(Error::Abi {
                op: Op::Recv,
                what: format!("read() returned {n} for a {}-byte buffer", buf.len()),
            });
        }
        Ok(n)
    }

    /// Reads the next message into `buf`, which becomes exactly the message
    /// (empty at the end of the stream). Its capacity grows to
    /// `max_message` once; if `max_message` is not known yet (a
    /// non-blocking bind) or a message is larger anyway, it doubles on
    /// EMSGSIZE up to [`UB_TP_RX_QUEUE_BYTES`], the most a channel holds.
    pub fn recv(&self, buf: &mut Vec<u8>) -> Result<usize> {
        let mut want = usize::try_from(self.max_message)
            .unwrap_or(usize::MAX)
            .max(MIN_RECV_BUFFER);
        self.polled(Op::Recv, libc::POLLIN, || self.recv_once(buf, &mut want))
    }

    fn recv_once(&self, buf: &mut Vec<u8>, want: &mut usize) -> Result<usize> {
        loop {
            buf.clear();
            buf.reserve(*want);
            let spare = buf.spare_capacity_mut();
            // SAFETY: the spare capacity is valid for writes of its length;
            // read() only writes bytes (never reads them).
            let n =
                unsafe { libc::read(self.fd.as_raw_fd(), spare.as_mut_ptr().cast(), spare.len()) };
            if n < 0 {
                let e = Error::last_os(Op::Recv);
                let cap = spare.len();
                if e.is_message_too_big() && cap < RECV_BUFFER_MAX {
                    *want = cap.saturating_mul(2).min(RECV_BUFFER_MAX);
                    continue;
                }
                return Err(e);
            }
            let n = n.unsigned_abs();
            if n > spare.len() {
                return Err(Error::Abi {
                    op: Op::Recv,
                    what: format!("read() returned {n} for a {}-byte buffer", spare.len()),
                });
            }
            // SAFETY: read() initialised the first `n` bytes, within capacity.
            unsafe { buf.set_len(n) };
            return Ok(n);
        }
    }

    /// Waits until a message (or the end of the stream, or the channel's
    /// error) can be read, at most `timeout`: false if none came in time.
    pub fn wait_readable(&self, timeout: std::time::Duration) -> Result<bool> {
        Ok(self.wait(libc::POLLIN, Some(timeout), Op::Recv)? != 0)
    }

    /// The channel's state and counters.
    pub fn info(&self) -> Result<Info> {
        let mut raw = UbTpInfo {
            version: UB_TP_ABI_VERSION,
            ..UbTpInfo::default()
        };
        // SAFETY: `raw` is a live, writable `struct ub_tp_info` of the size
        // the request number encodes.
        let r = unsafe {
            libc::ioctl(
                self.fd.as_raw_fd(),
                UB_TP_IOC_INFO as _,
                &mut raw as *mut UbTpInfo,
            )
        };
        if r < 0 {
            return Err(Error::last_os(Op::Info));
        }
        Info::from_raw(&raw)
    }

    /// The largest message send() and recv() carry (0 until RTS with
    /// `nonblocking`: see [`Info`]).
    pub fn max_message(&self) -> usize {
        usize::try_from(self.max_message).unwrap_or(usize::MAX)
    }

    /// This end's TPN.
    pub fn tpn(&self) -> u32 {
        self.tpn
    }

    /// The peer's TPN.
    pub fn peer_tpn(&self) -> u32 {
        self.peer_tpn
    }
}

impl AsRawFd for Channel {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts() -> BindOptions {
        BindOptions {
            remote: "cna16:0x0100".parse().ok(),
            key: 7,
            ..BindOptions::default()
        }
    }

    #[test]
    fn bind_request_carries_every_option() {
        let o = BindOptions {
            retransmit: Retransmit::Selective,
            fast_retransmit: true,
            per_packet: true,
            mtu: 1024,
            timeout_ms: 20_000,
            ..opts()
        };
        let raw = o.to_raw(3).unwrap_or_default();
        assert_eq!(raw.version, UB_TP_ABI_VERSION);
        assert_eq!(raw.dev_index, 3);
        assert_eq!(raw.key, 7);
        assert_eq!(raw.flags, 0);
        assert_eq!(raw.retransmit, UB_TP_SELECTIVE);
        assert_eq!(raw.attr_flags, UB_TP_FAST_RETRANSMIT | UB_TP_PER_PACKET);
        assert_eq!(raw.mtu, 1024);
        assert_eq!(raw.timeout_ms, 20_000);
        assert_eq!(raw.remote.type_, UB_ADDR_CNA16);
        assert_eq!(raw.reserved, [0; 7]);
        assert_eq!(raw.reserved0, [0; 3]);
    }

    #[test]
    fn listening_to_anyone_sends_no_address() {
        let o = BindOptions {
            remote: None,
            listen: true,
            ..opts()
        };
        let raw = o.to_raw(0).unwrap_or_default();
        assert_eq!(raw.flags, UB_TP_BIND_LISTEN);
        assert_eq!(raw.remote, UbAddr::default());
        assert_eq!(raw.retransmit, UB_TP_GO_BACK_N);
    }

    #[test]
    fn bad_options_are_refused_before_the_kernel() {
        for o in [
            BindOptions {
                remote: None,
                ..opts()
            },
            BindOptions { mtu: 255, ..opts() },
            BindOptions {
                mtu: 4097,
                ..opts()
            },
            BindOptions {
                timeout_ms: 600_001,
                ..opts()
            },
        ] {
            assert!(matches!(o.to_raw(0), Err(Error::Invalid(_))), "{o:?}");
        }
        // Invalid options fail before the device is opened.
        let o = BindOptions {
            path: PathBuf::from("/nonexistent/ub_tp"),
            mtu: 1,
            ..opts()
        };
        assert!(matches!(Channel::bind(0, &o), Err(Error::Invalid(_))));
    }

    #[test]
    fn a_ctp_bind_names_only_the_remote_and_refuses_rtp_options() {
        let o = BindOptions {
            key: 0,
            ctp: true,
            ..opts()
        };
        let raw = o.to_raw(2).unwrap_or_default();
        assert_eq!(raw.flags, UB_TP_BIND_CTP);
        assert_eq!(raw.dev_index, 2);
        assert_eq!(raw.remote.type_, UB_ADDR_CNA16);
        assert_eq!(
            (raw.key, raw.retransmit, raw.attr_flags, raw.mtu),
            (0, 0, 0, 0)
        );
        for bad in [
            BindOptions {
                key: 7,
                ..o.clone()
            },
            BindOptions {
                listen: true,
                ..o.clone()
            },
            BindOptions {
                retransmit: Retransmit::Selective,
                ..o.clone()
            },
            BindOptions {
                fast_retransmit: true,
                ..o.clone()
            },
            BindOptions {
                per_packet: true,
                ..o.clone()
            },
            BindOptions {
                mtu: 1024,
                ..o.clone()
            },
            BindOptions {
                remote: "10.0.0.1".parse().ok(),
                ..o.clone()
            },
            BindOptions {
                remote: None,
                ..o.clone()
            },
        ] {
            assert!(matches!(bad.to_raw(0), Err(Error::Invalid(_))), "{bad:?}");
        }
    }

    #[test]
    fn missing_device_says_so() {
        let o = BindOptions {
            path: PathBuf::from("/nonexistent/ub_tp"),
            ..opts()
        };
        let e = Channel::bind(0, &o).err();
        let e = e.map(|e| e.to_string()).unwrap_or_default();
        assert_eq!(e, "open: no /dev/ub_tp (is ub.ko loaded?) (ENOENT)");
    }

    #[test]
    fn a_device_that_is_not_ub_tp_refuses_the_ioctl() {
        let o = BindOptions {
            path: PathBuf::from("/dev/null"),
            ..opts()
        };
        match Channel::bind(0, &o) {
            Err(e) => {
                assert_eq!(e.errno(), Some(libc::ENOTTY), "{e}");
                assert!(e.to_string().contains("not a TP Channel device"), "{e}");
            }
            Ok(_) => panic!("/dev/null took UB_TP_IOC_BIND"),
        }
    }

    #[test]
    fn info_reports_an_unknown_state_and_refuses_a_bad_errno() {
        let raw = UbTpInfo {
            state: 77,
            tx_acked: 5,
            ..UbTpInfo::default()
        };
        let i = Info::from_raw(&raw).ok();
        assert_eq!(i.map(|i| i.state), Some(State::Unknown(77)));
        assert_eq!(i.map(|i| i.tx_acked), Some(5));
        let raw = UbTpInfo {
            error: u32::MAX,
            ..UbTpInfo::default()
        };
        assert!(matches!(Info::from_raw(&raw), Err(Error::Abi { .. })));
    }
}
