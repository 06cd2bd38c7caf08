//! Monitoring pap itself: the Prometheus alert rules in `contrib/prometheus` pass
//! `promtool check rules` and their unit tests (`promtool test rules`, a case per alert); the
//! Grafana dashboard in `contrib/grafana` is valid JSON whose every query promtool parses; and
//! every metric the rules and the dashboard name is in the first scrape of a fresh serve (no
//! Grafana can be installed here, so no dashboard screenshot).

use crate::common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn contrib(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("contrib")
        .join(path)
}

fn promtool() -> Option<PathBuf> {
    common::required_tool(
        "promtool",
        "PAP_TEST_REQUIRE_PROMTOOL",
        "pap's alert rules and dashboard queries are not checked",
    )
}

fn run_promtool(promtool: &Path, args: &[&str], dir: &Path) {
    let out = Command::new(promtool)
        .args(args)
        .current_dir(dir)
        .output()
        .expect("run promtool");
    assert!(
        out.status.success(),
        "promtool {args:?}: {}{}",
        common::stdout(&out),
        common::stderr(&out)
    );
}

/// The dashboard's panels' queries.
fn dashboard_queries() -> Vec<String> {
    let text = std::fs::read_to_string(contrib("grafana/pap-dashboard.json")).unwrap();
    let dashboard: Value = serde_json::from_str(&text).expect("the dashboard is JSON");
    let panels = dashboard["panels"].as_array().expect("panels");
    assert!(!panels.is_empty());
    panels
        .iter()
        .flat_map(|p| {
            assert!(p["title"].is_string() && p["gridPos"].is_object(), "{p}");
            p["targets"].as_array().expect("targets").clone()
        })
        .map(|t| t["expr"].as_str().expect("a query").to_owned())
        .collect()
}

/// The metric names a query or rule names (`pap_…`, `process_…`).
fn metric_names(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let bytes: Vec<char> = text.chars().collect();
    let mut i = 0;
    while i < bytes.len() {
        let rest: String = bytes[i..].iter().collect();
        let starts = (rest.starts_with("pap_") || rest.starts_with("process_"))
            && (i == 0 || !(bytes[i - 1].is_alphanumeric() || bytes[i - 1] == '_'));
        if starts {
            let name: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            i += name.len();
            names.insert(name);
        } else {
            i += 1;
        }
    }
    names
}

#[test]
fn the_alert_rules_pass_promtool_and_their_unit_tests() {
    let Some(promtool) = promtool() else {
        return;
    };
    let dir = contrib("prometheus");
    run_promtool(&promtool, &["check", "rules", "pap-alerts.yml"], &dir);
    run_promtool(&promtool, &["test", "rules", "pap-alerts.test.yml"], &dir);
    // Every alert has its case.
    let rules = std::fs::read_to_string(dir.join("pap-alerts.yml")).unwrap();
    let tests = std::fs::read_to_string(dir.join("pap-alerts.test.yml")).unwrap();
    for line in rules
        .lines()
        .filter_map(|l| l.trim().strip_prefix("- alert: "))
    {
        assert!(
            tests.contains(&format!("alertname: {line}")),
            "no unit test for {line}"
        );
    }
}

