// SPDX-License-Identifier: GPL-2.0
//! The CRCs against independent references: the `crc` crate, and
//! bit-serial polynomial divisions that follow the specification's wording
//! (written apart from the table-driven code under test).

#![allow(
    clippy::indexing_slicing,
    clippy::unwrap_used,
    reason = "test code: a panic is a test failure"
)]

use ub_proto::crc::{
    crc30, crc32, crc32_le_portable, Crc30, Crc32, Crc32Update, CRC30_POLY, CRC32_POLY,
};
use ub_proto::testvec::{CrcInput, CRC30_CHECK, CRC30_VECTORS, CRC32_CHECK, CRC32_VECTORS};

const CRC30_REF: crc::Crc<u32> = crc::Crc::<u32>::new(&crc::Algorithm {
    width: 30,
    poly: 0x15A9_4AD5,
    init: 0x3FFF_FFFF,
    refin: false,
    refout: false,
    xorout: 0,
    check: 0,
    residue: 0,
});
const CRC32_REF: crc::Crc<u32> = crc::Crc::<u32>::new(&crc::CRC_32_ISO_HDLC);

fn bytes(input: CrcInput) -> Vec<u8> {
    let mut v = Vec::new();
    input.for_each_chunk(|c| v.extend_from_slice(c));
    v
}

/// CRC30 by long division over an explicit bit stream: MSB of each byte
/// first, register initialised to all ones, no reflection, no inversion.
fn crc30_bitwise(data: &[u8], tail: u8, tail_bits: u32) -> u32 {
    let bits = data
        .iter()
        .flat_map(|&b| (0..8).rev().map(move |i| (b >> i) & 1))
        .chain((0..tail_bits).map(|i| (tail >> (7 - i)) & 1));
    let mut reg: u32 = 0x3FFF_FFFF;
    for bit in bits {
        let feedback = ((reg >> 29) & 1) ^ u32::from(bit);
        reg = (reg << 1) & 0x3FFF_FFFF;
        if feedback == 1 {
            reg ^= CRC30_POLY;
        }
    }
    reg
}

/// The ICRC's CRC-32 update exactly as §5.3.7 words it: every byte
/// bit-reversed into an MSB-first CRC-32 register. `reg` and the result are
/// in the reflected form `crc32_le` uses (the register bit-reversed), with
/// no inversion, so this is the reference of every [`Crc32Update`].
fn crc32_le_as_specified(reg: u32, data: &[u8]) -> u32 {
    let mut reg = reg.reverse_bits();
    for &byte in data {
        let byte = byte.reverse_bits();
        for i in (0..8).rev() {
            let feedback = (reg >> 31) ^ u32::from((byte >> i) & 1);
            reg <<= 1;
            if feedback == 1 {
                reg ^= CRC32_POLY;
            }
        }
    }
    reg.reverse_bits()
}

/// The ICRC as §5.3.7 words it: initial value all ones, the result
/// bit-reversed and inverted.
fn icrc_as_specified(data: &[u8]) -> u32 {
    !crc32_le_as_specified(0xFFFF_FFFF, data)
}

#[test]
fn crc32_standard_check_value() {
    assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
    assert_eq!(CRC32_CHECK, 0xCBF4_3926);
}

#[test]
fn crc30_check_value_matches_references() {
    assert_eq!(crc30(b"123456789"), CRC30_REF.checksum(b"123456789"));
    assert_eq!(crc30(b"123456789"), crc30_bitwise(b"123456789", 0, 0));
    assert_eq!(crc30(b"123456789"), CRC30_CHECK);
}

#[test]
fn crc30_vectors_match_references() {
    for (i, v) in CRC30_VECTORS.iter().enumerate() {
        let data = bytes(v.input);
        let reference = crc30_bitwise(&data, v.tail, v.tail_bits);
        if v.tail_bits == 0 {
            assert_eq!(
                reference,
                CRC30_REF.checksum(&data),
                "vector {i}: the two references disagree"
            );
        }
        assert_eq!(v.crc30, reference, "vector {i}: expected value is wrong");
        assert_eq!(v.compute(), v.crc30, "vector {i}: implementation disagrees");
    }
}

#[test]
fn crc32_vectors_match_references() {
    for (i, v) in CRC32_VECTORS.iter().enumerate() {
        let data = bytes(v.input);
        assert_eq!(
            v.crc32,
            CRC32_REF.checksum(&data),
            "vector {i}: expected value is wrong"
        );
        assert_eq!(
            v.crc32,
            icrc_as_specified(&data),
            "vector {i}: spec wording disagrees"
        );
        assert_eq!(v.compute(), v.crc32, "vector {i}: implementation disagrees");
    }
}

