//! How often pap syncs the disk, counted by `strace` on the real binary: an fsync is the
//! expensive part of a commit on a busy disk, so these counts are the engine's promises.
//!
//! - commands that only read (`invocations`, `audit`, `inbox`, `notifications`) never sync;
//! - an idle `pap serve` never syncs;
//! - one event through serve, with its command agent and its completion event, costs at
//!   most four.
//!
//! Needs `strace` (CI installs it; `PAP_TEST_REQUIRE_STRACE=1` makes its absence a failure).

use crate::common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::pap_at;
use common::serve::wait_until;

/// The calls that push data to the disk.
const SYNC_CALLS: &str = "trace=fdatasync,fsync,sync_file_range,syncfs,sync,msync";

fn strace() -> Option<PathBuf> {
    common::required_tool(
        "strace",
        "PAP_TEST_REQUIRE_STRACE",
        "the sync counts are not checked",
    )
}

/// The sync calls in an strace output file (an interrupted call is counted once).
fn syncs_in(log: &Path) -> Vec<String> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.contains("resumed>") && !l.contains("+++") && !l.contains("---"))
        .filter(|l| l.contains("sync"))
        .map(str::to_owned)
        .collect()
}

/// A project with one trigger and a command agent that does nothing.
fn project() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir_all(root.join("triggers")).unwrap();
    std::fs::create_dir_all(root.join("agents")).unwrap();
    std::fs::write(
        root.join("pap.yaml"),
        "pap_version: \"0.2\"\nserve:\n  max_concurrent: 2\n",
    )
    .unwrap();
    std::fs::write(
        root.join("triggers/t.yaml"),
        "pap_version: \"0.2\"\ntrigger:\n  id: t\n  match:\n    type: test.sync.happened\n  agent: noop\n",
    )
    .unwrap();
    std::fs::write(
        root.join("agents/noop.yaml"),
        "pap_version: \"0.2\"\nagent:\n  id: noop\n  risk_level: read_only\n  model:\n    provider: command\n    command: [\"true\"]\n  on_complete:\n    emit_event: pap.agent.invocation.completed\n",
    )
    .unwrap();
    dir
}

fn event(id: &str) -> String {
    format!(
        r#"{{"pap_version":"0.2","id":"{id}","type":"test.sync.happened","source":"test","time":"2026-03-11T05:59:00Z","data":{{}}}}"#
    )
}

fn cmd(root: &Path) -> Command {
    let mut c = pap_at(root);
    c.env_remove("PAP_NOW").env_remove("PAP_LOG");
    c
}

#[test]
fn commands_that_only_read_never_sync() {
    let Some(strace) = strace() else { return };
    let dir = project();
    let root = dir.path();
    std::fs::write(root.join("e.json"), event("e1")).unwrap();
    let out = cmd(root)
        .arg("dispatch")
        .arg(root.join("e.json"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", common::stderr(&out));

    for args in [
        &["invocations"][..],
        &["invocations", "--json"],
        &["audit"],
        &["inbox"],
        &["notifications"],
    ] {
        let log = root.join("reader.strace");
        let status = Command::new(&strace)
            .args(["-f", "-qq", "-e", SYNC_CALLS, "-o"])
            .arg(&log)
            .arg(env!("CARGO_BIN_EXE_pap"))
            .arg("--root")
            .arg(root)
            .args(args)
            .env_remove("PAP_NOW")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .unwrap();
        assert!(status.success(), "pap {args:?} under strace failed");
        let syncs = syncs_in(&log);
        assert!(syncs.is_empty(), "pap {args:?} synced: {syncs:#?}");
    }
}

/// `strace` attached to a running process and all its threads, writing to `log`.
struct Attached {
    child: Child,
    log: PathBuf,
}

impl Attached {
    fn to(strace: &Path, pid: u32, log: PathBuf) -> Attached {
        let mut child = Command::new(strace)
            .args(["-f", "-e", SYNC_CALLS, "-o"])
            .arg(&log)
            .arg("-p")
            .arg(pid.to_string())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start strace");
        // strace says "Process N attached" for each thread; the first says it works.
        let mut stderr = BufReader::new(child.stderr.take().unwrap());
        let mut line = String::new();
        stderr.read_line(&mut line).unwrap();
        assert!(line.contains("attached"), "strace could not attach: {line}");
        // The other threads' lines follow at once; keep the pipe drained.
        std::thread::spawn(move || for _ in stderr.lines() {});
        std::thread::sleep(Duration::from_millis(100));
        Attached { child, log }
    }

    fn syncs(mut self) -> Vec<String> {
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.child.id() as i32),
            nix::sys::signal::Signal::SIGINT,
        )
        .unwrap();
        self.child.wait().unwrap();
        syncs_in(&self.log)
    }
}

#[test]
fn an_idle_serve_never_syncs_and_one_event_costs_at_most_four() {
    let Some(strace) = strace() else { return };
    let dir = project();
    let root = dir.path();
    let log = root.join("serve.log");
    let mut serve = cmd(root)
        .args(["serve", "--log-format", "json"])
        // Each event's decision is logged at DEBUG: the test waits for the last one.
        .env("PAP_LOG", "info,pap_engine::dispatcher=debug")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let text = || std::fs::read_to_string(&log).unwrap_or_default();
    wait_until("serve to start", || text().contains("pap serve started"));

    // Idle: three seconds, in which serve's one-second tick runs three times.
    let trace = Attached::to(&strace, serve.id(), root.join("idle.strace"));
    std::thread::sleep(Duration::from_secs(3));
    let idle = trace.syncs();

    let trace = Attached::to(&strace, serve.id(), root.join("event.strace"));
    let spool = root.join(".pap/spool");
    std::fs::write(spool.join(".e.tmp"), event("e-one")).unwrap();
    std::fs::rename(spool.join(".e.tmp"), spool.join("e.json")).unwrap();
    // The completion event is decided after the run: its decision is the last thing.
    wait_until("the run and its completion event's decision", || {
        let t = text();
        t.contains("succeeded") && t.contains("no trigger matches the type")
    });
    std::thread::sleep(Duration::from_millis(200));
    let one = trace.syncs();
    let _ = serve.kill();
    let _ = serve.wait();

    assert!(idle.is_empty(), "an idle serve synced: {idle:#?}");
    assert!(
        one.len() <= 4,
        "one event with its agent took {} syncs (at most 4): {one:#?}",
        one.len()
    );
}
