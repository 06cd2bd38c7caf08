//! The life of a notification beyond its first route: the watchdog on an injected clock, a
//! late acknowledgement fenced off by its lease, deduplication, ATP approvals answered by
//! a response file, inbox watermarks across processes, a kill between enqueue and delivery,
//! and sinks.

use crate::common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::{Arc, Mutex};

use common::notify::{NotifyProject, messages_of};
use common::serve::wait_until;
use common::{stderr, stdout};
use serde_json::{Value, json};

const LATER: &str = "2026-11-21T10:10:00Z";

fn notes(n: &Value) -> Vec<String> {
    n["history"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["note"].as_str().map(str::to_owned))
        .collect()
}

#[test]
fn the_watchdog_escalates_a_handler_notification_past_its_deadline() {
    let mut p = NotifyProject::new();
    // Target agent, handler agent, and the handler stays silent: allowed, until the deadline.
    p.fire("a-watch", "e1", json!({}));
    let n = p.notification_of("a-watch", "invocation.succeeded");
    assert_eq!(n["status"], "dispatched");
    assert_eq!(n["delivery_deadline"], "2026-11-21T10:05:00.000Z");
    let id = n["id"].as_str().unwrap().to_owned();

    p.now = "2026-11-21T10:04:59Z".into();
    p.run(&["serve", "--once"], 0);
    assert_eq!(p.notification(&id)["status"], "dispatched", "not yet due");

    p.now = "2026-11-21T10:05:00Z".into();
    // A reader sees the escalation as of now, before any writer records it, and records
    // nothing itself.
    let due = p.notification(&id);
    assert_eq!(
        (&due["status"], &due["recorded_status"]),
        (&json!("escalated"), &json!("dispatched")),
        "{due:#}"
    );
    assert_eq!(due["owner_lease"], 1, "nothing was written");
    // The inbox does not have it yet, and says it is coming.
    let text = stdout(&p.run(&["inbox"], 0));
    assert!(
        text.contains("1 notification(s) handed to an agent are past their delivery deadline"),
        "{text}"
    );
    // No serve runs to escalate it: `pap status` says so, and needs a person (exit 5).
    let status = p.run(&["status"], 5);
    assert!(
        stdout(&status).contains("1 notification escalation(s) due, and no pap serve is running"),
        "{}",
        stdout(&status)
    );
    p.run(&["serve", "--once"], 0);
    let n = p.notification(&id);
    assert_eq!(n["status"], "escalated", "{n:#}");
    assert!(n["recorded_status"].is_null(), "recorded now: {n:#}");
    assert_eq!(n["owner_lease"], 2);
    assert_eq!(n["owner"], "watchdog");
    assert_eq!(
        n["routing"],
        json!({"address": "user", "target": "user", "handler": "system"})
    );
    let inbox = p.inbox();
    let msgs = messages_of(&inbox, &n);
    assert_eq!(msgs.len(), 1);
    assert_eq!(msgs[0]["author"], "system");
    assert!(
        notes(&n)
            .iter()
            .any(|s| s.contains("not delivered by its deadline"))
    );
}

#[test]
fn a_late_acknowledgement_after_the_watchdog_took_over_is_rejected() {
    let p = NotifyProject::new();
    std::fs::write(p.log_dir().join("hold"), "").unwrap();
    let event = p.event_file("a-uua", "e1", json!({}));
    // The narrator (handler agent, target user) starts and waits for `go`.
    let mut first = p.cmd().args(["dispatch"]).arg(&event).spawn().unwrap();
    wait_until("the narrator to start", || {
        p.runs_log().contains("start narrator")
    });

    // Ten minutes later another pap process runs the timers: the watchdog takes over.
    let nothing = p.event_file("nobody", "noop", json!({}));
    let out = p
        .cmd()
        .env("PAP_NOW", LATER)
        .args(["dispatch"])
        .arg(&nothing)
        .output()
        .unwrap();
    assert_eq!(common::code(&out), 0, "{}", stderr(&out));
    let n = p.notification_of("a-uua", "invocation.succeeded");
    assert_eq!(
        (n["status"].as_str(), n["owner_lease"].as_u64()),
        (Some("escalated"), Some(2))
    );

    // The narrator now answers with the lease it was given (1): fenced off.
    std::fs::write(p.log_dir().join("go"), "").unwrap();
    assert!(first.wait().unwrap().success());
    let n = p.notification(n["id"].as_str().unwrap());
    assert_eq!(n["status"], "escalated", "{n:#}");
    assert!(
        notes(&n).iter().any(|s| s.contains("stale lease 1")),
        "{:?}",
        notes(&n)
    );
    let inbox = p.inbox();
    let msgs = messages_of(&inbox, &n);
    assert_eq!(msgs.len(), 1, "the user sees it exactly once: {msgs:#?}");
    assert_eq!(msgs[0]["author"], "system");
}

