// SPDX-License-Identifier: GPL-2.0
//! The emulated UB controller's register interface and descriptor formats,
//! declared once for the device model (`ub-fabric`) and the driver (`ub.ko`).
//!
//! The controller is a PCIe function with one 32-bit memory BAR (BAR0,
//! [`BAR0_SIZE`] bytes): global registers at 0x0000, one register block per
//! port at [`PORT_BASE`] + port × [`PORT_STRIDE`], and the MSI-X table and
//! PBA at [`MSIX_TABLE_OFFSET`] / [`MSIX_PBA_OFFSET`]. Every register is 32
//! bits, little-endian, accessed with naturally aligned 32-bit accesses
//! (a 64-bit access is two 32-bit accesses, low half first).
//!
//! The wire carries link-layer blocks made of 20-byte flits: the driver runs
//! the data link layer in software and the controller moves whole flits
//! between the descriptor rings and the PHY. The full description, bit by
//! bit, with the reasons for each choice, is `Documentation/ub/controller.rst`.

/// PCI vendor ID: Huawei, the owner of the UB specification.
pub const PCI_VENDOR_ID: u16 = 0x19e5;
/// PCI device ID of the emulated UB controller (no in-tree Linux driver
/// uses it for this vendor).
pub const PCI_DEVICE_ID: u16 = 0xd0b1;
/// PCI subsystem device ID: 0x0001 marks the software-emulated model.
pub const PCI_SUBSYS_DEVICE_ID: u16 = 0x0001;
/// PCI revision ID.
pub const PCI_REVISION: u8 = 0x01;
/// PCI class code (class, subclass, programming interface): serial bus
/// controller, other (0x0c/0x80/0x00), like other fabric interconnects.
pub const PCI_CLASS_CODE: u32 = 0x0c_80_00;

/// Size of BAR0 in bytes.
pub const BAR0_SIZE: u32 = 0x1_0000;
/// Bytes in a flit, the unit the wire carries.
pub const FLIT_BYTES: u32 = 20;

// ----- Global registers ------------------------------------------------

/// Identification (RO): [`IDENT_VALUE`].
pub const REG_IDENT: u32 = 0x000;
/// The value of [`REG_IDENT`]: ASCII "UBC1", first byte in bits 7:0.
pub const IDENT_VALUE: u32 = u32::from_le_bytes(*b"UBC1");
/// Version (RO): major in bits 31:16, minor in bits 15:0.
pub const REG_VERSION: u32 = 0x004;
/// The register interface version this file describes (1.0).
pub const VERSION_VALUE: u32 = 0x0001_0000;
/// Capabilities: ports (RO). Bits 3:0: number of ports (1..=[`MAX_PORTS`]).
pub const REG_CAP_PORTS: u32 = 0x008;
/// Capabilities: rings (RO). Bits 15:0: largest ring (entries); bits 31:16:
/// smallest ring (entries). Sizes are powers of two.
pub const REG_CAP_RING: u32 = 0x00c;
/// Capabilities: transfers (RO). Bits 15:0: largest buffer per descriptor
/// in bytes (a multiple of [`FLIT_BYTES`]); bits 23:16: flit size in bytes.
pub const REG_CAP_XFER: u32 = 0x010;
/// Capabilities: interrupts (RO). Bits 10:0: MSI-X vectors.
pub const REG_CAP_MSIX: u32 = 0x014;
/// Global control (RW). See `CTRL_*`.
pub const REG_CTRL: u32 = 0x020;
/// Global status (RO). See `STATUS_*`.
pub const REG_STATUS: u32 = 0x024;
/// Global error cause (RW1C). See `GERR_*`.
pub const REG_GERR: u32 = 0x028;
/// Scratch register (RW), no side effect; reset value 0.
pub const REG_SCRATCH: u32 = 0x02c;
/// Count of rejected register accesses (RO, wrapping).
pub const REG_BAD_ACCESS: u32 = 0x030;
/// Global interrupt cause (RW1C), MSI-X vector [`VECTOR_GLOBAL`]. See
/// `GINT_*`.
pub const REG_GINT_CAUSE: u32 = 0x040;
/// Global interrupt mask (RW), bit set = masked. Reset value: all masked.
pub const REG_GINT_MASK: u32 = 0x044;
/// Global interrupt test (WO): writing bit n sets bit n of
/// [`REG_GINT_CAUSE`] (the selftest uses it to provoke an MSI-X message).
pub const REG_GINT_TEST: u32 = 0x048;

