//! `pap dispatch` end to end: the real binary on tests/fixtures/dispatch, with a fake clock.

use crate::common;

use common::dispatch::{Project, T0, ev, filter_events};
use serde_json::{Value, json};

#[test]
fn every_outcome_in_one_stream() {
    let p = Project::new();
    let file = p.events(
        "events.ndjson",
        &[
            ev("e1", "test.basic.happened", json!({})),
            ev("e1", "test.basic.happened", json!({})),
            ev("e2", "test.filter.checked", json!({"n": 3})),
            ev("e3", "test.throttle.hit", json!({"host": "a"})),
            ev("e4", "test.throttle.hit", json!({"host": "a"})),
            ev("e5", "test.throttle.hit", json!({"host": "a"})),
            ev("e6", "test.approval.needed", json!({})),
            {
                let mut e = ev("e7", "test.basic.happened", json!({}));
                e["triggered_by"] = json!("inv_forged");
                e
            },
            ev("e8", "nobody.listens.here", json!({})),
        ],
    );
    let run = p.dispatch(T0, &file, &[]);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert_eq!(run.outcome("e1", "t-echo"), "invoked");
    assert_eq!(run.trigger("e1", "t-echo")["result"], "succeeded");
    assert_eq!(run.trigger("e1", "t-echo")["attempts"], 1);
    assert_eq!(run.lines[1]["triggers"][0]["outcome"], "duplicate");
    assert_eq!(run.outcome("e2", "f-gt"), "filtered");
    assert_eq!(
        run.trigger("e2", "f-gt")["reason"],
        "$.data.n gt 3.0 does not hold (saw 3)"
    );
    assert_eq!(run.outcome("e3", "t-throttle"), "invoked");
    assert_eq!(run.outcome("e4", "t-throttle"), "invoked");
    assert_eq!(run.outcome("e5", "t-throttle"), "throttled");
    assert_eq!(run.outcome("e6", "t-approval"), "awaiting_approval");
    assert_eq!(run.trigger("e6", "t-approval")["risk"], "high");
    assert_eq!(run.outcome("e7", "t-echo"), "cascade_rejected");
    let why = run.trigger("e7", "t-echo")["reason"].as_str().unwrap();
    assert!(
        why.contains("inv_forged") && why.contains("unknown_triggered_by"),
        "{why}"
    );
    assert_eq!(run.event("e8")["status"], "no_match");
    assert_eq!(run.event("e8")["triggers"], json!([]));
    // Disabled triggers appear only under --explain.
    assert!(!run.stdout.contains("t-disabled"));
    // One line per event, in input order.
    let ids: Vec<&str> = run.lines[..9]
        .iter()
        .map(|l| l["event_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["e1", "e1", "e2", "e3", "e4", "e5", "e6", "e7", "e8"]);
}

#[test]
fn the_json_line_has_the_contract_shape() {
    let p = Project::new();
    let file = p.events("e.ndjson", &[ev("e1", "test.basic.happened", json!({}))]);
    let run = p.dispatch(T0, &file, &[]);
    let line = &run.lines[0];
    let keys: Vec<&str> = line
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys[..5],
        ["event_id", "type", "status", "depth", "triggers"]
    );
    assert_eq!(line["depth"], 0);
    let t = &line["triggers"][0];
    let keys: Vec<&str> = t.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            "trigger",
            "agent",
            "outcome",
            "reason",
            "invocation_id",
            "risk",
            "result",
            "attempts",
            "emitted"
        ]
    );
    assert!(t["invocation_id"].as_str().unwrap().starts_with("inv_"));
    assert_eq!(t["emitted"], json!([]));
}

