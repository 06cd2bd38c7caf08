//! `pap serve` as a user runs it: real files in the spool, real signals, other commands
//! beside it, schedules on an injected clock (`--once` with `PAP_NOW`).

use crate::common;

use std::time::Duration;

use common::dispatch::{ev, lines};
use common::serve::{Project, wait_until};
use common::{code, stderr, stdout};
use nix::sys::signal::Signal;
use serde_json::{Value, json};

fn status_of(p: &Project, id: &str) -> String {
    p.invocations()
        .into_iter()
        .find(|i| i["id"] == id)
        .map(|i| i["status"].as_str().unwrap().to_owned())
        .unwrap_or_default()
}

fn wait_status(p: &Project, event_id: &str, status: &str) -> Value {
    let mut found = Value::Null;
    wait_until(&format!("an invocation of {event_id} {status}"), || {
        found = p
            .invocations_of(event_id)
            .into_iter()
            .find(|i| i["status"] == status)
            .unwrap_or(Value::Null);
        !found.is_null()
    });
    found
}

#[test]
fn spool_files_are_decided_run_and_filed_in_done() {
    let p = Project::new();
    let serve = p.serve(&[]);
    p.drop_events("a.json", &[ev("a1", "test.quick.happened", json!({}))]);
    p.drop_events(
        "b.ndjson",
        &[
            ev("b1", "test.quick.happened", json!({})),
            ev("b2", "test.nothing.matches", json!({})),
        ],
    );
    // A writer's temporary file is left alone.
    std::fs::write(p.spool().join(".c.json.tmp"), "{}").unwrap();
    wait_until("both files in done/", || {
        p.files_in("done") == ["a.json", "b.ndjson"]
    });
    let a1 = wait_status(&p, "a1", "succeeded");
    wait_status(&p, "b1", "succeeded");
    // Its completion event provoked the follower in the same serve.
    wait_until("the follow-up of a1 ran", || {
        p.invocations().iter().any(|i| {
            i["trigger"] == "t-follow"
                && i["status"] == "succeeded"
                && i["event_id"] == a1["emitted"][0]
        })
    });
    assert!(p.spool().join(".c.json.tmp").exists());
    assert!(p.files_in("processing").is_empty());
    let (code, _) = serve.terminate();
    assert_eq!(code, 0);
}

