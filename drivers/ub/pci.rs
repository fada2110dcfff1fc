// SPDX-License-Identifier: GPL-2.0
//! PCI driver of the UB controller (the PCIe function `ub-fabric` emulates).
//!
//! Probe enables the function, maps BAR0, checks the identification
//! registers, creates the controller's network layer ([`Net`]) and one
//! [`Port`] per port (rings, link engine, work item, hrtimer), allocates one
//! MSI-X vector per interrupt source (vector 0: global causes, vector 1 + n:
//! port n: its handler is [`Port::interrupt`]), starts the ports and
//! registers the device for netlink ([`crate::registry`]). Everything is exposed in debugfs under `ub/<pci-name>/`; see
//! `Documentation/ub/driver.rst`. Registers are the types of [`crate::regs`]:
//! the shared register table (the one `ub-fabric` compiles) expanded with
//! the kernel's `register!`; constants come from [`crate::controller`].
//!
//! Teardown: unbind takes the device out of the registry, stops the
//! endpoint and the ports (no work, no timer, rings and PHY off) and resets
//! the controller; then the drop order of [`Controller`] frees the IRQ
//! handlers, the MSI-X vectors and the debugfs files, and the BAR mapping
//! goes last, with the last reference to [`Shared`]. The ring memory goes
//! with the last reference to each port.

use kernel::{
    debugfs,
    device::Core,
    fmt,
    io::{register::Array, Io},
    irq::{self, IrqReturn},
    pci,
    prelude::*,
    sync::{
        atomic::{Atomic, Relaxed},
        Arc,
    },
    uaccess::UserSliceReader,
};

use crate::controller as hw;
use crate::port::Port;
use crate::regs::{
    CAP_MSIX, CAP_PORTS, CAP_RING, CAP_XFER, CTRL, ERR_STATUS, GERR, GINT_CAUSE, GINT_MASK,
    GINT_TEST, IDENT, SCRATCH, VERSION,
};
use crate::ub_net::Net;

/// Size of BAR0, from the shared register map.
pub(crate) const BAR0_SIZE: usize = hw::BAR0_SIZE as usize;

/// Most MSI-X vectors a controller can have (global + [`hw::MAX_PORTS`]).
const MAX_VECTORS: usize = hw::msix_vectors(hw::MAX_PORTS) as usize;

/// The register interface major version this driver speaks.
const VERSION_MAJOR: u32 = hw::VERSION::from_raw(hw::VERSION_VALUE).major().get();

/// Pattern written to `SCRATCH` at probe to check that BAR writes reach the
/// device.
const SCRATCH_PATTERN: u32 = 0x5a5a_a5a5;

/// Name of every vector in `/proc/interrupts`, by vector number.
const IRQ_NAMES: [&CStr; MAX_VECTORS] = [
    c"ub-global",
    c"ub-port0",
    c"ub-port1",
    c"ub-port2",
    c"ub-port3",
    c"ub-port4",
    c"ub-port5",
    c"ub-port6",
    c"ub-port7",
];

/// BAR0 as a device-managed mapping: revoked when the device is unbound, so
/// it can be shared with the IRQ handlers and the debugfs files.
pub(crate) type Bar0 = pci::DevresBar<BAR0_SIZE>;

kernel::sync::global_lock! {
    // SAFETY: `DebugfsRoot::new` calls `init()` once, before the PCI driver
    // is registered, i.e. before any other use.
    unsafe(uninit) static DEBUGFS_ROOT: Mutex<Option<debugfs::Dir>> = None;
}

/// The module's hold on `/sys/kernel/debug/ub`, the parent of every
/// controller's directory. Dropping it (after the PCI driver is
/// unregistered) removes the directory once no controller uses it.
pub(crate) struct DebugfsRoot(());

impl DebugfsRoot {
    /// Creates `/sys/kernel/debug/ub`.
    ///
    /// # Safety
    ///
    /// Must be called once per module load, before the PCI driver is
    /// registered.
    pub(crate) unsafe fn new() -> Self {
        // SAFETY: By the function's safety requirement this is the one call
        // to `init`, and it happens before any other use of the lock.
        unsafe { DEBUGFS_ROOT.init() };
        *DEBUGFS_ROOT.lock() = Some(debugfs::Dir::new(c"ub"));
        Self(())
    }
}

impl Drop for DebugfsRoot {
    fn drop(&mut self) {
        // Removed outside the lock.
        let root = DEBUGFS_ROOT.lock().take();
        drop(root);
    }
}

