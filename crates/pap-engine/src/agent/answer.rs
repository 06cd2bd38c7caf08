//! A person's answer to an invocation awaiting approval, inside one write transaction:
//! checked (still awaiting, so a racing second answer loses), recorded on the ATP request
//! and in the audit, then approved (queued to run) or rejected (ended in its failure event).
//! `pap approve`, `pap reject`, `pap respond`, MCP and the web console all answer through
//! here. A refusal ([`AnswerRefused`]) comes back beside the store's errors, and the caller
//! runs the unit with `write_or_refuse`, so that what was written before the refusal (the
//! ATP answer) is rolled back with it.

use crate::domain::AuditEntry;
use crate::domain::lease::HOLD_MARGIN_MS;
use crate::domain::{Answer, ApprovalDecision, Invocation, Lease, NotAllowed, Status};
use crate::event::Event;
use crate::manifest::Project;
use crate::notify::atp::{self, AtpRefused};
use crate::storage::{self, WriteTx};

use super::end_in_tx;

/// Why an answer is refused: the words a person sees, naming the invocation.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AnswerRefused {
    #[error("no invocation {0} in this state dir")]
    NoInvocation(String),
    #[error("{id} expired: {why} (an expired approval is a denial)")]
    Expired { id: String, why: String },
    #[error("{id} is {status}, not awaiting approval")]
    NotAwaiting { id: String, status: &'static str },
    /// The approval request took its one answer already, or closed.
    #[error(transparent)]
    Request(#[from] AtpRefused),
    /// The invocation's lifecycle refused the step.
    #[error(transparent)]
    Lifecycle(#[from] NotAllowed),
}

/// A unit of work that answers: the store's error, or the answer's refusal.
pub type Answered<T> = storage::Result<Result<T, AnswerRefused>>;

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
pub fn approve(tx: &mut dyn WriteTx, id: &str, a: &Answering<'_>, hold: bool) -> Answered<()> {
    let mut inv = match answered(tx, id, a)? {
        Ok(inv) => inv,
        Err(refused) => return Ok(Err(refused)),
    };
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
    if let Err(refused) = inv.approve(decision, holder, a.now) {
        return Ok(Err(refused.into()));
    }
    tx.audit(AuditEntry::of(
        &inv,
        a.now,
        "approved",
        Some(a.by.to_owned()),
        a.note.clone(),
    ))?;
    approval_span(&inv, "approved", a.now);
    tx.put_invocation(&inv).map(Ok)
}

/// The wait for a person's answer, as a span of the invocation's trace (from its decision to
/// the answer, or to the deadline that expired it).
pub(crate) fn approval_span(inv: &Invocation, result: &'static str, now: i64) {
    crate::telemetry::record(
        || format!("approval {}", inv.agent),
        inv.trace.as_ref(),
        (inv.created_at, now),
        || {
            vec![
                crate::telemetry::Attr::new("pap.invocation.id", inv.id.clone()),
                crate::telemetry::Attr::new("pap.approval.result", result),
                crate::telemetry::Attr::new("pap.risk", inv.risk.clone()),
            ]
        },
    );
}

/// Rejects `id` for `why`; returns its failure events (in the outbox, to be decided).
pub fn reject(
    tx: &mut dyn WriteTx,
    project: &Project,
    id: &str,
    a: &Answering<'_>,
    why: &str,
) -> Answered<Vec<Event>> {
    let mut inv = match answered(tx, id, a)? {
        Ok(inv) => inv,
        Err(refused) => return Ok(Err(refused)),
    };
    inv.approval = Some(ApprovalDecision {
        approved: false,
        by: a.by.to_owned(),
        at: a.now,
        note: Some(why.to_owned()),
    });
    let reason = format!("rejected by {}: {why}", a.by);
    approval_span(&inv, "rejected", a.now);
    end_in_tx(
        tx,
        project,
        &mut inv,
        Status::Rejected,
        &reason,
        Some(a.by.to_owned()),
        a.now,
    )
    .map(Ok)
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

/// The invocation awaiting approval, with the answer recorded on its approval request
/// (which takes one answer).
fn answered(tx: &mut dyn WriteTx, id: &str, a: &Answering<'_>) -> Answered<Invocation> {
    let inv = match awaiting(tx, id, a.now)? {
        Ok(inv) => inv,
        Err(refused) => return Ok(Err(refused)),
    };
    if let Some(request) = &inv.approval_request
        && let Err(refused) = atp::record_answer(tx, request, a.answer.clone(), a.now)?
    {
        return Ok(Err(refused.into()));
    }
    Ok(Ok(inv))
}

/// The invocation, if it is awaiting approval at `now` (re-read inside the write transaction,
/// so two answers racing cannot both win; judged on the clock, so a request past its deadline
/// is never honoured even before the expiry sweep has recorded it).
fn awaiting(tx: &mut dyn WriteTx, id: &str, now: i64) -> Answered<Invocation> {
    let Some(inv) = tx.invocation(id)? else {
        return Ok(Err(AnswerRefused::NoInvocation(id.to_owned())));
    };
    Ok(match inv.status_at(now) {
        Status::AwaitingApproval => Ok(inv),
        Status::Expired => Err(AnswerRefused::Expired {
            why: inv
                .error
                .unwrap_or_else(|| "its approval deadline passed".to_owned()),
            id: inv.id,
        }),
        other => Err(AnswerRefused::NotAwaiting {
            id: inv.id,
            status: other.as_str(),
        }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{Notification, NotifyStatus};
    use crate::storage::Storage;

    fn answering(now: i64) -> Answering<'static> {
        Answering {
            by: "ann",
            note: None,
            answer: short_answer("approve", "ann", now),
            now,
        }
    }

    fn approved(store: &dyn Storage, id: &str, now: i64) -> Result<(), AnswerRefused> {
        store
            .write_or_refuse(|tx| approve(tx, id, &answering(now), false))
            .unwrap()
    }

    #[test]
    fn refusals_name_the_invocation_and_why() {
        let store = crate::store::Store::memory_for_tests();
        let mut expired = Invocation::for_tests("inv_old", Status::AwaitingApproval);
        expired.approval_deadline = Some(500);
        store
            .write(|tx| {
                tx.insert_invocation(&Invocation::for_tests("inv_done", Status::Succeeded))?;
                tx.insert_invocation(&expired)
            })
            .unwrap();
        let said = |id| approved(&*store, id, 1_000).unwrap_err().to_string();
        assert_eq!(said("inv_none"), "no invocation inv_none in this state dir");
        assert_eq!(
            said("inv_done"),
            "inv_done is succeeded, not awaiting approval"
        );
        assert_eq!(
            said("inv_old"),
            "inv_old expired: its approval deadline passed (an expired approval is a denial)"
        );
    }

    #[test]
    fn a_request_answered_already_refuses_and_the_invocation_keeps_waiting() {
        let store = crate::store::Store::memory_for_tests();
        let mut inv = Invocation::for_tests("inv_1", Status::AwaitingApproval);
        inv.approval_request = Some("ntf_1".into());
        let mut request = Notification::for_tests(NotifyStatus::Delivered);
        request.answer = Some(short_answer("reject", "bob", 10));
        store
            .write(|tx| {
                tx.insert_invocation(&inv)?;
                tx.put_notification(&request)
            })
            .unwrap();
        let refused = approved(&*store, "inv_1", 1_000).unwrap_err();
        assert!(
            matches!(refused, AnswerRefused::Request(AtpRefused::Answered { .. })),
            "{refused:?}"
        );
        assert_eq!(
            refused.to_string(),
            "the approval request ntf_1 was already answered: reject at 1970-01-01T00:00:00.010Z"
        );
        let after = store.read(|r| r.invocation("inv_1")).unwrap().unwrap();
        assert_eq!(after.status, Status::AwaitingApproval);
        assert!(after.approval.is_none());
    }
}
