// SPDX-License-Identifier: GPL-2.0
//! The UB controller device model: BAR0 registers, TX/RX descriptor rings
//! moved by DMA, MSI-X causes with masks and moderation.
//!
//! A pure state machine: no sockets, no threads, no clock. Time (`now`,
//! nanoseconds) is passed in; guest memory and interrupts are traits
//! ([`GuestMemory`], [`Interrupts`]) with fakes for tests. The fabric moves
//! flits in and out with [`Controller::pull_tx`] and [`Controller::push_rx`].
//!
//! Everything the guest writes is untrusted: bad registers, bad descriptors,
//! DMA outside guest memory and doorbell storms set an error bit and a
//! counter on the port concerned and never panic or touch another port.
//!
//! The other way round, on command, the device lies to the driver (the
//! hostile mode, [`HostileCase`], at the end of this file), so that tests
//! can prove the driver does not trust it either.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};
use ub_proto::controller::{self as reg, Field};

/// The port error bits, by field (`ERR_STATUS::ZERO.tx_desc()`...).
use reg::ERR_STATUS as ErrBits;

use crate::mem::GuestMemory;
use crate::rng::Rng;

/// Raises MSI-X vectors.
pub trait Interrupts: Send {
    /// Sends the MSI-X message of `vector`.
    fn raise(&mut self, vector: u16);
}

/// An [`Interrupts`] that records what was raised (tests).
#[derive(Debug, Default, Clone)]
pub struct RecordingIrqs {
    /// Vectors raised, in order.
    pub raised: Vec<u16>,
}

impl Interrupts for RecordingIrqs {
    fn raise(&mut self, vector: u16) {
        self.raised.push(vector);
    }
}

/// Static properties of one controller.
#[derive(Debug, Clone, Copy)]
pub struct ControllerConfig {
    /// Ports (1..=[`reg::MAX_PORTS`]).
    pub ports: u32,
    /// Lanes per port (1, 2, 4 or 8).
    pub lanes: u32,
    /// Mbit/s per lane.
    pub lane_rate_mbps: u32,
    /// Bytes the device buffers per port on receive before dropping flits
    /// for want of RX buffers.
    pub rx_fifo_bytes: usize,
    /// Descriptors handled per port per [`Controller::pull_tx`] /
    /// [`Controller::service_rx`] call (bounds the work a doorbell storm
    /// can cause).
    pub budget: u32,
}

impl Default for ControllerConfig {
    fn default() -> Self {
        Self {
            ports: 2,
            lanes: 4,
            lane_rate_mbps: 25_000,
            rx_fifo_bytes: 256 * 1024,
            budget: 64,
        }
    }
}

/// Per-port counters exported as JSON (the registers hold the low 32 bits
/// of some of them).
#[derive(Debug, Default, Clone, Copy, Serialize, PartialEq, Eq)]
pub struct PortCounters {
    /// Flits taken from TX buffers.
    pub tx_flits: u64,
    /// Flits written into RX buffers.
    pub rx_flits: u64,
    /// TX descriptors completed.
    pub tx_descs: u64,
    /// RX descriptors completed.
    pub rx_descs: u64,
    /// Flits dropped for want of RX buffers.
    pub rx_nobuf_flits: u64,
    /// Flits lost on the wire (FEC failures, link down) reported to the
    /// driver.
    pub rx_lost_flits: u64,
    /// Doorbell writes.
    pub doorbells: u64,
    /// Doorbell writes that added no work.
    pub idle_doorbells: u64,
    /// Errors of any kind.
    pub errors: u64,
    /// Bad TX descriptors.
    pub tx_bad_desc: u64,
    /// TX buffers outside guest memory.
    pub tx_dma_errors: u64,
    /// Bad RX descriptors or RX buffers outside guest memory.
    pub rx_bad_desc: u64,
    /// Unreadable rings (ring halted).
    pub ring_dma_errors: u64,
    /// Bad ring configurations.
    pub ring_cfg_errors: u64,
    /// Doorbells outside the ring.
    pub bad_doorbells: u64,
    /// MSI-X messages sent for this port.
    pub interrupts: u64,
    /// Completed retrains.
    pub retrains: u64,
    /// Bit errors seen by the PHY.
    pub phy_bit_errors: u64,
    /// FEC decode failures.
    pub phy_fec_fails: u64,
    /// LinkUp 1→0 transitions.
    pub link_downs: u64,
}

#[derive(Debug)]
struct RxSeg {
    lost: u32,
    data: Vec<u8>,
    off: usize,
}

/// A descriptor write-back: its guest address and bytes.
type Writeback = (u64, [u8; 6]);

#[derive(Debug, Default, Clone, Copy)]
struct Ring {
    base: u64,
    size: u32,
    head: u32,
    tail: u32,
    enabled: bool,
    halted: bool,
    /// What the hostile mode needs to know of the driver's view, since
    /// the ring was enabled: the head value the driver last read
    /// truthfully (or the one a double completion moved it back to), ...
    seen_head: Option<u32>,
    /// ... and the last write-back.
    last_writeback: Option<Writeback>,
}

impl Ring {
    /// The `RING_CTRL` value.
    fn ctrl(&self) -> u32 {
        reg::RING_CTRL::ZERO
            .enable()
            .set(self.enabled)
            .halted()
            .set(self.halted)
            .into_raw()
    }

    /// Reads the ring's register at `rel` in its block, or `None` if
    /// `rel` names no ring register.
    fn read(&self, rel: u32) -> Option<u32> {
        let (lo, hi) = reg::split_u64(self.base);
        Some(match rel {
            reg::RING_BASE_LO::OFFSET => lo,
            reg::RING_BASE_HI::OFFSET => hi,
            reg::RING_SIZE::OFFSET => self.size,
            reg::RING_HEAD::OFFSET => self.head,
            reg::RING_TAIL::OFFSET => self.tail,
            reg::RING_CTRL::OFFSET => self.ctrl(),
            _ => return None,
        })
    }

    fn pending(&self) -> u32 {
        if !self.enabled || self.halted {
            return 0;
        }
        reg::ring_pending(self.head, self.tail, self.size)
    }
}

/// Which of a port's rings.
#[derive(Debug, Clone, Copy)]
enum Dir {
    Tx,
    Rx,
}

#[derive(Debug)]
struct Port {
    enabled: bool,
    link_up: bool,
    retrain_requested: bool,
    training: bool,
    tx: Ring,
    rx: Ring,
    int_cause: u32,
    int_mask: u32,
    moderation_us: u32,
    last_irq: Option<u64>,
    /// Causes that went 0 → 1 (or were unmasked while set) since the last
    /// message: the vector fires for these.
    irq_edge: u32,
    /// The PHY link was up when the device was reset or the driver
    /// disabled the PHY: the fabric must see the port disabled (and take
    /// the link down for the peer) before it may come up again, however
    /// fast the driver re-enables it.
    reset_pending: bool,
    err_status: u32,
    err_last: u32,
    /// Received data waiting for RX buffers, as segments each preceded
    /// by a count of lost flits.
    rx_fifo: VecDeque<RxSeg>,
    rx_bytes: usize,
    c: PortCounters,
    /// Misbehaviour armed from the control socket (kept across resets:
    /// it is the fabric's doing, not device state the driver can clear).
    hostile: Hostile,
}