/// The PCI driver registration of the controller driver, held by the module.
pub(crate) type Registration = kernel::driver::Registration<pci::Adapter<UbPciDriver>>;

/// The PCI driver.
pub(crate) struct UbPciDriver;

// The kernel crate builds vendor IDs only from its named constants: check that
// the one used is the shared register map's.
const _: () = assert!(pci::Vendor::HUAWEI.as_raw() == hw::PCI_VENDOR_ID);

kernel::pci_device_table!(
    PCI_TABLE,
    <UbPciDriver as pci::Driver>::IdInfo,
    [(
        pci::DeviceId::from_id(pci::Vendor::HUAWEI, hw::PCI_DEVICE_ID as u32),
        ()
    )]
);

/// Identification and capabilities read at probe.
#[derive(Clone, Copy)]
struct Ident {
    ident: IDENT,
    version: VERSION,
    cap_ports: CAP_PORTS,
    cap_ring: CAP_RING,
    cap_xfer: CAP_XFER,
    cap_msix: CAP_MSIX,
}

impl Ident {
    /// Number of ports (1..=[`hw::MAX_PORTS`] once checked).
    fn ports(&self) -> u32 {
        self.cap_ports.ports().get()
    }

    /// Number of MSI-X vectors the device has.
    fn vectors(&self) -> u32 {
        self.cap_msix.vectors().get()
    }
}

/// State shared by the driver data, the IRQ handlers and the debugfs files.
///
/// Lifetime: one reference per IRQ handler, one for the debugfs scope; all
/// are dropped during unbind (handlers first), and the last one unmaps BAR0.
/// Locking: none; counters are atomics and BAR accesses go through the
/// revocable mapping.
pub(crate) struct Shared {
    pub(crate) bar: Bar0,
    /// Values read at probe (the debugfs files read the registers again).
    ident: Ident,
    /// Vectors in use: `1 + ports`.
    nvec: usize,
    /// Linux IRQ number of each vector.
    pub(crate) irq: [u32; MAX_VECTORS],
    /// Handler invocations per vector.
    count: [Atomic<u64>; MAX_VECTORS],
    /// `GINT_CAUSE.TEST` seen by the vector-0 handler.
    test_causes: Atomic<u64>,
    /// `GINT_CAUSE.ERROR` seen by the vector-0 handler.
    error_causes: Atomic<u64>,
    /// Interrupts whose cause register read zero.
    spurious: Atomic<u64>,
}

impl Shared {
    /// Handles the interrupt of `vector`: reads its cause register, clears
    /// the causes it saw (RW1C) and counts them.
    /// `ports` are the controller's ports for the global vector (it hands
    /// them the port errors it clears), `port` the port of a port vector.
    fn handle(&self, vector: usize, port: Option<&Arc<Port>>, ports: &[Arc<Port>]) -> IrqReturn {
        if let Some(c) = self.count.get(vector) {
            c.fetch_add(1, Relaxed);
        }
        let Some(bar) = self.bar.try_access() else {
            return IrqReturn::None;
        };
        if vector == usize::from(hw::VECTOR_GLOBAL) {
            let cause = bar.read(GINT_CAUSE);
            if cause.into_raw() == 0 {
                self.spurious.fetch_add(1, Relaxed);
                return IrqReturn::None;
            }
            if cause.error() {
                // Clear the error sources first, so the cause stays clear: a
                // port error left in `ERR_STATUS` would set `GERR.PORT` again
                // (and the vector fire again at once). What is cleared goes
                // to the port, whose work handles it: it is not lost.
                let gerr = bar.read(GERR);
                if gerr.port() {
                    for (i, p) in ports.iter().enumerate() {
                        let Some(loc) = ERR_STATUS::try_at(i) else {
                            continue;
                        };
                        let mut bits = 0;
                        // RW1C: writing back what was read clears it.
                        let _ = bar.try_update(loc, |err: ERR_STATUS| {
                            bits = err.into_raw();
                            err
                        });
                        if bits != 0 {
                            p.device_errors(bits);
                        }
                    }
                }
                bar.write_reg(gerr);
                self.error_causes.fetch_add(1, Relaxed);
            }
            if cause.test() {
                self.test_causes.fetch_add(1, Relaxed);
            }
            bar.write_reg(cause);
            return IrqReturn::Handled;
        }
        // Port vectors: 1 + port. A message without a cause is counted
        // but still handled: MSI-X is never shared, and answering a storm
        // with IRQ_NONE would let the kernel's "nobody cared" check disable
        // the vector for good (the port counts the storm and carries on).
        let Some(p) = port else {
            self.spurious.fetch_add(1, Relaxed);
            return IrqReturn::None;
        };
        if !p.interrupt(&bar) {
            self.spurious.fetch_add(1, Relaxed);
        }
        IrqReturn::Handled
    }
}

