// SPDX-License-Identifier: GPL-2.0
//! The binary's exit statuses and messages, without a kernel: usage errors
//! exit 2 before any socket is opened; a missing family exits 1 saying so.

use std::process::Command;

fn ubctl(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_ubctl"))
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("run ubctl: {e}"));
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn usage_errors_exit_2_with_a_clear_message() {
    for (args, needle) in [
        (
            &["addr", "add", "0", "cna16:0x10000"][..],
            "does not fit 16 bits",
        ),
        (&["addr", "add", "0", "300.1.1.1"], "is not an address"),
        (&["port", "show", "0/99"], "port 99 out of range (0-63)"),
        (
            &["port", "set", "0/1", "sideways"],
            "unknown setting 'sideways'",
        ),
        (
            &["port", "set", "0/1", "retry-threshold", "1"],
            "out of range (2-255)",
        ),
        (
            &["port", "set", "0/1", "reinit-threshold", "0"],
            "out of range (1-255)",
        ),
        (
            &["route", "add", "0", "10.0.0.0/8", "ports", "0,64"],
            "port 64 out of range",
        ),
        (
            &["route", "add", "0", "10.0.0.0/8", "ecmp"],
            "unknown route option",
        ),
        (&["ping", "-s", "5000", "10.0.0.2"], "5000"),
        (&["link", "show"], "unrecognized subcommand 'link'"),
        (&["npi", "set", "0", "npi", "0x2000000"], "out of range"),
        (
            &["npi", "set", "0", "mode", "lax"],
            "expected strict or loose",
        ),
        (
            &[
                "tp", "add", "0", "remote", "10.0.0.1", "key", "1", "mtu", "9000",
            ],
            "mtu 9000 out of range (256-4096)",
        ),
        (&["tp", "add", "0", "key", "1"], "tp add needs remote ADDR"),
        (
            &["tp", "set", "0", "1", "state", "err"],
            "expected suspended or rts",
        ),
        (
            &[
                "tpg", "add", "0", "remote", "10.0.0.1", "key", "1", "members", "9",
            ],
            "members 9 out of range (2-8)",
        ),
        (
            &["tpg", "add", "0", "remote", "10.0.0.1", "key", "1"],
            "tpg add needs members N",
        ),
        (
            &["tpg", "add", "0", "key", "1", "members", "2"],
            "tpg add needs remote ADDR",
        ),
        (
            &[
                "tp", "add", "0", "remote", "10.0.0.1", "key", "1", "members", "2",
            ],
            "unknown setting 'members'",
        ),
        (
            &["tpg", "set", "0", "1", "state", "closed"],
            "expected suspended or rts",
        ),
    ] {
        let (code, _, err) = ubctl(args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}

#[test]
fn completion_scripts_are_generated() {
    for sh in ["bash", "zsh", "fish"] {
        let (code, out, err) = ubctl(&["completion", sh]);
        assert_eq!(code, 0, "{sh}: {err}");
        assert!(out.contains("ubctl") && out.contains("monitor"), "{sh}");
    }
}

#[test]
fn without_the_family_the_failure_says_why() {
    if std::path::Path::new("/sys/module/ub").exists() {
        return; // ub.ko is loaded here: nothing to check
    }
    let (code, _, err) = ubctl(&["dev", "show"]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("family \"ub\" not found (is ub.ko loaded?)"),
        "{err}"
    );
}
