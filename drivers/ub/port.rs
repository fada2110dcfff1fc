// SPDX-License-Identifier: GPL-2.0
//! One port of a controller: its TX and RX rings, its `ub-proto` data link
//! engine ([`Link`]), its work item and its hrtimer.
//!
//! Contexts (the rule rxe learnt the hard way):
//! - the port's MSI-X handler ([`Port::interrupt`]) only reads and clears
//!   `INT_CAUSE`, remembers the causes and queues the port's work;
//! - the hrtimer only queues the work;
//! - the work ([`Port::run`]) is the only caller of the port's [`Link`]: it
//!   drains RX completions into the link, runs the link's timers, acts on
//!   its events (a retrain through `PHY_CTRL`, link down), fills TX
//!   descriptors from the link, re-arms the hrtimer from the link's next
//!   deadline; then, with the port lock released, it hands the received
//!   packets to the controller's endpoint ([`crate::net::Net`]).
//!
//! Locking: [`Port::state`] (a mutex: only process context takes it) guards
//! everything the work changes. Lock order: the endpoint's lock, then a
//! port's, never the reverse; the work never holds its port lock while it
//! takes the endpoint's.
//!
//! Lifetime: a port is an `Arc`; the controller, the endpoint, the IRQ
//! handler, the armed hrtimer and a queued work item each hold a
//! reference. [`Port::shutdown`] stops it: no new work is queued, the timer
//! is cancelled, and a running work item returns early.

use kernel::{
    bindings, impl_has_hr_timer,
    io::{
        register::{Array, RegisterBase, WithBase},
        Io,
    },
    new_mutex,
    prelude::*,
    sync::{
        atomic::{Atomic, Relaxed},
        Arc, ArcBorrow, Mutex,
    },
    time::{
        hrtimer::{
            ArcHrTimerHandle, HrTimer, HrTimerCallback, HrTimerCallbackContext, HrTimerPointer,
            HrTimerRestart, RelativeMode,
        },
        Delta, Monotonic,
    },
    workqueue::{self, impl_has_work, new_work, Work, WorkItem},
};

use crate::controller as hw;
use crate::controller::ring::{DescFault, RingFault};
use crate::link::engine::{Delivery, Event, Link, LinkConfig, RxSink, TxPacket, TxSource};
use crate::link::retry::RetrySlot;
use crate::link::DllState;
use crate::pci::Shared;
use crate::regs::{
    Ring, RxRing, TxRing, ERR_STATUS, INT_CAUSE, INT_MASK, INT_MODERATION, PHY_CTRL, PHY_LANE_RATE,
    PHY_LINK_DOWNS, PHY_STATUS, RING_BASE_HI, RING_BASE_LO, RING_CTRL, RING_HEAD, RING_SIZE,
    RING_TAIL,
};
use crate::ring::{DmaRing, BUF_BYTES};
use crate::snapshot::{DevCounters, PortEvent, PortSettings, PortSnapshot, VlSnapshot};
use crate::ub_net::Net;

/// Descriptors per ring.
pub(crate) const RING_SLOTS: u32 = 64;
/// RX slots never posted. A head the device moves back by `k` slots reads
/// as `RING_SLOTS - k` completions, which a ring with every slot posted
/// (`RING_SLOTS - 1`) cannot tell from real ones. With this many kept back,
/// a head moved back by up to this many slots falls outside the posted
/// window and is refused as a double completion
/// (`RingFault::HeadMovedBack`) before any slot is delivered twice.
const RX_UNPOSTED: u32 = 8;
/// Packets the endpoint may queue on a port before the port is full (the
/// endpoint keeps the rest in its own queues).
pub(crate) const TXQ_SLOTS: usize = 32;
/// Received packets waiting for the endpoint.
const UPQ_SLOTS: usize = 64;
/// Largest network packet a port carries (after the LPH, ICRC included).
pub(crate) const MAX_PACKET: usize = 4096 + 256;
/// Retry buffer depth in blocks.
const RETRY_SLOTS: usize = 1024;
/// Least time between two MSI-X messages of a port (µs): bounds the
/// interrupt rate a busy (or hostile) device can cause.
const INT_MODERATION_US: u32 = 20;
/// Interrupts without any cause in one run of the work before the port is
/// said to be under an interrupt storm (counted, and its causes masked
/// until the next run).
const STORM_THRESHOLD: u64 = 256;

/// The link configuration of every port: timeouts fit a software link
/// driven from a work item (the engine's defaults suit hardware speeds).
fn link_config(settings: &PortSettings, base: &LinkConfig) -> LinkConfig {
    let mut cfg = *base;
    if let Some(t) = settings.num_retry_threshold {
        cfg.num_retry_threshold = t;
    }
    if let Some(t) = settings.num_phy_reinit_threshold {
        cfg.num_phy_reinit_threshold = t;
    }
    if let Some(s) = settings.want_sharing {
        cfg.want_sharing = s;
    }
    cfg
}

/// The default link configuration of a port.
fn default_link_config() -> LinkConfig {
    LinkConfig {
        wait_timeout_ns: 2_000_000,
        credit_return_delay_ns: 200_000,
        credit_timeout_ns: 500_000_000,
        ..LinkConfig::default()
    }
}

