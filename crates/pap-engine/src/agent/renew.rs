//! Keeping an attempt's lease while its agent runs, on a store several nodes share.
//!
//! There no holder's liveness can be checked by pid, so an attempt's lease lasts one term
//! (`serve.lease`) from its last renewal and is renewed every third of it. A renewal is a
//! compare-and-swap on the fencing token (`check_lease`) that moves the expiry on, on the
//! database's clock. Its deadline on this host's monotonic clock is taken *before* the
//! renewal's round trip, so it never falls after the expiry the store recorded.
//!
//! At that deadline, unless a later renewal came first, both ends let go:
//! - the agent's supervisor, told of each deadline (see `command::Spec::lease`), kills the
//!   agent's process group on its own, so a paused or cut-off pap cannot keep it running;
//! - this process drops the attempt and puts the invocation back in the queue if it still
//!   can (the attempt was interrupted, not failed).
//!
//! Another node takes the invocation over only once the lease lapsed plus its grace, one
//! more term (see `domain::lease`): two runs of one invocation never overlap.

use std::time::{Duration, Instant};

use tokio::sync::watch;

use super::{RunError, Runtime};
use crate::storage;

/// Why an attempt's lease ended while its agent ran.
pub(super) enum Lapse {
    /// The store says another process holds it now (or an operator cancelled it).
    Lost(String),
    /// It could not be renewed before its deadline (the store was unreachable, or this
    /// process was paused).
    Unrenewed,
}

impl Runtime {
    /// The lease term when leases must be renewed (a shared store), else `None`.
    pub(super) fn lease_term(&self) -> Option<Duration> {
        self.store
            .shared()
            .then_some(self.project.config.serve.lease)
    }

    /// Renews invocation `id`'s lease (under `token`) every third of `term` until it is lost
    /// or lapses; `deadline` holds when it lapses, updated at each renewal. Never returns
    /// while the lease is kept.
    pub(super) async fn keep_lease(
        &self,
        id: &str,
        token: u64,
        term: Duration,
        deadline: watch::Sender<Instant>,
    ) -> Lapse {
        let every = term / 3;
        let mut renew_at = deadline.borrow().checked_sub(term - every);
        loop {
            let lapses_at = *deadline.borrow();
            let wake = renew_at.map_or(lapses_at, |at| at.min(lapses_at));
            tokio::time::sleep_until(wake.into()).await;
            if Instant::now() >= lapses_at {
                return Lapse::Unrenewed;
            }
            if renew_at.is_some_and(|at| Instant::now() < at) {
                continue;
            }
            let started = Instant::now();
            let renewal = tokio::select! {
                renewed = self.renew(id, token, term) => renewed,
                () = tokio::time::sleep_until(lapses_at.into()) => return Lapse::Unrenewed,
            };
            match renewal {
                Ok(()) => {
                    deadline.send_replace(started + term);
                    renew_at = Some(started + every);
                }
                Err(RunError::NotOurs(why)) => return Lapse::Lost(why),
                Err(e) => {
                    // Unreachable for now: try again soon, while the lease still holds.
                    tracing::debug!(invocation = id, error = %e, "cannot renew the lease");
                    renew_at = Some(Instant::now() + every.min(Duration::from_secs(1)));
                }
            }
        }
    }

    /// One renewal: the lease moves on to a term from now, if it is still `token`.
    async fn renew(&self, id: &str, token: u64, term: Duration) -> Result<(), RunError> {
        let id = id.to_owned();
        let now = self.clock.now_ms();
        let term_ms = i64::try_from(term.as_millis()).unwrap_or(i64::MAX / 2);
        let project = self.project.clone();
        self.write(move |tx| {
            tx.check_lease(&id, token)?;
            let mut inv = tx.invocation(&id)?.ok_or_else(|| {
                storage::Error::NotOurs(format!("invocation {id} is not in the store"))
            })?;
            let Some(lease) = inv.lease.as_mut() else {
                return Err(storage::Error::NotOurs(format!(
                    "invocation {id} has no lease"
                )));
            };
            lease.expires_at = now.saturating_add(term_ms);
            if super::loops(&project, &inv.agent) {
                crate::notify::agent_loop::opened(tx, &inv.agent, lease.expires_at)?;
            }
            tx.put_invocation(&inv)
        })
        .await
    }

    /// After a lapse: the attempt was dropped (its agent killed); what the caller returns.
    pub(super) async fn let_go(&self, id: &str, lapse: Lapse) -> RunError {
        match lapse {
            Lapse::Lost(why) => RunError::NotOurs(why),
            Lapse::Unrenewed => {
                let why = "interrupted: its lease could not be renewed in time (the store \
                           was unreachable or pap was paused), so its agent was stopped";
                tracing::warn!(invocation = id, "{why}");
                // Best effort: if the store is still unreachable, the lease lapses and the
                // next holder finds the attempt cut short.
                let _ = self.requeue_interrupted(id, why).await;
                RunError::NotOurs(format!("invocation {id} {why}"))
            }
        }
    }
}
