//! OpenTelemetry traces through the real binary: serve exports OTLP over
//! HTTP/protobuf to a small receiver that decodes it with the official protobuf definitions
//! (`tests/fixtures/clients/otlp_receiver.py`, PyPI `opentelemetry-proto`). A CloudEvent posted
//! with a `traceparent` provokes an LLM agent (the fake provider) that calls a tool of a real
//! MCP server and emits a completion event: one trace, each span under the right parent, the
//! GenAI attributes, and none of the secrets the test seeds in any attribute. With traces off
//! no span is made at all.

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use crate::common;

use common::fake_llm::{FakeLlm, Scripted, anthropic_text, anthropic_tool_use};
use common::http::{curl, curl_available, post, project, serve};
use common::serve::{Project, wait_until};
use serde_json::{Value, json};

const OPS_TOKEN: &str = "ops-token-5f1c9e0a7b3d";
const PROVIDER_KEY: &str = "sk-ant-api03-traces-key-7d2e";
const PASSWORD: &str = "correct-horse-battery-staple-91";
const OTLP_SECRET: &str = "otlp-collector-secret-3a8b";
const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT_ID: &str = "00f067aa0ba902b7";

/// The receiver, killed when dropped; its spans are read from `spans`.
struct Receiver {
    child: Child,
    port: u16,
    spans: PathBuf,
}

impl Receiver {
    fn start(dir: &Path) -> Receiver {
        let spans = dir.join("spans.ndjson");
        let mut child = Command::new("python3")
            .arg(common::fixture("clients/otlp_receiver.py"))
            .arg(&spans)
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3 runs");
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port = line.trim().parse().expect("the receiver's port");
        Receiver { child, port, spans }
    }

    fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn spans(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.spans)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Whether the tools these tests need are here (a skip note, or a failure where CI requires
/// them, otherwise).
fn tools_here() -> Option<PathBuf> {
    let server = common::llm::everything_server()?;
    receiver_here().then_some(server)
}

/// curl, and python3 with the OTLP definitions.
fn receiver_here() -> bool {
    curl_available()
        && crate::http_clients::python_has(
            "opentelemetry.proto.collector.trace.v1.trace_service_pb2",
            "traces are not decoded with the official OTLP definitions",
        )
}

/// The serve fixture with agent `writer` (anthropic at `llm`, the `get-sum` tool of the real
/// MCP server, a completion event) provoked by `test.traced.asked`, a principal `ops`, and
/// `DB_PASSWORD` among the secrets.
fn traced_project(llm: &str, mcp: &Path, extra: &str) -> Project {
    let p = project(&format!(
        "{extra}secrets: [DB_PASSWORD]\nmcp_servers:\n  everything:\n    command: \"{}\"\nlisten:\n  auth:\n    principals:\n      - name: ops\n        token: ${{OPS_TOKEN}}\n        scopes: [ingest, read, metrics]\n",
        mcp.display()
    ));
    std::fs::write(
        p.root().join("agents/writer.yaml"),
        format!(
            "pap_version: \"0.2\"\nagent:\n  id: writer\n  risk_level: low\n  model:\n    provider: anthropic\n    model_id: test-model\n    base_url: \"{llm}\"\n    max_tokens: 500\n  tools:\n    - name: get-sum\n      source: mcp://everything\n      risk_override: read_only\n      impact: internal\n  on_complete:\n    emit_event: pap.agent.invocation.completed\n"
        ),
    )
    .unwrap();
    std::fs::write(
        p.root().join("triggers/t-writer.yaml"),
        "pap_version: \"0.2\"\ntrigger:\n  id: t-writer\n  match:\n    type: test.traced.asked\n  agent: writer\n",
    )
    .unwrap();
    p
}

/// `pap serve` exporting to `receiver` (batches every 100 ms), with the principal's token and
/// `env`; the serve and its URL.
fn serve_exporting(
    p: &Project,
    receiver: &Receiver,
    env: &[(&str, &str)],
) -> (common::serve::Serve, String) {
    let endpoint = receiver.endpoint();
    let mut all = vec![
        ("OPS_TOKEN", OPS_TOKEN),
        ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
        ("OTEL_BSP_SCHEDULE_DELAY", "100"),
    ];
    all.extend_from_slice(env);
    serve(p, &[], &all)
}

fn post_event(url: &str, id: &str, extra_headers: &[&str]) {
    let event = json!({
        "specversion": "1.0", "id": id, "type": "test.traced.asked", "source": "/tests/traces",
        "time": "2026-03-11T06:00:00Z",
        "traceparent": format!("00-{TRACE_ID}-{PARENT_ID}-01"),
        "tracestate": "vendor=opaque",
        "data": {"note": PASSWORD, "key": PROVIDER_KEY},
    });
    let auth = format!("Authorization: Bearer {OPS_TOKEN}");
    let mut headers = vec!["-H", &auth];
    headers.extend_from_slice(extra_headers);
    let r = post(
        &format!("{url}/v1/events"),
        "application/cloudevents+json",
        event.to_string().as_bytes(),
        &headers,
    );
    assert_eq!(r.status, 200, "{r:?}");
}

/// `pap invocations show --json` of the invocation `event_id` provoked.
fn shown(p: &Project, event_id: &str) -> Value {
    let inv = &p.invocations_of(event_id)[0];
    let out = p
        .cmd()
        .args(["invocations", "show", "--json", inv["id"].as_str().unwrap()])
        .output()
        .unwrap();
    serde_json::from_slice(&out.stdout).unwrap()
}

fn span<'a>(spans: &'a [Value], name: &str) -> &'a Value {
    spans
        .iter()
        .find(|s| s["name"] == name)
        .unwrap_or_else(|| panic!("no span {name}: {spans:#?}"))
}

