// SPDX-License-Identifier: GPL-2.0
//! TP Channel Groups for user space: one `/dev/ub_tp` file over several RTP
//! channels to one peer (UB Base Specification 2.0 §6.5), as
//! `Documentation/ub/tp.rst` ("TP Channel Groups") describes.
//!
//! The endpoint's group (`Endpoint::create_group`, least-loaded policy)
//! picks the member each message goes to, whole. Members are told apart on
//! the fabric by their source ports, so per-flow hashing and per-packet
//! spraying spread them over the paths.
//!
//! The specification leaves ordering across members to the transaction
//! layer; a file is a stream, so the group keeps its order: every message
//! carries a group header ([`GROUP_HEADER_LEN`] bytes: its sequence number
//! in the group, big endian, then four zero bytes), and the reader takes the
//! members' messages in that order. Each member delivers its own messages
//! in order, so the next message is always at the head of some member's
//! queue: the reader looks at the heads only.
//!
//! Memory: a message the receiver holds because an earlier one is still on
//! its way has been acknowledged already, and only the writer can bound
//! how many there are: it keeps the messages written since the oldest one
//! not yet acknowledged within [`WINDOW_MSGS`] and [`WINDOW_BYTES`].
//!
//! Locking: [`TpGroup::tx`] (writers) and [`TpGroup::rx`] (readers, held
//! across the copy to user space so that readers of one file take messages
//! in turn; nothing else waits for it) come before the endpoint's lock; a
//! member's lock comes before [`GroupWake::events`] (a member's change
//! wakes the group).

use kernel::{
    iov::IovIterDest,
    new_mutex,
    prelude::*,
    static_lock_class,
    sync::{poll::PollCondVarBox, Arc, Mutex},
};

use crate::channel::TpChannel;
use crate::host::{ChannelConfig, LoadBalance};
use crate::transport::cm::ChannelState;
use crate::ub_net::Net;

/// Bytes of the group header in front of every message of a group.
pub(crate) const GROUP_HEADER_LEN: usize = 8;
/// Most members of a group file (`UB_TP_MAX_MEMBERS`).
pub(crate) const MAX_MEMBERS: u32 = 8;
/// Messages written since the oldest unacknowledged one, at most.
const WINDOW_MSGS: u32 = 512;
/// Bytes (group headers included) written since the oldest unacknowledged
/// message, at most, unless it is the only one: half of what a receiving
/// channel holds unread (`UB_TP_RX_QUEUE_BYTES`).
const WINDOW_BYTES: u64 = 8 << 20;

/// The sequence number in a group header; `None` if the header is not one.
fn header_seq(m: &[u8]) -> Option<u32> {
    match m.get(..GROUP_HEADER_LEN)? {
        [a, b, c, d, 0, 0, 0, 0] => Some(u32::from_be_bytes([*a, *b, *c, *d])),
        _ => None,
    }
}

/// What wakes a group's waiters: every change of a member.
#[pin_data]
pub(crate) struct GroupWake {
    /// Bumped on every change of a member.
    #[pin]
    events: Mutex<u64>,
    /// Readers, writers and pollers of the group file wait here (freed
    /// after an RCU grace period, as a channel's).
    pub(crate) changed: PollCondVarBox,
}

impl GroupWake {
    fn new() -> Result<Arc<Self>> {
        let changed = PollCondVarBox::new(c"GroupWake::changed", static_lock_class!())?;
        Arc::pin_init(
            pin_init!(Self {
                events <- new_mutex!(0),
                changed,
            }),
            GFP_KERNEL,
        )
    }

    /// A member changed (called under the member's lock).
    pub(crate) fn bump(&self) {
        let mut g = self.events.lock();
        *g = g.wrapping_add(1);
        self.changed.notify_all();
    }

    fn seen(&self) -> u64 {
        *self.events.lock()
    }

    /// Waits (interruptibly) until a member changes after `seen`.
    fn wait_change(&self, seen: u64) -> Result {
        let mut g = self.events.lock();
        while *g == seen {
            if self.changed.wait_interruptible(&mut g) {
                return Err(ERESTARTSYS);
            }
        }
        Ok(())
    }
}

