//! Texts an on-call person can act on: an alert from the Alertmanager
//! preset carries a one-line summary and its links, and every text about it leads with the
//! summary: the inbox message and the approval title, the Slack sink's body (with a link to
//! the console where `listen.public_url` says it is), and what an MCP client reads. The
//! console's page is checked by a real browser in `http_console`. A trigger's `notify:` wins
//! over its agent's.

use crate::common;

use common::http::{curl_available, post, project, serve};
use common::mcp::{Server, inspect, inspector};
use common::serve::{Project, wait_until};
use common::stdout;
use serde_json::Value;

const SUMMARY: &str = "HighValue (high) on api:8000: poc_metric above 0.5";

fn alert_body() -> String {
    std::fs::read_to_string(common::fixture("webhooks/alertmanager-v4-captured.json")).unwrap()
}

/// A project whose Slack-format sink posts to `sink_url`, with the console at a public URL,
/// and a trigger on firing alerts for the high-risk `gated` agent.
fn alerting_project(sink_url: &str) -> Project {
    let p = project(&format!(
        "listen:\n  public_url: https://pap.example.com/\nnotifications:\n  sinks:\n    - name: slack\n      type: webhook\n      url: \"{sink_url}/hook\"\n      format: slack\n"
    ));
    std::fs::write(
        p.root().join("triggers/t-am-gated.yaml"),
        "pap_version: \"0.2\"\ntrigger:\n  id: t-am-gated\n  match:\n    type: alertmanager.alert.firing\n  agent: gated\n",
    )
    .unwrap();
    p
}

fn inbox(p: &Project) -> Vec<Value> {
    let out = p.cmd().args(["inbox", "--json"]).output().unwrap();
    stdout(&out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn every_text_about_an_alert_leads_with_its_summary() {
    if !curl_available() {
        return;
    }
    let Some(inspector) = inspector() else {
        return;
    };
    let sink = crate::adapt::capture();
    let p = alerting_project(&sink.url);
    let (_serve, url) = serve(&p, &[], &[]);
    let r = post(
        &format!("{url}/v1/ingest/alertmanager"),
        "application/json",
        alert_body().as_bytes(),
        &[],
    );
    assert_eq!(r.status, 200, "{r:?}");
    let line = &r.lines()[0];
    assert_eq!(
        line["triggers"][0]["outcome"], "awaiting_approval",
        "{line}"
    );
    let inv = line["triggers"][0]["invocation_id"]
        .as_str()
        .unwrap()
        .to_owned();

    // The inbox: the text and the approval request's title.
    let messages = inbox(&p);
    let request = &messages[0];
    let content = request["content"].as_str().unwrap();
    assert!(
        content.starts_with(&format!("{SUMMARY} — gated (risk high) waits for approval")),
        "{content}"
    );
    assert!(
        content.contains("runbook") || content.contains("source: http://9ef78e326c1f:9090/graph"),
        "{content}"
    );
    assert!(!content.contains("endsAt=0001"), "no field dump: {content}");
    assert_eq!(
        request["atp"]["context"]["title"],
        format!("Approve gated: {SUMMARY}?")
    );

    // The Slack sink's body, linking to the request on the console's approvals page.
    wait_until("the Slack message", || {
        !sink.bodies.lock().unwrap().is_empty()
    });
    let body: Value = serde_json::from_slice(&sink.bodies.lock().unwrap()[0]).unwrap();
    let text = body["text"].as_str().unwrap();
    assert!(
        text.starts_with(&format!(
            "[warning] invocation.awaiting_approval: {SUMMARY} — "
        )),
        "{text}"
    );
    assert!(
        text.ends_with(&format!(
            "<https://pap.example.com/approvals#approval-{inv}|Open in the pap console>"
        )),
        "{text}"
    );

    // What an MCP client reads of the inbox.
    let read = inspect(
        &inspector,
        &Server::Stdio {
            root: p.root(),
            args: &[],
        },
        &["--method", "resources/read", "--uri", "ui://chat/inbox"],
    );
    let shown: Value = serde_json::from_str(read["contents"][0]["text"].as_str().unwrap()).unwrap();
    let first = shown["messages"][0]["content"].as_str().unwrap();
    assert!(first.starts_with(SUMMARY), "{first}");
}

#[test]
fn a_triggers_notify_template_wins_over_the_agents() {
    let p = project("");
    std::fs::write(
        p.root().join("triggers/t-am-gated.yaml"),
        "pap_version: \"0.2\"\ntrigger:\n  id: t-am-gated\n  match:\n    type: alertmanager.alert.firing\n  notify:\n    awaiting_approval:\n      content: \"{event.data.summary}: approve? {trigger}\"\n  agent: gated\n",
    )
    .unwrap();
    let file = p.root().join("alert.json");
    std::fs::write(&file, alert_body()).unwrap();
    let out = p
        .cmd()
        .args(["dispatch", "--adapter", "alertmanager"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        inbox(&p)[0]["content"],
        format!("{SUMMARY}: approve? t-am-gated")
    );
}

#[test]
fn lint_names_a_triggers_notify_route_to_an_unknown_agent() {
    let p = project("");
    std::fs::write(
        p.root().join("triggers/t-notify.yaml"),
        "pap_version: \"0.2\"\ntrigger:\n  id: t-notify\n  match:\n    type: test.quick.happened\n  notify:\n    failed:\n      target: agent\n      agent: nobody\n  agent: quick\n",
    )
    .unwrap();
    let out = p.cmd().arg("lint").output().unwrap();
    assert!(!out.status.success());
    let text = String::from_utf8_lossy(&out.stderr).into_owned() + &stdout(&out);
    assert!(
        text.contains("`notify.failed.agent` names `nobody`"),
        "{text}"
    );
    assert!(text.contains("triggers/t-notify.yaml"), "{text}");
}
