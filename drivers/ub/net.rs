// SPDX-License-Identifier: GPL-2.0
//! The network layer of one controller: its `ub_proto::host` endpoint over
//! its ports, and the in-band echo.
//!
//! The endpoint owns the addresses, the NPI, the routes over the ports
//! (a port whose DLL is not in DLL_Normal is left out of every route), the
//! network header and the ICRC (with the kernel's `crc32_le`); the driver
//! only moves packets: a port's work hands what its link received to
//! [`Net::run`], which gives it to the endpoint and queues what the endpoint
//! sends on the ports it chose. Echo requests (UTP datagrams,
//! `ub_proto::host::echo`) are answered here; replies go back to the
//! netlink socket that asked.
//!
//! TP Channels (`channel.rs`) are the endpoint's RTP channels: the device's
//! channel table holds one [`TpChannel`] per channel, to which the endpoint's
//! deliveries and events are handed, and from which it reads the bytes of
//! the messages it sends. CTP files (`ctp.rs`) send datagrams out of the
//! datagram store and receive the CTP datagrams of their remote. TP
//! Channel Groups (a group file's, `group.rs`, and those netlink's
//! `tpg-new` holds unclaimed) are recorded by the endpoint's group number
//! ([`TpgRecord`]) for `tpg-get` and their notifications.
//!
//! Locking: [`Net::state`] (a mutex, process context only) guards the
//! endpoint. Lock order: registry → endpoint → port → channel. A port's work
//! takes this lock only after releasing its own.
//!
//! Lifetime: an `Arc`, held by the controller, the registry, every port
//! (to hand packets up), and a queued work item or armed timer.
//! [`Net::shutdown`] drops the endpoint's references to the ports, which
//! breaks the only reference cycle.

use kernel::{
    bindings, impl_has_hr_timer, new_condvar, new_mutex,
    prelude::*,
    sync::{
        atomic::{Atomic, Relaxed},
        Arc, ArcBorrow, CondVar, Mutex,
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

use crate::channel::{cause_errno, TpChannel};
use crate::ctp::{CtpEnd, CTP_HANDLE_BASE};
use crate::host::echo::{Echo, EchoKind, ECHO_HEADER_LEN};
use crate::host::{
    Addr, AllocError, ChannelConfig, ConfigError, DatagramKind, Delivery, DeliverySink, Endpoint,
    EndpointConfig, Event, GroupError, LocalAddrs, MessageSource, MsgRef, OpenError, Random,
    RtoConfig, SendError, Storage,
};
use crate::kapi::KernelTp;
use crate::link::engine::max_dlldp_payload;
use crate::link::frame::Mode;
use crate::port::{now_ns, Port, MAX_PACKET};
use crate::proto::net::npi::{Npi, NpiMode};
use crate::proto::net::route::RouteEntry;
use crate::snapshot::{
    CtpCounters, DevSnapshot, EchoReply, EchoRequest, Field, Refusal, ReplyTo, RouteSnapshot,
    TpEvent, TpSnapshot, TpgEvent, TpgMember, TpgSnapshot,
};
use crate::transport::cm::{ChannelState, CmTiming};
use crate::transport::tpg::TpgPolicy;

/// Datagrams (echo requests and replies, CTP) in flight at once.
const DGRAM_SLOTS: usize = 32;
/// Of those, the most CTP files may hold (the rest stay for the echo
/// service, which a CTP stream must not starve).
const CTP_DGRAM_SLOTS: u32 = 24;
/// CTP files of a device (one per remote address).
const MAX_CTP_FILES: usize = 64;
/// Largest echo payload (the spec's `size` check).
pub(crate) const ECHO_MAX_DATA: usize = 4096;
/// Echo requests remembered while waiting for their reply.
const ECHO_PENDING: usize = 64;
/// Echo messages one round of [`Net::run`] may answer or report (a
/// larger burst takes several rounds).
const ECHO_BATCH: usize = 16;
/// Rounds of one [`Net::run`]: enough for every port's whole queue of
/// received packets (`port::UPQ_SLOTS`) in batches of the smallest batch
/// ([`FAIL_BATCH`]) on two ports; a run that needs more queues itself again.
const MAX_ROUNDS: usize = 16;
/// Channels of a device (the endpoint's table).
const MAX_CHANNELS: u32 = 64;
/// Channels a peer opened that no file has bound yet; more are refused.
const MAX_UNCLAIMED: usize = 16;
/// Channels one round of [`Net::run`] may fail (over their unread limit).
const FAIL_BATCH: usize = 8;
/// Channel notifications queued between two rounds of [`Net::run`]; more
/// are dropped (a monitor may miss events, as with rtnetlink).
const TP_EVENTS: usize = 16;
/// TP Channel Groups of a device (the endpoint's group table): a group
/// file (`group.rs`) or `tpg-new` takes up to 8 channels of the 64.
const MAX_GROUPS: usize = 16;
/// Group notifications queued between two rounds of [`Net::run`], as
/// [`TP_EVENTS`].
const TPG_EVENTS: usize = 8;

/// The channel configuration the driver uses unless the binder says
/// otherwise: the endpoint's default RTP channel with an RTO that suits a
/// software transport driven from work items (under TCG a round trip takes
/// milliseconds, so 512 µs would expire all the time): a dynamic RTO of
/// 16 ms doubling per expiry, 7 expiries tolerated (about 4 s of silence
/// before ERR).
pub(crate) fn tp_config() -> ChannelConfig {
    let mut c = ChannelConfig::default_rtp();
    c.rto = RtoConfig::Dynamic {
        base_us: 16_384,
        n: 1,
    };
    c.retry_limit = 7;
    c.ack_delay_ns = 200_000;
    c
}

/// The endpoint's allocator: `kvmalloc` with `GFP_KERNEL` (tables are
/// allocated in process context, when the endpoint or a channel is
/// created, never per packet).
pub(crate) struct KernelStorage;

impl Storage for KernelStorage {
    type Buf<T> = KVVec<T>;

    fn alloc<T>(&mut self, n: usize, mut fill: impl FnMut() -> T) -> Result<KVVec<T>, AllocError> {
        let mut v = KVVec::with_capacity(n, GFP_KERNEL).map_err(|_| AllocError)?;
        for _ in 0..n {
            v.push_within_capacity(fill()).map_err(|_| AllocError)?;
        }
        Ok(v)
    }
}

/// Initial PSNs come from the kernel's CSPRNG.
pub(crate) struct KernelRandom;

impl Random for KernelRandom {
    fn random_u32(&mut self) -> u32 {
        // SAFETY: `get_random_u32` has no preconditions.
        unsafe { bindings::get_random_u32() }
    }
}

type HostEndpoint = Endpoint<KernelStorage, KernelRandom>;

/// One datagram's bytes, kept until the endpoint reports it sent. A
/// packet's worth: the endpoint's packets are at most `MAX_PACKET` bytes,
/// so every datagram it takes (`Endpoint::max_datagram`) fits.
struct DgramBuf {
    len: usize,
    data: [u8; MAX_PACKET],
}

const _: () = assert!(MAX_PACKET >= ECHO_HEADER_LEN + ECHO_MAX_DATA);

/// The message store of the datagrams.
struct Dgrams {
    bufs: KVVec<DgramBuf>,
    /// Bit n set: slot n holds a datagram not yet sent.
    busy: u64,
    /// Bit n set: slot n holds a CTP file's datagram (to `ctp_to[n]`).
    ctp: u64,
    ctp_to: [Option<Addr>; DGRAM_SLOTS],
}

impl Dgrams {
    fn take(&mut self) -> Option<usize> {
        let free = !self.busy & (u64::MAX >> (64 - DGRAM_SLOTS));
        if free == 0 {
            return None;
        }
        let i = free.trailing_zeros() as usize;
        self.busy |= 1 << i;
        Some(i)
    }

    /// A slot for a CTP file's datagram to `to`, within the CTP share.
    fn take_ctp(&mut self, to: Addr) -> Option<usize> {
        if !self.ctp_room() {
            return None;
        }
        let i = self.take()?;
        self.ctp |= 1 << i;
        if let Some(o) = self.ctp_to.get_mut(i) {
            *o = Some(to);
        }
        Some(i)
    }

    /// Whether [`take_ctp`](Self::take_ctp) would find a slot now.
    fn ctp_room(&self) -> bool {
        let free = !self.busy & (u64::MAX >> (64 - DGRAM_SLOTS));
        self.ctp.count_ones() < CTP_DGRAM_SLOTS && free != 0
    }

    /// Frees slot `token`; the remote of the CTP file whose datagram it
    /// held, if it was one.
    fn release(&mut self, token: u64) -> Option<Addr> {
        let i = u32::try_from(token).ok()?;
        let bit = 1u64.checked_shl(i)?;
        self.busy &= !bit;
        if self.ctp & bit == 0 {
            return None;
        }
        self.ctp &= !bit;
        self.ctp_to.get_mut(usize::try_from(i).ok()?)?.take()
    }
}

impl MessageSource for Dgrams {
    fn read(&mut self, msg: MsgRef, offset: u32, out: &mut [u8]) {
        let MsgRef::Datagram { token } = msg else {
            out.fill(0);
            return;
        };
        let src = usize::try_from(token)
            .ok()
            .and_then(|i| self.bufs.get(i))
            .and_then(|b| {
                let off = usize::try_from(offset).ok()?;
                b.data.get(off..off.checked_add(out.len())?.min(b.len))
            });
        match src {
            Some(s) if s.len() == out.len() => out.copy_from_slice(s),
            _ => out.fill(0),
        }
    }
}

/// The bytes of everything the endpoint sends: datagrams and the messages
/// of the channels.
struct Source<'a> {
    dgrams: &'a mut Dgrams,
    chans: &'a [Arc<TpChannel>],
}

impl MessageSource for Source<'_> {
    fn read(&mut self, msg: MsgRef, offset: u32, out: &mut [u8]) {
        match msg {
            MsgRef::Datagram { .. } => self.dgrams.read(msg, offset, out),
            MsgRef::Channel { tpn, token } => match find_chan(self.chans, tpn) {
                Some(c) => c.inner.lock().tx.read(token, offset, out),
                None => out.fill(0),
            },
        }
    }
}

/// The channel `tpn` of the table.
fn find_chan(chans: &[Arc<TpChannel>], tpn: u32) -> Option<&Arc<TpChannel>> {
    chans.iter().find(|c| c.tpn == tpn)
}

/// An echo request waiting for its reply.
#[derive(Clone, Copy)]
struct PendingEcho {
    id: u32,
    seq: u32,
    size: u32,
    reply_to: ReplyTo,
}

/// What a burst of received packets asks for, collected while the
/// endpoint is borrowed.
struct Inbox {
    port: u8,
    /// Requests to answer: (slot holding the reply, to whom).
    answers: [Option<(usize, Addr)>; ECHO_BATCH],
    /// Replies received: (header, data length, from, port).
    replies: [Option<(Echo, u32, Addr, u8)>; ECHO_BATCH],
    corrupt: u64,
    dropped: u64,
}

/// The endpoint's sink: the channels' messages and the echo service.
struct Sink<'a> {
    inbox: &'a mut Inbox,
    dgrams: &'a mut Dgrams,
    chans: &'a [Arc<TpChannel>],
    /// The CTP files, by remote.
    ctps: &'a [Arc<CtpEnd>],
    /// Channels that could not take a message (closed after the burst).
    failed: &'a mut [Option<u32>; FAIL_BATCH],
}

impl Sink<'_> {
    /// Whether one more received packet fits this round: a packet yields
    /// at most one echo (to answer or to report) or one channel to fail,
    /// and none may be dropped for want of a batch slot.
    fn has_room(&self) -> bool {
        self.inbox.answers.iter().any(Option::is_none)
            && self.inbox.replies.iter().any(Option::is_none)
            && self.failed.iter().any(Option::is_none)
    }
}

