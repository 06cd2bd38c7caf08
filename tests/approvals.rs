//! Approvals: a high-risk invocation waits; `pap approve` runs it, `pap reject` denies it,
//! and past its deadline it expires (a denial). Each denial ends in the failure event.

use crate::common;

use common::dispatch::{Project, T0, ev, lines};
use common::{code, stderr, stdout};
use serde_json::json;

#[test]
fn approve_runs_the_invocation_and_records_who() {
    let p = Project::new();
    let inv = p.awaiting("a1");
    let listed = p
        .cmd(T0)
        .args(["invocations", "--status", "awaiting_approval", "--json"])
        .output()
        .unwrap();
    let listed = lines(&stdout(&listed));
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0]["approval_deadline"], "2026-03-12T06:00:00.000Z");

    // What the approver sees: why it waits, the event's data, the commands to answer.
    let shown = p
        .cmd(T0)
        .args(["invocations", "show", &inv])
        .output()
        .unwrap();
    let text = stdout(&shown);
    let short = &inv[16..22];
    for needed in [
        "waits for a person's approval",
        "the agent's risk_level is high",
        "event data",
        "no answer by then is a denial",
    ] {
        assert!(text.contains(needed), "{needed}: {text}");
    }
    assert!(
        text.contains(&format!("pap approve {short} --by")),
        "{text}"
    );
    assert!(
        text.contains(&format!("pap reject {short} --reason")),
        "{text}"
    );

    let out = p
        .cmd("2026-03-11T07:00:00Z")
        .args(["approve", &inv, "--by", "alice", "--note", "checked"])
        .output()
        .unwrap();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains(&format!("{inv}: succeeded after 1 attempt(s)")),
        "{text}"
    );
    assert!(
        text.contains("pap.agent.invocation.completed"),
        "the completion event is dispatched: {text}"
    );

    let shown = p.invocation(&inv);
    assert_eq!(shown["status"], "succeeded");
    assert_eq!(shown["approval"]["by"], "alice");
    assert_eq!(shown["approval"]["note"], "checked");

    let again = p.cmd(T0).args(["approve", &inv]).output().unwrap();
    assert_eq!(code(&again), 1);
    assert!(
        stderr(&again).contains("is succeeded, not awaiting approval"),
        "{}",
        stderr(&again)
    );

    let audit = p.cmd(T0).args(["audit", "--json"]).output().unwrap();
    let actions: Vec<String> = lines(&stdout(&audit))
        .iter()
        .map(|e| e["action"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        actions,
        ["decided", "approved", "attempt_started", "succeeded"]
    );
}

#[test]
fn reject_ends_in_the_failure_event_with_the_reason() {
    let p = Project::new();
    let inv = p.awaiting("r1");
    let out = p
        .cmd(T0)
        .args([
            "reject",
            &inv,
            "--reason",
            "too risky today",
            "--by",
            "bob",
            "--json",
        ])
        .output()
        .unwrap();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let shown: serde_json::Value = serde_json::from_str(stdout(&out).trim()).unwrap();
    assert_eq!(shown["status"], "rejected");
    assert_eq!(shown["error"], "rejected by bob: too risky today");
    // The failure event's dispatch line is in the one document, under `dispatched`; stderr
    // has no JSON.
    assert!(!stderr(&out).contains('{'), "{}", stderr(&out));
    let failure = shown["dispatched"].as_array().unwrap();
    assert_eq!(failure[0]["type"], "pap.agent.invocation.failed");
    assert_eq!(failure[0]["triggered_by"], inv.as_str());
    assert_eq!(shown["emitted"], json!([failure[0]["event_id"]]));

    let approve = p.cmd(T0).args(["approve", &inv]).output().unwrap();
    assert_eq!(code(&approve), 1);
}

