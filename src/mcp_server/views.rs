//! The read-only tools: invocations, the audit log, and a dry run of an event.

use rmcp::ErrorData as McpError;
use rmcp::model::{CallToolResult, ContentBlock, JsonObject};
use serde_json::{Value, json};

use super::PapMcp;
use super::resources::store_error;
use crate::clock::rfc3339_ms;
use crate::event::{self, Origin};
use crate::pipeline::{Options, Pipeline};
use crate::storage;
use crate::storage::cursor::Kind;
use crate::storage::pages::{self, InvocationFilter};
use crate::views::invocation as view;

const DEFAULT_LAST: u64 = 50;
const MAX_LAST: u64 = 500;

/// Runs tool `name` (blocking: the store is read here).
pub(super) fn call(
    server: &PapMcp,
    name: &str,
    args: &JsonObject,
) -> Result<CallToolResult, McpError> {
    match name {
        "invocations_list" => list(server, args),
        "invocation_show" => show(server, args),
        "audit_log" => audit(server, args),
        _ => explain(server, args),
    }
}

fn last_arg(args: &JsonObject) -> Result<usize, McpError> {
    match args.get("last") {
        None | Some(Value::Null) => Ok(DEFAULT_LAST as usize),
        Some(v) => v
            .as_u64()
            .filter(|n| (1..=MAX_LAST).contains(n))
            .map(|n| n as usize)
            .ok_or_else(|| {
                McpError::invalid_params(format!("`last` must be 1 to {MAX_LAST}"), None)
            }),
    }
}

fn text_arg(args: &JsonObject, key: &str) -> Option<String> {
    args.get(key).and_then(Value::as_str).map(str::to_owned)
}

/// A page of invocations, newest first, with the cursor of the next (`before`): its cost is a
/// page's, never the store's, and the cursor stays right while invocations are added. An
/// agent or trigger filter looks at no more than `pages::SCAN_BUDGET` invocations a call.
fn list(server: &PapMcp, args: &JsonObject) -> Result<CallToolResult, McpError> {
    let last = last_arg(args)?;
    let filter = InvocationFilter {
        status: text_arg(args, "status"),
        agent: text_arg(args, "agent"),
        trigger: text_arg(args, "trigger"),
    };
    let before = pages::parse(Kind::Invocations, text_arg(args, "before").as_deref())
        .map_err(|e| McpError::invalid_params(format!("`before`: {}", e.0), None))?;
    let now = server.now();
    let page = pages::invocations(&*server.shared.store, &filter, now, before, last)
        .map_err(store_error)?;
    let rows: Vec<Value> = page
        .rows
        .into_iter()
        .map(|mut inv| {
            inv.status = inv.status_at(now);
            let mut row = view(&inv, false);
            row["uri"] = json!(super::resources::invocation_uri(&inv.id));
            row
        })
        .collect();
    Ok(CallToolResult::structured(json!({
        "invocations": rows,
        "next_cursor": page.next,
        "budget_spent": page.budget_spent,
    })))
}

/// The invocation id `typed` names (the full id, a prefix, or the short form every listing
/// prints), as the CLI reads it; an id that names several is refused with the first few.
pub(super) fn resolve_invocation(server: &PapMcp, typed: &str) -> Result<String, McpError> {
    use crate::domain::short_id::Resolved;
    match crate::storage::short_forms::resolve_invocation(&*server.shared.store, typed, 5)
        .map_err(store_error)?
    {
        Resolved::One(id) => Ok(id),
        // Not found: said by the caller, as for any unknown id.
        Resolved::None => Ok(typed.to_owned()),
        Resolved::Many(ids) => Err(McpError::invalid_params(
            format!(
                "{} names more than one invocation ({}{}); give more of it",
                crate::text::clip(typed, 80),
                ids.iter().take(5).cloned().collect::<Vec<_>>().join(", "),
                if ids.len() > 5 { ", …" } else { "" }
            ),
            None,
        )),
    }
}

fn show(server: &PapMcp, args: &JsonObject) -> Result<CallToolResult, McpError> {
    let typed =
        text_arg(args, "id").ok_or_else(|| McpError::invalid_params("`id` is required", None))?;
    let id = resolve_invocation(server, &typed)?;
    let found = server
        .shared
        .store
        .read(|r| r.invocation(&id))
        .map_err(store_error)?;
    match found {
        Some(mut inv) => {
            inv.status = inv.status_at(server.now());
            Ok(CallToolResult::structured(view(&inv, true)))
        }
        None => Ok(CallToolResult::error(vec![ContentBlock::text(format!(
            "no invocation {}",
            crate::text::clip(&id, 80)
        ))])),
    }
}

fn audit(server: &PapMcp, args: &JsonObject) -> Result<CallToolResult, McpError> {
    let last = last_arg(args)?;
    let (entries, total) = server
        .shared
        .store
        .read(|r| r.audit(Some(last)))
        .map_err(store_error)?;
    let rows: Vec<Value> = entries
        .iter()
        .map(|e| {
            json!({
                "seq": e.seq, "at": rfc3339_ms(e.at), "action": e.action,
                "invocation_id": e.invocation_id, "trigger": e.trigger, "agent": e.agent,
                "risk": e.risk, "actor": e.actor, "detail": e.detail,
            })
        })
        .collect();
    Ok(CallToolResult::structured(
        json!({"entries": rows, "total": total}),
    ))
}

/// `pap dispatch --dry-run --explain` for one event: decided against the real state inside
/// a write transaction that is then rolled back, so nothing is recorded (and, unlike the
/// command's private copy of the store, nothing is copied).
fn explain(server: &PapMcp, args: &JsonObject) -> Result<CallToolResult, McpError> {
    let value = args
        .get("event")
        .cloned()
        .ok_or_else(|| McpError::invalid_params("`event` is required", None))?;
    let project = server.project();
    let len = serde_json::to_vec(&value).map_or(0, |b| b.len());
    let event = match event::validate(value, len, project.config.max_event_bytes, Origin::Outside) {
        Ok(e) => e,
        Err(bad) => {
            return Ok(CallToolResult::structured(json!({
                "status": "invalid", "event_id": bad.id, "type": bad.kind, "error": bad.reason,
            })));
        }
    };
    let pipeline = Pipeline::new(
        &project,
        Options {
            no_run: true,
            dry_run: true,
            explain: true,
            leave_blocked: false,
        },
    );
    let now = server.now();
    let mut report = None;
    let rolled_back = server.shared.store.write(|tx| {
        let input = crate::event::input::Location {
            source: "mcp:event_explain".into(),
            line: None,
            index: None,
        };
        let (decided, _) = pipeline.decide(tx, event.clone(), None, input, now)?;
        report = Some(decided.report);
        // A dry run: nothing it decided is kept.
        Err::<(), _>(storage::Error::Unchanged)
    });
    match (report, rolled_back) {
        (Some(report), _) => Ok(CallToolResult::structured(
            serde_json::to_value(&report)
                .map_err(|e| McpError::internal_error(e.to_string(), None))?,
        )),
        (None, Err(e)) => Err(store_error(e)),
        (None, Ok(())) => Err(McpError::internal_error(
            "the dry run decided nothing",
            None,
        )),
    }
}
