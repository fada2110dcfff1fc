// SPDX-License-Identifier: GPL-2.0
//! The hostile mode (`Documentation/ub/fabric.rst`, "Hostile mode"): for
//! every case, the device tells exactly the documented lie `count` times
//! and is then correct again, so traffic flows; the control socket and
//! the command line arm it.

mod common;
mod support;

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::sync::{Arc, Mutex};

use common::{bring_up, fabric, run_until, MEM_BASE, MEM_SIZE};
use support::{enable_port, get_desc, preg, program_ring, put_desc};
use ub_fabric::device::{
    Controller, ControllerConfig, HostileCase, HostileError, Interrupts, STORM_BURST,
    STORM_INTERVAL_NS,
};
use ub_fabric::fabric::{Command, Fabric};
use ub_fabric::mem::FakeMemory;
use ub_fabric::topology::Topology;
use ub_proto::controller as reg;

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

const RING: u32 = 8;
const RX_BASE: u64 = MEM_BASE;
const TX_BASE: u64 = MEM_BASE + 0x800;
const BUF_LEN: u16 = reg::MAX_XFER_BYTES as u16;
const SEED: u64 = 7;
const PORT0: u16 = reg::port_vector(0);

/// Buffer `i`'s guest address.
fn buf(i: u32) -> u64 {
    MEM_BASE + 0x10000 + u64::from(i) * 0x1000
}

/// An enabled controller whose port 0 has both rings (8 entries) and is
/// up, every cause clear; messages recorded in the returned [`Irqs`].
fn device() -> (Controller, Irqs) {
    let irqs = Irqs::default();
    let mut c = Controller::new(
        ControllerConfig::default(),
        Box::new(FakeMemory::new(MEM_BASE, MEM_SIZE)),
        Box::new(irqs.clone()),
    );
    c.write32(reg::CTRL::OFFSET, reg::CTRL::ZERO.enable().mask(), 0);
    program_ring(&mut c, 0, false, RX_BASE, RING);
    program_ring(&mut c, 0, true, TX_BASE, RING);
    enable_port(&mut c, 0);
    c.update_irqs(0);
    c.write32(preg(0, reg::INT_CAUSE::OFFSET), u32::MAX, 0);
    irqs.0.lock().expect("lock").clear();
    (c, irqs)
}

fn rx_head(c: &mut Controller) -> u32 {
    c.read32(preg(0, reg::RING_HEAD::of::<reg::RxRing>()))
}

fn tx_head(c: &mut Controller) -> u32 {
    c.read32(preg(0, reg::RING_HEAD::of::<reg::TxRing>()))
}

/// Posts RX buffers in slots `from..to` (capacity `len`), tail = `to`.
fn post_rx(c: &mut Controller, from: u32, to: u32, len: u16) {
    for i in from..to {
        put_desc(c, RX_BASE, i % RING, buf(i % RING), len);
    }
    c.write32(preg(0, reg::RING_TAIL::of::<reg::RxRing>()), to % RING, 0);
}

/// Flits arrive from the wire and the device moves them into buffers.
fn arrive(c: &mut Controller, data: &[u8]) {
    c.push_rx(0, 0, data);
    c.service_rx();
}

/// Produces TX descriptor `slot` holding `data` and sends what the
/// device takes.
fn send(c: &mut Controller, slot: u32, data: &[u8]) -> Vec<u8> {
    let a = buf(RING + slot);
    c.memory_mut().write(a, data).expect("buf");
    put_desc(c, TX_BASE, slot, a, data.len() as u16);
    c.write32(
        preg(0, reg::RING_TAIL::of::<reg::TxRing>()),
        reg::ring_next(slot, RING),
        0,
    );
    let mut out = Vec::new();
    c.pull_tx(0, 4096, &mut out);
    out
}

fn read_buf(c: &mut Controller, i: u32, n: usize) -> Vec<u8> {
    let mut v = vec![0u8; n];
    c.memory_mut().read(buf(i), &mut v).expect("buf");
    v
}

/// Flits of a recognisable pattern.
fn flits(n: usize, tag: u8) -> Vec<u8> {
    (0..n * reg::FLIT_BYTES as usize)
        .map(|i| tag ^ i as u8)
        .collect()
}

fn arm(c: &mut Controller, case: HostileCase, count: u64) {
    c.set_hostile(0, case, count, SEED).expect("arm");
}

