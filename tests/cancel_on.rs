//! A trigger's `cancel_on`: an alert's resolution ends what its firing
//! started and has not finished. Driven by a real Alertmanager: the approval its firing waits
//! for and the trailing-debounce fire it is part of both end, and the invocation shows
//! `cancelled` in the CLI, the HTTP API and the inbox (its approval request closed). A forged
//! resolution from another principal ends nothing, a late resolution of an earlier firing
//! leaves the next firing alone, and `running: true` stops a run with its process group.

use crate::common;

use std::path::{Path, PathBuf};

use common::http::{curl, curl_available, post, project, serve};
use common::serve::{Project, wait_until};
use common::stdout;
use serde_json::{Value, json};

/// A trigger on firing alerts for `agent`, ended by their resolution (same fingerprint).
fn cancelled_by_resolution(p: &Project, id: &str, agent: &str, extra: &str) {
    std::fs::write(
        p.root().join(format!("triggers/{id}.yaml")),
        format!(
            "pap_version: \"0.2\"\ntrigger:\n  id: {id}\n  match:\n    type: alertmanager.alert.firing\n  cancel_on:\n    type: alertmanager.alert.resolved\n    match: $.data.fingerprint\n{extra}  agent: {agent}\n"
        ),
    )
    .unwrap();
}

/// The invocations of `trigger`.
fn of_trigger(p: &Project, trigger: &str) -> Vec<Value> {
    p.invocations()
        .into_iter()
        .filter(|i| i["trigger"] == trigger)
        .collect()
}

#[test]
fn a_real_alertmanager_resolution_cancels_the_approval_and_the_debounce_its_firing_started() {
    let Some(program) = crate::http_clients::alertmanager_and_amtool(
        "cancel_on is not checked against a real Alertmanager's resolution",
    ) else {
        return;
    };
    let p = project("");
    cancelled_by_resolution(&p, "t-approve", "gated", "");
    cancelled_by_resolution(
        &p,
        "t-later",
        "quick",
        "  debounce:\n    seconds: 3600\n    window_key: $.data.fingerprint\n",
    );
    let (serve, url) = serve(&p, &["--log-format", "json"], &[]);
    let am = crate::http_clients::alertmanager(&p, &program, &url);
    crate::http_clients::amtool(&am, &["instance=api:8000"]);
    wait_until("the firing alert awaiting approval", || {
        of_trigger(&p, "t-approve")
            .first()
            .is_some_and(|i| i["status"] == "awaiting_approval")
    });
    wait_until("the firing alert debounced", || {
        serve.log_text().contains("debounced")
    });

    // Ending the alert makes Alertmanager send its resolution.
    let now = jiff::Timestamp::now().to_string();
    crate::http_clients::amtool(&am, &["instance=api:8000", &format!("--end={now}")]);
    wait_until("the approval cancelled", || {
        of_trigger(&p, "t-approve")[0]["status"] == "cancelled"
    });
    let inv = &of_trigger(&p, "t-approve")[0];
    let id = inv["id"].as_str().unwrap();
    let error = inv["error"].as_str().unwrap();
    assert!(
        error.contains("cancelled by event am-") && error.contains("-resolved-"),
        "{error}"
    );
    wait_until("the debounce fire cancelled", || {
        serve
            .log_text()
            .lines()
            .any(|l| l.contains("cancelled (cancel_on)") && l.contains("\"was\":\"debounce\""))
    });
    // The debounce never fires: nothing of t-later was made.
    assert!(of_trigger(&p, "t-later").is_empty());

    // Every surface reads it cancelled: the HTTP API (the console's), and the inbox, where
    // its approval request is closed.
    let listed = curl(&[&format!("{url}/v1/invocations?status=cancelled")], None);
    assert_eq!(listed.status, 200, "{listed:?}");
    assert!(listed.body.contains(id), "{}", listed.body);
    let inbox = p.cmd().args(["inbox", "--json"]).output().unwrap();
    let messages: Vec<Value> = stdout(&inbox)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let request = messages
        .iter()
        .find(|m| m["kind"] == "invocation.awaiting_approval")
        .expect("the approval request");
    assert_eq!(request["approval"]["state"], "cancelled", "{request}");
    assert!(
        messages
            .iter()
            .any(|m| m["kind"] == "invocation.cancelled" && m["metadata"]["invocation_id"] == id),
        "{messages:?}"
    );
}

