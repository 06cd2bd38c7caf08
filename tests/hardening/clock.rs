//! Time cannot be moved from the environment of a production binary; `--dry-run --at` tests
//! rules for another moment without writing anything.

use std::path::PathBuf;
use std::process::Command;

use crate::common::dispatch::{Project, T0, ev, run_of};
use crate::common::{code, stderr};
use serde_json::json;

#[test]
fn dry_run_at_decides_for_that_moment_and_writes_nothing() {
    let p = Project::new();
    let first = p.events(
        "first.ndjson",
        &[
            ev("e1", "test.throttle.hit", json!({"host": "a"})),
            ev("e2", "test.throttle.hit", json!({"host": "a"})),
        ],
    );
    let run = p.dispatch(T0, &first, &[]);
    assert_eq!(run.code, 0, "{}", run.stderr);

    let third = p.events(
        "third.ndjson",
        &[ev("e3", "test.throttle.hit", json!({"host": "a"}))],
    );
    // `--at` needs --dry-run.
    let out = p
        .cmd(T0)
        .args(["dispatch", "--at", "2026-03-11T06:00:30Z"])
        .arg(&third)
        .output()
        .unwrap();
    assert_eq!(code(&out), 2, "{}", stderr(&out));

    let dry = |at: &str| {
        // Without PAP_NOW: --at alone sets the moment.
        let out = p
            .cmd(T0)
            .env_remove("PAP_NOW")
            .args(["dispatch", "--json", "--dry-run", "--at", at])
            .arg(&third)
            .output()
            .unwrap();
        run_of(&out)
    };
    let inside = dry("2026-03-11T06:00:30Z");
    assert_eq!(inside.code, 0, "{}", inside.stderr);
    assert_eq!(inside.outcome("e3", "t-throttle"), "throttled");
    let after = dry("2026-03-11T06:01:01+00:00");
    assert_ne!(
        after.outcome("e3", "t-throttle"),
        "throttled",
        "{}",
        after.stdout
    );

    // Nothing was kept: e3 is decided afresh (not a duplicate), still inside the window.
    let real = p.dispatch("2026-03-11T06:00:40Z", &third, &[]);
    assert_eq!(real.outcome("e3", "t-throttle"), "throttled");

    let bad = p
        .cmd(T0)
        .args(["dispatch", "--dry-run", "--at", "yesterday"])
        .arg(&third)
        .output()
        .unwrap();
    assert_eq!(code(&bad), 2);
    assert!(stderr(&bad).contains("RFC 3339"), "{}", stderr(&bad));
}

/// A production binary: one built without the `test-clock` feature, as every build but the
/// test suite's is (`cargo build`, `cargo build --release`, `cargo install`); the clock's
/// injection is gated on that feature alone, not on the profile. `PAP_TEST_PRODUCTION_BIN`,
/// else `target/release/pap` beside this checkout. CI builds one in the dev profile (it shares
/// the test build's dependencies; a release build took 7 of CI's minutes) and sets
/// PAP_TEST_REQUIRE_PRODUCTION, so there a missing binary fails instead of skipping.
fn production_binary() -> Option<PathBuf> {
    let path = std::env::var_os("PAP_TEST_PRODUCTION_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/release/pap"));
    // `cargo bench` builds target/release/pap too, with the test clock: not the one to check.
    let test_build = path.is_file()
        && Command::new(&path)
            .arg("--version")
            .output()
            .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("test build"));
    if path.is_file() && !test_build {
        return Some(path);
    }
    assert!(
        std::env::var_os("PAP_TEST_REQUIRE_PRODUCTION").is_none(),
        "PAP_TEST_REQUIRE_PRODUCTION is set but there is no production binary at {} (test build: {test_build})",
        path.display()
    );
    crate::common::skip_note(&format!(
        "the production-build check: no production binary at {} ({}; `cargo build --release`, or `bash .ci/run`)",
        path.display(),
        if test_build {
            "the one there is a test build, from cargo bench"
        } else {
            "none built"
        }
    ));
    None
}

#[test]
fn a_production_build_ignores_the_test_clock() {
    let Some(bin) = production_binary() else {
        return;
    };
    let p = Project::new();
    let file = p.events("e.ndjson", &[ev("r1", "test.basic.happened", json!({}))]);
    let release = |now: &str| {
        let out = Command::new(&bin)
            .arg("--root")
            .arg(p.root())
            .env("NO_COLOR", "1")
            .env("PAP_NOW", now)
            .env("PAP_TEST_DIR", p.root())
            .args(["dispatch", "--json", "--no-run"])
            .arg(&file)
            .output()
            .unwrap();
        run_of(&out)
    };
    let first = release("2099-01-01T00:00:00Z");
    assert_eq!(first.code, 0, "{}", first.stderr);
    assert_eq!(first.outcome("r1", "t-echo"), "queued", "{}", first.stdout);
    // Years later by PAP_NOW, still inside the real idempotency TTL: a duplicate.
    let again = release("2101-06-01T00:00:00Z");
    assert_eq!(
        again.outcome("r1", "t-echo"),
        "duplicate",
        "{}",
        again.stdout
    );
    // The invocation was created at the real time, not in 2099.
    let out = Command::new(&bin)
        .arg("--root")
        .arg(p.root())
        .args(["invocations", "--json"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!text.contains("2099-"), "{text}");
}

/// Every packaging path refuses a test build: the release archive (`dist.sh`), the Debian
/// package (its binaries are the ones `dist.sh` checked and copied to `target/dist/bin`, not
/// whatever `target/release` holds when `cargo deb --no-build` runs) and the container image
/// (`rootfs.sh`). A test build lets PAP_NOW move its clock; `cargo test --release` and
/// `cargo bench` write one into `target/release`.
#[test]
fn packaging_refuses_a_test_build() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("target");
    let release = target.join("release");
    std::fs::create_dir_all(&release).unwrap();
    for (name, built) in [
        ("pap", env!("CARGO_BIN_EXE_pap")),
        ("pap-supervise", env!("CARGO_BIN_EXE_pap-supervise")),
    ] {
        std::fs::copy(built, release.join(name)).unwrap();
    }
    let dist = Command::new(root.join("contrib/release/dist.sh"))
        .arg(&target)
        .output()
        .unwrap();
    assert_ne!(code(&dist), 0, "dist.sh packaged a test build");
    assert!(
        stderr(&dist).contains("is a test build"),
        "{}",
        stderr(&dist)
    );
    assert!(!target.join("dist/bin/pap").exists());
    let rootfs = Command::new(root.join("contrib/image/rootfs.sh"))
        .arg(&release)
        .arg(dir.path().join("rootfs"))
        .output()
        .unwrap();
    assert_ne!(code(&rootfs), 0, "rootfs.sh laid out a test build");
    assert!(
        stderr(&rootfs).contains("is a test build"),
        "{}",
        stderr(&rootfs)
    );
    // The .deb ships only what dist.sh checked.
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    for bin in ["pap", "pap-supervise"] {
        assert!(
            manifest.contains(&format!("[\"target/dist/bin/{bin}\", \"usr/bin/\"")),
            "the .deb's {bin} is not the checked copy"
        );
        assert!(!manifest.contains(&format!("[\"target/release/{bin}\"")));
    }
    // A production build passes the same check.
    if let Some(bin) = production_binary() {
        std::fs::copy(bin, release.join("pap")).unwrap();
        let check = Command::new(root.join("contrib/release/release-binary.sh"))
            .arg(&release)
            .output()
            .unwrap();
        assert_eq!(code(&check), 0, "{}", stderr(&check));
    }
}