impl Port {
    /// Queues a gap of `flits` lost flits in the RX FIFO. A gap right
    /// behind another gap joins it: while no RX buffer is posted, every
    /// arrival into a full FIFO adds a gap, and a guest that never posts
    /// one must not make the device's memory grow without bound (the
    /// driver learns the same total either way).
    fn push_gap(&mut self, flits: u32) {
        if flits == 0 {
            return;
        }
        match self.rx_fifo.back_mut() {
            Some(last) if last.data.is_empty() => last.lost = last.lost.saturating_add(flits),
            _ => self.rx_fifo.push_back(RxSeg {
                lost: flits,
                data: Vec::new(),
                off: 0,
            }),
        }
    }

    fn new() -> Self {
        Self {
            enabled: false,
            link_up: false,
            retrain_requested: false,
            training: false,
            tx: Ring::default(),
            rx: Ring::default(),
            int_cause: 0,
            int_mask: reg::INT_MASK::FIELDS,
            moderation_us: 0,
            last_irq: None,
            irq_edge: 0,
            reset_pending: false,
            err_status: 0,
            err_last: 0,
            rx_fifo: VecDeque::new(),
            rx_bytes: 0,
            c: PortCounters::default(),
            hostile: Hostile::default(),
        }
    }

    fn ring(&mut self, dir: Dir) -> &mut Ring {
        match dir {
            Dir::Tx => &mut self.tx,
            Dir::Rx => &mut self.rx,
        }
    }

    fn ring_ref(&self, dir: Dir) -> &Ring {
        match dir {
            Dir::Tx => &self.tx,
            Dir::Rx => &self.rx,
        }
    }

    /// Writes the register at `rel` in ring `dir`'s block; `false` if `rel`
    /// names no writable ring register. Base and size are writable only
    /// while the ring is disabled (`RING_BUSY` otherwise).
    fn write_ring(&mut self, dir: Dir, rel: u32, v: u32) -> bool {
        let ring = *self.ring_ref(dir);
        let mut new = ring;
        match rel {
            reg::RING_BASE_LO::OFFSET => new.base = reg::join_u64(v, reg::split_u64(ring.base).1),
            reg::RING_BASE_HI::OFFSET => new.base = reg::join_u64(reg::split_u64(ring.base).0, v),
            reg::RING_SIZE::OFFSET => new.size = v,
            reg::RING_CTRL::OFFSET => {
                // Enabling validates the configuration; enabling or
                // disabling starts the ring over (head, tail, halt).
                let enable = reg::RING_CTRL::from_raw(v).enable().is_set();
                if enable && ring.enabled {
                    return true;
                }
                if enable
                    && (!reg::ring_size_ok(ring.size)
                        || ring.base % reg::DESC_BYTES as u64 != 0
                        || reg::desc_addr(ring.base, ring.size).is_none())
                {
                    self.error(ErrBits::ZERO.ring_cfg(), 0);
                    return true;
                }
                *self.ring(dir) = Ring {
                    base: ring.base,
                    size: ring.size,
                    enabled: enable,
                    ..Ring::default()
                };
                return true;
            }
            reg::RING_TAIL::OFFSET => {
                self.c.doorbells += 1;
                if !ring.enabled || v >= ring.size {
                    self.error(ErrBits::ZERO.doorbell(), v);
                    return true;
                }
                if v == ring.tail {
                    self.c.idle_doorbells += 1;
                }
                self.ring(dir).tail = v;
                return true;
            }
            _ => return false,
        }
        // Base and size.
        if ring.enabled {
            self.error(ErrBits::ZERO.ring_busy(), 0);
        } else {
            *self.ring(dir) = new;
        }
        true
    }

    /// The descriptor at the head of ring `dir` and its address, or `None`
    /// (the ring halted with `RING_DMA`) if it cannot be read.
    fn head_desc(&mut self, mem: &dyn GuestMemory, dir: Dir) -> Option<(u64, reg::Desc)> {
        if self.hostile.take(HostileCase::RingDma) {
            self.halt(dir);
            return None;
        }
        let ring = *self.ring(dir);
        let mut raw = [0u8; reg::DESC_BYTES];
        let read = reg::desc_addr(ring.base, ring.head).filter(|&a| mem.read(a, &mut raw).is_ok());
        if read.is_none() {
            self.halt(dir);
        }
        read.map(|a| (a, reg::Desc::decode(&raw)))
    }

    /// Writes back `d`, the head descriptor of ring `dir` at `daddr`, and
    /// advances the head; `false` (the ring halted with `RING_DMA`, the
    /// descriptor not consumed) if the write-back fails. The hostile mode
    /// may alter what is written back (never the head, the data consumed
    /// or the counters).
    fn complete(&mut self, mem: &mut dyn GuestMemory, dir: Dir, daddr: u64, d: &reg::Desc) -> bool {
        let (d, case) = self.hostile.writeback(dir, *d);
        let bytes = d.writeback();
        let wb = daddr
            .checked_add(reg::Desc::WRITEBACK_OFFSET as u64)
            .filter(|&wb| mem.write(wb, &bytes).is_ok());
        let Some(wb) = wb else {
            self.halt(dir);
            return false;
        };
        if let Some(case) = case {
            self.hostile.take(case);
        }
        let ring = self.ring(dir);
        ring.head = reg::ring_next(ring.head, ring.size);
        ring.last_writeback = Some((wb, bytes));
        true
    }

    /// A driver read of ring `dir`'s `RING_HEAD`: the head, unless the
    /// hostile mode lies about it (see [`Hostile::head`]).
    fn read_head(&mut self, mem: &mut dyn GuestMemory, dir: Dir) -> u32 {
        let ring = *self.ring_ref(dir);
        match self.hostile.head(dir, &ring) {
            Some(HeadLie {
                value: v,
                case,
                repeat,
            }) => {
                self.hostile.take(case);
                if let Some((wb, bytes)) = repeat {
                    // The same completion once more; a ring the driver
                    // unmapped meanwhile only loses the rewrite. The
                    // driver now believes the head moved back, so the
                    // next read (the truth) completes the slot again.
                    let _ = mem.write(wb, &bytes);
                    self.ring(dir).seen_head = Some(v);
                }
                v
            }
            None => {
                if ring.enabled {
                    self.ring(dir).seen_head = Some(ring.head);
                }
                ring.head
            }
        }
    }

    /// Stops ring `dir` on a descriptor it cannot read or write back.
    fn halt(&mut self, dir: Dir) {
        let ring = self.ring(dir);
        ring.halted = true;
        let head = ring.head;
        self.error(ErrBits::ZERO.ring_dma(), head);
    }

    /// LinkUp as the driver sees it: the PHY's, while the port is enabled
    /// and not waiting for the link to go down after a reset.
    fn link_up(&self) -> bool {
        self.link_up && self.enabled && !self.reset_pending
    }

    /// Sets causes `bits`; those that were clear are edges.
    fn cause(&mut self, bits: u32) {
        self.irq_edge |= bits & !self.int_cause;
        self.int_cause |= bits;
    }

    /// Records error `err` (an `ERR_STATUS` field) about descriptor or
    /// value `index`.
    fn error(&mut self, err: Field<ErrBits>, index: u32) {
        self.err_status |= err.mask();
        let last = reg::ERR_LAST::ZERO;
        self.err_last = last
            .code()
            .set(err.shift())
            .index()
            .set(index.min(last.index().max()))
            .into_raw();
        self.c.errors += 1;
        let e = ErrBits::ZERO;
        let counter = if err == e.tx_desc() {
            Some(&mut self.c.tx_bad_desc)
        } else if err == e.tx_dma() {
            Some(&mut self.c.tx_dma_errors)
        } else if err == e.rx_desc() {
            Some(&mut self.c.rx_bad_desc)
        } else if err == e.ring_dma() {
            Some(&mut self.c.ring_dma_errors)
        } else if err == e.ring_cfg() {
            Some(&mut self.c.ring_cfg_errors)
        } else if err == e.doorbell() {
            Some(&mut self.c.bad_doorbells)
        } else {
            None
        };
        if let Some(c) = counter {
            *c += 1;
        }
        self.cause(int::ERROR);
    }
}

