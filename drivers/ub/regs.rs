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
//! The two ring blocks of a port share one declaration of the `RING_*`
//! registers, as `register!`'s relative arrays: `register_bases!` below
//! turns the table's block list into the `RegisterBase` types they need.

/// Declares the table's register blocks for `register!`: a type for the
/// family (the `@ Family + offset` registers) and, per copy of the block, a
/// type implementing `RegisterBase` with the copy's offset in port 0's
/// block (`RING_TAIL::of::<TxRing>().try_at(port)`).
macro_rules! register_bases {
    (
        $(
            $(#[$fattr:meta])* $fvis:vis $family:ident {
                $( $(#[$attr:meta])* $vis:vis $name:ident @ $base:literal; )*
            }
        )*
    ) => {
        $(
            $(#[$fattr])*
            $fvis struct $family;

            $(
                $(#[$attr])*
                $vis struct $name;

                impl kernel::io::register::RegisterBase<$family> for $name {
                    const BASE: usize = $base;
                }
            )*
        )*
    };
}

crate::ub_controller_registers!(pub(crate), [kernel::io::register], [register_bases]);
