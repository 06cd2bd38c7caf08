//! The lines of `pap mcp`'s stdin, each at most [`MAX_LINE`] bytes: a longer one is read to
//! its end without being kept, and what is kept of it (its first and last bytes) is enough to
//! find the request's `id`, so that its sender can be told instead of waiting for an answer.
//!
//! Reading is cancel-safe, as rmcp's service loop needs (it polls `receive` in a `select!` and
//! drops it when another branch is ready): every byte taken from the reader is recorded in
//! `self` before the next await, so a dropped read resumes where it stopped.

use serde::de::{self, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};

/// The longest message taken, newline included: 16 MiB, as rmcp's own stdio transport and its
/// HTTP client allow, so what is acceptable over HTTP is acceptable here.
pub(super) const MAX_LINE: usize = 16 * 1024 * 1024;

/// How much of an over-long line's beginning and end is kept to find its `id`.
const KEPT: usize = 4096;

/// What [`Lines::next`] found.
#[derive(Debug)]
pub(super) enum Got {
    /// A whole line (without its `\n`): [`Lines::line`].
    Line,
    /// A line longer than [`MAX_LINE`], read to its end and dropped.
    TooLong(TooLong),
    /// The end of the input (a last line without `\n` is dropped: the client is gone).
    End,
    Failed(std::io::Error),
}

/// What is known of an over-long line.
#[derive(Debug)]
pub(super) struct TooLong {
    /// Its length, newline included.
    pub size: u64,
    head: Vec<u8>,
    tail: Vec<u8>,
}

impl TooLong {
    /// The line's JSON-RPC `id`, when its first bytes or its last bytes show it: a client
    /// that writes `id` first (the Python SDK) or last (the TypeScript SDK) hears about its
    /// request. `Value::Null` when neither does, as JSON-RPC asks.
    pub(super) fn id(&self) -> Value {
        id_in_head(&self.head)
            .or_else(|| id_in_tail(&self.tail))
            .unwrap_or(Value::Null)
    }
}

pub(super) struct Lines<R> {
    read: BufReader<R>,
    line: Vec<u8>,
    /// Set while the rest of an over-long line is being read.
    over: Option<TooLong>,
    max: usize,
}

impl<R: AsyncRead + Unpin> Lines<R> {
    pub(super) fn new(read: R) -> Lines<R> {
        Lines::with_max(read, MAX_LINE)
    }

    fn with_max(read: R, max: usize) -> Lines<R> {
        Lines {
            read: BufReader::with_capacity(64 * 1024, read),
            line: Vec::new(),
            over: None,
            max,
        }
    }

    /// The line [`Got::Line`] announced, valid until the next call to `next`.
    pub(super) fn line(&self) -> &[u8] {
        self.line.strip_suffix(b"\n").unwrap_or(&self.line)
    }

    pub(super) async fn next(&mut self) -> Got {
        if self.line.last() == Some(&b'\n') {
            self.line.clear();
        }
        loop {
            let available = match self.read.fill_buf().await {
                Ok(available) => available,
                Err(e) => return Got::Failed(e),
            };
            if available.is_empty() {
                return Got::End;
            }
            let newline = memchr::memchr(b'\n', available);
            let take = newline.map_or(available.len(), |i| i + 1);
            let chunk = &available[..take];
            if self.over.is_none() && self.line.len() + take > self.max {
                let kept = &self.line;
                self.over = Some(TooLong {
                    size: kept.len() as u64,
                    head: kept[..kept.len().min(KEPT)].to_vec(),
                    tail: kept[kept.len().saturating_sub(KEPT)..].to_vec(),
                });
                self.line = Vec::new();
            }
            match &mut self.over {
                Some(over) => {
                    if over.head.len() < KEPT {
                        let more = (KEPT - over.head.len()).min(chunk.len());
                        over.head.extend_from_slice(&chunk[..more]);
                    }
                    over.tail
                        .extend_from_slice(&chunk[chunk.len().saturating_sub(KEPT)..]);
                    let excess = over.tail.len().saturating_sub(KEPT);
                    over.tail.drain(..excess);
                    over.size += take as u64;
                }
                None => self.line.extend_from_slice(chunk),
            }
            self.read.consume(take);
            if newline.is_some() {
                return match self.over.take() {
                    Some(over) => Got::TooLong(over),
                    None => Got::Line,
                };
            }
        }
    }
}