impl DeliverySink for Sink<'_> {
    fn deliver(&mut self, d: &Delivery<'_>) {
        if let Delivery::Message {
            tpn,
            offset,
            bytes,
            complete,
            ..
        } = *d
        {
            let ok = find_chan(self.chans, tpn)
                .is_none_or(|c| c.deliver(offset, bytes, complete.is_some()));
            if !ok {
                if let Some(f) = self.failed.iter_mut().find(|f| f.is_none()) {
                    *f = Some(tpn);
                }
            }
            return;
        }
        if let Delivery::Datagram {
            kind: DatagramKind::Ctp,
            from,
            bytes,
        } = *d
        {
            // No file bound to the source: dropped (the device has no
            // counter for it; Documentation/ub/tp.rst).
            if let Some(c) = self.ctps.iter().find(|c| c.remote == from) {
                c.deliver(bytes);
            }
            return;
        }
        let Delivery::Datagram {
            kind: DatagramKind::Utp,
            from,
            bytes,
        } = *d
        else {
            return;
        };
        let Ok(echo) = Echo::parse(bytes) else {
            return;
        };
        match echo.kind {
            EchoKind::Request => {
                let Some(slot) = self.inbox.answers.iter_mut().find(|a| a.is_none()) else {
                    self.inbox.dropped += 1;
                    return;
                };
                let Some(i) = self.dgrams.take() else {
                    self.inbox.dropped += 1;
                    return;
                };
                let ok = self
                    .dgrams
                    .bufs
                    .get_mut(i)
                    .and_then(|b| {
                        b.data.get_mut(..bytes.len())?.copy_from_slice(bytes);
                        b.len = bytes.len();
                        Echo::make_reply(b.data.get_mut(..bytes.len())?).ok()
                    })
                    .is_some();
                if ok {
                    *slot = Some((i, from));
                } else {
                    self.dgrams.release(i as u64);
                    self.inbox.dropped += 1;
                }
            }
            EchoKind::Reply => {
                if echo.check_data(bytes).is_err() {
                    self.inbox.corrupt += 1;
                    return;
                }
                let len = u32::try_from(bytes.len().saturating_sub(ECHO_HEADER_LEN)).unwrap_or(0);
                match self.inbox.replies.iter_mut().find(|r| r.is_none()) {
                    Some(r) => *r = Some((echo, len, from, self.inbox.port)),
                    None => self.inbox.dropped += 1,
                }
            }
        }
    }
}

/// Everything [`Net::state`] guards.
struct NetState {
    ep: HostEndpoint,
    ports: KVec<Arc<Port>>,
    dgrams: Dgrams,
    /// The TP channels, until the endpoint reports them closed.
    chans: KVec<Arc<TpChannel>>,
    /// The CTP files, one per remote address, from bind to close.
    ctps: KVec<Arc<CtpEnd>>,
    /// Channels the peer opened and closed before any file bound them,
    /// with messages nobody has read: the endpoint acknowledged those
    /// messages, so they wait here for a binder (who reads them, then the
    /// end of the stream) instead of being dropped. Out of the endpoint's
    /// table (their TPN may be reused); counted with the unclaimed ones.
    lingering: KVec<Arc<TpChannel>>,
    /// In-kernel listens (`kapi.rs`) no peer has opened a channel for yet.
    listeners: KVec<Arc<KernelTp>>,
    pending: [Option<PendingEcho>; ECHO_PENDING],
    pending_next: usize,
    echo_requests: u64,
    echo_replies: u64,
    echo_dropped: u64,
    tx_buf: KBox<[u8; MAX_PACKET]>,
    timer: Option<ArcHrTimerHandle<Net>>,
    /// Channel state changes, errors and closes to announce on the
    /// "monitor" group: queued under this lock by `handle_events`, sent by
    /// [`Net::run`] after releasing it (as ports send theirs outside their
    /// lock).
    tp_events: [Option<TpEvent>; TP_EVENTS],
    /// The device's TP Channel Groups, by the endpoint's group number:
    /// those of group files and those `tpg-new` made, from the group's
    /// creation until the endpoint dissolves it (a member closed).
    tpgs: [Option<TpgRecord>; MAX_GROUPS],
    /// A member's state may have changed since the groups' states were
    /// last announced ([`NetState::note_groups`]).
    groups_changed: bool,
    /// Group state changes and ends to announce, as `tp_events`.
    tpg_events: [Option<TpgEvent>; TPG_EVENTS],
}

/// One TP Channel Group of the device's table ([`NetState::tpgs`]).
///
/// The group is named by its first member's TPN: while the record exists
/// every member is in the endpoint's table (the endpoint dissolves the
/// group, and the record goes, when one is freed), so no other channel has
/// that TPN.
#[derive(Clone, Copy)]
struct TpgRecord {
    /// The members' TPNs in key order; the first `n` are in use.
    tpns: [u32; crate::group::MAX_MEMBERS as usize],
    n: usize,
    /// The state and error last announced (`tpg-change-ntf`).
    announced: Option<(ChannelState, u32)>,
}

impl TpgRecord {
    /// The members' TPNs.
    fn tpns(&self) -> &[u32] {
        self.tpns.get(..self.n).unwrap_or(&self.tpns)
    }

    /// The group's name: its first member's TPN.
    fn first(&self) -> u32 {
        self.tpns().first().copied().unwrap_or(0)
    }
}

/// The network layer of one controller (see the module documentation).
#[pin_data]
pub(crate) struct Net {
    index: u32,
    name: [u8; 32],
    name_len: usize,
    ports: u32,
    version: u32,
    #[pin]
    state: Mutex<NetState>,
    /// Binders waiting for a peer to open a channel (`Event::Incoming`),
    /// with [`Net::state`].
    #[pin]
    incoming: CondVar,
    #[pin]
    work: Work<Net>,
    #[pin]
    timer: HrTimer<Net>,
    stopping: Atomic<bool>,
}

impl_has_work! {
    impl HasWork<Self> for Net { self.work }
}

impl_has_hr_timer! {
    impl HasHrTimer<Self> for Net {
        mode: RelativeMode<Monotonic>, field: self.timer
    }
}

/// The endpoint's configuration: no address and no route until user space
/// configures them (`ubctl addr add`, `ubctl route add`).
fn endpoint_config(ports: u32) -> Result<EndpointConfig> {
    let max_packet = endpoint_max_packet();
    Ok(EndpointConfig {
        local: LocalAddrs::default(),
        npi_mode: NpiMode::Strict(Npi::DEFAULT),
        npi: Npi::DEFAULT,
        ports: u8::try_from(ports)?,
        max_packet: u32::try_from(max_packet)?,
        max_channels: MAX_CHANNELS,
        max_routes: 16,
        max_groups: MAX_GROUPS as u16,
        datagram_queue: DGRAM_SLOTS as u16,
        // Channel setup and teardown messages queue behind data in the
        // switches: after a retransmission storm of a closed channel, a
        // TCG fabric takes a second or more to drain, and 5 tries 100 ms
        // apart failed setups that would have worked (ub_tp.sh saw
        // ECONNREFUSED at both ends). 15 tries 200 ms apart give 3 s.
        cm: CmTiming {
            retry_ns: 200_000_000,
            max_tries: 15,
        },
        // Channels a peer opens are accepted with the driver's
        // configuration and wait for a file to bind them (UB_TP_BIND_LISTEN).
        accept: Some(tp_config()),
        hash_seed: u64::from(KernelRandom.random_u32()),
        icrc: crate::kernel_crc::ICRC_BACKEND,
    })
}

/// A refusal naming `field`.
fn refuse(errno: Error, msg: &'static CStr, field: Option<Field>) -> Refusal {
    Refusal { errno, msg, field }
}

impl Net {
    /// The endpoint of a controller with `ports` ports, registered as
    /// device `index` under `name` (its PCI name).
    pub(crate) fn new(index: u32, name: &CStr, ports: u32, version: u32) -> Result<Arc<Self>> {
        let ep = HostEndpoint::new(endpoint_config(ports)?, KernelStorage, KernelRandom)
            .map_err(|_| ENOMEM)?;
        let mut bufs = KVVec::with_capacity(DGRAM_SLOTS, GFP_KERNEL)?;
        for _ in 0..DGRAM_SLOTS {
            bufs.push(
                DgramBuf {
                    len: 0,
                    data: [0; MAX_PACKET],
                },
                GFP_KERNEL,
            )?;
        }
        let mut ep = ep;
        for p in 0..ports {
            // Down until its DLL reaches DLL_Normal.
            ep.set_port_up(u8::try_from(p)?, false);
        }
        let mut nm = [0u8; 32];
        let src = name.to_bytes();
        let name_len = src.len().min(nm.len() - 1);
        if let (Some(d), Some(s)) = (nm.get_mut(..name_len), src.get(..name_len)) {
            d.copy_from_slice(s);
        }
        let state = NetState {
            ep,
            ports: KVec::new(),
            dgrams: Dgrams {
                bufs,
                busy: 0,
                ctp: 0,
                ctp_to: [None; DGRAM_SLOTS],
            },
            chans: KVec::new(),
            ctps: KVec::new(),
            lingering: KVec::new(),
            listeners: KVec::new(),
            pending: [None; ECHO_PENDING],
            pending_next: 0,
            echo_requests: 0,
            echo_replies: 0,
            echo_dropped: 0,
            tx_buf: KBox::new([0; MAX_PACKET], GFP_KERNEL)?,
            timer: None,
            tp_events: [None; TP_EVENTS],
            tpgs: [None; MAX_GROUPS],
            groups_changed: false,
            tpg_events: [None; TPG_EVENTS],
        };
        Arc::pin_init(
            pin_init!(Self {
                index,
                name: nm,
                name_len,
                ports,
                version,
                state <- new_mutex!(state),
                incoming <- new_condvar!(),
                work <- new_work!("ub::Net::work"),
                timer <- HrTimer::new(),
                stopping: Atomic::new(false),
            }),
            GFP_KERNEL,
        )
    }

    /// Device index.
    pub(crate) fn index(&self) -> u32 {
        self.index
    }

    /// Attaches the ports (once, after they are created).
    pub(crate) fn attach(&self, ports: KVec<Arc<Port>>) {
        self.state.lock().ports = ports;
    }

    /// The port `i`, if it exists.
    pub(crate) fn port(&self, i: u32) -> Option<Arc<Port>> {
        let st = self.state.lock();
        st.ports.get(usize::try_from(i).ok()?).cloned()
    }

    /// Stops the endpoint: no more work or timer, and the references to
    /// the ports are dropped (the caller shuts the ports down after).
    pub(crate) fn shutdown(&self) -> KVec<Arc<Port>> {
        self.stopping.store(true, Relaxed);
        let (handle, ports, chans, lingering, listeners, ctps) = {
            let mut st = self.state.lock();
            (
                st.timer.take(),
                core::mem::take(&mut st.ports),
                core::mem::take(&mut st.chans),
                core::mem::take(&mut st.lingering),
                core::mem::take(&mut st.listeners),
                core::mem::take(&mut st.ctps),
            )
        };
        drop(lingering);
        for k in listeners.iter() {
            KernelTp::orphan(k);
        }
        // The device is going: its channels fail, their readers and writers
        // wake (and binders waiting for a peer give up).
        for c in chans.iter() {
            c.fail(ENODEV);
        }
        for c in ctps.iter() {
            c.fail(ENODEV);
        }
        self.incoming.notify_all();
        drop(handle);
        // SAFETY: `work` is a field of this live `Net`; `flush_work` waits
        // for the queued or running instance, which sees `stopping` and
        // returns at once, queueing nothing more.
        unsafe { bindings::flush_work(Work::raw_get(&self.work)) };
        ports
    }

