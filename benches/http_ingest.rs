//! Benchmark of `POST /v1/events` on `pap serve --listen`, with a load generator (reqwest on
//! tokio, keep-alive connections) in this process:
//!
//! 1. baseline, in the same run: `pap dispatch --no-run` of the same events as one NDJSON
//!    stream (one process, group commits of up to 32,768 events);
//! 2. batches: 100 events per request, 4 clients at once;
//! 3. single events: one event per request, 32 clients at once (the deciding thread groups
//!    what waits into one transaction).
//!
//! Every event is new and passes its trigger's filter, so each decision queues an invocation
//! (claim, throttle window, invocation record, ledger row): the expensive path. Serve runs
//! one invocation at a time (`max_concurrent: 1`) with an agent that sleeps, so the runs do
//! not compete with the decisions for the CPU. Reported: events per second, the latency
//! from sending a request to its 2xx (p50, p99), and what one fsync costs here now.
//!
//! The single events run again with `serve.log_decisions: true` (a log line per event and
//! trigger at INFO, as a full access log) against the default (one INFO line a request): the
//! cost of logging, with each run's log lines and bytes per event.
//!
//! Run: `cargo bench --bench http_ingest` (`PAP_BENCH_HTTP_EVENTS`, default 20,000 per part).

// A harness around pap reads the system's time to set the clock of what it runs (clippy.toml
// keeps the product to the injected clock).
#![allow(clippy::disallowed_methods)]

#[path = "common/bench_project.rs"]
mod bench_project;
#[path = "../tests/common/measure.rs"]
#[allow(dead_code)]
mod measure;

use bench_project::{event, pap, write_project};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn main() {
    let n: usize = std::env::var("PAP_BENCH_HTTP_EVENTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000);
    let dir = tempfile::tempdir().expect("temp dir");
    let root = dir.path();
    let config = "pap_version: \"0.2\"\nserve:\n  max_concurrent: 1\n  grace_period: 0s\nlisten:\n  max_queued_events: 1000000\n";
    write_project(root, "[\"sleep\", \"600\"]", config);
    // The same project, logging every decision at INFO.
    let logged = root.join("logged");
    write_project(
        &logged,
        "[\"sleep\", \"600\"]",
        &config.replace("serve:\n", "serve:\n  log_decisions: true\n"),
    );
    let (fsync_median, fsync_p90) = measure::fsync_ms(root);

    // 1. The baseline.
    let file = root.join("events.ndjson");
    let text: String = (0..n)
        .map(|i| format!("{}\n", event(&format!("d{i}"))))
        .collect();
    std::fs::write(&file, text).unwrap();
    let state = root.join("state-dispatch");
    let started = Instant::now();
    let status = pap(root, &state)
        .args(["dispatch", "--no-run", "--json"])
        .arg(&file)
        .stdout(Stdio::null())
        .status()
        .unwrap();
    let dispatch_secs = started.elapsed().as_secs_f64();
    assert!(status.success());
    let baseline = n as f64 / dispatch_secs;
    println!(
        "baseline: pap dispatch --no-run, {n} events as one NDJSON stream: {dispatch_secs:.2} s, {baseline:.0} events/s"
    );

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let parts = [
        ("batches of 100", 100, 4, root),
        ("single events", 1, 32, root),
        (
            "single events, log_decisions: true",
            1,
            32,
            logged.as_path(),
        ),
    ];
    for (part, (name, per_request, clients, project)) in parts.into_iter().enumerate() {
        let state = root.join(format!("state-{part}"));
        let (serve, url) = start(project, &state);
        let bodies: Vec<String> = (0..n)
            .collect::<Vec<_>>()
            .chunks(per_request)
            .map(|chunk| {
                chunk
                    .iter()
                    .map(|i| format!("{}\n", event(&format!("h{per_request}-{i}"))))
                    .collect()
            })
            .collect();
        let (secs, mut latencies) = rt.block_on(load(&url, bodies, clients));
        stop(serve);
        let log = std::fs::read_to_string(state.join("serve.log")).unwrap_or_default();
        let (lines, bytes) = (log.lines().count(), log.len());
        latencies.sort_by(f64::total_cmp);
        let pct = |p: f64| latencies[((latencies.len() - 1) as f64 * p).round() as usize];
        let rate = n as f64 / secs;
        println!(
            "POST /v1/events, {name} ({clients} clients): {secs:.2} s, {rate:.0} events/s ({:.2}× the dispatch stream); request → 2xx p50 {:.1} ms, p99 {:.1} ms; log {:.2} lines, {:.0} bytes an event",
            rate / baseline,
            pct(0.5),
            pct(0.99),
            lines as f64 / n as f64,
            bytes as f64 / n as f64,
        );
    }
    println!(
        "fsync (fdatasync of 4 KiB) here now: median {fsync_median:.2} ms, p90 {fsync_p90:.2} ms"
    );
}

/// Sends every body from `clients` tasks over keep-alive connections; returns the seconds
/// it all took and each request's latency in ms.
async fn load(url: &str, bodies: Vec<String>, clients: usize) -> (f64, Vec<f64>) {
    // reqwest is built without a TLS provider of its own (as pap installs ring, so does this).
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(clients)
        .build()
        .unwrap();
    let queue = Arc::new(std::sync::Mutex::new(bodies));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..clients {
        let (client, queue, url) = (client.clone(), queue.clone(), url.to_owned());
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            loop {
                let Some(body) = queue.lock().unwrap().pop() else {
                    break;
                };
                let sent = Instant::now();
                let r = client
                    .post(&url)
                    .header("content-type", "application/x-ndjson")
                    .body(body)
                    .send()
                    .await
                    .expect("a reply");
                assert_eq!(r.status(), 200, "{:?}", r.text().await);
                let _ = r.bytes().await.unwrap();
                latencies.push(sent.elapsed().as_secs_f64() * 1e3);
            }
            latencies
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    (started.elapsed().as_secs_f64(), all)
}

fn start(root: &Path, state: &Path) -> (Child, String) {
    std::fs::create_dir_all(state).unwrap();
    let log_path = state.join("serve.log");
    let log = std::fs::File::create(&log_path).unwrap();
    let child = pap(root, state)
        .args(["serve", "--log-format", "json", "--listen", "127.0.0.1:0"])
        .stderr(log)
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let url = listening_url(&log_path);
    (child, url)
}

/// The `/v1/events` URL of the serve logging to `log_path`, once it has started.
fn listening_url(log_path: &Path) -> String {
    let started = Instant::now();
    loop {
        let text = std::fs::read_to_string(log_path).unwrap_or_default();
        let url = text
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .find(|l| l["fields"]["message"] == "listening for HTTP")
            .and_then(|l| l["fields"]["url"].as_str().map(str::to_owned));
        if let Some(url) = url
            && text.contains("pap serve started")
        {
            return format!("{url}/v1/events");
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "serve did not start"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn stop(mut child: Child) {
    let _ = Command::new("kill").arg(child.id().to_string()).status();
    let _ = child.wait();
}
