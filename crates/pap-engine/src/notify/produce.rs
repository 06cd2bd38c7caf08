//! From a drafted notification to its first owner: deduplication (ANP 7.1), then routing
//! (ANP 4): the inbox for the system channel, an agent's queue, or a handling agent's turn.
//! All of it happens inside the caller's transaction, beside the outcome that caused it.

use std::time::Duration;

use serde_json::{Map, Value, json};

use super::agent_loop;
use super::ledger::{self, Refused};
use crate::domain::ids;
use crate::domain::{
    Address, AgentInstructions, Carried, Handler, InboxMessage, Invocation, Level, Notification,
    NotifyStatus, Party, Provocation, Routing, SinkDelivery, SinkState, Transition,
};
use crate::manifest::Project;
use crate::storage::{self, Sequence, WriteTx};

/// A notification before it has an id.
#[derive(Debug, Clone)]
pub(crate) struct Draft {
    pub kind: String,
    pub level: Level,
    pub content: String,
    pub deduplication_key: Option<String>,
    pub metadata: Map<String, Value>,
    pub routing: Routing,
    pub session: Option<String>,
    /// The handling or receiving agent; with handler system and target user, the agent made
    /// aware of it at its next turn (none for no one).
    pub agent: Option<String>,
    pub instructions: Option<AgentInstructions>,
    pub deadline: Duration,
    pub atp: Option<Value>,
    /// Cascade depth of the invocation it is about (a handling turn runs one deeper).
    pub depth: u32,
}

/// Records `draft` (or folds it into an undelivered notification with the same key) and
/// routes it. Returns the notification's id.
pub(crate) fn produce(
    tx: &mut dyn WriteTx,
    project: &Project,
    draft: Draft,
    now: i64,
) -> storage::Result<String> {
    if let Some(key) = &draft.deduplication_key
        && let Some(id) = tx.dedup_lookup(key)?
        && let Some(mut existing) = tx.notification(&id)?
        && matches!(
            existing.status,
            NotifyStatus::Pending | NotifyStatus::Dispatched | NotifyStatus::Locked
        )
    {
        overwrite(tx, project, &mut existing, draft, now)?;
        tx.put_notification(&existing)?;
        return Ok(existing.id);
    }
    let seq = tx.next(Sequence::Notification)?;
    let mut n = Notification {
        id: format!("ntf_{seq}"),
        seq,
        kind: draft.kind,
        level: draft.level,
        content: draft.content,
        deduplication_key: draft.deduplication_key,
        metadata: draft.metadata,
        routing: draft.routing,
        user: project.config.notify.user.clone(),
        session: draft.session,
        agent: draft.agent,
        agent_instructions: draft.instructions,
        status: NotifyStatus::Pending,
        owner_lease: 1,
        owner: "system".into(),
        created_at: now,
        updated_at: now,
        ack_at: None,
        delivery_deadline: None,
        inbox: Vec::new(),
        turn: None,
        delivered_with: None,
        forced_turn: None,
        told: None,
        sinks: Vec::new(),
        atp: draft.atp,
        answer: None,
        closed: None,
        history: vec![Transition {
            at: now,
            from: None,
            to: NotifyStatus::Pending,
            lease: 1,
            by: "system".into(),
            note: None,
        }],
    };
    if let Some(key) = &n.deduplication_key {
        tx.set_dedup(key, &n.id)?;
    }
    if let Some(atp_id) = n.atp_id() {
        tx.atp_put(atp_id, &n.id)?;
    }
    route(tx, project, &mut n, draft.deadline, draft.depth, now)?;
    tx.put_notification(&n)?;
    Ok(n.id)
}

/// ANP 7.1: a match on an undelivered notification takes the new content and metadata and
/// resets the deadline; an inbox entry already shown is superseded by a new message.
fn overwrite(
    tx: &mut dyn WriteTx,
    project: &Project,
    n: &mut Notification,
    draft: Draft,
    now: i64,
) -> storage::Result<()> {
    n.content = draft.content;
    n.metadata = draft.metadata;
    n.updated_at = now;
    n.history.push(Transition {
        at: now,
        from: Some(n.status),
        to: n.status,
        lease: n.owner_lease,
        by: "system".into(),
        note: Some("deduplicated: content and metadata replaced by a newer notification".into()),
    });
    if let Some(old) = n.delivery_deadline {
        let new = now.saturating_add(millis(draft.deadline));
        tx.remove_job(old, &watchdog_job(&n.id))?;
        tx.add_job(new, &watchdog_job(&n.id))?;
        n.delivery_deadline = Some(new);
    }
    if let Some(&last) = n.inbox.last() {
        append_to_inbox(tx, project, n, "system", None, Some(last), now)?;
    }
    Ok(())
}

