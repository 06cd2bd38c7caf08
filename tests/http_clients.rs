//! The listener against clients nobody on this project wrote: the official CloudEvents
//! Python SDK (structured, binary and batched), the Prometheus project's own text parser on
//! `/metrics`, and a real Prometheus Alertmanager whose webhook receiver points at pap.
//!
//! `.ci/run` installs them (PAP_TEST_REQUIRE_HTTP_CLIENTS); elsewhere a missing one skips
//! its test with a note.

use crate::common;

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use common::dispatch::lines;
use common::http::{curl, curl_available, free_port, high_severity_trigger, project, serve};
use common::serve::{Project, wait_until};
use serde_json::Value;

/// Whether python3 imports `modules`; a skip (or, in CI, a failure) when it does not.
pub(crate) fn python_has(modules: &str, what: &str) -> bool {
    let ok = Command::new("python3")
        .args(["-c", &format!("import {modules}")])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        assert!(
            std::env::var_os("PAP_TEST_REQUIRE_HTTP_CLIENTS").is_none(),
            "python3 with {modules} is required (PAP_TEST_REQUIRE_HTTP_CLIENTS is set)"
        );
        common::skip_note(&format!("python3 cannot import {modules}: {what}"));
    }
    ok
}

fn client(name: &str) -> PathBuf {
    common::fixture(&format!("clients/{name}"))
}

pub(crate) fn python(script: &str, args: &[&str]) -> Vec<Value> {
    let out = Command::new("python3")
        .arg(client(script))
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{script}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    lines(&String::from_utf8_lossy(&out.stdout))
}

#[test]
fn the_cloudevents_python_sdk_posts_structured_binary_and_batched_events() {
    if !python_has(
        "cloudevents.core.bindings.http",
        "the CloudEvents SDK's three modes go unchecked",
    ) {
        return;
    }
    let p = project("");
    let (_serve, url) = serve(&p, &[], &[]);
    let replies = python(
        "cloudevents_client.py",
        &[&format!("{url}/v1/events"), "sdk"],
    );
    let modes: Vec<(&str, i64)> = replies
        .iter()
        .map(|r| (r["mode"].as_str().unwrap(), r["status"].as_i64().unwrap()))
        .collect();
    assert_eq!(
        modes,
        [("structured", 200), ("binary", 200), ("batch", 200)],
        "{replies:?}"
    );
    for n in 1..=4 {
        let id = format!("sdk-{n}");
        wait_until(&format!("{id} ran"), || {
            p.invocations_of(&id)
                .iter()
                .any(|i| i["status"] == "succeeded")
        });
    }
    // The binary event's extension attribute came through its percent-encoded header.
    let inv = &p.invocations_of("sdk-2")[0];
    let shown = p
        .cmd()
        .args(["invocations", "show", inv["id"].as_str().unwrap(), "--json"])
        .output()
        .unwrap();
    let shown: Value = serde_json::from_slice(&shown.stdout).unwrap();
    assert_eq!(shown["event"]["region"], "eu west", "{shown}");
    assert_eq!(shown["event"]["data"]["n"], 2);
}

/// One sample from the parsed metrics.
fn sample(samples: &[Value], name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    samples
        .iter()
        .find(|s| {
            s["name"] == name
                && labels
                    .iter()
                    .all(|(k, v)| s["labels"][*k].as_str() == Some(*v))
        })
        .and_then(|s| s["value"].as_f64())
}

pub(crate) const METRICS_TOKEN: &str = "metrics-0123456789abcdef";

/// A serve whose principal `prom` (token [`METRICS_TOKEN`]) has `scopes`, with `extra` in
/// pap.yaml; `None` (with a note) without curl or Prometheus' Python parser.
pub(crate) fn scraped_serve(
    scopes: &str,
    extra: &str,
) -> Option<(Project, common::serve::Serve, String)> {
    scraped_serve_with(scopes, extra, &[])
}