/// (injected, still armed) of `case` on port 0.
fn hostile(c: &Controller, case: HostileCase) -> (u64, u64) {
    let r = c.hostile(0).expect("port");
    (r.injected[case.name()], r.armed[case.name()])
}

/// An RX buffer completed truthfully with `data`.
fn assert_honest_rx(c: &mut Controller, slot: u32, data: &[u8]) {
    let d = get_desc(c, RX_BASE, slot);
    assert_eq!(usize::from(d.done_len), data.len(), "slot {slot}");
    assert_eq!(d.status, reg::DESC_STATUS::ok().into_raw(), "slot {slot}");
    assert_eq!(read_buf(c, slot, data.len()), data, "slot {slot} data");
}

// ----- Heads ---------------------------------------------------------------

#[test]
fn rx_head_out_of_range_then_the_truth() {
    let (mut c, _) = device();
    post_rx(&mut c, 0, 4, BUF_LEN);
    arrive(&mut c, &flits(2, 1));
    arm(&mut c, HostileCase::RxHeadOutOfRange, 3);
    let reads: Vec<u32> = (0..4).map(|_| rx_head(&mut c)).collect();
    assert_eq!(
        reads,
        [RING, u32::MAX, RING, 1],
        "three lies, then the head"
    );
    assert_eq!(hostile(&c, HostileCase::RxHeadOutOfRange), (3, 0));
    // The device's own head never moved: traffic goes on.
    arrive(&mut c, &flits(3, 2));
    assert_eq!(rx_head(&mut c), 2);
    assert_honest_rx(&mut c, 0, &flits(2, 1));
    assert_honest_rx(&mut c, 1, &flits(3, 2));
}

#[test]
fn tx_head_out_of_range_then_the_truth() {
    let (mut c, _) = device();
    assert_eq!(send(&mut c, 0, &flits(2, 3)), flits(2, 3));
    arm(&mut c, HostileCase::TxHeadOutOfRange, 2);
    assert_eq!(tx_head(&mut c), RING);
    assert_eq!(tx_head(&mut c), u32::MAX);
    assert_eq!(tx_head(&mut c), 1);
    assert_eq!(rx_head(&mut c), 0, "the other ring is not touched");
    assert_eq!(send(&mut c, 1, &flits(1, 4)), flits(1, 4));
    assert_eq!(tx_head(&mut c), 2);
    assert_eq!(hostile(&c, HostileCase::TxHeadOutOfRange), (2, 0));
}

#[test]
fn rx_head_beyond_tail_then_the_truth() {
    let (mut c, _) = device();
    post_rx(&mut c, 0, 2, BUF_LEN);
    assert_eq!(rx_head(&mut c), 0);
    arm(&mut c, HostileCase::RxHeadBeyondTail, 2);
    // Slots 0 and 1 are posted; 3 is past the tail (2).
    assert_eq!(rx_head(&mut c), 3);
    assert_eq!(rx_head(&mut c), 3);
    assert_eq!(rx_head(&mut c), 0);
    assert_eq!(hostile(&c, HostileCase::RxHeadBeyondTail), (2, 0));
    arrive(&mut c, &flits(1, 5));
    assert_eq!(rx_head(&mut c), 1);
    assert_honest_rx(&mut c, 0, &flits(1, 5));
}

/// With every buffer posted, every slot of the ring may be the head: the
/// lie waits until the driver leaves a slot unposted.
#[test]
fn rx_head_beyond_tail_waits_while_the_ring_is_full() {
    let (mut c, _) = device();
    post_rx(&mut c, 0, RING - 1, BUF_LEN);
    assert_eq!(rx_head(&mut c), 0);
    arm(&mut c, HostileCase::RxHeadBeyondTail, 1);
    assert_eq!(rx_head(&mut c), 0, "full ring: no slot outside the window");
    assert_eq!(hostile(&c, HostileCase::RxHeadBeyondTail), (0, 1));
    arrive(&mut c, &flits(1, 6));
    assert_eq!(rx_head(&mut c), 1, "the driver learns head 1 ...");
    // ... and has not re-posted slot 0: slot 0 is past the tail (7).
    assert_eq!(rx_head(&mut c), 0);
    assert_eq!(rx_head(&mut c), 1);
    assert_eq!(hostile(&c, HostileCase::RxHeadBeyondTail), (1, 0));
}

