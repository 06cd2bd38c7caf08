//! Concurrency keys (a pap extension) through the real binary: with a limit of 1 per host,
//! five queued runs on one host run one at a time, in the order they were decided, while
//! another host's run goes in parallel; `pap dispatch` runs its own in order and leaves to
//! `pap serve` what another process's run holds up.

use crate::common;

mod backlog;
mod schema_upgrade;

use std::path::Path;

use serde_json::{Value, json};

const T0: &str = "2026-03-11T06:00:00Z";

/// A project whose trigger allows one run at a time per host; its agent logs its start and
/// end (wall clock, ns) with the event's host and number, sleeping `sleep` seconds between.
fn project(sleep: &str) -> tempfile::TempDir {
    project_with(|log| {
        format!(
            "in=$(cat); host=$(printf '%s' \"$in\" | sed -n 's/.*\\\"host\\\":\\\"\\([a-z0-9]*\\)\\\".*/\\1/p'); n=$(printf '%s' \"$in\" | sed -n 's/.*\\\"n\\\":\\([0-9]*\\).*/\\1/p'); echo \"start $host $n $(date +%s%N)\" >> '{log}'; sleep {sleep}; echo \"end $host $n $(date +%s%N)\" >> '{log}'; echo '{{}}'",
            log = log.display()
        )
    })
}

/// A project whose trigger allows one run at a time per host, whose agent runs the shell
/// `script` made for the project's `runs.log`.
fn project_with(script: impl FnOnce(&Path) -> String) -> tempfile::TempDir {
    common::shell_agent::project("", "  concurrency: {limit: 1, key: $.data.host}\n", script)
}

fn events(root: &Path, name: &str, hosts: &[(&str, u32)]) -> std::path::PathBuf {
    let text: String = hosts
        .iter()
        .map(|(host, n)| {
            format!(
                "{}\n",
                json!({
                    "pap_version": "0.2", "id": format!("{host}-{n}"), "type": "host.disk.full",
                    "source": "test", "time": T0, "data": {"host": host, "n": n}
                })
            )
        })
        .collect();
    let file = root.join(name);
    std::fs::write(&file, text).unwrap();
    file
}

/// One line of an agent's log: (kind, host, n, ns).
use common::shell_agent::{HostLine as Entry, host_log as log};

/// Runs of `host` never overlap, and start in the order of their numbers.
fn one_at_a_time_in_order(entries: &[Entry], host: &str) {
    let mine: Vec<_> = entries.iter().filter(|e| e.1 == host).collect();
    let mut open = None;
    let mut order = Vec::new();
    for (kind, _, n, _) in &mine {
        match kind.as_str() {
            "start" => {
                assert!(
                    open.is_none(),
                    "{host}: run {n} started while {open:?} ran: {mine:?}"
                );
                open = Some(*n);
                order.push(*n);
            }
            _ => {
                assert_eq!(open, Some(*n), "{mine:?}");
                open = None;
            }
        }
    }
    let mut sorted = order.clone();
    sorted.sort_unstable();
    assert_eq!(order, sorted, "{host}: started out of decision order");
}

#[test]
fn five_queued_runs_on_one_key_run_one_at_a_time_in_order_beside_another_key() {
    let dir = project("0.3");
    let root = dir.path();
    let file = events(
        root,
        "burst.ndjson",
        &[
            ("db1", 1),
            ("db1", 2),
            ("db2", 1),
            ("db1", 3),
            ("db1", 4),
            ("db1", 5),
        ],
    );
    let out = common::pap_at(root)
        .env("PAP_NOW", T0)
        .args(["dispatch", "--no-run", "--json"])
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(common::code(&out), 0, "{}", common::stderr(&out));
    let out = common::pap_at(root)
        .env("PAP_NOW", T0)
        .args(["serve", "--once", "--max-concurrent", "4"])
        .output()
        .unwrap();
    assert_eq!(common::code(&out), 0, "{}", common::stderr(&out));
    let entries = log(root);
    assert_eq!(
        entries.len(),
        12,
        "every run started and ended: {entries:?}"
    );
    one_at_a_time_in_order(&entries, "db1");
    // db2 did not wait for db1's queue: it started before db1's last run ended.
    let db2_start = entries
        .iter()
        .find(|e| e.0 == "start" && e.1 == "db2")
        .unwrap()
        .3;
    let db1_last_end = entries
        .iter()
        .rev()
        .find(|e| e.0 == "end" && e.1 == "db1")
        .unwrap()
        .3;
    assert!(db2_start < db1_last_end, "{entries:?}");
    // Every invocation succeeded.
    let list = common::pap_at(root)
        .args(["invocations", "--json"])
        .output()
        .unwrap();
    assert_eq!(common::statuses(&list), vec!["succeeded"; 6]);
}

