// SPDX-License-Identifier: GPL-2.0
//! TP Channels of a device: the kernel's side of one RTP channel of the
//! `host` endpoint, the messages it holds for its user, and its state.
//!
//! The endpoint (`ub_proto::host`) runs the transport; a [`TpChannel`]
//! keeps what the endpoint leaves to its caller: the bytes of each message
//! sent until the peer acknowledges it ([`TxStore`]), the messages received
//! until the user reads them ([`RxQueue`]), the channel's state and error,
//! and a wait queue for readers, writers, binders and pollers.
//!
//! Locking: [`TpChannel::inner`] is a mutex (process context only). It is
//! taken inside the endpoint's lock (`Net::state`, which hands deliveries
//! and events to the channel), never the reverse: a reader or a binder
//! holds only this lock, a writer takes the endpoint's lock first.
//!
//! Lifetime: an `Arc`, held by the device's channel table from the
//! channel's creation (`connect`, or the peer's `Incoming`) until the
//! endpoint reports it `Closed`, and by the file bound to it.

use kernel::{
    new_mutex,
    prelude::*,
    static_lock_class,
    sync::{poll::PollCondVarBox, Arc, CondVarTimeoutResult, Mutex},
};

use crate::host::{Addr, ErrorCause};
use crate::transport::cm::ChannelState;

/// Messages a channel holds unread.
pub(crate) const RX_QUEUE_MSGS: usize = 1024;
/// Bytes of messages a channel holds unread (`UB_TP_RX_QUEUE_BYTES`).
pub(crate) const RX_QUEUE_BYTES: usize = 16 << 20;
/// Messages sent and not yet acknowledged (the endpoint's send queue and
/// window hold fewer).
pub(crate) const TX_SLOTS: usize = 512;

/// The errno a channel in ERR fails `read` and `write` with (the list in
/// `include/uapi/linux/ub.h`).
pub(crate) fn cause_errno(cause: ErrorCause) -> Error {
    match cause {
        ErrorCause::RetryLimit => ETIMEDOUT,
        ErrorCause::PeerError | ErrorCause::PeerReset => ECONNRESET,
        ErrorCause::SetupFailed => ECONNREFUSED,
        ErrorCause::Protocol => EPROTO,
    }
}

/// Received messages in arrival order, bounded in count and bytes: the
/// receive queue of an RTP channel and of a CTP file (`ctp.rs`).
pub(crate) struct RxQueue {
    msgs: KVec<Option<KVVec<u8>>>,
    head: usize,
    len: usize,
    bytes: usize,
}

impl RxQueue {
    /// An empty queue, its slots allocated.
    pub(crate) fn new() -> Result<Self> {
        let mut msgs = KVec::with_capacity(RX_QUEUE_MSGS, GFP_KERNEL)?;
        for _ in 0..RX_QUEUE_MSGS {
            msgs.push(None, GFP_KERNEL)?;
        }
        Ok(Self {
            msgs,
            head: 0,
            len: 0,
            bytes: 0,
        })
    }

    /// Whether `more` bytes (a message being received) still fit.
    pub(crate) fn fits(&self, more: usize) -> bool {
        self.len < RX_QUEUE_MSGS && self.bytes.saturating_add(more) <= RX_QUEUE_BYTES
    }

    /// Queues `m` last; `m` back if it does not [`fit`](Self::fits).
    pub(crate) fn push(&mut self, m: KVVec<u8>) -> core::result::Result<(), KVVec<u8>> {
        if !self.fits(m.len()) {
            return Err(m);
        }
        let i = (self.head + self.len) % RX_QUEUE_MSGS;
        let Some(slot) = self.msgs.get_mut(i) else {
            return Err(m);
        };
        self.bytes += m.len();
        *slot = Some(m);
        self.len += 1;
        Ok(())
    }

    /// Messages queued.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The oldest message.
    pub(crate) fn front(&self) -> Option<&[u8]> {
        if self.len == 0 {
            return None;
        }
        self.msgs.get(self.head)?.as_deref()
    }

    /// Length of the oldest message.
    fn front_len(&self) -> Option<usize> {
        self.front().map(<[u8]>::len)
    }

    fn pop(&mut self) -> Option<KVVec<u8>> {
        if self.len == 0 {
            return None;
        }
        let m = self.msgs.get_mut(self.head)?.take()?;
        self.head = (self.head + 1) % RX_QUEUE_MSGS;
        self.len -= 1;
        self.bytes = self.bytes.saturating_sub(m.len());
        Some(m)
    }