/// The writers' side of a group.
struct GroupTx {
    /// Sequence number of the next message.
    next: u32,
    /// Bytes written so far (group headers included).
    written: u64,
    /// Bytes written before message `s`, at `s % WINDOW_MSGS` (valid for
    /// the last `WINDOW_MSGS` messages).
    before: KVec<u64>,
}

/// What the heads of the members' queues say to a reader.
struct Heads {
    /// Some member holds nothing: the next message may still come there.
    some_empty: bool,
    /// Every member was torn down.
    all_closed: bool,
    /// Nothing is queued anywhere.
    all_empty: bool,
    /// The first member error.
    error: Option<Error>,
    /// A message without a group header.
    malformed: bool,
}

/// One group file's channels (see the module documentation).
#[pin_data]
pub(crate) struct TpGroup {
    /// The member channels, in key order.
    pub(crate) members: KVec<Arc<TpChannel>>,
    /// The endpoint's number of the group.
    gid: u16,
    /// Wakes the group's waiters.
    pub(crate) wake: Arc<GroupWake>,
    #[pin]
    tx: Mutex<GroupTx>,
    /// Sequence number of the next message to read.
    #[pin]
    rx: Mutex<u32>,
}

impl TpGroup {
    /// Forms a group over `members` (each claimed by the caller, in RTS or
    /// on the way): the endpoint's group, and every member wakes the
    /// group's waiters from now on.
    pub(crate) fn new(net: &Net, chans: &[Arc<TpChannel>]) -> Result<Arc<Self>> {
        let wake = GroupWake::new()?;
        let mut members = KVec::with_capacity(chans.len(), GFP_KERNEL)?;
        for c in chans {
            members
                .push_within_capacity(c.clone())
                .map_err(|_| ENOMEM)?;
        }
        let mut before = KVec::with_capacity(WINDOW_MSGS as usize, GFP_KERNEL)?;
        for _ in 0..WINDOW_MSGS {
            before.push(0, GFP_KERNEL)?;
        }
        let gid = net.group_create(&members)?;
        for c in members.iter() {
            c.inner.lock().group = Some(wake.clone());
        }
        Arc::pin_init(
            pin_init!(Self {
                members,
                gid,
                wake,
                tx <- new_mutex!(GroupTx {
                    next: 0,
                    written: 0,
                    before,
                }),
                rx <- new_mutex!(0),
            }),
            GFP_KERNEL,
        )
    }

    /// The state the group is in ([`group_state`] of its members').
    pub(crate) fn state(&self) -> ChannelState {
        group_state(self.members.iter().map(|c| c.inner.lock().state))
    }

    /// Why a write fails at once: a member's error (its messages can no
    /// longer all arrive), or `EPIPE` once a member was torn down.
    fn write_error(&self) -> Result {
        for c in self.members.iter() {
            let g = c.inner.lock();
            if let Some(e) = g.error {
                return Err(e);
            }
            if g.closed {
                return Err(EPIPE);
            }
        }
        Ok(())
    }

    /// Whether a message of `len` bytes (header included) fits the window.
    fn window_room(&self, tx: &GroupTx, len: u64) -> bool {
        // The oldest unacknowledged message: the one the furthest behind
        // `next` among the members' oldest.
        let mut outstanding = 0u32;
        for c in self.members.iter() {
            let g = c.inner.lock();
            if let Some(s) = g.tx.oldest().and_then(header_seq) {
                outstanding = outstanding.max(tx.next.wrapping_sub(s));
            }
        }
        if outstanding == 0 {
            return true;
        }
        if outstanding >= WINDOW_MSGS {
            return false;
        }
        let base = tx.next.wrapping_sub(outstanding);
        let before = tx
            .before
            .get((base % WINDOW_MSGS) as usize)
            .copied()
            .unwrap_or(0);
        tx.written.wrapping_sub(before).saturating_add(len) <= WINDOW_BYTES
    }

