//! The behavioural suite again, on PostgreSQL: every end-to-end test binary that takes a
//! store runs once more with `PAP_TEST_STORE=postgres`, which gives each project it copies or
//! writes a fresh database of the test server (`store:` in its pap.yaml; see
//! `common::fixture_copy`). `cargo test` has built those binaries before it runs this one;
//! this finds each beside itself (the newest build of that name) and runs it. Each project's
//! database is migrated by the `pap` binary itself, so a suite built before this one (run
//! alone, this test builds only itself) still meets the schema of the binary under test.
//!
//! Left out: tests of the redb file itself (`durability`, `hardening`, `store_format`,
//! `syncs`, `serve_crash`'s file-lock handoff), tests without a store (`lint`, `schema`,
//! `help`, `jsonpath_cts`, `manifest_cache`, `service_unit`), and the PostgreSQL tests that
//! start their own databases (`postgres`, `storage_model`).
//!
//! Run one suite by hand: `PAP_TEST_STORE=postgres cargo test --test dispatch`.

mod common;

use std::path::PathBuf;
use std::process::Command;
use std::time::Instant;

const SUITES: &[&str] = &[
    "agent_lifetime",
    "approvals",
    "budget",
    "cli_conventions",
    "concurrency",
    "debounce",
    "dispatch",
    "doctor",
    "example_project",
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
    "project_root",
    "readme_walkthrough",
    "rfd011",
    "rule_tests",
    "secrets",
    "serve",
    "status",
    "typed_ids",
];

/// The newest test binary `name-<hash>` beside this one.
fn binary(name: &str) -> Option<PathBuf> {
    let me = std::env::current_exe().ok()?;
    let dir = me.parent()?;
    let prefix = format!("{name}-");
    std::fs::read_dir(dir)
        .ok()?
        .filter_map(|e| e.ok())
        .filter(|e| {
            let file = e.file_name();
            let file = file.to_string_lossy();
            file.strip_prefix(&prefix)
                .is_some_and(|hash| hash.len() == 16 && hash.chars().all(|c| c.is_ascii_hexdigit()))
        })
        .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path())))
        .max()
        .map(|(_, path)| path)
}

#[test]
fn the_behavioural_suite_passes_on_postgresql() {
    if pap::pgstore::testing::server_or_skip("the behavioural suite").is_none() {
        return;
    }
    let mut failed = Vec::new();
    for suite in SUITES {
        let Some(exe) = binary(suite) else {
            panic!("the test binary {suite} is not built beside this one (run `cargo test`)");
        };
        let started = Instant::now();
        let out = Command::new(&exe)
            .env("PAP_TEST_STORE", "postgres")
            .output()
            .expect("run a test binary");
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
