//! Group events (`per: group`): an Alertmanager notification is one event
//! holding its group's alerts. A repeat of the group is a duplicate, and so is a repeat that
//! only drops alerts (they resolved); a new alert makes a new decision; the group's
//! resolution ends what it started through `cancel_on: {match: $.data.groupKey}`. `pap test`
//! decides group bodies, and a real Alertmanager's storm of 40 alerts in one group is one
//! invocation that sees all 40.

use crate::common;

use std::path::PathBuf;

use common::http::{curl, project, serve};
use common::serve::{Project, wait_until};
use serde_json::{Value, json};

const PER_GROUP: &str = "adapters:\n  - name: alertmanager\n    per: group\n";

fn alert(n: u32, status: &str) -> Value {
    json!({"status": status, "fingerprint": format!("fp{n:02}"),
           "labels": {"alertname": "NodeDown", "severity": "page", "instance": format!("rack7-node{n:02}")},
           "annotations": {"summary": "node unreachable"},
           "startsAt": "2026-01-01T00:00:00Z",
           "endsAt": if status == "firing" { "0001-01-01T00:00:00Z" } else { "2026-01-01T00:30:00Z" },
           "generatorURL": "http://prometheus:9090/graph"})
}

/// An Alertmanager notification of the `NodeDown` group holding `alerts`.
fn notification(p: &Project, name: &str, alerts: Vec<Value>) -> PathBuf {
    let status = if alerts.iter().any(|a| a["status"] == "firing") {
        "firing"
    } else {
        "resolved"
    };
    let body = json!({"version": "4", "receiver": "pap", "status": status,
                      "groupKey": "{}:{alertname=\"NodeDown\"}",
                      "groupLabels": {"alertname": "NodeDown"},
                      "commonLabels": {"alertname": "NodeDown"},
                      "externalURL": "http://alertmanager:9093", "alerts": alerts});
    let path = p.root().join(name);
    std::fs::write(&path, body.to_string()).unwrap();
    path
}

fn group_trigger(p: &Project, agent: &str, extra: &str) {
    std::fs::write(
        p.root().join("triggers/t-group.yaml"),
        format!(
            "pap_version: \"0.2\"\ntrigger:\n  id: t-group\n  match:\n    type: alertmanager.group.firing\n{extra}  agent: {agent}\n"
        ),
    )
    .unwrap();
}

/// The one report line of `pap dispatch --adapter alertmanager --no-run --json FILE`.
fn decide(p: &Project, file: &std::path::Path) -> Value {
    crate::alert_identity::dispatch_alertmanager(p, file, None).remove(0)
}

#[test]
fn a_repeat_that_only_drops_alerts_starts_no_run_and_a_new_alert_does() {
    let p = project(PER_GROUP);
    group_trigger(&p, "quick", "");
    let three: Vec<Value> = (1..=3).map(|n| alert(n, "firing")).collect();
    let first = decide(&p, &notification(&p, "three.json", three.clone()));
    assert_eq!(first["type"], "alertmanager.group.firing");
    assert_eq!(first["triggers"][0]["outcome"], "queued", "{first}");
    let inv = first["triggers"][0]["invocation_id"].as_str().unwrap();
    let shown = p
        .cmd()
        .args(["invocations", "show", inv, "--json"])
        .output()
        .unwrap();
    let shown: Value = serde_json::from_slice(&shown.stdout).unwrap();
    assert_eq!(
        shown["event"]["data"]["alerts"].as_array().unwrap().len(),
        3
    );
    assert_eq!(
        shown["event"]["data"]["summary"],
        "3 alerts firing: NodeDown (page) on rack7-node01: node unreachable, and 2 more"
    );

    // The same group again: the same event.
    let again = decide(&p, &notification(&p, "again.json", three));
    assert_eq!(again["triggers"][0]["outcome"], "duplicate");
    // One resolved (listed as such), then gone from the group: nothing new to look at.
    let dropped = vec![alert(1, "resolved"), alert(2, "firing"), alert(3, "firing")];
    let line = decide(&p, &notification(&p, "dropped.json", dropped));
    assert_eq!(line["triggers"][0]["outcome"], "duplicate", "{line}");
    assert!(
        line["triggers"][0]["reason"]
            .as_str()
            .unwrap()
            .contains("alerts only dropped out"),
        "{line}"
    );
    let line = decide(
        &p,
        &notification(&p, "two.json", vec![alert(2, "firing"), alert(3, "firing")]),
    );
    assert_eq!(line["triggers"][0]["outcome"], "duplicate", "{line}");
    // A new alert joins: decided again.
    let grown = vec![alert(2, "firing"), alert(3, "firing"), alert(4, "firing")];
    let line = decide(&p, &notification(&p, "grown.json", grown));
    assert_eq!(line["triggers"][0]["outcome"], "queued", "{line}");
}

