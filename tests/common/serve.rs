//! A `pap serve` process on a fixture project, driven through real files and signals.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::dispatch::lines;
use super::{fixture_copy, pap_at, stdout};

/// Generous: these wait for real processes on a shared machine, and return as soon as the
/// condition holds. `PAP_TEST_PATIENCE` (seconds) raises it for full-size runs outside CI.
pub(crate) fn patience() -> Duration {
    let secs = std::env::var("PAP_TEST_PATIENCE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(60);
    Duration::from_secs(secs)
}

pub(crate) struct Project {
    pub dir: tempfile::TempDir,
}

impl Project {
    pub(crate) fn new() -> Project {
        Project {
            dir: fixture_copy("serve"),
        }
    }

    pub(crate) fn root(&self) -> &Path {
        self.dir.path()
    }

    pub(crate) fn spool(&self) -> PathBuf {
        self.root().join(".pap/spool")
    }

    /// `pap --root ROOT` with PAP_TEST_DIR set for the agents, and PAP_TEST_SLOW and
    /// PAP_TEST_SECONDS (which the slow and long agents' `model.env` pass on) at their
    /// defaults of 2 and 30 seconds.
    pub(crate) fn cmd(&self) -> Command {
        let mut cmd = pap_at(self.root());
        cmd.env("PAP_TEST_DIR", self.root())
            .env("PAP_TEST_SLOW", "2")
            .env("PAP_TEST_SECONDS", "30")
            .env_remove("PAP_NOW")
            .env_remove("PAP_LOG");
        cmd
    }

    /// Starts `pap serve EXTRA…` with stderr (the log) in `serve.log`.
    pub(crate) fn serve(&self, extra: &[&str]) -> Serve {
        self.serve_with(extra, &[])
    }

    pub(crate) fn serve_with(&self, extra: &[&str], env: &[(&str, &str)]) -> Serve {
        let before = started_count(&self.root().join("serve.log"));
        let mut serve = self.spawn_serve(extra, env);
        // The log is shared by every serve of the project: wait for this one's line.
        let log = serve.log.clone();
        serve.wait_while_alive("pap serve started", || started_count(&log) > before);
        serve
    }

    /// Starts `pap serve EXTRA…` like [`Project::serve_with`], without waiting for it.
    pub(crate) fn spawn_serve(&self, extra: &[&str], env: &[(&str, &str)]) -> Serve {
        let log = self.root().join("serve.log");
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .unwrap();
        let child = self
            .cmd()
            .arg("serve")
            .args(extra)
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .stderr(file)
            .spawn()
            .expect("start pap serve");
        Serve { child, log }
    }

    /// Writes `text` under a temporary name, then renames it into the spool, as writers must.
    pub(crate) fn drop_file(&self, name: &str, text: &str) {
        let spool = self.spool();
        std::fs::create_dir_all(&spool).unwrap();
        let tmp = spool.join(format!(".{name}.tmp"));
        std::fs::write(&tmp, text).unwrap();
        std::fs::rename(&tmp, spool.join(name)).unwrap();
    }

    pub(crate) fn drop_events(&self, name: &str, events: &[Value]) {
        let text: String = events.iter().map(|e| format!("{e}\n")).collect();
        self.drop_file(name, &text);
    }

    pub(crate) fn invocations(&self) -> Vec<Value> {
        let out = self.cmd().args(["invocations", "--json"]).output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        lines(&stdout(&out))
    }

    /// The status of invocation `id` (empty when there is none).
    pub(crate) fn invocation_status(&self, id: &str) -> String {
        self.invocations()
            .into_iter()
            .find(|i| i["id"] == id)
            .and_then(|i| i["status"].as_str().map(str::to_owned))
            .unwrap_or_default()
    }

    /// The invocations of `event_id`.
    pub(crate) fn invocations_of(&self, event_id: &str) -> Vec<Value> {
        self.invocations()
            .into_iter()
            .filter(|i| i["event_id"] == event_id)
            .collect()
    }

    /// Lines of runs.log (`start|end INVOCATION ATTEMPT`).
    pub(crate) fn runs(&self) -> Vec<String> {
        std::fs::read_to_string(self.root().join("runs.log"))
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    /// The files in spool dir `sub`, and in its directories as `DIR/NAME` (on PostgreSQL a
    /// node claims into `processing/NODE/`).
    pub(crate) fn files_in(&self, sub: &str) -> Vec<String> {
        let mut names = Vec::new();
        for entry in std::fs::read_dir(self.spool().join(sub))
            .into_iter()
            .flatten()
            .flatten()
        {
            let name = entry.file_name().to_string_lossy().into_owned();
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                for inner in std::fs::read_dir(entry.path())
                    .into_iter()
                    .flatten()
                    .flatten()
                {
                    names.push(format!("{name}/{}", inner.file_name().to_string_lossy()));
                }
            } else {
                names.push(name);
            }
        }
        names.sort();
        names
    }
}

pub(crate) struct Serve {
    pub child: Child,
    pub log: PathBuf,
}

impl Serve {
    pub(crate) fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    pub(crate) fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// As [`wait_until`], and a timeout shows serve's log (the why of a hang).
    pub(crate) fn wait_for(&self, what: &str, mut cond: impl FnMut() -> bool) {
        let started = Instant::now();
        while !cond() {
            assert!(
                started.elapsed() < patience(),
                "timed out waiting for {what}; serve's log:\n{}",
                self.log_text()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub(crate) fn wait_log(&self, needle: &str) {
        let log = self.log.clone();
        wait_until(&format!("`{needle}` in the serve log"), || {
            std::fs::read_to_string(&log).is_ok_and(|t| t.contains(needle))
        });
    }

    pub(crate) fn signal(&self, sig: nix::sys::signal::Signal) {
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(self.pid()), sig).unwrap();
    }

    /// SIGTERM, then waits; returns the exit code and how long the exit took.
    pub(crate) fn terminate(mut self) -> (i32, Duration) {
        let started = Instant::now();
        self.signal(nix::sys::signal::Signal::SIGTERM);
        let status = self.child.wait().unwrap();
        (status.code().unwrap_or(-1), started.elapsed())
    }

    /// Waits for serve to exit (after a signal sent with [`Serve::signal`]).
    pub(crate) fn wait_exit(mut self) -> i32 {
        self.child.wait().unwrap().code().unwrap_or(-1)
    }

    /// Polls `cond` like [`wait_until`], but fails at once, with the end of serve's log, if
    /// serve exits meanwhile (a wait for a dead serve would only time out).
    pub(crate) fn wait_while_alive(&mut self, what: &str, mut cond: impl FnMut() -> bool) {
        let started = Instant::now();
        while !cond() {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!(
                    "serve exited ({status}) while waiting for {what}; the end of its log:\n{}",
                    self.log_tail()
                );
            }
            if started.elapsed() >= patience() {
                panic!(
                    "timed out waiting for {what}; the end of the serve log:\n{}",
                    self.log_tail()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The last 30 lines of the serve log.
    fn log_tail(&self) -> String {
        let log = self.log_text();
        let tail: Vec<&str> = log.lines().rev().take(30).collect();
        tail.into_iter().rev().collect::<Vec<_>>().join("\n")
    }

    pub(crate) fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn started_count(log: &Path) -> usize {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .matches("pap serve started")
        .count()
}

/// Polls `cond` until it holds, failing the test after [`patience`].
pub(crate) fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let started = Instant::now();
    while !cond() {
        assert!(
            started.elapsed() < patience(),
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}