/// The handler of one MSI-X vector.
struct VectorHandler {
    shared: Arc<Shared>,
    vector: usize,
    /// The port of a port vector.
    port: Option<Arc<Port>>,
    /// Every port, for the global vector (empty for the port vectors).
    ports: KVec<Arc<Port>>,
}

impl irq::Handler for VectorHandler {
    fn handle(&self) -> IrqReturn {
        self.shared
            .handle(self.vector, self.port.as_ref(), &self.ports)
    }
}

/// One bound controller: the PCI driver's data.
///
/// Fields drop in declaration order, which is the teardown order.
#[pin_data]
pub(crate) struct Controller<'bound> {
    /// One registered handler per vector; freed first (`free_irq` waits for
    /// running handlers).
    irqs: KVec<Pin<KBox<irq::Registration<'bound, VectorHandler>>>>,
    /// The MSI-X vectors (`pci_free_irq_vectors` on drop).
    vectors: pci::IrqVectorRegistration<'bound>,
    /// `/sys/kernel/debug/ub/<pci-name>/`.
    #[pin]
    debugfs: debugfs::Scope<Arc<Shared>>,
    /// The driver's own reference to the shared state.
    shared: Arc<Shared>,
    /// The network layer (also in the registry while bound).
    net: Arc<Net>,
    /// The ports, by index.
    ports: KVec<Arc<Port>>,
}

/// Reads and checks the identification and capability registers.
fn identify(pdev: &pci::Device<Core<'_>>, bar: &pci::Bar<'_, BAR0_SIZE>) -> Result<Ident> {
    let id = Ident {
        ident: bar.read(IDENT),
        version: bar.read(VERSION),
        cap_ports: bar.read(CAP_PORTS),
        cap_ring: bar.read(CAP_RING),
        cap_xfer: bar.read(CAP_XFER),
        cap_msix: bar.read(CAP_MSIX),
    };
    if id.ident.into_raw() != hw::IDENT_VALUE {
        dev_err!(
            pdev,
            "IDENT is {:#010x}, not a UB controller\n",
            id.ident.into_raw()
        );
        return Err(ENODEV);
    }
    if id.version.major().get() != VERSION_MAJOR {
        dev_err!(
            pdev,
            "unsupported register interface {:#010x}\n",
            id.version.into_raw()
        );
        return Err(ENODEV);
    }
    if id.ports() == 0 || id.ports() > hw::MAX_PORTS {
        dev_err!(pdev, "bad port count {}\n", id.ports());
        return Err(ENODEV);
    }
    if id.vectors() != u32::from(hw::msix_vectors(id.ports())) {
        dev_err!(
            pdev,
            "{} MSI-X vectors for {} ports\n",
            id.vectors(),
            id.ports()
        );
        return Err(ENODEV);
    }
    // Register writes reach the device and read back.
    bar.write_reg(SCRATCH::from_raw(SCRATCH_PATTERN));
    let scratch = bar.read(SCRATCH).into_raw();
    bar.write_reg(SCRATCH::zeroed());
    if scratch != SCRATCH_PATTERN {
        dev_err!(pdev, "SCRATCH reads {:#010x}\n", scratch);
        return Err(EIO);
    }
    Ok(id)
}

/// Registers a handler on each of the `nvec` vectors.
fn request_irqs<'bound>(
    vectors: &'bound pci::IrqVectorRegistration<'bound>,
    shared: &Arc<Shared>,
    ports: &[Arc<Port>],
) -> Result<KVec<Pin<KBox<irq::Registration<'bound, VectorHandler>>>>> {
    let mut irqs = KVec::with_capacity(shared.nvec, GFP_KERNEL)?;
    for (vector, name) in IRQ_NAMES.iter().enumerate().take(shared.nvec) {
        let request = irq::IrqRequest::from(vectors.index(vector)?);
        let handler = VectorHandler {
            shared: shared.clone(),
            vector,
            port: vector.checked_sub(1).and_then(|p| ports.get(p)).cloned(),
            ports: if vector == usize::from(hw::VECTOR_GLOBAL) {
                let mut all = KVec::with_capacity(ports.len(), GFP_KERNEL)?;
                for p in ports {
                    all.push(p.clone(), GFP_KERNEL)?;
                }
                all
            } else {
                KVec::new()
            },
        };
        // SAFETY: The registration is owned by `Controller::irqs` and dropped
        // with it; it is never leaked.
        let reg = unsafe {
            irq::Registration::new(
                request,
                irq::Flags::TRIGGER_NONE,
                name,
                Ok::<_, Error>(handler),
            )
        };
        irqs.push(KBox::pin_init(reg, GFP_KERNEL)?, GFP_KERNEL)?;
    }
    Ok(irqs)
}

