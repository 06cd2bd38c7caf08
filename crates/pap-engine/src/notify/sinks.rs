//! Sinks beyond the inbox (pap.yaml `notifications.sinks`): a webhook (POST JSON, 2xx is
//! delivered), a command (the message on stdin, exit 0 is delivered) and an NDJSON file.
//!
//! A webhook URL often is the secret (Slack's is); it is expanded from `${NAME}` only here,
//! at the moment of sending, and errors never quote it.

use std::io::Write;
use std::path::Path;

use serde_json::{Value, json};

use crate::command;
use crate::domain::Level;
use crate::interpolate;
use crate::manifest::compiled_notify::{SinkSpec, SinkTarget, WebhookFormat};

/// Sends one inbox message (as `pap inbox --json` shows it) to `sink`; `console` is
/// `listen.public_url`, where a Slack message links to.
pub(crate) async fn deliver(
    sink: &SinkSpec,
    root: &Path,
    console: Option<&str>,
    message: &Value,
    trace: Option<crate::trace_context::TraceContext>,
) -> Result<(), String> {
    match &sink.target {
        SinkTarget::Webhook {
            url,
            headers,
            format,
            topic,
        } => {
            let body = body(*format, topic.as_deref(), console, message);
            webhook(sink, url, headers, &body, trace).await
        }
        SinkTarget::Command { program, args } => {
            let program = crate::manifest::compile_notify::resolve_program(root, program);
            let stdin = [serde_json::to_vec(message).expect("JSON"), b"\n".to_vec()].concat();
            command::run(command::Spec {
                program: &program,
                args,
                cwd: root,
                stdin,
                env: vec![(
                    "PAP_NOTIFICATION_ID".into(),
                    message["notification_id"].as_str().unwrap_or("").into(),
                )],
                // A sink program is the operator's own, and may need credentials that
                // pap.yaml has no way to hand it: it keeps pap's environment.
                inherit_env: true,
                timeout: sink.timeout,
                max_output: 64 * 1024,
                started: None,
                lease: None,
            })
            .await
            .map(|_| ())
            .map_err(|failed| failed.reason)
        }
        SinkTarget::Ndjson { path } => {
            let path = if path.is_absolute() {
                path.clone()
            } else {
                root.join(path)
            };
            let line = [serde_json::to_vec(message).expect("JSON"), b"\n".to_vec()].concat();
            tokio::task::spawn_blocking(move || append_line(&path, &line))
                .await
                .map_err(|e| e.to_string())?
        }
    }
}

/// One `write` of a whole line on an O_APPEND file: concurrent writers never interleave
/// inside a line.
fn append_line(path: &Path, line: &[u8]) -> Result<(), String> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    f.write_all(line)
        .map_err(|e| format!("{}: {e}", path.display()))
}

async fn webhook(
    sink: &SinkSpec,
    url: &str,
    headers: &std::collections::BTreeMap<String, String>,
    body: &Value,
    trace: Option<crate::trace_context::TraceContext>,
) -> Result<(), String> {
    let env = |name: &str| std::env::var(name).ok();
    let url = interpolate::expand(url, env).map_err(|e| format!("url: {e}"))?;
    let mut req = crate::http_client::shared()
        .post(&url)
        .timeout(sink.timeout)
        .json(body);
    for (name, value) in headers {
        let value = interpolate::expand(value, env).map_err(|e| format!("header {name}: {e}"))?;
        let mut value = reqwest::header::HeaderValue::from_str(&value)
            .map_err(|_| format!("header {name}: not a valid header value"))?;
        value.set_sensitive(true);
        req = req.header(name.as_str(), value);
    }
    // The delivery's span is the receiver's parent (W3C Trace Context).
    if let Some(cx) = trace {
        req = req.header("traceparent", cx.traceparent());
        if let Some(state) = cx.tracestate {
            req = req.header("tracestate", state);
        }
    }
    let resp = req.send().await.map_err(|e| {
        // The URL may itself be the secret (a Slack webhook): never quoted; the causes
        // (a refused connection, a DNS failure) are.
        crate::http_client::error_chain(&e.without_url())
    })?;
    let status = resp.status();
    if status.is_success() {
        Ok(())
    } else {
        Err(format!("the webhook answered HTTP {}", status.as_u16()))
    }
}

