//! The invocation lifecycle (contract section 5): the one place that changes an invocation's
//! status, and the moves it allows.
//!
//! ```text
//! awaiting_approval ──approve──▶ queued ──start──▶ running ──succeed──▶ succeeded
//!        │                         ▲  │              │  ▲
//!        ├──reject──▶ rejected     │  └──end──▶ failed ◀──end──┘  └─start (resume after a crash)
//!        └──expire──▶ expired      └────retry / requeue────┘
//!
//! awaiting_approval, queued, running ──cancel──▶ cancelled     (an operator's kill switch)
//! failed, rejected, expired, cancelled ──retry──▶ a new invocation (`retry_of`), which
//!                                                 starts at queued or awaiting_approval
//! ```
//!
//! Each move keeps the fields that go with the status in step (attempt count and history,
//! lease, error, next attempt time), so a caller states what happened and never writes a
//! status by hand. What is stored, audited and notified around a move stays with the caller.

use serde_json::Value;

use super::invocation::{ApprovalDecision, Attempt, Invocation, Runner, Status};
use super::lease::Lease;

/// A move the invocation's status does not allow.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invocation {id} is {from}, so it cannot {action}", from = .from.as_str())]
pub struct NotAllowed {
    pub id: String,
    pub from: Status,
    pub action: &'static str,
}

/// The statuses `to` can be reached from.
fn allowed_from(to: Status) -> &'static [Status] {
    use Status::*;
    match to {
        AwaitingApproval => &[],
        Queued => &[AwaitingApproval, Running],
        Running => &[Queued, Running],
        Succeeded => &[Running],
        Failed => &[Queued, Running],
        Rejected | Expired => &[AwaitingApproval],
        Cancelled => &[AwaitingApproval, Queued, Running],
    }
}

impl Invocation {
    fn check(&self, to: Status, action: &'static str) -> Result<(), NotAllowed> {
        if allowed_from(to).contains(&self.status) {
            Ok(())
        } else {
            Err(NotAllowed {
                id: self.id.clone(),
                from: self.status,
                action,
            })
        }
    }

    /// A queued invocation starts its next attempt under `lease`; a `running` one whose
    /// holder died is resumed under the same attempt number, its cut-short attempt closed with
    /// `cut_short` (why, and the process group the recovery found).
    pub fn start_attempt(
        &mut self,
        lease: Lease,
        cut_short: Option<(String, Option<Runner>)>,
        now: i64,
    ) -> Result<(), NotAllowed> {
        self.check(Status::Running, "start")?;
        match self.status {
            Status::Queued => self.attempts += 1,
            _ => {
                if let Some(last) = self.history.last_mut()
                    && last.ended_at.is_none()
                {
                    let (why, group) = cut_short.unwrap_or_default();
                    last.ended_at = Some(now);
                    last.error = Some(why);
                    last.group = group;
                }
            }
        }
        self.status = Status::Running;
        self.updated_at = now;
        self.next_attempt_at = None;
        self.lease = Some(lease);
        self.history.push(Attempt {
            attempt: self.attempts,
            started_at: now,
            ended_at: None,
            error: None,
            transcript: None,
            group: None,
            trace: None,
        });
        Ok(())
    }

    /// The running attempt failed and another is due at `next_at`. `holder` keeps the
    /// invocation for the process that waits out the backoff itself.
    pub fn queue_retry(
        &mut self,
        reason: &str,
        next_at: i64,
        holder: Option<Lease>,
        now: i64,
    ) -> Result<(), NotAllowed> {
        self.check(Status::Queued, "be queued for a retry")?;
        self.close_attempt(Some(reason), now);
        self.status = Status::Queued;
        self.lease = holder;
        self.updated_at = now;
        self.error = Some(reason.to_owned());
        self.next_attempt_at = Some(next_at);
        Ok(())
    }

    /// The running attempt was cut short by a shutdown, which is not a failure: back to the
    /// queue under the same attempt number.
    pub fn requeue_interrupted(&mut self, why: &str, now: i64) -> Result<(), NotAllowed> {
        if self.status != Status::Running {
            return Err(NotAllowed {
                id: self.id.clone(),
                from: self.status,
                action: "be requeued",
            });
        }
        self.close_attempt(Some(why), now);
        self.status = Status::Queued;
        self.attempts = self.attempts.saturating_sub(1);
        self.lease = None;
        self.updated_at = now;
        Ok(())
    }

    /// The running attempt succeeded with `output`, emitting `emitted`.
    pub fn succeed(
        &mut self,
        output: Value,
        emitted: Vec<String>,
        now: i64,
    ) -> Result<(), NotAllowed> {
        self.check(Status::Succeeded, "succeed")?;
        self.close_attempt(None, now);
        self.status = Status::Succeeded;
        self.lease = None;
        self.updated_at = now;
        self.error = None;
        self.output = Some(output);
        self.emitted = emitted;
        Ok(())
    }

