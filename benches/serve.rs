//! Benchmark of `pap serve` on its spool:
//!
//! 1. latency from a file's rename into the spool to its decision being committed (serve
//!    logs each decision after its transaction committed; the log's timestamp is read), over
//!    files dropped one at a time;
//! 2. a burst of 10,000 one-event files renamed into the spool at once: the time until every
//!    file is filed in done/, next to a baseline in the same run: `pap dispatch --no-run` of
//!    the same 10,000 events as one NDJSON stream (no files, no renames);
//! 3. serve's peak memory (VmHWM) during the burst, next to its peak right after start;
//! 4. a backlog: 10,000 invocations queued by `pap dispatch --no-run`, then run by
//!    `pap serve --once` (concurrency 8), next to `xargs -P 8` running the same command
//!    10,000 times in the same run: what pap adds to each run (the decision is not timed).
//!
//! The project has one trigger whose filter the events pass and whose agent is `true`, so
//! each decision is a full one (claim, throttle window, invocation record, ledger row) and
//! each run a real process.
//!
//! Run: `cargo bench --bench serve` (Linux: reads /proc for memory).

// A harness around pap reads the system's time to set the clock of what it runs (clippy.toml
// keeps the product to the injected clock).
#![allow(clippy::disallowed_methods)]

#[path = "common/bench_project.rs"]
mod bench_project;
#[path = "../tests/common/measure.rs"]
#[allow(dead_code)]
mod measure;

use bench_project::{event, pap, start_serve, stop_serve, write_project};
use std::path::{Path, PathBuf};

use measure::peak_kib;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

const LATENCY_FILES: usize = 200;
const BURST_FILES: usize = 10_000;