#[test]
fn a_bad_file_is_quarantined_with_reasons_and_its_good_lines_still_dispatched() {
    let p = Project::new();
    let serve = p.serve(&[]);
    let text = format!(
        "{}\nnot json\n{}\n",
        ev("g1", "test.quick.happened", json!({})),
        ev("forged", "pap.agent.invocation.completed", json!({}))
    );
    p.drop_file("mixed.ndjson", &text);
    wait_until("the file in failed/", || {
        p.files_in("failed") == ["mixed.ndjson", "mixed.ndjson.error.json"]
    });
    let report: Value = serde_json::from_str(
        &std::fs::read_to_string(p.spool().join("failed/mixed.ndjson.error.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(report["valid_events"], 1);
    let errors = report["errors"].as_array().unwrap();
    assert_eq!(errors.len(), 2, "{report}");
    assert_eq!(errors[0]["input"], "mixed.ndjson:2");
    assert!(
        errors[0]["error"]
            .as_str()
            .unwrap()
            .contains("not valid JSON")
    );
    assert_eq!(errors[1]["input"], "mixed.ndjson:3");
    assert_eq!(errors[1]["id"], "forged");
    assert!(
        errors[1]["error"].as_str().unwrap().contains("pap."),
        "{report}"
    );
    wait_status(&p, "g1", "succeeded");
    assert!(p.invocations_of("forged").is_empty());
    assert_eq!(serve.terminate().0, 0);
}

/// `pap dispatch --json EXTRA…` of one event, beside the running serve: exit 0 expected;
/// returns the event's trigger entry.
fn dispatch_one(p: &Project, id: &str, kind: &str, extra: &[&str]) -> Value {
    let file = p.root().join(format!("{id}.ndjson"));
    std::fs::write(&file, format!("{}\n", ev(id, kind, json!({})))).unwrap();
    let out = p
        .cmd()
        .args(["dispatch", "--json"])
        .args(extra)
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    lines(&stdout(&out))[0]["triggers"][0].clone()
}

/// How many attempts of `id` the agents recorded starting.
fn starts(p: &Project, id: &str) -> usize {
    p.runs()
        .iter()
        .filter(|l| l.starts_with(&format!("start {id} ")))
        .count()
}

#[test]
fn dispatch_approve_reject_and_listings_work_while_serve_runs() {
    let p = Project::new();
    let serve = p.serve(&[]);

    // dispatch: same decisions, output and exit code; the agent runs once, in dispatch.
    let t = dispatch_one(&p, "d1", "test.quick.happened", &[]);
    assert_eq!(t["outcome"], "invoked");
    assert_eq!(t["result"], "succeeded");
    let inv = t["invocation_id"].as_str().unwrap().to_owned();
    assert_eq!(starts(&p, &inv), 1);

    // dispatch --no-run: serve runs what was queued.
    let t = dispatch_one(&p, "q1", "test.quick.happened", &["--no-run"]);
    assert_eq!(t["outcome"], "queued");
    wait_status(&p, "q1", "succeeded");

    // approve: handed to serve, which runs it.
    let t = dispatch_one(&p, "h1", "test.gated.happened", &[]);
    assert_eq!(t["outcome"], "awaiting_approval");
    let gated = t["invocation_id"].as_str().unwrap().to_owned();
    let out = p
        .cmd()
        .args(["approve", &gated, "--by", "alice"])
        .output()
        .unwrap();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("handed to the running pap serve"),
        "{}",
        stderr(&out)
    );
    wait_until("the approved run", || status_of(&p, &gated) == "succeeded");
    assert_eq!(starts(&p, &gated), 1);

    // reject and the listings.
    let t = dispatch_one(&p, "h2", "test.gated.happened", &[]);
    let other = t["invocation_id"].as_str().unwrap().to_owned();
    let out = p
        .cmd()
        .args(["reject", &other, "--reason", "no"])
        .output()
        .unwrap();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(status_of(&p, &other), "rejected");
    let out = p
        .cmd()
        .args(["invocations", "show", &inv])
        .output()
        .unwrap();
    assert_eq!(code(&out), 0);
    let out = p.cmd().args(["audit", "--json"]).output().unwrap();
    assert_eq!(code(&out), 0);
    assert!(stdout(&out).contains(&gated));
    assert_eq!(serve.terminate().0, 0);
}

#[test]
fn a_second_serve_refuses_naming_the_first() {
    let p = Project::new();
    let first = p.serve(&[]);
    let started = std::time::Instant::now();
    let out = p.cmd().arg("serve").output().unwrap();
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(code(&out), 1);
    let err = stderr(&out);
    assert!(err.contains("another `pap serve` already runs"), "{err}");
    assert!(err.contains(&format!("pid {}", first.pid())), "{err}");
    assert_eq!(first.terminate().0, 0);
}

/// A serve with `--grace GRACE` whose slow agent (working SLOW seconds) has started.
fn start_slow(p: &Project, grace: &str, slow: &str, event_id: &str) -> common::serve::Serve {
    let serve = p.serve_with(&["--grace", grace], &[("PAP_TEST_SLOW", slow)]);
    p.drop_events("s.json", &[ev(event_id, "test.slow.happened", json!({}))]);
    wait_until("the slow agent started", || {
        p.runs().iter().any(|l| l.starts_with("start"))
    });
    serve
}

#[test]
fn sigterm_lets_a_running_agent_finish_within_the_grace_period() {
    let p = Project::new();
    let serve = start_slow(&p, "20", "1", "s1");
    let (code, took) = serve.terminate();
    assert_eq!(code, 0);
    assert!(took < Duration::from_secs(20), "took {took:?}");
    let inv = &p.invocations_of("s1")[0];
    assert_eq!(inv["status"], "succeeded", "{inv}");
}

#[test]
fn sigterm_past_the_grace_period_queues_the_run_again_under_the_same_attempt() {
    let p = Project::new();
    let serve = start_slow(&p, "0.5", "60", "s2");
    let (code, took) = serve.terminate();
    assert_eq!(code, 0);
    assert!(took < Duration::from_secs(10), "took {took:?}");
    let inv = &p.invocations_of("s2")[0];
    assert_eq!(inv["status"], "queued", "{inv}");
    assert_eq!(inv["attempts"], 0, "the cut attempt does not count: {inv}");
    // The next serve runs it as attempt 1.
    let out = p
        .cmd()
        .args(["serve", "--once"])
        .env("PAP_TEST_SLOW", "0")
        .output()
        .unwrap();
    assert_eq!(code_of(&out), 0, "{}", stderr(&out));
    let inv = &p.invocations_of("s2")[0];
    assert_eq!(inv["status"], "succeeded", "{inv}");
    assert_eq!(inv["attempts"], 1);
    let starts: Vec<_> = p
        .runs()
        .into_iter()
        .filter(|l| l.starts_with("start"))
        .collect();
    assert_eq!(starts.len(), 2);
    assert!(starts.iter().all(|l| l.ends_with(" 1")), "{starts:?}");
}

fn code_of(out: &std::process::Output) -> i32 {
    code(out)
}

#[test]
fn changed_manifests_are_reloaded_and_a_broken_set_is_rejected() {
    let p = Project::new();
    // Each event's decision is logged at DEBUG: the test waits for n2's.
    let serve = p.serve_with(&[], &[("PAP_LOG", "info,pap_engine::dispatcher=debug")]);
    std::fs::write(
        p.root().join("triggers/t-new.yaml"),
        "pap_version: \"0.2\"\ntrigger:\n  id: t-new\n  match:\n    type: test.new.happened\n  agent: quick\n",
    )
    .unwrap();
    serve.wait_log("manifests reloaded");
    p.drop_events("n.json", &[ev("n1", "test.new.happened", json!({}))]);
    wait_status(&p, "n1", "succeeded");

    // A broken manifest: logged with its diagnostics, the running set stays.
    std::fs::write(
        p.root().join("triggers/t-broken.yaml"),
        "pap_version: \"0.2\"\ntrigger:\n  id: t-broken\n  match:\n    type: test.new.happened\n  agent: nobody\n",
    )
    .unwrap();
    serve.wait_log("the previous set keeps running");
    assert!(
        serve.log_text().contains("unknown-agent"),
        "{}",
        serve.log_text()
    );
    p.drop_events("n2.json", &[ev("n2", "test.new.happened", json!({}))]);
    // (The listings load the manifests too, so they wait until the broken file is gone.)
    serve.wait_log("id=\"n2\"");
    std::fs::remove_file(p.root().join("triggers/t-broken.yaml")).unwrap();
    wait_status(&p, "n2", "succeeded");

    // SIGHUP reloads too.
    serve.signal(Signal::SIGHUP);
    serve.wait_log("SIGHUP: reloading");
    assert_eq!(serve.terminate().0, 0);
}

/// `pap serve --once` at the fake time `at`.
fn once_at(p: &Project, at: &str) -> String {
    let out = p
        .cmd()
        .args(["serve", "--once", "--log-format", "json"])
        .env("PAP_NOW", at)
        // Each event's decision too, which is logged at DEBUG.
        .env("PAP_LOG", "info,pap_engine::dispatcher=debug")
        .output()
        .unwrap();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    stderr(&out)
}

fn fired(p: &Project, event_prefix: &str) -> Vec<String> {
    let mut ids: Vec<String> = p
        .invocations()
        .into_iter()
        .filter_map(|i| i["event_id"].as_str().map(str::to_owned))
        .filter(|id| id.starts_with(event_prefix))
        .collect();
    ids.sort();
    ids
}

#[test]
fn a_monthly_schedule_fires_across_the_month_boundary_once_even_after_restarts() {
    let p = Project::new();
    once_at(&p, "2026-01-31T23:59:00Z"); // first sight: nothing fires from the past
    assert!(fired(&p, "sch_monthly-report").is_empty());
    once_at(&p, "2026-02-01T00:00:20Z");
    assert_eq!(
        fired(&p, "sch_monthly-report"),
        ["sch_monthly-report_20260201T000000Z"]
    );
    // A restart at the same moment, and later the same day, fire nothing more.
    once_at(&p, "2026-02-01T00:00:20Z");
    once_at(&p, "2026-02-01T09:00:00Z");
    assert_eq!(fired(&p, "sch_monthly-report").len(), 1);
    let inv = &p.invocations_of("sch_monthly-report_20260201T000000Z")[0];
    assert_eq!(inv["status"], "succeeded");
    assert_eq!(inv["trigger"], "t-monthly");
}

#[test]
fn a_nightly_schedule_across_dst_changes_and_a_stop_with_catch_up() {
    let p = Project::new();
    // Spring forward in Berlin, 2026-03-29: 02:30 does not exist; it fires at 03:00 CEST.
    once_at(&p, "2026-03-28T12:00:00Z");
    once_at(&p, "2026-03-29T01:00:30Z");
    assert_eq!(
        fired(&p, "sch_berlin"),
        ["sch_berlin-nightly_20260329T010000Z"]
    );
    once_at(&p, "2026-03-29T01:00:40Z");
    assert_eq!(
        fired(&p, "sch_berlin").len(),
        1,
        "a restart does not fire twice"
    );

    // Fall back, 2026-10-25: 02:30 happens twice; it fires once, at the first.
    let p = Project::new();
    once_at(&p, "2026-10-24T12:00:00Z");
    once_at(&p, "2026-10-25T00:30:10Z"); // 02:30 CEST
    once_at(&p, "2026-10-25T01:30:10Z"); // 02:30 CET, the repeat
    assert_eq!(
        fired(&p, "sch_berlin"),
        ["sch_berlin-nightly_20261025T003000Z"]
    );

    // Stopped for three nights: catch_up 1 emits only the latest missed fire.
    let log = once_at(&p, "2026-10-28T12:00:00Z");
    assert_eq!(
        fired(&p, "sch_berlin"),
        [
            "sch_berlin-nightly_20261025T003000Z",
            "sch_berlin-nightly_20261028T013000Z"
        ]
    );
    assert!(log.contains("were skipped"), "{log}");
}

#[test]
fn a_retry_waits_in_the_store_and_runs_when_due_even_after_a_restart() {
    let p = Project::new();
    let file = p.root().join("f.json");
    std::fs::write(
        &file,
        ev("f1", "test.flaky.happened", json!({})).to_string(),
    )
    .unwrap();
    let out = p
        .cmd()
        .args(["dispatch", "--no-run"])
        .arg(&file)
        .env("PAP_NOW", "2026-03-11T06:00:00Z")
        .output()
        .unwrap();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    once_at(&p, "2026-03-11T06:00:00Z");
    let inv = &p.invocations_of("f1")[0];
    assert_eq!(inv["status"], "queued", "{inv}");
    assert_eq!(inv["attempts"], 1);
    // Not due yet: nothing runs.
    once_at(&p, "2026-03-11T06:00:00.500Z");
    assert_eq!(p.invocations_of("f1")[0]["attempts"], 1);
    once_at(&p, "2026-03-11T06:00:02Z");
    let inv = &p.invocations_of("f1")[0];
    assert_eq!(inv["status"], "succeeded", "{inv}");
    assert_eq!(inv["attempts"], 2);
}

#[test]
fn json_logs_carry_a_span_per_event_and_per_invocation() {
    let p = Project::new();
    p.drop_events("j.json", &[ev("j1", "test.quick.happened", json!({}))]);
    let log = once_at(&p, "2026-03-11T06:00:00Z");
    let records: Vec<Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    let decided = records
        .iter()
        .find(|r| r["fields"]["message"] == "decided")
        .expect("a decision record");
    assert_eq!(decided["span"]["name"], "event");
    assert_eq!(decided["span"]["id"], "j1");
    let ran = records
        .iter()
        .find(|r| r["fields"]["message"] == "succeeded")
        .expect("an invocation record");
    assert_eq!(ran["span"]["name"], "invocation");
    assert_eq!(p.files_in("done"), ["j.json"]);
}
