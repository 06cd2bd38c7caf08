//! `pap lint` end to end: every diagnostic code against a fixture that triggers it, the output
//! formats, exit codes, and path selection.

use crate::common;

use std::path::Path;

use common::{code, fixture, fixture_copy, json, pap, pap_at, stdout};
use serde_json::Value;

/// Runs `pap lint --format json` on a copy of a lint fixture; returns (exit, document).
fn lint_json(name: &str, extra: &[&str]) -> (i32, Value, tempfile::TempDir) {
    let dir = fixture_copy(&format!("lint/{name}"));
    let mut args: Vec<String> = vec!["lint".into(), "--format".into(), "json".into()];
    if let Ok(text) = std::fs::read_to_string(dir.path().join("args.txt")) {
        args.extend(
            text.split_whitespace()
                .map(|a| dir.path().join(a).display().to_string()),
        );
    }
    args.extend(extra.iter().map(|s| s.to_string()));
    let out = pap_at(dir.path()).args(&args).output().unwrap();
    (code(&out), json(&out), dir)
}

fn rows(doc: &Value) -> Vec<String> {
    doc["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            format!(
                "{} {} {}:{}:{}",
                d["severity"].as_str().unwrap(),
                d["code"].as_str().unwrap(),
                d["file"].as_str().unwrap(),
                d["line"],
                d["column"]
            )
        })
        .collect()
}

