// SPDX-License-Identifier: GPL-2.0
//! CTP files of `/dev/ub_tp`: a file bound with `UB_TP_BIND_CTP` sends and
//! receives CTP datagrams to and from one remote CNA (the ABI in
//! `include/uapi/linux/ub.h`, the model in `Documentation/ub/tp.rst`).
//!
//! CTP has no TPN, no acknowledgement and no retransmission: one datagram
//! is one packet, and the link layer (BCRC and the retry buffer) repairs
//! every hop. The endpoint sends the datagrams out of the device's datagram
//! store (`net.rs`, shared with the echo service) and hands the ones it
//! receives to the [`CtpEnd`] bound to their source; a datagram with no
//! file bound to its source, or one that finds the file's receive queue
//! full, is dropped (the file counts the latter in `rx_dropped`).
//!
//! Locking: [`CtpEnd::inner`] is a mutex (process context only), taken
//! inside the endpoint's lock (`Net::state`) as a channel's is; readers and
//! pollers hold only this lock, writers take the endpoint's first.
//!
//! Lifetime: an `Arc`, held by the device's table of CTP files from the
//! bind until the file closes (or the device goes), and by the file.

use kernel::{
    bindings,
    fs::File,
    iov::{IovIterDest, IovIterSource},
    new_mutex,
    prelude::*,
    static_lock_class,
    sync::{
        poll::{PollCondVarBox, PollTable},
        Arc, Mutex,
    },
};

use crate::channel::RxQueue;
use crate::host::Addr;
use crate::ub_net::Net;

/// The first CTP end's handle, 2^23 (`UB_TP_CTP_HANDLE_BASE` of
/// `include/uapi/linux/ub.h`): above every TPN the endpoint gives its RTP
/// channels (1 to its table size), so a handle is never a channel's TPN,
/// and within the 24 bits of a TPN.
pub(crate) const CTP_HANDLE_BASE: u32 = 1 << 23;

/// What [`CtpEnd::inner`] guards.
pub(crate) struct CtpInner {
    /// Why `read` (once the queue is empty) and `write` fail: `ENODEV` once
    /// the device is gone.
    pub(crate) error: Option<Error>,
    /// Datagrams received, not yet read, in arrival order.
    pub(crate) rx: RxQueue,
    /// Bumped on every change a reader, writer or poller may wait for.
    events: u64,
    /// Datagrams `write()` accepted.
    pub(crate) tx_messages: u64,
    /// Datagrams the endpoint sent (taken from the store).
    pub(crate) tx_packets: u64,
    /// Datagrams received from the remote (queued or dropped).
    pub(crate) rx_packets: u64,
    /// Datagrams queued for `read()`.
    pub(crate) rx_messages: u64,
    /// Datagrams dropped: the receive queue was full (or out of memory).
    pub(crate) rx_dropped: u64,
    /// Bound to a file (`false`: made by `tp-new`, waiting for a bind).
    pub(crate) claimed: bool,
}

/// The kernel's side of one CTP file (see the module documentation).
#[pin_data]
pub(crate) struct CtpEnd {
    /// The remote CNA (fixed; the device's table is searched by it).
    pub(crate) remote: Addr,
    /// The end's name in netlink (`tp-get`'s `tpn`) and in the bind's
    /// answer: [`CTP_HANDLE_BASE`] plus its slot (CTP packets carry no
    /// TPN).
    pub(crate) handle: u32,
    #[pin]
    pub(crate) inner: Mutex<CtpInner>,
    /// Readers and writers wait here for `inner.events` to move; `poll`
    /// registers on it too (freed after an RCU grace period, as a
    /// channel's).
    pub(crate) changed: PollCondVarBox,
}

impl CtpEnd {
    /// The end towards `remote` named `handle`, its receive queue
    /// allocated: a file's (`claimed`), or one `tp-new` made.
    pub(crate) fn new(remote: Addr, handle: u32, claimed: bool) -> Result<Arc<Self>> {
        let inner = CtpInner {
            claimed,
            error: None,
            rx: RxQueue::new()?,
            events: 0,
            tx_messages: 0,
            tx_packets: 0,
            rx_packets: 0,
            rx_messages: 0,
            rx_dropped: 0,
        };
        let changed = PollCondVarBox::new(c"CtpEnd::changed", static_lock_class!())?;
        Arc::pin_init(
            pin_init!(Self {
                remote,
                handle,
                inner <- new_mutex!(inner),
                changed,
            }),
            GFP_KERNEL,
        )
    }

    fn bump(&self, g: &mut CtpInner) {
        g.events = g.events.wrapping_add(1);
        self.changed.notify_all();
    }