/// Deterministic pseudo-random data (xorshift), so no test dependency is
/// needed and failures reproduce.
fn random_bytes(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

#[test]
fn random_inputs_match_references() {
    for len in (0..64).chain([255, 256, 636, 640, 1000, 4096, 10_000]) {
        let data = random_bytes(len as u64 + 1, len);
        assert_eq!(crc30(&data), CRC30_REF.checksum(&data), "crc30 len {len}");
        assert_eq!(crc32(&data), CRC32_REF.checksum(&data), "crc32 len {len}");
        assert_eq!(crc32(&data), icrc_as_specified(&data), "icrc len {len}");
        for tail_bits in 0..=8 {
            let tail = data.first().copied().unwrap_or(0xA5);
            let mut crc = Crc30::new();
            crc.update(&data);
            crc.update_bits(tail, tail_bits);
            assert_eq!(
                crc.finish(),
                crc30_bitwise(&data, tail, tail_bits),
                "len {len} tail {tail_bits}"
            );
        }
    }
}

#[test]
fn incremental_equals_one_shot() {
    let data = random_bytes(99, 777);
    for split in [0, 1, 5, 300, 776, 777] {
        let (a, b) = data.split_at(split);
        let mut c30 = Crc30::new();
        c30.update(a);
        c30.update(b);
        assert_eq!(c30.finish(), crc30(&data));
        let mut c32 = Crc32::new();
        c32.update(a);
        c32.update(b);
        assert_eq!(c32.finish(), crc32(&data));
    }
}

#[test]
fn single_bit_errors_are_detected() {
    // Every CRC with more than one term detects all single-bit errors.
    let data = random_bytes(7, 640);
    let good30 = crc30(&data);
    let good32 = crc32(&data);
    for bit in 0..data.len() * 8 {
        let mut bad = data.clone();
        bad[bit / 8] ^= 1 << (bit % 8);
        assert_ne!(crc30(&bad), good30, "bit {bit}");
        assert_ne!(crc32(&bad), good32, "bit {bit}");
    }
}

/// Lengths around every step boundary of the table code (steps of 16, then
/// 8, then 4, then bytes), short and long.
fn lengths() -> impl Iterator<Item = usize> {
    (0..=300).chain([636, 1000, 4095, 4096, 4097, 9000])
}

/// The fast CRC30 against the bit-serial transcription of the
/// specification, for every length up to 300 bytes and beyond, at every
/// alignment of the input, with every number of trailing bits.
#[test]
fn crc30_matches_bit_serial_reference_at_every_length_and_offset() {
    let buf = random_bytes(0x5eed, 9000 + 16);
    let mut seed = 1u64;
    for len in lengths() {
        for offset in 0..16 {
            let data = &buf[offset..offset + len];
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
            let tail = (seed >> 56) as u8;
            let tail_bits = ((seed >> 32) % 9) as u32;
            let mut crc = Crc30::new();
            crc.update(data);
            crc.update_bits(tail, tail_bits);
            assert_eq!(
                crc.finish(),
                crc30_bitwise(data, tail, tail_bits),
                "len {len} offset {offset} tail {tail:#x}/{tail_bits}"
            );
        }
    }
}

/// Checks a [`Crc32Update`] backend against the specification's wording:
/// any register value, every length and alignment, and fed in two pieces
/// split anywhere (the ICRC feeds its masked head and the rest apart).
fn check_crc32_backend(name: &str, backend: Crc32Update) {
    let buf = random_bytes(0xc0ffee, 9000 + 16);
    let mut reg = 0x1234_5678u32;
    for len in lengths() {
        for offset in 0..16 {
            let data = &buf[offset..offset + len];
            reg = reg.rotate_left(7) ^ (len as u32).wrapping_mul(0x9E37_79B9);
            let expected = crc32_le_as_specified(reg, data);
            assert_eq!(
                backend(reg, data),
                expected,
                "{name}: len {len} offset {offset} reg {reg:#x}"
            );
            let split = (reg as usize) % (len + 1);
            let (a, b) = data.split_at(split);
            assert_eq!(
                backend(backend(reg, a), b),
                expected,
                "{name}: len {len} split {split}"
            );
        }
    }
    for v in CRC32_VECTORS {
        assert_eq!(
            !backend(!0, &bytes(v.input)),
            v.crc32,
            "{name}: vector {:?}",
            v.input
        );
    }
}

#[test]
fn portable_crc32_backend_matches_specification() {
    check_crc32_backend("portable", crc32_le_portable);
}

/// The host's carry-less-multiply backend: its folding starts at 64 or 128
/// bytes depending on the CPU, which `lengths` covers on both sides.
#[test]
fn host_crc32_backend_matches_specification() {
    check_crc32_backend("ub-host-crc", ub_host_crc::crc32_le);
}

/// Every backend against the portable one on long random inputs from
/// random registers, at random offsets (the cross-check the KUnit suite
/// does for the kernel's `crc32_le`).
#[test]
fn host_crc32_backend_matches_portable_on_random_inputs() {
    let buf = random_bytes(0xfeed, 70_000);
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    for _ in 0..500 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let offset = (x % 64) as usize;
        let len = ((x >> 8) % 66_000) as usize;
        let reg = (x >> 32) as u32;
        let data = &buf[offset..offset + len];
        assert_eq!(
            ub_host_crc::crc32_le(reg, data),
            crc32_le_portable(reg, data),
            "len {len} offset {offset} reg {reg:#x}"
        );
    }
}

