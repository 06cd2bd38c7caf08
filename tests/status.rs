//! `pap status`: healthy (0), needs attention (5) and unreadable (1), while serve runs and
//! after it stopped.

use crate::common;

use std::process::Stdio;
use std::time::{Duration, Instant};

use common::dispatch::{Project, T0, ev};
use common::{code, stderr, stdout};
use serde_json::{Value, json};

fn status(p: &Project, at: &str) -> (i32, Value) {
    let out = p.cmd(at).args(["status", "--json"]).output().unwrap();
    let text = stdout(&out);
    let value = serde_json::from_str(text.trim())
        .unwrap_or_else(|e| panic!("not JSON ({e}): {text} {}", stderr(&out)));
    (code(&out), value)
}

#[test]
fn no_state_is_exit_1() {
    let p = Project::new();
    let out = p.cmd(T0).args(["status"]).output().unwrap();
    if common::on_postgres() {
        // A migrated database is a state, empty and healthy.
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        return;
    }
    assert_eq!(code(&out), 1);
    assert!(
        stderr(&out).contains("no state store at"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn an_approval_past_half_its_deadline_and_overdue_work_need_a_person() {
    let p = Project::new();
    let inv = p.awaiting("a1");
    let (code0, s) = status(&p, T0);
    assert_eq!(code0, 0, "{s}");
    assert_eq!(s["healthy"], true);
    assert_eq!(s["serve"], Value::Null);
    assert_eq!(s["queue"], json!({"awaiting_approval": 1}));
    assert_eq!(s["approvals"][0]["id"], inv.as_str());
    assert_eq!(s["approvals"][0]["deadline"], "2026-03-12T06:00:00.000Z");
    assert!(s["store"]["bytes"].as_u64().unwrap() > 0);

    // Thirteen of its twenty-four hours later.
    let (code, s) = status(&p, "2026-03-11T19:00:00Z");
    assert_eq!(code, 5, "{s}");
    assert_eq!(s["approvals"][0]["past_half"], true);
    let attention = s["attention"].to_string();
    assert!(
        attention.contains("past half their deadline"),
        "{attention}"
    );

    // Queued work that nobody takes: due, and no serve runs (degraded at once, not
    // only once overdue).
    let p = Project::new();
    let file = p.events("q.ndjson", &[ev("q1", "test.basic.happened", json!({}))]);
    assert_eq!(p.dispatch(T0, &file, &["--no-run"]).code, 0);
    let (code, s) = status(&p, "2026-03-11T06:00:01Z");
    assert_eq!(code, 5, "{s}");
    let attention = s["attention"].to_string();
    assert!(
        attention.contains("1 queued invocation(s) due, and no pap serve is running"),
        "{attention}"
    );
    let human = p
        .cmd("2026-03-11T06:06:00Z")
        .args(["status"])
        .output()
        .unwrap();
    assert!(
        stdout(&human).contains("needs attention"),
        "{}",
        stdout(&human)
    );
}

#[test]
fn status_names_a_running_serve_and_sees_it_gone() {
    let p = Project::new();
    let file = p.events("e.ndjson", &[ev("e1", "test.basic.happened", json!({}))]);
    assert_eq!(p.dispatch(T0, &file, &[]).code, 0);
    let mut serve = p
        .cmd(T0)
        .arg("serve")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let started = Instant::now();
    let running = loop {
        let (code, s) = status(&p, T0);
        if !s["serve"].is_null() {
            assert_eq!(code, 0, "{s}");
            break s;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "serve never showed: {s}"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(running["serve"]["pid"], serve.id());
    assert!(running["serve"]["since"].is_string());
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(serve.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    assert!(serve.wait().unwrap().success());
    let (code, s) = status(&p, T0);
    assert_eq!((code, &s["serve"]), (0, &Value::Null), "{s}");
}

/// What `pap status` reads of a large store: what a read of the whole store would be is far
/// more than it reads. Its counts come from kept counters and from the shorter side of `now`
/// in the time indexes, the oldest approvals from the head of their index, the short ids from
/// a key-only pass; the tables' sizes, which take a walk over every page, only with
/// `--tables`. The bytes are the process's own (`rchar` of `/proc/PID/io`, which the shell
/// that waited for it holds), so the test does not depend on the machine's speed; the
/// benchmark `cargo bench --bench status` gives the time at 50,000 approvals and 100,000
/// queued runs.
#[test]
fn status_on_a_large_store_reads_a_small_part_of_it() {
    if common::on_postgres() {
        return;
    }
    let p = common::serve::Project::new();
    let mut events = String::new();
    for n in 0..6_000 {
        events.push_str(&format!(
            "{}\n",
            ev(&format!("g{n}"), "test.gated.happened", json!({}))
        ));
    }
    for n in 0..12_000 {
        events.push_str(&format!(
            "{}\n",
            ev(&format!("q{n}"), "test.quick.happened", json!({}))
        ));
    }
    let file = p.root().join("many.ndjson");
    std::fs::write(&file, events).unwrap();
    let out = p
        .cmd()
        .args(["dispatch", "--no-run"])
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let file_bytes = std::fs::metadata(p.root().join(".pap/state.redb"))
        .unwrap()
        .len();
    // Bytes read by `pap status ARGS`, and its report.
    let read = |args: &str| {
        let script = format!(
            "\"$PAP\" --root \"$ROOT\" status --json {args} > \"$ROOT/status.json\"; while read -r k v; do [ \"$k\" = rchar: ] && echo \"$v\"; done < /proc/$$/io"
        );
        let out = std::process::Command::new("sh")
            .args(["-c", &script])
            .env("PAP", env!("CARGO_BIN_EXE_pap"))
            .env("ROOT", p.root())
            .output()
            .unwrap();
        let bytes: u64 = stdout(&out).trim().parse().unwrap();
        let report: Value =
            serde_json::from_str(&std::fs::read_to_string(p.root().join("status.json")).unwrap())
                .unwrap();
        (bytes, report)
    };
    let (bytes, report) = read("");
    assert_eq!(
        report["queue"],
        json!({"awaiting_approval": 6000, "queued": 12000})
    );
    assert_eq!(report["approvals_waiting"], 6000);
    assert!(
        report["attention"]
            .to_string()
            .contains("12000 queued invocation(s) due"),
        "{report}"
    );
    assert_eq!(report["approvals"].as_array().unwrap().len(), 20);
    assert!(
        bytes < file_bytes / 4,
        "pap status read {bytes} bytes of a {file_bytes}-byte store"
    );
    // With --tables it measures every table, reading the whole store.
    let (with_tables, report) = read("--tables");
    assert!(report["store"]["tables"].as_array().unwrap().len() > 5);
    assert!(
        with_tables > file_bytes / 2,
        "{with_tables} of {file_bytes}"
    );
}
