//! The tools. Names and schemas follow the chat-inbox document; each dotted name also has an
//! underscore alias (`chat_human_post`), since the model APIs' tool-name patterns reject dots.

use std::sync::Arc;

use rmcp::ErrorData as McpError;
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ContentBlock, JsonObject, Tool, ToolAnnotations,
};
use rmcp::service::RequestContext;
use rmcp::{RoleServer, object};
use serde_json::{Value, json};

use super::access::Need;
use super::resources::{SCAN_MAX, store_error};
use super::{Handoff, PapMcp, Who};
use crate::chat::post::{self, Author, Limits, Post, PostError};
use crate::chat::view;
use crate::clock::rfc3339_ms;

/// `chat_read_since` returns at most this many messages per call.
const MAX_READ: u64 = 1000;
const DEFAULT_READ: u64 = 100;
/// Messages read from the store at once while scanning.
const READ_CHUNK: usize = 500;

pub(super) fn all() -> Vec<Tool> {
    let post_schema = Arc::new(object!({
        "type": "object",
        "properties": {
            "content": {"type": "string", "description": "The message (at most 32 KiB)"},
            "mime": {"type": "string", "enum": ["text/markdown", "text/plain"],
                     "description": "Default text/markdown"},
            "session": {"type": "string",
                        "description": "Post into this session thread (`pap inbox session open`)"},
            "in_reply_to": {"type": "string",
                            "description": "The id of the inbox message this answers"}
        },
        "required": ["content"],
        "additionalProperties": false
    }));
    let human = "Post a person's message to the inbox. It becomes a `pap.chat.human.posted` \
                 event that triggers can route to agents (bounded by the cascade depth and \
                 chat.max_posts_per_minute); in a session bound to an agent, that agent gets it \
                 at its next turn. Returns its id and ts.";
    let assistant = "Post an agent's message to the inbox (author assistant). Subscribers are \
                     not notified (no self-echo) and nothing is provoked. Returns its id and ts.";
    let read_only = || ToolAnnotations::new().read_only(true);
    let mut tools = vec![
        Tool::new(
            "chat_read_since",
            "Inbox messages strictly after the watermark `after_id` (\"0\" for all), oldest \
             first, at most `limit`; keep the returned last_id as the next watermark. Once the \
             end is reached (more: false), escalations_due lists notifications past their \
             delivery deadline that are not in the inbox yet (id null).",
            Arc::new(object!({
                "type": "object",
                "properties": {
                    "after_id": {"type": ["string", "integer"],
                                 "description": "The watermark: an inbox id (decimal string)"},
                    "limit": {"type": "integer", "minimum": 1, "maximum": MAX_READ,
                              "description": "Default 100"},
                    "session": {"type": "string", "description": "Only this session's thread"}
                },
                "additionalProperties": false
            })),
        )
        .with_annotations(read_only()),
        Tool::new("chat.human.post", human, post_schema.clone()),
        Tool::new("chat.assistant.post", assistant, post_schema.clone()),
        Tool::new(
            "inbox_ack",
            "Acknowledge a notification's inbox message (it becomes DELIVERED; an agent that \
             was told of it hears at its next turn that the user has seen it).",
            Arc::new(object!({
                "type": "object",
                "properties": {"id": {"type": ["string", "integer"],
                                      "description": "The inbox message id"}},
                "required": ["id"],
                "additionalProperties": false
            })),
        ),
        Tool::new(
            "invocations_list",
            "A page of invocations, newest first, filtered by status, agent or trigger; \
             `next_cursor` (null at the end) goes on as `before`. A filtered page looks at no \
             more than 10,000 invocations (`budget_spent`: go on from `next_cursor`).",
            Arc::new(object!({
                "type": "object",
                "properties": {
                    "status": {"type": "string", "description": "e.g. awaiting_approval, failed"},
                    "agent": {"type": "string"},
                    "trigger": {"type": "string"},
                    "last": {"type": "integer", "minimum": 1, "maximum": 500,
                             "description": "Page size, default 50"},
                    "before": {"type": "string",
                               "description": "The `next_cursor` of the previous page"}
                },
                "additionalProperties": false
            })),
        )
        .with_annotations(read_only()),
        Tool::new(
            "invocation_show",
            "One invocation with its attempts, transcript and event.",
            Arc::new(object!({
                "type": "object",
                "properties": {"id": {"type": "string"}},
                "required": ["id"],
                "additionalProperties": false
            })),
        )
        .with_annotations(read_only()),
        Tool::new(
            "audit_log",
            "The newest entries of the audit log (approvals, rejections, high-risk runs).",
            Arc::new(object!({
                "type": "object",
                "properties": {"last": {"type": "integer", "minimum": 1, "maximum": 500,
                                        "description": "Default 50"}},
                "additionalProperties": false
            })),
        )
        .with_annotations(read_only()),
        Tool::new(
            "event_explain",
            "A dry run of one PAP event (`pap dispatch --dry-run --explain`): which triggers \
             match, each stage's verdict and what would happen. Records nothing.",
            Arc::new(object!({
                "type": "object",
                "properties": {"event": {"type": "object",
                                         "description": "A PAP event: id, type, source, time, data"}},
                "required": ["event"],
                "additionalProperties": false
            })),
        )
        .with_annotations(read_only()),
        Tool::new(
            "approval_respond",
            "Answer an approval request. pap asks the person through the client (MCP \
             elicitation) and records only their choice; a client without elicitation is \
             refused.",
            Arc::new(object!({
                "type": "object",
                "properties": {"invocation": {"type": "string",
                                              "description": "The invocation awaiting approval"}},
                "required": ["invocation"],
                "additionalProperties": false
            })),
        ),
    ];
    let aliases: Vec<Tool> = tools
        .iter()
        .filter(|t| t.name.contains('.'))
        .map(|t| {
            let mut alias = t.clone();
            alias.name = t.name.replace('.', "_").into();
            alias
        })
        .collect();
    tools.extend(aliases);
    tools
}

