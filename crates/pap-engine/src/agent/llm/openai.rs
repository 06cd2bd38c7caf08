//! OpenAI-compatible chat completions (`POST {base_url}/chat/completions`), read leniently so
//! Ollama, vLLM and llama.cpp work: `finish_reason` may be null or empty, `usage` missing, a
//! tool call's id missing, its arguments a string that does not parse.

use serde_json::{Map, Value, json};

use super::chat::{MalformedReply, Reply, Stop, ToolCall, ToolDef, ToolResult};

pub(super) const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";

pub(super) fn url(base: &str) -> String {
    format!("{}/chat/completions", base.trim_end_matches('/'))
}

pub(super) struct Conversation {
    messages: Vec<Value>,
    /// OpenAI's own API wants `max_completion_tokens` (its reasoning models refuse
    /// `max_tokens`); local servers know only `max_tokens`.
    official: bool,
}

impl Conversation {
    pub(super) fn new(system: Option<&str>, first_user_message: String, official: bool) -> Self {
        let mut messages = Vec::new();
        if let Some(system) = system.filter(|s| !s.is_empty()) {
            messages.push(json!({"role": "system", "content": system}));
        }
        messages.push(json!({"role": "user", "content": first_user_message}));
        Conversation { messages, official }
    }

    pub(super) fn request(
        &self,
        model: &str,
        max_tokens: Option<u32>,
        temperature: Option<f64>,
        tools: &[ToolDef],
    ) -> Value {
        let mut body = Map::new();
        body.insert("model".into(), model.into());
        body.insert("messages".into(), Value::Array(self.messages.clone()));
        if let Some(n) = max_tokens {
            let key = if self.official {
                "max_completion_tokens"
            } else {
                "max_tokens"
            };
            body.insert(key.into(), n.into());
        }
        if let Some(t) = temperature {
            body.insert("temperature".into(), t.into());
        }
        if !tools.is_empty() {
            let tools = tools
                .iter()
                .map(|t| {
                    json!({"type": "function", "function": {
                        "name": t.name, "description": t.description,
                        "parameters": t.input_schema}})
                })
                .collect();
            body.insert("tools".into(), Value::Array(tools));
        }
        Value::Object(body)
    }

    pub(super) fn receive(&mut self, body: &Value) -> Result<Reply, MalformedReply> {
        let choice = body
            .get("choices")
            .and_then(|c| c.get(0))
            .ok_or_else(|| MalformedReply::new("the answer has no `choices[0]`", body))?;
        let mut message = choice
            .get("message")
            .cloned()
            .ok_or_else(|| MalformedReply::new("`choices[0]` has no `message`", body))?;
        let text = message
            .get("content")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        let refusal = message
            .get("refusal")
            .and_then(Value::as_str)
            .filter(|r| !r.is_empty())
            .map(str::to_owned);
        let mut calls = Vec::new();
        if let Some(list) = message.get_mut("tool_calls").and_then(Value::as_array_mut) {
            for (n, call) in list.iter_mut().enumerate() {
                // A server that omits the id still needs one to match the result to.
                if call
                    .get("id")
                    .and_then(Value::as_str)
                    .is_none_or(str::is_empty)
                {
                    call["id"] = format!("call_{n}").into();
                }
                let f = call.get("function").cloned().unwrap_or(Value::Null);
                let arguments = match f.get("arguments") {
                    Some(Value::String(s)) if s.trim().is_empty() => Ok(Map::new()),
                    Some(Value::String(s)) => match serde_json::from_str::<Value>(s) {
                        Ok(Value::Object(map)) => Ok(map),
                        _ => Err(s.clone()),
                    },
                    // Some local servers send an object instead of a string.
                    Some(Value::Object(map)) => Ok(map.clone()),
                    None | Some(Value::Null) => Ok(Map::new()),
                    Some(other) => Err(other.to_string()),
                };
                calls.push(ToolCall {
                    id: call["id"].as_str().unwrap_or_default().to_owned(),
                    name: f
                        .get("name")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_owned(),
                    arguments,
                });
            }
        }
        let finish = choice.get("finish_reason").and_then(Value::as_str);
        let stop = if let Some(r) = refusal {
            Stop::Refusal(r)
        } else if !calls.is_empty() {
            Stop::ToolUse
        } else {
            match finish {
                Some("length") => Stop::MaxTokens,
                Some("content_filter") => Stop::Refusal("the provider's content filter".into()),
                None | Some("") | Some("stop") | Some("eos") => Stop::EndTurn,
                Some("tool_calls") => Stop::EndTurn,
                Some(other) => Stop::Other(other.to_owned()),
            }
        };
        let usage = body.get("usage");
        let tokens = |k: &str| usage.and_then(|u| u.get(k)).and_then(Value::as_u64);
        self.messages.push(message);
        Ok(Reply {
            text,
            calls,
            stop,
            input_tokens: tokens("prompt_tokens").unwrap_or(0),
            cached_input_tokens: usage
                .and_then(|u| u.pointer("/prompt_tokens_details/cached_tokens"))
                .and_then(Value::as_u64)
                .unwrap_or(0),
            // OpenAI's caching writes at no extra price.
            cache_write_input_tokens: 0,
            output_tokens: tokens("completion_tokens").unwrap_or(0),
        })
    }

