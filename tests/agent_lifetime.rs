//! A command agent never outlives its runner, and two runs of one invocation never overlap
//!. Real processes and signals: `pap serve` and `pap dispatch` are
//! SIGKILLed, SIGTERMed and SIGINTed while the fixture's `long` agent runs (it keeps a helper
//! process in its group and notes in `overlap.log` any process of an earlier run it finds
//! alive when it starts).

use crate::common;

use std::io::Write;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use common::dispatch::{ev, lines};
use common::serve::{Project, Serve, wait_until};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::{Value, json};

/// How soon an agent's group must be gone after its runner was SIGKILLed.
const SHORTLY: Duration = Duration::from_secs(5);

/// (state, process group) of a live process; `None` when gone or a zombie.
fn stat(pid: u32) -> Option<(char, u32)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &text[text.rfind(')')? + 1..];
    let mut f = rest.split_whitespace();
    let state = f.next()?.chars().next()?;
    let pgrp = f.nth(1)?.parse().ok()?;
    (state != 'Z' && state != 'X').then_some((state, pgrp))
}

fn alive(pid: u32) -> bool {
    stat(pid).is_some()
}

/// Whether every thread of `pid` is stopped (SIGSTOP takes effect thread by thread).
fn stopped(pid: u32) -> bool {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .filter_map(|e| e.ok())
        .all(|t| {
            let stat = std::fs::read_to_string(t.path().join("stat")).unwrap_or_default();
            let state = stat
                .rfind(')')
                .and_then(|i| stat[i + 1..].split_whitespace().next());
            state == Some("T")
        })
}

/// Live processes of process group `pgid`.
fn group_members(pgid: u32) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| stat(pid).is_some_and(|(_, g)| g == pgid))
        .collect()
}

/// Agent runs so far: (pid, invocation, attempt), from `start` lines of runs.log.
fn starts(p: &Project) -> Vec<(u32, String, String)> {
    p.runs()
        .iter()
        .filter_map(|l| {
            let mut w = l.strip_prefix("start ")?.split(' ');
            Some((
                w.next()?.parse().ok()?,
                w.next()?.to_owned(),
                w.next()?.to_owned(),
            ))
        })
        .collect()
}

