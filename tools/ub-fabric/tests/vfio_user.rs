// SPDX-License-Identifier: GPL-2.0
//! The daemon's vfio-user path end to end, without QEMU: the crate's own
//! vfio-user client plays QEMU for two guests on the back-to-back
//! topology. Guest memory is a memfd mapped with `dma_map`, interrupts
//! are eventfds given with `set_irqs` (after an fd-less first call, as
//! QEMU does). One guest sends flits, the other receives them by DMA and
//! an MSI-X eventfd; a guest that disconnects is served again.

use std::fs::File;
use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ub_fabric::daemon::{spawn, DaemonConfig};
use ub_fabric::mem::{GuestMemory, MappedMemory};
use ub_fabric::topology::Topology;
use ub_proto::controller as reg;
use vfio_bindings::bindings::vfio::{
    VFIO_IRQ_SET_ACTION_TRIGGER, VFIO_IRQ_SET_DATA_EVENTFD, VFIO_PCI_BAR0_REGION_INDEX,
    VFIO_PCI_CONFIG_REGION_INDEX, VFIO_PCI_MSIX_IRQ_INDEX,
};
use vfio_user::Client;

const GPA: u64 = 0x4000_0000;
const MEM: u64 = 1 << 20;

fn memfd() -> File {
    // SAFETY: memfd_create with a valid C string; the result is checked.
    let fd = unsafe { libc::memfd_create(c"ub-guest".as_ptr(), 0) };
    assert!(fd >= 0);
    // SAFETY: a fresh descriptor we own.
    let f = unsafe { File::from_raw_fd(fd) };
    f.set_len(MEM).expect("size");
    f
}

fn eventfd() -> File {
    // SAFETY: eventfd returns a new descriptor (checked).
    let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK) };
    assert!(fd >= 0);
    // SAFETY: a fresh descriptor we own.
    unsafe { File::from_raw_fd(fd) }
}

struct Guest {
    c: Client,
    mem: MappedMemory,
    _fd: File,
    irq: Vec<File>,
}

impl Guest {
    fn connect(path: &std::path::Path) -> Self {
        let mut c = Client::new(path).expect("connect");
        let fd = memfd();
        c.dma_map(0, GPA, MEM, fd.as_raw_fd()).expect("dma_map");
        let mem = MappedMemory::default();
        mem.map(&fd, 0, GPA, MEM).expect("local map");
        let flags = VFIO_IRQ_SET_DATA_EVENTFD | VFIO_IRQ_SET_ACTION_TRIGGER;
        c.set_irqs(VFIO_PCI_MSIX_IRQ_INDEX, flags, 0, 1, &[])
            .expect("fd-less MSI-X setup");
        let irq = vec![eventfd(), eventfd()];
        let raw: Vec<i32> = irq.iter().map(AsRawFd::as_raw_fd).collect();
        c.set_irqs(VFIO_PCI_MSIX_IRQ_INDEX, flags, 0, 2, &raw)
            .expect("MSI-X eventfds");
        Self {
            c,
            mem,
            _fd: fd,
            irq,
        }
    }
    fn r(&mut self, off: u32) -> u32 {
        let mut b = [0u8; 4];
        self.c
            .region_read(VFIO_PCI_BAR0_REGION_INDEX, u64::from(off), &mut b)
            .expect("read");
        u32::from_le_bytes(b)
    }
    fn w(&mut self, off: u32, v: u32) {
        self.c
            .region_write(VFIO_PCI_BAR0_REGION_INDEX, u64::from(off), &v.to_le_bytes())
            .expect("write");
    }
    fn p(r: u32) -> u32 {
        reg::port_reg(0, r).expect("reg")
    }
    fn setup(&mut self) {
        self.w(reg::CTRL::OFFSET, reg::CTRL::ZERO.enable().mask());
        self.w(Self::p(reg::RING_BASE_LO::of::<reg::TxRing>()), GPA as u32);
        self.w(Self::p(reg::RING_SIZE::of::<reg::TxRing>()), 8);
        self.w(
            Self::p(reg::RING_CTRL::of::<reg::TxRing>()),
            reg::RING_CTRL::ZERO.enable().mask(),
        );
        self.w(
            Self::p(reg::RING_BASE_LO::of::<reg::RxRing>()),
            (GPA + 0x1000) as u32,
        );
        self.w(Self::p(reg::RING_SIZE::of::<reg::RxRing>()), 8);
        self.w(
            Self::p(reg::RING_CTRL::of::<reg::RxRing>()),
            reg::RING_CTRL::ZERO.enable().mask(),
        );
        for i in 0..7 {
            let d = reg::Desc {
                addr: GPA + 0x20000 + u64::from(i) * 0x1000,
                len: 2560,
                ..Default::default()
            };
            self.mem
                .write(reg::desc_addr(GPA + 0x1000, i).expect("a"), &d.encode())
                .expect("post");
        }
        self.w(Self::p(reg::RING_TAIL::of::<reg::RxRing>()), 7);
        self.w(Self::p(reg::INT_MASK::OFFSET), 0);
        self.w(
            Self::p(reg::PHY_CTRL::OFFSET),
            reg::PHY_CTRL::ZERO.enable().mask(),
        );
    }
    fn wait_irq(&self, vector: usize, timeout: Duration) -> bool {
        let start = Instant::now();
        let mut b = [0u8; 8];
        while start.elapsed() < timeout {
            if (&self.irq[vector]).read(&mut b).is_ok() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        false
    }
}

fn wait(timeout: Duration, mut f: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < timeout {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    false
}

#[test]
fn two_guests_over_vfio_user_and_reconnect() {
    let dir = std::env::temp_dir().join(format!("ub-fabric-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let cfg = DaemonConfig {
        topology: Topology::builtin("back-to-back").expect("topology"),
        socket_dir: dir.clone(),
        control: dir.join("control.sock"),
        tick: Duration::from_micros(50),
    };
    let run = spawn(&cfg).expect("daemon");
    let stop = Arc::new(AtomicBool::new(false));
    let stepper = {
        let stop = Arc::clone(&stop);
        let run = run.clone();
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                if let Ok(mut f) = run.fabric.lock() {
                    f.step(run.clock.now());
                }
                std::thread::sleep(Duration::from_micros(50));
            }
        })
    };

