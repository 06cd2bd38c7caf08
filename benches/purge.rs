//! Benchmark of the purge and of compaction:
//!
//! 1. a backfill of N throttled decisions (default 1,000,000; `PAP_BENCH_PURGE_EVENTS`) by
//!    `pap dispatch --no-run` at a test-clock time T0: N idempotency claims and N ledger rows;
//! 2. `pap serve` started 40 days later on the test clock, so its first purge pass removes
//!    every claim and every ledger row. Meanwhile one spool file is renamed in every 20 ms,
//!    and the latency from its rename to its decision being committed (serve logs each
//!    decision after its commit; the log's timestamp is read) is taken during the purge and,
//!    in the same run, once the purge is over: the ratio of the two p99s is what the purge
//!    costs a decision (goal: at most 2×);
//! 3. the state file's size after the purge, then `pap store compact`: the sizes before and
//!    after, next to the live data (the pages the tables take, summed from redb's table
//!    statistics), and how long compaction took;
//! 4. what one fsync costs on this disk, in the same run.
//!
//! The bench binary honours `PAP_NOW` (cargo builds benches with the test clock); it is
//! used for the backfill and serve only, never to time anything.
//!
//! Run: `cargo bench --bench purge` (Linux). Smaller: `PAP_BENCH_PURGE_EVENTS=100000 cargo
//! bench --bench purge`.

// A harness around pap reads the system's time to set the clock of what it runs (clippy.toml
// keeps the product to the injected clock).
#![allow(clippy::disallowed_methods)]

#[path = "common/bench_project.rs"]
mod bench_project;
#[path = "common/disk_probe.rs"]
mod disk_probe;
#[path = "../tests/common/measure.rs"]
#[allow(dead_code)]
mod measure;

use bench_project::{event, pap, start_serve, stop_serve, write_project};
use std::io::Write;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant, SystemTime};

const T0: &str = "2026-03-11T06:00:00Z";
const LATER: &str = "2026-04-20T06:00:00Z";
/// Files renamed in once the purge is over, for the quiet latency: as many as during the
/// purge, and at least this many.
const QUIET_FILES: usize = 1000;
const EVERY: Duration = Duration::from_millis(20);

