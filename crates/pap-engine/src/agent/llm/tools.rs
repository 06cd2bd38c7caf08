//! The tools of one attempt: exactly those the manifest lists, found on their MCP servers,
//! with each call checked before it reaches a server.
//!
//! A call is refused (an error result back to the model, never a crash) when the tool is not
//! offered, its arguments are not an object or do not match the tool's `inputSchema`, or the
//! tool is `high` risk and the invocation was not approved. Every call, EXTERNAL or INTERNAL
//! (ANP 6.1.1), is written to the audit log before it is made, so nothing an agent did
//! through a tool goes unrecorded; the user is made aware of each EXTERNAL one.

use std::collections::{BTreeSet, HashMap};
use std::time::Instant;

use serde_json::Value;

use super::chat::{ToolCall, ToolDef, ToolResult};
use crate::agent::Runtime;
use crate::agent::mcp;
use crate::domain::{Invocation, ToolCallRecord};
use crate::manifest::compiled::RiskLevel;
use crate::manifest::compiled::{Agent, ToolSpec};
use crate::text::clip as truncate;

/// Arguments and results are kept in the transcript up to this many characters.
const KEEP: usize = 2000;

struct Offered {
    spec: ToolSpec,
    validator: Option<jsonschema::Validator>,
}

pub(super) struct Session {
    mcp: Option<mcp::Session>,
    defs: Vec<ToolDef>,
    offered: HashMap<String, Offered>,
}

impl Session {
    /// Connects the servers the manifest's tools name and finds each listed tool on its server.
    pub(super) async fn open(
        rt: &Runtime,
        agent: &Agent,
        inv: &Invocation,
        trace: Option<&crate::trace_context::TraceContext>,
    ) -> Result<Session, mcp::ConnectError> {
        if agent.tools.is_empty() {
            return Ok(Session {
                mcp: None,
                defs: Vec::new(),
                offered: HashMap::new(),
            });
        }
        let names: BTreeSet<String> = agent.tools.iter().map(|t| t.server.clone()).collect();
        let project = &rt.project;
        // The attempt's trace, to a server that traces: `TRACEPARENT` for one started here,
        // the `traceparent` header for one over HTTP (see `mcp::connect_one`).
        let traceparent = trace.map(|t| t.traceparent());
        let mut context = vec![
            ("PAP_INVOCATION_ID", inv.id.as_str()),
            ("PAP_AGENT_ID", inv.agent.as_str()),
        ];
        if let Some(tp) = &traceparent {
            context.push(("TRACEPARENT", tp.as_str()));
        }
        let mut mcp =
            mcp::Session::connect(&project.root, &project.config.mcp_servers, &names, &context)
                .await?;
        match find_listed(&mcp, agent).await {
            Ok((defs, offered)) => Ok(Session {
                mcp: Some(mcp),
                defs,
                offered,
            }),
            Err(e) => {
                mcp.shutdown().await;
                Err(mcp::ConnectError {
                    reason: e,
                    permanent: false,
                })
            }
        }
    }

    pub(super) fn offered(&self) -> &[ToolDef] {
        &self.defs
    }

    /// Makes every call of one model turn concurrently. Results come back in the order of the
    /// calls. `Err` when a server failed (not a tool): that fails the attempt.
    pub(super) async fn call_all(
        &self,
        rt: &Runtime,
        inv: &Invocation,
        calls: &[ToolCall],
        span: &crate::telemetry::Span,
    ) -> Result<(Vec<ToolResult>, Vec<ToolCallRecord>), String> {
        let runs = calls.iter().map(|call| self.call_one(rt, inv, call, span));
        let done = futures_util::future::join_all(runs).await;
        let mut results = Vec::new();
        let mut records = Vec::new();
        for outcome in done {
            let (result, record) = outcome?;
            results.push(result);
            records.push(record);
        }
        Ok((results, records))
    }

