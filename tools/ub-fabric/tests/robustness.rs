// SPDX-License-Identifier: GPL-2.0
//! Untrusted guest input: garbage descriptors, DMA outside guest memory,
//! doorbell storms, malformed blocks and bad register accesses set an
//! error and a counter, never panic, and leave the other ports working.

mod common;
mod support;

use common::{bring_up, fabric, run_until, MEM_BASE, MEM_SIZE};
use support::{enable_port, get_desc, preg, program_ring, put_desc};
use ub_fabric::device::{Controller, ControllerConfig, RecordingIrqs};
use ub_fabric::mem::FakeMemory;
use ub_fabric::rng::Rng;
use ub_fabric::topology::Topology;
use ub_proto::controller as reg;

fn controller() -> Controller {
    let mut c = Controller::new(
        ControllerConfig::default(),
        Box::new(FakeMemory::new(MEM_BASE, MEM_SIZE)),
        Box::new(RecordingIrqs::default()),
    );
    c.write32(reg::CTRL::OFFSET, reg::CTRL::ZERO.enable().mask(), 0);
    c
}

fn setup_tx(c: &mut Controller, port: u32, base: u64, size: u32) {
    program_ring(c, port, true, base, size);
    enable_port(c, port);
}

#[test]
fn garbage_tx_descriptors_are_skipped_with_errors() {
    let mut c = controller();
    let base = MEM_BASE;
    setup_tx(&mut c, 0, base, 8);
    let buf = MEM_BASE + 0x1000;
    let cases = [
        (buf, 0u16, 0u32),                        // empty
        (buf, 7, 0),                              // not whole flits
        (buf, u16::MAX, 0),                       // too long
        (0xdead_0000_0000, 40, 1),                // outside guest memory
        (u64::MAX - 10, 40, 1),                   // wraps around
        (MEM_BASE + MEM_SIZE as u64 - 20, 40, 1), // straddles the end
        (buf, 40, u32::MAX),                      // good one
    ];
    for (i, &(addr, len, _)) in cases.iter().enumerate() {
        put_desc(&mut c, base, i as u32, addr, len);
    }
    c.write32(
        preg(0, reg::RING_TAIL::of::<reg::TxRing>()),
        cases.len() as u32,
        0,
    );
    let mut out = Vec::new();
    c.pull_tx(0, 1 << 20, &mut out);
    assert_eq!(out.len(), 40, "only the good descriptor reached the wire");
    assert_eq!(
        c.read32(preg(0, reg::RING_HEAD::of::<reg::TxRing>())),
        cases.len() as u32
    );
    for (i, &(_, _, code)) in cases.iter().enumerate() {
        let d = get_desc(&mut c, base, i as u32);
        assert!(d.state().done().is_set());
        if code == u32::MAX {
            assert_eq!(d.error_code(), None);
            assert_eq!(d.done_len, 40);
        } else {
            assert_eq!(d.error_code(), Some(code as u8), "case {i}");
        }
    }
    let err = c.read32(preg(0, reg::ERR_STATUS::OFFSET));
    assert_eq!(
        err,
        reg::ERR_STATUS::ZERO.tx_desc().mask() | reg::ERR_STATUS::ZERO.tx_dma().mask()
    );
    assert_eq!(c.read32(preg(0, reg::ERR_COUNT::OFFSET)), 6);
    assert!(c.read32(preg(0, reg::INT_CAUSE::OFFSET)) & reg::INT_CAUSE::ZERO.error().mask() != 0);
    c.update_irqs(0);
    assert!(c.read32(reg::GERR::OFFSET) & reg::GERR::ZERO.port().mask() != 0);
    // W1C.
    c.write32(preg(0, reg::ERR_STATUS::OFFSET), err, 0);
    assert_eq!(c.read32(preg(0, reg::ERR_STATUS::OFFSET)), 0);
}

#[test]
fn unreadable_ring_halts_only_that_ring() {
    let mut c = controller();
    setup_tx(&mut c, 0, 0x7000_0000_0000, 8); // ring outside memory
    setup_tx(&mut c, 1, MEM_BASE, 8);
    c.write32(preg(0, reg::RING_TAIL::of::<reg::TxRing>()), 3, 0);
    put_desc(&mut c, MEM_BASE, 0, MEM_BASE + 0x1000, 20);
    c.write32(preg(1, reg::RING_TAIL::of::<reg::TxRing>()), 1, 0);
    let mut out = Vec::new();
    c.pull_tx(0, 4096, &mut out);
    assert!(out.is_empty());
    assert!(
        c.read32(preg(0, reg::RING_CTRL::of::<reg::TxRing>()))
            & reg::RING_CTRL::ZERO.halted().mask()
            != 0
    );
    assert!(
        c.read32(preg(0, reg::ERR_STATUS::OFFSET)) & reg::ERR_STATUS::ZERO.ring_dma().mask() != 0
    );
    c.pull_tx(1, 4096, &mut out);
    assert_eq!(out.len(), 20, "port 1 unaffected");
    assert_eq!(c.read32(preg(1, reg::ERR_STATUS::OFFSET)), 0);
    // Disable clears the halt.
    c.write32(preg(0, reg::RING_CTRL::of::<reg::TxRing>()), 0, 0);
    assert_eq!(c.read32(preg(0, reg::RING_CTRL::of::<reg::TxRing>())), 0);
}

