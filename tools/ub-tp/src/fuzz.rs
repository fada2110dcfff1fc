// SPDX-License-Identifier: GPL-2.0
//! `ub-tp fuzz`: `/dev/ub_tp` driven at random from several threads at
//! once, on shared files.
//!
//! `abi-check` checks each misuse's errno one at a time; this looks for
//! what no table lists: the interleavings. Worker threads share a pool of
//! open files and, for as long as asked, each picks one at random and does
//! one of: `UB_TP_IOC_BIND` with a generated argument (valid mostly, with
//! one field bent; towards the addresses given, which makes some binds
//! succeed: CTP ends at once, channels once a peer answers), `UB_TP_IOC_INFO`,
//! an ioctl number the device does not have, `read()` and `write()` of
//! sizes from 0 to past the largest message, `poll()`, with argument
//! pointers that are sometimes NULL or unmapped; or it opens a file or
//! closes one while the other threads may be using it.
//!
//! Nothing here may block for long: files are opened `O_NONBLOCK` except a
//! few on which only binds with a short `timeout_ms`, infos and polls with
//! a short timeout are done. A watchdog fails the run if a thread is stuck
//! in one call for [`STUCK`]: that is a kernel bug (a lost wake-up, a
//! deadlock). Errors of the calls are what the fuzzer expects and only
//! counted; what must hold besides is judged by the caller: no kernel
//! report (the debug kernel's KASAN, lockdep, kmemleak), and the module
//! unloads afterwards (no file or channel leaked a reference).

use std::collections::BTreeMap;
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::addr::Addr;
use crate::error::errno_name;
use crate::uapi::*;
pub use ub_fuzz_rng::Rng;

/// How long one call may take before the run fails.
pub const STUCK: Duration = Duration::from_secs(15);
/// Open files shared by the workers at most.
const POOL: usize = 24;
/// Longest `timeout_ms` a bind on a blocking file gets.
const BLOCKING_BIND_MS: u32 = 300;
/// Largest read or write tried: one past the largest message (1 MiB).
const MAX_IO: usize = (1 << 20) + 1;
/// An address no process maps (the first page is never mapped), for
/// `EFAULT`.
const BAD_PTR: usize = 0x10;

/// What a run is given.
#[derive(Clone, Debug)]
pub struct FuzzConfig {
    /// The device node.
    pub path: std::path::PathBuf,
    /// The device index most binds name.
    pub dev_index: u32,
    /// Addresses most binds go to (this host's own, a peer's).
    pub addrs: Vec<Addr>,
    /// How long to run.
    pub duration: Duration,
    /// Worker threads.
    pub threads: u32,
    /// Seed of the workers' generators (worker `i` gets `seed + i`).
    pub seed: u64,
}

/// One open file of the pool.
#[derive(Clone, Copy, Debug)]
struct Slot {
    fd: i32,
    nonblock: bool,
}

/// Calls and their outcomes, by operation.
#[derive(Clone, Debug, Default)]
pub struct Report {
    /// Per operation: calls, successes, failures by errno name.
    pub ops: BTreeMap<&'static str, (u64, u64, BTreeMap<&'static str, u64>)>,
}

impl Report {
    fn record(&mut self, op: &'static str, rc: isize, errno: i32) {
        let e = self.ops.entry(op).or_default();
        e.0 += 1;
        if rc >= 0 {
            e.1 += 1;
        } else {
            *e.2.entry(errno_name(errno).unwrap_or("other errno"))
                .or_default() += 1;
        }
    }

    fn merge(&mut self, other: Report) {
        for (op, (n, ok, errs)) in other.ops {
            let e = self.ops.entry(op).or_default();
            e.0 += n;
            e.1 += ok;
            for (k, v) in errs {
                *e.2.entry(k).or_default() += v;
            }
        }
    }

    /// Calls made in all.
    pub fn calls(&self) -> u64 {
        self.ops.values().map(|v| v.0).sum()
    }

    /// One line per operation.
    pub fn lines(&self) -> Vec<String> {
        self.ops
            .iter()
            .map(|(op, (n, ok, errs))| {
                let errs: Vec<String> = errs.iter().map(|(k, v)| format!("{k} {v}")).collect();
                format!("{op}: {n} calls, {ok} ok; {}", errs.join(", "))
            })
            .collect()
    }
}

