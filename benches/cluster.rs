//! Benchmark of `pap serve` nodes on PostgreSQL, in one run:
//!
//! 1. one node on redb (the baseline);
//! 2. one node on PostgreSQL;
//! 3. three nodes on the same PostgreSQL database.
//!
//! The workload is the expensive path: `PAP_BENCH_EVENTS` events (default 3,000), each
//! decided in full (claim, throttle window, invocation record, ledger row) and each queuing an
//! invocation whose agent (`true`) runs as a real process; the time is from the spool files'
//! rename until every invocation has succeeded. With three nodes each node's spool gets a
//! third of the files. The PostgreSQL server is started here with fsync on (as in
//! production), in a temporary directory on the same disk, and what one fsync costs on that
//! disk is measured in the same run.
//!
//! Run: `cargo bench --bench cluster` (needs Debian's `postgresql` package; as root, the user
//! `pap-test` or `postgres` runs the server).

// A harness around pap reads the system's time to set the clock of what it runs (clippy.toml
// keeps the product to the injected clock).
#![allow(clippy::disallowed_methods)]

#[path = "common/bench_project.rs"]
mod bench_project;
#[path = "../tests/common/measure.rs"]
#[allow(dead_code)]
mod measure;

use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use bench_project::{event, pap, start_serve, stop_serve, write_project};

const PER_FILE: usize = 100;

fn main() {
    let events: usize = std::env::var("PAP_BENCH_EVENTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3_000);
    let server = match pap::pgstore::testing::start_durable() {
        Ok(s) => s,
        Err(why) => {
            eprintln!("cannot start PostgreSQL, so nothing is measured: {why}");
            std::process::exit(1);
        }
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let root = dir.path();
    write_project(
        root,
        "[\"true\"]",
        "pap_version: \"0.2\"\nserve:\n  max_concurrent: 8\n  rescan_interval: 1s\n",
    );
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!("{events} events, each queuing an invocation of `true`; {cpus} CPUs");

    let (redb, redb_peak) = run(root, "redb", 1, events, None);
    let url = server.database();
    let migrated = pap(root, &root.join("migrate"))
        .env("PAP_DATABASE_URL", &url)
        .args(["store", "migrate"])
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(migrated.success());
    let (one, one_peak) = run(root, "pg1", 1, events, Some(&url));
    let url3 = server.database();
    let migrated = pap(root, &root.join("migrate3"))
        .env("PAP_DATABASE_URL", &url3)
        .args(["store", "migrate"])
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(migrated.success());
    let (three, three_peak) = run(root, "pg3", 3, events, Some(&url3));
    let rate = |d: Duration| events as f64 / d.as_secs_f64();
    println!(
        "one node on redb:        {:.2} s, {:.0} events/s",
        redb.as_secs_f64(),
        rate(redb)
    );
    println!(
        "one node on PostgreSQL:  {:.2} s, {:.0} events/s ({:.2}x redb's rate)",
        one.as_secs_f64(),
        rate(one),
        rate(one) / rate(redb)
    );
    println!(
        "three nodes, PostgreSQL: {:.2} s, {:.0} events/s ({:.2}x one node's rate)",
        three.as_secs_f64(),
        rate(three),
        rate(three) / rate(one)
    );
    println!(
        "peak memory of a node (VmHWM): redb {:.1} MiB, PostgreSQL {:.1} MiB, largest of three {:.1} MiB",
        redb_peak as f64 / 1024.0,
        one_peak as f64 / 1024.0,
        three_peak as f64 / 1024.0
    );
    let (median, p90) = measure::fsync_ms(root);
    println!(
        "fdatasync of a 4 KiB append on this disk, same run: median {median:.2} ms, p90 {p90:.2} ms"
    );
    server.remove();
}

/// Starts `nodes` serves (state dirs `NAME-i`), renames `events` events into their spools
/// (a third each for three), and times until every invocation succeeded.
/// Returns the time and the largest peak memory (VmHWM, KiB) of a node.
fn run(root: &Path, name: &str, nodes: usize, events: usize, url: Option<&str>) -> (Duration, u64) {
    let states: Vec<PathBuf> = (0..nodes)
        .map(|i| root.join(format!("{name}-{i}")))
        .collect();
    let staging = root.join(format!("{name}-staging"));
    std::fs::create_dir_all(&staging).unwrap();
    let mut files: Vec<(PathBuf, PathBuf)> = Vec::new();
    for (f, chunk) in (0..events).collect::<Vec<_>>().chunks(PER_FILE).enumerate() {
        let text: String = chunk
            .iter()
            .map(|i| format!("{}\n", event(&format!("{name}-{i:06}"))))
            .collect();
        let file = format!("f{f:05}.ndjson");
        std::fs::write(staging.join(&file), text).unwrap();
        let node = &states[f % nodes];
        files.push((staging.join(&file), node.join("spool").join(&file)));
    }
    let env: Vec<(&str, &str)> = url.map(|u| ("PAP_DATABASE_URL", u)).into_iter().collect();
    let children: Vec<Child> = states.iter().map(|s| start_serve(root, s, &env)).collect();
    let started = Instant::now();
    for (from, to) in &files {
        std::fs::rename(from, to).unwrap();
    }
    let logs: Vec<PathBuf> = states.iter().map(|s| s.join("serve.log")).collect();
    let succeeded = || -> usize {
        logs.iter()
            .map(|l| {
                std::fs::read_to_string(l)
                    .unwrap_or_default()
                    .matches("\"succeeded\"")
                    .count()
            })
            .sum()
    };
    let deadline = Instant::now() + Duration::from_secs(1800);
    while succeeded() < events {
        assert!(Instant::now() < deadline, "{name}: timed out");
        std::thread::sleep(Duration::from_millis(50));
    }
    let took = started.elapsed();
    let peak = children
        .iter()
        .map(|c| measure::peak_kib(c.id()))
        .max()
        .unwrap_or(0);
    for child in children {
        stop_serve(child);
    }
    assert_eq!(succeeded(), events, "{name}: each invocation ran once");
    (took, peak)
}
