//! Benchmark: an invocation-heavy stream. 20 triggers over 4 event types (5 per type, each
//! with four conditions, no throttle); every event matches the 5 triggers of its type and
//! passes the filter of exactly one (its region's), so one decision in five queues an
//! invocation. `pap dispatch --no-run --json` of 100,000 such events, next to jq's bare
//! `select` on the same file in the same run:
//!
//!     jq -c 'select(.data.price_nok_per_kwh > 3 and (.data.region == "NO1" or .data.region == "NO2"))'
//!
//! Also the store's size per queued invocation, beyond the events' own bytes: (state size on
//! disk − empty state size − the events' bytes) / invocations, and the cost of an fdatasync on this
//! disk in the same run. `PAP_BENCH_EVENTS` sets the stream's length.
//!
//! And the floor, in the same run: redb alone writing the records pap writes (and only the
//! claim and the event's body), grouped as pap groups them, so a reader can tell how much of
//! pap's time is the embedded store's own cost.
//!
//! Run: `cargo bench --bench dispatch_invocations` (builds the release binary).

// A harness around pap reads the system's time to set the clock of what it runs (clippy.toml
// keeps the product to the injected clock).
#![allow(clippy::disallowed_methods)]

#[path = "../tests/common/measure.rs"]
#[allow(dead_code)]
mod measure;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const TYPES: [&str; 4] = [
    "grid.price.updated",
    "grid.load.updated",
    "grid.flow.updated",
    "grid.reserve.updated",
];
const REGIONS: [&str; 5] = ["NO1", "NO2", "NO3", "NO4", "NO5"];
const ROUNDS: usize = 3;
const JQ_FILTER: &str =
    r#"select(.data.price_nok_per_kwh > 3 and (.data.region == "NO1" or .data.region == "NO2"))"#;

