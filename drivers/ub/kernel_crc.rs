// SPDX-License-Identifier: GPL-2.0
//! The kernel's CRC-32 as the ICRC backend of `ub-proto`.
//!
//! `ub-proto` computes the ICRC with whatever
//! [`Crc32Update`](crate::proto::crc::Crc32Update) it is given. In `ub.ko`
//! that is [`crc32_le`] below: the kernel's own `crc32_le` from
//! `<linux/crc32.h>` (`CONFIG_CRC32`), which uses the architecture's
//! carry-less multiply or CRC instructions where the kernel has them
//! (`CONFIG_CRC_OPTIMIZATIONS`) and a table otherwise. The KUnit suite
//! `ub_kernel_crc` checks it against the portable code of `ub-proto`.

/// The C function. `rust/bindings` does not include `<linux/crc32.h>`, so it
/// is declared here, with the prototype of that header:
/// `u32 crc32_le(u32 crc, const void *p, size_t len)`.
mod ffi {
    extern "C" {
        pub(super) fn crc32_le(crc: u32, p: *const core::ffi::c_void, len: usize) -> u32;
    }
}

/// One CRC-32 (ICRC polynomial, reflected) update step by the kernel's
/// `crc32_le`: no pre- or post-inversion. A
/// [`Crc32Update`](crate::proto::crc::Crc32Update).
pub fn crc32_le(crc: u32, data: &[u8]) -> u32 {
    // SAFETY: `crc32_le` reads exactly `len` bytes from `p` and nothing
    // else, keeps no reference to them after returning, and may be called
    // in any context. `data` is a live shared slice, so its pointer is valid
    // for reads of `data.len()` bytes for the whole call (for an empty slice
    // the pointer is dangling but non-null, and nothing is read).
    unsafe { ffi::crc32_le(crc, data.as_ptr().cast(), data.len()) }
}
