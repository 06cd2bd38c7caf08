//! The end of a handling agent's turn (ANP channel C): its acknowledgements and narration,
//! fenced by the lease it was given (6.3), or the fallback when it failed or stayed silent.
//!
//! The reply is read from the agent's output:
//! - text: the narration; it acknowledges every notification the turn handles, with the
//!   lease the turn was given;
//! - a JSON object: `narration` (text) and `acknowledged_ids`, a list of `{"id", "lease"}`;
//!   a narration without `acknowledged_ids` acknowledges every handled notification.

use serde_json::Value;

use super::ledger;
use super::produce::{append_to_inbox, escalate};
use crate::domain::{Invocation, Notification, NotifyStatus, Party};
use crate::manifest::Project;
use crate::storage::{self, WriteTx};

#[derive(Debug, Default, PartialEq)]
pub(crate) struct Reply {
    pub narration: Option<String>,
    /// Explicit acknowledgements; `None`: implied by a narration.
    pub acknowledged: Option<Vec<(String, u64)>>,
}

/// Reads a reply from an agent's output.
pub(crate) fn parse(output: &Value) -> Reply {
    match output {
        Value::String(s) => Reply {
            narration: Some(s.trim().to_owned()).filter(|s| !s.is_empty()),
            acknowledged: None,
        },
        Value::Object(map) => Reply {
            narration: map
                .get("narration")
                .and_then(Value::as_str)
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_owned),
            acknowledged: map
                .get("acknowledged_ids")
                .and_then(Value::as_array)
                .map(|items| {
                    items
                        .iter()
                        .filter_map(|i| {
                            Some((i.get("id")?.as_str()?.to_owned(), i.get("lease")?.as_u64()?))
                        })
                        .collect()
                }),
        },
        _ => Reply::default(),
    }
}

/// Settles every notification `turn` handled, in the transaction that ends the turn.
/// `output` is the turn's output, or why it failed.
pub(crate) fn turn_ended(
    tx: &mut dyn WriteTx,
    project: &Project,
    turn: &Invocation,
    output: Result<&Value, &str>,
    now: i64,
) -> storage::Result<()> {
    let by = format!("agent:{}", turn.id);
    let reply = output.ok().map(parse);
    for c in turn.notifications.iter().filter(|c| c.handle) {
        let Some(mut n) = tx.notification(&c.id)? else {
            continue;
        };
        let given = c.lease.unwrap_or(0);
        match &reply {
            None => {
                let why = format!(
                    "the handling agent failed: {}",
                    output.err().unwrap_or("unknown")
                );
                fallback(tx, project, &mut n, given, &by, &why, now)?;
            }
            Some(reply) => settle(tx, project, &mut n, given, reply, &by, now)?,
        }
        tx.put_notification(&n)?;
    }
    Ok(())
}

fn settle(
    tx: &mut dyn WriteTx,
    project: &Project,
    n: &mut Notification,
    given: u64,
    reply: &Reply,
    by: &str,
    now: i64,
) -> storage::Result<()> {
    // The lease the agent acts with: its own explicit one for this id, else the one it was
    // given (implied by a narration).
    let acted = match &reply.acknowledged {
        Some(list) => list.iter().find(|(id, _)| *id == n.id).map(|(_, l)| *l),
        None => reply.narration.as_ref().map(|_| given),
    };
    let Some(lease) = acted else {
        if n.routing.target == Party::User {
            // ANP 4.1: with target user the agent must narrate; silence falls back at once.
            return fallback(
                tx,
                project,
                n,
                given,
                by,
                "the handling agent stayed silent",
                now,
            );
        }
        // Target agent: silence is allowed; the watchdog acts at the deadline if nobody acks.
        return Ok(());
    };
    if n.routing.target == Party::User && reply.narration.is_none() {
        return fallback(
            tx,
            project,
            n,
            lease,
            by,
            "the handling agent acknowledged without narrating (target user: it must narrate)",
            now,
        );
    }
    let mut moved = n.clone();
    match ledger::walk(
        &mut moved,
        lease,
        &[NotifyStatus::Locked, NotifyStatus::Delivered],
        by,
        Some("acknowledged by the handling agent".into()),
        now,
    ) {
        Ok(()) => {
            *n = moved;
            n.ack_at = Some(now);
            if let Some(text) = &reply.narration {
                append_to_inbox(tx, project, n, by, Some(text.clone()), None, now)?;
            }
            Ok(())
        }
        // Late or forged: silently discarded (6.3), but kept in the trail.
        Err(why) => {
            ledger::record_refusal(n, lease, by, &why, now);
            Ok(())
        }
    }
}

/// ANP 5.1 ESCALATED: the agent failed or stayed silent; the system takes over with the
/// raw content, unless someone else already did (then this is a stale action).
fn fallback(
    tx: &mut dyn WriteTx,
    project: &Project,
    n: &mut Notification,
    lease: u64,
    by: &str,
    why: &str,
    now: i64,
) -> storage::Result<()> {
    // Someone else already took it (the watchdog, the human): a stale action.
    if let Err(refused) = ledger::check(n, lease) {
        ledger::record_refusal(n, lease, by, &refused, now);
        return Ok(());
    }
    if n.status != NotifyStatus::Dispatched {
        return Ok(());
    }
    escalate(tx, project, n, lease, "system", why, now)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn replies_read_text_or_an_object() {
        assert_eq!(
            parse(&json!("  The deploy failed.  ")),
            Reply {
                narration: Some("The deploy failed.".into()),
                acknowledged: None
            }
        );
        assert_eq!(parse(&json!("   ")), Reply::default());
        let r = parse(&json!({
            "narration": "ok",
            "acknowledged_ids": [{"id": "ntf_1", "lease": 2}, {"id": "ntf_2"}]
        }));
        assert_eq!(r.acknowledged, Some(vec![("ntf_1".into(), 2)]));
        assert_eq!(parse(&json!(7)), Reply::default());
    }
}
