//! Benchmark: `pap dispatch --no-run` of 100,000 NDJSON events against the example project,
//! next to a baseline on the same file in the same run: `jq` selecting the events whose type
//! a trigger matches and testing one data condition per type, printing a line per event
//! (when jq is installed). pap does more per event (full validation, every filter, SHA-256
//! idempotency keys, throttle windows, durable invocation records committed to redb), so
//! the ratio is conservative.
//!
//! Run: `cargo bench --bench dispatch` (builds the release binary).

// A harness around pap reads the system's time to set the clock of what it runs (clippy.toml
// keeps the product to the injected clock).
#![allow(clippy::disallowed_methods)]

#[path = "common/example_events.rs"]
mod example_events;
#[path = "../tests/common/measure.rs"]
#[allow(dead_code)]
mod measure;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const EVENTS: usize = 100_000;
/// Five rounds: on a shared 2-core machine a single round can be off by a quarter.
const ROUNDS: usize = 5;

/// What jq does per event: the types the example triggers match, and one condition each.
const JQ_FILTER: &str = r#"
  if (.pap_version == "0.2" and (.id|type) == "string" and (.source|type) == "string"
      and (.time|type) == "string" and (.data|type) == "object") then
    (if .type == "energy.price.threshold_exceeded" then (.data.price_nok_per_kwh > 3)
     elif .type == "stock.price.dropped_significantly" then (.data.drop_percent > 5)
     elif .type == "article.staleness.threshold_reached" then (.data.days_since_edit >= 180)
     elif .type == "ticket.response.overdue" then (.data.hours_without_response > 4)
     elif .type == "server.latency.sla_breached" then (.data.p99_ms > .data.sla_ms)
     elif .type == "competitor.pricing.threshold_exceeded" then (.data.largest_change_percent | (if . < 0 then -. else . end) > 10)
     elif .type == "regulation.document.published" then (.data.category != null)
     elif .type == "document.meeting_notes.uploaded" then (.data.word_count > 100)
     else null end) as $m
    | {event_id: .id, type: .type, status: (if $m == null then "no_match" else "dispatched" end),
       matched: $m}
  else {event_id: .id, status: "invalid"} end"#;

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = tempfile::tempdir().expect("temp dir");
    example_events::copy_example_project(root, dir.path());
    let events = dir.path().join("events.ndjson");
    let bytes = example_events::generate(&root.join("examples/events"), &events, EVENTS);

    let mut pap_times = Vec::new();
    let mut jq_times = Vec::new();
    let jq = Command::new("jq").arg("--version").output().is_ok();
    for round in 0..ROUNDS {
        // A fresh state each round, so every round decides every event anew.
        let state = dir.path().join(format!("state-{round}"));
        pap_times.push(time(|| {
            let status = Command::new(env!("CARGO_BIN_EXE_pap"))
                .arg("--root")
                .arg(dir.path())
                .arg("--state")
                .arg(&state)
                .args(["dispatch", "--no-run", "--json"])
                .arg(&events)
                .stdout(Stdio::null())
                .status()
                .expect("run pap");
            assert!(status.success(), "pap dispatch failed: {status}");
        }));
        if jq {
            jq_times.push(time(|| {
                let status = Command::new("jq")
                    .args(["-c", JQ_FILTER])
                    .arg(&events)
                    .stdout(Stdio::null())
                    .status()
                    .expect("run jq");
                assert!(status.success());
            }));
        }
    }
    let pap = median(&mut pap_times);
    println!(
        "dispatch --no-run of {EVENTS} NDJSON events ({:.1} MB), median of {ROUNDS} rounds",
        bytes as f64 / 1e6
    );
    println!(
        "  pap dispatch --no-run --json (validate, 5 stages, redb commit): {:>8.0} ms  {:>9.0} events/s",
        ms(pap),
        rate(pap)
    );
    if jq {
        let jq = median(&mut jq_times);
        println!(
            "  baseline: jq -c (type match + one condition per type):        {:>8.0} ms  {:>9.0} events/s",
            ms(jq),
            rate(jq)
        );
        println!(
            "  ratio pap / jq events per second: {:.2}x",
            rate(pap) / rate(jq)
        );
    } else {
        println!("  baseline: jq not installed, skipped");
    }
    let (median, p90) = measure::fsync_ms(dir.path());
    println!(
        "  fdatasync of a 4 KiB append on this disk, same run: median {median:.2} ms, p90 {p90:.2} ms"
    );
}

fn time(f: impl FnOnce()) -> Duration {
    let start = Instant::now();
    f();
    start.elapsed()
}

fn median(times: &mut [Duration]) -> Duration {
    times.sort();
    times[times.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn rate(d: Duration) -> f64 {
    EVENTS as f64 / d.as_secs_f64()
}
