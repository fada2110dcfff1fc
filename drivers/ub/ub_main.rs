// SPDX-License-Identifier: GPL-2.0
//! UnifiedBus (UB) driver: the data link, network and transport layers of the
//! UB Base Specification 2.0 in software.
//!
//! The protocol logic lives in `ub-proto` (`drivers/ub/proto/`), a sans-I/O
//! crate that Cargo also builds for the host tests and the fabric emulator.
//! The kernel compiles the very same files: [`proto`] below is that crate's
//! root, included as a module of this one.

use kernel::prelude::*;

#[path = "proto/src/lib.rs"]
pub mod proto;
// ub-proto's own paths name its modules from its crate root (`crate::crc`):
// in the Cargo build that root is `proto/src/lib.rs`, here it is this file,
// so its modules are re-exported here.
pub use proto::*;

mod cdev;
mod channel;
mod ctp;
mod group;
#[cfg(CONFIG_UB_KUNIT_TEST)]
mod kapi;
pub mod kernel_crc;
mod kunit;
mod netlink;
mod pci;
mod port;
// The driver uses part of the register table; the rest documents the
// device.
mod registry;
#[allow(dead_code)]
mod regs;
mod ring;
mod snapshot;
// The network layer of a controller (`net.rs`); named apart from
// ub-proto's `net` module, which the crate root re-exports.
#[path = "net.rs"]
mod ub_net;

module! {
    type: UbModule,
    name: "ub",
    authors: ["UB stack developers"],
    description: "UnifiedBus (UB) data link, network and transport layers",
    license: "GPL",
}

/// The loaded module. Owns every UB object; dropping it tears them down.
///
/// Fields drop in declaration order: the PCI driver is unregistered (every
/// controller unbound) before the netlink family and the debugfs root go.
///
/// The "ub" netlink family is registered before the PCI driver and
/// unregistered after it: the driver core (its work items) calls
/// `netlink::notify_port` and `netlink::echo_reply`, so the family outlives
/// every caller. Dumps never see half a device whatever the order: the
/// registry shows a device only once it is set up and hides it before it is
/// torn down.
#[pin_data(PinnedDrop)]
struct UbModule {
    /// `/dev/ub_tp` (`cdev.rs`): unregistered first. An open file holds
    /// the module (its `fops.owner`), so no file outlives the module.
    #[pin]
    _tp: cdev::Registration,
    /// The PCI driver of the UB controller (`pci.rs`).
    #[pin]
    _pci: pci::Registration,
    /// The "ub" generic netlink family (`netlink.rs`).
    _genl: netlink::Registration,
    /// `/sys/kernel/debug/ub`, the parent of the controllers' directories.
    _debugfs: pci::DebugfsRoot,
}

impl kernel::InPlaceModule for UbModule {
    fn init(module: &'static ThisModule) -> impl PinInit<Self, Error> {
        pr_info!("UnifiedBus stack loaded\n");
        // SAFETY: Module init runs once, and this is before the PCI driver
        // (the only other user of the debugfs root) is registered.
        let debugfs = unsafe { pci::DebugfsRoot::new() };
        // SAFETY: As above: once, before the PCI driver registers.
        unsafe { registry::init() };
        try_pin_init!(Self {
            _debugfs: debugfs,
            _genl: netlink::Registration::new()?,
            _pci <- kernel::driver::Registration::new(<Self as kernel::ModuleMetadata>::NAME, module),
            _tp <- cdev::Registration::register(kernel::miscdevice::MiscDeviceOptions {
                name: c"ub_tp",
            }),
        })
    }
}

#[pinned_drop]
impl PinnedDrop for UbModule {
    fn drop(self: Pin<&mut Self>) {
        pr_info!("UnifiedBus stack unloaded\n");
    }
}