#[test]
fn tx_head_beyond_tail_then_the_truth() {
    let (mut c, _) = device();
    arm(&mut c, HostileCase::TxHeadBeyondTail, 1);
    assert_eq!(tx_head(&mut c), 1, "a descriptor never produced");
    assert_eq!(tx_head(&mut c), 0);
    assert_eq!(send(&mut c, 0, &flits(2, 7)), flits(2, 7));
    assert_eq!(tx_head(&mut c), 1);
    assert_eq!(hostile(&c, HostileCase::TxHeadBeyondTail), (1, 0));
}

// ----- Write-backs -----------------------------------------------------------

#[test]
fn done_len_too_long_then_the_truth() {
    let (mut c, _) = device();
    post_rx(&mut c, 0, 2, 640);
    post_rx(&mut c, 2, 4, BUF_LEN);
    arm(&mut c, HostileCase::DoneLenTooLong, 2);
    arrive(&mut c, &flits(2, 10));
    arrive(&mut c, &flits(2, 12));
    let too_long = (reg::MAX_XFER_BYTES + reg::FLIT_BYTES) as u16;
    for (slot, tag) in [(0, 10), (1, 12)] {
        let d = get_desc(&mut c, RX_BASE, slot);
        assert_eq!(d.done_len, too_long, "slot {slot}: above 640 and 2560");
        assert!(d.done_len > d.len);
        assert_eq!(d.status, reg::DESC_STATUS::ok().into_raw());
        assert_eq!(read_buf(&mut c, slot, 40), flits(2, tag), "real data");
    }
    arrive(&mut c, &flits(3, 14));
    assert_honest_rx(&mut c, 2, &flits(3, 14));
    assert_eq!(hostile(&c, HostileCase::DoneLenTooLong), (2, 0));
    assert_eq!(
        c.port_counters(0).expect("port").rx_flits,
        7,
        "honest count"
    );
}

#[test]
fn done_len_not_flits_then_the_truth() {
    let (mut c, _) = device();
    post_rx(&mut c, 0, 4, BUF_LEN);
    arm(&mut c, HostileCase::DoneLenNotFlits, 1);
    arrive(&mut c, &flits(2, 20));
    let d = get_desc(&mut c, RX_BASE, 0);
    assert_eq!(d.done_len, 39);
    assert_ne!(u32::from(d.done_len) % reg::FLIT_BYTES, 0);
    arrive(&mut c, &flits(2, 21));
    assert_honest_rx(&mut c, 1, &flits(2, 21));
    assert_eq!(hostile(&c, HostileCase::DoneLenNotFlits), (1, 0));
}

/// A bad RX buffer's error completion and a TX completion are not what
/// the `done_len` cases lie about: they wait for RX data.
#[test]
fn done_len_cases_wait_for_rx_data() {
    let (mut c, _) = device();
    arm(&mut c, HostileCase::DoneLenTooLong, 1);
    assert_eq!(send(&mut c, 0, &flits(1, 22)), flits(1, 22));
    assert_eq!(get_desc(&mut c, TX_BASE, 0).done_len, 20);
    put_desc(&mut c, RX_BASE, 0, buf(0), 0);
    post_rx(&mut c, 1, 2, BUF_LEN);
    arrive(&mut c, &flits(1, 23));
    assert!(get_desc(&mut c, RX_BASE, 0).state().err().is_set());
    assert_eq!(get_desc(&mut c, RX_BASE, 0).done_len, 0);
    assert_eq!(get_desc(&mut c, RX_BASE, 1).done_len, 2580);
    assert_eq!(hostile(&c, HostileCase::DoneLenTooLong), (1, 0));
}

#[test]
fn unknown_status_bits_then_the_truth() {
    let (mut c, _) = device();
    post_rx(&mut c, 0, 4, BUF_LEN);
    arm(&mut c, HostileCase::UnknownStatus, 2);
    let ok = reg::DESC_STATUS::ok().into_raw();
    let defined = reg::DESC_STATUS::FIELDS;
    assert_eq!(send(&mut c, 0, &flits(1, 30)), flits(1, 30));
    arrive(&mut c, &flits(1, 31));
    for (base, what) in [(TX_BASE, "tx"), (RX_BASE, "rx")] {
        let d = get_desc(&mut c, base, 0);
        assert_eq!(d.status & defined, ok, "{what}: DONE as usual");
        assert_eq!(d.status & !defined, 0xf8, "{what}: bits 7:3");
        assert_eq!(d.done_len, 20, "{what}");
    }
    assert_eq!(send(&mut c, 1, &flits(1, 32)), flits(1, 32));
    assert_eq!(get_desc(&mut c, TX_BASE, 1).status, ok);
    arrive(&mut c, &flits(1, 33));
    assert_honest_rx(&mut c, 1, &flits(1, 33));
    assert_eq!(hostile(&c, HostileCase::UnknownStatus), (2, 0));
}

