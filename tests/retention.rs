//! Retention through the real binary on the injected clock: `pap serve`'s purge removes
//! finished invocations, settled notifications, inbox messages and audit entries once they
//! are older than their retention, keeps what is younger or unfinished, and keeps the
//! counts that `pap status` shows right.

use crate::common;

use std::path::Path;
use std::process::Output;

use serde_json::{Value, json};

const T0_SECS: i64 = 1_773_208_800; // 2026-03-11T06:00:00Z
const DAY: i64 = 24 * 3600;

fn at(offset_secs: i64) -> String {
    jiff::Timestamp::from_second(T0_SECS + offset_secs)
        .unwrap()
        .to_string()
}

/// A project with one trigger whose command agent succeeds, and a high-risk one that waits
/// for approval; retentions shorter than the defaults where `yaml` says.
fn project(serve_yaml: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir_all(root.join("triggers")).unwrap();
    std::fs::create_dir_all(root.join("agents")).unwrap();
    std::fs::write(
        root.join("pap.yaml"),
        format!("pap_version: \"0.2\"\n{serve_yaml}"),
    )
    .unwrap();
    for (id, risk) in [("fix", "low"), ("careful", "high")] {
        std::fs::write(
            root.join(format!("agents/{id}.yaml")),
            format!(
                "pap_version: \"0.2\"\nagent:\n  id: {id}\n  risk_level: {risk}\n  model:\n    provider: command\n    command: [\"sh\", \"-c\", \"cat > /dev/null; echo '{{}}'\"]\n"
            ),
        )
        .unwrap();
    }
    for (id, kind, agent) in [
        ("fix", "host.alert.fired", "fix"),
        ("careful", "host.alert.grave", "careful"),
    ] {
        std::fs::write(
            root.join(format!("triggers/{id}.yaml")),
            format!(
                "pap_version: \"0.2\"\ntrigger:\n  id: {id}\n  match:\n    type: {kind}\n  agent: {agent}\n"
            ),
        )
        .unwrap();
    }
    dir
}

fn dispatch(root: &Path, offset: i64, id: &str, kind: &str, extra: &[&str]) -> Value {
    let event = json!({
        "pap_version": "0.2", "id": id, "type": kind, "source": "test",
        "time": at(offset), "data": {"host": "db1"}
    });
    let file = root.join(format!("{id}.json"));
    std::fs::write(&file, event.to_string()).unwrap();
    let out = common::pap_at(root)
        .env("PAP_NOW", at(offset))
        .arg("dispatch")
        .arg(&file)
        .arg("--json")
        .args(extra)
        .output()
        .unwrap();
    assert!(
        matches!(common::code(&out), 0 | 3),
        "{}",
        common::stderr(&out)
    );
    let line: Value = serde_json::from_str(common::stdout(&out).lines().next().unwrap()).unwrap();
    line["triggers"][0].clone()
}

fn serve_once(root: &Path, offset: i64) -> Output {
    let out = common::pap_at(root)
        .env("PAP_NOW", at(offset))
        .args(["serve", "--once", "--log-format", "json"])
        .output()
        .unwrap();
    assert_eq!(common::code(&out), 0, "{}", common::stderr(&out));
    out
}

/// `pap SUBCOMMAND --json` at `offset`, parsed (one document, or NDJSON lines as an array).
fn listing(root: &Path, offset: i64, args: &[&str]) -> Vec<Value> {
    let out = common::pap_at(root)
        .env("PAP_NOW", at(offset))
        .args(args)
        .arg("--json")
        .output()
        .unwrap();
    assert_eq!(common::code(&out), 0, "{}", common::stderr(&out));
    let text = common::stdout(&out);
    match serde_json::from_str::<Value>(&text) {
        Ok(Value::Array(items)) => items,
        Ok(other) => vec![other],
        Err(_) => text
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| serde_json::from_str(l).unwrap())
            .collect(),
    }
}

fn ids(items: &[Value], field: &str) -> Vec<String> {
    let mut ids: Vec<String> = items
        .iter()
        .filter_map(|i| i[field].as_str().map(str::to_owned))
        .collect();
    ids.sort();
    ids
}

/// The purge's log lines: kind → records removed.
fn purged(out: &Output) -> std::collections::BTreeMap<String, u64> {
    let mut by_kind = std::collections::BTreeMap::new();
    for line in common::stderr(out).lines() {
        let Ok(v) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        if v["fields"]["message"] == "purged expired state" {
            *by_kind
                .entry(v["fields"]["kind"].as_str().unwrap_or("?").to_owned())
                .or_default() += v["fields"]["removed"].as_u64().unwrap_or(0);
        }
    }
    by_kind
}

