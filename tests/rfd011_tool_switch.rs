//! JP RFD 011 per-tool notification control, through the real binary: a tool's
//! `notifications: {external_call: false}` keeps its calls from the agent that would be made
//! aware of them, while the user is still told of every call (ANP 6.1); and a switch naming
//! a notification the tool does not emit is refused with the file and the field.

use crate::common;

use common::dispatch::{Project, T0, ev};
use common::fake_llm::{FakeLlm, Scripted, anthropic_text, anthropic_tool_use};
use common::llm::{everything_server, project};
use serde_json::{Value, json};

/// The LLM agent `a` with two external tools on `everything`; `echo`'s calls are switched off
/// for agents. Its external calls are routed to the user, agent `b` made aware of them.
fn agent(url: &str) -> String {
    format!(
        "  risk_level: low
  model:
    provider: anthropic
    model_id: test-model
    base_url: \"{url}\"
    max_tokens: 500
  tools:
    - name: get-sum
      source: mcp://everything
    - name: echo
      source: mcp://everything
      notifications:
        external_call: false
  notify:
    external_tool_call:
      agent: b
"
    )
}

/// The command agent `b` (trigger `t-b`, `test.b.asked`), which receives the ambient copies.
fn add_receiver(p: &Project) {
    let root = p.root();
    std::fs::write(
        root.join("agents/b.yaml"),
        "pap_version: \"0.2\"\nagent:\n  id: b\n  risk_level: low\n  model:\n    provider: command\n    command: [\"sh\", \"-c\", \"cat >/dev/null; echo seen\"]\n",
    )
    .unwrap();
    std::fs::write(
        root.join("triggers/t-b.yaml"),
        "pap_version: \"0.2\"\ntrigger:\n  id: t-b\n  match:\n    type: test.b.asked\n  agent: b\n",
    )
    .unwrap();
}

fn dispatch(p: &Project, id: &str, kind: &str) -> std::process::Output {
    let file = p.events(&format!("{id}.ndjson"), &[ev(id, kind, json!({}))]);
    p.cmd(T0)
        .env("ANTHROPIC_API_KEY", "k")
        .args(["dispatch", "--json"])
        .arg(&file)
        .output()
        .unwrap()
}

fn json_lines(p: &Project, args: &[&str]) -> Vec<Value> {
    let out = p.cmd(T0).args(args).output().unwrap();
    assert!(out.status.success(), "{args:?}: {}", common::stderr(&out));
    common::stdout(&out)
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .collect()
}

#[test]
fn a_tools_switched_off_calls_reach_the_user_but_not_the_agent_made_aware() {
    let Some(server) = everything_server() else {
        return;
    };
    let fake = FakeLlm::start(vec![
        Scripted::ok(anthropic_tool_use(&[
            ("t1", "get-sum", json!({"a": 1, "b": 2})),
            ("t2", "echo", json!({"message": "hi"})),
        ])),
        Scripted::ok(anthropic_text("done")),
    ]);
    let p = project(&agent(&fake.url), Some(&server));
    add_receiver(&p);
    let out = dispatch(&p, "e1", "test.llm.asked");
    assert!(out.status.success(), "{}", common::stderr(&out));

    // ANP 6.1: the user is told of both calls, the switched-off one included.
    let calls: Vec<Value> = json_lines(&p, &["inbox", "--json"])
        .into_iter()
        .filter(|m| m["kind"] == "tool.external_call")
        .collect();
    // The model asked for both at once: they run side by side, in either order.
    let mut tools: Vec<&str> = calls
        .iter()
        .map(|m| m["metadata"]["tool"].as_str().unwrap())
        .collect();
    tools.sort_unstable();
    assert_eq!(tools, ["echo", "get-sum"], "{calls:#?}");
    let id_of = |tool: &str| {
        calls
            .iter()
            .find(|m| m["metadata"]["tool"] == tool)
            .unwrap()["notification_id"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let (sum, echo) = (id_of("get-sum"), id_of("echo"));

    // The receiving agent's next turn carries only the enabled tool's call.
    let out = dispatch(&p, "e2", "test.b.asked");
    assert!(out.status.success(), "{}", common::stderr(&out));
    let turn = json_lines(&p, &["invocations", "--json"])
        .into_iter()
        .find(|i| i["agent"] == "b")
        .expect("b ran");
    let carried: Vec<&str> = turn["notifications"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    assert_eq!(carried, [sum.as_str()], "{turn:#}");

    // The other's history says why, naming the tool and the manifest field.
    let out = p
        .cmd(T0)
        .args(["notifications", "show", &echo, "--json"])
        .output()
        .unwrap();
    let n: Value = serde_json::from_str(&common::stdout(&out)).unwrap();
    let notes: Vec<&str> = n["history"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["note"].as_str())
        .collect();
    assert!(
        notes.iter().any(|note| note.starts_with(
            "not delivered to b: tool `echo` on `everything` of agent a has `external_call` switched off (agents/a.yaml agent.tools[1].notifications.external_call)"
        )),
        "{notes:#?}"
    );
    assert_eq!(n["status"], "dispatched", "still waiting for the user: {n}");
}

#[test]
fn a_switch_naming_a_notification_the_tool_does_not_emit_is_refused() {
    let p = project(
        "  risk_level: low
  model:
    provider: anthropic
    model_id: test-model
  tools:
    - name: get-sum
      source: mcp://everything
      notifications:
        stopped: false
",
        Some(&"/nonexistent/mcp-server".into()),
    );
    let out = dispatch(&p, "e1", "test.llm.asked");
    assert!(!out.status.success());
    let err = common::stderr(&out);
    assert!(
        err.contains("agents/a.yaml")
            && err.contains("`agent.tools[0].notifications.stopped`: tool `get-sum` emits no notification `stopped`")
            && err.contains("it emits: `external_call`"),
        "{err}"
    );
}
