//! A person's answer to an invocation awaiting approval, inside one write transaction:
//! checked (still awaiting, so a racing second answer loses), recorded on the ATP request
//! and in the audit, then approved (queued to run) or rejected (ended in its failure event).
//! `pap approve`, `pap reject`, `pap respond` and the web console all answer through here.

use crate::domain::lease::HOLD_MARGIN_MS;
use crate::domain::{Answer, ApprovalDecision, Invocation, Lease, Status};
use crate::event::Event;
use crate::manifest::Project;
use crate::notify::atp;
use crate::pipeline::audit_entry;
use crate::storage::{self, WriteTx};

use super::end_in_tx;

/// Who answered and how.
pub struct Answering<'a> {
    /// The person, as the audit names them.
    pub by: &'a str,
    pub note: Option<String>,
    /// What is recorded on the approval request (the ATP response, or its short form).
    pub answer: Answer,
    pub now: i64,
}

/// Approves `id`. With `hold`, this process takes the run (no serve runs it); else it is
/// left queued for serve's workers.
pub fn approve(
    tx: &mut dyn WriteTx,
    id: &str,
    a: &Answering<'_>,
    hold: bool,
) -> storage::Result<()> {
    let mut inv = awaiting(tx, id, a.now)?;
    if let Some(request) = &inv.approval_request {
        atp::record_answer(tx, request, a.answer.clone(), a.now)?;
    }
    let decision = ApprovalDecision {
        approved: true,
        by: a.by.to_owned(),
        at: a.now,
        note: a.note.clone(),
    };
    let holder = match hold {
        true => Some(Lease::mine(tx.issue_lease_token()?, a.now, HOLD_MARGIN_MS)),
        false => None,
    };
    inv.approve(decision, holder, a.now)
        .map_err(|e| storage::Error::Conflict(e.to_string()))?;
    tx.audit(audit_entry(
        &inv,
        a.now,
        "approved",
        Some(a.by.to_owned()),
        a.note.clone(),
    ))?;
    tx.put_invocation(&inv)
}

/// Rejects `id` for `why`; returns its failure events (in the outbox, to be decided).
pub fn reject(
    tx: &mut dyn WriteTx,
    project: &Project,
    id: &str,
    a: &Answering<'_>,
    why: &str,
) -> storage::Result<Vec<Event>> {
    let mut inv = awaiting(tx, id, a.now)?;
    if let Some(request) = &inv.approval_request {
        atp::record_answer(tx, request, a.answer.clone(), a.now)?;
    }
    inv.approval = Some(ApprovalDecision {
        approved: false,
        by: a.by.to_owned(),
        at: a.now,
        note: Some(why.to_owned()),
    });
    let reason = format!("rejected by {}: {why}", a.by);
    end_in_tx(
        tx,
        project,
        &mut inv,
        Status::Rejected,
        &reason,
        Some(a.by.to_owned()),
        a.now,
    )
}

/// What `pap approve`/`pap reject` and the console record on the approval request: the
/// shape of an ATP answer, from a human.
pub fn short_answer(action: &str, by: &str, now: i64) -> Answer {
    Answer {
        action_id: action.to_owned(),
        responder: serde_json::json!({"id": by, "type": "human"}),
        // ATP requires `responded_at`: for an answer given at pap's own prompt (the CLI, the
        // console), it is when pap recorded it.
        responded_at: Some(crate::clock::rfc3339_ms(now)),
        recorded_at: now,
    }
}

/// The invocation, if it is awaiting approval at `now` (re-read inside the write transaction,
/// so two answers racing cannot both win; judged on the clock, so a request past its deadline
/// is never honoured even before the expiry sweep has recorded it).
fn awaiting(tx: &mut dyn WriteTx, id: &str, now: i64) -> storage::Result<Invocation> {
    let inv = tx
        .invocation(id)?
        .ok_or_else(|| storage::Error::Conflict(format!("no invocation {id} in this state dir")))?;
    match inv.status_at(now) {
        Status::AwaitingApproval => Ok(inv),
        Status::Expired => Err(storage::Error::Conflict(format!(
            "{} expired: {} (an expired approval is a denial)",
            inv.id,
            inv.error
                .as_deref()
                .unwrap_or("its approval deadline passed")
        ))),
        other => Err(storage::Error::Conflict(format!(
            "{} is {}, not awaiting approval",
            inv.id,
            other.as_str()
        ))),
    }
}
