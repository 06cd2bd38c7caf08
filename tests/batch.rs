//! A trigger's `batch` (issue 34, item 2): the events of a burst are `batched`, and one
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
