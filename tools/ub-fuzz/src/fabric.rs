// SPDX-License-Identifier: GPL-2.0
//! `ub-fabric` targets: the controller's device model driven through its
//! registers and guest memory (everything a guest driver controls), and
//! the control socket's commands applied to a whole fabric.

use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};

use serde_json::Value;
use ub_fabric::control::handle_line;
use ub_fabric::device::{Controller, ControllerConfig, HostileCase, Interrupts, PortCounters};
use ub_fabric::fabric::Fabric;
use ub_fabric::mem::{DmaError, FakeMemory, GuestMemory};
use ub_fabric::topology::Topology;
use ub_proto::controller::{self as reg, RegisterBase, Ring};

use crate::input::{Input, Output};

// ----- fabric_registers ------------------------------------------------

/// Guest memory of the controller target: small, so that random
/// addresses often land in it and a memory copy is cheap.
const MEM_BASE: u64 = 0x1000_0000;
const MEM_SIZE: usize = 0x1_0000;
const FLIT: u64 = reg::FLIT_BYTES as u64;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// What the device did to guest memory, seen from outside it.
#[derive(Debug, Default)]
struct DmaLog {
    /// Accesses refused as outside guest memory.
    refused: u64,
    /// A successful access of a shape the device never makes (see
    /// [`Dma::check_shape`]), for the target to report.
    bad_shape: Option<String>,
}

/// The guest memory the device sees: a [`FakeMemory`] shared with the
/// target (which writes descriptors and buffers into it directly, as a
/// driver would, without going through the device's accounting) and a
/// log of the device's own accesses.
#[derive(Clone)]
struct Dma {
    mem: Arc<Mutex<FakeMemory>>,
    log: Arc<Mutex<DmaLog>>,
}

impl Dma {
    /// The device only ever reads a descriptor (16 bytes, 16-aligned:
    /// rings are 16-aligned) or a TX buffer (whole flits, at most
    /// `MAX_XFER_BYTES`), and only ever writes a descriptor's write-back
    /// (6 bytes at offset 10 of one) or RX data (whole flits, at most
    /// `MAX_XFER_BYTES`). Anything else would be the device scribbling on
    /// guest memory the driver never gave it.
    fn check_shape(&self, write: bool, addr: u64, len: usize) {
        let len64 = len as u64;
        let desc = if write {
            len == 6 && addr % 16 == reg::Desc::WRITEBACK_OFFSET as u64
        } else {
            len == reg::DESC_BYTES && addr % 16 == 0
        };
        let data = len64 % FLIT == 0 && len64 <= u64::from(reg::MAX_XFER_BYTES);
        if !desc && !data {
            let mut log = lock(&self.log);
            log.bad_shape.get_or_insert(format!(
                "device {} of {len} bytes at {addr:#x}",
                if write { "write" } else { "read" }
            ));
        }
    }

    fn count(&self, r: Result<(), DmaError>) -> Result<(), DmaError> {
        if r.is_err() {
            lock(&self.log).refused += 1;
        }
        r
    }
}

impl GuestMemory for Dma {
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), DmaError> {
        let r = lock(&self.mem).read(addr, buf);
        if r.is_ok() {
            self.check_shape(false, addr, buf.len());
        }
        self.count(r)
    }

    fn write(&mut self, addr: u64, data: &[u8]) -> Result<(), DmaError> {
        let r = lock(&self.mem).write(addr, data);
        if r.is_ok() {
            self.check_shape(true, addr, data.len());
        }
        self.count(r)
    }

    fn contains(&self, addr: u64, len: usize) -> bool {
        lock(&self.mem).contains(addr, len)
    }
}

/// Records the MSI-X vectors raised.
#[derive(Clone, Default)]
struct Irqs(Arc<Mutex<Vec<u16>>>);

impl Interrupts for Irqs {
    fn raise(&mut self, vector: u16) {
        lock(&self.0).push(vector);
    }
}

/// The ring block of `tx` (true) or RX, port 0's offset.
fn ring_block(tx: bool) -> u32 {
    if tx {
        <reg::TxRing as RegisterBase<Ring>>::BASE
    } else {
        <reg::RxRing as RegisterBase<Ring>>::BASE
    }
}

/// BAR0 offset of `port`'s copy of the ring register `rel` (`RING_*`).
fn ring_reg(port: u32, tx: bool, rel: u32) -> u32 {
    ring_block(tx) + rel + port * reg::PORT_STRIDE
}

/// BAR0 offset of `port`'s copy of the port register `r0` (port 0's).
fn port_reg(port: u32, r0: u32) -> u32 {
    r0 + port * reg::PORT_STRIDE
}

/// Operations of [`fabric_registers`], the low bits of an op byte.
mod op {
    pub const BAR_WRITE: u8 = 0;
    pub const BAR_READ: u8 = 1;
    pub const REG_WRITE: u8 = 2;
    pub const REG_READ: u8 = 3;
    pub const RING: u8 = 4;
    pub const DESC: u8 = 5;
    pub const DOORBELL: u8 = 6;
    pub const LINK: u8 = 7;
    pub const STEP: u8 = 8;
    pub const PUSH_RX: u8 = 9;
    pub const RESET: u8 = 10;
    pub const FLUSH: u8 = 11;
    pub const HOSTILE: u8 = 12;
    pub const POKE: u8 = 13;
    pub const PORT_UP: u8 = 14;
    pub const PHY: u8 = 15;
    pub const COUNT: u8 = 16;
}