/// What the workers share.
struct Shared {
    pool: Mutex<Vec<Slot>>,
    /// Numbers of files "closed" during the run. A close replaces the file
    /// behind the number with `/dev/null` (`dup2`) instead of freeing the
    /// number: a thread that took the number from the pool before may
    /// still use it, and a freed number could meanwhile name a file this
    /// process opened for something else. Opens reuse these numbers.
    grave: Mutex<Vec<i32>>,
    /// `/dev/null`, what closed numbers point to.
    devnull: i32,
    /// Per worker: the time (ms since start) its current call began, and
    /// the call's name, 0 / "" when between calls.
    busy_since: Vec<AtomicU64>,
    busy_op: Vec<Mutex<&'static str>>,
    stop: AtomicBool,
    start: Instant,
}

impl Shared {
    fn now_ms(&self) -> u64 {
        u64::try_from(self.start.elapsed().as_millis())
            .unwrap_or(u64::MAX)
            .max(1)
    }
}

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// A generated `struct ub_tp_bind`: valid for the given addresses mostly,
/// with one field bent one time in three.
fn bind_arg(rng: &mut Rng, cfg: &FuzzConfig, nonblock: bool) -> UbTpBind {
    let mut b = UbTpBind {
        version: UB_TP_ABI_VERSION,
        dev_index: cfg.dev_index,
        key: 9000 + rng.below(8) as u32,
        retransmit: rng.below(2) as u8,
        attr_flags: rng.below(4) as u32,
        mtu: *rng.pick(&[0u32, 256, 1024, 4096]).unwrap_or(&0),
        timeout_ms: *rng.pick(&[1u32, 50, BLOCKING_BIND_MS]).unwrap_or(&1),
        members: *rng.pick(&[0u32, 1, 2, 4]).unwrap_or(&0),
        flags: *rng
            .pick(&[0, UB_TP_BIND_LISTEN, UB_TP_BIND_CTP, UB_TP_BIND_CTP])
            .unwrap_or(&0),
        ..UbTpBind::default()
    };
    if let Some(a) = rng.pick(&cfg.addrs) {
        b.remote = a.to_raw();
    }
    if b.flags == UB_TP_BIND_CTP && !rng.one_in(4) {
        // What a CTP bind must leave zero (no key, no RTP settings).
        b.key = 0;
        b.retransmit = 0;
        b.attr_flags = 0;
        b.mtu = 0;
        b.members = 0;
    }
    if rng.one_in(3) {
        match rng.below(10) {
            0 => b.version = rng.next_u64() as u32,
            1 => b.dev_index = rng.below(4) as u32,
            2 => b.remote.type_ = rng.below(8) as u8,
            3 => b.remote.reserved[rng.below(3) as usize] = 1,
            4 => b.flags = rng.next_u64() as u32,
            5 => b.retransmit = rng.next_u64() as u8,
            6 => b.attr_flags = rng.next_u64() as u32,
            7 => b.mtu = rng.below(10_000) as u32,
            8 => b.members = rng.below(12) as u32,
            _ => b.reserved[rng.below(7) as usize] = 1,
        }
    }
    if !nonblock {
        // A blocking bind waits up to its timeout (0 means 5 s).
        b.timeout_ms = b.timeout_ms.clamp(1, BLOCKING_BIND_MS);
    }
    b
}

/// A size for `read()` or `write()`.
fn io_size(rng: &mut Rng) -> usize {
    match rng.below(4) {
        0 => *rng
            .pick(&[
                0usize,
                1,
                2,
                63,
                64,
                4095,
                4096,
                4097,
                65_536,
                MAX_IO - 1,
                MAX_IO,
            ])
            .unwrap_or(&0),
        1 => usize::try_from(rng.below(MAX_IO as u64 + 1)).unwrap_or(0),
        _ => usize::try_from(rng.below(8192)).unwrap_or(0),
    }
}