/// A network packet in a port queue.
struct Pkt {
    cfg: u8,
    rt: u8,
    vl: u8,
    len: usize,
    data: [u8; MAX_PACKET],
}

/// A bounded FIFO of packets, allocated once.
struct PktQueue {
    slots: KVVec<Pkt>,
    head: usize,
    len: usize,
}

impl PktQueue {
    fn new(n: usize) -> Result<Self> {
        let mut slots = KVVec::with_capacity(n, GFP_KERNEL)?;
        for _ in 0..n {
            slots.push(
                Pkt {
                    cfg: 0,
                    rt: 0,
                    vl: 0,
                    len: 0,
                    data: [0; MAX_PACKET],
                },
                GFP_KERNEL,
            )?;
        }
        Ok(Self {
            slots,
            head: 0,
            len: 0,
        })
    }

    fn is_full(&self) -> bool {
        self.len >= self.slots.len()
    }

    fn len(&self) -> usize {
        self.len
    }

    /// The slot at the back, to be filled and then committed with
    /// [`PktQueue::commit`]; `None` when full.
    fn back(&mut self) -> Option<&mut Pkt> {
        if self.is_full() {
            return None;
        }
        // `checked_rem`: no division-by-zero panic path (the queue is never
        // empty of slots, but the kernel build must not carry one).
        let i = self
            .head
            .checked_add(self.len)?
            .checked_rem(self.slots.len())?;
        self.slots.get_mut(i)
    }

    fn commit(&mut self) {
        if !self.is_full() {
            self.len += 1;
        }
    }

    fn front(&self) -> Option<&Pkt> {
        if self.len == 0 {
            return None;
        }
        self.slots.get(self.head)
    }

    fn pop(&mut self) {
        if self.len > 0 {
            self.head = (self.head + 1).checked_rem(self.slots.len()).unwrap_or(0);
            self.len -= 1;
        }
    }

    fn clear(&mut self) {
        self.head = 0;
        self.len = 0;
    }
}

/// The link's packet source: the port's TX queue, in order (one FIFO for
/// every VL: the head packet's VL is the only one offered).
impl TxSource for PktQueue {
    fn ready(&self) -> u16 {
        self.front()
            .and_then(|p| 1u16.checked_shl(u32::from(p.vl)))
            .unwrap_or(0)
    }

    fn head(&self, vl: u8) -> Option<TxPacket<'_>> {
        let p = self.front().filter(|p| p.vl == vl)?;
        Some(TxPacket {
            cfg: p.cfg,
            rt: p.rt,
            error_flag: false,
            payload: p.data.get(..p.len)?,
        })
    }

    fn pop(&mut self, vl: u8) {
        if self.front().is_some_and(|p| p.vl == vl) {
            PktQueue::pop(self);
        }
    }
}

/// The packet being assembled from the link's pieces. It outlives one RX
/// buffer: a DLLDP longer than a buffer (`CAP_XFER`) arrives in several
/// `Link::handle_receive` calls, and its pieces must land one after the
/// other, not each at offset 0.
struct Reassembly {
    buf: KBox<[u8; MAX_PACKET]>,
    len: usize,
    cfg: u8,
    overflow: bool,
}

/// What the link delivers, assembled into whole packets for the endpoint.
struct Assembler<'a> {
    up: &'a mut PktQueue,
    dropped: &'a mut u64,
    poisoned: &'a mut u64,
    asm: &'a mut Reassembly,
}

impl RxSink for Assembler<'_> {
    fn deliver(&mut self, d: &Delivery<'_>) {
        let asm = &mut *self.asm;
        if d.first {
            asm.len = 0;
            asm.cfg = d.cfg;
            asm.overflow = false;
        }
        let end = asm.len.saturating_add(d.data.len());
        match asm.buf.get_mut(asm.len..end) {
            Some(dst) => {
                dst.copy_from_slice(d.data);
                asm.len = end;
            }
            None => asm.overflow = true,
        }
        if !d.last {
            return;
        }
        if d.error_flag {
            *self.poisoned += 1;
            return;
        }
        let len = asm.len;
        let cfg = asm.cfg;
        let ok = !asm.overflow
            && match self.up.back() {
                Some(p) => match (p.data.get_mut(..len), asm.buf.get(..len)) {
                    (Some(dst), Some(src)) => {
                        dst.copy_from_slice(src);
                        p.len = len;
                        p.cfg = cfg;
                        p.vl = d.vl;
                        p.rt = d.rt;
                        true
                    }
                    _ => false,
                },
                None => false,
            };
        if ok {
            self.up.commit();
        } else {
            *self.dropped += 1;
        }
    }
}

