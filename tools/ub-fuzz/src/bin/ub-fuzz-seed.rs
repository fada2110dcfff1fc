// SPDX-License-Identifier: GPL-2.0
//! Writes every target's seed inputs into `fuzz/corpus/<target>/`.
//!
//! `cargo run -p ub-fuzz --bin ub-fuzz-seed [DIR] [TARGET...]`: DIR
//! defaults to the repository's `fuzz/corpus`. Files are named
//! `seed-<hash of the contents>`, as libFuzzer names its own by content,
//! so rerunning adds nothing twice and never removes what fuzzing found.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1).peekable();
    let dir = match args.peek() {
        Some(a) if !ub_fuzz::TARGETS.iter().any(|t| t.name == a) => {
            PathBuf::from(args.next().unwrap_or_default())
        }
        _ => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus"),
    };
    let only: Vec<String> = args.collect();
    for t in ub_fuzz::TARGETS {
        if !only.is_empty() && !only.iter().any(|o| o == t.name) {
            continue;
        }
        let d = dir.join(t.name);
        if let Err(e) = std::fs::create_dir_all(&d) {
            eprintln!("ub-fuzz-seed: {}: {e}", d.display());
            return ExitCode::FAILURE;
        }
        let seeds = (t.seeds)();
        for s in &seeds {
            // The seeds must pass their own target.
            (t.run)(s);
            let mut h = DefaultHasher::new();
            s.hash(&mut h);
            let f = d.join(format!("seed-{:016x}", h.finish()));
            if let Err(e) = std::fs::write(&f, s) {
                eprintln!("ub-fuzz-seed: {}: {e}", f.display());
                return ExitCode::FAILURE;
            }
        }
        println!("{:<18} {} seeds -> {}", t.name, seeds.len(), d.display());
    }
    ExitCode::SUCCESS
}