/// `INT_CAUSE` bits, from the register table.
mod int {
    use ub_proto::controller::INT_CAUSE as C;
    pub(super) const TX_DONE: u32 = C::ZERO.tx_done().mask();
    pub(super) const RX_DONE: u32 = C::ZERO.rx_done().mask();
    pub(super) const LINK: u32 = C::ZERO.link().mask();
    pub(super) const RETRAIN_DONE: u32 = C::ZERO.retrain_done().mask();
    pub(super) const ERROR: u32 = C::ZERO.error().mask();
    pub(super) const RX_NOBUF: u32 = C::ZERO.rx_nobuf().mask();
}

/// `GERR` bits, from the register table.
const GERR_BAD_ACCESS: u32 = reg::GERR::ZERO.bad_access().mask();
/// `GERR.PORT`.
const GERR_PORT: u32 = reg::GERR::ZERO.port().mask();
/// `GINT_CAUSE.ERROR`.
const GINT_ERROR: u32 = reg::GINT_CAUSE::ZERO.error().mask();

// `Ring::ctrl` serves both rings; INT_MASK masks INT_CAUSE bit for bit.
// Masks and the test register have one bit per cause.
const _: () = assert!(reg::INT_MASK::FIELDS == reg::INT_CAUSE::FIELDS);
const _: () = assert!(reg::GINT_MASK::FIELDS == reg::GINT_CAUSE::FIELDS);
const _: () = assert!(reg::GINT_TEST::FIELDS == reg::GINT_CAUSE::FIELDS);

/// The ring block a port-0 offset falls in, and its offset there (whether
/// it names a ring register is for the ring to say).
fn ring_block(off: u32) -> Option<(Dir, u32)> {
    use reg::{RegisterBase, Ring};
    let rx = <reg::RxRing as RegisterBase<Ring>>::BASE;
    let tx = <reg::TxRing as RegisterBase<Ring>>::BASE;
    [(Dir::Rx, rx), (Dir::Tx, tx)]
        .into_iter()
        .find_map(|(dir, base)| off.checked_sub(base).map(|rel| (dir, rel)))
}

/// Device-level counters.
#[derive(Debug, Default, Clone, Copy, Serialize)]
pub struct DeviceCounters {
    /// Rejected register accesses.
    pub bad_access: u64,
    /// Device resets.
    pub resets: u64,
    /// Global MSI-X messages.
    pub interrupts: u64,
}

/// One emulated UB controller.
pub struct Controller {
    cfg: ControllerConfig,
    enabled: bool,
    gerr: u32,
    gint_cause: u32,
    gint_mask: u32,
    /// Global causes that went 0 → 1 (or were unmasked while set).
    gint_edge: u32,
    scratch: u32,
    /// The `BAD_ACCESS` register (reset to 0; the lifetime total is in
    /// [`DeviceCounters::bad_access`]).
    bad_access: u32,
    ports: Vec<Port>,
    counters: DeviceCounters,
    mem: Box<dyn GuestMemory>,
    irq: Box<dyn Interrupts>,
    /// Bit errors / FEC failures / link downs per port as the PHY reports
    /// them (kept across resets, like hardware monitors are not).
    phy: Vec<(u64, u64, u64, u64)>,
    /// Line rate per port in kilo-flits per second.
    rate_kfps: Vec<u32>,
}

impl std::fmt::Debug for Controller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Controller")
            .field("ports", &self.ports.len())
            .field("enabled", &self.enabled)
            .finish()
    }
}

fn lo(v: u64) -> u32 {
    v as u32
}

impl Controller {
    /// A controller in its reset state.
    pub fn new(cfg: ControllerConfig, mem: Box<dyn GuestMemory>, irq: Box<dyn Interrupts>) -> Self {
        let mut cfg = cfg;
        cfg.ports = cfg.ports.clamp(1, reg::MAX_PORTS);
        let n = cfg.ports as usize;
        Self {
            cfg,
            enabled: false,
            gerr: 0,
            gint_cause: 0,
            gint_mask: reg::GINT_MASK::FIELDS,
            gint_edge: 0,
            scratch: 0,
            bad_access: 0,
            ports: (0..n).map(|_| Port::new()).collect(),
            counters: DeviceCounters::default(),
            mem,
            irq,
            phy: vec![(0, 0, 0, 0); n],
            rate_kfps: vec![
                (u64::from(cfg.lanes) * u64::from(cfg.lane_rate_mbps) * 1000 / 160)
                    as u32;
                n
            ],
        }
    }

    /// The configuration.
    pub fn config(&self) -> &ControllerConfig {
        &self.cfg
    }

    /// Number of ports.
    pub fn ports(&self) -> usize {
        self.ports.len()
    }

    /// Replaces the guest memory (a new guest connected).
    pub fn set_memory(&mut self, mem: Box<dyn GuestMemory>) {
        self.mem = mem;
    }

    /// Replaces the interrupt sink.
    pub fn set_interrupts(&mut self, irq: Box<dyn Interrupts>) {
        self.irq = irq;
    }

    /// Access to the guest memory (tests and the driver double).
    pub fn memory_mut(&mut self) -> &mut dyn GuestMemory {
        self.mem.as_mut()
    }

    /// Device counters.
    pub fn counters(&self) -> DeviceCounters {
        self.counters
    }

    /// Port counters, or `None` for a port that does not exist.
    pub fn port_counters(&self, port: usize) -> Option<PortCounters> {
        let p = self.ports.get(port)?;
        let mut c = p.c;
        if let Some(&(bits, fec, downs, _)) = self.phy.get(port) {
            c.phy_bit_errors = bits;
            c.phy_fec_fails = fec;
            c.link_downs = downs;
        }
        Some(c)
    }

    /// Back to the reset values (CTRL.RESET, vfio-user reset, guest
    /// restart). Rings, causes, masks and counters are cleared; ports are
    /// disabled, so their links go down: a port whose link was up stays
    /// disabled for the fabric until the fabric has taken the link down
    /// ([`Controller::set_link`] with `false`), even if the driver enables
    /// it again at once.
    pub fn reset(&mut self) {
        self.enabled = false;
        self.gerr = 0;
        self.gint_cause = 0;
        self.gint_mask = reg::GINT_MASK::FIELDS;
        self.gint_edge = 0;
        self.scratch = 0;
        self.bad_access = 0;
        for p in &mut self.ports {
            let link_up = p.link_up;
            let hostile = std::mem::take(&mut p.hostile);
            *p = Port::new();
            p.link_up = link_up;
            p.reset_pending = link_up;
            p.hostile = hostile;
        }
        self.counters.resets += 1;
    }

    // ----- Register access -------------------------------------------

    fn bad_access(&mut self) {
        self.counters.bad_access += 1;
        self.bad_access = self.bad_access.wrapping_add(1);
        self.gerr |= GERR_BAD_ACCESS;
        self.sync_global_error();
    }

