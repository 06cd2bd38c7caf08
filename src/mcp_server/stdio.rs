//! `pap mcp`'s transport over stdin/stdout: one JSON-RPC message per line, and an answer to
//! every line that asks for one, even a broken one.
//!
//! rmcp's own stdio transport (3.9.0, `AsyncRwTransport`) ignores a line that is not JSON
//! (deliberately: rust-sdk issue 938, as the other SDKs do, for fear of a storm of errors
//! answering errors) and drops a line over 16 MiB, so a client that sent either waits for
//! its answer forever. JSON-RPC 2.0 says otherwise: invalid JSON gets `-32700` (Parse error)
//! and an object that is not a valid request gets `-32600` (Invalid Request), with `id: null`
//! when the id cannot be read. An answer is one short line per line received, so it cannot
//! grow into a storm. This transport does that, and leaves rmcp itself unchanged:
//! - a line that is not JSON, or nested deeper than the parser goes: `-32700`, `id: null`;
//! - well-formed JSON that is not a message rmcp takes: `-32600`, with the request's id when
//!   it is a request with one (a response or a notification is never answered);
//! - a line over 16 MiB (`stdio_lines`): read to its end unkept, `-32600` with its id when
//!   its first or last bytes show it.
//!
//! Every line out, answers and these errors alike, goes through one writer task, in order
//! and whole; a reader that stops reading holds back `receive` (one error waits at most), so
//! a client cannot make errors pile up in memory.

use std::collections::VecDeque;

use rmcp::RoleServer;
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot};

use super::stdio_lines::{Got, Lines, MAX_LINE, is_request_id};

/// Lines waiting for the writer; `send` waits beyond that.
const QUEUED: usize = 64;

/// The transport on this process's stdin and stdout.
pub(crate) fn transport() -> Stdio<tokio::io::Stdin> {
    Stdio::new(tokio::io::stdin(), tokio::io::stdout())
}

pub(crate) struct Stdio<R> {
    lines: Lines<R>,
    out: Option<mpsc::Sender<Out>>,
    /// Errors to write before the next line is read.
    errors: VecDeque<Vec<u8>>,
}

/// One line for the writer, and who waits to hear it was written.
struct Out {
    line: Vec<u8>,
    written: Option<oneshot::Sender<std::io::Result<()>>>,
}

impl<R: AsyncRead + Unpin + Send> Stdio<R> {
    /// Starts the writer task (on the current runtime).
    pub(crate) fn new<W: AsyncWrite + Unpin + Send + 'static>(read: R, write: W) -> Stdio<R> {
        let (out, queue) = mpsc::channel(QUEUED);
        tokio::spawn(write_lines(write, queue));
        Stdio {
            lines: Lines::new(read),
            out: Some(out),
            errors: VecDeque::new(),
        }
    }

    /// Hands the pending errors to the writer; false when it is gone.
    async fn flush_errors(&mut self) -> bool {
        while !self.errors.is_empty() {
            let Some(out) = &self.out else { return false };
            // Cancel-safe: a dropped wait for room leaves the error queued here.
            let Ok(room) = out.reserve().await else {
                return false;
            };
            let line = self.errors.pop_front().expect("not empty");
            room.send(Out {
                line,
                written: None,
            });
        }
        true
    }
}

async fn write_lines(mut write: impl AsyncWrite + Unpin, mut queue: mpsc::Receiver<Out>) {
    while let Some(Out { line, written }) = queue.recv().await {
        let result = async {
            write.write_all(&line).await?;
            write.flush().await
        }
        .await;
        let failed = result.is_err();
        match written {
            Some(tell) => {
                let _ = tell.send(result);
            }
            None => {
                if let Err(e) = result {
                    tracing::warn!(error = %e, "cannot write an error to the MCP client");
                }
            }
        }
        if failed {
            return;
        }
    }
}