#[test]
fn bad_ring_configuration_is_refused() {
    let mut c = controller();
    for (base, size) in [
        (MEM_BASE, 7u32),
        (MEM_BASE, 8192),
        (MEM_BASE + 8, 8),
        (u64::MAX - 15, 64),
    ] {
        program_ring(&mut c, 0, true, base, size);
        assert_eq!(
            c.read32(preg(0, reg::RING_CTRL::of::<reg::TxRing>()))
                & reg::RING_CTRL::ZERO.enable().mask(),
            0,
            "{base:#x}/{size}"
        );
    }
    assert!(
        c.read32(preg(0, reg::ERR_STATUS::OFFSET)) & reg::ERR_STATUS::ZERO.ring_cfg().mask() != 0
    );
    assert_eq!(c.port_counters(0).expect("port").ring_cfg_errors, 4);
    // Ring registers are read-only while the ring runs.
    setup_tx(&mut c, 0, MEM_BASE, 8);
    c.write32(preg(0, reg::RING_SIZE::of::<reg::TxRing>()), 16, 0);
    assert_eq!(c.read32(preg(0, reg::RING_SIZE::of::<reg::TxRing>())), 8);
    assert!(
        c.read32(preg(0, reg::ERR_STATUS::OFFSET)) & reg::ERR_STATUS::ZERO.ring_busy().mask() != 0
    );
}

#[test]
fn doorbell_storm_is_bounded() {
    let mut c = controller();
    setup_tx(&mut c, 0, MEM_BASE, 64);
    for i in 0..64 {
        put_desc(&mut c, MEM_BASE, i, MEM_BASE + 0x10000, 20);
    }
    let mut rng = Rng::new(5, 0);
    let start = std::time::Instant::now();
    for _ in 0..1_000_000 {
        let v = rng.below(80) as u32; // some beyond the ring
        c.bar_write(
            u64::from(preg(0, reg::RING_TAIL::of::<reg::TxRing>())),
            &v.to_le_bytes(),
            0,
        );
    }
    let storm = start.elapsed();
    let mut out = Vec::new();
    c.pull_tx(0, usize::MAX, &mut out);
    let pc = c.port_counters(0).expect("port");
    eprintln!("1e6 doorbells in {storm:?}: {pc:?}");
    assert_eq!(pc.doorbells, 1_000_000);
    assert!(pc.bad_doorbells > 100_000);
    assert!(
        pc.tx_descs <= u64::from(c.config().budget),
        "work per call is bounded"
    );
    assert!(storm.as_secs() < 20);
}

#[test]
fn bad_register_accesses_are_counted() {
    let mut c = controller();
    let mut b = [0u8; 4];
    c.bar_read(2, &mut b); // unaligned
    c.bar_read(0, &mut [0u8; 2]); // wrong size
    c.bar_write(0x20, &[1], 0); // wrong size
    c.bar_write(u64::from(reg::BAR0_SIZE), &[0; 4], 0); // outside
    c.bar_write(0x7ff0, &[0; 4], 0); // hole
    c.bar_read(0x1_0000_0000, &mut b); // far outside
    assert_eq!(c.read32(reg::BAD_ACCESS::OFFSET), 6);
    assert!(c.read32(reg::GERR::OFFSET) & reg::GERR::ZERO.bad_access().mask() != 0);
    // Ports beyond the controller's count are holes too.
    c.write32(preg(7, reg::RING_TAIL::of::<reg::TxRing>()), 1, 0);
    assert_eq!(c.read32(reg::BAD_ACCESS::OFFSET), 7);
    // Scratch and identification still work.
    c.write32(reg::SCRATCH::OFFSET, 0x1234_5678, 0);
    assert_eq!(c.read32(reg::SCRATCH::OFFSET), 0x1234_5678);
    assert_eq!(c.read32(reg::IDENT::OFFSET), reg::IDENT_VALUE);
}

#[test]
fn random_register_fuzz_never_panics() {
    let mut c = controller();
    let mut rng = Rng::new(99, 1);
    let mut out = Vec::new();
    for i in 0..200_000u64 {
        let off = if rng.chance(0.7) {
            u64::from(reg::PORT_BASE) + rng.below(0x200)
        } else {
            rng.below(0x1_1000)
        };
        let v = rng.next_u64() as u32;
        let len = [4usize, 8, 1, 2][rng.below(4) as usize];
        if rng.chance(0.5) {
            c.bar_write(off & !3, &v.to_le_bytes().repeat(2)[..len], i);
        } else {
            let mut b = vec![0; len];
            c.bar_read(off, &mut b);
        }
        if i % 64 == 0 {
            let p = rng.below(3) as usize;
            c.set_link(p, rng.chance(0.9));
            out.clear();
            c.pull_tx(p, 8192, &mut out);
            let garbage: Vec<u8> = (0..rng.below(200)).map(|_| rng.next_u64() as u8).collect();
            c.push_rx(p, rng.below(3) as u32, &garbage);
            c.service_rx();
            c.update_irqs(i);
        }
    }
    assert_eq!(c.read32(reg::IDENT::OFFSET), reg::IDENT_VALUE);
}