/// Prints the reference values of every vector, to fill `testvec.rs`.
#[test]
#[ignore = "generator for testvec.rs, run by hand"]
fn print_reference_values() {
    for v in CRC30_VECTORS {
        println!(
            "crc30 {:?}: {:#010X}",
            v.input,
            crc30_bitwise(&bytes(v.input), v.tail, v.tail_bits)
        );
    }
    for v in CRC32_VECTORS {
        println!(
            "crc32 {:?}: {:#010X}",
            v.input,
            CRC32_REF.checksum(&bytes(v.input))
        );
    }
}

/// The ICRC takes its backend as an argument: a packet sealed with one
/// backend verifies with the other, for every class with an ICRC, and a
/// corrupted one fails with both.
#[test]
fn icrc_backends_are_interchangeable() {
    use ub_proto::net::cci::Cci;
    use ub_proto::net::icrc;
    use ub_proto::net::npi::Npi;
    use ub_proto::net::nth::{IpHdr, IpNth, NetHeader, Nth16, Nth24, ICRC_LEN};
    use ub_proto::net::Error;

    let headers = [
        NetHeader::Cna16 {
            nth: Nth16 {
                scna: 0x1234,
                dcna: 0xabcd,
                cci: Cci::DEFAULT,
                lbf: 9,
                sl: 5,
                mgmt: false,
                nlp: 1,
            },
            coherent: false,
        },
        NetHeader::Cna24(Nth24 {
            scna: 0x12_3456,
            dcna: 0xfe_dcba,
            cci: Cci::DEFAULT,
            lbf: 200,
            sl: 15,
            nlp: 2,
        }),
        NetHeader::Ip(IpNth {
            cci: Cci::DEFAULT,
            npi: Npi::DEFAULT,
            ip: IpHdr::V4 {
                dscp: 10,
                ecn: 1,
                ident: 77,
                ttl: 64,
                src: [10, 0, 0, 1],
                dst: [10, 0, 0, 2],
            },
            sport: 50000,
        }),
    ];
    let backends: [(&str, Crc32Update); 2] = [
        ("portable", crc32_le_portable),
        ("ub-host-crc", ub_host_crc::crc32_le),
    ];
    for h in &headers {
        let class = h.class();
        for len in [1usize, 64, 200, 4096] {
            let upper = random_bytes(len as u64, len);
            let mut pkt = vec![0u8; h.len() + len + ICRC_LEN];
            let n = h.write(&mut pkt, len).unwrap();
            pkt[n..n + len].copy_from_slice(&upper);
            for (sealer, seal_with) in backends {
                icrc::seal(seal_with, class, &mut pkt).unwrap();
                for (checker, check_with) in backends {
                    assert_eq!(
                        icrc::verify(check_with, class, &pkt),
                        Ok(()),
                        "{class:?} {len} B sealed by {sealer}, checked by {checker}"
                    );
                    let mut bad = pkt.clone();
                    bad[n + len / 2] ^= 0x10;
                    assert_eq!(
                        icrc::verify(check_with, class, &bad),
                        Err(Error::BadIcrc),
                        "{class:?} {len} B corrupted, checked by {checker}"
                    );
                }
            }
        }
    }
}