#[test]
fn a_posted_cloudevent_with_a_traceparent_is_one_trace_down_to_the_tool_call_and_its_completion() {
    let Some(mcp) = tools_here() else {
        return;
    };
    // The provider's last answer echoes the key: it must reach no span.
    let fake = FakeLlm::start(vec![
        Scripted::ok(anthropic_tool_use(&[(
            "toolu_01",
            "get-sum",
            json!({"a": 2, "b": 5}),
        )])),
        Scripted::ok(anthropic_text(&format!("The sum is 7 ({PROVIDER_KEY})."))),
    ]);
    let p = traced_project(&fake.url, &mcp, "");
    let receiver = Receiver::start(p.root());
    let headers = format!("authorization=Bearer%20{OTLP_SECRET}");
    let (serve_process, url) = serve_exporting(
        &p,
        &receiver,
        &[
            ("ANTHROPIC_API_KEY", PROVIDER_KEY),
            ("DB_PASSWORD", PASSWORD),
            ("OTEL_EXPORTER_OTLP_HEADERS", &headers),
            ("OTEL_SERVICE_NAME", "pap-under-test"),
        ],
    );
    // The header's context differs from the event's own: the event's wins.
    post_event(
        &url,
        "c1",
        &[
            "-H",
            "traceparent: 00-11111111111111111111111111111111-2222222222222222-01",
        ],
    );
    wait_until("c1 ran", || {
        p.invocations_of("c1")
            .iter()
            .any(|i| i["status"] == "succeeded")
    });
    wait_until("the completion event's decision is exported", || {
        receiver
            .spans()
            .iter()
            .any(|s| s["name"] == "decide pap.agent.invocation.completed")
    });
    let spans = receiver.spans();

    // One trace: the sender's.
    for s in &spans {
        assert_eq!(s["trace_id"], TRACE_ID, "{s}");
        assert_eq!(s["path"], "/v1/traces");
        assert_eq!(s["content_type"], "application/x-protobuf");
        assert_eq!(s["resource"]["service.name"], "pap-under-test");
        assert_eq!(s["authorization"], format!("Bearer {OTLP_SECRET}").as_str());
    }
    let decide = span(&spans, "decide test.traced.asked");
    assert_eq!(
        decide["parent_span_id"], PARENT_ID,
        "the sender's span is the parent"
    );
    assert_eq!(decide["attributes"]["pap.event.id"], "c1");
    let trigger = span(&spans, "trigger t-writer");
    assert_eq!(trigger["parent_span_id"], decide["span_id"]);
    assert_eq!(trigger["attributes"]["pap.outcome"], "invoked");
    let stages: Vec<&str> = trigger["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert!(
        stages.contains(&"idempotency") && stages.contains(&"risk"),
        "{stages:?}"
    );
    let attempt = span(&spans, "invoke_agent writer");
    assert_eq!(attempt["parent_span_id"], trigger["span_id"]);
    assert_eq!(
        attempt["attributes"]["gen_ai.operation.name"],
        "invoke_agent"
    );
    assert_eq!(attempt["attributes"]["pap.result"], "succeeded");
    let chats: Vec<&Value> = spans
        .iter()
        .filter(|s| s["name"] == "chat test-model")
        .collect();
    assert_eq!(chats.len(), 2, "{spans:#?}");
    for chat in &chats {
        assert_eq!(chat["parent_span_id"], attempt["span_id"]);
        assert_eq!(chat["kind"], 3, "a client span");
        let a = &chat["attributes"];
        assert_eq!(a["gen_ai.operation.name"], "chat");
        assert_eq!(a["gen_ai.provider.name"], "anthropic");
        assert_eq!(a["gen_ai.request.model"], "test-model");
        assert_eq!(a["gen_ai.request.max_tokens"], 500);
    }
    let usage: Vec<(i64, i64, &str)> = chats
        .iter()
        .map(|c| {
            let a = &c["attributes"];
            (
                a["gen_ai.usage.input_tokens"].as_i64().unwrap(),
                a["gen_ai.usage.output_tokens"].as_i64().unwrap(),
                a["gen_ai.response.finish_reasons"][0].as_str().unwrap(),
            )
        })
        .collect();
    assert!(usage.contains(&(50, 10, "tool_use")), "{usage:?}");
    assert!(usage.contains(&(100, 20, "end_turn")), "{usage:?}");
    let tool = span(&spans, "tools/call get-sum");
    assert_eq!(tool["parent_span_id"], attempt["span_id"]);
    assert_eq!(tool["attributes"]["mcp.method.name"], "tools/call");
    assert_eq!(tool["attributes"]["gen_ai.tool.name"], "get-sum");
    // The cascade is one trace: the completion event's decision is under the attempt.
    let completed = span(&spans, "decide pap.agent.invocation.completed");
    assert_eq!(completed["parent_span_id"], attempt["span_id"]);
    // The invocation records its attempt's context, and the emitted event carries it.
    let shown = shown(&p, "c1");
    assert_eq!(shown["history"][0]["trace"]["span_id"], attempt["span_id"]);
    assert_eq!(shown["history"][0]["trace"]["trace_id"], TRACE_ID);

    // No secret in any attribute, event or status of any span.
    let text = serde_json::to_string(
        &spans
            .iter()
            .map(|s| {
                json!([
                    s["attributes"],
                    s["events"],
                    s["status"],
                    s["resource"],
                    s["name"]
                ])
            })
            .collect::<Vec<_>>(),
    )
    .unwrap();
    for secret in [OPS_TOKEN, PROVIDER_KEY, PASSWORD, OTLP_SECRET] {
        assert!(!text.contains(secret), "{secret} in a span");
    }
    // A provider is a third party: no trace context unless `traces.to_providers`.
    assert!(
        fake.requests()
            .iter()
            .all(|r| !r.headers.contains_key("traceparent"))
    );
    // The export's credentials are never logged.
    let log = serve_process.log_text();
    assert!(log.contains("traces: exporting"), "{log}");
    assert!(!log.contains(OTLP_SECRET), "{log}");
}