/// [`REG_CTRL`] bit 0: device enabled (DMA and rings allowed).
pub const CTRL_ENABLE: u32 = 1 << 0;
/// [`REG_CTRL`] bit 1: write 1 to reset the whole device to its reset
/// values (self-clearing; reads 0).
pub const CTRL_RESET: u32 = 1 << 1;
/// [`REG_STATUS`] bit 0: device enabled.
pub const STATUS_ENABLED: u32 = 1 << 0;
/// [`REG_STATUS`] bits 15:8: LinkUp of port n in bit 8 + n.
pub const STATUS_LINK_SHIFT: u32 = 8;
/// [`REG_GERR`] bit 0: a register access was rejected (unaligned, wrong
/// size, or unknown offset).
pub const GERR_BAD_ACCESS: u32 = 1 << 0;
/// [`REG_GERR`] bit 1: a port reported an error (see its `ERR_STATUS`).
pub const GERR_PORT: u32 = 1 << 1;
/// [`REG_GINT_CAUSE`] bit 0: global error ([`REG_GERR`] non-zero).
pub const GINT_ERROR: u32 = 1 << 0;
/// [`REG_GINT_CAUSE`] bit 1: test interrupt (from [`REG_GINT_TEST`]).
pub const GINT_TEST: u32 = 1 << 1;
/// Defined bits of [`REG_GINT_CAUSE`] / [`REG_GINT_MASK`].
pub const GINT_ALL: u32 = GINT_ERROR | GINT_TEST;

// ----- Capabilities of this model -------------------------------------

/// Most ports one controller has.
pub const MAX_PORTS: u32 = 8;
/// Smallest ring, in descriptors.
pub const RING_MIN: u32 = 8;
/// Largest ring, in descriptors.
pub const RING_MAX: u32 = 4096;
/// Largest buffer per descriptor, in bytes (128 flits: room for a 32-flit
/// block plus a whole 33-flit retry set and then some).
pub const MAX_XFER_BYTES: u32 = 128 * FLIT_BYTES;

// ----- Per-port registers ---------------------------------------------

/// Offset of port 0's register block.
pub const PORT_BASE: u32 = 0x1000;
/// Distance between two ports' register blocks.
pub const PORT_STRIDE: u32 = 0x100;

