// SPDX-License-Identifier: GPL-2.0
//! The vfio-user server of one emulated controller: PCI configuration
//! space (IDs, class code, MSI-X capability, BAR0), BAR0 accesses handed
//! to the device model, DMA through the memory QEMU maps, MSI-X through
//! eventfds. After a guest disconnects, the server resets its controller
//! and listens again; other controllers are untouched.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use ub_proto::controller as reg;
use vfio_bindings::bindings::vfio::{
    vfio_region_info, VFIO_IRQ_INFO_EVENTFD, VFIO_IRQ_SET_ACTION_TRIGGER,
    VFIO_IRQ_SET_DATA_EVENTFD, VFIO_IRQ_SET_DATA_NONE, VFIO_PCI_BAR0_REGION_INDEX,
    VFIO_PCI_CONFIG_REGION_INDEX, VFIO_PCI_MSIX_IRQ_INDEX, VFIO_PCI_NUM_IRQS, VFIO_PCI_NUM_REGIONS,
    VFIO_REGION_INFO_FLAG_READ, VFIO_REGION_INFO_FLAG_WRITE,
};
use vfio_user::{DmaMapFlags, DmaUnmapFlags, IrqInfo, Server, ServerBackend, ServerRegion};

use crate::device::Interrupts;
use crate::fabric::Fabric;
use crate::mem::MappedMemory;

/// Size of the configuration space region.
pub const CONFIG_SIZE: usize = 256;
/// The type-0 configuration header and the MSI-X capability (PCI Local
/// Bus 3.0 §6.1, §6.8.2), declared like the controller's registers.
mod cfg {
    ub_proto::ub_define_registers! {
        /// Vendor and device ID (RO).
        pub(super) ID(u32) @ 0x00 {
            31:16 device;
            15:0 vendor;
        }
        /// Command (bits 15:0) and status (bits 31:16).
        pub(super) COMMAND(u32) @ 0x04 {
            /// Status: a capability list is present.
            20:20 cap_list;
            10:10 intx_disable;
            2:2 bus_master;
            1:1 memory;
            0:0 io;
        }
        /// Revision and class code (RO).
        pub(super) CLASS(u32) @ 0x08 {
            31:8 class_code;
            7:0 revision;
        }
        /// Cache line size and friends.
        pub(super) MISC(u32) @ 0x0c {
            7:0 cache_line;
        }
        /// BAR0: 32-bit non-prefetchable memory (type and flags 0).
        pub(super) BAR0(u32) @ 0x10 {
            31:4 addr;
        }
        /// Subsystem vendor and device ID (RO).
        pub(super) SUBSYS(u32) @ 0x2c {
            31:16 device;
            15:0 vendor;
        }
        /// First capability.
        pub(super) CAP_PTR(u32) @ 0x34 {
            7:0 ptr;
        }
        /// Interrupt pin (0: no INTx) and line.
        pub(super) INTR(u32) @ 0x3c {
            15:8 pin;
            7:0 line;
        }
        /// MSI-X capability header and message control.
        pub(super) MSIX_CTRL(u32) @ 0x40 {
            31:31 enable;
            30:30 function_mask;
            /// Vectors minus one.
            26:16 table_size;
            15:8 next;
            7:0 id;
        }
        /// MSI-X table offset (8-byte aligned, as is) and BAR.
        pub(super) MSIX_TABLE(u32) @ 0x44 {
            31:3 offset;
            2:0 bir;
        }
        /// MSI-X PBA offset (8-byte aligned, as is) and BAR.
        pub(super) MSIX_PBA(u32) @ 0x48 {
            31:3 offset;
            2:0 bir;
        }
    }

    /// The MSI-X capability ID.
    pub(super) const MSIX_ID: u32 = 0x11;
}

/// Offset of the MSI-X capability.
pub const MSIX_CAP: usize = cfg::MSIX_CTRL::OFFSET as usize;

/// Type-0 PCI configuration space with the registers the guest may write.
#[derive(Debug, Clone)]
pub struct ConfigSpace {
    bytes: [u8; CONFIG_SIZE],
    wmask: [u8; CONFIG_SIZE],
}

