//! Benchmark: `pap status` on a store with a long queue, against `pap status` on an empty
//! store in the same run. The store holds 50,000 approvals waiting and 100,000 queued
//! invocations (decided by `pap dispatch --no-run` of 150,000 events through a high-risk
//! and a low-risk command agent); each `pap status --json` is a new process, the two stores
//! taking turns. It prints the medians and p90s, the peak memory of each, and the fsync cost
//! and the load of the same run; `--tables` (which reads every page, on purpose) is timed
//! apart.
//!
//! `PAP_BENCH_RUNS` sets the runs (default 15); `PAP_BENCH_APPROVALS` and
//! `PAP_BENCH_QUEUED` the store's size.
//!
//! Run: `cargo bench --bench status` (builds the release binary).

// A harness around pap reads the system's time (clippy.toml keeps the product to the
// injected clock).
#![allow(clippy::disallowed_methods)]

#[path = "../tests/common/measure.rs"]
#[allow(dead_code)]
mod measure;

use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let runs = env_or("PAP_BENCH_RUNS", 15);
    let approvals = env_or("PAP_BENCH_APPROVALS", 50_000);
    let queued = env_or("PAP_BENCH_QUEUED", 100_000);
    let dir = tempfile::tempdir().expect("temp dir");
    let full = dir.path().join("full");
    let empty = dir.path().join("empty");
    for root in [&full, &empty] {
        write_project(root);
    }
    // The full store: one dispatch of every event; the empty one: a dispatch of nothing.
    let events = dir.path().join("events.ndjson");
    let mut file = std::io::BufWriter::new(std::fs::File::create(&events).unwrap());
    for n in 0..approvals {
        writeln!(file, "{}", event(&format!("a{n}"), "bench.approval.needed")).unwrap();
    }
    for n in 0..queued {
        writeln!(file, "{}", event(&format!("q{n}"), "bench.run.queued")).unwrap();
    }
    drop(file);
    let started = Instant::now();
    dispatch(&full, &events);
    let filled = started.elapsed();
    dispatch(&empty, Path::new("/dev/null"));
    let file_mb = std::fs::metadata(full.join(".pap/state.redb"))
        .map(|m| m.len())
        .unwrap_or(0) as f64
        / 1e6;
    // One status each to migrate or warm what a first open does, then the timed runs.
    status(&full, &[]);
    status(&empty, &[]);
    let (mut full_t, mut empty_t) = (Vec::new(), Vec::new());
    let (mut full_kib, mut empty_kib) = (0, 0);
    for _ in 0..runs {
        let (t, kib) = status(&full, &[]);
        full_t.push(t);
        full_kib = full_kib.max(kib);
        let (t, kib) = status(&empty, &[]);
        empty_t.push(t);
        empty_kib = empty_kib.max(kib);
    }
    let (tables_t, _) = status(&full, &["--tables"]);
    let (fsync, fsync_p90) = measure::fsync_ms(dir.path());
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "pap status: {approvals} approvals waiting and {queued} queued invocations ({file_mb:.1} MB store, filled in {:.1} s), {runs} runs each, interleaved",
        filled.as_secs_f64()
    );
    println!(
        "  large store: median {:.1} ms, p90 {:.1} ms, peak {:.1} MB",
        ms(median(&mut full_t)),
        ms(full_t[runs * 9 / 10]),
        full_kib as f64 / 1024.0
    );
    println!(
        "  empty store (baseline, same run): median {:.1} ms, p90 {:.1} ms, peak {:.1} MB",
        ms(median(&mut empty_t)),
        ms(empty_t[runs * 9 / 10]),
        empty_kib as f64 / 1024.0
    );
    println!(
        "  large store with --tables (reads every page): {:.1} ms",
        ms(tables_t)
    );
    println!(
        "  fdatasync of a 4 KiB append, same run: median {fsync:.2} ms, p90 {fsync_p90:.2} ms; load {}",
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
}

fn event(id: &str, kind: &str) -> String {
    format!(
        r#"{{"pap_version":"0.2","id":"{id}","type":"{kind}","source":"bench/status","time":"2026-03-11T05:59:00Z","data":{{}}}}"#
    )
}

fn write_project(root: &Path) {
    std::fs::create_dir_all(root.join("triggers")).unwrap();
    std::fs::create_dir_all(root.join("agents")).unwrap();
    std::fs::write(root.join("pap.yaml"), "pap_version: \"0.2\"\n").unwrap();
    for (agent, risk, kind) in [
        ("gated", "high", "bench.approval.needed"),
        ("runner", "low", "bench.run.queued"),
    ] {
        std::fs::write(
            root.join(format!("agents/{agent}.yaml")),
            format!(
                "pap_version: \"0.2\"\nagent:\n  id: {agent}\n  risk_level: {risk}\n  model:\n    provider: command\n    command: [\"true\"]\n"
            ),
        )
        .unwrap();
        std::fs::write(
            root.join(format!("triggers/t-{agent}.yaml")),
            format!(
                "pap_version: \"0.2\"\ntrigger:\n  id: t-{agent}\n  match:\n    type: {kind}\n  agent: {agent}\n"
            ),
        )
        .unwrap();
    }
}

fn dispatch(root: &Path, events: &Path) {
    let status = Command::new(env!("CARGO_BIN_EXE_pap"))
        .arg("--root")
        .arg(root)
        .args(["dispatch", "--no-run"])
        .arg(events)
        .env_remove("PAP_NOW")
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success(), "pap dispatch failed");
}

/// One `pap status --json ARGS`: how long it took and its peak memory (KiB).
fn status(root: &Path, args: &[&str]) -> (Duration, u64) {
    let started = Instant::now();
    let (status, kib) = measure::status_with_peak_kib(
        Command::new(env!("CARGO_BIN_EXE_pap"))
            .arg("--root")
            .arg(root)
            .args(["status", "--json"])
            .args(args)
            .env_remove("PAP_NOW")
            .stdout(Stdio::null()),
    );
    let took = started.elapsed();
    // 5 (needs attention: work due and no serve) is expected of the full store.
    assert!(matches!(status.code(), Some(0 | 5)), "pap status: {status}");
    (took, kib)
}

fn median(times: &mut [Duration]) -> Duration {
    times.sort();
    times[times.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}
