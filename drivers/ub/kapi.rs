// SPDX-License-Identifier: GPL-2.0
//! The in-kernel TP Channel API (`include/linux/ub.h`): other kernel
//! modules open RTP channels of a device, send messages and get each
//! received message through a callback (design: `Documentation/ub/kapi.rst`).
//!
//! A [`KernelTp`] is the handle a module holds (`struct ub_tp *` is
//! `Arc::into_raw` of it until `ub_tp_close`). It owns a channel of the
//! device's table exactly as a bound `/dev/ub_tp` file does, so everything
//! the channel does (queues, limits, errors, the closed peer's lingering
//! messages) is the same for both. Instead of a reader, the channel's every
//! change queues the handle's work item ([`TpChannel`]'s `consumer`), which
//! hands the received messages, the error and the room to write to the
//! module's callbacks, in order, from process context, with no lock of
//! this driver held: a callback may call `ub_tp_send`.
//!
//! Locking: [`KernelTp::ch`] is taken inside the endpoint's lock (when a
//! listen is matched) or alone, never around another lock.
//!
//! Lifetime: `ub_tp_open` hands one reference to the module; the channel
//! holds another while it is attached (`consumer`), and a queued work item
//! a third. `ub_tp_close` detaches the channel, waits for the work and
//! drops the module's reference.

use core::ffi::{c_int, c_void};

use kernel::{
    bindings, new_mutex,
    prelude::*,
    sync::{
        atomic::{Atomic, Relaxed},
        Arc, ArcBorrow, Mutex,
    },
    workqueue::{self, impl_has_work, new_work, Work, WorkItem},
};

use crate::cdev::{BindRequest, UbTpBind};
use crate::channel::TpChannel;
use crate::host::Addr;
use crate::ub_net::Net;

/// `struct ub_tp_ops`.
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct UbTpOps {
    recv: Option<unsafe extern "C" fn(*mut KernelTp, *mut c_void, *const u8, usize)>,
    error: Option<unsafe extern "C" fn(*mut KernelTp, *mut c_void, c_int)>,
    writable: Option<unsafe extern "C" fn(*mut KernelTp, *mut c_void)>,
}

/// The module's `priv` pointer, handed back to its callbacks only.
struct Priv(*mut c_void);

// SAFETY: The driver never dereferences it; it goes back to the module,
// whose callbacks may run on any CPU (the module promises that by passing
// it, as with any kernel callback context).
unsafe impl Send for Priv {}
// SAFETY: As above: only copied, never dereferenced here.
unsafe impl Sync for Priv {}

/// One channel opened by another kernel module (see the module
/// documentation).
#[pin_data]
pub(crate) struct KernelTp {
    net: Arc<Net>,
    ops: UbTpOps,
    priv_: Priv,
    /// What a listen waits for (matched by [`Net`] when a peer opens).
    pub(crate) key: u32,
    pub(crate) from: Option<Addr>,
    /// Largest message (the channel's configuration).
    max_message: u32,
    /// The channel, once there is one (at once for a connect).
    #[pin]
    ch: Mutex<Option<Arc<TpChannel>>>,
    /// `ub_tp_close` began: no more callbacks.
    closing: Atomic<bool>,
    /// The error callback ran (it runs once).
    ended: Atomic<bool>,
    /// A send said `-EAGAIN`: call `writable` once there is room.
    want_writable: Atomic<bool>,
    /// The device went away before a peer opened the listened channel.
    orphaned: Atomic<bool>,
    #[pin]
    work: Work<KernelTp>,
}

impl_has_work! {
    impl HasWork<Self> for KernelTp { self.work }
}

impl KernelTp {
    /// Queues the work (a change of the channel, or of the handle).
    pub(crate) fn notify(this: &Arc<Self>) {
        if !this.closing.load(Relaxed) {
            let _ = workqueue::system().enqueue(this.clone());
        }
    }

    /// Called by [`Net`], under its lock, when a peer opened (or had
    /// opened) the channel a listen waits for, or the connect made it.
    pub(crate) fn attach(this: &Arc<Self>, ch: Arc<TpChannel>) {
        ch.set_consumer(Some(this.clone()));
        *this.ch.lock() = Some(ch);
        Self::notify(this);
    }