#[test]
fn records_past_their_retention_go_and_younger_or_unfinished_ones_stay() {
    let dir = project("serve:\n  audit_retention: 10d\n");
    let root = dir.path();
    // Day 0: two runs that succeed, one cancelled before it ran (an audit entry), and one
    // that waits for approval and is approved on day 1 (so it changed on day 1).
    for id in ["old-1", "old-2"] {
        assert_eq!(
            dispatch(root, 0, id, "host.alert.fired", &[])["outcome"],
            "invoked"
        );
    }
    let queued = dispatch(root, 0, "old-3", "host.alert.fired", &["--no-run"]);
    let queued_id = queued["invocation_id"].as_str().unwrap().to_owned();
    let out = common::pap_at(root)
        .env("PAP_NOW", at(60))
        .args(["invocations", "cancel", &queued_id])
        .output()
        .unwrap();
    assert_eq!(common::code(&out), 0, "{}", common::stderr(&out));
    let waiting = dispatch(root, 0, "old-4", "host.alert.grave", &[]);
    assert_eq!(waiting["outcome"], "awaiting_approval");
    // Day 20: a younger run.
    assert_eq!(
        dispatch(root, 20 * DAY, "young-1", "host.alert.fired", &[])["outcome"],
        "invoked"
    );
    let before = listing(root, 20 * DAY, &["invocations"]);
    assert_eq!(before.len(), 5, "{before:#?}");
    let notes_before = listing(root, 20 * DAY, &["notifications"]);
    let inbox_before = listing(root, 20 * DAY, &["inbox"]);
    assert!(!notes_before.is_empty() && !inbox_before.is_empty());
    assert!(!listing(root, 20 * DAY, &["audit"]).is_empty());

    // Day 31: the day-0 records are past the 30-day retentions, the audit entries past 10
    // days. The approval's deadline passed on day 1, but this serve is the first writer to
    // record it expired: it changed now, so it stays.
    let out = serve_once(root, 31 * DAY);
    let by_kind = purged(&out);
    assert_eq!(by_kind.get("invocations"), Some(&3), "{by_kind:?}");
    assert!(by_kind.get("audit").is_some_and(|n| *n >= 1), "{by_kind:?}");

    let left = listing(root, 31 * DAY, &["invocations"]);
    let left_events: Vec<String> = ids(&left, "event_id");
    assert_eq!(left_events, ["old-4", "young-1"], "{left:#?}");
    // What is left still reads whole (its event's body was kept).
    for inv in &left {
        let id = inv["id"].as_str().unwrap();
        let shown = listing(root, 31 * DAY, &["invocations", "show", id]);
        assert_eq!(shown[0]["event"]["id"], inv["event_id"], "{shown:#?}");
    }
    // Notifications and inbox messages of day 0 went; day 20's stayed, and so did old-4's
    // approval request: it was settled when its expiry was recorded (it changed then, as its
    // invocation did).
    let notes: Vec<Value> = listing(root, 31 * DAY, &["notifications"]);
    assert!(notes.len() < notes_before.len(), "{notes:#?}");
    for n in &notes {
        let created = n["created_at"].as_str().unwrap_or_default();
        let settled_late =
            n["metadata"]["event_id"] == "old-4" && n["closed"]["reason"] == "expired";
        assert!(
            created.as_bytes() >= at(DAY).as_bytes() || settled_late,
            "a notification of day 0 is left: {n:#}"
        );
    }
    let inbox = listing(root, 31 * DAY, &["inbox"]);
    assert!(inbox.len() < inbox_before.len(), "{inbox:#?}");
    assert!(
        listing(root, 31 * DAY, &["audit"]).iter().all(|e| {
            e["at"].as_str().unwrap_or_default().as_bytes() >= at(21 * DAY).as_bytes()
        })
    );

    // The store is whole: every invocation left reads with its event.
    let check = common::pap_at(root)
        .args(["store", "check"])
        .output()
        .unwrap();
    assert_eq!(common::code(&check), 0, "{}", common::stderr(&check));

    // A second pass finds nothing more to remove.
    let again = serve_once(root, 31 * DAY + 60);
    assert_eq!(purged(&again).get("invocations"), None);
}