/// Everything a port's work changes (under [`Port::state`]).
struct PortState {
    /// Index of the port's device (for log lines: `ub<dev>: port <n>`).
    dev_index: u32,
    link: Link<KVec<RetrySlot>>,
    link_cfg: LinkConfig,
    tx: DmaRing,
    rx: DmaRing,
    txq: PktQueue,
    up: PktQueue,
    asm: Reassembly,
    scratch: KBox<[u8; BUF_BYTES]>,
    admin_up: bool,
    phy_up: bool,
    lanes: u32,
    lane_rate_mbps: u32,
    link_downs: u64,
    dev: DevCounters,
    up_drops: u64,
    poisoned: u64,
    timer: Option<ArcHrTimerHandle<Port>>,
    timer_deadline: Option<u64>,
    /// DLL state as last reported (for the monitor group).
    reported: DllState,
    /// Interrupt storms seen.
    storms: u64,
    /// `PHY_LINK_DOWNS` as last read: a LinkUp 1→0→1 between two runs of
    /// the work shows only here.
    phy_link_downs: u32,
    /// Link resets carried out for the engine (`Event::LinkResetRequest`).
    link_resets: u64,
}

/// One port (see the module documentation).
#[pin_data]
pub(crate) struct Port {
    index: u32,
    shared: Arc<Shared>,
    net: Arc<Net>,
    #[pin]
    state: Mutex<PortState>,
    #[pin]
    work: Work<Port>,
    #[pin]
    timer: HrTimer<Port>,
    /// `INT_CAUSE` bits the IRQ handler saw, not yet handled by the work.
    causes: Atomic<u32>,
    /// `ERR_STATUS` bits the global vector's handler cleared (it must, to
    /// quiet `GERR.PORT`), not yet handled by the work.
    errors: Atomic<u32>,
    /// Interrupts taken on the port's vector.
    interrupts: Atomic<u64>,
    /// Interrupts since the last run of the work without any cause.
    causeless: Atomic<u64>,
    /// Set by [`Port::shutdown`]: nothing is queued or armed any more.
    stopping: Atomic<bool>,
    /// The port's DLL is in DLL_Normal (read by the endpoint's routing).
    dll_up: Atomic<bool>,
    /// The endpoint found the TX queue full ([`Port::tx_room`]) and waits
    /// for room: the work runs it once the queue drained.
    net_waits_tx: Atomic<bool>,
}

impl_has_work! {
    impl HasWork<Self> for Port { self.work }
}

impl_has_hr_timer! {
    impl HasHrTimer<Self> for Port {
        mode: RelativeMode<Monotonic>, field: self.timer
    }
}

/// The monotonic clock in ns: the time base of every `ub-proto` engine.
pub(crate) fn now_ns() -> u64 {
    // SAFETY: `ktime_get` has no preconditions.
    let t = unsafe { bindings::ktime_get() };
    u64::try_from(t).unwrap_or(0)
}

impl Port {
    /// Allocates a port with its rings, queues and retry buffer, and
    /// programs its rings (disabled PHY: [`Port::start`] enables it).
    pub(crate) fn new(
        dev: &kernel::device::Device<kernel::device::Bound>,
        shared: Arc<Shared>,
        net: Arc<Net>,
        index: u32,
    ) -> Result<Arc<Self>> {
        let link_cfg = default_link_config();
        let mut retry = KVec::with_capacity(RETRY_SLOTS, GFP_KERNEL)?;
        for _ in 0..RETRY_SLOTS {
            retry.push(RetrySlot::EMPTY, GFP_KERNEL)?;
        }
        let link = Link::new(link_cfg, retry).map_err(|_| EINVAL)?;
        let state = PortState {
            dev_index: net.index(),
            link,
            link_cfg,
            tx: DmaRing::new(dev, RING_SLOTS)?,
            rx: DmaRing::new(dev, RING_SLOTS)?,
            txq: PktQueue::new(TXQ_SLOTS)?,
            up: PktQueue::new(UPQ_SLOTS)?,
            asm: Reassembly {
                buf: KBox::new([0; MAX_PACKET], GFP_KERNEL)?,
                len: 0,
                cfg: 0,
                overflow: false,
            },
            scratch: KBox::new([0; BUF_BYTES], GFP_KERNEL)?,
            admin_up: true,
            phy_up: false,
            lanes: 0,
            lane_rate_mbps: 0,
            link_downs: 0,
            dev: DevCounters::default(),
            up_drops: 0,
            poisoned: 0,
            timer: None,
            timer_deadline: None,
            reported: DllState::Disabled,
            storms: 0,
            phy_link_downs: 0,
            link_resets: 0,
        };
        Arc::pin_init(
            pin_init!(Self {
                index,
                shared,
                net,
                state <- new_mutex!(state),
                work <- new_work!("ub::Port::work"),
                timer <- HrTimer::new(),
                causes: Atomic::new(0),
                errors: Atomic::new(0),
                interrupts: Atomic::new(0),
                causeless: Atomic::new(0),
                stopping: Atomic::new(false),
                dll_up: Atomic::new(false),
                net_waits_tx: Atomic::new(false),
            }),
            GFP_KERNEL,
        )
    }

    /// Whether the DLL is up (DLL_Normal).
    pub(crate) fn dll_up(&self) -> bool {
        self.dll_up.load(Relaxed)
    }