#[test]
fn with_traces_off_no_span_is_made() {
    let Some(mcp) = tools_here() else {
        return;
    };
    let fake = FakeLlm::start(vec![Scripted::ok(anthropic_text("done"))]);
    let p = traced_project(&fake.url, &mcp, "");
    let receiver = Receiver::start(p.root());
    // An endpoint, but the SDK disabled the standard way: nothing is installed.
    let (serve_process, url) = serve_exporting(
        &p,
        &receiver,
        &[
            ("ANTHROPIC_API_KEY", PROVIDER_KEY),
            ("OTEL_SDK_DISABLED", "true"),
        ],
    );
    post_event(&url, "off1", &[]);
    wait_until("off1 ran", || {
        p.invocations_of("off1")
            .iter()
            .any(|i| i["status"] == "succeeded")
    });
    let metrics = curl(
        &[
            &format!("{url}/metrics"),
            "-H",
            &format!("Authorization: Bearer {OPS_TOKEN}"),
        ],
        None,
    );
    assert!(
        metrics.body.contains("pap_trace_spans_total 0"),
        "{}",
        metrics.body
    );
    assert!(!serve_process.log_text().contains("traces: exporting"));
    let shown = shown(&p, "off1");
    assert_eq!(shown["history"][0]["trace"], Value::Null);
    drop(serve_process);
    assert!(receiver.spans().is_empty());
}