#[test]
fn an_expired_approval_is_a_denial() {
    let p = Project::new();
    let inv = p.awaiting("x1");
    let out = p
        .cmd("2026-03-12T06:00:00Z")
        .args(["approve", &inv])
        .output()
        .unwrap();
    assert_eq!(code(&out), 1);
    assert!(
        stderr(&out).contains("expired: approval deadline 2026-03-12T06:00:00.000Z passed"),
        "{}",
        stderr(&out)
    );
    assert!(
        stdout(&out).contains("pap.agent.invocation.failed"),
        "{}",
        stdout(&out)
    );
    let shown = p.invocation(&inv);
    assert_eq!(shown["status"], "expired");
    assert_eq!(shown["attempts"], 0, "an expired invocation never ran");
}

#[test]
fn any_dispatch_expires_overdue_approvals() {
    let p = Project::new();
    let inv = p.awaiting("y1");
    let file = p.events(
        "later.ndjson",
        &[ev("later", "nobody.listens.here", json!({}))],
    );
    let run = p.dispatch("2026-03-13T00:00:00Z", &file, &[]);
    assert_eq!(run.code, 0);
    let failure = run
        .lines
        .iter()
        .find(|l| l["triggered_by"] == inv.as_str())
        .expect("failure event line");
    assert_eq!(failure["type"], "pap.agent.invocation.failed");
    assert_eq!(p.invocation(&inv)["status"], "expired");
}

#[test]
fn listings_show_an_overdue_approval_as_expired_without_recording_it() {
    let p = Project::new();
    let inv = p.awaiting("z1");
    let later = "2026-03-13T00:00:00Z";
    let show = |at: &str| {
        let out = p
            .cmd(at)
            .args(["invocations", "show", &inv, "--json"])
            .output()
            .unwrap();
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        serde_json::from_str::<serde_json::Value>(&stdout(&out)).unwrap()
    };
    let shown = show(later);
    assert_eq!(shown["status"], "expired");
    assert_eq!(shown["recorded_status"], "awaiting_approval");
    let listed = p
        .cmd(later)
        .args(["invocations", "--status", "expired"])
        .output()
        .unwrap();
    // Humans see the short form: the first digits of the id's random part.
    assert!(
        stdout(&listed).contains(&inv[16..22]),
        "{}",
        stdout(&listed)
    );
    assert!(
        stdout(&listed).contains("the next pap that writes records it"),
        "{}",
        stdout(&listed)
    );
    // Nothing was written: before its deadline it still awaits approval, and the next
    // writer (here a dispatch) records the expiry with its failure event.
    assert_eq!(show(T0)["status"], "awaiting_approval");
    let file = p.events("n.ndjson", &[ev("n", "nobody.listens.here", json!({}))]);
    let run = p.dispatch(later, &file, &[]);
    assert!(
        run.lines.iter().any(|l| l["triggered_by"] == inv.as_str()),
        "the failure event"
    );
    let recorded = show(later);
    assert_eq!(recorded["status"], "expired");
    assert!(recorded.get("recorded_status").is_none(), "{recorded}");
    // An expiry is not an ATP response: the request is closed, with no invented answer.
    let request = recorded["approval_request"].as_str().unwrap();
    let out = p
        .cmd(later)
        .args(["notifications", "show", request, "--json"])
        .output()
        .unwrap();
    let n: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert!(n.get("answer").is_none(), "{n:#}");
    assert_eq!(n["closed"]["reason"], "expired", "{n:#}");
}

#[test]
fn unknown_invocations_are_a_clear_error() {
    let p = Project::new();
    let out = p.cmd(T0).args(["approve", "inv_nope"]).output().unwrap();
    assert_eq!(code(&out), 1);
    assert!(
        stderr(&out).contains("no invocation inv_nope"),
        "{}",
        stderr(&out)
    );
    let show = p
        .cmd(T0)
        .args(["invocations", "show", "inv_nope"])
        .output()
        .unwrap();
    assert_eq!(code(&show), 1);
    let reject = p.cmd(T0).args(["reject", "inv_nope"]).output().unwrap();
    assert_eq!(code(&reject), 2, "--reason is required");
}