    /// Programs and enables both rings, posts every RX buffer, unmasks
    /// the port's interrupts and enables the PHY.
    pub(crate) fn start(self: &Arc<Self>) -> Result {
        {
            let mut st = self.state.lock();
            let bar = self.shared.bar.try_access().ok_or(ENODEV)?;
            st.program_rings(&bar, self.index)?;
            let p = self.idx();
            // Link-downs before this load are not ours to count.
            st.phy_link_downs = bar
                .try_read(PHY_LINK_DOWNS::try_at(p).ok_or(ENODEV)?)?
                .into_raw();
            bar.try_write(
                INT_MODERATION::try_at(p).ok_or(ENODEV)?,
                INT_MODERATION::from_raw(INT_MODERATION_US),
            )?;
            bar.try_write(INT_MASK::try_at(p).ok_or(ENODEV)?, INT_MASK::zeroed())?;
            st.write_phy_ctrl(&bar, p, false)?;
        }
        self.kick();
        Ok(())
    }

    fn idx(&self) -> usize {
        self.index as usize
    }

    /// Queues the port's work (from any context).
    pub(crate) fn kick(self: &Arc<Self>) {
        if self.stopping.load(Relaxed) {
            return;
        }
        // Already queued: the queued run will see everything.
        let _ = workqueue::system().enqueue(self.clone());
    }

    /// The MSI-X handler's part (hard IRQ context): read and clear the
    /// causes, remember them, queue the work.
    pub(crate) fn interrupt(self: &Arc<Self>, bar: &Bar0Access<'_>) -> bool {
        self.interrupts.fetch_add(1, Relaxed);
        let cause = INT_CAUSE::try_at(self.idx())
            .map(|loc| bar.try_read(loc))
            .and_then(|r| r.ok());
        let raw = cause.map(|c| c.into_raw()).unwrap_or(0);
        if raw == 0 {
            self.causeless.fetch_add(1, Relaxed);
            return false;
        }
        if let (Some(loc), Some(c)) = (INT_CAUSE::try_at(self.idx()), cause) {
            // RW1C: writing back what was read clears exactly those causes.
            let _ = bar.try_write(loc, c);
        }
        or_bits(&self.causes, raw);
        self.kick();
        true
    }

    /// Hands the port `ERR_STATUS` bits another handler read and cleared
    /// (the global vector's, hard IRQ context), and queues the work, which
    /// handles them as if it had read them itself: an error is never lost
    /// between the two vectors.
    pub(crate) fn device_errors(self: &Arc<Self>, bits: u32) {
        or_bits(&self.errors, bits);
        self.kick();
    }

    /// Stops the port for good (unbind, module unload): no more work or
    /// timer, the PHY and rings disabled. Waits for a running work item.
    pub(crate) fn shutdown(self: &Arc<Self>) {
        self.stopping.store(true, Relaxed);
        // No more interrupts from the port; a handler already running
        // finishes before we go on (it may still have queued the work,
        // which the flush below waits for).
        if let Some(bar) = self.shared.bar.try_access() {
            if let Some(loc) = INT_MASK::try_at(self.idx()) {
                let _ = bar.try_write(loc, INT_MASK::from_raw(0x3f));
            }
        }
        if let Some(&irq) = self.shared.irq.get(self.idx() + 1) {
            // SAFETY: `irq` is the Linux IRQ number of this port's vector,
            // requested at probe and still registered (the registrations
            // are dropped after unbind); `synchronize_irq` only waits.
            unsafe { bindings::synchronize_irq(irq) };
        }
        let handle = {
            let mut st = self.state.lock();
            st.timer_deadline = None;
            st.timer.take()
        };
        // Cancels the timer and waits for a running callback.
        drop(handle);
        // SAFETY: `work` is a field of a live `Port` (we hold an `Arc`), so
        // the pointer is valid; `flush_work` only waits for the queued or
        // running instance, which sees `stopping` and returns at once (and
        // queues nothing more), releasing the reference the queue held.
        unsafe { bindings::flush_work(Work::raw_get(&self.work)) };
        // The port lock before the BAR guard: the guard is an RCU read-side
        // critical section, in which nothing may sleep.
        let st = self.state.lock();
        if let Some(bar) = self.shared.bar.try_access() {
            if let Some(loc) = PHY_CTRL::try_at(self.idx()) {
                let _ = bar.try_write(loc, PHY_CTRL::zeroed());
            }
            let _ = st.disable_rings(&bar, self.index);
        }
    }

