//! The human inbox (chat-inbox spec): append-only messages with strictly increasing ids,
//! read after a watermark; a human acknowledgement marks a notification DELIVERED.

use serde_json::{Value, json};

use super::ledger::{self, Refused};
use crate::clock::rfc3339_ms;
use crate::domain::{InboxMessage, Notification, NotifyStatus};
use crate::storage::{self, WriteTx};

/// What `pap inbox ack` did with one id.
#[derive(Debug, Clone, PartialEq)]
pub enum Acked {
    Delivered { notification: String },
    Already { notification: String },
}

/// The human acknowledges inbox message `message`: its notification becomes DELIVERED
/// (through LOCKED, under the lease it has now). Acknowledging a delivered one again is a
/// no-op; a FAILED one cannot change.
pub fn ack(tx: &mut dyn WriteTx, message: u64, user: &str, now: i64) -> storage::Result<Acked> {
    let msg = tx
        .inbox_message(message)?
        .ok_or_else(|| storage::Error::Conflict(format!("no inbox message {message}")))?;
    if msg.is_post() {
        return Err(storage::Error::Conflict(format!(
            "inbox message {message} is a post by {}, not a notification: there is nothing to acknowledge",
            msg.author
        )));
    }
    let mut n = tx.notification(&msg.notification_id)?.ok_or_else(|| {
        storage::Error::Conflict(format!(
            "inbox message {message} names {}, which is not in the store",
            msg.notification_id
        ))
    })?;
    if n.status == NotifyStatus::Delivered {
        return Ok(Acked::Already {
            notification: n.id.clone(),
        });
    }
    let by = format!("user:{user}");
    let lease = n.owner_lease;
    ledger::finish(
        &mut n,
        lease,
        NotifyStatus::Delivered,
        &by,
        Some(format!("acknowledged in the inbox (message {message})")),
        now,
    )
    .map_err(|r| match r {
        Refused::Terminal { .. } => storage::Error::Conflict(format!(
            "inbox message {message}: {} is {}, which cannot be acknowledged",
            n.id,
            n.status.as_str()
        )),
        r => storage::Error::Conflict(format!("inbox message {message}: {r}")),
    })?;
    n.ack_at = Some(now);
    if let Some(due) = n.delivery_deadline.take() {
        tx.remove_job(due, &super::produce::watchdog_job(&n.id))?;
    }
    let id = n.id.clone();
    tx.put_notification(&n)?;
    super::queue::tell_acknowledged(tx, &n)?;
    Ok(Acked::Delivered { notification: id })
}

/// One inbox line as `pap inbox --json` prints it: the message joined with the live status of
/// its notification, as of `now` (an approval request past its deadline shows `expired` before
/// any writer records it, as `pap invocations` shows the invocation).
pub fn view(msg: &InboxMessage, n: Option<&Notification>, now: i64) -> Value {
    let mut v = json!({
        "id": msg.id,
        "notification_id": msg.notification_id,
        "status": match n {
            Some(n) => n.status.as_str(),
            None if msg.is_post() => "posted",
            None => "unknown",
        },
        "created_at": rfc3339_ms(msg.ts),
        "ack_at": n.and_then(|n| n.ack_at).map(rfc3339_ms),
        "author": msg.author,
        "kind": msg.kind,
        "level": msg.level.as_str(),
        "content": msg.content,
        "routing": msg.routing,
        "user": msg.user,
        "session": msg.session,
        "metadata": msg.metadata,
        "deduplication_key": msg.deduplication_key,
        "supersedes": msg.supersedes,
    });
    if let Some(atp) = &msg.atp {
        v["atp"] = atp.clone();
        v["approval"] = approval_state(n, atp, now);
    }
    v
}

/// Whether an approval request is still open, and how it was answered: one unanswered past
/// its ATP `deadline` is expired (an expired approval is a denial), though no writer has
/// recorded it yet.
fn approval_state(n: Option<&Notification>, atp: &Value, now: i64) -> Value {
    if let Some(closed) = n.and_then(|n| n.closed.as_ref()) {
        return json!({"state": closed.reason, "closed_at": rfc3339_ms(closed.at)});
    }
    let deadline = atp["deadline"]
        .as_str()
        .and_then(|d| d.parse::<jiff::Timestamp>().ok())
        .map(|d| d.as_millisecond());
    let answered = n.is_some_and(|n| n.answer.is_some());
    if let Some(deadline) = deadline.filter(|d| !answered && *d <= now) {
        return json!({"state": "expired", "closed_at": rfc3339_ms(deadline)});
    }
    match n.and_then(|n| n.answer.as_ref()) {
        Some(a) => json!({
            "state": match a.action_id.as_str() {
                "approve" => "approved",
                "reject" => "rejected",
                other => other,
            },
            "action_id": a.action_id,
            "responder": a.responder,
            "responded_at": a.responded_at,
            "recorded_at": rfc3339_ms(a.recorded_at),
        }),
        None => json!({"state": "open"}),
    }
}

/// A notification as `pap notifications show --json` prints it.
pub fn notification_view(n: &Notification) -> Value {
    let mut v = serde_json::to_value(n).expect("serialisable");
    if let Some(at) = v["closed"]["at"].as_i64() {
        v["closed"]["at"] = json!(rfc3339_ms(at));
    }
    let times = ["created_at", "updated_at", "ack_at", "delivery_deadline"];
    for field in times {
        if let Some(ms) = v.get(field).and_then(Value::as_i64) {
            v[field] = json!(rfc3339_ms(ms));
        }
    }
    if let Some(history) = v.get_mut("history").and_then(Value::as_array_mut) {
        for t in history {
            if let Some(ms) = t.get("at").and_then(Value::as_i64) {
                t["at"] = json!(rfc3339_ms(ms));
            }
        }
    }
    v
}