fn main() {
    let events: usize = std::env::var("PAP_BENCH_PURGE_EVENTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let dir = tempfile::tempdir().expect("temp dir");
    let root = dir.path();
    write_project(root, "[\"true\"]", "pap_version: \"0.2\"\n");
    // Throttled: one invocation, then every other event is a throttled decision (a claim and
    // a ledger row each), the cheapest full decision and the one a backfill makes most.
    std::fs::write(
        root.join("triggers/bench.yaml"),
        "pap_version: \"0.2\"\ntrigger:\n  id: bench\n  match:\n    type: bench.event.happened\n  throttle:\n    max_per_window: 1\n    window_seconds: 3600\n  agent: bench\n",
    )
    .unwrap();
    let state = root.join("state");

    // 1. The backfill.
    let stream = root.join("backfill.ndjson");
    {
        let mut out = std::io::BufWriter::new(std::fs::File::create(&stream).unwrap());
        for i in 0..events {
            writeln!(out, "{}", event(&format!("b{i:08}"))).unwrap();
        }
    }
    let started = Instant::now();
    let status = pap(root, &state)
        .env("PAP_NOW", T0)
        .args(["dispatch", "--no-run", "--json"])
        .arg(&stream)
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    let backfill = started.elapsed();
    let file = state.join("state.redb");
    let full = len(&file);
    println!(
        "backfill: {events} throttled decisions by `pap dispatch --no-run` in {:.1} s; state file {:.1} MB",
        backfill.as_secs_f64(),
        mb(full)
    );

    // 2. Serve 40 days on: its first pass purges every claim and ledger row.
    // `PAP_BENCH_PURGE_TIMELINE=<file>`: every step and every file's latency, as CSV, for a
    // look at where a slow decision waited.
    let timeline = std::env::var_os("PAP_BENCH_PURGE_TIMELINE");
    let mut env = vec![("PAP_NOW", LATER)];
    if timeline.is_some() {
        env.push(("PAP_LOG", "info,pap::serve::purge=debug"));
    }
    let serve = start_serve(root, &state, &env);
    let spool = state.join("spool");
    let log = state.join("serve.log");
    let mut dropped = Vec::new();
    let purge_started = Instant::now();
    let mut purged_at = None;
    let mut quiet_left = QUIET_FILES;
    let mut n = 0;
    let mut tail = PassWatch::default();
    // The disk's own stalls, beside serve, in each phase (a stall delays every file renamed
    // in meanwhile).
    let probe = disk_probe::DiskProbe::start(root);
    let mut quiet_from = None;
    while quiet_left > 0 {
        let id = format!("lat{n:06}");
        n += 1;
        let at = drop_file(&spool, &id);
        let during = purged_at.is_none();
        dropped.push((id, at, during));
        std::thread::sleep(EVERY);
        if during {
            if tail.pass_over(&log) {
                purged_at = Some(purge_started.elapsed());
                quiet_left = dropped.len().max(QUIET_FILES);
                quiet_from = Some(Instant::now());
            }
        } else {
            quiet_left -= 1;
        }
        assert!(
            purge_started.elapsed() < Duration::from_secs(1800),
            "the purge did not end in 30 minutes"
        );
    }
    wait_done(&spool, dropped.len());
    let quiet_from = quiet_from.expect("the purge ended");
    let disk = [
        probe.between(purge_started, quiet_from),
        probe.between(quiet_from, Instant::now()),
    ];
    stop_serve(serve);
    let decided = decision_times(&log);
    // Each file's latency, and whether the disk alone stalled a sync while it waited.
    let latencies = |during: bool, stall_free: bool| {
        let mut ms: Vec<f64> = dropped
            .iter()
            .filter(|(_, _, d)| *d == during)
            .filter_map(|(id, at, _)| {
                let when = decided.iter().find(|(e, _)| e == id)?.1;
                if stall_free && probe.stalled_between(*at, when) {
                    return None;
                }
                Some(when.duration_since(*at).unwrap_or_default().as_secs_f64() * 1000.0)
            })
            .collect();
        ms.sort_by(f64::total_cmp);
        ms
    };
    if let Some(path) = &timeline {
        write_timeline(Path::new(path), &log, &dropped, &decided);
    }
    let (busy, quiet) = (latencies(true, false), latencies(false, false));
    let (busy_clear, quiet_clear) = (latencies(true, true), latencies(false, true));
    probe.stop();
    let pct = disk_probe::percentile;
    let purge_took = purged_at.expect("the purge ended");
    println!(
        "purge of {events} expired keys and {events} ledger rows by serve: {:.1} s ({:.0} records/s), {}",
        purge_took.as_secs_f64(),
        2.0 * events as f64 / purge_took.as_secs_f64(),
        steps(&log)
    );
    println!(
        "latency rename → decision committed, one file every {} ms: during the purge ({} files) p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms; after it, same run ({} files) p50 {:.2} ms, p99 {:.2} ms; p99 ratio {:.2}× (goal ≤ 2×)",
        EVERY.as_millis(),
        busy.len(),
        pct(&busy, 0.5),
        pct(&busy, 0.99),
        busy.last().copied().unwrap_or_default(),
        quiet.len(),
        pct(&quiet, 0.5),
        pct(&quiet, 0.99),
        pct(&busy, 0.99) / pct(&quiet, 0.99)
    );
    println!(
        "without the files that waited through a stall of the disk alone (below): during the purge ({} files) p99 {:.2} ms; after it ({} files) p99 {:.2} ms; p99 ratio {:.2}× (goal ≤ 2×)",
        busy_clear.len(),
        pct(&busy_clear, 0.99),
        quiet_clear.len(),
        pct(&quiet_clear, 0.99),
        pct(&busy_clear, 0.99) / pct(&quiet_clear, 0.99)
    );
    for (phase, ms) in ["during the purge", "after it"].into_iter().zip(disk) {
        println!(
            "the disk alone {phase} (a 4 KiB append and fdatasync every 20 ms), {}",
            disk_probe::summary(ms)
        );
    }

    // 3. Compaction.
    let purged = len(&file);
    let started = Instant::now();
    let out = pap(root, &state)
        .args(["store", "compact", "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let took = started.elapsed();
    let done: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let (after, live) = (
        done["after"].as_u64().unwrap(),
        done["live"].as_u64().unwrap(),
    );
    println!(
        "state file: {:.1} MB full, {:.1} MB after the purge; `pap store compact` in {:.2} s: {:.1} MB, next to {:.2} MB of live data (the tables' pages): {:.2}× the live data (goal ≤ 1.5×)",
        mb(full),
        mb(purged),
        took.as_secs_f64(),
        mb(after),
        mb(live),
        after as f64 / live.max(1) as f64
    );

    // 4. The disk.
    let (median, p90) = measure::fsync_ms(root);
    println!(
        "fdatasync of a 4 KiB append on this disk, same run: median {median:.2} ms, p90 {p90:.2} ms"
    );
}

fn len(file: &Path) -> u64 {
    std::fs::metadata(file).map(|m| m.len()).unwrap_or(0)
}

fn mb(bytes: u64) -> f64 {
    bytes as f64 / 1e6
}

fn drop_file(spool: &Path, id: &str) -> SystemTime {
    let tmp = spool.join(format!(".{id}.tmp"));
    std::fs::write(&tmp, event(id)).unwrap();
    let at = SystemTime::now();
    std::fs::rename(&tmp, spool.join(format!("{id}.json"))).unwrap();
    at
}

fn wait_done(spool: &Path, n: usize) {
    let done = spool.join("done");
    let started = Instant::now();
    while std::fs::read_dir(&done).map(|d| d.count()).unwrap_or(0) < n {
        assert!(started.elapsed() < Duration::from_secs(600), "timed out");
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn log_lines(log: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// Watches serve's log for the end of the purge's pass over both claims and the ledger,
/// reading only what was added since the last look.
#[derive(Default)]
struct PassWatch {
    read: u64,
    partial: String,
    claims: bool,
    ledger: bool,
}

impl PassWatch {
    fn pass_over(&mut self, log: &Path) -> bool {
        use std::io::{Read, Seek, SeekFrom};
        let Ok(mut file) = std::fs::File::open(log) else {
            return false;
        };
        let mut added = String::new();
        if file.seek(SeekFrom::Start(self.read)).is_err()
            || file.read_to_string(&mut added).is_err()
        {
            return false;
        }
        self.read += added.len() as u64;
        self.partial.push_str(&added);
        let complete = self.partial.rfind('\n').map_or(0, |i| i + 1);
        for line in self.partial[..complete].lines() {
            let Ok(r) = serde_json::from_str::<serde_json::Value>(line) else {
                continue;
            };
            if r["fields"]["message"] == "purged expired state" {
                self.claims |= r["fields"]["kind"] == "claims";
                self.ledger |= r["fields"]["kind"] == "ledger";
            }
        }
        self.partial.drain(..complete);
        self.claims && self.ledger
    }
}
/// The purge's own account: steps and the longest step, per kind.
fn steps(log: &Path) -> String {
    log_lines(log)
        .iter()
        .filter(|r| r["fields"]["message"] == "purged expired state")
        .map(|r| {
            let f = &r["fields"];
            format!(
                "{}: {} removed in {} steps, longest {:.1} ms",
                f["kind"].as_str().unwrap_or("?"),
                f["removed"],
                f["steps"],
                f["longest_step_ms"].as_f64().unwrap_or_default()
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// (event id, when its decision was logged) from serve's JSON log.
fn decision_times(log: &Path) -> Vec<(String, SystemTime)> {
    log_lines(log)
        .iter()
        .filter(|r| r["fields"]["message"] == "decided")
        .filter_map(|r| {
            let id = r["span"]["id"].as_str()?.to_owned();
            let ts: jiff::Timestamp = r["timestamp"].as_str()?.parse().ok()?;
            Some((id, SystemTime::from(ts)))
        })
        .collect()
}

/// Writes `at_ms,what,value_ms,detail` rows: each file's rename and its latency, each purge
/// step's end and how long it took (times from the first file's rename).
fn write_timeline(
    path: &Path,
    log: &Path,
    dropped: &[(String, SystemTime, bool)],
    decided: &[(String, SystemTime)],
) {
    let Some(origin) = dropped.first().map(|d| d.1) else {
        return;
    };
    let since = |t: SystemTime| t.duration_since(origin).unwrap_or_default().as_secs_f64() * 1000.0;
    let mut rows = Vec::new();
    for (id, at, _) in dropped {
        if let Some((_, when)) = decided.iter().find(|(e, _)| e == id) {
            let ms = when.duration_since(*at).unwrap_or_default().as_secs_f64() * 1000.0;
            rows.push((since(*at), format!("file,{ms:.3},{id}")));
        }
    }
    for r in log_lines(log) {
        if r["fields"]["message"] != "purge step" {
            continue;
        }
        let Some(ts) = r["timestamp"]
            .as_str()
            .and_then(|t| t.parse::<jiff::Timestamp>().ok())
        else {
            continue;
        };
        let f = &r["fields"];
        rows.push((
            since(SystemTime::from(ts)),
            format!(
                "step,{:.3},{}:{}",
                f["took_ms"].as_f64().unwrap_or_default(),
                f["kind"].as_str().unwrap_or("?"),
                f["removed"]
            ),
        ));
    }
    rows.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut out = String::from("at_ms,what,value_ms,detail\n");
    for (at, row) in rows {
        out.push_str(&format!("{at:.3},{row}\n"));
    }
    std::fs::write(path, out).expect("write the timeline");
    println!("timeline: {}", path.display());
}