pub(super) async fn call(
    server: &PapMcp,
    who: &Who,
    request: CallToolRequestParams,
    ctx: &RequestContext<RoleServer>,
) -> Result<CallToolResult, McpError> {
    let args: JsonObject = request.arguments.unwrap_or_default();
    let name = request.name.replace('.', "_");
    let need = match name.as_str() {
        // event_explain decides in a write transaction it rolls back: as costly to the
        // store as posting an event, so it needs what posting needs.
        "chat_human_post" | "chat_assistant_post" | "inbox_ack" | "event_explain" => Need::Post,
        "approval_respond" => return super::approval::respond(server, who, &args, ctx).await,
        _ => Need::Read,
    };
    // A refusal is the tool's answer (a model calling it reads why), not a protocol error.
    if let Err(refused) = who.require(need) {
        return Ok(CallToolResult::error(vec![ContentBlock::text(
            refused.message.to_string(),
        )]));
    }
    match name.as_str() {
        "chat_read_since" => read_since(server, &args).await,
        "chat_human_post" => post_message(server, who, Author::User, &args, ctx).await,
        "chat_assistant_post" => post_message(server, who, Author::Assistant, &args, ctx).await,
        "inbox_ack" => ack(server, who, &args).await,
        "invocations_list" | "invocation_show" | "audit_log" | "event_explain" => {
            let this = server.clone();
            tokio::task::spawn_blocking(move || super::views::call(&this, &name, &args))
                .await
                .map_err(|e| McpError::internal_error(e.to_string(), None))?
        }
        other => Err(McpError::invalid_params(
            format!("no tool {}", crate::text::clip(other, 80)),
            None,
        )),
    }
}

/// A string or integer id argument.
pub(super) fn id_arg(args: &JsonObject, key: &str) -> Result<Option<u64>, McpError> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => n.as_u64().map(Some).ok_or_else(|| bad_id(key)),
        Some(Value::String(s)) if s.is_empty() => Ok(None),
        Some(Value::String(s)) => s.parse().map(Some).map_err(|_| bad_id(key)),
        Some(_) => Err(bad_id(key)),
    }
}

fn bad_id(key: &str) -> McpError {
    McpError::invalid_params(
        format!("`{key}` must be an inbox id (a decimal string)"),
        None,
    )
}

fn str_arg<'a>(args: &'a JsonObject, key: &str) -> Result<Option<&'a str>, McpError> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(McpError::invalid_params(
            format!("`{key}` must be a string"),
            None,
        )),
    }
}