/// What the target knows of one port since its counters were last reset.
#[derive(Debug, Default, Clone, Copy)]
struct PortBook {
    /// Bytes `pull_tx` gave the target.
    tx_bytes: u64,
    /// Bytes the receive FIFO took in (`rx_backlog` grew by).
    rx_in: u64,
    /// Bytes `flush_rx` threw away.
    rx_flushed: u64,
    /// Flits `push_rx` could not buffer.
    rx_nobuf: u64,
    /// The interrupts counter after the last operation.
    interrupts: u64,
}

struct Regs {
    ctrl: Controller,
    mem: Arc<Mutex<FakeMemory>>,
    log: Arc<Mutex<DmaLog>>,
    irqs: Arc<Mutex<Vec<u16>>>,
    ports: u32,
    now: u64,
    book: Vec<PortBook>,
    /// `DeviceCounters::bad_access` when `BAD_ACCESS` last read 0.
    bad_base: u64,
    resets: u64,
    dev_interrupts: u64,
    raised: usize,
}

impl Regs {
    fn new(cfg: ControllerConfig) -> Self {
        let mem = Arc::new(Mutex::new(FakeMemory::new(MEM_BASE, MEM_SIZE)));
        let log = Arc::new(Mutex::new(DmaLog::default()));
        let irqs = Irqs::default();
        let dma = Dma {
            mem: Arc::clone(&mem),
            log: Arc::clone(&log),
        };
        let ctrl = Controller::new(cfg, Box::new(dma), Box::new(irqs.clone()));
        let ports = ctrl.ports() as u32;
        Self {
            ctrl,
            mem,
            log,
            irqs: irqs.0,
            ports,
            now: 0,
            book: vec![PortBook::default(); ports as usize],
            bad_base: 0,
            resets: 0,
            dev_interrupts: 0,
            raised: 0,
        }
    }

    fn pc(&self, p: u32) -> PortCounters {
        self.ctrl
            .port_counters(p as usize)
            .unwrap_or_else(|| panic!("port {p} of {} has no counters", self.ports))
    }

    /// A port of the controller, or one past the last (a hole) now and
    /// then.
    fn port(&self, b: u8) -> u32 {
        u32::from(b) % (self.ports + 1)
    }

    /// A guest address: inside memory most of the time, else at its end,
    /// before it, or anywhere (a wrap included).
    fn addr(inp: &mut Input<'_>) -> u64 {
        let sel = inp.u8();
        match sel & 3 {
            0 | 1 => MEM_BASE + u64::from(inp.u16()) % MEM_SIZE as u64,
            2 => (MEM_BASE + MEM_SIZE as u64).wrapping_sub(u64::from(inp.u8())),
            _ => u64::from(inp.u32()) << 32 | u64::from(inp.u32()),
        }
    }

    /// A value for a register write: the input's, or one of the fields'
    /// interesting ones.
    fn value(inp: &mut Input<'_>) -> u32 {
        match inp.u8() & 3 {
            0 => u32::from(inp.u8()),
            1 => 1 << (inp.u8() & 31),
            2 => u32::MAX,
            _ => inp.u32(),
        }
    }

    /// A BAR0 offset: a register of the table (any port, either ring
    /// block), or anywhere (holes, the MSI-X table, past the BAR,
    /// unaligned).
    fn offset(&self, inp: &mut Input<'_>) -> u64 {
        let sel = inp.u8();
        if sel & 0x80 == 0 {
            let r = &reg::REGISTERS[usize::from(sel) % reg::REGISTERS.len()];
            let copy = u32::from(inp.u8()) % (r.copies.min(self.ports + 1)).max(1);
            let base = match r.block {
                Some(_) => ring_block(sel & 0x40 != 0),
                None => 0,
            };
            u64::from(base + r.offset + copy * r.stride)
        } else if sel & 0x40 == 0 {
            u64::from(inp.u16())
        } else {
            u64::from(inp.u32()) << 8 | u64::from(inp.u8())
        }
    }

    fn ring(&mut self, port: u32, tx: bool) -> (u64, u32) {
        let lo = self
            .ctrl
            .read32(ring_reg(port, tx, reg::RING_BASE_LO::OFFSET));
        let hi = self
            .ctrl
            .read32(ring_reg(port, tx, reg::RING_BASE_HI::OFFSET));
        let size = self.ctrl.read32(ring_reg(port, tx, reg::RING_SIZE::OFFSET));
        (reg::join_u64(lo, hi), size)
    }

    /// A pull of `port`'s TX ring, accounted.
    fn pull(&mut self, port: u32, max: usize) -> Vec<u8> {
        let mut out = Vec::new();
        self.ctrl.pull_tx(port as usize, max, &mut out);
        assert_eq!(out.len() as u64 % FLIT, 0, "pull_tx gave a partial flit");
        if let Some(b) = self.book.get_mut(port as usize) {
            b.tx_bytes += out.len() as u64;
        }
        out
    }

    /// Flits from the wire into `port`, accounted.
    fn push(&mut self, port: u32, lost: u32, data: &[u8]) {
        let before = self.ctrl.rx_backlog(port as usize);
        let nobuf = self
            .ctrl
            .port_counters(port as usize)
            .map(|c| c.rx_nobuf_flits);
        self.ctrl.push_rx(port as usize, lost, data);
        let after = self.ctrl.rx_backlog(port as usize);
        let Some(b) = self.book.get_mut(port as usize) else {
            assert_eq!(after, 0, "a port that does not exist buffered data");
            return;
        };
        assert!(after >= before, "push_rx shrank the FIFO");
        let took = (after - before) as u64;
        assert_eq!(took % FLIT, 0, "the FIFO took a partial flit");
        assert!(took <= data.len() as u64);
        let dropped = self
            .ctrl
            .port_counters(port as usize)
            .map(|c| c.rx_nobuf_flits)
            .zip(nobuf)
            .map_or(0, |(a, b)| a - b);
        if took == 0 && dropped == 0 {
            // Refused whole: a disabled port or device.
            return;
        }
        assert_eq!(
            dropped,
            (data.len() as u64 - took) / FLIT,
            "flits not buffered are counted as dropped"
        );
        b.rx_in += took;
        b.rx_nobuf += dropped;
    }

