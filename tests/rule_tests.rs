//! `pap test`: the example project's rule tests pass; a wrong expectation fails with the
//! condition and the value seen; the formats (JSON, JUnit valid against Jenkins' schema with
//! xmllint, GitHub annotations); coverage; and a test run leaves the project's state alone.
//!
//! The JUnit check needs `xmllint` (Debian libxml2-utils; CI installs it and sets
//! `PAP_TEST_REQUIRE_XMLLINT=1`, which makes its absence a failure).

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// A copy of the example project with its rule tests, in a temp dir.
fn example_copy() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for part in ["triggers", "agents", "examples", "workspace", "rule-tests"] {
        common::copy_dir(&repo().join(part), &dir.path().join(part));
    }
    std::fs::copy(repo().join("pap.yaml"), dir.path().join("pap.yaml")).unwrap();
    dir
}

fn pap_test(root: &Path, args: &[&str]) -> Output {
    common::pap_at(root)
        .arg("test")
        .args(args)
        .output()
        .unwrap()
}

/// The example's stock-drop case with its second expectation turned wrong.
fn with_wrong_expectation(root: &Path) -> PathBuf {
    let text = std::fs::read_to_string(root.join("rule-tests/scenarios.yaml")).unwrap();
    let wrong = text.replace(
        "          stock-drop: duplicate",
        "          stock-drop: invoked",
    );
    assert_ne!(
        text, wrong,
        "the example's duplicate case is where this test expects it"
    );
    let path = root.join("rule-tests/wrong.yaml");
    std::fs::write(&path, wrong).unwrap();
    path
}

#[test]
fn the_example_projects_rule_tests_pass() {
    let dir = example_copy();
    let out = pap_test(dir.path(), &[]);
    let text = common::stdout(&out);
    assert_eq!(common::code(&out), 0, "{text}{}", common::stderr(&out));
    assert!(text.contains("9 passed, 0 failed"), "{text}");
    assert!(
        text.contains("  ok    an energy price spike in NO1 provokes the planner once an hour"),
        "{text}"
    );
    // The rule tests lint clean with the project.
    let lint = common::pap_at(dir.path()).arg("lint").output().unwrap();
    assert_eq!(common::code(&lint), 0, "{}", common::stdout(&lint));
    // Nothing was written to the project's state.
    assert!(!dir.path().join(".pap").exists());
}

#[test]
fn a_wrong_expectation_fails_with_the_condition_and_the_value_seen() {
    let dir = example_copy();
    let wrong = with_wrong_expectation(dir.path());
    let out = pap_test(dir.path(), &[wrong.to_str().unwrap()]);
    let text = common::stdout(&out);
    assert_eq!(common::code(&out), 1, "{text}");
    assert!(text.contains("8 passed, 1 failed"), "{text}");
    assert!(
        text.contains("  FAIL  the same event sent twice is decided once"),
        "{text}"
    );
    assert!(
        text.contains(
            "event 2 `evt_s7f01b` (at +5m), trigger `stock-drop`: expected invoked, saw duplicate (already decided at 2026-01-01T00:00:00.000Z"
        ),
        "{text}"
    );
    // The expectation's own line (the second of the case's two).
    let line = std::fs::read_to_string(&wrong)
        .unwrap()
        .lines()
        .collect::<Vec<_>>()
        .iter()
        .rposition(|l| *l == "          stock-drop: invoked")
        .unwrap()
        + 1;
    assert!(
        text.contains(&format!("--> rule-tests/wrong.yaml:{line}")),
        "{text}"
    );

    let json = pap_test(dir.path(), &[wrong.to_str().unwrap(), "--format", "json"]);
    let doc: Value = serde_json::from_str(&common::stdout(&json)).unwrap();
    assert_eq!(
        (doc["passed"].as_u64(), doc["failed"].as_u64()),
        (Some(8), Some(1))
    );
    let failed: Vec<&Value> = doc["cases"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["status"] == "failed")
        .collect();
    assert_eq!(failed.len(), 1);
    let f = &failed[0]["failures"][0];
    assert_eq!(
        (
            f["trigger"].as_str(),
            f["expected"].as_str(),
            f["line"].as_u64()
        ),
        (Some("stock-drop"), Some("invoked"), Some(line as u64))
    );
    assert!(f["saw"].as_str().unwrap().starts_with("duplicate"));

    let github = pap_test(dir.path(), &[wrong.to_str().unwrap(), "--format", "github"]);
    let text = common::stdout(&github);
    assert!(
        text.starts_with(&format!(
            "::error file=rule-tests/wrong.yaml,line={line},title=pap test%3A the same event sent twice is decided once::event 2"
        )),
        "{text}"
    );
    assert_eq!(common::code(&github), 1);
}

