//! Benchmark: 100 concurrent LLM invocations against a fake provider that answers each request
//! after 200 ms, and what pap adds beyond that latency. Baseline in the same run: the same 100
//! requests sent concurrently by a bare reqwest client (no pap) to the same kind of server.
//!
//! Then memory: the peak RSS (`VmHWM`) of the same `pap dispatch` of 100 events at `-j 1`,
//! `-j 10` and `-j 100`. The store's work is the same in each, so what grows with `-j` is
//! what each run in flight holds; per run it is set beside the run's transcript (the bytes
//! of its request and reply) against the goal of at most 0.5 MB beyond it.
//!
//! Run: `cargo bench --bench llm` (builds the release binary).

// A harness around pap reads the system's time to set the clock of what it runs (clippy.toml
// keeps the product to the injected clock).
#![allow(clippy::disallowed_methods)]

#[path = "../tests/common/fake_llm.rs"]
#[allow(dead_code)]
mod fake_llm;
#[path = "../tests/common/measure.rs"]
#[allow(dead_code)]
mod measure;

use std::process::Command;
use std::time::{Duration, Instant};

use fake_llm::{FakeLlm, Scripted, anthropic_text};
use serde_json::json;

const INVOCATIONS: usize = 100;
const LATENCY: Duration = Duration::from_millis(200);
const ROUNDS: usize = 3;

fn script() -> Vec<Scripted> {
    (0..INVOCATIONS)
        .map(|_| Scripted::ok(anthropic_text("{\"ok\": true}")).delayed(LATENCY))
        .collect()
}

fn main() {
    let mut pap_times = Vec::new();
    let mut base_times = Vec::new();
    for _ in 0..ROUNDS {
        pap_times.push(pap_round(INVOCATIONS).took);
        base_times.push(baseline_round());
    }
    let pap = median(&mut pap_times);
    let base = median(&mut base_times);
    let per = |d: Duration| d.saturating_sub(LATENCY).as_secs_f64() * 1e3 / INVOCATIONS as f64;
    println!(
        "{INVOCATIONS} concurrent LLM invocations, provider latency {} ms, median of {ROUNDS}",
        LATENCY.as_millis()
    );
    println!(
        "  pap dispatch -j {INVOCATIONS} (store, prompt, HTTP, output check, completion event): {:>6.0} ms",
        ms(pap)
    );
    println!(
        "  baseline: {INVOCATIONS} concurrent POSTs from a bare reqwest client:                 {:>6.0} ms",
        ms(base)
    );
    println!(
        "  beyond the latency, per invocation: pap {:.2} ms, baseline {:.2} ms; pap's own overhead {:.2} ms",
        per(pap),
        per(base),
        per(pap) - per(base)
    );
    // Every invocation's start and end are commits: the figure means little without this.
    let dir = tempfile::tempdir().unwrap();
    let (median, p90) = measure::fsync_ms(dir.path());
    println!(
        "  fdatasync of a 4 KiB append on this disk, same run: median {median:.2} ms, p90 {p90:.2} ms"
    );
    memory();
}

/// Peak RSS against the number of runs in flight.
fn memory() {
    println!(
        "peak RSS of `pap dispatch` of {INVOCATIONS} LLM invocations, by runs in flight (-j):"
    );
    let rounds: Vec<(usize, Round)> = [1, 10, INVOCATIONS]
        .into_iter()
        .map(|jobs| (jobs, pap_round(jobs)))
        .collect();
    for (jobs, r) in &rounds {
        println!(
            "  -j {jobs:>3}: {:>6.1} MiB ({:.1} s)",
            r.peak_kib as f64 / 1024.0,
            r.took.as_secs_f64()
        );
    }
    let (one, all) = (&rounds[0].1, &rounds[rounds.len() - 1].1);
    let per_run_kib = (all.peak_kib as f64 - one.peak_kib as f64) / (INVOCATIONS - 1) as f64;
    let transcript_kib = all.transcript_bytes as f64 / INVOCATIONS as f64 / 1024.0;
    let beyond = per_run_kib - transcript_kib;
    println!(
        "  each run in flight: {per_run_kib:.0} KiB, its transcript {transcript_kib:.1} KiB: {beyond:.0} KiB beyond it (goal at most 512 KiB: {})",
        if beyond <= 512.0 { "met" } else { "NOT met" }
    );
}

