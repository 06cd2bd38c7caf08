//! Anthropic Messages (`POST {base_url}/v1/messages`), read leniently: unknown block types and
//! fields are ignored, missing usage counts as zero.

use serde_json::{Map, Value, json};

use super::chat::{MalformedReply, Reply, Stop, ToolCall, ToolDef, ToolResult};

pub(super) const DEFAULT_BASE_URL: &str = "https://api.anthropic.com";
pub(super) const API_VERSION: &str = "2023-06-01";
/// Anthropic requires `max_tokens`; this is used when the manifest sets none.
pub(super) const DEFAULT_MAX_TOKENS: u32 = crate::manifest::compiled::ANTHROPIC_DEFAULT_MAX_TOKENS;

pub(super) fn url(base: &str) -> String {
    format!("{}/v1/messages", base.trim_end_matches('/'))
}

/// The conversation so far, in Anthropic's shape.
pub(super) struct Conversation {
    messages: Vec<Value>,
}

impl Conversation {
    pub(super) fn new(first_user_message: String) -> Conversation {
        Conversation {
            messages: vec![json!({"role": "user", "content": first_user_message})],
        }
    }

    pub(super) fn request(
        &self,
        model: &str,
        max_tokens: Option<u32>,
        temperature: Option<f64>,
        system: Option<&str>,
        tools: &[ToolDef],
    ) -> Value {
        let mut body = Map::new();
        body.insert("model".into(), model.into());
        body.insert(
            "max_tokens".into(),
            max_tokens.unwrap_or(DEFAULT_MAX_TOKENS).into(),
        );
        if let Some(system) = system.filter(|s| !s.is_empty()) {
            body.insert("system".into(), system.into());
        }
        if let Some(t) = temperature {
            body.insert("temperature".into(), t.into());
        }
        body.insert("messages".into(), Value::Array(self.messages.clone()));
        if !tools.is_empty() {
            let tools = tools
                .iter()
                .map(|t| {
                    json!({"name": t.name, "description": t.description,
                           "input_schema": t.input_schema})
                })
                .collect();
            body.insert("tools".into(), Value::Array(tools));
        }
        Value::Object(body)
    }

    /// Reads a reply and keeps the assistant message exactly as it came.
    pub(super) fn receive(&mut self, body: &Value) -> Result<Reply, MalformedReply> {
        let content = body
            .get("content")
            .and_then(Value::as_array)
            .ok_or_else(|| MalformedReply::new("the answer has no `content` array", body))?;
        let mut text = String::new();
        let mut calls = Vec::new();
        for block in content {
            match block.get("type").and_then(Value::as_str) {
                Some("text") => {
                    if let Some(t) = block.get("text").and_then(Value::as_str) {
                        text.push_str(t);
                    }
                }
                Some("tool_use") => calls.push(ToolCall {
                    id: str_field(block, "id"),
                    name: str_field(block, "name"),
                    arguments: match block.get("input") {
                        Some(Value::Object(map)) => Ok(map.clone()),
                        None | Some(Value::Null) => Ok(Map::new()),
                        Some(other) => Err(other.to_string()),
                    },
                }),
                _ => {}
            }
        }
        let stop = match body.get("stop_reason").and_then(Value::as_str) {
            Some("end_turn") | Some("stop_sequence") => Stop::EndTurn,
            Some("tool_use") => Stop::ToolUse,
            Some("max_tokens") => Stop::MaxTokens,
            Some("refusal") => Stop::Refusal(text.clone()),
            Some(other) => Stop::Other(other.to_owned()),
            None if !calls.is_empty() => Stop::ToolUse,
            None => Stop::EndTurn,
        };
        let usage = body.get("usage");
        let tokens = |k: &str| usage.and_then(|u| u.get(k)).and_then(Value::as_u64);
        self.messages
            .push(json!({"role": "assistant", "content": content}));
        Ok(Reply {
            text,
            calls,
            stop,
            // Anthropic counts cache reads and writes apart from `input_tokens`; pap's input
            // is all of them, with the reads also counted as cached.
            input_tokens: [
                "input_tokens",
                "cache_read_input_tokens",
                "cache_creation_input_tokens",
            ]
            .into_iter()
            .filter_map(tokens)
            .fold(0, u64::saturating_add),
            cached_input_tokens: tokens("cache_read_input_tokens").unwrap_or(0),
            cache_write_input_tokens: tokens("cache_creation_input_tokens").unwrap_or(0),
            output_tokens: tokens("output_tokens").unwrap_or(0),
        })
    }

    /// One user message carrying every result, in the order of the calls.
    /// The tool results, with `riding` (notifications queued meanwhile: JP RFD 011) as a
    /// text block after them in the same user message.
    pub(super) fn answer(&mut self, results: &[ToolResult], riding: Option<&str>) {
        let mut blocks: Vec<Value> = results
            .iter()
            .map(|r| {
                json!({"type": "tool_result", "tool_use_id": r.call_id,
                       "content": r.content, "is_error": r.is_error})
            })
            .collect();
        if let Some(text) = riding {
            blocks.push(json!({"type": "text", "text": text}));
        }
        self.messages
            .push(json!({"role": "user", "content": blocks}));
    }
}

fn str_field(v: &Value, k: &str) -> String {
    v.get(k).and_then(Value::as_str).unwrap_or("").to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tool_use_reply_is_read_and_answered_with_matching_ids() {
        let mut c = Conversation::new("hello".into());
        let reply = c
            .receive(&json!({
                "id": "msg_1", "type": "message", "role": "assistant",
                "content": [
                    {"type": "text", "text": "Let me add."},
                    {"type": "tool_use", "id": "toolu_1", "name": "get-sum", "input": {"a": 1, "b": 2}}
                ],
                "stop_reason": "tool_use",
                "usage": {"input_tokens": 10, "output_tokens": 5, "cache_read_input_tokens": 100, "cache_creation_input_tokens": 20}
            }))
            .unwrap();
        assert_eq!(reply.stop, Stop::ToolUse);
        assert_eq!(reply.calls[0].id, "toolu_1");
        assert_eq!(
            (
                reply.input_tokens,
                reply.cached_input_tokens,
                reply.cache_write_input_tokens,
                reply.output_tokens
            ),
            (130, 100, 20, 5)
        );
        c.answer(
            &[ToolResult {
                call_id: "toolu_1".into(),
                content: "3".into(),
                is_error: false,
            }],
            None,
        );
        let req = c.request("m", None, Some(0.2), Some("sys"), &[]);
        assert_eq!(req["max_tokens"], 4096);
        assert_eq!(req["system"], "sys");
        assert!(req.get("tools").is_none());
        assert_eq!(req["messages"][1]["content"][1]["id"], "toolu_1");
        assert_eq!(req["messages"][2]["content"][0]["tool_use_id"], "toolu_1");
    }

    #[test]
    fn the_base_url_is_the_sdk_one() {
        assert_eq!(
            url(DEFAULT_BASE_URL),
            "https://api.anthropic.com/v1/messages"
        );
        assert_eq!(url("http://127.0.0.1:9/"), "http://127.0.0.1:9/v1/messages");
    }
}
