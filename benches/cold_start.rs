//! Benchmark: the cost of starting pap on a large project. A project of 1,000 triggers
//! (four conditions each, one of them a regex, and a throttle with a window key) over 200
//! agents (command agents with limits, an output schema, retries and completion events), and
//! one event that matches no trigger: `pap dispatch --no-run FILE`, a new process each time,
//! against jq's cold start on the same event file (`jq -c . FILE`) in the same run.
//!
//! The first dispatch after a change of the manifests is timed apart (it checks every file
//! and writes the compiled form); the figure to compare is the median of the runs after it.
//! `PAP_BENCH_RUNS` sets how many runs (default 30); `PAP_BENCH_PROJECT=DIR` only writes the
//! project into DIR (to profile it by hand).
//!
//! Run: `cargo bench --bench cold_start` (builds the release binary).

// A harness around pap reads the system's time to set the clock of what it runs (clippy.toml
// keeps the product to the injected clock).
#![allow(clippy::disallowed_methods)]

#[path = "../tests/common/measure.rs"]
#[allow(dead_code)]
mod measure;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const TRIGGERS: usize = 1000;
const AGENTS: usize = 200;
const TYPES: usize = 50;

fn main() {
    let runs: usize = std::env::var("PAP_BENCH_RUNS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(30);
    if let Some(dir) = std::env::var_os("PAP_BENCH_PROJECT") {
        write_project(Path::new(&dir));
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let root = dir.path();
    let manifest_bytes = write_project(root);
    let event = root.join("event.json");
    std::fs::write(
        &event,
        r#"{"pap_version":"0.2","id":"evt-cold","type":"nothing.matches.this","source":"bench/cold","time":"2026-03-11T05:59:00Z","data":{"host":"web-1","value":3.5}}"#,
    )
    .unwrap();
    let state = root.join(".pap");

    // The first run after the manifests changed.
    let first = time(|| dispatch(root, &state, &event));
    let mut pap_times = Vec::with_capacity(runs);
    let mut jq_times = Vec::with_capacity(runs);
    // Interleaved, so a noisy neighbour hits both alike.
    for _ in 0..runs {
        pap_times.push(time(|| dispatch(root, &state, &event)));
        if let Ok(t) = jq(&event) {
            jq_times.push(t);
        }
    }
    let pap_t = median(&mut pap_times);
    println!(
        "cold start: {TRIGGERS} triggers, {AGENTS} agents ({:.1} MB of YAML), one event that matches no trigger",
        manifest_bytes as f64 / 1e6
    );
    println!(
        "  first pap dispatch --no-run after the manifests changed: {:.1} ms",
        ms(first)
    );
    println!(
        "  pap dispatch --no-run, median of {runs}: {:.1} ms (p90 {:.1} ms)",
        ms(pap_t),
        ms(pap_times[runs * 9 / 10])
    );
    if jq_times.is_empty() {
        println!("  baseline: jq not installed, skipped");
    } else {
        let jq_t = median(&mut jq_times);
        println!(
            "  baseline: jq -c . on the same event file, median of {runs}: {:.1} ms; pap costs {:.2}x jq",
            ms(jq_t),
            pap_t.as_secs_f64() / jq_t.as_secs_f64()
        );
    }
    let (median, p90) = measure::fsync_ms(root);
    println!(
        "  fdatasync of a 4 KiB append on this disk, same run: median {median:.2} ms, p90 {p90:.2} ms"
    );
}

fn dispatch(root: &Path, state: &Path, event: &Path) {
    let status = Command::new(env!("CARGO_BIN_EXE_pap"))
        .arg("--root")
        .arg(root)
        .arg("--state")
        .arg(state)
        .args(["dispatch", "--no-run"])
        .arg(event)
        .env_remove("PAP_NOW")
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success(), "pap dispatch failed");
}

fn jq(event: &Path) -> std::io::Result<Duration> {
    let started = Instant::now();
    let status = Command::new("jq")
        .args(["-c", "."])
        .arg(event)
        .stdout(Stdio::null())
        .status()?;
    if !status.success() {
        return Err(std::io::Error::other("jq failed"));
    }
    Ok(started.elapsed())
}

/// Writes the project; returns the manifests' size in bytes.
fn write_project(root: &Path) -> usize {
    std::fs::create_dir_all(root.join("triggers")).unwrap();
    std::fs::create_dir_all(root.join("agents")).unwrap();
    let mut bytes = 0;
    let mut write = |path: String, text: String| {
        bytes += text.len();
        std::fs::write(root.join(path), text).unwrap();
    };
    write(
        "pap.yaml".into(),
        "pap_version: \"0.2\"\nidempotency_ttl: 48h\nmax_cascade_depth: 3\n".into(),
    );
    for a in 0..AGENTS {
        write(
            format!("agents/agent-{a:03}.yaml"),
            format!(
                r#"# Agent {a}: a remediation script for one service.
pap_version: "0.2"
agent:
  id: agent-{a:03}
  description: >
    Looks at the host named in the event, collects the service's recent logs and metrics,
    and writes a short triage with a severity and the next steps for the on-call engineer.
  risk_level: low
  model:
    provider: command
    command: ["sh", "-c", "echo '{{\"severity\": \"minor\", \"summary\": \"ok\"}}'"]
  limits:
    max_runtime_seconds: 60
    max_tool_calls: 0
  output:
    type: structured
    schema:
      severity: string
      summary: string
  on_complete:
    emit_event: pap.agent.invocation.completed
  on_failure:
    retry:
      max_attempts: 3
      backoff_seconds: 10
    emit_event: pap.agent.invocation.failed
"#
            ),
        );
    }
    for t in 0..TRIGGERS {
        let kind = t % TYPES;
        write(
            format!("triggers/trigger-{t:04}.yaml"),
            format!(
                r#"# Trigger {t}: a threshold on one service's metric.
pap_version: "0.2"
trigger:
  id: trigger-{t:04}
  description: >
    When the metric of service {t} crosses its threshold in production, provoke its
    remediation agent, at most twice per host per hour.
  enabled: true
  match:
    type: monitoring.metric{kind:02}.threshold_exceeded
  filter:
    - path: $.data.value
      operator: gt
      value: {threshold}
    - path: $.data.environment
      operator: in
      value: [production, staging]
    - path: $.data.host
      operator: regex
      value: '^(web|api|worker)-[0-9]+$'
    - path: $.data.service
      operator: eq
      value: service-{t:04}
  throttle:
    max_per_window: 2
    window_seconds: 3600
    window_key: $.data.host
  agent: agent-{agent:03}
"#,
                threshold = 50 + t % 40,
                agent = t % AGENTS
            ),
        );
    }
    bytes
}

fn time(f: impl FnOnce()) -> Duration {
    let started = Instant::now();
    f();
    started.elapsed()
}

fn median(times: &mut [Duration]) -> Duration {
    times.sort();
    times[times.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