    /// What a fabric step does to a controller: retrains complete, TX
    /// flits leave (here into the next port's receiver, a loopback), RX
    /// buffers fill, interrupts fire.
    fn step(&mut self, inp: &mut Input<'_>) {
        let sel = inp.u8();
        self.now += u64::from(inp.u16()) * 100;
        for p in 0..self.ports {
            if self.ctrl.take_retrain_request(p as usize) && sel & 1 != 0 {
                self.ctrl.retrain_done(p as usize);
            }
            let max = if sel & 2 != 0 { 4096 } else { usize::MAX };
            let out = self.pull(p, max);
            if !out.is_empty() {
                self.push((p + 1) % self.ports, 0, &out);
            }
        }
        self.ctrl.service_rx();
        self.ctrl.update_irqs(self.now);
    }

    /// Runs one operation; whether the input had one.
    fn op(&mut self, inp: &mut Input<'_>) -> bool {
        if inp.is_empty() {
            return false;
        }
        let b = inp.u8();
        match b % op::COUNT {
            op::BAR_WRITE | op::BAR_READ => {
                let off = self.offset(inp);
                let len = match inp.u8() & 7 {
                    0..=3 => 4,
                    4 | 5 => 8,
                    n => usize::from(n) - 5, // 1, 2
                };
                let shape_ok =
                    matches!(len, 4 | 8) && off % 4 == 0 && off < u64::from(reg::BAR0_SIZE);
                let before = self.ctrl.counters().bad_access;
                if b % op::COUNT == op::BAR_WRITE {
                    let mut v = [0u8; 8];
                    v[..4].copy_from_slice(&Self::value(inp).to_le_bytes());
                    v[4..].copy_from_slice(&Self::value(inp).to_le_bytes());
                    self.now += u64::from(inp.u8());
                    self.ctrl.bar_write(off, &v[..len], self.now);
                } else {
                    let mut v = [0xaau8; 8];
                    self.ctrl.bar_read(off, &mut v[..len]);
                    if !shape_ok {
                        assert_eq!(v[..len], [0; 8][..len], "a refused read reads as zeros");
                    }
                }
                let bad = self.ctrl.counters().bad_access - before;
                if shape_ok {
                    assert!(bad as usize <= len / 4, "{bad} bad accesses in one");
                } else {
                    assert_eq!(bad, 1, "a {len}-byte access at {off:#x} is one bad access");
                    let gerr = reg::GERR::from_raw(self.ctrl.read32(reg::GERR::OFFSET));
                    assert!(gerr.bad_access().is_set(), "GERR.BAD_ACCESS after one");
                }
            }
            op::REG_WRITE => {
                let off = self.offset(inp);
                let v = Self::value(inp);
                self.ctrl.write32(off as u32, v, self.now);
            }
            op::REG_READ => {
                let off = self.offset(inp);
                self.ctrl.read32(off as u32);
            }
            op::RING => {
                // Programs a ring as a driver does: disable, base, size,
                // enable (each step may be refused).
                let sel = inp.u8();
                let port = self.port(inp.u8());
                let tx = sel & 1 != 0;
                let base = if sel & 2 != 0 {
                    MEM_BASE + u64::from(inp.u16() & 0xfff0)
                } else {
                    Self::addr(inp)
                };
                let size = match (sel >> 2) & 7 {
                    0 => 8,
                    1 => 16,
                    2 => 64,
                    3 => 256,
                    4 => reg::RING_MAX,
                    5 => 1 << (inp.u8() & 31),
                    _ => inp.u32(),
                };
                let (lo, hi) = reg::split_u64(base);
                if sel & 0x20 == 0 {
                    self.ctrl
                        .write32(ring_reg(port, tx, reg::RING_CTRL::OFFSET), 0, self.now);
                }
                for (r, v) in [
                    (reg::RING_BASE_LO::OFFSET, lo),
                    (reg::RING_BASE_HI::OFFSET, hi),
                    (reg::RING_SIZE::OFFSET, size),
                ] {
                    self.ctrl.write32(ring_reg(port, tx, r), v, self.now);
                }
                if sel & 0x40 == 0 {
                    let en = reg::RING_CTRL::ZERO.enable().mask();
                    self.ctrl
                        .write32(ring_reg(port, tx, reg::RING_CTRL::OFFSET), en, self.now);
                }
            }
            op::DESC => {
                // A descriptor written into a ring's slot in guest memory
                // (write-back fields too: the device must ignore them).
                let sel = inp.u8();
                let port = u32::from(inp.u8()) % self.ports;
                let (base, size) = self.ring(port, sel & 1 != 0);
                let idx = u32::from(inp.u16()) % size.clamp(1, reg::RING_MAX);
                let len = if sel & 2 != 0 {
                    inp.u16()
                } else {
                    u16::from(inp.u8() % 130) * reg::FLIT_BYTES as u16
                };
                let addr = Self::addr(inp);
                let mut d = reg::Desc {
                    addr,
                    len,
                    ..Default::default()
                };
                if sel & 4 != 0 {
                    d.done_len = inp.u16();
                    d.status = inp.u16();
                    d.lost = inp.u16();
                }
                if let Some(a) = reg::desc_addr(base, idx) {
                    let _ = lock(&self.mem).write(a, &d.encode());
                }
                // And what it points to, now and then.
                if sel & 8 != 0 {
                    let fill = inp.u8();
                    let n = usize::from(len).min(256);
                    let _ = lock(&self.mem).write(addr, &vec![fill; n]);
                }
            }
            op::DOORBELL => {
                let sel = inp.u8();
                let port = self.port(inp.u8());
                let tx = sel & 1 != 0;
                let tail = if sel & 2 != 0 {
                    inp.u32()
                } else {
                    let head = self.ctrl.read32(ring_reg(port, tx, reg::RING_HEAD::OFFSET));
                    let size = self.ctrl.read32(ring_reg(port, tx, reg::RING_SIZE::OFFSET));
                    head.wrapping_add(u32::from(inp.u8())) & size.wrapping_sub(1)
                };
                self.now += 1;
                self.ctrl.bar_write(
                    u64::from(ring_reg(port, tx, reg::RING_TAIL::OFFSET)),
                    &tail.to_le_bytes(),
                    self.now,
                );
            }
            op::LINK => {
                let sel = inp.u8();
                self.ctrl
                    .set_link(self.port(inp.u8()) as usize, sel & 1 != 0);
            }
            op::STEP => self.step(inp),
            op::PUSH_RX => {
                let port = self.port(inp.u8());
                let lost = u32::from(inp.u8() & 7);
                let n = usize::from(inp.u8()) * 4;
                let data = inp.bytes(n).to_vec();
                self.push(port, lost, &data);
            }
            op::RESET => {
                if inp.u8() & 1 != 0 {
                    self.ctrl.reset();
                } else {
                    self.ctrl
                        .write32(reg::CTRL::OFFSET, reg::CTRL::ZERO.reset().mask(), self.now);
                }
            }
            op::FLUSH => {
                let port = self.port(inp.u8());
                let before = self.ctrl.rx_backlog(port as usize) as u64;
                self.ctrl.flush_rx(port as usize);
                assert_eq!(self.ctrl.rx_backlog(port as usize), 0, "flush left data");
                if let Some(b) = self.book.get_mut(port as usize) {
                    b.rx_flushed += before;
                }
            }
            op::HOSTILE => {
                let case = HostileCase::ALL[usize::from(inp.u8()) % HostileCase::ALL.len()];
                let port = self.port(inp.u8());
                let count = u64::from(inp.u8() & 15);
                let r = self.ctrl.set_hostile(port as usize, case, count, 1);
                assert_eq!(r.is_ok(), port < self.ports, "{r:?}");
            }
            op::POKE => {
                // The guest scribbles on its memory (rings included).
                let addr = MEM_BASE + u64::from(inp.u16());
                let n = usize::from(inp.u8() & 63);
                let bytes = inp.bytes(n).to_vec();
                let _ = lock(&self.mem).write(addr, &bytes);
            }
            op::PORT_UP => {
                // A driver's bring-up of a port: unmask, enable the PHY,
                // the device enabled, the link up.
                let port = self.port(inp.u8());
                let en = reg::CTRL::ZERO.enable().mask();
                self.ctrl.write32(reg::CTRL::OFFSET, en, self.now);
                self.ctrl
                    .write32(port_reg(port, reg::INT_MASK::OFFSET), 0, self.now);
                let phy = reg::PHY_CTRL::ZERO.enable().mask();
                self.ctrl
                    .write32(port_reg(port, reg::PHY_CTRL::OFFSET), phy, self.now);
                self.ctrl.set_link(port as usize, false);
                self.ctrl.set_link(port as usize, true);
            }
            _ => {
                // PHY monitors and line rate, as the fabric reports them.
                let port = self.port(inp.u8());
                self.ctrl
                    .phy_errors(port as usize, u64::from(inp.u8()), u64::from(inp.u8() & 3));
                self.ctrl
                    .set_line_rate(port as usize, f64::from(inp.u32()) * 1e3);
            }
        }
        true
    }