impl ConfigSpace {
    /// The configuration space of a controller with `vectors` MSI-X
    /// vectors.
    pub fn new(vectors: u16) -> Self {
        let mut c = Self {
            bytes: [0; CONFIG_SIZE],
            wmask: [0; CONFIG_SIZE],
        };
        let id = |vendor: u16, device: u16| {
            cfg::ID::ZERO
                .vendor()
                .set(vendor)
                .device()
                .set(device)
                .into_raw()
        };
        c.put32(
            cfg::ID::OFFSET,
            id(reg::PCI_VENDOR_ID, reg::PCI_DEVICE_ID),
            0,
        );
        c.put32(
            cfg::SUBSYS::OFFSET,
            id(reg::PCI_VENDOR_ID, reg::PCI_SUBSYS_DEVICE_ID),
            0,
        );
        let cmd = cfg::COMMAND::ZERO;
        c.put32(
            cfg::COMMAND::OFFSET,
            cmd.cap_list().set(true).into_raw(),
            cmd.io().mask()
                | cmd.memory().mask()
                | cmd.bus_master().mask()
                | cmd.intx_disable().mask(),
        );
        let class = cfg::CLASS::ZERO
            .revision()
            .set(reg::PCI_REVISION)
            .class_code()
            .set(reg::PCI_CLASS_CODE);
        c.put32(cfg::CLASS::OFFSET, class.into_raw(), 0);
        c.put32(cfg::MISC::OFFSET, 0, cfg::MISC::ZERO.cache_line().mask());
        // The address bits above the BAR's size are writable (BAR sizing).
        c.put32(cfg::BAR0::OFFSET, 0, !(reg::BAR0_SIZE - 1));
        c.put32(
            cfg::CAP_PTR::OFFSET,
            cfg::CAP_PTR::ZERO
                .ptr()
                .set(cfg::MSIX_CTRL::OFFSET)
                .into_raw(),
            0,
        );
        // No INTx pin: MSI-X only.
        c.put32(cfg::INTR::OFFSET, 0, cfg::INTR::ZERO.line().mask());
        let msix = cfg::MSIX_CTRL::ZERO;
        c.put32(
            cfg::MSIX_CTRL::OFFSET,
            msix.id()
                .set(cfg::MSIX_ID)
                .table_size()
                .set(vectors.saturating_sub(1))
                .into_raw(),
            msix.enable().mask() | msix.function_mask().mask(),
        );
        // Table and PBA in BAR0 (BIR 0) at 8-byte aligned offsets, which
        // the register holds as they are, BIR in the low bits.
        let in_bar0 = |off: u32| cfg::MSIX_TABLE::from_raw(off).bir().set(0u32).into_raw();
        c.put32(cfg::MSIX_TABLE::OFFSET, in_bar0(reg::MSIX_TABLE_OFFSET), 0);
        c.put32(cfg::MSIX_PBA::OFFSET, in_bar0(reg::MSIX_PBA_OFFSET), 0);
        c
    }

    /// Sets the 32-bit register at `off` to `v`, with writable bits `wmask`.
    fn put32(&mut self, off: u32, v: u32, wmask: u32) {
        let o = off as usize;
        self.bytes[o..o + 4].copy_from_slice(&v.to_le_bytes());
        self.wmask[o..o + 4].copy_from_slice(&wmask.to_le_bytes());
    }

    fn get32(&self, off: u32) -> u32 {
        let mut b = [0u8; 4];
        self.read(u64::from(off), &mut b);
        u32::from_le_bytes(b)
    }

    /// Reads `data.len()` bytes at `off` (out of range reads as zero).
    pub fn read(&self, off: u64, data: &mut [u8]) {
        for (i, b) in data.iter_mut().enumerate() {
            *b = usize::try_from(off)
                .ok()
                .and_then(|o| o.checked_add(i))
                .and_then(|o| self.bytes.get(o))
                .copied()
                .unwrap_or(0);
        }
    }

