//! Benchmark: peak memory of `pap dispatch --no-run --json` by the stream's length: it must not grow with the stream, beyond redb's page cache (`store_cache`) filling
//! up to its setting. Two streams, each against its project in a fresh state per run:
//!
//! - invocation-heavy: the stream and project of `benches/dispatch_invocations.rs` (20
//!   triggers over 4 event types; every event decided for 5 triggers, 1 queues an invocation);
//! - throttle-heavy: the stream and project of `benches/dispatch.rs` (the example project, its
//!   nine example events with fresh ids; nearly every decision is `throttled`).
//!
//! Each length gets a peak in MB (`VmHWM` at the process's exit, see tests/common/measure.rs),
//! its wall time, and jq's peak on the same file (`jq -c` with the benchmark's filter) as the
//! baseline. Then the ratio of the largest length's peak to the 100k peak, and the bound:
//! at most `store_cache` + 64 MB.
//!
//! Scale: `PAP_BENCH_MEMORY_MAX` (default 1000000) is the largest length of 10k, 100k, 1M and
//! 10M run (10M takes several minutes a stream, and 5 GB of disk for its two files).
//! `PAP_BENCH_STORE_CACHE` (e.g. `64MiB`) goes into each project's pap.yaml as `store_cache`;
//! without it the default (256 MiB). A cache the 100k stream already fills shows the flat line
//! from 100k on; the default fills between 100k and 1M.
//!
//! Run: `cargo bench --bench dispatch_memory` (builds the release binary).

// A harness around pap reads the system's time to set the clock of what it runs (clippy.toml
// keeps the product to the injected clock).
#![allow(clippy::disallowed_methods)]

#[path = "common/example_events.rs"]
#[allow(dead_code)]
mod example_events;
#[path = "../tests/common/measure.rs"]
#[allow(dead_code)]
mod measure;

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

const LENGTHS: [usize; 4] = [10_000, 100_000, 1_000_000, 10_000_000];
const TYPES: [&str; 4] = [
    "grid.price.updated",
    "grid.load.updated",
    "grid.flow.updated",
    "grid.reserve.updated",
];
const REGIONS: [&str; 5] = ["NO1", "NO2", "NO3", "NO4", "NO5"];
const INVOCATION_JQ: &str =
    r#"select(.data.price_nok_per_kwh > 3 and (.data.region == "NO1" or .data.region == "NO2"))"#;
/// jq's side of `benches/dispatch.rs`, shortened: the type matched and one condition.
const THROTTLE_JQ: &str = r#"select(.type == "energy.price.threshold_exceeded" and .data.price_nok_per_kwh > 3) // {event_id: .id}"#;
const DEFAULT_CACHE_MB: f64 = 256.0 * 1.048_576;

fn main() {
    let max: usize = std::env::var("PAP_BENCH_MEMORY_MAX")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000_000);
    let cache = std::env::var("PAP_BENCH_STORE_CACHE").ok();
    let cache_mb = cache.as_deref().map_or(DEFAULT_CACHE_MB, mib_of);
    let jq = Command::new("jq").arg("--version").output().is_ok();
    let lengths: Vec<usize> = LENGTHS.into_iter().filter(|n| *n <= max).collect();
    let dir = tempfile::tempdir().expect("temp dir");
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));

    let inv = dir.path().join("invocation-heavy");
    invocation_project(&inv, cache.as_deref());
    let thr = dir.path().join("throttle-heavy");
    throttle_project(manifest, &thr, cache.as_deref());
    let templates = example_events(&manifest.join("examples/events"));

    println!(
        "pap dispatch --no-run --json, peak RSS by stream length; store_cache {} ({cache_mb:.0} MB); bound: store_cache + 64 MB = {:.0} MB",
        cache.as_deref().unwrap_or("256MiB (default)"),
        cache_mb + 64.0
    );
    for (name, root, jq_filter) in [
        ("invocation-heavy", &inv, INVOCATION_JQ),
        ("throttle-heavy", &thr, THROTTLE_JQ),
    ] {
        println!("{name}:");
        let mut peaks = Vec::new();
        for &n in &lengths {
            let file = dir.path().join(format!("{name}-{n}.ndjson"));
            let bytes = if name == "invocation-heavy" {
                invocation_events(&file, n)
            } else {
                throttle_events(&templates, &file, n)
            };
            let state = root.join("state");
            let started = Instant::now();
            let (status, pap_kib) = measure::status_with_peak_kib(
                Command::new(env!("CARGO_BIN_EXE_pap"))
                    .env_remove("PAP_NOW")
                    .arg("--root")
                    .arg(root)
                    .arg("--state")
                    .arg(&state)
                    .args(["dispatch", "--no-run", "--json"])
                    .arg(&file)
                    .stdout(Stdio::null())
                    .stderr(Stdio::null()),
            );
            let took = started.elapsed();
            assert!(status.success(), "pap dispatch failed: {status}");
            let _ = std::fs::remove_dir_all(&state);
            let pap_mb = mb(pap_kib);
            peaks.push((n, pap_mb));
            let jq_part = if jq {
                let (status, jq_kib) = measure::status_with_peak_kib(
                    Command::new("jq")
                        .args(["-c", jq_filter])
                        .arg(&file)
                        .stdout(Stdio::null())
                        .stderr(Stdio::null()),
                );
                assert!(status.success(), "jq failed: {status}");
                format!("jq {:.1} MB", mb(jq_kib))
            } else {
                "jq not installed".to_owned()
            };
            println!(
                "  {n:>10} events ({:>7.1} MB): pap {pap_mb:>6.1} MB peak in {:>6.1} s, {jq_part}",
                bytes as f64 / 1e6,
                took.as_secs_f64()
            );
            let _ = std::fs::remove_file(&file);
        }
        let at_100k = peaks.iter().find(|(n, _)| *n == 100_000).map(|p| p.1);
        let (largest, peak) = *peaks.last().expect("a length");
        if let Some(base) = at_100k.filter(|_| largest > 100_000) {
            println!(
                "  {largest} / 100000 events: peak ratio {:.3} (the goal is within 10%: at most 1.10)",
                peak / base
            );
        }
        println!(
            "  largest peak {peak:.1} MB against the bound {:.1} MB: {}",
            cache_mb + 64.0,
            if peak <= cache_mb + 64.0 {
                format!("within, {:.1} MB to spare", cache_mb + 64.0 - peak)
            } else {
                format!("OVER by {:.1} MB", peak - cache_mb - 64.0)
            }
        );
    }
}