/// The body for each webhook format. `anp` is the inbox message with a one-line `text`
/// beside it, which is also what a Slack incoming webhook shows; with `console` (the
/// console's public URL), a Slack message links to the invocation's page there (an approval
/// request to the approvals page, where it is answered).
pub(crate) fn body(
    format: WebhookFormat,
    topic: Option<&str>,
    console: Option<&str>,
    message: &Value,
) -> Value {
    let level = message["level"].as_str().unwrap_or("info");
    let kind = message["kind"].as_str().unwrap_or("");
    let content = message["content"].as_str().unwrap_or("");
    let line = format!("[{level}] {kind}: {content}");
    let link = console
        .zip(message["metadata"]["invocation_id"].as_str())
        .map(|(base, id)| {
            let id = percent_path(id);
            if kind == "invocation.awaiting_approval" {
                format!("{base}/approvals#approval-{id}")
            } else {
                format!("{base}/invocations/{id}")
            }
        });
    match format {
        WebhookFormat::Anp => {
            let mut v = message.clone();
            v["text"] = json!(line);
            v
        }
        WebhookFormat::Slack => match link {
            // Slack's link syntax; `<`, `>` and `&` in the text are Slack's to escape.
            Some(url) => {
                json!({"text": format!("{} <{url}|Open in the pap console>", slack_escape(&line))})
            }
            None => json!({"text": slack_escape(&line)}),
        },
        WebhookFormat::Ntfy => json!({
            "topic": topic.unwrap_or(""),
            "title": format!("pap: {kind}"),
            "message": content,
            "priority": ntfy_priority(level),
            "tags": [level],
        }),
    }
}

fn ntfy_priority(level: &str) -> u8 {
    match level {
        l if l == Level::Critical.as_str() => 5,
        l if l == Level::Error.as_str() || l == Level::Warning.as_str() => 4,
        _ => 3,
    }
}

/// Slack's three control characters in message text, escaped as its docs say.
fn slack_escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// An id as one URL path segment (ids are `inv_` and hex; anything else is encoded).
fn percent_path(id: &str) -> String {
    id.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.') {
                char::from(b).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slack_message_links_to_the_console_when_it_has_a_public_url() {
        let msg = json!({"level": "warning", "kind": "invocation.awaiting_approval",
                         "content": "HighLatency (page) on api:8000: p99 <2s> & more",
                         "metadata": {"invocation_id": "inv_1"}});
        let text = body(
            WebhookFormat::Slack,
            None,
            Some("https://pap.example"),
            &msg,
        )["text"]
            .as_str()
            .unwrap()
            .to_owned();
        assert_eq!(
            text,
            "[warning] invocation.awaiting_approval: HighLatency (page) on api:8000: p99 &lt;2s&gt; &amp; more <https://pap.example/approvals#approval-inv_1|Open in the pap console>"
        );
        let mut done = msg.clone();
        done["kind"] = json!("invocation.succeeded");
        let text = body(
            WebhookFormat::Slack,
            None,
            Some("https://pap.example"),
            &done,
        );
        assert!(
            text["text"]
                .as_str()
                .unwrap()
                .ends_with("<https://pap.example/invocations/inv_1|Open in the pap console>")
        );
    }

    #[test]
    fn bodies_follow_each_format() {
        let msg =
            json!({"level": "error", "kind": "invocation.failed", "content": "boom", "id": 3});
        assert_eq!(
            body(WebhookFormat::Slack, None, None, &msg),
            json!({"text": "[error] invocation.failed: boom"})
        );
        let ntfy = body(WebhookFormat::Ntfy, Some("ops"), None, &msg);
        assert_eq!(
            (ntfy["topic"].as_str(), ntfy["priority"].as_u64()),
            (Some("ops"), Some(4))
        );
        let anp = body(WebhookFormat::Anp, None, None, &msg);
        assert_eq!(anp["id"], 3);
        assert_eq!(anp["text"], "[error] invocation.failed: boom");
    }
}