/// PHY status (RO). See `PHY_*`.
pub const P_PHY_STATUS: u32 = 0x00;
/// PHY lane rate (RO): Mbit/s per lane.
pub const P_PHY_LANE_RATE: u32 = 0x04;
/// PHY flit rate (RO): aggregate line rate in kilo-flits per second.
pub const P_PHY_FLIT_RATE: u32 = 0x08;
/// PHY control (RW). See `PHYC_*`.
pub const P_PHY_CTRL: u32 = 0x0c;
/// Completed retrains (RO, wrapping).
pub const P_PHY_RETRAINS: u32 = 0x10;
/// Bit errors the PHY saw on received flits (RO, wrapping).
pub const P_PHY_BIT_ERRORS: u32 = 0x14;
/// FEC decode failures (RO, wrapping); each loses flits (see RX `LOST`).
pub const P_PHY_FEC_FAILS: u32 = 0x18;
/// LinkUp 1→0 transitions (RO, wrapping).
pub const P_PHY_LINK_DOWNS: u32 = 0x1c;
/// TX ring base, low 32 bits (RW while TX is disabled; 16-byte aligned).
pub const P_TX_BASE_LO: u32 = 0x20;
/// TX ring base, high 32 bits.
pub const P_TX_BASE_HI: u32 = 0x24;
/// TX ring size in descriptors (RW while disabled; power of two in
/// [`RING_MIN`]..=[`RING_MAX`]).
pub const P_TX_SIZE: u32 = 0x28;
/// TX head (RO): next descriptor the device consumes.
pub const P_TX_HEAD: u32 = 0x2c;
/// TX tail / doorbell (RW): one past the last descriptor the driver
/// produced.
pub const P_TX_TAIL: u32 = 0x30;
/// TX control (RW). See `RING_*`.
pub const P_TX_CTRL: u32 = 0x34;
/// RX ring base, low 32 bits.
pub const P_RX_BASE_LO: u32 = 0x40;
/// RX ring base, high 32 bits.
pub const P_RX_BASE_HI: u32 = 0x44;
/// RX ring size in descriptors.
pub const P_RX_SIZE: u32 = 0x48;
/// RX head (RO): next buffer the device fills.
pub const P_RX_HEAD: u32 = 0x4c;
/// RX tail / doorbell (RW): one past the last buffer the driver posted.
pub const P_RX_TAIL: u32 = 0x50;
/// RX control (RW). See `RING_*`.
pub const P_RX_CTRL: u32 = 0x54;
/// Interrupt cause (RW1C), this port's MSI-X vector. See `INT_*`.
pub const P_INT_CAUSE: u32 = 0x60;
/// Interrupt mask (RW), bit set = masked. Reset value: all masked.
pub const P_INT_MASK: u32 = 0x64;
/// Interrupt moderation (RW): bits 15:0 = least microseconds between two
/// MSI-X messages of this port (0 = none).
pub const P_INT_MODERATION: u32 = 0x68;
/// Error status (RW1C). See `ERR_*`.
pub const P_ERR_STATUS: u32 = 0x70;
/// Last error (RO): bits 7:0 error bit number, bits 31:16 descriptor index.
pub const P_ERR_LAST: u32 = 0x74;
/// Errors counted (RO, wrapping).
pub const P_ERR_COUNT: u32 = 0x78;
/// Flits sent (RO, wrapping).
pub const P_TX_FLITS: u32 = 0x80;
/// Flits received into RX buffers (RO, wrapping).
pub const P_RX_FLITS: u32 = 0x84;
/// TX descriptors completed, good or bad (RO, wrapping).
pub const P_TX_DESCS: u32 = 0x88;
/// RX descriptors completed (RO, wrapping).
pub const P_RX_DESCS: u32 = 0x8c;
/// Flits dropped because no RX buffer was posted (RO, wrapping).
pub const P_RX_NOBUF_FLITS: u32 = 0x90;
/// Doorbell writes (RO, wrapping).
pub const P_DOORBELLS: u32 = 0x94;

/// [`P_PHY_STATUS`] bit 0: LinkUp.
pub const PHY_LINK_UP: u32 = 1 << 0;
/// [`P_PHY_STATUS`] bit 1: a retrain is in progress.
pub const PHY_TRAINING: u32 = 1 << 1;
/// [`P_PHY_STATUS`] bit 2: the port is enabled.
pub const PHY_ENABLED: u32 = 1 << 2;
/// [`P_PHY_STATUS`] bits 15:8: lanes in use (1, 2, 4 or 8).
pub const PHY_LANES_SHIFT: u32 = 8;
/// [`P_PHY_CTRL`] bit 0: enable the port (the PHY trains and raises
/// LinkUp once the peer is present and enabled too).
pub const PHYC_ENABLE: u32 = 1 << 0;
/// [`P_PHY_CTRL`] bit 1: write 1 to request a retrain; reads 1 until the
/// retrain completes ([`INT_RETRAIN_DONE`]).
pub const PHYC_RETRAIN: u32 = 1 << 1;
/// `P_TX_CTRL` / `P_RX_CTRL` bit 0: ring enabled. Setting it validates the
/// base and size; a bad configuration sets [`ERR_RING_CFG`] and leaves the
/// ring disabled.
pub const RING_ENABLE: u32 = 1 << 0;
/// `P_TX_CTRL` / `P_RX_CTRL` bit 1 (RO): the ring stopped on an error it
/// cannot skip (its descriptors are unreadable); clear by disabling.
pub const RING_HALTED: u32 = 1 << 1;