    /// Ends the invocation without success: `Failed` (retries ran out, or it cannot run),
    /// `Rejected` or `Expired` (its approval was denied or never came). The running attempt,
    /// if any, is closed with the reason.
    pub fn end(
        &mut self,
        status: Status,
        reason: &str,
        emitted: Vec<String>,
        now: i64,
    ) -> Result<(), NotAllowed> {
        let action = match status {
            Status::Rejected => "be rejected",
            Status::Expired => "expire",
            _ => "fail",
        };
        if !matches!(status, Status::Failed | Status::Rejected | Status::Expired) {
            return Err(NotAllowed {
                id: self.id.clone(),
                from: self.status,
                action,
            });
        }
        self.check(status, action)?;
        if self.status == Status::Running {
            self.close_attempt(Some(reason), now);
        }
        self.status = status;
        self.lease = None;
        self.updated_at = now;
        self.error = Some(reason.to_owned());
        self.next_attempt_at = None;
        self.emitted = emitted;
        Ok(())
    }

    /// Approved: queued to run, held by `holder` when the approving process runs it itself.
    pub fn approve(
        &mut self,
        decision: ApprovalDecision,
        holder: Option<Lease>,
        now: i64,
    ) -> Result<(), NotAllowed> {
        self.check(Status::Queued, "be approved")?;
        if self.status != Status::AwaitingApproval {
            return Err(NotAllowed {
                id: self.id.clone(),
                from: self.status,
                action: "be approved",
            });
        }
        self.status = Status::Queued;
        self.updated_at = now;
        self.lease = holder;
        self.approval = Some(decision);
        Ok(())
    }

    /// An operator stopped it (`reason` says who and why): no further attempt, no failure
    /// event. A running attempt is closed with the reason; its process is stopped by the
    /// caller, after this is recorded (so the runner finds its lease gone).
    pub fn cancel(&mut self, reason: &str, now: i64) -> Result<(), NotAllowed> {
        self.check(Status::Cancelled, "be cancelled")?;
        self.close_attempt(Some(reason), now);
        self.status = Status::Cancelled;
        self.lease = None;
        self.updated_at = now;
        self.error = Some(reason.to_owned());
        self.next_attempt_at = None;
        Ok(())
    }

    /// Whether an operator may run it again (`pap invocations retry`): it ended without
    /// success.
    pub fn check_retryable(&self) -> Result<(), NotAllowed> {
        match self.status {
            Status::Failed | Status::Rejected | Status::Expired | Status::Cancelled
                if !self.internal =>
            {
                Ok(())
            }
            from => Err(NotAllowed {
                id: self.id.clone(),
                from,
                action: "be retried (only a failed, rejected, expired or cancelled one can)",
            }),
        }
    }

    /// A new invocation that runs this one again under the same claim: same trigger, agent,
    /// event, depth and trace, a fresh attempt count, linked by `retry_of`. `risk` and
    /// `max_attempts` are the agent's as the project says now; it awaits approval until
    /// `approval_deadline` when it has one.
    pub fn retry(
        &self,
        id: String,
        seq: u64,
        risk: &str,
        max_attempts: u32,
        approval_deadline: Option<i64>,
        now: i64,
    ) -> Result<Invocation, NotAllowed> {
        self.check_retryable()?;
        let provocation = super::invocation::Provocation {
            id,
            seq,
            trigger: self.trigger.clone(),
            agent: self.agent.clone(),
            event: self.event.clone(),
            event_id: self.event_id.clone(),
            event_type: self.event_type.clone(),
            depth: self.depth,
            risk: risk.to_owned(),
            max_attempts,
        };
        let mut again = Invocation::new(provocation, approval_deadline, now);
        again.retry_of = Some(self.id.clone());
        again.concurrency = self.concurrency.clone();
        // A retry is the same provocation run again: it stays in the event's trace.
        again.trace = self.trace.clone();
        Ok(again)
    }