    /// Queues the endpoint's work.
    fn kick(self: &Arc<Self>) {
        if !self.stopping.load(Relaxed) {
            let _ = workqueue::system().enqueue(self.clone());
        }
    }

    /// The endpoint's call order: port states, received packets, timers,
    /// then everything it can send; in rounds, so that a burst larger
    /// than one round's batches (echoes to answer or report, channels to
    /// fail) is taken whole. Each round's echo replies go to their
    /// sockets with the lock released, before the next round.
    pub(crate) fn run(self: &Arc<Self>) {
        for round in 0..MAX_ROUNDS {
            if self.stopping.load(Relaxed) {
                return;
            }
            if !self.run_round(round) {
                return;
            }
        }
        // Still more after a port's whole queue's worth of rounds: the
        // rest waits for the next run rather than holding this work item.
        self.kick();
    }

    /// One round of [`Net::run`]; `true` if a port still holds received
    /// packets that did not fit this round's batches.
    fn run_round(self: &Arc<Self>, round: usize) -> bool {
        let now = now_ns();
        let mut notify: [Option<(ReplyTo, EchoReply)>; ECHO_BATCH] = [None; ECHO_BATCH];
        let mut incoming = false;
        let mut more = false;
        let (tp_events, tpg_events);
        {
            let mut guard = self.state.lock();
            let st = &mut *guard;
            for (i, port) in st.ports.iter().enumerate() {
                if let Ok(i) = u8::try_from(i) {
                    st.ep.set_port_up(i, port.dll_up());
                }
            }
            let mut inbox = Inbox {
                port: 0,
                answers: [None; ECHO_BATCH],
                replies: [None; ECHO_BATCH],
                corrupt: 0,
                dropped: 0,
            };
            let mut failed = [None; FAIL_BATCH];
            let n = st.ports.len();
            // The round's first port turns, so that one busy port cannot
            // keep the others' packets waiting round after round.
            for k in 0..n {
                let i = round.wrapping_add(k).checked_rem(n).unwrap_or(0);
                let Some(port) = st.ports.get(i).cloned() else {
                    break;
                };
                let Ok(pi) = u8::try_from(i) else {
                    break;
                };
                inbox.port = pi;
                let ep = &mut st.ep;
                let mut sink = Sink {
                    inbox: &mut inbox,
                    dgrams: &mut st.dgrams,
                    chans: &st.chans,
                    ctps: &st.ctps,
                    failed: &mut failed,
                };
                if !sink.has_room() {
                    more = true;
                    break;
                }
                more |= port.drain_up(|cfg, bytes| {
                    ep.handle_packet(now, pi, cfg, bytes, &mut sink);
                    sink.has_room()
                });
            }
            for &tpn in failed.iter().flatten() {
                let _ = st.ep.close(now, tpn);
            }
            st.process_inbox(&inbox, now, self.index, &mut notify);
            incoming |= st.flush(now);
            if st.ep.poll_timeout().is_some_and(|t| t <= now) {
                st.ep.handle_timeout(now);
            }
            incoming |= st.flush(now);
            if incoming {
                self.incoming.notify_all();
            }
            if !self.stopping.load(Relaxed) {
                st.arm_timer(self, now);
            }
            tp_events = core::mem::replace(&mut st.tp_events, [None; TP_EVENTS]);
            tpg_events = core::mem::replace(&mut st.tpg_events, [None; TPG_EVENTS]);
        }
        for (to, reply) in notify.iter().flatten() {
            crate::netlink::echo_reply(to, reply);
        }
        for e in tp_events.iter().flatten() {
            crate::netlink::notify_tp(self.index, e);
        }
        for e in tpg_events.iter().flatten() {
            crate::netlink::notify_tpg(self.index, e);
        }
        more
    }

    /// Sends one echo request; the reply goes to `reply_to`.
    pub(crate) fn echo(
        self: &Arc<Self>,
        req: &EchoRequest,
        reply_to: ReplyTo,
    ) -> Result<(), Refusal> {
        if !matches!(req.dst, Addr::Ipv4(_) | Addr::Ipv6(_)) {
            return Err(refuse(
                EINVAL,
                c"echo rides on UTP: the destination must be an IP address",
                Some(Field::Dst),
            ));
        }
        let size = usize::try_from(req.size).unwrap_or(usize::MAX);
        if size > ECHO_MAX_DATA {
            return Err(refuse(
                EINVAL,
                c"echo size above 4096 bytes",
                Some(Field::Size),
            ));
        }
        {
            let mut guard = self.state.lock();
            let st = &mut *guard;
            let Some(i) = st.dgrams.take() else {
                return Err(refuse(EAGAIN, c"too many echo requests in flight", None));
            };
            let echo = Echo {
                kind: EchoKind::Request,
                id: req.id,
                seq: req.seq,
                stamp: now_ns(),
            };
            let len = match st.dgrams.bufs.get_mut(i).map(|b| {
                let n = echo.write_request(&mut b.data, size);
                if let Ok(n) = n {
                    b.len = n;
                }
                n
            }) {
                Some(Ok(n)) => n,
                _ => {
                    st.dgrams.release(i as u64);
                    return Err(refuse(
                        EINVAL,
                        c"echo size does not fit a datagram",
                        Some(Field::Size),
                    ));
                }
            };
            let sent = st.ep.send_datagram(
                DatagramKind::Utp,
                req.dst,
                i as u64,
                u32::try_from(len).unwrap_or(u32::MAX),
            );
            if let Err(e) = sent {
                st.dgrams.release(i as u64);
                let (errno, msg) = match e {
                    SendError::Format => (
                        EADDRNOTAVAIL,
                        c"no local address of the destination's format (ubctl addr add)",
                    ),
                    SendError::Length => (EMSGSIZE, c"echo does not fit the ports' packet size"),
                    SendError::WouldBlock => (EAGAIN, c"datagram queue full"),
                    _ => (EINVAL, c"echo refused by the endpoint"),
                };
                return Err(refuse(errno, msg, Some(Field::Dst)));
            }
            let slot = st.pending_next % ECHO_PENDING;
            st.pending_next = st.pending_next.wrapping_add(1);
            if let Some(p) = st.pending.get_mut(slot) {
                *p = Some(PendingEcho {
                    id: req.id,
                    seq: req.seq,
                    size: req.size,
                    reply_to,
                });
            }
            let before = st.ep.net_counters().no_route_drops;
            if st.flush(now_ns()) {
                self.incoming.notify_all();
            }
            if st.ep.net_counters().no_route_drops != before {
                return Err(refuse(
                    ENETUNREACH,
                    c"no route with a port up to the destination",
                    Some(Field::Dst),
                ));
            }
        }
        self.kick();
        Ok(())
    }

    /// The device for netlink.
    pub(crate) fn snapshot(&self) -> DevSnapshot {
        let st = self.state.lock();
        let cfg = st.ep.config();
        let l = cfg.local;
        DevSnapshot {
            index: self.index,
            name: self.name,
            name_len: self.name_len,
            ports: self.ports,
            version: self.version,
            addrs: [
                l.cna16.map(Addr::Cna16),
                l.cna24.map(Addr::Cna24),
                l.ipv4.map(Addr::Ipv4),
                l.ipv6.map(Addr::Ipv6),
            ],
            npi_mode: cfg.npi_mode,
            npi: cfg.npi.raw(),
            net: *st.ep.net_counters(),
            echo_requests: st.echo_requests,
            echo_replies: st.echo_replies,
            echo_dropped: st.echo_dropped,
        }
    }

    /// Adds (`add`) or removes a local address.
    pub(crate) fn set_addr(&self, addr: Addr, add: bool) -> Result<(), Refusal> {
        let mut st = self.state.lock();
        let mut l = st.ep.config().local;
        let (had, slot_same) = match addr {
            Addr::Cna16(a) => (l.cna16.is_some(), l.cna16 == Some(a)),
            Addr::Cna24(a) => (l.cna24.is_some(), l.cna24 == Some(a)),
            Addr::Ipv4(a) => (l.ipv4.is_some(), l.ipv4 == Some(a)),
            Addr::Ipv6(a) => (l.ipv6.is_some(), l.ipv6 == Some(a)),
        };
        if add && had {
            return Err(refuse(
                EEXIST,
                c"the device already has an address of this type (delete it first)",
                Some(Field::Addr),
            ));
        }
        if !add && !slot_same {
            return Err(refuse(
                EADDRNOTAVAIL,
                c"the device has no such address",
                Some(Field::Addr),
            ));
        }
        match addr {
            Addr::Cna16(a) => l.cna16 = add.then_some(a),
            Addr::Cna24(a) => l.cna24 = add.then_some(a & 0xff_ffff),
            Addr::Ipv4(a) => l.ipv4 = add.then_some(a),
            Addr::Ipv6(a) => l.ipv6 = add.then_some(a),
        }
        st.ep.set_local(l).map_err(|e| match e {
            ConfigError::Npi => refuse(
                EINVAL,
                c"the NPI is invalid for the IP format (ubctl npi)",
                Some(Field::Addr),
            ),
            _ => refuse(
                EBUSY,
                c"a live channel uses this address",
                Some(Field::Addr),
            ),
        })
    }

    /// Sets the NPI mode and value.
    pub(crate) fn set_npi(&self, mode: NpiMode, npi: u32) -> Result<(), Refusal> {
        let mut st = self.state.lock();
        st.ep.set_npi(mode, Npi::from_raw(npi)).map_err(|_| {
            refuse(
                EINVAL,
                c"partition ID 0 is not a valid NPI (UB spec 5.3.3.1)",
                Some(Field::Npi),
            )
        })
    }

    /// Adds a route.
    pub(crate) fn add_route(&self, r: &RouteSnapshot) -> Result<(), Refusal> {
        let (prefix, width) = r.dst.key();
        if r.prefix_len > width {
            return Err(refuse(
                EINVAL,
                c"prefix length above the address width",
                Some(Field::PrefixLen),
            ));
        }
        let all = u64::MAX >> (64 - self.ports.clamp(1, 64));
        if r.ports == 0 || r.ports & !all != 0 {
            return Err(refuse(
                EINVAL,
                c"ports must name at least one port of the device and no other",
                Some(Field::Ports),
            ));
        }
        let drop_bits = u32::from(width - r.prefix_len);
        let prefix = prefix
            .checked_shr(drop_bits)
            .unwrap_or(0)
            .checked_shl(drop_bits)
            .unwrap_or(0);
        let entry = RouteEntry {
            prefix,
            prefix_len: r.prefix_len,
            width,
            ports: r.ports,
            shortest: 0,
        };
        let mut st = self.state.lock();
        st.ep
            .add_route_spraying(entry, r.per_packet)
            .map_err(|_| refuse(ENOSPC, c"routing table full", None))
    }

    /// Removes a route.
    pub(crate) fn del_route(&self, dst: Addr, prefix_len: u8) -> Result<(), Refusal> {
        let (prefix, width) = dst.key();
        if prefix_len > width {
            return Err(refuse(
                EINVAL,
                c"prefix length above the address width",
                Some(Field::PrefixLen),
            ));
        }
        let drop_bits = u32::from(width - prefix_len);
        let prefix = prefix
            .checked_shr(drop_bits)
            .unwrap_or(0)
            .checked_shl(drop_bits)
            .unwrap_or(0);
        let mut st = self.state.lock();
        if st.ep.remove_route(prefix, prefix_len, width) {
            Ok(())
        } else {
            Err(refuse(ESRCH, c"no such route", Some(Field::Dst)))
        }
    }

