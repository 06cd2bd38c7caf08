//! The shipped example project: it loads, and its offline command agent (a POSIX sh program)
//! produces output that fits its own manifest's output schema, even for hostile event content.

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
    assert_eq!(count, 8, "the eight scenarios of PAP 0.2 section 7");
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
