// SPDX-License-Identifier: GPL-2.0
//! Framing: PLENGTH, LPH/LBH/LCH, BCRC/END, DLLDP → DLLDB split, every
//! DLLCB, Init Block negotiation, and the specification's worked examples.
#![allow(
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a panic is a test failure"
)]

use ub_proto::link::frame::*;

#[test]
fn plength_roundtrip_every_length() {
    for mode in [Mode::Crc, Mode::NonCrc] {
        for len in 0..=max_payload(mode) {
            let (pl, layout) = Plength::encode(mode, len).unwrap();
            let back = pl
                .decode(mode)
                .unwrap_or_else(|e| panic!("{mode:?} {len}: {e:?} {pl:?}"));
            assert_eq!(back, layout, "{mode:?} {len}");
            assert_eq!(usize::from(back.payload_len), len);
        }
        assert!(Plength::encode(mode, max_payload(mode) + 1).is_err());
    }
}

/// Spec example (§4.3.2): 10 bytes in the only flit → PLENGTH[4:0] = 9.
/// "Bytes in the flit" count the LPH, so 6 payload bytes after it.
#[test]
fn spec_example_plength_9() {
    let (pl, layout) = Plength::encode(Mode::Crc, 10 - LPH_BYTES).unwrap();
    assert_eq!(pl.end_code(), 9);
    assert_eq!(pl.blocks(), 1);
    assert_eq!(pl.last_flits(), 1);
    assert_eq!(layout.flits(), 1);
    // Same in non-CRC mode.
    let (pl, _) = Plength::encode(Mode::NonCrc, 10 - LPH_BYTES).unwrap();
    assert_eq!(pl.end_code(), 9);
}

/// Spec example: 16 bytes ending one flit before the last → 27 (CRC mode,
/// decoded as "second-to-last flit, 16 bytes"); also valid in non-CRC mode.
#[test]
fn spec_example_plength_27() {
    for mode in [Mode::Crc, Mode::NonCrc] {
        // 2 flits: LPH + 12 payload bytes in flit 0 (16 bytes), flit 1 pad.
        let raw = (1 << 5) | 27;
        let layout = Plength::from_raw(raw).decode(mode).unwrap();
        assert_eq!(layout.blocks, 1);
        assert_eq!(layout.last_flits, 2);
        assert_eq!(usize::from(layout.payload_len), 16 - LPH_BYTES, "{mode:?}");
    }
}

#[test]
fn plength_end_codes_per_mode() {
    // Every code of a 3-flit single-block DLLDP: accepted exactly as the
    // table of §4.3.2 says.
    for v in 0u16..32 {
        let raw = (2 << 5) | v;
        let crc = Plength::from_raw(raw).decode(Mode::Crc);
        let non = Plength::from_raw(raw).decode(Mode::NonCrc);
        let crc_ok = matches!(v, 0..=19 | 24..=27);
        let non_ok = matches!(v, 0..=15 | 17 | 19 | 27..=30);
        assert_eq!(crc.is_ok(), crc_ok, "crc {v}");
        assert_eq!(non.is_ok(), non_ok, "non-crc {v}");
        if let Ok(l) = crc {
            let end = match v {
                0..=15 => 2 * 20 + v,
                16..=19 => 20 + v,
                _ => 20 + v - 12,
            };
            assert_eq!(
                usize::from(l.payload_len),
                usize::from(end) + 1 - 4,
                "crc {v}"
            );
        }
        if let Ok(l) = non {
            let end = match v {
                0..=15 => 2 * 20 + v,
                28..=30 => 2 * 20 + v - 12,
                17 | 19 => 20 + v,
                _ => 20 + 15,
            };
            assert_eq!(
                usize::from(l.payload_len),
                usize::from(end) + 1 - 4,
                "non-crc {v}"
            );
        }
    }
    // An end in the second-to-last flit of a one-flit block is impossible.
    assert_eq!(
        Plength::from_raw(27).decode(Mode::Crc),
        Err(FrameError::BadPlength)
    );
    // An end inside the LPH is impossible.
    assert_eq!(
        Plength::from_raw(1).decode(Mode::Crc),
        Err(FrameError::BadPlength)
    );
}

#[test]
fn dlldp_split_into_blocks() {
    // 1..=512 flits, ≤ 16 blocks of ≤ 32 flits; non-last blocks full.
    for mode in [Mode::Crc, Mode::NonCrc] {
        let max = max_payload(mode);
        let (_, l) = Plength::encode(mode, max).unwrap();
        assert_eq!(l.flits(), MAX_DLLDP_FLITS);
        assert_eq!(l.blocks, 16);
        let (_, l) = Plength::encode(mode, 0).unwrap();
        assert_eq!(l.flits(), 1);
        for len in [1usize, 12, 13, 16, 17, 631, 632, 633, 636, 637, 5000, max] {
            let (_, l) = Plength::encode(mode, len).unwrap();
            let mut sum = 0;
            for b in 0..usize::from(l.blocks) {
                let flits = l.block_flits(b);
                assert!(flits <= 32);
                if b + 1 < usize::from(l.blocks) {
                    assert_eq!(flits, 32);
                }
                sum += l.block_payload(b).1;
            }
            assert_eq!(sum, len, "{mode:?} {len}");
        }
    }
    assert_eq!(max_payload(Mode::Crc), 632 + 14 * 634 + 634);
    assert_eq!(max_payload(Mode::NonCrc), 636 + 14 * 638 + 637);
}