/// Decisions never wait on an export: with a queue of one span and a collector that is not
/// there, a burst is decided and run all the same, and what could not be exported is counted.
#[test]
fn a_full_export_queue_drops_spans_and_counts_them_without_slowing_decisions() {
    if !curl_available() {
        return;
    }
    let p = project(
        "traces:\n  endpoint: http://127.0.0.1:9/v1/traces\n  max_queue: 1\nlisten:\n  auth:\n    principals:\n      - name: ops\n        token: ${OPS_TOKEN}\n        scopes: [ingest, metrics]\n",
    );
    let (serve_process, url) = serve(
        &p,
        &[],
        &[("OPS_TOKEN", OPS_TOKEN), ("OTEL_BSP_SCHEDULE_DELAY", "100")],
    );
    let body: String = (1..=5)
        .map(|i| {
            format!(
                "{}\n",
                common::dispatch::ev(&format!("q{i}"), "test.quick.happened", json!({}))
            )
        })
        .collect();
    let r = post(
        &format!("{url}/v1/events"),
        "application/x-ndjson",
        body.as_bytes(),
        &["-H", &format!("Authorization: Bearer {OPS_TOKEN}")],
    );
    assert_eq!(r.status, 200, "{r:?}");
    wait_until("q1..q5 ran", || {
        (1..=5).all(|i| {
            p.invocations_of(&format!("q{i}"))
                .iter()
                .any(|inv| inv["status"] == "succeeded")
        })
    });
    let counter = |body: &str, name: &str| -> f64 {
        body.lines()
            .find_map(|l| l.strip_prefix(&format!("{name} ")))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("{name} in\n{body}"))
    };
    let scrape = || {
        curl(
            &[
                &format!("{url}/metrics"),
                "-H",
                &format!("Authorization: Bearer {OPS_TOKEN}"),
            ],
            None,
        )
        .body
    };
    wait_until("a failed export is counted", || {
        counter(&scrape(), "pap_trace_exports_failed_total") >= 1.0
    });
    let body = scrape();
    assert!(counter(&body, "pap_trace_spans_total") >= 20.0, "{body}");
    assert!(
        counter(&body, "pap_trace_spans_dropped_total") >= 1.0,
        "{body}"
    );
    assert!(serve_process.log_text().contains("traces: exporting"));
}

