//! The behavioural suite again, on PostgreSQL: every end-to-end suite (a module of this test
//! binary) that takes a store runs once more with `PAP_TEST_STORE=postgres`, which gives each
//! project it copies or writes a fresh database of the test server (`store:` in its pap.yaml;
//! see `common::fixture_copy`). This test starts its own binary again for each suite, with
//! that suite's tests named exactly. Each project's database is migrated by the `pap` binary
//! itself.
//!
//! Left out: tests of the redb file itself (`durability`, `hardening`, `store_format`,
//! `syncs`, `serve_crash`'s file-lock handoff), tests without a store (`lint`, `schema`,
//! `help`, `jsonpath_cts`, `manifest_cache`, `service_unit`, `fuzz`), and the PostgreSQL tests
//! that start their own databases (`postgres`, `postgres_outage`, `cluster_crash`,
//! `storage_model`).
//!
//! Run one suite by hand: `PAP_TEST_STORE=postgres cargo test --test tests dispatch::`.

use std::process::Command;
use std::time::Instant;

const SUITES: &[&str] = &[
    "adapt",
    "agent_lifetime",
    "alert_identity",
    "alert_texts",
    "approvals",
    "batch",
    "book_walkthrough",
    "budget",
    "cancel_on",
    "cli_conventions",
    "concurrency",
    "debounce",
    "dispatch",
    "doctor",
    "example_project",
    "group_events",
    "health",
    "traces",
    "http_adapters",
    "http_clients",
    "http_console",
    "http_crash",
    "http_ingest",
    "invocation_control",
    "llm",
    "mcp_server",
    "notify_lifecycle",
    "notify_routing",
    "notify_watch",
    "project_root",
    "rfd011",
    "rule_tests",
    "secrets",
    "serve",
    "status",
    "typed_ids",
];

/// The tests of `suite` (a module of this binary), by their full names.
fn tests_of(suite: &str) -> Vec<String> {
    let exe = std::env::current_exe().expect("the test binary");
    let out = Command::new(exe)
        .args(["--list", "--format", "terse"])
        .output()
        .expect("list the tests");
    let prefix = format!("{suite}::");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.strip_suffix(": test"))
        .filter(|name| name.starts_with(&prefix))
        .map(str::to_owned)
        .collect()
}

#[test]
fn the_behavioural_suite_passes_on_postgresql() {
    if pap::pgstore::testing::server_or_skip("the behavioural suite").is_none() {
        return;
    }
    let mut failed = Vec::new();
    for suite in SUITES {
        let tests = tests_of(suite);
        assert!(
            !tests.is_empty(),
            "the suite {suite} has no tests in this binary"
        );
        let started = Instant::now();
        let out = Command::new(std::env::current_exe().expect("the test binary"))
            .env("PAP_TEST_STORE", "postgres")
            .arg("--exact")
            .args(&tests)
            .output()
            .expect("run a suite");
        let took = started.elapsed();
        let text = String::from_utf8_lossy(&out.stdout);
        let summary = text
            .lines()
            .rfind(|l| l.starts_with("test result"))
            .unwrap_or("no summary")
            .to_owned();
        // Straight to stderr, which cargo test shows even for a passing test.
        use std::io::Write;
        let _ = writeln!(
            std::io::stderr(),
            "on PostgreSQL: {suite}: {summary} [{took:.1?}]"
        );
        if !out.status.success() {
            failed.push(format!(
                "== {suite} on PostgreSQL:\n{text}\n{}",
                String::from_utf8_lossy(&out.stderr)
            ));
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}
