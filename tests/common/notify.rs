//! A copy of the `notify` fixture project with a test dir for its agents' logs, and helpers to
//! dispatch events, read the inbox and the notification ledger through the real binary.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{Value, json};

use super::{code, fixture_copy, pap_at, stderr, stdout};

pub(crate) const T0: &str = "2026-11-21T10:00:00Z";

pub(crate) struct NotifyProject {
    pub dir: tempfile::TempDir,
    pub logs: tempfile::TempDir,
    pub now: String,
}

impl NotifyProject {
    pub(crate) fn new() -> NotifyProject {
        NotifyProject {
            dir: fixture_copy("notify"),
            logs: tempfile::tempdir().unwrap(),
            now: T0.into(),
        }
    }

    pub(crate) fn root(&self) -> &Path {
        self.dir.path()
    }

    pub(crate) fn log_dir(&self) -> PathBuf {
        self.logs.path().to_path_buf()
    }

    pub(crate) fn cmd(&self) -> Command {
        let mut c = pap_at(self.root());
        c.env("PAP_TEST_DIR", self.logs.path())
            .env("PAP_NOW", &self.now);
        c
    }

    /// Runs pap with `args`; panics with its output unless it exits with `expect`.
    pub(crate) fn run(&self, args: &[&str], expect: i32) -> Output {
        let out = self.cmd().args(args).output().unwrap();
        assert_eq!(
            code(&out),
            expect,
            "pap {args:?}\nstdout: {}\nstderr: {}",
            stdout(&out),
            stderr(&out)
        );
        out
    }

    /// Dispatches one event of type `test.<agent>.fired` with `data`.
    pub(crate) fn fire(&self, agent: &str, id: &str, data: Value) -> Output {
        let path = self.event_file(agent, id, data);
        let code = if self.expect_failure(&path) { 4 } else { 0 };
        self.run(&["dispatch", path.to_str().unwrap()], code)
    }

    pub(crate) fn event_file(&self, agent: &str, id: &str, data: Value) -> PathBuf {
        let event = json!({
            "pap_version": "0.2",
            "id": id,
            "type": format!("test.{agent}.fired"),
            "source": "tests",
            "time": T0,
            "data": data,
        });
        let path = self.logs.path().join(format!("{id}.json"));
        std::fs::write(&path, event.to_string()).unwrap();
        path
    }

    fn expect_failure(&self, path: &Path) -> bool {
        std::fs::read_to_string(path)
            .unwrap()
            .contains("\"fail\":true")
    }

    pub(crate) fn inbox(&self) -> Vec<Value> {
        lines(&self.run(&["inbox", "--json"], 0))
    }

    pub(crate) fn inbox_after(&self, after: u64, limit: usize) -> Vec<Value> {
        lines(&self.run(
            &[
                "inbox",
                "--json",
                "--after",
                &after.to_string(),
                "--limit",
                &limit.to_string(),
            ],
            0,
        ))
    }

    pub(crate) fn notifications(&self) -> Vec<Value> {
        lines(&self.run(&["notifications", "--json"], 0))
    }

    pub(crate) fn notification(&self, id: &str) -> Value {
        super::json(&self.run(&["notifications", "show", id, "--json"], 0))
    }

    /// The one notification of `kind` whose metadata names `agent`.
    pub(crate) fn notification_of(&self, agent: &str, kind: &str) -> Value {
        let all: Vec<Value> = self
            .notifications()
            .into_iter()
            .filter(|n| n["kind"] == kind && n["metadata"]["agent"] == agent)
            .collect();
        assert_eq!(all.len(), 1, "one {kind} of {agent}: {all:#?}");
        all.into_iter().next().unwrap()
    }

    pub(crate) fn invocations(&self) -> Vec<Value> {
        lines(&self.run(&["invocations", "--json"], 0))
    }

    pub(crate) fn runs_log(&self) -> String {
        std::fs::read_to_string(self.logs.path().join("runs.log")).unwrap_or_default()
    }
}

pub(crate) fn lines(out: &Output) -> Vec<Value> {
    stdout(out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// The inbox messages of one notification.
pub(crate) fn messages_of<'a>(inbox: &'a [Value], notification: &Value) -> Vec<&'a Value> {
    inbox
        .iter()
        .filter(|m| m["notification_id"] == notification["id"])
        .collect()
}