#[test]
fn deduplication_updates_an_undelivered_notification_and_starts_anew_after_delivery() {
    let p = NotifyProject::new();
    p.fire("a-uus", "e1", json!({"server": "db1", "fail": true}));
    let first = p.notification_of("a-uus", "invocation.failed");
    assert_eq!(first["deduplication_key"], "outage-db1");
    p.fire("a-uus", "e2", json!({"server": "db1", "fail": true}));
    let same = p.notification_of("a-uus", "invocation.failed");
    assert_eq!(
        same["id"], first["id"],
        "DISPATCHED: overwritten, not duplicated"
    );
    assert_ne!(
        same["metadata"]["invocation_id"], first["metadata"]["invocation_id"],
        "the metadata is the newer one"
    );
    let inbox = p.inbox();
    let msgs = messages_of(&inbox, &same);
    assert_eq!(msgs.len(), 2);
    assert_eq!(msgs[1]["supersedes"], msgs[0]["id"]);

    // Another key is another notification.
    p.fire("a-uus", "e3", json!({"server": "db2", "fail": true}));
    // DELIVERED: a new notification, the old one untouched.
    p.run(&["inbox", "ack", &msgs[1]["id"].to_string()], 0);
    p.fire("a-uus", "e4", json!({"server": "db1", "fail": true}));
    let failed: Vec<Value> = p
        .notifications()
        .into_iter()
        .filter(|n| n["kind"] == "invocation.failed")
        .collect();
    assert_eq!(failed.len(), 3, "{failed:#?}");
    assert_eq!(failed[0]["status"], "delivered");
    assert_eq!(failed[2]["deduplication_key"], "outage-db1");
    assert_eq!(failed[2]["status"], "dispatched");
}

fn atp_request(p: &NotifyProject, event: &str) -> Value {
    p.fire("gated", event, json!({}));
    let inbox = p.inbox();
    inbox
        .iter()
        .rev()
        .find(|m| m.get("atp").is_some())
        .expect("an approval request in the inbox")
        .clone()
}

fn respond(p: &NotifyProject, body: &Value) -> std::process::Output {
    let path = p.log_dir().join("response.json");
    std::fs::write(&path, body.to_string()).unwrap();
    p.cmd().args(["respond"]).arg(&path).output().unwrap()
}

