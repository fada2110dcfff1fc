// SPDX-License-Identifier: GPL-2.0
//! `ub-nlfuzz`: sends the `ub` generic netlink family generated requests,
//! well-formed, malformed and damaged (`ubctl::nlfuzz`), for a given time,
//! and checks every one is answered and every answer decodes; then that the
//! family still answers a dump of the devices. Meant for the debug kernel
//! (KASAN, UBSAN, lockdep, kmemleak), whose reports the harness judges.
//!
//! Exit status: 0 passed, 1 failed (the failing request and the seed that
//! replays it are printed), 4 skipped (not root, or ub.ko not loaded).

use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use clap::Parser;

use ubctl::nl::Request;
use ubctl::nl::{strerror, Conn, Error};
use ubctl::nlfuzz;
use ubctl::spec::{self, cmd};

const KSFT_SKIP: u8 = 4;

#[derive(Parser)]
#[command(
    name = "ub-nlfuzz",
    version,
    about = "Fuzzes the ub generic netlink family with generated requests"
)]
struct Args {
    /// How long to run, in seconds.
    #[arg(long, default_value_t = 30)]
    seconds: u64,
    /// Stop after this many requests.
    #[arg(long, default_value_t = u64::MAX)]
    max: u64,
    /// Seed of the generator (default: from the clock; printed, so a run
    /// can be replayed).
    #[arg(long)]
    seed: Option<u64>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    // SAFETY: `geteuid` has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        println!("# ub-nlfuzz: not root, skipped (the admin operations would only see EPERM)");
        return ExitCode::from(KSFT_SKIP);
    }
    let seed = args.seed.unwrap_or_else(|| {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
    });
    let mut conn = match Conn::open() {
        Ok(c) => c,
        Err(Error::NoFamily(f)) => {
            println!("# ub-nlfuzz: no generic netlink family {f}, skipped");
            return ExitCode::from(KSFT_SKIP);
        }
        Err(e) => {
            println!("# ub-nlfuzz: {e}");
            return ExitCode::FAILURE;
        }
    };
    // Echo requests make replies the fuzzer does not wait for; room for
    // them keeps overruns rare (they are counted, not failures).
    let _ = conn.grow_rcvbuf(4 << 20);
    println!("# ub-nlfuzz: seed {seed}, {} s", args.seconds);
    let report = match nlfuzz::run(&mut conn, seed, Duration::from_secs(args.seconds), args.max) {
        Ok(r) => r,
        Err(e) => {
            println!("# ub-nlfuzz: FAILED: {e}");
            return ExitCode::FAILURE;
        }
    };
    let refused: u64 = report.refused.values().sum();
    println!(
        "# requests {} (damaged {}), accepted {}, refused {} ({} with an extended ACK message), overruns {}",
        report.requests, report.damaged, report.accepted, refused, report.with_message, report.overruns
    );
    let errnos: Vec<String> = report
        .refused
        .iter()
        .map(|(e, n)| format!("{} {n}", strerror(*e)))
        .collect();
    println!("# refused by error: {}", errnos.join(", "));
    let ops: Vec<String> = report
        .per_cmd
        .iter()
        .map(|(c, (sent, ok))| {
            let name = spec::op(*c).map_or_else(|| format!("command {c}"), |o| o.name.to_string());
            format!("{name} {ok}/{sent}")
        })
        .collect();
    println!("# accepted/sent by operation: {}", ops.join(", "));
    // The family must still work: a dump of the devices succeeds.
    let dump = Request {
        cmd: cmd::DEV_GET,
        dump: true,
        attrs: Vec::new(),
    };
    match conn.transact(&dump) {
        Ok(devs) => {
            println!("# after the run: dev-get lists {} device(s)", devs.len());
            ExitCode::SUCCESS
        }
        Err(e) => {
            println!("# ub-nlfuzz: FAILED: dev-get after the run: {e}");
            ExitCode::FAILURE
        }
    }
}
