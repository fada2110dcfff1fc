// SPDX-License-Identifier: GPL-2.0
//! The controller's registers as `kernel::io::register!` types.
//!
//! The register table (`proto/src/controller/table.rs`, shared with
//! `ub-fabric`) is written in `register!`'s own syntax; expanding it here
//! with the kernel's macro gives the driver one typed register per
//! declaration (`io.read(IDENT)`, `ERR_STATUS::try_at(port)`, fields as
//! `Bounded` or `bool`), read and written through the kernel's `Io`. Nothing
//! about the register map is declared in this file.
//!
//! Per-port registers are arrays indexed by port: their index comes from
//! the device at run time, so the driver uses `try_at` with `try_read` /
//! `try_write` (the compile-time checked `at` cannot be proven in bounds).

crate::ub_controller_registers!(pub(crate), kernel::io::register);