    /// Route `i` for a dump.
    pub(crate) fn route(&self, i: u32) -> Option<RouteSnapshot> {
        let st = self.state.lock();
        let (r, per_packet) = st.ep.route_at(usize::try_from(i).ok()?)?;
        let dst = match r.width {
            16 => Addr::Cna16(u16::try_from(r.prefix).ok()?),
            24 => Addr::Cna24(u32::try_from(r.prefix).ok()?),
            32 => Addr::Ipv4(u32::try_from(r.prefix).ok()?.to_be_bytes()),
            _ => Addr::Ipv6(r.prefix.to_be_bytes()),
        };
        Some(RouteSnapshot {
            dev_index: self.index,
            dst,
            prefix_len: r.prefix_len,
            ports: r.ports,
            per_packet,
        })
    }
}

impl Net {
    /// Binds a CTP file to `remote` (a CNA): its end, and the largest
    /// datagram payload the endpoint takes to it. The end `tp-new` made
    /// for `remote`, if there is one unclaimed, with what it received;
    /// else a new one. `EADDRNOTAVAIL` without a local address of
    /// `remote`'s format, `EADDRINUSE` if a file is bound to `remote`
    /// already, `EINVAL` for a non-CNA remote, `ENOSPC` past
    /// [`MAX_CTP_FILES`] ends.
    pub(crate) fn ctp_bind(self: &Arc<Self>, remote: Addr) -> Result<(Arc<CtpEnd>, u32)> {
        let r = {
            let mut st = self.state.lock();
            // Under the lock: `shutdown` sets `stopping` before it takes
            // the table, so an end pushed here is always failed with it.
            if self.stopping.load(Relaxed) {
                return Err(ENODEV);
            }
            let max = st.ctp_max_datagram(remote)?;
            let end = match st.ctps.iter().find(|c| c.remote == remote) {
                Some(c) => {
                    let mut g = c.inner.lock();
                    if g.claimed {
                        return Err(EADDRINUSE);
                    }
                    g.claimed = true;
                    drop(g);
                    c.clone()
                }
                None => st.new_ctp_end(remote, true)?,
            };
            (end, max)
        };
        // The new end's notification goes out.
        self.kick();
        Ok(r)
    }

    /// The CTP file of `end` is closing: its remote is free for a new bind
    /// (its datagrams still queued go out). Nothing if `tp-del` took the
    /// end from the table already.
    pub(crate) fn ctp_close(self: &Arc<Self>, end: &Arc<CtpEnd>) {
        {
            let mut st = self.state.lock();
            let Some(i) = st.ctps.iter().position(|c| Arc::ptr_eq(c, end)) else {
                return;
            };
            if let Ok(c) = st.ctps.remove(i) {
                queue_ctp_event(&mut st.tp_events, &c, true);
            }
        }
        self.kick();
    }

    /// Queues datagram `m` of `end`'s file; `EAGAIN` when the CTP share of
    /// the datagram store is full (a slot frees once the endpoint has sent
    /// one: [`CtpEnd::changed`] moves), or the errno the file fails with.
    pub(crate) fn ctp_send(self: &Arc<Self>, end: &CtpEnd, m: &[u8]) -> Result {
        if self.stopping.load(Relaxed) {
            return Err(ENODEV);
        }
        let len = u32::try_from(m.len()).map_err(|_| EMSGSIZE)?;
        {
            let mut guard = self.state.lock();
            let st = &mut *guard;
            if let Some(e) = end.inner.lock().error {
                return Err(e);
            }
            let i = st.dgrams.take_ctp(end.remote).ok_or(EAGAIN)?;
            let copied = st
                .dgrams
                .bufs
                .get_mut(i)
                .and_then(|b| {
                    b.data.get_mut(..m.len())?.copy_from_slice(m);
                    b.len = m.len();
                    Some(())
                })
                .is_some();
            let sent = if copied {
                st.ep
                    .send_datagram(DatagramKind::Ctp, end.remote, i as u64, len)
            } else {
                Err(SendError::Length)
            };
            if let Err(e) = sent {
                let _ = st.dgrams.release(i as u64);
                return Err(match e {
                    // The store's slots outnumber the endpoint's queue
                    // entries, so only a full queue makes this.
                    SendError::WouldBlock | SendError::NotReady => EAGAIN,
                    SendError::Length => EMSGSIZE,
                    // The local address went since the bind.
                    SendError::Format => EADDRNOTAVAIL,
                    SendError::NoChannel => EINVAL,
                });
            }
            end.accepted();
            if st.flush(now_ns()) {
                self.incoming.notify_all();
            }
        }
        self.kick();
        Ok(())
    }

    /// Whether a CTP `write()` would be taken now (a CTP file's `poll`).
    pub(crate) fn ctp_writable(&self) -> bool {
        self.state.lock().dgrams.ctp_room()
    }
}

/// Why a channel cannot be opened, as an errno.
fn open_errno(e: OpenError) -> Error {
    match e {
        OpenError::Config(ConfigError::NoLocalAddress) => EADDRNOTAVAIL,
        OpenError::Config(_) => EINVAL,
        OpenError::TableFull => ENOSPC,
        OpenError::Alloc => ENOMEM,
        OpenError::Exists => EADDRINUSE,
        // A connect waits for the close first; this is what is left
        // when its time ran out.
        OpenError::Closing => EBUSY,
    }
}

impl Net {
    /// Opens channel `key` to `remote` with `cfg`, or binds the one the peer
    /// opened already (both ends name it `key`). The channel is claimed by
    /// the caller; it reaches RTS later ([`TpChannel::changed`]). A channel
    /// with the same peer and key that is still closing (a file closed it
    /// a moment ago) is waited for, up to `wait_ms`: then `EBUSY`.
    pub(crate) fn channel_connect(
        self: &Arc<Self>,
        remote: Addr,
        key: u32,
        cfg: ChannelConfig,
        wait_ms: u32,
    ) -> Result<Arc<TpChannel>> {
        if self.stopping.load(Relaxed) {
            return Err(ENODEV);
        }
        let mut left = kernel::time::msecs_to_jiffies(wait_ms);
        let ch = {
            let mut st = self.state.lock();
            loop {
                // The peer may open the key to us while we wait.
                if let Some(c) = st.claim(|i| i.remote == remote && i.key == key) {
                    break c;
                }
                match st.ep.connect(now_ns(), remote, key, cfg) {
                    Ok(tpn) => break st.record_opened(tpn, remote, key, true)?,
                    Err(OpenError::Closing) if left > 0 => {}
                    Err(e) => return Err(open_errno(e)),
                }
                // Woken when a channel is freed (or a peer opened one).
                match self.incoming.wait_interruptible_timeout(&mut st, left) {
                    kernel::sync::CondVarTimeoutResult::Timeout => left = 0,
                    kernel::sync::CondVarTimeoutResult::Signal { .. } => return Err(ERESTARTSYS),
                    kernel::sync::CondVarTimeoutResult::Woken { jiffies } => left = jiffies,
                }
                if self.stopping.load(Relaxed) {
                    return Err(ENODEV);
                }
            }
        };
        self.kick();
        Ok(ch)
    }

    /// Waits up to `timeout_ms` for a peer to open channel `key` to us
    /// (from `from`, or from anyone), and claims it.
    pub(crate) fn channel_listen(
        self: &Arc<Self>,
        from: Option<Addr>,
        key: u32,
        timeout_ms: u32,
        nonblock: bool,
    ) -> Result<Arc<TpChannel>> {
        let mut one = self.channel_listen_group(from, key, 1, timeout_ms, nonblock)?;
        one.pop().ok_or(EINVAL)
    }

    /// A group's listen (`group.rs`): waits up to `timeout_ms` until one
    /// peer (`from`, or the first that opens `key`) has opened the `n`
    /// channels `key`, `key + 1`, ... to us, and claims them all at once (a
    /// listen that gives up claims none: they wait for the next binder).
    /// A group `tpg-new` made with the same key and `n` (to `from`, if
    /// given) is claimed the same way.
    pub(crate) fn channel_listen_group(
        self: &Arc<Self>,
        from: Option<Addr>,
        key: u32,
        n: u32,
        timeout_ms: u32,
        nonblock: bool,
    ) -> Result<KVec<Arc<TpChannel>>> {
        let mut out = KVec::with_capacity(usize::try_from(n)?, GFP_KERNEL)?;
        let mut left = kernel::time::msecs_to_jiffies(timeout_ms);
        let mut st = self.state.lock();
        loop {
            if self.stopping.load(Relaxed) {
                return Err(ENODEV);
            }
            if let Some(members) = st.claim_group(from, key, n)? {
                return Ok(members);
            }
            let peer = from.or_else(|| st.claimable(|i| i.answers(key, None)));
            if let Some(peer) = peer {
                let member = |i: u32| {
                    move |c: &crate::channel::TpInner| c.answers(key.wrapping_add(i), Some(peer))
                };
                if (0..n).all(|i| st.claimable(member(i)).is_some()) {
                    for i in 0..n {
                        if let Some(c) = st.claim(member(i)) {
                            out.push_within_capacity(c).map_err(|_| ENOMEM)?;
                        }
                    }
                    return Ok(out);
                }
            }
            if nonblock {
                return Err(EAGAIN);
            }
            match self.incoming.wait_interruptible_timeout(&mut st, left) {
                kernel::sync::CondVarTimeoutResult::Timeout => return Err(ETIMEDOUT),
                kernel::sync::CondVarTimeoutResult::Signal { .. } => return Err(ERESTARTSYS),
                kernel::sync::CondVarTimeoutResult::Woken { jiffies } => left = jiffies,
            }
        }
    }

    /// Sends message `m` on `ch`; the message back with `EAGAIN` when the
    /// channel cannot take it now (its send queue is full, or it is not in
    /// RTS yet), or the errno the channel fails with.
    pub(crate) fn channel_send(
        self: &Arc<Self>,
        ch: &TpChannel,
        m: KVVec<u8>,
    ) -> core::result::Result<(), (Error, Option<KVVec<u8>>)> {
        if self.stopping.load(Relaxed) {
            return Err((ENODEV, None));
        }
        if self.state.lock().send_on(ch, m)? {
            self.incoming.notify_all();
        }
        self.kick();
        Ok(())
    }

    /// Claims the group `tpg-new` made to `from` (or to anyone) with key
    /// `key` and `n` members, if there is one unclaimed (a connecting
    /// group bind, `group::connect_members`).
    pub(crate) fn claim_group(
        &self,
        from: Option<Addr>,
        key: u32,
        n: u32,
    ) -> Result<Option<KVec<Arc<TpChannel>>>> {
        if self.stopping.load(Relaxed) {
            return Err(ENODEV);
        }
        self.state.lock().claim_group(from, key, n)
    }

    /// Forms the endpoint's group over `members` (`group.rs`): the
    /// least-loaded member takes each message. A group `tpg-new` made
    /// (claimed whole by the bind) is the endpoint's already: its number.
    /// `EPIPE` if a member is gone.
    pub(crate) fn group_create(&self, members: &[Arc<TpChannel>]) -> Result<u16> {
        let mut tpns = [0u32; crate::group::MAX_MEMBERS as usize];
        for (t, c) in tpns.iter_mut().zip(members) {
            *t = c.endpoint_tpn().ok_or(EPIPE)?;
        }
        let tpns = tpns.get(..members.len()).ok_or(EINVAL)?;
        let mut st = self.state.lock();
        if let Some(gid) = st
            .tpgs
            .iter()
            .position(|r| r.is_some_and(|r| r.tpns() == tpns))
        {
            return u16::try_from(gid).map_err(|_| EINVAL);
        }
        let gid = st
            .ep
            .create_group(tpns, TpgPolicy::LeastLoaded)
            .map_err(|e| match e {
                GroupError::Members => EINVAL,
                GroupError::NoChannel => EPIPE,
                GroupError::AlreadyMember => EBUSY,
                GroupError::TableFull => ENOSPC,
            })?;
        st.record_group(gid, tpns);
        Ok(gid)
    }

