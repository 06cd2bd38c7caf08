//! What "the same alert" means. The Alertmanager preset's event id is the
//! alert's fingerprint, status and `startsAt`, so a repeat of a firing alert is a duplicate
//! however its `{{ $value }}` annotations change; `identity_annotations` names the annotations
//! that do make a new event, and `refire_after` makes a still-firing alert a new event once per
//! period. A trigger's `throttle.release_key` lets a throttled alert be decided again on a
//! later repeat, instead of being a duplicate for the whole idempotency TTL.
//!
//! Offline cases run `pap adapt` and `pap dispatch --adapter` on a fixed clock (a test
//! build's `PAP_NOW`); the others are driven by a real Alertmanager.

use crate::common;

use std::path::{Path, PathBuf};

use common::http::{high_severity_trigger, project, serve};
use common::serve::{Project, wait_until};
use common::{code, stderr, stdout};
use serde_json::{Value, json};

/// The captured Alertmanager body (one alert, `startsAt` 2022-10-04T13:32:56.014Z).
fn captured() -> Value {
    let text =
        std::fs::read_to_string(common::fixture("webhooks/alertmanager-v4-captured.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn write(dir: &Path, name: &str, body: &Value) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, body.to_string()).unwrap();
    path
}

/// The ids `pap adapt alertmanager FILE` prints, received at `now`.
fn ids_at(p: &Project, file: &Path, now: &str) -> Vec<String> {
    let out = p
        .cmd()
        .env("PAP_NOW", now)
        .args(["adapt", "alertmanager"])
        .arg(file)
        .output()
        .unwrap();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    stdout(&out)
        .lines()
        .map(|l| {
            let e: Value = serde_json::from_str(l).unwrap();
            e["id"].as_str().unwrap().to_owned()
        })
        .collect()
}

/// `pap dispatch --adapter alertmanager --no-run --json FILE`, at `now` when given (a test
/// build's `PAP_NOW`): its report lines.
pub(crate) fn dispatch_alertmanager(p: &Project, file: &Path, now: Option<&str>) -> Vec<Value> {
    let mut cmd = p.cmd();
    if let Some(now) = now {
        cmd.env("PAP_NOW", now);
    }
    let out = cmd
        .args([
            "dispatch",
            "--adapter",
            "alertmanager",
            "--no-run",
            "--json",
        ])
        .arg(file)
        .output()
        .unwrap();
    assert!(matches!(code(&out), 0 | 4), "{}", stderr(&out));
    stdout(&out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Each alert's outcome for the one trigger, dispatched at `now`, in order.
fn outcomes_at(p: &Project, file: &Path, now: &str) -> Vec<String> {
    dispatch_alertmanager(p, file, Some(now))
        .iter()
        .map(|line| line["triggers"][0]["outcome"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn annotations_change_the_id_only_when_named_and_refire_after_makes_a_new_one_per_period() {
    let p = project("");
    let mut body = captured();
    let first = write(p.root(), "first.json", &body);
    body["alerts"][0]["annotations"]["summary"] = json!("poc_metric at 0.93");
    let changed = write(p.root(), "changed.json", &body);
    let hour_later = "2022-10-04T14:32:56Z";

    // By default the summary is not part of the identity: the repeat is the same event.
    let base = ids_at(&p, &first, hour_later);
    assert_eq!(
        base,
        ["am-948c667b1fc76492-firing-2022-10-04T13:32:56.014Z"]
    );
    assert_eq!(ids_at(&p, &changed, hour_later), base);

    let p = project(
        "adapters:\n  - name: alertmanager\n    identity_annotations: [summary]\n    refire_after: 4h\n",
    );
    let named = ids_at(&p, &first, hour_later);
    assert!(named[0].starts_with(&format!("{}-a", base[0])), "{named:?}");
    assert_ne!(ids_at(&p, &changed, hour_later), named);
    // Still firing 4 hours after `startsAt`: a new event, and again after 8.
    let at_5h = ids_at(&p, &first, "2022-10-04T18:33:00Z");
    assert_eq!(at_5h, [format!("{}-refire1", named[0])]);
    let at_9h = ids_at(&p, &first, "2022-10-04T22:33:00Z");
    assert_eq!(at_9h, [format!("{}-refire2", named[0])]);

    // A refire is decided again; a repeat within its period is a duplicate.
    high_severity_trigger(&p, "t-am-firing", "alertmanager.alert.firing");
    assert_eq!(outcomes_at(&p, &first, hour_later), ["queued"]);
    assert_eq!(
        outcomes_at(&p, &first, "2022-10-04T15:00:00Z"),
        ["duplicate"]
    );
    assert_eq!(outcomes_at(&p, &first, "2022-10-04T18:33:00Z"), ["queued"]);
    assert_eq!(
        outcomes_at(&p, &first, "2022-10-04T19:00:00Z"),
        ["duplicate"]
    );
}

#[test]
fn lint_names_a_bad_refire_after_and_annotation() {
    let p = project(
        "adapters:\n  - name: alertmanager\n    identity_annotations: ['']\n    refire_after: 10s\n",
    );
    let out = p.cmd().arg("lint").output().unwrap();
    assert_ne!(code(&out), 0);
    let text = stderr(&out) + &stdout(&out);
    assert!(
        text.contains("refire_after `10s` is shorter than a minute"),
        "{text}"
    );
    assert!(text.contains("an annotation name is empty"), "{text}");
    assert!(text.contains("pap.yaml"), "{text}");
}

/// A trigger on firing alerts, at most one invocation per `window` seconds, releasing the key
/// of a throttled decision when `release` says so.
fn throttled_trigger(p: &Project, window: u32, release: bool) {
    std::fs::write(
        p.root().join("triggers/t-am-firing.yaml"),
        format!(
            "pap_version: \"0.2\"\ntrigger:\n  id: t-am-firing\n  match:\n    type: alertmanager.alert.firing\n  throttle:\n    max_per_window: 1\n    window_seconds: {window}\n    release_key: {release}\n  agent: quick\n"
        ),
    )
    .unwrap();
}

/// The captured body with a second alert of the same group (another instance).
fn two_alerts(p: &Project) -> PathBuf {
    let mut body = captured();
    let mut second = body["alerts"][0].clone();
    second["fingerprint"] = json!("0123456789abcdef");
    second["labels"]["instance"] = json!("api:8001");
    body["alerts"].as_array_mut().unwrap().push(second);
    write(p.root(), "two.json", &body)
}

#[test]
fn release_key_lets_a_throttled_alert_be_decided_again_once_the_window_has_room() {
    let t0 = "2022-10-04T14:00:00Z";
    let later = "2022-10-04T14:01:00Z";
    // Without it, the throttled alert stays a duplicate for the whole TTL.
    let held = project("");
    throttled_trigger(&held, 30, false);
    let body = two_alerts(&held);
    assert_eq!(outcomes_at(&held, &body, t0), ["queued", "throttled"]);
    assert_eq!(outcomes_at(&held, &body, later), ["duplicate", "duplicate"]);

    let released = project("");
    throttled_trigger(&released, 30, true);
    let body = two_alerts(&released);
    assert_eq!(outcomes_at(&released, &body, t0), ["queued", "throttled"]);
    // Before the window has room the key is still held.
    assert_eq!(
        outcomes_at(&released, &body, "2022-10-04T14:00:10Z"),
        ["duplicate", "duplicate"]
    );
    assert_eq!(
        outcomes_at(&released, &body, later),
        ["duplicate", "queued"]
    );
    // Decided once more, it holds its key as any invocation does.
    assert_eq!(
        outcomes_at(&released, &body, "2022-10-04T14:05:00Z"),
        ["duplicate", "duplicate"]
    );
}

#[test]
fn a_real_alertmanager_repeat_of_a_throttled_alert_is_decided_again() {
    let Some(program) = crate::http_clients::alertmanager_and_amtool(
        "release_key is not checked against a real Alertmanager's repeats",
    ) else {
        return;
    };
    let p = project("");
    throttled_trigger(&p, 3, true);
    let (serve, url) = serve(&p, &[], &[]);
    let am = crate::http_clients::alertmanager(&p, &program, &url);
    // Two alerts of one group: the first is invoked, the second throttled (one per 3 s).
    crate::http_clients::amtool(&am, &["instance=api:8000"]);
    crate::http_clients::amtool(&am, &["instance=api:8001"]);
    wait_until("the second alert throttled", || {
        serve.log_text().contains("throttled")
    });
    // Alertmanager repeats the group every 2 s; once the window has room, the throttled
    // alert's repeat is decided again and runs.
    wait_until("both alerts invoked", || {
        let ids: std::collections::BTreeSet<String> = p
            .invocations()
            .iter()
            .filter_map(|i| i["event_id"].as_str().map(str::to_owned))
            .collect();
        ids.len() == 2
    });
}

#[test]
fn a_real_alertmanager_annotation_templated_with_its_value_makes_one_decision() {
    let Some(program) = crate::http_clients::alertmanager_and_amtool(
        "a changing annotation is not checked against a real Alertmanager",
    ) else {
        return;
    };
    let p = project("");
    high_severity_trigger(&p, "t-am-firing", "alertmanager.alert.firing");
    let sink = crate::adapt::capture();
    let am = crate::http_clients::alertmanager(&p, &program, &sink.url);
    // The same alert five times, its summary carrying the value as `{{ $value }}` would.
    let mut bodies = Vec::new();
    for n in 1..=5 {
        let summary = format!("p99 at {n}.{n}s");
        crate::http_clients::amtool(&am, &[&format!("--annotation=summary={summary}")]);
        wait_until("Alertmanager's webhook with the new summary", || {
            sink.bodies
                .lock()
                .unwrap()
                .iter()
                .any(|b| String::from_utf8_lossy(b).contains(&summary))
        });
        let body = sink
            .bodies
            .lock()
            .unwrap()
            .iter()
            .rev()
            .find(|b| String::from_utf8_lossy(b).contains(&summary))
            .cloned()
            .unwrap();
        bodies.push(write(
            p.root(),
            &format!("repeat-{n}.json"),
            &serde_json::from_slice(&body).unwrap(),
        ));
    }
    let outcomes: Vec<String> = bodies
        .iter()
        .flat_map(|b| outcomes_at(&p, b, "2026-01-01T00:00:00Z"))
        .collect();
    assert_eq!(
        outcomes,
        ["queued", "duplicate", "duplicate", "duplicate", "duplicate"]
    );
}