    /// Sends `m`, whose first [`GROUP_HEADER_LEN`] bytes are room for the
    /// group header, on the member the endpoint picks; waits for room in
    /// the window or in a member (or `EAGAIN` with `nonblock`).
    pub(crate) fn send(&self, net: &Arc<Net>, mut m: KVVec<u8>, nonblock: bool) -> Result {
        let len = u64::try_from(m.len()).map_err(|_| EMSGSIZE)?;
        loop {
            let seen = self.wake.seen();
            {
                let mut tx = self.tx.lock();
                self.write_error()?;
                if self.window_room(&tx, len) {
                    let seq = tx.next;
                    let head = m.get_mut(..GROUP_HEADER_LEN).ok_or(EINVAL)?;
                    head.fill(0);
                    if let Some(s) = head.get_mut(..4) {
                        s.copy_from_slice(&seq.to_be_bytes());
                    }
                    match net.group_send(self.gid, &self.members, m) {
                        Ok(()) => {
                            let written = tx.written;
                            if let Some(b) = tx.before.get_mut((seq % WINDOW_MSGS) as usize) {
                                *b = written;
                            }
                            tx.written = written.wrapping_add(len);
                            tx.next = seq.wrapping_add(1);
                            return Ok(());
                        }
                        Err((e, Some(back))) if e == EAGAIN => m = back,
                        // The endpoint's group may be gone because a
                        // member failed and was freed between the check
                        // above and the endpoint's lock (tpg-del, then the
                        // peer's DREP, while this writer waited for the
                        // lock): the member's errno says why, not EPIPE.
                        Err((e, _)) => return Err(self.write_error().err().unwrap_or(e)),
                    }
                }
            }
            if nonblock {
                return Err(EAGAIN);
            }
            self.wake.wait_change(seen)?;
        }
    }

    /// Whether a `write()` would be taken now.
    pub(crate) fn writable(&self, net: &Net) -> bool {
        let room = {
            let tx = self.tx.lock();
            self.window_room(&tx, 1)
        };
        room && net.group_writable(&self.members)
    }

    /// Looks at the heads of the members' queues for message `want`: the
    /// member that holds it next, or what the heads say.
    fn find(&self, want: u32) -> core::result::Result<usize, Heads> {
        let mut h = Heads {
            some_empty: false,
            all_closed: true,
            all_empty: true,
            error: None,
            malformed: false,
        };
        for (i, c) in self.members.iter().enumerate() {
            let g = c.inner.lock();
            match g.rx.front().map(header_seq) {
                Some(Some(s)) if s == want => return Ok(i),
                Some(Some(_)) => h.all_empty = false,
                Some(None) => {
                    h.all_empty = false;
                    h.malformed = true;
                }
                None => h.some_empty = true,
            }
            if h.error.is_none() {
                h.error = g.error;
            }
            h.all_closed &= g.closed;
        }
        Err(h)
    }

    /// Whether a `read()` would return at once (a message, an error or the
    /// end), for `poll`.
    pub(crate) fn readable(&self) -> bool {
        let want = *self.rx.lock();
        match self.find(want) {
            Ok(_) => true,
            Err(h) => h.error.is_some() || h.malformed || !h.some_empty || h.all_closed,
        }
    }

    /// Reads the next message of the group into `out` (its payload, without
    /// the group header): its length, 0 at the end of the stream, or the
    /// errno (`EMSGSIZE` for a short buffer, the message staying queued).
    pub(crate) fn recv(&self, out: &mut IovIterDest<'_>, nonblock: bool) -> Result<usize> {
        loop {
            let seen = self.wake.seen();
            let mut next = self.rx.lock();
            match self.find(*next) {
                Ok(i) => {
                    let c = self.members.get(i).ok_or(EINVAL)?;
                    let room = out.len();
                    let m = c.take_message_if(|f| f.len().saturating_sub(GROUP_HEADER_LEN) <= room);
                    let Some(m) = m else {
                        return Err(EMSGSIZE);
                    };
                    let payload = m.get(GROUP_HEADER_LEN..).unwrap_or(&[]);
                    let n = out.copy_to_iter(payload);
                    if n < payload.len() {
                        // Nothing is lost: the message goes back to the head.
                        c.untake_message(m);
                        return Err(EFAULT);
                    }
                    *next = next.wrapping_add(1);
                    return Ok(n);
                }
                Err(h) => {
                    if let Some(e) = h.error {
                        // A member failed: what it had not delivered is
                        // gone, so the order cannot be kept past here.
                        return Err(e);
                    }
                    if h.malformed || (!h.some_empty && !h.all_empty) {
                        // Every member holds a later message, or one is
                        // not a group message: the peer broke the stream.
                        return Err(EPROTO);
                    }
                    if h.all_closed {
                        return if h.all_empty { Ok(0) } else { Err(EPROTO) };
                    }
                }
            }
            drop(next);
            if nonblock {
                return Err(EAGAIN);
            }
            self.wake.wait_change(seen)?;
        }
    }
}