/// ANP section 4: who gets it first, by target and handler.
fn route(
    tx: &mut dyn WriteTx,
    project: &Project,
    n: &mut Notification,
    deadline: Duration,
    depth: u32,
    now: i64,
) -> storage::Result<()> {
    match (n.routing.target, n.routing.handler) {
        (Party::User, Handler::System) => {
            dispatch_to_inbox(tx, project, n, now)?;
            // "Ambient awareness: added to the ledger, seen in the next turn."
            if let Some(agent) = n.agent.clone().filter(|a| project.agent(a).is_some()) {
                tx.queue_push(&agent, &n.id)?;
            }
        }
        (Party::Agent, Handler::System) => {
            let Some(agent) = n.agent.clone().filter(|a| project.agent(a).is_some()) else {
                return escalate_unroutable(tx, project, n, now);
            };
            // JP RFD 011: a critical notification does not wait for the next natural turn.
            // A running tool loop is the next contact point: the notification rides with its
            // tool responses, or forces the turn when the loop ends (`agent_loop`). Its
            // marks are advisory locks on PostgreSQL, taken before the queue's rows.
            let critical = n.level == Level::Critical;
            let in_loop = critical && agent_loop::running(tx, &agent, now)?;
            if in_loop {
                agent_loop::owe(tx, &agent, depth)?;
            }
            tx.queue_push(&agent, &n.id)?;
            if critical && !in_loop {
                n.forced_turn = Some(force_turn(tx, project, &agent, n, depth, now)?);
            }
        }
        (_, Handler::Agent) => {
            let Some(agent) = n.agent.clone().filter(|a| project.agent(a).is_some()) else {
                return escalate_unroutable(tx, project, n, now);
            };
            let carried = vec![carried(n, true, tx.inbox_mark()?)];
            let turn = new_turn(tx, project, &agent, n, carried, depth, now)?;
            let lease = n.owner_lease;
            ledger::transition(
                n,
                lease,
                NotifyStatus::Dispatched,
                "system",
                Some(format!("handed to agent {agent} (invocation {turn})")),
                now,
            )
            .map_err(conflict)?;
            n.owner = format!("agent:{turn}");
            n.turn = Some(turn);
            let due = now.saturating_add(millis(deadline));
            n.delivery_deadline = Some(due);
            tx.add_job(due, &watchdog_job(&n.id))?;
        }
    }
    Ok(())
}

/// Channel A or B: PENDING → DISPATCHED with a system-authored inbox entry.
fn dispatch_to_inbox(
    tx: &mut dyn WriteTx,
    project: &Project,
    n: &mut Notification,
    now: i64,
) -> storage::Result<()> {
    mark_dispatched(n, now)?;
    append_to_inbox(tx, project, n, "system", None, None, now)
}

/// PENDING → DISPATCHED, by the system, under the current lease.
fn mark_dispatched(n: &mut Notification, now: i64) -> storage::Result<()> {
    let lease = n.owner_lease;
    ledger::transition(n, lease, NotifyStatus::Dispatched, "system", None, now).map_err(conflict)
}

/// The agent a notification names is gone from the project: nobody can take it, so the
/// system does (as the watchdog would at the deadline).
fn escalate_unroutable(
    tx: &mut dyn WriteTx,
    project: &Project,
    n: &mut Notification,
    now: i64,
) -> storage::Result<()> {
    mark_dispatched(n, now)?;
    let lease = n.owner_lease;
    let why = format!(
        "no agent `{}` in the project to take it",
        n.agent.as_deref().unwrap_or("")
    );
    escalate(tx, project, n, lease, "system", &why, now)
}