struct Round {
    took: Duration,
    /// The process's peak RSS (`VmHWM`).
    peak_kib: u64,
    /// The requests' and replies' bodies, all runs together.
    transcript_bytes: usize,
}

/// One `pap dispatch` of 100 events, each invoking the agent once, `jobs` at a time.
fn pap_round(jobs: usize) -> Round {
    let fake = FakeLlm::start(script());
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir_all(root.join("agents")).unwrap();
    std::fs::create_dir_all(root.join("triggers")).unwrap();
    std::fs::write(root.join("pap.yaml"), "pap_version: \"0.2\"\n").unwrap();
    std::fs::write(
        root.join("triggers/t.yaml"),
        "pap_version: \"0.2\"\ntrigger:\n  id: t\n  match:\n    type: bench.llm.asked\n  agent: a\n",
    )
    .unwrap();
    std::fs::write(
        root.join("agents/a.yaml"),
        format!(
            "pap_version: \"0.2\"\nagent:\n  id: a\n  risk_level: low\n  model:\n    provider: anthropic\n    model_id: bench\n    base_url: \"{}\"\n  output:\n    type: structured\n  on_complete:\n    emit_event: pap.agent.invocation.completed\n",
            fake.url
        ),
    )
    .unwrap();
    let events: String = (0..INVOCATIONS)
        .map(|i| {
            format!(
                "{}\n",
                json!({"pap_version": "0.2", "id": format!("b{i}"), "type": "bench.llm.asked",
                       "source": "bench", "time": "2026-03-11T06:00:00Z", "data": {"n": i}})
            )
        })
        .collect();
    std::fs::write(root.join("events.ndjson"), events).unwrap();
    let started = Instant::now();
    let (out, peak_kib) = measure::output_with_peak_kib(
        Command::new(env!("CARGO_BIN_EXE_pap"))
            .arg("--root")
            .arg(root)
            .args(["dispatch", "--json", "-j", &jobs.to_string()])
            .arg(root.join("events.ndjson"))
            .env("ANTHROPIC_API_KEY", "bench"),
    );
    let took = started.elapsed();
    assert!(
        out.status.success(),
        "pap dispatch failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let requests = fake.requests();
    assert_eq!(requests.len(), INVOCATIONS);
    let reply = anthropic_text("{\"ok\": true}").to_string().len();
    let transcript_bytes = requests
        .iter()
        .map(|r| r.body.to_string().len() + reply)
        .sum();
    Round {
        took,
        peak_kib,
        transcript_bytes,
    }
}

fn baseline_round() -> Duration {
    let fake = FakeLlm::start(script());
    let rt = tokio::runtime::Runtime::new().unwrap();
    let started = Instant::now();
    rt.block_on(async {
        // reqwest is built without a TLS provider of its own (as pap installs ring, so does this).
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = reqwest::Client::new();
        let mut set = tokio::task::JoinSet::new();
        for _ in 0..INVOCATIONS {
            let client = client.clone();
            let url = format!("{}/v1/messages", fake.url);
            set.spawn(async move {
                let r = client
                    .post(url)
                    .json(&json!({"model": "bench", "messages": []}))
                    .send()
                    .await
                    .unwrap();
                r.bytes().await.unwrap();
            });
        }
        while set.join_next().await.is_some() {}
    });
    started.elapsed()
}

fn median(times: &mut [Duration]) -> Duration {
    times.sort();
    times[times.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}