    /// The oldest message, if it fits `room` bytes (`EMSGSIZE` if not: it
    /// stays queued); `Ok(None)` when nothing is queued.
    pub(crate) fn take(&mut self, room: usize) -> Result<Option<KVVec<u8>>> {
        match self.front_len() {
            Some(n) if n > room => Err(EMSGSIZE),
            Some(_) => Ok(self.pop()),
            None => Ok(None),
        }
    }

    /// Puts back the message just taken (its copy to user space failed).
    pub(crate) fn unpop(&mut self, m: KVVec<u8>) {
        let i = (self.head + RX_QUEUE_MSGS - 1) % RX_QUEUE_MSGS;
        if self.len < RX_QUEUE_MSGS {
            if let Some(slot) = self.msgs.get_mut(i) {
                self.bytes += m.len();
                *slot = Some(m);
                self.head = i;
                self.len += 1;
            }
        }
    }
}

/// Messages sent and not yet acknowledged, by token: token `t` lives in
/// slot `t % TX_SLOTS` (tokens are handed out in order and the endpoint
/// acknowledges each once).
pub(crate) struct TxStore {
    slots: KVec<Option<(u64, KVVec<u8>)>>,
    next: u64,
    /// The oldest token that may still be held (`next` when none is).
    tail: u64,
}

impl TxStore {
    fn new() -> Result<Self> {
        let mut slots = KVec::with_capacity(TX_SLOTS, GFP_KERNEL)?;
        for _ in 0..TX_SLOTS {
            slots.push(None, GFP_KERNEL)?;
        }
        Ok(Self {
            slots,
            next: 0,
            tail: 0,
        })
    }

    /// Stores `m` under the next token; the message back if its slot is
    /// still taken (too many unacknowledged messages: would block).
    pub(crate) fn put(&mut self, m: KVVec<u8>) -> core::result::Result<u64, KVVec<u8>> {
        let t = self.next;
        match self.slots.get_mut((t % TX_SLOTS as u64) as usize) {
            Some(slot @ None) => {
                *slot = Some((t, m));
                self.next = t.wrapping_add(1);
                Ok(t)
            }
            _ => Err(m),
        }
    }

    /// Takes message `t` back (the endpoint refused it).
    pub(crate) fn take(&mut self, t: u64) -> Option<KVVec<u8>> {
        let slot = self.slots.get_mut((t % TX_SLOTS as u64) as usize)?;
        if slot.as_ref().is_some_and(|(st, _)| *st == t) {
            let m = slot.take().map(|(_, m)| m);
            if self.next == t.wrapping_add(1) {
                self.next = t;
            }
            self.advance_tail();
            return m;
        }
        None
    }

    /// Whether [`put`](Self::put) would take another message now.
    pub(crate) fn has_room(&self) -> bool {
        self.slots
            .get((self.next % TX_SLOTS as u64) as usize)
            .is_some_and(Option::is_none)
    }

    /// Frees message `t` (acknowledged, or abandoned).
    fn free(&mut self, t: u64) -> bool {
        match self.slots.get_mut((t % TX_SLOTS as u64) as usize) {
            Some(slot) if slot.as_ref().is_some_and(|(st, _)| *st == t) => {
                *slot = None;
                self.advance_tail();
                true
            }
            _ => false,
        }
    }

    /// The message stored under `t`, if it still is.
    fn held(&self, t: u64) -> Option<&[u8]> {
        self.slots
            .get((t % TX_SLOTS as u64) as usize)
            .and_then(Option::as_ref)
            .filter(|(st, _)| *st == t)
            .map(|(_, m)| &m[..])
    }

    /// Moves `tail` past the tokens no longer held.
    fn advance_tail(&mut self) {
        // `next - tail` never exceeds TX_SLOTS (a slot is reused only once
        // its token is freed), so this ends within TX_SLOTS steps.
        if self.next.wrapping_sub(self.tail) > TX_SLOTS as u64 {
            self.tail = self.next;
        }
        while self.tail != self.next && self.held(self.tail).is_none() {
            self.tail = self.tail.wrapping_add(1);
        }
    }

    /// The oldest message not yet acknowledged.
    pub(crate) fn oldest(&self) -> Option<&[u8]> {
        if self.tail == self.next {
            return None;
        }
        self.held(self.tail)
    }

    /// Copies bytes `offset..offset + out.len()` of message `t`, or zeros
    /// if the endpoint names bytes it was not given (never out of bounds).
    pub(crate) fn read(&self, t: u64, offset: u32, out: &mut [u8]) {
        let src = self.held(t).and_then(|m| {
            let off = usize::try_from(offset).ok()?;
            m.get(off..off.checked_add(out.len())?)
        });
        match src {
            Some(s) => out.copy_from_slice(s),
            None => out.fill(0),
        }
    }
}

