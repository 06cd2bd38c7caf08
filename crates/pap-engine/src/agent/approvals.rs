//! Approval deadlines: an invocation still awaiting approval at its deadline is `expired`,
//! which is a denial (contract section 5) and ends in its failure event.

use crate::domain::Status;
use crate::event::Event;
use crate::manifest::Project;
use crate::storage::{self, WriteTx};

use super::end_in_tx;

/// Expires every invocation whose approval deadline is at or before `now`; returns the
/// failure events to dispatch.
pub(crate) fn expire_due(
    tx: &mut dyn WriteTx,
    project: &Project,
    now: i64,
) -> storage::Result<Vec<Event>> {
    let mut events = Vec::new();
    for id in tx.approvals_due(now)? {
        let Some(mut inv) = tx.invocation(&id)? else {
            continue;
        };
        if inv.status != Status::AwaitingApproval {
            continue;
        }
        let reason = format!(
            "approval deadline {} passed without a decision",
            crate::clock::rfc3339_ms(inv.approval_deadline.unwrap_or(now))
        );
        if let Some(request) = &inv.approval_request {
            crate::notify::atp::close_unanswered(tx, request, "expired", now)?;
        }
        super::answer::approval_span(&inv, "expired", now);
        events.extend(end_in_tx(
            tx,
            project,
            &mut inv,
            Status::Expired,
            &reason,
            Some("pap".into()),
            now,
        )?);
    }
    Ok(events)
}
