//! JP RFD 011 and ANP, against a fake LLM provider (and the real npm MCP server for tools):
//! a notification queued while the agent is inside its tool loop rides on that loop's next
//! request (a critical one too, forcing no second turn; one that comes too late forces the
//! turn when the loop ends), and a human's acknowledgement of a notification the agent
//! already saw reaches the agent at its next turn.

use crate::common;

use std::process::Stdio;
use std::time::Duration;

use common::dispatch::{Project, T0, ev};
use common::fake_llm::{FakeLlm, Scripted, anthropic_text, anthropic_tool_use};
use common::llm::{everything_server, project};
use serde_json::{Value, json};

fn agent(url: &str, tools: &str) -> String {
    format!(
        "  risk_level: low
  model:
    provider: anthropic
    model_id: test-model
    base_url: \"{url}\"
    max_tokens: 500
{tools}"
    )
}

/// Adds the command agent `src` (trigger `t-src`, `test.src.fired`), whose success is a
/// notification for agent `a` (target agent, handler system: queued for `a`).
fn add_source(p: &Project, level: &str) {
    let root = p.root();
    std::fs::write(
        root.join("agents/src.yaml"),
        format!(
            "pap_version: \"0.2\"\nagent:\n  id: src\n  risk_level: low\n  model:\n    provider: command\n    command: [\"sh\", \"-c\", \"cat >/dev/null; echo the disk is 91% full\"]\n  notify:\n    succeeded:\n      target: agent\n      agent: a\n      level: {level}\n"
        ),
    )
    .unwrap();
    std::fs::write(
        root.join("triggers/t-src.yaml"),
        "pap_version: \"0.2\"\ntrigger:\n  id: t-src\n  match:\n    type: test.src.fired\n  agent: src\n",
    )
    .unwrap();
}