impl pci::Driver for UbPciDriver {
    type IdInfo = ();
    type Data<'bound> = Controller<'bound>;

    const ID_TABLE: pci::IdTable<Self::IdInfo> = &PCI_TABLE;

    fn probe<'bound>(
        pdev: &'bound pci::Device<Core<'_>>,
        _info: Option<&'bound Self::IdInfo>,
    ) -> impl PinInit<Self::Data<'bound>, Error> + 'bound {
        pin_init::pin_init_scope(move || {
            pdev.enable_device_mem()?;
            // MSI-X messages are memory writes of the device.
            pdev.set_master();

            let bar = pdev.iomap_region_sized::<BAR0_SIZE>(0, c"ub")?;
            // Start from reset values whatever a previous driver left.
            bar.write_reg(CTRL::zeroed().with_reset(true));
            let ident = identify(pdev, &bar)?;

            let nvec = usize::from(hw::msix_vectors(ident.ports()));
            let vectors = pdev.alloc_irq_vectors(
                ident.vectors(),
                ident.vectors(),
                pci::IrqTypes::default().with(pci::IrqType::MsiX),
            )?;
            let mut irq = [0u32; MAX_VECTORS];
            for (v, slot) in irq.iter_mut().enumerate().take(nvec) {
                *slot = irq::IrqRequest::from(vectors.index(v)?).irq();
            }

            let shared = Arc::new(
                Shared {
                    bar: bar.into_devres()?,
                    ident,
                    nvec,
                    irq,
                    count: [const { Atomic::new(0) }; MAX_VECTORS],
                    test_causes: Atomic::new(0),
                    error_causes: Atomic::new(0),
                    spurious: Atomic::new(0),
                },
                GFP_KERNEL,
            )?;
            let root = DEBUGFS_ROOT.lock().clone().ok_or(ENOENT)?;
            let name = pdev.as_ref().name();
            let files = shared.clone();

            let net = Net::new(
                crate::registry::next_index(),
                name,
                ident.ports(),
                ident.version.into_raw(),
            )?;
            let mut ports = KVec::with_capacity(ident.ports() as usize, GFP_KERNEL)?;
            for p in 0..ident.ports() {
                ports.push(
                    Port::new(pdev.as_ref(), shared.clone(), net.clone(), p)?,
                    GFP_KERNEL,
                )?;
            }
            let mut for_net = KVec::with_capacity(ports.len(), GFP_KERNEL)?;
            for p in &ports {
                for_net.push(p.clone(), GFP_KERNEL)?;
            }
            net.attach(for_net);

            Ok(try_pin_init!(Controller {
                vectors,
                // SAFETY: `vectors` is initialized before this expression is
                // evaluated (`try_pin_init!` initializes fields in the order
                // written here), lives at a pinned, stable address inside the
                // driver data, and is dropped after `irqs` (field declaration
                // order), so the borrow never outlives it.
                irqs: request_irqs(unsafe { &*core::ptr::from_ref(vectors) }, &shared, &ports)?,
                debugfs <- root.scope(files, name, |s, dir| {
                    dir.read_callback_file(c"ident", &**s, &show_ident);
                    dir.read_callback_file(c"version", &**s, &show_version);
                    dir.read_callback_file(c"caps", &**s, &show_caps);
                    dir.read_callback_file(c"irq_counts", &**s, &show_irq_counts);
                    dir.read_callback_file(c"global_causes", &**s, &show_global_causes);
                    dir.write_only_callback_file(c"irq_test", &**s, &trigger_test);
                }),
                shared,
                net,
                ports,
            })
            .pin_chain(|this| {
                // Every vector has its handler: clear stale global causes and
                // unmask them; start the ports (their causes are unmasked by
                // `Port::start`); then netlink may see the device.
                {
                    let bar = this.shared.bar.try_access().ok_or(ENODEV)?;
                    bar.write_reg(GINT_CAUSE::from_raw(hw::GINT_CAUSE::FIELDS));
                    bar.write_reg(GINT_MASK::zeroed());
                    // DMA and rings allowed.
                    bar.write_reg(CTRL::zeroed().with_enable(true));
                }
                for p in &this.ports {
                    p.start()?;
                }
                crate::registry::add(this.net.clone())
            }))
        })
    }

    fn unbind<'bound>(pdev: &'bound pci::Device<Core<'_>>, this: Pin<&Self::Data<'bound>>) {
        // Netlink no longer finds the device; the endpoint stops and lets
        // go of the ports; each port stops its work and timer and turns its
        // rings and PHY off.
        crate::registry::remove(this.net.index());
        for p in this.net.shutdown() {
            p.shutdown();
        }
        for p in &this.ports {
            p.shutdown();
        }
        // Quiesce the device: no more messages, every register back to its
        // reset value (no DMA after this).
        if let Ok(bar) = this.shared.bar.access(pdev.as_ref()) {
            bar.write_reg(GINT_MASK::from_raw(hw::GINT_CAUSE::FIELDS));
            bar.write_reg(CTRL::zeroed().with_reset(true));
        }
    }
}