    /// Sends `m` on one member of group `gid`, whose channels are
    /// `members`: the endpoint picks it. As [`Net::channel_send`].
    pub(crate) fn group_send(
        self: &Arc<Self>,
        gid: u16,
        members: &[Arc<TpChannel>],
        m: KVVec<u8>,
    ) -> core::result::Result<(), (Error, Option<KVVec<u8>>)> {
        if self.stopping.load(Relaxed) {
            return Err((ENODEV, None));
        }
        {
            let mut st = self.state.lock();
            let tpn = match st.ep.group_pick(gid) {
                Ok(t) => t,
                Err(SendError::WouldBlock) => return Err((EAGAIN, Some(m))),
                Err(_) => return Err((EPIPE, None)),
            };
            // The group number is the endpoint's: once a member closed it
            // may name another file's group, so the pick must be ours.
            let ch = members
                .iter()
                .find(|c| c.endpoint_tpn() == Some(tpn))
                .ok_or((EPIPE, None))?;
            if st.send_on(ch, m)? {
                self.incoming.notify_all();
            }
        }
        self.kick();
        Ok(())
    }

    /// Whether some member of `members` would take a message now (a group
    /// file's `poll`), as [`Net::channel_writable`] for each.
    pub(crate) fn group_writable(&self, members: &[Arc<TpChannel>]) -> bool {
        members.iter().any(|c| self.channel_writable(c))
    }

    /// The file bound to `ch` is closing: the channel is torn down (the
    /// table lets it go once the endpoint reports it closed).
    pub(crate) fn channel_close(self: &Arc<Self>, ch: &TpChannel) {
        {
            let mut st = self.state.lock();
            // Closed by the endpoint already: nothing to tear down.
            let Some(tpn) = ch.endpoint_tpn() else {
                return;
            };
            let _ = st.ep.close(now_ns(), tpn);
            let _ = st.flush(now_ns());
        }
        self.kick();
    }

    /// Gives `ch` (claimed by the caller) to the in-kernel user `k`.
    pub(crate) fn kernel_attach(&self, k: &Arc<KernelTp>, ch: Arc<TpChannel>) {
        let _st = self.state.lock();
        KernelTp::attach(k, ch);
    }

    /// An in-kernel listen: the channel a peer opened (or opened and
    /// closed) already, or the next one, goes to `k`.
    pub(crate) fn kernel_listen(self: &Arc<Self>, k: &Arc<KernelTp>) -> Result {
        if self.stopping.load(Relaxed) {
            return Err(ENODEV);
        }
        let mut st = self.state.lock();
        let (key, from) = (k.key, k.from);
        if let Some(c) = st.claim(|i| i.answers(key, from)) {
            KernelTp::attach(k, c);
            return Ok(());
        }
        st.listeners.push(k.clone(), GFP_KERNEL)?;
        Ok(())
    }

    /// `k` closes: it no longer listens; its channel, if it has one.
    pub(crate) fn kernel_detach(&self, k: &Arc<KernelTp>) -> Option<Arc<TpChannel>> {
        let mut st = self.state.lock();
        if let Some(i) = st.listeners.iter().position(|l| Arc::ptr_eq(l, k)) {
            let _ = st.listeners.remove(i);
        }
        k.take_channel()
    }

    /// Whether a `write()` on `ch` would be taken now (a file's `poll`).
    /// When not, the channel's `changed` moves once it would: the
    /// endpoint reports `Writable` (armed by `can_send`), the peer's
    /// acknowledgement frees a `TxStore` slot, or the state changes.
    pub(crate) fn channel_writable(&self, ch: &TpChannel) -> bool {
        let mut st = self.state.lock();
        // Endpoint before channel, as everywhere.
        let Some(tpn) = ch.endpoint_tpn() else {
            return false;
        };
        let room = ch.inner.lock().tx.has_room();
        room && st.ep.can_send(tpn)
    }

    /// The endpoint's view of `ch`: its peer's TPN and counters.
    pub(crate) fn channel_stats(
        &self,
        ch: &TpChannel,
    ) -> (Option<u32>, Option<crate::host::ChannelCounters>) {
        let st = self.state.lock();
        match ch.endpoint_tpn() {
            Some(tpn) => (st.ep.peer_tpn(tpn), st.ep.counters(tpn)),
            // Closed: what it was when it was torn down.
            None => ch.inner.lock().final_stats,
        }
    }

    /// Copies of the channels whose TPN is in `tpns`, in TPN order, for
    /// netlink (`tp-get`): what the endpoint knows of each (peer TPN,
    /// parameters, counters) and what the channel holds (state, error,
    /// queues), under the endpoint's lock and then each channel's, the lock
    /// order; and the CTP ends whose handle is in `tpns` (after every
    /// channel: a handle is above every TPN). `ENOMEM` if the copy cannot
    /// be allocated.
    pub(crate) fn tp_snapshots(
        &self,
        tpns: impl core::ops::RangeBounds<u32>,
    ) -> Result<KVec<TpSnapshot>> {
        let mut v;
        {
            let st = self.state.lock();
            let n = st.chans.iter().filter(|c| tpns.contains(&c.tpn)).count();
            let ctps = st.ctps.iter().filter(|c| tpns.contains(&c.handle));
            v = KVec::with_capacity(n.saturating_add(ctps.count()), GFP_KERNEL)?;
            for c in st.ctps.iter().filter(|c| tpns.contains(&c.handle)) {
                let g = c.inner.lock();
                let snap = TpSnapshot {
                    dev_index: self.index,
                    id: ctp_event_of(c, &g, false),
                    peer_tpn: 0,
                    params: None,
                    claimed: g.claimed,
                    rx_queued: u32::try_from(g.rx.len()).unwrap_or(u32::MAX),
                    counters: None,
                    ctp: Some(CtpCounters {
                        tx_packets: g.tx_packets,
                        rx_packets: g.rx_packets,
                        rx_dropped: g.rx_dropped,
                    }),
                    tx_messages: g.tx_messages,
                    // CTP acknowledges nothing.
                    tx_acked: 0,
                    rx_messages: g.rx_messages,
                };
                drop(g);
                v.push_within_capacity(snap).map_err(|_| ENOMEM)?;
            }
            for c in st.chans.iter().filter(|c| tpns.contains(&c.tpn)) {
                let g = c.inner.lock();
                let snap = TpSnapshot {
                    dev_index: self.index,
                    id: tp_event_of(c.tpn, &g),
                    peer_tpn: st.ep.peer_tpn(c.tpn).unwrap_or(0),
                    params: st.ep.params(c.tpn),
                    claimed: g.claimed,
                    rx_queued: u32::try_from(g.rx.len()).unwrap_or(u32::MAX),
                    counters: st.ep.counters(c.tpn),
                    ctp: None,
                    tx_messages: g.tx_messages,
                    tx_acked: g.tx_acked,
                    rx_messages: g.rx_messages,
                };
                drop(g);
                v.push_within_capacity(snap).map_err(|_| ENOMEM)?;
            }
        }
        v.sort_unstable_by_key(|s| s.id.tpn);
        Ok(v)
    }
}

/// A channel's identity and state, read under its lock.
fn tp_event_of(tpn: u32, g: &crate::channel::TpInner) -> TpEvent {
    TpEvent {
        tpn,
        peer: g.remote,
        key: g.key,
        ctp: false,
        state: g.state,
        closed: g.closed,
        error: g.error.map_or(0, |e| e.to_errno().unsigned_abs()),
    }
}

/// A CTP end's identity and state, read under its lock: RTS (CTP has no
/// setup), ERR once it failed, `closed` once it left the device's table.
fn ctp_event_of(c: &CtpEnd, g: &crate::ctp::CtpInner, closed: bool) -> TpEvent {
    TpEvent {
        tpn: c.handle,
        peer: c.remote,
        key: 0,
        ctp: true,
        state: if g.error.is_some() {
            ChannelState::Err
        } else {
            ChannelState::Rts
        },
        closed,
        error: g.error.map_or(0, |e| e.to_errno().unsigned_abs()),
    }
}

/// Queues the notification of CTP end `c` (made, or `closed`); dropped
/// when the queue is full.
fn queue_ctp_event(q: &mut [Option<TpEvent>; TP_EVENTS], c: &CtpEnd, closed: bool) {
    if let Some(slot) = q.iter_mut().find(|s| s.is_none()) {
        *slot = Some(ctp_event_of(c, &c.inner.lock(), closed));
    }
}

/// Queues the notification of `c`'s state (after the endpoint's event was
/// applied to it); dropped when the queue is full.
fn queue_tp_event(q: &mut [Option<TpEvent>; TP_EVENTS], c: &TpChannel) {
    if let Some(slot) = q.iter_mut().find(|s| s.is_none()) {
        *slot = Some(tp_event_of(c.tpn, &c.inner.lock()));
    }
}

impl NetState {
    /// Stores `m` with `ch` and queues it on the endpoint, then sends what
    /// can go: the body of [`Net::channel_send`] and [`Net::group_send`].
    /// `true` if a peer opened a channel meanwhile (binders wait for it).
    fn send_on(
        &mut self,
        ch: &TpChannel,
        m: KVVec<u8>,
    ) -> core::result::Result<bool, (Error, Option<KVVec<u8>>)> {
        let len = u32::try_from(m.len()).map_err(|_| (EMSGSIZE, None))?;
        let token = {
            let mut g = ch.inner.lock();
            if let Some(e) = g.error {
                return Err((e, None));
            }
            if g.closed {
                return Err((EPIPE, None));
            }
            match g.tx.put(m) {
                Ok(t) => t,
                Err(m) => return Err((EAGAIN, Some(m))),
            }
        };
        match self.ep.send(ch.tpn, token, len) {
            Ok(()) => ch.inner.lock().tx_messages += 1,
            Err(e) => {
                let m = ch.inner.lock().tx.take(token);
                return Err(match e {
                    SendError::WouldBlock | SendError::NotReady => (EAGAIN, m),
                    SendError::Length => (EINVAL, None),
                    SendError::NoChannel => (EPIPE, None),
                    SendError::Format => (EADDRNOTAVAIL, None),
                });
            }
        }
        Ok(self.flush(now_ns()))
    }

    /// The peer of an unclaimed channel `pick` accepts (one
    /// [`claim`](Self::claim) would take), if there is one.
    fn claimable(&self, pick: impl Fn(&crate::channel::TpInner) -> bool) -> Option<Addr> {
        let live = self.chans.iter().find_map(|c| {
            if self.grouped(c.tpn) {
                return None;
            }
            let g = c.inner.lock();
            (!g.claimed && !g.closed && pick(&g)).then_some(g.remote)
        });
        live.or_else(|| {
            self.lingering.iter().find_map(|c| {
                let g = c.inner.lock();
                pick(&g).then_some(g.remote)
            })
        })
    }

    /// Takes an unclaimed channel the peer opened that `pick` accepts (a
    /// member of a group goes only with its group).
    fn claim(&mut self, pick: impl Fn(&crate::channel::TpInner) -> bool) -> Option<Arc<TpChannel>> {
        for c in self.chans.iter() {
            if self.grouped(c.tpn) {
                continue;
            }
            let mut g = c.inner.lock();
            if !g.claimed && !g.closed && pick(&g) {
                g.claimed = true;
                drop(g);
                return Some(c.clone());
            }
        }
        // One the peer closed already: its messages, then the end.
        let i = self.lingering.iter().position(|c| pick(&c.inner.lock()))?;
        let c = self.lingering.remove(i).ok()?;
        c.inner.lock().claimed = true;
        Some(c)
    }

