// SPDX-License-Identifier: GPL-2.0
//! `ub-demo-report`: prints the per-layer report of scripts/demo from the
//! guests' KTAP streams and ub-fabric's counters; exits 1 if a stream
//! lost, duplicated or corrupted a message, or a guest did not report.
//!
//! usage: ub-demo-report [--fabric COUNTERS.JSON] NAME=KTAP...

use std::fs;
use std::process::ExitCode;

use anyhow::{bail, Context, Result};

fn run() -> Result<bool> {
    let mut args = std::env::args().skip(1);
    let mut fabric = None;
    let mut guests = Vec::new();
    while let Some(a) = args.next() {
        if a == "--fabric" {
            let path = args.next().context("--fabric needs a file")?;
            let text = fs::read_to_string(&path).with_context(|| format!("reading {path}"))?;
            fabric = Some(
                serde_json::from_str::<serde_json::Value>(&text)
                    .with_context(|| format!("{path} is not JSON"))?,
            );
        } else if let Some((name, path)) = a.split_once('=') {
            // A guest that never started has no stream: it reports nothing.
            let text = fs::read(path)
                .map(|b| String::from_utf8_lossy(&b).into_owned())
                .unwrap_or_default();
            guests.push(ub_demo_report::parse_guest(name, &text));
        } else {
            bail!("usage: ub-demo-report [--fabric COUNTERS.JSON] NAME=KTAP...");
        }
    }
    if guests.is_empty() {
        bail!("usage: ub-demo-report [--fabric COUNTERS.JSON] NAME=KTAP...");
    }
    let r = ub_demo_report::report(&guests, fabric.as_ref());
    print!("{}", r.text);
    Ok(r.ok)
}

fn main() -> ExitCode {
    match run() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("ub-demo-report: {e:#}");
            ExitCode::from(2)
        }
    }
}
