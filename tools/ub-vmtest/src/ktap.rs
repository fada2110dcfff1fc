// SPDX-License-Identifier: GPL-2.0
//! A KTAP parser (Documentation/dev-tools/ktap.rst) tolerant of what a serial
//! console adds: printk timestamps, unrelated kernel messages between KTAP
//! lines, and several KTAP documents one after another (KUnit prints one per
//! module load).
//!
//! Nesting follows the KTAP rule: a subtest's lines are indented four more
//! spaces than its parent's result line. Results are flattened into
//! dotted paths ("suite.case").

/// Outcome of one test.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// `ok`
    Pass,
    /// `not ok` (without a SKIP or TODO directive)
    Fail,
    /// `ok ... # SKIP` or `not ok ... # SKIP`
    Skip,
    /// `not ok ... # TODO` (expected failure)
    Todo,
}

/// One result line, with its position in the nesting.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TestResult {
    /// Names from the outermost test down to this one, joined by '.'.
    pub path: String,
    /// Nesting depth (0 = top level of its document).
    pub depth: usize,
    /// Outcome.
    pub status: Status,
    /// Number of direct subtests reported before this line.
    pub subtests: usize,
}

/// A plan that the results did not meet, or a bail-out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlanError {
    /// The test whose subtests broke their plan ("" = top level).
    pub parent: String,
    /// What went wrong.
    pub message: String,
}

/// Everything parsed from one stream.
#[derive(Clone, Debug, Default)]
pub struct Report {
    /// All results, in the order their result lines appeared.
    pub results: Vec<TestResult>,
    /// Broken plans and bail-outs.
    pub plan_errors: Vec<PlanError>,
    /// Number of KTAP/TAP version lines seen at top level.
    pub documents: usize,
}

impl Report {
    /// Finds a result by its full path.
    pub fn find(&self, path: &str) -> Option<&TestResult> {
        self.results.iter().rev().find(|r| r.path == path)
    }

    /// Every result that failed.
    pub fn failures(&self) -> impl Iterator<Item = &TestResult> {
        self.results.iter().filter(|r| r.status == Status::Fail)
    }
}

/// Removes a printk timestamp ("[    1.234567] ") and a trailing '\r'.
pub(crate) fn strip_console_prefix(line: &str) -> &str {
    let line = line.strip_suffix('\r').unwrap_or(line);
    if let Some(rest) = line.strip_prefix('[') {
        if let Some(end) = rest.find("] ") {
            let stamp = rest[..end].trim();
            if !stamp.is_empty() && stamp.chars().all(|c| c.is_ascii_digit() || c == '.') {
                return &rest[end + 2..];
            }
        }
    }
    line
}

/// A subtest frame: the results seen at one indentation, not yet claimed by
/// a parent result line.
#[derive(Debug)]
struct Frame {
    indent: usize,
    /// (name, status) of the direct results, in order.
    results: Vec<(String, Status)>,
    /// Indices into `Report::results` of everything inside this frame, so
    /// a parent can prefix their paths when it appears.
    members: Vec<usize>,
    plan: Option<usize>,
}

/// A parsed `ok`/`not ok` line.
struct ResultLine {
    status: Status,
    number: Option<usize>,
    name: String,
}

fn parse_result(text: &str) -> Option<ResultLine> {
    let (failed, rest) = if let Some(r) = text.strip_prefix("not ok") {
        (true, r)
    } else if let Some(r) = text.strip_prefix("ok") {
        (false, r)
    } else {
        return None;
    };
    if !(rest.is_empty() || rest.starts_with(' ')) {
        return None;
    }
    let rest = rest.trim_start();
    let (number, rest) = match rest.split_once(' ') {
        Some((n, r)) if n.parse::<usize>().is_ok() => (n.parse().ok(), r),
        _ if rest.parse::<usize>().is_ok() => (rest.parse().ok(), ""),
        _ => (None, rest),
    };
    let (name, directive) = match rest.split_once('#') {
        Some((n, d)) => (n.trim(), d.trim()),
        None => (rest.trim(), ""),
    };
    let name = name.strip_prefix("- ").unwrap_or(name).to_string();
    let directive = directive.to_ascii_uppercase();
    let status = if directive.starts_with("SKIP") {
        Status::Skip
    } else if directive.starts_with("TODO") || directive.starts_with("XFAIL") {
        Status::Todo
    } else if failed {
        Status::Fail
    } else {
        Status::Pass
    };
    Some(ResultLine {
        status,
        number,
        name,
    })
}