fn xmllint() -> Option<PathBuf> {
    common::required_tool(
        "xmllint",
        "PAP_TEST_REQUIRE_XMLLINT",
        "JUnit output is not validated",
    )
}

#[test]
fn junit_output_is_valid_against_jenkins_schema() {
    let Some(xmllint) = xmllint() else { return };
    let dir = example_copy();
    let wrong = with_wrong_expectation(dir.path());
    // A name with XML's special characters must not break the document.
    let text = std::fs::read_to_string(&wrong).unwrap().replace(
        "name: every new regulation",
        "name: <every> \"new\" & 'regulation'",
    );
    std::fs::write(&wrong, text).unwrap();
    let out = pap_test(dir.path(), &["--format", "junit"]);
    assert_eq!(common::code(&out), 1);
    let report = dir.path().join("report.xml");
    std::fs::write(&report, &out.stdout).unwrap();
    let schema = common::fixture("junit/junit-10.xsd");
    let check = Command::new(xmllint)
        .arg("--noout")
        .arg("--schema")
        .arg(&schema)
        .arg(&report)
        .output()
        .unwrap();
    assert!(
        check.status.success(),
        "{}\n{}",
        common::stderr(&check),
        common::stdout(&out)
    );
    let xml = common::stdout(&out);
    assert!(xml.contains("tests=\"18\" failures=\"1\""), "{xml}");
    assert!(
        xml.contains(
            "name=\"&lt;every&gt; &quot;new&quot; &amp; &apos;regulation&apos; gets its own memo\""
        ),
        "{xml}"
    );
    assert!(xml.contains("<failure type=\"expectation\""), "{xml}");
}

#[test]
fn coverage_lists_triggers_and_conditions_no_case_exercised() {
    let dir = example_copy();
    // Only the stock-drop case.
    std::fs::write(
        dir.path().join("rule-tests/scenarios.yaml"),
        "cases:\n  - name: a drop\n    events:\n      - file: ../examples/events/stock-drop.json\n        expect: {stock-drop: invoked}\n",
    )
    .unwrap();
    let out = pap_test(dir.path(), &["--coverage", "--format", "json"]);
    assert_eq!(common::code(&out), 0, "{}", common::stderr(&out));
    let doc: Value = serde_json::from_str(&common::stdout(&out)).unwrap();
    let untested: Vec<&str> = doc["coverage"]["triggers_not_decided"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["trigger"].as_str().unwrap())
        .collect();
    assert!(untested.contains(&"energy-price-spike"), "{untested:?}");
    assert!(!untested.contains(&"stock-drop"), "{untested:?}");
    let conditions = doc["coverage"]["conditions"].as_array().unwrap();
    assert!(
        conditions.iter().any(|c| c["trigger"] == "stock-drop"
            && c["index"] == 1
            && c["never"] == "failed"
            && c["condition"] == "$.data.drop_percent gte 5.0"),
        "{conditions:?}"
    );
    let human = pap_test(dir.path(), &["--coverage"]);
    assert!(
        common::stdout(&human)
            .contains("trigger energy-price-spike (triggers/energy-price-spike.yaml): no case's event was decided by it"),
        "{}",
        common::stdout(&human)
    );
}

/// The boundary, as a rule test: with 3 an hour and 7 a day, the 4th event in an hour
/// is throttled by the hour, and once the day holds 7 the next is throttled by the day.
#[test]
fn several_windows_on_the_simulated_clock() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    for d in ["triggers", "agents", "rule-tests"] {
        std::fs::create_dir_all(root.join(d)).unwrap();
    }
    std::fs::write(
        root.join("agents/fix.yaml"),
        "pap_version: \"0.2\"\nagent:\n  id: fix\n  risk_level: low\n  model:\n    provider: command\n    command: [\"true\"]\n",
    )
    .unwrap();
    std::fs::write(
        root.join("triggers/restart.yaml"),
        "pap_version: \"0.2\"\ntrigger:\n  id: restart\n  match:\n    type: host.disk.full\n  throttle:\n    - {max_per_window: 3, window_seconds: 3600, window_key: $.data.host}\n    - {max_per_window: 7, window_seconds: 86400, window_key: $.data.host}\n  agent: fix\n",
    )
    .unwrap();
    let mut steps = String::new();
    let mut step = |at: &str, outcome: &str| {
        steps.push_str(&format!(
            "      - at: {at}\n        event: {{type: host.disk.full, data: {{host: db1}}}}\n        expect: {{restart: {outcome}}}\n"
        ));
    };
    for at in ["+0s", "+1m", "+2m"] {
        step(at, "invoked");
    }
    step(
        "+3m",
        "{outcome: throttled, reason: \"3 of 3 invocations used in the last 1h\"}",
    );
    for at in ["+60m", "+61m", "+62m", "+120m"] {
        step(at, "invoked");
    }
    step(
        "+130m",
        "{outcome: throttled, reason: \"7 of 7 invocations used in the last 1d\"}",
    );
    step("+24h", "invoked");
    std::fs::write(
        root.join("rule-tests/windows.yaml"),
        format!("cases:\n  - name: 3 an hour and 7 a day\n    start: 2026-03-11T06:00:00Z\n    events:\n{steps}"),
    )
    .unwrap();
    let out = pap_test(root, &[]);
    assert_eq!(
        common::code(&out),
        0,
        "{}{}",
        common::stdout(&out),
        common::stderr(&out)
    );
    assert!(common::stdout(&out).contains("1 passed, 0 failed"));
}

