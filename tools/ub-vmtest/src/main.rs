// SPDX-License-Identifier: GPL-2.0
//! `ub-vmtest`: boots UB test guests under QEMU (TCG) and judges them.
//!
//! Each guest gets two serial ports: ttyS0 is the kernel console (KUnit
//! KTAP and every kernel report land there), ttyS1 carries the guest's
//! selftest KTAP stream, so user-space output never interleaves with kernel
//! messages. A run fails on any failed or missing test, a broken plan, a
//! guest that does not finish, a timeout, and any kernel error report (oops,
//! BUG, panic, warning, KASAN, UBSAN, lockdep, kmemleak, stalls).

mod kreport;
mod ktap;

use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::{Args, Parser, Subcommand};

/// The line a guest's init writes on ttyS1 after its last test.
const DONE_MARKER: &str = "# ub-guest: done";

#[derive(Parser)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Boot guests and judge their output.
    Run(RunArgs),
    /// Judge the logs of an earlier run without booting anything.
    Check(CheckArgs),
}

#[derive(Args)]
struct RunArgs {
    /// QEMU binary (a wrapper from scripts/setup runs QEMU 11.1 from its root).
    #[arg(long, default_value = "qemu-system-x86_64")]
    qemu: PathBuf,
    /// Kernel image (bzImage).
    #[arg(long)]
    kernel: PathBuf,
    /// Initramfs.
    #[arg(long)]
    initrd: PathBuf,
    /// A guest: NAME, optionally followed by ",vfio-user=SOCKET" to attach
    /// an emulated UB controller. Repeat for several guests, which run at
    /// the same time. Default: one guest named "vm0".
    #[arg(long = "guest")]
    guests: Vec<String>,
    /// Extra kernel command line for every guest; repeat to add more
    /// (the scripts add theirs to what their callers give).
    #[arg(long)]
    append: Vec<String>,
    /// Seconds before every guest still running is killed and the run fails.
    #[arg(long, default_value_t = 300)]
    timeout: u64,
    /// Guest memory in MiB.
    #[arg(long, default_value_t = 256)]
    memory: u32,
    /// Virtual CPUs per guest.
    #[arg(long, default_value_t = 1)]
    smp: u32,
    /// Directory for the consoles and selftest streams.
    #[arg(long)]
    out: PathBuf,
    /// A program the guests may run on the host: each line
    /// `# ub-host-hook: ARG...` a guest writes to its selftest stream runs
    /// `PROGRAM ARG...` once (no shell), logged in OUT/hooks.log. The
    /// fabric tests use it to reach ub-fabric's control socket (take a
    /// port down, set a bit error rate) at a point the guest chooses.
    #[arg(long)]
    host_hook: Option<PathBuf>,
    #[command(flatten)]
    expect: Expectations,
}

/// The prefix of a guest's request to run the host hook.
const HOOK_MARKER: &str = "# ub-host-hook:";

/// Runs the host hook for every request line in `stream` past the first
/// `done` lines; returns the new count of lines seen.
fn run_hooks(hook: &Path, guest: &str, stream: &str, done: usize, log: &mut fs::File) -> usize {
    use std::io::Write;
    let lines: Vec<&str> = stream.lines().collect();
    // The last line may still be incomplete: wait for its newline.
    let complete = if stream.ends_with('\n') {
        lines.len()
    } else {
        lines.len().saturating_sub(1)
    };
    for line in lines.iter().take(complete).skip(done) {
        let Some(rest) = line.trim().strip_prefix(HOOK_MARKER) else {
            continue;
        };
        let argv: Vec<&str> = rest.split_whitespace().collect();
        let out = Command::new(hook).args(&argv).stdin(Stdio::null()).output();
        let _ = match out {
            Ok(o) => writeln!(
                log,
                "[{guest}] {} {}: {}\n{}{}",
                hook.display(),
                argv.join(" "),
                o.status,
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            ),
            Err(e) => writeln!(log, "[{guest}] {}: {e}", hook.display()),
        };
    }
    complete.max(done)
}

