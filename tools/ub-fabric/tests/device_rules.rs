// SPDX-License-Identifier: GPL-2.0
//! The reset, interrupt and DMA rules of `Documentation/ub/controller.rst`
//! that a driver relies on through resets, reloads and faults: each test
//! here is one rule an independent review found broken.

mod common;
mod support;

use std::fs::File;
use std::ops::Range;
use std::os::fd::FromRawFd;
use std::sync::{Arc, Mutex};

use common::{bring_up, fabric, run_until, Driver, MEM_BASE, MEM_SIZE};
use support::{enable_port, get_desc, preg, program_ring, put_desc};
use ub_fabric::device::{Controller, ControllerConfig, Interrupts};
use ub_fabric::mem::{DmaError, FakeMemory, GuestMemory, MappedMemory};
use ub_fabric::topology::Topology;
use ub_proto::controller as reg;

/// Guest memory whose writes to one range fail (a descriptor ring the
/// device can read but not write back), shared with the test.
#[derive(Clone)]
struct Memory(Arc<Mutex<(FakeMemory, Option<Range<u64>>)>>);

impl Memory {
    fn new() -> Self {
        Self(Arc::new(Mutex::new((
            FakeMemory::new(MEM_BASE, MEM_SIZE),
            None,
        ))))
    }

    fn deny_writes(&self, r: Option<Range<u64>>) {
        self.0.lock().expect("lock").1 = r;
    }
}

impl GuestMemory for Memory {
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), DmaError> {
        self.0.lock().expect("lock").0.read(addr, buf)
    }

    fn write(&mut self, addr: u64, data: &[u8]) -> Result<(), DmaError> {
        let mut m = self.0.lock().expect("lock");
        let end = addr + data.len() as u64;
        if m.1.as_ref().is_some_and(|r| addr < r.end && r.start < end) {
            return Err(DmaError::OutOfRange {
                addr,
                len: data.len(),
            });
        }
        m.0.write(addr, data)
    }

    fn contains(&self, addr: u64, len: usize) -> bool {
        self.0.lock().expect("lock").0.contains(addr, len)
    }
}

/// MSI-X messages, shared with the test.
#[derive(Clone, Default)]
struct Irqs(Arc<Mutex<Vec<u16>>>);

impl Irqs {
    fn on(&self, vector: u16) -> usize {
        let v = self.0.lock().expect("lock");
        v.iter().filter(|&&x| x == vector).count()
    }
}

impl Interrupts for Irqs {
    fn raise(&mut self, vector: u16) {
        self.0.lock().expect("lock").push(vector);
    }
}

/// An enabled controller over `mem`, messages recorded in `irqs`.
fn controller(mem: &Memory, irqs: &Irqs) -> Controller {
    let mut c = Controller::new(
        ControllerConfig::default(),
        Box::new(mem.clone()),
        Box::new(irqs.clone()),
    );
    c.write32(reg::CTRL::OFFSET, reg::CTRL::ZERO.enable().mask(), 0);
    c
}

/// Programs and enables port 0's TX (`tx`) or RX ring of `size` entries
/// at `base`, and the port.
fn ring(c: &mut Controller, tx: bool, base: u64, size: u32) {
    program_ring(c, 0, tx, base, size);
    enable_port(c, 0);
}

/// A 32-bit BAR0 write, as the guest does it (interrupts updated).
fn bar_write(c: &mut Controller, off: u32, v: u32) {
    c.bar_write(u64::from(off), &v.to_le_bytes(), 0);
}

const RING_BASE: u64 = MEM_BASE;
const BUF0: u64 = MEM_BASE + 0x1000;
const BUF1: u64 = MEM_BASE + 0x2000;

// ----- Reset -----------------------------------------------------------