#[test]
fn lph_lbh_lch_roundtrip() {
    for bits in 0u32..(1 << 12) {
        let base = Lbh {
            crd: bits & 1 != 0,
            ack: bits & 2 != 0,
            crd_vl: ((bits >> 2) & 0xf) as u8,
            vl: ((bits >> 6) & 0xf) as u8,
            cfg: [3, 4, 5, 6, 7, 9][(bits >> 10) as usize % 6],
        };
        assert_eq!(Lbh::decode(&base.encode()).unwrap(), base);
        let lph = Lph {
            base,
            rt: (bits % 4) as u8,
            plength: Plength::from_raw((bits * 7) as u16 & 0x3fff),
        };
        assert_eq!(Lph::decode(&lph.encode()).unwrap(), lph);
    }
    // Bit positions of Table 4-1: CRD B0[7], ACK B0[6], CRD_VL B0[5:2],
    // VL B0[0]+B1[7:5], CFG B1[3:0], RT B2[7:6], PLENGTH B2[5:0]+B3.
    let lph = Lph {
        base: Lbh {
            crd: true,
            ack: false,
            crd_vl: 0b1010,
            vl: 0b1011,
            cfg: 6,
        },
        rt: 0b10,
        plength: Plength::from_raw(0x2abc),
    };
    assert_eq!(lph.encode(), [0b1010_1001, 0b0110_0110, 0b1010_1010, 0xbc]);
    // Reserved CFG values are rejected; CFG 0 is an LCH.
    for cfg in [0u8, 1, 2, 8, 10, 15] {
        assert_eq!(Lbh::decode(&[0, cfg]), Err(FrameError::BadCfg));
    }
    // LCH fixed bits.
    let lch = Lch {
        flits: 5,
        ctrl: 12,
        sub_ctrl: 8,
        byte3: 0x5a,
    };
    let b = lch.encode();
    assert_eq!(b, [(4 << 2) | 0b10, 0, 0xc8, 0x5a]);
    assert_eq!(Lch::decode(&b).unwrap(), lch);
    assert_eq!(
        Lch::decode(&[0x80 | b[0], 0, 0, 0]),
        Err(FrameError::BadLch)
    );
    assert_eq!(Lch::decode(&[b[0] & !2, 0, 0, 0]), Err(FrameError::BadLch));
    assert_eq!(Lch::decode(&[b[0], 0x10, 0, 0]), Err(FrameError::BadLch));
    assert_eq!(Lch::decode(&[b[0]]), Err(FrameError::Truncated));
}

#[test]
fn bcrc_and_end() {
    let payload: Vec<u8> = (0..600u32).map(|i| (i * 13) as u8).collect();
    for mode in [Mode::Crc, Mode::NonCrc] {
        for flag in [false, true] {
            let (_, l) = Plength::encode(mode, payload.len()).unwrap();
            let mut out = vec![0u8; l.flits() * FLIT_BYTES];
            let lbh = Lbh {
                crd: false,
                ack: true,
                crd_vl: 0,
                vl: 2,
                cfg: 9,
            };
            let n = encode_dlldb(&l, 0, lbh, 1, &payload, flag, &mut out).unwrap();
            assert_eq!(n, l.flits() * FLIT_BYTES);
            assert_eq!(check_block(mode, &out[..n], true), Ok(flag));
            assert_eq!(dlldb_payload(&l, 0, &out[..n]).unwrap(), &payload[..]);
            // ERROR_FLAG sits in B16[6] of the last flit (BCRC) or B19[6]
            // (END).
            let at = match mode {
                Mode::Crc => n - 4,
                Mode::NonCrc => n - 1,
            };
            assert_eq!(out[at] & 0x40 != 0, flag);
            if mode == Mode::Crc {
                // The CRC covers the two bits before it: flipping
                // ERROR_FLAG alone is detected.
                out[at] ^= 0x40;
                assert_eq!(check_block(mode, &out[..n], true), Err(FrameError::Crc));
                out[at] ^= 0x40;
                // Every single-bit error is detected.
                for bit in 0..n * 8 {
                    out[bit / 8] ^= 1 << (bit % 8);
                    assert_eq!(check_block(mode, &out[..n], true), Err(FrameError::Crc));
                    out[bit / 8] ^= 1 << (bit % 8);
                }
            }
        }
    }
}

/// The BCRC of a real block equals the CRC30 known answer of `testvec`
/// computed over the same bits (16 bytes + 2 bits for a one-flit block).
#[test]
fn bcrc_matches_crc30_definition() {
    let mut block = [0u8; 20];
    for (i, b) in block.iter_mut().take(16).enumerate() {
        *b = ub_proto::testvec::pattern_byte(i);
    }
    seal_block(Mode::Crc, &mut block, true, false);
    let crc = u32::from_be_bytes([block[16] & 0x3f, block[17], block[18], block[19]]);
    assert_eq!(crc, 0x177B_1DB4);
}

/// §4.6.1: 1 MB of buffer with 8-flit cells is 6553 cells.
#[test]
fn spec_example_6553_cells() {
    assert_eq!(cells_for_buffer(1 << 20, 8), 6553);
    // Capped at the 65 535 cells a link can announce.
    assert_eq!(cells_for_buffer(1 << 30, 1), 65_535);
}