fn mb(kib: u64) -> f64 {
    kib as f64 * 1024.0 / 1e6
}

/// `64MiB`, `1GiB` in MB (10⁶ bytes).
fn mib_of(size: &str) -> f64 {
    let digits: String = size.chars().take_while(char::is_ascii_digit).collect();
    let n: f64 = digits
        .parse()
        .expect("PAP_BENCH_STORE_CACHE: a number of MiB or GiB");
    let unit = match &size[digits.len()..] {
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        other => panic!("PAP_BENCH_STORE_CACHE: unit {other}: use MiB or GiB"),
    };
    n * unit as f64 / 1e6
}

fn pap_yaml(cache: Option<&str>) -> String {
    match cache {
        Some(size) => format!("pap_version: \"0.2\"\nstore_cache: {size}\n"),
        None => "pap_version: \"0.2\"\n".to_owned(),
    }
}

fn invocation_project(root: &Path, cache: Option<&str>) {
    std::fs::create_dir_all(root.join("triggers")).unwrap();
    std::fs::create_dir_all(root.join("agents")).unwrap();
    std::fs::write(root.join("pap.yaml"), pap_yaml(cache)).unwrap();
    std::fs::write(
        root.join("agents/noop.yaml"),
        "pap_version: \"0.2\"\nagent:\n  id: noop\n  risk_level: read_only\n  model:\n    provider: command\n    command: [\"true\"]\n",
    )
    .unwrap();
    for (t, kind) in TYPES.iter().enumerate() {
        for region in REGIONS {
            let id = format!("t{t}-{}", region.to_lowercase());
            std::fs::write(
                root.join(format!("triggers/{id}.yaml")),
                format!(
                    "pap_version: \"0.2\"\ntrigger:\n  id: {id}\n  match:\n    type: {kind}\n  filter:\n    - path: $.data.region\n      operator: eq\n      value: {region}\n    - path: $.data.price_nok_per_kwh\n      operator: gte\n      value: 0\n    - path: $.data.station\n      operator: exists\n    - path: $.data.source_system\n      operator: regex\n      value: '^scada-'\n  agent: noop\n"
                ),
            )
            .unwrap();
        }
    }
}

/// The example project, with pap.yaml's `store_cache` set when asked.
fn throttle_project(manifest: &Path, root: &Path, cache: Option<&str>) {
    example_events::copy_example_project(manifest, root);
    let mut yaml = std::fs::read_to_string(manifest.join("pap.yaml")).unwrap();
    if let Some(size) = cache {
        yaml.push_str(&format!("\nstore_cache: {size}\n"));
    }
    std::fs::write(root.join("pap.yaml"), yaml).unwrap();
}

/// The stream of `benches/dispatch_invocations.rs`, written as it is made; its bytes.
fn invocation_events(out: &Path, n: usize) -> usize {
    let mut file = std::io::BufWriter::new(std::fs::File::create(out).unwrap());
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let mut bytes = 0;
    for i in 0..n {
        let kind = TYPES[i % TYPES.len()];
        let region = REGIONS[(next() % 5) as usize];
        let price = (next() % 800) as f64 / 100.0;
        let line = format!(
            "{{\"pap_version\":\"0.2\",\"id\":\"evt-{i:08}\",\"type\":\"{kind}\",\"source\":\"scada/bench\",\"time\":\"2026-03-11T05:59:00Z\",\"data\":{{\"region\":\"{region}\",\"price_nok_per_kwh\":{price},\"station\":\"st-{}\",\"source_system\":\"scada-{}\"}}}}\n",
            next() % 400,
            next() % 7
        );
        bytes += line.len();
        file.write_all(line.as_bytes()).unwrap();
    }
    file.flush().unwrap();
    bytes
}

/// The example events, each as JSON text with its id left out to be filled in.
fn example_events(dir: &Path) -> Vec<(String, String)> {
    let mut templates: Vec<serde_json::Value> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| serde_json::from_slice(&std::fs::read(e.unwrap().path()).unwrap()).unwrap())
        .collect();
    templates.sort_by_key(|t| t["id"].to_string());
    templates
        .into_iter()
        .map(|mut t| {
            t["id"] = "\u{1}".into();
            let text = t.to_string();
            let (head, tail) = text.split_once("\"\\u0001\"").expect("the id's place");
            (head.to_owned(), tail.to_owned())
        })
        .collect()
}

/// The stream of `benches/dispatch.rs`: the example events in turn, each with its own id.
fn throttle_events(templates: &[(String, String)], out: &Path, n: usize) -> usize {
    let mut file = std::io::BufWriter::new(std::fs::File::create(out).unwrap());
    let mut bytes = 0;
    for i in 0..n {
        let (head, tail) = &templates[i % templates.len()];
        let line = format!("{head}\"bench-{i:08}\"{tail}\n");
        bytes += line.len();
        file.write_all(line.as_bytes()).unwrap();
    }
    file.flush().unwrap();
    bytes
}