    /// Sets global causes `bits`; those that were clear are edges.
    fn global_cause(&mut self, bits: u32) {
        self.gint_edge |= bits & !self.gint_cause;
        self.gint_cause |= bits;
    }

    /// `GERR.PORT` while any port has an error in `ERR_STATUS`, and
    /// `GINT_CAUSE.ERROR` while `GERR` is non-zero: both are set again as
    /// soon as they are cleared with their source still there, so a new
    /// error is never hidden behind one that was already reported.
    fn sync_global_error(&mut self) {
        if self.ports.iter().any(|p| p.err_status != 0) {
            self.gerr |= GERR_PORT;
        }
        if self.gerr != 0 {
            self.global_cause(GINT_ERROR);
        }
    }

    /// A BAR0 read of `data.len()` bytes at `off`. Only aligned 4- and
    /// 8-byte reads are accepted; anything else reads as zeros and counts
    /// as a bad access.
    pub fn bar_read(&mut self, off: u64, data: &mut [u8]) {
        data.fill(0);
        let ok = matches!(data.len(), 4 | 8) && off % 4 == 0 && off < u64::from(reg::BAR0_SIZE);
        if !ok {
            self.bad_access();
            return;
        }
        for (i, chunk) in data.chunks_exact_mut(4).enumerate() {
            let o = off as u32 + 4 * i as u32;
            let v = self.read32(o);
            chunk.copy_from_slice(&v.to_le_bytes());
        }
    }

    /// A BAR0 write; same access rules as [`Controller::bar_read`].
    pub fn bar_write(&mut self, off: u64, data: &[u8], now: u64) {
        let ok = matches!(data.len(), 4 | 8) && off % 4 == 0 && off < u64::from(reg::BAR0_SIZE);
        if !ok {
            self.bad_access();
            return;
        }
        for (i, chunk) in data.chunks_exact(4).enumerate() {
            let o = off as u32 + 4 * i as u32;
            let v = u32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
            self.write32(o, v, now);
        }
        self.update_irqs(now);
    }

    /// Reads one 32-bit register.
    pub fn read32(&mut self, off: u32) -> u32 {
        match off {
            reg::IDENT::OFFSET => reg::IDENT_VALUE,
            reg::VERSION::OFFSET => reg::VERSION_VALUE,
            reg::CAP_PORTS::OFFSET => reg::CAP_PORTS::ZERO.ports().set(self.cfg.ports).into_raw(),
            reg::CAP_RING::OFFSET => reg::CAP_RING::ZERO
                .largest()
                .set(reg::RING_MAX)
                .smallest()
                .set(reg::RING_MIN)
                .into_raw(),
            reg::CAP_XFER::OFFSET => reg::CAP_XFER::ZERO
                .max_bytes()
                .set(reg::MAX_XFER_BYTES)
                .flit_bytes()
                .set(reg::FLIT_BYTES)
                .into_raw(),
            reg::CAP_MSIX::OFFSET => reg::CAP_MSIX::ZERO
                .vectors()
                .set(reg::msix_vectors(self.cfg.ports))
                .into_raw(),
            reg::CTRL::OFFSET => reg::CTRL::ZERO.enable().set(self.enabled).into_raw(),
            reg::STATUS::OFFSET => {
                let links = self
                    .ports
                    .iter()
                    .enumerate()
                    .filter(|(_, p)| p.link_up())
                    .fold(0u32, |m, (i, _)| m | 1 << i);
                reg::STATUS::ZERO
                    .enabled()
                    .set(self.enabled)
                    .link_up()
                    .set(links)
                    .into_raw()
            }
            reg::GERR::OFFSET => self.gerr,
            reg::SCRATCH::OFFSET => self.scratch,
            reg::BAD_ACCESS::OFFSET => self.bad_access,
            reg::GINT_CAUSE::OFFSET => self.gint_cause,
            reg::GINT_MASK::OFFSET => self.gint_mask,
            _ => {
                if let Some((port, r)) = reg::split_port_reg(off) {
                    if let Some(v) = self.read_port(port as usize, r) {
                        return v;
                    }
                }
                if (reg::MSIX_TABLE_OFFSET..reg::BAR0_SIZE).contains(&off) {
                    // QEMU emulates the MSI-X table and PBA itself.
                    return 0;
                }
                self.bad_access();
                0
            }
        }
    }

    /// Reads register `r` (its port-0 offset) of `port`.
    fn read_port(&mut self, port: usize, r: u32) -> Option<u32> {
        let phy = self.phy.get(port).copied().unwrap_or_default();
        let flit_rate_k = self.rate_kfps.get(port).copied().unwrap_or(0);
        let lane_rate =
            (u64::from(flit_rate_k) * 160 / 1000 / u64::from(self.cfg.lanes.max(1))) as u32;
        let p = self.ports.get_mut(port)?;
        if let Some((dir, rel)) = ring_block(r) {
            if rel == reg::RING_HEAD::OFFSET {
                return Some(p.read_head(self.mem.as_mut(), dir));
            }
            if let Some(v) = p.ring_ref(dir).read(rel) {
                return Some(v);
            }
        }
        Some(match r {
            reg::PHY_STATUS::OFFSET => reg::PHY_STATUS::ZERO
                .link_up()
                .set(p.link_up())
                .training()
                .set(p.training)
                .enabled()
                .set(p.enabled)
                .lanes()
                .set(self.cfg.lanes)
                .into_raw(),
            reg::PHY_LANE_RATE::OFFSET => lane_rate,
            reg::PHY_FLIT_RATE::OFFSET => flit_rate_k,
            reg::PHY_CTRL::OFFSET => reg::PHY_CTRL::ZERO
                .enable()
                .set(p.enabled)
                .retrain()
                .set(p.retrain_requested || p.training)
                .into_raw(),
            reg::PHY_RETRAINS::OFFSET => lo(p.c.retrains),
            reg::PHY_BIT_ERRORS::OFFSET => lo(phy.0),
            reg::PHY_FEC_FAILS::OFFSET => lo(phy.1),
            reg::PHY_LINK_DOWNS::OFFSET => lo(phy.2),
            reg::INT_CAUSE::OFFSET => p.int_cause,
            reg::INT_MASK::OFFSET => p.int_mask,
            reg::INT_MODERATION::OFFSET => p.moderation_us,
            reg::ERR_STATUS::OFFSET => p.err_status,
            reg::ERR_LAST::OFFSET => p.err_last,
            reg::ERR_COUNT::OFFSET => lo(p.c.errors),
            reg::TX_FLITS::OFFSET => lo(p.c.tx_flits),
            reg::RX_FLITS::OFFSET => lo(p.c.rx_flits),
            reg::TX_DESCS::OFFSET => lo(p.c.tx_descs),
            reg::RX_DESCS::OFFSET => lo(p.c.rx_descs),
            reg::RX_NOBUF_FLITS::OFFSET => lo(p.c.rx_nobuf_flits),
            reg::DOORBELLS::OFFSET => lo(p.c.doorbells),
            _ => return None,
        })
    }

