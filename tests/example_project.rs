//! The shipped example project: it loads, its offline command agent (a POSIX sh program)
//! produces output that fits its own manifest's output schema, even for hostile event content,
//! and the README's quick start (an offline dispatch) works.

use crate::common;

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use pap::manifest::compiled::SchemaType;
use serde_json::Value;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn run_triage(invocation_file: &str) -> (i32, Value) {
    let input = std::fs::read(root().join(invocation_file)).unwrap();
    let mut child = Command::new("sh")
        .arg(root().join("agents/bin/latency-triage.sh"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(&input).unwrap();
    let out = child.wait_with_output().unwrap();
    let value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)));
    (out.status.code().unwrap(), value)
}

fn fits(value: &Value, t: SchemaType) -> bool {
    match t {
        SchemaType::String => value.is_string(),
        SchemaType::Number => value.is_number(),
        SchemaType::Integer => value.is_i64() || value.is_u64(),
        SchemaType::Boolean => value.is_boolean(),
        SchemaType::Array => value.is_array(),
        SchemaType::Object => value.is_object(),
    }
}

#[test]
fn every_scenario_has_a_trigger_an_agent_and_an_event_whose_type_it_matches() {
    let loaded = pap::manifest::load(root(), &[]);
    let project = loaded.project.expect("the example project loads");
    let events = std::fs::read_dir(root().join("examples/events")).unwrap();
    let mut count = 0;
    for entry in events {
        let event: Value =
            serde_json::from_slice(&std::fs::read(entry.unwrap().path()).unwrap()).unwrap();
        let event_type = event["type"].as_str().unwrap();
        assert!(
            project
                .triggers
                .iter()
                .any(|t| t.enabled && t.pattern.matches(event_type)),
            "no enabled trigger matches {event_type}"
        );
        count += 1;
    }
    // The eight scenarios of PAP 0.2 section 7, plus a sustained latency breach that escalates.
    assert_eq!(count, 9);
    assert!(
        project.agents.iter().any(|a| a.requires_approval()),
        "one high-risk agent"
    );
}

#[test]
fn the_offline_agent_output_fits_its_output_schema() {
    let project = pap::manifest::load(root(), &[]).project.unwrap();
    let agent = project.agent("latency-triage").unwrap();
    let schema = agent.output.schema.as_ref().unwrap();
    for file in [
        "examples/invocations/server-latency-sla-breach.json",
        "examples/invocations/server-latency-sla-breach-hostile-endpoint.json",
    ] {
        let (exit, output) = run_triage(file);
        assert_eq!(exit, 0, "{file}");
        for (field, t) in schema {
            assert!(
                fits(&output[field], *t),
                "{file}: field {field} is not {t:?}: {output}"
            );
        }
    }
}

#[test]
fn hostile_event_strings_come_back_as_data() {
    let (_, output) =
        run_triage("examples/invocations/server-latency-sla-breach-hostile-endpoint.json");
    let endpoint = output["endpoint"].as_str().unwrap();
    assert!(
        endpoint.contains('"') && endpoint.contains('\\'),
        "{endpoint}"
    );
}

/// A copy of the example project (no state, no build output) in a temp dir.
fn example_copy() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for part in ["triggers", "agents", "examples", "workspace"] {
        common::copy_dir(&root().join(part), &dir.path().join(part));
    }
    std::fs::copy(root().join("pap.yaml"), dir.path().join("pap.yaml")).unwrap();
    dir
}

#[test]
fn the_quick_start_dispatch_runs_offline() {
    let dir = example_copy();
    let out = common::pap_at(dir.path())
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("OPENAI_API_KEY")
        .args([
            "dispatch",
            "examples/events/server-latency-sla-breach.json",
            "--json",
        ])
        .output()
        .unwrap();
    assert_eq!(common::code(&out), 0, "{}", common::stderr(&out));
    let lines: Vec<Value> = common::stdout(&out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let t = &lines[0]["triggers"][0];
    assert_eq!(
        (t["outcome"].as_str(), t["result"].as_str()),
        (Some("invoked"), Some("succeeded"))
    );
    assert_eq!(lines[1]["type"], "pap.agent.invocation.completed");
    assert_eq!(
        lines.len(),
        2,
        "a major breach of 6 minutes does not escalate"
    );
}

#[test]
fn a_sustained_breach_emits_the_declared_escalation_event() {
    let dir = example_copy();
    let out = common::pap_at(dir.path())
        .env_remove("ANTHROPIC_API_KEY")
        .args([
            "dispatch",
            "examples/events/server-latency-sustained.json",
            "--json",
        ])
        .output()
        .unwrap();
    let lines: Vec<Value> = common::stdout(&out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let triage = &lines[0]["triggers"][0];
    assert_eq!(triage["result"], "succeeded");
    let escalation = lines
        .iter()
        .find(|l| l["type"] == "server.incident.escalation_required")
        .expect("the escalation follow-up was dispatched");
    assert_eq!(escalation["triggered_by"], triage["invocation_id"]);
    assert_eq!(escalation["depth"], 1);
    let t = &escalation["triggers"][0];
    assert_eq!(
        (t["trigger"].as_str(), t["outcome"].as_str()),
        (Some("server-incident-escalation"), Some("invoked"))
    );
}