    /// One `tool` message per result. The format has no error flag, so an error says so in
    /// its text.
    /// The tool results, then `riding` (notifications queued meanwhile: JP RFD 011) as a
    /// user message: tool messages must directly follow the call they answer.
    pub(super) fn answer(&mut self, results: &[ToolResult], riding: Option<&str>) {
        for r in results {
            let content = if r.is_error {
                format!("ERROR: {}", r.content)
            } else {
                r.content.clone()
            };
            self.messages
                .push(json!({"role": "tool", "tool_call_id": r.call_id, "content": content}));
        }
        if let Some(text) = riding {
            self.messages.push(json!({"role": "user", "content": text}));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_server_quirks_are_tolerated() {
        let mut c = Conversation::new(Some("sys"), "hi".into(), false);
        let reply = c
            .receive(&json!({"choices": [{"message": {"role": "assistant", "content": null,
                "tool_calls": [
                    {"type": "function", "function": {"name": "echo", "arguments": "{\"message\":\"x\"}"}},
                    {"id": "b", "type": "function", "function": {"name": "echo", "arguments": "{not json"}}
                ]}, "finish_reason": null}]}))
            .unwrap();
        assert_eq!(reply.stop, Stop::ToolUse);
        assert_eq!(reply.calls[0].id, "call_0");
        assert!(reply.calls[0].arguments.is_ok());
        assert_eq!(reply.calls[1].arguments, Err("{not json".to_owned()));
        assert_eq!((reply.input_tokens, reply.output_tokens), (0, 0));
        c.answer(
            &[ToolResult {
                call_id: "call_0".into(),
                content: "boom".into(),
                is_error: true,
            }],
            None,
        );
        let req = c.request("llama3", Some(100), None, &[]);
        assert_eq!(req["max_tokens"], 100);
        assert_eq!(req["messages"][0]["role"], "system");
        assert_eq!(req["messages"][2]["tool_calls"][0]["id"], "call_0");
        assert_eq!(req["messages"][3]["content"], "ERROR: boom");
    }

    #[test]
    fn finish_reasons() {
        let read = |finish: Value| {
            let mut c = Conversation::new(None, "x".into(), true);
            c.receive(&json!({"choices": [{"message": {"content": "t"}, "finish_reason": finish}]}))
                .unwrap()
                .stop
        };
        assert_eq!(read(json!("stop")), Stop::EndTurn);
        assert_eq!(read(json!("")), Stop::EndTurn);
        assert_eq!(read(json!("length")), Stop::MaxTokens);
        assert!(matches!(read(json!("content_filter")), Stop::Refusal(_)));
        let c = Conversation::new(None, "x".into(), true);
        assert_eq!(
            c.request("m", Some(5), None, &[])["max_completion_tokens"],
            5
        );
    }
}