impl<R: AsyncRead + Unpin + Send + 'static> Transport<RoleServer> for Stdio<R> {
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let out = self.out.clone();
        async move {
            let gone = || std::io::Error::new(std::io::ErrorKind::NotConnected, "stdout is closed");
            let out = out.ok_or_else(gone)?;
            let mut line = serde_json::to_vec(&item)?;
            line.push(b'\n');
            let (tell, written) = oneshot::channel();
            out.send(Out {
                line,
                written: Some(tell),
            })
            .await
            .map_err(|_| gone())?;
            written.await.map_err(|_| gone())?
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        loop {
            if !self.flush_errors().await {
                return None;
            }
            match self.lines.next().await {
                Got::End => return None,
                Got::Failed(e) => {
                    tracing::error!(error = %e, "cannot read the MCP client's input");
                    return None;
                }
                Got::TooLong(long) => {
                    tracing::warn!(bytes = long.size, "an MCP message over 16 MiB, not read");
                    self.errors.push_back(error_line(
                        long.id(),
                        -32600,
                        format!(
                            "Invalid Request: the message is {} bytes, more than the {MAX_LINE} \
                             a line may have (16 MiB); it was not read",
                            long.size
                        ),
                    ));
                }
                Got::Line => match classify(self.lines.line()) {
                    Line::Message(message) => return Some(*message),
                    Line::Nothing => {}
                    Line::Answer(error) => self.errors.push_back(error),
                },
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        // The writer ends once the last line queued is written.
        self.out = None;
        Ok(())
    }
}

/// What one line is.
enum Line {
    Message(Box<RxJsonRpcMessage<RoleServer>>),
    /// Blank, or a notification nobody answers.
    Nothing,
    /// An error line to write back.
    Answer(Vec<u8>),
}

fn classify(line: &[u8]) -> Line {
    let line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
    if line.trim_ascii().is_empty() {
        return Line::Nothing;
    }
    let err = match serde_json::from_slice::<RxJsonRpcMessage<RoleServer>>(line) {
        Ok(message) => return Line::Message(Box::new(message)),
        Err(err) => err,
    };
    use serde_json::error::Category;
    if matches!(err.classify(), Category::Syntax | Category::Eof) {
        tracing::debug!(error = %err, "an MCP line that is not JSON");
        let why = if err.to_string().starts_with("recursion limit exceeded") {
            "nested more than 128 levels deep".to_owned()
        } else {
            err.to_string()
        };
        return Line::Answer(error_line(
            Value::Null,
            -32700,
            format!("Parse error: the line is not valid JSON ({why})"),
        ));
    }
    // Well-formed, but not a message rmcp takes. It parses again as a value (same limits).
    let value = serde_json::from_slice::<Value>(line).unwrap_or(Value::Null);
    let method = value.get("method").and_then(Value::as_str);
    if method.is_some() && value.get("id").is_none() {
        // A notification (of a kind rmcp does not know, or malformed): never answered.
        tracing::debug!(error = %err, "an MCP notification not taken");
        return Line::Nothing;
    }
    let id = match value.get("id") {
        Some(id) if method.is_some() && is_request_id(id) => id.clone(),
        _ => Value::Null,
    };
    tracing::debug!(error = %err, "an MCP message not taken");
    Line::Answer(error_line(
        id,
        -32600,
        format!("Invalid Request: not a message this server takes ({err})"),
    ))
}

/// A JSON-RPC 2.0 error response, as a line.
fn error_line(id: Value, code: i64, message: String) -> Vec<u8> {
    let mut line = json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
        .to_string()
        .into_bytes();
    line.push(b'\n');
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(line: impl AsRef<[u8]>) -> Option<Value> {
        let line = line.as_ref();
        match classify(line) {
            Line::Answer(bytes) => Some(serde_json::from_slice(&bytes).unwrap()),
            Line::Nothing => None,
            Line::Message(m) => panic!("{} was taken: {m:?}", String::from_utf8_lossy(line)),
        }
    }

    #[test]
    fn broken_lines_get_the_json_rpc_error_they_call_for() {
        let parse = answer("{oops").unwrap();
        assert_eq!(parse["id"], Value::Null);
        assert_eq!(parse["error"]["code"], -32700);
        assert_eq!(parse["jsonrpc"], "2.0");
        let deep = answer(format!("{}{}", "[".repeat(200), "]".repeat(200))).unwrap();
        assert_eq!(deep["error"]["code"], -32700);
        assert!(
            deep["error"]["message"]
                .as_str()
                .unwrap()
                .contains("nested more than 128 levels deep"),
            "{deep}"
        );
        let not_utf8 = answer(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"p\xff\"}");
        assert_eq!(not_utf8.unwrap()["error"]["code"], -32700);
        // A request of the wrong shape: its id is answered.
        let shape = answer(r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":7}"#);
        let shape = shape.unwrap();
        assert_eq!(
            (shape["id"].clone(), shape["error"]["code"].clone()),
            (5.into(), (-32600).into())
        );
        for unreadable_id in [
            r#"{"jsonrpc":"2.0","id":{"x":1},"method":"ping"}"#,
            r#"{"jsonrpc":"1.0","id":3,"result":{}}"#,
            r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#,
            "42",
        ] {
            let a = answer(unreadable_id).unwrap();
            assert_eq!(
                (a["id"].clone(), a["error"]["code"].clone()),
                (Value::Null, (-32600).into()),
                "{unreadable_id}"
            );
        }
    }

    #[test]
    fn blank_lines_and_notifications_get_no_answer() {
        assert!(answer("").is_none());
        assert!(answer(" \r").is_none());
        assert!(
            answer(r#"{"jsonrpc":"2.0","method":"notifications/initialized","params":7}"#)
                .is_none()
        );
        assert!(
            answer(r#"{"jsonrpc":"2.0","method":"notifications/progress","params":"x"}"#).is_none()
        );
    }

    #[test]
    fn good_messages_are_taken() {
        for line in [
            r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#,
            "\u{feff}{\"jsonrpc\":\"2.0\",\"id\":\"a\",\"method\":\"tools/list\"}\r",
            r#"{"jsonrpc":"2.0","id":2,"method":"vendor/custom","params":{}}"#,
        ] {
            assert!(
                matches!(classify(line.as_bytes()), Line::Message(_)),
                "{line}"
            );
        }
    }

    #[tokio::test]
    async fn every_bad_line_is_answered_and_the_session_goes_on() {
        use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
        let (mut client, server_in) = tokio::io::duplex(1 << 16);
        let (server_out, client_in) = tokio::io::duplex(1 << 16);
        let mut transport = Stdio::new(server_in, server_out);
        let mut replies = BufReader::new(client_in).lines();
        let writer = tokio::spawn(async move {
            client.write_all(b"{oops\n").await.unwrap();
            let long = format!(
                "{{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"tools/call\",\"params\":{{\"x\":\"{}\"}}}}\n",
                "a".repeat(MAX_LINE)
            );
            client.write_all(long.as_bytes()).await.unwrap();
            client
                .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":10,\"method\":\"ping\"}\n")
                .await
                .unwrap();
            client
        });
        let got = transport.receive().await.expect("the ping");
        assert!(format!("{got:?}").contains("Ping"), "{got:?}");
        for (code, id) in [(-32700, Value::Null), (-32600, Value::from(9))] {
            let line = replies.next_line().await.unwrap().unwrap();
            let reply: Value = serde_json::from_str(&line).unwrap();
            assert_eq!(
                (reply["error"]["code"].clone(), reply["id"].clone()),
                (code.into(), id),
                "{line}"
            );
        }
        drop(writer.await.unwrap());
        assert!(transport.receive().await.is_none());
    }
}