fn fixture_names() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(fixture("lint"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn every_lint_code_has_a_fixture_that_fails_it() {
    let names = fixture_names();
    for info in pap::diagnostics::CODES {
        assert!(
            names.iter().any(|n| n == info.code),
            "no fixture tests/fixtures/lint/{} for code `{}`",
            info.code,
            info.code
        );
        let expect =
            std::fs::read_to_string(fixture("lint").join(info.code).join("expect.txt")).unwrap();
        assert!(
            expect
                .lines()
                .any(|l| l.split(' ').nth(1) == Some(info.code)),
            "fixture {} does not expect its own code",
            info.code
        );
    }
}

#[test]
fn each_fixture_reports_exactly_the_expected_code_file_line_and_column() {
    let mut failures = Vec::new();
    for name in fixture_names() {
        let expect: Vec<String> =
            std::fs::read_to_string(fixture("lint").join(&name).join("expect.txt"))
                .unwrap()
                .lines()
                .map(str::to_string)
                .collect();
        let (exit, doc, _dir) = lint_json(&name, &[]);
        let got = rows(&doc);
        if got != expect {
            failures.push(format!(
                "{name}:\n  expected {expect:#?}\n  got      {got:#?}"
            ));
        }
        let has_error = expect.iter().any(|l| l.starts_with("error "));
        let want_exit = if has_error { 1 } else { 0 };
        if exit != want_exit {
            failures.push(format!("{name}: exit {exit}, expected {want_exit}"));
        }
        assert_eq!(
            doc["errors"].as_u64().unwrap() as usize,
            expect.iter().filter(|l| l.starts_with("error ")).count()
        );
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn the_clean_fixture_project_has_no_diagnostics_even_with_strict() {
    let dir = fixture_copy("clean-project");
    let out = pap_at(dir.path())
        .args(["lint", "--strict"])
        .output()
        .unwrap();
    assert_eq!(stdout(&out), "ok: 6 files checked, no problems\n");
    assert_eq!(code(&out), 0);
}

#[test]
fn the_repository_example_project_lints_clean_with_strict() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = pap_at(root)
        .args(["lint", "--strict", "--format", "json"])
        .output()
        .unwrap();
    let doc = json(&out);
    assert_eq!(doc["errors"], 0, "{}", stdout(&out));
    // The example's MCP servers run through npx and uvx. Where one is not installed, lint
    // rightly warns about it (`command-not-found`); that is the only warning allowed, and
    // only for a program this machine lacks. (CI installs both.)
    let missing_here = |message: &str| {
        ["npx", "uvx"].iter().any(|program| {
            message.contains(&format!("`{program}` is not on PATH"))
                && !std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
                    .any(|dir| dir.join(program).is_file())
        })
    };
    let other: Vec<&serde_json::Value> = doc["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| {
            !(d["code"] == "command-not-found" && missing_here(d["message"].as_str().unwrap()))
        })
        .collect();
    assert!(other.is_empty(), "{other:?}");
    if doc["warnings"] == 0 {
        assert_eq!(code(&out), 0, "{}", stdout(&out));
    } else {
        assert!(
            std::env::var_os("PAP_TEST_REQUIRE_EXAMPLE_TOOLS").is_none(),
            "PAP_TEST_REQUIRE_EXAMPLE_TOOLS is set but npx or uvx is missing: {}",
            stdout(&out)
        );
        common::skip_note(&format!(
            "strict lint of the example project: {} warning(s) for MCP server programs not installed here (uvx comes with `pip install uv`)",
            doc["warnings"]
        ));
    }
    assert!(
        doc["files"].as_u64().unwrap() >= 17,
        "pap.yaml + 8 triggers + 8 agents at least"
    );
}

#[test]
fn warnings_pass_unless_strict() {
    let (exit, doc, _d) = lint_json("numeric-string", &[]);
    assert_eq!((exit, doc["warnings"].as_u64()), (0, Some(2)));
    let (exit, _, _d) = lint_json("numeric-string", &["--strict"]);
    assert_eq!(exit, 1);
}

#[test]
fn human_format_is_rustc_style_with_a_caret_and_a_summary() {
    let dir = fixture_copy("lint/unknown-field");
    let out = pap_at(dir.path()).arg("lint").output().unwrap();
    assert_eq!(
        stdout(&out),
        "error[unknown-field]: unknown field `filtr` in `trigger`\n \
         --> triggers/t.yaml:7:3\n  |\n7 |   filtr: []\n  |   ^^^^^ did you mean `filter`?\n\n\
         failed: 2 files checked, 1 error, 0 warnings\n"
    );
    assert_eq!(code(&out), 1);
}

#[test]
fn github_format_prints_workflow_annotations() {
    let dir = fixture_copy("lint/unknown-agent");
    let out = pap_at(dir.path())
        .args(["lint", "--format", "github"])
        .output()
        .unwrap();
    assert_eq!(
        stdout(&out),
        "::error file=triggers/t.yaml,line=6,col=10,title=pap lint unknown-agent::trigger `t1` names agent \
         `helpr`, which no agent manifest defines (did you mean `helper`?)\n"
    );
    assert_eq!(code(&out), 1);
}

#[test]
fn json_format_is_one_document_with_relative_paths() {
    let (_, doc, _d) = lint_json("value-type-mismatch", &[]);
    assert_eq!(doc["files"], 2);
    assert_eq!(doc["errors"], 2);
    let first = &doc["diagnostics"][0];
    assert_eq!(first["file"], "triggers/t.yaml");
    assert_eq!(first["severity"], "error");
    assert_eq!(
        first["message"],
        "operator `gt` needs a number, found the string \"3.0\""
    );
    assert_eq!(first["help"], "remove the quotes: `value: 3.0` is a number");
}

#[test]
fn every_problem_in_every_file_is_reported_not_just_the_first() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir_all(root.join("triggers")).unwrap();
    std::fs::create_dir_all(root.join("agents")).unwrap();
    std::fs::write(
        root.join("triggers/t.yaml"),
        "pap_version: \"0.2\"\ntrigger:\n  id: t\n  match:\n    type: a.b\n  filtr: []\n  filter:\n    - {path: \"$.x[\", operator: gt, value: \"3\"}\n  agent: nobody\n",
    )
    .unwrap();
    std::fs::write(
        root.join("agents/a.yaml"),
        "pap_version: \"0.2\"\nagent:\n  id: a\n  risk_level: low\n  model: {provider: openai}\n  emits: [done]\n",
    )
    .unwrap();
    let out = pap_at(root)
        .args(["lint", "--format", "json"])
        .output()
        .unwrap();
    let doc = json(&out);
    let codes: Vec<&str> = doc["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["code"].as_str().unwrap())
        .collect();
    assert_eq!(
        codes,
        vec![
            "missing-model-id",
            "invalid-emit-type",
            "invalid-event-type",
            "unknown-field",
            "invalid-jsonpath",
            "value-type-mismatch",
            "unknown-agent"
        ]
    );
}

#[test]
fn paths_limit_what_is_reported_but_resolve_against_the_whole_project() {
    let dir = fixture_copy("lint/duplicate-id");
    let lint_path = |rel: &str| {
        let out = pap_at(dir.path())
            .args(["lint", "--format", "json"])
            .arg(dir.path().join(rel))
            .output()
            .unwrap();
        let doc = json(&out);
        (code(&out), doc["files"].as_u64(), doc["errors"].as_u64())
    };
    // Only u.yaml is reported (it holds the duplicate); t.yaml alone is fine.
    assert_eq!(lint_path("triggers/t.yaml"), (0, Some(1), Some(0)));
    assert_eq!(lint_path("triggers"), (1, Some(2), Some(1)));
}

#[test]
fn usage_errors_exit_2() {
    let dir = fixture_copy("clean-project");
    let out = pap_at(dir.path())
        .args(["lint", "no/such/file.yaml"])
        .output()
        .unwrap();
    assert_eq!(code(&out), 2);
    assert!(common::stderr(&out).contains("no/such/file.yaml"));
    let out = pap_at(dir.path())
        .args(["lint", "--format", "xml"])
        .output()
        .unwrap();
    assert_eq!(code(&out), 2);
}

#[test]
fn root_may_come_from_the_environment_and_options_after_the_subcommand() {
    let dir = fixture_copy("lint/unknown-field");
    let out = pap()
        .env("PAP_ROOT", dir.path())
        .args(["lint", "--format", "json"])
        .output()
        .unwrap();
    assert_eq!(code(&out), 1);
    let out = pap()
        .args(["lint", "--format", "json", "--root"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(code(&out), 1);
}

#[test]
fn lint_never_creates_or_opens_the_state_directory() {
    let dir = fixture_copy("clean-project");
    let out = pap_at(dir.path()).arg("lint").output().unwrap();
    assert_eq!(code(&out), 0);
    assert!(!dir.path().join(".pap").exists());
}

#[test]
fn the_book_documents_every_code_with_its_severity_and_meaning() {
    let page = "docs/src/reference/cli/lint.md";
    let text = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(page)).unwrap();
    for info in pap::diagnostics::CODES {
        let row = format!(
            "| `{}` | {} | {} |",
            info.code,
            info.severity.as_str(),
            info.summary
        );
        assert!(text.contains(&row), "{page} lacks the row: {row}");
    }
}

#[test]
fn a_manifest_past_the_yaml_readers_limits_is_said_in_words() {
    let dir = fixture_copy("clean-project");
    // A quarter of a million values, and an alias bomb: both past the reader's budgets.
    let many: String = (0..260_000).map(|i| format!("  - {i}\n")).collect();
    std::fs::write(
        dir.path().join("triggers/huge.yaml"),
        format!("pap_version: \"0.2\"\nlist:\n{many}"),
    )
    .unwrap();
    let mut bomb = String::from("pap_version: \"0.2\"\na0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
    for i in 1..9 {
        let j = i - 1;
        bomb.push_str(&format!(
            "a{i}: &a{i} [*a{j}, *a{j}, *a{j}, *a{j}, *a{j}, *a{j}, *a{j}, *a{j}, *a{j}, *a{j}]\n"
        ));
    }
    std::fs::write(dir.path().join("triggers/bomb.yaml"), bomb).unwrap();
    let out = pap_at(dir.path())
        .args(["lint", "--format", "json"])
        .output()
        .unwrap();
    assert_eq!(code(&out), 1);
    let doc = json(&out);
    let messages: Vec<&str> = doc["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["file"] == "triggers/huge.yaml" || d["file"] == "triggers/bomb.yaml")
        .map(|d| d["message"].as_str().unwrap())
        .collect();
    assert_eq!(messages.len(), 2, "{doc}");
    for m in &messages {
        assert!(!m.contains('{') && !m.contains("budget breached"), "{m}");
        assert!(m.contains("the reader"), "{m}");
    }
    assert!(
        messages
            .iter()
            .any(|m| m.contains("values (mappings, sequences and scalars)")),
        "{messages:?}"
    );
}
