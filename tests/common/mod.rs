//! Helpers shared by the integration tests: the real `pap` binary and fixture copies.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub(crate) mod dispatch;
pub(crate) mod fake_llm;
pub(crate) mod http;
pub(crate) mod llm;
pub(crate) mod mcp;
pub(crate) mod measure;
pub(crate) mod notify;
pub(crate) mod postgres;
pub(crate) mod serve;
pub(crate) mod shell_agent;
pub(crate) mod webdriver;

/// The `pap` binary cargo built for these tests.
pub(crate) fn pap() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_pap"));
    cmd.env_remove("PAP_ROOT")
        .env_remove("PAP_STATE")
        .env("NO_COLOR", "1");
    cmd
}

/// `pap --root ROOT`, ready for a subcommand.
pub(crate) fn pap_at(root: &Path) -> Command {
    if on_postgres() {
        // A project a test wrote itself gets its database at its first command.
        on_database(root);
    }
    let mut cmd = pap();
    cmd.arg("--root").arg(root);
    cmd
}

/// Parses a command's stdout as one JSON document.
pub(crate) fn json(out: &Output) -> serde_json::Value {
    serde_json::from_str(&stdout(out))
        .unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {}", stdout(out)))
}

/// The `status` of each invocation `pap invocations --json` listed in `out`, in its order.
pub(crate) fn statuses(out: &Output) -> Vec<String> {
    stdout(out)
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["status"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect()
}

pub(crate) fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(rel)
}

/// Copies a fixture project into a fresh temp dir, so tests never depend on the checkout.
///
/// With `PAP_TEST_STORE=postgres`, a project copied here keeps its state in a fresh database
/// of the test PostgreSQL server (`store:` in its pap.yaml), so the same tests run the
/// PostgreSQL store end to end (see tests/suite_on_postgres.rs).
pub(crate) fn fixture_copy(rel: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    copy_dir(&fixture(rel), dir.path());
    if on_postgres() {
        on_database(dir.path());
    }
    dir
}

/// Points the project at `root` (if it has a pap.yaml without `store:`) to a fresh database.
fn on_database(root: &Path) {
    let config = root.join("pap.yaml");
    let Ok(text) = std::fs::read_to_string(&config) else {
        return;
    };
    if text.lines().any(|l| l.starts_with("store:")) {
        return;
    }
    let server = pap::pgstore::testing::server()
        .unwrap_or_else(|e| panic!("PAP_TEST_STORE=postgres, but PostgreSQL cannot start: {e}"));
    postgres::use_database(root, &postgres::migrated_by_pap(server));
}

/// Whether this run keeps projects' state in PostgreSQL (`PAP_TEST_STORE=postgres`).
pub(crate) fn on_postgres() -> bool {
    std::env::var("PAP_TEST_STORE").is_ok_and(|v| v == "postgres")
}

pub(crate) fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("create dir");
    for entry in std::fs::read_dir(from).expect("read fixture dir") {
        let entry = entry.expect("dir entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("file type").is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy file");
        }
    }
}

/// Says on the terminal that a test skipped part of its work, and why. Written to stderr
/// directly, not with `eprintln!`, so that `cargo test` shows it even though the test passes
/// (the test harness captures only the print macros).
pub(crate) fn skip_note(why: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "note: skipped: {why}");
}

/// `program` on PATH. When it is missing: a failure if `require_env` is set (CI sets it for
/// what it installs), else `None` and a skip note saying what goes unchecked.
#[allow(dead_code)]
pub(crate) fn required_tool(program: &str, require_env: &str, unchecked: &str) -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(program))
            .find(|p| p.is_file())
    });
    if found.is_none() {
        assert!(
            std::env::var_os(require_env).is_none(),
            "{program} is required ({require_env} is set) but not on PATH"
        );
        skip_note(&format!("{program} is not installed: {unchecked}"));
    }
    found
}

pub(crate) fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub(crate) fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

pub(crate) fn code(out: &Output) -> i32 {
    out.status.code().expect("exited normally")
}

/// Swaps two names atomically (RENAME_EXCHANGE): a directory and a link change places with no
/// moment where either name is missing.
pub(crate) fn exchange(a: &Path, b: &Path) {
    nix::fcntl::renameat2(
        nix::fcntl::AT_FDCWD,
        a,
        nix::fcntl::AT_FDCWD,
        b,
        nix::fcntl::RenameFlags::RENAME_EXCHANGE,
    )
    .unwrap_or_else(|e| panic!("exchanging {} and {}: {e}", a.display(), b.display()));
}
