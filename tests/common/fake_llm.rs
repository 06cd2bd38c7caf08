//! A fake LLM provider: a small HTTP/1.1 server on loopback that answers each request with
//! the next scripted response (the exact Anthropic or OpenAI shapes) and records every request,
//! so a test can assert what pap sent.

use std::collections::{HashMap, VecDeque};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};

#[derive(Debug, Clone)]
pub(crate) struct Recorded {
    pub path: String,
    /// Header names in lower case.
    pub headers: HashMap<String, String>,
    pub body: Value,
}

#[derive(Debug, Clone)]
pub(crate) struct Scripted {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Value,
    /// Sent instead of `body` when set: a body that need not be JSON.
    pub raw: Option<String>,
    pub delay: Duration,
}

impl Scripted {
    pub(crate) fn ok(body: Value) -> Scripted {
        Scripted {
            status: 200,
            headers: Vec::new(),
            body,
            raw: None,
            delay: Duration::ZERO,
        }
    }

    /// An answer whose body is `text` as is.
    pub(crate) fn raw(status: u16, text: &str) -> Scripted {
        Scripted {
            status,
            raw: Some(text.to_owned()),
            ..Scripted::ok(Value::Null)
        }
    }

    pub(crate) fn status(status: u16, body: Value) -> Scripted {
        Scripted {
            status,
            ..Scripted::ok(body)
        }
    }

    pub(crate) fn header(mut self, name: &str, value: &str) -> Scripted {
        self.headers.push((name.into(), value.into()));
        self
    }

    pub(crate) fn delayed(mut self, delay: Duration) -> Scripted {
        self.delay = delay;
        self
    }
}

pub(crate) struct FakeLlm {
    pub url: String,
    requests: Arc<Mutex<Vec<Recorded>>>,
}

impl FakeLlm {
    pub(crate) fn start(script: Vec<Scripted>) -> FakeLlm {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
        let url = format!("http://{}", listener.local_addr().unwrap());
        let requests = Arc::new(Mutex::new(Vec::new()));
        let script = Arc::new(Mutex::new(VecDeque::from(script)));
        let recorded = requests.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let recorded = recorded.clone();
                let script = script.clone();
                std::thread::spawn(move || serve(stream, &recorded, &script));
            }
        });
        FakeLlm { url, requests }
    }

    pub(crate) fn requests(&self) -> Vec<Recorded> {
        self.requests.lock().unwrap().clone()
    }
}

fn serve(stream: TcpStream, recorded: &Mutex<Vec<Recorded>>, script: &Mutex<VecDeque<Scripted>>) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut request_line = String::new();
    if reader.read_line(&mut request_line).unwrap_or(0) == 0 {
        return;
    }
    let path = request_line
        .split_whitespace()
        .nth(1)
        .unwrap_or("")
        .to_owned();
    let mut headers = HashMap::new();
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((k, v)) = line.split_once(':') {
            headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_owned());
        }
    }
    let len: usize = headers
        .get("content-length")
        .and_then(|l| l.parse().ok())
        .unwrap_or(0);
    let mut body = vec![0; len];
    reader.read_exact(&mut body).unwrap();
    let body = serde_json::from_slice(&body).unwrap_or(Value::Null);
    recorded.lock().unwrap().push(Recorded {
        path,
        headers,
        body,
    });
    let next = script.lock().unwrap().pop_front().unwrap_or_else(|| {
        Scripted::status(
            500,
            json!({"error": "the test script has no more responses"}),
        )
    });
    std::thread::sleep(next.delay);
    let text = next.raw.clone().unwrap_or_else(|| next.body.to_string());
    let mut head = format!(
        "HTTP/1.1 {} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n",
        next.status,
        text.len()
    );
    for (k, v) in &next.headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    let mut stream = stream;
    let _ = stream.write_all(head.as_bytes());
    let _ = stream.write_all(text.as_bytes());
}

// ---- the providers' shapes --------------------------------------------------------------

pub(crate) fn anthropic_text(text: &str) -> Value {
    json!({"id": "msg_final", "type": "message", "role": "assistant", "model": "claude-test",
           "content": [{"type": "text", "text": text}],
           "stop_reason": "end_turn", "stop_sequence": null,
           "usage": {"input_tokens": 100, "output_tokens": 20}})
}

/// `calls`: (id, tool name, input).
pub(crate) fn anthropic_tool_use(calls: &[(&str, &str, Value)]) -> Value {
    let mut content = vec![json!({"type": "text", "text": "Let me check."})];
    content.extend(calls.iter().map(
        |(id, name, input)| json!({"type": "tool_use", "id": id, "name": name, "input": input}),
    ));
    json!({"id": "msg_tools", "type": "message", "role": "assistant", "model": "claude-test",
           "content": content, "stop_reason": "tool_use", "stop_sequence": null,
           "usage": {"input_tokens": 50, "output_tokens": 10}})
}

pub(crate) fn openai_text(text: &str) -> Value {
    json!({"id": "chatcmpl-1", "object": "chat.completion", "model": "gpt-test",
           "choices": [{"index": 0, "finish_reason": "stop",
                        "message": {"role": "assistant", "content": text}}],
           "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}})
}

/// `calls`: (id, tool name, arguments as the JSON string the API sends).
pub(crate) fn openai_tool_calls(calls: &[(&str, &str, &str)]) -> Value {
    let tool_calls: Vec<Value> = calls
        .iter()
        .map(|(id, name, args)| {
            json!({"id": id, "type": "function", "function": {"name": name, "arguments": args}})
        })
        .collect();
    json!({"id": "chatcmpl-2", "object": "chat.completion", "model": "gpt-test",
           "choices": [{"index": 0, "finish_reason": "tool_calls",
                        "message": {"role": "assistant", "content": null, "tool_calls": tool_calls}}],
           "usage": {"prompt_tokens": 50, "completion_tokens": 10, "total_tokens": 60}})
}