    /// The invariants, after every operation.
    fn check(&mut self, refused_before: u64, errors_before: u64, injected_before: u64) {
        let dev = self.ctrl.counters();
        let reset = dev.resets != self.resets;
        if reset {
            self.resets = dev.resets;
            self.book.fill(PortBook::default());
        }
        if let Some(s) = lock(&self.log).bad_shape.take() {
            panic!("{s}");
        }
        // BAD_ACCESS holds the bad accesses since the last reset.
        let reg_bad = u64::from(self.ctrl.read32(reg::BAD_ACCESS::OFFSET));
        if reset {
            assert!(reg_bad <= 2, "BAD_ACCESS {reg_bad} right after a reset");
            self.bad_base = dev.bad_access - reg_bad;
        } else {
            assert_eq!(
                reg_bad,
                (dev.bad_access - self.bad_base) & 0xffff_ffff,
                "BAD_ACCESS against the device counter"
            );
        }
        // Every vector raised exists and is counted.
        let raised = lock(&self.irqs).clone();
        let vectors = reg::msix_vectors(self.ports);
        for &v in &raised[self.raised..] {
            assert!(v < vectors, "vector {v} of {vectors}");
        }
        let mut port_irqs = 0;
        let mut errors = 0;
        let mut injected = 0;
        for p in 0..self.ports {
            let c = self.pc(p);
            let b = self.book[p as usize];
            let lo = |v: u64| v & 0xffff_ffff;
            assert_eq!(c.tx_flits * FLIT, b.tx_bytes, "port {p}: TX flits sent");
            assert_eq!(
                b.rx_in,
                c.rx_flits * FLIT + self.ctrl.rx_backlog(p as usize) as u64 + b.rx_flushed,
                "port {p}: RX bytes taken = written + waiting + flushed"
            );
            assert_eq!(c.rx_nobuf_flits, b.rx_nobuf, "port {p}: RX flits dropped");
            assert!(
                c.errors
                    >= c.tx_bad_desc
                        + c.tx_dma_errors
                        + c.rx_bad_desc
                        + c.ring_dma_errors
                        + c.ring_cfg_errors
                        + c.bad_doorbells,
                "port {p}: errors below their kinds: {c:?}"
            );
            assert!(c.idle_doorbells + c.bad_doorbells <= c.doorbells, "{c:?}");
            assert!(c.tx_bad_desc + c.tx_dma_errors <= c.tx_descs, "{c:?}");
            assert!(c.rx_bad_desc <= c.rx_descs, "{c:?}");
            assert!(c.tx_flits * FLIT <= c.tx_descs * u64::from(reg::MAX_XFER_BYTES));
            assert!(c.rx_flits * FLIT <= c.rx_descs * u64::from(reg::MAX_XFER_BYTES));
            // The registers show the counters' low halves.
            for (r, v) in [
                (reg::ERR_COUNT::OFFSET, c.errors),
                (reg::TX_FLITS::OFFSET, c.tx_flits),
                (reg::RX_FLITS::OFFSET, c.rx_flits),
                (reg::TX_DESCS::OFFSET, c.tx_descs),
                (reg::RX_DESCS::OFFSET, c.rx_descs),
                (reg::RX_NOBUF_FLITS::OFFSET, c.rx_nobuf_flits),
                (reg::DOORBELLS::OFFSET, c.doorbells),
            ] {
                let got = u64::from(self.ctrl.read32(port_reg(p, r)));
                assert_eq!(got, lo(v), "port {p}: register {r:#x}");
            }
            if !reset {
                port_irqs += c.interrupts - self.book[p as usize].interrupts;
            }
            self.book[p as usize].interrupts = c.interrupts;
            errors += c.errors;
            if let Some(h) = self.ctrl.hostile(p as usize) {
                injected += h.injected.values().sum::<u64>();
            }
        }
        if !reset {
            assert_eq!(
                (raised.len() - self.raised) as u64,
                dev.interrupts - self.dev_interrupts + port_irqs,
                "every MSI-X message is counted once"
            );
            // A DMA the device could not do is an error on the port
            // concerned (but for a double completion's repeated
            // write-back, which the hostile mode may lose on purpose).
            let refused = lock(&self.log).refused;
            if refused > refused_before && injected == injected_before {
                assert!(errors > errors_before, "a refused DMA went uncounted");
            }
        }
        self.dev_interrupts = dev.interrupts;
        self.raised = raised.len();
    }

