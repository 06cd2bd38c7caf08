//! One hostile event under the size limit cannot make a filter with descendant segments cost
//! seconds and gigabytes: the evaluation stops at its node budget, the condition does not
//! hold, and the reason says so. (How fast: benches/jsonpath.rs.)

use std::time::{Duration, Instant};

use super::project;
use crate::common::dispatch::{T0, ev, run_of};
use crate::common::measure::output_with_peak_kib;
use crate::common::{code, stdout};
use serde_json::{Value, json};

/// About 0.9 MiB: 60 x 60 objects of 30 numbers, the shape that makes `$..*..*..*` explode.
fn hostile_data() -> Value {
    let leaf: serde_json::Map<String, Value> =
        (0..30).map(|i| (format!("n{i}"), json!(i))).collect();
    let middle: serde_json::Map<String, Value> = (0..60)
        .map(|i| (format!("m{i}"), Value::Object(leaf.clone())))
        .collect();
    let top: serde_json::Map<String, Value> = (0..60)
        .map(|i| (format!("t{i}"), Value::Object(middle.clone())))
        .collect();
    Value::Object(top)
}

#[test]
fn a_costly_filter_on_a_hostile_event_stops_at_its_budget() {
    let p = project();
    let event = ev("h1", "test.cost.hostile", hostile_data());
    let size = event.to_string().len();
    assert!(size > 800_000 && size < 1_048_576, "{size}");
    let file = p.events("hostile.ndjson", &[event]);
    let started = Instant::now();
    let (out, peak_kib) = output_with_peak_kib(
        p.cmd(T0)
            .arg("dispatch")
            .arg(&file)
            .args(["--json", "--no-run"]),
    );
    let run = run_of(&out);
    // A sanity bound for a debug build on a shared machine, not a benchmark: before the
    // budget this took minutes.
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.outcome("h1", "costly"), "filtered");
    let reason = run.trigger("h1", "costly")["reason"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        reason.contains("visited more than 100000 nodes of this event (jsonpath.max_nodes)"),
        "{reason}"
    );
    // Before the budget, gigabytes.
    let rss_mib = peak_kib / 1024;
    assert!(rss_mib < 256, "pap dispatch peaked at {rss_mib} MiB");

    // --explain quotes what it saw within its own budget; the path's over-budget is marked.
    let explained = p
        .cmd(T0)
        .args(["dispatch", "--dry-run", "--explain", "--json"])
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(code(&explained), 0);
    let line: Value = serde_json::from_str(stdout(&explained).lines().next().unwrap()).unwrap();
    let condition = &line["triggers"][0]["explain"]["conditions"][0];
    assert_eq!(condition["over_budget"], true, "{condition}");
    assert!(stdout(&explained).len() < 2 * 1024 * 1024);

    // The budget is the project's to set.
    std::fs::write(
        p.root().join("pap.yaml"),
        "pap_version: \"0.2\"\njsonpath:\n  max_nodes: 50000000\n",
    )
    .unwrap();
    let small = p.events(
        "small.ndjson",
        &[ev("s1", "test.cost.hostile", json!({"a": {"b": {"c": 1}}}))],
    );
    let run = p.dispatch(T0, &small, &["--no-run"]);
    assert_eq!(run.outcome("s1", "costly"), "queued", "{}", run.stdout);
}
