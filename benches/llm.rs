//! Benchmark: 100 concurrent LLM invocations against a fake provider that answers each request
//! after 200 ms, and what pap adds beyond that latency. Baseline in the same run: the same 100
//! requests sent concurrently by a bare reqwest client (no pap) to the same kind of server.
//!
//! Run: `cargo bench --bench llm` (builds the release binary).

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
        pap_times.push(pap_round());
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
}

/// One `pap dispatch` of 100 events, each invoking the agent once.
fn pap_round() -> Duration {
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
    let out = Command::new(env!("CARGO_BIN_EXE_pap"))
        .arg("--root")
        .arg(root)
        .args(["dispatch", "--json", "-j", &INVOCATIONS.to_string()])
        .arg(root.join("events.ndjson"))
        .env("ANTHROPIC_API_KEY", "bench")
        .output()
        .expect("run pap");
    let took = started.elapsed();
    assert!(
        out.status.success(),
        "pap dispatch failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(fake.requests().len(), INVOCATIONS);
    took
}

fn baseline_round() -> Duration {
    let fake = FakeLlm::start(script());
    let rt = tokio::runtime::Runtime::new().unwrap();
    let started = Instant::now();
    rt.block_on(async {
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