/// What [`TpChannel::inner`] guards.
pub(crate) struct TpInner {
    /// The peer and the key both ends name the channel by.
    pub(crate) remote: Addr,
    pub(crate) key: u32,
    /// A file is bound to it (an accepted channel waits unclaimed).
    pub(crate) claimed: bool,
    pub(crate) state: ChannelState,
    /// Why `read`/`write` fail once the queued messages are read.
    pub(crate) error: Option<Error>,
    /// The endpoint freed the channel.
    pub(crate) closed: bool,
    pub(crate) rx: RxQueue,
    /// The message being received (pieces come in order).
    partial: KVVec<u8>,
    pub(crate) tx: TxStore,
    /// Bumped on every change a waiter may be waiting for.
    pub(crate) events: u64,
    pub(crate) tx_messages: u64,
    pub(crate) tx_acked: u64,
    pub(crate) rx_messages: u64,
    /// An in-kernel user (`kapi.rs`) in place of a reader: every change
    /// queues its work.
    consumer: Option<Arc<crate::kapi::KernelTp>>,
    /// The group the channel is a member of (`group.rs`): every change
    /// wakes the group's waiters too.
    pub(crate) group: Option<Arc<crate::group::GroupWake>>,
    /// The peer's TPN and the transport counters as the channel was torn
    /// down (the endpoint forgets both when it frees the channel, and its
    /// TPN may name another channel after): what `UB_TP_IOC_INFO` shows of
    /// a closed channel.
    pub(crate) final_stats: (Option<u32>, Option<crate::host::ChannelCounters>),
}

/// One TP Channel (see the module documentation).
#[pin_data]
pub(crate) struct TpChannel {
    /// TPN on this end (fixed for the channel's life).
    pub(crate) tpn: u32,
    #[pin]
    pub(crate) inner: Mutex<TpInner>,
    /// Readers, writers and binders wait here for `inner.events` to move;
    /// `poll` registers on it too. Boxed and freed after an RCU grace
    /// period (`kfree_rcu`): an epoll entry may still look at it after the
    /// last reference is dropped, and a channel must not wait for the grace
    /// period where it is dropped.
    pub(crate) changed: PollCondVarBox,
}

impl TpInner {
    /// Whether a listen for `key` from `from` (`None`: anyone) takes this
    /// channel.
    pub(crate) fn answers(&self, key: u32, from: Option<Addr>) -> bool {
        self.key == key && from.is_none_or(|f| f == self.remote)
    }
}

impl TpChannel {
    /// A channel `tpn` to `remote` named `key`, with its queues.
    pub(crate) fn new(tpn: u32, remote: Addr, key: u32, claimed: bool) -> Result<Arc<Self>> {
        let inner = TpInner {
            remote,
            key,
            claimed,
            state: ChannelState::Reset,
            error: None,
            closed: false,
            rx: RxQueue::new()?,
            partial: KVVec::new(),
            tx: TxStore::new()?,
            events: 0,
            tx_messages: 0,
            tx_acked: 0,
            rx_messages: 0,
            consumer: None,
            group: None,
            final_stats: (None, None),
        };
        let changed = PollCondVarBox::new(c"TpChannel::changed", static_lock_class!())?;
        Arc::pin_init(
            pin_init!(Self {
                tpn,
                inner <- new_mutex!(inner),
                changed,
            }),
            GFP_KERNEL,
        )
    }

    /// Wakes every waiter after a change to `inner` (made by the caller,
    /// which still holds the lock).
    fn bump(&self, inner: &mut TpInner) {
        inner.events = inner.events.wrapping_add(1);
        self.changed.notify_all();
        if let Some(k) = &inner.consumer {
            crate::kapi::KernelTp::notify(k);
        }
        if let Some(g) = &inner.group {
            g.bump();
        }
    }

    /// The channel's TPN on the endpoint, `None` once the endpoint closed
    /// it: the endpoint may have given the number to a new channel since.
    pub(crate) fn endpoint_tpn(&self) -> Option<u32> {
        (!self.inner.lock().closed).then_some(self.tpn)
    }

    /// Sets (or clears) the in-kernel user that consumes this channel.
    pub(crate) fn set_consumer(&self, k: Option<Arc<crate::kapi::KernelTp>>) {
        self.inner.lock().consumer = k;
    }