    /// Writes one 32-bit register.
    pub fn write32(&mut self, off: u32, v: u32, now: u64) {
        match off {
            reg::CTRL::OFFSET => {
                let ctrl = reg::CTRL::from_raw(v);
                if ctrl.reset().is_set() {
                    self.reset();
                } else {
                    self.enabled = ctrl.enable().is_set();
                }
            }
            reg::GERR::OFFSET => {
                self.gerr &= !v;
            }
            reg::SCRATCH::OFFSET => self.scratch = v,
            reg::GINT_CAUSE::OFFSET => self.gint_cause &= !v,
            reg::GINT_MASK::OFFSET => {
                let unmasked = self.gint_mask & !v;
                self.gint_mask = v & reg::GINT_MASK::FIELDS;
                self.gint_edge |= unmasked & self.gint_cause;
            }
            reg::GINT_TEST::OFFSET => self.global_cause(v & reg::GINT_TEST::FIELDS),
            _ => {
                let written = reg::split_port_reg(off).is_some_and(|(port, r)| {
                    (port as usize) < self.ports.len() && self.write_port(port as usize, r, v, now)
                });
                if !written {
                    self.bad_access();
                }
            }
        }
        // A write may record a port error, or clear GERR or the cause while
        // their source remains.
        self.sync_global_error();
    }

    /// Writes register `r` (its port-0 offset) of `port`; `false` if `r`
    /// names no writable register.
    fn write_port(&mut self, port: usize, r: u32, v: u32, _now: u64) -> bool {
        let Some(p) = self.ports.get_mut(port) else {
            return false;
        };
        if let Some((dir, rel)) = ring_block(r) {
            if p.write_ring(dir, rel, v) {
                return true;
            }
        }
        match r {
            reg::PHY_CTRL::OFFSET => {
                let ctrl = reg::PHY_CTRL::from_raw(v);
                let enable = ctrl.enable().is_set();
                if p.enabled && !enable && p.link_up {
                    // A disabled PHY takes the link down, however soon it
                    // is enabled again: the link stays down (for the
                    // driver and the fabric) until the fabric has taken
                    // it down on both ends, as after a reset.
                    p.reset_pending = true;
                }
                p.enabled = enable;
                if ctrl.retrain().is_set() && p.enabled {
                    p.retrain_requested = true;
                }
            }
            reg::INT_CAUSE::OFFSET => p.int_cause &= !v,
            reg::INT_MASK::OFFSET => {
                let unmasked = p.int_mask & !v;
                p.int_mask = v & reg::INT_MASK::FIELDS;
                p.irq_edge |= unmasked & p.int_cause;
            }
            reg::INT_MODERATION::OFFSET => {
                p.moderation_us = reg::INT_MODERATION::from_raw(v).us().get();
            }
            reg::ERR_STATUS::OFFSET => p.err_status &= !v,
            _ => return false,
        }
        true
    }

    // ----- Interrupts ---------------------------------------------------

    /// Sends the MSI-X messages that are due: a vector fires when one of
    /// its unmasked causes went from 0 to 1 (or was unmasked while set),
    /// at most once per moderation interval (a message held back by
    /// moderation is sent when the interval ends, unless the driver
    /// cleared the causes meanwhile).
    pub fn update_irqs(&mut self, now: u64) {
        self.sync_global_error();
        // An edge of a masked cause fires when it is unmasked (the mask
        // write records that edge); one whose cause was cleared is gone.
        self.gint_edge &= self.gint_cause & !self.gint_mask;
        if self.gint_edge != 0 {
            self.gint_edge = 0;
            self.counters.interrupts += 1;
            self.irq.raise(reg::VECTOR_GLOBAL);
        }
        for (i, p) in self.ports.iter_mut().enumerate() {
            p.irq_edge &= p.int_cause & !p.int_mask;
            if p.irq_edge == 0 {
                continue;
            }
            let gap = u64::from(p.moderation_us) * 1000;
            if let Some(last) = p.last_irq {
                if now < last.saturating_add(gap) {
                    continue;
                }
            }
            p.irq_edge = 0;
            p.last_irq = Some(now);
            p.c.interrupts += 1;
            self.irq.raise(reg::port_vector(i as u32));
        }
        for (i, p) in self.ports.iter_mut().enumerate() {
            let Some((case, burst)) = p.hostile.storm(now) else {
                continue;
            };
            for _ in 0..burst {
                if case == HostileCase::IrqStormCause {
                    // A cause with nothing behind it; no edge, so the
                    // storm message is the only one.
                    p.int_cause |= int::TX_DONE | int::RX_DONE;
                }
                p.hostile.take(case);
                p.c.interrupts += 1;
                self.irq.raise(reg::port_vector(i as u32));
            }
        }
    }

    /// The earliest time a moderated interrupt (or a burst of a hostile
    /// interrupt storm) becomes due, if any.
    pub fn next_irq_deadline(&self) -> Option<u64> {
        let moderated = self
            .ports
            .iter()
            .filter(|p| p.irq_edge & p.int_cause & !p.int_mask != 0)
            .filter_map(|p| {
                p.last_irq
                    .map(|l| l.saturating_add(u64::from(p.moderation_us) * 1000))
            });
        let storms = self.ports.iter().filter_map(|p| p.hostile.next_storm());
        moderated.chain(storms).min()
    }

    // ----- PHY side -------------------------------------------------------

    /// Whether the driver enabled `port` (and, after a reset, the fabric
    /// has taken its link down since).
    pub fn port_enabled(&self, port: usize) -> bool {
        self.enabled
            && self
                .ports
                .get(port)
                .is_some_and(|p| p.enabled && !p.reset_pending)
    }

    /// The PHY's line rate of `port` (flits per second), as reported in
    /// `PHY_FLIT_RATE` / `PHY_LANE_RATE`.
    pub fn set_line_rate(&mut self, port: usize, fps: f64) {
        if let Some(r) = self.rate_kfps.get_mut(port) {
            *r = (fps / 1000.0).clamp(0.0, f64::from(u32::MAX)) as u32;
        }
    }

    /// The PHY's LinkUp for `port` changed.
    pub fn set_link(&mut self, port: usize, up: bool) {
        let Some(p) = self.ports.get_mut(port) else {
            return;
        };
        if !up {
            p.reset_pending = false;
        }
        if p.link_up != up {
            p.link_up = up;
            if !up {
                if let Some(ph) = self.phy.get_mut(port) {
                    ph.2 += 1;
                }
                p.training = false;
                p.retrain_requested = false;
            }
            p.cause(int::LINK);
        }
    }

    /// Takes a pending retrain request of `port` (the fabric then retrains
    /// the link and calls [`Controller::retrain_done`]).
    pub fn take_retrain_request(&mut self, port: usize) -> bool {
        match self.ports.get_mut(port) {
            Some(p) if p.retrain_requested => {
                p.retrain_requested = false;
                p.training = true;
                true
            }
            _ => false,
        }
    }

    /// A retrain of `port` finished.
    pub fn retrain_done(&mut self, port: usize) {
        if let Some(p) = self.ports.get_mut(port) {
            if p.training {
                p.training = false;
                p.c.retrains += 1;
                p.cause(int::RETRAIN_DONE);
            }
        }
    }

    /// PHY error monitor input: `bits` bit errors, `fec` FEC failures.
    pub fn phy_errors(&mut self, port: usize, bits: u64, fec: u64) {
        if let Some(ph) = self.phy.get_mut(port) {
            ph.0 += bits;
            ph.1 += fec;
        }
    }

