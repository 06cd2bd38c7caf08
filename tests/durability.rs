//! Decisions are durable and made once: a dispatcher SIGKILLed part way through a stream,
//! then run again, decides every (event, trigger) exactly once and loses no invocation; four
//! dispatchers on one state dir at once neither fail nor decide anything twice.
//!
//! Scale of the kill test: `PAP_TEST_DURABILITY_EVENTS` events (default 1,500 in six batches;
//! outside CI, e.g. 60,000).

use crate::common;

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::process::Stdio;

use common::dispatch::{Project, ev, lines, run_of};
use serde_json::{Value, json};

fn crash_events(n: usize) -> Vec<Value> {
    (0..n)
        .map(|i| ev(&format!("k{i:06}"), "test.crash.happened", json!({"i": i})))
        .collect()
}

/// Invocations per event id, from the store.
fn invocations_by_event(p: &Project) -> HashMap<String, Vec<Value>> {
    let mut by_event: HashMap<String, Vec<Value>> = HashMap::new();
    for inv in p.invocations() {
        by_event
            .entry(inv["event_id"].as_str().unwrap().to_owned())
            .or_default()
            .push(inv);
    }
    by_event
}

#[test]
fn a_killed_dispatch_run_again_decides_each_event_once_and_loses_nothing() {
    let n: usize = std::env::var("PAP_TEST_DURABILITY_EVENTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_500)
        .max(60);
    let p = Project::new();
    let file = p.events("stream.ndjson", &crash_events(n));

    // First run, fed through stdin batch by batch (so it decides in several groups): after
    // two whole batches were printed, a third goes in and the process is SIGKILLed while
    // deciding or running it.
    let batch_len = n / 6;
    let mut child = p
        .cmd(common::dispatch::T0)
        .args(["dispatch", "--json", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut reader = BufReader::new(child.stdout.take().unwrap());
    let text = std::fs::read_to_string(&file).unwrap();
    let all: Vec<&str> = text.lines().collect();
    let mut printed = Vec::new();
    for (b, batch) in all.chunks(batch_len).take(3).enumerate() {
        stdin
            .write_all((batch.join("\n") + "\n").as_bytes())
            .unwrap();
        stdin.flush().unwrap();
        if b == 2 {
            break;
        }
        let mut line = String::new();
        while printed.len() < (b + 1) * batch_len {
            line.clear();
            assert!(
                reader.read_line(&mut line).unwrap() > 0,
                "pap stopped early"
            );
            printed.push(serde_json::from_str::<Value>(&line).unwrap());
        }
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();

    // Every line printed before the kill is backed by a committed invocation.
    let before = invocations_by_event(&p);
    for l in &printed {
        let id = l["event_id"].as_str().unwrap();
        assert!(
            before.contains_key(id),
            "printed {id} but its invocation is not in the store"
        );
    }
    assert!(
        (2 * batch_len..=3 * batch_len).contains(&before.len()),
        "{} decided before the kill",
        before.len()
    );

    // Second run: everything decided before is a duplicate, the rest is invoked.
    let out = p
        .cmd(common::dispatch::T0)
        .args(["dispatch", "--json"])
        .arg(&file)
        .output()
        .unwrap();
    let run = run_of(&out);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.lines.len(), n);
    for l in &run.lines {
        let id = l["event_id"].as_str().unwrap();
        let outcome = l["triggers"][0]["outcome"].as_str().unwrap();
        let expected = if before.contains_key(id) {
            "duplicate"
        } else {
            "invoked"
        };
        assert_eq!(outcome, expected, "{id}");
    }

    // Exactly one invocation per event; any the kill interrupted are still there, queued or
    // running, for `pap serve` to resume.
    let after = invocations_by_event(&p);
    assert_eq!(after.len(), n);
    let mut interrupted = 0;
    for (id, invs) in &after {
        assert_eq!(invs.len(), 1, "{id} was invoked {} times", invs.len());
        match invs[0]["status"].as_str().unwrap() {
            "succeeded" => {}
            "queued" | "running" => interrupted += 1,
            other => panic!("{id}: unexpected status {other}"),
        }
    }
    assert!(interrupted <= batch_len, "{interrupted} interrupted");
}

#[test]
fn four_parallel_dispatchers_share_one_state_dir() {
    const N: usize = 300;
    let p = Project::new();
    let events = crash_events(N);
    // Overlapping streams in different orders.
    let files: Vec<_> = (0..4)
        .map(|k| {
            let mut mine = events.clone();
            mine.rotate_left(k * N / 4);
            if k % 2 == 1 {
                mine.reverse();
            }
            p.events(&format!("p{k}.ndjson"), &mine)
        })
        .collect();
    let children: Vec<_> = files
        .iter()
        .map(|f| {
            p.cmd(common::dispatch::T0)
                .args(["dispatch", "--json"])
                .arg(f)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut invoked: HashMap<String, usize> = HashMap::new();
    for child in children {
        let out = child.wait_with_output().unwrap();
        let run = run_of(&out);
        assert_eq!(run.code, 0, "stderr: {}", run.stderr);
        assert!(!run.stderr.contains("error"), "{}", run.stderr);
        assert_eq!(run.lines.len(), N);
        for l in &run.lines {
            let outcome = l["triggers"][0]["outcome"].as_str().unwrap();
            assert!(matches!(outcome, "invoked" | "duplicate"), "{l}");
            if outcome == "invoked" {
                *invoked
                    .entry(l["event_id"].as_str().unwrap().to_owned())
                    .or_default() += 1;
            }
        }
    }
    assert_eq!(
        invoked.len(),
        N,
        "every event was invoked by some dispatcher"
    );
    assert!(
        invoked.values().all(|n| *n == 1),
        "an event was invoked twice"
    );
    let all = lines(&common::stdout(
        &p.cmd(common::dispatch::T0)
            .args(["invocations", "--json"])
            .output()
            .unwrap(),
    ));
    assert_eq!(all.len(), N);
    assert!(all.iter().all(|i| i["status"] == "succeeded"));
}
