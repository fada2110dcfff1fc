// SPDX-License-Identifier: GPL-2.0
//! The `ub-sim` command line: every argument that cannot be simulated is
//! refused before anything runs (a message saying why, exit status 2, no
//! output file); a run that delivers nothing says so rather than printing
//! NaN; `experiment` writes well-formed SVG whose ticks are round numbers.

#![allow(clippy::unwrap_used, clippy::indexing_slicing, reason = "test code")]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn ub_sim(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ub-sim"))
        .args(args)
        .output()
        .unwrap()
}

/// A fresh, empty directory for one test's output files.
fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn arguments_that_cannot_be_simulated_are_refused() {
    let dir = scratch("cli-refused");
    let out = dir.join("exp");
    let out = out.to_str().unwrap();
    let cases: &[(&[&str], &str)] = &[
        (&["run", "--loss", "2"], "is not a loss rate"),
        (&["run", "--loss", "1"], "nothing can be delivered"),
        (&["run", "--loss", "-0.1"], "is not a loss rate"),
        (&["run", "--loss", "NaN"], "is not a loss rate"),
        (&["run", "--loss", "inf"], "is not a loss rate"),
        (&["run", "--loss", "1e-3x"], "is not a number"),
        (&["run", "--messages", "0"], "at least one message"),
        (
            &["run", "--messages", "1000001"],
            "at most 1000000 messages",
        ),
        (&["run", "--size", "0"], "at least 1 byte"),
        (&["run", "--size", "4294967296"], "is not a message size"),
        (&["run", "--rto-base-us", "0"], "allows 4 to 2097152 µs"),
        (&["run", "--rto-base-us", "3"], "allows 4 to 2097152 µs"),
        (
            &["run", "--rto-base-us", "2097153"],
            "allows 4 to 2097152 µs",
        ),
        (
            &["run", "--messages", "1000000", "--size", "1000000"],
            "cannot be carried within a run's 60 s",
        ),
        (&["sweep", "--seeds", "0"], "at least one seed"),
        (&["sweep", "--seeds", "1000001"], "at most 1000000 seeds"),
        (
            &["sweep", "--first", "18446744073709551614", "--seeds", "3"],
            "run past the largest seed",
        ),
        (
            &["experiment", "--out", out, "--loss", "0,1e-3,1"],
            "nothing can be delivered",
        ),
        (
            &["experiment", "--out", out, "--loss", "0,1e-3,0.001"],
            "loss rate 0.001 is listed twice",
        ),
        (
            &["experiment", "--out", out, "--messages", "0"],
            "at least one message",
        ),
        (
            &["experiment", "--out", out, "--rto-base-us", "1"],
            "allows 4 to 2097152 µs",
        ),
        (
            &["experiment", "--out", out, "--size", "1000000000"],
            "cannot be carried",
        ),
        (&["experiment", "--out", ""], "names no file"),
    ];
    for (args, why) in cases {
        let o = ub_sim(args);
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.starts_with("error: "), "{args:?}: {stderr}");
        assert!(stderr.contains(why), "{args:?}: want {why:?} in {stderr}");
        assert!(o.stdout.is_empty(), "{args:?} ran: {:?}", o.stdout);
    }
    assert_eq!(
        std::fs::read_dir(&dir).unwrap().count(),
        0,
        "a file was written"
    );
}

#[test]
fn boundary_values_are_accepted() {
    // Seed 0 is a seed like any other; loss 0 and the RTO base limits are
    // allowed values; -0 is 0.
    for args in [
        &["run", "--messages", "2", "--size", "1", "--seed", "0"][..],
        &[
            "run",
            "--messages",
            "2",
            "--loss",
            "0",
            "--rto-base-us",
            "4",
        ],
        &[
            "run",
            "--messages",
            "2",
            "--loss=-0",
            "--rto-base-us",
            "2097152",
        ],
        &["sweep", "--seeds", "2", "--first", "18446744073709551614"],
    ] {
        let o = ub_sim(args);
        assert!(o.status.success(), "{args:?}: {o:?}");
    }
}

#[test]
fn a_run_that_delivers_nothing_says_so() {
    // At 90 % loss every message exhausts its retries.
    let o = ub_sim(&["run", "--loss", "0.9", "--messages", "4", "--size", "65536"]);
    assert!(o.status.success(), "{o:?}");
    let stdout = String::from_utf8(o.stdout).unwrap();
    assert!(stdout.starts_with("delivered 0/4 "), "{stdout}");
    assert!(stdout.contains("no message delivered"), "{stdout}");
    for bad in ["NaN", "inf"] {
        assert!(!stdout.contains(bad), "{stdout}");
    }
}

