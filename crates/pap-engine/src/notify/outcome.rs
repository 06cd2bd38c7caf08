//! What produces notifications: each invocation outcome (succeeded, failed, awaiting
//! approval, rejected, expired) and each EXTERNAL tool call (ANP 6.1), shaped by the agent's
//! `notify:` routes.

use serde_json::{Map, Value, json};

use super::atp;
use super::produce::{Draft, produce};
use crate::domain::{Handler, Invocation, NotifyStatus, Party, Routing};
use crate::manifest::Project;
use crate::manifest::compiled_notify::{OutcomeKind, RouteSpec};
use crate::storage::{self, WriteTx};

/// The notification of an invocation's outcome, written in the transaction that records the
/// outcome. An internal turn's outcome is the fate of what it handled (see `reply`), not a
/// notification of its own.
pub(crate) fn invocation_outcome(
    tx: &mut dyn WriteTx,
    project: &Project,
    inv: &Invocation,
    kind: OutcomeKind,
    now: i64,
) -> storage::Result<()> {
    if inv.internal {
        return Ok(());
    }
    if kind == OutcomeKind::AwaitingApproval {
        return approval_request(tx, project, inv, now).map(|_| ());
    }
    let route = route_of(project, inv, kind);
    if !route.enabled {
        return Ok(());
    }
    let draft = draft(project, inv, kind, &route, &[]);
    produce(tx, project, draft, now)?;
    Ok(())
}

/// The approval request of an invocation awaiting approval: always shown to a human (target
/// user, handler system), carrying the ATP notification object.
pub(crate) fn approval_request(
    tx: &mut dyn WriteTx,
    project: &Project,
    inv: &Invocation,
    now: i64,
) -> storage::Result<String> {
    let kind = OutcomeKind::AwaitingApproval;
    let mut route = route_of(project, inv, kind);
    // Lint refuses an agent side here; a manifest that slipped through still reaches a human.
    route.routing.target = Party::User;
    route.routing.handler = Handler::System;
    // Disabling it would leave a decision nobody is asked for: the request is always made.
    let mut draft = draft(project, inv, kind, &route, &[]);
    draft.agent = None;
    draft.atp = Some(atp::request(project, inv, &draft.content, now));
    produce(tx, project, draft, now)
}

/// ANP 6.1: the user is made aware of every call of an EXTERNAL tool. Written before the call
/// is made. A call made in an internal turn goes to the user directly (6.1.2 point 5).
pub(crate) fn external_call(
    tx: &mut dyn WriteTx,
    project: &Project,
    inv: &Invocation,
    tool: &str,
    server: &str,
    now: i64,
) -> storage::Result<()> {
    let kind = OutcomeKind::ExternalToolCall;
    let mut route = route_of(project, inv, kind);
    // ANP 6.1 is a hard requirement: the manifest check refuses a route that would keep the
    // user from hearing of the call, and this holds whatever a route says.
    route.enabled = true;
    route.routing.target = Party::User;
    if inv.internal {
        route.routing.target = Party::User;
        route.routing.handler = Handler::System;
        route.agent = None;
    }
    let mut draft = draft(
        project,
        inv,
        kind,
        &route,
        &[("tool", tool), ("server", server)],
    );
    if inv.internal {
        draft.agent = None;
    }
    produce(tx, project, draft, now)?;
    Ok(())
}

/// An agent's budget is used up (a pap extension): a person is told once while the message
/// waits unacknowledged; a stream of refused decisions adds nothing to the inbox until it is
/// acknowledged (keyed by agent, as ANP 7.1 deduplication keys are).
pub(crate) fn budget_exceeded(
    tx: &mut dyn WriteTx,
    project: &Project,
    agent: &crate::manifest::compiled::Agent,
    trigger: &str,
    event: &crate::event::Event,
    why: &str,
    now: i64,
) -> storage::Result<()> {
    let key = format!("budget.exceeded:{}", agent.id);
    if let Some(id) = tx.dedup_lookup(&key)?
        && let Some(told) = tx.notification(&id)?
        && matches!(
            told.status,
            NotifyStatus::Pending | NotifyStatus::Dispatched | NotifyStatus::Locked
        )
    {
        return Ok(());
    }
    let mut metadata = Map::new();
    metadata.insert("agent".into(), json!(agent.id));
    metadata.insert("trigger".into(), json!(trigger));
    metadata.insert("event_id".into(), json!(event.id));
    metadata.insert("event_type".into(), json!(event.kind));
    metadata.insert("reason".into(), json!(why));
    let content = format!(
        "{why}: the latest refused decision was trigger {trigger} on event {} ({}); decisions for agent {} stay budget_exceeded until spending leaves the 24-hour window",
        event.id, event.kind, agent.id
    );
    let draft = Draft {
        kind: "budget.exceeded".to_owned(),
        level: crate::domain::Level::Warning,
        content: project.redactor.text(&content).into_owned(),
        deduplication_key: Some(key),
        metadata,
        routing: Routing {
            address: Default::default(),
            target: Party::User,
            handler: Handler::System,
        },
        session: None,
        agent: None,
        instructions: None,
        deadline: project.config.notify.deadline,
        atp: None,
        depth: 0,
    };
    produce(tx, project, draft, now)?;
    Ok(())
}