/// [`scraped_serve`] with `files` (path, text) added to the project before serve starts.
pub(crate) fn scraped_serve_with(
    scopes: &str,
    extra: &str,
    files: &[(&str, &str)],
) -> Option<(Project, common::serve::Serve, String)> {
    if !curl_available()
        || !python_has(
            "prometheus_client.openmetrics.parser",
            "/metrics is not read by Prometheus' own parser",
        )
    {
        return None;
    }
    let p = project(&format!(
        "listen:\n  auth:\n    principals:\n      - name: prom\n        token: ${{PROM_TOKEN}}\n        scopes: {scopes}\n{extra}"
    ));
    for (path, text) in files {
        std::fs::write(p.root().join(path), text).unwrap();
    }
    let (serve, url) = serve(&p, &[], &[("PROM_TOKEN", METRICS_TOKEN)]);
    Some((p, serve, url))
}

#[test]
fn metrics_are_read_by_the_prometheus_parser_with_their_names_and_labels() {
    let Some((p, _serve, url)) = scraped_serve("[metrics, ingest]", "") else {
        return;
    };
    let token = METRICS_TOKEN;
    let auth = format!("Authorization: Bearer {token}");
    let events = format!("{url}/v1/events");
    let body = format!(
        "{}\n{}\nnot json\n",
        common::dispatch::ev("m1", "test.quick.happened", serde_json::json!({})),
        common::dispatch::ev("m2", "test.gated.happened", serde_json::json!({}))
    );
    let r = common::http::post(
        &events,
        "application/x-ndjson",
        body.as_bytes(),
        &["-H", &auth],
    );
    assert_eq!(r.status, 200, "{r:?}");
    wait_until("m1 ran", || {
        p.invocations_of("m1")
            .iter()
            .any(|i| i["status"] == "succeeded")
    });
    p.drop_events(
        "spooled.ndjson",
        &[common::dispatch::ev(
            "s1",
            "test.quick.happened",
            serde_json::json!({}),
        )],
    );
    wait_until("s1 decided", || !p.invocations_of("s1").is_empty());

    let unauthenticated = curl(&[&format!("{url}/metrics")], None);
    assert_eq!(unauthenticated.status, 401);
    let samples = python("scrape_metrics.py", &[&format!("{url}/metrics"), token]);
    let get = |name: &str, labels: &[(&str, &str)]| sample(&samples, name, labels);
    assert_eq!(
        get(
            "pap_events_received_total",
            &[("route", "/v1/events"), ("valid", "true")]
        ),
        Some(2.0)
    );
    assert_eq!(
        get(
            "pap_events_received_total",
            &[("route", "/v1/events"), ("valid", "false")]
        ),
        Some(1.0)
    );
    assert_eq!(
        get(
            "pap_events_received_total",
            &[("route", "spool"), ("valid", "true")]
        ),
        Some(1.0)
    );
    assert_eq!(
        get(
            "pap_decisions_total",
            &[("trigger", "t-quick"), ("outcome", "invoked")]
        ),
        Some(2.0)
    );
    assert_eq!(
        get(
            "pap_decisions_total",
            &[("trigger", "t-gated"), ("outcome", "awaiting_approval")]
        ),
        Some(1.0)
    );
    assert!(
        get(
            "pap_invocations_finished_total",
            &[("agent", "quick"), ("result", "succeeded")]
        )
        .is_some_and(|n| n >= 1.0)
    );
    assert!(
        get(
            "pap_invocation_duration_seconds_count",
            &[("agent", "quick")]
        )
        .is_some_and(|n| n >= 1.0)
    );
    assert!(get("pap_commit_duration_seconds_count", &[]).is_some_and(|n| n >= 2.0));
    assert_eq!(get("pap_approvals_waiting", &[]), Some(1.0));
    assert_eq!(
        get("pap_queue_depth", &[("status", "awaiting_approval")]),
        Some(1.0)
    );
    assert!(get("pap_approval_oldest_age_seconds", &[]).is_some_and(|s| s >= 0.0));
    // The approval request, in the inbox: counted from the store's kept counts.
    assert!(
        get("pap_notifications", &[("status", "dispatched")]).is_some_and(|n| n >= 1.0),
        "{samples:?}"
    );
    // Every serve condition is in the scrape, 0 while it does not hold.
    for condition in ["spool", "reload_refused", "restart_needed"] {
        assert_eq!(
            get("pap_serve_condition", &[("condition", condition)]),
            Some(0.0),
            "{condition}"
        );
    }
}