#[test]
fn rx_buffers_outside_memory_are_errors() {
    let mut c = controller();
    program_ring(&mut c, 0, false, MEM_BASE, 8);
    enable_port(&mut c, 0);
    put_desc(&mut c, MEM_BASE, 0, 0x10, 640);
    put_desc(&mut c, MEM_BASE, 1, MEM_BASE + 0x1000, 640);
    c.write32(preg(0, reg::RING_TAIL::of::<reg::RxRing>()), 2, 0);
    c.push_rx(0, 0, &[0xab; 100]);
    c.service_rx();
    let d0 = get_desc(&mut c, MEM_BASE, 0);
    let d1 = get_desc(&mut c, MEM_BASE, 1);
    assert_eq!(d0.error_code(), Some(2));
    assert_eq!(d1.done_len, 100, "the data went to the next good buffer");
    assert_eq!(c.port_counters(0).expect("port").rx_bad_desc, 1);
}

#[test]
fn malformed_blocks_and_bad_dma_leave_other_ports_working() {
    let topo = Topology::builtin("default").expect("default");
    let mut f = fabric(&topo);
    let (mut ds, t0) = bring_up(&mut f);
    // Port 1 carries real traffic to vm1 over plane 1.
    ds[0].send(1, 1, Some(1), 5, 300, 128, 0);
    // Port 0 sends garbage: random flits, bad lengths, DMA outside memory.
    let mut rng = Rng::new(3, 3);
    let mut now = t0;
    for i in 0..200 {
        let flits = 1 + rng.below(40) as usize;
        let junk: Vec<u8> = (0..flits * 20).map(|_| rng.next_u64() as u8).collect();
        match i % 4 {
            0 | 1 => ds[0].raw_tx(&mut f, 0, &junk, None, None, now),
            2 => ds[0].raw_tx(&mut f, 0, &junk, Some(0xffff_0000_0000), None, now),
            _ => ds[0].raw_tx(&mut f, 0, &junk, None, Some(13), now),
        }
        now = run_until(&mut f, &mut ds, now, 1_000, now + 3_000, |_, _| false);
    }
    let t = run_until(&mut f, &mut ds, now, 1_000, now + 20_000_000, |_, ds| {
        ds[1].received() >= 300
    });
    let got: Vec<u32> = ds[1].ports[1]
        .sink
        .got
        .iter()
        .filter(|(fl, _)| *fl == 5)
        .map(|(_, s)| *s)
        .collect();
    assert_eq!(
        got,
        (0..300).collect::<Vec<_>>(),
        "port 1 traffic intact (t={t})"
    );
    let pc = f.hosts[0].ctrl.port_counters(0).expect("port");
    assert!(pc.tx_bad_desc > 0 && pc.tx_dma_errors > 0, "{pc:?}");
    let v = f.counters();
    let sw0p0 = &v["switches"][0]["ports"][0]["link"];
    let bad = sw0p0["crc_errors"].as_u64().unwrap_or(0) + sw0p0["malformed"].as_u64().unwrap_or(0);
    eprintln!("garbage into sw0.0: {sw0p0}");
    assert!(bad > 0, "the switch port saw the malformed blocks");
    assert_eq!(f.hosts[0].ctrl.port_counters(1).expect("port").errors, 0);
}

/// A guest that never posts an RX buffer while traffic and losses keep
/// arriving: the FIFO fills, and every further arrival is a gap the driver
/// must hear about. Consecutive gaps are one entry, so the device's memory
/// stays bounded (it grew by an entry per arrival), and the gap still
/// counts every flit that did not fit or was lost.
#[test]
fn a_guest_that_posts_no_rx_buffer_cannot_grow_the_device() {
    let mut c = Controller::new(
        ControllerConfig {
            rx_fifo_bytes: 1024,
            ..ControllerConfig::default()
        },
        Box::new(FakeMemory::new(MEM_BASE, MEM_SIZE)),
        Box::new(RecordingIrqs::default()),
    );
    c.write32(reg::CTRL::OFFSET, reg::CTRL::ZERO.enable().mask(), 0);
    enable_port(&mut c, 0);
    let flit = reg::FLIT_BYTES as usize;
    let two_flits = vec![0xa5u8; 2 * flit];
    for i in 0..100_000u32 {
        c.push_rx(0, i % 3, &two_flits);
    }
    // What fits (51 whole flits, the last arrival split), then one gap.
    let held = 1024 / flit;
    assert!(
        c.rx_segments(0) <= held + 1,
        "{} segments",
        c.rx_segments(0)
    );
    assert_eq!(c.rx_backlog(0), held * flit);
    let pc = c.port_counters(0).expect("port 0");
    assert_eq!(
        pc.rx_nobuf_flits,
        200_000 - held as u64,
        "every flit that did not fit"
    );
    assert_eq!(
        pc.rx_lost_flits,
        (0..100_000u64).map(|i| i % 3).sum::<u64>()
    );
}
