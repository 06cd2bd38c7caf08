//! A trigger's `batch`: the events of a burst are `batched`, and one
//! invocation gets every one of them, in order, once the window has passed or the batch is
//! full. `pap test` decides batches on its simulated clock; a real Alertmanager's storm of
//! 40 alerts in one group makes one invocation that sees all 40; a pending batch is durable
//! before the answer and survives a SIGKILL of serve.

use crate::common;

use common::http::{curl, curl_available, post, project, serve};
use common::serve::{Project, wait_until};
use serde_json::{Value, json};

/// A trigger batching firing alerts per Alertmanager group for the `quick` agent.
fn batching(p: &Project, max: u32, window: &str) {
    std::fs::write(
        p.root().join("triggers/t-batch.yaml"),
        format!(
            "pap_version: \"0.2\"\ntrigger:\n  id: t-batch\n  match:\n    type: alertmanager.alert.firing\n  batch:\n    max: {max}\n    window: {window}\n    key: $.data.groupKey\n  agent: quick\n"
        ),
    )
    .unwrap();
}

/// The invocations of `t-batch`, each with its whole event.
fn batches(p: &Project) -> Vec<Value> {
    p.invocations()
        .into_iter()
        .filter(|i| i["trigger"] == "t-batch")
        .map(|i| {
            let id = i["id"].as_str().unwrap();
            let out = p
                .cmd()
                .args(["invocations", "show", id, "--json"])
                .output()
                .unwrap();
            serde_json::from_slice(&out.stdout).unwrap()
        })
        .collect()
}