fn main() {
    let events: usize = std::env::var("PAP_BENCH_EVENTS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(100_000);
    let dir = tempfile::tempdir().expect("temp dir");
    let root = dir.path();
    write_project(root);
    let file = root.join("events.ndjson");
    let (bytes, event_bytes) = generate(&file, events);

    let mut pap_times = Vec::new();
    let mut jq_times = Vec::new();
    let mut store = None;
    for round in 0..ROUNDS {
        let state = root.join(format!("state-{round}"));
        pap_times.push(time(|| {
            let status = pap(root, &state)
                .args(["dispatch", "--no-run", "--json"])
                .arg(&file)
                .stdout(Stdio::null())
                .status()
                .unwrap();
            assert!(status.success(), "pap dispatch failed");
        }));
        if store.is_none() {
            store = Some(state_size(&state));
        }
        if let Ok(t) = try_time(|| {
            Command::new("jq")
                .args(["-c", JQ_FILTER])
                .arg(&file)
                .stdout(Stdio::null())
                .status()
        }) {
            jq_times.push(t);
        }
        let _ = std::fs::remove_dir_all(&state);
    }
    // An empty state: one event that matches nothing.
    let empty = root.join("state-empty");
    std::fs::write(
        root.join("none.json"),
        r#"{"pap_version":"0.2","id":"x","type":"other.thing.happened","source":"bench","time":"2026-03-11T05:59:00Z","data":{}}"#,
    )
    .unwrap();
    let status = pap(root, &empty)
        .args(["dispatch", "--no-run"])
        .arg(root.join("none.json"))
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    let empty_size = state_size(&empty);

    let pap_t = median(&mut pap_times);
    println!(
        "invocation-heavy stream: {events} events ({:.1} MB), 20 triggers, one decision in five queues an invocation ({} invocations)",
        bytes as f64 / 1e6,
        events
    );
    println!(
        "  pap dispatch --no-run --json: {:.0} ms median of {ROUNDS} ({:.0} events/s)",
        ms(pap_t),
        events as f64 / pap_t.as_secs_f64()
    );
    if jq_times.is_empty() {
        println!("  baseline: jq not installed, skipped");
    } else {
        let jq_t = median(&mut jq_times);
        println!(
            "  jq -c 'select(…)' on the same file: {:.0} ms median ({:.0} events/s); pap's rate is {:.2}x jq's",
            ms(jq_t),
            events as f64 / jq_t.as_secs_f64(),
            jq_t.as_secs_f64() / pap_t.as_secs_f64()
        );
    }
    let store = store.unwrap();
    println!(
        "  store: {:.1} MB after the stream, {:.1} MB empty; events' own bytes {:.1} MB; {:.0} bytes per queued invocation beyond them",
        store as f64 / 1e6,
        empty_size as f64 / 1e6,
        event_bytes as f64 / 1e6,
        (store as f64 - empty_size as f64 - event_bytes as f64) / events as f64
    );
    let floor = store_floor(&file, &root.join("floor.redb"));
    println!(
        "  floor, same run: redb alone writing the same records (event body, claim, invocation, work index; ledger rows in blocks) in groups of 32,768 durable commits: {:.0} ms; only the claim and the event's body: {:.0} ms; parsing the lines into serde_json values and a SHA-256 key each, one thread: {:.0} ms",
        ms(floor.store),
        ms(floor.claim_and_event),
        ms(floor.parse)
    );
    if !jq_times.is_empty() {
        let jq_t = median(&mut jq_times);
        println!(
            "  2x jq's rate leaves {:.0} ms for everything; redb's writes alone take {:.0}% of that ({:.0}% for the claim and the event's body only)",
            ms(jq_t) / 2.0,
            100.0 * floor.store.as_secs_f64() / (jq_t.as_secs_f64() / 2.0),
            100.0 * floor.claim_and_event.as_secs_f64() / (jq_t.as_secs_f64() / 2.0)
        );
    }
    let (median, p90) = measure::fsync_ms(root);
    println!(
        "  fdatasync of a 4 KiB append on this disk, same run: median {median:.2} ms, p90 {p90:.2} ms"
    );
}

struct Floor {
    /// Every record pap writes per queued invocation.
    store: Duration,
    /// Only the idempotency claim and the event's body: what no durable design can skip.
    claim_and_event: Duration,
    parse: Duration,
}

/// What any durable implementation of these decisions costs on redb, without pap: the same
/// records pap writes per queued invocation (the event's body once, the 32-byte claim, the
/// packed invocation record under a 17-byte time-ordered id, its work-index entry, and a
/// 70-byte ledger row packed in blocks of 1,024), committed durably every 32,768 events as
/// `pap dispatch` groups them. The parse floor is serde_json into a `Value` plus one SHA-256
/// per line, what reading the events costs before any filter runs.
fn store_floor(file: &Path, db_path: &Path) -> Floor {
    use redb::{Database, TableDefinition};
    use sha2::{Digest, Sha256};
    const EVENTS: TableDefinition<u64, &[u8]> = TableDefinition::new("events");
    const CLAIMS: TableDefinition<&[u8; 32], (i64, i64, u64)> = TableDefinition::new("claims");
    const INVOCATIONS: TableDefinition<&[u8], &[u8]> = TableDefinition::new("invocations");
    const WORK: TableDefinition<(i64, &[u8]), ()> = TableDefinition::new("work");
    const LEDGER: TableDefinition<u64, &[u8]> = TableDefinition::new("ledger_blocks");

    let text = std::fs::read_to_string(file).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let keys: Vec<[u8; 32]> = lines
        .iter()
        .map(|l| Sha256::digest(l.as_bytes()).into())
        .collect();
    let parse = time(|| {
        for line in &lines {
            let value: serde_json::Value = serde_json::from_str(line).unwrap();
            let key: [u8; 32] = Sha256::digest(line.as_bytes()).into();
            std::hint::black_box((value, key));
        }
    });
    let record = [7u8; 92];
    let ledger_row = [3u8; 70];
    let store = time(|| {
        let db = Database::create(db_path).unwrap();
        let mut seq = 0u64;
        for group in lines.chunks(32_768) {
            let tx = db.begin_write().unwrap();
            {
                let mut events = tx.open_table(EVENTS).unwrap();
                let mut claims = tx.open_table(CLAIMS).unwrap();
                let mut invocations = tx.open_table(INVOCATIONS).unwrap();
                let mut work = tx.open_table(WORK).unwrap();
                let mut ledger = tx.open_table(LEDGER).unwrap();
                let mut block = Vec::with_capacity(1024 * 70);
                for line in group {
                    let n = seq;
                    seq += 1;
                    events.insert(n, line.as_bytes()).unwrap();
                    claims
                        .insert(&keys[n as usize], (1_773_208_740_000i64, 0i64, n))
                        .unwrap();
                    let mut id = [0u8; 17];
                    id[..8].copy_from_slice(&(1_773_208_740_000u64 + n).to_be_bytes());
                    id[8..16].copy_from_slice(&n.to_le_bytes());
                    invocations.insert(&id[..], &record[..]).unwrap();
                    work.insert((1_773_208_740_000i64, &id[..]), ()).unwrap();
                    block.extend_from_slice(&ledger_row);
                    if block.len() == 1024 * 70 {
                        ledger.insert(n / 1024, &block[..]).unwrap();
                        block.clear();
                    }
                }
                if !block.is_empty() {
                    ledger.insert(seq / 1024, &block[..]).unwrap();
                }
            }
            tx.commit().unwrap();
        }
    });
    let _ = std::fs::remove_file(db_path);
    let claim_and_event = time(|| {
        let db = Database::create(db_path).unwrap();
        let mut seq = 0u64;
        for group in lines.chunks(32_768) {
            let tx = db.begin_write().unwrap();
            {
                let mut claims = tx.open_table(CLAIMS).unwrap();
                let mut events = tx.open_table(EVENTS).unwrap();
                for line in group {
                    let n = seq;
                    seq += 1;
                    claims
                        .insert(&keys[n as usize], (1_773_208_740_000i64, 0i64, n))
                        .unwrap();
                    events.insert(n, line.as_bytes()).unwrap();
                }
            }
            tx.commit().unwrap();
        }
    });
    let _ = std::fs::remove_file(db_path);
    Floor {
        store,
        claim_and_event,
        parse,
    }
}

fn write_project(root: &Path) {
    std::fs::create_dir_all(root.join("triggers")).unwrap();
    std::fs::create_dir_all(root.join("agents")).unwrap();
    std::fs::write(root.join("pap.yaml"), "pap_version: \"0.2\"\n").unwrap();
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

/// The stream, and the bytes of the events' JSON that the store keeps (each event once).
fn generate(out: &Path, n: usize) -> (usize, usize) {
    let mut text = String::with_capacity(n * 220);
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for i in 0..n {
        let kind = TYPES[i % TYPES.len()];
        let region = REGIONS[(next() % 5) as usize];
        let price = (next() % 800) as f64 / 100.0;
        let line = format!(
            r#"{{"pap_version":"0.2","id":"evt-{i:07}","type":"{kind}","source":"scada/bench","time":"2026-03-11T05:59:00Z","data":{{"region":"{region}","price_nok_per_kwh":{price},"station":"st-{}","source_system":"scada-{}"}}}}"#,
            next() % 400,
            next() % 7
        );
        text.push_str(&line);
        text.push('\n');
    }
    std::fs::write(out, &text).unwrap();
    (text.len(), text.len() - n)
}

/// The state dir's files as the disk holds them (allocated blocks, as `du` counts): redb
/// sizes its file in whole regions, so its length says little about what it holds.
fn state_size(state: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::read_dir(state)
        .unwrap()
        .filter_map(|e| e.ok()?.metadata().ok())
        .filter(|m| m.is_file())
        .map(|m| m.blocks() * 512)
        .sum()
}

fn pap(root: &Path, state: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_pap"));
    cmd.arg("--root").arg(root).arg("--state").arg(state);
    cmd.env_remove("PAP_NOW");
    cmd
}

fn time(f: impl FnOnce()) -> Duration {
    let started = Instant::now();
    f();
    started.elapsed()
}

fn try_time(
    f: impl FnOnce() -> std::io::Result<std::process::ExitStatus>,
) -> std::io::Result<Duration> {
    let started = Instant::now();
    let status = f()?;
    if !status.success() {
        return Err(std::io::Error::other("failed"));
    }
    Ok(started.elapsed())
}

fn median(times: &mut [Duration]) -> Duration {
    times.sort();
    times[times.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
