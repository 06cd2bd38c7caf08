//! `approval_respond`: only a person may answer an approval request, and the caller of a
//! tool may be a model. So the answer is never taken from the tool's arguments: the client
//! is asked, through MCP elicitation, to show the ATP request (title, context, actions) to
//! its user and return their choice, and only that choice is recorded. pap cannot see who
//! answered the form; it trusts the client to have shown it to a person (docs/src/reference/mcp.md says so).

use std::time::Duration;

use rmcp::ErrorData as McpError;
use rmcp::RoleServer;
use rmcp::model::{
    CallToolResult, ContentBlock, ElicitRequestParams, ElicitationAction, ElicitationSchema,
    EnumSchema, JsonObject,
};
use rmcp::service::RequestContext;
use serde_json::{Value, json};

use super::access::Need;
use super::resources::store_error;
use super::{PapMcp, Who};
use crate::agent::answer::{self, Answering};
use crate::domain::{Answer, Invocation, Status};

/// How long the person has to answer the client's form.
const ASK_FOR: Duration = Duration::from_secs(600);

pub(super) async fn respond(
    server: &PapMcp,
    who: &Who,
    args: &JsonObject,
    ctx: &RequestContext<RoleServer>,
) -> Result<CallToolResult, McpError> {
    if let Err(refused) = who.require(Need::Approve) {
        return Ok(refusal(refused.message.to_string()));
    }
    let declared = ctx
        .client_capabilities()
        .is_some_and(|c| c.elicitation.is_some());
    if !declared {
        return Ok(refusal(
            "this client does not support MCP elicitation, so pap cannot ask a person: only a \
             person may answer an approval request. Answer it with a client that supports \
             elicitation, the web console, or `pap approve`/`pap reject`."
                .into(),
        ));
    }
    let typed = args
        .get("invocation")
        .and_then(Value::as_str)
        .ok_or_else(|| {
            McpError::invalid_params("`invocation` (an invocation id) is required", None)
        })?
        .to_owned();
    // The short id every listing prints, or any prefix, as the CLI takes it.
    let id = super::views::resolve_invocation(server, &typed)?;
    let store = server.shared.store.clone();
    let now = server.now();
    let (inv, request) = {
        let wanted = id.clone();
        tokio::task::spawn_blocking(move || {
            store.read(|r| {
                let Some(inv) = r.invocation(&wanted)? else {
                    return Ok(None);
                };
                let atp = match &inv.approval_request {
                    Some(n) => r.notification(n)?.and_then(|n| n.atp),
                    None => None,
                };
                Ok(Some((inv, atp)))
            })
        })
        .await
        .map_err(|e| McpError::internal_error(e.to_string(), None))?
        .map_err(store_error)?
        .ok_or_else(|| McpError::invalid_params(format!("no invocation {id}"), None))?
    };
    if inv.status_at(now) != Status::AwaitingApproval {
        return Ok(refusal(format!(
            "{} is {}, not awaiting approval",
            inv.id,
            inv.status_at(now).as_str()
        )));
    }
    let (message, actions) = form(&inv, request.as_ref());
    let schema = ElicitationSchema::builder()
        .required_enum_schema(
            "action",
            EnumSchema::builder(actions.iter().map(|(id, _)| id.clone()).collect())
                .enum_titles(actions.iter().map(|(_, label)| label.clone()).collect())
                .map_err(|e| McpError::internal_error(e, None))?
                .build(),
        )
        .optional_string("note")
        .build()
        .map_err(|e| McpError::internal_error(e, None))?;
    let asked = ctx
        .peer
        .create_elicitation_with_timeout(
            ElicitRequestParams::FormElicitationParams {
                meta: None,
                message,
                requested_schema: schema,
            },
            Some(ASK_FOR),
        )
        .await
        .map_err(|e| McpError::internal_error(format!("the client did not answer: {e}"), None))?;
    let content = match asked.action {
        ElicitationAction::Accept => asked.content.unwrap_or(Value::Null),
        ElicitationAction::Decline => return Ok(nothing("the person declined to answer")),
        ElicitationAction::Cancel => return Ok(nothing("the person dismissed the request")),
        _ => return Ok(nothing("the client answered with an unknown action")),
    };
    let action = content["action"].as_str().unwrap_or_default().to_owned();
    if !actions.iter().any(|(a, _)| *a == action) {
        return Ok(refusal(format!(
            "the client returned action {:?}, which the request does not offer",
            crate::text::clip(&action, 40)
        )));
    }
    let note = content["note"]
        .as_str()
        .map(|n| crate::text::clip(n.trim(), 500))
        .filter(|n| !n.is_empty());
    let recorded = record(server, who, &inv.id, &action, note, ctx).await?;
    Ok(recorded)
}