#[test]
fn done_clear_although_the_head_passed_then_the_truth() {
    let (mut c, _) = device();
    post_rx(&mut c, 0, 4, BUF_LEN);
    arm(&mut c, HostileCase::DoneClear, 2);
    assert_eq!(send(&mut c, 0, &flits(1, 40)), flits(1, 40), "still sent");
    arrive(&mut c, &flits(1, 41));
    assert_eq!((tx_head(&mut c), rx_head(&mut c)), (1, 1), "heads passed");
    for base in [TX_BASE, RX_BASE] {
        let d = get_desc(&mut c, base, 0);
        assert!(!d.state().done().is_set());
        assert_eq!(d.done_len, 20);
    }
    assert_eq!(read_buf(&mut c, 0, 20), flits(1, 41));
    arrive(&mut c, &flits(1, 42));
    assert_honest_rx(&mut c, 1, &flits(1, 42));
    assert_eq!(hostile(&c, HostileCase::DoneClear), (2, 0));
}

/// The head moves back over the last completed buffer and its completion
/// is written again (over the status a driver cleared after consuming
/// it), then moves forward over it again: completed twice, per lie.
#[test]
fn rx_double_completion_then_the_truth() {
    let (mut c, _) = device();
    post_rx(&mut c, 0, 4, BUF_LEN);
    arrive(&mut c, &flits(2, 50));
    let done = get_desc(&mut c, RX_BASE, 0);
    arm(&mut c, HostileCase::RxDoubleCompletion, 2);
    let mut reads = Vec::new();
    for _ in 0..5 {
        // The driver consumed slot 0 and cleared its status.
        put_desc(&mut c, RX_BASE, 0, buf(0), BUF_LEN);
        reads.push(rx_head(&mut c));
        if reads.last() == Some(&0) {
            assert_eq!(get_desc(&mut c, RX_BASE, 0), done, "written again");
        }
    }
    assert_eq!(
        reads,
        [1, 0, 1, 0, 1],
        "back and forth twice, then the head"
    );
    assert_eq!(rx_head(&mut c), 1);
    assert_eq!(hostile(&c, HostileCase::RxDoubleCompletion), (2, 0));
    arrive(&mut c, &flits(1, 51));
    assert_eq!(rx_head(&mut c), 2);
    assert_honest_rx(&mut c, 1, &flits(1, 51));
}

#[test]
fn tx_double_completion_then_the_truth() {
    let (mut c, _) = device();
    arm(&mut c, HostileCase::TxDoubleCompletion, 1);
    assert_eq!(
        tx_head(&mut c),
        0,
        "nothing completed yet: nothing to repeat"
    );
    assert_eq!(send(&mut c, 0, &flits(1, 52)), flits(1, 52));
    assert_eq!(send(&mut c, 1, &flits(1, 53)), flits(1, 53));
    assert_eq!(
        [tx_head(&mut c), tx_head(&mut c), tx_head(&mut c)],
        [2, 1, 2]
    );
    assert_eq!(hostile(&c, HostileCase::TxDoubleCompletion), (1, 0));
    assert_eq!(
        c.port_counters(0).expect("port").tx_descs,
        2,
        "each sent once"
    );
}

// ----- Interrupts --------------------------------------------------------------

