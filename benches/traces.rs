//! Benchmark: what traces cost. The workload is `pap dispatch --no-run --json` of
//! 50,000 NDJSON events against the example project (validation, the five stages, SHA-256
//! keys, a redb commit per group: the expensive path of a decision), timed as the CPU seconds
//! (user + system) of the whole process, in three variants run in turn, round after round, so
//! that a drift of the machine's speed falls on all of them alike:
//!
//! - **off**: this pap, traces off (no endpoint): the engine makes no span;
//! - **baseline**: the pap of the commit before traces, when `PAP_BENCH_BASELINE` names its
//!   binary, on the same file;
//! - **on**: this pap exporting every span (a decision and a trigger span per event) over OTLP
//!   HTTP/protobuf to a collector in this process that answers at once.
//!
//! It prints each variant's median and range, the median of the per-round ratios off/baseline
//! with their range (the noise), the fsync of this disk and the load, measured in the same run.
//!
//! Run: `cargo bench --bench traces`, with `PAP_BENCH_BASELINE=/path/to/pap` for the baseline:
//!
//! ```sh
//! git worktree add /tmp/pap-base fdc3da6
//! (cd /tmp/pap-base && cargo build --release --bin pap)
//! PAP_BENCH_BASELINE=/tmp/pap-base/target/release/pap cargo bench --bench traces
//! ```
//!
//! `PAP_BENCH_ROUNDS` sets the rounds (default 11, at least 9).

// A harness around pap reads the system's time and clock (clippy.toml keeps the product to
// the injected clock).
#![allow(clippy::disallowed_methods)]

#[path = "common/example_events.rs"]
mod example_events;
#[path = "../tests/common/measure.rs"]
#[allow(dead_code)]
mod measure;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

const EVENTS: usize = 50_000;

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let rounds: usize = std::env::var("PAP_BENCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(11)
        .max(9);
    let dir = tempfile::tempdir().expect("temp dir");
    // Two copies of the example project: the one traced says `traces:` (a bigger queue, so
    // the figure counts every span rather than drops), which the baseline would not load.
    let plain = dir.path().join("plain");
    let traced = dir.path().join("traced");
    for project in [&plain, &traced] {
        example_events::copy_example_project(root, project);
    }
    let mut yaml = std::fs::read_to_string(traced.join("pap.yaml")).unwrap();
    yaml.push_str("\ntraces:\n  max_queue: 1000000\n");
    std::fs::write(traced.join("pap.yaml"), yaml).unwrap();
    let events = dir.path().join("events.ndjson");
    example_events::generate(&root.join("examples/events"), &events, EVENTS);
    let collector = collector();

    let this = PathBuf::from(env!("CARGO_BIN_EXE_pap"));
    let baseline = std::env::var_os("PAP_BENCH_BASELINE").map(PathBuf::from);
    let mut off = Vec::new();
    let mut base = Vec::new();
    let mut on = Vec::new();
    let mut ratios = Vec::new();
    for round in 0..rounds {
        let state = |name: &str| dir.path().join(format!("state-{name}-{round}"));
        // The order turns each round, so none always runs first (a warm cache, a cold one).
        let mut order = vec!["off", "on"];
        if baseline.is_some() {
            order.insert(1, "base");
        }
        let turn = round % order.len();
        order.rotate_left(turn);
        let (mut o, mut b) = (None, None);
        for variant in order {
            match variant {
                "off" => {
                    let t = cpu_of(&this, &plain, &state("off"), &events, &[]);
                    o = Some(t);
                    off.push(t);
                }
                "base" => {
                    let bin = baseline.as_ref().expect("only with a baseline");
                    let t = cpu_of(bin, &plain, &state("base"), &events, &[]);
                    b = Some(t);
                    base.push(t);
                }
                _ => on.push(cpu_of(
                    &this,
                    &traced,
                    &state("on"),
                    &events,
                    &[("OTEL_EXPORTER_OTLP_ENDPOINT", collector.as_str())],
                )),
            }
        }
        if let (Some(o), Some(b)) = (o, b) {
            ratios.push(o / b);
        }
    }
    println!(
        "dispatch --no-run --json of {EVENTS} NDJSON events on the example project: CPU seconds (user + system) of the process, {rounds} rounds in turn"
    );
    println!("  traces off:              {}", spread(&mut off, "s"));
    match baseline {
        Some(_) => {
            println!("  baseline (before traces): {}", spread(&mut base, "s"));
            println!("  off / baseline, per round: {}", spread(&mut ratios, "x"));
        }
        None => println!(
            "  baseline: not run (set PAP_BENCH_BASELINE to the binary of the commit before traces)"
        ),
    }
    println!(
        "  traces on (OTLP to a local collector): {}",
        spread(&mut on, "s")
    );
    let (median, p90) = measure::fsync_ms(dir.path());
    println!(
        "  fdatasync of a 4 KiB append on this disk, same run: median {median:.2} ms, p90 {p90:.2} ms"
    );
    println!(
        "  load average at the end: {}",
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .trim()
    );
}

/// The CPU seconds of one `pap dispatch` (its own and its children's, which it waits for).
fn cpu_of(pap: &Path, project: &Path, state: &Path, events: &Path, env: &[(&str, &str)]) -> f64 {
    use nix::sys::resource::{UsageWho, getrusage};
    let seconds = |u: nix::sys::resource::Usage| {
        let t = |tv: nix::sys::time::TimeVal| tv.tv_sec() as f64 + tv.tv_usec() as f64 / 1e6;
        t(u.user_time()) + t(u.system_time())
    };
    let before = seconds(getrusage(UsageWho::RUSAGE_CHILDREN).unwrap());
    let status = Command::new(pap)
        .arg("--root")
        .arg(project)
        .arg("--state")
        .arg(state)
        .args(["dispatch", "--no-run", "--json"])
        .arg(events)
        .envs(env.iter().copied())
        .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        .stdout(Stdio::null())
        .status()
        .expect("run pap");
    assert!(status.success(), "pap dispatch failed: {status}");
    seconds(getrusage(UsageWho::RUSAGE_CHILDREN).unwrap()) - before
}

/// A collector that takes every export and answers 200 at once, on its own thread; its URL.
fn collector() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            std::thread::spawn(move || {
                // One request at a time on the connection: headers, then the body.
                let mut buf = Vec::new();
                let mut chunk = [0u8; 64 * 1024];
                loop {
                    let Ok(n) = conn.read(&mut chunk) else { return };
                    if n == 0 {
                        return;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                    while let Some(end) = find(&buf, b"\r\n\r\n") {
                        let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
                        let len: usize = head
                            .lines()
                            .find_map(|l| l.strip_prefix("content-length:"))
                            .and_then(|v| v.trim().parse().ok())
                            .unwrap_or(0);
                        if buf.len() < end + 4 + len {
                            break;
                        }
                        buf.drain(..end + 4 + len);
                        let _ = conn.write_all(
                            b"HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\n\r\n",
                        );
                    }
                }
            });
        }
    });
    url
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// `median (min – max)`.
fn spread(values: &mut [f64], unit: &str) -> String {
    values.sort_by(f64::total_cmp);
    let m = values[values.len() / 2];
    format!(
        "median {m:.3} {unit} (min {:.3}, max {:.3}, n {})",
        values[0],
        values[values.len() - 1],
        values.len()
    )
}
