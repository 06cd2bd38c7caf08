//! `pap invocations retry` and `pap invocations cancel`, through the real binary: a retry is
//! a new invocation under the same claim that runs the agent again; a cancel ends unfinished
//! invocations, stopping a running agent's whole process group.

use crate::common;

use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use common::dispatch::{Project, T0, ev, lines};
use common::fake_llm::{FakeLlm, Scripted, anthropic_text};
use common::{code, stderr, stdout};
use serde_json::{Value, json};

fn audit_actions(p: &Project) -> Vec<(String, String, Value)> {
    let out = p.cmd(T0).args(["audit", "--json"]).output().unwrap();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    lines(&stdout(&out))
        .into_iter()
        .map(|e| {
            (
                e["invocation_id"].as_str().unwrap().to_owned(),
                e["action"].as_str().unwrap().to_owned(),
                e["actor"].clone(),
            )
        })
        .collect()
}

// ---- retry --------------------------------------------------------------------------------

#[test]
fn retry_after_a_keyless_failure_runs_the_agent_again_and_the_audit_shows_both() {
    let fake = FakeLlm::start(vec![Scripted::ok(anthropic_text("all fine"))]);
    let agent = format!(
        "  risk_level: medium
  model:
    provider: anthropic
    model_id: test-model
    base_url: \"{}\"
    max_tokens: 500
  system_prompt: \"You check things.\"
  on_complete:
    emit_event: pap.agent.invocation.completed
  on_failure:
    emit_event: pap.agent.invocation.failed
",
        fake.url
    );
    let p = common::llm::project(&agent, None);
    let first = common::llm::dispatch(&p, "e1", json!({"host": "db-1"}), None, &[]);
    assert_eq!(first.code, 4, "the keyless run fails: {}", first.stderr);
    let original = first.trigger("e1", "t-llm")["invocation_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let failed = p.invocation(&original);
    assert_eq!(failed["status"], "failed");
    assert!(fake.requests().is_empty());

    // The key is there now: the operator runs it again.
    let out = p
        .cmd(T0)
        .env("ANTHROPIC_API_KEY", "sk-test")
        .args(["invocations", "retry", &original, "--by", "alice", "--json"])
        .output()
        .unwrap();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let retried: Value = serde_json::from_str(stdout(&out).trim()).unwrap();
    let again = retried["id"].as_str().unwrap().to_owned();
    assert_ne!(again, original);
    assert_eq!(retried["status"], "succeeded", "{retried}");
    assert_eq!(retried["retry_of"], original.as_str());
    assert_eq!(fake.requests().len(), 1, "the agent ran again");
    assert_eq!(
        p.invocation(&original)["status"],
        "failed",
        "the first stays as it was"
    );

    // Its completion event has an id of its own: never a duplicate of the first run's.
    let emitted_first = failed["emitted"].as_array().unwrap().clone();
    let emitted_again = retried["emitted"].as_array().unwrap().clone();
    assert_eq!((emitted_first.len(), emitted_again.len()), (1, 1));
    assert_ne!(emitted_first[0], emitted_again[0]);

    // Both runs are in the audit log, the retry with who asked for it.
    let audit = audit_actions(&p);
    let of = |id: &str| -> Vec<String> {
        audit
            .iter()
            .filter(|(i, _, _)| i == id)
            .map(|(_, a, _)| a.clone())
            .collect()
    };
    assert_eq!(of(&original), ["decided", "attempt_started", "failed"]);
    assert_eq!(of(&again), ["retried", "attempt_started", "succeeded"]);
    assert!(
        audit
            .iter()
            .any(|(i, a, actor)| i == &again && a == "retried" && actor == "alice")
    );

    // The original idempotency claim still holds: the same event again is a duplicate.
    let dup = common::llm::dispatch(&p, "e1", json!({"host": "db-1"}), Some("sk-test"), &[]);
    assert_eq!(dup.outcome("e1", "t-llm"), "duplicate", "{}", dup.stdout);
    assert_eq!(fake.requests().len(), 1);
}

#[test]
fn retrying_a_rejection_needs_by_and_waits_for_approval_again() {
    let p = Project::new();
    let inv = p.awaiting("r1");
    let out = p
        .cmd(T0)
        .args(["reject", &inv, "--reason", "not now", "--by", "bob"])
        .output()
        .unwrap();
    assert_eq!(code(&out), 0, "{}", stderr(&out));

    let out = p
        .cmd(T0)
        .args(["invocations", "retry", &inv])
        .output()
        .unwrap();
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    assert!(stderr(&out).contains("--by NAME"), "{}", stderr(&out));
    assert_eq!(p.invocations().len(), 1, "nothing was created");

    let out = p
        .cmd(T0)
        .args(["invocations", "retry", &inv, "--by", "alice", "--json"])
        .output()
        .unwrap();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let again: Value = serde_json::from_str(stdout(&out).trim()).unwrap();
    assert_eq!(
        again["status"], "awaiting_approval",
        "high risk waits again"
    );
    assert!(again["approval_request"].is_string());
    let id = again["id"].as_str().unwrap();
    // It names the short id to type next.
    assert!(
        stderr(&out).contains(&format!("pap approve {}", &id[16..22])),
        "{}",
        stderr(&out)
    );

    let out = p
        .cmd(T0)
        .args(["approve", id, "--by", "alice"])
        .output()
        .unwrap();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(p.invocation(id)["status"], "succeeded");
}

#[test]
fn only_an_invocation_that_ended_without_success_can_be_retried() {
    let p = Project::new();
    let file = p.events("ok.ndjson", &[ev("ok1", "test.basic.happened", json!({}))]);
    let run = p.dispatch(T0, &file, &[]);
    let inv = run.trigger("ok1", "t-echo")["invocation_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let out = p
        .cmd(T0)
        .args(["invocations", "retry", &inv])
        .output()
        .unwrap();
    assert_eq!(code(&out), 1);
    assert!(
        stderr(&out).contains("is succeeded, so it cannot be retried"),
        "{}",
        stderr(&out)
    );
    let out = p
        .cmd(T0)
        .args(["invocations", "retry", "inv_nosuch"])
        .output()
        .unwrap();
    assert_eq!(code(&out), 1);
    assert!(
        stderr(&out).contains("no invocation inv_nosuch"),
        "{}",
        stderr(&out)
    );
}

// ---- cancel -------------------------------------------------------------------------------

fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let started = Instant::now();
    while !cond() {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn alive(pid: i32) -> bool {
    // A zombie (exited, not yet reaped) does not count.
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| {
            let state = s[s.rfind(')').unwrap() + 2..].chars().next().unwrap();
            state != 'Z' && state != 'X'
        })
        .unwrap_or(false)
}

/// A `pap dispatch` running the lingering agent for event `id`, in the background.
fn start_lingering(p: &Project, id: &str) -> Child {
    let file = p.events(
        &format!("{id}.ndjson"),
        &[ev(id, "test.linger.happened", json!({}))],
    );
    p.cmd(T0)
        .arg("dispatch")
        .arg(&file)
        .arg("--json")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn pids_of(root: &Path, invocation: &str) -> (i32, i32) {
    let text = std::fs::read_to_string(root.join(format!("linger.{invocation}.pids"))).unwrap();
    let mut it = text.split_whitespace().map(|s| s.parse().unwrap());
    (it.next().unwrap(), it.next().unwrap())
}

#[test]
fn cancel_of_a_running_command_agent_stops_its_process_group() {
    let p = Project::new();
    let dispatch = start_lingering(&p, "l1");
    let mut running = Vec::new();
    wait_for("the agent to run", || {
        running = p.invocations();
        running.len() == 1
            && running[0]["status"] == "running"
            && p.root()
                .join(format!(
                    "linger.{}.pids",
                    running[0]["id"].as_str().unwrap()
                ))
                .exists()
    });
    let inv = running[0]["id"].as_str().unwrap().to_owned();
    let (agent, child) = pids_of(p.root(), &inv);
    assert!(alive(agent) && alive(child));

    let out = p
        .cmd(T0)
        .args([
            "invocations",
            "cancel",
            &inv,
            "--by",
            "alice",
            "--reason",
            "runaway",
            "--json",
        ])
        .output()
        .unwrap();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let row: Value = serde_json::from_str(stdout(&out).trim()).unwrap();
    assert_eq!(row["status"], "cancelled");
    assert_eq!(row["stopped_process_group"], true);
    assert_eq!(row["error"], "cancelled by alice: runaway");

    // The agent was asked to stop (SIGTERM), and nothing of its group is left.
    assert!(p.root().join(format!("linger.{inv}.term")).exists());
    wait_for("the agent's processes to end", || {
        !alive(agent) && !alive(child)
    });

    // The dispatch that ran it ends without recording anything over the cancellation.
    // It says so, and a cancellation is an operator's decision, not the agent's failure.
    let finished = dispatch.wait_with_output().unwrap();
    assert_eq!(code(&finished), 0, "{}", stderr(&finished));
    let line = &lines(&stdout(&finished))[0];
    assert_eq!(line["triggers"][0]["result"], "cancelled", "{line}");
    let shown = p.invocation(&inv);
    assert_eq!(shown["status"], "cancelled", "{}", stderr(&finished));
    assert_eq!(shown["emitted"], json!([]), "no failure event");
    assert_eq!(shown["attempts"], 1);
    assert!(shown["history"][0]["ended_at"].is_string());

    let audit = audit_actions(&p);
    assert!(
        audit
            .iter()
            .any(|(i, a, actor)| i == &inv && a == "cancelled" && actor == "alice"),
        "{audit:?}"
    );
    let notes = p
        .cmd(T0)
        .args(["notifications", "--json"])
        .output()
        .unwrap();
    let kinds: Vec<Value> = lines(&stdout(&notes))
        .iter()
        .map(|n| n["kind"].clone())
        .collect();
    assert!(
        kinds.contains(&json!("invocation.cancelled")),
        "its own notification outcome: {kinds:?}"
    );
}

#[test]
fn cancel_by_trigger_ends_every_unfinished_invocation_of_it() {
    let p = Project::new();
    let file = p.events(
        "many.ndjson",
        &[
            ev("q1", "test.basic.happened", json!({})),
            ev("q2", "test.basic.happened", json!({})),
            ev("q3", "test.basic.happened", json!({})),
        ],
    );
    let run = p.dispatch(T0, &file, &["--no-run"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let awaiting = p.awaiting("a1");

    let out = p
        .cmd(T0)
        .args(["invocations", "cancel", "--trigger", "t-echo", "--json"])
        .output()
        .unwrap();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let rows = lines(&stdout(&out));
    assert_eq!(rows.len(), 3);
    assert!(rows.iter().all(|r| r["status"] == "cancelled"));
    assert_eq!(
        p.invocation(&awaiting)["status"],
        "awaiting_approval",
        "other triggers untouched"
    );

    // Nothing is left for serve to run.
    let out = p.cmd(T0).args(["serve", "--once"]).output().unwrap();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let statuses: Vec<Value> = p
        .invocations()
        .iter()
        .filter(|i| i["trigger"] == "t-echo")
        .map(|i| i["status"].clone())
        .collect();
    assert_eq!(statuses, vec![json!("cancelled"); 3]);

    // Again: nothing unfinished is a success; a named one that ended is not.
    let out = p
        .cmd(T0)
        .args(["invocations", "cancel", "--trigger", "t-echo"])
        .output()
        .unwrap();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("nothing to cancel"),
        "{}",
        stderr(&out)
    );
    let one = rows[0]["id"].as_str().unwrap();
    let out = p
        .cmd(T0)
        .args(["invocations", "cancel", one])
        .output()
        .unwrap();
    assert_eq!(code(&out), 1);
    assert!(
        stderr(&out).contains("is cancelled, so it cannot be cancelled"),
        "{}",
        stderr(&out)
    );

    // An approval waiting is cancelled too, and its request can no longer be answered.
    let out = p
        .cmd(T0)
        .args(["invocations", "cancel", &awaiting])
        .output()
        .unwrap();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let out = p.cmd(T0).args(["approve", &awaiting]).output().unwrap();
    assert_eq!(code(&out), 1);
    assert!(
        stderr(&out).contains("is cancelled, not awaiting approval"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn cancel_works_while_serve_runs_the_agent() {
    let p = Project::new();
    let log = std::fs::File::create(p.root().join("serve.log")).unwrap();
    let mut serve = p
        .cmd(T0)
        .args(["serve", "--log-format", "json"])
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap();
    let file = p.events("s1.ndjson", &[ev("s1", "test.linger.happened", json!({}))]);
    let run = p.dispatch(T0, &file, &["--no-run"]);
    assert_eq!(run.outcome("s1", "t-linger"), "queued", "{}", run.stderr);
    let inv = run.trigger("s1", "t-linger")["invocation_id"]
        .as_str()
        .unwrap()
        .to_owned();
    wait_for("serve to run the agent", || {
        p.root().join(format!("linger.{inv}.pids")).exists()
    });
    let (agent, child) = pids_of(p.root(), &inv);

    let out = p
        .cmd(T0)
        .args(["invocations", "cancel", &inv, "--by", "alice"])
        .output()
        .unwrap();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    wait_for("the agent's processes to end", || {
        !alive(agent) && !alive(child)
    });
    let log_path = p.root().join("serve.log");
    wait_for("serve to log the cancellation", || {
        std::fs::read_to_string(&log_path)
            .unwrap()
            .contains("cancelled by an operator")
    });
    assert_eq!(p.invocation(&inv)["status"], "cancelled");
    assert!(
        serve.try_wait().unwrap().is_none(),
        "serve goes on: {}",
        std::fs::read_to_string(&log_path).unwrap()
    );
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(serve.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    assert!(serve.wait().unwrap().success());
}

#[test]
fn a_cancelled_llm_agent_makes_no_further_tool_call_or_turn() {
    let Some(server) = common::llm::everything_server() else {
        return;
    };
    // The first turn asks for a tool, slowly: the cancel lands while it is on its way.
    let fake = FakeLlm::start(vec![
        Scripted::ok(common::fake_llm::anthropic_tool_use(&[(
            "toolu_01",
            "get-sum",
            json!({"a": 2, "b": 5}),
        )]))
        .delayed(Duration::from_millis(1500)),
        Scripted::ok(anthropic_text("7")),
    ]);
    let agent = format!(
        "  risk_level: low
  model:
    provider: anthropic
    model_id: test-model
    base_url: \"{}\"
    max_tokens: 500
  tools:
    - name: get-sum
      source: mcp://everything
      risk_override: read_only
      impact: internal
",
        fake.url
    );
    let p = common::llm::project(&agent, Some(&server));
    let file = p.events("c1.ndjson", &[ev("c1", "test.llm.asked", json!({}))]);
    let dispatch = p
        .cmd(T0)
        .env("ANTHROPIC_API_KEY", "k")
        .arg("dispatch")
        .arg(&file)
        .arg("--json")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for("the first request to the model", || {
        !fake.requests().is_empty()
    });
    let inv = p.invocations()[0]["id"].as_str().unwrap().to_owned();
    let out = p
        .cmd(T0)
        .args(["invocations", "cancel", &inv])
        .output()
        .unwrap();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let finished = dispatch.wait_with_output().unwrap();
    assert_eq!(code(&finished), 0, "{}", stderr(&finished));
    assert_eq!(fake.requests().len(), 1, "no turn after the cancel");
    let shown = p.invocation(&inv);
    assert_eq!(shown["status"], "cancelled");
    let calls = &shown["history"][0]["transcript"]["turns"];
    let made: usize = calls.as_array().map_or(0, |turns| {
        turns
            .iter()
            .map(|t| t["tool_calls"].as_array().map_or(0, Vec::len))
            .sum()
    });
    assert_eq!(
        made, 0,
        "the tool call the late turn asked for was not made: {shown:#}"
    );
}