/// The storm fires with no cause (also masked), at most [`STORM_BURST`]
/// messages per [`STORM_INTERVAL_NS`], exactly `count` in all, and the
/// device is then quiet and idle.
#[test]
fn irq_storm_is_bounded_then_quiet() {
    let (mut c, irqs) = device();
    c.write32(preg(0, reg::INT_MASK::OFFSET), reg::INT_MASK::FIELDS, 0);
    assert!(!c.busy());
    let before = c.port_counters(0).expect("port").interrupts;
    arm(&mut c, HostileCase::IrqStorm, 20);
    assert!(c.busy(), "the daemon keeps stepping while a storm is armed");
    let mut seen = Vec::new();
    for t in [0, 1, 9_999, 10_000, 20_000, 25_000, 30_000, 40_000] {
        c.update_irqs(t);
        seen.push(irqs.on(PORT0));
        assert_eq!(c.read32(preg(0, reg::INT_CAUSE::OFFSET)), 0, "no cause");
    }
    let burst = STORM_BURST as usize;
    assert_eq!(seen, [burst, burst, burst, 2 * burst, 20, 20, 20, 20]);
    assert_eq!(STORM_INTERVAL_NS, 10_000);
    assert_eq!(hostile(&c, HostileCase::IrqStorm), (20, 0));
    assert_eq!(c.port_counters(0).expect("port").interrupts - before, 20);
    assert!(!c.busy(), "quiet again");
    assert_eq!(c.next_irq_deadline(), None);
    // A real completion raises its one message again.
    c.write32(preg(0, reg::INT_MASK::OFFSET), 0, 0);
    post_rx(&mut c, 0, 1, BUF_LEN);
    arrive(&mut c, &flits(1, 60));
    c.update_irqs(50_000);
    assert_eq!(irqs.on(PORT0), 21);
    assert_eq!(irqs.on(reg::VECTOR_GLOBAL), 0);
}

#[test]
fn irq_storm_with_causes_and_nothing_to_do() {
    let (mut c, irqs) = device();
    arm(&mut c, HostileCase::IrqStormCause, 3);
    assert_eq!(c.next_irq_deadline(), Some(0));
    c.update_irqs(0);
    assert_eq!(irqs.on(PORT0), 3);
    let cause = reg::INT_CAUSE::from_raw(c.read32(preg(0, reg::INT_CAUSE::OFFSET)));
    assert!(cause.tx_done().is_set() && cause.rx_done().is_set());
    assert_eq!((tx_head(&mut c), rx_head(&mut c)), (0, 0), "nothing done");
    c.write32(preg(0, reg::INT_CAUSE::OFFSET), u32::MAX, 0);
    c.update_irqs(STORM_INTERVAL_NS);
    assert_eq!(irqs.on(PORT0), 3, "count reached: quiet");
    assert_eq!(c.read32(preg(0, reg::INT_CAUSE::OFFSET)), 0);
    assert_eq!(hostile(&c, HostileCase::IrqStormCause), (3, 0));
}

// ----- Data and rings -----------------------------------------------------------

/// Noise for `count` buffers instead of the wire's flits, the same for the
/// same seed; the device's length and status are true.
#[test]
fn garbage_flits_are_seeded_then_the_truth() {
    let noise = |seed: u64| {
        let (mut c, _) = device();
        post_rx(&mut c, 0, 4, BUF_LEN);
        c.set_hostile(0, HostileCase::GarbageFlits, 2, seed)
            .expect("arm");
        let wire = [flits(3, 70), flits(2, 71), flits(2, 72)];
        for w in &wire {
            arrive(&mut c, w);
        }
        let got: Vec<Vec<u8>> = (0..2)
            .map(|i| {
                let d = get_desc(&mut c, RX_BASE, i);
                assert_eq!(usize::from(d.done_len), wire[i as usize].len());
                assert_eq!(d.status, reg::DESC_STATUS::ok().into_raw());
                read_buf(&mut c, i, wire[i as usize].len())
            })
            .collect();
        for (g, w) in got.iter().zip(&wire) {
            assert_ne!(g, w, "not the wire's flits");
        }
        assert_honest_rx(&mut c, 2, &wire[2]);
        assert_eq!(hostile(&c, HostileCase::GarbageFlits), (2, 0));
        assert_eq!(c.rx_backlog(0), 0, "the wire's flits were consumed");
        got
    };
    assert_eq!(noise(SEED), noise(SEED), "deterministic");
    assert_ne!(noise(SEED), noise(SEED + 1), "from the seed");
}

/// The RING_DMA halt on command: nothing is consumed; once the driver
/// restarts the ring the data arrives.
#[test]
fn ring_dma_halts_until_the_driver_restarts_the_ring() {
    let (mut c, _) = device();
    post_rx(&mut c, 0, 2, BUF_LEN);
    arm(&mut c, HostileCase::RingDma, 1);
    arrive(&mut c, &flits(2, 80));
    let ctrl = preg(0, reg::RING_CTRL::of::<reg::RxRing>());
    assert!(reg::RING_CTRL::from_raw(c.read32(ctrl)).halted().is_set());
    let err = reg::ERR_STATUS::from_raw(c.read32(preg(0, reg::ERR_STATUS::OFFSET)));
    assert!(err.ring_dma().is_set());
    assert_eq!(rx_head(&mut c), 0);
    assert_eq!(c.port_counters(0).expect("port").ring_dma_errors, 1);
    // The checklist's recovery: disable, re-enable, post again.
    c.write32(ctrl, 0, 0);
    c.write32(ctrl, reg::RING_CTRL::ZERO.enable().mask(), 0);
    post_rx(&mut c, 0, 2, BUF_LEN);
    c.service_rx();
    assert_honest_rx(&mut c, 0, &flits(2, 80));
    assert_eq!(hostile(&c, HostileCase::RingDma), (1, 0));
}