/// A throttled stream's claims and ledger rows, purged a retention later, leave a file larger
/// than its data until `pap store compact`, which gives the room back (and refuses to run
/// beside serve).
#[test]
fn compaction_gives_back_what_the_purge_freed_and_never_runs_beside_serve() {
    let dir = project("");
    let root = dir.path();
    std::fs::write(
        root.join("triggers/fix.yaml"),
        "pap_version: \"0.2\"\ntrigger:\n  id: fix\n  match:\n    type: host.alert.fired\n  throttle:\n    max_per_window: 1\n    window_seconds: 3600\n  agent: fix\n",
    )
    .unwrap();
    let n: usize = std::env::var("PAP_TEST_COMPACT_EVENTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000);
    let stream: String = (0..n)
        .map(|i| {
            format!(
                "{}\n",
                json!({"pap_version": "0.2", "id": format!("e{i:07}"), "type": "host.alert.fired",
                       "source": "test", "time": at(0), "data": {"host": format!("h{i}")}})
            )
        })
        .collect();
    std::fs::write(root.join("stream.ndjson"), stream).unwrap();
    let out = common::pap_at(root)
        .env("PAP_NOW", at(0))
        .arg("dispatch")
        .arg(root.join("stream.ndjson"))
        .args(["--no-run", "--json"])
        .stdout(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(common::code(&out), 0, "{}", common::stderr(&out));
    if common::on_postgres() {
        return on_postgres_the_purge_empties_the_tables_and_compaction_says_what_to_do(root, n);
    }
    let state = root.join(".pap/state.redb");
    let full = std::fs::metadata(&state).unwrap().len();

    // 31 days on: the claims and the ledger rows go.
    let out = serve_once(root, 31 * DAY);
    let by_kind = purged(&out);
    assert_eq!(by_kind.get("claims"), Some(&(n as u64)), "{by_kind:?}");
    assert_eq!(by_kind.get("ledger"), Some(&(n as u64)), "{by_kind:?}");
    let purged_len = std::fs::metadata(&state).unwrap().len();

    // `pap status` shows where the room goes.
    let status = common::pap_at(root)
        .env("PAP_NOW", at(31 * DAY))
        .args(["status", "--json", "--tables"])
        .output()
        .unwrap();
    let status = common::json(&status);
    let tables = status["store"]["tables"].as_array().unwrap();
    let live: u64 = tables.iter().map(|t| t["bytes"].as_u64().unwrap()).sum();
    let claims = tables.iter().find(|t| t["name"] == "claims").unwrap();
    assert_eq!(claims["rows"], 0, "{tables:#?}");
    assert!(
        purged_len as f64 > 1.5 * live as f64,
        "the purged file ({purged_len} bytes, {full} before) should be well over its data ({live})"
    );

    // Beside a running serve, compaction is refused, and says why.
    let mut serve = common::pap_at(root)
        .env("PAP_NOW", at(31 * DAY))
        .args(["serve"])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Serve holds its lock once it names itself in the lock file.
    let lock = root.join(".pap/serve.lock");
    let started = std::time::Instant::now();
    while !std::fs::read_to_string(&lock)
        .unwrap_or_default()
        .contains(&format!("\"pid\":{}", serve.id()))
    {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(20),
            "serve did not start"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let refused = common::pap_at(root)
        .args(["store", "compact"])
        .output()
        .unwrap();
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(serve.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    );
    serve.wait().unwrap();
    let why = common::stderr(&refused);
    assert_eq!(common::code(&refused), 1, "{why}");
    assert!(
        why.contains("needs the store to itself") && why.contains("pap serve"),
        "{why}"
    );

    // With serve stopped, it gives the room back.
    let out = common::pap_at(root)
        .args(["store", "compact", "--json"])
        .output()
        .unwrap();
    assert_eq!(common::code(&out), 0, "{}", common::stderr(&out));
    let done = common::json(&out);
    let (before, after, live) = (
        done["before"].as_u64().unwrap(),
        done["after"].as_u64().unwrap(),
        done["live"].as_u64().unwrap(),
    );
    assert_eq!(after, std::fs::metadata(&state).unwrap().len());
    assert!(after < before, "{done}");
    // Within 1.5× its data, plus what a file holding nothing takes once compacted (its
    // header and redb's own tables: 37 kB), which a small test's data does not dwarf.
    assert!(
        after as f64 <= 1.5 * live as f64 + 64.0 * 1024.0,
        "after compaction the file ({after} bytes) is within 1.5× its data ({live}): {done}"
    );
    // And the store is sound.
    let check = common::pap_at(root)
        .args(["store", "check"])
        .output()
        .unwrap();
    assert_eq!(common::code(&check), 0, "{}", common::stderr(&check));
}

/// The PostgreSQL side of the test above: the same purge, table sizes from the database, and
/// `pap store compact` refused with what to do instead.
fn on_postgres_the_purge_empties_the_tables_and_compaction_says_what_to_do(root: &Path, n: usize) {
    let out = serve_once(root, 31 * DAY);
    let by_kind = purged(&out);
    assert_eq!(by_kind.get("claims"), Some(&(n as u64)), "{by_kind:?}");
    assert_eq!(by_kind.get("ledger"), Some(&(n as u64)), "{by_kind:?}");
    let status = common::pap_at(root)
        .env("PAP_NOW", at(31 * DAY))
        .args(["status", "--json", "--tables"])
        .output()
        .unwrap();
    let status = common::json(&status);
    let tables = status["store"]["tables"].as_array().unwrap();
    for name in ["pap_claims", "pap_ledger", "pap_invocations"] {
        assert!(
            tables
                .iter()
                .any(|t| t["name"] == name && t["bytes"].as_u64() > Some(0)),
            "{name} in {tables:#?}"
        );
    }
    let out = common::pap_at(root)
        .args(["store", "compact"])
        .output()
        .unwrap();
    let why = common::stderr(&out);
    assert_eq!(common::code(&out), 1, "{why}");
    assert!(
        why.contains("PostgreSQL") && why.contains("Autovacuum"),
        "{why}"
    );
}