/// One worker: calls until told to stop.
fn worker(me: usize, cfg: &FuzzConfig, sh: &Shared) -> Report {
    let mut rng = Rng::new(cfg.seed.wrapping_add(me as u64));
    let mut report = Report::default();
    let mut buf = vec![0u8; MAX_IO + 16];
    for (i, b) in buf.iter_mut().enumerate() {
        *b = i as u8;
    }
    // Room for whatever size an unknown ioctl number encodes (14 bits).
    let mut ioc = vec![0u8; 1 << 14];
    let path = CString::new(cfg.path.as_os_str().as_bytes()).unwrap_or_default();
    let begin = |op: &'static str| {
        if let (Some(t), Some(o)) = (sh.busy_since.get(me), sh.busy_op.get(me)) {
            if let Ok(mut o) = o.lock() {
                *o = op;
            }
            t.store(sh.now_ms(), Ordering::Relaxed);
        }
    };
    let end = || {
        if let Some(t) = sh.busy_since.get(me) {
            t.store(0, Ordering::Relaxed);
        }
    };
    while !sh.stop.load(Ordering::Relaxed) {
        let slot = sh.pool.lock().ok().and_then(|p| {
            p.get(usize::try_from(rng.below(p.len() as u64)).ok()?)
                .copied()
        });
        let action = rng.below(100);
        let Some(s) = slot.filter(|_| action >= 8) else {
            // Open a file (and always when the pool is empty).
            let nonblock = !rng.one_in(5);
            let flags =
                libc::O_RDWR | libc::O_CLOEXEC | if nonblock { libc::O_NONBLOCK } else { 0 };
            begin("open");
            // SAFETY: `path` is a NUL-terminated string that lives across
            // the call.
            let mut fd = unsafe { libc::open(path.as_ptr(), flags) };
            end();
            report.record("open", fd as isize, errno());
            if fd >= 0 {
                let reuse = sh.grave.lock().unwrap_or_else(|e| e.into_inner()).pop();
                if let Some(g) = reuse {
                    // SAFETY: `g` is a number this run owns (in the grave,
                    // pointing to /dev/null); `fd` was just opened here.
                    if unsafe { libc::dup2(fd, g) } == g {
                        // SAFETY: `fd` is this thread's, in no pool.
                        unsafe { libc::close(fd) };
                        fd = g;
                    } else {
                        sh.grave.lock().unwrap_or_else(|e| e.into_inner()).push(g);
                    }
                }
                let mut p = sh.pool.lock().unwrap_or_else(|e| e.into_inner());
                if p.len() < POOL {
                    p.push(Slot { fd, nonblock });
                } else {
                    drop(p);
                    // SAFETY: `fd` was just opened by this thread and is in
                    // no pool.
                    unsafe { libc::close(fd) };
                }
            }
            continue;
        };
        match action {
            8..=14 => {
                // Close a file the other threads may be using right now.
                let taken = {
                    let mut p = sh.pool.lock().unwrap_or_else(|e| e.into_inner());
                    p.iter()
                        .position(|x| x.fd == s.fd)
                        .map(|i| p.swap_remove(i))
                };
                if let Some(t) = taken {
                    begin("close");
                    // SAFETY: the number was taken out of the pool and is
                    // this run's: pointing it at /dev/null drops its
                    // reference to the /dev/ub_tp file (the release runs
                    // once no other thread is inside a call on it) and
                    // keeps the number from being reused (see `grave`).
                    let rc = unsafe { libc::dup2(sh.devnull, t.fd) };
                    end();
                    report.record("close", rc as isize, errno());
                    sh.grave
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push(t.fd);
                }
            }
            15..=39 => {
                let mut b = bind_arg(&mut rng, cfg, s.nonblock);
                let ptr: *mut libc::c_void = if rng.one_in(20) {
                    BAD_PTR as *mut libc::c_void
                } else {
                    (&mut b as *mut UbTpBind).cast()
                };
                begin("bind");
                // SAFETY: the argument points to a `UbTpBind` that lives
                // across the call, or to an unmapped address, which the
                // kernel must refuse with EFAULT.
                let rc = unsafe { libc::ioctl(s.fd, UB_TP_IOC_BIND as _, ptr) };
                end();
                report.record("bind", rc as isize, errno());
            }
            40..=49 => {
                let mut info = UbTpInfo {
                    version: if rng.one_in(10) {
                        rng.next_u64() as u32
                    } else {
                        UB_TP_ABI_VERSION
                    },
                    ..UbTpInfo::default()
                };
                let ptr: *mut libc::c_void = if rng.one_in(20) {
                    BAD_PTR as *mut libc::c_void
                } else {
                    (&mut info as *mut UbTpInfo).cast()
                };
                begin("info");
                // SAFETY: as for the bind: a live `UbTpInfo` or an unmapped
                // address.
                let rc = unsafe { libc::ioctl(s.fd, UB_TP_IOC_INFO as _, ptr) };
                end();
                report.record("info", rc as isize, errno());
            }
            50..=54 => {
                // An ioctl number the device does not have: type 'U' with
                // another number or size, or anything.
                let cmd = if rng.one_in(2) {
                    iowr(
                        b'U',
                        rng.below(256) as u8,
                        usize::try_from(rng.below(1 << 14)).unwrap_or(0),
                    )
                } else {
                    rng.next_u64() as u32
                };
                if cmd == UB_TP_IOC_BIND || cmd == UB_TP_IOC_INFO {
                    continue;
                }
                begin("ioctl-other");
                // SAFETY: `ioc` is 16 KiB, as much as any ioctl number can
                // encode, and lives across the call.
                let rc = unsafe { libc::ioctl(s.fd, cmd as _, ioc.as_mut_ptr()) };
                end();
                report.record("ioctl-other", rc as isize, errno());
            }
            55..=74 if s.nonblock => {
                let n = io_size(&mut rng);
                let ptr: *const libc::c_void = if rng.one_in(20) {
                    BAD_PTR as *const libc::c_void
                } else {
                    buf.as_ptr().cast()
                };
                begin("write");
                // SAFETY: `buf` holds MAX_IO + 16 >= n bytes and lives
                // across the call, or the pointer is unmapped (EFAULT).
                let rc = unsafe { libc::write(s.fd, ptr, n) };
                end();
                report.record("write", rc, errno());
            }
            75..=89 if s.nonblock => {
                let n = io_size(&mut rng);
                let ptr: *mut libc::c_void = if rng.one_in(20) {
                    BAD_PTR as *mut libc::c_void
                } else {
                    buf.as_mut_ptr().cast()
                };
                begin("read");
                // SAFETY: as for the write; the kernel writes at most `n`
                // bytes.
                let rc = unsafe { libc::read(s.fd, ptr, n) };
                end();
                report.record("read", rc, errno());
            }
            _ => {
                let fds: Vec<libc::pollfd> = {
                    let p = sh.pool.lock().unwrap_or_else(|e| e.into_inner());
                    let mut fds = Vec::new();
                    for x in p.iter() {
                        if rng.one_in(2) {
                            fds.push(libc::pollfd {
                                fd: x.fd,
                                events: (rng.next_u64() as i16) | libc::POLLIN | libc::POLLOUT,
                                revents: 0,
                            });
                        }
                    }
                    fds
                };
                let mut fds = fds;
                let timeout = rng.below(20) as i32;
                begin("poll");
                // SAFETY: `fds` is a live array of `fds.len()` pollfds.
                let rc =
                    unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout) };
                end();
                report.record("poll", rc as isize, errno());
            }
        }
    }
    report
}

