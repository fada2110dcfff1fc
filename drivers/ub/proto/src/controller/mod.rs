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

mod field;
pub mod ring;
mod table;

pub use field::{field_mask, Field, Register, RegisterBase};

/// The value of [`IDENT`]: ASCII "UBC1", first byte in bits 7:0.
pub const IDENT_VALUE: u32 = u32::from_le_bytes(*b"UBC1");
/// The register interface version this file describes (1.0), the value of
/// [`VERSION`].
pub const VERSION_VALUE: u32 = VERSION::ZERO.major().bits(1);

// The register types: the table (`table.rs`) expanded with this crate's
// generator (`field.rs`). `ub.ko`'s driver expands the same table with
// `kernel::io::register!` (`drivers/ub/regs.rs`).
crate::ub_controller_registers!(pub, [crate::ub_define_registers], [crate::ub_define_bases]);
crate::ub_controller_registers!(pub, [crate::ub_register_list], [crate::ub_no_bases]);

/// Ignores the table's blocks (for the second expansion, which only lists
/// registers).
#[macro_export]
#[doc(hidden)]
macro_rules! ub_no_bases {
    ($($t:tt)*) => {};
}

/// One register of the table, as listed in [`REGISTERS`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RegisterInfo {
    /// Its name, as in `Documentation/ub/controller.rst`.
    pub name: &'static str,
    /// The block it belongs to (`Some("Ring")`: `offset` is relative to
    /// each copy of that block), or `None`.
    pub block: Option<&'static str>,
    /// BAR0 offset (port 0's copy for a per-port register).
    pub offset: u32,
    /// Copies: 1, or [`MAX_PORTS`] for a per-port register.
    pub copies: u32,
    /// Bytes between copies (0 for a single register).
    pub stride: u32,
    /// Fields: (name, high bit, low bit).
    pub fields: &'static [(&'static str, u32, u32)],
}

// ----- Capabilities of this model -------------------------------------

/// Most ports one controller has: the number of per-port register blocks.
pub const MAX_PORTS: u32 = PHY_STATUS::SIZE;
/// Smallest ring, in descriptors.
pub const RING_MIN: u32 = 8;
/// Largest ring, in descriptors.
pub const RING_MAX: u32 = 4096;
/// Largest buffer per descriptor, in bytes (128 flits: room for a 32-flit
/// block plus a whole 33-flit retry set and then some).
pub const MAX_XFER_BYTES: u32 = 128 * FLIT_BYTES;

/// Offset of port 0's register block (its first register).
pub const PORT_BASE: u32 = PHY_STATUS::OFFSET;
/// Distance between two ports' register blocks.
pub const PORT_STRIDE: u32 = PHY_STATUS::STRIDE;

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

/// The BAR0 offset of port `port`'s copy of the per-port register whose
/// port-0 offset is `reg0` (its `OFFSET`, e.g. `TX_TAIL::OFFSET`), or
/// `None` if `port` is not below [`MAX_PORTS`] or `reg0` is not in port
/// 0's block. `REG::at(port)` is this for one register.
pub const fn port_reg(port: u32, reg0: u32) -> Option<u32> {
    if port >= MAX_PORTS || reg0 < PORT_BASE || reg0 - PORT_BASE >= PORT_STRIDE {
        return None;
    }
    Some(reg0 + port * PORT_STRIDE)
}

/// Splits a BAR0 offset inside the port blocks into (port, the port-0
/// offset of the same register), or `None` if it is not in a port block.
/// The second value matches the registers' `OFFSET` constants.
pub const fn split_port_reg(off: u32) -> Option<(u32, u32)> {
    if off < PORT_BASE {
        return None;
    }
    let rel = off - PORT_BASE;
    let port = rel / PORT_STRIDE;
    if port >= MAX_PORTS {
        return None;
    }
    Some((port, PORT_BASE + rel % PORT_STRIDE))
}

/// The 64-bit value of a register pair (`*_BASE_LO`, `*_BASE_HI`).
#[allow(clippy::cast_lossless, reason = "From is not const")]
pub const fn join_u64(lo: u32, hi: u32) -> u64 {
    ((hi as u64) << 32) | lo as u64
}

/// The (low, high) halves of `v`, for a register pair.
pub const fn split_u64(v: u64) -> (u32, u32) {
    (v as u32, (v >> 32) as u32)
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

crate::ub_define_registers! {
    /// [`Desc::status`], written by the device on completion.
    pub DESC_STATUS(u16) {
        /// The `ERR_STATUS` bit number of the error, when `err`.
        15:8 code;
        /// RX: flits were lost on the wire or for want of buffers just
        /// before this buffer's data; [`Desc::lost`] says how many.
        2:2 lost => bool;
        /// The descriptor failed.
        1:1 err => bool;
        /// The device completed the descriptor.
        0:0 done => bool;
    }
}

impl DESC_STATUS {
    /// Completed with the error `err` (an `ERR_STATUS` field).
    pub fn failed(err: Field<ERR_STATUS>) -> Self {
        Self::ZERO
            .done()
            .set(true)
            .err()
            .set(true)
            .code()
            .set(err.shift())
    }

    /// Completed without error.
    pub fn ok() -> Self {
        Self::ZERO.done().set(true)
    }
}

/// One TX or RX descriptor (16 bytes, little-endian):
///
/// | Bytes  | Field      | Written by | Meaning                                   |
/// |--------|------------|------------|-------------------------------------------|
/// | 0..8   | `addr`     | driver     | buffer guest-physical address             |
/// | 8..10  | `len`      | driver     | TX: bytes to send; RX: buffer capacity    |
/// | 10..12 | `done_len` | device     | TX: bytes sent; RX: bytes written         |
/// | 12..14 | `status`   | device     | [`DESC_STATUS`]                           |
/// | 14..16 | `lost`     | device     | RX: flits lost before this data (saturating) |
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Desc {
    /// Buffer address (guest physical).
    pub addr: u64,
    /// TX: bytes to send (whole flits); RX: capacity (whole flits used).
    pub len: u16,
    /// Bytes sent or written by the device.
    pub done_len: u16,
    /// Completion status ([`DESC_STATUS`]).
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

    /// The completion status.
    pub const fn state(&self) -> DESC_STATUS {
        DESC_STATUS::from_raw(self.status)
    }

    /// The error code (an `ERR_STATUS` bit number) of a failed descriptor.
    pub const fn error_code(&self) -> Option<u8> {
        let s = self.state();
        if s.err().is_set() {
            Some(s.code().get() as u8)
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