    /// The work: one pass over the port (see the module documentation).
    fn step(self: &Arc<Self>) {
        let now = now_ns();
        let mut event = None;
        let handed_up;
        let tx_resumed;
        {
            let mut st = self.state.lock();
            let Some(bar) = self.shared.bar.try_access() else {
                return;
            };
            let causes = self.causes.xchg(0, Relaxed);
            let errors = self.errors.xchg(0, Relaxed);
            let causeless = self.causeless.xchg(0, Relaxed);
            if causeless > 0 {
                st.dev.irq_storm += causeless;
                if causeless >= STORM_THRESHOLD {
                    st.storms += 1;
                    // One line per power of two of storms: a hostile
                    // device cannot flood the log.
                    if st.storms.is_power_of_two() {
                        pr_warn!(
                            "ub{}: port {}: {} interrupts without a cause (interrupt storm {})\n",
                            st.dev_index,
                            self.index,
                            causeless,
                            st.storms
                        );
                    }
                }
            }
            st.dev.interrupts = self.interrupts.load(Relaxed);
            if let Err(e) = st.poll(&bar, self.index, now, causes, errors) {
                pr_err!(
                    "ub{}: port {}: stopped after a device error ({:?})\n",
                    st.dev_index,
                    self.index,
                    e
                );
            }
            let state = st.link.state();
            self.dll_up.store(state == DllState::Normal, Relaxed);
            // Only entering and leaving DLL_Normal is announced; the init
            // steps in between are not worth a notification.
            let was_up = st.reported == DllState::Normal;
            let is_up = state == DllState::Normal;
            if is_up != was_up {
                event = Some(if is_up {
                    PortEvent::LinkUp
                } else {
                    PortEvent::LinkDown
                });
            }
            if state != st.reported {
                st.reported = state;
            }
            handed_up = st.up.len() > 0;
            // A sender that receives nothing (CTP and UTP datagrams have no
            // acknowledgement) has no other reason to run the endpoint:
            // what it queued beyond a full port would wait for ever.
            tx_resumed = !st.txq.is_full() && self.net_waits_tx.xchg(false, Relaxed);
            if !self.stopping.load(Relaxed) {
                st.arm_timer(self, now);
            }
        }
        if let Some(ev) = event {
            match ev {
                PortEvent::LinkUp => pr_info!(
                    "ub{}: port {}: link up (DLL_Normal)\n",
                    self.net.index(),
                    self.index
                ),
                PortEvent::LinkDown => {
                    pr_info!("ub{}: port {}: link down\n", self.net.index(), self.index)
                }
                _ => {}
            }
            if let Ok(snap) = self.snapshot() {
                crate::netlink::notify_port(&snap, ev);
            }
        }
        if handed_up || event.is_some() || tx_resumed {
            self.net.run();
        }
    }

    /// Moves the packets received on this port into `take` (the
    /// endpoint), one at a time, while `take` says it has room for
    /// another; `true` if packets are left. Called by the endpoint with
    /// its lock held (lock order endpoint → port).
    pub(crate) fn drain_up(&self, mut take: impl FnMut(u8, &[u8]) -> bool) -> bool {
        let mut st = self.state.lock();
        while let Some(p) = st.up.front() {
            let room = match p.data.get(..p.len) {
                Some(bytes) => take(p.cfg, bytes),
                None => true,
            };
            st.up.pop();
            if !room {
                break;
            }
        }
        st.up.len() > 0
    }

    /// Queues one packet from the endpoint; `false` (nothing queued) if the
    /// port's queue is full or its link is down.
    pub(crate) fn queue_tx(&self, cfg: u8, rt: u8, sl: u8, bytes: &[u8]) -> bool {
        let mut st = self.state.lock();
        if st.link.state() != DllState::Normal {
            return false;
        }
        let Some(p) = st.txq.back() else {
            return false;
        };
        let Some(dst) = p.data.get_mut(..bytes.len()) else {
            return false;
        };
        dst.copy_from_slice(bytes);
        p.len = bytes.len();
        p.cfg = cfg;
        p.rt = rt;
        // One VL per SL (16 of each).
        p.vl = sl & 0xf;
        st.txq.commit();
        true
    }

    /// Whether the port's TX queue has room for a packet; if not, the
    /// port's work runs the endpoint again once it has.
    pub(crate) fn tx_room(&self) -> bool {
        let st = self.state.lock();
        let full = st.txq.is_full();
        if full {
            // Under the lock the work checks it with: no wake-up is lost.
            self.net_waits_tx.store(true, Relaxed);
        }
        drop(st);
        !full
    }

    /// Applies `ubctl port set`: validated by the caller, all or nothing.
    pub(crate) fn apply(self: &Arc<Self>, set: &PortSettings) -> Result {
        let relink = set.num_retry_threshold.is_some()
            || set.num_phy_reinit_threshold.is_some()
            || set.want_sharing.is_some();
        // Allocated before any lock or the BAR guard (an RCU read-side
        // section, where nothing may sleep).
        let fresh = if relink {
            let cfg = link_config(set, &self.state.lock().link_cfg);
            let mut retry = KVec::with_capacity(RETRY_SLOTS, GFP_KERNEL)?;
            for _ in 0..RETRY_SLOTS {
                retry.push(RetrySlot::EMPTY, GFP_KERNEL)?;
            }
            Some((Link::new(cfg, retry).map_err(|_| EINVAL)?, cfg))
        } else {
            None
        };
        {
            let mut st = self.state.lock();
            let bar = self.shared.bar.try_access().ok_or(ENODEV)?;
            if let Some(up) = set.admin_up {
                st.admin_up = up;
            }
            if let Some((link, cfg)) = fresh {
                // The new parameters are negotiated afresh: take the link
                // through a PHY retrain (its peer re-initialises too).
                st.link = link;
                st.link_cfg = cfg;
                st.txq.clear();
                st.up.clear();
                st.phy_up = false;
                st.write_phy_ctrl(&bar, self.idx(), true)?;
            } else {
                st.write_phy_ctrl(&bar, self.idx(), false)?;
            }
        }
        self.kick();
        Ok(())
    }