async fn read_since(server: &PapMcp, args: &JsonObject) -> Result<CallToolResult, McpError> {
    let after = id_arg(args, "after_id")?.unwrap_or(0);
    let limit = match args.get("limit") {
        None | Some(Value::Null) => DEFAULT_READ,
        Some(v) => v
            .as_u64()
            .filter(|n| (1..=MAX_READ).contains(n))
            .ok_or_else(|| {
                McpError::invalid_params(format!("`limit` must be 1 to {MAX_READ}"), None)
            })?,
    };
    let session = str_arg(args, "session")?.map(str::to_owned);
    let store = server.shared.store.clone();
    let now = server.now();
    let body = tokio::task::spawn_blocking(move || {
        store.read(|r| {
            let keep = |m: &crate::domain::InboxMessage| {
                session
                    .as_deref()
                    .is_none_or(|s| m.session.as_deref() == Some(s))
            };
            // The watermark moves past every message looked at, returned or not (another
            // session's), and one call looks at no more than SCAN_MAX of them.
            let mut picked = Vec::new();
            let mut watermark = after;
            let mut looked: u64 = 0;
            let mut more = false;
            'scan: loop {
                let chunk = r.inbox_after(watermark, READ_CHUNK, &|_| true)?;
                if chunk.is_empty() {
                    break;
                }
                for m in chunk {
                    looked += 1;
                    watermark = m.id;
                    if keep(&m) {
                        picked.push(m);
                    }
                    if picked.len() as u64 == limit || looked >= SCAN_MAX {
                        more = r.inbox_last()? > watermark;
                        break 'scan;
                    }
                }
            }
            let mut out = Vec::with_capacity(picked.len());
            for m in &picked {
                out.push(view::message_read(r, m, now)?);
            }
            // Escalations due but not recorded (ANP 6.2) come after every message: listed
            // once the read reached the end of the inbox.
            let due = match more {
                true => Vec::new(),
                false => view::escalations_due(r, session.as_deref(), now, limit as usize)?,
            };
            Ok(
                json!({"messages": out, "last_id": watermark.to_string(), "more": more,
                      "escalations_due": due}),
            )
        })
    })
    .await
    .map_err(|e| McpError::internal_error(e.to_string(), None))?
    .map_err(store_error)?;
    Ok(CallToolResult::structured(body))
}

async fn post_message(
    server: &PapMcp,
    who: &Who,
    author: Author,
    args: &JsonObject,
    ctx: &RequestContext<RoleServer>,
) -> Result<CallToolResult, McpError> {
    let content = str_arg(args, "content")?
        .ok_or_else(|| McpError::invalid_params("`content` is required", None))?
        .to_owned();
    let mime = str_arg(args, "mime")?.unwrap_or("text/markdown").to_owned();
    let session = str_arg(args, "session")?.map(str::to_owned);
    let in_reply_to = id_arg(args, "in_reply_to")?;
    let by = server.posted_by(who, ctx);
    let project = server.project();
    let limits = Limits {
        max_posts_per_minute: project.config.chat.max_posts_per_minute,
        max_event_bytes: project.config.max_event_bytes,
    };
    let store = server.shared.store.clone();
    let now = server.now();
    let owner = server
        .shared
        .in_serve
        .then(|| crate::domain::Runner::current(now));
    let result = tokio::task::spawn_blocking(move || {
        // A refusal rolls back whatever the refused post wrote (the throttle's count).
        store.write_or_refuse(|tx| {
            let p = Post {
                author,
                content: &content,
                mime: &mime,
                session: session.as_deref(),
                in_reply_to,
                by: by.clone(),
            };
            match post::post(tx, &limits, p, owner.as_ref(), now) {
                Ok(posted) => Ok(Ok(posted)),
                Err(PostError::Store(e)) => Err(e),
                Err(refused) => Ok(Err(refused)),
            }
        })
    })
    .await
    .map_err(|e| McpError::internal_error(e.to_string(), None))?
    .map_err(store_error)?;
    let posted = match result {
        Ok(posted) => posted,
        Err(why) => {
            return Ok(CallToolResult::error(vec![ContentBlock::text(
                why.to_string(),
            )]));
        }
    };
    let mut out = json!({"id": posted.id.to_string(), "ts": rfc3339_ms(posted.ts)});
    if let Some(event) = posted.event {
        out["event_id"] = json!(event.id);
        let handoff = server.hand_off(vec![event]).await;
        out["decided_by"] = json!(match handoff {
            Handoff::Told => "serve",
            Handoff::Waiting => "the next pap serve to start (none runs now)",
        });
    }
    if let Some(agent) = posted.session_agent {
        out["session_agent"] = json!(agent);
    }
    Ok(CallToolResult::structured(out))
}

async fn ack(server: &PapMcp, who: &Who, args: &JsonObject) -> Result<CallToolResult, McpError> {
    let id =
        id_arg(args, "id")?.ok_or_else(|| McpError::invalid_params("`id` is required", None))?;
    let store = server.shared.store.clone();
    let user = who.label().to_owned();
    let now = server.now();
    let acked = tokio::task::spawn_blocking(move || {
        store.write(|tx| crate::notify::inbox::ack(tx, id, &user, now))
    })
    .await
    .map_err(|e| McpError::internal_error(e.to_string(), None))?;
    use crate::notify::inbox::Acked;
    match acked {
        Ok(Ok(Acked::Delivered { notification })) => Ok(CallToolResult::structured(
            json!({"message": id.to_string(), "notification": notification, "status": "delivered", "already": false}),
        )),
        Ok(Ok(Acked::Already { notification })) => Ok(CallToolResult::structured(
            json!({"message": id.to_string(), "notification": notification, "status": "delivered", "already": true}),
        )),
        Ok(Err(refused)) => Ok(CallToolResult::error(vec![ContentBlock::text(
            refused.to_string(),
        )])),
        Err(e) => Err(store_error(e)),
    }
}