    /// Takes up to `max_bytes` (at least one descriptor if any is pending)
    /// of flits from `port`'s TX ring and returns them for the wire.
    /// Bad descriptors are completed with an error and skipped; an
    /// unreadable ring halts. A descriptor is consumed only once its
    /// write-back succeeded: until then its flits are not sent.
    pub fn pull_tx(&mut self, port: usize, max_bytes: usize, out: &mut Vec<u8>) {
        if !self.enabled {
            return;
        }
        let budget = self.cfg.budget;
        let Some(p) = self.ports.get_mut(port) else {
            return;
        };
        if !p.enabled || !p.link_up || p.training {
            return;
        }
        let mem = self.mem.as_mut();
        let mut done = 0u32;
        let start = out.len();
        while p.tx.pending() > 0 && done < budget && out.len() - start < max_bytes.max(1) {
            let idx = p.tx.head;
            let Some((daddr, mut d)) = p.head_desc(mem, Dir::Tx) else {
                break;
            };
            let len = u32::from(d.len);
            let at = out.len();
            let failed = if len == 0 || len % reg::FLIT_BYTES != 0 || len > reg::MAX_XFER_BYTES {
                Some(ErrBits::ZERO.tx_desc())
            } else {
                out.resize(at + len as usize, 0);
                mem.read(d.addr, &mut out[at..])
                    .err()
                    .map(|_| ErrBits::ZERO.tx_dma())
            };
            d.done_len = if failed.is_some() { 0 } else { d.len };
            d.status = failed
                .map_or(reg::DESC_STATUS::ok(), reg::DESC_STATUS::failed)
                .into_raw();
            d.lost = 0;
            if !p.complete(mem, Dir::Tx, daddr, &d) {
                out.truncate(at);
                break;
            }
            match failed {
                Some(err) => {
                    out.truncate(at);
                    p.error(err, idx);
                }
                None => p.c.tx_flits += u64::from(len / reg::FLIT_BYTES),
            }
            p.c.tx_descs += 1;
            done += 1;
        }
        if done > 0 {
            p.cause(int::TX_DONE);
        }
    }

    /// Flits arriving from the wire for `port`, after `lost` flits the PHY
    /// could not decode. Data that does not fit in the device's FIFO is
    /// dropped (counted, and reported as lost to the driver).
    pub fn push_rx(&mut self, port: usize, lost: u32, data: &[u8]) {
        let cap = self.cfg.rx_fifo_bytes;
        let Some(p) = self.ports.get_mut(port) else {
            return;
        };
        if !p.enabled || !self.enabled {
            return;
        }
        let fb = reg::FLIT_BYTES as usize;
        let room = cap.saturating_sub(p.rx_bytes);
        let take = data.len().min(room) / fb * fb;
        let dropped = (data.len() - take) / fb;
        p.c.rx_lost_flits += u64::from(lost);
        if take > 0 {
            p.rx_fifo.push_back(RxSeg {
                lost,
                data: data[..take].to_vec(),
                off: 0,
            });
            p.rx_bytes += take;
        } else if lost > 0 {
            p.push_gap(lost);
        }
        if dropped > 0 {
            p.c.rx_nobuf_flits += dropped as u64;
            // The next data starts after a gap the driver must hear about.
            p.push_gap(u32::try_from(dropped).unwrap_or(u32::MAX));
            p.cause(int::RX_NOBUF);
        }
    }

    /// Segments (data and gaps) waiting in `port`'s receive FIFO.
    pub fn rx_segments(&self, port: usize) -> usize {
        self.ports.get(port).map_or(0, |p| p.rx_fifo.len())
    }

    /// Whether the device has work a fabric step would do: TX
    /// descriptors waiting on an up link, received data waiting for
    /// buffers, or a moderated interrupt.
    pub fn busy(&self) -> bool {
        self.ports.iter().any(|p| {
            (p.tx.pending() > 0 && p.link_up && p.enabled)
                || (!p.rx_fifo.is_empty() && p.rx.pending() > 0)
                || p.retrain_requested
                || p.irq_edge != 0
                || p.hostile.next_storm().is_some()
        })
    }

    /// Bytes waiting in `port`'s receive FIFO.
    pub fn rx_backlog(&self, port: usize) -> usize {
        self.ports.get(port).map_or(0, |p| p.rx_bytes)
    }

    /// Moves received flits into posted RX buffers (every port; nothing
    /// while the device is disabled). A buffer holds data that was
    /// contiguous on the wire: a loss starts a new buffer, which carries
    /// `DESC_STATUS.LOST` and the lost flit count. A buffer must lie in
    /// guest memory as a whole, and data leaves the FIFO only once its
    /// descriptor's write-back succeeded.
    pub fn service_rx(&mut self) {
        if !self.enabled {
            return;
        }
        let budget = self.cfg.budget;
        let mem = self.mem.as_mut();
        for p in self.ports.iter_mut() {
            let mut done = 0u32;
            while !p.rx_fifo.is_empty() && p.rx.pending() > 0 && done < budget {
                let idx = p.rx.head;
                let Some((daddr, mut d)) = p.head_desc(mem, Dir::Rx) else {
                    break;
                };
                let cap = (u32::from(d.len).min(reg::MAX_XFER_BYTES) / reg::FLIT_BYTES
                    * reg::FLIT_BYTES) as usize;
                d.done_len = 0;
                d.lost = 0;
                let mut status = reg::DESC_STATUS::ok();
                let mut plan = Vec::new();
                let mut taken = 0;
                let mut garbage = false;
                if cap == 0 || !mem.contains(d.addr, usize::from(d.len)) {
                    status = reg::DESC_STATUS::failed(ErrBits::ZERO.rx_desc());
                } else {
                    // Gather contiguous data: the first segment's loss
                    // mark, then segments without one.
                    let mut chunk = Vec::with_capacity(cap);
                    let mut lost = 0u32;
                    for (i, seg) in p.rx_fifo.iter().enumerate() {
                        if i > 0 && seg.lost > 0 {
                            break;
                        }
                        if i == 0 {
                            lost = seg.lost;
                        }
                        let avail = &seg.data[seg.off..];
                        let n = avail.len().min(cap - chunk.len());
                        chunk.extend_from_slice(&avail[..n]);
                        plan.push(n);
                        if chunk.len() == cap {
                            break;
                        }
                    }
                    // Hostile: what reaches the buffer is noise.
                    garbage = p.hostile.garbage(&mut chunk);
                    if mem.write(d.addr, &chunk).is_err() {
                        status = reg::DESC_STATUS::failed(ErrBits::ZERO.rx_desc());
                        plan.clear();
                        garbage = false;
                    } else {
                        taken = chunk.len();
                        d.done_len = taken as u16;
                        if lost > 0 {
                            status = status.lost().set(true);
                            d.lost = lost.min(u32::from(u16::MAX)) as u16;
                        }
                    }
                }
                d.status = status.into_raw();
                if !p.complete(mem, Dir::Rx, daddr, &d) {
                    // Not completed: the data stays for the next buffer.
                    break;
                }
                if garbage {
                    p.hostile.take(HostileCase::GarbageFlits);
                }
                if status.err().is_set() {
                    p.error(ErrBits::ZERO.rx_desc(), idx);
                }
                for (i, n) in plan.into_iter().enumerate() {
                    if let Some(seg) = p.rx_fifo.front_mut() {
                        if i == 0 {
                            seg.lost = 0;
                        }
                        seg.off += n;
                        if seg.off >= seg.data.len() {
                            p.rx_fifo.pop_front();
                        }
                    }
                }
                p.rx_bytes -= taken;
                p.c.rx_flits += (taken / reg::FLIT_BYTES as usize) as u64;
                p.c.rx_descs += 1;
                done += 1;
            }
            if done > 0 {
                p.cause(int::RX_DONE);
            }
        }
    }