/// Parses a whole stream (a console log or a selftest output).
pub fn parse(text: &str) -> Report {
    let mut report = Report::default();
    let mut frames: Vec<Frame> = Vec::new();

    for raw in text.lines() {
        let line = strip_console_prefix(raw);
        let body = line.trim_start_matches(' ');
        let indent = line.len() - body.len();
        let body = body.trim_end();

        if body.starts_with("KTAP version") || body.starts_with("TAP version") {
            if indent == 0 {
                close_frames(&mut frames, &mut report, 0, true);
                report.documents += 1;
            }
            continue;
        }
        if let Some(plan) = body.strip_prefix("1..") {
            let count = plan.split_whitespace().next().and_then(|n| n.parse().ok());
            if let Some(count) = count {
                close_frames(&mut frames, &mut report, indent + 1, false);
                match frames.last_mut() {
                    Some(f) if f.indent == indent => f.plan = Some(count),
                    _ => frames.push(Frame {
                        indent,
                        results: Vec::new(),
                        members: Vec::new(),
                        plan: Some(count),
                    }),
                }
            }
            continue;
        }
        if body.starts_with("Bail out!") {
            report.plan_errors.push(PlanError {
                parent: String::new(),
                message: body.to_string(),
            });
            continue;
        }
        let Some(result) = parse_result(body) else {
            continue;
        };

        // The frame one level deeper holds this test's subtests.
        let mut subtests = Vec::new();
        let mut sub_members = Vec::new();
        while let Some(f) = frames.last() {
            if f.indent <= indent {
                break;
            }
            let Some(f) = frames.pop() else { break };
            check_plan(&f, &result.name, &mut report);
            subtests = f.results;
            sub_members.extend(f.members);
        }
        for &i in &sub_members {
            if let Some(r) = report.results.get_mut(i) {
                r.path = format!("{}.{}", result.name, r.path);
                r.depth += 1;
            }
        }
        // A parent reported "ok" whose subtests failed is still a failure.
        let status =
            if result.status == Status::Pass && subtests.iter().any(|(_, s)| *s == Status::Fail) {
                Status::Fail
            } else {
                result.status
            };
        let index = report.results.len();
        report.results.push(TestResult {
            path: result.name.clone(),
            depth: 0,
            status,
            subtests: subtests.len(),
        });
        if frames.last().is_none_or(|f| f.indent != indent) {
            frames.push(Frame {
                indent,
                results: Vec::new(),
                members: Vec::new(),
                plan: None,
            });
        }
        if let Some(f) = frames.last_mut() {
            if let Some(n) = result.number {
                let expected = f.results.len() + 1;
                if n != expected {
                    report.plan_errors.push(PlanError {
                        parent: String::new(),
                        message: format!(
                            "test '{}' is numbered {n}, expected {expected}",
                            result.name
                        ),
                    });
                }
            }
            f.results.push((result.name, status));
            f.members.extend(sub_members);
            f.members.push(index);
        }
    }
    close_frames(&mut frames, &mut report, 0, true);
    report
}

/// Closes frames indented at least `min_indent` (all of them when
/// `everything`), checking their plans.
fn close_frames(frames: &mut Vec<Frame>, report: &mut Report, min_indent: usize, everything: bool) {
    while let Some(f) = frames.last() {
        if !everything && f.indent < min_indent {
            break;
        }
        let Some(f) = frames.pop() else { break };
        let parent = if f.indent == 0 {
            ""
        } else {
            "(unfinished parent)"
        };
        check_plan(&f, parent, report);
        if f.indent > 0 && !f.results.is_empty() {
            // Subtests whose parent never reported: the parent is missing.
            report.plan_errors.push(PlanError {
                parent: parent.to_string(),
                message: format!(
                    "{} subtest result(s) without a parent result line",
                    f.results.len()
                ),
            });
        }
    }
}

