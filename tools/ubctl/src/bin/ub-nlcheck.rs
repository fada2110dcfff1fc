// SPDX-License-Identifier: GPL-2.0
//! `ub-nlcheck`: sends the `ub` family a batch of malformed and
//! unprivileged requests (`ubctl::nlcheck`) and checks that each is refused
//! with an extended ACK naming the problem, and that the devices, ports,
//! addresses and routes dumped before and after the batch are identical.
//! Prints KTAP; exit status 0 all passed, 1 a test failed, 4 skipped (not
//! root, ub.ko not loaded, no device).
//!
//! Order matters: the malformed requests go first, with CAP_NET_ADMIN, so
//! that the policy (not the permission check) answers them; then the
//! process drops to uid/gid 65534, which clears every capability, and
//! sends each mutating operation; the last dump is taken unprivileged
//! (dumps need no privilege).

use std::process::ExitCode;

use anyhow::{anyhow, bail, Context, Result};

use ubctl::attr::Obj;
use ubctl::nl::Conn;
use ubctl::nlcheck::{self, Case, Target};
use ubctl::reply::decode_all;
use ubctl::{request, spec};

const KSFT_SKIP: u8 = 4;
const NOBODY: libc::uid_t = 65534;

struct Ktap {
    n: usize,
    failed: usize,
}

impl Ktap {
    fn result(&mut self, name: &str, r: Result<String, String>) {
        self.n += 1;
        match r {
            Ok(diag) => {
                println!("ok {} - {name}", self.n);
                if !diag.is_empty() {
                    println!("# {diag}");
                }
            }
            Err(why) => {
                self.failed += 1;
                println!("not ok {} - {name} # {}", self.n, why.replace('\n', " "));
            }
        }
    }
}

fn skip(why: &str) -> ExitCode {
    println!("KTAP version 1");
    println!("1..0 # SKIP {why}");
    ExitCode::from(KSFT_SKIP)
}

fn state(c: &mut Conn) -> Result<(Vec<String>, Vec<Obj>, Vec<Obj>)> {
    let devs = decode_all(&spec::DEV, &c.transact(&request::dev_get(None))?)?;
    let ports = decode_all(&spec::PORT, &c.transact(&request::port_get(None, None))?)?;
    let routes = decode_all(&spec::ROUTE, &c.transact(&request::route_get(None))?)?;
    let chans = decode_all(&spec::TP, &c.transact(&request::tp_get(None, None))?)?;
    Ok((
        nlcheck::snapshot(&devs, &ports, &routes, &chans),
        devs,
        ports,
    ))
}

fn target(devs: &[Obj], ports: &[Obj]) -> Result<Target> {
    let d = devs.first().ok_or_else(|| anyhow!("no ub device"))?;
    let dev = u32::try_from(d.need_uint(&spec::DEV, "index")?).context("device index")?;
    let p = ports
        .iter()
        .find(|p| p.uint("dev-index") == Some(u64::from(dev)))
        .ok_or_else(|| anyhow!("device {dev} has no port"))?;
    Ok(Target {
        dev,
        port: u32::try_from(p.need_uint(&spec::PORT, "index")?).context("port index")?,
        ports: u32::try_from(d.uint("ports").unwrap_or(0)).unwrap_or(u32::MAX),
        admin_up: p.uint("admin-up").unwrap_or(1) != 0,
    })
}

fn run_cases(c: &mut Conn, cases: &[Case], k: &mut Ktap) {
    for case in cases {
        let answer = c.transact(&case.req).map(|_| ());
        k.result(&case.name, nlcheck::judge(case, &answer));
    }
}

/// Become nobody: with no SECBIT_KEEP_CAPS, leaving uid 0 clears the
/// permitted and effective capability sets.
fn drop_privileges() -> Result<()> {
    // SAFETY: plain system calls on the calling process with no pointers
    // (setgroups gets a null list of length 0).
    let rc = unsafe {
        if libc::setgroups(0, std::ptr::null()) != 0 {
            -1
        } else if libc::setgid(NOBODY) != 0 {
            -2
        } else {
            libc::setuid(NOBODY)
        }
    };
    if rc != 0 {
        bail!("dropping privileges: {}", std::io::Error::last_os_error());
    }
    let status = std::fs::read_to_string("/proc/self/status").context("/proc/self/status")?;
    let eff = status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .map(str::trim)
        .ok_or_else(|| anyhow!("no CapEff in /proc/self/status"))?;
    let bits = u64::from_str_radix(eff, 16).context("CapEff")?;
    // CAP_NET_ADMIN is capability 12.
    if bits & (1 << 12) != 0 {
        bail!("CAP_NET_ADMIN still effective after setuid({NOBODY}) (CapEff {eff})");
    }
    Ok(())
}

fn main() -> ExitCode {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return skip(
            "needs root (the malformed batch must reach the policy, not the permission check)",
        );
    }
    let mut c = match Conn::open() {
        Ok(c) => c,
        Err(ubctl::nl::Error::NoFamily(_)) => {
            return skip("the ub family is not registered (ub.ko not loaded)")
        }
        Err(e) => return skip(&format!("{e}")),
    };
    let (before, devs, ports) = match state(&mut c) {
        Ok(s) => s,
        Err(e) => {
            println!("KTAP version 1\n1..1\nnot ok 1 - dump state before # {e:#}");
            return ExitCode::from(1);
        }
    };
    let t = match target(&devs, &ports) {
        Ok(t) => t,
        Err(e) => return skip(&format!("{e:#}")),
    };
    let privileged = nlcheck::privileged_cases(&t);
    let unprivileged = nlcheck::unprivileged_cases(&t);
    println!("KTAP version 1");
    println!("1..{}", privileged.len() + 1 + unprivileged.len() + 1);
    println!(
        "# target device {} port {} ({} ports)",
        t.dev, t.port, t.ports
    );
    let mut k = Ktap { n: 0, failed: 0 };
    run_cases(&mut c, &privileged, &mut k);
    drop(c);
    let dropped = drop_privileges();
    let ok = dropped.is_ok();
    k.result(
        &format!("drop CAP_NET_ADMIN (setuid {NOBODY})"),
        dropped.map(|_| String::new()).map_err(|e| format!("{e:#}")),
    );
    let after = if ok {
        match Conn::open() {
            Ok(mut c) => {
                run_cases(&mut c, &unprivileged, &mut k);
                state(&mut c).map(|s| s.0)
            }
            Err(e) => Err(e.into()),
        }
    } else {
        for case in &unprivileged {
            k.result(&case.name, Err("SKIP privileges not dropped".to_string()));
        }
        Err(anyhow!("privileges not dropped"))
    };
    let same = match after {
        Ok(after) if after == before => Ok(format!("{} objects unchanged", before.len())),
        Ok(after) => {
            for l in before.iter().filter(|l| !after.contains(l)) {
                println!("# before: {l}");
            }
            for l in after.iter().filter(|l| !before.contains(l)) {
                println!("# after:  {l}");
            }
            Err("state changed (see the before/after lines)".to_string())
        }
        Err(e) => Err(format!("dump after: {e:#}")),
    };
    k.result("state after the batch is identical", same);
    println!("# {} of {} failed", k.failed, k.n);
    if k.failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}