#[test]
fn a_broken_test_file_runs_no_case_and_no_tests_is_a_failure() {
    let dir = example_copy();
    std::fs::write(
        dir.path().join("rule-tests/broken.yaml"),
        "cases:\n  - name: typo\n    events:\n      - event: {type: stock.price.dropped_significantly}\n        expect: {stock-drp: invoked}\n",
    )
    .unwrap();
    let out = pap_test(dir.path(), &[]);
    assert_eq!(common::code(&out), 1);
    let err = common::stderr(&out);
    assert!(
        err.contains("error[unknown-trigger]") && err.contains("did you mean `stock-drop`?"),
        "{err}"
    );
    assert!(err.contains("no case ran"), "{err}");
    assert!(!common::stdout(&out).contains("passed"));

    std::fs::remove_dir_all(dir.path().join("rule-tests")).unwrap();
    let none = pap_test(dir.path(), &[]);
    assert_eq!(common::code(&none), 1);
    assert!(
        common::stderr(&none).contains("no rule tests in rule-tests/"),
        "{}",
        common::stderr(&none)
    );
    let missing = pap_test(dir.path(), &["nowhere.yaml"]);
    assert_eq!(common::code(&missing), 2);
}

/// When no case can run (a mistake in a test file), the machine formats still say why: a
/// CI server that publishes the JUnit report shows an error instead of finding no report.
#[test]
fn a_run_that_cannot_start_still_reports_to_ci() {
    let dir = example_copy();
    std::fs::write(
        dir.path().join("rule-tests/dup.yaml"),
        "cases:\n  - name: same\n    events: [{event: {type: a.b.crossed}}]\n  - name: same\n    events: [{event: {type: a.b.crossed}}]\n  - name: same\n    events: [{event: {type: a.b.crossed}}]\n",
    )
    .unwrap();
    let human = pap_test(dir.path(), &[]);
    assert_eq!(common::code(&human), 1);
    let err = common::stderr(&human);
    assert!(
        err.contains("two cases are named `same` (cases 1 and 3)"),
        "{err}"
    );

    let json = pap_test(dir.path(), &["--format", "json"]);
    let doc: Value = serde_json::from_str(&common::stdout(&json)).unwrap();
    assert_eq!(doc["cases"], serde_json::json!([]));
    assert_eq!(doc["errors"][0]["code"], "duplicate-id");
    assert_eq!(doc["errors"].as_array().unwrap().len(), 2);

    let junit = pap_test(dir.path(), &["--format", "junit"]);
    let xml = common::stdout(&junit);
    assert!(
        xml.contains("errors=\"1\"") && xml.contains("<error type=\"load\""),
        "{xml}"
    );
    if let Some(xmllint) = xmllint() {
        let report = dir.path().join("errored.xml");
        std::fs::write(&report, &junit.stdout).unwrap();
        let check = Command::new(xmllint)
            .arg("--noout")
            .arg("--schema")
            .arg(common::fixture("junit/junit-10.xsd"))
            .arg(&report)
            .output()
            .unwrap();
        assert!(check.status.success(), "{}\n{xml}", common::stderr(&check));
    }

    // A file with no case is a mistake too (`cases` needs one), and so is no file at all.
    std::fs::write(dir.path().join("rule-tests/dup.yaml"), "cases: []\n").unwrap();
    let file = dir.path().join("rule-tests/dup.yaml");
    let empty = pap_test(dir.path(), &[file.to_str().unwrap()]);
    assert_eq!(common::code(&empty), 1);
    assert!(
        common::stderr(&empty).contains("`cases` needs at least 1 item, found 0"),
        "{}",
        common::stderr(&empty)
    );
}