/// The ids of the events a batch's invocation got, in order.
fn batched_ids(inv: &Value) -> Vec<String> {
    inv["event"]["batch"]
        .as_array()
        .unwrap_or_else(|| panic!("no batch in {inv}"))
        .iter()
        .map(|e| e["id"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn pap_test_decides_batches_on_its_simulated_clock() {
    let p = project("");
    batching(&p, 3, "30s");
    let step = |at: &str, n: u32, expect: &str| {
        format!(
            "      - at: {at}\n        event: {{id: e{n}, type: alertmanager.alert.firing, data: {{groupKey: g1}}}}\n        expect: {{t-batch: {expect}}}\n"
        )
    };
    let mut steps = String::new();
    steps.push_str(&step("+0s", 1, "batched"));
    steps.push_str(&step(
        "+5s",
        2,
        "{outcome: batched, reason: \"batch of 2 (at most 3)\"}",
    ));
    steps.push_str("      - at: +29s\n        fired: {t-batch: unmatched}\n");
    steps.push_str("      - at: +30s\n        fired: {t-batch: invoked}\n");
    // A full batch is handed over at once, without waiting for its window.
    for (n, at) in [(3, "+40s"), (4, "+41s"), (5, "+42s")] {
        steps.push_str(&step(at, n, "batched"));
    }
    steps.push_str("      - at: +43s\n        fired: {t-batch: invoked}\n");
    std::fs::create_dir_all(p.root().join("rule-tests")).unwrap();
    std::fs::write(
        p.root().join("rule-tests/batch.yaml"),
        format!("cases:\n  - name: a burst, then a full batch\n    start: 2026-03-11T06:00:00Z\n    events:\n{steps}"),
    )
    .unwrap();
    let out = p.cmd().arg("test").output().unwrap();
    assert_eq!(
        common::code(&out),
        0,
        "{}{}",
        common::stdout(&out),
        common::stderr(&out)
    );
    assert!(common::stdout(&out).contains("1 passed, 0 failed"));
}

/// Posts `alerts` to a real Alertmanager in one request (its API v2).
fn push_alerts(am: &crate::http_clients::Alertmanager, alerts: &[Value]) {
    let body = serde_json::to_vec(alerts).unwrap();
    let r = curl(
        &[
            "-X",
            "POST",
            "-H",
            "content-type: application/json",
            &format!("{}/api/v2/alerts", am.url),
        ],
        Some(&body),
    );
    assert_eq!(r.status, 200, "{r:?}");
}

#[test]
fn a_storm_of_40_alerts_in_one_group_makes_one_invocation_that_sees_all_40() {
    let Some(program) = crate::http_clients::alertmanager_and_amtool(
        "batches are not checked against a real Alertmanager's storm",
    ) else {
        return;
    };
    let p = project("");
    batching(&p, 100, "5s");
    let (_serve, url) = serve(&p, &[], &[]);
    let am = crate::http_clients::alertmanager(&p, &program, &url);
    let storm: Vec<Value> = (0..40)
        .map(|n| {
            json!({"labels": {"alertname": "NodeDown", "severity": "page",
                              "instance": format!("rack7-node{n:02}:9100")},
                   "annotations": {"summary": "node unreachable"}})
        })
        .collect();
    push_alerts(&am, &storm);
    wait_until("the batch's invocation", || !batches(&p).is_empty());
    // Alertmanager repeats the group every 2 s: the repeats are duplicates, never a second
    // batch.
    std::thread::sleep(std::time::Duration::from_secs(3));
    let all = batches(&p);
    assert_eq!(all.len(), 1, "{all:?}");
    let ids = batched_ids(&all[0]);
    let distinct: std::collections::BTreeSet<&String> = ids.iter().collect();
    assert_eq!((ids.len(), distinct.len()), (40, 40), "{ids:?}");
    let instances: std::collections::BTreeSet<&str> = all[0]["event"]["batch"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["data"]["labels"]["instance"].as_str().unwrap())
        .collect();
    assert_eq!(instances.len(), 40);
}

#[test]
fn a_pending_batch_is_durable_before_the_answer_and_survives_a_sigkill() {
    if !curl_available() {
        return;
    }
    let p = project("");
    batching(&p, 100, "4s");
    let (serve_1, url) = serve(&p, &[], &[]);
    let post_one = |url: &str, n: u32| {
        let event = json!({"pap_version": "0.2", "id": format!("e{n}"),
                           "type": "alertmanager.alert.firing", "source": "test",
                           "time": "2026-01-01T00:00:00Z", "data": {"groupKey": "g1"}});
        let r = post(
            &format!("{url}/v1/events"),
            "application/json",
            event.to_string().as_bytes(),
            &[],
        );
        assert_eq!(r.status, 200, "{r:?}");
        assert_eq!(r.lines()[0]["triggers"][0]["outcome"], "batched", "{r:?}");
    };
    for n in 1..=3 {
        post_one(&url, n);
    }
    // Killed with the batch pending: nothing was handed over yet.
    serve_1.kill();
    assert!(batches(&p).is_empty());
    let (_serve_2, url) = serve(&p, &[], &[]);
    post_one(&url, 4);
    wait_until("the batch handed over after the restart", || {
        !batches(&p).is_empty()
    });
    let all = batches(&p);
    assert_eq!(all.len(), 1);
    assert_eq!(batched_ids(&all[0]), ["e1", "e2", "e3", "e4"]);
}

/// A trigger batching firing alerts per alertname: at most `max` in one invocation.
fn batching_by_alertname(p: &Project, max: u32, window: &str) {
    std::fs::write(
        p.root().join("triggers/t-batch.yaml"),
        format!(
            "pap_version: \"0.2\"\ntrigger:\n  id: t-batch\n  match:\n    type: alertmanager.alert.firing\n  batch:\n    max: {max}\n    window: {window}\n    key: $.data.labels.alertname\n  agent: quick\n"
        ),
    )
    .unwrap();
}

/// An Alertmanager webhook body (version 4, as Alertmanager sends it) holding alerts
/// `from..to` of one alertname, each its own alert (instance `nodeN`).
fn alertmanager_body(range: std::ops::Range<u32>) -> Vec<u8> {
    let alerts: Vec<Value> = range
        .map(|n| {
            json!({"status": "firing",
                   "labels": {"alertname": "NodeDown", "instance": format!("node{n}")},
                   "annotations": {"summary": "node unreachable"},
                   "startsAt": "2026-03-11T06:00:00Z", "endsAt": "0001-01-01T00:00:00Z",
                   "generatorURL": "http://prometheus:9090/graph",
                   "fingerprint": format!("{n:016x}")})
        })
        .collect();
    json!({"receiver": "pap", "status": "firing", "alerts": alerts,
           "groupLabels": {"alertname": "NodeDown"}, "commonLabels": {"alertname": "NodeDown"},
           "commonAnnotations": {}, "externalURL": "http://alertmanager:9093", "version": "4",
           "groupKey": "{}:{alertname=\"NodeDown\"}", "truncatedAlerts": 0})
    .to_string()
    .into_bytes()
}

/// Posts alerts `range` to serve's Alertmanager route in one request; every alert is
/// `batched`. Returns the answer's lines.
fn post_alerts(url: &str, range: std::ops::Range<u32>) -> Vec<Value> {
    let n = range.len();
    let r = post(
        &format!("{url}/v1/ingest/alertmanager"),
        "application/json",
        &alertmanager_body(range),
        &[],
    );
    assert_eq!(r.status, 200, "{r:?}");
    let lines = r.lines();
    assert_eq!(lines.len(), n, "{r:?}");
    for line in &lines {
        assert_eq!(line["triggers"][0]["outcome"], "batched", "{line}");
    }
    lines
}

/// Each batch's alerts (their instance numbers), the batches ordered by their first alert.
fn batched_alerts(p: &Project) -> Vec<Vec<u32>> {
    let mut all: Vec<Vec<u32>> = batches(p)
        .iter()
        .map(|inv| {
            inv["event"]["batch"]
                .as_array()
                .unwrap_or_else(|| panic!("no batch in {inv}"))
                .iter()
                .map(|e| {
                    let instance = e["data"]["labels"]["instance"].as_str().unwrap();
                    instance.trim_start_matches("node").parse().unwrap()
                })
                .collect()
        })
        .collect();
    all.sort();
    all
}

/// Waits for `count` batches, then for the window of a batch that could still come.
fn settled_batches(p: &Project, count: usize) -> Vec<Vec<u32>> {
    wait_until(&format!("{count} batch invocations"), || {
        batches(p).len() >= count
    });
    std::thread::sleep(std::time::Duration::from_secs(3));
    batched_alerts(p)
}

const FOUR_FOUR_TWO: [&[u32]; 3] = [&[0, 1, 2, 3], &[4, 5, 6, 7], &[8, 9]];

#[test]
fn max_bounds_a_batch_ten_alerts_in_one_body_make_three_invocations_of_four_four_and_two() {
    if !curl_available() {
        return;
    }
    let p = project("");
    batching_by_alertname(&p, 4, "2s");
    let (_serve, url) = serve(&p, &[], &[]);
    let lines = post_alerts(&url, 0..10);
    // The 4th and the 8th alert fill a batch: it is handed over in their own decision.
    for (n, line) in lines.iter().enumerate() {
        let handed = line["triggers"][0]["handed_over"].as_array();
        match n {
            3 | 7 => {
                let handed = handed.unwrap_or_else(|| panic!("alert {n}: {line}"));
                assert_eq!(handed.len(), 1, "{line}");
                assert!(handed[0]["invocation_id"].is_string(), "{line}");
                assert!(
                    line["triggers"][0]["reason"]
                        .as_str()
                        .unwrap()
                        .contains("batch of 4 (at most 4)"),
                    "{line}"
                );
            }
            _ => assert!(handed.is_none(), "alert {n}: {line}"),
        }
    }
    assert_eq!(settled_batches(&p, 3), FOUR_FOUR_TWO);
}

#[test]
fn max_bounds_a_batch_across_requests() {
    if !curl_available() {
        return;
    }
    let p = project("");
    batching_by_alertname(&p, 4, "2s");
    let (_serve, url) = serve(&p, &[], &[]);
    for range in [0..3, 3..6, 6..10] {
        post_alerts(&url, range);
    }
    assert_eq!(settled_batches(&p, 3), FOUR_FOUR_TWO);
}

#[test]
fn max_bounds_a_batch_across_a_sigkill_of_serve() {
    if !curl_available() {
        return;
    }
    let p = project("");
    // A window long enough that the two left waiting do not go before the restart.
    batching_by_alertname(&p, 4, "10s");
    let (serve_1, url) = serve(&p, &[], &[]);
    // The first four are handed over at once; 4 and 5 wait in their batch.
    post_alerts(&url, 0..6);
    serve_1.kill();
    assert_eq!(batched_alerts(&p), [[0, 1, 2, 3]]);
    let (_serve_2, url) = serve(&p, &[], &[]);
    post_alerts(&url, 6..10);
    assert_eq!(settled_batches(&p, 3), FOUR_FOUR_TWO);
}

/// PAP's cascade limit holds through a batch: a trigger that batches the type its own agent
/// emits, fed outside events all along, runs at the depth of the deepest event of each batch,
/// so its chain ends at `max_cascade_depth` (3: runs at depths 0, 1 and 2, and the event the
/// last one emits is rejected).
#[test]
fn a_batch_runs_at_its_deepest_event_s_depth_so_a_chain_through_it_ends() {
    if !curl_available() {
        return;
    }
    let p = project("");
    std::fs::write(
        p.root().join("agents/looping.yaml"),
        "pap_version: \"0.2\"\nagent:\n  id: looping\n  risk_level: read_only\n  model:\n    provider: command\n    command: [\"sh\", \"-c\", \"echo '{\\\"type\\\":\\\"loop.batch.ran\\\",\\\"data\\\":{}}' >> \\\"$PAP_EMIT_FILE\\\"; echo '{}'\"]\n  emits: [loop.batch.ran]\n",
    )
    .unwrap();
    std::fs::write(
        p.root().join("triggers/t-loop.yaml"),
        "pap_version: \"0.2\"\ntrigger:\n  id: t-loop\n  match:\n    type: loop.batch.ran\n  batch:\n    max: 100\n    window: 1s\n  agent: looping\n",
    )
    .unwrap();
    let (_serve, url) = serve(&p, &[], &[]);
    // Outside events keep coming, so every batch starts with one (depth 0) and the event the
    // last run emitted joins it later.
    let started = std::time::Instant::now();
    let mut n = 0;
    while started.elapsed() < std::time::Duration::from_secs(9) {
        let event = json!({"pap_version": "0.2", "id": format!("outside-{n}"),
                           "type": "loop.batch.ran", "source": "test",
                           "time": "2026-01-01T00:00:00Z", "data": {}});
        let r = post(
            &format!("{url}/v1/events"),
            "application/json",
            event.to_string().as_bytes(),
            &[],
        );
        assert_eq!(r.status, 200, "{r:?}");
        n += 1;
        std::thread::sleep(std::time::Duration::from_millis(150));
    }
    std::thread::sleep(std::time::Duration::from_secs(2));
    let runs: Vec<Value> = p
        .invocations()
        .into_iter()
        .filter(|i| i["trigger"] == "t-loop")
        .collect();
    let deepest = runs.iter().filter_map(|i| i["depth"].as_u64()).max();
    // Runs at depths 0, 1 and 2, never deeper: the event the run at depth 2 emits (depth 3)
    // is rejected, whatever outside events its batch would have held.
    assert!(runs.len() >= 4, "{runs:?}");
    assert_eq!(deepest, Some(2), "{runs:#?}");
}

/// A high-risk batch is not approved blind: its agent acts on every event of it, so every
/// event is shown (20 by line, then how many more) wherever a person decides: the approval
/// request and its notification, the console's approval page and `pap invocations show`.
#[test]
fn every_event_of_a_high_risk_batch_is_shown_where_a_person_decides() {
    if !curl_available() {
        return;
    }
    let password = "correct horse battery staple";
    let p = project(&format!(
        "listen:\n  auth:\n    principals:\n      - name: ann\n        password_hash: \"{}\"\n        scopes: [read, approve, ingest]\n",
        common::http::hash_password(password)
    ));
    std::fs::write(
        p.root().join("triggers/t-batch.yaml"),
        "pap_version: \"0.2\"\ntrigger:\n  id: t-batch\n  match:\n    type: alertmanager.alert.firing\n  batch:\n    max: 25\n    window: 1h\n  agent: gated\n",
    )
    .unwrap();
    let (_serve, url) = serve(&p, &[], &[]);
    let dir = tempfile::tempdir().unwrap();
    let (jar, _) = common::http::console_login(&url, dir.path(), "ann", password);
    let r = post(
        &format!("{url}/v1/ingest/alertmanager"),
        "application/json",
        &alertmanager_body(0..25),
        &["-u", &format!("ann:{password}")],
    );
    assert_eq!(r.status, 200, "{r:?}");
    wait_until("the batch waiting for approval", || {
        batches(&p)
            .first()
            .is_some_and(|i| i["status"] == "awaiting_approval")
    });
    let inv = &batches(&p)[0];
    let id = inv["id"].as_str().unwrap();
    let shown_by_line = |text: &str| {
        (0..25)
            .filter(|n| text.contains(&format!("node{n}")))
            .count()
    };

    // pap invocations show: each event by line, and how many more.
    let out = p.cmd().args(["invocations", "show", id]).output().unwrap();
    let text = common::stdout(&out);
    assert!(text.contains("batch     25 event(s)"), "{text}");
    assert_eq!(shown_by_line(&text), 20, "{text}");
    assert!(text.contains("and 5 more"), "{text}");

    // The approval request: its notification's text and its ATP context.
    let out = p.cmd().args(["notifications", "--json"]).output().unwrap();
    let request = common::dispatch::lines(&common::stdout(&out))
        .into_iter()
        .find(|n| n["kind"] == "invocation.awaiting_approval")
        .expect("the approval request");
    let content = request["content"].as_str().unwrap();
    assert!(content.contains("a batch of 25 event(s)"), "{content}");
    assert_eq!(shown_by_line(content), 20, "{content}");
    let batch = &request["atp"]["context"]["metadata"]["batch"];
    assert_eq!(
        (batch["count"].clone(), batch["more"].clone()),
        (json!(25), json!(5))
    );
    assert!(
        request["atp"]["context"]["title"]
            .as_str()
            .unwrap()
            .contains("a batch of 25"),
        "{request}"
    );

    // The console's approval page.
    let page = curl(&["-b", &jar, &format!("{url}/approvals")], None);
    assert_eq!(page.status, 200, "{page:?}");
    assert!(
        page.body.contains("This run gets a batch of 25 event(s)"),
        "{}",
        page.body
    );
    assert_eq!(shown_by_line(&page.body), 20);
    assert!(page.body.contains("and 5 more"));
}