    /// Takes the channel away (the handle closes).
    pub(crate) fn take_channel(&self) -> Option<Arc<TpChannel>> {
        self.ch.lock().take()
    }

    /// The device is going and no peer opened the listened channel.
    pub(crate) fn orphan(this: &Arc<Self>) {
        this.orphaned.store(true, Relaxed);
        Self::notify(this);
    }

    fn raw(self: &Arc<Self>) -> *mut KernelTp {
        Arc::as_ptr(self).cast_mut()
    }

    /// The work: received messages to `recv`, then the end to `error`,
    /// then room to `writable`.
    fn run(self: &Arc<Self>) {
        let ch = self.ch.lock().clone();
        let Some(ch) = ch else {
            if self.orphaned.load(Relaxed) {
                self.end(ENODEV.to_errno());
            }
            return;
        };
        while !self.closing.load(Relaxed) {
            let Ok(Some(m)) = ch.take_message(usize::MAX) else {
                break;
            };
            if let Some(recv) = self.ops.recv {
                // SAFETY: The module gave `recv` with its ops, for this
                // handle, which is alive (this work holds a reference);
                // the message is valid for the call.
                unsafe { recv(self.raw(), self.priv_.0, m.as_ptr(), m.len()) };
            }
        }
        let end = {
            let g = ch.inner.lock();
            match g.error {
                Some(e) if g.rx.len() == 0 => Some(e.to_errno()),
                None if g.closed && g.rx.len() == 0 => Some(0),
                _ => None,
            }
        };
        if let Some(e) = end {
            self.end(e);
            return;
        }
        if self.want_writable.load(Relaxed) && self.net.channel_writable(&ch) {
            self.want_writable.store(false, Relaxed);
            if let Some(w) = self.ops.writable {
                if !self.closing.load(Relaxed) {
                    // SAFETY: As for `recv`.
                    unsafe { w(self.raw(), self.priv_.0) };
                }
            }
        }
    }

    /// Calls `error` once.
    fn end(self: &Arc<Self>, err: c_int) {
        if self.closing.load(Relaxed) || self.ended.xchg(true, Relaxed) {
            return;
        }
        if let Some(e) = self.ops.error {
            // SAFETY: As for `recv`.
            unsafe { e(self.raw(), self.priv_.0, err) };
        }
    }
}

impl WorkItem for KernelTp {
    type Pointer = Arc<KernelTp>;

    fn run(this: Arc<KernelTp>) {
        this.run();
    }
}

/// `ub_tp_open`: opens (or, with `UB_TP_BIND_LISTEN`, waits without
/// blocking for) one RTP channel as `req` asks; `*tpp` gets the handle.
///
/// # Safety
///
/// `req` and `ops` point at valid structs for the call, `tpp` at a writable
/// pointer; the module keeps `ops`' functions loaded (its own text) until
/// it closes the handle.
#[no_mangle]
pub(crate) unsafe extern "C" fn ub_tp_open(
    req: *const UbTpBind,
    ops: *const UbTpOps,
    priv_: *mut c_void,
    tpp: *mut *mut KernelTp,
) -> c_int {
    if req.is_null() || ops.is_null() || tpp.is_null() {
        return EINVAL.to_errno();
    }
    // SAFETY: Non-null and valid for the call (the caller's promise).
    let (req, ops) = unsafe { (*req, *ops) };
    match open(&req, ops, priv_) {
        Ok(k) => {
            // SAFETY: `tpp` is writable (the caller's promise).
            unsafe { *tpp = Arc::into_raw(k).cast_mut() };
            0
        }
        Err(e) => e.to_errno(),
    }
}