fn dispatch(p: &Project, id: &str, kind: &str) -> std::process::Output {
    let file = p.events(&format!("{id}.ndjson"), &[ev(id, kind, json!({}))]);
    let out = p
        .cmd(T0)
        .env("ANTHROPIC_API_KEY", "k")
        .args(["dispatch", "--json"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "dispatch {id}: {}\n{}",
        common::stdout(&out),
        common::stderr(&out)
    );
    out
}

/// The text of the last user message of a recorded Anthropic request.
fn last_user_text(request: &Value) -> String {
    let messages = request["messages"].as_array().unwrap();
    let last = messages.iter().rev().find(|m| m["role"] == "user").unwrap();
    match &last["content"] {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter_map(|b| b["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        other => other.to_string(),
    }
}

fn notification_for(p: &Project, agent: &str) -> String {
    let out = p
        .cmd(T0)
        .args(["notifications", "--json"])
        .output()
        .unwrap();
    common::stdout(&out)
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|n| n["metadata"]["agent"] == agent)
        .unwrap_or_else(|| panic!("no notification of {agent}: {}", common::stdout(&out)))["id"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// A `pap dispatch` of event `e1` for the LLM agent `a`, in the background (its answers
/// come from the fake provider, held back as the test scripts them).
fn start_llm_turn(p: &Project) -> std::process::Child {
    let file = p.events("e1.ndjson", &[ev("e1", "test.llm.asked", json!({}))]);
    p.cmd(T0)
        .env("ANTHROPIC_API_KEY", "k")
        .args(["dispatch", "--json"])
        .arg(&file)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Waits for a background dispatch to end, and checks that it succeeded.
fn finished(running: std::process::Child) {
    let out = running.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// What a tool loop of agent `a` saw of a notification of `level` that another process
/// queued for it while the loop's first request (answered by a tool call, held back 3 s)
/// was in flight.
struct Rode {
    p: Project,
    fake: FakeLlm,
    ntf: String,
    /// The loop's invocation, as `pap invocations show --json` prints it.
    inv: Value,
}

fn queued_during_a_tool_loop(server: &std::path::PathBuf, level: &str, label: &str) -> Rode {
    let fake = FakeLlm::start(vec![
        Scripted::ok(anthropic_tool_use(&[(
            "toolu_1",
            "get-sum",
            json!({"a": 1, "b": 2}),
        )]))
        .delayed(Duration::from_secs(3)),
        Scripted::ok(anthropic_text("the sum is 3")),
        Scripted::ok(anthropic_text("a turn nobody should have started")),
    ]);
    let tools = "  tools:\n    - name: get-sum\n      source: mcp://everything\n      risk_override: read_only\n      impact: internal\n";
    let p = project(&agent(&fake.url, tools), Some(server));
    add_source(&p, level);
    let running = start_llm_turn(&p);
    common::serve::wait_until("the loop's first request", || fake.requests().len() == 1);
    assert!(
        !last_user_text(&fake.requests()[0].body).contains("disk is 91% full"),
        "not queued yet at the start"
    );
    dispatch(&p, "s1", "test.src.fired");
    let ntf = notification_for(&p, "src");
    finished(running);

    let reqs = fake.requests();
    assert_eq!(reqs.len(), 2, "one loop of two requests, and no other turn");
    let messages = reqs[1].body["messages"].as_array().unwrap();
    let last = messages.last().unwrap();
    assert_eq!(last["role"], "user");
    assert_eq!(
        last["content"][0]["type"], "tool_result",
        "the tool result comes first"
    );
    let riding = last["content"][1]["text"]
        .as_str()
        .expect("a text block after it");
    assert!(riding.contains("<pap_notifications>"), "{riding}");
    assert!(riding.contains(label), "grouped by level: {riding}");
    assert!(riding.contains(&format!("[{ntf}]")), "{riding}");
    assert!(riding.contains("the disk is 91% full"), "{riding}");

    // Delivered with this invocation, and recorded on the turn.
    let of_a = invocations_of(&p, "a");
    assert_eq!(of_a.len(), 1, "{of_a:#?}");
    let inv = p
        .cmd(T0)
        .args([
            "invocations",
            "show",
            of_a[0]["id"].as_str().unwrap(),
            "--json",
        ])
        .output()
        .unwrap();
    let inv: Value = serde_json::from_str(&common::stdout(&inv)).unwrap();
    let turn = &inv["history"][0]["transcript"]["turns"][0];
    assert_eq!(turn["carried"][0]["id"], ntf, "{turn}");
    // And in the record's notifications, once (a retry's first message is built from it).
    let carried: Vec<&Value> = inv["notifications"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| n["id"] == ntf)
        .collect();
    assert_eq!(carried.len(), 1, "{inv}");
    let n = show_notification(&p, &ntf);
    assert_eq!(n["status"], "delivered", "{n}");
    assert_eq!(n["delivered_with"], inv["id"], "{n}");
    Rode { p, fake, ntf, inv }
}

/// Agent `agent`'s invocations, as `pap invocations --json` lists them.
fn invocations_of(p: &Project, agent: &str) -> Vec<Value> {
    let list = p.cmd(T0).args(["invocations", "--json"]).output().unwrap();
    common::stdout(&list)
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|i| i["agent"] == agent)
        .collect()
}

fn show_notification(p: &Project, id: &str) -> Value {
    let n = p
        .cmd(T0)
        .args(["notifications", "show", id, "--json"])
        .output()
        .unwrap();
    serde_json::from_str(&common::stdout(&n)).unwrap()
}

#[test]
fn a_notification_queued_during_a_tool_loop_rides_on_the_loops_next_request() {
    let Some(server) = everything_server() else {
        return;
    };
    queued_during_a_tool_loop(&server, "warning", "**Warning:**");
}

/// JP RFD 011, "during tool execution": a critical notification is delivered with the tool
/// responses at the next natural contact point, and starts no second, concurrent turn.
#[test]
fn a_critical_notification_during_a_tool_loop_rides_with_the_tool_responses_and_forces_no_turn() {
    let Some(server) = everything_server() else {
        return;
    };
    let rode = queued_during_a_tool_loop(&server, "critical", "**Critical:**");
    let n = show_notification(&rode.p, &rode.ntf);
    assert_eq!(n["forced_turn"], Value::Null, "{n}");
    assert_eq!(rode.fake.requests().len(), 2);
    assert_eq!(rode.inv["internal"], false);
}

/// A critical notification that comes while the loop's last request is in flight has no
/// tool responses to ride on: the loop's end is its contact point, and forces the turn then.
#[test]
fn a_critical_notification_during_a_loops_last_request_forces_a_turn_when_the_loop_ends() {
    let fake = FakeLlm::start(vec![
        Scripted::ok(anthropic_text("all quiet")).delayed(Duration::from_secs(3)),
        Scripted::ok(anthropic_text("noted: the disk")),
    ]);
    let p = project(&agent(&fake.url, ""), None);
    add_source(&p, "critical");
    let running = start_llm_turn(&p);
    common::serve::wait_until("the loop's request", || fake.requests().len() == 1);
    dispatch(&p, "s1", "test.src.fired");
    let ntf = notification_for(&p, "src");
    assert_eq!(
        invocations_of(&p, "a").len(),
        1,
        "no second turn while the loop runs"
    );
    finished(running);

    let reqs = fake.requests();
    assert_eq!(reqs.len(), 2, "the loop's request, then the forced turn's");
    let forced = last_user_text(&reqs[1].body);
    assert!(forced.contains(&format!("[{ntf}]")), "{forced}");
    assert!(forced.contains("the disk is 91% full"), "{forced}");
    let of_a = invocations_of(&p, "a");
    let turn = of_a
        .iter()
        .find(|i| i["internal"] == true)
        .unwrap_or_else(|| panic!("a forced turn: {of_a:#?}"));
    assert_eq!(turn["event_type"], "pap.notification.critical");
    let n = show_notification(&p, &ntf);
    assert_eq!(n["forced_turn"], turn["id"], "{n}");
    assert_eq!(n["delivered_with"], turn["id"], "{n}");
}

#[test]
fn an_acknowledgement_reaches_the_agent_at_its_next_turn() {
    let fake = FakeLlm::start(vec![
        Scripted::ok(anthropic_text("first")),
        Scripted::ok(anthropic_text("second")),
        Scripted::ok(anthropic_text("third")),
    ]);
    let p = project(&agent(&fake.url, ""), None);
    // The agent's own outcome goes to the user's inbox and, as ambient awareness, to its
    // next turn.
    dispatch(&p, "e1", "test.llm.asked");
    let ntf = notification_for(&p, "a");
    dispatch(&p, "e2", "test.llm.asked");
    let second = last_user_text(&fake.requests()[1].body);
    let line = second
        .lines()
        .find(|l| l.contains(&format!("[{ntf}]")))
        .unwrap_or_else(|| panic!("told at the second turn: {second}"));
    assert!(!line.contains("acknowledged"), "{line}");

    // The person acknowledges it after the agent saw it.
    let inbox = p.cmd(T0).args(["inbox", "--json"]).output().unwrap();
    let message = common::stdout(&inbox)
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|m| m["notification_id"] == ntf)
        .unwrap()["id"]
        .to_string();
    let ack = p.cmd(T0).args(["inbox", "ack", &message]).output().unwrap();
    assert!(ack.status.success(), "{}", common::stderr(&ack));

    dispatch(&p, "e3", "test.llm.asked");
    let third = last_user_text(&fake.requests()[2].body);
    let line = third
        .lines()
        .find(|l| l.contains(&format!("[{ntf}]")))
        .unwrap_or_else(|| panic!("the acknowledgement reached the third turn: {third}"));
    assert!(
        line.contains("(update: the user has now acknowledged this one)"),
        "{line}"
    );
}
