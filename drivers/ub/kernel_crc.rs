// SPDX-License-Identifier: GPL-2.0
//! The kernel's CRC-32 as the ICRC backend of `ub-proto`.
//!
//! `ub-proto` computes the ICRC with whatever [`Crc32Update`] it is given.
//! In `ub.ko` that is [`ICRC_BACKEND`]: [`crc32_le`] below, the kernel's own
//! `crc32_le` from `<linux/crc32.h>` (`CONFIG_CRC32`), when the kernel has
//! an architecture-optimised one (`CONFIG_CRC32_ARCH`, which
//! `CONFIG_CRC_OPTIMIZATIONS` enables: carry-less multiply or CRC
//! instructions). Without it the kernel's `crc32_le` goes byte by byte
//! through one table, several times slower than the portable slicing code
//! of `ub-proto`, which is then the better backend. The KUnit suite
//! `ub_proto_crc` checks the kernel's `crc32_le` against the portable code.

use crate::proto::crc::{crc32_le_portable, Crc32Update};

/// The C function. `rust/bindings` does not include `<linux/crc32.h>`, so it
/// is declared here, with the prototype of that header:
/// `u32 crc32_le(u32 crc, const void *p, size_t len)`.
mod ffi {
    extern "C" {
        pub(super) fn crc32_le(crc: u32, p: *const core::ffi::c_void, len: usize) -> u32;
    }
}

/// The ICRC backend of this build: the kernel's `crc32_le` where the
/// architecture optimises it, the portable code otherwise.
pub const ICRC_BACKEND: Crc32Update = if cfg!(CONFIG_CRC32_ARCH) {
    crc32_le
} else {
    crc32_le_portable
};

/// One CRC-32 (ICRC polynomial, reflected) update step by the kernel's
/// `crc32_le`: no pre- or post-inversion. A [`Crc32Update`].
pub fn crc32_le(crc: u32, data: &[u8]) -> u32 {
    // SAFETY: `crc32_le` reads exactly `len` bytes from `p` and nothing
    // else, keeps no reference to them after returning, and may be called
    // in any context. `data` is a live shared slice, so its pointer is valid
    // for reads of `data.len()` bytes for the whole call (for an empty slice
    // the pointer is dangling but non-null, and nothing is read).
    unsafe { ffi::crc32_le(crc, data.as_ptr().cast(), data.len()) }
}