#[test]
fn the_groups_resolution_cancels_its_approval_by_group_key() {
    let p = project(PER_GROUP);
    group_trigger(
        &p,
        "gated",
        "  cancel_on:\n    type: alertmanager.group.resolved\n    match: $.data.groupKey\n",
    );
    let lint = p.cmd().arg("lint").output().unwrap();
    assert!(lint.status.success(), "{}", common::stderr(&lint));
    let firing = decide(
        &p,
        &notification(
            &p,
            "firing.json",
            vec![alert(1, "firing"), alert(2, "firing")],
        ),
    );
    assert_eq!(firing["triggers"][0]["outcome"], "awaiting_approval");
    let resolved = decide(
        &p,
        &notification(
            &p,
            "resolved.json",
            vec![alert(1, "resolved"), alert(2, "resolved")],
        ),
    );
    assert_eq!(resolved["type"], "alertmanager.group.resolved");
    assert_eq!(resolved["cancelled"][0]["cancelled"], true, "{resolved}");
    let inv = firing["triggers"][0]["invocation_id"].as_str().unwrap();
    assert_eq!(p.invocation_status(inv), "cancelled");
}

#[test]
fn pap_test_decides_group_bodies() {
    let p = project(PER_GROUP);
    group_trigger(&p, "quick", "");
    let body = |alerts: Vec<Value>| {
        json!({"receiver": "pap", "status": "firing", "groupKey": "g", "alerts": alerts})
            .to_string()
    };
    let steps = [
        (
            "+0s",
            body(vec![alert(1, "firing"), alert(2, "firing")]),
            "invoked",
        ),
        ("+1m", body(vec![alert(2, "firing")]), "duplicate"),
        (
            "+2m",
            body(vec![alert(2, "firing"), alert(3, "firing")]),
            "invoked",
        ),
    ];
    let mut text = String::from(
        "cases:\n  - name: a group grows and shrinks\n    start: 2026-01-01T00:05:00Z\n    events:\n",
    );
    for (at, body, outcome) in steps {
        text.push_str(&format!(
            "      - at: {at}\n        webhook: {{adapter: alertmanager, body: {body}}}\n        expect: {{t-group: {outcome}}}\n"
        ));
    }
    std::fs::create_dir_all(p.root().join("rule-tests")).unwrap();
    std::fs::write(p.root().join("rule-tests/group.yaml"), text).unwrap();
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

#[test]
fn a_real_alertmanager_storm_of_40_in_one_group_is_one_invocation_of_all_40() {
    let Some(program) = crate::http_clients::alertmanager_and_amtool(
        "group events are not checked against a real Alertmanager's storm",
    ) else {
        return;
    };
    let p = project(PER_GROUP);
    group_trigger(&p, "quick", "");
    let (_serve, url) = serve(&p, &[], &[]);
    // Alertmanager sends a group's first notification at once without a `group_wait`, and may
    // take it before the 40 alerts of one post are all in the group (seen under load): then the
    // grown group is a second decision, as it should be. Deployed Alertmanagers wait (30 s by
    // default) so that a storm goes out whole; so does this one, for 2 s.
    let am = crate::http_clients::alertmanager_waiting(&p, &program, &url, "2s");
    let storm: Vec<Value> = (0..40)
        .map(|n| {
            json!({"labels": {"alertname": "NodeDown", "severity": "page",
                              "instance": format!("rack7-node{n:02}:9100")},
                   "annotations": {"summary": "node unreachable"}})
        })
        .collect();
    let r = curl(
        &[
            "-X",
            "POST",
            "-H",
            "content-type: application/json",
            &format!("{}/api/v2/alerts", am.url),
        ],
        Some(&serde_json::to_vec(&storm).unwrap()),
    );
    assert_eq!(r.status, 200, "{r:?}");
    let of_group = || -> Vec<Value> {
        p.invocations()
            .into_iter()
            .filter(|i| i["trigger"] == "t-group")
            .collect()
    };
    wait_until("the group's invocation", || !of_group().is_empty());
    // Alertmanager repeats the group every 2 s: each repeat is a duplicate.
    std::thread::sleep(std::time::Duration::from_secs(3));
    let all = of_group();
    assert_eq!(all.len(), 1, "{all:?}");
    let id = all[0]["id"].as_str().unwrap();
    let shown = p
        .cmd()
        .args(["invocations", "show", id, "--json"])
        .output()
        .unwrap();
    let shown: Value = serde_json::from_slice(&shown.stdout).unwrap();
    let alerts = shown["event"]["data"]["alerts"].as_array().unwrap();
    assert_eq!(alerts.len(), 40);
    assert_eq!(shown["event"]["data"]["firing"], 40);
}