/// A driver reload: `CTRL.RESET` and a new probe within one fabric tick.
/// The reset must still take the link down for the peer (a switch port,
/// whose link engine must start over with the controller's fresh one), so
/// the link trains again and traffic flows.
#[test]
fn reset_then_quick_reinit_takes_the_link_down_and_up_again() {
    let topo = Topology::builtin("default").expect("default");
    let mut f = fabric(&topo);
    let (mut ds, t0) = bring_up(&mut f);
    let downs = f.hosts[0].ctrl.port_counters(0).expect("port").link_downs;
    f.hosts[0]
        .ctrl
        .write32(reg::CTRL::OFFSET, reg::CTRL::ZERO.reset().mask(), t0);
    ds[0] = Driver::probe(&mut f, 0, t0);
    let t1 = run_until(&mut f, &mut ds, t0, 1_000, t0 + 20_000_000, |_, ds| {
        ds.iter().all(Driver::all_up)
    });
    assert!(ds[0].all_up(), "the link trained again after the reload");
    ds[0].send(0, 1, Some(0), 9, 50, 64, 0);
    let t = run_until(&mut f, &mut ds, t1, 1_000, t1 + 20_000_000, |_, ds| {
        ds[1].received() >= 50
    });
    assert_eq!(
        f.hosts[0].ctrl.port_counters(0).expect("port").link_downs,
        downs + 1,
        "the reset took the link down"
    );
    let got: Vec<u32> = ds[1].ports[0].sink.got.iter().map(|&(_, s)| s).collect();
    assert_eq!(
        got,
        (0..50).collect::<Vec<_>>(),
        "traffic after reload (t={t})"
    );
}

#[test]
fn reset_clears_the_bad_access_counter() {
    let (mem, irqs) = (Memory::new(), Irqs::default());
    let mut c = controller(&mem, &irqs);
    c.bar_read(2, &mut [0u8; 4]);
    assert_eq!(c.read32(reg::BAD_ACCESS::OFFSET), 1);
    c.write32(reg::CTRL::OFFSET, reg::CTRL::ZERO.reset().mask(), 0);
    assert_eq!(c.read32(reg::BAD_ACCESS::OFFSET), 0, "reset value 0");
    assert_eq!(c.read32(reg::GERR::OFFSET), 0);
}

// ----- Interrupts ------------------------------------------------------

const GINT_ERROR: u32 = reg::GINT_CAUSE::ZERO.error().mask();

/// `GINT_CAUSE.ERROR` cleared while `GERR.BAD_ACCESS` is still set, then a
/// new rejected access: the cause is set again, and every time the
/// unmasked cause is set a message goes out.
#[test]
fn global_error_interrupts_again_after_the_cause_is_cleared() {
    let (mem, irqs) = (Memory::new(), Irqs::default());
    let mut c = controller(&mem, &irqs);
    bar_write(&mut c, reg::GINT_MASK::OFFSET, 0);
    c.bar_read(2, &mut [0u8; 4]);
    c.update_irqs(0);
    assert_eq!(irqs.on(reg::VECTOR_GLOBAL), 1);
    // The handler clears the cause but leaves GERR.
    bar_write(&mut c, reg::GINT_CAUSE::OFFSET, GINT_ERROR);
    c.bar_read(2, &mut [0u8; 4]);
    c.update_irqs(0);
    assert_ne!(c.read32(reg::GINT_CAUSE::OFFSET) & GINT_ERROR, 0);
    assert_eq!(
        irqs.on(reg::VECTOR_GLOBAL),
        2,
        "a message for the new cause"
    );
}

/// A new port error while `GERR.PORT` is still set raises
/// `GINT_CAUSE.ERROR` (and its message) again.
#[test]
fn port_error_with_gerr_port_set_raises_the_cause() {
    let (mem, irqs) = (Memory::new(), Irqs::default());
    let mut c = controller(&mem, &irqs);
    bar_write(&mut c, reg::GINT_MASK::OFFSET, 0);
    let tail = preg(0, reg::RING_TAIL::of::<reg::TxRing>());
    // A doorbell on a disabled ring is a port error.
    bar_write(&mut c, tail, 1);
    assert_ne!(
        c.read32(reg::GERR::OFFSET) & reg::GERR::ZERO.port().mask(),
        0
    );
    assert_eq!(irqs.on(reg::VECTOR_GLOBAL), 1);
    bar_write(&mut c, reg::GINT_CAUSE::OFFSET, GINT_ERROR);
    bar_write(&mut c, tail, 1);
    assert_ne!(c.read32(reg::GINT_CAUSE::OFFSET) & GINT_ERROR, 0);
    assert_eq!(irqs.on(reg::VECTOR_GLOBAL), 2);
}