/// Significant digits of a number as written: "1400" has 2, "0.05" 1,
/// "8.5" 2, "39.811" 5.
fn significant_digits(label: &str) -> usize {
    let digits: String = label.chars().filter(char::is_ascii_digit).collect();
    let digits = digits.trim_start_matches('0');
    let digits = if label.contains('.') {
        digits
    } else {
        digits.trim_end_matches('0')
    };
    digits.len()
}

#[test]
fn experiment_chart_is_svg_with_round_ticks_and_units() {
    let dir = scratch("cli-experiment");
    let prefix = dir.join("exp");
    let o = ub_sim(&[
        "experiment",
        "--out",
        prefix.to_str().unwrap(),
        "--messages",
        "20",
        "--size",
        "16384",
        "--loss",
        "0,1e-3,0.01,0.9",
    ]);
    assert!(o.status.success(), "{o:?}");
    let table = String::from_utf8(o.stdout).unwrap();
    let csv = std::fs::read_to_string(prefix.with_extension("csv")).unwrap();
    for text in [&table, &csv] {
        assert!(!text.contains("NaN") && !text.contains("inf"), "{text}");
    }
    // At 90 % loss nothing arrives: the table says n/a, the CSV leaves the
    // latency fields empty.
    assert!(table.contains("n/a"), "{table}");
    assert!(csv.lines().any(|l| l.contains(",0.9,0.000,,,0,")), "{csv}");

    let svg = std::fs::read_to_string(prefix.with_extension("svg")).unwrap();
    let doc = roxmltree::Document::parse(&svg).unwrap();
    assert_eq!(doc.root_element().tag_name().name(), "svg");
    // (text, anchor, x, y) of every text element.
    let texts: Vec<(String, String, f64, f64)> = doc
        .descendants()
        .filter(|n| n.has_tag_name("text"))
        .map(|n| {
            let num = |a| n.attribute(a).unwrap().parse::<f64>().unwrap();
            (
                n.text().unwrap_or("").trim().to_string(),
                n.attribute("text-anchor").unwrap_or("").to_string(),
                num("x"),
                num("y"),
            )
        })
        .collect();
    for want in [
        "goodput (Gb/s)",
        "p99 latency (µs)",
        "packet loss rate (log scale)",
        "GBN+fast, per-flow",
        "selective, per-packet",
    ] {
        assert!(
            texts.iter().any(|t| t.0 == want),
            "no {want:?} in {texts:?}"
        );
    }
    let is_x_tick = |t: &str| t == "0" || t == "1" || t.starts_with("1e-");

    // x ticks (centred under the axis): 0, then one per decade, equally
    // spaced, on both panels.
    let x: Vec<&(String, String, f64, f64)> = texts
        .iter()
        .filter(|t| t.1 == "middle" && is_x_tick(&t.0))
        .collect();
    let labels: Vec<&str> = x.iter().map(|t| t.0.as_str()).collect();
    assert_eq!(
        labels,
        ["0", "1e-3", "1e-2", "1e-1", "1"].repeat(2),
        "{texts:?}"
    );
    for panel in x.chunks(5) {
        let gaps: Vec<f64> = panel.windows(2).map(|w| w[1].2 - w[0].2).collect();
        for g in &gaps {
            assert!((g - gaps[0]).abs() <= 2.0, "uneven decades {gaps:?}");
        }
    }

    // y ticks (right-aligned left of each panel's axis, one x per panel):
    // 0 then a constant round step, equally spaced, each label at most 3
    // significant digits.
    let mut columns: Vec<f64> = texts.iter().filter(|t| t.1 == "end").map(|t| t.2).collect();
    columns.dedup();
    assert_eq!(columns.len(), 2, "{texts:?}");
    for col in columns {
        let ticks: Vec<(&str, f64, f64)> = texts
            .iter()
            .filter(|t| t.1 == "end" && t.2 == col)
            .map(|t| (t.0.as_str(), t.0.parse::<f64>().unwrap(), t.3))
            .collect();
        assert!(ticks.len() >= 3, "{ticks:?}");
        assert_eq!(ticks[0].1, 0.0, "{ticks:?}");
        let step = ticks[1].1;
        let mantissa = step / 10f64.powf(step.log10().floor());
        assert!(
            [1.0, 2.0, 5.0].iter().any(|m| (mantissa - m).abs() < 1e-9),
            "step {step} is not 1, 2 or 5 x 10^k"
        );
        for (i, (label, v, _)) in ticks.iter().enumerate() {
            assert!(significant_digits(label) <= 3, "tick {label}");
            assert!((v - i as f64 * step).abs() < step * 1e-9, "{ticks:?}");
        }
        let gaps: Vec<f64> = ticks.windows(2).map(|w| w[0].2 - w[1].2).collect();
        for g in &gaps {
            assert!((g - gaps[0]).abs() <= 2.0, "uneven ticks {gaps:?}");
        }
    }
}
