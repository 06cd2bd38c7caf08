//! Two `pap dispatch` processes (different state dirs, one PostgreSQL database) given the
//! same events at once, one in the input's order and one in reverse: both exit 0, and each
//! (event, trigger) is decided once. Every lock a decision takes is in play (see the
//! `contention` fixture), so the two transactions meet in a cycle, and the database breaks it
//! by rolling one back (40P01); pap runs that unit of work again (`pgstore::retry`).
//!
//! Scale: `PAP_TEST_CONTENTION_RUNS` rounds (20 by default, as in CI; 200 outside CI) of
//! `PAP_TEST_CONTENTION_EVENTS` events (500).

use std::collections::HashMap;
use std::process::{Child, Command, Stdio};

use crate::common;

use common::dispatch::ev;
use common::postgres::{migrated_by_pap, use_database};
use common::{code, fixture_copy, pap_at};
use serde_json::{Value, json};

fn env_number(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// `pap dispatch --json FILE` on project `root`, started now, logging its retries.
fn start_dispatch(root: &std::path::Path, events: &[Value]) -> Child {
    let file = root.join("events.ndjson");
    let text: String = events.iter().map(|e| format!("{e}\n")).collect();
    std::fs::write(&file, text).unwrap();
    let mut cmd: Command = pap_at(root);
    cmd.env("PAP_LOG", "info")
        .args(["dispatch", "--json"])
        .arg(&file)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd.spawn().expect("pap dispatch")
}

/// Each (event, trigger) decided by this process: its outcome.
fn outcomes(stdout: &str) -> HashMap<(String, String), String> {
    let mut decided = HashMap::new();
    for line in stdout.lines().filter(|l| !l.trim().is_empty()) {
        let v: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        let Some(triggers) = v["triggers"].as_array() else {
            continue;
        };
        for t in triggers {
            let key = (
                v["event_id"].as_str().unwrap().to_owned(),
                t["trigger"].as_str().unwrap().to_owned(),
            );
            let outcome = t["outcome"].as_str().unwrap().to_owned();
            assert!(
                decided.insert(key.clone(), outcome).is_none(),
                "{key:?} twice in one output"
            );
        }
    }
    decided
}

#[test]
fn two_dispatch_processes_given_the_same_events_at_once_both_succeed_and_decide_each_once() {
    let Some(server) = pap::pgstore::testing::server_or_skip("two dispatch processes at once")
    else {
        return;
    };
    let rounds = env_number("PAP_TEST_CONTENTION_RUNS", 20);
    let count = env_number("PAP_TEST_CONTENTION_EVENTS", 500);
    let events: Vec<Value> = (0..count)
        .map(|n| {
            ev(
                &format!("e{n}"),
                "load.alert.fired",
                json!({"n": n, "host": format!("h{}", n % 37), "rack": format!("r{}", n % 11)}),
            )
        })
        .collect();
    let reversed: Vec<Value> = events.iter().rev().cloned().collect();
    let mut run_again = 0;
    for round in 0..rounds {
        let url = migrated_by_pap(server);
        let (a, b) = (fixture_copy("contention"), fixture_copy("contention"));
        use_database(a.path(), &url);
        use_database(b.path(), &url);
        let children = [
            start_dispatch(a.path(), &events),
            start_dispatch(b.path(), &reversed),
        ];
        let outs: Vec<_> = children
            .into_iter()
            .map(|c| c.wait_with_output().unwrap())
            .collect();
        let mut decided: HashMap<(String, String), Vec<String>> = HashMap::new();
        for out in &outs {
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(code(out), 0, "round {round}: a dispatch failed:\n{err}");
            run_again += err.matches("running it again").count();
            for (key, outcome) in outcomes(&String::from_utf8_lossy(&out.stdout)) {
                decided.entry(key).or_default().push(outcome);
            }
        }
        // Both saw every event on both triggers (t-gated's filter passes n < 40 only, and a
        // filtered event is reported as such by both).
        assert_eq!(decided.len(), count * 2, "round {round}");
        for (key, seen) in &decided {
            assert_eq!(seen.len(), 2, "round {round}: {key:?} {seen:?}");
            let firsts: Vec<_> = seen
                .iter()
                .filter(|o| *o != "duplicate" && *o != "filtered")
                .collect();
            let filtered = seen.iter().all(|o| o == "filtered");
            assert!(
                filtered || (firsts.len() == 1 && seen.contains(&"duplicate".to_owned())),
                "round {round}: {key:?} decided as {seen:?}: once, and a duplicate on the \
                 other node"
            );
        }
    }
    eprintln!(
        "contention: {rounds} rounds of 2 × {count} events at once: every dispatch exited 0, \
         each (event, trigger) decided once; {run_again} transactions run again after a lock \
         conflict"
    );
}
