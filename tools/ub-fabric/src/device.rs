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

use std::collections::VecDeque;

use serde::Serialize;
use ub_proto::controller as reg;

use crate::mem::GuestMemory;

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

#[derive(Debug, Default, Clone, Copy)]
struct Ring {
    base: u64,
    size: u32,
    head: u32,
    tail: u32,
    enabled: bool,
    halted: bool,
}

impl Ring {
    fn ctrl(&self) -> u32 {
        (if self.enabled { reg::RING_ENABLE } else { 0 })
            | (if self.halted { reg::RING_HALTED } else { 0 })
    }

    fn pending(&self) -> u32 {
        if !self.enabled || self.halted {
            return 0;
        }
        reg::ring_pending(self.head, self.tail, self.size)
    }
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
    irq_edge: bool,
    err_status: u32,
    err_last: u32,
    /// Received data waiting for RX buffers, as segments each preceded
    /// by a count of lost flits.
    rx_fifo: VecDeque<RxSeg>,
    rx_bytes: usize,
    c: PortCounters,
}

impl Port {
    fn new() -> Self {
        Self {
            enabled: false,
            link_up: false,
            retrain_requested: false,
            training: false,
            tx: Ring::default(),
            rx: Ring::default(),
            int_cause: 0,
            int_mask: reg::INT_ALL,
            moderation_us: 0,
            last_irq: None,
            irq_edge: false,
            err_status: 0,
            err_last: 0,
            rx_fifo: VecDeque::new(),
            rx_bytes: 0,
            c: PortCounters::default(),
        }
    }

    fn cause(&mut self, bits: u32) {
        if bits & !self.int_cause != 0 {
            self.irq_edge = true;
        }
        self.int_cause |= bits;
    }

    fn error(&mut self, err_bit: u32, index: u32) {
        self.err_status |= 1 << err_bit;
        self.err_last = err_bit | (index << 16);
        self.c.errors += 1;
        match 1 << err_bit {
            reg::ERR_TX_DESC => self.c.tx_bad_desc += 1,
            reg::ERR_TX_DMA => self.c.tx_dma_errors += 1,
            reg::ERR_RX_DESC => self.c.rx_bad_desc += 1,
            reg::ERR_RING_DMA => self.c.ring_dma_errors += 1,
            reg::ERR_RING_CFG => self.c.ring_cfg_errors += 1,
            reg::ERR_DOORBELL => self.c.bad_doorbells += 1,
            _ => {}
        }
        self.cause(reg::INT_ERROR);
    }
}

/// Error bit numbers (the `ERR_*` masks' positions).
mod errbit {
    pub(super) const TX_DESC: u32 = 0;
    pub(super) const TX_DMA: u32 = 1;
    pub(super) const RX_DESC: u32 = 2;
    pub(super) const RING_DMA: u32 = 3;
    pub(super) const RING_CFG: u32 = 4;
    pub(super) const DOORBELL: u32 = 5;
    pub(super) const RING_BUSY: u32 = 6;
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
    gint_edge: bool,
    scratch: u32,
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
            gint_mask: reg::GINT_ALL,
            gint_edge: false,
            scratch: 0,
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
    /// disabled (so their links go down).
    pub fn reset(&mut self) {
        self.enabled = false;
        self.gerr = 0;
        self.gint_cause = 0;
        self.gint_mask = reg::GINT_ALL;
        self.gint_edge = false;
        self.scratch = 0;
        for p in &mut self.ports {
            let link_up = p.link_up;
            *p = Port::new();
            p.link_up = link_up;
        }
        self.counters.resets += 1;
    }

    // ----- Register access -------------------------------------------

