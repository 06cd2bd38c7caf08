//! `pap schema`: JSON Schemas generated from the manifest types.

use crate::common;

use common::{code, json, pap, stdout};
use serde_json::Value;

#[test]
fn each_kind_prints_a_draft_2020_12_schema() {
    for (kind, title, required) in [
        ("trigger", "PAP trigger manifest", "trigger"),
        ("agent", "PAP agent manifest", "agent"),
        ("config", "pap project config (pap.yaml)", ""),
    ] {
        let out = pap().args(["schema", kind]).output().unwrap();
        assert_eq!(code(&out), 0);
        let schema = json(&out);
        assert_eq!(
            schema["$schema"],
            "https://json-schema.org/draft/2020-12/schema"
        );
        assert_eq!(schema["title"], title);
        assert_eq!(schema["additionalProperties"], false);
        if !required.is_empty() {
            assert!(
                schema["required"]
                    .as_array()
                    .unwrap()
                    .contains(&Value::from(required))
            );
        }
    }
}

#[test]
fn enums_in_the_schema_match_the_protocol() {
    let out = pap().args(["schema", "agent"]).output().unwrap();
    let schema = json(&out);
    assert_eq!(
        schema["$defs"]["RiskLevel"]["enum"],
        serde_json::json!(["read_only", "low", "medium", "high"])
    );
    assert_eq!(
        schema["$defs"]["Provider"]["enum"],
        serde_json::json!(["anthropic", "openai", "command"])
    );
    let out = pap().args(["schema", "trigger"]).output().unwrap();
    let schema = json(&out);
    // The one list of operators the engine has.
    let operators: Vec<&str> = pap::manifest::operators::names().collect();
    assert_eq!(
        schema["$defs"]["Operator"]["enum"],
        serde_json::json!(operators)
    );
    assert!(operators.contains(&"not_in") && operators.contains(&"regex"));
}

#[test]
fn out_writes_a_file_per_kind() {
    let dir = tempfile::tempdir().unwrap();
    let out = pap()
        .args(["schema", "--out"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(code(&out), 0);
    for kind in ["trigger", "agent", "config", "schedule", "rule-test"] {
        let text = std::fs::read_to_string(dir.path().join(format!("{kind}.schema.json"))).unwrap();
        serde_json::from_str::<Value>(&text).unwrap();
    }
}

#[test]
fn a_kind_is_required_without_out() {
    assert_eq!(code(&pap().arg("schema").output().unwrap()), 2);
}

#[test]
fn the_schemas_shipped_with_the_example_project_are_current() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    for kind in ["trigger", "agent", "config", "schedule", "rule-test"] {
        let out = pap().args(["schema", kind]).output().unwrap();
        let shipped =
            std::fs::read_to_string(root.join(format!("schemas/{kind}.schema.json"))).unwrap();
        assert_eq!(
            stdout(&out),
            shipped,
            "schemas/{kind}.schema.json is stale: run `cargo run -- schema --out schemas`"
        );
    }
}