/// Runs the workers for `cfg.duration`. `Err` names the worker and the call
/// that got stuck for [`STUCK`] (a kernel bug); the workers of such a run
/// are left behind in the kernel, so the caller must exit.
pub fn run(cfg: &FuzzConfig) -> Result<Report, String> {
    let threads = cfg.threads.max(1) as usize;
    // SAFETY: the path is a NUL-terminated literal.
    let devnull = unsafe { libc::open(c"/dev/null".as_ptr(), libc::O_RDWR | libc::O_CLOEXEC) };
    if devnull < 0 {
        return Err(format!(
            "open /dev/null: {}",
            std::io::Error::last_os_error()
        ));
    }
    let sh = Arc::new(Shared {
        pool: Mutex::new(Vec::new()),
        grave: Mutex::new(Vec::new()),
        devnull,
        busy_since: (0..threads).map(|_| AtomicU64::new(0)).collect(),
        busy_op: (0..threads).map(|_| Mutex::new("")).collect(),
        stop: AtomicBool::new(false),
        start: Instant::now(),
    });
    let mut handles = Vec::new();
    for me in 0..threads {
        let sh = sh.clone();
        let cfg = cfg.clone();
        handles.push(std::thread::spawn(move || worker(me, &cfg, &sh)));
    }
    let deadline = Instant::now() + cfg.duration;
    let stuck_ms = u64::try_from(STUCK.as_millis()).unwrap_or(u64::MAX);
    while Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
        let now = sh.now_ms();
        for (i, t) in sh.busy_since.iter().enumerate() {
            let since = t.load(Ordering::Relaxed);
            if since != 0 && now.saturating_sub(since) > stuck_ms {
                let op = sh
                    .busy_op
                    .get(i)
                    .and_then(|o| o.lock().ok().map(|o| *o))
                    .unwrap_or("?");
                return Err(format!(
                    "worker {i} stuck in {op} for {} s (seed {})",
                    now.saturating_sub(since) / 1000,
                    cfg.seed
                ));
            }
        }
    }
    sh.stop.store(true, Ordering::Relaxed);
    let mut report = Report::default();
    for h in handles {
        match h.join() {
            Ok(r) => report.merge(r),
            Err(_) => return Err("a worker panicked".to_string()),
        }
    }
    let pool = std::mem::take(&mut *sh.pool.lock().unwrap_or_else(|e| e.into_inner()));
    let grave = std::mem::take(&mut *sh.grave.lock().unwrap_or_else(|e| e.into_inner()));
    for fd in pool.iter().map(|s| s.fd).chain(grave).chain([devnull]) {
        // SAFETY: the workers have stopped; these numbers are this run's
        // and used by nobody else any more.
        unsafe { libc::close(fd) };
    }
    Ok(report)
}