    /// The port's state for netlink.
    pub(crate) fn snapshot(&self) -> Result<PortSnapshot> {
        let st = self.state.lock();
        let mut vls = [VlSnapshot::default(); 16];
        let neg = st.link.negotiated().copied();
        let vl_count = neg.map(|n| n.vls).unwrap_or(0);
        for (vl, v) in vls.iter_mut().enumerate().take(usize::from(vl_count)) {
            *v = VlSnapshot {
                tx_credits: st.link.tx_credits().available(vl),
                rx_owed: st.link.rx_credits().pending(vl),
                initial: st.link.rx_credits().granted().get(vl).copied().unwrap_or(0),
                credit_stalls: st
                    .link
                    .counters()
                    .vl_credit_stalls
                    .get(vl)
                    .copied()
                    .unwrap_or(0),
            };
        }
        let mut dev = st.dev;
        dev.garbage_flits = st.link.counters().rx_malformed;
        Ok(PortSnapshot {
            dev_index: self.net.index(),
            index: self.index,
            admin_up: st.admin_up,
            phy_up: st.phy_up,
            lanes: st.lanes,
            lane_rate_mbps: st.lane_rate_mbps,
            dll: st.link.state(),
            retry: st.link.retry_req_state(),
            num_retry: st.link.num_retry(),
            num_retry_threshold: st.link_cfg.num_retry_threshold,
            num_phy_reinit_threshold: st.link_cfg.num_phy_reinit_threshold,
            want_sharing: st.link_cfg.want_sharing,
            negotiated: neg,
            retry_buf_depth: RETRY_SLOTS as u32,
            vls,
            vl_count,
            link: *st.link.counters(),
            link_downs: st.link_downs,
            dev,
        })
    }
}

/// Sets `bits` in `a` (the kernel's `Atomic` has no `fetch_or`): the IRQ
/// handlers record what the port's work must handle.
fn or_bits(a: &Atomic<u32>, bits: u32) {
    let mut cur = a.load(Relaxed);
    while let Err(seen) = a.cmpxchg(cur, cur | bits, Relaxed) {
        cur = seen;
    }
}

/// BAR0 while it is mapped (what [`Bar0`]'s guard dereferences to).
pub(crate) type Bar0Access<'a> = kernel::pci::Bar<'a, { crate::pci::BAR0_SIZE }>;

/// Writes the base and size of ring block `B` (the TX or the RX ring) of
/// port `p`; the ring must be disabled (the registers are RW* only then).
fn program_ring<B: RegisterBase<Ring>>(bar: &Bar0Access<'_>, p: usize, base: u64) -> Result {
    let (lo, hi) = hw::split_u64(base);
    bar.try_write(
        RING_BASE_LO::of::<B>().try_at(p).ok_or(ENODEV)?,
        RING_BASE_LO::from_raw(lo),
    )?;
    bar.try_write(
        RING_BASE_HI::of::<B>().try_at(p).ok_or(ENODEV)?,
        RING_BASE_HI::from_raw(hi),
    )?;
    bar.try_write(
        RING_SIZE::of::<B>().try_at(p).ok_or(ENODEV)?,
        RING_SIZE::from_raw(RING_SLOTS),
    )
}

impl PortState {
    /// Writes `PHY_CTRL`: enabled if administratively up, with a retrain
    /// request if `retrain`.
    fn write_phy_ctrl(&self, bar: &Bar0Access<'_>, p: usize, retrain: bool) -> Result {
        let enable = self.admin_up;
        let v = PHY_CTRL::zeroed()
            .with_enable(enable)
            .with_retrain(retrain && enable);
        bar.try_write(PHY_CTRL::try_at(p).ok_or(ENODEV)?, v)
    }

    fn disable_rings(&self, bar: &Bar0Access<'_>, port: u32) -> Result {
        let p = port as usize;
        bar.try_write(
            RING_CTRL::of::<TxRing>().try_at(p).ok_or(ENODEV)?,
            RING_CTRL::zeroed(),
        )?;
        bar.try_write(
            RING_CTRL::of::<RxRing>().try_at(p).ok_or(ENODEV)?,
            RING_CTRL::zeroed(),
        )
    }

    /// Disables, programs and enables both rings, and posts every RX
    /// buffer. Used at start and to recover from a device fault.
    fn program_rings(&mut self, bar: &Bar0Access<'_>, port: u32) -> Result {
        let p = port as usize;
        self.disable_rings(bar, port)?;
        self.tx.reset();
        self.rx.reset();
        program_ring::<TxRing>(bar, p, self.tx.base())?;
        program_ring::<RxRing>(bar, p, self.rx.base())?;
        let enable = RING_CTRL::zeroed().with_enable(true);
        bar.try_write(RING_CTRL::of::<TxRing>().try_at(p).ok_or(ENODEV)?, enable)?;
        bar.try_write(RING_CTRL::of::<RxRing>().try_at(p).ok_or(ENODEV)?, enable)?;
        let mut tail = 0;
        while self.rx.cursor().free() > RX_UNPOSTED {
            tail = self.rx.post(&[], true)?;
        }
        bar.try_write(
            RING_TAIL::of::<RxRing>().try_at(p).ok_or(ENODEV)?,
            RING_TAIL::from_raw(tail),
        )?;
        Ok(())
    }

