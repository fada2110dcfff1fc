// SPDX-License-Identifier: GPL-2.0
//! The shared register map (`ub_proto::controller`): layout invariants
//! and the typed helpers.

use ub_proto::controller as reg;

/// The ring blocks of port 0, by block name.
fn ring_blocks() -> [u32; 2] {
    use reg::{RegisterBase, Ring};
    [
        <reg::TxRing as RegisterBase<Ring>>::BASE,
        <reg::RxRing as RegisterBase<Ring>>::BASE,
    ]
}

/// Every BAR0 offset the table declares, with the register's name.
fn all_offsets() -> Vec<(u32, &'static str)> {
    let mut v = Vec::new();
    for r in reg::REGISTERS {
        let bases: Vec<u32> = match r.block {
            Some("Ring") => ring_blocks().to_vec(),
            Some(other) => panic!("unknown block {other}"),
            None => vec![0],
        };
        for base in bases {
            for i in 0..r.copies {
                v.push((base + r.offset + i * r.stride, r.name));
            }
        }
    }
    v
}

#[test]
fn layout_is_consistent() {
    let mut seen = std::collections::HashMap::new();
    for (off, name) in all_offsets() {
        assert_eq!(off % 4, 0, "{name} unaligned");
        assert!(off < reg::MSIX_TABLE_OFFSET, "{name} over the MSI-X table");
        if let Some(other) = seen.insert(off, name) {
            panic!("{off:#x} is both {other} and {name}");
        }
    }
    for r in reg::REGISTERS {
        let mut bits = 0u32;
        for &(f, hi, lo) in r.fields {
            assert!(hi >= lo && hi < 32, "{}.{f}", r.name);
            let m = reg::field_mask(hi, lo);
            assert_eq!(bits & m, 0, "{}.{f} overlaps", r.name);
            bits |= m;
        }
        if r.block.is_some() {
            assert_eq!((r.copies, r.stride), (reg::MAX_PORTS, reg::PORT_STRIDE));
            // Inside the block: the TX block ends where the RX one starts.
            let [tx, rx] = ring_blocks();
            assert!(r.offset < rx - tx, "{} outside its block", r.name);
        } else if r.copies > 1 {
            assert_eq!((r.copies, r.stride), (reg::MAX_PORTS, reg::PORT_STRIDE));
            assert!((reg::PORT_BASE..reg::PORT_BASE + reg::PORT_STRIDE).contains(&r.offset));
        } else {
            assert!(r.offset < reg::PORT_BASE, "{} global", r.name);
        }
    }
    let table_end = reg::MSIX_TABLE_OFFSET + 16 * u32::from(reg::msix_vectors(reg::MAX_PORTS));
    assert!(table_end <= reg::MSIX_PBA_OFFSET && reg::MSIX_PBA_OFFSET < reg::BAR0_SIZE);
    assert_eq!(reg::IDENT_VALUE.to_le_bytes(), *b"UBC1");
    assert_eq!(reg::MAX_XFER_BYTES % reg::FLIT_BYTES, 0);
}

/// `controller.rst` describes the same registers at the same offsets as
/// the table: its register rows (`0x...  ``NAME``  ...`), global ones at
/// their offset, per-port ones at port 0's, ring ones in their block.
#[test]
fn documentation_matches_the_table() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../Documentation/ub/controller.rst"
    );
    let doc = std::fs::read_to_string(path).expect("controller.rst");
    let mut documented = Vec::new();
    let mut base = 0;
    for line in doc.lines() {
        if line.starts_with("Per-port registers") {
            base = reg::PORT_BASE;
        } else if line.starts_with("Ring registers") {
            base = 0;
        }
        let mut words = line.split_whitespace();
        let (Some(off), Some(name)) = (words.next(), words.next()) else {
            continue;
        };
        let (Some(hex), Some(name)) = (
            off.strip_prefix("0x"),
            name.strip_prefix("``").and_then(|n| n.strip_suffix("``")),
        ) else {
            continue;
        };
        let off = u32::from_str_radix(hex, 16).expect("hex offset");
        documented.push((name.to_string(), base + off));
    }
    let mut table: Vec<(String, u32)> = reg::REGISTERS
        .iter()
        .map(|r| (r.name.to_string(), r.offset))
        .collect();
    documented.sort();
    table.sort();
    assert_eq!(documented, table, "controller.rst and the register table");
}