    /// Hands a channel a peer just opened to the in-kernel listen waiting
    /// for it, if there is one.
    fn give_to_listener(&mut self, c: &Arc<TpChannel>) {
        let i = {
            let g = c.inner.lock();
            self.listeners.iter().position(|k| g.answers(k.key, k.from))
        };
        let Some(i) = i else { return };
        let Ok(k) = self.listeners.remove(i) else {
            return;
        };
        c.inner.lock().claimed = true;
        KernelTp::attach(&k, c.clone());
    }

    /// Channels a peer opened that no file has bound (live or closed).
    fn unclaimed(&self) -> usize {
        let live = self
            .chans
            .iter()
            .filter(|c| !c.inner.lock().claimed)
            .count();
        live.saturating_add(self.lingering.len())
    }

    /// Answers the echo requests and matches the replies of one burst.
    fn process_inbox(
        &mut self,
        inbox: &Inbox,
        now: u64,
        dev: u32,
        notify: &mut [Option<(ReplyTo, EchoReply)>; ECHO_BATCH],
    ) {
        self.echo_dropped += inbox.dropped + inbox.corrupt;
        for &(slot, to) in inbox.answers.iter().flatten() {
            let len = self.dgrams.bufs.get(slot).map(|b| b.len).unwrap_or(0);
            match self.ep.send_datagram(
                DatagramKind::Utp,
                to,
                slot as u64,
                u32::try_from(len).unwrap_or(u32::MAX),
            ) {
                Ok(()) => self.echo_requests += 1,
                Err(_) => {
                    self.dgrams.release(slot as u64);
                    self.echo_dropped += 1;
                }
            }
        }
        for &(echo, len, from, port) in inbox.replies.iter().flatten() {
            let found = self
                .pending
                .iter_mut()
                .find(|p| p.is_some_and(|p| p.id == echo.id && p.seq == echo.seq && p.size == len));
            let Some(p) = found.and_then(Option::take) else {
                // Late, duplicated or not ours.
                self.echo_dropped += 1;
                continue;
            };
            self.echo_replies += 1;
            if let Some(n) = notify.iter_mut().find(|n| n.is_none()) {
                *n = Some((
                    p.reply_to,
                    EchoReply {
                        dev_index: dev,
                        id: echo.id,
                        seq: echo.seq,
                        size: len,
                        rtt_ns: now.saturating_sub(echo.stamp),
                        src: from,
                        port: u32::from(port),
                    },
                ));
            }
        }
    }

    /// Hands the endpoint's events to the datagram store and the
    /// channels; `true` if a peer opened a channel or one was freed
    /// (binders wait for either).
    fn handle_events(&mut self, now: u64) -> bool {
        let mut incoming = false;
        while let Some(ev) = self.ep.poll_event() {
            match ev {
                Event::DatagramSent { token } => {
                    if let Some(to) = self.dgrams.release(token) {
                        // The CTP share has a free slot: every CTP writer
                        // may go on.
                        for c in self.ctps.iter() {
                            if c.remote == to {
                                c.sent();
                            } else {
                                c.writable();
                            }
                        }
                    }
                }
                Event::MessageAcked { tpn, token } => {
                    if let Some(c) = find_chan(&self.chans, tpn) {
                        c.acked(token);
                    }
                }
                Event::Writable { tpn } => {
                    if let Some(c) = find_chan(&self.chans, tpn) {
                        c.writable();
                    }
                }
                Event::StateChanged { tpn, state } => {
                    if let Some(c) = find_chan(&self.chans, tpn) {
                        if matches!(state, ChannelState::Reset | ChannelState::Err) {
                            // Torn down or failed: keep what the endpoint
                            // will forget when it frees the channel.
                            c.inner.lock().final_stats =
                                (self.ep.peer_tpn(tpn), self.ep.counters(tpn));
                        }
                        c.set_state(state);
                        queue_tp_event(&mut self.tp_events, c);
                        self.groups_changed = true;
                    }
                }
                Event::ChannelError { tpn, cause } => {
                    if let Some(c) = find_chan(&self.chans, tpn) {
                        c.fail(cause_errno(cause));
                        queue_tp_event(&mut self.tp_events, c);
                        self.groups_changed = true;
                    }
                }
                Event::Closed { tpn } => {
                    // A connect may wait for this channel's key to be free.
                    incoming = true;
                    // The endpoint dissolved the member's group with it.
                    self.end_groups_of(tpn);
                    if let Some(i) = self.chans.iter().position(|c| c.tpn == tpn) {
                        if let Ok(c) = self.chans.remove(i) {
                            c.set_closed();
                            queue_tp_event(&mut self.tp_events, &c);
                            let unread = {
                                let g = c.inner.lock();
                                !g.claimed && g.error.is_none() && g.rx.len() > 0
                            };
                            // Its slot among the unclaimed stays taken, so
                            // the push only fails without memory (then the
                            // messages go, as they would with the device).
                            if unread {
                                let _ = self.lingering.push(c, GFP_KERNEL);
                            }
                        }
                    }
                }
                Event::Incoming { tpn, remote, key } => {
                    let made = if self.unclaimed() < MAX_UNCLAIMED {
                        TpChannel::new(tpn, remote, key, false).ok()
                    } else {
                        None
                    };
                    let pushed = made.map(|c| {
                        let r = self.chans.push(c.clone(), GFP_KERNEL);
                        r.map(|()| c)
                    });
                    match pushed {
                        Some(Ok(c)) => {
                            incoming = true;
                            self.give_to_listener(&c);
                        }
                        // Refused: no room to keep it for a binder.
                        _ => {
                            let _ = self.ep.close(now, tpn);
                        }
                    }
                }
            }
        }
        if self.groups_changed {
            self.note_groups();
        }
        incoming
    }

    /// Step 1 and 2 of the endpoint's call order: drain its events, then
    /// queue every packet it can send while every port has room. `true` if
    /// a peer opened a channel.
    fn flush(&mut self, now: u64) -> bool {
        let mut incoming = self.handle_events(now);
        let mut kicked = 0u64;
        while self.ports.iter().all(|p| p.tx_room()) {
            let mut src = Source {
                dgrams: &mut self.dgrams,
                chans: &self.chans,
            };
            let t = match self.ep.poll_transmit(now, &mut self.tx_buf[..], &mut src) {
                Ok(Some(t)) => t,
                _ => break,
            };
            let bytes = self.tx_buf.get(..t.len).unwrap_or(&[]);
            if let Some(port) = self.ports.get(usize::from(t.port)) {
                // A port whose link just went down drops it: the endpoint
                // leaves it out of routes from the next round on.
                let _ = port.queue_tx(t.meta.class.cfg(), t.meta.rt.bits(), t.sl, bytes);
                kicked |= 1u64.checked_shl(u32::from(t.port)).unwrap_or(0);
            }
            incoming |= self.handle_events(now);
        }
        for (i, port) in self.ports.iter().enumerate() {
            if kicked & 1u64.checked_shl(i as u32).unwrap_or(0) != 0 {
                port.kick();
            }
        }
        incoming
    }

    fn arm_timer(&mut self, net: &Arc<Net>, now: u64) {
        drop(self.timer.take());
        if let Some(t) = self.ep.poll_timeout() {
            let delay = t.saturating_sub(now).max(10_000);
            self.timer = Some(
                net.clone()
                    .start(Delta::from_nanos(i64::try_from(delay).unwrap_or(i64::MAX))),
            );
        }
    }
}

impl WorkItem for Net {
    type Pointer = Arc<Net>;

    fn run(this: Arc<Net>) {
        this.run();
    }
}

impl HrTimerCallback for Net {
    type Pointer<'a> = Arc<Net>;

    fn run(this: ArcBorrow<'_, Net>, _ctx: HrTimerCallbackContext<'_, Self>) -> HrTimerRestart {
        // Hard IRQ context: only queue the work.
        let net: Arc<Net> = this.into();
        net.kick();
        HrTimerRestart::NoRestart
    }
}

/// Largest send window `tp-new` accepts, packets: the spec allows 8M − 1,
/// but the endpoint allocates the window's slots when the channel is
/// created (memory charged at creation), so the driver bounds it.
pub(crate) const TP_NEW_MAX_SEND_WINDOW: u32 = 65_536;

/// The largest network packet the endpoint sends: what one DLLDP of a
/// port carries (`EndpointConfig::max_packet`).
fn endpoint_max_packet() -> usize {
    MAX_PACKET.min(max_dlldp_payload(Mode::Crc))
}

/// What a live channel's `tp-set` may change.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TpChange {
    /// RTS → SUSPENDED: the channel sends no data (it still answers the
    /// peer's) until resumed; writers see `EAGAIN` once the queue fills.
    Suspend,
    /// SUSPENDED → RTS.
    Resume,
}

/// The refusal of a channel configuration the endpoint will not open,
/// naming the rule and the attribute that breaks it.
pub(crate) fn open_refusal(e: OpenError) -> Refusal {
    use ConfigError as C;
    use Field as F;
    let cfg = |field, msg| refuse(EINVAL, msg, Some(field));
    match e {
        OpenError::Config(c) => match c {
            C::OooWindow(_) => cfg(
                F::OooWindow,
                c"OOO window must be 128, 256, 512, 1024 or 2048 packets (UB spec 6.4.1)",
            ),
            C::SendWindow(_) => cfg(
                F::SendWindow,
                c"send window must be 1 to 8M-1 packets (UB spec 6.4.1)",
            ),
            C::RtoBase(_) => cfg(
                F::RtoBase,
                c"dynamic RTO base must be 4 to 2097152 us (UB spec 6.4.2.4)",
            ),
            C::StaticRtoLevel(_) => cfg(
                F::RtoStatic,
                c"static RTO must be 512, 16000, 128000 or 4000000 us (UB spec 6.4.2.4)",
            ),
            C::FastRetransmitWithPerPacketLb => cfg(
                F::FastRetransmit,
                c"fast retransmit cannot be combined with per-packet load balancing (UB spec table 6-7)",
            ),
            C::Mtu { .. } => cfg(
                F::Mtu,
                c"MTU larger than a packet the ports carry in the peer's address format",
            ),
            C::SprayRange(_) => cfg(
                F::LbRange,
                c"per-packet range above 2^14 source ports",
            ),
            C::RxSlots(_) | C::Zero | C::Psn(_) | C::ServiceLevel(_) => refuse(
                EINVAL,
                c"the channel configuration breaks a transport rule",
                None,
            ),
            C::RtpFormat => cfg(
                F::Peer,
                c"RTP needs an IPv4, IPv6 or 24-bit CNA peer address (UB spec 6.1)",
            ),
            C::NoLocalAddress => refuse(
                EADDRNOTAVAIL,
                c"the device has no local address in the peer's format",
                Some(F::Peer),
            ),
            _ => refuse(EINVAL, c"the channel configuration is refused", None),
        },
        OpenError::TableFull => refuse(ENOSPC, c"the device's channel table is full", None),
        OpenError::Alloc => refuse(ENOMEM, c"no memory for the channel's windows", None),
        OpenError::Exists => refuse(
            EEXIST,
            c"a channel with this peer and key exists already",
            Some(F::Key),
        ),
        OpenError::Closing => refuse(
            EBUSY,
            c"the channel with this peer and key is still closing (its DREQ is unanswered); try again",
            Some(F::Key),
        ),
    }
}