/// ANP 6.2 from step 3: take ownership (lease + 1), strip the handler to system, promote the
/// target to user, mark ESCALATED and put it in the inbox. The inbox append is part of the
/// same transaction, so it cannot fail on its own: FAILED comes from the sinks.
pub(crate) fn escalate(
    tx: &mut dyn WriteTx,
    project: &Project,
    n: &mut Notification,
    lease: u64,
    by: &str,
    why: &str,
    now: i64,
) -> storage::Result<()> {
    let new = ledger::take_over(n, lease, by, now).map_err(conflict)?;
    n.routing.handler = Handler::System;
    if n.routing.target == Party::Agent {
        n.routing.target = Party::User;
    }
    ledger::transition(
        n,
        new,
        NotifyStatus::Escalated,
        by,
        Some(why.to_owned()),
        now,
    )
    .map_err(conflict)?;
    if let Some(due) = n.delivery_deadline.take() {
        tx.remove_job(due, &watchdog_job(&n.id))?;
    }
    append_to_inbox(tx, project, n, "system", None, None, now)
}

/// Appends an inbox message for `n` (its content, or `narration` by an agent) and schedules
/// it on every sink that wants it. ANP 2.1: a session that is no longer open sends it to the
/// user's scope instead.
pub(crate) fn append_to_inbox(
    tx: &mut dyn WriteTx,
    project: &Project,
    n: &mut Notification,
    author: &str,
    narration: Option<String>,
    supersedes: Option<u64>,
    now: i64,
) -> storage::Result<()> {
    if n.routing.address == Address::Session {
        let open = match &n.session {
            Some(s) => tx.session_is_open(s)?,
            None => false,
        };
        if !open {
            n.history.push(Transition {
                at: now,
                from: Some(n.status),
                to: n.status,
                lease: n.owner_lease,
                by: "system".into(),
                note: Some(format!(
                    "session {} is not open: address set to user (ANP 2.1)",
                    n.session.as_deref().unwrap_or("(none)")
                )),
            });
            n.routing.address = Address::User;
        }
    }
    let session = (n.routing.address == Address::Session)
        .then(|| n.session.clone())
        .flatten();
    let mut metadata = n.metadata.clone();
    if author != "system" {
        metadata.insert("narrated_by".into(), json!(author));
    }
    let id = tx.inbox_append(InboxMessage {
        id: 0,
        ts: now,
        notification_id: n.id.clone(),
        author: if author == "system" {
            "system".into()
        } else {
            "assistant".into()
        },
        kind: n.kind.clone(),
        level: n.level,
        content: narration.unwrap_or_else(|| n.content.clone()),
        routing: n.routing,
        user: n.user.clone(),
        session,
        metadata,
        deduplication_key: n.deduplication_key.clone(),
        supersedes,
        atp: n.atp.clone(),
        mime: None,
        posted_by: None,
        in_reply_to: None,
    })?;
    n.inbox.push(id);
    for sink in project
        .config
        .notify
        .sinks
        .iter()
        .filter(|s| s.wants(&n.kind, n.level))
    {
        n.sinks.push(SinkDelivery {
            sink: sink.name.clone(),
            state: SinkState::Pending,
            attempts: 0,
            next_at: Some(now),
            error: None,
            sent_at: None,
            message: id,
        });
        tx.add_job(now, &sink_job(&sink.name, &n.id, id))?;
    }
    Ok(())
}

/// The turn a critical notification forces (JP RFD 011): an internal turn of `agent` that
/// takes its queue, `n` among it, at its start. Returns the turn's invocation id.
pub(super) fn force_turn(
    tx: &mut dyn WriteTx,
    project: &Project,
    agent: &str,
    n: &Notification,
    depth: u32,
    now: i64,
) -> storage::Result<String> {
    new_turn(tx, project, agent, n, Vec::new(), depth, now)
}

