//! The report of a `pap test` run: for people (`ok`/`FAIL` per case), for scripts (JSON), for
//! CI servers (JUnit XML, as Jenkins' xunit schema has it) and for GitHub Actions (workflow
//! annotations on the failing expectation's line).

use std::fmt::Write as _;
use std::time::Duration;

use serde_json::{Value, json};

use super::run::{CaseResult, Coverage};
use crate::diagnostics::{github_data as gh_data, github_property as gh_property};
use crate::manifest::Project;
use crate::term::{Paint, for_humans};

/// What `--coverage` found missing: triggers no case's event was decided by, and conditions
/// no case saw hold or fail.
#[derive(Debug, Clone, Default)]
pub(crate) struct Gaps {
    pub triggers: Vec<(String, String)>,
    pub conditions: Vec<ConditionGap>,
}

#[derive(Debug, Clone)]
pub(crate) struct ConditionGap {
    pub trigger: String,
    pub file: String,
    /// The condition's place in the filter, from 1.
    pub index: usize,
    pub condition: String,
    /// `held` or `failed`: what no case saw it do.
    pub never: &'static str,
}

impl Gaps {
    /// Each gap as (the manifest it is in, a sentence), for the human and GitHub formats.
    pub(crate) fn sentences(&self) -> Vec<(&str, String)> {
        let triggers = self.triggers.iter().map(|(trigger, file)| {
            (
                file.as_str(),
                format!("trigger {trigger} ({file}): no case's event was decided by it"),
            )
        });
        let conditions = self.conditions.iter().map(|g| {
            (
                g.file.as_str(),
                format!(
                    "trigger {} ({}), condition {} `{}`: never {}",
                    g.trigger, g.file, g.index, g.condition, g.never
                ),
            )
        });
        triggers.chain(conditions).collect()
    }

    pub(crate) fn of(project: &Project, coverage: &Coverage) -> Gaps {
        let mut gaps = Gaps::default();
        for (i, trigger) in project.triggers.iter().enumerate() {
            if !trigger.enabled {
                continue;
            }
            if !coverage.decided[i] {
                gaps.triggers
                    .push((trigger.id.clone(), trigger.file.clone()));
                continue;
            }
            for (c, (held, failed)) in coverage.conditions[i].iter().enumerate() {
                for (seen, never) in [(held, "held"), (failed, "failed")] {
                    if !seen {
                        gaps.conditions.push(ConditionGap {
                            trigger: trigger.id.clone(),
                            file: trigger.file.clone(),
                            index: c + 1,
                            condition: crate::stages::filter::describe(&trigger.filter[c]),
                            never,
                        });
                    }
                }
            }
        }
        gaps
    }
}

pub(crate) struct Totals {
    pub passed: usize,
    pub failed: usize,
    pub elapsed: Duration,
}

impl Totals {
    pub(crate) fn of(results: &[CaseResult], elapsed: Duration) -> Totals {
        let passed = results.iter().filter(|r| r.passed()).count();
        Totals {
            passed,
            failed: results.len() - passed,
            elapsed,
        }
    }
}

pub(crate) fn human(
    results: &[CaseResult],
    totals: &Totals,
    gaps: Option<&Gaps>,
    paint: Paint,
) -> String {
    let mut out = String::new();
    let mut file = None;
    for r in results {
        if file != Some(&r.file) {
            let _ = writeln!(out, "{}", paint.bold(&for_humans(&r.file)));
            file = Some(&r.file);
        }
        if r.passed() {
            let _ = writeln!(out, "  {}    {}", paint.green("ok"), for_humans(&r.name));
            continue;
        }
        let _ = writeln!(
            out,
            "  {}  {}  {}",
            paint.red("FAIL"),
            for_humans(&r.name),
            paint.dim(&format!("({}:{})", for_humans(&r.file), r.line))
        );
        for f in &r.failures {
            let _ = writeln!(out, "        {}", for_humans(&f.message()));
            let _ = writeln!(
                out,
                "          {}",
                paint.dim(&format!("--> {}:{}", r.file, f.line))
            );
        }
    }
    if let Some(gaps) = gaps {
        out.push_str(&coverage_text(gaps));
    }
    let summary = format!(
        "{} passed, {} failed ({:.2} s)",
        totals.passed,
        totals.failed,
        totals.elapsed.as_secs_f64()
    );
    let _ = writeln!(
        out,
        "{}",
        if totals.failed > 0 {
            paint.red(&summary)
        } else {
            paint.green(&summary)
        }
    );
    out
}

fn coverage_text(gaps: &Gaps) -> String {
    let mut out = String::from("coverage:\n");
    if gaps.triggers.is_empty() && gaps.conditions.is_empty() {
        out.push_str("  every enabled trigger was decided, every filter condition seen holding and failing\n");
        return out;
    }
    for (_, sentence) in gaps.sentences() {
        let _ = writeln!(out, "  {}", for_humans(&sentence));
    }
    out
}

