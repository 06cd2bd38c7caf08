//! Health that tells the truth, through the real binary: an agent whose
//! runs all fail degrades `pap status` (exit 5), `GET /status` and `/metrics` while `/readyz`
//! stays ready with a bare `degraded: true`; `pap doctor` shows serve's environment beside the
//! shell's and says which one a retry uses; and a run serve could not start says that it was
//! serve's environment that lacked the key.

use crate::common;

use common::http::{curl, curl_available, post, project, serve};
use common::serve::{Project, wait_until};
use serde_json::{Value, json};

const TOKEN: &str = "health-0123456789abcdef";

/// The serve fixture with a principal `ops` (every scope, token in OPS_TOKEN) and `extra`
/// agents and triggers: (path, text).
fn health_project(files: &[(&str, &str)]) -> Project {
    let p = project(
        "listen:\n  auth:\n    principals:\n      - name: ops\n        token: ${OPS_TOKEN}\n        scopes: [ingest, read, metrics]\n",
    );
    for (path, text) in files {
        std::fs::write(p.root().join(path), text).unwrap();
    }
    p
}

/// Posts event `id` of `event_type` and waits for its invocation to fail.
fn post_until_failed(p: &Project, url: &str, id: &str, event_type: &str) {
    let r = post(
        &format!("{url}/v1/events"),
        "application/json",
        common::dispatch::ev(id, event_type, json!({}))
            .to_string()
            .as_bytes(),
        &["-H", &auth()],
    );
    assert_eq!(r.status, 200, "{r:?}");
    wait_until(&format!("{id} failed"), || {
        p.invocations_of(id).iter().any(|i| i["status"] == "failed")
    });
}

fn auth() -> String {
    format!("Authorization: Bearer {TOKEN}")
}

const BROKEN_AGENT: &str = "pap_version: \"0.2\"\nagent:\n  id: broken\n  risk_level: read_only\n  model:\n    provider: command\n    command: [\"false\"]\n";
const BROKEN_TRIGGER: &str = "pap_version: \"0.2\"\ntrigger:\n  id: t-broken\n  match:\n    type: test.broken.happened\n  agent: broken\n";

#[test]
fn a_failing_agent_degrades_status_and_metrics_but_leaves_the_node_ready() {
    if !curl_available() {
        return;
    }
    let p = health_project(&[
        ("agents/broken.yaml", BROKEN_AGENT),
        ("triggers/t-broken.yaml", BROKEN_TRIGGER),
    ]);
    let (_serve, url) = serve(&p, &[], &[("OPS_TOKEN", TOKEN)]);
    post_until_failed(&p, &url, "b1", "test.broken.happened");
    let error = p.invocations_of("b1")[0]["error"]
        .as_str()
        .unwrap()
        .to_owned();

    // Ready: a failing agent must not take the node out of a Service. The body says it is
    // degraded, and nothing else (no names, no error text: the probe needs no token).
    // It is worked out in the background of the first probe, never on a probe's time.
    let probe = || curl(&[&format!("{url}/readyz")], None);
    wait_until("/readyz says degraded", || {
        probe().json()["degraded"] == true
    });
    let ready = probe();
    assert_eq!(ready.status, 200, "{ready:?}");
    let body = ready.json();
    assert_eq!(body["ready"], true);
    assert_eq!(body["degraded"], true, "{body}");
    assert!(
        !ready.body.contains("broken") && !ready.body.contains(&error),
        "{}",
        ready.body
    );

    // `GET /status` (read scope) names the agent and its last error.
    let status = curl(&[&format!("{url}/status"), "-H", &auth()], None);
    assert_eq!(status.status, 200, "{status:?}");
    let report = status.json();
    assert_eq!(report["healthy"], false);
    assert_eq!(report["agents_failing"][0]["agent"], "broken", "{report}");
    assert_eq!(report["agents_failing"][0]["last_error"], error.as_str());
    let attention = report["attention"].to_string();
    assert!(
        attention.contains("agent broken: its latest run failed"),
        "{attention}"
    );

    // `/metrics`: the agent's series and the degraded gauge.
    let metrics = curl(&[&format!("{url}/metrics"), "-H", &auth()], None);
    assert_eq!(metrics.status, 200);
    for line in [
        "pap_agent_failing{agent=\"broken\"} 1",
        "pap_agent_failing{agent=\"quick\"} 0",
        "pap_degraded 1",
    ] {
        assert!(metrics.body.contains(line), "{line} in\n{}", metrics.body);
    }

    // `pap status` through the binary: exit 5, the agent and its error.
    let out = p.cmd().args(["status"]).output().unwrap();
    assert_eq!(common::code(&out), 5, "{}", common::stdout(&out));
    let text = common::stdout(&out);
    assert!(
        text.contains("agent broken: its latest run failed") && text.contains(&error),
        "{text}"
    );
}