/// The documented handler (clear `ERR_STATUS`, then `GERR`, then the
/// cause) leaves the cause clear: no message storm.
#[test]
fn handled_global_error_stays_quiet() {
    let (mem, irqs) = (Memory::new(), Irqs::default());
    let mut c = controller(&mem, &irqs);
    bar_write(&mut c, reg::GINT_MASK::OFFSET, 0);
    let tail = preg(0, reg::RING_TAIL::of::<reg::TxRing>());
    bar_write(&mut c, tail, 1);
    c.bar_read(2, &mut [0u8; 4]);
    let err = c.read32(preg(0, reg::ERR_STATUS::OFFSET));
    bar_write(&mut c, preg(0, reg::ERR_STATUS::OFFSET), err);
    let gerr = c.read32(reg::GERR::OFFSET);
    bar_write(&mut c, reg::GERR::OFFSET, gerr);
    bar_write(&mut c, reg::GINT_CAUSE::OFFSET, GINT_ERROR);
    c.update_irqs(1);
    assert_eq!(c.read32(reg::GINT_CAUSE::OFFSET), 0);
    assert_eq!(c.read32(reg::GERR::OFFSET), 0);
    assert_eq!(irqs.on(reg::VECTOR_GLOBAL), 1, "one message, no storm");
}

// ----- DMA ---------------------------------------------------------------

/// With `CTRL.ENABLE` = 0 the device does no DMA: received data waits in
/// the FIFO and reaches the buffer once the device is enabled again.
#[test]
fn no_rx_dma_while_the_device_is_disabled() {
    let (mem, irqs) = (Memory::new(), Irqs::default());
    let mut c = controller(&mem, &irqs);
    ring(&mut c, false, RING_BASE, 8);
    put_desc(&mut c, RING_BASE, 0, BUF0, 640);
    c.write32(preg(0, reg::RING_TAIL::of::<reg::RxRing>()), 1, 0);
    c.push_rx(0, 0, &[0xab; 40]);
    c.write32(reg::CTRL::OFFSET, 0, 0);
    c.service_rx();
    assert_eq!(c.read32(preg(0, reg::RING_HEAD::of::<reg::RxRing>())), 0);
    let mut buf = [0u8; 40];
    c.memory_mut().read(BUF0, &mut buf).expect("buf");
    assert_eq!(buf, [0; 40], "nothing written while disabled");
    c.write32(reg::CTRL::OFFSET, reg::CTRL::ZERO.enable().mask(), 0);
    c.service_rx();
    assert_eq!(get_desc(&mut c, RING_BASE, 0).done_len, 40);
}

/// An RX buffer must lie in guest memory as a whole, not only the part the
/// data happens to fill.
#[test]
fn rx_buffer_straddling_the_end_of_memory_is_refused() {
    let (mem, irqs) = (Memory::new(), Irqs::default());
    let mut c = controller(&mem, &irqs);
    ring(&mut c, false, RING_BASE, 8);
    let end = MEM_BASE + MEM_SIZE as u64;
    put_desc(&mut c, RING_BASE, 0, end - 40, 640);
    put_desc(&mut c, RING_BASE, 1, BUF1, 640);
    c.write32(preg(0, reg::RING_TAIL::of::<reg::RxRing>()), 2, 0);
    c.push_rx(0, 0, &[0xcd; 20]);
    c.service_rx();
    let code = reg::ERR_STATUS::ZERO.rx_desc().shift() as u8;
    assert_eq!(get_desc(&mut c, RING_BASE, 0).error_code(), Some(code));
    assert_eq!(
        get_desc(&mut c, RING_BASE, 1).done_len,
        20,
        "data in the next"
    );
}

/// A TX descriptor whose write-back fails is not consumed: its flits are
/// not sent (the ring halts with `RING_DMA`).
#[test]
fn tx_descriptor_that_cannot_be_written_back_sends_nothing() {
    let (mem, irqs) = (Memory::new(), Irqs::default());
    let mut c = controller(&mem, &irqs);
    ring(&mut c, true, RING_BASE, 8);
    put_desc(&mut c, RING_BASE, 0, BUF0, 40);
    mem.deny_writes(Some(RING_BASE..RING_BASE + 0x100));
    c.write32(preg(0, reg::RING_TAIL::of::<reg::TxRing>()), 1, 0);
    let mut out = Vec::new();
    c.pull_tx(0, 4096, &mut out);
    assert!(
        out.is_empty(),
        "{} bytes sent for an incomplete descriptor",
        out.len()
    );
    assert_eq!(c.port_counters(0).expect("port").tx_flits, 0);
    let ctrl = reg::RING_CTRL::from_raw(c.read32(preg(0, reg::RING_CTRL::of::<reg::TxRing>())));
    assert!(ctrl.halted().is_set());
    let err = reg::ERR_STATUS::from_raw(c.read32(preg(0, reg::ERR_STATUS::OFFSET)));
    assert!(err.ring_dma().is_set());
}