    /// Recovers from a device fault: counts the ring reset, reprograms
    /// both rings and has the link repair what the reset threw away, in
    /// both directions. Received flits lost with the RX ring: the link
    /// requests a retry. Flits still in TX descriptors: the peer never
    /// sees them missing (nothing numbers flits on the wire), so the port
    /// retrains its PHY; after a retrain both ends enter RETRY_REQ
    /// (§4.7.4) and each resends from the other's RcvPtr out of its retry
    /// buffer, which still holds those flits, and the peer returns their
    /// credits. Without the retrain they were lost with their credits, and
    /// under load the port stopped sending while staying in the routes
    /// (`scripts/soak`'s hostile round, Documentation/ub/testing.rst).
    fn recover(&mut self, bar: &Bar0Access<'_>, port: u32, now: u64) -> Result {
        self.dev.ring_resets += 1;
        if self.dev.ring_resets.is_power_of_two() {
            pr_warn!(
                "ub{}: port {}: device fault, rings reset (reset {})\n",
                self.dev_index,
                port,
                self.dev.ring_resets
            );
        }
        self.program_rings(bar, port)?;
        if self.link.state() != DllState::Disabled {
            self.link.receive_error(now, 1);
            self.write_phy_ctrl(bar, port as usize, true)?;
        }
        Ok(())
    }

    /// The PHY link went down: the engine forgets the link, and what was
    /// queued for it is dropped (the endpoint routes round this port from
    /// its next round).
    fn link_down(&mut self, now: u64) {
        let mut dropped = 0;
        let mut poisoned = 0;
        let mut sink = Assembler {
            up: &mut self.up,
            dropped: &mut dropped,
            poisoned: &mut poisoned,
            asm: &mut self.asm,
        };
        self.link.link_down(now, &mut sink);
        self.txq.clear();
    }

    fn ring_fault(&mut self, f: RingFault) {
        match f {
            RingFault::HeadOutOfRange(_) | RingFault::HeadBeyondTail(_) => self.dev.bad_head += 1,
            RingFault::HeadMovedBack(_) => self.dev.double_completion += 1,
        }
    }

    fn desc_fault(&mut self, f: DescFault) {
        match f {
            DescFault::NotDone | DescFault::UnknownStatus(_) => self.dev.bad_status += 1,
            DescFault::BadLength { .. } => self.dev.bad_len += 1,
        }
    }

    /// One pass: PHY state, causes, RX, link timers and events, TX.
    /// `errors` are `ERR_STATUS` bits the global vector already cleared.
    fn poll(
        &mut self,
        bar: &Bar0Access<'_>,
        port: u32,
        now: u64,
        causes: u32,
        errors: u32,
    ) -> Result {
        let p = port as usize;
        let phy = bar.try_read(PHY_STATUS::try_at(p).ok_or(ENODEV)?)?;
        let up = phy.link_up();
        self.lanes = u32::from(phy.lanes().get());
        self.lane_rate_mbps = bar
            .try_read(PHY_LANE_RATE::try_at(p).ok_or(ENODEV)?)?
            .into_raw();
        let downs = bar
            .try_read(PHY_LINK_DOWNS::try_at(p).ok_or(ENODEV)?)?
            .into_raw();
        // The link went down since the last run, even if it is up again
        // now: the peer restarted from DLL_Disabled, so must this end.
        let flapped = downs != self.phy_link_downs;
        self.phy_link_downs = downs;
        if up != self.phy_up || flapped {
            if !up || flapped {
                self.link_downs += 1;
            }
            self.phy_up = up;
        }
        if flapped && self.link.state() != DllState::Disabled {
            self.link_down(now);
        }
        if up && self.link.state() == DllState::Disabled {
            self.link.link_up(now);
        } else if !up && self.link.state() != DllState::Disabled {
            self.link_down(now);
        }
        let cause = INT_CAUSE::from_raw(causes);
        if cause.retrain_done() {
            self.link.phy_retrained(now);
        }
        if cause.error() || errors != 0 {
            let read = bar.try_read(ERR_STATUS::try_at(p).ok_or(ENODEV)?)?;
            // RW1C: writing back what was read clears it.
            bar.try_write(ERR_STATUS::try_at(p).ok_or(ENODEV)?, read)?;
            let err = ERR_STATUS::from_raw(read.into_raw() | errors);
            if err.ring_dma() || err.ring_cfg() {
                self.recover(bar, port, now)?;
            }
            if err.tx_desc() || err.tx_dma() {
                self.dev.tx_desc_errors += 1;
            }
            if err.rx_desc() {
                self.dev.rx_desc_errors += 1;
            }
        }
        self.poll_rx(bar, port, now)?;
        if self.link.poll_timeout().is_some_and(|t| t <= now) {
            self.link.handle_timeout(now);
        }
        while let Some(ev) = self.link.poll_event() {
            match ev {
                Event::RetrainRequest => self.write_phy_ctrl(bar, p, true)?,
                // The engine gave up (RETRY_REQ_SM ERROR, a failed mode
                // change): take the link down on both ends and start over
                // (Documentation/ub/link.rst, "Link reset request").
                Event::LinkResetRequest => {
                    self.link_resets += 1;
                    if self.link_resets.is_power_of_two() {
                        pr_warn!(
                            "ub{}: port {}: link reset (the link layer gave up; reset {})\n",
                            self.dev_index,
                            port,
                            self.link_resets
                        );
                    }
                    bar.try_write(PHY_CTRL::try_at(p).ok_or(ENODEV)?, PHY_CTRL::zeroed())?;
                    self.link_down(now);
                    self.link.reset();
                    self.phy_up = false;
                    self.write_phy_ctrl(bar, p, false)?;
                }
                _ => {}
            }
        }
        self.poll_tx(bar, port, now)
    }

