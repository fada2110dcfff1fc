// SPDX-License-Identifier: GPL-2.0
//! `ub-proto`: the UnifiedBus (UB) Base Specification 2.0 protocol core.
//!
//! Sans-I/O and allocation-free: engines take received bytes, the current
//! time and API calls, and return bytes to send, deadlines and events. One
//! source serves three builds:
//!
//! - Cargo, as the `ub-proto` crate, for host tests, fuzzers, benchmarks and
//!   the `ub-fabric` emulator;
//! - Kbuild, inside `ub.ko`: `drivers/ub/ub_main.rs` declares this file as a
//!   module with `#[path]`, so the kernel compiles these very files;
//! - the KUnit suites of `ub.ko`, which run the known-answer vectors of
//!   [`testvec`] against the kernel build.
//!
//! Rules every file here follows because the kernel compiles it: edition
//! 2021, `core` only, no `unsafe`, no floating point, no panics, and
//! arithmetic that cannot overflow (the kernel builds with overflow checks,
//! where an overflow is a `BUG()`).

// Cargo builds this file as a crate root; Kbuild builds it as a module of
// `ub.ko` (which defines `CONFIG_RUST`), where crate attributes do not apply.
#![cfg_attr(not(CONFIG_RUST), no_std)]
#![forbid(unsafe_code)]

pub mod controller;
pub mod crc;
pub mod host;
pub mod link;
pub mod net;
pub mod testvec;
pub mod transport;