    /// Writes through the write mask.
    pub fn write(&mut self, off: u64, data: &[u8]) {
        for (i, &b) in data.iter().enumerate() {
            let Some(o) = usize::try_from(off).ok().and_then(|o| o.checked_add(i)) else {
                return;
            };
            if o >= CONFIG_SIZE {
                return;
            }
            let m = self.wmask[o];
            self.bytes[o] = (self.bytes[o] & !m) | (b & m);
        }
    }

    /// Whether MSI-X is enabled.
    pub fn msix_enabled(&self) -> bool {
        cfg::MSIX_CTRL::from_raw(self.get32(cfg::MSIX_CTRL::OFFSET))
            .enable()
            .is_set()
    }

    /// MSI-X vectors the capability announces.
    pub fn msix_vectors(&self) -> u16 {
        let ctrl = cfg::MSIX_CTRL::from_raw(self.get32(cfg::MSIX_CTRL::OFFSET));
        (ctrl.table_size().get() + 1) as u16
    }
}

/// MSI-X through eventfds QEMU passed with `set_irqs`.
#[derive(Debug, Clone, Default)]
pub struct EventfdIrqs {
    fds: Arc<Mutex<Vec<Option<File>>>>,
}

impl EventfdIrqs {
    /// A sink for `vectors` vectors, none connected yet.
    pub fn new(vectors: u16) -> Self {
        Self {
            fds: Arc::new(Mutex::new((0..vectors).map(|_| None).collect())),
        }
    }

    /// Connects (`Some`) or disconnects vectors from `start`.
    pub fn set(&self, start: u32, fds: Vec<Option<File>>) {
        if let Ok(mut v) = self.fds.lock() {
            for (i, f) in fds.into_iter().enumerate() {
                if let Some(slot) = v.get_mut(start as usize + i) {
                    *slot = f;
                }
            }
        }
    }

    /// Disconnects every vector.
    pub fn clear(&self) {
        if let Ok(mut v) = self.fds.lock() {
            for s in v.iter_mut() {
                *s = None;
            }
        }
    }
}

impl Interrupts for EventfdIrqs {
    fn raise(&mut self, vector: u16) {
        if let Ok(v) = self.fds.lock() {
            if let Some(Some(mut f)) = v.get(usize::from(vector)).map(Option::as_ref) {
                let _ = f.write_all(&1u64.to_le_bytes());
            }
        }
    }
}

/// Time since the daemon started, the fabric's clock.
#[derive(Debug, Clone, Copy)]
pub struct Clock(pub Instant);

impl Clock {
    /// Nanoseconds since start.
    pub fn now(&self) -> u64 {
        self.0.elapsed().as_nanos() as u64
    }
}

/// Wakes the thread that steps the fabric.
#[derive(Debug, Clone, Default)]
pub struct Kick(Arc<Mutex<Option<std::thread::Thread>>>);

impl Kick {
    /// Registers the calling thread as the one to wake.
    pub fn register(&self) {
        if let Ok(mut t) = self.0.lock() {
            *t = Some(std::thread::current());
        }
    }

    /// Wakes the registered thread (no-op if none).
    pub fn kick(&self) {
        if let Ok(t) = self.0.lock() {
            if let Some(t) = t.as_ref() {
                t.unpark();
            }
        }
    }
}

/// The vfio-user backend of host `host`.
pub struct Backend {
    fabric: Arc<Mutex<Fabric>>,
    kick: Kick,
    host: usize,
    mem: MappedMemory,
    irqs: EventfdIrqs,
    config: ConfigSpace,
    clock: Clock,
}

impl Backend {
    /// A backend for host `host` of `fabric`, whose controller uses `mem`
    /// and `irqs`.
    pub fn new(
        fabric: Arc<Mutex<Fabric>>,
        host: usize,
        mem: MappedMemory,
        irqs: EventfdIrqs,
        vectors: u16,
        clock: Clock,
    ) -> Self {
        Self {
            fabric,
            kick: Kick::default(),
            host,
            mem,
            irqs,
            config: ConfigSpace::new(vectors),
            clock,
        }
    }

    /// Wakes `kick`'s thread after every BAR write (a doorbell should not
    /// wait for an idle daemon's long sleep).
    pub fn with_kick(mut self, kick: Kick) -> Self {
        self.kick = kick;
        self
    }