/// Formats a live read of a register (`read` on the mapped BAR), or
/// `unavailable` once unbound.
fn show_reg(
    s: &Shared,
    f: &mut fmt::Formatter<'_>,
    read: impl FnOnce(&pci::Bar<'_, BAR0_SIZE>) -> u32,
) -> fmt::Result {
    match s.bar.try_access() {
        Some(bar) => writeln!(f, "{:#010x}", read(&bar)),
        None => writeln!(f, "unavailable"),
    }
}

/// `ident`: the `IDENT` register, read from BAR0 on every read.
fn show_ident(s: &Shared, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    show_reg(s, f, |bar| bar.read(IDENT).into_raw())
}

/// `version`: the `VERSION` register, read from BAR0 on every read.
fn show_version(s: &Shared, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    show_reg(s, f, |bar| bar.read(VERSION).into_raw())
}

/// `caps`: the capability registers as read at probe, decoded.
fn show_caps(s: &Shared, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    let id = &s.ident;
    writeln!(f, "ident {:#010x}", id.ident.into_raw())?;
    writeln!(
        f,
        "version {}.{}",
        id.version.major().get(),
        id.version.minor().get()
    )?;
    writeln!(f, "ports {}", id.ports())?;
    writeln!(f, "ring_min {}", id.cap_ring.smallest().get())?;
    writeln!(f, "ring_max {}", id.cap_ring.largest().get())?;
    writeln!(f, "max_xfer {}", id.cap_xfer.max_bytes().get())?;
    writeln!(f, "flit_bytes {}", id.cap_xfer.flit_bytes().get())?;
    writeln!(f, "msix_vectors {}", id.vectors())
}

/// `irq_counts`: one line per vector: `vector name linux-irq count`.
fn show_irq_counts(s: &Shared, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    for v in 0..s.nvec {
        let (Some(name), Some(irq), Some(count)) = (IRQ_NAMES.get(v), s.irq.get(v), s.count.get(v))
        else {
            break;
        };
        writeln!(
            f,
            "{v} {} {irq} {}",
            name.to_str().unwrap_or("?"),
            count.load(Relaxed)
        )?;
    }
    Ok(())
}

/// `global_causes`: the vector-0 causes the handler saw.
fn show_global_causes(s: &Shared, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    writeln!(f, "test {}", s.test_causes.load(Relaxed))?;
    writeln!(f, "error {}", s.error_causes.load(Relaxed))?;
    writeln!(f, "spurious {}", s.spurious.load(Relaxed))
}

/// `irq_test`: writing `1` sets `GINT_CAUSE.TEST` through `GINT_TEST`, which
/// sends an MSI-X message on vector 0.
fn trigger_test(s: &Shared, reader: &mut UserSliceReader) -> Result {
    let mut buf = [0u8; 8];
    let len = reader.len().min(buf.len());
    let buf = buf.get_mut(..len).ok_or(EINVAL)?;
    reader.read_slice(buf)?;
    if buf.trim_ascii() != b"1" {
        return Err(EINVAL);
    }
    let bar = s.bar.try_access().ok_or(ENODEV)?;
    bar.write_reg(GINT_TEST::from_raw(
        GINT_CAUSE::zeroed().with_test(true).into_raw(),
    ));
    Ok(())
}