#[test]
fn an_atp_request_validates_and_a_response_file_approves_the_run() {
    let p = NotifyProject::new();
    let msg = atp_request(&p, "e1");
    assert_eq!(msg["kind"], "invocation.awaiting_approval");
    assert_eq!(msg["approval"]["state"], "open");
    let atp = &msg["atp"];
    // ATP "Core Notification Fields".
    let uuid =
        regex::Regex::new("^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")
            .unwrap();
    assert!(uuid.is_match(atp["id"].as_str().unwrap()), "{atp:#}");
    assert_eq!(atp["version"], "1.0");
    for field in ["timestamp", "deadline"] {
        let t = atp[field].as_str().unwrap();
        assert!(t.parse::<jiff::Timestamp>().is_ok(), "{field}: {t}");
    }
    assert_eq!(atp["deadline"], "2026-11-22T10:00:00.000Z", "24 h default");
    // Service identification, context, actions.
    assert!(atp["service"]["id"].as_str().is_some_and(|s| !s.is_empty()));
    assert!(
        atp["service"]["name"]
            .as_str()
            .is_some_and(|s| !s.is_empty())
    );
    for field in ["title", "description", "project"] {
        assert!(
            atp["context"][field]
                .as_str()
                .is_some_and(|s| !s.is_empty()),
            "{field}"
        );
    }
    assert!(atp["context"]["metadata"].is_object());
    let inv_id = atp["context"]["metadata"]["invocation_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let actions = atp["actions"].as_array().unwrap();
    let ids: Vec<&str> = actions.iter().map(|a| a["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["approve", "reject"]);
    let known = [
        "destructive",
        "irreversible",
        "time_sensitive",
        "affects_others",
        "costly",
        "experimental",
        "requires_confirmation",
    ];
    for a in actions {
        assert!(a["label"].as_str().is_some_and(|s| !s.is_empty()));
        assert_eq!(a["response_type"], "simple");
        for f in a["flags"].as_array().unwrap() {
            assert!(known.contains(&f.as_str().unwrap()), "{f}");
        }
    }
    let approve_flags = &actions[0]["flags"];
    assert!(
        approve_flags
            .as_array()
            .unwrap()
            .contains(&json!("destructive"))
    );
    assert!(approve_flags.as_array().unwrap().contains(&json!("costly")));

    let answer = |action: &str, kind: &str| {
        json!({
            "notification_id": atp["id"],
            "action_id": action,
            "response_data": null,
            "responded_at": "2026-11-21T10:01:00Z",
            "responder": {"id": "alice", "type": kind}
        })
    };
    let out = respond(&p, &answer("approve", "agent"));
    assert_eq!(common::code(&out), 1);
    assert!(stderr(&out).contains("only a human"), "{}", stderr(&out));
    let out = respond(&p, &answer("rollback", "human"));
    assert_eq!(common::code(&out), 1);
    assert!(
        stderr(&out).contains("unknown action_id `rollback`"),
        "{}",
        stderr(&out)
    );
    let mut with_data = answer("approve", "human");
    with_data["response_data"] = json!({"why": "x"});
    assert_eq!(common::code(&respond(&p, &with_data)), 1);

    let out = respond(&p, &answer("approve", "human"));
    assert_eq!(common::code(&out), 0, "{}", stderr(&out));
    let inv = p
        .invocations()
        .into_iter()
        .find(|i| i["id"] == inv_id)
        .unwrap();
    assert_eq!(inv["status"], "succeeded", "the approved invocation ran");
    assert_eq!(inv["approval"]["by"], "alice");
    let after = p.inbox();
    let req = after.iter().find(|m| m["id"] == msg["id"]).unwrap();
    assert_eq!(req["status"], "delivered");
    assert_eq!(req["approval"]["state"], "approved");
    assert_eq!(req["approval"]["responded_at"], "2026-11-21T10:01:00Z");

    let out = respond(&p, &answer("reject", "human"));
    assert_eq!(common::code(&out), 1);
    assert!(
        stderr(&out).contains("already answered"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn answers_record_responded_at_and_json_is_one_document_on_stdout() {
    let p = NotifyProject::new();
    // At pap's own prompt: `responded_at` is when pap recorded the answer (ATP requires it).
    let msg = atp_request(&p, "e1");
    let inv = msg["atp"]["context"]["metadata"]["invocation_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let out = p.cmd().args(["approve", &inv, "--json"]).output().unwrap();
    assert_eq!(common::code(&out), 0, "{}", stderr(&out));
    let doc: Value = serde_json::from_str(&common::stdout(&out)).unwrap_or_else(|e| {
        panic!(
            "stdout is not one JSON document ({e}): {}",
            common::stdout(&out)
        )
    });
    assert_eq!(doc["id"], inv.as_str());
    assert_eq!(doc["status"], "succeeded");
    assert!(doc["dispatched"].is_array(), "{doc}");
    assert!(
        !stderr(&out).contains('{'),
        "JSON on stderr: {}",
        stderr(&out)
    );
    let answered = p.inbox();
    let req = answered.iter().find(|m| m["id"] == msg["id"]).unwrap();
    assert_eq!(req["approval"]["state"], "approved");
    let at = req["approval"]["responded_at"]
        .as_str()
        .expect("responded_at");
    assert!(at.parse::<jiff::Timestamp>().is_ok(), "{at}");

    // An ATP response file, with --json.
    let msg = atp_request(&p, "e2");
    let path = p.log_dir().join("response.json");
    std::fs::write(
        &path,
        json!({
            "notification_id": msg["atp"]["id"],
            "action_id": "reject",
            "response_data": null,
            "responded_at": "2026-11-21T10:01:00Z",
            "responder": {"id": "alice", "type": "human"}
        })
        .to_string(),
    )
    .unwrap();
    let out = p
        .cmd()
        .args(["respond", "--json"])
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(common::code(&out), 0, "{}", stderr(&out));
    let doc: Value = serde_json::from_str(&common::stdout(&out)).unwrap_or_else(|e| {
        panic!(
            "stdout is not one JSON document ({e}): {}",
            common::stdout(&out)
        )
    });
    assert_eq!(doc["status"], "rejected");
    assert!(doc["dispatched"].is_array(), "{doc}");
    assert!(
        !stderr(&out).contains('{'),
        "JSON on stderr: {}",
        stderr(&out)
    );
}

#[test]
fn an_answer_past_the_deadline_is_refused_as_expired() {
    let mut p = NotifyProject::new();
    let msg = atp_request(&p, "e1");
    p.now = "2026-11-22T10:00:01Z".into();
    let out = respond(
        &p,
        &json!({
            "notification_id": msg["atp"]["id"],
            "action_id": "approve",
            "response_data": null,
            "responded_at": "2026-11-21T10:01:00Z",
            "responder": {"id": "alice", "type": "human"}
        }),
    );
    assert_eq!(common::code(&out), 1);
    let text = stderr(&out);
    assert!(
        text.contains("past its deadline") || text.contains("expired"),
        "{text}"
    );
}

#[test]
fn inbox_pages_after_a_watermark_never_skip_or_repeat_across_processes() {
    let p = NotifyProject::new();
    let mut seen: Vec<u64> = Vec::new();
    let mut mark = 0;
    for round in 0..4 {
        for i in 0..3 {
            p.fire("a-uus", &format!("r{round}-{i}"), json!({}));
        }
        // Every read is a fresh process: the watermark is the reader's, the store keeps none.
        loop {
            let page = p.inbox_after(mark, 2);
            if page.is_empty() {
                break;
            }
            for m in &page {
                let id = m["id"].as_u64().unwrap();
                assert!(id > mark, "{id} after {mark}");
                mark = id;
                seen.push(id);
            }
        }
    }
    let all: Vec<u64> = p
        .inbox()
        .iter()
        .map(|m| m["id"].as_u64().unwrap())
        .collect();
    assert_eq!(seen, all);
    assert_eq!(all.len(), 12);
    assert!(all.windows(2).all(|w| w[0] < w[1]), "strictly increasing");
}

#[test]
fn a_notification_queued_before_a_kill_is_delivered_once_after_restart() {
    let p = NotifyProject::new();
    p.fire("a-uas", "e1", json!({}));
    let n = p.notification_of("a-uas", "invocation.succeeded");
    assert_eq!(n["status"], "pending");
    let id = n["id"].as_str().unwrap().to_owned();

    std::fs::write(p.log_dir().join("hold-observer"), "").unwrap();
    let poke = p.event_file("observer", "poke1", json!({}));
    let mut child = p.cmd().args(["dispatch"]).arg(&poke).spawn().unwrap();
    wait_until("the observer to start", || {
        p.runs_log().contains("start observer")
    });
    child.kill().unwrap();
    child.wait().unwrap();
    // The killed pap's agent outlives it (as after a real crash): let it finish, so the test
    // leaves no process behind.
    std::fs::write(p.log_dir().join("go"), "").unwrap();

    std::fs::remove_file(p.log_dir().join("hold-observer")).unwrap();
    p.run(&["serve", "--once"], 0);
    let n = p.notification(&id);
    assert_eq!(n["status"], "delivered");
    let carrier = n["delivered_with"].as_str().unwrap().to_owned();
    let observer: Vec<Value> = p
        .invocations()
        .into_iter()
        .filter(|i| i["agent"] == "observer")
        .collect();
    assert_eq!(observer.len(), 1);
    assert_eq!(
        (observer[0]["id"].as_str(), observer[0]["status"].as_str()),
        (Some(carrier.as_str()), Some("succeeded"))
    );
    assert_eq!(
        observer[0]["attempts"], 1,
        "the killed attempt ran again as attempt 1"
    );
    // Only that invocation ever carried it, and the next one does not.
    p.fire("observer", "poke2", json!({}));
    let log = p.runs_log();
    let carriers: std::collections::BTreeSet<&str> = log
        .lines()
        .filter(|l| l.starts_with("start observer") && l.contains(&format!("\"id\":\"{id}\"")))
        .map(|l| l.split(' ').nth(2).unwrap())
        .collect();
    assert_eq!(carriers.into_iter().collect::<Vec<_>>(), [carrier.as_str()]);
}

/// A webhook receiver answering every POST with the current `status`, keeping the bodies.
struct Hook {
    url: String,
    status: Arc<AtomicU16>,
    bodies: Arc<Mutex<Vec<Value>>>,
}

impl Hook {
    fn start(status: u16) -> Hook {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/hook", listener.local_addr().unwrap());
        let status = Arc::new(AtomicU16::new(status));
        let bodies = Arc::new(Mutex::new(Vec::new()));
        let (s, b) = (status.clone(), bodies.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut length = 0;
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                        break;
                    }
                    let lower = line.to_ascii_lowercase();
                    if let Some(v) = lower.strip_prefix("content-length:") {
                        length = v.trim().parse().unwrap_or(0);
                    }
                }
                let mut body = vec![0; length];
                let _ = reader.read_exact(&mut body);
                if let Ok(v) = serde_json::from_slice(&body) {
                    b.lock().unwrap().push(v);
                }
                let code = s.load(Ordering::SeqCst);
                let _ = write!(
                    stream,
                    "HTTP/1.1 {code} X\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
                );
            }
        });
        Hook {
            url,
            status,
            bodies,
        }
    }
}

fn with_sinks(p: &NotifyProject, sinks: &str) {
    let config = format!("pap_version: \"0.2\"\nnotifications:\n  user: alice\n  sinks:\n{sinks}");
    std::fs::write(p.root().join("pap.yaml"), config).unwrap();
    std::fs::write(
        p.root().join("bin/sink.sh"),
        "#!/bin/sh\ncat >> \"$PAP_TEST_DIR/sink.out\"\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(
        p.root().join("bin/sink.sh"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
}

#[test]
fn sinks_receive_each_message_but_only_a_persons_ack_delivers_it() {
    let p = NotifyProject::new();
    let hook = Hook::start(200);
    with_sinks(
        &p,
        &format!(
            "    - {{name: hook, type: webhook, url: \"{}\", format: anp}}\n    - {{name: file, type: ndjson, path: out/notes.ndjson}}\n    - {{name: cmd, type: command, command: [\"./bin/sink.sh\"], min_level: error}}\n",
            hook.url
        ),
    );
    p.fire("a-uus", "e1", json!({}));
    p.fire("a-uus", "e2", json!({"fail": true, "server": "db1"}));
    let ok = p.notification_of("a-uus", "invocation.succeeded");
    // Every sink took it, and that is recorded beside it; nobody has seen it yet.
    assert_eq!(ok["status"], "dispatched", "{ok:#}");
    let states: Vec<&Value> = ok["sinks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| &d["state"])
        .collect();
    assert_eq!(states, [&json!("sent"), &json!("sent")], "{ok:#}");
    assert!(
        ok["sinks"][0]["sent_at"].is_string() || ok["sinks"][0]["sent_at"].is_number(),
        "{ok:#}"
    );
    assert!(ok["ack_at"].is_null(), "{ok:#}");
    let bodies = hook.bodies.lock().unwrap().clone();
    assert_eq!(bodies.len(), 2);
    assert_eq!(bodies[0]["notification_id"], ok["id"]);
    assert!(
        bodies[0]["text"]
            .as_str()
            .unwrap()
            .starts_with("[info] invocation.succeeded")
    );
    let file = std::fs::read_to_string(p.root().join("out/notes.ndjson")).unwrap();
    assert_eq!(file.lines().count(), 2);
    // The command sink only wants errors and above.
    let cmd = std::fs::read_to_string(p.log_dir().join("sink.out")).unwrap();
    let got = lines_of(&cmd);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0]["kind"], "invocation.failed");
    assert_eq!(hook.status.load(Ordering::SeqCst), 200);
    // The person's acknowledgement in the inbox is what delivers it.
    let inbox = p.inbox();
    let message = messages_of(&inbox, &ok)[0]["id"].to_string();
    p.run(&["inbox", "ack", &message], 0);
    let acked = p.notification(ok["id"].as_str().unwrap());
    assert_eq!(acked["status"], "delivered", "{acked:#}");
}

fn lines_of(text: &str) -> Vec<Value> {
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn a_webhook_that_keeps_failing_is_retried_and_the_notification_stays_acknowledgeable() {
    let mut p = NotifyProject::new();
    let hook = Hook::start(500);
    with_sinks(
        &p,
        &format!(
            "    - {{name: hook, type: webhook, url: \"{}\", max_attempts: 2, backoff_seconds: 60}}\n",
            hook.url
        ),
    );
    p.fire("a-uus", "e1", json!({}));
    let n = p.notification_of("a-uus", "invocation.succeeded");
    let id = n["id"].as_str().unwrap().to_owned();
    assert_eq!(n["status"], "dispatched");
    assert_eq!(n["sinks"][0]["attempts"], 1);
    assert_eq!(n["sinks"][0]["error"], "the webhook answered HTTP 500");
    // `pap status` names the failing sink (exit 5: it needs a person).
    let s: Value = serde_json::from_str(stdout(&p.run(&["status", "--json"], 5)).trim()).unwrap();
    assert_eq!(s["sinks"][0]["sink"], "hook", "{s}");
    assert_eq!(
        (&s["sinks"][0]["retrying"], &s["sinks"][0]["failed"]),
        (&json!(1), &json!(0))
    );
    assert!(
        s["attention"].to_string().contains("sink hook is failing"),
        "{s}"
    );
    // Not due before the backoff.
    p.now = "2026-11-21T10:00:30Z".into();
    p.run(&["serve", "--once"], 0);
    assert_eq!(p.notification(&id)["sinks"][0]["attempts"], 1);
    p.now = "2026-11-21T10:01:00Z".into();
    p.run(&["serve", "--once"], 0);
    let n = p.notification(&id);
    // The sink gave up; the notification is still in the inbox, so it is not FAILED.
    assert_ne!(n["status"], "failed", "{n:#}");
    assert_eq!(n["sinks"][0]["state"], "failed");
    assert_eq!(n["sinks"][0]["attempts"], 2);
    assert_eq!(n["sinks"][0]["error"], "the webhook answered HTTP 500");
    let s: Value = serde_json::from_str(stdout(&p.run(&["status", "--json"], 5)).trim()).unwrap();
    assert_eq!(s["sinks"][0]["failed"], 1, "{s}");
    assert_eq!(hook.bodies.lock().unwrap().len(), 2);
    // A failing sink does not block the person's acknowledgement.
    let inbox = p.inbox();
    let out = p
        .cmd()
        .args([
            "inbox",
            "ack",
            &messages_of(&inbox, &n)[0]["id"].to_string(),
        ])
        .output()
        .unwrap();
    assert_eq!(common::code(&out), 0, "{}", stderr(&out));
    assert_eq!(p.notification(&id)["status"], "delivered");
    // The webhook recovers: its next delivery is sent, and `pap status` is healthy again
    // (the old notification still records the deliveries that failed).
    hook.status.store(200, Ordering::SeqCst);
    p.fire("a-uus", "e2", json!({}));
    let s: Value = serde_json::from_str(stdout(&p.run(&["status", "--json"], 0)).trim()).unwrap();
    assert_eq!(s["sinks"], json!([]), "{s}");
}

#[test]
fn a_sink_that_cannot_connect_says_why_without_quoting_its_url() {
    let p = NotifyProject::new();
    // A port nobody listens on any more.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}/hook-secret-token");
    with_sinks(
        &p,
        &format!("    - {{name: hook, type: webhook, url: \"{url}\", max_attempts: 1}}\n"),
    );
    p.fire("a-uus", "e1", json!({}));
    let n = p.notification_of("a-uus", "invocation.succeeded");
    let error = n["sinks"][0]["error"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        error.to_lowercase().contains("connection refused"),
        "the underlying cause: {error}"
    );
    assert!(!error.contains("hook-secret-token"), "{error}");
    assert_eq!(n["sinks"][0]["state"], "failed");
    assert_ne!(n["status"], "failed", "still in the inbox: {n:#}");
}
