//! Approval requests in the shape of ATP messages: the triage notification pap shows in the
//! inbox, and the response message `pap respond` takes.

use serde_json::{Value, json};

use super::ledger;
use crate::clock::rfc3339_ms;
use crate::domain::{Answer, Invocation, NotifyStatus};
use crate::manifest::Project;
use crate::storage::{self, WriteTx};

/// Why an answer cannot be recorded on an approval request: the one answer it takes was
/// given, or it closed unanswered.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AtpRefused {
    #[error("the approval request {request} was already answered: {action} at {at}")]
    Answered {
        request: String,
        action: String,
        at: String,
    },
    #[error("the approval request {request} closed unanswered ({reason}) at {at}")]
    Closed {
        request: String,
        reason: String,
        at: String,
    },
}

/// ATP `version` this implements.
pub(crate) const VERSION: &str = "1.0";

/// The ATP notification asking whether `inv` may run.
pub(crate) fn request(project: &Project, inv: &Invocation, description: &str, now: i64) -> Value {
    let agent = project.agent(&inv.agent);
    let mut flags: Vec<&str> = agent
        .map(|a| a.flags.iter().map(|f| f.as_str()).collect())
        .unwrap_or_default();
    // A high-risk run always asks for an explicit confirmation (that is why it waits).
    if !flags.contains(&"requires_confirmation") {
        flags.push("requires_confirmation");
    }
    let tools: Vec<Value> = agent
        .map(|a| {
            a.tools
                .iter()
                .map(|t| {
                    json!({
                        "name": t.name,
                        "server": t.server,
                        "risk": t.risk.as_str(),
                        "external": t.external,
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    let project_name = project.config.notify.project.clone().unwrap_or_else(|| {
        project
            .root
            .canonicalize()
            .ok()
            .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .unwrap_or_else(|| "pap".to_owned())
    });
    let batch = crate::stages::batch_text::described(&inv.event);
    let title = match (&batch, crate::adapter::alert_lead(&inv.event)) {
        (Some(b), Some((summary, _))) if b.total > 1 => format!(
            "Approve {} for a batch of {}: {summary} and {} more?",
            inv.agent,
            b.total,
            b.total - 1
        ),
        (Some(b), None) => format!(
            "Approve {} for a batch of {} {} events?",
            inv.agent, b.total, inv.event_type
        ),
        (_, Some((summary, _))) => format!("Approve {}: {summary}?", inv.agent),
        (None, None) => format!("Approve {} for {}?", inv.agent, inv.event_type),
    };
    let mut out = json!({
        "id": uuid_v4(),
        "version": VERSION,
        "timestamp": rfc3339_ms(now),
        "service": {"id": "pap", "name": "pap (Provoke the Agent Protocol dispatcher)"},
        "context": {
            "title": title,
            "description": description,
            "project": project_name,
            "metadata": {
                "invocation_id": inv.id,
                "trigger": inv.trigger,
                "agent": inv.agent,
                "event_id": inv.event_id,
                "event_type": inv.event_type,
                "risk": inv.risk,
                "tools": tools,
            },
        },
        "actions": [
            {
                "id": "approve",
                "label": format!("Approve: run {}", inv.agent),
                "response_type": "simple",
                "flags": flags,
            },
            {
                "id": "reject",
                "label": "Reject: do not run it",
                "response_type": "simple",
                "flags": [],
            },
        ],
    });
    if let Some(deadline) = inv.approval_deadline {
        out["deadline"] = json!(rfc3339_ms(deadline));
    }
    // Every event the run would act on, bounded: a person approves what they can see.
    if let Some(b) = batch {
        out["context"]["metadata"]["batch"] = json!({
            "count": b.total,
            "events": b.lines,
            "more": b.more(),
        });
    }
    out
}

/// Records the answer to the approval request `notification` (in the transaction that
/// approves, rejects or expires the invocation). A human answer also means the human saw it:
/// the request becomes DELIVERED.
pub(crate) fn record_answer(
    tx: &mut dyn WriteTx,
    notification: &str,
    answer: Answer,
    now: i64,
) -> storage::Result<Result<(), AtpRefused>> {
    let Some(mut n) = tx.notification(notification)? else {
        return Ok(Ok(()));
    };
    let request = n.atp_id().unwrap_or(&n.id).to_owned();
    if let Some(old) = &n.answer {
        return Ok(Err(AtpRefused::Answered {
            request,
            action: old.action_id.clone(),
            at: rfc3339_ms(old.recorded_at),
        }));
    }
    if let Some(closed) = &n.closed {
        return Ok(Err(AtpRefused::Closed {
            request,
            reason: closed.reason.clone(),
            at: rfc3339_ms(closed.at),
        }));
    }
    let by = format!(
        "user:{}",
        answer.responder["id"].as_str().unwrap_or("unknown")
    );
    n.answer = Some(answer);
    // A person answered: they saw it.
    let lease = n.owner_lease;
    let note = Some("answered".into());
    if ledger::finish(&mut n, lease, NotifyStatus::Delivered, &by, note, now).is_ok() {
        n.ack_at = Some(now);
    }
    tx.put_notification(&n).map(Ok)
}

/// Closes the approval request `notification` unanswered (`reason`: `expired` or
/// `cancelled`), in the transaction that ends its invocation: nobody can answer it any more,
/// no ATP response is invented for it, and it is settled (DELIVERED, unacknowledged).
pub(crate) fn close_unanswered(
    tx: &mut dyn WriteTx,
    notification: &str,
    reason: &str,
    now: i64,
) -> storage::Result<()> {
    let Some(mut n) = tx.notification(notification)? else {
        return Ok(());
    };
    if n.answer.is_some() || n.closed.is_some() {
        return Ok(());
    }
    n.closed = Some(crate::domain::Closed {
        reason: reason.to_owned(),
        at: now,
    });
    // Nothing is left for anyone to do with it: it leaves `dispatched` for DELIVERED (ANP's
    // terminal state of a notification that reached its channel), by the system, with no
    // acknowledgement (`ack_at` stays unset: no person saw it). The outcome notification of
    // the ending tells the person what happened.
    let lease = n.owner_lease;
    let note = Some(format!("closed unanswered: {reason}"));
    let _ = ledger::finish(&mut n, lease, NotifyStatus::Delivered, "system", note, now);
    tx.put_notification(&n)
}

/// A UUID version 4 (RFC 9562) from the operating system's random source.
pub fn uuid_v4() -> String {
    let mut b = [0u8; 16];
    // Without randomness the process cannot make a unique id: nothing sensible to fall back on.
    getrandom::fill(&mut b).expect("the OS random source");
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h = crate::text::hex(&b);
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

/// An ATP response message, checked field by field.
#[derive(Debug, Clone, PartialEq)]
pub struct Response {
    pub notification_id: String,
    pub action_id: String,
    pub responded_at: String,
    pub responder_id: String,
    pub responder: Value,
}

crate::reason::reason_error!(
    /// Why an ATP response message is not one, naming its field.
    InvalidResponse
);

/// Parses and checks a response message (ATP "Response Message Structure"). Every problem is
/// named with its field.
pub fn parse_response(v: &Value) -> Result<Response, InvalidResponse> {
    parse_response_reason(v).map_err(InvalidResponse::from)
}

/// [`parse_response`], with the reason as text (for messages that quote it).
pub(crate) fn parse_response_reason(v: &Value) -> Result<Response, String> {
    let obj = v.as_object().ok_or("an ATP response is a JSON object")?;
    let string = |field: &str| -> Result<String, String> {
        match obj.get(field) {
            Some(Value::String(s)) if !s.is_empty() => Ok(s.clone()),
            Some(_) => Err(format!("`{field}` must be a non-empty string")),
            None => Err(format!("`{field}` is required")),
        }
    };
    let notification_id = string("notification_id")?;
    let action_id = string("action_id")?;
    let responded_at = string("responded_at")?;
    if responded_at.parse::<jiff::Timestamp>().is_err() {
        return Err(format!(
            "`responded_at` `{responded_at}` is not an ISO 8601 / RFC 3339 timestamp"
        ));
    }
    // approve and reject are `simple` actions: ATP says their response_data must be null.
    match obj.get("response_data") {
        None | Some(Value::Null) => {}
        Some(_) => {
            return Err(format!(
                "`response_data` must be null: `{action_id}` is a simple action"
            ));
        }
    }
    let responder = obj
        .get("responder")
        .ok_or("`responder` is required")?
        .clone();
    let responder_id = match responder.get("id") {
        Some(Value::String(s)) if !s.is_empty() => s.clone(),
        _ => return Err("`responder.id` must be a non-empty string".into()),
    };
    match responder.get("type").and_then(Value::as_str) {
        Some("human") => {}
        Some("agent") => {
            return Err(
                "`responder.type` is `agent`: only a human may answer an approval request".into(),
            );
        }
        Some(other) => {
            return Err(format!(
                "`responder.type` `{other}` is neither `human` nor `agent`"
            ));
        }
        None => return Err("`responder.type` is required (`human`)".into()),
    }
    Ok(Response {
        notification_id,
        action_id,
        responded_at,
        responder_id,
        responder,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuids_are_version_4_and_distinct() {
        let a = uuid_v4();
        let re = regex::Regex::new(
            "^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$",
        )
        .unwrap();
        assert!(re.is_match(&a), "{a}");
        assert_ne!(a, uuid_v4());
    }

    #[test]
    fn a_response_names_its_bad_field() {
        let ok = json!({
            "notification_id": "550e8400-e29b-41d4-a716-446655440000",
            "action_id": "approve",
            "response_data": null,
            "responded_at": "2025-05-25T10:35:12Z",
            "responder": {"id": "user_123", "type": "human"}
        });
        assert_eq!(parse_response(&ok).unwrap().responder_id, "user_123");
        let cases = [
            (
                "responder",
                json!({"id": "bot", "type": "agent"}),
                "only a human",
            ),
            ("response_data", json!({"x": 1}), "must be null"),
            ("responded_at", json!("yesterday"), "not an ISO 8601"),
            ("action_id", json!(""), "`action_id` must be"),
        ];
        for (field, value, expect) in cases {
            let mut bad = ok.clone();
            bad[field] = value;
            let err = parse_response(&bad).unwrap_err();
            assert!(err.reason().contains(expect), "{field}: {err}");
        }
        let mut missing = ok.clone();
        missing.as_object_mut().unwrap().remove("notification_id");
        assert!(
            parse_response(&missing)
                .unwrap_err()
                .reason()
                .contains("required")
        );
    }
}
