//! `pap lint`: load the project like dispatch does and report every diagnostic.

use std::collections::BTreeSet;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;

use anyhow::Context;

use super::Outcome;
use crate::cli::{Cli, LintArgs, LintFormat};
use crate::diagnostics::{self, Diagnostic, HumanStyle, Summary};
use crate::manifest::compiled::Config;
use crate::manifest::loader::{self, display_name};
use crate::rule_test;

pub(super) fn run(cli: &Cli, args: &LintArgs) -> anyhow::Result<Outcome> {
    let root = cli
        .root()
        .canonicalize()
        .with_context(|| format!("project root {}", cli.root().display()))?;

    // With PATHs, only those files are reported, but they are checked against the whole
    // project so a trigger's agent defined elsewhere is not "unknown".
    let mut selected: Option<Vec<PathBuf>> = None;
    if !args.paths.is_empty() {
        let mut files = Vec::new();
        for p in &args.paths {
            let Ok(abs) = p.canonicalize() else {
                crate::say!("error: {}: no such file or directory", p.display());
                return Ok(Outcome::Usage);
            };
            if abs.is_dir() {
                // Files only; what is refused is reported by the project's own discovery
                // when it lies under the project, and named here otherwise.
                let mut found = Vec::new();
                let rules = crate::manifest::discover::Rules {
                    root: &root,
                    follow_outside: true,
                };
                crate::manifest::discover::walk_yaml(&abs, rules, &mut found);
                let mut found: Vec<PathBuf> =
                    found.iter().map(|f| f.path().to_path_buf()).collect();
                found.sort();
                files.extend(found);
            } else {
                files.push(abs);
            }
        }
        selected = Some(files);
    }

    // Rule test files (rule-tests/) are checked as such, against the project's triggers.
    let tests_dir = root.join(rule_test::load::DEFAULT_DIR);
    let (rule_files, selected) = match selected {
        None => (None, None),
        Some(files) => {
            let (tests, manifests): (Vec<PathBuf>, Vec<PathBuf>) =
                files.into_iter().partition(|f| f.starts_with(&tests_dir));
            (Some(tests), Some(manifests))
        }
    };
    let loaded = loader::load(&root, selected.as_deref().unwrap_or_default());
    let (mut diagnostics, mut file_count) = match &selected {
        None => (loaded.diagnostics.clone(), loaded.sources.len()),
        Some(files) => {
            let names: BTreeSet<String> = files.iter().map(|f| display_name(&root, f)).collect();
            let diags: Vec<Diagnostic> = loaded
                .diagnostics
                .iter()
                .filter(|d| names.contains(&d.file))
                .cloned()
                .collect();
            (diags, names.len())
        }
    };
    let mut sources = loaded.sources.clone();
    let rule_files = match rule_files {
        Some(files) => files,
        None => {
            // `find` fails only for a named path that is missing; none is named here.
            let found = rule_test::find(&root, &[]).unwrap_or_default();
            for (path, why) in found.refused {
                diagnostics.push(Diagnostic::new(
                    "unreadable-file",
                    &display_name(&root, &path),
                    crate::diagnostics::Pos::START,
                    why,
                ));
            }
            found.files
        }
    };
    let facts = rule_test::load::ProjectFacts {
        root: &root,
        trigger_ids: loaded
            .project
            .as_ref()
            .map(|p| p.triggers.iter().map(|t| t.id.as_str()).collect()),
        max_event_bytes: loaded
            .config
            .as_ref()
            .map_or(Config::default().max_event_bytes, |c| c.max_event_bytes),
        adapters: loaded.config.as_ref().map(|c| c.adapters.as_slice()),
        max_body_bytes: loaded
            .config
            .as_ref()
            .map_or(Config::default().listen.max_body_bytes, |c| {
                c.listen.max_body_bytes
            }),
    };
    for file in &rule_files {
        rule_test::load::load(file, &facts, &mut diagnostics, &mut sources);
    }
    file_count += rule_files.len();
    diagnostics::sort(&mut diagnostics);
    let summary = Summary::of(file_count, &diagnostics);

    let out = match args.format {
        LintFormat::Json => diagnostics::render_json(summary, &diagnostics),
        LintFormat::Github => diagnostics::render_github(&diagnostics),
        LintFormat::Human => {
            let style = HumanStyle {
                color: crate::term::colored(std::io::stdout().is_terminal()),
            };
            let mut text = diagnostics::render_human(
                &diagnostics,
                |f| sources.get(f).map(String::as_str),
                style,
            );
            text.push_str(&summary_line(summary));
            text
        }
    };
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(out.as_bytes())?;
    stdout.flush()?;

    let failed = summary.errors > 0 || (args.strict && summary.warnings > 0);
    Ok(if failed {
        Outcome::Failure
    } else {
        Outcome::Success
    })
}

fn summary_line(s: Summary) -> String {
    let plural = |n: usize, word: &str| format!("{n} {word}{}", if n == 1 { "" } else { "s" });
    let files = plural(s.files, "file");
    if s.errors == 0 && s.warnings == 0 {
        format!("ok: {files} checked, no problems\n")
    } else {
        format!(
            "{}: {files} checked, {}, {}\n",
            if s.errors > 0 { "failed" } else { "ok" },
            plural(s.errors, "error"),
            plural(s.warnings, "warning")
        )
    }
}
