//! MCP clients nobody on this project wrote, driving `pap mcp` and `/mcp`: the official
//! Python SDK (`mcp` on PyPI, through `tests/fixtures/mcp_client/client.py`) and the MCP
//! Inspector's command-line mode (npm). `.ci/run` installs both and sets
//! PAP_TEST_REQUIRE_MCP_CLIENTS, which turns a missing one into a failure.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::Value;

const REQUIRE: &str = "PAP_TEST_REQUIRE_MCP_CLIENTS";

fn missing(what: &str) {
    assert!(
        std::env::var_os(REQUIRE).is_none(),
        "{REQUIRE} is set but {what} is missing; `bash .ci/run` installs it"
    );
    super::skip_note(&format!(
        "{what} is not installed (`bash .ci/run` installs it): pap's MCP server is not driven by it"
    ));
}

/// `python3` with the `mcp` package, or a skip.
pub(crate) fn python_sdk() -> Option<PathBuf> {
    let ok = Command::new("python3")
        .args(["-c", "import mcp.client.stdio, mcp.client.streamable_http"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        missing("the MCP Python SDK (pip install mcp)");
        return None;
    }
    Some(super::fixture("mcp_client/client.py"))
}

/// The MCP Inspector's CLI, where `.ci/run` puts it (or `PAP_TEST_MCP_INSPECTOR`).
pub(crate) fn inspector() -> Option<PathBuf> {
    let path = std::env::var_os("PAP_TEST_MCP_INSPECTOR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("target/mcp-servers/node_modules/.bin/mcp-inspector")
        });
    if path.exists() {
        return Some(path);
    }
    missing(&format!("the MCP Inspector ({})", path.display()));
    None
}

/// How a client reaches pap: `pap --root ROOT mcp ARGS…` over stdio, or a URL and token.
pub(crate) enum Server<'a> {
    Stdio { root: &'a Path, args: &'a [&'a str] },
    Http { url: String, token: &'a str },
}

impl Server<'_> {
    fn argv(&self) -> Vec<String> {
        match self {
            Server::Stdio { root, args } => {
                let mut v = vec![
                    "stdio".to_owned(),
                    env!("CARGO_BIN_EXE_pap").to_owned(),
                    "--root".to_owned(),
                    root.display().to_string(),
                    "mcp".to_owned(),
                ];
                v.extend(args.iter().map(|a| a.to_string()));
                v
            }
            Server::Http { url, token } => {
                vec!["http".to_owned(), url.clone(), token.to_string()]
            }
        }
    }
}

/// A Python client session running a scenario, its output read line by line.
pub(crate) struct PyClient {
    child: Child,
    lines: mpsc::Receiver<Value>,
}

impl PyClient {
    pub(crate) fn start(
        client: &Path,
        scenario: &str,
        options: Value,
        server: &Server<'_>,
        env: &[(&str, &str)],
    ) -> PyClient {
        let mut child = Command::new("python3")
            .arg(client)
            .arg(scenario)
            .arg(options.to_string())
            .args(server.argv())
            .envs(env.iter().copied())
            .env_remove("PAP_ROOT")
            .env_remove("PAP_STATE")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start python3");
        let stdout: ChildStdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                match serde_json::from_str::<Value>(&line) {
                    Ok(v) => {
                        if tx.send(v).is_err() {
                            return;
                        }
                    }
                    Err(_) => eprintln!("client: {line}"),
                }
            }
        });
        PyClient { child, lines }
    }

    /// The next line whose `step` is `step` (earlier lines are dropped).
    pub(crate) fn step(&mut self, step: &str) -> Value {
        let deadline = super::serve::patience();
        loop {
            match self.lines.recv_timeout(deadline) {
                Ok(v) if v["step"] == step => return v,
                Ok(_) => continue,
                Err(_) => {
                    let _ = self.child.kill();
                    panic!("the Python MCP client never reported {step:?}");
                }
            }
        }
    }

    /// Waits for the client to finish; its exit status must be success.
    pub(crate) fn finish(mut self) {
        let status = self.child.wait().unwrap();
        assert!(status.success(), "the Python MCP client failed: {status}");
    }
}

impl Drop for PyClient {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs a scenario to its end and returns its lines by step.
pub(crate) fn run(
    client: &Path,
    scenario: &str,
    options: Value,
    server: &Server<'_>,
    env: &[(&str, &str)],
) -> Vec<Value> {
    let c = PyClient::start(client, scenario, options, server, env);
    let mut all = Vec::new();
    loop {
        match c.lines.recv_timeout(super::serve::patience()) {
            Ok(v) => {
                let done = v["step"] == "done";
                all.push(v);
                if done {
                    break;
                }
            }
            Err(_) => panic!("the Python MCP client stopped before `done`: {all:?}"),
        }
    }
    c.finish();
    all
}

/// The line of `step` among a scenario's lines.
pub(crate) fn step<'a>(lines: &'a [Value], step: &str) -> &'a Value {
    lines
        .iter()
        .find(|l| l["step"] == step)
        .unwrap_or_else(|| panic!("no {step:?} in {lines:?}"))
}

/// `mcp-inspector --cli` against `pap mcp` (stdio) or a URL, with `args`; its stdout as JSON.
pub(crate) fn inspect(inspector: &Path, server: &Server<'_>, args: &[&str]) -> Value {
    let mut cmd = Command::new(inspector);
    cmd.arg("--cli");
    match server {
        Server::Stdio { root, args: extra } => {
            cmd.arg(env!("CARGO_BIN_EXE_pap"))
                .arg("--root")
                .arg(root)
                .arg("mcp")
                .args(*extra);
        }
        Server::Http { url, token } => {
            cmd.arg(url).args(["--transport", "http"]);
            if !token.is_empty() {
                cmd.arg("--header")
                    .arg(format!("Authorization: Bearer {token}"));
            }
        }
    }
    let out = cmd
        .args(args)
        .env_remove("PAP_ROOT")
        .env_remove("PAP_STATE")
        .stdin(Stdio::null())
        .output()
        .expect("run the MCP Inspector");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "mcp-inspector {args:?} failed: {}\n{}",
        text,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("inspector output is not JSON ({e}): {text}"))
}

/// Waits up to [`super::serve::patience`] for `cond`.
pub(crate) fn eventually(what: &str, cond: impl FnMut() -> bool) {
    super::serve::wait_until(what, cond);
}

/// Short pause for "nothing arrives" windows.
pub(crate) const QUIET: Duration = Duration::from_millis(1500);