fn open(b: &UbTpBind, ops: UbTpOps, priv_: *mut c_void) -> Result<Arc<KernelTp>> {
    let req = BindRequest::parse(b)?;
    if ops.recv.is_none() {
        return Err(EINVAL);
    }
    if req.members > 1 {
        // TP Channel Groups are for files only (`group.rs`), for now.
        return Err(EOPNOTSUPP);
    }
    let net = crate::registry::get(req.dev_index).ok_or(ENODEV)?;
    let for_k = net.clone();
    let k = Arc::pin_init(
        pin_init!(KernelTp {
            net: for_k,
            ops,
            priv_: Priv(priv_),
            key: req.key,
            from: req.remote,
            max_message: req.cfg.max_message,
            ch <- new_mutex!(None),
            closing: Atomic::new(false),
            ended: Atomic::new(false),
            want_writable: Atomic::new(false),
            orphaned: Atomic::new(false),
            work <- new_work!("ub::KernelTp::work"),
        }),
        GFP_KERNEL,
    )?;
    match req.remote {
        Some(r) if !req.listen => {
            // Nothing here blocks: a key still closing is EBUSY at once.
            let ch = net.channel_connect(r, req.key, req.cfg, 0)?;
            net.kernel_attach(&k, ch);
        }
        _ => net.kernel_listen(&k)?,
    }
    Ok(k)
}

/// `ub_tp_send`: sends one message of `len` bytes; `-EAGAIN` when the
/// channel cannot take it now (then `writable` is called once it can).
///
/// # Safety
///
/// `tp` is a handle from `ub_tp_open` not yet closed; `msg` is valid for
/// reads of `len` bytes.
#[no_mangle]
pub(crate) unsafe extern "C" fn ub_tp_send(tp: *mut KernelTp, msg: *const u8, len: usize) -> c_int {
    if tp.is_null() || (msg.is_null() && len > 0) {
        return EINVAL.to_errno();
    }
    // SAFETY: A live handle (the caller's promise): it came from
    // `Arc::into_raw`, and the module's reference keeps it until
    // `ub_tp_close`.
    let k: Arc<KernelTp> = unsafe { ArcBorrow::from_raw(tp.cast_const()) }.into();
    // SAFETY: Valid for reads of `len` bytes (the caller's promise).
    let bytes = unsafe { core::slice::from_raw_parts(msg, len) };
    match send(&k, bytes) {
        Ok(()) => 0,
        Err(e) => e.to_errno(),
    }
}

fn send(k: &Arc<KernelTp>, bytes: &[u8]) -> Result {
    if bytes.is_empty() {
        return Err(EINVAL);
    }
    let ch = k.ch.lock().clone().ok_or(ENOTCONN)?;
    if bytes.len() > usize::try_from(k.max_message).unwrap_or(0) {
        return Err(EMSGSIZE);
    }
    let mut m = KVVec::with_capacity(bytes.len(), GFP_KERNEL)?;
    m.extend_from_slice(bytes, GFP_KERNEL)?;
    match k.net.channel_send(&ch, m) {
        Ok(()) => Ok(()),
        Err((e, _)) => {
            if e == EAGAIN {
                k.want_writable.store(true, Relaxed);
                // Arms the endpoint's Writable event (and so a wake-up of
                // the work), or finds the room came back meanwhile.
                if k.net.channel_writable(&ch) {
                    KernelTp::notify(k);
                }
            }
            Err(e)
        }
    }
}

/// `ub_tp_close`: tears the channel down (messages not yet acknowledged
/// are abandoned), waits for a callback that is running, and frees the
/// handle. No callback runs after it returns.
///
/// # Safety
///
/// `tp` is a handle from `ub_tp_open`, closed once, not from one of its own
/// callbacks (that would wait for itself).
#[no_mangle]
pub(crate) unsafe extern "C" fn ub_tp_close(tp: *mut KernelTp) {
    if tp.is_null() {
        return;
    }
    // SAFETY: The module's reference, handed back (the caller's promise).
    let k = unsafe { Arc::from_raw(tp.cast_const()) };
    k.closing.store(true, Relaxed);
    if let Some(ch) = k.net.kernel_detach(&k) {
        ch.set_consumer(None);
        k.net.channel_close(&ch);
    }
    // SAFETY: `work` is a field of the live handle; `flush_work` waits for
    // the queued or running instance, which sees `closing` and calls
    // nothing. Nothing queues it again: the channel lost its consumer and
    // `notify` checks `closing`.
    unsafe { bindings::flush_work(Work::raw_get(&k.work)) };
}