    fn bad_access(&mut self) {
        self.counters.bad_access += 1;
        if self.gerr & reg::GERR_BAD_ACCESS == 0 {
            self.gint_edge = true;
        }
        self.gerr |= reg::GERR_BAD_ACCESS;
        self.gint_cause |= reg::GINT_ERROR;
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
            reg::REG_IDENT => reg::IDENT_VALUE,
            reg::REG_VERSION => reg::VERSION_VALUE,
            reg::REG_CAP_PORTS => self.cfg.ports,
            reg::REG_CAP_RING => reg::RING_MAX | (reg::RING_MIN << 16),
            reg::REG_CAP_XFER => reg::MAX_XFER_BYTES | (reg::FLIT_BYTES << 16),
            reg::REG_CAP_MSIX => u32::from(reg::msix_vectors(self.cfg.ports)),
            reg::REG_CTRL => {
                if self.enabled {
                    reg::CTRL_ENABLE
                } else {
                    0
                }
            }
            reg::REG_STATUS => {
                let mut v = if self.enabled { reg::STATUS_ENABLED } else { 0 };
                for (i, p) in self.ports.iter().enumerate() {
                    if p.link_up && p.enabled {
                        v |= 1 << (reg::STATUS_LINK_SHIFT + i as u32);
                    }
                }
                v
            }
            reg::REG_GERR => self.gerr,
            reg::REG_SCRATCH => self.scratch,
            reg::REG_BAD_ACCESS => lo(self.counters.bad_access),
            reg::REG_GINT_CAUSE => self.gint_cause,
            reg::REG_GINT_MASK => self.gint_mask,
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

    fn read_port(&self, port: usize, r: u32) -> Option<u32> {
        let p = self.ports.get(port)?;
        let phy = self.phy.get(port).copied().unwrap_or_default();
        let flit_rate_k = self.rate_kfps.get(port).copied().unwrap_or(0);
        let lane_rate =
            (u64::from(flit_rate_k) * 160 / 1000 / u64::from(self.cfg.lanes.max(1))) as u32;
        Some(match r {
            reg::P_PHY_STATUS => {
                (if p.link_up && p.enabled {
                    reg::PHY_LINK_UP
                } else {
                    0
                }) | (if p.training { reg::PHY_TRAINING } else { 0 })
                    | (if p.enabled { reg::PHY_ENABLED } else { 0 })
                    | (self.cfg.lanes << reg::PHY_LANES_SHIFT)
            }
            reg::P_PHY_LANE_RATE => lane_rate,
            reg::P_PHY_FLIT_RATE => flit_rate_k,
            reg::P_PHY_CTRL => {
                (if p.enabled { reg::PHYC_ENABLE } else { 0 })
                    | (if p.retrain_requested || p.training {
                        reg::PHYC_RETRAIN
                    } else {
                        0
                    })
            }
            reg::P_PHY_RETRAINS => lo(p.c.retrains),
            reg::P_PHY_BIT_ERRORS => lo(phy.0),
            reg::P_PHY_FEC_FAILS => lo(phy.1),
            reg::P_PHY_LINK_DOWNS => lo(phy.2),
            reg::P_TX_BASE_LO => p.tx.base as u32,
            reg::P_TX_BASE_HI => (p.tx.base >> 32) as u32,
            reg::P_TX_SIZE => p.tx.size,
            reg::P_TX_HEAD => p.tx.head,
            reg::P_TX_TAIL => p.tx.tail,
            reg::P_TX_CTRL => p.tx.ctrl(),
            reg::P_RX_BASE_LO => p.rx.base as u32,
            reg::P_RX_BASE_HI => (p.rx.base >> 32) as u32,
            reg::P_RX_SIZE => p.rx.size,
            reg::P_RX_HEAD => p.rx.head,
            reg::P_RX_TAIL => p.rx.tail,
            reg::P_RX_CTRL => p.rx.ctrl(),
            reg::P_INT_CAUSE => p.int_cause,
            reg::P_INT_MASK => p.int_mask,
            reg::P_INT_MODERATION => p.moderation_us,
            reg::P_ERR_STATUS => p.err_status,
            reg::P_ERR_LAST => p.err_last,
            reg::P_ERR_COUNT => lo(p.c.errors),
            reg::P_TX_FLITS => lo(p.c.tx_flits),
            reg::P_RX_FLITS => lo(p.c.rx_flits),
            reg::P_TX_DESCS => lo(p.c.tx_descs),
            reg::P_RX_DESCS => lo(p.c.rx_descs),
            reg::P_RX_NOBUF_FLITS => lo(p.c.rx_nobuf_flits),
            reg::P_DOORBELLS => lo(p.c.doorbells),
            _ => return None,
        })
    }

    /// Writes one 32-bit register.
    pub fn write32(&mut self, off: u32, v: u32, now: u64) {
        match off {
            reg::REG_CTRL => {
                if v & reg::CTRL_RESET != 0 {
                    self.reset();
                } else {
                    self.enabled = v & reg::CTRL_ENABLE != 0;
                }
            }
            reg::REG_GERR => {
                self.gerr &= !v;
            }
            reg::REG_SCRATCH => self.scratch = v,
            reg::REG_GINT_CAUSE => self.gint_cause &= !v,
            reg::REG_GINT_MASK => {
                let unmasked = self.gint_mask & !v;
                self.gint_mask = v & reg::GINT_ALL;
                if unmasked & self.gint_cause != 0 {
                    self.gint_edge = true;
                }
            }
            reg::REG_GINT_TEST => {
                let bits = v & reg::GINT_ALL;
                if bits & !self.gint_cause != 0 {
                    self.gint_edge = true;
                }
                self.gint_cause |= bits;
            }
            _ => {
                if let Some((port, r)) = reg::split_port_reg(off) {
                    if (port as usize) < self.ports.len()
                        && self.write_port(port as usize, r, v, now)
                    {
                        return;
                    }
                }
                self.bad_access();
            }
        }
    }

    fn write_port(&mut self, port: usize, r: u32, v: u32, _now: u64) -> bool {
        let Some(p) = self.ports.get_mut(port) else {
            return false;
        };
        fn ring_reg(p: &mut Port, tx: bool, f: impl FnOnce(&mut Ring)) {
            let ring = if tx { &mut p.tx } else { &mut p.rx };
            if ring.enabled {
                p.error(errbit::RING_BUSY, 0);
            } else {
                f(ring);
            }
        }
        match r {
            reg::P_PHY_CTRL => {
                p.enabled = v & reg::PHYC_ENABLE != 0;
                if v & reg::PHYC_RETRAIN != 0 && p.enabled {
                    p.retrain_requested = true;
                }
            }
            reg::P_TX_BASE_LO => ring_reg(p, true, |r| {
                r.base = (r.base & !0xffff_ffff) | u64::from(v);
            }),
            reg::P_TX_BASE_HI => ring_reg(p, true, |r| {
                r.base = (r.base & 0xffff_ffff) | (u64::from(v) << 32);
            }),
            reg::P_TX_SIZE => ring_reg(p, true, |r| r.size = v),
            reg::P_RX_BASE_LO => ring_reg(p, false, |r| {
                r.base = (r.base & !0xffff_ffff) | u64::from(v);
            }),
            reg::P_RX_BASE_HI => ring_reg(p, false, |r| {
                r.base = (r.base & 0xffff_ffff) | (u64::from(v) << 32);
            }),
            reg::P_RX_SIZE => ring_reg(p, false, |r| r.size = v),
            reg::P_TX_CTRL | reg::P_RX_CTRL => {
                let tx = r == reg::P_TX_CTRL;
                let ring = if tx { p.tx } else { p.rx };
                let mut new = ring;
                if v & reg::RING_ENABLE == 0 {
                    new.enabled = false;
                    new.halted = false;
                    new.head = 0;
                    new.tail = 0;
                } else if !ring.enabled {
                    if !reg::ring_size_ok(ring.size)
                        || ring.base % reg::DESC_BYTES as u64 != 0
                        || reg::desc_addr(ring.base, ring.size).is_none()
                    {
                        p.error(errbit::RING_CFG, 0);
                        return true;
                    }
                    new.enabled = true;
                    new.halted = false;
                    new.head = 0;
                    new.tail = 0;
                }
                if tx {
                    p.tx = new;
                } else {
                    p.rx = new;
                }
            }
            reg::P_TX_TAIL | reg::P_RX_TAIL => {
                let tx = r == reg::P_TX_TAIL;
                p.c.doorbells += 1;
                let ring = if tx { p.tx } else { p.rx };
                if !ring.enabled || v >= ring.size {
                    p.error(errbit::DOORBELL, v.min(0xffff));
                    return true;
                }
                if v == ring.tail {
                    p.c.idle_doorbells += 1;
                }
                if tx {
                    p.tx.tail = v;
                } else {
                    p.rx.tail = v;
                }
            }
            reg::P_INT_CAUSE => p.int_cause &= !v,
            reg::P_INT_MASK => {
                let unmasked = p.int_mask & !v;
                p.int_mask = v & reg::INT_ALL;
                if unmasked & p.int_cause != 0 {
                    p.irq_edge = true;
                }
            }
            reg::P_INT_MODERATION => p.moderation_us = v & 0xffff,
            reg::P_ERR_STATUS => p.err_status &= !v,
            _ => return false,
        }
        true
    }

    // ----- Interrupts ---------------------------------------------------

    /// Sends the MSI-X messages that are due: a vector fires when one of
    /// its unmasked causes went from 0 to 1 (or was unmasked while set),
    /// at most once per moderation interval (a message held back by
    /// moderation is sent when the interval ends).
    pub fn update_irqs(&mut self, now: u64) {
        let any_port_err = self.ports.iter().any(|p| p.err_status != 0);
        if any_port_err && self.gerr & reg::GERR_PORT == 0 {
            self.gerr |= reg::GERR_PORT;
            if self.gint_cause & reg::GINT_ERROR == 0 {
                self.gint_edge = true;
            }
            self.gint_cause |= reg::GINT_ERROR;
        }
        if self.gint_edge && self.gint_cause & !self.gint_mask != 0 {
            self.gint_edge = false;
            self.counters.interrupts += 1;
            self.irq.raise(reg::VECTOR_GLOBAL);
        } else if self.gint_cause & !self.gint_mask == 0 {
            self.gint_edge = false;
        }
        for (i, p) in self.ports.iter_mut().enumerate() {
            if !p.irq_edge {
                continue;
            }
            if p.int_cause & !p.int_mask == 0 {
                p.irq_edge = false;
                continue;
            }
            let gap = u64::from(p.moderation_us) * 1000;
            if let Some(last) = p.last_irq {
                if now < last.saturating_add(gap) {
                    continue;
                }
            }
            p.irq_edge = false;
            p.last_irq = Some(now);
            p.c.interrupts += 1;
            self.irq.raise(reg::port_vector(i as u32));
        }
    }

    /// The earliest time a moderated interrupt becomes due, if any.
    pub fn next_irq_deadline(&self) -> Option<u64> {
        self.ports
            .iter()
            .filter(|p| p.irq_edge && p.int_cause & !p.int_mask != 0)
            .filter_map(|p| {
                p.last_irq
                    .map(|l| l.saturating_add(u64::from(p.moderation_us) * 1000))
            })
            .min()
    }

    // ----- PHY side -------------------------------------------------------

    /// Whether the driver enabled `port`.
    pub fn port_enabled(&self, port: usize) -> bool {
        self.enabled && self.ports.get(port).is_some_and(|p| p.enabled)
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
        if p.link_up != up {
            p.link_up = up;
            if !up {
                if let Some(ph) = self.phy.get_mut(port) {
                    ph.2 += 1;
                }
                p.training = false;
                p.retrain_requested = false;
            }
            p.cause(reg::INT_LINK);
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
                p.cause(reg::INT_RETRAIN_DONE);
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
    /// unreadable ring halts.
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
        let mut done = 0u32;
        let start = out.len();
        while p.tx.pending() > 0 && done < budget && out.len() - start < max_bytes.max(1) {
            let idx = p.tx.head;
            let Some(daddr) = reg::desc_addr(p.tx.base, idx) else {
                p.tx.halted = true;
                p.error(errbit::RING_DMA, idx);
                break;
            };
            let mut raw = [0u8; reg::DESC_BYTES];
            if self.mem.read(daddr, &mut raw).is_err() {
                p.tx.halted = true;
                p.error(errbit::RING_DMA, idx);
                break;
            }
            let mut d = reg::Desc::decode(&raw);
            let len = u32::from(d.len);
            let mut status = reg::DESC_DONE;
            if len == 0 || len % reg::FLIT_BYTES != 0 || len > reg::MAX_XFER_BYTES {
                status |= reg::DESC_ERR | ((errbit::TX_DESC as u16) << reg::DESC_ERR_SHIFT);
                p.error(errbit::TX_DESC, idx);
                d.done_len = 0;
            } else {
                let at = out.len();
                out.resize(at + len as usize, 0);
                if self.mem.read(d.addr, &mut out[at..]).is_err() {
                    out.truncate(at);
                    status |= reg::DESC_ERR | ((errbit::TX_DMA as u16) << reg::DESC_ERR_SHIFT);
                    p.error(errbit::TX_DMA, idx);
                    d.done_len = 0;
                } else {
                    d.done_len = d.len;
                    p.c.tx_flits += u64::from(len / reg::FLIT_BYTES);
                }
            }
            d.status = status;
            d.lost = 0;
            let wb = daddr + reg::Desc::WRITEBACK_OFFSET as u64;
            if self.mem.write(wb, &d.writeback()).is_err() {
                p.tx.halted = true;
                p.error(errbit::RING_DMA, idx);
                break;
            }
            p.tx.head = reg::ring_next(idx, p.tx.size);
            p.c.tx_descs += 1;
            done += 1;
        }
        if done > 0 {
            p.cause(reg::INT_TX_DONE);
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
        if lost > 0 || take > 0 {
            p.rx_fifo.push_back(RxSeg {
                lost,
                data: data[..take].to_vec(),
                off: 0,
            });
            p.rx_bytes += take;
        }
        if dropped > 0 {
            p.c.rx_nobuf_flits += dropped as u64;
            // The next data starts after a gap the driver must hear about.
            p.rx_fifo.push_back(RxSeg {
                lost: dropped as u32,
                data: Vec::new(),
                off: 0,
            });
            p.cause(reg::INT_RX_NOBUF);
        }
    }

    /// Whether the device has work a fabric step would do: TX
    /// descriptors waiting on an up link, received data waiting for
    /// buffers, or a moderated interrupt.
    pub fn busy(&self) -> bool {
        self.ports.iter().any(|p| {
            (p.tx.pending() > 0 && p.link_up && p.enabled)
                || (!p.rx_fifo.is_empty() && p.rx.pending() > 0)
                || p.retrain_requested
                || p.irq_edge
        })
    }

    /// Bytes waiting in `port`'s receive FIFO.
    pub fn rx_backlog(&self, port: usize) -> usize {
        self.ports.get(port).map_or(0, |p| p.rx_bytes)
    }

    /// Moves received flits into posted RX buffers (every port). A buffer
    /// holds data that was contiguous on the wire: a loss starts a new
    /// buffer, which carries `DESC_LOST` and the lost flit count.
    pub fn service_rx(&mut self) {
        let budget = self.cfg.budget;
        for p in self.ports.iter_mut() {
            let mut done = 0u32;
            while !p.rx_fifo.is_empty() && p.rx.pending() > 0 && done < budget {
                let idx = p.rx.head;
                let Some(daddr) = reg::desc_addr(p.rx.base, idx) else {
                    p.rx.halted = true;
                    p.error(errbit::RING_DMA, idx);
                    break;
                };
                let mut raw = [0u8; reg::DESC_BYTES];
                if self.mem.read(daddr, &mut raw).is_err() {
                    p.rx.halted = true;
                    p.error(errbit::RING_DMA, idx);
                    break;
                }
                let mut d = reg::Desc::decode(&raw);
                let cap = (u32::from(d.len).min(reg::MAX_XFER_BYTES) / reg::FLIT_BYTES
                    * reg::FLIT_BYTES) as usize;
                let mut status = reg::DESC_DONE;
                d.done_len = 0;
                d.lost = 0;
                if cap == 0 {
                    status |= reg::DESC_ERR | ((errbit::RX_DESC as u16) << reg::DESC_ERR_SHIFT);
                    p.error(errbit::RX_DESC, idx);
                } else {
                    // Gather contiguous data: the first segment's loss
                    // mark, then segments without one.
                    let mut chunk = Vec::with_capacity(cap);
                    let mut lost = 0u32;
                    let mut plan = Vec::new();
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
                    if self.mem.write(d.addr, &chunk).is_err() {
                        status |= reg::DESC_ERR | ((errbit::RX_DESC as u16) << reg::DESC_ERR_SHIFT);
                        p.error(errbit::RX_DESC, idx);
                    } else {
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
                        p.rx_bytes -= chunk.len();
                        d.done_len = chunk.len() as u16;
                        p.c.rx_flits += (chunk.len() / reg::FLIT_BYTES as usize) as u64;
                        if lost > 0 {
                            status |= reg::DESC_LOST;
                            d.lost = lost.min(u32::from(u16::MAX)) as u16;
                        }
                    }
                }
                d.status = status;
                let wb = daddr + reg::Desc::WRITEBACK_OFFSET as u64;
                if self.mem.write(wb, &d.writeback()).is_err() {
                    p.rx.halted = true;
                    p.error(errbit::RING_DMA, idx);
                    break;
                }
                p.rx.head = reg::ring_next(idx, p.rx.size);
                p.c.rx_descs += 1;
                done += 1;
            }
            if done > 0 {
                p.cause(reg::INT_RX_DONE);
            }
        }
    }

    /// Drops everything buffered for `port` (link went down); the loss is
    /// reported with the next data.
    pub fn flush_rx(&mut self, port: usize) {
        if let Some(p) = self.ports.get_mut(port) {
            let flits = (p.rx_bytes / reg::FLIT_BYTES as usize) as u32;
            let lost: u32 = p.rx_fifo.iter().map(|s| s.lost).sum();
            p.rx_fifo.clear();
            p.rx_bytes = 0;
            if flits + lost > 0 {
                p.rx_fifo.push_back(RxSeg {
                    lost: flits + lost,
                    data: Vec::new(),
                    off: 0,
                });
            }
        }
    }
}