/// Whether `path` can be opened at all (the caller skips otherwise).
pub fn device_present(path: &Path) -> bool {
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> FuzzConfig {
        FuzzConfig {
            path: "/dev/null".into(),
            dev_index: 0,
            addrs: vec!["10.0.1.100".parse().expect("address")],
            duration: Duration::from_millis(1),
            threads: 1,
            seed: 3,
        }
    }

    /// Binds on a blocking file never wait longer than BLOCKING_BIND_MS
    /// (0 would mean 5 s), and most binds are valid apart from the address.
    #[test]
    fn blocking_binds_are_short_and_most_are_well_formed() {
        let mut rng = Rng::new(1);
        let c = cfg();
        let mut plain = 0;
        for _ in 0..5000 {
            let b = bind_arg(&mut rng, &c, false);
            assert!((1..=BLOCKING_BIND_MS).contains(&b.timeout_ms), "{b:?}");
            plain += u32::from(b.version == UB_TP_ABI_VERSION && b.reserved == [0; 7]);
        }
        assert!(plain > 4000, "{plain}");
    }

    #[test]
    fn sizes_reach_both_ends() {
        let mut rng = Rng::new(2);
        let sizes: Vec<usize> = (0..5000).map(|_| io_size(&mut rng)).collect();
        assert!(sizes.contains(&0) && sizes.contains(&MAX_IO));
        assert!(sizes.iter().all(|&n| n <= MAX_IO));
    }

    /// A run against a file that is not /dev/ub_tp (every ioctl ENOTTY)
    /// exercises every operation and stops on time.
    #[test]
    fn a_run_stops_and_reports_every_operation() {
        let mut c = cfg();
        c.duration = Duration::from_millis(300);
        c.threads = 3;
        let r = run(&c).expect("no worker stuck");
        for op in [
            "open",
            "close",
            "bind",
            "info",
            "ioctl-other",
            "write",
            "read",
            "poll",
        ] {
            assert!(
                r.ops.get(op).is_some_and(|v| v.0 > 0),
                "{op} never ran: {:?}",
                r.lines()
            );
        }
        assert!(r.ops["bind"].2.contains_key("ENOTTY"), "{:?}", r.lines());
    }
}
