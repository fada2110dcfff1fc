// SPDX-License-Identifier: GPL-2.0
//! Recognises kernel error reports on a console: oopses, BUG()s, panics,
//! warnings, and the reports of KASAN, UBSAN, lockdep, kmemleak, the
//! soft/hard lockup and hung task detectors and RCU stall warnings, and an
//! initramfs the kernel could not unpack whole.

/// What kind of report a console line starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `BUG()` / `BUG: ...` lines, including "sleeping function called from
    /// invalid context" (DEBUG_ATOMIC_SLEEP) and soft lockups.
    Bug,
    /// An oops or a general protection fault.
    Oops,
    /// `Kernel panic`.
    Panic,
    /// `WARNING:` lines: WARN_ON() and lockdep reports.
    Warning,
    /// KASAN reports.
    Kasan,
    /// UBSAN reports.
    Ubsan,
    /// kmemleak found unreferenced objects.
    Kmemleak,
    /// Hung tasks and RCU stalls.
    Stall,
    /// The initramfs was only partly unpacked (a guest with too little
    /// memory for it): /init still runs, and tests whose files are missing
    /// would skip instead of failing.
    Initramfs,
}

/// A report found on the console.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    /// Its kind.
    pub kind: Kind,
    /// 1-based line number in the console log.
    pub line: usize,
    /// The line, without its timestamp.
    pub text: String,
}

/// Line fragments that start a report. Matched anywhere in the line (after
/// the timestamp), case-sensitive, as the kernel prints them.
const PATTERNS: &[(&str, Kind)] = &[
    ("kernel BUG at ", Kind::Bug),
    ("BUG: ", Kind::Bug),
    ("Oops: ", Kind::Oops),
    ("general protection fault", Kind::Oops),
    ("Kernel panic - not syncing", Kind::Panic),
    ("WARNING: ", Kind::Warning),
    ("KASAN: ", Kind::Kasan),
    ("UBSAN: ", Kind::Ubsan),
    ("suspected memory leak", Kind::Kmemleak),
    ("unreferenced object 0x", Kind::Kmemleak),
    ("INFO: task ", Kind::Stall),
    ("rcu_sched detected stalls", Kind::Stall),
    ("rcu_preempt detected stalls", Kind::Stall),
    ("detected stalls on CPUs", Kind::Stall),
    ("Initramfs unpacking failed", Kind::Initramfs),
];

/// Scans a console log.
pub fn scan(console: &str) -> Vec<Finding> {
    let mut findings = Vec::new();
    for (i, raw) in console.lines().enumerate() {
        let text = crate::ktap::strip_console_prefix(raw);
        if let Some(&(_, kind)) = PATTERNS.iter().find(|(p, _)| text.contains(p)) {
            findings.push(Finding {
                kind,
                line: i + 1,
                text: text.trim_end().to_string(),
            });
        }
    }
    findings
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(log: &str) -> Vec<Kind> {
        scan(log).into_iter().map(|f| f.kind).collect()
    }

    #[test]
    fn clean_boot_has_no_findings() {
        let log = "[    0.000000] Linux version 7.3.4-ub-test\n\
                   [    0.5] kmemleak: Kernel memory leak detector initialized (mem pool available: 15000)\n\
                   [    1.0] UnifiedBus stack loaded\n\
                   [    1.1] lkdtm: No crash points registered, enable through debugfs\n";
        assert!(scan(log).is_empty(), "{:?}", scan(log));
    }

    #[test]
    fn lkdtm_bug() {
        let log = "[    2.0] lkdtm: Performing direct entry BUG\n\
                   [    2.0] ------------[ cut here ]------------\n\
                   [    2.0] kernel BUG at drivers/misc/lkdtm/bugs.c:101!\n\
                   [    2.0] Oops: invalid opcode: 0000 [#1] SMP\n";
        assert_eq!(kinds(log), vec![Kind::Bug, Kind::Oops]);
        assert_eq!(scan(log)[0].line, 3);
    }

    #[test]
    fn checkers() {
        let cases = [
            ("BUG: KASAN: slab-use-after-free in ub_probe+0x1/0x2", Kind::Bug),
            ("==================================================================\nKASAN: null-ptr-deref in range", Kind::Kasan),
            ("WARNING: possible circular locking dependency detected", Kind::Warning),
            ("BUG: sleeping function called from invalid context at kernel/locking/mutex.c:580", Kind::Bug),
            ("kmemleak: 2 new suspected memory leaks (see /sys/kernel/debug/kmemleak)", Kind::Kmemleak),
            ("unreferenced object 0xffff888003a4c000 (size 64):", Kind::Kmemleak),
            ("watchdog: BUG: soft lockup - CPU#0 stuck for 22s!", Kind::Bug),
            ("INFO: task insmod:73 blocked for more than 120 seconds.", Kind::Stall),
            ("rcu: INFO: rcu_sched detected stalls on CPUs/tasks:", Kind::Stall),
            ("Kernel panic - not syncing: Fatal exception", Kind::Panic),
            ("UBSAN: shift-out-of-bounds in drivers/ub/x.c:1:2", Kind::Ubsan),
            ("WARNING: CPU: 0 PID: 1 at drivers/ub/ub.rs:10 ub_init+0x0/0x1", Kind::Warning),
            // Seen with the 35 MB Python initramfs in a 64 MiB guest.
            ("Initramfs unpacking failed: write error", Kind::Initramfs),
        ];
        for (line, kind) in cases {
            let found = kinds(&format!("[    3.1] {line}\n"));
            assert_eq!(found.last(), Some(&kind), "{line}");
        }
    }
}
