//! Escalations that are due but not recorded yet (ANP 6.2): a notification handed to an
//! agent whose delivery deadline passed has escalated, though the watchdog of a writer
//! (serve, a dispatch) has not yet taken it over and put it in the inbox. Every read surface
//! (`pap inbox --json`, `ui://chat/inbox`, `chat_read_since`, `pap://notifications/{id}`)
//! shows it as of now, and none writes to record it.
//!
//! They are found through the timer index (the watchdog's jobs), never by reading every
//! notification, and one look reads at most [`SCAN_JOBS`] jobs.

use serde_json::{Value, json};

use super::produce::watchdog_job;
use crate::domain::{Address, Handler, InboxMessage, Notification, NotifyStatus, Party};
use crate::storage::{self, ReadTx};

/// The most timer jobs one look reads (sinks' jobs share the index with the watchdog's).
pub const SCAN_JOBS: usize = 10_000;

/// What a due escalation's watchdog job is called: `watchdog:<notification id>`.
fn notification_of(job: &str) -> Option<&str> {
    job.strip_prefix(watchdog_job("").as_str())
}

/// The notifications whose escalation is due at `now` and not recorded, deadline first, at
/// most `limit`, each as of `now` (status `escalated`, handler `system`, target `user`, as
/// the watchdog will record it). `keep` filters them (a session's view).
pub fn escalations_due(
    r: &dyn ReadTx,
    now: i64,
    limit: usize,
    keep: &dyn Fn(&Notification) -> bool,
) -> storage::Result<Vec<Notification>> {
    let mut due = Vec::new();
    if limit == 0 {
        return Ok(due);
    }
    for (_, job) in r.jobs_between(i64::MIN, now, SCAN_JOBS)? {
        let Some(id) = notification_of(&job) else {
            continue;
        };
        let Some(n) = r.notification(id)? else {
            continue;
        };
        if let Some(n) = as_escalated(n, now).filter(|n| keep(n)) {
            due.push(n);
            if due.len() == limit {
                break;
            }
        }
    }
    Ok(due)
}

/// `n` as the watchdog will record it, when its escalation is due at `now` and not recorded.
pub fn as_escalated(mut n: Notification, now: i64) -> Option<Notification> {
    if n.status == NotifyStatus::Escalated || n.status_at(now) != NotifyStatus::Escalated {
        return None;
    }
    n.status = NotifyStatus::Escalated;
    n.routing.handler = Handler::System;
    if n.routing.target == Party::Agent {
        n.routing.target = Party::User;
    }
    Some(n)
}

/// The inbox entry the watchdog will append for `n` (its id is not known yet: 0), stamped at
/// the deadline that passed.
pub fn entry(n: &Notification) -> InboxMessage {
    InboxMessage {
        id: 0,
        ts: n.delivery_deadline.unwrap_or(n.updated_at),
        notification_id: n.id.clone(),
        author: "system".into(),
        kind: n.kind.clone(),
        level: n.level,
        content: n.content.clone(),
        routing: n.routing,
        user: n.user.clone(),
        session: (n.routing.address == Address::Session)
            .then(|| n.session.clone())
            .flatten(),
        metadata: n.metadata.clone(),
        deduplication_key: n.deduplication_key.clone(),
        supersedes: None,
        atp: n.atp.clone(),
        mime: None,
        posted_by: None,
        in_reply_to: None,
    }
}

/// Marks a view of a due escalation: no inbox id yet, the status it has as of now and the one
/// recorded, and when it fell due.
pub(crate) fn mark(view: &mut Value, n: &Notification) {
    view["id"] = Value::Null;
    view["escalation"] = json!("due");
    view["recorded_status"] = json!(NotifyStatus::Dispatched.as_str());
    view["due_at"] = json!(n.delivery_deadline.map(crate::clock::rfc3339_ms));
}

/// `pap inbox --json`'s line for a due escalation.
pub fn inbox_line(n: &Notification, now: i64) -> Value {
    let mut v = super::inbox::view(&entry(n), Some(n), now);
    mark(&mut v, n);
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{Level, Routing};

    fn handed(deadline: i64) -> Notification {
        serde_json::from_value(json!({
            "id": "ntf_1", "seq": 1, "kind": "invocation.succeeded", "level": "info",
            "content": "done", "metadata": {}, "user": "alice",
            "routing": {"address": "user", "target": "agent", "handler": "agent"},
            "status": "dispatched", "owner_lease": 1, "owner": "agent:inv",
            "created_at": 0, "updated_at": 0, "delivery_deadline": deadline,
        }))
        .unwrap()
    }

    #[test]
    fn a_handed_notification_is_due_at_its_deadline_as_the_watchdog_will_record_it() {
        assert!(as_escalated(handed(100), 99).is_none());
        let n = as_escalated(handed(100), 100).unwrap();
        assert_eq!(n.status, NotifyStatus::Escalated);
        assert_eq!(
            n.routing,
            Routing {
                address: crate::domain::Address::User,
                target: Party::User,
                handler: Handler::System
            }
        );
        let line = inbox_line(&n, 100);
        assert_eq!(line["id"], Value::Null);
        assert_eq!(line["status"], "escalated");
        assert_eq!(line["recorded_status"], "dispatched");
        assert_eq!(line["escalation"], "due");
        assert_eq!(line["author"], "system");
        assert_eq!(line["level"], Level::Info.as_str());
    }

    #[test]
    fn only_watchdog_jobs_name_notifications() {
        assert_eq!(notification_of("watchdog:ntf_1"), Some("ntf_1"));
        assert_eq!(notification_of("sink:a:ntf_1:3"), None);
    }
}