    async fn call_one(
        &self,
        rt: &Runtime,
        inv: &Invocation,
        call: &ToolCall,
        parent: &crate::telemetry::Span,
    ) -> Result<(ToolResult, ToolCallRecord), String> {
        let started = Instant::now();
        let arguments_text = match &call.arguments {
            Ok(map) => serde_json::to_string(map).expect("JSON"),
            Err(raw) => raw.clone(),
        };
        let mut record = ToolCallRecord {
            id: call.id.clone(),
            tool: call.name.clone(),
            arguments: truncate(&arguments_text, KEEP),
            ..ToolCallRecord::default()
        };
        let refuse = |mut record: ToolCallRecord, why: String| {
            record.refused = true;
            record.is_error = true;
            record.result = why.clone();
            Ok((
                ToolResult {
                    call_id: call.id.clone(),
                    content: why,
                    is_error: true,
                },
                record,
            ))
        };
        let Some(tool) = self.offered.get(&call.name) else {
            return refuse(
                record,
                format!(
                    "tool `{}` is not available to this agent; it was not called",
                    call.name
                ),
            );
        };
        record.server = tool.spec.server.clone();
        record.external = tool.spec.external;
        let arguments = match &call.arguments {
            Ok(map) => map.clone(),
            Err(raw) => {
                return refuse(
                    record,
                    format!(
                        "the arguments for `{}` are not a JSON object: {}",
                        call.name,
                        truncate(raw, 200)
                    ),
                );
            }
        };
        if let Some(validator) = &tool.validator {
            let instance = Value::Object(arguments.clone());
            let problems: Vec<String> = validator
                .iter_errors(&instance)
                .map(|e| {
                    let at = e.instance_path().to_string();
                    if at.is_empty() {
                        e.to_string()
                    } else {
                        format!("{at}: {e}")
                    }
                })
                .collect();
            if !problems.is_empty() {
                return refuse(
                    record,
                    format!(
                        "invalid arguments for `{}`: {}; it was not called",
                        call.name,
                        problems.join("; ")
                    ),
                );
            }
        }
        if tool.spec.risk == RiskLevel::High && !approved(inv) {
            return refuse(
                record,
                format!(
                    "`{}` is a high-risk tool and this invocation was not approved; \
                     it was not called",
                    call.name
                ),
            );
        }
        // ANP 6.1.1: every call is audited, INTERNAL ones too, before it is made; the user
        // is made aware of an EXTERNAL one, in the same transaction as its audit line.
        let now = rt.clock.now_ms();
        let action = match tool.spec.external {
            true => "external_tool_call",
            false => "internal_tool_call",
        };
        let entry = crate::domain::AuditEntry::of(
            inv,
            now,
            action,
            None,
            Some(format!(
                "{} on mcp://{} with {}",
                call.name,
                tool.spec.server,
                // Redacted before it is cut: a cut key would escape redaction.
                truncate(&rt.project.redactor.text(&arguments_text), 500)
            )),
        );
        let (project, about) = (rt.project.clone(), inv.clone());
        let (tool_name, server) = (call.name.clone(), tool.spec.server.clone());
        let external = tool.spec.external;
        rt.write(move |tx| {
            tx.audit(entry.clone())?;
            match external {
                true => crate::notify::outcome::external_call(
                    tx, &project, &about, &tool_name, &server, now,
                ),
                false => Ok(()),
            }
        })
        .await
        .map_err(|e| {
            format!(
                "cannot record a tool call in the audit log: {}",
                crate::error_text::describe_error(&e)
            )
        })?;
        let mcp = self.mcp.as_ref().expect("offered tools have a session");
        let span = tool_span(parent, call, &tool.spec.server);
        let outcome = mcp
            .call(&tool.spec.server, &call.name, arguments)
            .await
            .inspect_err(|why| span.fail("mcp_error", &rt.project.redactor.text(why)))?;
        if outcome.is_error {
            // The result is the server's text: not put on the span (it may quote anything).
            span.fail("tool_error", "the tool answered with an error");
        }
        drop(span);
        record.is_error = outcome.is_error;
        record.result = truncate(&outcome.text, KEEP);
        record.duration_ms = started.elapsed().as_millis() as u64;
        Ok((
            ToolResult {
                call_id: call.id.clone(),
                content: outcome.text,
                is_error: outcome.is_error,
            },
            record,
        ))
    }

    pub(super) async fn close(&mut self) {
        if let Some(mcp) = self.mcp.as_mut() {
            mcp.shutdown().await;
        }
    }
}

/// The span of one MCP tool call (OpenTelemetry's MCP conventions: `tools/call {tool}`, a
/// client span), a child of the model's turn's attempt. No arguments or result on it.
fn tool_span(
    parent: &crate::telemetry::Span,
    call: &ToolCall,
    server: &str,
) -> crate::telemetry::Span {
    use crate::telemetry::{self, Attr};
    telemetry::start(
        || format!("tools/call {}", call.name),
        telemetry::Parent::Span(parent),
        telemetry::Kind::Client,
        || {
            vec![
                Attr::new("mcp.method.name", "tools/call"),
                Attr::new("gen_ai.operation.name", "execute_tool"),
                Attr::new("gen_ai.tool.name", call.name.clone()),
                Attr::new("gen_ai.tool.call.id", call.id.clone()),
                Attr::new("pap.mcp.server", server.to_owned()),
            ]
        },
    )
}

/// Each tool the manifest lists, found on its server, with its argument validator.
async fn find_listed(
    mcp: &mcp::Session,
    agent: &Agent,
) -> Result<(Vec<ToolDef>, HashMap<String, Offered>), String> {
    let listed = mcp.list_tools_reason().await?;
    let mut defs = Vec::new();
    let mut offered = HashMap::new();
    for spec in &agent.tools {
        let Some(found) = listed
            .iter()
            .find(|t| t.server == spec.server && t.name == spec.name)
        else {
            return Err(format!(
                "MCP server `{}` has no tool `{}` (it lists: {})",
                spec.server,
                spec.name,
                listed
                    .iter()
                    .filter(|t| t.server == spec.server)
                    .map(|t| t.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        };
        // A schema the validator cannot compile is the server's problem, not a reason to
        // stop the agent: such a tool's arguments go unchecked.
        let validator = jsonschema::validator_for(&found.input_schema).ok();
        defs.push(ToolDef {
            name: spec.name.clone(),
            description: found.description.clone(),
            input_schema: found.input_schema.clone(),
        });
        offered.insert(
            spec.name.clone(),
            Offered {
                spec: spec.clone(),
                validator,
            },
        );
    }
    Ok((defs, offered))
}

fn approved(inv: &Invocation) -> bool {
    inv.approval.as_ref().is_some_and(|a| a.approved)
}