    fn totals(&self) -> (u64, u64, u64) {
        let refused = lock(&self.log).refused;
        let mut errors = 0;
        let mut injected = 0;
        for p in 0..self.ports as usize {
            errors += self.ctrl.port_counters(p).map_or(0, |c| c.errors);
            if let Some(h) = self.ctrl.hostile(p) {
                injected += h.injected.values().sum::<u64>();
            }
        }
        (refused, errors, injected)
    }

    /// After whatever came before: a reset and a driver's bring-up of the
    /// last port, then one TX descriptor must go out with its bytes and
    /// one RX buffer must receive what arrives.
    fn still_works(&mut self) {
        let port = self.ports - 1;
        for p in 0..self.ports as usize {
            for case in HostileCase::ALL {
                let r = self.ctrl.set_hostile(p, case, 0, 0);
                assert!(r.is_ok(), "{r:?}");
            }
        }
        self.ctrl
            .write32(reg::CTRL::OFFSET, reg::CTRL::ZERO.reset().mask(), self.now);
        let (txq, rxq, buf, rxbuf) = (
            MEM_BASE,
            MEM_BASE + 0x100,
            MEM_BASE + 0x1000,
            MEM_BASE + 0x2000,
        );
        let data: Vec<u8> = (0..3 * reg::FLIT_BYTES).map(|i| i as u8 ^ 0x5a).collect();
        {
            let mut m = lock(&self.mem);
            let tx = reg::Desc {
                addr: buf,
                len: data.len() as u16,
                ..Default::default()
            };
            let rx = reg::Desc {
                addr: rxbuf,
                len: reg::MAX_XFER_BYTES as u16,
                ..Default::default()
            };
            for (at, bytes) in [
                (txq, &tx.encode()[..]),
                (rxq, &rx.encode()[..]),
                (buf, &data[..]),
                (rxbuf, &[0u8; 64][..]),
            ] {
                assert!(m.write(at, bytes).is_ok());
            }
        }
        self.ctrl
            .write32(reg::CTRL::OFFSET, reg::CTRL::ZERO.enable().mask(), self.now);
        for (tx, base) in [(true, txq), (false, rxq)] {
            let (lo, hi) = reg::split_u64(base);
            for (r, v) in [
                (reg::RING_BASE_LO::OFFSET, lo),
                (reg::RING_BASE_HI::OFFSET, hi),
                (reg::RING_SIZE::OFFSET, reg::RING_MIN),
                (reg::RING_CTRL::OFFSET, reg::RING_CTRL::ZERO.enable().mask()),
                (reg::RING_TAIL::OFFSET, 1),
            ] {
                self.ctrl.write32(ring_reg(port, tx, r), v, self.now);
            }
        }
        let phy = reg::PHY_CTRL::ZERO.enable().mask();
        self.ctrl
            .write32(port_reg(port, reg::PHY_CTRL::OFFSET), phy, self.now);
        self.ctrl.set_link(port as usize, false);
        self.ctrl.set_link(port as usize, true);
        assert!(self.ctrl.port_enabled(port as usize));
        let mut out = Vec::new();
        self.ctrl.pull_tx(port as usize, 4096, &mut out);
        assert_eq!(out, data, "a good TX descriptor after the garbage");
        self.ctrl.push_rx(port as usize, 0, &data);
        self.ctrl.service_rx();
        let mut got = vec![0u8; data.len()];
        let mut raw = [0u8; reg::DESC_BYTES];
        {
            let m = lock(&self.mem);
            assert!(m.read(rxbuf, &mut got).is_ok() && m.read(rxq, &mut raw).is_ok());
        }
        let d = reg::Desc::decode(&raw);
        assert_eq!(got, data, "a good RX buffer after the garbage");
        assert_eq!(
            (d.done_len, d.status),
            (data.len() as u16, reg::DESC_STATUS::ok().into_raw()),
            "its completion"
        );
        let c = self.pc(port);
        assert_eq!((c.tx_descs, c.rx_descs, c.errors), (1, 1, 0), "{c:?}");
        assert_eq!(self.ctrl.read32(reg::IDENT::OFFSET), reg::IDENT_VALUE);
    }
}