#[test]
fn dispatch_runs_its_own_in_order_and_leaves_a_held_slot_to_serve() {
    let dir = project("0.1");
    let root = dir.path();
    let file = events(root, "three.ndjson", &[("db1", 1), ("db1", 2), ("db1", 3)]);
    let out = common::pap_at(root)
        .env("PAP_NOW", T0)
        .args(["dispatch", "--json", "-j", "3"])
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(common::code(&out), 0, "{}", common::stderr(&out));
    let results: Vec<String> = common::stdout(&out)
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|v| v["type"] == "host.disk.full")
        .map(|v| v["triggers"][0]["result"].as_str().unwrap_or("").to_owned())
        .collect();
    assert_eq!(results, ["succeeded"; 3]);
    one_at_a_time_in_order(&log(root), "db1");

    // Another process holds the slot: a run decided now is left queued for serve. Its agent
    // runs 2 s, so that the second process (a debug build, beside the rest of the suite) is
    // sure to decide while the first run holds the slot.
    let dir = project("2");
    let root = dir.path();
    let held = events(root, "held.ndjson", &[("db9", 1)]);
    let queued = events(root, "later.ndjson", &[("db9", 2)]);
    let mut slow = common::pap_at(root)
        .env("PAP_NOW", T0)
        .args(["dispatch", "--json"])
        .arg(&held)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Wait until its run has started.
    let started = std::time::Instant::now();
    while !log(root).iter().any(|e| e.0 == "start" && e.1 == "db9") {
        assert!(
            started.elapsed() < common::serve::patience(),
            "the first run never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let out = common::pap_at(root)
        .env("PAP_NOW", T0)
        .args(["dispatch", "--json"])
        .arg(&queued)
        .output()
        .unwrap();
    assert_eq!(common::code(&out), 0, "{}", common::stderr(&out));
    let line: Value = serde_json::from_str(common::stdout(&out).lines().next().unwrap()).unwrap();
    let t = &line["triggers"][0];
    assert_eq!(t["outcome"], "queued", "{line}");
    let reason = t["reason"].as_str().unwrap();
    assert!(
        reason.contains(
            "waiting for a concurrency slot: 1 of 1 running for key \"db9\" of trigger:restart"
        ) && reason.contains("queued for pap serve"),
        "{reason}"
    );
    assert!(slow.wait().unwrap().success());
    // Serve runs it once the slot is free.
    let out = common::pap_at(root)
        .env("PAP_NOW", T0)
        .args(["serve", "--once"])
        .output()
        .unwrap();
    assert_eq!(common::code(&out), 0, "{}", common::stderr(&out));
    one_at_a_time_in_order(&log(root), "db9");
    assert_eq!(log(root).len(), 4);
}

/// A run cancelled while it runs keeps its key's slot until its processes have stopped: the
/// next run of the key, started by serve, begins only after the cancelled one ended.
#[test]
fn a_cancelled_run_holds_its_slot_until_its_processes_are_gone() {
    // Run 1 sleeps until stopped, and takes a second to stop after SIGTERM; run 2 ends at once.
    let dir = project_with(|log| {
        format!(
            "in=$(cat); n=$(printf '%s' \"$in\" | sed -n 's/.*\\\"n\\\":\\([0-9]*\\).*/\\1/p'); echo \"start $n $(date +%s%N)\" >> '{log}'; if [ \"$n\" = 1 ]; then trap 'sleep 1; echo \"end 1 $(date +%s%N)\" >> \"{log}\"; exit 0' TERM; sleep 60 & wait $!; fi; echo \"end $n $(date +%s%N)\" >> '{log}'; echo '{{}}'",
            log = log.display()
        )
    });
    let root = dir.path();
    let log = root.join("runs.log");
    let file = events(root, "two.ndjson", &[("db1", 1), ("db1", 2)]);
    let out = common::pap_at(root)
        .args(["dispatch", "--no-run", "--json"])
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(common::code(&out), 0, "{}", common::stderr(&out));
    let first = common::stdout(&out)
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|v| v["event_id"] == "db1-1")
        .unwrap()["triggers"][0]["invocation_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let serve_log = std::fs::File::create(root.join("serve.log")).unwrap();
    let mut serve = common::pap_at(root)
        .args(["serve", "--log-format", "json"])
        .stdout(std::process::Stdio::null())
        .stderr(serve_log)
        .spawn()
        .unwrap();
    let wait_for = |what: &str, done: &dyn Fn(&[Entry]) -> bool| {
        let started = std::time::Instant::now();
        while !done(&log_of(&log)) {
            assert!(
                started.elapsed() < common::serve::patience(),
                "{what}: {:?}",
                log_of(&log)
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    };
    wait_for("run 1 started", &|e| {
        e.iter().any(|x| x.0 == "start" && x.2 == 1)
    });
    let cancel = common::pap_at(root)
        .args(["invocations", "cancel", &first, "--grace", "10s"])
        .output()
        .unwrap();
    assert_eq!(common::code(&cancel), 0, "{}", common::stderr(&cancel));
    wait_for("run 2 ended", &|e| {
        e.iter().any(|x| x.0 == "end" && x.2 == 2)
    });
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(serve.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    );
    let _ = serve.wait();
    let entries = log_of(&log);
    let end_1 = entries
        .iter()
        .find(|e| e.0 == "end" && e.2 == 1)
        .expect("run 1 stopped")
        .3;
    let start_2 = entries
        .iter()
        .find(|e| e.0 == "start" && e.2 == 2)
        .unwrap()
        .3;
    assert!(
        start_2 > end_1,
        "run 2 started while run 1 was stopping: {entries:?}"
    );
}

/// (kind, host, n, ns) per line; this test's lines have no host.
fn log_of(path: &Path) -> Vec<Entry> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let p: Vec<&str> = l.split(' ').collect();
            Some((
                p.first()?.to_string(),
                String::new(),
                p.get(1)?.parse().ok()?,
                p.get(2)?.parse().ok()?,
            ))
        })
        .collect()
}
