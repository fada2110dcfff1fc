// SPDX-License-Identifier: GPL-2.0
//! The fast host backend of `ub-proto`'s pluggable ICRC CRC-32
//! (`ub_proto::crc::Crc32Update`).
//!
//! `ub-proto` is also compiled into the kernel, so it carries only the
//! portable slicing code (`ub_proto::crc::crc32_le_portable`), which is the
//! fallback and the reference. `ub.ko` plugs in the kernel's own
//! `crc32_le`; host programs (the simulator, the fabric emulator, the
//! benches) plug in [`crc32_le`] from here: `crc32fast`, which folds with
//! carry-less multiplication (PCLMULQDQ on x86-64, the CRC32 instructions on
//! AArch64) when the CPU has it, detected at run time, and falls back to its
//! own tables otherwise. `ub-proto`'s tests check it against the portable
//! reference.
//!
//! ```
//! // Same semantics as the kernel's crc32_le: no pre- or post-inversion.
//! assert_eq!(!ub_host_crc::crc32_le(!0, b"123456789"), 0xCBF4_3926);
//! ```

/// One CRC-32 (ICRC polynomial, reflected) update step, with the semantics
/// of the kernel's `crc32_le(crc, p, len)`: no pre- or post-inversion. A
/// `ub_proto::crc::Crc32Update`.
pub fn crc32_le(crc: u32, data: &[u8]) -> u32 {
    // crc32fast keeps the register inverted (its initial value is the
    // finished CRC of nothing, 0): undo that on the way in and out.
    let mut hasher = crc32fast::Hasher::new_with_initial(!crc);
    hasher.update(data);
    !hasher.finalize()
}
