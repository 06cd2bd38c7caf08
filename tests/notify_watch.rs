//! Notifications as a long-lived `pap mcp` and every reader see them, with no serve running:
//! an escalation that is due (ANP 6.2) shows on every read surface before any writer records
//! it, and a subscriber hears of it when the deadline passes; a notification acknowledged
//! in another process is heard of by the subscribers of it and of the inbox. Driven by the
//! official MCP Python SDK (`tests/fixtures/mcp_client/client.py`).

use crate::common;

use common::mcp::{self, PyClient, Server, run, step};
use common::notify::{NotifyProject, T0, messages_of};
use serde_json::{Value, json};

fn stdio(p: &NotifyProject) -> Server<'_> {
    Server::Stdio {
        root: p.root(),
        args: &[],
    }
}

fn env(p: &NotifyProject) -> Vec<(&'static str, String)> {
    vec![
        ("PAP_NOW", p.now.clone()),
        ("PAP_TEST_DIR", p.log_dir().display().to_string()),
    ]
}

fn with<'a>(env: &'a [(&'static str, String)]) -> Vec<(&'a str, &'a str)> {
    env.iter().map(|(k, v)| (*k, v.as_str())).collect()
}

fn uris(updates: &Value) -> Vec<String> {
    let mut all: Vec<String> = updates["updates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u["uri"].as_str().unwrap().to_owned())
        .collect();
    all.sort();
    all.dedup();
    all
}

/// A notification handed to agent `silent`, due at 10:05 (the fixture's deadline).
fn handed(p: &NotifyProject) -> String {
    p.fire("a-watch", "e1", json!({}));
    let n = p.notification_of("a-watch", "invocation.succeeded");
    assert_eq!(n["status"], "dispatched");
    assert_eq!(n["delivery_deadline"], "2026-11-21T10:05:00.000Z");
    n["id"].as_str().unwrap().to_owned()
}

#[test]
fn an_escalation_that_is_due_shows_on_every_read_surface_before_any_writer() {
    let Some(py) = mcp::python_sdk() else {
        return;
    };
    let mut p = NotifyProject::new();
    let id = handed(&p);
    assert!(
        p.inbox()
            .iter()
            .all(|m| m["notification_id"] != id.as_str()),
        "not due yet"
    );
    p.now = "2026-11-21T10:05:00Z".into();

    // pap inbox --json: a line without an inbox id, after every message.
    let inbox = p.inbox();
    let due: Vec<&Value> = inbox
        .iter()
        .filter(|m| m["notification_id"] == id.as_str())
        .collect();
    assert_eq!(due.len(), 1, "{inbox:#?}");
    assert_eq!(
        (&due[0]["id"], &due[0]["status"], &due[0]["escalation"]),
        (&Value::Null, &json!("escalated"), &json!("due")),
        "{:#}",
        due[0]
    );
    assert_eq!(due[0]["recorded_status"], "dispatched");
    assert_eq!(due[0]["routing"]["handler"], "system");
    assert_eq!(due[0]["routing"]["target"], "user");

    // ui://chat/inbox and pap://notifications/{id} over MCP.
    let env = env(&p);
    let uri = format!("pap://notifications/{id}");
    let lines = run(
        &py,
        "browse",
        json!({"read": ["ui://chat/inbox", uri]}),
        &stdio(&p),
        &with(&env),
    );
    let reads: Vec<&Value> = lines.iter().filter(|l| l["step"] == "read").collect();
    let body = &reads[0]["body"];
    let listed = body["escalations_due"].as_array().unwrap();
    assert_eq!(listed.len(), 1, "{body:#}");
    assert_eq!(listed[0]["notification_id"], id.as_str());
    assert_eq!(listed[0]["status"], "escalated");
    assert_eq!(listed[0]["id"], Value::Null);
    assert_eq!(reads[1]["body"]["status"], "escalated", "{}", reads[1]);

    // chat_read_since, once it reached the end of the inbox.
    let lines = run(
        &py,
        "call",
        json!({"tool": "chat_read_since", "args": {"after_id": "0"}}),
        &stdio(&p),
        &with(&env),
    );
    let read = &step(&lines, "called")["result"]["structured"];
    assert_eq!(read["more"], false);
    let listed = read["escalations_due"].as_array().unwrap();
    assert_eq!(listed.len(), 1, "{read:#}");
    assert_eq!(listed[0]["notification_id"], id.as_str());

    // Nothing was written: the watchdog of the next writer records it, once.
    assert_eq!(p.notification(&id)["owner_lease"], 1);
    p.run(&["serve", "--once"], 0);
    let inbox = p.inbox();
    let n = p.notification(&id);
    let msgs = messages_of(&inbox, &n);
    assert_eq!(msgs.len(), 1, "{inbox:#?}");
    assert!(msgs[0]["id"].is_u64() && msgs[0].get("escalation").is_none());
}

#[test]
fn a_long_lived_pap_mcp_tells_its_subscribers_when_a_deadline_passes() {
    let Some(py) = mcp::python_sdk() else {
        return;
    };
    let p = NotifyProject::new();
    let id = handed(&p);
    assert_eq!(p.now, T0);
    let uri = format!("pap://notifications/{id}");
    // The server runs on the test clock at 10:00: waiting for the 10:05 deadline moves it
    // there at once. No serve runs, and nothing is written.
    // One subscription per server: its fake clock jumps once the first subscription is in
    // place, and a second one made after the jump would have nothing left to hear.
    let env = env(&p);
    let listen = |subscribed: &str| {
        let mut client = PyClient::start(
            &py,
            "listen",
            json!({"subscribe": [subscribed], "want": 1, "wait": 20, "read": [subscribed]}),
            &stdio(&p),
            &with(&env),
        );
        client.step("ready");
        let updates = client.step("updates");
        assert_eq!(uris(&updates), [subscribed.to_owned()], "{updates}");
        let read = client.step("read");
        client.finish();
        read
    };
    let n = listen(&uri);
    assert_eq!(n["body"]["status"], "escalated", "{n}");
    let inbox = listen("ui://chat/inbox");
    assert_eq!(
        inbox["body"]["escalations_due"][0]["notification_id"],
        id.as_str(),
        "{inbox}"
    );
    assert_eq!(
        p.notification(&id)["owner_lease"],
        1,
        "a reader wrote nothing"
    );
}

#[test]
fn an_acknowledgement_in_another_process_reaches_the_subscribers_of_the_notification() {
    let Some(py) = mcp::python_sdk() else {
        return;
    };
    let p = NotifyProject::new();
    p.fire("a-uus", "e1", json!({"server": "db1", "fail": true}));
    let n = p.notification_of("a-uus", "invocation.failed");
    let id = n["id"].as_str().unwrap().to_owned();
    let inbox = p.inbox();
    let message = messages_of(&inbox, &n)[0]["id"].to_string();
    let uri = format!("pap://notifications/{id}");
    let env = env(&p);
    let mut client = PyClient::start(
        &py,
        "listen",
        json!({"subscribe": ["ui://chat/inbox", uri], "want": 2, "wait": 20, "read": [uri]}),
        &stdio(&p),
        &with(&env),
    );
    client.step("ready");
    p.run(&["inbox", "ack", &message], 0);
    let updates = client.step("updates");
    assert_eq!(
        uris(&updates),
        [
            "pap://notifications/".to_owned() + &id,
            "ui://chat/inbox".into()
        ],
        "{updates}"
    );
    let read = client.step("read");
    assert_eq!(read["body"]["status"], "delivered", "{read}");
    client.finish();
}