/// The trace goes on to those pap calls: a webhook sink gets the `traceparent` of its
/// delivery's span, and an LLM provider too once `traces.to_providers` allows it.
#[test]
fn sinks_and_allowed_providers_get_the_traceparent() {
    let Some(mcp) = tools_here() else {
        return;
    };
    let provider = FakeLlm::start(vec![Scripted::status(400, json!({"error": "bad request"}))]);
    let sink = FakeLlm::start(vec![Scripted::ok(json!({}))]);
    let extra = format!(
        "traces:\n  to_providers: true\nnotifications:\n  sinks:\n    - {{name: hook, type: webhook, url: \"{}/hook\", format: anp}}\n",
        sink.url
    );
    let p = traced_project(&provider.url, &mcp, &extra);
    let receiver = Receiver::start(p.root());
    let (_serve, url) = serve_exporting(&p, &receiver, &[("ANTHROPIC_API_KEY", PROVIDER_KEY)]);
    post_event(&url, "f1", &[]);
    wait_until("f1 failed", || {
        p.invocations_of("f1")
            .iter()
            .any(|i| i["status"] == "failed")
    });
    wait_until("the failure reached the sink", || {
        !sink.requests().is_empty()
    });
    wait_until("the delivery's span is exported", || {
        receiver.spans().iter().any(|s| s["name"] == "deliver hook")
    });
    let spans = receiver.spans();
    let chat = span(&spans, "chat test-model");
    assert_eq!(chat["status"]["code"], 2, "an error: {chat}");
    let to_provider = &provider.requests()[0].headers["traceparent"];
    assert_eq!(
        to_provider,
        &format!("00-{TRACE_ID}-{}-01", chat["span_id"].as_str().unwrap())
    );
    let delivery = span(&spans, "deliver hook");
    let to_sink = &sink.requests()[0].headers["traceparent"];
    assert_eq!(
        to_sink,
        &format!("00-{TRACE_ID}-{}-01", delivery["span_id"].as_str().unwrap())
    );
    let attempt = span(&spans, "invoke_agent writer");
    assert_eq!(delivery["parent_span_id"], attempt["span_id"]);
}

/// The wait for a person's answer is a span of the trace: here it ends at the deadline.
#[test]
fn an_approval_wait_is_a_span_from_the_decision_to_its_end() {
    if !receiver_here() {
        return;
    }
    let p = project(
        "approval_timeout: 1s\nlisten:\n  auth:\n    principals:\n      - name: ops\n        token: ${OPS_TOKEN}\n        scopes: [ingest]\n",
    );
    let receiver = Receiver::start(p.root());
    let (_serve, url) = serve_exporting(&p, &receiver, &[]);
    let r = post(
        &format!("{url}/v1/events"),
        "application/json",
        common::dispatch::ev("g1", "test.gated.happened", json!({}))
            .to_string()
            .as_bytes(),
        &["-H", &format!("Authorization: Bearer {OPS_TOKEN}")],
    );
    assert_eq!(r.status, 200, "{r:?}");
    wait_until("the approval's span", || {
        receiver
            .spans()
            .iter()
            .any(|s| s["name"] == "approval gated")
    });
    let spans = receiver.spans();
    let wait = span(&spans, "approval gated");
    assert_eq!(wait["attributes"]["pap.approval.result"], "expired");
    let trigger = span(&spans, "trigger t-gated");
    assert_eq!(trigger["attributes"]["pap.outcome"], "awaiting_approval");
    assert_eq!(wait["parent_span_id"], trigger["span_id"]);
    assert_eq!(wait["trace_id"], trigger["trace_id"]);
    let took = wait["end"].as_u64().unwrap() - wait["start"].as_u64().unwrap();
    assert!(
        took >= 1_000_000_000,
        "it lasted until the deadline: {took} ns"
    );
}