/// A case with `run: true` runs the agents its events invoke (the example's SLA case runs
/// the offline triage agent), and a wrong `result` fails with the result seen.
#[test]
fn a_case_that_runs_its_agents_checks_how_the_run_ended() {
    let dir = example_copy();
    let text = std::fs::read_to_string(dir.path().join("rule-tests/scenarios.yaml")).unwrap();
    let wrong = text.replace(
        "{outcome: invoked, result: succeeded}",
        "{outcome: invoked, result: failed}",
    );
    assert_ne!(text, wrong, "the example's SLA case runs its agent");
    let file = dir.path().join("rule-tests/scenarios.yaml");
    std::fs::write(&file, wrong).unwrap();
    let out = pap_test(dir.path(), &[]);
    let text = common::stdout(&out);
    assert_eq!(common::code(&out), 1, "{text}");
    assert!(
        text.contains(
            "trigger `server-latency-sla-breach`: expected invoked, and its run failed, saw invoked, and its run succeeded"
        ),
        "{text}"
    );
}

/// A rule test whose steps are webhook bodies: each body is mapped by its adapter
/// as serve maps a post of it, every event it makes is decided at the step's time and held to
/// the step's `expect`, and a failure names the event.
#[test]
fn webhook_bodies_are_decided_per_event_as_serve_maps_them() {
    let dir = example_copy();
    let root = dir.path();
    std::fs::write(
        root.join("triggers/t-am-high.yaml"),
        "pap_version: \"0.2\"\ntrigger:\n  id: t-am-high\n  match:\n    type: alertmanager.alert.firing\n  filter:\n    - path: $.data.labels.severity\n      operator: eq\n      value: high\n  agent: latency-triage\n",
    )
    .unwrap();
    // The captured Alertmanager body, with a second alert of the same group.
    let text =
        std::fs::read_to_string(common::fixture("webhooks/alertmanager-v4-captured.json")).unwrap();
    let mut body: serde_json::Value = serde_json::from_str(&text).unwrap();
    let mut second = body["alerts"][0].clone();
    second["fingerprint"] = serde_json::json!("0123456789abcdef");
    body["alerts"].as_array_mut().unwrap().push(second);
    std::fs::create_dir_all(root.join("rule-tests/bodies")).unwrap();
    std::fs::write(root.join("rule-tests/bodies/am.json"), body.to_string()).unwrap();
    let cases = |repeat: &str| {
        format!(
            "cases:\n  - name: a group decided per alert, its repeat a duplicate\n    start: 2026-03-11T06:00:00Z\n    events:\n      - webhook: {{adapter: alertmanager, file: bodies/am.json}}\n        expect: {{t-am-high: invoked}}\n      - at: +2m\n        webhook: {{adapter: alertmanager, file: bodies/am.json}}\n        expect: {{t-am-high: {repeat}}}\n      - at: +3m\n        webhook:\n          adapter: alertmanager\n          body: {{status: firing, alerts: [{{status: firing, fingerprint: ff, labels: {{alertname: Low, severity: low}}, annotations: {{}}, startsAt: \"2026-03-11T06:03:00Z\", endsAt: \"0001-01-01T00:00:00Z\"}}]}}\n        expect: {{t-am-high: filtered}}\n"
        )
    };
    let file = root.join("rule-tests/webhooks.yaml");
    std::fs::write(&file, cases("duplicate")).unwrap();
    let out = pap_test(root, &[file.to_str().unwrap()]);
    let said = format!("{}{}", common::stdout(&out), common::stderr(&out));
    assert_eq!(common::code(&out), 0, "{said}");
    assert!(said.contains("1 passed, 0 failed"), "{said}");

    // A wrong expectation fails once per event of the body, each named.
    std::fs::write(&file, cases("invoked")).unwrap();
    let out = pap_test(root, &[file.to_str().unwrap()]);
    let said = common::stdout(&out);
    assert_eq!(common::code(&out), 1, "{said}");
    assert!(
        said.contains("am-948c667b1fc76492-firing-2022-10-04T13:32:56.014Z"),
        "{said}"
    );
    assert!(
        said.contains("am-0123456789abcdef-firing-2022-10-04T13:32:56.014Z"),
        "{said}"
    );

    // An adapter the project does not have is a mistake in the file, named with its line, by
    // pap test and by pap lint alike.
    std::fs::write(
        &file,
        cases("duplicate").replace(
            "{adapter: alertmanager, file: bodies/am.json}\n        expect: {t-am-high: invoked}",
            "{adapter: x-unknown-0, file: bodies/am.json}\n        expect: {t-am-high: invoked}",
        ),
    )
    .unwrap();
    for args in [&["test", file.to_str().unwrap()][..], &["lint"][..]] {
        let out = common::pap_at(root).args(args).output().unwrap();
        let said = format!("{}{}", common::stdout(&out), common::stderr(&out));
        assert_eq!(common::code(&out), 1, "{args:?}: {said}");
        assert!(
            said.contains("no adapter `x-unknown-0`"),
            "{args:?}: {said}"
        );
        assert!(said.contains("webhooks.yaml:5"), "{args:?}: {said}");
    }
}
