//! An operator's control over an invocation, inside one write transaction: cancel (it should
//! not go on) and retry (it ended without success). Every surface that cancels or retries
//! goes through here, as every answer to an approval goes through `agent::answer`; today
//! that is `pap invocations cancel` and `pap invocations retry`.
//!
//! A refusal is a [`Refused`], never a store error: the store is fine, the request does not
//! fit the invocation, and the caller words it (and goes on with the others it was given).

use crate::domain::lease::HOLD_MARGIN_MS;
use crate::domain::{AuditEntry, ids};
use crate::domain::{Invocation, Lease, NotAllowed, Status};
use crate::manifest::Project;
use crate::manifest::compiled_notify::OutcomeKind;
use crate::stages::{Verdict, risk, throttle};
use crate::storage::{self, Sequence, WriteTx};

/// Why an invocation cannot be cancelled or retried.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error("no invocation {0} in this state dir")]
    NotFound(String),
    #[error("{0} is an internal notification turn; it ends with its notifications")]
    Internal(String),
    #[error("agent {agent} of {id} is no longer in the project, so it cannot run again")]
    AgentGone { id: String, agent: String },
    /// Its status does not allow it (the lifecycle table's own words).
    #[error(transparent)]
    NotAllowed(#[from] NotAllowed),
}

/// Beyond the grace period: the wait for a SIGKILLed group to go, and a margin.
const STOP_SLACK_MS: i64 = 10_000;

/// A cancelled invocation, the lease it had when it was running (its runner must now be
/// stopped), and its failure event (in the outbox, for the caller to dispatch).
pub struct Cancelled {
    pub invocation: Invocation,
    pub lease: Option<Lease>,
    pub emitted: Vec<crate::event::Event>,
}

/// Cancels `id` for `reason`, by `by`: its approval request closes unanswered, the audit and
/// its outcome notification record it, and it emits its `on_failure` event (status
/// `cancelled`) as a rejected or expired one does, so what follows a failure (a trigger on
/// `pap.agent.invocation.failed`) follows a cancellation too. A running one keeps its concurrency slots for
/// `grace_ms` and a margin, so the next run of its key cannot start beside it.
pub fn cancel(
    tx: &mut dyn WriteTx,
    project: &Project,
    id: &str,
    reason: &str,
    by: &str,
    now: i64,
    grace_ms: i64,
) -> storage::Result<Result<Cancelled, Refused>> {
    let Some(mut inv) = tx.invocation(id)? else {
        return Ok(Err(Refused::NotFound(id.to_owned())));
    };
    if inv.internal {
        return Ok(Err(Refused::Internal(id.to_owned())));
    }
    let lease = (inv.status == Status::Running)
        .then(|| inv.lease.clone())
        .flatten();
    if let Err(e) = inv.cancel(reason, now) {
        return Ok(Err(e.into()));
    }
    let emitted =
        crate::emit::failure_events(project, &inv, crate::emit::Ending::Cancelled(reason), now)?;
    inv.emitted = emitted.iter().map(|e| e.id.clone()).collect();
    crate::emit::put_outbox(tx, &emitted, now)?;
    if lease.is_some() && !inv.concurrency.is_empty() {
        inv.stopping_until = Some(now.saturating_add(grace_ms).saturating_add(STOP_SLACK_MS));
    }
    if let Some(request) = &inv.approval_request {
        crate::notify::atp::close_unanswered(tx, request, "cancelled", now)?;
    }
    tx.audit(AuditEntry::of(
        &inv,
        now,
        "cancelled",
        Some(by.to_owned()),
        Some(reason.to_owned()),
    ))?;
    tx.put_invocation(&inv)?;
    crate::notify::outcome::invocation_outcome(tx, project, &inv, OutcomeKind::Cancelled, now)?;
    Ok(Ok(Cancelled {
        invocation: inv,
        lease,
        emitted,
    }))
}

/// Retries `id` as a new invocation, by `by`. A high-risk agent's retry waits for approval
/// again; otherwise, with `run_here`, this process holds the run (a serve starting meanwhile
/// leaves it alone). The retry counts in its trigger's throttle windows, but an operator's
/// explicit retry is never refused by them.
pub fn retry(
    tx: &mut dyn WriteTx,
    project: &Project,
    id: &str,
    by: &str,
    now: i64,
    run_here: bool,
) -> storage::Result<Result<Invocation, Refused>> {
    let Some(old) = tx.invocation(id)? else {
        return Ok(Err(Refused::NotFound(id.to_owned())));
    };
    if let Err(e) = old.check_retryable() {
        return Ok(Err(e.into()));
    }
    let Some(agent) = project.agent(&old.agent) else {
        return Ok(Err(Refused::AgentGone {
            id: id.to_owned(),
            agent: old.agent.clone(),
        }));
    };
    let awaits = matches!(risk::check(agent), Verdict::Stop(..));
    let timeout = i64::try_from(project.config.approval_timeout.as_millis()).unwrap_or(i64::MAX);
    let deadline = awaits.then(|| now.saturating_add(timeout));
    let seq = tx.next(Sequence::Invocation)?;
    let mut again = match old.retry(
        ids::retry(&old.id, seq, now),
        seq,
        agent.effective_risk.as_str(),
        agent.retry.max_attempts,
        deadline,
        now,
    ) {
        Ok(again) => again,
        Err(e) => return Ok(Err(e.into())),
    };
    if awaits {
        again.approval_request = Some(crate::notify::outcome::approval_request(
            tx, project, &again, now,
        )?);
    } else if run_here {
        again.lease = Some(Lease::mine(tx.issue_lease_token()?, now, HOLD_MARGIN_MS));
    }
    if let Some(trigger) = project.trigger(&again.trigger) {
        for (index, t) in trigger.throttles.iter().enumerate() {
            let key = throttle::window_key(t, &again.event);
            let bucket = throttle::bucket(&trigger.id, index);
            tx.throttle_record(&bucket, &key, now, throttle::window_ms(t))?;
        }
    }
    tx.insert_invocation(&again)?;
    // Operator actions are audited at every risk level.
    tx.audit(AuditEntry::of(
        &again,
        now,
        "retried",
        Some(by.to_owned()),
        Some(format!("retry of {}", old.id)),
    ))?;
    Ok(Ok(again))
}
