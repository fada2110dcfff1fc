// SPDX-License-Identifier: GPL-2.0
//! The shared register map (`ub_proto::controller`): layout invariants
//! and the typed helpers.

use ub_proto::controller as reg;

#[test]
fn layout_is_consistent() {
    let port_regs = [
        reg::P_PHY_STATUS,
        reg::P_PHY_LANE_RATE,
        reg::P_PHY_FLIT_RATE,
        reg::P_PHY_CTRL,
        reg::P_PHY_RETRAINS,
        reg::P_PHY_BIT_ERRORS,
        reg::P_PHY_FEC_FAILS,
        reg::P_PHY_LINK_DOWNS,
        reg::P_TX_BASE_LO,
        reg::P_TX_BASE_HI,
        reg::P_TX_SIZE,
        reg::P_TX_HEAD,
        reg::P_TX_TAIL,
        reg::P_TX_CTRL,
        reg::P_RX_BASE_LO,
        reg::P_RX_BASE_HI,
        reg::P_RX_SIZE,
        reg::P_RX_HEAD,
        reg::P_RX_TAIL,
        reg::P_RX_CTRL,
        reg::P_INT_CAUSE,
        reg::P_INT_MASK,
        reg::P_INT_MODERATION,
        reg::P_ERR_STATUS,
        reg::P_ERR_LAST,
        reg::P_ERR_COUNT,
        reg::P_TX_FLITS,
        reg::P_RX_FLITS,
        reg::P_TX_DESCS,
        reg::P_RX_DESCS,
        reg::P_RX_NOBUF_FLITS,
        reg::P_DOORBELLS,
    ];
    let mut seen = std::collections::HashSet::new();
    for r in port_regs {
        assert!(r < reg::PORT_STRIDE && r % 4 == 0);
        assert!(seen.insert(r), "{r:#x} twice");
    }
    let last_port = reg::port_reg(reg::MAX_PORTS - 1, reg::PORT_STRIDE - 4).expect("reg");
    assert!(last_port < reg::MSIX_TABLE_OFFSET);
    let table_end = reg::MSIX_TABLE_OFFSET + 16 * u32::from(reg::msix_vectors(reg::MAX_PORTS));
    assert!(table_end <= reg::MSIX_PBA_OFFSET && reg::MSIX_PBA_OFFSET < reg::BAR0_SIZE);
    assert_eq!(reg::IDENT_VALUE.to_le_bytes(), *b"UBC1");
    assert_eq!(reg::MAX_XFER_BYTES % reg::FLIT_BYTES, 0);
}

#[test]
fn port_register_helpers() {
    assert_eq!(reg::port_reg(0, reg::P_TX_TAIL), Some(0x1030));
    assert_eq!(reg::port_reg(1, reg::P_RX_TAIL), Some(0x1150));
    assert_eq!(reg::port_reg(reg::MAX_PORTS, 0), None);
    assert_eq!(reg::port_reg(0, reg::PORT_STRIDE), None);
    for p in 0..reg::MAX_PORTS {
        for r in [0, reg::P_TX_TAIL, reg::P_DOORBELLS] {
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
        status: reg::DESC_DONE | reg::DESC_ERR | (3 << reg::DESC_ERR_SHIFT),
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