#[derive(Args)]
struct CheckArgs {
    /// Directory of an earlier run (NAME.console and NAME.ktap per guest).
    #[arg(long)]
    out: PathBuf,
    /// Guest names to check. Default: "vm0".
    #[arg(long = "guest")]
    guests: Vec<String>,
    #[command(flatten)]
    expect: Expectations,
}

#[derive(Args)]
struct Expectations {
    /// A KUnit suite that must have run and passed on every guest.
    #[arg(long = "expect-kunit")]
    kunit: Vec<String>,
    /// A selftest that must have run and passed on every guest.
    #[arg(long = "expect-selftest")]
    selftests: Vec<String>,
    /// Invert the verdict, for the harness self-test: succeed only if the
    /// run fails with a reason containing this text.
    #[arg(long = "expect-failure")]
    expect_failure: Option<String>,
}

/// One guest to boot.
struct Guest {
    name: String,
    vfio_user: Option<PathBuf>,
}

fn parse_guest(spec: &str) -> Result<Guest> {
    let mut parts = spec.split(',');
    let name = parts.next().unwrap_or_default().to_string();
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        bail!("guest name '{name}' must be non-empty and use [A-Za-z0-9_-] only");
    }
    let mut vfio_user = None;
    for opt in parts {
        match opt.split_once('=') {
            Some(("vfio-user", path)) if !path.is_empty() => vfio_user = Some(PathBuf::from(path)),
            _ => bail!("unknown guest option '{opt}' in '{spec}' (known: vfio-user=SOCKET)"),
        }
    }
    Ok(Guest { name, vfio_user })
}

fn guests_or_default(specs: &[String]) -> Result<Vec<Guest>> {
    if specs.is_empty() {
        return Ok(vec![Guest {
            name: "vm0".into(),
            vfio_user: None,
        }]);
    }
    let guests: Vec<Guest> = specs
        .iter()
        .map(|s| parse_guest(s))
        .collect::<Result<_>>()?;
    for (i, g) in guests.iter().enumerate() {
        if guests[..i].iter().any(|o| o.name == g.name) {
            bail!("guest name '{}' given twice", g.name);
        }
    }
    Ok(guests)
}

fn console_path(out: &Path, guest: &str) -> PathBuf {
    out.join(format!("{guest}.console"))
}

fn ktap_path(out: &Path, guest: &str) -> PathBuf {
    out.join(format!("{guest}.ktap"))
}

fn qemu_command(args: &RunArgs, guest: &Guest) -> Command {
    let mut cmd = Command::new(&args.qemu);
    let append = format!(
        "console=ttyS0,115200 panic=-1 ubtest.guest={} {}",
        guest.name,
        args.append.join(" ")
    );
    cmd.args([
        "-nodefaults",
        "-nographic",
        "-no-reboot",
        "-display",
        "none",
    ])
    .args(["-accel", "tcg", "-cpu", "qemu64"])
    .args(["-smp", &args.smp.to_string()])
    // Shareable guest RAM, so an external vfio-user device server can
    // map it for DMA.
    .args([
        "-object",
        &format!("memory-backend-memfd,id=mem,size={}M,share=on", args.memory),
    ])
    .args([
        "-machine",
        "q35,memory-backend=mem",
        "-m",
        &format!("{}M", args.memory),
    ])
    .arg("-kernel")
    .arg(&args.kernel)
    .arg("-initrd")
    .arg(&args.initrd)
    .args(["-append", append.trim()])
    .arg("-serial")
    .arg(format!(
        "file:{}",
        console_path(&args.out, &guest.name).display()
    ))
    .arg("-serial")
    .arg(format!(
        "file:{}",
        ktap_path(&args.out, &guest.name).display()
    ))
    .args(["-monitor", "none"]);
    if let Some(sock) = &guest.vfio_user {
        let device = format!(
            r#"{{"driver":"vfio-user-pci","socket":{{"path":"{}","type":"unix"}}}}"#,
            sock.display()
        );
        cmd.args(["-device", &device]);
    }
    cmd.stdin(Stdio::null());
    cmd
}

/// Outcome of waiting for the guests.
struct Boot {
    timed_out: Vec<String>,
    failed_exit: Vec<(String, String)>,
    elapsed: Duration,
}