/// The listings only read the state: a trigger broken mid-edit does not hide what happened,
/// and the state dir named in pap.yaml is still found. A broken pap.yaml (which names the
/// state dir) still stops them, with its diagnostics.
#[test]
fn listings_read_the_state_while_a_trigger_manifest_is_broken() {
    let p = Project::new();
    let config = p.root().join("pap.yaml");
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(&config, format!("{text}state_dir: elsewhere\n")).unwrap();
    let file = p.events("e.ndjson", &[ev("m1", "test.medium.happened", json!({}))]);
    let run = p.dispatch(T0, &file, &["--no-run"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    // The state dir moved (a database keeps its state in the database, not the dir).
    assert!(common::on_postgres() || p.root().join("elsewhere/state.redb").exists());

    p.write(
        "triggers/broken.yaml",
        "pap_version: \"0.2\"\nkind: [unclosed\n",
    );
    for args in [
        &["invocations", "--json"][..],
        &["audit", "--json"],
        &["notifications", "--json"],
        &["inbox", "--json"],
    ] {
        let out = p.cmd(T0).args(args).output().unwrap();
        assert_eq!(code(&out), 0, "{args:?}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("error(s) (`pap lint` shows them); reading the state anyway"),
            "{args:?}: {}",
            stderr(&out)
        );
    }
    let out = p.cmd(T0).args(["invocations", "--json"]).output().unwrap();
    let listed = lines(&stdout(&out));
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0]["event_id"], "m1");
    // Deciding still refuses a broken project.
    let out = p.cmd(T0).arg("dispatch").arg(&file).output().unwrap();
    assert_ne!(code(&out), 0);

    std::fs::write(&config, "pap_version: [\n").unwrap();
    let out = p.cmd(T0).args(["invocations", "--json"]).output().unwrap();
    assert_ne!(code(&out), 0);
    assert!(stderr(&out).contains("pap.yaml"), "{}", stderr(&out));
}

#[test]
fn an_approval_past_its_deadline_reads_as_expired_before_any_writer_runs() {
    let p = Project::new();
    let inv = p.awaiting("d1");
    let later = "2026-03-12T06:00:01Z";
    // Nothing has written since the deadline: every reader says expired, as of now.
    let listed = p.cmd(later).args(["inbox", "--json"]).output().unwrap();
    assert_eq!(code(&listed), 0, "{}", stderr(&listed));
    let requests: Vec<serde_json::Value> = lines(&stdout(&listed))
        .into_iter()
        .filter(|m| m["atp"]["context"]["metadata"]["invocation_id"] == inv.as_str())
        .collect();
    assert_eq!(requests.len(), 1, "{}", stdout(&listed));
    assert_eq!(requests[0]["approval"]["state"], "expired");
    assert_eq!(
        requests[0]["approval"]["closed_at"],
        "2026-03-12T06:00:00.000Z"
    );
    let human = p.cmd(later).args(["inbox"]).output().unwrap();
    assert!(!stdout(&human).contains("open"), "{}", stdout(&human));
    let before = p.cmd(T0).args(["inbox", "--json"]).output().unwrap();
    assert!(
        stdout(&before).contains(r#""state":"open""#),
        "{}",
        stdout(&before)
    );

    // The MCP inbox resource, on the real clock (months past the fixture's deadline).
    let Some(inspector) = common::mcp::inspector() else {
        return;
    };
    let read = common::mcp::inspect(
        &inspector,
        &common::mcp::Server::Stdio {
            root: p.root(),
            args: &[],
        },
        &["--method", "resources/read", "--uri", "ui://chat/inbox"],
    );
    let body: serde_json::Value =
        serde_json::from_str(read["contents"][0]["text"].as_str().unwrap()).unwrap();
    let request = body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m.get("atp").is_some())
        .expect("the approval request")
        .clone();
    assert_eq!(request["approval"]["state"], "expired", "{request}");
}
