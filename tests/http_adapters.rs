//! Webhook adapters through the real listener with curl: the Alertmanager and Grafana presets
//! on real payloads (re-sends are duplicates, a resolution is new), a preset changed in
//! pap.yaml, and a declared adapter checking a GitHub-style HMAC signature or its own token.

use crate::common;

use common::http::{
    curl_available, high_severity_trigger, post, post_once_allowed, project, serve,
};
use common::serve::wait_until;
use serde_json::{Value, json};

fn fixture(name: &str) -> Value {
    let text = std::fs::read_to_string(common::fixture(&format!("webhooks/{name}"))).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn outcomes(r: &common::http::Reply) -> Vec<String> {
    r.lines()
        .iter()
        .map(|l| {
            l["triggers"]
                .get(0)
                .map_or(l["status"].as_str().unwrap().to_owned(), |t| {
                    t["outcome"].as_str().unwrap().to_owned()
                })
        })
        .collect()
}

#[test]
fn alertmanager_alerts_are_decided_once_and_their_resolution_is_new() {
    if !curl_available() {
        return;
    }
    let p = project("");
    high_severity_trigger(&p, "t-am-firing", "alertmanager.alert.firing");
    high_severity_trigger(&p, "t-am-resolved", "alertmanager.alert.resolved");
    let (_serve, url) = serve(&p, &[], &[]);
    let route = format!("{url}/v1/ingest/alertmanager");
    let firing = fixture("alertmanager-v4-captured.json");
    let body = firing.to_string();

    let r = post(&route, "application/json", body.as_bytes(), &[]);
    assert_eq!(r.status, 200, "{r:?}");
    let line = &r.lines()[0];
    assert_eq!(
        line["event_id"],
        "am-948c667b1fc76492-firing-2022-10-04T13:32:56.014Z"
    );
    assert_eq!(line["type"], "alertmanager.alert.firing");
    assert_eq!(outcomes(&r), ["queued"]);

    // Alertmanager re-sends a firing alert at every repeat_interval: the same event.
    let again = post(&route, "application/json", body.as_bytes(), &[]);
    assert_eq!(outcomes(&again), ["duplicate"]);

    // Resolved: a new event, whose time is endsAt.
    let mut resolved = firing.clone();
    resolved["status"] = json!("resolved");
    resolved["alerts"][0]["status"] = json!("resolved");
    resolved["alerts"][0]["endsAt"] = json!("2022-10-04T13:40:00Z");
    let r = post(
        &route,
        "application/json",
        resolved.to_string().as_bytes(),
        &[],
    );
    assert_eq!(outcomes(&r), ["queued"], "{r:?}");
    assert_eq!(r.lines()[0]["type"], "alertmanager.alert.resolved");

    // Firing again after the resolution: a new startsAt, a new event.
    let mut refire = firing.clone();
    refire["alerts"][0]["startsAt"] = json!("2022-10-04T14:00:00Z");
    let r = post(
        &route,
        "application/json",
        refire.to_string().as_bytes(),
        &[],
    );
    assert_eq!(outcomes(&r), ["queued"]);

    // What the agent got: the alert's labels and the group's receiver under data.
    let id = "am-948c667b1fc76492-firing-2022-10-04T13:32:56.014Z";
    wait_until("the firing alert's run", || {
        p.invocations_of(id)
            .iter()
            .any(|i| i["status"] == "succeeded")
    });
    let shown = p
        .cmd()
        .args([
            "invocations",
            "show",
            p.invocations_of(id)[0]["id"].as_str().unwrap(),
            "--json",
        ])
        .output()
        .unwrap();
    let shown: Value = serde_json::from_slice(&shown.stdout).unwrap();
    let event = &shown["event"];
    assert_eq!(event["time"], "2022-10-04T13:32:56.014Z", "{shown}");
    assert_eq!(event["data"]["labels"]["alertname"], "HighValue");
    assert_eq!(event["data"]["receiver"], "webhook_receiver");
    assert_eq!(event["source"], "http://601cad658ee0:9093");
}

#[test]
fn grafana_alerts_become_one_event_each() {
    if !curl_available() {
        return;
    }
    let p = project("");
    let (_serve, url) = serve(&p, &[], &[]);
    let body = fixture("grafana-webhook-docs-example.json").to_string();
    let r = post(
        &format!("{url}/v1/ingest/grafana"),
        "application/json",
        body.as_bytes(),
        &[],
    );
    assert_eq!(r.status, 200, "{r:?}");
    let lines = r.lines();
    assert_eq!(lines.len(), 2);
    assert_eq!(
        lines[1]["event_id"],
        "grafana-bc97ff14869b13e3-firing-2021-10-12T09:56:03.157076+02:00"
    );
    assert_eq!(lines[1]["type"], "grafana.alert.firing");
    assert_eq!(lines[1]["input"], "request[1]");
    // A body that is not the adapter's shape: 400, nothing recorded.
    let r = post(
        &format!("{url}/v1/ingest/grafana"),
        "application/json",
        b"{\"alerts\": 3}",
        &[],
    );
    assert_eq!(r.status, 400);
    assert!(r.json()["error"].as_str().unwrap().contains("not an array"));
}

const ADAPTERS: &str = r#"adapters:
  - name: alertmanager
    event:
      type: "ops.alert.{item.status}"
  - name: github
    auth:
      hmac:
        header: X-Hub-Signature-256
        secret: ${GH_SECRET}
    event:
      id: "gh-{item.hook_id}-{item.action}"
      type: "github.issue.{item.action}"
      source: "{item.repository.full_name}"
      time: ["$.item.issue.updated_at", "$.item.issue.created_at"]
      data: $.item.issue
  - name: ci
    path: /v1/ingest/ci/builds
    auth:
      bearer: ${CI_TOKEN}
    each: $.builds
    event:
      id: "{item.id}"
      type: ci.build.failed
      source: "{body.server}"
      time: "{item.at}"
"#;

const GH_SECRET: &str = "gh-webhook-secret-0123456789";
const CI_TOKEN: &str = "ci-token-0123456789abcdef";

fn sign(body: &[u8]) -> String {
    use hmac::{KeyInit, Mac};
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(GH_SECRET.as_bytes()).unwrap();
    mac.update(body);
    let hex: String = mac
        .finalize()
        .into_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("X-Hub-Signature-256: sha256={hex}")
}

#[test]
fn declared_adapters_check_their_signature_or_token_and_may_change_a_preset() {
    if !curl_available() {
        return;
    }
    let p = project(ADAPTERS);
    let lint = p.cmd().arg("lint").output().unwrap();
    assert_eq!(common::code(&lint), 0, "{}", common::stdout(&lint));
    let env = [("GH_SECRET", GH_SECRET), ("CI_TOKEN", CI_TOKEN)];
    let (serve, url) = serve(&p, &[], &env);

    let issue = json!({"hook_id": 7, "action": "opened",
        "repository": {"full_name": "acme/api"},
        "issue": {"number": 12, "title": "<script>alert(1)</script>",
                  "created_at": "2026-11-23T10:00:00Z", "updated_at": null}});
    let body = issue.to_string();
    let gh = format!("{url}/v1/ingest/github");
    let r = post_once_allowed(
        &gh,
        "application/json",
        body.as_bytes(),
        &["-H", &sign(body.as_bytes())],
    );
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.lines()[0]["event_id"], "gh-7-opened");
    assert_eq!(r.lines()[0]["status"], "no_match");
    let tampered = body.replace("opened", "closed");
    let r = post_once_allowed(
        &gh,
        "application/json",
        tampered.as_bytes(),
        &["-H", &sign(body.as_bytes())],
    );
    assert_eq!(r.status, 401, "{r:?}");
    let r = post_once_allowed(&gh, "application/json", body.as_bytes(), &[]);
    assert_eq!(r.status, 401);
    assert!(r.json()["error"].as_str().unwrap().contains("missing"));

    let ci = format!("{url}/v1/ingest/ci/builds");
    let builds = json!({"server": "ci.example", "builds": [
        {"id": "b-1", "at": "2026-11-23T10:00:00Z"},
        {"id": "", "at": "2026-11-23T10:00:00Z"}]});
    let auth = format!("Authorization: Bearer {CI_TOKEN}");
    let r = post_once_allowed(
        &ci,
        "application/json",
        builds.to_string().as_bytes(),
        &["-H", &auth],
    );
    assert_eq!(r.status, 200, "{r:?}");
    let lines = r.lines();
    assert_eq!(lines[0]["event_id"], "b-1");
    assert_eq!(lines[1]["status"], "invalid");
    assert!(
        lines[1]["error"].as_str().unwrap().contains("`id`"),
        "{}",
        lines[1]
    );
    let r = post_once_allowed(&ci, "application/json", builds.to_string().as_bytes(), &[]);
    assert_eq!(r.status, 401);
    // A body that does not say it is JSON is refused (a browser could send text/plain
    // cross-site without asking first).
    let r = post_once_allowed(
        &ci,
        "text/plain",
        builds.to_string().as_bytes(),
        &["-H", &auth],
    );
    assert_eq!(r.status, 415);

    // The changed preset keeps its route, `each` and id, with the new type.
    let am = fixture("alertmanager-v4-captured.json").to_string();
    let r = post_once_allowed(
        &format!("{url}/v1/ingest/alertmanager"),
        "application/json",
        am.as_bytes(),
        &[],
    );
    assert_eq!(r.lines()[0]["type"], "ops.alert.firing");
    let r = post_once_allowed(
        &format!("{url}/v1/ingest/grafana"),
        "text/plain",
        b"{}",
        &[],
    );
    assert_eq!(r.status, 415);

    let log = serve.log_text();
    assert!(!log.contains(GH_SECRET) && !log.contains(CI_TOKEN));
}