/// What `tp-new` refuses of a channel to `remote` with `cfg` before the
/// device is asked anything (`tpg-new` asks it of every member): the
/// driver's send window limit, then the spec's rules, whatever addresses
/// the device has, so that a forbidden configuration is named as such.
fn check_tp_new(remote: Addr, cfg: &ChannelConfig) -> Result<(), Refusal> {
    if cfg.send_window > TP_NEW_MAX_SEND_WINDOW {
        return Err(refuse(
            EINVAL,
            c"send window above the driver's limit of 65536 packets",
            Some(Field::SendWindow),
        ));
    }
    if matches!(remote, Addr::Cna16(_)) {
        return Err(open_refusal(OpenError::Config(ConfigError::RtpFormat)));
    }
    let max_packet = u32::try_from(endpoint_max_packet()).unwrap_or(u32::MAX);
    cfg.validate(remote.net_header_len(), max_packet)
        .map_err(|e| open_refusal(OpenError::Config(e)))
}

/// Channels created and changed over netlink (`tp-new`, `tp-set`,
/// `tp-del`; `Documentation/ub/tp.rst`, "Channels made with ubctl").
impl Net {
    /// Opens channel `key` to `remote` with `cfg`, held by the device and
    /// unclaimed, as if the peer had opened it: a connect or listen bind of
    /// the same peer and key claims it ([`NetState::claim`]), with `cfg`.
    /// It counts against [`MAX_UNCLAIMED`]. Returns its TPN.
    pub(crate) fn channel_open_unclaimed(
        self: &Arc<Self>,
        remote: Addr,
        key: u32,
        cfg: ChannelConfig,
    ) -> Result<u32, Refusal> {
        if self.stopping.load(Relaxed) {
            return Err(Refusal::no_device());
        }
        check_tp_new(remote, &cfg)?;
        self.change_state(|st| {
            if st.unclaimed() >= MAX_UNCLAIMED {
                return Err(refuse(
                    ENOSPC,
                    c"the device holds 16 unclaimed channels already",
                    None,
                ));
            }
            Ok(st.open_unclaimed(remote, key, cfg)?.tpn)
        })
    }

    /// Makes a CTP end towards `remote` (a CNA), held by the device and
    /// unclaimed: it queues what `remote` sends (up to a file's receive
    /// bound, then drops and counts) until a CTP bind of `remote` claims
    /// it. Returns its handle (`tp-new` with `transport ctp`).
    pub(crate) fn ctp_open_unclaimed(self: &Arc<Self>, remote: Addr) -> Result<u32, Refusal> {
        if self.stopping.load(Relaxed) {
            return Err(Refusal::no_device());
        }
        self.change_state(|st| {
            match st.ctp_max_datagram(remote) {
                Ok(_) => {}
                Err(e) if e == EADDRNOTAVAIL => {
                    return Err(refuse(
                        EADDRNOTAVAIL,
                        c"the device has no local address in the peer's format",
                        Some(Field::Peer),
                    ))
                }
                Err(_) => {
                    return Err(refuse(
                        EINVAL,
                        c"CTP needs a 16- or 24-bit CNA peer address (UB spec 7: CTP runs over the CNA formats)",
                        Some(Field::Peer),
                    ))
                }
            }
            if st.ctps.iter().any(|c| c.remote == remote) {
                return Err(refuse(
                    EEXIST,
                    c"a CTP end for this peer exists already (one per peer address)",
                    Some(Field::Peer),
                ));
            }
            match st.new_ctp_end(remote, false) {
                Ok(c) => Ok(c.handle),
                Err(e) if e == ENOSPC => Err(refuse(
                    ENOSPC,
                    c"the device holds 64 CTP ends already",
                    None,
                )),
                Err(_) => Err(refuse(ENOMEM, c"no memory for the CTP end", None)),
            }
        })
    }

    /// Runs `change` (a netlink request's) under the endpoint's lock, then
    /// sends what the endpoint can and queues its work (which announces
    /// what changed), as every change of a channel does. A refused request
    /// changed nothing, or closed only what it had just opened: the flush
    /// sends those closes at once.
    fn change_state<T>(
        self: &Arc<Self>,
        change: impl FnOnce(&mut NetState) -> Result<T, Refusal>,
    ) -> Result<T, Refusal> {
        let done = {
            let mut st = self.state.lock();
            let done = change(&mut st);
            let _ = st.flush(now_ns());
            done
        };
        self.kick();
        done
    }

    /// The live channel `tpn` (in the endpoint's table).
    fn live_channel(st: &NetState, tpn: u32) -> Result<Arc<TpChannel>, Refusal> {
        find_chan(&st.chans, tpn)
            .filter(|c| c.endpoint_tpn().is_some())
            .cloned()
            .ok_or(Refusal::no_channel())
    }

    /// Suspends or resumes channel `tpn`; the state must be RTS or
    /// SUSPENDED (a change to the state it is in already does nothing).
    pub(crate) fn channel_change(
        self: &Arc<Self>,
        tpn: u32,
        change: TpChange,
    ) -> Result<(), Refusal> {
        self.change_state(|st| {
            if st.ctps.iter().any(|c| c.handle == tpn) {
                return Err(refuse(
                    EOPNOTSUPP,
                    c"a CTP end has no state to change (CTP has no setup: UB spec 7)",
                    Some(Field::State),
                ));
            }
            let c = Self::live_channel(st, tpn)?;
            if !st.changeable(tpn) {
                return Err(refuse(
                    EBUSY,
                    c"the channel is not established (only RTS and SUSPENDED change)",
                    Some(Field::State),
                ));
            }
            st.change_channel(&c, change)
        })
    }

    /// Tears channel `tpn` down (DREQ to the peer), whoever holds it. Its
    /// user reads the messages already received, then `ECONNABORTED`
    /// (`include/uapi/linux/ub.h`); an unclaimed channel goes with what it
    /// held.
    pub(crate) fn channel_delete(self: &Arc<Self>, tpn: u32) -> Result<(), Refusal> {
        self.change_state(|st| {
            if let Some(i) = st.ctps.iter().position(|c| c.handle == tpn) {
                // A CTP end: its file reads what is queued, then
                // ECONNABORTED; its peer address is free at once.
                let c = st.ctps.remove(i).map_err(|_| Refusal::no_channel())?;
                c.fail(ECONNABORTED);
                queue_ctp_event(&mut st.tp_events, &c, true);
                return Ok(());
            }
            let c = Self::live_channel(st, tpn)?;
            st.abort_channel(&c);
            Ok(())
        })
    }
}

/// TP Channel Groups created, changed and observed over netlink
/// (`tpg-new`, `tpg-set`, `tpg-del`, `tpg-get`; `Documentation/ub/tp.rst`,
/// "Groups made with ubctl"). A group is named by the TPN of its first
/// member ([`TpgRecord`]).
impl Net {
    /// Opens the `n` channels `key`, `key + 1`, ... to `remote` as a group
    /// bind opens them (member `i` with `group::member_config`), held by
    /// the device and unclaimed, and forms the endpoint's group over them:
    /// a group bind of the same peer, key and `n` claims them all
    /// ([`NetState::claim_group`]). Every member counts against
    /// [`MAX_UNCLAIMED`]. Everything is checked before the first member is
    /// opened. Returns the group as `tpg-get` shows it.
    pub(crate) fn group_open_unclaimed(
        self: &Arc<Self>,
        remote: Addr,
        key: u32,
        n: u32,
        cfg: ChannelConfig,
    ) -> Result<TpgSnapshot, Refusal> {
        if self.stopping.load(Relaxed) {
            return Err(Refusal::no_device());
        }
        if !(2..=crate::group::MAX_MEMBERS).contains(&n) {
            return Err(refuse(
                EINVAL,
                c"a TP Channel Group has 2 to 8 members",
                Some(Field::Members),
            ));
        }
        // The members' configurations differ only in their source ports
        // and their share of `cfg`'s send window, which is the group's.
        check_tp_new(remote, &cfg)?;
        let no_memory = || refuse(ENOMEM, c"no memory for the group", None);
        let members = usize::try_from(n).map_err(|_| no_memory())?;
        self.change_state(|st| {
            if st.unclaimed().saturating_add(members) > MAX_UNCLAIMED {
                return Err(refuse(
                    ENOSPC,
                    c"the device holds at most 16 unclaimed channels: no room for the group's members",
                    Some(Field::Members),
                ));
            }
            if st.chans.len().saturating_add(members) > MAX_CHANNELS as usize {
                return Err(refuse(
                    ENOSPC,
                    c"the device's channel table has no room for the group's members",
                    Some(Field::Members),
                ));
            }
            if st.tpgs.iter().all(Option::is_some) {
                return Err(refuse(
                    ENOSPC,
                    c"the device has 16 TP Channel Groups already",
                    None,
                ));
            }
            // A channel is named by its peer and key: the group's keys
            // must all be free towards this peer.
            let taken = st.chans.iter().any(|c| {
                let g = c.inner.lock();
                !g.closed && g.remote == remote && g.key.wrapping_sub(key) < n
            });
            if taken {
                return Err(refuse(
                    EEXIST,
                    c"a channel to this peer with one of the group's keys (key to key + members - 1) exists already",
                    Some(Field::Key),
                ));
            }
            let mut opened = KVec::with_capacity(members, GFP_KERNEL).map_err(|_| no_memory())?;
            let mut tpns = [0u32; crate::group::MAX_MEMBERS as usize];
            for (i, t) in (0..n).zip(tpns.iter_mut()) {
                let c = crate::group::member_config(cfg, i, n);
                match st.open_unclaimed(remote, key.wrapping_add(i), c) {
                    Ok(c) => {
                        *t = c.tpn;
                        // Within the capacity asked for.
                        let _ = opened.push_within_capacity(c);
                    }
                    Err(r) => {
                        st.close_unclaimed(&opened);
                        return Err(r);
                    }
                }
            }
            let tpns = tpns.get(..members).unwrap_or(&[]);
            let Ok(gid) = st.ep.create_group(tpns, TpgPolicy::LeastLoaded) else {
                st.close_unclaimed(&opened);
                return Err(refuse(ENOSPC, c"the device's group table is full", None));
            };
            st.record_group(gid, tpns);
            st.tpg_snapshot(self.index, usize::from(gid))
                .ok_or(refuse(ENOMEM, c"the group went as it was made", None))
        })
    }

    /// Suspends or resumes every member of group `tpn`: each must be in RTS
    /// or SUSPENDED, or none changes.
    pub(crate) fn group_change(
        self: &Arc<Self>,
        tpn: u32,
        change: TpChange,
    ) -> Result<(), Refusal> {
        self.change_state(|st| {
            let r = st.group_named(tpn)?;
            if !r.tpns().iter().all(|&t| st.changeable(t)) {
                return Err(refuse(
                    EBUSY,
                    c"a member of the group is not established (only RTS and SUSPENDED change)",
                    Some(Field::State),
                ));
            }
            for &t in r.tpns() {
                let c = Self::live_channel(st, t)?;
                st.change_channel(&c, change)?;
            }
            Ok(())
        })
    }

    /// Tears every member of group `tpn` down, as [`Net::channel_delete`]
    /// each: the file bound to the group reads what it can still deliver
    /// in order, then `ECONNABORTED`.
    pub(crate) fn group_delete(self: &Arc<Self>, tpn: u32) -> Result<(), Refusal> {
        self.change_state(|st| {
            let r = st.group_named(tpn)?;
            for &t in r.tpns() {
                if let Ok(c) = Self::live_channel(st, t) {
                    st.abort_channel(&c);
                }
            }
            Ok(())
        })
    }

    /// Copies of the groups whose first member's TPN is in `tpns`, in that
    /// TPN's order, for netlink (`tpg-get`), as [`Net::tp_snapshots`].
    pub(crate) fn tpg_snapshots(
        &self,
        tpns: impl core::ops::RangeBounds<u32>,
    ) -> Result<KVec<TpgSnapshot>> {
        let mut v;
        {
            let st = self.state.lock();
            let named = |r: &Option<TpgRecord>| r.is_some_and(|r| tpns.contains(&r.first()));
            v = KVec::with_capacity(st.tpgs.iter().filter(|r| named(r)).count(), GFP_KERNEL)?;
            for (gid, _) in st.tpgs.iter().enumerate().filter(|(_, r)| named(r)) {
                if let Some(snap) = st.tpg_snapshot(self.index, gid) {
                    v.push_within_capacity(snap).map_err(|_| ENOMEM)?;
                }
            }
        }
        v.sort_unstable_by_key(|s| s.id.head.tpn);
        Ok(v)
    }
}