const PRINCIPALS: &str = "listen:
  auth:
    principals:
      - name: alertmanager
        token: ${AM_TOKEN}
        scopes: [ingest]
      - name: mallory
        token: ${MALLORY_TOKEN}
        scopes: [ingest, read]
";
const AM_TOKEN: &str = "am-0123456789abcdef-secret";
const MALLORY_TOKEN: &str = "mallory-0123456789abcdef-secret";

/// Posts `body` to `url` as JSON, with the bearer `token` when given: the answer's first
/// line, after checking the status is 200.
fn post_json(url: &str, body: &Value, token: Option<&str>) -> Value {
    let auth = token.map(|t| format!("Authorization: Bearer {t}"));
    let extra: Vec<&str> = auth.iter().flat_map(|a| ["-H", a.as_str()]).collect();
    let r = post(url, "application/json", body.to_string().as_bytes(), &extra);
    assert_eq!(r.status, 200, "{r:?}");
    serde_json::from_str(r.body.lines().next().unwrap()).unwrap()
}

/// The captured Alertmanager body, with `status` for its one alert.
fn alert_body(status: &str, ends_at: &str) -> Value {
    let text =
        std::fs::read_to_string(common::fixture("webhooks/alertmanager-v4-captured.json")).unwrap();
    let mut body: Value = serde_json::from_str(&text).unwrap();
    body["status"] = json!(status);
    body["alerts"][0]["status"] = json!(status);
    body["alerts"][0]["endsAt"] = json!(ends_at);
    body
}

#[test]
fn a_forged_resolution_from_another_principal_cancels_nothing() {
    if !curl_available() {
        return;
    }
    let p = project(PRINCIPALS);
    cancelled_by_resolution(&p, "t-approve", "gated", "");
    let env = [("AM_TOKEN", AM_TOKEN), ("MALLORY_TOKEN", MALLORY_TOKEN)];
    let (_serve, url) = serve(&p, &[], &env);
    let status = || of_trigger(&p, "t-approve")[0]["status"].clone();
    let adapter = format!("{url}/v1/ingest/alertmanager");
    let firing = alert_body("firing", "0001-01-01T00:00:00Z");
    post_json(&adapter, &firing, Some(AM_TOKEN));
    assert_eq!(status(), "awaiting_approval");

    // Mallory may post, and posts the resolution as a PAP event to /v1/events.
    let forged = json!({
        "pap_version": "0.2", "id": "forged-1", "type": "alertmanager.alert.resolved",
        "source": "mallory", "time": "2030-01-01T00:00:00Z",
        "data": {"fingerprint": "948c667b1fc76492"}
    });
    let line = post_json(&format!("{url}/v1/events"), &forged, Some(MALLORY_TOKEN));
    let left = &line["cancelled"][0];
    assert_eq!(left["cancelled"], false, "{line}");
    let why = left["refused"].as_str().unwrap();
    assert!(
        why.contains("sent by mallory") && why.contains("started by alertmanager"),
        "{why}"
    );
    assert_eq!(status(), "awaiting_approval");
    // Mallory's resolution through the adapter's route is refused too: another principal.
    let resolved = alert_body("resolved", "2030-01-01T00:00:00Z");
    let line = post_json(&adapter, &resolved, Some(MALLORY_TOKEN));
    assert_eq!(line["cancelled"][0]["cancelled"], false, "{line}");
    assert_eq!(status(), "awaiting_approval");

    // Alertmanager's own resolution ends it, and the audit names the event and principal.
    let line = post_json(&adapter, &resolved, Some(AM_TOKEN));
    assert_eq!(line["cancelled"][0]["cancelled"], true, "{line}");
    assert_eq!(status(), "cancelled");
    let audit = p.cmd().arg("audit").output().unwrap();
    let text = stdout(&audit);
    let line = text.lines().find(|l| l.contains("cancelled")).expect(&text);
    assert!(
        line.contains("by alertmanager") && line.contains("-resolved-"),
        "{line}"
    );
}