#[test]
fn an_adapter_whose_secret_is_not_set_stops_the_start() {
    let p = project(ADAPTERS);
    let out = p
        .cmd()
        .args(["serve", "--listen", "127.0.0.1:0"])
        .env("CI_TOKEN", CI_TOKEN)
        .env_remove("GH_SECRET")
        .output()
        .unwrap();
    assert_eq!(common::code(&out), 1);
    assert!(
        common::stderr(&out).contains("GH_SECRET"),
        "{}",
        common::stderr(&out)
    );
}

/// HMAC-SHA256 of `body` with `secret`, in hex.
fn hmac_hex(secret: &str, body: &[u8]) -> String {
    use hmac::{KeyInit, Mac};
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(body);
    mac.finalize()
        .into_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// While a sender rotates its secret, its signature header holds two signatures (PagerDuty
/// V3: `X-PagerDuty-Signature: v1=…,v1=…`, "if at least one of the signatures matches, the
/// webhook should be considered trusted"; Standard Webhooks separates them with spaces): the
/// request is accepted when any one verifies, and refused when none does.
#[test]
fn an_hmac_header_holding_several_signatures_is_accepted_when_one_verifies() {
    if !curl_available() {
        return;
    }
    let p = project(
        "adapters:\n  - name: rotating\n    auth:\n      hmac:\n        header: X-PagerDuty-Signature\n        prefix: \"v1=\"\n        secret: ${ROTATING_SECRET}\n    event:\n      id: \"{item.id}\"\n      type: ops.page.triggered\n      source: rotating\n      time: \"{item.at}\"\n",
    );
    let lint = p.cmd().arg("lint").output().unwrap();
    assert_eq!(common::code(&lint), 0, "{}", common::stdout(&lint));
    let secret = "new-secret-0123456789abcdef";
    let (_serve, url) = serve(&p, &[], &[("ROTATING_SECRET", secret)]);
    let route = format!("{url}/v1/ingest/rotating");
    let body = |id: &str| json!({"id": id, "at": "2026-11-23T10:00:00Z"}).to_string();
    // Each case: the signatures in the header (`old`: the retired secret's, `new`: the
    // current one's, anything else as written), their separator, and the answer.
    let cases = [
        ("r1", &["old", "new"][..], ",", 200),
        ("r2", &["new", "old"][..], " ", 200),
        ("r3", &["old", "v2=abcd", "new"][..], ", ", 200),
        ("r4", &["old", "old"][..], ",", 401),
    ];
    for (id, signatures, separator, want) in cases {
        let b = body(id);
        let header: Vec<String> = signatures
            .iter()
            .map(|s| match *s {
                "old" => format!(
                    "v1={}",
                    hmac_hex("old-secret-0123456789abcdef", b.as_bytes())
                ),
                "new" => format!("v1={}", hmac_hex(secret, b.as_bytes())),
                other => other.to_owned(),
            })
            .collect();
        let h = format!("X-PagerDuty-Signature: {}", header.join(separator));
        let r = post_once_allowed(&route, "application/json", b.as_bytes(), &["-H", &h]);
        assert_eq!(r.status, want, "{id}: {r:?}");
        if want == 200 {
            assert_eq!(r.lines()[0]["event_id"], id, "{r:?}");
        }
    }
}

/// The built-in adapters are one list in the engine: serve's answer to a route no adapter
/// has names each one's route, and `pap adapt --help` each one with its sender.
#[test]
fn the_built_in_adapters_are_named_from_one_list() {
    if !curl_available() {
        return;
    }
    let p = project("");
    let (_serve, url) = serve(&p, &[], &[]);
    let r = post(
        &format!("{url}/v1/ingest/x-unknown-0"),
        "application/json",
        b"{}",
        &[],
    );
    assert_eq!(r.status, 404, "{r:?}");
    let help = p.cmd().args(["adapt", "--help"]).output().unwrap();
    let help = common::stdout(&help);
    for preset in pap::adapter::presets::ALL {
        assert!(
            r.body.contains(&format!("/v1/ingest/{}", preset.name)),
            "{}",
            r.body
        );
        assert!(
            help.contains(preset.name) && help.contains(preset.sender),
            "{help}"
        );
    }
}