/// [`P_INT_CAUSE`] bit 0: TX descriptors completed.
pub const INT_TX_DONE: u32 = 1 << 0;
/// [`P_INT_CAUSE`] bit 1: RX buffers filled.
pub const INT_RX_DONE: u32 = 1 << 1;
/// [`P_INT_CAUSE`] bit 2: LinkUp changed.
pub const INT_LINK: u32 = 1 << 2;
/// [`P_INT_CAUSE`] bit 3: a requested retrain completed.
pub const INT_RETRAIN_DONE: u32 = 1 << 3;
/// [`P_INT_CAUSE`] bit 4: an error was recorded in [`P_ERR_STATUS`].
pub const INT_ERROR: u32 = 1 << 4;
/// [`P_INT_CAUSE`] bit 5: flits were dropped for want of RX buffers.
pub const INT_RX_NOBUF: u32 = 1 << 5;
/// Defined bits of [`P_INT_CAUSE`] / [`P_INT_MASK`].
pub const INT_ALL: u32 = 0x3f;

/// [`P_ERR_STATUS`] bit 0: a TX descriptor's length is 0, not a multiple
/// of [`FLIT_BYTES`], or above [`MAX_XFER_BYTES`] (descriptor skipped).
pub const ERR_TX_DESC: u32 = 1 << 0;
/// Bit 1: a TX buffer lies outside guest memory (descriptor skipped).
pub const ERR_TX_DMA: u32 = 1 << 1;
/// Bit 2: an RX descriptor is invalid or its buffer lies outside guest
/// memory (descriptor completed with an error, data kept for the next).
pub const ERR_RX_DESC: u32 = 1 << 2;
/// Bit 3: a descriptor ring is unreadable (ring halted).
pub const ERR_RING_DMA: u32 = 1 << 3;
/// Bit 4: ring enabled with a bad base or size (ring stays disabled).
pub const ERR_RING_CFG: u32 = 1 << 4;
/// Bit 5: a doorbell wrote a tail outside the ring (write ignored).
pub const ERR_DOORBELL: u32 = 1 << 5;
/// Bit 6: a ring register was written while the ring is enabled (ignored).
pub const ERR_RING_BUSY: u32 = 1 << 6;
/// Defined bits of [`P_ERR_STATUS`].
pub const ERR_ALL: u32 = 0x7f;

// ----- Interrupts -----------------------------------------------------

/// MSI-X vector of the global causes.
pub const VECTOR_GLOBAL: u16 = 0;

/// MSI-X vector of port `port`: 1 + port.
pub const fn port_vector(port: u32) -> u16 {
    // MAX_PORTS is far below u16::MAX; clamp so the result stays in range.
    let p = if port < MAX_PORTS { port } else { MAX_PORTS };
    (p + 1) as u16
}

/// MSI-X vectors of a controller with `ports` ports.
pub const fn msix_vectors(ports: u32) -> u16 {
    port_vector(ports)
}

/// Offset of the MSI-X table in BAR0 (16 bytes per vector).
pub const MSIX_TABLE_OFFSET: u32 = 0x8000;
/// Offset of the MSI-X pending-bit array in BAR0.
pub const MSIX_PBA_OFFSET: u32 = 0x9000;

/// The BAR0 offset of register `reg` (a `P_*` constant) of port `port`,
/// or `None` if `port` is not below [`MAX_PORTS`].
pub const fn port_reg(port: u32, reg: u32) -> Option<u32> {
    if port >= MAX_PORTS || reg >= PORT_STRIDE {
        return None;
    }
    Some(PORT_BASE + port * PORT_STRIDE + reg)
}

/// Splits a BAR0 offset inside the port blocks into (port, register), or
/// `None` if it is not in a port block.
pub const fn split_port_reg(off: u32) -> Option<(u32, u32)> {
    if off < PORT_BASE {
        return None;
    }
    let rel = off - PORT_BASE;
    let port = rel / PORT_STRIDE;
    if port >= MAX_PORTS {
        return None;
    }
    Some((port, rel % PORT_STRIDE))
}

/// Whether `size` is a valid ring size (power of two within
/// [`RING_MIN`]..=[`RING_MAX`]).
pub const fn ring_size_ok(size: u32) -> bool {
    size >= RING_MIN && size <= RING_MAX && size.is_power_of_two()
}

/// Next ring index after `idx` in a ring of `size` entries (a power of two).
pub const fn ring_next(idx: u32, size: u32) -> u32 {
    idx.wrapping_add(1) & size.wrapping_sub(1)
}