    let mut g0 = Guest::connect(&dir.join("vm0.sock"));
    let mut g1 = Guest::connect(&dir.join("vm1.sock"));
    let mut id = [0u8; 4];
    g0.c.region_read(VFIO_PCI_CONFIG_REGION_INDEX, 0, &mut id)
        .expect("config");
    assert_eq!(u16::from_le_bytes([id[0], id[1]]), reg::PCI_VENDOR_ID);
    assert_eq!(u16::from_le_bytes([id[2], id[3]]), reg::PCI_DEVICE_ID);
    assert_eq!(g0.r(reg::IDENT::OFFSET), reg::IDENT_VALUE);

    // The test cause raises vector 0 through the eventfd.
    g0.w(reg::GINT_MASK::OFFSET, 0);
    g0.w(reg::GINT_TEST::OFFSET, reg::GINT_CAUSE::ZERO.test().mask());
    assert!(g0.wait_irq(0, Duration::from_secs(5)), "MSI-X vector 0");

    g0.setup();
    g1.setup();
    assert!(wait(Duration::from_secs(5), || {
        g0.r(Guest::p(reg::PHY_STATUS::OFFSET)) & reg::PHY_STATUS::ZERO.link_up().mask() != 0
            && g1.r(Guest::p(reg::PHY_STATUS::OFFSET)) & reg::PHY_STATUS::ZERO.link_up().mask() != 0
    }));
    assert!(g1.wait_irq(1, Duration::from_secs(5)), "link-up interrupt");
    g1.w(Guest::p(reg::INT_CAUSE::OFFSET), reg::INT_CAUSE::FIELDS);

    // Three flits from vm0 to vm1.
    let data: Vec<u8> = (0..60u8).collect();
    g0.mem.write(GPA + 0x10000, &data).expect("buf");
    let d = reg::Desc {
        addr: GPA + 0x10000,
        len: 60,
        ..Default::default()
    };
    g0.mem.write(GPA, &d.encode()).expect("desc");
    g0.w(Guest::p(reg::RING_TAIL::of::<reg::TxRing>()), 1);
    assert!(g1.wait_irq(1, Duration::from_secs(5)), "RX interrupt");
    assert!(wait(Duration::from_secs(5), || g1
        .r(Guest::p(reg::RING_HEAD::of::<reg::RxRing>()))
        >= 1));
    let mut raw = [0u8; reg::DESC_BYTES];
    g1.mem
        .read(reg::desc_addr(GPA + 0x1000, 0).expect("a"), &mut raw)
        .expect("desc");
    let rd = reg::Desc::decode(&raw);
    assert!(rd.state().done().is_set());
    assert_eq!(rd.done_len, 60);
    let mut got = vec![0u8; 60];
    g1.mem.read(rd.addr, &mut got).expect("data");
    assert_eq!(got, data);
    assert_eq!(g0.r(Guest::p(reg::RING_HEAD::of::<reg::TxRing>())), 1);

    // vm0 goes away: its controller resets, vm1 sees LinkUp 0, and vm0
    // is served again.
    g0.c.shutdown().expect("shutdown");
    drop(g0);
    assert!(wait(Duration::from_secs(5), || {
        g1.r(Guest::p(reg::PHY_STATUS::OFFSET)) & reg::PHY_STATUS::ZERO.link_up().mask() == 0
    }));
    let mut g0 = Guest::connect(&dir.join("vm0.sock"));
    assert_eq!(g0.r(reg::IDENT::OFFSET), reg::IDENT_VALUE);
    assert_eq!(g0.r(reg::CTRL::OFFSET), 0, "reset after the disconnect");
    g0.setup();
    assert!(wait(Duration::from_secs(5), || {
        g1.r(Guest::p(reg::PHY_STATUS::OFFSET)) & reg::PHY_STATUS::ZERO.link_up().mask() != 0
    }));
    let v = ub_fabric::control::request(&cfg.control, &ub_fabric::fabric::Command::Counters)
        .expect("control socket");
    assert_eq!(v["hosts"][1]["ports"][0]["rx_flits"], 3);
    stop.store(true, Ordering::Relaxed);
    let _ = stepper.join();
    let _ = std::fs::remove_dir_all(&dir);
}