    /// Drops everything buffered for `port` (link went down); the loss is
    /// reported with the next data.
    pub fn flush_rx(&mut self, port: usize) {
        if let Some(p) = self.ports.get_mut(port) {
            let flits = u32::try_from(p.rx_bytes / reg::FLIT_BYTES as usize).unwrap_or(u32::MAX);
            let lost = p.rx_fifo.iter().fold(0u32, |n, s| n.saturating_add(s.lost));
            p.rx_fifo.clear();
            p.rx_bytes = 0;
            p.push_gap(flits.saturating_add(lost));
        }
    }
}

// ----- Hostile mode -------------------------------------------------------
//
// The driver must treat everything the device writes as untrusted. These
// are the lies a broken or malicious device can tell, armed per port from
// the control socket so that a test can prove the driver counts each one
// and recovers. Each case misbehaves `count` times and then the device is
// correct again; the lies are applied only here and at the few points that
// consult [`Hostile`]: a `RING_HEAD` read ([`Port::read_head`]), a
// write-back ([`Port::complete`]), a descriptor fetch
// ([`Port::head_desc`]), RX data ([`Controller::service_rx`]) and the
// interrupts ([`Controller::update_irqs`]). The device's own state (its
// real head, the data it consumed, its counters) stays honest, so traffic
// flows again once the driver has recovered.

/// One way the device misbehaves (`"case"` of the control socket's
/// `hostile` command; the names are [`HostileCase::name`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum HostileCase {
    /// A read of the RX `RING_HEAD` returns a value outside the ring: the
    /// ring size, then `u32::MAX`, alternately. A driver that indexes its
    /// ring with it reads outside its descriptor array.
    RxHeadOutOfRange,
    /// The same on the TX ring.
    TxHeadOutOfRange,
    /// A read of the RX `RING_HEAD` returns the slot just past the tail:
    /// inside the ring but outside the window of buffers the driver
    /// posted, claiming a buffer it never gave the device. Waits for a
    /// read where that slot is neither the head the driver last read nor
    /// the real head (in a full ring every slot may be the head), so a
    /// driver that keeps every RX buffer posted never meets it.
    RxHeadBeyondTail,
    /// The same on the TX ring (a head claiming a descriptor the driver
    /// never produced: reclaiming it frees a buffer never sent, or twice).
    TxHeadBeyondTail,
    /// An RX completion with data reports a `done_len` above the posted
    /// capacity and above `CAP_XFER` (saturating at 65535); the data
    /// written is the real one. A driver that trusts it reads past its
    /// buffer.
    DoneLenTooLong,
    /// An RX completion with data reports `done_len` one byte short of the
    /// data written: not a multiple of the flit size.
    DoneLenNotFlits,
    /// A completion (TX or RX, whichever the device writes next) carries
    /// status bits `DESC_STATUS` does not define (bits 7:3), beside DONE.
    UnknownStatus,
    /// A completion (TX or RX) is written back with DONE clear although
    /// the head moves past it; everything else is as usual.
    DoneClear,
    /// The RX ring's last completion happens twice: once the driver has
    /// read the current head, the next `RING_HEAD` read returns the slot
    /// before it (the head moves back over a completed buffer) and the
    /// device writes that slot's completion back again; the read after
    /// that returns the real head, so the slot completes a second time.
    RxDoubleCompletion,
    /// The same on the TX ring: a driver that believes it frees the same
    /// TX buffer twice.
    TxDoubleCompletion,
    /// The port's MSI-X vector fires with no cause bit set (whatever
    /// `INT_MASK` says), [`STORM_BURST`] messages per
    /// [`STORM_INTERVAL_NS`] at most: count is the number of messages.
    IrqStorm,
    /// The same, with `INT_CAUSE.TX_DONE` and `RX_DONE` set before each
    /// message although nothing completed.
    IrqStormCause,
    /// An RX buffer is filled with seeded random bytes instead of the
    /// flits the wire carried (length and status as usual); the wire's
    /// flits are consumed. The link layer's BCRC catches them and its
    /// retry repairs the loss, if the driver hands them on.
    GarbageFlits,
    /// The next descriptor fetch (TX or RX) fails as unreadable: the ring
    /// halts with `ERR_STATUS.RING_DMA` until the driver disables and
    /// re-enables it (the real device behaviour, on command).
    RingDma,
}

/// The largest `count` of one `hostile` command.
pub const MAX_HOSTILE_COUNT: u64 = 1_000_000;

/// Interrupt storms send at most this many messages per port ...
pub const STORM_BURST: u32 = 8;
/// ... per this interval of fabric time (ns): at most 800 000 messages a
/// second, and each step of the fabric does a bounded amount of work, so
/// a storm neither spins the step loop nor starves the other threads.
pub const STORM_INTERVAL_NS: u64 = 10_000;

/// Status bits [`reg::DESC_STATUS`] does not define (7:3).
const UNKNOWN_STATUS_BITS: u16 = !reg::DESC_STATUS::FIELDS & 0xff;
const _: () = assert!(UNKNOWN_STATUS_BITS != 0);

impl HostileCase {
    /// Every case, in counter order.
    pub const ALL: [Self; 14] = [
        Self::RxHeadOutOfRange,
        Self::TxHeadOutOfRange,
        Self::RxHeadBeyondTail,
        Self::TxHeadBeyondTail,
        Self::DoneLenTooLong,
        Self::DoneLenNotFlits,
        Self::UnknownStatus,
        Self::DoneClear,
        Self::RxDoubleCompletion,
        Self::TxDoubleCompletion,
        Self::IrqStorm,
        Self::IrqStormCause,
        Self::GarbageFlits,
        Self::RingDma,
    ];

    /// The case's name on the control socket, the command line and in the
    /// counters.
    pub const fn name(self) -> &'static str {
        match self {
            Self::RxHeadOutOfRange => "rx-head-out-of-range",
            Self::TxHeadOutOfRange => "tx-head-out-of-range",
            Self::RxHeadBeyondTail => "rx-head-beyond-tail",
            Self::TxHeadBeyondTail => "tx-head-beyond-tail",
            Self::DoneLenTooLong => "done-len-too-long",
            Self::DoneLenNotFlits => "done-len-not-flits",
            Self::UnknownStatus => "unknown-status",
            Self::DoneClear => "done-clear",
            Self::RxDoubleCompletion => "rx-double-completion",
            Self::TxDoubleCompletion => "tx-double-completion",
            Self::IrqStorm => "irq-storm",
            Self::IrqStormCause => "irq-storm-cause",
            Self::GarbageFlits => "garbage-flits",
            Self::RingDma => "ring-dma",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

impl std::fmt::Display for HostileCase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A name that is no [`HostileCase`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown hostile case {0:?} (one of: {list})", list = HostileCase::ALL.map(HostileCase::name).join(", "))]
pub struct UnknownHostileCase(pub String);

impl std::str::FromStr for HostileCase {
    type Err = UnknownHostileCase;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|c| c.name() == s)
            .ok_or_else(|| UnknownHostileCase(s.to_string()))
    }
}

/// Why [`Controller::set_hostile`] refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HostileError {
    /// The controller has no such port.
    #[error("no port {0}")]
    NoPort(usize),
    /// `count` above [`MAX_HOSTILE_COUNT`].
    #[error("count {0} above {MAX_HOSTILE_COUNT}")]
    Count(u64),
}

/// What the hostile mode of one port did and still will do, per case
/// (JSON: `{"injected": {"<case>": n, ...}, "armed": {"<case>": n, ...}}`,
/// every case present).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HostileReport {
    /// Misbehaviours carried out since the daemon started.
    pub injected: std::collections::BTreeMap<&'static str, u64>,
    /// Misbehaviours still to come.
    pub armed: std::collections::BTreeMap<&'static str, u64>,
}