/// The controller's device model driven as a guest driver drives it, and
/// worse.
///
/// Input: a configuration byte (ports 1 to 4, a descriptor budget of 1 to
/// 16, an RX FIFO of 100 B to 256 KiB), then operations: BAR0 reads and
/// writes of 1, 2, 4 and 8 bytes at registers of the table (every port,
/// one past the last, both ring blocks), holes, the MSI-X table, past the
/// BAR and unaligned; single register writes and reads; ring programming
/// (aligned or not, inside guest memory or not, every size); descriptors
/// written into ring slots (addresses inside, straddling and outside guest
/// memory, lengths in whole flits or not, write-back fields filled with
/// garbage) and their buffers; doorbells (in the ring or not); link
/// changes; fabric steps (retrains completed, TX flits looped back into
/// the next port's receiver, RX buffers filled, interrupts); raw flits
/// from the wire with losses; resets by register and from outside; RX
/// flushes; hostile cases armed; bytes scribbled over guest memory; a
/// driver's port bring-up; PHY monitor input.
///
/// Asserts after every operation: the device's DMA is of the shapes it
/// makes (descriptors and their write-backs at 16-byte slots, buffers of
/// whole flits up to `MAX_XFER_BYTES`); a DMA refused as outside guest
/// memory is counted as an error on a port; an access that breaks the
/// access rules reads as zeros and counts one bad access and sets
/// `GERR.BAD_ACCESS`, `BAD_ACCESS` counts exactly the bad accesses since
/// the last reset; every MSI-X vector raised exists and is counted once;
/// per port, the flits counted sent are the bytes `pull_tx` returned, the
/// bytes the RX FIFO took are those written to buffers plus those waiting
/// plus those flushed, the flits it could not take are counted dropped,
/// the error counter is at least the sum of its kinds, doorbells, idle
/// and bad doorbells, descriptors and flits agree, and the counter
/// registers show the counters. At the end, after a reset and a driver's
/// bring-up, a TX descriptor goes out with its bytes and an RX buffer
/// receives what arrives, with no error.
pub fn fabric_registers(data: &[u8]) {
    let mut inp = Input::new(data);
    let cfg = inp.u8();
    let mut r = Regs::new(ControllerConfig {
        ports: 1 + u32::from(cfg & 3),
        budget: 1 + u32::from((cfg >> 2) & 15),
        rx_fifo_bytes: [100, 2000, 20_000, 256 * 1024][usize::from(cfg >> 6)],
        ..ControllerConfig::default()
    });
    r.check(0, 0, 0);
    for _ in 0..256 {
        let (refused, errors, injected) = r.totals();
        if !r.op(&mut inp) {
            break;
        }
        r.check(refused, errors, injected);
    }
    r.still_works();
}