#[test]
fn every_family_is_in_the_first_scrape_with_its_known_labels_at_zero_and_a_reload_is_told() {
    let sink = "notifications:\n  sinks:\n    - name: archive\n      type: ndjson\n      path: archive.ndjson\n";
    let Some((p, serve, url)) = scraped_serve("[metrics]", sink) else {
        return;
    };
    let token = METRICS_TOKEN;
    // Nothing happened yet: every family is there all the same.
    let samples = python("scrape_metrics.py", &[&format!("{url}/metrics"), token]);
    let get = |name: &str, labels: &[(&str, &str)]| sample(&samples, name, labels);
    assert_eq!(
        get("pap_build_info", &[("version", env!("CARGO_PKG_VERSION"))]),
        Some(1.0)
    );
    for status in ["awaiting_approval", "expired", "queued", "running"] {
        assert_eq!(
            get("pap_queue_depth", &[("status", status)]),
            Some(0.0),
            "{status}"
        );
    }
    for status in [
        "pending",
        "dispatched",
        "locked",
        "delivered",
        "escalated",
        "failed",
    ] {
        assert_eq!(
            get("pap_notifications", &[("status", status)]),
            Some(0.0),
            "{status}"
        );
    }
    assert_eq!(get("pap_sink_failures", &[("sink", "archive")]), Some(0.0));
    for route in [
        "/v1/events",
        "spool",
        "/v1/ingest/alertmanager",
        "/v1/ingest/grafana",
    ] {
        assert_eq!(
            get(
                "pap_events_received_total",
                &[("route", route), ("valid", "true")]
            ),
            Some(0.0),
            "{route}"
        );
    }
    for outcome in ["invoked", "throttled", "batched", "awaiting_approval"] {
        assert_eq!(
            get(
                "pap_decisions_total",
                &[("trigger", "t-quick"), ("outcome", outcome)]
            ),
            Some(0.0),
            "{outcome}"
        );
    }
    assert_eq!(
        get(
            "pap_invocations_finished_total",
            &[("agent", "quick"), ("result", "failed")]
        ),
        Some(0.0)
    );
    assert_eq!(
        get(
            "pap_schedule_fires_total",
            &[("schedule", "monthly-report")]
        ),
        Some(0.0)
    );
    assert_eq!(get("pap_purged_total", &[("kind", "claims")]), Some(0.0));
    // The process, the state and the last load.
    assert!(get("process_cpu_seconds_total", &[]).is_some_and(|s| s > 0.0));
    assert!(get("process_resident_memory_bytes", &[]).is_some_and(|b| b > 1e6));
    assert!(get("process_open_fds", &[]).is_some_and(|n| n >= 3.0));
    assert!(get("process_start_time_seconds", &[]).is_some_and(|t| t > 1.7e9));
    assert!(get("pap_state_bytes", &[]).is_some_and(|b| b > 0.0));
    assert!(get("pap_state_filesystem_free_bytes", &[]).is_some_and(|b| b > 0.0));
    assert_eq!(get("pap_reload_success", &[]), Some(1.0));
    let loaded = get("pap_reload_last_timestamp_seconds", &[]).unwrap();
    assert!(loaded > 1.7e9, "{loaded}");

    // A reload of a broken manifest is refused, and the scrape says so.
    std::fs::write(
        p.root().join("triggers/t-broken.yaml"),
        "pap_version: \"0.2\"\ntrigger: {id: t-broken}\n",
    )
    .unwrap();
    serve.signal(nix::sys::signal::Signal::SIGHUP);
    wait_until("the refused reload in the scrape", || {
        let samples = python("scrape_metrics.py", &[&format!("{url}/metrics"), token]);
        sample(&samples, "pap_reload_success", &[]) == Some(0.0)
    });
}

