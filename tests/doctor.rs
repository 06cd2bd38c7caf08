//! `pap doctor`: a missing provider key and a missing MCP server command are caught before
//! the first real page; a real MCP server is started and its tools checked against the agents'.

use crate::common;

use common::llm::{everything_server, project};
use common::{code, stderr, stdout};

fn agent(tools: &str) -> String {
    format!(
        "  risk_level: low
  model:
    provider: anthropic
    model_id: test-model
    max_tokens: 100
  system_prompt: \"You add numbers.\"
{tools}"
    )
}

fn doctor(p: &common::dispatch::Project, key: Option<&str>) -> (i32, String, String) {
    let mut cmd = p.cmd(common::dispatch::T0);
    cmd.env_remove("ANTHROPIC_API_KEY");
    if let Some(key) = key {
        cmd.env("ANTHROPIC_API_KEY", key);
    }
    let out = cmd.arg("doctor").output().unwrap();
    (code(&out), stdout(&out), stderr(&out))
}

#[test]
fn a_missing_key_and_a_missing_mcp_command_are_problems() {
    let p = project(
        &agent(
            "  tools:
    - name: get-sum
      source: mcp://ghost
      risk_override: read_only
      impact: internal
",
        ),
        None,
    );
    std::fs::write(
        p.root().join("pap.yaml"),
        "pap_version: \"0.2\"\nmcp_servers:\n  ghost:\n    command: no-such-mcp-server-for-pap\n",
    )
    .unwrap();
    let (code, out, err) = doctor(&p, None);
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        out.contains("FAIL  provider key ANTHROPIC_API_KEY: not set: agent a cannot run"),
        "{out}"
    );
    assert!(
        out.contains("FAIL  mcp server ghost: `no-such-mcp-server-for-pap` is not on PATH"),
        "{out}"
    );
    assert!(out.contains("ok    state dir"), "{out}");
    assert!(out.contains("2 problem(s)"), "{out}");

    // `pap lint` warns about the command too.
    let lint = p.cmd(common::dispatch::T0).args(["lint"]).output().unwrap();
    let text = format!("{}{}", stdout(&lint), stderr(&lint));
    assert!(text.contains("command-not-found"), "{text}");
    assert!(text.contains("no-such-mcp-server-for-pap"), "{text}");
}

#[test]
fn a_real_mcp_server_is_started_and_must_list_the_tools_the_agents_use() {
    let Some(server) = everything_server() else {
        return;
    };
    let config = format!(
        "pap_version: \"0.2\"\nmcp_servers:\n  everything:\n    command: \"{}\"\n",
        server.display()
    );
    let tools = |name: &str| {
        format!(
            "  tools:
    - name: {name}
      source: mcp://everything
      risk_override: read_only
      impact: internal
"
        )
    };
    let p = project(&agent(&tools("get-sum")), None);
    std::fs::write(p.root().join("pap.yaml"), &config).unwrap();
    let (code, out, err) = doctor(&p, Some("sk-test"));
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("ok    mcp server everything: started; lists"),
        "{out}"
    );
    assert!(
        out.contains("ok    provider key ANTHROPIC_API_KEY: set"),
        "{out}"
    );

    let p = project(&agent(&tools("no-such-tool")), None);
    std::fs::write(p.root().join("pap.yaml"), &config).unwrap();
    let (code, out, _) = doctor(&p, Some("sk-test"));
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("FAIL  mcp server everything: lacks no-such-tool (agent a)"),
        "{out}"
    );
}

// ---- what another attempt cannot fix is not retried with backoff ----------------------

#[test]
fn a_missing_program_is_not_retried() {
    let p = project(
        "  risk_level: low
  model:
    provider: command
    command: [\"no-such-program-for-pap\"]
  on_failure:
    retry:
      max_attempts: 3
      backoff_seconds: 60
",
        None,
    );
    let run = common::llm::dispatch(&p, "m1", serde_json::json!({}), None, &[]);
    assert_eq!(run.code, 4, "{}", run.stderr);
    let inv = &p.invocations()[0];
    assert_eq!(inv["status"], "failed", "{inv}");
    assert_eq!(inv["attempts"], 1, "not retried: {inv}");
    assert!(
        inv["error"]
            .as_str()
            .unwrap()
            .contains("cannot start no-such-program-for-pap"),
        "{inv}"
    );
}

#[test]
fn an_unauthorised_provider_is_not_retried() {
    use common::fake_llm::{FakeLlm, Scripted};
    let fake = FakeLlm::start(vec![Scripted::status(
        401,
        serde_json::json!({"error": {"type": "authentication_error", "message": "invalid x-api-key"}}),
    )]);
    let p = project(
        &format!(
            "  risk_level: low
  model:
    provider: anthropic
    model_id: test-model
    base_url: \"{}\"
    max_tokens: 100
  on_failure:
    retry:
      max_attempts: 3
      backoff_seconds: 60
",
            fake.url
        ),
        None,
    );
    let run = common::llm::dispatch(&p, "u1", serde_json::json!({}), Some("sk-wrong"), &[]);
    assert_eq!(run.code, 4, "{}", run.stderr);
    let inv = &p.invocations()[0];
    assert_eq!(
        (&inv["status"], &inv["attempts"]),
        (&serde_json::json!("failed"), &serde_json::json!(1)),
        "{inv}"
    );
    assert!(inv["error"].as_str().unwrap().contains("401"), "{inv}");
    assert_eq!(fake.requests().len(), 1);
}