#[test]
fn doctor_shows_serves_environment_beside_the_shells_and_serve_runs_name_theirs() {
    if !curl_available() {
        return;
    }
    let llm = "pap_version: \"0.2\"\nagent:\n  id: writer\n  risk_level: read_only\n  model:\n    provider: anthropic\n    model_id: test-model\n    base_url: \"http://127.0.0.1:9/\"\n";
    let trigger = "pap_version: \"0.2\"\ntrigger:\n  id: t-writer\n  match:\n    type: test.writer.asked\n  agent: writer\n";
    let p = health_project(&[
        ("agents/writer.yaml", llm),
        ("triggers/t-writer.yaml", trigger),
    ]);
    // Serve started without the provider's key (empty counts as not set).
    let (serve_process, url) = serve(&p, &[], &[("OPS_TOKEN", TOKEN), ("ANTHROPIC_API_KEY", "")]);
    let pid = serve_process.pid();

    // This shell has the key, but not the listener's token.
    let doctor = |json: bool| {
        let mut cmd = p.cmd();
        cmd.env("ANTHROPIC_API_KEY", "sk-shell-only")
            .env_remove("OPS_TOKEN");
        cmd.arg("doctor");
        if json {
            cmd.arg("--json");
        }
        cmd.output().unwrap()
    };
    let out = doctor(false);
    let text = common::stdout(&out);
    assert_eq!(common::code(&out), 1, "{text}");
    assert!(
        text.contains(&format!(
            "ok    runs in: pap serve (pid {pid}) runs retries and new work"
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "FAIL  provider key ANTHROPIC_API_KEY: not set in serve's environment (pid {pid}), which runs retries and new work: agent writer cannot run"
        )) && text.contains("it is set in this shell, which serve does not read"),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "warn  listen token OPS_TOKEN: set in serve (pid {pid}), which a retry uses; not in this shell"
        )),
        "{text}"
    );
    assert!(
        !text.contains("sk-shell-only") && !text.contains(TOKEN),
        "{text}"
    );
    let rows: Vec<Value> = common::stdout(&doctor(true))
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let key = rows
        .iter()
        .find(|r| r["check"] == "provider key ANTHROPIC_API_KEY")
        .unwrap();
    assert_eq!(
        (key["shell"].as_str(), key["serve"].as_str()),
        (Some("set"), Some("not set"))
    );
    assert_eq!(key["status"], "fail");

    // The run serve makes fails, and says whose environment lacked the key.
    post_until_failed(&p, &url, "w1", "test.writer.asked");
    let error = p.invocations_of("w1")[0]["error"].to_string();
    assert!(
        error.contains(&format!(
            "the API key variable ANTHROPIC_API_KEY is not set in pap serve's environment (pid {pid})"
        )),
        "{error}"
    );

    // No serve: the shell's side alone, and the line says so.
    drop(serve_process);
    let out = doctor(false);
    let text = common::stdout(&out);
    assert!(
        text.contains("ok    provider key ANTHROPIC_API_KEY: set in this shell (agent writer)")
            && text.contains("no pap serve answers on this state"),
        "{text}"
    );
}