/// `pap dispatch` exports too, and flushes what it made before it exits.
#[test]
fn dispatch_exports_its_spans_before_it_exits() {
    if !receiver_here() {
        return;
    }
    let p = project("");
    let receiver = Receiver::start(p.root());
    let file = p.root().join("one.ndjson");
    std::fs::write(
        &file,
        format!(
            "{}\n",
            common::dispatch::ev("d1", "test.quick.happened", json!({}))
        ),
    )
    .unwrap();
    let out = p
        .cmd()
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint())
        .arg("dispatch")
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(common::code(&out), 0, "{}", common::stderr(&out));
    // Exported before the command returned: no waiting here.
    let names: Vec<String> = receiver
        .spans()
        .iter()
        .map(|s| s["name"].as_str().unwrap().to_owned())
        .collect();
    for name in [
        "decide test.quick.happened",
        "trigger t-quick",
        "invoke_agent quick",
    ] {
        assert!(names.iter().any(|n| n == name), "{name} in {names:?}");
    }
}

/// A high-risk command agent `tracer` (on `test.traced.gated`) that appends the
/// `TRACEPARENT` it is given to `traceparents.log` in the project.
fn gated_tracer(p: &Project) -> PathBuf {
    let log = p.root().join("traceparents.log");
    std::fs::write(
        p.root().join("agents/tracer.yaml"),
        format!(
            "pap_version: \"0.2\"\nagent:\n  id: tracer\n  risk_level: high\n  model:\n    provider: command\n    command: [\"sh\", \"-c\", \"printf '%s\\\\n' \\\"$TRACEPARENT\\\" >> {log}; echo '{{}}'\"]\n  output:\n    type: structured\n",
            log = log.display(),
        ),
    )
    .unwrap();
    std::fs::write(
        p.root().join("triggers/t-tracer.yaml"),
        "pap_version: \"0.2\"\ntrigger:\n  id: t-tracer\n  match:\n    type: test.traced.gated\n  agent: tracer\n",
    )
    .unwrap();
    log
}

/// Dispatches a PAP event `id` of `test.traced.gated` carrying the test's `traceparent`; the
/// id of the invocation waiting for approval.
fn dispatch_gated(p: &Project, id: &str, env: &[(&str, &str)]) -> String {
    let file = p.root().join(format!("{id}.json"));
    let mut event = common::dispatch::ev(id, "test.traced.gated", json!({}));
    event["traceparent"] = json!(format!("00-{TRACE_ID}-{PARENT_ID}-01"));
    std::fs::write(&file, event.to_string()).unwrap();
    let out = p
        .cmd()
        .envs(env.iter().copied())
        .arg("dispatch")
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(common::code(&out), 0, "{}", common::stderr(&out));
    p.invocations_of(id)[0]["id"].as_str().unwrap().to_owned()
}

/// The trace ids of the `TRACEPARENT`s the agent was given, in order.
fn traces_given(log: &Path) -> Vec<String> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(|l| l.split('-').nth(1).unwrap_or("(unset)").to_owned())
        .collect()
}

