// SPDX-License-Identifier: GPL-2.0
//! Controller-level helpers of the device-model tests: a port's register
//! offsets, ring programming and descriptors in (fake) guest memory, all
//! through the shared register table.

#![allow(dead_code, reason = "each test binary uses part of the helpers")]

use ub_fabric::device::Controller;
use ub_proto::controller::{self as reg, RegisterBase, Ring};

/// BAR0 offset of port `port`'s copy of the register at port-0 offset `r`.
pub fn preg(port: u32, r: u32) -> u32 {
    reg::port_reg(port, r).expect("port reg")
}

/// Port 0's offset of the TX (`tx`) or RX ring block.
pub fn ring_block(tx: bool) -> u32 {
    if tx {
        <reg::TxRing as RegisterBase<Ring>>::BASE
    } else {
        <reg::RxRing as RegisterBase<Ring>>::BASE
    }
}

/// Programs and enables `port`'s TX (`tx`) or RX ring: `size` entries at
/// guest address `base`.
pub fn program_ring(c: &mut Controller, port: u32, tx: bool, base: u64, size: u32) {
    let block = ring_block(tx);
    let (lo, hi) = reg::split_u64(base);
    for (r, v) in [
        (reg::RING_BASE_LO::OFFSET, lo),
        (reg::RING_BASE_HI::OFFSET, hi),
        (reg::RING_SIZE::OFFSET, size),
        (reg::RING_CTRL::OFFSET, reg::RING_CTRL::ZERO.enable().mask()),
    ] {
        c.write32(preg(port, block + r), v, 0);
    }
}

/// Enables `port` and unmasks its causes; the PHY reports LinkUp.
pub fn enable_port(c: &mut Controller, port: u32) {
    c.write32(preg(port, reg::INT_MASK::OFFSET), 0, 0);
    c.write32(
        preg(port, reg::PHY_CTRL::OFFSET),
        reg::PHY_CTRL::ZERO.enable().mask(),
        0,
    );
    c.set_link(port as usize, true);
}

/// Writes descriptor `idx` of the ring at `base`: buffer `addr`, `len`.
pub fn put_desc(c: &mut Controller, base: u64, idx: u32, addr: u64, len: u16) {
    let d = reg::Desc {
        addr,
        len,
        ..Default::default()
    };
    c.memory_mut()
        .write(reg::desc_addr(base, idx).expect("addr"), &d.encode())
        .expect("desc");
}

/// Reads descriptor `idx` of the ring at `base`.
pub fn get_desc(c: &mut Controller, base: u64, idx: u32) -> reg::Desc {
    let mut raw = [0u8; reg::DESC_BYTES];
    c.memory_mut()
        .read(reg::desc_addr(base, idx).expect("addr"), &mut raw)
        .expect("desc");
    reg::Desc::decode(&raw)
}
