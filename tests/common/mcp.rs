//! MCP clients nobody on this project wrote, driving `pap mcp` and `/mcp`: the official
//! Python SDK (`mcp` on PyPI, through `tests/fixtures/mcp_client/client.py`) and the MCP
//! Inspector's command-line mode (npm). `.ci/run` installs both and sets
//! PAP_TEST_REQUIRE_MCP_CLIENTS, which turns a missing one into a failure.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{OnceLock, mpsc};
use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

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

/// `python3` with the `mcp` package, or a skip. The check finds the package without importing
/// it (an import takes the SDK over a second of CPU), once per test process.
pub(crate) fn python_sdk() -> Option<PathBuf> {
    static FOUND: OnceLock<bool> = OnceLock::new();
    let found = *FOUND.get_or_init(|| {
        Command::new("python3")
            .args([
                "-c",
                "import importlib.util, sys; sys.exit(importlib.util.find_spec('mcp') is None)",
            ])
            .output()
            .is_ok_and(|o| o.status.success())
    });
    if !found {
        missing("the MCP Python SDK (pip install mcp)");
        return None;
    }
    Some(super::fixture("mcp_client/client.py"))
}

/// The test process's forkserver (`client.py --forkserver`): it has imported the SDK, and forks
/// a client per request. Started at the first request; it ends with this process, when the pipe
/// to its stdin closes.
struct Forkserver {
    socket: PathBuf,
    _child: Child,
    _dir: tempfile::TempDir,
}

fn forkserver(client: &Path) -> &'static Forkserver {
    static SERVER: OnceLock<Forkserver> = OnceLock::new();
    SERVER.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("forkserver.sock");
        let mut child = Command::new("python3")
            .arg(client)
            .arg("--forkserver")
            .arg(&socket)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start python3");
        let mut ready = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut ready)
            .unwrap();
        assert_eq!(ready.trim(), "ready", "the Python forkserver did not start");
        Forkserver {
            socket,
            _child: child,
            _dir: dir,
        }
    })
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

/// A Python client session running a scenario (a process the forkserver forked), its output
/// read line by line.
pub(crate) struct PyClient {
    pid: Pid,
    lines: mpsc::Receiver<Value>,
    finished: bool,
}

impl PyClient {
    pub(crate) fn start(
        client: &Path,
        scenario: &str,
        options: Value,
        server: &Server<'_>,
        env: &[(&str, &str)],
    ) -> PyClient {
        let mut argv = vec![scenario.to_owned(), options.to_string()];
        argv.extend(server.argv());
        let env: serde_json::Map<String, Value> = env
            .iter()
            .map(|(k, v)| (k.to_string(), Value::from(*v)))
            .collect();
        let request = serde_json::json!({
            "argv": argv,
            "env": env,
            "unset": ["PAP_ROOT", "PAP_STATE"],
        });
        let mut conn = UnixStream::connect(&forkserver(client).socket).expect("the forkserver");
        writeln!(conn, "{request}").unwrap();
        let mut reader = BufReader::new(conn);
        let mut first = String::new();
        reader.read_line(&mut first).unwrap();
        let forked: Value = serde_json::from_str(&first)
            .unwrap_or_else(|_| panic!("the forkserver answered {first:?}"));
        let pid = Pid::from_raw(forked["pid"].as_i64().expect("a pid") as i32);
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in reader.lines().map_while(Result::ok) {
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
        PyClient {
            pid,
            lines,
            finished: false,
        }
    }

    /// The next line whose `step` is `step` (earlier lines are dropped).
    pub(crate) fn step(&mut self, step: &str) -> Value {
        let deadline = super::serve::patience();
        loop {
            match self.lines.recv_timeout(deadline) {
                Ok(v) if v["step"] == step => return v,
                Ok(_) => continue,
                Err(_) => {
                    let _ = kill(self.pid, Signal::SIGKILL);
                    panic!("the Python MCP client never reported {step:?}");
                }
            }
        }
    }

    /// Waits for the client to finish; its exit status must be success. The forked process
    /// says its status as its last line (the forkserver, not this process, is its parent).
    pub(crate) fn finish(mut self) {
        let mut status = None;
        while let Ok(line) = self.lines.recv_timeout(super::serve::patience()) {
            if line["step"] == "exit" {
                status = line["code"].as_i64();
            }
        }
        // Its connection closed: it has ended, or hangs (then the drop below kills it).
        self.finished = status.is_some();
        assert_eq!(status, Some(0), "the Python MCP client failed");
    }
}

impl Drop for PyClient {
    fn drop(&mut self) {
        // A client dropped before its end (a test that failed, or stopped it) is killed by its
        // pid. One that said its exit status is not: the kernel reaps the forkserver's children
        // at once, so its pid may already be another process's.
        if !self.finished {
            let _ = kill(self.pid, Signal::SIGKILL);
        }
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