/// Waits for run number `n` (from 1) to start; returns its pid, its helper's pid and its group.
fn started_run(p: &Project, n: usize) -> (u32, u32, u32) {
    wait_until("the agent to start", || starts(p).len() >= n);
    let pid = starts(p)[n - 1].0;
    let helper_file = p.root().join(format!("helper.{pid}"));
    wait_until("the agent's helper", || {
        std::fs::read_to_string(&helper_file).is_ok_and(|t| t.ends_with('\n'))
    });
    let helper: u32 = std::fs::read_to_string(&helper_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let group = stat(pid).expect("the agent runs").1;
    assert_eq!(
        stat(helper).map(|s| s.1),
        Some(group),
        "helper in the group"
    );
    (pid, helper, group)
}

fn wait_group_gone(group: u32, since: Instant) {
    wait_until("the agent's process group to be gone", || {
        group_members(group).is_empty()
    });
    assert!(
        since.elapsed() < SHORTLY,
        "the group outlived its runner by {:?}",
        since.elapsed()
    );
}

fn show(p: &Project, id: &str) -> Value {
    let out = p
        .cmd()
        .args(["invocations", "show", id, "--json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", common::stderr(&out));
    serde_json::from_str(&common::stdout(&out)).unwrap()
}

fn overlaps(p: &Project) -> String {
    std::fs::read_to_string(p.root().join("overlap.log")).unwrap_or_default()
}

fn long_event(id: &str) -> Value {
    ev(id, "test.long.happened", json!({}))
}

/// Restarts serve after a crash and checks the invocation ran again, after the old run, with
/// both runs in its history; returns the history.
fn rerun_after_crash(p: &Project, id: &str, first_pid: u32, group: u32) -> Vec<Value> {
    let serve = p.serve_with(&[], &[("PAP_TEST_SECONDS", "1")]);
    wait_until("the invocation to run again and succeed", || {
        p.invocations_of("e-long")[0]["status"] == "succeeded"
    });
    assert_eq!(serve.terminate().0, 0);
    assert_eq!(overlaps(p), "", "two runs overlapped");
    let runs = starts(p);
    assert_eq!(runs.len(), 2, "{runs:?}");
    assert_eq!(runs[0].0, first_pid);
    assert!(
        runs.iter().all(|r| r.1 == id && r.2 == "1"),
        "the same attempt ran again: {runs:?}"
    );
    let inv = show(p, id);
    assert_eq!(inv["attempts"], 1);
    let history = inv["history"].as_array().unwrap().clone();
    assert_eq!(history.len(), 2, "both runs are in the history: {inv}");
    assert_eq!(history[0]["process_group"], group, "{inv}");
    assert_eq!(history[1]["error"], Value::Null);
    history
}

/// A serve running the `long` agent on event `e-long`: serve, the run's (pid, helper, group)
/// and the invocation id.
fn serve_running_long(p: &Project) -> (Serve, (u32, u32, u32), String) {
    let serve = p.serve_with(&[], &[("PAP_TEST_SECONDS", "60")]);
    p.drop_events("long.ndjson", &[long_event("e-long")]);
    let run = started_run(p, 1);
    assert_ne!(
        run.2,
        serve.pid() as u32,
        "the agent has a group of its own"
    );
    let id = p.invocations_of("e-long")[0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    (serve, run, id)
}

#[test]
fn serve_sigkilled_takes_its_agent_along_and_the_rerun_never_overlaps() {
    let p = Project::new();
    let (serve, (pid, helper, group), id) = serve_running_long(&p);
    serve.kill();
    wait_group_gone(group, Instant::now());
    assert!(!alive(pid) && !alive(helper));

    let history = rerun_after_crash(&p, &id, pid, group);
    let first = history[0]["error"].as_str().unwrap();
    assert!(
        first.starts_with("interrupted: pap stopped during the attempt")
            && first.contains(&format!("group {group}")),
        "{first}"
    );
}

#[test]
fn recovery_kills_what_is_left_of_the_old_run_before_running_again() {
    // Everything of pap dies at once (`kill -9` of every pap process): serve is frozen so it
    // cannot react, the agent's supervisor is SIGKILLed, then serve. The agent dies with its
    // supervisor (parent-death signal), but its helper lives on in the group: only the
    // recovery can end it.
    let p = Project::new();
    let (serve, (pid, helper, group), id) = serve_running_long(&p);

    serve.signal(Signal::SIGSTOP);
    wait_until("every thread of serve to stop", || {
        stopped(serve.pid() as u32)
    });
    kill(Pid::from_raw(group as i32), Signal::SIGKILL).unwrap();
    serve.kill();
    wait_until("the agent to die with its supervisor", || !alive(pid));
    assert!(
        alive(helper),
        "the helper outlives the agent (the case to recover from)"
    );

    let history = rerun_after_crash(&p, &id, pid, group);
    assert!(!alive(helper), "the recovery killed the old run's helper");
    let first = history[0]["error"].as_str().unwrap();
    assert!(
        first.contains(&format!(
            "its processes (group {group}) were still running and were killed"
        )),
        "{first}"
    );
}

/// `pap dispatch -` of one `long` event, with stdin left open (a stream that has not ended).
fn dispatch(p: &Project, seconds: &str, extra: &[&str]) -> Child {
    let mut child = p
        .cmd()
        .args(["dispatch", "-", "--json"])
        .args(extra)
        .env("PAP_TEST_SECONDS", seconds)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    writeln!(stdin, "{}", long_event("e-long")).unwrap();
    // Kept open for the rest of the test: dispatch must not wait for the input to end.
    std::mem::forget(stdin);
    child
}

#[test]
fn dispatch_sigkilled_takes_its_agent_along() {
    let p = Project::new();
    let mut child = dispatch(&p, "60", &[]);
    let (pid, helper, group) = started_run(&p, 1);
    assert_ne!(group, child.id(), "the agent has a group of its own");
    child.kill().unwrap();
    child.wait().unwrap();
    wait_group_gone(group, Instant::now());
    assert!(!alive(pid) && !alive(helper));
}

/// Signals a dispatch whose agent is running; returns its exit code and stdout lines.
fn signal_dispatch(p: &Project, seconds: &str, grace: &str, sig: Signal) -> (i32, Vec<Value>, u32) {
    let child = dispatch(p, seconds, &["--grace", grace]);
    let (_, _, group) = started_run(p, 1);
    kill(Pid::from_raw(child.id() as i32), sig).unwrap();
    let out = child.wait_with_output().unwrap();
    let code = out.status.code().expect("exited, not killed by the signal");
    (code, lines(&common::stdout(&out)), group)
}

#[test]
fn dispatch_sigterm_lets_a_run_finish_within_the_grace_period() {
    let p = Project::new();
    let (code, lines, group) = signal_dispatch(&p, "2", "60", Signal::SIGTERM);
    assert_eq!(code, 143);
    assert_eq!(lines.len(), 1, "{lines:?}");
    let t = &lines[0]["triggers"][0];
    assert_eq!(
        (t["outcome"].as_str(), t["result"].as_str()),
        (Some("invoked"), Some("succeeded")),
        "{t}"
    );
    assert!(group_members(group).is_empty());
    assert_eq!(p.invocations_of("e-long")[0]["status"], "succeeded");
}

fn stopped_past_grace_is_queued(sig: Signal, exit: i32) {
    let p = Project::new();
    let started = Instant::now();
    let (code, lines, group) = signal_dispatch(&p, "60", "0.5", sig);
    assert_eq!(code, exit);
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "waited for the agent"
    );
    assert_eq!(lines.len(), 1, "the decided line is printed: {lines:?}");
    let t = &lines[0]["triggers"][0];
    assert_eq!(t["outcome"], "queued", "{t}");
    assert_eq!(t["result"], Value::Null, "{t}");
    assert!(group_members(group).is_empty(), "no orphan left");
    let inv = &p.invocations_of("e-long")[0];
    assert_eq!(
        (&inv["status"], &inv["attempts"]),
        (&json!("queued"), &json!(0))
    );

    // `pap serve` runs it later, from the start.
    let serve = p.serve_with(&[], &[("PAP_TEST_SECONDS", "1")]);
    wait_until("serve to run it", || {
        p.invocations_of("e-long")[0]["status"] == "succeeded"
    });
    assert_eq!(serve.terminate().0, 0);
    assert_eq!(overlaps(&p), "");
}

#[test]
fn dispatch_sigterm_past_the_grace_period_kills_the_run_and_leaves_it_queued() {
    stopped_past_grace_is_queued(Signal::SIGTERM, 143);
}

#[test]
fn dispatch_sigint_past_the_grace_period_kills_the_run_and_leaves_it_queued() {
    stopped_past_grace_is_queued(Signal::SIGINT, 130);
}

#[test]
fn the_supervisor_is_hidden_and_refuses_to_run_without_pap() {
    let help = common::pap().arg("--help").output().unwrap();
    assert!(!common::stdout(&help).contains("supervise"));
    let alone = common::pap().arg("__supervise").output().unwrap();
    assert_eq!(alone.status.code(), Some(2));
    assert!(common::stderr(&alone).contains("internal to pap"));
}