/// The route of `inv`'s `kind` notification: its trigger's, else its agent's, else the
/// defaults.
fn route_of(project: &Project, inv: &Invocation, kind: OutcomeKind) -> RouteSpec {
    let of_trigger = project
        .trigger(&inv.trigger)
        .and_then(|t| t.notify.get(&kind));
    of_trigger
        .or_else(|| project.agent(&inv.agent).and_then(|a| a.notify.get(&kind)))
        .cloned()
        .unwrap_or_default()
}

fn draft(
    project: &Project,
    inv: &Invocation,
    kind: OutcomeKind,
    route: &RouteSpec,
    extra: &[(&str, &str)],
) -> Draft {
    let mut metadata = Map::new();
    metadata.insert("invocation_id".into(), json!(inv.id));
    metadata.insert("trigger".into(), json!(inv.trigger));
    metadata.insert("agent".into(), json!(inv.agent));
    metadata.insert("event_id".into(), json!(inv.event_id));
    metadata.insert("event_type".into(), json!(inv.event_type));
    metadata.insert("risk".into(), json!(inv.risk));
    metadata.insert("status".into(), json!(inv.status.as_str()));
    metadata.insert("attempts".into(), json!(inv.attempts));
    if let Some(e) = &inv.error {
        metadata.insert("error".into(), json!(crate::text::clip(e, 2000)));
    }
    for (k, v) in extra {
        metadata.insert((*k).into(), json!(v));
    }
    let lookup = |name: &str| -> Option<String> {
        match name {
            "output" => inv.output.as_ref().map(|o| match o {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            }),
            "tool" | "server" => extra
                .iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| (*v).to_owned()),
            other => metadata.get(other).map(|v| match v {
                Value::String(s) => s.clone(),
                v => v.to_string(),
            }),
        }
    };
    let content = match &route.content {
        Some(t) => t.render(lookup, &inv.event),
        None => default_content(kind, inv, extra),
    };
    // The text quotes the event (its fields, a template's placeholders), which pap did not
    // redact when it arrived: a known secret value in it never reaches an inbox or a sink.
    let content = project.redactor.text(&content).into_owned();
    let session = route.session.as_ref().map(|t| t.render(lookup, &inv.event));
    let deduplication_key = route
        .deduplication_key
        .as_ref()
        .map(|t| t.render(lookup, &inv.event))
        .filter(|k| !k.is_empty());
    let level = route.level.unwrap_or(kind.default_level());
    // With handler system and target user, the agent the route names (else the agent whose
    // outcome it is) is made aware at its next turn (ANP 4.1, "ambient awareness").
    let agent = route.agent.clone().or_else(|| Some(inv.agent.clone()));
    Draft {
        kind: kind.kind().to_owned(),
        level,
        content,
        deduplication_key,
        metadata,
        routing: Routing {
            address: route.routing.address,
            target: route.routing.target,
            handler: route.routing.handler,
        },
        session,
        agent,
        instructions: route.instructions.clone(),
        deadline: route.deadline.unwrap_or(project.config.notify.deadline),
        atp: None,
        depth: inv.depth,
    }
}

/// How much of an agent's output a default notification quotes.
const OUTPUT_CHARS: usize = 300;
/// How many of the event's fields it names, and how much of each value.
const KEY_FIELDS: usize = 6;
const FIELD_CHARS: usize = 60;

