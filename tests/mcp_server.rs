//! `pap mcp` (stdio) and `/mcp` (serve's listener), driven by MCP clients nobody on this
//! project wrote: the official Python SDK and the MCP Inspector's CLI. The fixture
//! (`tests/fixtures/chat`) has a `listener` agent every human post provokes, a `worker`
//! whose success puts an outcome in the inbox, and a high-risk `gated` agent.

use crate::common;

use std::time::Instant;

use common::mcp::{self, PyClient, Server, inspect, run, step};
use common::serve::{Project, wait_until};
use serde_json::{Value, json};

fn chat() -> Project {
    Project {
        dir: common::fixture_copy("chat"),
    }
}

fn stdio(p: &Project) -> Server<'_> {
    Server::Stdio {
        root: p.root(),
        args: &[],
    }
}

/// Dispatches one event of `kind` in its own process (which runs the agent).
fn dispatch(p: &Project, id: &str, kind: &str) -> Value {
    let event = json!({"pap_version": "0.2", "id": id, "type": kind, "source": "tests",
                       "time": "2026-11-23T10:00:00Z", "data": {"host": "db-1"}});
    let file = p.root().join(format!("{id}.json"));
    std::fs::write(&file, event.to_string()).unwrap();
    let out = p
        .cmd()
        .args(["dispatch", "--json"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "dispatch {id}: {}",
        common::stderr(&out)
    );
    serde_json::from_str(common::stdout(&out).lines().next().unwrap()).unwrap()
}

fn invocation_of(line: &Value) -> String {
    line["triggers"][0]["invocation_id"]
        .as_str()
        .unwrap_or_else(|| panic!("no invocation in {line}"))
        .to_owned()
}

fn show(p: &Project, id: &str) -> Value {
    let out = p
        .cmd()
        .args(["invocations", "show", id, "--json"])
        .output()
        .unwrap();
    serde_json::from_str(&common::stdout(&out)).unwrap()
}

/// What the agents recorded (`heard/<invocation>.json`), by invocation id.
fn heard(p: &Project) -> Vec<(String, Value)> {
    let dir = p.root().join("heard");
    let mut all: Vec<(String, Value)> = std::fs::read_dir(&dir)
        .map(|d| {
            d.filter_map(Result::ok)
                .map(|e| {
                    let text = std::fs::read_to_string(e.path()).unwrap_or_default();
                    let name = e.file_name().to_string_lossy().replace(".json", "");
                    (name, serde_json::from_str(&text).unwrap_or(Value::Null))
                })
                .collect()
        })
        .unwrap_or_default();
    all.sort_by(|a, b| a.0.cmp(&b.0));
    all
}

fn heard_posts(p: &Project) -> Vec<Value> {
    heard(p)
        .into_iter()
        .map(|(_, v)| v)
        .filter(|v| v["event"]["type"] == "pap.chat.human.posted")
        .collect()
}

fn posted(lines: &[Value]) -> &Value {
    &step(lines, "post")["result"]
}

fn append(p: &Project, yaml: &str) {
    let path = p.root().join("pap.yaml");
    let mut text = std::fs::read_to_string(&path).unwrap();
    text.push_str(yaml);
    std::fs::write(path, text).unwrap();
}

fn tool_names(listed: &Value) -> Vec<String> {
    listed["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn both_clients_list_and_read_the_resources_and_tools() {
    let (Some(py), Some(inspector)) = (mcp::python_sdk(), mcp::inspector()) else {
        return;
    };
    let p = chat();
    let post = run(
        &py,
        "post",
        json!({"content": "is db-1 **slow**?"}),
        &stdio(&p),
        &[],
    );
    assert_eq!(posted(&post)["is_error"], false, "{post:?}");
    let line = dispatch(&p, "w1", "test.work.requested");
    let worker = invocation_of(&line);

    let notification = {
        let out = p.cmd().args(["notifications", "--json"]).output().unwrap();
        let first: Value =
            serde_json::from_str(common::stdout(&out).lines().next().unwrap()).unwrap();
        first["id"].as_str().unwrap().to_owned()
    };
    let lines = run(
        &py,
        "browse",
        json!({"read": ["ui://chat/inbox", format!("pap://invocations/{worker}"),
                        format!("pap://notifications/{notification}"), "pap://invocations/inv_nope"]}),
        &stdio(&p),
        &[],
    );
    assert_eq!(step(&lines, "initialized")["server"], "pap");
    let listed = step(&lines, "listed");
    assert!(
        listed["uris"]
            .as_array()
            .unwrap()
            .contains(&json!("ui://chat/inbox"))
    );
    assert_eq!(
        listed["templates"],
        json!([
            "ui://chat/session/{id}",
            "pap://invocations/{id}",
            "pap://notifications/{id}"
        ])
    );
    let reads: Vec<&Value> = lines.iter().filter(|l| l["step"] == "read").collect();
    let inbox = &reads[0]["body"];
    assert_eq!(reads[0]["mime"], "application/json");
    let messages = inbox["messages"].as_array().unwrap();
    assert_eq!(inbox["last_id"], messages.last().unwrap()["id"], "{inbox}");
    let user = &messages[0];
    assert_eq!(user["id"], "1", "ids are decimal strings");
    assert_eq!(user["author"], "user");
    assert_eq!(user["mime"], "text/markdown");
    assert_eq!(user["content"], "is db-1 **slow**?");
    assert!(user["ts"].as_str().unwrap().ends_with('Z'));
    assert_eq!(user["posted_by"]["principal"], "ann");
    assert_eq!(user["posted_by"]["client"], "pap-tests-python");
    let system = messages
        .iter()
        .find(|m| m["author"] == "system")
        .expect("an outcome");
    assert_eq!(system["kind"], "invocation.succeeded");
    assert_eq!(system["notification_id"], notification);
    assert!(
        system["routing"].is_object() && system["level"].is_string(),
        "{system}"
    );
    assert_eq!(reads[1]["body"]["id"], worker);
    assert_eq!(reads[1]["body"]["status"], "succeeded");
    assert_eq!(reads[2]["body"]["id"], notification);
    assert!(
        reads[3]["error"]
            .as_str()
            .unwrap()
            .contains("no such resource"),
        "{:?}",
        reads[3]
    );

    // The Inspector: the tools with their aliases, a read, and a post.
    let server = stdio(&p);
    let names = tool_names(&inspect(&inspector, &server, &["--method", "tools/list"]));
    for name in [
        "chat_read_since",
        "chat.human.post",
        "chat_human_post",
        "chat.assistant.post",
        "chat_assistant_post",
        "inbox_ack",
        "invocations_list",
        "invocation_show",
        "audit_log",
        "event_explain",
        "approval_respond",
    ] {
        assert!(names.contains(&name.to_owned()), "{name} in {names:?}");
    }
    let read = inspect(
        &inspector,
        &server,
        &["--method", "resources/read", "--uri", "ui://chat/inbox"],
    );
    let body: Value = serde_json::from_str(read["contents"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(body["messages"][0]["content"], "is db-1 **slow**?");
    let call = inspect(
        &inspector,
        &server,
        &[
            "--method",
            "tools/call",
            "--tool-name",
            "chat_assistant_post",
            "--tool-arg",
            "content=looking into it",
        ],
    );
    assert_eq!(call["isError"], false, "{call}");
    let id = call["structuredContent"]["id"].as_str().unwrap();
    let read = run(&py, "browse", json!({}), &stdio(&p), &[]);
    let last = step(&read, "read")["body"]["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(last["id"], id);
    assert_eq!(last["author"], "assistant");
    assert_ne!(last["posted_by"]["client"], "pap-tests-python");

    // A dry run through the tool records nothing.
    let explain = inspect(
        &inspector,
        &server,
        &[
            "--method",
            "tools/call",
            "--tool-name",
            "event_explain",
            "--tool-arg",
            r#"event={"pap_version":"0.2","id":"x1","type":"test.work.requested","source":"t","time":"2026-11-23T10:00:00Z","data":{}}"#,
        ],
    );
    let report = &explain["structuredContent"];
    assert_eq!(report["triggers"][0]["trigger"], "work", "{explain}");
    let out = p.cmd().args(["invocations", "--json"]).output().unwrap();
    assert_eq!(
        common::stdout(&out).lines().count(),
        1,
        "the dry run queued nothing"
    );
}

#[test]
fn a_subscriber_hears_other_clients_and_processes_within_a_second_but_never_its_own_posts() {
    let (Some(py), Some(inspector)) = (mcp::python_sdk(), mcp::inspector()) else {
        return;
    };
    let p = chat();
    let open = p
        .cmd()
        .args(["inbox", "session", "open", "ops-db1"])
        .output()
        .unwrap();
    assert!(open.status.success());
    let server = stdio(&p);
    // The session's URI with `-` percent-encoded: the same thread as `…/ops-db1`, and the
    // client hears it by the spelling it subscribed with.
    let options = json!({
        "subscribe": ["ui://chat/inbox", "ui://chat/session/ops%2Ddb1"],
        "post": {"content": "my own words", "session": "ops-db1"},
        "want": 3, "wait": 30,
    });
    let mut client = PyClient::start(&py, "watch", options, &server, &[]);
    let ready = client.step("ready");
    assert_eq!(ready["echoes"], json!([]), "no self-echo: {ready}");
    // Connected and idle after a write, pap mcp holds no handle on the store.
    let held = mcp_processes(p.root())
        .into_iter()
        .map(|pid| {
            open_files(pid)
                .iter()
                .filter(|f| f.ends_with("state.redb"))
                .count()
        })
        .collect::<Vec<_>>();
    assert_eq!(
        held,
        [0],
        "the pap mcp process and the store handles it holds"
    );

    // Another client's post in the thread is heard on both URIs.
    let other = inspect(
        &inspector,
        &server,
        &[
            "--method",
            "tools/call",
            "--tool-name",
            "chat.human.post",
            "--tool-arg",
            "content=from the other client",
            "--tool-arg",
            "session=ops-db1",
        ],
    );
    assert_eq!(other["isError"], false, "{other}");
    // And another process's outcome, within a second of the dispatch ending.
    let started = Instant::now();
    dispatch(&p, "w1", "test.work.requested");
    let took = started.elapsed().as_secs_f64();
    let finished = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let updates = client.step("updates");
    let uris: Vec<&str> = updates["updates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u["uri"].as_str().unwrap())
        .collect();
    assert_eq!(
        uris,
        [
            "ui://chat/inbox",
            "ui://chat/session/ops%2Ddb1",
            "ui://chat/inbox"
        ],
        "{updates}"
    );
    let last = updates["updates"][2]["at"].as_f64().unwrap();
    let after = last - finished;
    assert!(
        after < 1.0,
        "heard {after:.3} s after the dispatch ended (it took {took:.3} s)"
    );
    assert!(last > finished - took, "heard because of the dispatch");
    client.finish();
}

/// The `pap … mcp` processes serving `root`.
fn mcp_processes(root: &std::path::Path) -> Vec<u32> {
    let root = root.display().to_string();
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let args: Vec<String> = cmdline
                .split(|b| *b == 0)
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect();
            args.first().is_some_and(|a| a.ends_with("/pap"))
                && args.contains(&root)
                && args.iter().any(|a| a == "mcp")
        })
        .collect()
}

fn open_files(pid: u32) -> Vec<String> {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| {
            d.filter_map(Result::ok)
                .filter_map(|e| std::fs::read_link(e.path()).ok())
                .map(|p| p.display().to_string())
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn chat_read_since_pages_with_a_watermark_across_restarts() {
    let Some(py) = mcp::python_sdk() else {
        return;
    };
    let p = chat();
    // More posts than the fixture's rate limit allows in a minute.
    let config = p.root().join("pap.yaml");
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(
        &config,
        text.replace("max_posts_per_minute: 5", "max_posts_per_minute: 100"),
    )
    .unwrap();
    let mark = p.root().join("watermark");
    let opts = json!({"watermark": mark, "limit": 2});
    for text in ["one", "two", "three"] {
        run(&py, "post", json!({"content": text}), &stdio(&p), &[]);
    }
    let first = run(&py, "page", opts.clone(), &stdio(&p), &[]);
    assert_eq!(step(&first, "paged")["pages"], json!([["1", "2"], ["3"]]));
    assert_eq!(std::fs::read_to_string(&mark).unwrap(), "3");
    // Nothing new: the watermark stays.
    let idle = run(&py, "page", opts.clone(), &stdio(&p), &[]);
    assert_eq!(step(&idle, "paged")["pages"], json!([[]]));
    assert_eq!(std::fs::read_to_string(&mark).unwrap(), "3");
    for text in ["four", "five"] {
        run(&py, "post", json!({"content": text}), &stdio(&p), &[]);
    }
    let again = run(&py, "page", opts, &stdio(&p), &[]);
    assert_eq!(step(&again, "paged")["pages"], json!([["4", "5"]]));
    assert_eq!(step(&again, "paged")["watermark"], "5");

    // One thread: the watermark moves past the other threads' messages too.
    for name in ["a", "b"] {
        let out = p
            .cmd()
            .args(["inbox", "session", "open", name])
            .output()
            .unwrap();
        assert!(out.status.success());
    }
    for (text, session) in [
        ("a1", "a"),
        ("b1", "b"),
        ("a2", "a"),
        ("b2", "b"),
        ("b3", "b"),
    ] {
        run(
            &py,
            "post",
            json!({"content": text, "session": session}),
            &stdio(&p),
            &[],
        );
    }
    let thread = p.root().join("watermark-a");
    std::fs::write(&thread, "5").unwrap();
    let a = run(
        &py,
        "page",
        json!({"watermark": thread, "limit": 1, "session": "a"}),
        &stdio(&p),
        &[],
    );
    // Message 6 (a1), then 8 (a2); the last call looks past 9 and 10 (b) and says no more.
    assert_eq!(step(&a, "paged")["pages"], json!([["6"], ["8"], []]));
    assert_eq!(step(&a, "paged")["watermark"], "10");
}

#[test]
fn a_human_post_provokes_an_agent_through_a_trigger_once() {
    let Some(py) = mcp::python_sdk() else {
        return;
    };
    let p = chat();
    // Posted with no serve running: the event waits in the outbox.
    let early = run(
        &py,
        "post",
        json!({"content": "@listener anyone there?"}),
        &stdio(&p),
        &[],
    );
    assert!(posted(&early)["structured"]["event_id"].is_string());
    assert!(
        posted(&early)["structured"]["decided_by"]
            .as_str()
            .unwrap()
            .contains("none runs now")
    );
    let serve = p.serve(&[]);
    wait_until("the early post's agent run", || heard_posts(&p).len() == 1);
    let late = run(
        &py,
        "post",
        json!({"content": "@listener db-1 is **slow**", "mime": "text/markdown"}),
        &stdio(&p),
        &[],
    );
    assert_eq!(
        posted(&late)["structured"]["decided_by"],
        "serve",
        "{late:?}"
    );
    wait_until("the post's agent run", || heard_posts(&p).len() == 2);
    let runs = heard_posts(&p);
    let got = runs
        .iter()
        .find(|r| r["event"]["data"]["message"]["content"] == "@listener db-1 is **slow**")
        .expect("the listener got the post");
    assert_eq!(got["trigger"], "on-post");
    assert_eq!(got["event"]["source"], "pap://chat");
    assert_eq!(got["event"]["data"]["principal"], "ann");
    assert_eq!(got["event"]["data"]["client"], "pap-tests-python");
    assert_eq!(
        got["event"]["data"]["message"]["id"],
        posted(&late)["structured"]["id"]
    );
    // A restart decides nothing again.
    serve.terminate();
    let serve = p.serve(&[]);
    std::thread::sleep(mcp::QUIET);
    assert_eq!(heard_posts(&p).len(), 2, "no post provoked twice");
    serve.terminate();
}

#[test]
fn human_posts_are_rate_limited_and_bounded_by_the_cascade_depth() {
    let Some(py) = mcp::python_sdk() else {
        return;
    };
    let p = chat();
    append(&p, "max_cascade_depth: 1\n");
    // chat.max_posts_per_minute is 5 in the fixture; agents' posts do not count.
    for i in 0..5 {
        let r = run(
            &py,
            "post",
            json!({"content": format!("m{i}")}),
            &stdio(&p),
            &[],
        );
        assert_eq!(posted(&r)["is_error"], false, "{r:?}");
    }
    let refused = run(
        &py,
        "post",
        json!({"content": "one too many"}),
        &stdio(&p),
        &[],
    );
    assert_eq!(posted(&refused)["is_error"], true);
    assert!(
        posted(&refused)["text"]
            .as_str()
            .unwrap()
            .contains("chat.max_posts_per_minute"),
        "{refused:?}"
    );
    let assistant = run(
        &py,
        "post",
        json!({"content": "an agent speaking", "tool": "chat_assistant_post"}),
        &stdio(&p),
        &[],
    );
    assert_eq!(posted(&assistant)["is_error"], false);
    assert!(posted(&assistant)["structured"].get("event_id").is_none());
}

#[test]
fn an_agent_cannot_post_as_a_person() {
    let Some(py) = mcp::python_sdk() else {
        return;
    };
    let p = chat();
    let parent = invocation_of(&dispatch(&p, "w1", "test.work.requested"));
    // An agent's MCP server gets PAP_INVOCATION_ID: the human's tool is not the agent's.
    let r = run(
        &py,
        "post",
        json!({"content": "@listener the agent asks itself"}),
        &stdio(&p),
        &[("PAP_INVOCATION_ID", &parent)],
    );
    let answered = posted(&r);
    assert_eq!(answered["is_error"], true, "{answered}");
    let text = answered["text"].as_str().unwrap_or_default();
    assert!(
        text.contains("chat.human.post is a person's") && text.contains(&parent),
        "{answered}"
    );
    // Nothing was stored as a person's, and nothing was provoked.
    let inbox = p.cmd().args(["inbox", "--json"]).output().unwrap();
    assert!(
        !String::from_utf8_lossy(&inbox.stdout).contains("the agent asks itself"),
        "stored: {}",
        String::from_utf8_lossy(&inbox.stdout)
    );
    assert!(heard_posts(&p).is_empty(), "the listener was not provoked");
}

#[test]
fn approvals_are_asked_of_a_person_through_elicitation_only() {
    let Some(py) = mcp::python_sdk() else {
        return;
    };
    let p = chat();
    let gated = invocation_of(&dispatch(&p, "g1", "test.gated.requested"));
    assert_eq!(show(&p, &gated)["status"], "awaiting_approval");

    let refused = run(
        &py,
        "approve-no-elicitation",
        json!({"invocation": gated}),
        &stdio(&p),
        &[],
    );
    let answered = &step(&refused, "answered")["result"];
    assert_eq!(answered["is_error"], true);
    assert!(
        answered["text"].as_str().unwrap().contains("elicitation"),
        "{answered}"
    );
    assert_eq!(
        show(&p, &gated)["status"],
        "awaiting_approval",
        "nothing recorded"
    );

    // By the short id every listing prints, as `pap approve` takes it.
    let listed = p.cmd().args(["invocations", "--json"]).output().unwrap();
    let short = common::dispatch::lines(&common::stdout(&listed))
        .into_iter()
        .find(|row| row["id"] == gated.as_str())
        .and_then(|row| row["short_id"].as_str().map(str::to_owned))
        .expect("the listing's short id");
    assert!(short.len() < gated.len());
    let lines = run(
        &py,
        "approve",
        json!({"invocation": short, "answer": "approve", "note": "go ahead"}),
        &stdio(&p),
        &[],
    );
    let answered = step(&lines, "answered");
    let asked = &answered["elicited"][0];
    assert!(
        asked["message"].as_str().unwrap().contains("Approve gated"),
        "{asked}"
    );
    assert!(
        asked["message"].as_str().unwrap().contains("db-1"),
        "the event's data is shown"
    );
    // A single choice among the request's actions, with their labels as titles.
    let action = &asked["schema"]["properties"]["action"];
    let choices: Vec<&Value> = match action.get("oneOf") {
        Some(one_of) => one_of
            .as_array()
            .unwrap()
            .iter()
            .map(|c| &c["const"])
            .collect(),
        None => action["enum"].as_array().unwrap().iter().collect(),
    };
    assert_eq!(choices, [&json!("approve"), &json!("reject")], "{action}");
    assert_eq!(asked["schema"]["required"], json!(["action"]), "{asked}");
    assert_eq!(
        answered["result"]["structured"]["state"], "approved",
        "{answered}"
    );
    assert_eq!(answered["result"]["structured"]["responder"], "ann");
    let inv = show(&p, &gated);
    assert_eq!(inv["approval"]["by"], "ann", "{inv}");
    assert_ne!(inv["status"], "awaiting_approval");
    let audit = p.cmd().args(["audit", "--json"]).output().unwrap();
    assert!(
        common::stdout(&audit)
            .lines()
            .any(|l| l.contains("\"approved\"") && l.contains("\"ann\"")),
        "{}",
        common::stdout(&audit)
    );

    // pap.yaml can narrow who answers over stdio.
    let config = p.root().join("pap.yaml");
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(
        &config,
        text.replace("chat:\n", "chat:\n  approvers: [ann]\n"),
    )
    .unwrap();
    let other = invocation_of(&dispatch(&p, "g2", "test.gated.requested"));
    let bob = Server::Stdio {
        root: p.root(),
        args: &["--as", "bob"],
    };
    let lines = run(&py, "approve", json!({"invocation": other}), &bob, &[]);
    let answered = &step(&lines, "answered")["result"];
    assert_eq!(answered["is_error"], true);
    assert!(
        answered["text"]
            .as_str()
            .unwrap()
            .contains("chat.approvers"),
        "{answered}"
    );
    assert_eq!(show(&p, &other)["status"], "awaiting_approval");

    // The person declines the form: nothing is recorded. Then rejects it.
    let decline = json!({"invocation": other, "answer": "decline"});
    let lines = run(&py, "approve", decline, &stdio(&p), &[]);
    let answered = &step(&lines, "answered")["result"];
    assert_eq!(answered["structured"]["recorded"], false, "{answered}");
    assert_eq!(show(&p, &other)["status"], "awaiting_approval");
    let reject = json!({"invocation": other, "answer": "reject", "note": "not during the freeze"});
    let lines = run(&py, "approve", reject, &stdio(&p), &[]);
    let answered = &step(&lines, "answered")["result"];
    assert_eq!(answered["structured"]["state"], "rejected", "{answered}");
    let inv = show(&p, &other);
    assert_eq!(inv["status"], "rejected");
    assert_eq!(inv["approval"]["by"], "ann");
    assert!(
        inv["error"]
            .as_str()
            .unwrap()
            .contains("not during the freeze"),
        "{inv}"
    );
}

#[test]
fn a_post_in_a_bound_session_reaches_its_agent_at_the_next_turn() {
    let Some(py) = mcp::python_sdk() else {
        return;
    };
    let p = chat();
    let out = p
        .cmd()
        .args(["inbox", "session", "open", "ops", "--agent", "worker"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", common::stderr(&out));
    let r = run(
        &py,
        "post",
        json!({"content": "worker, check the replicas", "session": "ops"}),
        &stdio(&p),
        &[],
    );
    assert_eq!(posted(&r)["structured"]["session_agent"], "worker", "{r:?}");
    let id = posted(&r)["structured"]["id"].as_str().unwrap().to_owned();
    let worker = invocation_of(&dispatch(&p, "w1", "test.work.requested"));
    let got = heard(&p)
        .into_iter()
        .find(|(inv, _)| *inv == worker)
        .expect("the worker ran")
        .1;
    let carried = got["notifications"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["user_post"].is_object())
        .unwrap_or_else(|| panic!("no post in {got}"))
        .clone();
    assert_eq!(carried["content"], "worker, check the replicas");
    assert_eq!(carried["user_post"]["session"], "ops");
    assert_eq!(carried["user_post"]["by"], "ann");
    assert_eq!(carried["user_post"]["message"].to_string(), id);
    // The session's thread holds it.
    let lines = run(
        &py,
        "browse",
        json!({"read": ["ui://chat/session/ops"]}),
        &stdio(&p),
        &[],
    );
    assert!(
        step(&lines, "listed")["uris"]
            .as_array()
            .unwrap()
            .contains(&json!("ui://chat/session/ops"))
    );
    let body = &step(&lines, "read")["body"];
    assert_eq!(body["messages"][0]["content"], "worker, check the replicas");
    // And the next turn does not get it again.
    let next = invocation_of(&dispatch(&p, "w2", "test.work.requested"));
    let again = heard(&p)
        .into_iter()
        .find(|(inv, _)| *inv == next)
        .unwrap()
        .1;
    assert!(
        !again["notifications"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n["user_post"].is_object()),
        "{again}"
    );
}

const OPS_TOKEN: &str = "ops-token-0123456789abcdef";
const VIEWER_TOKEN: &str = "viewer-token-0123456789abcdef";
const SCRAPER_TOKEN: &str = "scraper-token-0123456789abcdef";

#[test]
fn mcp_over_http_uses_the_listeners_principals_and_origin_check() {
    let (Some(py), Some(inspector)) = (mcp::python_sdk(), mcp::inspector()) else {
        return;
    };
    if !common::http::curl_available() {
        return;
    }
    let p = chat();
    append(
        &p,
        "listen:\n  auth:\n    principals:\n      - name: ops\n        token: ${OPS_TOKEN}\n        scopes: [read, ingest, approve]\n      - name: viewer\n        token: ${VIEWER_TOKEN}\n        scopes: [read]\n      - name: scraper\n        token: ${SCRAPER_TOKEN}\n        scopes: [metrics]\n",
    );
    let env = [
        ("OPS_TOKEN", OPS_TOKEN),
        ("VIEWER_TOKEN", VIEWER_TOKEN),
        ("SCRAPER_TOKEN", SCRAPER_TOKEN),
    ];
    let mut serve = p.serve_with(&["--listen", "127.0.0.1:0"], &env);
    let log = serve.log.clone();
    let mut base = None;
    serve.wait_while_alive("the listening line", || {
        base = common::http::listening_url(&std::fs::read_to_string(&log).unwrap_or_default());
        base.is_some()
    });
    let url = format!("{}/mcp", base.unwrap());
    let ops = Server::Http {
        url: url.clone(),
        token: OPS_TOKEN,
    };
    // Subscribed over HTTP, the client hears another process's outcome; its own post is
    // not echoed.
    let mut watcher = PyClient::start(&py, "watch", json!({"want": 1, "wait": 30}), &ops, &[]);
    let ready = watcher.step("ready");
    assert_eq!(ready["echoes"], json!([]));
    dispatch(&p, "w1", "test.work.requested");
    let updates = watcher.step("updates");
    assert_eq!(updates["updates"][0]["uri"], "ui://chat/inbox", "{updates}");
    watcher.finish();
    // A post that asks for the listener goes to serve's deciding thread, which runs it.
    let r = run(
        &py,
        "post",
        json!({"content": "@listener over HTTP"}),
        &ops,
        &[],
    );
    assert_eq!(posted(&r)["structured"]["decided_by"], "serve", "{r:?}");
    wait_until("the post's agent run", || heard_posts(&p).len() == 1);
    assert_eq!(heard_posts(&p)[0]["event"]["data"]["principal"], "ops");

    // A reader may read, not post.
    let viewer = Server::Http {
        url: url.clone(),
        token: VIEWER_TOKEN,
    };
    let r = run(&py, "post", json!({"content": "hi"}), &viewer, &[]);
    assert_eq!(posted(&r)["is_error"], true, "{r:?}");
    assert!(
        posted(&r)["text"]
            .as_str()
            .unwrap()
            .contains("`ingest` scope"),
        "{r:?}"
    );
    let browse = run(&py, "browse", json!({}), &viewer, &[]);
    assert_eq!(
        step(&browse, "read")["body"]["messages"][0]["content"],
        "my own words"
    );
    let names = tool_names(&inspect(&inspector, &viewer, &["--method", "tools/list"]));
    assert!(names.contains(&"chat_human_post".to_owned()));

    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "curl", "version": "1"}}})
    .to_string();
    let post = |headers: &[&str]| {
        let mut args = vec![
            "-X",
            "POST",
            "-H",
            "Content-Type: application/json",
            "-H",
            "Accept: application/json, text/event-stream",
        ];
        for h in headers {
            args.extend(["-H", h]);
        }
        args.push(&url);
        common::http::curl(&args, Some(init.as_bytes()))
    };
    let ok = post(&[&format!("Authorization: Bearer {OPS_TOKEN}")]);
    assert_eq!(ok.status, 200, "{ok:?}");
    assert_eq!(post(&[]).status, 401, "no credentials");
    assert_eq!(
        post(&[&format!("Authorization: Bearer {SCRAPER_TOKEN}")]).status,
        403,
        "a principal with none of the MCP scopes"
    );
    let evil = post(&[
        &format!("Authorization: Bearer {OPS_TOKEN}"),
        "Origin: http://evil.example",
    ]);
    assert_eq!(evil.status, 403, "{evil:?}");
    let stream = common::http::curl(
        &[
            "-H",
            &format!("Authorization: Bearer {OPS_TOKEN}"),
            "-H",
            "Origin: http://evil.example",
            "-H",
            "Accept: text/event-stream",
            &url,
        ],
        None,
    );
    assert_eq!(stream.status, 403, "a cross-site GET of the stream too");

    // A session belongs to the principal that opened it, on every method.
    let session = ok.header("mcp-session-id").expect("a session").to_owned();
    let as_viewer = |method: &str, body: Option<&[u8]>| {
        common::http::curl(
            &[
                "-X",
                method,
                "-H",
                &format!("Authorization: Bearer {VIEWER_TOKEN}"),
                "-H",
                &format!("Mcp-Session-Id: {session}"),
                "-H",
                "Content-Type: application/json",
                "-H",
                "Accept: application/json, text/event-stream",
                "--max-time",
                "5",
                &url,
            ],
            body,
        )
    };
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}).to_string();
    assert_eq!(as_viewer("POST", Some(list.as_bytes())).status, 403);
    assert_eq!(as_viewer("GET", None).status, 403, "its event stream");
    assert_eq!(as_viewer("DELETE", None).status, 403, "ending it");
}

#[test]
fn the_agent_status_resource_says_whether_the_ui_server_is_ready() {
    let Some(py) = mcp::python_sdk() else {
        return;
    };
    let p = chat();
    let read_status = || {
        let lines = run(
            &py,
            "browse",
            json!({"read": ["ui://agent/status"]}),
            &stdio(&p),
            &[],
        );
        let listed = step(&lines, "listed")["uris"].clone();
        assert!(
            listed
                .as_array()
                .unwrap()
                .contains(&json!("ui://agent/status")),
            "{listed}"
        );
        step(&lines, "read").clone()
    };
    // No serve: the chat can be used (the store answers), and no serve is named.
    let alone = read_status();
    let body = &alone["body"];
    assert_eq!(alone["mime"], "application/json", "{alone}");
    assert_eq!(body["ui"]["ready"], true, "{body:#}");
    assert_eq!(body["ui"]["server"], "pap");
    assert_eq!(body["store"]["readable"], true);
    assert_eq!(body["serve"], Value::Null, "{body:#}");
    assert_eq!(body["healthy"], true);
    // With serve running on the same state, it is named as /readyz and pap status know it.
    let serve = p.serve(&[]);
    let with_serve = read_status();
    assert_eq!(
        with_serve["body"]["serve"]["pid"].as_u64(),
        Some(u64::from(serve.child.id())),
        "{with_serve}"
    );
    assert_eq!(with_serve["body"]["serve"]["conditions"], json!([]));
    serve.terminate();
}

/// `invocations_list` pages newest first by a cursor: a page costs a page, and the pages
/// together list each invocation once.
#[test]
fn invocations_list_pages_newest_first_by_its_cursor() {
    let Some(py) = mcp::python_sdk() else {
        return;
    };
    let p = chat();
    let file = p.root().join("many.ndjson");
    let lines: Vec<String> = (0..7)
        .map(|i| {
            json!({"pap_version": "0.2", "id": format!("w{i}"), "type": "test.gated.requested",
                   "source": "tests", "time": "2026-11-23T10:00:00Z", "data": {"host": "db-1"}})
            .to_string()
        })
        .collect();
    std::fs::write(&file, lines.join("\n") + "\n").unwrap();
    let out = p
        .cmd()
        .args(["dispatch", "--no-run", "--json"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", common::stderr(&out));
    let mut seen: Vec<String> = Vec::new();
    let mut before = Value::Null;
    let mut pages = 0;
    loop {
        let mut args = json!({"last": 3});
        if !before.is_null() {
            args["before"] = before.clone();
        }
        let lines = run(
            &py,
            "call",
            json!({"tool": "invocations_list", "args": args}),
            &stdio(&p),
            &[],
        );
        let page = &step(&lines, "called")["result"]["structured"];
        pages += 1;
        let rows = page["invocations"].as_array().unwrap();
        seen.extend(
            rows.iter()
                .map(|r| r["event_id"].as_str().unwrap().to_owned()),
        );
        before = page["next_cursor"].clone();
        if before.is_null() {
            break;
        }
        assert_eq!(rows.len(), 3, "{page:#}");
        assert!(pages < 5, "the pages end");
    }
    assert_eq!(seen, ["w6", "w5", "w4", "w3", "w2", "w1", "w0"]);
    let lines = run(
        &py,
        "call",
        json!({"tool": "invocations_list", "args": {"before": "not a cursor"}}),
        &stdio(&p),
        &[],
    );
    let refused = &step(&lines, "called")["error"];
    assert_eq!(refused["code"], -32602, "{refused}");
    assert!(
        refused["message"].as_str().unwrap().contains("`before`"),
        "{refused}"
    );
}