fn boot(args: &RunArgs, guests: &[Guest]) -> Result<Boot> {
    fs::create_dir_all(&args.out).with_context(|| format!("creating {}", args.out.display()))?;
    let start = Instant::now();
    let mut children: Vec<(String, Child, PathBuf)> = Vec::new();
    for g in guests {
        for p in [
            console_path(&args.out, &g.name),
            ktap_path(&args.out, &g.name),
        ] {
            let _ = fs::remove_file(p);
        }
        let log = args.out.join(format!("{}.qemu.log", g.name));
        let log_file =
            fs::File::create(&log).with_context(|| format!("creating {}", log.display()))?;
        let child = qemu_command(args, g)
            .stdout(log_file.try_clone()?)
            .stderr(log_file)
            .spawn()
            .with_context(|| format!("starting {}", args.qemu.display()))?;
        children.push((g.name.clone(), child, log));
    }
    let deadline = start + Duration::from_secs(args.timeout);
    let mut hook_log = match &args.host_hook {
        Some(_) => Some(fs::File::create(args.out.join("hooks.log"))?),
        None => None,
    };
    let mut hook_seen = vec![0usize; guests.len()];
    let mut boot = Boot {
        timed_out: Vec::new(),
        failed_exit: Vec::new(),
        elapsed: Duration::ZERO,
    };
    while !children.is_empty() {
        if let (Some(hook), Some(log)) = (&args.host_hook, hook_log.as_mut()) {
            for (g, seen) in guests.iter().zip(hook_seen.iter_mut()) {
                if let Ok(b) = fs::read(ktap_path(&args.out, &g.name)) {
                    *seen = run_hooks(hook, &g.name, &String::from_utf8_lossy(&b), *seen, log);
                }
            }
        }
        let mut i = 0;
        while i < children.len() {
            if let Some(status) = children[i].1.try_wait()? {
                let (name, _, log) = children.swap_remove(i);
                if !status.success() {
                    let qemu_log = fs::read_to_string(&log).unwrap_or_default();
                    boot.failed_exit
                        .push((name, format!("{status}: {}", qemu_log.trim())));
                }
            } else {
                i += 1;
            }
        }
        if Instant::now() >= deadline {
            for (name, mut child, _) in children.drain(..) {
                let _ = child.kill();
                let _ = child.wait();
                boot.timed_out.push(name);
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    boot.elapsed = start.elapsed();
    Ok(boot)
}

/// Verdict of one guest: counts and the reasons it failed.
#[derive(Default)]
struct Verdict {
    passed: usize,
    failed: usize,
    skipped: usize,
    reasons: Vec<String>,
    summary: String,
}

fn judge_guest(out: &Path, guest: &str, expect: &Expectations, timed_out: bool) -> Verdict {
    let mut v = Verdict::default();
    let console =
        fs::read(console_path(out, guest)).map(|b| String::from_utf8_lossy(&b).into_owned());
    let stream = fs::read(ktap_path(out, guest)).map(|b| String::from_utf8_lossy(&b).into_owned());
    let (console, stream) = match (console, stream) {
        (Ok(c), Ok(s)) => (c, s),
        _ => {
            v.reasons
                .push(format!("{guest}: no console output was captured"));
            return v;
        }
    };
    if timed_out {
        v.reasons
            .push(format!("{guest}: timeout, the guest was killed"));
    }

    for f in kreport::scan(&console) {
        v.reasons.push(format!(
            "{guest}: kernel report ({:?}) at console line {}: {}",
            f.kind, f.line, f.text
        ));
    }

    let kunit = ktap::parse(&console);
    let selftests = ktap::parse(&stream);
    for (what, report) in [("kunit", &kunit), ("selftest", &selftests)] {
        for e in &report.plan_errors {
            v.reasons
                .push(format!("{guest}: {what} plan: {} {}", e.parent, e.message));
        }
        for r in &report.results {
            // Count leaves only; a suite's own line summarises its cases.
            if r.subtests > 0 {
                continue;
            }
            match r.status {
                ktap::Status::Pass | ktap::Status::Todo => v.passed += 1,
                ktap::Status::Skip => v.skipped += 1,
                ktap::Status::Fail => {
                    v.failed += 1;
                    v.reasons.push(format!("{guest}: {what} {} failed", r.path));
                }
            }
        }
        for r in report.failures().filter(|r| r.subtests > 0) {
            v.reasons.push(format!("{guest}: {what} {} failed", r.path));
        }
    }
    for (what, names, report) in [
        ("kunit", &expect.kunit, &kunit),
        ("selftest", &expect.selftests, &selftests),
    ] {
        for name in names {
            match report.find(name) {
                None => v.reasons.push(format!("{guest}: {what} {name} is missing")),
                Some(r) if r.status == ktap::Status::Skip => v
                    .reasons
                    .push(format!("{guest}: {what} {name} was skipped")),
                Some(r) if r.status == ktap::Status::Fail => {} // reported above
                Some(r) => {
                    let _ = writeln!(
                        v.summary,
                        "  {guest}: {what} {name}: ok ({} cases)",
                        r.subtests
                    );
                }
            }
        }
    }
    if !timed_out && !stream.lines().any(|l| l.trim_end() == DONE_MARKER) {
        v.reasons
            .push(format!("{guest}: the guest did not finish its tests"));
    }
    v
}

fn judge(out: &Path, guests: &[String], expect: &Expectations, boot: Option<&Boot>) -> ExitCode {
    let mut total = Verdict::default();
    if let Some(b) = boot {
        for (name, why) in &b.failed_exit {
            total.reasons.push(format!("{name}: QEMU failed: {why}"));
        }
    }
    for g in guests {
        let timed_out = boot.is_some_and(|b| b.timed_out.contains(g));
        let v = judge_guest(out, g, expect, timed_out);
        total.passed += v.passed;
        total.failed += v.failed;
        total.skipped += v.skipped;
        total.reasons.extend(v.reasons);
        total.summary.push_str(&v.summary);
    }
    print!("{}", total.summary);
    for r in &total.reasons {
        println!("  FAIL {r}");
    }
    if let Some(b) = boot {
        println!(
            "ub-vmtest: {} guest(s) in {:.1} s, logs in {}",
            guests.len(),
            b.elapsed.as_secs_f64(),
            out.display()
        );
    }
    let failed = !total.reasons.is_empty();
    match &expect.expect_failure {
        None => {
            println!(
                "ub-vmtest: {} passed, {} failed, {} skipped",
                total.passed,
                total.failed + usize::from(failed && total.failed == 0),
                total.skipped
            );
            if failed {
                ExitCode::FAILURE
            } else {
                ExitCode::SUCCESS
            }
        }
        Some(want) => {
            if total.reasons.iter().any(|r| r.contains(want.as_str())) {
                println!("ub-vmtest: failed as expected ({want})");
                ExitCode::SUCCESS
            } else if failed {
                println!("ub-vmtest: failed, but not with the expected reason '{want}'");
                ExitCode::FAILURE
            } else {
                println!("ub-vmtest: passed, but a failure with reason '{want}' was expected");
                ExitCode::FAILURE
            }
        }
    }
}

fn main() -> Result<ExitCode> {
    match Cli::parse().command {
        Cmd::Run(args) => {
            let guests = guests_or_default(&args.guests)?;
            let boot = boot(&args, &guests)?;
            let names: Vec<String> = guests.into_iter().map(|g| g.name).collect();
            Ok(judge(&args.out, &names, &args.expect, Some(&boot)))
        }
        Cmd::Check(args) => {
            let names: Vec<String> = guests_or_default(&args.guests)?
                .into_iter()
                .map(|g| g.name)
                .collect();
            Ok(judge(&args.out, &names, &args.expect, None))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_hooks_run_once_per_complete_line() {
        let dir = std::env::temp_dir().join(format!("ub-vmtest-hook-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let log_path = dir.join("hooks.log");
        let mut log = fs::File::create(&log_path).unwrap();
        let echo = Path::new("/bin/echo");
        let stream = "ok 1 a\n# ub-host-hook: link vm0.1 --down\n# ub-host-hook: par";
        let seen = run_hooks(echo, "vm0", stream, 0, &mut log);
        assert_eq!(seen, 2, "the incomplete last line waits");
        // The same lines again run nothing; the completed line runs once.
        let stream = format!("{stream}tial\n");
        let seen = run_hooks(echo, "vm0", &stream, seen, &mut log);
        assert_eq!(seen, 3);
        assert_eq!(run_hooks(echo, "vm0", &stream, seen, &mut log), 3);
        drop(log);
        let text = fs::read_to_string(&log_path).unwrap();
        assert_eq!(text.matches("link vm0.1 --down").count(), 2, "{text}"); // command + echo output
        assert_eq!(text.matches("/bin/echo partial").count(), 1, "{text}");
        assert!(!text.contains("ok 1 a"), "{text}");
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn guest_specs() {
        let g = parse_guest("vm1,vfio-user=/run/ub0.sock").unwrap();
        assert_eq!(g.name, "vm1");
        assert_eq!(g.vfio_user.as_deref(), Some(Path::new("/run/ub0.sock")));
        assert!(parse_guest("").is_err());
        assert!(parse_guest("a b").is_err());
        assert!(parse_guest("vm,foo=1").is_err());
        assert!(guests_or_default(&["a".into(), "a".into()]).is_err());
        assert_eq!(guests_or_default(&[]).unwrap()[0].name, "vm0");
    }

    fn write_run(dir: &Path, console: &str, stream: &str) {
        fs::create_dir_all(dir).unwrap();
        fs::write(console_path(dir, "vm0"), console).unwrap();
        fs::write(ktap_path(dir, "vm0"), stream).unwrap();
    }

    const CONSOLE: &str = "[ 1.0] KTAP version 1\n[ 1.0] 1..1\n[ 1.0]     1..1\n[ 1.0]     ok 1 a\n[ 1.0] ok 1 suite\n";
    const STREAM: &str =
        "KTAP version 1\n1..1\n    1..1\n    ok 1 load\nok 1 ub_module.sh\n# ub-guest: done\n";

    fn expect(kunit: &[&str], selftests: &[&str]) -> Expectations {
        Expectations {
            kunit: kunit.iter().map(|s| s.to_string()).collect(),
            selftests: selftests.iter().map(|s| s.to_string()).collect(),
            expect_failure: None,
        }
    }

    fn reasons(console: &str, stream: &str, e: &Expectations) -> Vec<String> {
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("ub-vmtest-{}-{n}", std::process::id()));
        write_run(&dir, console, stream);
        let v = judge_guest(&dir, "vm0", e, false);
        fs::remove_dir_all(&dir).unwrap();
        v.reasons
    }

    #[test]
    fn clean_run_passes() {
        assert!(reasons(CONSOLE, STREAM, &expect(&["suite"], &["ub_module.sh"])).is_empty());
    }

    #[test]
    fn each_failure_is_caught() {
        let e = expect(&["suite"], &["ub_module.sh"]);
        let missing = reasons(CONSOLE, STREAM, &expect(&["other"], &[]));
        assert!(
            missing.iter().any(|r| r.contains("kunit other is missing")),
            "{missing:?}"
        );
        let failed = reasons(&CONSOLE.replace("    ok 1 a", "    not ok 1 a"), STREAM, &e);
        assert!(
            failed.iter().any(|r| r.contains("kunit suite.a failed")),
            "{failed:?}"
        );
        let oops = reasons(
            &format!("{CONSOLE}[ 2.0] kernel BUG at x.c:1!\n"),
            STREAM,
            &e,
        );
        assert!(
            oops.iter().any(|r| r.contains("kernel report (Bug)")),
            "{oops:?}"
        );
        let unfinished = reasons(CONSOLE, &STREAM.replace(DONE_MARKER, ""), &e);
        assert!(
            unfinished.iter().any(|r| r.contains("did not finish")),
            "{unfinished:?}"
        );
        let skipped = reasons(
            CONSOLE,
            &STREAM.replace("ok 1 ub_module.sh", "ok 1 ub_module.sh # SKIP"),
            &e,
        );
        assert!(
            skipped.iter().any(|r| r.contains("was skipped")),
            "{skipped:?}"
        );
    }
}