/// An RX descriptor whose write-back fails keeps its data in the FIFO: once
/// the driver restarts the ring, the data arrives (nothing lost unmarked).
#[test]
fn rx_data_whose_completion_fails_is_kept_for_the_next_buffer() {
    let (mem, irqs) = (Memory::new(), Irqs::default());
    let mut c = controller(&mem, &irqs);
    ring(&mut c, false, RING_BASE, 8);
    put_desc(&mut c, RING_BASE, 0, BUF0, 640);
    c.write32(preg(0, reg::RING_TAIL::of::<reg::RxRing>()), 1, 0);
    mem.deny_writes(Some(RING_BASE..RING_BASE + 0x100));
    c.push_rx(0, 0, &[0xef; 60]);
    c.service_rx();
    let ctrl = reg::RING_CTRL::from_raw(c.read32(preg(0, reg::RING_CTRL::of::<reg::RxRing>())));
    assert!(ctrl.halted().is_set());
    assert_eq!(c.port_counters(0).expect("port").rx_flits, 0);
    // The driver restarts the ring and posts the buffer again.
    mem.deny_writes(None);
    c.write32(preg(0, reg::RING_CTRL::of::<reg::RxRing>()), 0, 0);
    c.write32(
        preg(0, reg::RING_CTRL::of::<reg::RxRing>()),
        reg::RING_CTRL::ZERO.enable().mask(),
        0,
    );
    put_desc(&mut c, RING_BASE, 0, BUF1, 640);
    c.write32(preg(0, reg::RING_TAIL::of::<reg::RxRing>()), 1, 0);
    c.service_rx();
    let d = get_desc(&mut c, RING_BASE, 0);
    assert_eq!(d.done_len, 60, "the data was kept");
    let mut buf = [0u8; 60];
    c.memory_mut().read(BUF1, &mut buf).expect("buf");
    assert_eq!(buf, [0xef; 60]);
}

fn memfd(len: u64) -> File {
    // SAFETY: memfd_create with a valid C string; the result is checked.
    let fd = unsafe { libc::memfd_create(c"ub-dma".as_ptr(), 0) };
    assert!(fd >= 0);
    // SAFETY: a fresh descriptor we own.
    let f = unsafe { File::from_raw_fd(fd) };
    f.set_len(len).expect("size");
    f
}

/// A `dma_unmap` of part of a mapping takes that part away from the
/// device at once; the rest stays reachable.
#[test]
fn partial_dma_unmap_takes_the_range_away() {
    const GPA: u64 = 0x4000_0000;
    const PAGE: u64 = 0x1000;
    let fd = memfd(16 * PAGE);
    let mut m = MappedMemory::default();
    m.map(&fd, 0, GPA, 16 * PAGE).expect("map");
    m.write(GPA + 5 * PAGE, &[1; 8]).expect("mapped");
    m.unmap(GPA + 4 * PAGE, 4 * PAGE, false);
    let mut b = [0u8; 8];
    assert!(
        m.read(GPA + 5 * PAGE, &mut b).is_err(),
        "unmapped range still reachable"
    );
    assert!(
        m.read(GPA + 8 * PAGE - 4, &mut b).is_err(),
        "straddles the hole"
    );
    assert!(m.read(GPA, &mut b).is_ok(), "below the hole");
    assert!(m.read(GPA + 8 * PAGE, &mut b).is_ok(), "above the hole");
    m.write(GPA + 15 * PAGE, &[2; 8]).expect("above the hole");
    // An unmap elsewhere changes nothing: two regions, below and above.
    m.unmap(GPA + 64 * PAGE, PAGE, false);
    assert!(format!("{m:?}").contains("regions: 2"), "{m:?}");
    // Unmapping the rest removes everything.
    m.unmap(GPA, 4 * PAGE, false);
    m.unmap(GPA + 8 * PAGE, 8 * PAGE, false);
    assert!(m.read(GPA, &mut b).is_err());
    assert!(m.read(GPA + 15 * PAGE, &mut b).is_err());
}