    /// A datagram from the remote: queued, or dropped and counted when the
    /// queue is full (CTP has no way to ask the sender to wait).
    pub(crate) fn deliver(&self, bytes: &[u8]) {
        let mut g = self.inner.lock();
        g.rx_packets = g.rx_packets.saturating_add(1);
        if g.error.is_some() || !g.rx.fits(bytes.len()) {
            g.rx_dropped = g.rx_dropped.saturating_add(1);
            return;
        }
        let mut m = KVVec::new();
        if m.extend_from_slice(bytes, GFP_KERNEL).is_err() || g.rx.push(m).is_err() {
            g.rx_dropped = g.rx_dropped.saturating_add(1);
            return;
        }
        g.rx_messages = g.rx_messages.saturating_add(1);
        self.bump(&mut g);
    }

    /// A write was accepted.
    pub(crate) fn accepted(&self) {
        let mut g = self.inner.lock();
        g.tx_messages = g.tx_messages.saturating_add(1);
    }

    /// The endpoint sent one of this file's datagrams (its slot is free).
    pub(crate) fn sent(&self) {
        let mut g = self.inner.lock();
        g.tx_packets = g.tx_packets.saturating_add(1);
        self.bump(&mut g);
    }

    /// A slot of the datagram store came free: a writer may go on.
    pub(crate) fn writable(&self) {
        let mut g = self.inner.lock();
        self.bump(&mut g);
    }

    /// The file fails with `errno` (the device is going, or an
    /// administrator tore the end down: `ECONNABORTED`).
    pub(crate) fn fail(&self, errno: Error) {
        let mut g = self.inner.lock();
        if g.error.is_none() {
            g.error = Some(errno);
        }
        self.bump(&mut g);
    }

    /// Waits (interruptibly) until `inner.events` moves past `seen`.
    fn wait_change(&self, seen: u64) -> Result {
        let mut g = self.inner.lock();
        while g.events == seen {
            if self.changed.wait_interruptible(&mut g) {
                return Err(ERESTARTSYS);
            }
        }
        Ok(())
    }
}

/// A CTP end bound to a file.
#[derive(Clone)]
pub(crate) struct CtpBound {
    pub(crate) net: Arc<Net>,
    pub(crate) end: Arc<CtpEnd>,
    /// The largest datagram payload (`ub_tp_bind.max_message`).
    pub(crate) max_message: u32,
}

impl CtpBound {
    /// `read()`: the oldest datagram whole (see `RxQueue::take`), then the
    /// file's error once the queue is empty.
    pub(crate) fn read(&self, iov: &mut IovIterDest<'_>, nonblock: bool) -> Result<usize> {
        loop {
            let seen = {
                let mut g = self.end.inner.lock();
                if let Some(m) = g.rx.take(iov.len())? {
                    drop(g);
                    let n = iov.copy_to_iter(&m);
                    if n < m.len() {
                        // Nothing is lost: the datagram goes back to the head.
                        self.end.inner.lock().rx.unpop(m);
                        return Err(EFAULT);
                    }
                    return Ok(n);
                }
                if let Some(e) = g.error {
                    return Err(e);
                }
                g.events
            };
            if nonblock {
                return Err(EAGAIN);
            }
            self.end.wait_change(seen)?;
        }
    }

    /// `write()`: one datagram of 1..=`max_message` bytes, waiting (unless
    /// `nonblock`) for a free slot of the device's datagram store.
    pub(crate) fn write(&self, iov: &mut IovIterSource<'_>, nonblock: bool) -> Result<usize> {
        let len = iov.len();
        if len == 0 {
            return Err(EINVAL);
        }
        if len > usize::try_from(self.max_message).unwrap_or(0) {
            return Err(EMSGSIZE);
        }
        let mut m = KVVec::with_capacity(len, GFP_KERNEL)?;
        if iov.copy_from_iter_vec(&mut m, GFP_KERNEL)? != len {
            return Err(EFAULT);
        }
        loop {
            let seen = self.end.inner.lock().events;
            match self.net.ctp_send(&self.end, &m) {
                Ok(()) => return Ok(len),
                Err(e) if e == EAGAIN => {
                    if nonblock {
                        return Err(EAGAIN);
                    }
                    self.end.wait_change(seen)?;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// `poll()`: as an RTP channel's (`POLLERR` with `POLLIN | POLLOUT`
    /// once the device is gone).
    pub(crate) fn poll(&self, file: &File, table: &PollTable<'_>) -> u32 {
        table.register_wait(file, &self.end.changed);
        let writable = self.net.ctp_writable();
        let g = self.end.inner.lock();
        let mut mask = 0;
        if g.rx.len() > 0 {
            mask |= bindings::POLLIN | bindings::POLLRDNORM;
        }
        if g.error.is_some() {
            mask |= bindings::POLLERR
                | bindings::POLLIN
                | bindings::POLLRDNORM
                | bindings::POLLOUT
                | bindings::POLLWRNORM;
        } else if writable {
            mask |= bindings::POLLOUT | bindings::POLLWRNORM;
        }
        mask
    }
}
