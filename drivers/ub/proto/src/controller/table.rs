// SPDX-License-Identifier: GPL-2.0
//! The controller's register table: the one declaration of every BAR0
//! register, its offset and its fields.
//!
//! The table is written in the syntax of the kernel's
//! `kernel::io::register!` (as nova-core's `regs.rs` is), inside a macro
//! that hands it to a generator, so each build expands the same lines:
//!
//! - Cargo and the protocol core: `crate::controller` expands it with
//!   [`ub_define_registers!`](crate::ub_define_registers) into typed values
//!   with constants and field accessors (`controller/field.rs`);
//! - `ub.ko`: `drivers/ub/regs.rs` expands it with `kernel::io::register!`,
//!   so the driver reads and writes registers through the kernel's `Io`.
//!
//! Per-port registers are arrays of [`MAX_PORTS`](crate::controller::MAX_PORTS)
//! copies, one per port block, [`PORT_STRIDE`](crate::controller::PORT_STRIDE)
//! bytes apart; the offset written is port 0's (the block at 0x1000, so
//! 0x1000 + the offset inside the block of `controller.rst`).
//!
//! Meaning of every bit, access types and reset values:
//! `Documentation/ub/controller.rst`.

/// Expands the controller's register table: the register blocks that
/// repeat inside a port with the macro `$bases`, then the registers with
/// `$gen` (a path, e.g. `kernel::io::register`), every item declared with
/// visibility `$vis`:
/// `ub_controller_registers!(pub(crate), [kernel::io::register], [bases]);`.
///
/// A block is `$vis Family { $vis Name @ offset; ... }`: `Family` names the
/// registers declared `@ Family + offset`, each `Name` one copy of the
/// block at `offset` (port 0's).
#[macro_export]
macro_rules! ub_controller_registers {
    ($vis:vis, [$($gen:tt)+], [$($bases:tt)+]) => {
    $($bases)+! {
        /// The registers of a descriptor ring (`RING_*`), one block per
        /// ring in each port.
        $vis Ring {
            /// The TX ring's block.
            $vis TxRing @ 0x1020;
            /// The RX ring's block.
            $vis RxRing @ 0x1040;
        }
    }
    $($gen)+! {
        // ----- Global registers ---------------------------------------

        /// Identification (RO): `IDENT_VALUE`, ASCII "UBC1".
        $vis IDENT(u32) @ 0x000 {}

        /// Register interface version (RO).
        $vis VERSION(u32) @ 0x004 {
            /// Major version: incompatible changes.
            31:16 major;
            /// Minor version: compatible additions.
            15:0 minor;
        }

        /// Capabilities: ports (RO).
        $vis CAP_PORTS(u32) @ 0x008 {
            /// Number of ports (1..=8).
            3:0 ports;
        }

        /// Capabilities: descriptor rings (RO). Sizes are powers of two.
        $vis CAP_RING(u32) @ 0x00c {
            /// Smallest ring, in descriptors.
            31:16 smallest;
            /// Largest ring, in descriptors.
            15:0 largest;
        }

        /// Capabilities: transfers (RO).
        $vis CAP_XFER(u32) @ 0x010 {
            /// Bytes per flit.
            23:16 flit_bytes;
            /// Largest buffer per descriptor, in bytes (whole flits).
            15:0 max_bytes;
        }

        /// Capabilities: interrupts (RO).
        $vis CAP_MSIX(u32) @ 0x014 {
            /// MSI-X vectors: 1 + ports.
            10:0 vectors;
        }

        /// Global control (RW).
        $vis CTRL(u32) @ 0x020 {
            /// Write 1: the whole device back to its reset values (reads 0).
            1:1 reset => bool;
            /// Device enabled: DMA and rings allowed.
            0:0 enable => bool;
        }

        /// Global status (RO).
        $vis STATUS(u32) @ 0x024 {
            /// LinkUp of port n in bit n of this field.
            15:8 link_up;
            /// Device enabled.
            0:0 enabled => bool;
        }

        /// Global error cause (RW1C).
        $vis GERR(u32) @ 0x028 {
            /// A port has an error in its `ERR_STATUS`.
            1:1 port => bool;
            /// A register access was rejected.
            0:0 bad_access => bool;
        }

        /// Scratch (RW): no side effect, for the driver's self-check.
        /// Reads what was written last.
        $vis SCRATCH(u32) @ 0x02c {}

        /// Rejected register accesses since reset (RO, wrapping).
        $vis BAD_ACCESS(u32) @ 0x030 {}

        /// Global interrupt cause (RW1C), MSI-X vector 0.
        $vis GINT_CAUSE(u32) @ 0x040 {
            /// Test interrupt (from `GINT_TEST`).
            1:1 test => bool;
            /// Global error: `GERR` is non-zero.
            0:0 error => bool;
        }

        /// Global interrupt mask (RW).
        $vis GINT_MASK(u32) @ 0x044 {
            /// Bit n set: `GINT_CAUSE` bit n is masked.
            1:0 masked;
        }

        /// Global interrupt test (WO).
        $vis GINT_TEST(u32) @ 0x048 {
            /// Writing bit n sets `GINT_CAUSE` bit n.
            1:0 raise;
        }

        // ----- Per-port registers: port 0's block at 0x1000 --------------

        /// PHY status (RO).
        $vis PHY_STATUS(u32)[8, stride = 0x100] @ 0x1000 {
            /// Lanes in use (1, 2, 4 or 8).
            15:8 lanes;
            /// The port is enabled.
            2:2 enabled => bool;
            /// A retrain is in progress.
            1:1 training => bool;
            /// LinkUp.
            0:0 link_up => bool;
        }

        /// PHY lane rate (RO).
        /// In Mbit/s per lane.
        $vis PHY_LANE_RATE(u32)[8, stride = 0x100] @ 0x1004 {}

        /// PHY flit rate (RO).
        /// The aggregate line rate, in kilo-flits per second.
        $vis PHY_FLIT_RATE(u32)[8, stride = 0x100] @ 0x1008 {}

        /// PHY control (RW).
        $vis PHY_CTRL(u32)[8, stride = 0x100] @ 0x100c {
            /// Write 1: request a retrain; reads 1 until it completes.
            1:1 retrain => bool;
            /// Port on: the PHY trains and raises LinkUp once the peer is
            /// present and enabled too.
            0:0 enable => bool;
        }

        /// Completed retrains (RO, wrapping).
        $vis PHY_RETRAINS(u32)[8, stride = 0x100] @ 0x1010 {}

        /// Bit errors the PHY saw in received flits (RO, wrapping; kept
        /// across resets).
        $vis PHY_BIT_ERRORS(u32)[8, stride = 0x100] @ 0x1014 {}

        /// FEC decode failures, each losing flits (RO, wrapping; kept
        /// across resets).
        $vis PHY_FEC_FAILS(u32)[8, stride = 0x100] @ 0x1018 {}

        /// LinkUp 1→0 transitions (RO, wrapping; kept across resets).
        $vis PHY_LINK_DOWNS(u32)[8, stride = 0x100] @ 0x101c {}

        /// Ring base, low half (RW while the ring is disabled).
        /// Address bits 31:0 (16-byte aligned).
        $vis RING_BASE_LO(u32)[8, stride = 0x100] @ Ring + 0x00 {}

        /// Ring base, high half (RW while the ring is disabled).
        /// Address bits 63:32.
        $vis RING_BASE_HI(u32)[8, stride = 0x100] @ Ring + 0x04 {}

        /// Ring size (RW while the ring is disabled).
        /// In entries: a power of two in 8..=4096.
        $vis RING_SIZE(u32)[8, stride = 0x100] @ Ring + 0x08 {}

        /// Ring head (RO): next descriptor the device consumes (TX) or
        /// buffer it fills (RX).
        /// A ring index.
        $vis RING_HEAD(u32)[8, stride = 0x100] @ Ring + 0x0c {}

        /// Ring tail, the doorbell (RW): one past the last descriptor the
        /// driver produced (TX) or buffer it posted (RX).
        /// A ring index.
        $vis RING_TAIL(u32)[8, stride = 0x100] @ Ring + 0x10 {}

        /// Ring control (RW).
        $vis RING_CTRL(u32)[8, stride = 0x100] @ Ring + 0x14 {
            /// The ring stopped on a descriptor it could not read or write
            /// back (RO); cleared by disabling the ring.
            1:1 halted => bool;
            /// Ring enabled (setting it validates base and size).
            0:0 enable => bool;
        }

        /// Port interrupt cause (RW1C), MSI-X vector 1 + port.
        $vis INT_CAUSE(u32)[8, stride = 0x100] @ 0x1060 {
            /// Flits were dropped for want of RX buffers.
            5:5 rx_nobuf => bool;
            /// An error was recorded in `ERR_STATUS`.
            4:4 error => bool;
            /// A requested retrain completed.
            3:3 retrain_done => bool;
            /// LinkUp changed.
            2:2 link => bool;
            /// RX buffers filled.
            1:1 rx_done => bool;
            /// TX descriptors completed.
            0:0 tx_done => bool;
        }

        /// Port interrupt mask (RW).
        $vis INT_MASK(u32)[8, stride = 0x100] @ 0x1064 {
            /// Bit n set: `INT_CAUSE` bit n is masked.
            5:0 masked;
        }

        /// Interrupt moderation (RW).
        $vis INT_MODERATION(u32)[8, stride = 0x100] @ 0x1068 {
            /// Least microseconds between two MSI-X messages (0 = none).
            15:0 us;
        }

        /// Error status (RW1C); each bit also raises `INT_CAUSE.ERROR`,
        /// counts in `ERR_COUNT` and is mirrored in `GERR.PORT`.
        $vis ERR_STATUS(u32)[8, stride = 0x100] @ 0x1070 {
            /// A ring register was written while the ring runs (ignored).
            6:6 ring_busy => bool;
            /// A doorbell wrote a tail outside the ring, or to a disabled
            /// ring (ignored).
            5:5 doorbell => bool;
            /// A ring was enabled with a bad base or size (stays disabled).
            4:4 ring_cfg => bool;
            /// A descriptor could not be read or written back (ring halted).
            3:3 ring_dma => bool;
            /// An RX descriptor is invalid or its buffer is not inside
            /// guest memory (completed with an error).
            2:2 rx_desc => bool;
            /// A TX buffer is not inside guest memory (completed with an
            /// error).
            1:1 tx_dma => bool;
            /// A TX length is 0, not whole flits, or above the largest
            /// transfer (completed with an error).
            0:0 tx_desc => bool;
        }

        /// Last error (RO).
        $vis ERR_LAST(u32)[8, stride = 0x100] @ 0x1074 {
            /// Descriptor index (or the value written, for a doorbell).
            31:16 index;
            /// Error bit number in `ERR_STATUS`.
            7:0 code;
        }

        /// Errors recorded (RO, wrapping).
        $vis ERR_COUNT(u32)[8, stride = 0x100] @ 0x1078 {}

        /// Flits sent (RO, wrapping).
        $vis TX_FLITS(u32)[8, stride = 0x100] @ 0x1080 {}

        /// Flits written to RX buffers (RO, wrapping).
        $vis RX_FLITS(u32)[8, stride = 0x100] @ 0x1084 {}

        /// TX descriptors completed, good or bad (RO, wrapping).
        $vis TX_DESCS(u32)[8, stride = 0x100] @ 0x1088 {}

        /// RX descriptors completed (RO, wrapping).
        $vis RX_DESCS(u32)[8, stride = 0x100] @ 0x108c {}

        /// Flits dropped for want of RX buffers (RO, wrapping).
        $vis RX_NOBUF_FLITS(u32)[8, stride = 0x100] @ 0x1090 {}

        /// Doorbell writes (RO, wrapping).
        $vis DOORBELLS(u32)[8, stride = 0x100] @ 0x1094 {}
    } };
}