#[test]
fn fields_read_and_write_their_bits_only() {
    let s = reg::PHY_STATUS::ZERO.lanes().set(4u32).link_up().set(true);
    assert_eq!(s.into_raw(), 0x401);
    assert_eq!(s.lanes().get(), 4);
    assert!(s.link_up().is_set() && !s.training().is_set());
    // Excess bits are dropped, as the register drops them.
    assert_eq!(reg::CAP_PORTS::ZERO.ports().set(0x1fu32).into_raw(), 0xf);
    assert_eq!(reg::ERR_LAST::ZERO.index().max(), 0xffff);
    assert_eq!(reg::ERR_STATUS::ZERO.ring_dma().shift(), 3);
    assert_eq!(reg::INT_CAUSE::FIELDS, 0x3f);
    assert_eq!(reg::ERR_STATUS::FIELDS, 0x7f);
    assert_eq!(reg::VERSION_VALUE, 0x0001_0000);
    assert_eq!(reg::INT_CAUSE::at(1), Some(0x1160));
    assert_eq!(reg::INT_CAUSE::at(reg::MAX_PORTS), None);
    assert_eq!(reg::RING_TAIL::of::<reg::TxRing>(), 0x1030);
    assert_eq!(reg::RING_TAIL::of::<reg::RxRing>(), 0x1050);
    assert_eq!(reg::GINT_MASK::FIELDS, reg::GINT_CAUSE::FIELDS);
}

#[test]
fn port_register_helpers() {
    assert_eq!(
        reg::port_reg(0, reg::RING_TAIL::of::<reg::TxRing>()),
        Some(0x1030)
    );
    assert_eq!(
        reg::port_reg(1, reg::RING_TAIL::of::<reg::RxRing>()),
        Some(0x1150)
    );
    assert_eq!(reg::port_reg(reg::MAX_PORTS, reg::PORT_BASE), None);
    assert_eq!(reg::port_reg(0, reg::PORT_BASE + reg::PORT_STRIDE), None);
    assert_eq!(
        reg::port_reg(0, reg::CTRL::OFFSET),
        None,
        "a global register"
    );
    for p in 0..reg::MAX_PORTS {
        for r in [
            reg::PORT_BASE,
            reg::RING_TAIL::of::<reg::TxRing>(),
            reg::DOORBELLS::OFFSET,
        ] {
            let off = reg::port_reg(p, r).expect("reg");
            assert_eq!(reg::split_port_reg(off), Some((p, r)));
        }
    }
    assert_eq!(reg::split_port_reg(0x0fff), None);
    assert_eq!(reg::split_port_reg(0x1800), None);
    assert_eq!(reg::port_vector(0), 1);
    assert_eq!(reg::msix_vectors(2), 3);
    assert_eq!(reg::port_vector(u32::MAX), 9, "clamped");
}

#[test]
fn ring_helpers_and_descriptors() {
    assert!(reg::ring_size_ok(8) && reg::ring_size_ok(4096));
    assert!(!reg::ring_size_ok(0) && !reg::ring_size_ok(12) && !reg::ring_size_ok(8192));
    assert_eq!(reg::ring_next(7, 8), 0);
    assert_eq!(reg::ring_pending(6, 2, 8), 4);
    assert_eq!(reg::desc_addr(0x1000, 3), Some(0x1030));
    assert_eq!(reg::desc_addr(u64::MAX - 8, 1), None);
    let d = reg::Desc {
        addr: 0x1122_3344_5566_7788,
        len: 0x99aa,
        done_len: 0xbbcc,
        status: reg::DESC_STATUS::ZERO
            .done()
            .set(true)
            .err()
            .set(true)
            .code()
            .set(3u32)
            .into_raw(),
        lost: 0xeeff,
    };
    let b = d.encode();
    assert_eq!(b[0], 0x88, "little-endian");
    assert_eq!(reg::Desc::decode(&b), d);
    assert_eq!(d.error_code(), Some(3));
    assert_eq!(
        &b[reg::Desc::WRITEBACK_OFFSET..],
        &d.writeback()[..],
        "write-back is the tail of the descriptor"
    );
}