pub(crate) struct Alertmanager {
    child: Child,
    pub(crate) url: String,
}

impl Drop for Alertmanager {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The Alertmanager program, when it, amtool and curl are all installed; else `None`, with a
/// note of what goes `unchecked` (a failure under PAP_TEST_REQUIRE_HTTP_CLIENTS).
pub(crate) fn alertmanager_and_amtool(unchecked: &str) -> Option<PathBuf> {
    let program = common::required_tool(
        "prometheus-alertmanager",
        "PAP_TEST_REQUIRE_HTTP_CLIENTS",
        unchecked,
    )?;
    common::required_tool(
        "amtool",
        "PAP_TEST_REQUIRE_HTTP_CLIENTS",
        "alerts cannot be pushed",
    )?;
    curl_available().then_some(program)
}

/// A real Alertmanager whose one receiver posts to `pap_url`/v1/ingest/alertmanager, with no
/// `group_wait`: a group's first alert goes out at once.
pub(crate) fn alertmanager(p: &Project, program: &std::path::Path, pap_url: &str) -> Alertmanager {
    alertmanager_waiting(p, program, pap_url, "0s")
}

/// As [`alertmanager`], waiting `group_wait` before a group's first notification, as deployed
/// Alertmanagers do (30 s by default) so that a storm goes out as one group.
pub(crate) fn alertmanager_waiting(
    p: &Project,
    program: &std::path::Path,
    pap_url: &str,
    group_wait: &str,
) -> Alertmanager {
    let dir = p.root().join("alertmanager");
    std::fs::create_dir_all(dir.join("data")).unwrap();
    let config = dir.join("alertmanager.yml");
    std::fs::write(
        &config,
        format!(
            "route:\n  receiver: pap\n  group_by: [alertname]\n  group_wait: {group_wait}\n  group_interval: 1s\n  repeat_interval: 2s\nreceivers:\n  - name: pap\n    webhook_configs:\n      - url: {pap_url}/v1/ingest/alertmanager\n        send_resolved: true\n"
        ),
    )
    .unwrap();
    let port = free_port();
    let log = std::fs::File::create(dir.join("alertmanager.log")).unwrap();
    let child = Command::new(program)
        .arg(format!("--config.file={}", config.display()))
        .arg(format!("--storage.path={}", dir.join("data").display()))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .arg("--cluster.listen-address=")
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("start alertmanager");
    let url = format!("http://127.0.0.1:{port}");
    let ready = format!("{url}/-/ready");
    wait_until("alertmanager to be ready", || {
        curl(&[ready.as_str()], None).status == 200
    });
    Alertmanager { child, url }
}

/// `amtool alert add alertname=PapHighLatency severity=high EXTRA…` against `am`.
pub(crate) fn amtool(am: &Alertmanager, extra: &[&str]) {
    let out = Command::new("amtool")
        .args(["alert", "add", "alertname=PapHighLatency", "severity=high"])
        .args(extra)
        .arg(format!("--alertmanager.url={}", am.url))
        .output()
        .expect("amtool runs");
    assert!(
        out.status.success(),
        "amtool: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn am_invocations(p: &Project, status: &str) -> Vec<Value> {
    p.invocations()
        .into_iter()
        .filter(|i| {
            let id = i["event_id"].as_str().unwrap_or("");
            id.starts_with("am-") && id.contains(&format!("-{status}-"))
        })
        .collect()
}

#[test]
fn a_real_alertmanager_alert_is_decided_once_its_resends_are_duplicates_and_its_resolution_is_new()
{
    let Some(program) = alertmanager_and_amtool(
        "the Alertmanager preset is not checked against a real Alertmanager",
    ) else {
        return;
    };
    let p = project("");
    high_severity_trigger(&p, "t-am-firing", "alertmanager.alert.firing");
    high_severity_trigger(&p, "t-am-resolved", "alertmanager.alert.resolved");
    let (serve, url) = serve(&p, &[], &[]);
    let am = alertmanager(&p, &program, &url);
    amtool(&am, &["--annotation=summary=p99 above 2s"]);

    wait_until("the firing alert's invocation", || {
        am_invocations(&p, "firing").len() == 1
    });
    // Alertmanager repeats the notification every repeat_interval (2 s): each re-send is a
    // duplicate of the same event, never a second run.
    wait_until("a re-send decided as a duplicate", || {
        serve.log_text().contains("duplicate")
    });
    assert_eq!(am_invocations(&p, "firing").len(), 1);
    let firing = &am_invocations(&p, "firing")[0];
    assert_eq!(firing["trigger"], "t-am-firing");

    // Ending the alert makes Alertmanager send it resolved: a new event.
    let now = jiff::Timestamp::now().to_string();
    amtool(&am, &[&format!("--end={now}")]);
    wait_until("the resolution's invocation", || {
        am_invocations(&p, "resolved").len() == 1
    });
    assert_eq!(
        am_invocations(&p, "resolved")[0]["trigger"],
        "t-am-resolved"
    );
    assert_eq!(am_invocations(&p, "firing").len(), 1);
}

/// Tokens and cost by agent and model: an LLM agent's series are at zero before it
/// runs, and count what the fake provider reported (80 of 100 input tokens from the cache)
/// priced at pap.yaml's prices once it has run.
#[test]
fn llm_tokens_and_cost_are_counted_by_agent_and_model() {
    use common::fake_llm::{FakeLlm, Scripted, anthropic_text};
    let mut reply = anthropic_text("done");
    reply["usage"] =
        serde_json::json!({"input_tokens": 20, "cache_read_input_tokens": 80, "output_tokens": 20});
    let fake = FakeLlm::start(vec![Scripted::ok(reply)]);
    if !curl_available()
        || !python_has(
            "prometheus_client.openmetrics.parser",
            "/metrics is not read by Prometheus' own parser",
        )
    {
        return;
    }
    let p = project(
        "listen:\n  auth:\n    principals:\n      - name: prom\n        token: ${PROM_TOKEN}\n        scopes: [metrics, ingest]\nprices:\n  anthropic:\n    test-model: {input: 3.0, output: 15.0, cached_input: 0.30}\n",
    );
    std::fs::write(
        p.root().join("agents/priced.yaml"),
        format!(
            "pap_version: \"0.2\"\nagent:\n  id: priced\n  risk_level: low\n  model:\n    provider: anthropic\n    model_id: test-model\n    base_url: \"{}\"\n",
            fake.url
        ),
    )
    .unwrap();
    std::fs::write(
        p.root().join("triggers/t-priced.yaml"),
        "pap_version: \"0.2\"\ntrigger:\n  id: t-priced\n  match:\n    type: test.priced.asked\n  agent: priced\n",
    )
    .unwrap();
    let (_serve, url) = serve(
        &p,
        &[],
        &[
            ("PROM_TOKEN", METRICS_TOKEN),
            ("ANTHROPIC_API_KEY", "sk-test"),
        ],
    );
    let scrape = || {
        python(
            "scrape_metrics.py",
            &[&format!("{url}/metrics"), METRICS_TOKEN],
        )
    };
    let labels =
        |kind: &'static str| [("agent", "priced"), ("model", "test-model"), ("kind", kind)];
    let cost_labels = [
        ("agent", "priced"),
        ("model", "test-model"),
        ("currency", "USD"),
    ];
    let samples = scrape();
    for kind in ["input", "cached_input", "output"] {
        assert_eq!(
            sample(&samples, "pap_llm_tokens_total", &labels(kind)),
            Some(0.0),
            "{kind}"
        );
    }
    assert_eq!(
        sample(&samples, "pap_llm_cost_total", &cost_labels),
        Some(0.0)
    );

    let r = common::http::post(
        &format!("{url}/v1/events"),
        "application/json",
        common::dispatch::ev("c1", "test.priced.asked", serde_json::json!({}))
            .to_string()
            .as_bytes(),
        &["-H", &format!("Authorization: Bearer {METRICS_TOKEN}")],
    );
    assert_eq!(r.status, 200, "{r:?}");
    wait_until("c1 ran", || {
        p.invocations_of("c1")
            .iter()
            .any(|i| i["status"] == "succeeded")
    });
    let samples = scrape();
    let got: Vec<Option<f64>> = ["input", "cached_input", "output"]
        .iter()
        .map(|k| sample(&samples, "pap_llm_tokens_total", &labels(k)))
        .collect();
    assert_eq!(got, [Some(100.0), Some(80.0), Some(20.0)]);
    // 20 × 3 + 80 × 0.30 + 20 × 15 = 384 millionths of a dollar.
    let cost = sample(&samples, "pap_llm_cost_total", &cost_labels).unwrap();
    assert!((cost - 0.000384).abs() < 1e-9, "{cost}");
}

/// Work made or ended apart from an event's own decision is counted too: a trailing
/// debounce's fire counts as its trigger's `invoked` decision, and what a `cancel_on` event
/// ended counts in `pap_cancellations_total` by what it was.
#[test]
fn fires_and_cancellations_are_counted() {
    let files = [
        (
            "triggers/t-quiet.yaml",
            "pap_version: \"0.2\"\ntrigger:\n  id: t-quiet\n  match:\n    type: test.quiet.happened\n  debounce:\n    seconds: 1\n    mode: trailing\n  agent: quick\n",
        ),
        (
            "triggers/t-ends.yaml",
            "pap_version: \"0.2\"\ntrigger:\n  id: t-ends\n  match:\n    type: test.ends.firing\n  cancel_on:\n    type: test.ends.resolved\n    match: $.data.key\n  agent: gated\n",
        ),
    ];
    let Some((p, _serve, url)) = scraped_serve_with("[metrics, ingest]", "", &files) else {
        return;
    };
    let auth = format!("Authorization: Bearer {METRICS_TOKEN}");
    let post = |id: &str, kind: &str| {
        let r = common::http::post(
            &format!("{url}/v1/events"),
            "application/json",
            common::dispatch::ev(id, kind, serde_json::json!({"key": "k1"}))
                .to_string()
                .as_bytes(),
            &["-H", &auth],
        );
        assert_eq!(r.status, 200, "{r:?}");
    };
    let scrape = || {
        python(
            "scrape_metrics.py",
            &[&format!("{url}/metrics"), METRICS_TOKEN],
        )
    };
    let decided = |samples: &[Value], trigger: &str, outcome: &str| {
        sample(
            samples,
            "pap_decisions_total",
            &[("trigger", trigger), ("outcome", outcome)],
        )
    };
    let cancelled = |samples: &[Value]| {
        sample(
            samples,
            "pap_cancellations_total",
            &[("trigger", "t-ends"), ("was", "awaiting_approval")],
        )
    };
    let first = scrape();
    assert_eq!(decided(&first, "t-quiet", "invoked"), Some(0.0));
    assert_eq!(cancelled(&first), Some(0.0));
    post("q1", "test.quiet.happened");
    post("q2", "test.quiet.happened");
    post("f1", "test.ends.firing");
    post("r1", "test.ends.resolved");
    wait_until("the debounce's fire", || {
        p.invocations().iter().any(|i| i["trigger"] == "t-quiet")
    });
    wait_until("the fire counted", || {
        decided(&scrape(), "t-quiet", "invoked") == Some(1.0)
    });
    let after = scrape();
    assert_eq!(decided(&after, "t-quiet", "debounced"), Some(2.0));
    assert_eq!(cancelled(&after), Some(1.0));
}