    fn poll_rx(&mut self, bar: &Bar0Access<'_>, port: u32, now: u64) -> Result {
        let p = port as usize;
        let head = bar
            .try_read(RING_HEAD::of::<RxRing>().try_at(p).ok_or(ENODEV)?)?
            .into_raw();
        let done = match self.rx.completed(head) {
            Ok(n) => n,
            Err(f) => {
                self.ring_fault(f);
                return self.recover(bar, port, now);
            }
        };
        let mut tail = None;
        for _ in 0..done {
            let Some((slot, verdict)) = self.rx.reclaim() else {
                break;
            };
            match verdict {
                Ok(c) => {
                    if c.lost > 0 {
                        self.dev.rx_lost_flits += u64::from(c.lost);
                        self.link.receive_error(now, u32::from(c.lost));
                    }
                    if c.error.is_some() {
                        self.dev.rx_desc_errors += 1;
                    } else {
                        let len = usize::from(c.len);
                        let Some(buf) = self.scratch.get_mut(..len) else {
                            self.dev.bad_len += 1;
                            continue;
                        };
                        self.rx.read_buf(slot, buf)?;
                        let mut sink = Assembler {
                            up: &mut self.up,
                            dropped: &mut self.up_drops,
                            poisoned: &mut self.poisoned,
                            asm: &mut self.asm,
                        };
                        self.link.handle_receive(now, buf, &mut sink);
                    }
                }
                Err(f) => {
                    self.desc_fault(f);
                    // What the buffer held cannot be trusted: the link
                    // sees lost flits and its retry repairs them.
                    self.link.receive_error(now, 1);
                }
            }
            tail = Some(self.rx.post(&[], true)?);
        }
        if let Some(t) = tail {
            bar.try_write(
                RING_TAIL::of::<RxRing>().try_at(p).ok_or(ENODEV)?,
                RING_TAIL::from_raw(t),
            )?;
        }
        Ok(())
    }

    fn poll_tx(&mut self, bar: &Bar0Access<'_>, port: u32, now: u64) -> Result {
        let p = port as usize;
        let head = bar
            .try_read(RING_HEAD::of::<TxRing>().try_at(p).ok_or(ENODEV)?)?
            .into_raw();
        match self.tx.completed(head) {
            Ok(done) => {
                for _ in 0..done {
                    match self.tx.reclaim() {
                        Some((_, Ok(c))) if c.error.is_some() => self.dev.tx_desc_errors += 1,
                        Some((_, Ok(_))) => {}
                        Some((_, Err(f))) => self.desc_fault(f),
                        None => break,
                    }
                }
            }
            Err(f) => {
                self.ring_fault(f);
                return self.recover(bar, port, now);
            }
        }
        let mut tail = None;
        while self.tx.cursor().free() > 0 {
            let n = self
                .link
                .poll_transmit(now, &mut self.scratch[..], &mut self.txq);
            if n == 0 {
                break;
            }
            let Some(data) = self.scratch.get(..n) else {
                break;
            };
            tail = Some(self.tx.post(data, false)?);
        }
        if let Some(t) = tail {
            bar.try_write(
                RING_TAIL::of::<TxRing>().try_at(p).ok_or(ENODEV)?,
                RING_TAIL::from_raw(t),
            )?;
        }
        Ok(())
    }

    /// Arms the hrtimer for the link's next deadline (or a slow poll while
    /// the PHY is down, to notice LinkUp even without an interrupt).
    fn arm_timer(&mut self, port: &Arc<Port>, now: u64) {
        // Nothing due: a slow poll notices LinkUp without an interrupt.
        let deadline = self
            .link
            .poll_timeout()
            .unwrap_or(now.saturating_add(100_000_000));
        if self.timer_deadline == Some(deadline) && self.timer.is_some() {
            return;
        }
        let delay = deadline.saturating_sub(now).max(500_000);
        // Cancel the old timer before starting it again: dropping the old
        // handle after the start would cancel the new expiry.
        drop(self.timer.take());
        let handle = port
            .clone()
            .start(Delta::from_nanos(i64::try_from(delay).unwrap_or(i64::MAX)));
        // Replacing the old handle cancels the old timer.
        self.timer = Some(handle);
        self.timer_deadline = Some(deadline);
    }
}

impl WorkItem for Port {
    type Pointer = Arc<Port>;

    fn run(this: Arc<Port>) {
        if this.stopping.load(Relaxed) {
            return;
        }
        this.step();
    }
}

impl HrTimerCallback for Port {
    type Pointer<'a> = Arc<Port>;

    fn run(this: ArcBorrow<'_, Port>, _ctx: HrTimerCallbackContext<'_, Self>) -> HrTimerRestart {
        // Hard IRQ context: only queue the work.
        let port: Arc<Port> = this.into();
        port.kick();
        HrTimerRestart::NoRestart
    }
}