    fn with_ctrl<T>(&self, f: impl FnOnce(&mut crate::device::Controller) -> T) -> Option<T> {
        let mut fab = self.fabric.lock().ok()?;
        fab.hosts.get_mut(self.host).map(|h| f(&mut h.ctrl))
    }

    /// The guest went away: forget its memory and eventfds, reset the
    /// controller (its links go down; nothing else changes).
    pub fn disconnected(&mut self) {
        self.mem.clear();
        self.irqs.clear();
        self.with_ctrl(|c| c.reset());
        self.config = ConfigSpace::new(self.config_vectors());
    }

    fn config_vectors(&self) -> u16 {
        self.config.msix_vectors()
    }
}

impl ServerBackend for Backend {
    fn region_read(&mut self, region: u32, offset: u64, data: &mut [u8]) -> std::io::Result<()> {
        match region {
            VFIO_PCI_CONFIG_REGION_INDEX => self.config.read(offset, data),
            VFIO_PCI_BAR0_REGION_INDEX => {
                if self.with_ctrl(|c| c.bar_read(offset, data)).is_none() {
                    data.fill(0);
                }
            }
            _ => data.fill(0),
        }
        Ok(())
    }

    fn region_write(&mut self, region: u32, offset: u64, data: &[u8]) -> std::io::Result<()> {
        match region {
            VFIO_PCI_CONFIG_REGION_INDEX => self.config.write(offset, data),
            VFIO_PCI_BAR0_REGION_INDEX => {
                let now = self.clock.now();
                self.with_ctrl(|c| c.bar_write(offset, data, now));
                self.kick.kick();
            }
            _ => {}
        }
        Ok(())
    }

    fn dma_map(
        &mut self,
        _flags: DmaMapFlags,
        offset: u64,
        address: u64,
        size: u64,
        fd: Option<File>,
    ) -> std::io::Result<()> {
        match fd {
            Some(fd) => self.mem.map(&fd, offset, address, size),
            // Memory without an fd cannot be reached (DmaRead/DmaWrite are
            // not supported); accesses there fail as out of range.
            None => Ok(()),
        }
    }

    fn dma_unmap(&mut self, flags: DmaUnmapFlags, address: u64, size: u64) -> std::io::Result<()> {
        self.mem
            .unmap(address, size, flags.contains(DmaUnmapFlags::UNMAP_ALL));
        Ok(())
    }

    fn reset(&mut self) -> std::io::Result<()> {
        self.irqs.clear();
        self.with_ctrl(|c| c.reset());
        Ok(())
    }

    fn set_irqs(
        &mut self,
        index: u32,
        flags: u32,
        start: u32,
        count: u32,
        fds: Vec<File>,
    ) -> std::io::Result<()> {
        if index != VFIO_PCI_MSIX_IRQ_INDEX || flags & VFIO_IRQ_SET_ACTION_TRIGGER == 0 {
            // INTx, MSI, masks: nothing to do (MSI-X only; QEMU masks in
            // its own table emulation).
            return Ok(());
        }
        if flags & VFIO_IRQ_SET_DATA_NONE != 0 && count == 0 {
            self.irqs.clear();
            return Ok(());
        }
        if flags & VFIO_IRQ_SET_DATA_EVENTFD != 0 {
            // QEMU sends either one fd per vector or none at all (vectors
            // to disconnect, and its first fd-less setup call).
            let n = count as usize;
            let v: Vec<Option<File>> = if fds.len() == n {
                fds.into_iter().map(Some).collect()
            } else {
                (0..n).map(|_| None).collect()
            };
            self.irqs.set(start, v);
        }
        Ok(())
    }
}