/// An internal turn of `agent` (ANP channel C): an invocation without a trigger, carrying
/// the notifications it handles; those queued for the agent join at its start.
fn new_turn(
    tx: &mut dyn WriteTx,
    project: &Project,
    agent_id: &str,
    n: &Notification,
    carried: Vec<Carried>,
    depth: u32,
    now: i64,
) -> storage::Result<String> {
    let agent = project.agent(agent_id).expect("checked by the caller");
    let seq = tx.next(Sequence::Invocation)?;
    let id = ids::turn(&n.id, seq);
    let awaiting = agent.requires_approval();
    let timeout = millis(project.config.approval_timeout);
    let kind = if carried.iter().any(|c| c.handle) {
        "handle"
    } else {
        "critical"
    };
    let event = json!({
        "pap_version": "0.2",
        "id": n.id,
        "type": format!("pap.notification.{kind}"),
        "source": "pap/notify",
        "time": crate::clock::rfc3339_ms(now),
        "data": {
            "notification_id": n.id,
            "kind": n.kind,
            "level": n.level.as_str(),
            "content": n.content,
        },
    });
    let provocation = Provocation {
        id: id.clone(),
        seq,
        trigger: "pap.notify".into(),
        agent: agent.id.clone(),
        event,
        event_id: n.id.clone(),
        event_type: format!("pap.notification.{kind}"),
        depth: depth.saturating_add(1),
        risk: agent.effective_risk.as_str().to_owned(),
        max_attempts: agent.retry.max_attempts,
    };
    // Unheld (no lease): whichever pap process looks first runs it (serve's worker, or the
    // command that caused it); the claim at its start keeps it to one.
    let deadline = awaiting.then(|| now.saturating_add(timeout));
    let mut inv = Invocation {
        internal: true,
        notifications: carried,
        ..Invocation::new(provocation, deadline, now)
    };
    if awaiting {
        inv.approval_request = Some(super::outcome::approval_request(tx, project, &inv, now)?);
    }
    tx.insert_invocation(&inv)?;
    Ok(id)
}

/// What an invocation's prompt shows of `n`.
pub(crate) fn carried(n: &Notification, handle: bool, inbox_mark: u64) -> Carried {
    Carried {
        id: n.id.clone(),
        kind: n.kind.clone(),
        level: n.level,
        content: n.content.clone(),
        lease: handle.then_some(n.owner_lease),
        handle,
        seen_by_user: n.status == NotifyStatus::Delivered && n.routing.target == Party::User,
        directive: n
            .agent_instructions
            .as_ref()
            .and_then(|i| i.directive.clone()),
        tone_hint: n
            .agent_instructions
            .as_ref()
            .and_then(|i| i.tone_hint.clone()),
        inbox_mark,
        ack_update: false,
        user_post: None,
    }
}

pub(crate) fn watchdog_job(id: &str) -> String {
    format!("watchdog:{id}")
}

pub(crate) fn sink_job(sink: &str, id: &str, message: u64) -> String {
    format!("sink:{sink}:{id}:{message}")
}

pub(crate) fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// A refused transition inside pap's own bookkeeping is a bug or a race lost; it aborts
/// the transaction rather than writing a half-routed notification, and stays typed.
pub(crate) fn conflict(r: Refused) -> storage::Error {
    storage::Error::refused(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn project() -> Project {
        Project::empty_for_tests()
    }

    fn draft(content: &str) -> Draft {
        Draft {
            kind: "invocation.failed".into(),
            level: Level::Error,
            content: content.into(),
            deduplication_key: Some("k".into()),
            metadata: Map::new(),
            routing: Routing::default(),
            session: None,
            agent: None,
            instructions: None,
            deadline: Duration::from_secs(60),
            atp: None,
            depth: 0,
        }
    }

    /// ANP 7.1 for every state the earlier notification can be in.
    #[test]
    fn a_key_match_overwrites_while_undelivered_and_starts_anew_after() {
        let p = project();
        for (status, overwrites) in [
            (NotifyStatus::Pending, true),
            (NotifyStatus::Dispatched, true),
            (NotifyStatus::Locked, true),
            (NotifyStatus::Delivered, false),
            (NotifyStatus::Escalated, false),
            (NotifyStatus::Failed, false),
        ] {
            let store = crate::store::Store::memory_for_tests();
            store
                .write(|tx| {
                    let first = produce(tx, &p, draft("old"), 1)?;
                    let mut n = tx.notification(&first)?.unwrap();
                    n.status = status;
                    tx.put_notification(&n)?;
                    let second = produce(tx, &p, draft("new"), 2)?;
                    let old = tx.notification(&first)?.unwrap();
                    if overwrites {
                        assert_eq!(second, first, "{status:?}");
                        assert_eq!((old.content.as_str(), old.status), ("new", status));
                    } else {
                        assert_ne!(second, first, "{status:?}");
                        assert_eq!((old.content.as_str(), old.status), ("old", status));
                        assert_eq!(tx.dedup_lookup("k")?, Some(second));
                    }
                    Ok(())
                })
                .unwrap();
        }
    }
}