/// The `id` member of the JSON object `head` begins, if it comes before `head` is cut off.
fn id_in_head(head: &[u8]) -> Option<Value> {
    /// Walks the object's members until `id`, then stops (the rest may be cut off).
    struct Find<'a>(&'a mut Option<Value>);

    impl<'de> Visitor<'de> for Find<'_> {
        type Value = ();

        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a JSON-RPC message")
        }

        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
            while let Some(key) = map.next_key::<String>()? {
                if key == "id" {
                    *self.0 = Some(map.next_value::<Value>()?);
                    return Err(de::Error::custom("found"));
                }
                map.next_value::<IgnoredAny>()?;
            }
            Ok(())
        }
    }

    let mut found = None;
    let head = head.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(head);
    // The walk ends in an error either way (found, or cut off): only `found` counts.
    let _ = serde_json::Deserializer::from_slice(head).deserialize_map(Find(&mut found));
    found.filter(is_request_id)
}

/// The `id` member of the JSON object `tail` ends, if it is the object's last member: the
/// text ends with `, "id": VALUE }` (or `{ "id": …`). In JSON text that ends there, that
/// `"id"` can only be a name of the outermost object, never part of a string.
fn id_in_tail(tail: &[u8]) -> Option<Value> {
    let rest = tail.trim_ascii_end().strip_suffix(b"}")?.trim_ascii_end();
    let value_start = if rest.last() == Some(&b'"') {
        // The string's opening quote: the last `"` before it not escaped by a backslash.
        let mut at = rest.len() - 1;
        loop {
            at = rest[..at].iter().rposition(|b| *b == b'"')?;
            let backslashes = rest[..at].iter().rev().take_while(|b| **b == b'\\').count();
            if backslashes % 2 == 0 {
                break at;
            }
        }
    } else {
        rest.len()
            - rest
                .iter()
                .rev()
                .take_while(|b| b.is_ascii_digit() || **b == b'-')
                .count()
    };
    let (before, value) = rest.split_at(value_start);
    let before = before.trim_ascii_end().strip_suffix(b":")?.trim_ascii_end();
    let before = before.strip_suffix(b"\"id\"")?.trim_ascii_end();
    if !matches!(before.last(), Some(b',' | b'{')) {
        return None;
    }
    serde_json::from_slice::<Value>(value)
        .ok()
        .filter(is_request_id)
}

/// A JSON-RPC id MCP allows: a string or an integer.
pub(super) fn is_request_id(id: &Value) -> bool {
    id.is_string() || id.is_i64() || id.is_u64()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    async fn all(input: &[u8], max: usize) -> Vec<String> {
        let mut lines = Lines::with_max(input, max);
        let mut out = Vec::new();
        loop {
            match lines.next().await {
                Got::Line => out.push(String::from_utf8_lossy(lines.line()).into_owned()),
                Got::TooLong(t) => out.push(format!("too long {} id {}", t.size, t.id())),
                Got::End => return out,
                Got::Failed(e) => panic!("{e}"),
            }
        }
    }

    #[tokio::test]
    async fn lines_within_the_bound_and_over_it() {
        let long = format!(
            r#"{{"jsonrpc":"2.0","id":7,"params":"{}"}}"#,
            "x".repeat(100)
        );
        let input = format!("a\n{long}\n\nb\nunfinished");
        assert_eq!(
            all(input.as_bytes(), 64).await,
            ["a", &format!("too long {} id 7", long.len() + 1), "", "b"]
        );
    }

    #[test]
    fn the_id_from_the_first_bytes() {
        let head = br#"{"jsonrpc":"2.0","id":"req-1","method":"tools/call","params":{"x":"abc"#;
        assert_eq!(id_in_head(head), Some(json!("req-1")));
        let escaped = br#"{"a\"":{"id":1},"id" : 12,"params":"#;
        assert_eq!(id_in_head(escaped), Some(json!(12)));
        // After the cut, or not an id MCP allows: none.
        assert_eq!(id_in_head(br#"{"jsonrpc":"2.0","params":{"x":"abc"#), None);
        assert_eq!(id_in_head(br#"{"id":null,"x":"#), None);
        assert_eq!(id_in_head(br#"{"id":"cut off"#), None);
        assert_eq!(id_in_head(b"[1,2"), None);
    }

    #[test]
    fn the_id_from_the_last_bytes() {
        assert_eq!(
            id_in_tail(br#"aaaa"}},"jsonrpc":"2.0","id":42}"#),
            Some(json!(42))
        );
        assert_eq!(
            id_in_tail(b"xx\"} ,\n \"id\" : \"a\\\"b\" } \r\n"),
            Some(json!("a\"b"))
        );
        // Inside another object, or a name that only ends in `id`: none.
        assert_eq!(id_in_tail(br#"aaaa","x":{"id":42}}"#), None);
        assert_eq!(id_in_tail(br#"aaaa","pid":42}"#), None);
        assert_eq!(id_in_tail(br#"aaaa","x":"\"id\":42}"#), None);
        assert_eq!(id_in_tail(br#"aaaa", "id": 4.5}"#), None);
    }
}