/// `pap dispatch --adapter alertmanager --no-run --json FILE`, its one report line.
fn dispatch(p: &Project, file: &Path) -> Value {
    crate::alert_identity::dispatch_alertmanager(p, file, None).remove(0)
}

fn write(p: &Project, name: &str, body: &Value) -> PathBuf {
    let path = p.root().join(name);
    std::fs::write(&path, body.to_string()).unwrap();
    path
}

#[test]
fn a_late_resolution_of_an_earlier_firing_leaves_the_next_one_alone() {
    let p = project("");
    cancelled_by_resolution(&p, "t-approve", "gated", "");
    // The alert fires again (a new `startsAt`) after its first resolution (`endsAt`).
    let mut refired = alert_body("firing", "0001-01-01T00:00:00Z");
    refired["alerts"][0]["startsAt"] = json!("2022-10-04T15:00:00Z");
    let decided = dispatch(&p, &write(&p, "refired.json", &refired));
    assert_eq!(decided["triggers"][0]["outcome"], "awaiting_approval");
    let late = alert_body("resolved", "2022-10-04T14:00:00Z");
    let line = dispatch(&p, &write(&p, "late.json", &late));
    let left = &line["cancelled"][0];
    assert_eq!(left["cancelled"], false, "{line}");
    assert!(
        left["refused"]
            .as_str()
            .unwrap()
            .contains("is after this event's"),
        "{line}"
    );
    assert_eq!(
        of_trigger(&p, "t-approve")[0]["status"],
        "awaiting_approval"
    );
    // Its own resolution ends it.
    let mut own = alert_body("resolved", "2022-10-04T16:00:00Z");
    own["alerts"][0]["startsAt"] = json!("2022-10-04T15:00:00Z");
    let line = dispatch(&p, &write(&p, "own.json", &own));
    assert_eq!(line["cancelled"][0]["cancelled"], true, "{line}");
    assert_eq!(line["cancelled"][0]["was"], "awaiting_approval");
    assert_eq!(of_trigger(&p, "t-approve")[0]["status"], "cancelled");
}

