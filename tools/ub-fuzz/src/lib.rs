// SPDX-License-Identifier: GPL-2.0
//! Fuzz targets of `ub-proto`, one function per input the protocol core
//! takes from the wire, and of the user-space tools' untrusted inputs
//! (`ub-fabric`'s registers, guest memory and control socket, `ubctl`'s
//! command line and the kernel's replies), each asserting the invariants
//! of what it drives (`Documentation/ub/testing.rst`, "Fuzzing").
//!
//! The functions are plain stable Rust: `fuzz/fuzz_targets/<name>.rs`
//! (cargo-fuzz, libFuzzer, nightly) calls them with generated inputs, and
//! `tests/replay.rs` calls them with every file of `fuzz/corpus/<name>/`
//! and `fuzz/regressions/<name>/` under plain `cargo test`, so the corpora
//! are replayed without nightly. A target panics on a broken invariant;
//! an input it cannot use is simply done with.
//!
//! Each input is read as a stream of fields by [`input::Input`], where
//! every read succeeds (zeros past the end): the fuzzer mutates bytes, so
//! no input is refused outright. Where a checksum would stop it cold, the
//! input says whether to make the BCRC or ICRC valid first, and where an
//! engine keys on state (a TPN, an expected PSN), the input says whether
//! to take the live value; the rest of the bytes are the fuzzer's.

pub mod input;

mod fabric;
mod host;
mod link;
mod net;
mod transport;
mod ubctl;

pub use fabric::{fabric_control, fabric_registers};
pub use host::host_packet;
pub use link::{link_ctrl, link_engine, link_frame, link_init};
pub use net::net_header;
pub use transport::{cm, transport_ack, transport_header};
pub use ubctl::{ubctl_args, ubctl_replies};

/// A fuzz target: its name (the file in `fuzz/fuzz_targets/` and the
/// corpus directory), the function, and its seed inputs.
#[derive(Clone, Copy, Debug)]
pub struct Target {
    /// Name of the target and of its corpus directory.
    pub name: &'static str,
    /// Runs one input; panics on a broken invariant.
    pub run: fn(&[u8]),
    /// Valid inputs made by the encoders, the corpus's seeds.
    pub seeds: fn() -> Vec<Vec<u8>>,
}

/// Every target.
pub const TARGETS: &[Target] = &[
    Target {
        name: "link_frame",
        run: link_frame,
        seeds: link::seeds_frame,
    },
    Target {
        name: "link_ctrl",
        run: link_ctrl,
        seeds: link::seeds_ctrl,
    },
    Target {
        name: "link_init",
        run: link_init,
        seeds: link::seeds_init,
    },
    Target {
        name: "link_engine",
        run: link_engine,
        seeds: link::seeds_engine,
    },
    Target {
        name: "net_header",
        run: net_header,
        seeds: net::seeds,
    },
    Target {
        name: "transport_header",
        run: transport_header,
        seeds: transport::seeds_header,
    },
    Target {
        name: "transport_ack",
        run: transport_ack,
        seeds: transport::seeds_ack,
    },
    Target {
        name: "cm",
        run: cm,
        seeds: transport::seeds_cm,
    },
    Target {
        name: "host_packet",
        run: host_packet,
        seeds: host::seeds,
    },
    Target {
        name: "fabric_registers",
        run: fabric_registers,
        seeds: fabric::seeds_registers,
    },
    Target {
        name: "fabric_control",
        run: fabric_control,
        seeds: fabric::seeds_control,
    },
    Target {
        name: "ubctl_args",
        run: ubctl_args,
        seeds: ubctl::seeds_args,
    },
    Target {
        name: "ubctl_replies",
        run: ubctl_replies,
        seeds: ubctl::seeds_replies,
    },
];