/// What on-call reads first about the event: the first few top-level values of its data
/// (strings, numbers, booleans), each clipped, as `name=value`.
fn key_fields(inv: &Invocation) -> String {
    let Some(data) = inv.event.get("data").and_then(serde_json::Value::as_object) else {
        return String::new();
    };
    data.iter()
        .filter_map(|(name, value)| {
            let text = match value {
                serde_json::Value::String(s) => s.clone(),
                serde_json::Value::Number(n) => n.to_string(),
                serde_json::Value::Bool(b) => b.to_string(),
                _ => return None,
            };
            Some(format!(
                "{name}={}",
                crate::text::clip_whole(&text, FIELD_CHARS)
            ))
        })
        .take(KEY_FIELDS)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The agent's output, clipped (already redacted when it was recorded).
fn output_excerpt(inv: &Invocation) -> Option<String> {
    let text = match inv.output.as_ref()? {
        serde_json::Value::Null => return None,
        serde_json::Value::String(s) if s.trim().is_empty() => return None,
        serde_json::Value::String(s) => s.trim().to_owned(),
        other => other.to_string(),
    };
    Some(crate::text::clip_whole(&text, OUTPUT_CHARS))
}

fn default_content(kind: OutcomeKind, inv: &Invocation, extra: &[(&str, &str)]) -> String {
    let text = outcome_text(kind, inv, extra);
    // A batch's run acts on every event of it: each is listed (bounded), not only the first.
    if kind != OutcomeKind::ExternalToolCall
        && let Some(batch) = crate::stages::batch_text::described(&inv.event)
    {
        return format!(
            "{text} — a batch of {} event(s): {}",
            batch.total,
            batch.joined("; ")
        );
    }
    // An alert leads with what fired, and ends with where to go rather than a field dump.
    if kind != OutcomeKind::ExternalToolCall
        && let Some((summary, links)) = crate::adapter::alert_lead(&inv.event)
    {
        let links: Vec<String> = links.iter().map(|(t, u)| format!("{t}: {u}")).collect();
        return if links.is_empty() {
            format!("{summary} — {text}")
        } else {
            format!("{summary} — {text} ({})", links.join(", "))
        };
    }
    let fields = key_fields(inv);
    if fields.is_empty() || kind == OutcomeKind::ExternalToolCall {
        text
    } else {
        format!("{text} [{fields}]")
    }
}

fn outcome_text(kind: OutcomeKind, inv: &Invocation, extra: &[(&str, &str)]) -> String {
    let error = inv.error.as_deref().unwrap_or("no reason given");
    let about = format!(
        "{} (event {}, trigger {})",
        inv.event_type, inv.event_id, inv.trigger
    );
    match kind {
        OutcomeKind::Succeeded => match output_excerpt(inv) {
            Some(output) => format!(
                "{} succeeded on {about} after {} attempt(s): {output}",
                inv.agent, inv.attempts
            ),
            None => format!(
                "{} succeeded on {about} after {} attempt(s)",
                inv.agent, inv.attempts
            ),
        },
        OutcomeKind::Failed => format!(
            "{} failed on {about} after {} attempt(s): {}",
            inv.agent,
            inv.attempts,
            crate::text::clip(error, 500)
        ),
        OutcomeKind::AwaitingApproval => format!(
            "{} (risk {}) waits for approval to handle {about}: `pap approve {}` or `pap reject {} --reason …` (`pap invocations show {}` shows the event)",
            inv.agent, inv.risk, inv.id, inv.id, inv.id
        ),
        OutcomeKind::Rejected => format!("{} was not run on {about}: {error}", inv.agent),
        OutcomeKind::Expired => format!("{} was not run on {about}: {error}", inv.agent),
        OutcomeKind::Cancelled => format!("{} was stopped on {about}: {error}", inv.agent),
        OutcomeKind::ExternalToolCall => {
            let get = |k: &str| {
                extra
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map_or("", |(_, v)| *v)
                    .to_owned()
            };
            format!(
                "{} called the external tool `{}` on `{}` (invocation {})",
                inv.agent,
                get("tool"),
                get("server"),
                inv.id
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::Status;
    use serde_json::json;

    #[test]
    fn the_default_text_quotes_the_output_and_the_events_key_fields() {
        let mut inv = Invocation::for_tests("inv_1", Status::Succeeded);
        inv.attempts = 1;
        inv.output = Some(json!(format!(
            "restarted db-1; {}",
            "then waited ".repeat(40)
        )));
        inv.event = json!({"data": {"host": "db-1", "severity": "critical", "nested": {"a": 1},
                                    "p99_ms": 870, "note": "y ".repeat(50)}});
        let text = default_content(OutcomeKind::Succeeded, &inv, &[]);
        assert!(
            text.contains("after 1 attempt(s): restarted db-1; then waited"),
            "{text}"
        );
        assert!(text.contains('…'), "the output is clipped: {text}");
        assert!(text.ends_with(']'), "{text}");
        assert!(text.contains("[host=db-1, "), "{text}");
        assert!(
            text.contains("severity=critical") && text.contains("p99_ms=870"),
            "{text}"
        );
        assert!(!text.contains("nested"), "only scalar fields: {text}");
        inv.output = None;
        let text = default_content(OutcomeKind::Succeeded, &inv, &[]);
        assert!(text.contains("after 1 attempt(s) [host=db-1"), "{text}");
    }

    #[test]
    fn an_alert_leads_with_its_summary_and_ends_with_its_links() {
        let mut inv = Invocation::for_tests("inv_1", Status::AwaitingApproval);
        inv.agent = "restart".into();
        inv.event_type = "alertmanager.alert.firing".into();
        inv.event = json!({"data": {
            "summary": "HighLatency (page) on api:8000: p99 above 2s",
            "links": [{"title": "runbook", "url": "https://runbooks/lat"},
                      {"title": "evil", "url": "javascript:alert(1)"}],
            "endsAt": "0001-01-01T00:00:00Z", "groupKey": "{}:{}"}});
        let text = default_content(OutcomeKind::AwaitingApproval, &inv, &[]);
        assert!(
            text.starts_with("HighLatency (page) on api:8000: p99 above 2s — restart (risk high) waits for approval"),
            "{text}"
        );
        assert!(text.ends_with("(runbook: https://runbooks/lat)"), "{text}");
        assert!(
            !text.contains("endsAt") && !text.contains("javascript"),
            "{text}"
        );
    }
}