#[test]
fn every_dashboard_query_parses_and_every_metric_is_in_the_first_scrape() {
    let Some(promtool) = promtool() else {
        return;
    };
    let queries = dashboard_queries();
    // promtool parses a query offline as a recording rule's expression.
    let dir = tempfile::tempdir().unwrap();
    let mut rules = String::from("groups:\n  - name: dashboard\n    rules:\n");
    for (i, q) in queries.iter().enumerate() {
        rules.push_str(&format!(
            "      - record: pap_dashboard_panel_{i}\n        expr: {}\n",
            serde_json::to_string(q).unwrap()
        ));
    }
    std::fs::write(dir.path().join("queries.yml"), rules).unwrap();
    run_promtool(&promtool, &["check", "rules", "queries.yml"], dir.path());

    // With a sink and an LLM agent: a family labelled by sink has a series per configured
    // sink, and the token and cost families one per LLM agent (none without).
    let sink = "notifications:\n  sinks:\n    - name: archive\n      type: ndjson\n      path: archive.ndjson\n";
    let llm = "pap_version: \"0.2\"\nagent:\n  id: writer\n  risk_level: low\n  model:\n    provider: anthropic\n    model_id: test-model\n";
    let Some((_p, _serve, url)) =
        crate::http_clients::scraped_serve_with("[metrics]", sink, &[("agents/writer.yaml", llm)])
    else {
        return;
    };
    let samples = crate::http_clients::python(
        "scrape_metrics.py",
        &[
            &format!("{url}/metrics"),
            crate::http_clients::METRICS_TOKEN,
        ],
    );
    let scraped: BTreeSet<&str> = samples.iter().filter_map(|s| s["name"].as_str()).collect();
    let alerts = std::fs::read_to_string(contrib("prometheus/pap-alerts.yml")).unwrap();
    let named = queries
        .iter()
        .flat_map(|q| metric_names(q))
        .chain(metric_names(&alerts));
    for name in named {
        assert!(
            scraped.contains(name.as_str()),
            "{name} is not in a fresh serve's scrape: {scraped:?}"
        );
    }
}

/// `/metrics` speaks what the scraper asks for: the Prometheus text format 0.0.4 by default,
/// which `promtool check metrics` and the Python client's text parser read with every family
/// typed (a counter as `pap_events_received_total`, the build as a gauge), and OpenMetrics
/// when asked for, as Prometheus asks, which the OpenMetrics parser reads (`info` and all).
#[test]
fn metrics_answer_the_text_format_unless_openmetrics_is_asked_for() {
    let Some(promtool) = promtool() else {
        return;
    };
    let Some((_p, _serve, url)) = crate::http_clients::scraped_serve("[metrics, ingest]", "")
    else {
        return;
    };
    let token = crate::http_clients::METRICS_TOKEN;
    let metrics = format!("{url}/metrics");
    let auth = format!("Authorization: Bearer {token}");
    let r = common::http::post(
        &format!("{url}/v1/events"),
        "application/json",
        common::dispatch::ev("n1", "test.quick.happened", serde_json::json!({}))
            .to_string()
            .as_bytes(),
        &["-H", &auth],
    );
    assert_eq!(r.status, 200, "{r:?}");

    // curl asks for nothing in particular: the text format, which promtool checks.
    let plain = common::http::curl(&["-H", &auth, &metrics], None);
    assert_eq!(
        plain.header("content-type"),
        Some("text/plain; version=0.0.4; charset=utf-8")
    );
    assert!(!plain.body.contains("# EOF"), "{}", plain.body);
    let mut check = Command::new(&promtool)
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write as _;
    check
        .stdin
        .take()
        .unwrap()
        .write_all(plain.body.as_bytes())
        .unwrap();
    let out = check.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "promtool check metrics: {}{}",
        common::stdout(&out),
        common::stderr(&out)
    );

    let family_type = |samples: &[serde_json::Value], name: &str| {
        samples
            .iter()
            .find(|s| s["name"] == name)
            .map(|s| (s["family"].clone(), s["type"].clone()))
    };
    let text = crate::http_clients::python("scrape_metrics.py", &[&metrics, token, "--text"]);
    assert_eq!(
        text[0]["content_type"],
        "text/plain; version=0.0.4; charset=utf-8"
    );
    assert_eq!(
        family_type(&text, "pap_events_received_total"),
        Some(("pap_events_received".into(), "counter".into()))
    );
    assert_eq!(
        family_type(&text, "pap_build_info"),
        Some(("pap_build_info".into(), "gauge".into()))
    );
    assert!(
        !text.iter().any(|s| s["type"] == "unknown"),
        "untyped families in the text format: {text:?}"
    );

    let open = crate::http_clients::python("scrape_metrics.py", &[&metrics, token]);
    assert_eq!(
        open[0]["content_type"],
        "application/openmetrics-text; version=1.0.0; charset=utf-8"
    );
    assert_eq!(
        family_type(&open, "pap_events_received_total"),
        Some(("pap_events_received".into(), "counter".into()))
    );
    assert_eq!(
        family_type(&open, "pap_build_info"),
        Some(("pap_build".into(), "info".into()))
    );
}
