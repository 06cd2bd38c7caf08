//! A project with one LLM agent pointed at a fake provider, and (when installed) the npm
//! MCP server `@modelcontextprotocol/server-everything`, which nobody on this project wrote.

use std::path::PathBuf;

use serde_json::Value;

use super::dispatch::{Project, Run, T0, ev};

/// Where `.ci/run` installs the reference MCP server.
pub(crate) fn everything_server() -> Option<PathBuf> {
    let path = std::env::var_os("PAP_TEST_MCP_EVERYTHING")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("target/mcp-servers/node_modules/.bin/mcp-server-everything")
        });
    let node = std::process::Command::new("node")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if path.exists() && node {
        return Some(path);
    }
    assert!(
        std::env::var_os("PAP_TEST_REQUIRE_MCP").is_none(),
        "PAP_TEST_REQUIRE_MCP is set but {} (or node) is missing; `bash .ci/run` installs it",
        path.display()
    );
    super::skip_note(&format!(
        "the MCP server {} is not installed (`bash .ci/run` installs it)",
        path.display()
    ));
    None
}

/// A project whose trigger `t-llm` sends `test.llm.asked` to the agent `a`, described by
/// `agent` (YAML of the `agent:` mapping's body, indented by two spaces), with the
/// `everything` MCP server when `mcp` is given.
pub(crate) fn project(agent: &str, mcp: Option<&PathBuf>) -> Project {
    let dir = tempfile::tempdir().expect("temp dir");
    let root = dir.path();
    std::fs::create_dir_all(root.join("agents")).unwrap();
    std::fs::create_dir_all(root.join("triggers")).unwrap();
    let mut config = String::from("pap_version: \"0.2\"\n");
    if let Some(server) = mcp {
        config.push_str(&format!(
            "mcp_servers:\n  everything:\n    command: \"{}\"\n",
            server.display()
        ));
    }
    std::fs::write(root.join("pap.yaml"), config).unwrap();
    std::fs::write(
        root.join("triggers/t-llm.yaml"),
        "pap_version: \"0.2\"\ntrigger:\n  id: t-llm\n  match:\n    type: test.llm.asked\n  agent: a\n",
    )
    .unwrap();
    std::fs::write(
        root.join("agents/a.yaml"),
        format!("pap_version: \"0.2\"\nagent:\n  id: a\n{agent}"),
    )
    .unwrap();
    Project { dir }
}

/// Dispatches one `test.llm.asked` event with `data`, with `key` as the provider key
/// (ANTHROPIC_API_KEY and OPENAI_API_KEY) unless `None`.
pub(crate) fn dispatch(
    p: &Project,
    id: &str,
    data: Value,
    key: Option<&str>,
    env: &[(&str, &str)],
) -> Run {
    let file = p.events(&format!("{id}.ndjson"), &[ev(id, "test.llm.asked", data)]);
    let mut cmd = p.cmd(T0);
    cmd.env_remove("ANTHROPIC_API_KEY")
        .env_remove("OPENAI_API_KEY");
    if let Some(key) = key {
        cmd.env("ANTHROPIC_API_KEY", key).env("OPENAI_API_KEY", key);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd
        .arg("dispatch")
        .arg(&file)
        .arg("--json")
        .output()
        .expect("run pap");
    super::dispatch::run_of(&out)
}