// ----- Arming ---------------------------------------------------------------------

#[test]
fn arming_survives_a_reset_and_count_zero_disarms() {
    let (mut c, _) = device();
    arm(&mut c, HostileCase::UnknownStatus, 4);
    c.write32(reg::CTRL::OFFSET, reg::CTRL::ZERO.reset().mask(), 0);
    assert_eq!(
        hostile(&c, HostileCase::UnknownStatus),
        (0, 4),
        "fabric state"
    );
    arm(&mut c, HostileCase::UnknownStatus, 0);
    assert_eq!(hostile(&c, HostileCase::UnknownStatus), (0, 0));
    assert_eq!(
        c.set_hostile(2, HostileCase::IrqStorm, 1, 0),
        Err(HostileError::NoPort(2))
    );
    assert_eq!(
        c.set_hostile(0, HostileCase::IrqStorm, 1_000_001, 0),
        Err(HostileError::Count(1_000_001))
    );
    let r = c.hostile(0).expect("port");
    assert!(
        r.armed.values().all(|&n| n == 0),
        "refusals changed nothing"
    );
    assert_eq!(r.injected.len(), HostileCase::ALL.len());
    assert!(c.hostile(2).is_none());
}

#[test]
fn case_names_are_one_vocabulary() {
    for case in HostileCase::ALL {
        assert_eq!(case.name().parse::<HostileCase>(), Ok(case));
        assert_eq!(serde_json::json!(case), case.name(), "serde and name()");
    }
    let err = "rx-head".parse::<HostileCase>().expect_err("unknown");
    assert!(err.to_string().contains("ring-dma"), "{err}");
}

// ----- With the driver double: traffic after the lies ---------------------------

/// The cases the driver double survives as it is (it checks neither
/// status bits nor DONE, polls rather than trusting interrupts, and hands
/// garbage to its link engine, whose retry repairs it): over the default
/// topology, host 1's port 0 lies `count` times while 60 packets come in,
/// and every packet arrives, in order.
#[test]
fn traffic_flows_through_and_after_the_lies() {
    for case in [
        HostileCase::GarbageFlits,
        HostileCase::UnknownStatus,
        HostileCase::DoneClear,
        HostileCase::IrqStorm,
        HostileCase::IrqStormCause,
    ] {
        let topo = Topology::builtin("default").expect("default");
        let mut f = fabric(&topo);
        let (mut ds, t0) = bring_up(&mut f);
        let cmd = Command::Hostile {
            port: "vm1.0".into(),
            case,
            count: Some(5),
        };
        f.apply(&cmd, t0).expect("armed");
        ds[0].send(0, 1, Some(0), 3, 60, 200, 0);
        let t = run_until(&mut f, &mut ds, t0, 1_000, t0 + 50_000_000, |_, ds| {
            ds[1].received() >= 60
        });
        let got: Vec<u32> = ds[1].ports[0].sink.got.iter().map(|&(_, s)| s).collect();
        assert_eq!(got, (0..60).collect::<Vec<_>>(), "{case} (t={t})");
        let v = f.counters();
        let h = &v["hosts"][1]["ports"][0]["hostile"];
        assert_eq!(h["injected"][case.name()], 5, "{case}: {h}");
        assert_eq!(h["armed"][case.name()], 0, "{case}: {h}");
        let others = &v["hosts"][0]["ports"][0]["hostile"]["injected"];
        assert!(
            others
                .as_object()
                .is_some_and(|m| m.values().all(|n| n == 0)),
            "only vm1.0 lies: {others}"
        );
        if case == HostileCase::GarbageFlits {
            let link = ds[1].ports[0].link.counters();
            assert!(
                link.rx_crc_errors + link.rx_malformed > 0,
                "the link saw the noise"
            );
        }
    }
}