pub(crate) fn seeds_registers() -> Vec<Vec<u8>> {
    let mut v = Vec::new();
    // A driver's bring-up of port 0 and a packet each way, on each of
    // the configurations.
    for cfg in [0x00u8, 0x05, 0x7e, 0xc1, 0x43] {
        let mut o = Output::default();
        o.u8(cfg);
        // TX ring at +0x100, RX ring at +0x200, 8 entries, port 0.
        o.u8(op::RING).u8(0x03).u8(0).u16(0x100);
        o.u8(op::RING).u8(0x02).u8(0).u16(0x200);
        o.u8(op::PORT_UP).u8(0);
        // TX descriptor 0: 2 flits at +0x1000 filled with 0x11; RX
        // descriptor 0: 128 flits at +0x2000.
        o.u8(op::DESC)
            .u8(0x09)
            .u8(0)
            .u16(0)
            .u8(2)
            .u8(0)
            .u16(0x1000)
            .u8(0x11);
        o.u8(op::DESC)
            .u8(0x00)
            .u8(0)
            .u16(0)
            .u8(128)
            .u8(0)
            .u16(0x2000);
        o.u8(op::DOORBELL).u8(0).u8(0).u8(1);
        o.u8(op::DOORBELL).u8(1).u8(0).u8(1);
        o.u8(op::STEP).u8(1).u16(10);
        o.u8(op::PUSH_RX).u8(0).u8(1).u8(10).raw(&[0x22; 40]);
        o.u8(op::STEP).u8(3).u16(10);
        v.push(o.done());
    }
    // Each kind of operation once on a live port, for the fuzzer to
    // splice.
    let mut o = Output::default();
    o.u8(0x01);
    o.u8(op::RING).u8(0x03).u8(1).u16(0x400);
    o.u8(op::PORT_UP).u8(1);
    o.u8(op::BAR_WRITE)
        .u8(0x90)
        .u16(0x7ff0)
        .u8(0)
        .u8(3)
        .u32(1)
        .u8(0)
        .u8(0);
    o.u8(op::BAR_READ).u8(0x80).u16(0x0002).u8(6);
    o.u8(op::REG_WRITE).u8(5).u8(1).u8(2);
    o.u8(op::REG_READ).u8(7).u8(0);
    o.u8(op::DESC)
        .u8(0x07)
        .u8(1)
        .u16(0)
        .u16(7)
        .u8(3)
        .u32(0xdead)
        .u32(0);
    o.u8(op::DOORBELL).u8(0x03).u8(1).u32(9);
    o.u8(op::LINK).u8(0).u8(1);
    o.u8(op::HOSTILE).u8(6).u8(1).u8(3);
    o.u8(op::POKE).u16(0x400).u8(16).raw(&[0xff; 16]);
    o.u8(op::FLUSH).u8(1);
    o.u8(op::PHY).u8(1).u8(7).u8(1).u32(625_000);
    o.u8(op::RESET).u8(0);
    o.u8(op::STEP).u8(1).u16(1);
    v.push(o.done());
    // A hostile case of each kind armed on a running port.
    for case in 0..HostileCase::ALL.len() as u8 {
        let mut o = Output::default();
        o.u8(0x00);
        o.u8(op::RING).u8(0x03).u8(0).u16(0x100);
        o.u8(op::RING).u8(0x02).u8(0).u16(0x200);
        o.u8(op::PORT_UP).u8(0);
        o.u8(op::HOSTILE).u8(case).u8(0).u8(2);
        for i in 0..3u16 {
            o.u8(op::DESC)
                .u8(0x09)
                .u8(0)
                .u16(i)
                .u8(1)
                .u8(0)
                .u16(0x1000)
                .u8(i as u8);
            o.u8(op::DESC)
                .u8(0x00)
                .u8(0)
                .u16(i)
                .u8(4)
                .u8(0)
                .u16(0x2000 + 0x100 * i);
        }
        o.u8(op::DOORBELL).u8(0).u8(0).u8(3);
        o.u8(op::DOORBELL).u8(1).u8(0).u8(3);
        o.u8(op::STEP).u8(1).u16(10);
        o.u8(op::REG_READ).u8(0x40 | 13).u8(0);
        o.u8(op::STEP).u8(1).u16(200);
        v.push(o.done());
    }
    v
}

// ----- fabric_control ----------------------------------------------------

fn topology() -> &'static Topology {
    static TOPO: OnceLock<Topology> = OnceLock::new();
    TOPO.get_or_init(|| match Topology::builtin("default") {
        Some(t) => t,
        None => panic!("the built-in default topology does not parse"),
    })
}

/// Everything a command may change: the counters (hostile arming and
/// forgeries included), every link's PHY parameters and administrative
/// state, every switch's faults and NPI rewriting.
fn state(f: &Fabric) -> String {
    let mut s = f.counters().to_string();
    for l in &f.links {
        s += &format!(
            "\n{:?} {:?} {}",
            l.wires[0].params, l.wires[1].params, l.admin_up
        );
    }
    for w in &f.switches {
        s += &format!("\n{:?}", w.params);
        for p in &w.ports {
            s += &format!(" {:?}/{:?}", p.npi_ingress, p.npi_egress);
        }
    }
    s
}