/// The regions a controller exposes.
pub fn regions() -> Vec<ServerRegion> {
    (0..VFIO_PCI_NUM_REGIONS)
        .map(|index| {
            let mut info = vfio_region_info {
                argsz: std::mem::size_of::<vfio_region_info>() as u32,
                index,
                ..Default::default()
            };
            let size = match index {
                VFIO_PCI_CONFIG_REGION_INDEX => CONFIG_SIZE as u64,
                VFIO_PCI_BAR0_REGION_INDEX => u64::from(reg::BAR0_SIZE),
                _ => 0,
            };
            if size > 0 {
                info.size = size;
                info.flags = VFIO_REGION_INFO_FLAG_READ | VFIO_REGION_INFO_FLAG_WRITE;
            }
            ServerRegion {
                region_info: info,
                sparse_areas: Vec::new(),
                mmap_fd: None,
            }
        })
        .collect()
}

/// The interrupts a controller exposes (MSI-X only).
pub fn irqs(vectors: u16) -> Vec<IrqInfo> {
    (0..VFIO_PCI_NUM_IRQS)
        .map(|index| IrqInfo {
            index,
            count: if index == VFIO_PCI_MSIX_IRQ_INDEX {
                u32::from(vectors)
            } else {
                0
            },
            flags: if index == VFIO_PCI_MSIX_IRQ_INDEX {
                VFIO_IRQ_INFO_EVENTFD
            } else {
                0
            },
        })
        .collect()
}

/// Serves one controller forever: one guest at a time; after a
/// disconnect the controller is reset and the socket listens again.
pub fn serve_forever(socket: &Path, server: &Server, mut backend: Backend) {
    loop {
        eprintln!("ub-fabric: {}: waiting for a guest", socket.display());
        match server.run(&mut backend) {
            Ok(()) => eprintln!("ub-fabric: {}: guest disconnected", socket.display()),
            Err(e) => eprintln!("ub-fabric: {}: connection ended: {e}", socket.display()),
        }
        backend.disconnected();
    }
}

/// Removes `path` if it is a socket left by an earlier run.
pub fn remove_stale_socket(path: &Path) -> anyhow::Result<()> {
    use std::os::unix::fs::FileTypeExt;
    if let Ok(md) = std::fs::symlink_metadata(path) {
        if md.file_type().is_socket() {
            std::fs::remove_file(path)?;
        } else {
            anyhow::bail!("{} exists and is not a socket", path.display());
        }
    }
    Ok(())
}