/// The elicitation's message and the actions offered, from the ATP request.
fn form(inv: &Invocation, request: Option<&Value>) -> (String, Vec<(String, String)>) {
    let title = request
        .and_then(|r| r["context"]["title"].as_str())
        .map(str::to_owned)
        .unwrap_or_else(|| format!("Approve {} for {}?", inv.agent, inv.event_type));
    let mut message = format!(
        "{title}\n\nInvocation {} of agent {} (trigger {}, risk {}), provoked by event {} ({}).",
        inv.id, inv.agent, inv.trigger, inv.risk, inv.event_id, inv.event_type
    );
    if let Some(d) = request.and_then(|r| r["context"]["description"].as_str()) {
        message.push_str(&format!("\n\n{d}"));
    }
    // A batch's run acts on every event of it: each is listed (bounded).
    if let Some(batch) = crate::stages::batch_text::described(&inv.event) {
        message.push_str(&format!(
            "\n\nA batch of {} event(s):\n  {}",
            batch.total,
            batch.joined("\n  ")
        ));
    }
    if let Some(data) = inv.event.get("data") {
        let text = serde_json::to_string_pretty(data).unwrap_or_default();
        message.push_str(&format!(
            "\n\nEvent data:\n{}",
            crate::text::clip(&text, 2000)
        ));
    }
    if let Some(deadline) = request.and_then(|r| r["deadline"].as_str()) {
        message.push_str(&format!("\n\nAnswer before {deadline}."));
    }
    let mut actions: Vec<(String, String)> = request
        .and_then(|r| r["actions"].as_array())
        .map(|a| {
            a.iter()
                .filter_map(|a| {
                    let id = a["id"].as_str()?;
                    let mut label = a["label"].as_str().unwrap_or(id).to_owned();
                    let flags: Vec<&str> = a["flags"]
                        .as_array()
                        .map(|f| f.iter().filter_map(Value::as_str).collect())
                        .unwrap_or_default();
                    if !flags.is_empty() {
                        label.push_str(&format!(" ({})", flags.join(", ")));
                    }
                    Some((id.to_owned(), label))
                })
                .collect()
        })
        .unwrap_or_default();
    actions.retain(|(id, _)| id == "approve" || id == "reject");
    if actions.is_empty() {
        actions = vec![
            ("approve".into(), format!("Approve: run {}", inv.agent)),
            ("reject".into(), "Reject: do not run it".into()),
        ];
    }
    (crate::term::for_humans(&message).into_owned(), actions)
}

/// Records the person's answer, in one transaction that re-checks the request is open.
async fn record(
    server: &PapMcp,
    who: &Who,
    id: &str,
    action: &str,
    note: Option<String>,
    ctx: &RequestContext<RoleServer>,
) -> Result<CallToolResult, McpError> {
    let store = server.shared.store.clone();
    let project = server.project();
    let by = who.label().to_owned();
    let client = ctx.client_info().map(|c| crate::text::clip(&c.name, 100));
    let now = server.now();
    let (inv_id, action) = (id.to_owned(), action.to_owned());
    let done = tokio::task::spawn_blocking(move || {
        let answer = Answer {
            action_id: action.clone(),
            responder: json!({"id": by, "type": "human", "via": "mcp", "client": client}),
            responded_at: Some(crate::clock::rfc3339_ms(now)),
            recorded_at: now,
        };
        let answering = Answering {
            by: &by,
            note: note.clone(),
            answer,
            now,
        };
        store
            .write_or_refuse(|tx| match action.as_str() {
                "approve" => {
                    answer::approve(tx, &inv_id, &answering, false).map(|r| r.map(|()| Vec::new()))
                }
                _ => {
                    let why = note.as_deref().unwrap_or("rejected over MCP");
                    answer::reject(tx, &project, &inv_id, &answering, why)
                }
            })
            .map(|answered| answered.map(|events| (action, events)))
    })
    .await
    .map_err(|e| McpError::internal_error(e.to_string(), None))?;
    match done {
        Ok(Ok((action, events))) => {
            // Serve runs an approved invocation and decides a rejection's failure events.
            let handoff = server.hand_off(events).await;
            let state = if action == "approve" {
                "approved"
            } else {
                "rejected"
            };
            Ok(CallToolResult::structured(json!({
                "invocation": id,
                "answer": action,
                "state": state,
                "responder": who.label(),
                "serve": handoff == super::Handoff::Told,
            })))
        }
        Ok(Err(refused)) => Ok(refusal(refused.to_string())),
        Err(e) => Err(store_error(e)),
    }
}

fn refusal(why: String) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(why)])
}

fn nothing(why: &str) -> CallToolResult {
    CallToolResult::structured(json!({"answer": null, "recorded": false, "why": why}))
}