/// The control socket's command handling: JSON lines into
/// `control::handle_line` against the built-in default fabric (two hosts
/// of two ports, two switches, five links), with fabric steps between
/// them.
///
/// Input: lines (at most 16), each a command as the socket takes it;
/// before each, a fabric step by the line's length in microseconds. A line
/// that is not UTF-8 ends the input, as it ends a connection.
///
/// Asserts: every answer is a JSON object with a boolean `ok` and prints
/// as one line that parses back to the same value; a refused command has
/// a non-empty `error` and changes nothing (counters, hostile arming and
/// forgeries, PHY parameters, administrative link state, switch faults
/// and NPI rewriting all the same before and after); an accepted `link`
/// command sets exactly the parameters it gives, `switch` the faults,
/// `hostile` arms the count it gives; the fabric keeps stepping whatever
/// was accepted, and answers `counters` at the end.
pub fn fabric_control(data: &[u8]) {
    let topo = topology();
    let fabric = Mutex::new(Fabric::new(topo, |_| {
        (
            Box::new(FakeMemory::new(0, 64)) as Box<dyn GuestMemory>,
            Box::new(Irqs::default()) as Box<dyn Interrupts>,
        )
    }));
    let mut now = 0u64;
    for line in data.split(|&b| b == b'\n').take(16) {
        let Ok(line) = std::str::from_utf8(line) else {
            break;
        };
        now += 1000 * line.len() as u64;
        lock(&fabric).step(now);
        if line.trim().is_empty() {
            continue;
        }
        let before = state(&lock(&fabric));
        let answer = handle_line(&fabric, line, now);
        let text = answer.to_string();
        assert!(!text.contains('\n'), "an answer is one line: {text}");
        let back: Result<Value, _> = serde_json::from_str(&text);
        assert!(back.is_ok_and(|b| b == answer), "answer round trip: {text}");
        let ok = answer.get("ok").and_then(Value::as_bool);
        let after = state(&lock(&fabric));
        match ok {
            Some(true) => check_accepted(&lock(&fabric), line, &answer),
            Some(false) => {
                let e = answer.get("error").and_then(Value::as_str);
                assert!(
                    e.is_some_and(|e| !e.is_empty()),
                    "refused without why: {text}"
                );
                assert!(
                    before == after,
                    "refused {line:?} changed the fabric: {text}"
                );
            }
            None => panic!("answer without a boolean ok: {text}"),
        }
    }
    // Whatever was accepted, the fabric keeps running and reporting.
    for _ in 0..4 {
        now += 100_000;
        lock(&fabric).step(now);
    }
    let v = handle_line(&fabric, r#"{"cmd":"counters"}"#, now);
    assert_eq!(v["ok"], true, "{v}");
}

/// What an accepted command must have changed.
fn check_accepted(f: &Fabric, line: &str, answer: &Value) {
    use ub_fabric::fabric::Command;
    let Ok(cmd) = serde_json::from_str::<Command>(line) else {
        panic!("accepted a line that is no command: {line:?}");
    };
    match cmd {
        Command::Link {
            link,
            ber,
            fec_fail,
            delay_ns,
            rate_fps,
            up,
            flap,
            ..
        } => {
            let Some(l) = f.links.iter().find(|l| {
                [l.a, l.b]
                    .into_iter()
                    .any(|e| f.topology().end_name(e) == link)
            }) else {
                panic!("accepted link {link:?} that does not exist");
            };
            for w in &l.wires {
                let p = w.params;
                assert!(ber.is_none_or(|b| p.ber == b), "{line}: {p:?}");
                assert!(fec_fail.is_none_or(|b| p.fec_fail == b), "{line}: {p:?}");
                assert!(delay_ns.is_none_or(|b| p.delay_ns == b), "{line}: {p:?}");
                assert!(rate_fps.is_none_or(|b| p.rate_fps == b), "{line}: {p:?}");
                assert!((0.0..=1.0).contains(&p.ber) && (0.0..=1.0).contains(&p.fec_fail));
                assert!(p.rate_fps > 0.0, "{line}: {p:?}");
            }
            if flap {
                assert!(!l.admin_up, "{line}: a flap takes the link down");
            } else if let Some(u) = up {
                assert_eq!(l.admin_up, u, "{line}");
            }
        }
        Command::Switch {
            switch,
            drop,
            corrupt,
            reorder,
            duplicate,
        } => {
            let Some(w) = f.switches.iter().find(|w| w.name == switch) else {
                panic!("accepted switch {switch:?} that does not exist");
            };
            let x = w.params.faults;
            for (want, got) in [
                (drop, x.drop),
                (corrupt, x.corrupt),
                (reorder, x.reorder),
                (duplicate, x.duplicate),
            ] {
                assert!(want.is_none_or(|v| v == got), "{line}: {x:?}");
                assert!((0.0..=1.0).contains(&got), "{line}: {x:?}");
            }
        }
        Command::Hostile { case, count, .. } => {
            let n = count.unwrap_or(1);
            assert_eq!(answer["armed"], n, "{line}: {answer}");
            assert_eq!(
                answer["hostile"]["armed"][case.name()],
                n,
                "{line}: {answer}"
            );
        }
        Command::Counters | Command::Forge { .. } => {}
    }
}

pub(crate) fn seeds_control() -> Vec<Vec<u8>> {
    let lines: &[&[&str]] = &[
        &[r#"{"cmd":"counters"}"#],
        &[
            r#"{"cmd":"link","link":"sw0.2","ber":1e-6,"fec_fail":0.001}"#,
            r#"{"cmd":"link","link":"vm0.0","up":false}"#,
            r#"{"cmd":"link","link":"vm1.1","flap":true,"delay_ns":5000,"rate_fps":1e6}"#,
            r#"{"cmd":"counters"}"#,
        ],
        &[
            r#"{"cmd":"link","link":"vm0.0","npi_ingress":16,"npi_egress":0}"#,
            r#"{"cmd":"link","link":"sw0.0","npi_ingress":33554432}"#,
        ],
        &[
            r#"{"cmd":"switch","switch":"sw1","drop":0.5,"corrupt":0.1}"#,
            r#"{"cmd":"switch","switch":"sw0","reorder":0.2,"duplicate":0.3}"#,
            r#"{"cmd":"switch","switch":"sw0","drop":2}"#,
        ],
        &[
            r#"{"cmd":"hostile","port":"vm1.1","case":"done-len-too-long","count":3}"#,
            r#"{"cmd":"hostile","port":"vm0.0","case":"irq-storm"}"#,
            r#"{"cmd":"hostile","port":"vm0.0","case":"ring-dma","count":1000001}"#,
            r#"{"cmd":"hostile","port":"sw0.0","case":"irq-storm"}"#,
        ],
        &[
            r#"{"cmd":"forge","port":"vm1.0","dst_tpn":5,"src":"10.0.1.1","dst":"10.0.2.1","src_tpn":7,"psn":100,"count":2,"payload_len":61}"#,
            r#"{"cmd":"forge","port":"vm1","dst_tpn":5,"psn_ahead":3,"within_ms":100}"#,
            r#"{"cmd":"forge","port":"vm0","dst_tpn":9,"replay":true}"#,
        ],
        &[
            "not json",
            r#"{"cmd":"link","link":"vm9.0"}"#,
            r#"{"cmd":"hostile","port":"vm0.0","case":"irq-storm","extra":1}"#,
        ],
    ];
    lines.iter().map(|l| l.join("\n").into_bytes()).collect()
}