/// A `RING_HEAD` read that lies.
#[derive(Debug, Clone, Copy)]
struct HeadLie {
    /// What the register reads.
    value: u32,
    /// The case told.
    case: HostileCase,
    /// A completion to write back again (a double completion).
    repeat: Option<Writeback>,
}

/// One port's hostile mode: per case, how many lies remain and how many
/// were told, and the seeded noise of [`HostileCase::GarbageFlits`].
#[derive(Debug, Clone)]
struct Hostile {
    armed: [u64; HostileCase::ALL.len()],
    injected: [u64; HostileCase::ALL.len()],
    rng: Rng,
    /// Fabric time before which an armed storm sends nothing more.
    storm_at: u64,
}

impl Default for Hostile {
    fn default() -> Self {
        Self {
            armed: [0; HostileCase::ALL.len()],
            injected: [0; HostileCase::ALL.len()],
            rng: Rng::new(0, 0),
            storm_at: 0,
        }
    }
}

impl Hostile {
    fn armed(&self, case: HostileCase) -> bool {
        self.armed[case.index()] > 0
    }

    /// Counts one lie of `case` if one is armed; whether it was.
    fn take(&mut self, case: HostileCase) -> bool {
        let left = &mut self.armed[case.index()];
        if *left == 0 {
            return false;
        }
        *left -= 1;
        self.injected[case.index()] += 1;
        true
    }

    /// The lie a `RING_HEAD` read of `ring` tells, or `None` to tell the
    /// truth. One lie per read: out of range first, then beyond
    /// the tail, then a double completion.
    fn head(&self, dir: Dir, ring: &Ring) -> Option<HeadLie> {
        if !ring.enabled {
            return None;
        }
        use HostileCase as C;
        let (out_of_range, beyond_tail, double) = match dir {
            Dir::Tx => (
                C::TxHeadOutOfRange,
                C::TxHeadBeyondTail,
                C::TxDoubleCompletion,
            ),
            Dir::Rx => (
                C::RxHeadOutOfRange,
                C::RxHeadBeyondTail,
                C::RxDoubleCompletion,
            ),
        };
        if self.armed(out_of_range) {
            let v = if self.injected[out_of_range.index()] % 2 == 0 {
                ring.size
            } else {
                u32::MAX
            };
            return Some(HeadLie {
                value: v,
                case: out_of_range,
                repeat: None,
            });
        }
        // The driver may own any slot from the head it last read up to
        // its tail; the slot past the tail is outside that window unless
        // it is that head (a full ring) or the real one.
        let past_tail = reg::ring_next(ring.tail, ring.size);
        if self.armed(beyond_tail)
            && ring.seen_head.unwrap_or(0) != past_tail
            && ring.head != past_tail
        {
            return Some(HeadLie {
                value: past_tail,
                case: beyond_tail,
                repeat: None,
            });
        }
        // Once the driver knows the real head, the last completion (the
        // slot before the head) is the one to repeat.
        if self.armed(double) && ring.seen_head == Some(ring.head) {
            if let Some(wb) = ring.last_writeback {
                let back = ring.head.wrapping_sub(1) & ring.size.wrapping_sub(1);
                return Some(HeadLie {
                    value: back,
                    case: double,
                    repeat: Some(wb),
                });
            }
        }
        None
    }

    /// What to write back for `d` on ring `dir` instead of the truth, and
    /// the case told (counted by the caller once the write-back
    /// succeeded). One lie per completion.
    fn writeback(&self, dir: Dir, mut d: reg::Desc) -> (reg::Desc, Option<HostileCase>) {
        use HostileCase as C;
        let rx_data = matches!(dir, Dir::Rx) && !d.state().err().is_set() && d.done_len > 0;
        let case = if rx_data && self.armed(C::DoneLenTooLong) {
            let over = u32::from(d.len).max(reg::MAX_XFER_BYTES) + reg::FLIT_BYTES;
            d.done_len = u16::try_from(over).unwrap_or(u16::MAX);
            C::DoneLenTooLong
        } else if rx_data && self.armed(C::DoneLenNotFlits) {
            d.done_len -= 1;
            C::DoneLenNotFlits
        } else if self.armed(C::UnknownStatus) {
            d.status |= UNKNOWN_STATUS_BITS;
            C::UnknownStatus
        } else if self.armed(C::DoneClear) {
            d.status = d.state().done().set(false).into_raw();
            C::DoneClear
        } else {
            return (d, None);
        };
        (d, Some(case))
    }

    /// Replaces `chunk` (RX data about to be written) with noise if
    /// [`HostileCase::GarbageFlits`] is armed; whether it did (counted by
    /// the caller once the buffer completed).
    fn garbage(&mut self, chunk: &mut [u8]) -> bool {
        if chunk.is_empty() || !self.armed(HostileCase::GarbageFlits) {
            return false;
        }
        for word in chunk.chunks_mut(8) {
            let r = self.rng.next_u64().to_le_bytes();
            word.copy_from_slice(&r[..word.len()]);
        }
        true
    }

    /// The storm to send at `now`: its case and how many messages
    /// (at most [`STORM_BURST`], once per [`STORM_INTERVAL_NS`]).
    fn storm(&mut self, now: u64) -> Option<(HostileCase, u32)> {
        let case = [HostileCase::IrqStorm, HostileCase::IrqStormCause]
            .into_iter()
            .find(|&c| self.armed(c))?;
        if now < self.storm_at {
            return None;
        }
        self.storm_at = now.saturating_add(STORM_INTERVAL_NS);
        let left = self.armed[case.index()];
        Some((
            case,
            u32::try_from(left).unwrap_or(u32::MAX).min(STORM_BURST),
        ))
    }

    /// When the next storm burst is due, if a storm is armed.
    fn next_storm(&self) -> Option<u64> {
        (self.armed(HostileCase::IrqStorm) || self.armed(HostileCase::IrqStormCause))
            .then_some(self.storm_at)
    }

    fn report(&self) -> HostileReport {
        let map = |v: &[u64; HostileCase::ALL.len()]| {
            HostileCase::ALL
                .into_iter()
                .map(|c| (c.name(), v[c.index()]))
                .collect()
        };
        HostileReport {
            injected: map(&self.injected),
            armed: map(&self.armed),
        }
    }
}

impl Controller {
    /// Arms `count` lies of `case` on `port` (replacing what was left of
    /// that case; 0 disarms it). `seed` (the topology's) seeds the noise
    /// of [`HostileCase::GarbageFlits`], so a run is reproducible.
    pub fn set_hostile(
        &mut self,
        port: usize,
        case: HostileCase,
        count: u64,
        seed: u64,
    ) -> Result<(), HostileError> {
        if count > MAX_HOSTILE_COUNT {
            return Err(HostileError::Count(count));
        }
        let p = self.ports.get_mut(port).ok_or(HostileError::NoPort(port))?;
        p.hostile.armed[case.index()] = count;
        if case == HostileCase::GarbageFlits {
            p.hostile.rng = Rng::new(seed, 0x686f_7374_0000 + port as u64);
        }
        Ok(())
    }

    /// The hostile mode's counters of `port`, or `None` for a port that
    /// does not exist.
    pub fn hostile(&self, port: usize) -> Option<HostileReport> {
        self.ports.get(port).map(|p| p.hostile.report())
    }
}