/// Descriptors waiting between `head` and `tail` in a ring of `size`.
pub const fn ring_pending(head: u32, tail: u32, size: u32) -> u32 {
    tail.wrapping_sub(head) & size.wrapping_sub(1)
}

// ----- Descriptors ----------------------------------------------------

/// Bytes per descriptor; rings are arrays of descriptors, 16-byte aligned.
pub const DESC_BYTES: usize = 16;

/// [`Desc::status`] bit 0: the device completed the descriptor.
pub const DESC_DONE: u16 = 1 << 0;
/// [`Desc::status`] bit 1: the descriptor failed; bits 15:8 hold the
/// `ERR_*` bit number.
pub const DESC_ERR: u16 = 1 << 1;
/// [`Desc::status`] bit 2 (RX): flits were lost on the wire or for want of
/// buffers just before this buffer's data; [`Desc::lost`] says how many.
pub const DESC_LOST: u16 = 1 << 2;
/// Shift of the error code in [`Desc::status`].
pub const DESC_ERR_SHIFT: u16 = 8;

/// One TX or RX descriptor (16 bytes, little-endian):
///
/// | Bytes  | Field      | Written by | Meaning                                   |
/// |--------|------------|------------|-------------------------------------------|
/// | 0..8   | `addr`     | driver     | buffer guest-physical address             |
/// | 8..10  | `len`      | driver     | TX: bytes to send; RX: buffer capacity    |
/// | 10..12 | `done_len` | device     | TX: bytes sent; RX: bytes written         |
/// | 12..14 | `status`   | device     | `DESC_*` bits, error code in 15:8         |
/// | 14..16 | `lost`     | device     | RX: flits lost before this data (saturating) |
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Desc {
    /// Buffer address (guest physical).
    pub addr: u64,
    /// TX: bytes to send (whole flits); RX: capacity (whole flits used).
    pub len: u16,
    /// Bytes sent or written by the device.
    pub done_len: u16,
    /// Completion status (`DESC_*`).
    pub status: u16,
    /// RX: flits lost just before this buffer's data.
    pub lost: u16,
}

impl Desc {
    /// Decodes a descriptor.
    pub const fn decode(b: &[u8; DESC_BYTES]) -> Self {
        Self {
            addr: u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]),
            len: u16::from_le_bytes([b[8], b[9]]),
            done_len: u16::from_le_bytes([b[10], b[11]]),
            status: u16::from_le_bytes([b[12], b[13]]),
            lost: u16::from_le_bytes([b[14], b[15]]),
        }
    }

    /// Encodes a descriptor.
    pub const fn encode(&self) -> [u8; DESC_BYTES] {
        let a = self.addr.to_le_bytes();
        let l = self.len.to_le_bytes();
        let d = self.done_len.to_le_bytes();
        let s = self.status.to_le_bytes();
        let x = self.lost.to_le_bytes();
        [
            a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], l[0], l[1], d[0], d[1], s[0], s[1],
            x[0], x[1],
        ]
    }

    /// The device-written tail of the descriptor (bytes 10..16), which is
    /// all the device writes back on completion.
    pub const fn writeback(&self) -> [u8; 6] {
        let d = self.done_len.to_le_bytes();
        let s = self.status.to_le_bytes();
        let x = self.lost.to_le_bytes();
        [d[0], d[1], s[0], s[1], x[0], x[1]]
    }

    /// Offset of the write-back part inside a descriptor.
    pub const WRITEBACK_OFFSET: usize = 10;

    /// The error code (an `ERR_*` bit number) of a failed descriptor.
    pub const fn error_code(&self) -> Option<u8> {
        if self.status & DESC_ERR != 0 {
            Some((self.status >> DESC_ERR_SHIFT) as u8)
        } else {
            None
        }
    }
}

/// Guest-physical address of descriptor `idx` of a ring at `base`, or
/// `None` on overflow.
pub const fn desc_addr(base: u64, idx: u32) -> Option<u64> {
    // DESC_BYTES is 16; idx < RING_MAX keeps the product small.
    base.checked_add((idx as u64) * (DESC_BYTES as u64))
}