impl NetState {
    /// Records channel `tpn` the endpoint just opened, `claimed` by a
    /// binder or held by the device, in the state the endpoint has it in;
    /// closes it again if that cannot be done.
    fn record_opened(
        &mut self,
        tpn: u32,
        remote: Addr,
        key: u32,
        claimed: bool,
    ) -> Result<Arc<TpChannel>> {
        let c = match TpChannel::new(tpn, remote, key, claimed) {
            Ok(c) => c,
            Err(e) => {
                let _ = self.ep.close(now_ns(), tpn);
                return Err(e);
            }
        };
        if let Err(e) = self.chans.push(c.clone(), GFP_KERNEL) {
            let _ = self.ep.close(now_ns(), tpn);
            return Err(e.into());
        }
        // The state is the endpoint's (it may have moved already).
        if let Some(s) = self.ep.state(tpn) {
            c.set_state(s);
        }
        Ok(c)
    }
}

/// Channels and groups made and changed over netlink, under the
/// endpoint's lock.
impl NetState {
    /// The largest CTP datagram payload to `remote`: `EINVAL` if CTP
    /// cannot reach it (the endpoint's rule: CNA formats only),
    /// `EADDRNOTAVAIL` without a local address of its format. What a CTP
    /// bind and `tp-new` check before they make an end.
    fn ctp_max_datagram(&self, remote: Addr) -> Result<u32> {
        let max = self
            .ep
            .max_datagram(DatagramKind::Ctp, remote)
            .ok_or(EINVAL)?;
        if self.ep.config().local.matching(&remote).is_none() {
            return Err(EADDRNOTAVAIL);
        }
        Ok(max)
    }

    /// A new CTP end towards `remote` in the table, on the lowest free
    /// handle, announced. `ENOSPC` past [`MAX_CTP_FILES`] ends.
    fn new_ctp_end(&mut self, remote: Addr, claimed: bool) -> Result<Arc<CtpEnd>> {
        if self.ctps.len() >= MAX_CTP_FILES {
            return Err(ENOSPC);
        }
        // Fewer ends than slots: one of the first `len + 1` is free.
        let handle = (0..=self.ctps.len())
            .filter_map(|n| u32::try_from(n).ok())
            .map(|n| CTP_HANDLE_BASE + n)
            .find(|h| !self.ctps.iter().any(|c| c.handle == *h))
            .ok_or(ENOSPC)?;
        let end = CtpEnd::new(remote, handle, claimed)?;
        self.ctps.push(end.clone(), GFP_KERNEL)?;
        queue_ctp_event(&mut self.tp_events, &end, false);
        Ok(end)
    }

    /// Opens channel `key` to `remote` with `cfg` (checked by
    /// [`check_tp_new`]), unclaimed, and announces it.
    fn open_unclaimed(
        &mut self,
        remote: Addr,
        key: u32,
        cfg: ChannelConfig,
    ) -> Result<Arc<TpChannel>, Refusal> {
        let tpn = self
            .ep
            .connect(now_ns(), remote, key, cfg)
            .map_err(open_refusal)?;
        let c = self
            .record_opened(tpn, remote, key, false)
            .map_err(|_| refuse(ENOMEM, c"no memory for the channel", None))?;
        queue_tp_event(&mut self.tp_events, &c);
        Ok(c)
    }

    /// Closes channels [`open_unclaimed`](Self::open_unclaimed) just made
    /// (a group that could not be formed whole).
    fn close_unclaimed(&mut self, chans: &[Arc<TpChannel>]) {
        for c in chans {
            let _ = self.ep.close(now_ns(), c.tpn);
        }
    }

    /// Whether live channel `tpn` may be suspended or resumed.
    fn changeable(&self, tpn: u32) -> bool {
        matches!(
            self.ep.state(tpn),
            Some(ChannelState::Rts | ChannelState::Suspended)
        )
    }

    /// Suspends or resumes live channel `c` ([`changeable`](Self::changeable)).
    fn change_channel(&mut self, c: &Arc<TpChannel>, change: TpChange) -> Result<(), Refusal> {
        let r = match change {
            TpChange::Suspend => self.ep.suspend(c.tpn),
            TpChange::Resume => self.ep.resume(c.tpn),
        };
        if r.is_err() {
            return Err(Refusal::no_channel());
        }
        // The endpoint reports no event for these: the channel and the
        // monitor group learn the state here.
        if let Some(s) = self.ep.state(c.tpn) {
            if s != c.inner.lock().state {
                c.set_state(s);
                queue_tp_event(&mut self.tp_events, c);
                self.groups_changed = true;
            }
        }
        Ok(())
    }

    /// Tears live channel `c` down for an administrator: its user reads
    /// what it received, then `ECONNABORTED`.
    fn abort_channel(&mut self, c: &Arc<TpChannel>) {
        // Before the close, so that the state changes it causes find the
        // error set, and a closed unclaimed channel does not linger.
        c.fail(ECONNABORTED);
        c.inner.lock().final_stats = (self.ep.peer_tpn(c.tpn), self.ep.counters(c.tpn));
        let _ = self.ep.close(now_ns(), c.tpn);
        queue_tp_event(&mut self.tp_events, c);
        self.groups_changed = true;
    }

    /// Records the endpoint's group `gid` over `tpns`.
    fn record_group(&mut self, gid: u16, tpns: &[u32]) {
        let mut r = TpgRecord {
            tpns: [0; crate::group::MAX_MEMBERS as usize],
            n: tpns.len(),
            announced: None,
        };
        for (d, &t) in r.tpns.iter_mut().zip(tpns) {
            *d = t;
        }
        if let Some(slot) = self.tpgs.get_mut(usize::from(gid)) {
            *slot = Some(r);
            self.groups_changed = true;
        }
    }

    /// The group named `tpn` (its first member's TPN).
    fn group_named(&self, tpn: u32) -> Result<TpgRecord, Refusal> {
        self.tpgs
            .iter()
            .flatten()
            .find(|r| r.first() == tpn)
            .copied()
            .ok_or(Refusal::no_group())
    }

    /// Whether live channel `tpn` is a member of a group: a bind claims it
    /// only with the whole group ([`claim_group`](Self::claim_group)).
    fn grouped(&self, tpn: u32) -> bool {
        self.tpgs.iter().flatten().any(|r| r.tpns().contains(&tpn))
    }

    /// Claims the unclaimed group `tpg-new` made of `n` members with key
    /// `key` (its first member's) to `from` (or to anyone), if there is
    /// one: its members, in key order.
    fn claim_group(
        &mut self,
        from: Option<Addr>,
        key: u32,
        n: u32,
    ) -> Result<Option<KVec<Arc<TpChannel>>>> {
        let wanted = |r: &&TpgRecord| {
            u32::try_from(r.n) == Ok(n)
                && find_chan(&self.chans, r.first()).is_some_and(|c| {
                    let g = c.inner.lock();
                    !g.claimed && !g.closed && g.answers(key, from)
                })
        };
        let Some(r) = self.tpgs.iter().flatten().find(wanted).copied() else {
            return Ok(None);
        };
        let mut members = KVec::with_capacity(r.n, GFP_KERNEL)?;
        for &t in r.tpns() {
            // Every member of a recorded group is in the table.
            let c = find_chan(&self.chans, t).ok_or(EPIPE)?;
            members
                .push_within_capacity(c.clone())
                .map_err(|_| ENOMEM)?;
        }
        for c in members.iter() {
            c.inner.lock().claimed = true;
        }
        Ok(Some(members))
    }

    /// Group `gid` as its notifications show it, under each member's lock.
    fn tpg_event(&self, gid: usize) -> Option<TpgEvent> {
        let r = self.tpgs.get(gid).copied().flatten()?;
        let first = find_chan(&self.chans, r.first())?;
        let mut head = tp_event_of(first.tpn, &first.inner.lock());
        let mut states = [ChannelState::Rts; crate::group::MAX_MEMBERS as usize];
        head.error = 0;
        for (s, &t) in states.iter_mut().zip(r.tpns()) {
            let g = find_chan(&self.chans, t)?.inner.lock();
            *s = g.state;
            if head.error == 0 {
                head.error = g.error.map_or(0, |e| e.to_errno().unsigned_abs());
            }
        }
        head.state = crate::group::group_state(states.iter().take(r.n).copied());
        Some(TpgEvent {
            head,
            members: u32::try_from(r.n).unwrap_or(0),
        })
    }

    /// Group `gid` of device `dev_index` as `tpg-get` shows it.
    fn tpg_snapshot(&self, dev_index: u32, gid: usize) -> Option<TpgSnapshot> {
        let r = self.tpgs.get(gid).copied().flatten()?;
        let id = self.tpg_event(gid)?;
        let mut s = TpgSnapshot {
            dev_index,
            id,
            claimed: false,
            rx_queued: 0,
            counters: Default::default(),
            tx_messages: 0,
            tx_acked: 0,
            rx_messages: 0,
            member: [TpgMember {
                id: id.head,
                peer_tpn: 0,
            }; crate::group::MAX_MEMBERS as usize],
        };
        for (m, &t) in s.member.iter_mut().zip(r.tpns()) {
            let c = find_chan(&self.chans, t)?;
            let g = c.inner.lock();
            *m = TpgMember {
                id: tp_event_of(t, &g),
                peer_tpn: self.ep.peer_tpn(t).unwrap_or(0),
            };
            s.claimed |= g.claimed;
            s.rx_queued = s
                .rx_queued
                .saturating_add(u32::try_from(g.rx.len()).unwrap_or(u32::MAX));
            s.tx_messages = s.tx_messages.saturating_add(g.tx_messages);
            s.tx_acked = s.tx_acked.saturating_add(g.tx_acked);
            s.rx_messages = s.rx_messages.saturating_add(g.rx_messages);
            if let Some(k) = self.ep.counters(t) {
                s.counters.add(&k);
            }
        }
        Some(s)
    }

    /// Announces every group whose state or error changed since it was
    /// last announced.
    fn note_groups(&mut self) {
        self.groups_changed = false;
        for gid in 0..MAX_GROUPS {
            let Some(e) = self.tpg_event(gid) else {
                continue;
            };
            let now = (e.head.state, e.head.error);
            if let Some(Some(r)) = self.tpgs.get_mut(gid) {
                if r.announced != Some(now) {
                    r.announced = Some(now);
                    queue_tpg_event(&mut self.tpg_events, e);
                }
            }
        }
    }

    /// Member `tpn` is being freed: the endpoint dissolved its group, which
    /// leaves the table, announced `closed`.
    fn end_groups_of(&mut self, tpn: u32) {
        for gid in 0..MAX_GROUPS {
            if !self
                .tpgs
                .get(gid)
                .copied()
                .flatten()
                .is_some_and(|r| r.tpns().contains(&tpn))
            {
                continue;
            }
            if let Some(mut e) = self.tpg_event(gid) {
                e.head.closed = true;
                queue_tpg_event(&mut self.tpg_events, e);
            }
            if let Some(slot) = self.tpgs.get_mut(gid) {
                *slot = None;
            }
        }
    }
}

/// Queues a group notification; dropped when the queue is full.
fn queue_tpg_event(q: &mut [Option<TpgEvent>; TPG_EVENTS], e: TpgEvent) {
    if let Some(slot) = q.iter_mut().find(|s| s.is_none()) {
        *slot = Some(e);
    }
}
