//! A fixture project in a temp dir, driven through the real binary with an injected clock.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{Value, json};

use super::{code, fixture_copy, pap_at, stderr, stdout};

pub(crate) const T0: &str = "2026-03-11T06:00:00Z";

pub(crate) struct Project {
    pub dir: tempfile::TempDir,
}

pub(crate) struct Run {
    pub code: i32,
    pub lines: Vec<Value>,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    /// The line of `event_id` (the first, when an id occurs more than once).
    pub(crate) fn event(&self, event_id: &str) -> &Value {
        self.lines
            .iter()
            .find(|l| l["event_id"] == event_id)
            .unwrap_or_else(|| panic!("no line for {event_id}:\n{}", self.stdout))
    }

    /// The outcome entry of `trigger` on the line of `event_id`.
    pub(crate) fn trigger(&self, event_id: &str, trigger: &str) -> &Value {
        let line = self.event(event_id);
        line["triggers"]
            .as_array()
            .and_then(|ts| ts.iter().find(|t| t["trigger"] == trigger))
            .unwrap_or_else(|| panic!("no {trigger} on {event_id}: {line}"))
    }

    pub(crate) fn outcome(&self, event_id: &str, trigger: &str) -> String {
        self.trigger(event_id, trigger)["outcome"]
            .as_str()
            .unwrap()
            .to_owned()
    }
}

impl Project {
    pub(crate) fn new() -> Project {
        Project {
            dir: fixture_copy("dispatch"),
        }
    }

    pub(crate) fn root(&self) -> &Path {
        self.dir.path()
    }

    /// `pap --root ROOT` at the fake time `at`, with PAP_TEST_DIR = the root.
    pub(crate) fn cmd(&self, at: &str) -> Command {
        let mut cmd = pap_at(self.root());
        cmd.env("PAP_NOW", at).env("PAP_TEST_DIR", self.root());
        cmd
    }

    /// Writes events as NDJSON into the project; returns the path.
    pub(crate) fn events(&self, name: &str, events: &[Value]) -> PathBuf {
        let text: String = events.iter().map(|e| format!("{e}\n")).collect();
        self.write(name, &text)
    }

    pub(crate) fn write(&self, name: &str, text: &str) -> PathBuf {
        let path = self.root().join(name);
        std::fs::write(&path, text).expect("write events");
        path
    }

    /// `pap dispatch FILE --json EXTRA…` at `at`.
    pub(crate) fn dispatch(&self, at: &str, file: &Path, extra: &[&str]) -> Run {
        let out = self
            .cmd(at)
            .arg("dispatch")
            .arg(file)
            .arg("--json")
            .args(extra)
            .output()
            .expect("run pap");
        run_of(&out)
    }

    /// Dispatches `test.approval.needed` event `id`; returns the invocation that awaits
    /// approval (trigger `t-approval`, a high-risk agent).
    #[allow(dead_code)]
    pub(crate) fn awaiting(&self, id: &str) -> String {
        let file = self.events(
            &format!("{id}.ndjson"),
            &[ev(id, "test.approval.needed", json!({}))],
        );
        let run = self.dispatch(T0, &file, &[]);
        assert_eq!(run.code, 0, "{}", run.stderr);
        assert_eq!(run.outcome(id, "t-approval"), "awaiting_approval");
        run.trigger(id, "t-approval")["invocation_id"]
            .as_str()
            .unwrap()
            .to_owned()
    }

    /// `pap invocations show ID --json`.
    pub(crate) fn invocation(&self, id: &str) -> Value {
        let out = self
            .cmd(T0)
            .args(["invocations", "show", id, "--json"])
            .output()
            .unwrap();
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        serde_json::from_str(&stdout(&out)).unwrap()
    }

    /// Every invocation, from `pap invocations --json`.
    pub(crate) fn invocations(&self) -> Vec<Value> {
        let out = self
            .cmd(T0)
            .args(["invocations", "--json"])
            .output()
            .unwrap();
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        lines(&stdout(&out))
    }
}

pub(crate) fn run_of(out: &Output) -> Run {
    let text = stdout(out);
    Run {
        code: code(out),
        lines: lines(&text),
        stdout: text,
        stderr: stderr(out),
    }
}

pub(crate) fn lines(text: &str) -> Vec<Value> {
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

/// A PAP 0.2 event.
pub(crate) fn ev(id: &str, kind: &str, data: Value) -> Value {
    json!({"pap_version": "0.2", "id": id, "type": kind, "source": "test",
           "time": "2026-03-11T05:59:00Z", "data": data})
}

/// Three events of `test.filter.checked` that the fixture's `f-*` triggers tell apart: each
/// operator holds for some and not for others (see `filter_semantics_every_row`).
#[allow(dead_code)]
pub(crate) fn filter_events() -> Vec<Value> {
    vec![
        ev(
            "a",
            "test.filter.checked",
            json!({"n": 3.0, "s": "hello", "tags": ["urgent"], "items": [{"p": 1}, {"p": 5}]}),
        ),
        ev(
            "b",
            "test.filter.checked",
            json!({"n": "3", "s": "a", "opt": null}),
        ),
        ev(
            "c",
            "test.filter.checked",
            json!({"s": 5, "opt": 0, "n": 2, "items": [{"p": 1}]}),
        ),
    ]
}