#[test]
fn the_agent_gets_the_invocation_on_stdin_and_pap_variables() {
    let p = Project::new();
    let file = p.events(
        "e.ndjson",
        &[ev("e1", "test.basic.happened", json!({"k": "v; rm -rf /"}))],
    );
    let run = p.dispatch(T0, &file, &[]);
    let inv_id = run.trigger("e1", "t-echo")["invocation_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let inv = p.invocation(&inv_id);
    let out = &inv["output"];
    assert_eq!(out["stdin"]["invocation_id"], inv_id);
    assert_eq!(out["stdin"]["attempt"], 1);
    assert_eq!(out["stdin"]["trigger"], "t-echo");
    assert_eq!(out["stdin"]["agent"], "echo");
    assert_eq!(out["stdin"]["event"]["data"]["k"], "v; rm -rf /");
    assert_eq!(
        out["env"],
        json!({"attempt": "1", "invocation": inv_id, "event_id": "e1",
               "event_type": "test.basic.happened", "trigger": "t-echo", "agent": "echo"})
    );
    assert_eq!(inv["status"], "succeeded");
    for key in [
        "id",
        "status",
        "trigger",
        "agent",
        "event_id",
        "risk",
        "attempts",
        "created_at",
        "updated_at",
    ] {
        assert!(inv.get(key).is_some(), "{key} missing from {inv}");
    }
}

#[test]
fn filter_semantics_every_row() {
    let p = Project::new();
    let file = p.events("filter.ndjson", &filter_events());
    let run = p.dispatch(T0, &file, &["--no-run"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let holds = |id: &str, t: &str| match run.outcome(id, t).as_str() {
        "queued" => true,
        "filtered" => false,
        other => panic!("{id}/{t}: {other}"),
    };
    #[rustfmt::skip]
    let table = [
        // trigger,          a (3.0, "hello")  b ("3", "a", null)  c (5, 0, 2)
        ("f-eq",             true,             false,              false),
        ("f-ne",             true,             true,               true),
        ("f-lt",             false,            false,              true),
        ("f-lte",            true,             false,              true),
        ("f-gt",             false,            false,              false),
        ("f-gte",            true,             false,              false),
        ("f-in",             false,            true,               false),
        ("f-not-in",         true,             false,              true),
        ("f-contains",       true,             false,              false),
        ("f-contains-array", true,             false,              false),
        ("f-exists",         false,            false,              true),
        ("f-not-exists",     true,             true,               false),
        ("f-regex",          true,             false,              false),
        ("f-any",            true,             false,              false),
    ];
    for (trigger, a, b, c) in table {
        assert_eq!(
            (
                holds("a", trigger),
                holds("b", trigger),
                holds("c", trigger)
            ),
            (a, b, c),
            "{trigger}"
        );
    }
}

#[test]
fn duplicates_across_runs_and_again_after_the_ttl() {
    let p = Project::new();
    let file = p.events("e.ndjson", &[ev("e1", "test.basic.happened", json!({}))]);
    let first = p.dispatch(T0, &file, &["--no-run"]);
    assert_eq!(first.outcome("e1", "t-echo"), "queued");
    let again = p.dispatch("2026-03-12T05:59:59Z", &file, &["--no-run"]);
    assert_eq!(again.outcome("e1", "t-echo"), "duplicate");
    let reason = again.trigger("e1", "t-echo")["reason"].as_str().unwrap();
    assert!(
        reason.contains("queued") && reason.contains("2026-03-12T06:00:00.000Z"),
        "{reason}"
    );
    // 24 h after the first decision the key has expired: decided anew, a new invocation.
    let later = p.dispatch("2026-03-12T06:00:00Z", &file, &["--no-run"]);
    assert_eq!(later.outcome("e1", "t-echo"), "queued");
    assert_ne!(
        later.trigger("e1", "t-echo")["invocation_id"],
        first.trigger("e1", "t-echo")["invocation_id"]
    );
    assert_eq!(p.invocations().len(), 2);
}

#[test]
fn throttle_window_slides_on_the_dispatcher_clock() {
    let p = Project::new();
    let hit = |id: &str, host: &str| ev(id, "test.throttle.hit", json!({"host": host}));
    let f1 = p.events(
        "1.ndjson",
        &[
            hit("h1", "a"),
            hit("h2", "a"),
            hit("h3", "a"),
            hit("h4", "b"),
            hit("h5", "a"),
        ],
    );
    let r1 = p.dispatch(T0, &f1, &["--no-run"]);
    let outcomes: Vec<String> = ["h1", "h2", "h3", "h4"]
        .iter()
        .map(|e| r1.outcome(e, "t-throttle"))
        .collect();
    assert_eq!(outcomes, ["queued", "queued", "throttled", "queued"]);
    // A throttled event is still decided: it is not retried when re-sent.
    let f2 = p.events("2.ndjson", &[hit("h6", "a")]);
    let r2 = p.dispatch("2026-03-11T06:00:59.999Z", &f2, &["--no-run"]);
    assert_eq!(r2.outcome("h6", "t-throttle"), "throttled");
    let reason = r2.trigger("h6", "t-throttle")["reason"].as_str().unwrap();
    assert!(
        reason.contains(r#"window key "a""#) && reason.contains("06:01:00.000Z"),
        "{reason}"
    );
    let f3 = p.events(
        "3.ndjson",
        &[hit("h7", "a"), hit("h8", "a"), hit("h9", "a")],
    );
    let r3 = p.dispatch("2026-03-11T06:01:00Z", &f3, &["--no-run"]);
    let outcomes: Vec<String> = ["h7", "h8", "h9"]
        .iter()
        .map(|e| r3.outcome(e, "t-throttle"))
        .collect();
    assert_eq!(outcomes, ["queued", "queued", "throttled"]);
}

/// 3 an hour and 7 a day (a list of windows): the 4th event in an hour is refused by the
/// hourly window, the 8th invocation of the day by the daily one even though the hour has
/// room, and
/// another host has windows of its own.
#[test]
fn several_throttle_windows_each_need_room() {
    let p = Project::new();
    let mut n = 0;
    let mut hit_at = |at: &str, host: &str, extra: &[&str]| {
        n += 1;
        let id = format!("w{n}");
        let file = p.events(
            &format!("{id}.ndjson"),
            &[ev(&id, "test.windows.hit", json!({"host": host}))],
        );
        let run = p.dispatch(
            at,
            &file,
            &["--no-run"]
                .iter()
                .chain(extra)
                .copied()
                .collect::<Vec<_>>(),
        );
        (run.outcome(&id, "t-windows"), run)
    };
    for at in ["06:00", "06:01", "06:02"] {
        let (outcome, _) = hit_at(&format!("2026-03-11T{at}:00Z"), "a", &[]);
        assert_eq!(outcome, "queued", "at {at}");
    }
    let (outcome, run) = hit_at("2026-03-11T06:03:00Z", "a", &[]);
    assert_eq!(outcome, "throttled", "the 4th in an hour");
    let reason = run.trigger("w4", "t-windows")["reason"].as_str().unwrap();
    assert!(
        reason.contains("3 of 3 invocations used in the last 1h")
            && reason.contains("07:00:00.000Z"),
        "{reason}"
    );
    // The 06:00 invocation left the hour at 07:00: room again, up to 7 in the day (at 08:00
    // the hour holds 07:01 and 07:02).
    for at in ["07:00", "07:01", "07:02", "08:00"] {
        let (outcome, _) = hit_at(&format!("2026-03-11T{at}:00Z"), "a", &[]);
        assert_eq!(outcome, "queued", "at {at}");
    }
    let (outcome, run) = hit_at("2026-03-11T08:10:00Z", "a", &[]);
    assert_eq!(
        outcome, "throttled",
        "the 8th of the day, with room in the hour"
    );
    let reason = run.trigger("w9", "t-windows")["reason"].as_str().unwrap();
    assert!(
        reason.contains("7 of 7 invocations used in the last 1d")
            && reason.contains("2026-03-12T06:00:00.000Z"),
        "{reason}"
    );
    // Host b has windows of its own; --explain names both.
    let (outcome, run) = hit_at("2026-03-11T08:10:00Z", "b", &["--explain"]);
    assert_eq!(outcome, "queued");
    let stages = run.trigger("w10", "t-windows")["explain"]["stages"].to_string();
    assert!(
        stages.contains(
            "0 of 3 invocations used in the last 1h; 0 of 7 invocations used in the last 1d"
        ),
        "{stages}"
    );
    // Throttled events queue nothing: 7 invocations for host a, 1 for b.
    let queued = p
        .invocations()
        .iter()
        .filter(|i| i["trigger"] == "t-windows")
        .count();
    assert_eq!(queued, 8);
}

#[test]
fn a_chain_of_completion_events_stops_at_depth_three() {
    let p = Project::new();
    let file = p.events("chain.ndjson", &[ev("c0", "test.chain.step", json!({}))]);
    let run = p.dispatch(T0, &file, &[]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let chain: Vec<(u64, String)> = run
        .lines
        .iter()
        .map(|l| {
            (
                l["depth"].as_u64().unwrap(),
                l["triggers"][0]["outcome"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        chain,
        [
            (0, "invoked".into()),
            (1, "invoked".into()),
            (2, "invoked".into()),
            (3, "cascade_rejected".into())
        ]
    );
    // Each emitted event names the invocation that emitted it, and the dispatcher as source.
    for pair in run.lines.windows(2) {
        assert_eq!(
            pair[1]["triggered_by"],
            pair[0]["triggers"][0]["invocation_id"]
        );
        assert_eq!(
            pair[0]["triggers"][0]["emitted"],
            json!([pair[1]["event_id"]])
        );
        assert_eq!(pair[1]["input"], "emitted");
    }
}

#[test]
fn completion_events_carry_the_invocation_and_its_output() {
    let p = Project::new();
    let file = p.events("c.ndjson", &[ev("c0", "test.chain.step", json!({}))]);
    let run = p.dispatch(T0, &file, &[]);
    let parent = run.trigger("c0", "t-chain")["invocation_id"]
        .as_str()
        .unwrap()
        .to_owned();
    // The completion event provoked the next chainer run, which keeps the whole event.
    let child = run.lines[1]["triggers"][0]["invocation_id"]
        .as_str()
        .unwrap();
    let event = &p.invocation(child)["event"];
    assert_eq!(event["type"], "test.chain.step");
    assert_eq!(event["triggered_by"], parent.as_str());
    assert_eq!(event["source"], "pap://dispatcher/agents/chainer");
    assert_eq!(event["time"], "2026-03-11T06:00:00.000Z");
    let data = &event["data"];
    assert_eq!(
        (
            &data["invocation_id"],
            &data["trigger"],
            &data["agent"],
            &data["event_id"]
        ),
        (
            &json!(parent),
            &json!("t-chain"),
            &json!("chainer"),
            &json!("c0")
        )
    );
    assert_eq!(
        (&data["status"], &data["attempts"]),
        (&json!("succeeded"), &json!(1))
    );
    assert_eq!(data["output"]["stdin"]["invocation_id"], parent.as_str());
    assert_eq!(p.invocation(&parent)["emitted"], json!([event["id"]]));

    // A flaky agent's completion event, like every outcome event, names its invocation.
    let f = p.events("f.ndjson", &[ev("f1", "test.flaky.happened", json!({}))]);
    let run = p.dispatch(T0, &f, &[]);
    let t = run.trigger("f1", "t-flaky");
    assert_eq!(run.lines[1]["type"], "pap.agent.invocation.completed");
    assert_eq!(run.lines[1]["triggered_by"], t["invocation_id"]);
    assert_eq!(t["emitted"], json!([run.lines[1]["event_id"]]));
}

#[test]
fn an_agent_that_fails_twice_then_succeeds_takes_three_attempts() {
    let p = Project::new();
    let file = p.events("f.ndjson", &[ev("f1", "test.flaky.happened", json!({}))]);
    let run = p.dispatch(T0, &file, &[]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let t = run.trigger("f1", "t-flaky");
    assert_eq!(
        (t["result"].as_str(), t["attempts"].as_u64()),
        (Some("succeeded"), Some(3))
    );
    let inv = p.invocation(t["invocation_id"].as_str().unwrap());
    let history = inv["history"].as_array().unwrap();
    assert_eq!(history.len(), 3);
    assert_eq!(
        history[0]["error"],
        "exited with status 1: transient failure on attempt 1"
    );
    // Backoff 5 s then 10 s, on the fake clock: no real waiting.
    let starts: Vec<&str> = history
        .iter()
        .map(|h| h["started_at"].as_str().unwrap())
        .collect();
    assert_eq!(
        starts,
        [
            "2026-03-11T06:00:00.000Z",
            "2026-03-11T06:00:05.000Z",
            "2026-03-11T06:00:15.000Z"
        ]
    );
}

#[test]
fn a_final_failure_exits_4_and_emits_the_failure_event() {
    let p = Project::new();
    let file = p.events("b.ndjson", &[ev("b1", "test.broken.happened", json!({}))]);
    let run = p.dispatch(T0, &file, &[]);
    assert_eq!(run.code, 4, "{}", run.stdout);
    let t = run.trigger("b1", "t-broken");
    assert_eq!(
        (t["result"].as_str(), t["attempts"].as_u64()),
        (Some("failed"), Some(2))
    );
    assert_eq!(t["reason"], "exited with status 2: always broken");
    assert_eq!(run.lines[1]["type"], "pap.agent.invocation.failed");
    let inv = p.invocation(t["invocation_id"].as_str().unwrap());
    assert_eq!(inv["status"], "failed");
    assert_eq!(inv["error"], "exited with status 2: always broken");
}

#[test]
fn output_not_matching_the_schema_is_a_failed_attempt() {
    let p = Project::new();
    let file = p.events("s.ndjson", &[ev("s1", "test.schema.checked", json!({}))]);
    let run = p.dispatch(T0, &file, &[]);
    assert_eq!(run.code, 4);
    assert_eq!(
        run.trigger("s1", "t-schema")["reason"],
        "output does not match output.schema: `severity` must be a string, found a number"
    );
}

#[test]
fn a_timeout_kills_the_agent_and_its_children() {
    let p = Project::new();
    let file = p.events("s.ndjson", &[ev("z1", "test.sleep.happened", json!({}))]);
    let run = p.dispatch(T0, &file, &[]);
    assert_eq!(run.code, 4);
    let reason = run.trigger("z1", "t-sleeper")["reason"].as_str().unwrap();
    assert!(reason.starts_with("ran longer than 1s"), "{reason}");
    let pid = std::fs::read_to_string(p.root().join("child.pid")).unwrap();
    // Dead, or a zombie waiting for an init that does not reap (as in some containers).
    let state = std::fs::read_to_string(format!("/proc/{}/stat", pid.trim()))
        .map(|s| {
            s.rsplit(')')
                .next()
                .unwrap_or("")
                .trim()
                .chars()
                .next()
                .unwrap_or('?')
        })
        .unwrap_or('X');
    assert!(
        matches!(state, 'X' | 'Z'),
        "the agent's child {} outlived the timeout (state {state})",
        pid.trim()
    );
}

#[test]
fn declared_follow_up_events_are_dispatched_with_triggered_by_set_by_pap() {
    let p = Project::new();
    let file = p.events("e.ndjson", &[ev("m1", "test.emit.happened", json!({}))]);
    let run = p.dispatch(T0, &file, &[]);
    assert_eq!(run.code, 0, "{}", run.stdout);
    let inv = run.trigger("m1", "t-emitter")["invocation_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let follow: Vec<&Value> = run
        .lines
        .iter()
        .filter(|l| l["type"] == "test.followup.created")
        .collect();
    assert_eq!(follow.len(), 2);
    for f in &follow {
        assert_eq!(
            f["triggered_by"],
            inv.as_str(),
            "the agent's forged triggered_by is replaced"
        );
        assert_ne!(f["event_id"], "forged");
        assert_eq!(f["depth"], 1);
        assert_eq!(f["triggers"][0]["outcome"], "invoked");
    }
    // The follow-up reached the next agent with the dispatcher's fields.
    let next = follow[0]["triggers"][0]["invocation_id"].as_str().unwrap();
    let event = &p.invocation(next)["event"];
    assert_eq!(event["source"], "pap://dispatcher/agents/emitter");
    assert_eq!(event["data"], json!({"n": 1}));

    let undeclared = p.events("u.ndjson", &[ev("m2", "test.emit.undeclared", json!({}))]);
    let run = p.dispatch(T0, &undeclared, &[]);
    assert_eq!(run.code, 4);
    let reason = run.trigger("m2", "t-emitter")["reason"].as_str().unwrap();
    assert!(
        reason.contains("\"test.other.created\" is not declared in the agent's `emits`"),
        "{reason}"
    );
}

#[test]
fn outside_events_may_not_use_the_reserved_prefix() {
    let p = Project::new();
    let file = p.events(
        "e.ndjson",
        &[
            ev("x1", "pap.agent.invocation.completed", json!({})),
            ev("x2", "test.basic.happened", json!({})),
        ],
    );
    let run = p.dispatch(T0, &file, &[]);
    assert_eq!(run.code, 3);
    assert_eq!(run.lines[0]["status"], "invalid");
    assert!(run.lines[0]["error"].as_str().unwrap().contains("reserved"));
    assert_eq!(run.lines[0]["input"], format!("{}:1", file.display()));
    assert_eq!(
        run.outcome("x2", "t-echo"),
        "invoked",
        "the neighbour still proceeds"
    );
}

#[test]
fn a_bad_line_is_reported_with_its_number_and_exit_3_wins_over_4() {
    let p = Project::new();
    let good = ev("g1", "test.broken.happened", json!({}));
    let text = format!(
        "{good}\n{{\"pap_version\":\"0.2\",\n\n{}\n",
        ev("g2", "test.basic.happened", json!({}))
    );
    let file = p.write("mixed.ndjson", &text);
    let run = p.dispatch(T0, &file, &[]);
    assert_eq!(run.code, 3, "{}", run.stdout);
    let bad = run.lines.iter().find(|l| l["status"] == "invalid").unwrap();
    assert_eq!(bad["input"], format!("{}:2", file.display()));
    assert_eq!(run.outcome("g2", "t-echo"), "invoked");
    assert_eq!(run.trigger("g1", "t-broken")["result"], "failed");
}

#[test]
fn cloudevents_structured_events_are_dispatched() {
    let p = Project::new();
    std::fs::write(
        p.root().join("triggers/t-cloudevent.yaml"),
        "pap_version: \"0.2\"\ntrigger:\n  id: t-cloudevent\n  match:\n    type: com.github.pull_request.opened\n  \
         filter:\n    - path: $.comexampleextension1\n      operator: eq\n      value: value\n  agent: echo\n",
    )
    .unwrap();
    let sdk = common::fixture("cloudevents/cloudevent_structured.json");
    let run = p.dispatch(T0, &sdk, &[]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert_eq!(run.outcome("A234-1234-1234", "t-cloudevent"), "invoked");
    let inv = run.trigger("A234-1234-1234", "t-cloudevent")["invocation_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let event = &p.invocation(&inv)["event"];
    assert_eq!(event["pap_version"], "0.2");
    assert_eq!(event["data"]["symbol"], "ACME");

    // The spec's own examples: data_base64, XML data, and numeric data are not PAP events;
    // the one with JSON object data is (with its null subject dropped).
    let spec = common::fixture("cloudevents/spec-examples.json");
    let run = p.dispatch(T0, &spec, &[]);
    assert_eq!(run.code, 3);
    let statuses: Vec<&str> = run
        .lines
        .iter()
        .map(|l| l["status"].as_str().unwrap())
        .collect();
    assert!(statuses.contains(&"no_match"), "{statuses:?}");
    assert!(run.stdout.contains("data_base64"));
    assert!(run.lines.iter().all(|l| l["status"] != "dispatched"));
}

#[test]
fn no_run_records_queued_and_dry_run_writes_nothing() {
    let p = Project::new();
    let file = p.events(
        "e.ndjson",
        &[
            ev("e1", "test.basic.happened", json!({})),
            ev("e1", "test.basic.happened", json!({})),
        ],
    );
    let dry = p.dispatch(T0, &file, &["--dry-run"]);
    assert_eq!(dry.code, 0);
    let t = dry.trigger("e1", "t-echo");
    assert_eq!(
        (
            t["outcome"].as_str(),
            &t["invocation_id"],
            &t["result"],
            &t["emitted"]
        ),
        (Some("invoked"), &Value::Null, &Value::Null, &Value::Null)
    );
    assert_eq!(
        dry.lines[1]["triggers"][0]["outcome"], "duplicate",
        "a dry run sees its own decisions"
    );
    assert!(
        !p.root().join(".pap").exists(),
        "a dry run created the state dir"
    );

    let queued = p.dispatch(T0, &file, &["--no-run"]);
    assert_eq!(queued.outcome("e1", "t-echo"), "queued");
    assert_eq!(queued.trigger("e1", "t-echo")["result"], Value::Null);
    let invs = p.invocations();
    assert_eq!(invs.len(), 1);
    assert_eq!(invs[0]["status"], "queued");

    // A dry run against existing state sees it, and leaves it as it was.
    let other = p.events(
        "o.ndjson",
        &[
            ev("e1", "test.basic.happened", json!({})),
            ev("e9", "test.basic.happened", json!({})),
        ],
    );
    let dry = p.dispatch(T0, &other, &["--dry-run"]);
    assert_eq!(dry.outcome("e1", "t-echo"), "duplicate");
    assert_eq!(dry.outcome("e9", "t-echo"), "invoked");
    assert_eq!(p.invocations().len(), 1);
}

#[test]
fn explain_shows_every_condition_and_disabled_triggers() {
    let p = Project::new();
    let file = p.events(
        "e.ndjson",
        &[ev("e1", "test.filter.checked", json!({"n": 4, "s": "x"}))],
    );
    let run = p.dispatch(T0, &file, &["--dry-run", "--explain"]);
    let gt = &run.trigger("e1", "f-gt")["explain"];
    assert_eq!(gt["file"], "triggers/f-gt.yaml");
    assert_eq!(
        gt["conditions"],
        json!([{"condition": "$.data.n gt 3.0", "holds": true, "saw": [4]}])
    );
    let stages: Vec<&str> = gt["stages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["stage"].as_str().unwrap())
        .collect();
    assert_eq!(stages, ["filter", "idempotency", "cascade", "risk"]);
    let missing = &run.trigger("e1", "f-exists")["explain"]["conditions"][0];
    assert_eq!(
        (missing["holds"].as_bool(), &missing["saw"]),
        (Some(false), &json!([]))
    );

    let basic = p.events("b.ndjson", &[ev("b1", "test.basic.happened", json!({}))]);
    let run = p.dispatch(T0, &basic, &["--dry-run", "--explain"]);
    assert_eq!(run.outcome("b1", "t-disabled"), "disabled");

    // The human form names the condition and the value it saw.
    let out = p
        .cmd(T0)
        .args(["dispatch", "--dry-run", "--explain"])
        .arg(&file)
        .output()
        .unwrap();
    let text = common::stdout(&out);
    assert!(text.contains("✓ $.data.n gt 3.0   saw 4"), "{text}");
    assert!(text.contains("✗ $.data.opt exists   saw missing"), "{text}");
}

#[test]
fn human_output_has_a_line_per_event_and_a_summary() {
    let p = Project::new();
    let file = p.events(
        "e.ndjson",
        &[
            ev("e1", "test.basic.happened", json!({})),
            ev("e2", "nobody.listens.here", json!({})),
        ],
    );
    let out = p.cmd(T0).arg("dispatch").arg(&file).output().unwrap();
    let text = common::stdout(&out);
    assert!(
        text.contains(
            "● e1 test.basic.happened\n    t-echo → echo: invoked, succeeded after 1 attempt inv_"
        ),
        "{text}"
    );
    assert!(
        text.contains("· e2 nobody.listens.here: no trigger matches"),
        "{text}"
    );
    assert!(
        text.ends_with("2 events: 1 dispatched, 1 matched no trigger; 1 invoked (1 succeeded)\n"),
        "{text}"
    );
}

#[test]
fn stdin_and_several_files_and_arrays() {
    let p = Project::new();
    let a = p.write(
        "a.json",
        &serde_json::to_string_pretty(&ev("a1", "test.basic.happened", json!({}))).unwrap(),
    );
    let b = p.write(
        "b.json",
        &json!([ev("b1", "test.basic.happened", json!({})), 7]).to_string(),
    );
    let out = p
        .cmd(T0)
        .args(["dispatch", "--json", "--no-run"])
        .arg(&a)
        .arg(&b)
        .arg("-")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write;
            let mut stdin = child.stdin.take().unwrap();
            writeln!(stdin, "{}", ev("c1", "test.basic.happened", json!({})))?;
            drop(stdin);
            child.wait_with_output()
        })
        .unwrap();
    let run = common::dispatch::run_of(&out);
    assert_eq!(run.code, 3);
    let inputs: Vec<String> = run
        .lines
        .iter()
        .map(|l| {
            l["input"]
                .as_str()
                .unwrap()
                .replace(&p.root().display().to_string(), "")
        })
        .collect();
    assert_eq!(inputs, ["/a.json:1", "/b.json[0]", "/b.json[1]", "-:1"]);
    assert_eq!(
        run.lines[2]["error"],
        "an event is a JSON object, found a number"
    );
}

/// A pipeline that trickles events gets each line while its stdin is still open: events are
/// read and decided in batches, but a batch never waits for input that is not there yet.
#[test]
fn a_trickling_stdin_gets_each_line_before_the_next_event_is_sent() {
    use std::io::{BufRead, BufReader, Write};
    let p = Project::new();
    let mut child = p
        .cmd(T0)
        .args(["dispatch", "--json", "--no-run", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let (lines, got) = std::sync::mpsc::channel();
    let stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let _ = lines.send(line.unwrap());
        }
    });
    for id in ["t1", "t2", "t3"] {
        writeln!(stdin, "{}", ev(id, "test.basic.happened", json!({}))).unwrap();
        stdin.flush().unwrap();
        // Generous: the line comes at once; only a stall (waiting for more input) fails.
        let line = got
            .recv_timeout(std::time::Duration::from_secs(30))
            .unwrap_or_else(|_| panic!("no line for {id} while stdin stays open"));
        let line: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(line["event_id"], id);
        assert_eq!(line["triggers"][0]["outcome"], "queued");
    }
    // An event whose line is only half written does not hold back the one before it.
    let (whole, half) = (
        ev("t4", "test.basic.happened", json!({})).to_string(),
        ev("t5", "test.basic.happened", json!({})).to_string(),
    );
    let (head, tail) = half.split_at(half.len() / 2);
    write!(stdin, "{whole}\n{head}").unwrap();
    stdin.flush().unwrap();
    let line = got
        .recv_timeout(std::time::Duration::from_secs(30))
        .expect("t4's line while t5 is half written");
    assert_eq!(
        serde_json::from_str::<Value>(&line).unwrap()["event_id"],
        "t4"
    );
    writeln!(stdin, "{tail}").unwrap();
    drop(stdin);
    let line = got
        .recv_timeout(std::time::Duration::from_secs(30))
        .unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(&line).unwrap()["event_id"],
        "t5"
    );
    assert!(child.wait().unwrap().success());
    reader.join().unwrap();
}

#[test]
fn an_unreadable_file_exits_1_and_the_others_still_count() {
    let p = Project::new();
    let good = p.events("g.ndjson", &[ev("g1", "test.basic.happened", json!({}))]);
    let out = p
        .cmd(T0)
        .args(["dispatch", "--json", "missing.ndjson"])
        .arg(&good)
        .output()
        .unwrap();
    let run = common::dispatch::run_of(&out);
    assert_eq!(run.code, 1);
    assert!(
        run.stderr.contains("cannot read missing.ndjson"),
        "{}",
        run.stderr
    );
    assert_eq!(run.outcome("g1", "t-echo"), "invoked");
}

#[test]
fn a_dispatch_of_nothing_readable_says_only_why() {
    let p = Project::new();
    let out = p
        .cmd(T0)
        .args(["dispatch", "missing.ndjson"])
        .output()
        .unwrap();
    assert_eq!(common::code(&out), 1);
    assert_eq!(common::stdout(&out), "", "no summary of nothing");
    let err = common::stderr(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("error: cannot read missing.ndjson"),
        "{err}"
    );
}

#[test]
fn medium_and_high_risk_invocations_are_audited() {
    let p = Project::new();
    let file = p.events(
        "e.ndjson",
        &[
            ev("m1", "test.medium.happened", json!({})),
            ev("r1", "test.basic.happened", json!({})),
        ],
    );
    p.dispatch(T0, &file, &[]);
    let out = p.cmd(T0).args(["audit", "--json"]).output().unwrap();
    let entries = common::dispatch::lines(&common::stdout(&out));
    let actions: Vec<&str> = entries
        .iter()
        .map(|e| e["action"].as_str().unwrap())
        .collect();
    assert_eq!(actions, ["decided", "attempt_started", "succeeded"]);
    assert!(
        entries
            .iter()
            .all(|e| e["agent"] == "audited" && e["risk"] == "medium")
    );
    let seqs: Vec<u64> = entries.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert_eq!(seqs, [1, 2, 3]);
}