/// The socket path of a host.
pub fn socket_path(dir: &Path, name: &str, explicit: Option<&PathBuf>) -> PathBuf {
    explicit
        .cloned()
        .unwrap_or_else(|| dir.join(format!("{name}.sock")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mem::FakeMemory;
    use crate::topology::Topology;
    use std::io::Read;
    use std::os::fd::FromRawFd;

    fn backend() -> (Backend, Arc<Mutex<Fabric>>, EventfdIrqs) {
        let topo = Topology::builtin("back-to-back").expect("topology");
        let irqs = EventfdIrqs::new(2);
        let q = irqs.clone();
        let fabric = Fabric::new(&topo, move |_| {
            (
                Box::new(FakeMemory::new(0, 4096)) as Box<dyn crate::mem::GuestMemory>,
                Box::new(q.clone()) as Box<dyn Interrupts>,
            )
        });
        let fabric = Arc::new(Mutex::new(fabric));
        let b = Backend::new(
            Arc::clone(&fabric),
            0,
            MappedMemory::default(),
            irqs.clone(),
            2,
            Clock(Instant::now()),
        );
        (b, fabric, irqs)
    }

    fn eventfd() -> File {
        // SAFETY: eventfd returns a new descriptor we own (checked >= 0).
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK) };
        assert!(fd >= 0);
        // SAFETY: `fd` is a fresh, owned descriptor.
        unsafe { File::from_raw_fd(fd) }
    }

    #[test]
    fn config_space_identity_and_msix() {
        let c = ConfigSpace::new(3);
        let mut b = [0u8; 4];
        c.read(0, &mut b);
        assert_eq!(u16::from_le_bytes([b[0], b[1]]), reg::PCI_VENDOR_ID);
        assert_eq!(u16::from_le_bytes([b[2], b[3]]), reg::PCI_DEVICE_ID);
        c.read(0x08, &mut b);
        assert_eq!(u32::from_le_bytes(b) >> 8, reg::PCI_CLASS_CODE);
        let mut cap = [0u8; 12];
        c.read(MSIX_CAP as u64, &mut cap);
        assert_eq!(cap[0], 0x11);
        assert_eq!(u16::from_le_bytes([cap[2], cap[3]]) & 0x7ff, 2);
        assert_eq!(
            u32::from_le_bytes([cap[4], cap[5], cap[6], cap[7]]),
            reg::MSIX_TABLE_OFFSET
        );
        // Whole-space read, as QEMU does at start.
        let mut all = vec![0u8; CONFIG_SIZE + 16];
        c.read(0, &mut all);
        assert_eq!(all[0x34], MSIX_CAP as u8);
    }

    #[test]
    fn bar_sizing_and_read_only_ids() {
        let mut c = ConfigSpace::new(3);
        c.write(0x10, &[0xff; 4]);
        let mut b = [0u8; 4];
        c.read(0x10, &mut b);
        assert_eq!(u32::from_le_bytes(b), !(reg::BAR0_SIZE - 1));
        c.write(0, &[0; 4]);
        c.read(0, &mut b);
        assert_eq!(u16::from_le_bytes([b[0], b[1]]), reg::PCI_VENDOR_ID);
        c.write((MSIX_CAP + 2) as u64, &[0xff, 0xff]);
        assert!(c.msix_enabled());
    }

    #[test]
    fn msix_setup_without_fds_then_with_fds() {
        let (mut b, fabric, _irqs) = backend();
        let flags = VFIO_IRQ_SET_DATA_EVENTFD | VFIO_IRQ_SET_ACTION_TRIGGER;
        // QEMU's first call: one vector, no fd. Must be accepted.
        b.set_irqs(VFIO_PCI_MSIX_IRQ_INDEX, flags, 0, 1, Vec::new())
            .expect("fd-less setup accepted");
        let ev = eventfd();
        let ev2 = ev.try_clone().expect("dup");
        let other = eventfd();
        b.set_irqs(VFIO_PCI_MSIX_IRQ_INDEX, flags, 0, 2, vec![other, ev2])
            .expect("fds");
        // The guest test register raises vector 0; a port cause vector 1.
        let off = u64::from(reg::port_reg(0, reg::INT_MASK::OFFSET).expect("reg"));
        b.region_write(VFIO_PCI_BAR0_REGION_INDEX, off, &0u32.to_le_bytes())
            .expect("write");
        fabric.lock().expect("lock").hosts[0].ctrl.set_link(0, true);
        fabric.lock().expect("lock").hosts[0].ctrl.update_irqs(1);
        let mut buf = [0u8; 8];
        (&ev).read_exact(&mut buf).expect("vector 1 fired");
        assert_eq!(u64::from_le_bytes(buf), 1);
        // Disable all.
        b.set_irqs(
            VFIO_PCI_MSIX_IRQ_INDEX,
            VFIO_IRQ_SET_DATA_NONE | VFIO_IRQ_SET_ACTION_TRIGGER,
            0,
            0,
            Vec::new(),
        )
        .expect("disable");
    }

    #[test]
    fn bar_access_through_the_backend() {
        let (mut b, _f, _) = backend();
        let ident = u64::from(reg::IDENT::OFFSET);
        let mut v = [0u8; 4];
        b.region_read(VFIO_PCI_BAR0_REGION_INDEX, ident, &mut v)
            .expect("read");
        assert_eq!(u32::from_le_bytes(v), reg::IDENT_VALUE);
        // A 64-bit read is two 32-bit ones, low half first.
        let mut q = [0u8; 8];
        b.region_read(VFIO_PCI_BAR0_REGION_INDEX, ident, &mut q)
            .expect("read64");
        assert_eq!(q[..4], v);
        assert_eq!(
            u32::from_le_bytes([q[4], q[5], q[6], q[7]]),
            reg::VERSION_VALUE
        );
        // Unknown regions read as zero, never fail.
        let mut z = [0xffu8; 4];
        b.region_read(5, 0, &mut z).expect("read");
        assert_eq!(z, [0; 4]);
        b.disconnected();
    }
}
