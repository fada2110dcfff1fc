// SPDX-License-Identifier: GPL-2.0
//! `ub-proto-check`: runs `ub-proto`'s known-answer vectors in user space and
//! prints the results as KTAP.
//!
//! Built statically and shipped in the test guests' initramfs (selftest
//! `ub_proto_user.sh`), it checks the third build of the shared protocol
//! core, the one user-space tools and the fabric use, on the guest's CPU
//! model, next to the kernel build that the KUnit suites check.

use std::process::ExitCode;

use ub_proto::testvec::{CRC30_VECTORS, CRC32_VECTORS};

fn main() -> ExitCode {
    let mut results = Vec::new();
    for (i, v) in CRC30_VECTORS.iter().enumerate() {
        results.push((format!("crc30_vector_{i}"), v.compute() == v.crc30));
    }
    for (i, v) in CRC32_VECTORS.iter().enumerate() {
        results.push((format!("crc32_vector_{i}"), v.compute() == v.crc32));
    }

    println!("TAP version 13");
    println!("1..{}", results.len());
    for (n, (name, ok)) in results.iter().enumerate() {
        println!("{} {} {name}", if *ok { "ok" } else { "not ok" }, n + 1);
    }
    if results.iter().all(|(_, ok)| *ok) {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