pub(crate) fn json(results: &[CaseResult], totals: &Totals, gaps: Option<&Gaps>) -> String {
    let cases: Vec<Value> = results
        .iter()
        .map(|r| {
            json!({
                "file": r.file,
                "name": r.name,
                "line": r.line,
                "status": if r.passed() { "passed" } else { "failed" },
                "elapsed_ms": r.elapsed.as_secs_f64() * 1000.0,
                "failures": r.failures.iter().map(|f| json!({
                    "step": f.step,
                    "at": f.at,
                    "event_id": f.event_id,
                    "line": f.line,
                    "trigger": f.trigger,
                    "expected": f.expected,
                    "saw": f.saw,
                    "message": f.message(),
                })).collect::<Vec<_>>(),
            })
        })
        .collect();
    let mut doc = json!({
        "passed": totals.passed,
        "failed": totals.failed,
        "elapsed_ms": totals.elapsed.as_secs_f64() * 1000.0,
        "cases": cases,
    });
    if let Some(gaps) = gaps {
        doc["coverage"] = json!({
            "triggers_not_decided": gaps.triggers.iter().map(|(t, f)| json!({"trigger": t, "file": f})).collect::<Vec<_>>(),
            "conditions": gaps.conditions.iter().map(|g| json!({
                "trigger": g.trigger,
                "file": g.file,
                "index": g.index,
                "condition": g.condition,
                "never": g.never,
            })).collect::<Vec<_>>(),
        });
    }
    let mut text = serde_json::to_string_pretty(&doc).expect("a report serialises");
    text.push('\n');
    text
}

/// The JSON report of a run that could not start: the problems, no cases.
pub(crate) fn json_errored(problems: &[crate::diagnostics::Diagnostic]) -> String {
    let errors: Vec<Value> = problems
        .iter()
        .map(crate::diagnostics::diagnostic_json)
        .collect();
    let doc = json!({"passed": 0, "failed": 0, "cases": [], "errors": errors});
    let mut text = serde_json::to_string_pretty(&doc).expect("a report serialises");
    text.push('\n');
    text
}

/// The JUnit report of a run that could not start: one case in error, naming each problem.
pub(crate) fn junit_errored(problems: &[crate::diagnostics::Diagnostic]) -> String {
    let detail: Vec<String> = problems
        .iter()
        .map(|d| {
            format!(
                "{}:{}:{}: {} [{}]",
                d.file, d.pos.line, d.pos.column, d.message, d.code
            )
        })
        .collect();
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"pap test\" tests=\"1\" failures=\"0\" errors=\"1\" time=\"0.000\">\n  <testsuite name=\"pap test\" tests=\"1\" failures=\"0\" errors=\"1\" skipped=\"0\" time=\"0.000\">\n    <testcase name=\"the rule tests and the project load\" classname=\"pap test\" time=\"0.000\">\n      <error type=\"load\" message=\"{}\">{}</error>\n    </testcase>\n  </testsuite>\n</testsuites>\n",
        crate::text::markup(&format!("{} problem(s): no case ran", problems.len())),
        crate::text::markup(&detail.join("\n"))
    )
}

/// JUnit XML: one `<testsuite>` per test file, one `<testcase>` per case, a `<failure>` per
/// expectation that did not hold. Valid against Jenkins' `junit-10.xsd`.
pub(crate) fn junit(results: &[CaseResult], totals: &Totals) -> String {
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        out,
        "<testsuites name=\"pap test\" tests=\"{}\" failures=\"{}\" errors=\"0\" time=\"{}\">",
        totals.passed + totals.failed,
        totals.failed,
        seconds(totals.elapsed)
    );
    let mut files: Vec<&str> = Vec::new();
    for r in results {
        if !files.contains(&r.file.as_str()) {
            files.push(&r.file);
        }
    }
    for file in files {
        let cases: Vec<&CaseResult> = results.iter().filter(|r| r.file == file).collect();
        let failed = cases.iter().filter(|r| !r.passed()).count();
        let time: Duration = cases.iter().map(|r| r.elapsed).sum();
        let _ = writeln!(
            out,
            "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{failed}\" errors=\"0\" skipped=\"0\" time=\"{}\" file=\"{}\">",
            crate::text::markup(file),
            cases.len(),
            seconds(time),
            crate::text::markup(file)
        );
        for r in cases {
            let open = format!(
                "    <testcase name=\"{}\" classname=\"{}\" time=\"{}\"",
                crate::text::markup(&r.name),
                crate::text::markup(file),
                seconds(r.elapsed)
            );
            if r.passed() {
                let _ = writeln!(out, "{open}/>");
                continue;
            }
            let _ = writeln!(out, "{open}>");
            for f in &r.failures {
                let _ = writeln!(
                    out,
                    "      <failure type=\"expectation\" message=\"{}\">{}:{}: {}</failure>",
                    crate::text::markup(&f.message()),
                    crate::text::markup(file),
                    f.line,
                    crate::text::markup(&f.message())
                );
            }
            out.push_str("    </testcase>\n");
        }
        out.push_str("  </testsuite>\n");
    }
    out.push_str("</testsuites>\n");
    out
}

/// GitHub Actions workflow commands: an error annotation on each failing expectation's line,
/// then a notice with the totals.
pub(crate) fn github(results: &[CaseResult], totals: &Totals, gaps: Option<&Gaps>) -> String {
    let mut out = String::new();
    for r in results {
        for f in &r.failures {
            let _ = writeln!(
                out,
                "::error file={},line={},title={}::{}",
                gh_property(&r.file),
                f.line,
                gh_property(&format!("pap test: {}", r.name)),
                gh_data(&f.message())
            );
        }
    }
    for (file, sentence) in gaps.map(Gaps::sentences).unwrap_or_default() {
        let _ = writeln!(
            out,
            "::warning file={},title=pap test coverage::{}",
            gh_property(file),
            gh_data(&sentence)
        );
    }
    let _ = writeln!(
        out,
        "{} passed, {} failed ({:.2} s)",
        totals.passed,
        totals.failed,
        totals.elapsed.as_secs_f64()
    );
    out
}

fn seconds(d: Duration) -> String {
    format!("{:.3}", d.as_secs_f64())
}
