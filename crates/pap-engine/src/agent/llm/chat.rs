//! The provider-neutral shape of a conversation: what pap asks of a model and what comes back.
//! Each provider module turns these into its own wire format and keeps its own history, so a
//! reply goes back to the model exactly as it came (tool-use ids and all).

use serde_json::Value;

/// A tool as offered to the model (only those the manifest lists and the server has).
#[derive(Debug, Clone)]
pub(super) struct ToolDef {
    pub name: String,
    pub description: String,
    pub input_schema: Value,
}

/// A tool call the model asked for.
#[derive(Debug, Clone)]
pub(super) struct ToolCall {
    pub id: String,
    pub name: String,
    /// The arguments, or the raw text when the model sent something that is not a JSON object
    /// (OpenAI-compatible servers send arguments as a string that may not parse).
    pub arguments: Result<serde_json::Map<String, Value>, String>,
}

/// What goes back to the model for one call.
#[derive(Debug, Clone)]
pub(super) struct ToolResult {
    pub(crate) call_id: String,
    pub content: String,
    pub is_error: bool,
}

/// Why the model stopped.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Stop {
    /// A final answer.
    EndTurn,
    ToolUse,
    MaxTokens,
    /// The model declined (Anthropic `refusal`, OpenAI `content_filter` or a `refusal` text).
    Refusal(String),
    /// Anything else the server said, kept for the transcript.
    Other(String),
}

impl Stop {
    pub(super) fn label(&self) -> String {
        match self {
            Stop::EndTurn => "end_turn".into(),
            Stop::ToolUse => "tool_use".into(),
            Stop::MaxTokens => "max_tokens".into(),
            Stop::Refusal(_) => "refusal".into(),
            Stop::Other(s) => s.clone(),
        }
    }
}

/// A provider's reply without the parts a turn needs: what is missing, and the start of
/// the reply (clipped: it is untrusted and may be large).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{what}: {excerpt}")]
pub(super) struct MalformedReply {
    pub what: &'static str,
    pub(crate) excerpt: String,
}

impl MalformedReply {
    pub(super) fn new(what: &'static str, reply: &serde_json::Value) -> MalformedReply {
        MalformedReply {
            what,
            excerpt: crate::text::clip(&reply.to_string(), 200),
        }
    }
}

/// One model turn.
#[derive(Debug, Clone)]
pub(super) struct Reply {
    pub text: String,
    pub calls: Vec<ToolCall>,
    pub stop: Stop,
    /// Every input token, those read from the prompt cache included.
    pub input_tokens: u64,
    /// The input tokens read from the provider's prompt cache.
    pub cached_input_tokens: u64,
    /// The input tokens written to the provider's prompt cache.
    pub cache_write_input_tokens: u64,
    pub output_tokens: u64,
}
