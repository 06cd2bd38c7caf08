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

/// Why an inbox message cannot be acknowledged: the reason a person sees, naming the message.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AckRefused {
    #[error("no inbox message {0}")]
    NoMessage(u64),
    #[error(
        "inbox message {message} is a post by {author}, not a notification: there is nothing to acknowledge"
    )]
    Post { message: u64, author: String },
    #[error("inbox message {message} names {notification}, which is not in the store")]
    Missing { message: u64, notification: String },
    #[error("inbox message {message}: {notification} is {status}, which cannot be acknowledged")]
    Finished {
        message: u64,
        notification: String,
        status: &'static str,
    },
    /// The notification's lifecycle refused (the ledger's own words).
    #[error("inbox message {message}: {refused}")]
    Refused { message: u64, refused: Refused },
}

/// The human acknowledges inbox message `message`: its notification becomes DELIVERED
/// (through LOCKED, under the lease it has now). Acknowledging a delivered one again is a
/// no-op; a FAILED one cannot change. A refusal is decided before anything is written.
pub fn ack(
    tx: &mut dyn WriteTx,
    message: u64,
    user: &str,
    now: i64,
) -> storage::Result<Result<Acked, AckRefused>> {
    let Some(msg) = tx.inbox_message(message)? else {
        return Ok(Err(AckRefused::NoMessage(message)));
    };
    if msg.is_post() {
        return Ok(Err(AckRefused::Post {
            message,
            author: msg.author,
        }));
    }
    let Some(mut n) = tx.notification(&msg.notification_id)? else {
        return Ok(Err(AckRefused::Missing {
            message,
            notification: msg.notification_id,
        }));
    };
    if n.status == NotifyStatus::Delivered {
        return Ok(Ok(Acked::Already {
            notification: n.id.clone(),
        }));
    }
    let by = format!("user:{user}");
    let lease = n.owner_lease;
    if let Err(r) = ledger::finish(
        &mut n,
        lease,
        NotifyStatus::Delivered,
        &by,
        Some(format!("acknowledged in the inbox (message {message})")),
        now,
    ) {
        return Ok(Err(match r {
            Refused::Terminal { .. } => AckRefused::Finished {
                message,
                notification: n.id.clone(),
                status: n.status.as_str(),
            },
            refused => AckRefused::Refused { message, refused },
        }));
    }
    n.ack_at = Some(now);
    if let Some(due) = n.delivery_deadline.take() {
        tx.remove_job(due, &super::produce::watchdog_job(&n.id))?;
    }
    let id = n.id.clone();
    tx.put_notification(&n)?;
    super::queue::tell_acknowledged(tx, &n)?;
    Ok(Ok(Acked::Delivered { notification: id }))
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

#[cfg(test)]
mod tests {
    use super::*;

    fn acked(store: &dyn storage::Storage, message: u64) -> Result<Acked, AckRefused> {
        store.write(|tx| ack(tx, message, "ann", 1_000)).unwrap()
    }

    #[test]
    fn refusals_name_the_message_and_why() {
        let store = crate::store::Store::memory_for_tests();
        assert_eq!(
            acked(&*store, 7).unwrap_err().to_string(),
            "no inbox message 7"
        );
        let (post, orphan) = store
            .write(|tx| {
                let post = tx.inbox_append(InboxMessage::for_tests("bob", "", "hello"))?;
                let orphan =
                    tx.inbox_append(InboxMessage::for_tests("pap", "ntf_gone", "a failure"))?;
                Ok((post, orphan))
            })
            .unwrap();
        assert_eq!(
            acked(&*store, post).unwrap_err().to_string(),
            format!(
                "inbox message {post} is a post by bob, not a notification: there is nothing to acknowledge"
            )
        );
        assert_eq!(
            acked(&*store, orphan).unwrap_err(),
            AckRefused::Missing {
                message: orphan,
                notification: "ntf_gone".into()
            }
        );
    }
}