/// A storm on a running fabric: each step sends at most one burst per
/// port, whatever the interval between steps.
#[test]
fn storm_in_the_fabric_is_bounded_per_step() {
    let topo = Topology::builtin("back-to-back").expect("topology");
    let mut f = fabric(&topo);
    let (mut ds, t0) = bring_up(&mut f);
    let cmd = Command::Hostile {
        port: "vm0.0".into(),
        case: HostileCase::IrqStorm,
        count: Some(100),
    };
    f.apply(&cmd, t0).expect("armed");
    let irqs = |f: &Fabric| f.hosts[0].ctrl.port_counters(0).expect("port").interrupts;
    let mut now = t0;
    let mut steps = 0;
    while f.hosts[0].ctrl.hostile(0).expect("port").armed["irq-storm"] > 0 {
        let before = irqs(&f);
        for d in &mut ds {
            d.poll(&mut f, now);
        }
        f.step(now);
        assert!(irqs(&f) - before <= u64::from(STORM_BURST) + 1, "bounded");
        now += STORM_INTERVAL_NS;
        steps += 1;
        assert!(steps < 100, "the storm ends");
    }
    assert_eq!(steps, 100usize.div_ceil(STORM_BURST as usize));
}

// ----- Control socket and command line ------------------------------------------

/// Serves `fabric`'s control socket at a fresh path.
fn serve(fabric: Fabric) -> (std::path::PathBuf, Arc<Mutex<Fabric>>) {
    let dir = std::env::temp_dir().join(format!(
        "ub-fabric-hostile-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    std::fs::create_dir_all(&dir).expect("dir");
    let path = dir.join("control.sock");
    let _ = std::fs::remove_file(&path);
    let listener = std::os::unix::net::UnixListener::bind(&path).expect("bind");
    let fabric = Arc::new(Mutex::new(fabric));
    let served = Arc::clone(&fabric);
    let clock = ub_fabric::vfio::Clock(std::time::Instant::now());
    std::thread::spawn(move || ub_fabric::control::serve_listener(listener, served, clock));
    (path, fabric)
}

#[test]
fn control_socket_arms_and_refuses() {
    let topo = Topology::builtin("default").expect("default");
    let (path, fabric) = serve(common::fabric(&topo));
    let mut s = UnixStream::connect(&path).expect("connect");
    let mut lines = BufReader::new(s.try_clone().expect("clone")).lines();
    let mut ask = |line: &str| -> serde_json::Value {
        writeln!(s, "{line}").expect("send");
        let answer = lines.next().expect("answer").expect("line");
        serde_json::from_str(&answer).expect("json")
    };
    let v = ask(r#"{"cmd":"hostile","port":"vm0.1","case":"ring-dma","count":2}"#);
    assert_eq!(v["ok"], true, "{v}");
    let v = ask(r#"{"cmd":"hostile","port":"vm0.1","case":"ring-dma!"}"#);
    assert_eq!(v["ok"], false, "{v}");
    let v = ask(r#"{"cmd":"counters"}"#);
    assert_eq!(v["hosts"][0]["ports"][1]["hostile"]["armed"]["ring-dma"], 2);
    let f = fabric.lock().expect("lock");
    assert_eq!(
        f.hosts[0].ctrl.hostile(1).expect("port").armed["ring-dma"],
        2
    );
}

#[test]
fn command_line_arms_and_reports_errors() {
    let topo = Topology::builtin("default").expect("default");
    let (path, fabric) = serve(common::fabric(&topo));
    let run = |args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_ub-fabric"))
            .arg("hostile")
            .arg("--control")
            .arg(&path)
            .args(args)
            .output()
            .expect("runs")
    };
    let out = run(&["vm1.0", "done-len-too-long", "--count", "3"]);
    assert!(out.status.success(), "{out:?}");
    let answer: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(answer["armed"], 3, "{answer}");
    assert_eq!(
        fabric.lock().expect("lock").hosts[1]
            .ctrl
            .hostile(0)
            .expect("port")
            .armed["done-len-too-long"],
        3
    );
    let out = run(&["sw0.0", "irq-storm"]);
    assert_eq!(out.status.code(), Some(1), "a switch port is refused");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("sw0.0"),
        "{out:?}"
    );
    let out = run(&["vm1.0", "bogus"]);
    assert_eq!(out.status.code(), Some(2), "a usage error");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("irq-storm"),
        "{out:?}"
    );
}