fn check_plan(frame: &Frame, parent: &str, report: &mut Report) {
    if let Some(plan) = frame.plan {
        if plan != frame.results.len() {
            report.plan_errors.push(PlanError {
                parent: parent.to_string(),
                message: format!("planned {plan} tests, {} reported", frame.results.len()),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KUNIT: &str = "\
[    1.000000] ub: loading out-of-tree module taints kernel.
[    1.100000] KTAP version 1
[    1.100001] 1..1
[    1.100002]     KTAP version 1
[    1.100003]     # Subtest: ub_proto_crc
[    1.100004]     # module: ub
[    1.100005]     1..3
[    1.100006]     ok 1 crc32_check_value
[    1.100007]     ok 2 crc30_check_value
[    1.100008] UnifiedBus stack loaded
[    1.100009]     ok 3 crc30_vectors
[    1.100010] # ub_proto_crc: pass:3 fail:0 skip:0 total:3
[    1.100011] ok 1 ub_proto_crc
";

    #[test]
    fn kunit_console_output() {
        let r = parse(KUNIT);
        assert_eq!(r.documents, 1);
        assert!(r.plan_errors.is_empty(), "{:?}", r.plan_errors);
        let suite = r.find("ub_proto_crc").unwrap();
        assert_eq!(suite.status, Status::Pass);
        assert_eq!(suite.subtests, 3);
        assert_eq!(
            r.find("ub_proto_crc.crc30_vectors").unwrap().status,
            Status::Pass
        );
        assert_eq!(r.failures().count(), 0);
    }

    #[test]
    fn failing_case_fails_its_suite() {
        let text = KUNIT.replace(
            "    ok 2 crc30_check_value",
            "    not ok 2 crc30_check_value",
        );
        let r = parse(&text);
        assert_eq!(
            r.find("ub_proto_crc.crc30_check_value").unwrap().status,
            Status::Fail
        );
        // The suite line says ok, but a failed case makes it a failure.
        assert_eq!(r.find("ub_proto_crc").unwrap().status, Status::Fail);
    }

    #[test]
    fn missing_case_breaks_the_plan() {
        let text = KUNIT.replace("[    1.100009]     ok 3 crc30_vectors\n", "");
        let r = parse(&text);
        assert_eq!(r.plan_errors.len(), 1, "{:?}", r.plan_errors);
        assert!(r.plan_errors[0]
            .message
            .contains("planned 3 tests, 2 reported"));
    }

    #[test]
    fn truncated_document_is_reported() {
        // The guest died in the middle of a suite.
        let cut = KUNIT.find("[    1.100009]").unwrap();
        let r = parse(&KUNIT[..cut]);
        assert!(!r.plan_errors.is_empty());
        assert!(r.find("ub_proto_crc").is_none());
    }

    #[test]
    fn two_documents_from_two_module_loads() {
        let r = parse(&format!("{KUNIT}{KUNIT}"));
        assert_eq!(r.documents, 2);
        assert!(r.plan_errors.is_empty(), "{:?}", r.plan_errors);
        assert_eq!(
            r.results
                .iter()
                .filter(|t| t.path == "ub_proto_crc")
                .count(),
            2
        );
    }

    #[test]
    fn selftest_stream_with_skip_and_nesting() {
        let text = "\
KTAP version 1
1..2
    TAP version 13
    1..2
    ok 1 load
    not ok 2 unload
not ok 1 ub_module.sh
    TAP version 13
    1..0 # SKIP no device
ok 2 ub_device.sh # SKIP no device
";
        let r = parse(text);
        assert!(r.plan_errors.is_empty(), "{:?}", r.plan_errors);
        assert_eq!(r.find("ub_module.sh").unwrap().status, Status::Fail);
        assert_eq!(r.find("ub_module.sh.unload").unwrap().status, Status::Fail);
        assert_eq!(r.find("ub_device.sh").unwrap().status, Status::Skip);
    }

    #[test]
    fn directives_and_odd_lines() {
        let text = "1..3\nok 1 - a # skip reason\nnot ok 2 b # TODO later\nok 3\nokay this is not a result\n";
        let r = parse(text);
        assert!(r.plan_errors.is_empty(), "{:?}", r.plan_errors);
        assert_eq!(r.results[0].path, "a");
        assert_eq!(r.results[0].status, Status::Skip);
        assert_eq!(r.results[1].status, Status::Todo);
        assert_eq!(r.results[2].status, Status::Pass);
    }

    #[test]
    fn misnumbered_results_are_reported() {
        let r = parse("1..2\nok 1 a\nok 3 b\n");
        assert_eq!(r.plan_errors.len(), 1);
    }

    #[test]
    fn bail_out_is_reported() {
        let r = parse("1..2\nok 1 a\nBail out! no device\n");
        assert!(r
            .plan_errors
            .iter()
            .any(|e| e.message.starts_with("Bail out!")));
    }
}
