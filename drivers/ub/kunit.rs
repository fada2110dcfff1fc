// SPDX-License-Identifier: GPL-2.0
//! The module's KUnit suites over the kernel build of `ub-proto` (the
//! netlink family has its own, in `netlink.rs`). Built with
//! `CONFIG_UB_KUNIT_TEST`; the harness requires each suite to run and pass.

use kernel::prelude::*;

/// Runs the shared known-answer vectors against the kernel build of
/// `ub-proto`: the same vectors the host tests derive from independent
/// reference implementations. Checks the kernel's `crc32_le` (an ICRC
/// backend of `ub.ko`, see [`crate::kernel_crc`]) on them and against the portable
/// code.
#[cfg(CONFIG_UB_KUNIT_TEST)]
#[kunit_tests(ub_proto_crc)]
mod crc_tests {
    use crate::kernel_crc;
    use crate::proto::crc::{crc30, crc32, crc32_le_portable, Crc32Update};
    use crate::proto::testvec::{
        pattern_byte, Crc32Vector, CRC30_CHECK, CRC30_VECTORS, CRC32_CHECK, CRC32_VECTORS,
    };

    /// The ICRC of vector `v` computed by `backend`, fed in the vector's
    /// chunks.
    fn icrc_by(backend: Crc32Update, v: &Crc32Vector) -> u32 {
        let mut reg = u32::MAX;
        v.input.for_each_chunk(|chunk| reg = backend(reg, chunk));
        !reg
    }

    #[test]
    fn kernel_crc32_le_vectors() {
        for v in CRC32_VECTORS {
            assert_eq!(icrc_by(kernel_crc::crc32_le, v), v.crc32);
            assert_eq!(icrc_by(crc32_le_portable, v), v.crc32);
            assert_eq!(icrc_by(kernel_crc::ICRC_BACKEND, v), v.crc32);
        }
    }

    /// Every length from 0 to 304 bytes at 16 alignments, from changing
    /// register values: both sides of each step size of the portable code
    /// and of the kernel's folding thresholds.
    #[test]
    fn kernel_crc32_le_matches_portable() {
        let mut buf = [0u8; 320];
        for (i, byte) in buf.iter_mut().enumerate() {
            *byte = pattern_byte(i);
        }
        let mut reg = 0x1234_5678u32;
        for offset in 0..16 {
            for len in 0..=buf.len() - 16 {
                let data = buf.get(offset..offset + len).unwrap_or(&[]);
                reg = reg.rotate_left(5) ^ len as u32;
                assert_eq!(
                    kernel_crc::crc32_le(reg, data),
                    crc32_le_portable(reg, data)
                );
            }
        }
    }

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
            assert_eq!(v.compute(), v.crc30);
        }
    }

    #[test]
    fn crc32_vectors() {
        for v in CRC32_VECTORS {
            assert_eq!(v.compute(), v.crc32);
        }
    }
}

/// The specification's worked examples of the data link layer, computed by
/// the kernel build of `ub-proto` (the host tests check the same examples in
/// `drivers/ub/proto/tests/link_*.rs`).
#[cfg(CONFIG_UB_KUNIT_TEST)]
#[kunit_tests(ub_proto_link)]
mod link_tests {
    use crate::proto::link::credit::TxCredits;
    use crate::proto::link::ctrl::{fallback, negotiate_mask};
    use crate::proto::link::frame::{cells_for_buffer, Mode, Plength, LPH_BYTES, MAX_VLS};

    /// §4.6.1: 1 MB of receive buffer in 8-flit cells is 6553 cells.
    #[test]
    fn buffer_of_1mb_is_6553_cells() {
        assert_eq!(cells_for_buffer(1 << 20, 8), 6553);
    }

    /// §4.6 sharing mode: 6553 cells with 128 reserved for VL0 and VL1
    /// leave 6297 shared.
    #[test]
    fn sharing_mode_leaves_6297_shared() {
        let mut reserve = [0u16; MAX_VLS];
        reserve[0] = 128;
        reserve[1] = 128;
        let mut order = [0u8; MAX_VLS];
        for (vl, slot) in (0u8..).zip(order.iter_mut()) {
            *slot = vl;
        }
        let mut credits = TxCredits::new(true, 0b11, reserve, order);
        credits.add_initial(0, 3277);
        credits.add_initial(1, 3276);
        credits.finish_init();
        assert_eq!(credits.initial_total(), 6553);
        assert_eq!(credits.shared(), 6297);
    }

    /// §4.3.2: 10 bytes in the only flit encode PLENGTH[4:0] = 9; code 27
    /// means 16 bytes ending one flit before the last.
    #[test]
    fn plength_examples() {
        assert!(matches!(
            Plength::encode(Mode::Crc, 10 - LPH_BYTES),
            Ok((pl, _)) if pl.end_code() == 9
        ));
        let layout = Plength::from_raw((1 << 5) | 27).decode(Mode::Crc);
        assert!(matches!(
            layout,
            Ok(l) if l.last_flits == 2 && usize::from(l.payload_len) == 16 - LPH_BYTES
        ));
    }

    /// §4.4: {32,16} against {64,32,16} gives 16; {32} against {16} falls
    /// back to 8 flits per cell.
    #[test]
    fn negotiation_examples() {
        assert_eq!(
            negotiate_mask(32 | 16, 64 | 32 | 16, fallback::FLOW_CTRL_SIZE),
            16
        );
        assert_eq!(negotiate_mask(32, 16, fallback::FLOW_CTRL_SIZE), 8);
    }
}

/// Present only in the harness self-test's broken build of the module
/// (`make UB_INJECT_KUNIT_FAILURE=1`): proves that a failing KUnit
/// assertion fails the test command. A separate suite, because the KUnit
/// macro reports a test that is configured out as skipped.
#[cfg(all(CONFIG_UB_KUNIT_TEST, ub_inject_kunit_failure))]
#[kunit_tests(ub_harness_selftest)]
mod injected_failure {
    use crate::proto::crc::crc32;

    #[test]
    fn injected_failure() {
        assert_eq!(crc32(b"123456789"), 0);
    }
}
