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

mod controller_pci;

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
/// controller unbound) before the debugfs root goes.
#[pin_data(PinnedDrop)]
struct UbModule {
    /// The PCI driver of the UB controller (`controller_pci.rs`).
    #[pin]
    _pci: controller_pci::Registration,
    /// `/sys/kernel/debug/ub`, the parent of the controllers' directories.
    _debugfs: controller_pci::DebugfsRoot,
}

impl kernel::InPlaceModule for UbModule {
    fn init(module: &'static ThisModule) -> impl PinInit<Self, Error> {
        pr_info!("UnifiedBus stack loaded\n");
        // SAFETY: Module init runs once, and this is before the PCI driver
        // (the only other user of the debugfs root) is registered.
        let debugfs = unsafe { controller_pci::DebugfsRoot::new() };
        try_pin_init!(Self {
            _debugfs: debugfs,
            _pci <- kernel::driver::Registration::new(<Self as kernel::ModuleMetadata>::NAME, module),
        })
    }
}

#[pinned_drop]
impl PinnedDrop for UbModule {
    fn drop(self: Pin<&mut Self>) {
        pr_info!("UnifiedBus stack unloaded\n");
    }
}

/// Runs the shared known-answer vectors against the kernel build of
/// `ub-proto`: the same vectors the host tests derive from independent
/// reference implementations.
#[cfg(CONFIG_UB_KUNIT_TEST)]
#[kunit_tests(ub_proto_crc)]
mod crc_tests {
    use super::proto::crc::{crc30, crc32, Crc30, Crc32};
    use super::proto::testvec::{CRC30_CHECK, CRC30_VECTORS, CRC32_CHECK, CRC32_VECTORS};

    #[test]
    fn crc32_check_value() {
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
        assert_eq!(crc32(b"123456789"), CRC32_CHECK);
    }

    #[test]
    fn crc30_check_value() {
        assert_eq!(crc30(b"123456789"), CRC30_CHECK);
    }

    #[test]
    fn crc30_vectors() {
        for v in CRC30_VECTORS {
            let mut crc = Crc30::new();
            v.input.for_each_chunk(|chunk| crc.update(chunk));
            crc.update_bits(v.tail, v.tail_bits);
            assert_eq!(crc.finish(), v.crc30);
        }
    }

    #[test]
    fn crc32_vectors() {
        for v in CRC32_VECTORS {
            let mut crc = Crc32::new();
            v.input.for_each_chunk(|chunk| crc.update(chunk));
            assert_eq!(crc.finish(), v.crc32);
        }
    }
}

/// Present only in the harness self-test's broken build of the module
/// (`make UB_INJECT_KUNIT_FAILURE=1`): proves that a failing KUnit
/// assertion fails the test command. A separate suite, because the KUnit
/// macro reports a test that is configured out as skipped.
#[cfg(all(CONFIG_UB_KUNIT_TEST, ub_inject_kunit_failure))]
#[kunit_tests(ub_harness_selftest)]
mod injected_failure {
    use super::proto::crc::crc32;

    #[test]
    fn injected_failure() {
        assert_eq!(crc32(b"123456789"), 0);
    }
}
