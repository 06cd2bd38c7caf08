//! The RFC 9535 JSONPath compliance suite, run through the same parser and evaluator that filter
//! conditions use. Invalid selectors must be rejected by the path check; valid ones accepted and
//! evaluated to the expected nodes. Cases jsonpath-rust gets wrong are listed by name below (and
//! in docs/src/reference/jsonpath.md); any other failure fails the test, and so does a listed case that now passes
//! (so the list cannot silently go stale).

use std::collections::BTreeSet;

use pap::jsonpath::JsonPath;
use serde_json::Value;

/// Known gaps against the suite, by case name: none since pap evaluates with its own
/// evaluator (src/jsonpath/eval.rs) and checks the RFC's typing rules itself
/// (src/jsonpath/typecheck.rs); jsonpath-rust 1.0.12 alone failed nine cases.
const KNOWN_FAILURES: &[&str] = &[];

/// Why a case failed, in words, or `None` when it passed.
fn run_case(case: &Value) -> Option<String> {
    let selector = case["selector"].as_str().expect("selector");
    let parsed = JsonPath::parse(selector);
    if case["invalid_selector"].as_bool() == Some(true) {
        return parsed
            .is_ok()
            .then(|| "an invalid selector was accepted".to_string());
    }
    let path = match parsed {
        Ok(p) => p,
        Err(e) => return Some(format!("a valid selector was rejected: {e}")),
    };
    let got: Vec<Value> = match path.select(&case["document"]) {
        Ok(nodes) => nodes.into_iter().cloned().collect(),
        Err(over) => return Some(format!("went over the budget of {} nodes", over.max_nodes)),
    };
    let ok = match (case.get("result"), case.get("results")) {
        (Some(Value::Array(expected)), _) => &got == expected,
        (_, Some(Value::Array(alternatives))) => {
            alternatives.iter().any(|alt| alt.as_array() == Some(&got))
        }
        _ => panic!("case without result: {case}"),
    };
    (!ok).then(|| format!("selected {}", Value::Array(got)))
}

#[test]
fn rfc_9535_compliance_suite() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/jsonpath-cts/cts.json"
    ))
    .unwrap();
    let suite: Value = serde_json::from_str(&text).unwrap();
    let cases = suite["tests"].as_array().unwrap();
    let known: BTreeSet<&str> = KNOWN_FAILURES.iter().copied().collect();

    let mut passed = 0;
    let mut failed_known = Vec::new();
    let mut unexpected = Vec::new();
    for case in cases {
        let name = case["name"].as_str().unwrap();
        match run_case(case) {
            None if known.contains(name) => {
                unexpected.push(format!("{name}: listed as failing but passes now"))
            }
            None => passed += 1,
            Some(_) if known.contains(name) => failed_known.push(name),
            Some(why) => unexpected.push(format!("{name} ({}): {why}", case["selector"])),
        }
    }
    println!(
        "RFC 9535 compliance: {passed} of {} cases pass; {} known failures: {failed_known:?}",
        cases.len(),
        failed_known.len()
    );
    assert!(
        unexpected.is_empty(),
        "{} unexpected results:\n{}",
        unexpected.len(),
        unexpected.join("\n")
    );
}