#[test]
fn an_approved_run_and_a_retry_continue_the_event_s_trace_with_traces_off() {
    if !curl_available() {
        return;
    }
    let p = project("");
    let log = gated_tracer(&p);
    let id = dispatch_gated(&p, "gate1", &[]);
    let out = p.cmd().args(["approve", &id]).output().unwrap();
    assert_eq!(common::code(&out), 0, "{}", common::stderr(&out));
    assert_eq!(traces_given(&log), [TRACE_ID]);
    // A rejected one retried by an operator, then approved: the same trace again.
    let id = dispatch_gated(&p, "gate2", &[]);
    let out = p
        .cmd()
        .args(["reject", &id, "--reason", "not now"])
        .output()
        .unwrap();
    assert_eq!(common::code(&out), 0, "{}", common::stderr(&out));
    let out = p
        .cmd()
        .args(["invocations", "retry", &id, "--by", "ops"])
        .output()
        .unwrap();
    assert_eq!(common::code(&out), 0, "{}", common::stderr(&out));
    let again = p
        .invocations_of("gate2")
        .into_iter()
        .find(|i| i["status"] == "awaiting_approval")
        .expect("the retry waits for approval");
    let out = p
        .cmd()
        .args(["approve", again["id"].as_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(common::code(&out), 0, "{}", common::stderr(&out));
    assert_eq!(traces_given(&log), [TRACE_ID, TRACE_ID]);
}

#[test]
fn pap_approve_exports_the_approved_run_in_the_event_s_trace() {
    if !receiver_here() {
        return;
    }
    let p = project("");
    let log = gated_tracer(&p);
    let receiver = Receiver::start(p.root());
    let endpoint = receiver.endpoint();
    let env = [("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str())];
    let id = dispatch_gated(&p, "gate3", &env);
    let out = p.cmd().envs(env).args(["approve", &id]).output().unwrap();
    assert_eq!(common::code(&out), 0, "{}", common::stderr(&out));
    let spans = receiver.spans();
    let trigger = span(&spans, "trigger t-tracer");
    let wait = span(&spans, "approval tracer");
    let run = span(&spans, "invoke_agent tracer");
    assert_eq!(trigger["trace_id"], TRACE_ID);
    assert_eq!(wait["attributes"]["pap.approval.result"], "approved");
    // The run is a child of the trigger's decision, in the sender's trace; the program got
    // the run's own span as its parent.
    assert_eq!(
        (run["trace_id"].as_str(), run["parent_span_id"].clone()),
        (Some(TRACE_ID), trigger["span_id"].clone())
    );
    let given = std::fs::read_to_string(&log).unwrap();
    assert!(
        given.contains(&format!(
            "00-{TRACE_ID}-{}-",
            run["span_id"].as_str().unwrap()
        )),
        "{given}"
    );
}

#[test]
fn a_batch_s_run_continues_its_first_event_s_trace_and_links_the_others() {
    if !receiver_here() {
        return;
    }
    let p = project(
        "listen:\n  auth:\n    principals:\n      - name: ops\n        token: ${OPS_TOKEN}\n        scopes: [ingest]\n",
    );
    std::fs::write(
        p.root().join("triggers/t-batch.yaml"),
        "pap_version: \"0.2\"\ntrigger:\n  id: t-batch\n  match:\n    type: test.traced.batched\n  batch:\n    max: 2\n    window: 1h\n  agent: quick\n",
    )
    .unwrap();
    let receiver = Receiver::start(p.root());
    let (_serve, url) = serve_exporting(&p, &receiver, &[]);
    let second = "0af7651916cd43dd8448eb211c80319c";
    for (id, trace) in [("b1", TRACE_ID), ("b2", second)] {
        let mut event = common::dispatch::ev(id, "test.traced.batched", json!({}));
        event["traceparent"] = json!(format!("00-{trace}-{PARENT_ID}-01"));
        let r = post(
            &format!("{url}/v1/events"),
            "application/json",
            event.to_string().as_bytes(),
            &["-H", &format!("Authorization: Bearer {OPS_TOKEN}")],
        );
        assert_eq!(r.status, 200, "{r:?}");
    }
    wait_until("the batch's run span", || {
        receiver
            .spans()
            .iter()
            .any(|s| s["name"] == "invoke_agent quick")
    });
    let spans = receiver.spans();
    let fire = span(&spans, "fire t-batch");
    let run = span(&spans, "invoke_agent quick");
    assert_eq!(fire["trace_id"], TRACE_ID);
    assert_eq!(run["trace_id"], TRACE_ID);
    let links: Vec<&str> = fire["links"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["trace_id"].as_str().unwrap())
        .collect();
    assert_eq!(links, [second], "{fire}");
}