    /// One piece of a received message; `false` if the channel must fail
    /// (out of memory or over its unread limit: it is put in ERR with
    /// `ENOBUFS`, and the caller closes it on the endpoint).
    pub(crate) fn deliver(&self, offset: u32, bytes: &[u8], complete: bool) -> bool {
        let mut g = self.inner.lock();
        let inner = &mut *g;
        if inner.error.is_some() {
            return true;
        }
        if offset == 0 {
            inner.partial.clear();
        }
        let fits = inner
            .rx
            .fits(inner.partial.len().saturating_add(bytes.len()));
        if !fits || inner.partial.extend_from_slice(bytes, GFP_KERNEL).is_err() {
            inner.partial = KVVec::new();
            inner.error = Some(ENOBUFS);
            inner.state = ChannelState::Err;
            self.bump(inner);
            return false;
        }
        if complete {
            let m = core::mem::replace(&mut inner.partial, KVVec::new());
            if inner.rx.push(m).is_err() {
                inner.error = Some(ENOBUFS);
                inner.state = ChannelState::Err;
                self.bump(inner);
                return false;
            }
            inner.rx_messages += 1;
            self.bump(inner);
        }
        true
    }

    /// The endpoint acknowledged message `token`: its bytes go.
    pub(crate) fn acked(&self, token: u64) {
        let mut g = self.inner.lock();
        if g.tx.free(token) {
            g.tx_acked += 1;
        }
        self.bump(&mut g);
    }

    /// Room in the send queue again.
    pub(crate) fn writable(&self) {
        let mut g = self.inner.lock();
        self.bump(&mut g);
    }

    /// The channel's state moved.
    pub(crate) fn set_state(&self, state: ChannelState) {
        let mut g = self.inner.lock();
        g.state = state;
        self.bump(&mut g);
    }

    /// The channel failed with `errno`.
    pub(crate) fn fail(&self, errno: Error) {
        let mut g = self.inner.lock();
        if g.error.is_none() {
            g.error = Some(errno);
        }
        g.state = ChannelState::Err;
        self.bump(&mut g);
    }

    /// The endpoint freed the channel.
    pub(crate) fn set_closed(&self) {
        let mut g = self.inner.lock();
        g.closed = true;
        self.bump(&mut g);
    }

    /// Waits (interruptibly) until `inner.events` moves past `seen`.
    /// `Err(ERESTARTSYS)` on a signal.
    pub(crate) fn wait_change(&self, seen: u64) -> Result {
        let mut g = self.inner.lock();
        while g.events == seen {
            if self.changed.wait_interruptible(&mut g) {
                return Err(ERESTARTSYS);
            }
        }
        Ok(())
    }

    /// Waits up to `timeout_ms` for the channel to reach RTS: the errno it
    /// failed with, `ETIMEDOUT`, or `ERESTARTSYS` on a signal.
    pub(crate) fn wait_rts(&self, timeout_ms: u32) -> Result {
        let mut left = kernel::time::msecs_to_jiffies(timeout_ms);
        let mut g = self.inner.lock();
        loop {
            if let Some(e) = g.error {
                return Err(e);
            }
            if g.closed {
                // Closed by the peer before this bind: what it sent is
                // still read, then the end of the stream.
                return if g.rx.len() > 0 {
                    Ok(())
                } else {
                    Err(ECONNREFUSED)
                };
            }
            if g.state == ChannelState::Rts {
                return Ok(());
            }
            match self.changed.wait_interruptible_timeout(&mut g, left) {
                CondVarTimeoutResult::Timeout => return Err(ETIMEDOUT),
                CondVarTimeoutResult::Signal { .. } => return Err(ERESTARTSYS),
                CondVarTimeoutResult::Woken { jiffies } => left = jiffies,
            }
        }
    }

    /// The oldest received message, if it fits `room` bytes:
    /// `Ok(None)` when nothing is queued.
    pub(crate) fn take_message(&self, room: usize) -> Result<Option<KVVec<u8>>> {
        self.inner.lock().rx.take(room)
    }

    /// The oldest received message if `pick` takes it (a group reader
    /// takes only the message next in the group's order).
    pub(crate) fn take_message_if(&self, pick: impl FnOnce(&[u8]) -> bool) -> Option<KVVec<u8>> {
        let mut g = self.inner.lock();
        if pick(g.rx.front()?) {
            g.rx.pop()
        } else {
            None
        }
    }

    /// Puts a message back at the head of the queue (its copy out failed).
    pub(crate) fn untake_message(&self, m: KVVec<u8>) {
        self.inner.lock().rx.unpop(m);
    }
}
