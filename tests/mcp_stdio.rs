//! `pap mcp` answers every line that asks for an answer, broken ones included, as JSON-RPC
//! 2.0 says: `-32700` with `id: null` for a line that is not JSON (or is nested past the
//! parser's depth), `-32600` for a message it does not take or a line over 16 MiB (with the
//! request's id when it can be read). Before, such a line got nothing, and the client waited
//! for its answer forever. Driven by a client that writes raw bytes (to send what no SDK
//! sends) and by the official Python SDK.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::common;
use common::mcp::{self, Server, run, step};
use common::serve::Project;
use serde_json::{Value, json};

/// The bound on an answer to a broken line (the issue's: within a second).
const PROMPT: Duration = Duration::from_secs(1);

/// Past the limit of one line (16 MiB).
const OVER_LIMIT: usize = 17 << 20;

fn chat() -> Project {
    Project {
        dir: common::fixture_copy("chat"),
    }
}

/// `pap mcp` on pipes, its stdout read line by line as JSON.
struct Raw {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<Value>,
}

impl Raw {
    fn start(p: &Project) -> Raw {
        let mut child = p
            .cmd()
            .arg("mcp")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start pap mcp");
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let value = serde_json::from_str(&line).unwrap_or_else(|e| {
                    panic!("pap mcp wrote a line that is not JSON ({e}): {line}")
                });
                if tx.send(value).is_err() {
                    return;
                }
            }
        });
        Raw {
            child,
            stdin: Some(stdin),
            lines,
        }
    }

    /// Writes `line` and its newline; returns when it was all written.
    fn send(&mut self, line: &[u8]) -> Instant {
        let stdin = self.stdin.as_mut().expect("open");
        stdin.write_all(line).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
        Instant::now()
    }

    /// Closes stdin, which ends the session; how pap mcp then exited.
    fn finish(&mut self) -> std::process::ExitStatus {
        self.stdin = None;
        self.child.wait().unwrap()
    }

    /// The next line, and how long after `since` it came; panics when none comes in `wait`.
    fn next(&self, since: Instant, wait: Duration, what: &str) -> (Value, Duration) {
        let line = self
            .lines
            .recv_timeout(wait)
            .unwrap_or_else(|_| panic!("pap mcp gave no answer to {what} within {wait:?}"));
        (line, since.elapsed())
    }
}

impl Drop for Raw {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `{"a": [[…]]}` nested `depth` levels deep.
fn nested(depth: usize) -> String {
    format!("{}{}", "[".repeat(depth), "]".repeat(depth))
}

#[test]
fn broken_lines_are_answered_with_json_rpc_errors_and_the_session_goes_on() {
    let p = chat();
    let mut raw = Raw::start(&p);
    let began = raw.send(
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "raw-pipe", "version": "1"}}})
        .to_string()
        .as_bytes(),
    );
    let (init, _) = raw.next(began, common::serve::patience(), "initialize");
    assert_eq!(init["id"], 1, "{init}");
    assert_eq!(init["result"]["serverInfo"]["name"], "pap", "{init}");
    raw.send(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);

    let filler = "a".repeat(OVER_LIMIT);
    let cases: Vec<(&str, Vec<u8>, i64, Value)> = vec![
        (
            "a line that is not JSON",
            br#"{"jsonrpc":"2.0","id":2,"method":"tools/list""#.to_vec(),
            -32700,
            Value::Null,
        ),
        (
            "a line nested past the parser's depth",
            format!(
                r#"{{"jsonrpc":"2.0","id":3,"method":"ping","params":{{"a":{}}}}}"#,
                nested(300)
            )
            .into_bytes(),
            -32700,
            Value::Null,
        ),
        (
            "a line over 16 MiB with its id first",
            format!(
                r#"{{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{{"name":"chat_read_since","arguments":{{"x":"{filler}"}}}}}}"#
            )
            .into_bytes(),
            -32600,
            json!(4),
        ),
        (
            "a line over 16 MiB with its id last",
            format!(
                r#"{{"method":"tools/call","params":{{"name":"chat_read_since","arguments":{{"x":"{filler}"}}}},"jsonrpc":"2.0","id":"five"}}"#
            )
            .into_bytes(),
            -32600,
            json!("five"),
        ),
        (
            "a request of the wrong shape",
            br#"{"jsonrpc":"2.0","id":6,"method":"tools/call","params":"x"}"#.to_vec(),
            -32600,
            json!(6),
        ),
    ];
    for (what, line, code, id) in cases {
        let sent = raw.send(&line);
        let (reply, took) = raw.next(sent, Duration::from_secs(10), what);
        println!("{what}: {} after {took:?}", reply["error"]["message"]);
        assert_eq!(reply["jsonrpc"], "2.0", "{what}: {reply}");
        assert_eq!(reply["error"]["code"], code, "{what}: {reply}");
        assert_eq!(reply["id"], id, "{what}: {reply}");
        assert!(
            reply.as_object().unwrap().contains_key("id"),
            "{what}: `id` is there, null or not: {reply}"
        );
        assert!(took <= PROMPT, "{what}: answered after {took:?}");
    }

    // The session goes on: the next request is answered.
    let sent = raw.send(br#"{"jsonrpc":"2.0","id":7,"method":"tools/list"}"#);
    let (listed, _) = raw.next(sent, common::serve::patience(), "tools/list");
    assert_eq!(listed["id"], 7, "{listed}");
    assert!(!listed["result"]["tools"].as_array().unwrap().is_empty());
    // Nothing more came (a notification, even a broken one, is never answered).
    raw.send(br#"{"jsonrpc":"2.0","method":"notifications/initialized","params":7}"#);
    let sent = raw.send(br#"{"jsonrpc":"2.0","id":8,"method":"ping"}"#);
    let (pong, _) = raw.next(sent, common::serve::patience(), "ping");
    assert_eq!(pong["id"], 8, "{pong}");
    let status = raw.finish();
    assert!(status.success(), "pap mcp ended with {status}");
}

#[test]
fn the_python_sdk_hears_about_its_over_long_request_and_goes_on() {
    let Some(py) = mcp::python_sdk() else {
        return;
    };
    let p = chat();
    let lines = run(
        &py,
        "broken",
        json!({
            "lines": ["{oops", format!("{{\"a\": {}}}", nested(300)), "[]"],
            "long": OVER_LIMIT,
        }),
        &Server::Stdio {
            root: p.root(),
            args: &[],
        },
        &[],
    );
    assert!(
        !step(&lines, "after-lines")["names"]
            .as_array()
            .unwrap()
            .is_empty()
    );
    let long = step(&lines, "long");
    assert_eq!(long["code"], -32600, "{long}");
    let took = long["seconds"].as_f64().unwrap();
    println!(
        "the over-long call_tool failed after {took:.3} s: {}",
        long["message"]
    );
    assert!(took <= PROMPT.as_secs_f64(), "{long}");
    assert!(
        !step(&lines, "after-long")["names"]
            .as_array()
            .unwrap()
            .is_empty()
    );
}