#[test]
fn a_running_run_is_stopped_only_when_cancel_on_says_running() {
    if !curl_available() {
        return;
    }
    let p = project("");
    cancelled_by_resolution(&p, "t-left", "long", "");
    cancelled_by_resolution(&p, "t-stopped", "long", "    running: true\n");
    let (_serve, url) = serve(&p, &[], &[("PAP_TEST_SECONDS", "60")]);
    let adapter = format!("{url}/v1/ingest/alertmanager");
    post_json(
        &adapter,
        &alert_body("firing", "0001-01-01T00:00:00Z"),
        None,
    );
    wait_until("both runs started", || {
        p.runs().iter().filter(|l| l.starts_with("start")).count() == 2
    });
    let resolved = alert_body("resolved", "2030-01-01T00:00:00Z");
    let line = post_json(&adapter, &resolved, None);
    let by_trigger = |t: &str| {
        line["cancelled"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["trigger"] == t)
            .cloned()
            .unwrap_or_else(|| panic!("{t} in {line}"))
    };
    assert_eq!(by_trigger("t-stopped")["cancelled"], true, "{line}");
    let left = by_trigger("t-left");
    assert_eq!(left["cancelled"], false);
    assert!(
        left["refused"].as_str().unwrap().contains("running"),
        "{left}"
    );

    let stopped = of_trigger(&p, "t-stopped")[0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(p.invocation_status(&stopped), "cancelled");
    // Its process group is stopped (the long agent records its pid; it must be gone).
    let pid_of = |inv: &str| -> u32 {
        p.runs()
            .iter()
            .find(|l| l.starts_with("start") && l.contains(inv))
            .and_then(|l| l.split(' ').nth(1))
            .and_then(|pid| pid.parse().ok())
            .expect("its start line")
    };
    let pid = pid_of(&stopped);
    wait_until("the cancelled run's process gone", || {
        !Path::new(&format!("/proc/{pid}")).exists()
    });
    let running = of_trigger(&p, "t-left")[0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(p.invocation_status(&running), "running");
    assert!(Path::new(&format!("/proc/{}", pid_of(&running))).exists());
}

#[test]
fn explain_shows_where_cancel_on_sits_and_the_key_it_keeps() {
    let p = project("");
    cancelled_by_resolution(&p, "t-approve", "gated", "");
    let file = write(
        &p,
        "firing.json",
        &alert_body("firing", "0001-01-01T00:00:00Z"),
    );
    let out = p
        .cmd()
        .args([
            "dispatch",
            "--adapter",
            "alertmanager",
            "--dry-run",
            "--explain",
        ])
        .arg(&file)
        .output()
        .unwrap();
    let text = stdout(&out);
    assert!(
        text.contains(
            "cancel_on: a later `alertmanager.alert.resolved` event with the same $.data.fingerprint (\"948c667b1fc76492\") ends what this starts"
        ),
        "{text}"
    );
    // Before the stages, in their order.
    let at = |stage: &str| text.find(&format!(" {stage}:")).unwrap_or(usize::MAX);
    assert!(
        at("cancel_on") < at("idempotency") && at("idempotency") < at("risk"),
        "{text}"
    );
}

/// An event is untrusted: a `cancel_on` key path it makes go over `jsonpath.max_nodes`
/// names no key. Work started by such events cannot be ended by a key they never had, and a
/// resolution whose key went over its budget ends nothing, where a shared "over budget" key
/// would have let one resolution end every overflowing firing.
#[test]
fn a_cancel_key_over_its_budget_names_no_work() {
    let p = project("jsonpath:\n  max_nodes: 20\n");
    std::fs::write(
        p.root().join("triggers/t-budget.yaml"),
        "pap_version: \"0.2\"\ntrigger:\n  id: t-budget\n  match:\n    type: alertmanager.alert.firing\n  cancel_on:\n    type: alertmanager.alert.resolved\n    match: $..fingerprint\n  agent: gated\n",
    )
    .unwrap();
    let event = |id: &str, kind: &str, fingerprint: &str, padded: bool| {
        let pad: Vec<u32> = if padded {
            (0..50).collect()
        } else {
            Vec::new()
        };
        json!({"pap_version": "0.2", "id": id, "type": kind, "source": "test",
               "time": "2026-03-11T06:00:00Z",
               "data": {"fingerprint": fingerprint, "pad": pad}})
    };
    let dispatch = |events: &[Value]| {
        let file = p.root().join("events.ndjson");
        let text: String = events.iter().map(|e| format!("{e}\n")).collect();
        std::fs::write(&file, text).unwrap();
        let out = p
            .cmd()
            .args(["dispatch", "--json"])
            .arg(&file)
            .output()
            .unwrap();
        assert!(
            matches!(common::code(&out), 0 | 5),
            "{}",
            common::stderr(&out)
        );
        common::dispatch::lines(&stdout(&out))
    };
    dispatch(&[
        event("f1", "alertmanager.alert.firing", "a", true),
        event("f2", "alertmanager.alert.firing", "b", true),
    ]);
    assert_eq!(of_trigger(&p, "t-budget").len(), 2);
    let resolved = dispatch(&[
        event("r1", "alertmanager.alert.resolved", "a", true),
        event("r2", "alertmanager.alert.resolved", "a", false),
    ]);
    for line in &resolved {
        assert!(line.get("cancelled").is_none(), "{line}");
    }
    for inv in of_trigger(&p, "t-budget") {
        assert_eq!(inv["status"], "awaiting_approval", "{inv}");
    }
}

/// Work that `cancel_on` ends emits its failure event, as a rejected or expired one does
/// (status `cancelled`), and a trigger on it follows; its approval request does not stay
/// `dispatched`: it is settled, unacknowledged, and the person is told by the cancellation's
/// own notification. The same holds for `pap invocations cancel`.
#[test]
fn cancelled_work_emits_its_failure_event_and_settles_its_approval_request() {
    let p = project("");
    std::fs::write(
        p.root().join("agents/guarded.yaml"),
        "pap_version: \"0.2\"\nagent:\n  id: guarded\n  risk_level: high\n  model:\n    provider: command\n    command: [\"true\"]\n  on_failure:\n    emit_event: pap.agent.invocation.failed\n",
    )
    .unwrap();
    cancelled_by_resolution(&p, "t-guarded", "guarded", "");
    std::fs::write(
        p.root().join("triggers/t-after.yaml"),
        "pap_version: \"0.2\"\ntrigger:\n  id: t-after\n  match:\n    type: pap.agent.invocation.failed\n  filter:\n    - path: $.data.status\n      operator: eq\n      value: cancelled\n  agent: quick\n",
    )
    .unwrap();
    let alert = |id: &str, status: &str, fingerprint: &str| {
        json!({"pap_version": "0.2", "id": id, "type": format!("alertmanager.alert.{status}"),
               "source": "test", "time": "2026-03-11T06:00:00Z",
               "data": {"fingerprint": fingerprint}})
    };
    let dispatch = |events: &[Value]| {
        let file = p.root().join("events.ndjson");
        let text: String = events.iter().map(|e| format!("{e}\n")).collect();
        std::fs::write(&file, text).unwrap();
        let out = p
            .cmd()
            .args(["dispatch", "--json", "--no-run"])
            .arg(&file)
            .output()
            .unwrap();
        assert!(
            matches!(common::code(&out), 0 | 5),
            "{}",
            common::stderr(&out)
        );
        common::dispatch::lines(&stdout(&out))
    };
    dispatch(&[alert("f1", "firing", "a"), alert("f2", "firing", "b")]);
    let lines = dispatch(&[alert("r1", "resolved", "a")]);
    // The resolution, then the failure event of what it ended, decided after it.
    let failed = lines
        .iter()
        .find(|l| l["type"] == "pap.agent.invocation.failed")
        .unwrap_or_else(|| panic!("no failure event: {lines:#?}"));
    assert_eq!(failed["triggers"][0]["trigger"], "t-after", "{failed}");
    assert_eq!(failed["triggers"][0]["outcome"], "queued", "{failed}");
    let ended = &of_trigger(&p, "t-guarded")
        .into_iter()
        .find(|i| i["event_id"] == "f1")
        .unwrap();
    assert_eq!(ended["status"], "cancelled");
    assert_eq!(ended["emitted"], json!([failed["event_id"]]));

    // An operator's cancel does the same.
    let other = of_trigger(&p, "t-guarded")
        .into_iter()
        .find(|i| i["event_id"] == "f2")
        .unwrap();
    let out = p
        .cmd()
        .args(["invocations", "cancel", other["id"].as_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(common::code(&out), 0, "{}", common::stderr(&out));
    let after: Vec<Value> = of_trigger(&p, "t-after");
    assert_eq!(after.len(), 2, "{after:#?}");

    // Neither approval request stays `dispatched`.
    let out = p.cmd().args(["notifications", "--json"]).output().unwrap();
    let requests: Vec<Value> = common::dispatch::lines(&stdout(&out))
        .into_iter()
        .filter(|n| n["kind"] == "invocation.awaiting_approval")
        .collect();
    assert_eq!(requests.len(), 2, "{}", stdout(&out));
    for r in &requests {
        assert_eq!(r["status"], "delivered", "{r}");
        assert_eq!(r["ack_at"], Value::Null, "{r}");
    }
}