fn main() {
    let dir = tempfile::tempdir().expect("temp dir");
    let root = dir.path();
    write_project(
        root,
        "[\"true\"]",
        "pap_version: \"0.2\"\nserve:\n  max_concurrent: 8\n",
    );

    // 1. Latency, one file at a time.
    let state = root.join("state-latency");
    let serve = start_serve(root, &state, &[]);
    let spool = state.join("spool");
    let mut dropped = Vec::new();
    for i in 0..LATENCY_FILES {
        let id = format!("lat{i:05}");
        let at = drop_file(&spool, &id);
        dropped.push((id, at));
        std::thread::sleep(Duration::from_millis(25));
    }
    wait_done(&spool, LATENCY_FILES);
    stop_serve(serve);
    let decided = decision_times(&state.join("serve.log"));
    let mut latencies: Vec<f64> = dropped
        .iter()
        .filter_map(|(id, at)| {
            let when = decided.iter().find(|(e, _)| e == id)?.1;
            Some(when.duration_since(*at).unwrap_or_default().as_secs_f64() * 1000.0)
        })
        .collect();
    // The slowest, with their place in the sequence: a tail made by the first files (a
    // process warming up) reads differently from one spread over the run.
    let mut slowest: Vec<(usize, f64)> = latencies.iter().copied().enumerate().collect();
    slowest.sort_by(|a, b| b.1.total_cmp(&a.1));
    let slowest: Vec<String> = slowest
        .iter()
        .take(5)
        .map(|(i, ms)| format!("file {i}: {ms:.1} ms"))
        .collect();
    latencies.sort_by(f64::total_cmp);
    let pct = |p: f64| latencies[((latencies.len() - 1) as f64 * p).round() as usize];
    println!(
        "latency, rename → decision committed ({} files, one every 25 ms): median {:.1} ms, p99 {:.1} ms",
        latencies.len(),
        pct(0.5),
        pct(0.99)
    );
    println!("  slowest: {}", slowest.join(", "));

    // 2 and 3. The burst.
    let state = root.join("state-burst");
    let staging = root.join("staging");
    std::fs::create_dir_all(&staging).unwrap();
    let mut stream = String::new();
    for i in 0..BURST_FILES {
        let line = event(&format!("burst{i:05}"));
        std::fs::write(staging.join(format!("b{i:05}.json")), &line).unwrap();
        stream.push_str(&line);
        stream.push('\n');
    }
    let serve = start_serve(root, &state, &[]);
    let idle_peak = peak_kib(serve.id());
    let spool = state.join("spool");
    let started = Instant::now();
    for i in 0..BURST_FILES {
        let name = format!("b{i:05}.json");
        std::fs::rename(staging.join(&name), spool.join(&name)).unwrap();
    }
    wait_done(&spool, BURST_FILES);
    let burst = started.elapsed();
    let burst_peak = peak_kib(serve.id());
    stop_serve(serve);

    let events = root.join("burst.ndjson");
    std::fs::write(&events, &stream).unwrap();
    let started = Instant::now();
    let status = pap(root, &root.join("state-baseline"))
        .args(["dispatch", "--no-run", "--json"])
        .arg(&events)
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    let baseline = started.elapsed();
    println!(
        "burst of {BURST_FILES} files: all filed in done/ after {:.2} s ({:.0} files/s); baseline `pap dispatch --no-run` of the same events as one stream: {:.2} s; ratio {:.2}x the baseline's time",
        burst.as_secs_f64(),
        BURST_FILES as f64 / burst.as_secs_f64(),
        baseline.as_secs_f64(),
        burst.as_secs_f64() / baseline.as_secs_f64()
    );
    println!(
        "serve peak memory (VmHWM): {:.1} MiB during the burst, {:.1} MiB right after start",
        burst_peak as f64 / 1024.0,
        idle_peak as f64 / 1024.0
    );

    // 4. A backlog of queued invocations: the baseline's dispatch queued them.
    let queued = baseline;
    let started = Instant::now();
    let status = pap(root, &root.join("state-baseline"))
        .args(["serve", "--once", "--log-format", "json"])
        .stderr(std::fs::File::create(root.join("backlog.log")).unwrap())
        .status()
        .unwrap();
    assert!(status.success());
    let ran = started.elapsed();
    let succeeded = std::fs::read_to_string(root.join("backlog.log"))
        .unwrap()
        .matches("\"succeeded\"")
        .count();
    assert_eq!(succeeded, BURST_FILES, "every queued invocation ran once");
    let started = Instant::now();
    let mut xargs = Command::new("xargs")
        .args(["-P", "8", "-n", "1", "true"])
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        let mut input = xargs.stdin.take().unwrap();
        for i in 0..BURST_FILES {
            writeln!(input, "{i}").unwrap();
        }
    }
    assert!(xargs.wait().unwrap().success());
    let baseline = started.elapsed();
    println!(
        "backlog of {BURST_FILES} queued invocations of `true` (queued in {:.2} s): `pap serve --once` ran them in {:.2} s ({:.0} runs/s); `xargs -P 8 -n 1 true`: {:.2} s ({:.0} runs/s); pap's rate is {:.0}% of xargs's",
        queued.as_secs_f64(),
        ran.as_secs_f64(),
        BURST_FILES as f64 / ran.as_secs_f64(),
        baseline.as_secs_f64(),
        BURST_FILES as f64 / baseline.as_secs_f64(),
        100.0 * baseline.as_secs_f64() / ran.as_secs_f64()
    );

    let (median, p90) = measure::fsync_ms(root);
    println!(
        "fdatasync of a 4 KiB append on this disk, same run: median {median:.2} ms, p90 {p90:.2} ms"
    );
}

fn drop_file(spool: &Path, id: &str) -> SystemTime {
    let tmp = spool.join(format!(".{id}.tmp"));
    std::fs::write(&tmp, event(id)).unwrap();
    let at = SystemTime::now();
    std::fs::rename(&tmp, spool.join(format!("{id}.json"))).unwrap();
    at
}

fn wait_done(spool: &Path, n: usize) {
    let done: PathBuf = spool.join("done");
    wait(|| std::fs::read_dir(&done).map(|d| d.count()).unwrap_or(0) >= n);
}

fn wait(mut cond: impl FnMut() -> bool) {
    let started = Instant::now();
    while !cond() {
        assert!(started.elapsed() < Duration::from_secs(600), "timed out");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// (event id, when its decision was logged) from serve's JSON log.
fn decision_times(log: &Path) -> Vec<(String, SystemTime)> {
    let text = std::fs::read_to_string(log).unwrap();
    text.lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|r| r["fields"]["message"] == "decided")
        .filter_map(|r| {
            let id = r["span"]["id"].as_str()?.to_owned();
            let ts: jiff::Timestamp = r["timestamp"].as_str()?.parse().ok()?;
            Some((id, SystemTime::from(ts)))
        })
        .collect()
}