    fn close_attempt(&mut self, error: Option<&str>, now: i64) {
        if let Some(last) = self.history.last_mut()
            && last.ended_at.is_none()
        {
            last.ended_at = Some(now);
            last.error = error.map(str::to_owned);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn inv(status: Status) -> Invocation {
        Invocation::for_tests("inv_1", status)
    }

    fn me() -> Runner {
        Runner {
            pid: 1,
            since: 0,
            started: None,
        }
    }

    fn lease() -> Lease {
        Lease {
            holder: me(),
            node: String::new(),
            token: 1,
            expires_at: 100,
            grace_ms: 0,
        }
    }

    #[test]
    fn a_run_that_fails_then_succeeds() {
        let mut i = inv(Status::Queued);
        i.start_attempt(lease(), None, 10).unwrap();
        assert_eq!(
            (i.status, i.attempts, i.history.len()),
            (Status::Running, 1, 1)
        );
        i.queue_retry("boom", 50, None, 20).unwrap();
        assert_eq!(i.status, Status::Queued);
        assert_eq!(i.history[0].error.as_deref(), Some("boom"));
        assert_eq!(i.next_attempt_at, Some(50));
        i.start_attempt(lease(), None, 50).unwrap();
        assert_eq!((i.attempts, i.next_attempt_at), (2, None));
        i.succeed(json!({"ok": true}), vec!["e2".into()], 60)
            .unwrap();
        assert_eq!(i.status, Status::Succeeded);
        assert_eq!((i.error.as_deref(), i.lease.as_ref()), (None, None));
        assert_eq!(i.history[1].ended_at, Some(60));
    }

    #[test]
    fn a_crashed_run_resumes_under_the_same_attempt() {
        let mut i = inv(Status::Queued);
        i.start_attempt(lease(), None, 10).unwrap();
        i.start_attempt(lease(), Some(("runner died".into(), Some(me()))), 30)
            .unwrap();
        assert_eq!(i.attempts, 1);
        assert_eq!(i.history.len(), 2);
        assert_eq!(i.history[0].error.as_deref(), Some("runner died"));
        assert_eq!(i.history[0].group, Some(me()));
    }

    #[test]
    fn terminal_statuses_allow_nothing() {
        for status in [
            Status::Succeeded,
            Status::Failed,
            Status::Rejected,
            Status::Expired,
            Status::Cancelled,
        ] {
            let mut i = inv(status);
            assert!(i.cancel("x", 1).is_err());
            assert!(i.start_attempt(lease(), None, 1).is_err());
            assert!(i.end(Status::Failed, "x", vec![], 1).is_err());
            assert!(i.succeed(json!(null), vec![], 1).is_err());
            assert_eq!(i.status, status, "unchanged");
        }
    }

    #[test]
    fn approvals_move_only_an_awaiting_invocation() {
        let decision = ApprovalDecision {
            approved: true,
            by: "ann".into(),
            at: 5,
            note: None,
        };
        let mut i = inv(Status::AwaitingApproval);
        assert!(i.start_attempt(lease(), None, 1).is_err());
        i.approve(decision.clone(), None, 5).unwrap();
        assert_eq!(i.status, Status::Queued);
        let err = i.approve(decision, None, 6).unwrap_err();
        assert_eq!(
            err.to_string(),
            "invocation inv_1 is queued, so it cannot be approved"
        );
        let mut j = inv(Status::AwaitingApproval);
        j.end(Status::Expired, "deadline passed", vec![], 7)
            .unwrap();
        assert_eq!(
            (j.status, j.error.as_deref()),
            (Status::Expired, Some("deadline passed"))
        );
        let mut k = inv(Status::Queued);
        assert!(k.end(Status::Rejected, "no", vec![], 1).is_err());
        assert!(k.requeue_interrupted("stop", 1).is_err());
    }

    #[test]
    fn a_cancel_ends_any_unfinished_invocation_and_closes_its_attempt() {
        for status in [Status::AwaitingApproval, Status::Queued] {
            let mut i = inv(status);
            i.cancel("cancelled by ann", 9).unwrap();
            assert_eq!(i.status, Status::Cancelled);
            assert!(i.status.is_terminal());
        }
        let mut i = inv(Status::Queued);
        i.start_attempt(lease(), None, 10).unwrap();
        i.cancel("cancelled by ann: runaway", 20).unwrap();
        assert_eq!(i.lease, None, "the runner finds its lease gone");
        assert_eq!(i.history[0].ended_at, Some(20));
        assert_eq!(
            i.history[0].error.as_deref(),
            Some("cancelled by ann: runaway")
        );
        assert!(i.queue_retry("late failure", 30, None, 30).is_err());
    }

    #[test]
    fn a_retry_is_a_new_invocation_linked_to_the_old_one() {
        let mut i = inv(Status::Queued);
        i.start_attempt(lease(), None, 10).unwrap();
        i.end(Status::Failed, "boom", vec![], 20).unwrap();
        let again = i.retry("inv_2".into(), 7, "low", 5, None, 30).unwrap();
        assert_eq!(
            (again.status, again.attempts, again.max_attempts, again.seq),
            (Status::Queued, 0, 5, 7)
        );
        assert_eq!(again.retry_of.as_deref(), Some("inv_1"));
        assert_eq!((again.event_id.as_str(), again.risk.as_str()), ("e", "low"));
        let waits = i.retry("inv_3".into(), 8, "high", 1, Some(99), 30).unwrap();
        assert_eq!(waits.status, Status::AwaitingApproval);
        for status in [Status::Queued, Status::Running, Status::Succeeded] {
            let err = inv(status)
                .retry("x".into(), 1, "low", 1, None, 1)
                .unwrap_err();
            assert!(err.to_string().contains("cannot be retried"), "{err}");
        }
    }
}
