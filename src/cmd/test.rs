//! `pap test`: run the project's rule tests (see `crate::rule_test`).

use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::time::Instant;

use anyhow::Context;

use super::Outcome;
use crate::cli::{Cli, TestArgs, TestFormat};
use crate::diagnostics::{self, Diagnostic, HumanStyle, Severity};
use crate::manifest::loader;
use crate::rule_test::load::{self, ProjectFacts};
use crate::rule_test::render::{self, Gaps, Totals};
use crate::rule_test::run::{self, Coverage};
use crate::term::Paint;

pub(super) fn run(cli: &Cli, args: &TestArgs) -> anyhow::Result<Outcome> {
    let root = cli
        .root()
        .canonicalize()
        .with_context(|| format!("project root {}", cli.root().display()))?;
    let started = Instant::now();
    let mut loaded = loader::load(&root, &[]);
    let Some(project) = loaded.project.take() else {
        let errors = loaded.errors();
        report_problems(&errors, &loaded.sources, args.format);
        crate::say!("error: the project has errors (see `pap lint`); no rule test ran");
        print_errored(args.format, &errors)?;
        return Ok(Outcome::Failure);
    };
    let found = match crate::rule_test::find(&root, &args.paths) {
        Ok(found) => found,
        Err(why) => {
            crate::say!("error: {why}");
            return Ok(Outcome::Usage);
        }
    };
    for (path, why) in &found.refused {
        crate::say!("error: {}: {why}", loader::display_name(&root, path));
    }
    if !found.refused.is_empty() {
        return Ok(Outcome::Failure);
    }
    let files = found.files;
    let facts = ProjectFacts {
        root: &root,
        trigger_ids: Some(project.triggers.iter().map(|t| t.id.as_str()).collect()),
        max_event_bytes: project.config.max_event_bytes,
        adapters: Some(&project.config.adapters),
        max_body_bytes: project.config.listen.max_body_bytes,
    };
    let mut problems = Vec::new();
    let mut sources = BTreeMap::new();
    let suites: Vec<_> = files
        .iter()
        .filter_map(|f| load::load(f, &facts, &mut problems, &mut sources))
        .collect();
    if !problems.is_empty() {
        report_problems(&problems, &sources, args.format);
    }
    if problems.iter().any(|d| d.severity == Severity::Error) {
        crate::say!("error: the rule tests have errors; no case ran");
        print_errored(args.format, &problems)?;
        return Ok(Outcome::Failure);
    }
    if suites.iter().all(|s| s.cases.is_empty()) {
        crate::say!(
            "error: no rule tests in {}: write cases in a YAML file under {}/ (see `pap test --help`)",
            if args.paths.is_empty() {
                format!("{}/", load::DEFAULT_DIR)
            } else {
                "the given paths".to_string()
            },
            load::DEFAULT_DIR
        );
        return Ok(Outcome::Failure);
    }

    let project = std::sync::Arc::new(project);
    let mut coverage = Coverage::new(&project);
    let mut results = Vec::new();
    for suite in &suites {
        results.extend(run::run_suite(
            &project,
            suite,
            &mut coverage,
            &crate::composition::in_memory,
        )?);
    }
    let totals = Totals::of(&results, started.elapsed());
    let gaps = args.coverage.then(|| Gaps::of(&project, &coverage));
    let out = match args.format {
        TestFormat::Human => render::human(&results, &totals, gaps.as_ref(), Paint::for_stdout()),
        TestFormat::Json => render::json(&results, &totals, gaps.as_ref()),
        TestFormat::Junit => render::junit(&results, &totals),
        TestFormat::Github => render::github(&results, &totals, gaps.as_ref()),
    };
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(out.as_bytes())?;
    stdout.flush()?;
    Ok(if totals.failed > 0 {
        Outcome::Failure
    } else {
        Outcome::Success
    })
}

/// A report for scripts and CI servers when no case could run, so a JUnit publisher still
/// finds a report that says why: JSON with the problems, JUnit with one errored case.
fn print_errored(format: TestFormat, problems: &[Diagnostic]) -> anyhow::Result<()> {
    let out = match format {
        TestFormat::Json => render::json_errored(problems),
        TestFormat::Junit => render::junit_errored(problems),
        TestFormat::Human | TestFormat::Github => return Ok(()),
    };
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(out.as_bytes())?;
    stdout.flush()?;
    Ok(())
}

/// Problems of the project or of a test file: as `pap lint` shows them on stderr, and as
/// annotations on stdout for `--format github`.
fn report_problems(
    problems: &[Diagnostic],
    sources: &BTreeMap<String, String>,
    format: TestFormat,
) {
    let style = HumanStyle {
        color: crate::term::colored(std::io::stderr().is_terminal()),
    };
    let text = diagnostics::render_human(problems, |f| sources.get(f).map(String::as_str), style);
    let _ = std::io::stderr().write_all(text.as_bytes());
    if format == TestFormat::Github {
        print!("{}", diagnostics::render_github(problems));
    }
}
