// SPDX-License-Identifier: GPL-2.0
//! Replays every fuzz corpus under plain `cargo test` on stable: each
//! file of `fuzz/corpus/<target>/` and `fuzz/regressions/<target>/`
//! through its target (`ub_fuzz::TARGETS`). A target without a corpus, or
//! with an empty one, fails: a corpus that was never written tests
//! nothing, and would pass for ever.
#![allow(clippy::expect_used, reason = "test code: a panic is a test failure")]

use std::path::{Path, PathBuf};

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz")
}

fn files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = match std::fs::read_dir(dir) {
        Ok(rd) => rd
            .map(|e| e.expect("reading a corpus directory").path())
            .filter(|p| p.is_file())
            .collect(),
        Err(_) => Vec::new(),
    };
    v.sort();
    v
}

fn replay(name: &str) -> usize {
    let target = ub_fuzz::TARGETS
        .iter()
        .find(|t| t.name == name)
        .expect("a target of that name");
    let corpus = files(&fuzz_dir().join("corpus").join(name));
    assert!(
        !corpus.is_empty(),
        "fuzz/corpus/{name}/ is missing or empty: run scripts/fuzz or ub-fuzz-seed"
    );
    let regressions = files(&fuzz_dir().join("regressions").join(name));
    for f in corpus.iter().chain(&regressions) {
        let data = std::fs::read(f).expect("reading a corpus file");
        // Name the file before running it: a panic below is about it.
        eprintln!("{}", f.display());
        (target.run)(&data);
    }
    corpus.len() + regressions.len()
}

/// Every target is replayed by a test of its own below.
#[test]
fn every_target_has_a_replay_test() {
    let tested = [
        "link_frame",
        "link_ctrl",
        "link_init",
        "link_engine",
        "net_header",
        "transport_header",
        "transport_ack",
        "cm",
        "host_packet",
        "fabric_registers",
        "fabric_control",
        "ubctl_args",
        "ubctl_replies",
    ];
    for t in ub_fuzz::TARGETS {
        assert!(tested.contains(&t.name), "{} has no replay test", t.name);
        assert!(
            fuzz_dir()
                .join("fuzz_targets")
                .join(format!("{}.rs", t.name))
                .is_file(),
            "{} has no cargo-fuzz target",
            t.name
        );
    }
}

/// The seeds pass their targets (they are what the corpora start from).
#[test]
fn seeds_pass() {
    for t in ub_fuzz::TARGETS {
        let seeds = (t.seeds)();
        assert!(!seeds.is_empty(), "{} has no seeds", t.name);
        for s in &seeds {
            (t.run)(s);
        }
    }
}

macro_rules! replay_tests {
    ($($name:ident),* $(,)?) => {$(
        #[test]
        fn $name() {
            let n = replay(stringify!($name));
            eprintln!("{}: {n} inputs", stringify!($name));
        }
    )*};
}

replay_tests!(
    link_frame,
    link_ctrl,
    link_init,
    link_engine,
    net_header,
    transport_header,
    transport_ack,
    cm,
    host_packet,
    fabric_registers,
    fabric_control,
    ubctl_args,
    ubctl_replies,
);