/// The state of a group whose members are in `states`: RTS once every
/// member is, ERR once one failed, the least advanced member's state
/// otherwise (a file's `UB_TP_IOC_INFO` and netlink's `tpg-get` say the
/// same).
pub(crate) fn group_state(states: impl Iterator<Item = ChannelState>) -> ChannelState {
    let mut state = ChannelState::Rts;
    for s in states {
        state = match (state, s) {
            (ChannelState::Err, _) | (_, ChannelState::Err) => ChannelState::Err,
            (_, ChannelState::Reset) | (ChannelState::Reset, _) => ChannelState::Reset,
            (_, ChannelState::Rtr) | (ChannelState::Rtr, _) => ChannelState::Rtr,
            (_, ChannelState::Suspended) | (ChannelState::Suspended, _) => ChannelState::Suspended,
            _ => ChannelState::Rts,
        };
    }
    state
}

/// The configuration of member `i` of a group of `n` opened with `cfg`
/// (by a connecting group bind, or by netlink's `tpg-new`): its own
/// source ports (or LBFs), so that the fabric tells the members apart, and
/// its share of one channel's send window.
pub(crate) fn member_config(cfg: ChannelConfig, i: u32, n: u32) -> ChannelConfig {
    let mut c = cfg;
    // The members share one channel's send window (at least 32 packets
    // each): a group puts no more in flight than a single channel, which
    // the switches' queues hold (the emulated switches tail-drop above
    // 4 MiB per egress port; four full windows of 1 MiB each plus their
    // Go-Back-N rounds overflowed them on a slow guest).
    c.send_window = (cfg.send_window / n.max(1)).max(32).min(cfg.send_window);
    // 16 ports apart, the 16 a sprayed member of a bind uses (`cdev.rs`),
    // or its whole range if `tpg-new` gave it a larger one.
    let stride_log2 = match cfg.lb {
        LoadBalance::PerPacket { range_log2 } => u32::from(range_log2).max(4),
        LoadBalance::PerFlow => 4,
    };
    let offset = u16::try_from(i)
        .ok()
        .and_then(|i| i.checked_shl(stride_log2))
        .unwrap_or(0);
    c.lb_key = cfg.lb_key.wrapping_add(offset);
    c
}

/// Opens the `n` channels `key`, `key + 1`, ... to `remote` (or binds the
/// ones the peer opened already), member `i` with [`member_config`]; or
/// claims the group `tpg-new` made for the same peer, key and `n`. A
/// failure tears down the members opened so far.
pub(crate) fn connect_members(
    net: &Arc<Net>,
    remote: crate::host::Addr,
    key: u32,
    n: u32,
    cfg: ChannelConfig,
    wait_ms: u32,
) -> Result<KVec<Arc<TpChannel>>> {
    if let Some(members) = net.claim_group(Some(remote), key, n)? {
        return Ok(members);
    }
    let mut members = KVec::with_capacity(usize::try_from(n)?, GFP_KERNEL)?;
    for i in 0..n {
        let c = member_config(cfg, i, n);
        match net.channel_connect(remote, key.wrapping_add(i), c, wait_ms) {
            Ok(ch) => {
                if members.push_within_capacity(ch.clone()).is_err() {
                    net.channel_close(&ch);
                    close_members(net, &members);
                    return Err(ENOMEM);
                }
            }
            Err(e) => {
                close_members(net, &members);
                return Err(e);
            }
        }
    }
    Ok(members)
}

/// Tears every channel of `members` down.
pub(crate) fn close_members(net: &Arc<Net>, members: &[Arc<TpChannel>]) {
    for c in members {
        net.channel_close(c);
    }
}
