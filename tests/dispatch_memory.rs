//! `pap dispatch` holds one group of events and its reports at a time, beside the store's page
//! cache: its peak memory does not grow with the stream. Before, a group was
//! 32,768 events whatever their reports weighed (an event matching 40 triggers has 40 trigger
//! reports, about 20 KB), and up to four decided groups waited for the printer, so the peak
//! grew with the stream up to a few groups' worth of reports.
//!
//! The project has a small `store_cache` (1 MiB), so redb's cache, full from the first
//! thousand events, cannot hide growth elsewhere. Each event matches 40 triggers: 39 filter it
//! out (each with a reason), and one queues an invocation or is throttled by its window key.
//! The same stream is dispatched at N and 4N events, each into a fresh state; the peak at 4N
//! may exceed the peak at N by 10% and 4 MiB (the allocator's rounding), no more. One run's
//! peak at N reads anywhere from 37 to 49 MiB here (the threads' arenas depend on how the run
//! was scheduled), while the peak at 4N sits near 50 MiB: a median of three at N still read
//! 41 MiB in a loaded CI-like run and failed the bound with no growth at all. So
//! the peak at N is the highest of three runs (what N can reach), and the peak at 4N the median
//! of three: growth with the stream shows as 4N above everything N reached.
//!
//! Scale: `PAP_TEST_DISPATCH_MEMORY_EVENTS` (N, default 1,500, a few seconds in a debug
//! build). `cargo bench --bench dispatch_memory` measures the release binary at 100k to 10M.

use std::io::Write;
use std::path::Path;

use crate::common::measure::output_with_peak_kib;
use crate::common::pap_at;

const TRIGGERS: usize = 40;

fn events() -> usize {
    std::env::var("PAP_TEST_DISPATCH_MEMORY_EVENTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_500)
}

fn write_project(root: &Path) {
    std::fs::create_dir_all(root.join("triggers")).unwrap();
    std::fs::create_dir_all(root.join("agents")).unwrap();
    std::fs::write(
        root.join("pap.yaml"),
        "pap_version: \"0.2\"\nstore_cache: 1MiB\n",
    )
    .unwrap();
    std::fs::write(
        root.join("agents/noop.yaml"),
        "pap_version: \"0.2\"\nagent:\n  id: noop\n  risk_level: read_only\n  model:\n    provider: command\n    command: [\"true\"]\n",
    )
    .unwrap();
    for i in 0..TRIGGERS {
        std::fs::write(
            root.join(format!("triggers/t{i:02}.yaml")),
            format!(
                "pap_version: \"0.2\"\ntrigger:\n  id: t{i:02}\n  match:\n    type: test.reading.recorded\n  filter:\n    - path: $.data.slot\n      operator: eq\n      value: {i}\n    - path: $.data.level\n      operator: gte\n      value: 0\n  throttle:\n    max_per_window: 1\n    window_seconds: 3600\n    window_key: $.data.meter\n  agent: noop\n"
            ),
        )
        .unwrap();
    }
}

/// `n` events: event `k` passes the filter of trigger `k % 40` only, for meter `k % 7`.
fn write_events(path: &Path, n: usize) {
    let mut out = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    for k in 0..n {
        writeln!(
            out,
            r#"{{"pap_version":"0.2","id":"r-{k:07}","type":"test.reading.recorded","source":"meters/test","time":"2026-03-11T05:59:00Z","data":{{"slot":{},"level":{},"meter":"m-{}"}}}}"#,
            k % TRIGGERS,
            k % 11,
            k % 7
        )
        .unwrap();
    }
    out.flush().unwrap();
}

/// `pap dispatch --no-run --json` of `n` events into a fresh state: its peak in KiB, and its
/// lines' outcomes counted.
fn dispatch_peak(root: &Path, n: usize) -> (u64, std::collections::BTreeMap<String, usize>) {
    let file = root.join(format!("events-{n}.ndjson"));
    write_events(&file, n);
    let state = root.join(format!("state-{n}"));
    let (out, peak_kib) = output_with_peak_kib(
        pap_at(root)
            .arg("--state")
            .arg(&state)
            .args(["dispatch", "--no-run", "--json"])
            .arg(&file),
    );
    assert!(
        out.status.success(),
        "pap dispatch failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut outcomes = std::collections::BTreeMap::new();
    let mut lines = 0;
    for line in String::from_utf8(out.stdout).unwrap().lines() {
        lines += 1;
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        for t in v["triggers"].as_array().unwrap() {
            *outcomes
                .entry(t["outcome"].as_str().unwrap().to_owned())
                .or_default() += 1;
        }
    }
    assert_eq!(lines, n, "one line per event");
    let _ = std::fs::remove_dir_all(&state);
    (peak_kib, outcomes)
}

#[test]
fn peak_memory_does_not_grow_with_the_stream() {
    let dir = tempfile::tempdir().unwrap();
    write_project(dir.path());
    let n = events();
    // Three runs of each size: the highest peak at N, the median at 4N (see above).
    let runs = |n: usize| -> Vec<_> { (0..3).map(|_| dispatch_peak(dir.path(), n)).collect() };
    let median = |runs: &[(u64, _)]| {
        let mut peaks: Vec<u64> = runs.iter().map(|(peak, _)| *peak).collect();
        peaks.sort_unstable();
        peaks[1]
    };
    let at_n = runs(n);
    let outcomes = &at_n[0].1;
    assert_eq!(outcomes["filtered"], n * (TRIGGERS - 1), "{outcomes:?}");
    assert!(
        outcomes["queued"] > 0 && outcomes["throttled"] > 0,
        "{outcomes:?}"
    );
    let small = at_n
        .iter()
        .map(|(peak, _)| *peak)
        .max()
        .expect("three runs");
    let large = median(&runs(4 * n));
    let bound = small + small / 10 + 4 * 1024;
    println!(
        "pap dispatch --no-run --json, {TRIGGERS} triggers per event, store_cache 1MiB: peak (highest of 3) {} MiB at {n} events, (median of 3) {} MiB at {} (bound {} MiB)",
        small / 1024,
        large / 1024,
        4 * n,
        bound / 1024
    );
    assert!(
        large <= bound,
        "the peak grew with the stream: {} MiB at {n} events, {} MiB at {} events (at most 10% and 4 MiB more allowed)",
        small / 1024,
        large / 1024,
        4 * n
    );
}
