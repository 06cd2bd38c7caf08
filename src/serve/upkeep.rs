//! Serve's upkeep between decisions: events other processes left in the outbox, debounced
//! triggers that are due, approvals past their deadline, notification timers (escalations,
//! digests), and the purge of every kind of state past its retention, in small paced steps
//! that take turns (see `purge`).

use std::time::Duration;

use crate::event::{self, Origin};

use super::*;

impl Server {
    /// Events a process put in the outbox and died before deciding.
    pub(super) fn outbox_leftovers(&mut self) {
        let entries = match self.runtime.store.read(|r| r.outbox_entries()) {
            Ok(e) => e,
            Err(e) => {
                outage::report_store(&e, "cannot read the outbox");
                return;
            }
        };
        let max_bytes = self.runtime.project.config.max_event_bytes;
        let mut events = Vec::new();
        for (id, entry) in entries {
            let orphan = entry
                .owner
                .as_ref()
                .is_none_or(|o| !o.is_current() && !o.is_alive());
            if !orphan {
                continue;
            }
            let len = serde_json::to_vec(&entry.event).map_or(0, |b| b.len());
            match event::validate(entry.event, len, max_bytes, Origin::Dispatcher) {
                Ok(e) => events.push(e),
                Err(bad) => {
                    tracing::error!(event = %id, reason = %bad.reason, "an outbox event is invalid")
                }
            }
        }
        if !events.is_empty() {
            tracing::info!(
                events = events.len(),
                "deciding events left in the outbox (by a process that stopped, or handed to serve)"
            );
            self.dispatch_emitted(events);
        }
    }

    /// Trailing debounces whose burst has gone quiet: one invocation each.
    pub(super) fn fire_debounced(&mut self) {
        let mut d = self.dispatcher();
        let fired = d.fire_debounced().and_then(|f| d.finish(true).map(|_| f));
        match fired {
            Ok(fired) => {
                for f in fired {
                    if let Some(t) = &f.decided {
                        self.metrics.fired(&f.trigger, t.outcome);
                    }
                    match (&f.decided, &f.dropped) {
                        (Some(t), _) => tracing::info!(
                            trigger = %f.trigger,
                            window_key = %f.key,
                            event = %f.event_id,
                            outcome = t.outcome.as_str(),
                            invocation = t.invocation_id.as_deref().unwrap_or(""),
                            reason = %t.reason.as_ref().map(ToString::to_string).unwrap_or_default(),
                            "trailing debounce fired"
                        ),
                        (None, why) => tracing::warn!(
                            trigger = %f.trigger,
                            window_key = %f.key,
                            event = %f.event_id,
                            why = why.as_deref().unwrap_or(""),
                            "trailing debounce dropped"
                        ),
                    }
                }
            }
            Err(e) => outage::report(&e, "cannot fire debounced triggers"),
        }
    }

    pub(super) fn expire_approvals(&mut self) {
        let mut d = self.dispatcher();
        if let Err(e) = d.expire_approvals().and_then(|_| d.finish(true)) {
            outage::report(&e, "cannot expire approvals");
        }
    }

    /// The ANP watchdog and sink deliveries. A pass runs in the background (a webhook may
    /// take its timeout), one at a time; `--once` waits for it.
    pub(super) fn notify_timers(&mut self) {
        if self.pumping.swap(true, std::sync::atomic::Ordering::AcqRel) {
            return;
        }
        let (store, project) = (self.runtime.store.clone(), self.runtime.project.clone());
        let now = self.runtime.clock.now_ms();
        let flag = self.pumping.clone();
        let pass = async move {
            match crate::notify::pump::pump(store, project, now).await {
                Ok(p) if p.escalated > 0 => {
                    tracing::warn!(
                        escalated = p.escalated,
                        "watchdog escalated notifications past their deadline"
                    )
                }
                Ok(_) => {}
                Err(e) => outage::report(&e, "notification timers failed"),
            }
            flag.store(false, std::sync::atomic::Ordering::Release);
        };
        if self.settings.once {
            self.rt.block_on(pass);
        } else {
            self.rt.spawn(pass);
        }
    }

    /// What a purge step needs: the time, the ledger's cutoff, the debounce periods.
    pub(super) fn purge_due<T>(&self, f: impl FnOnce(&purge::Due) -> T) -> T {
        let now = self.runtime.clock.now_ms();
        let before =
            |d: Duration| now.saturating_sub(i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
        let s = &self.settings;
        let project = &self.runtime.project;
        let quiet_of = |bucket: &str| kept_for(project, bucket);
        f(&purge::Due {
            now,
            cutoffs: purge::Cutoffs {
                ledger: before(s.ledger_retention),
                throttle: now.saturating_sub(crate::stages::throttle::longest_window_ms(project)),
                invocations: before(s.invocation_retention),
                notifications: before(s.notification_retention),
                inbox: before(s.inbox_retention),
                audit: before(s.audit_retention),
            },
            quiet_of: &quiet_of,
        })
    }

    /// One step of the purge pass, if one is due (see `purge`).
    pub(super) fn purge_step(&mut self) {
        if self.purger.next_step_in() != Some(Duration::ZERO) || self.stopping() {
            return;
        }
        let store = self.runtime.store.clone();
        let mut purger = std::mem::take(&mut self.purger);
        let stepped = self.purge_due(|due| purger.step(&*store, due));
        self.purger = purger;
        match stepped {
            Ok(Some(step)) => {
                self.metrics
                    .purge_stepped(step.kind.name(), step.purged.removed, step.took)
            }
            Ok(None) => {}
            Err(e) => outage::report_store(&e, "cannot purge expired state"),
        }
    }

    /// The whole purge pass at once (`--once`: no decisions wait meanwhile).
    pub(super) fn purge_pass(&mut self) {
        let store = self.runtime.store.clone();
        let mut purger = std::mem::take(&mut self.purger);
        if let Err(e) = self.purge_due(|due| purger.finish_pass(&*store, due)) {
            outage::report_store(&e, "cannot purge expired state");
        }
        self.purger = purger;
    }

    /// Processed spool files past `done_retention`.
    pub(super) fn sweep_done(&mut self) {
        if !self.settings.done_retention.is_zero() && self.spool_sound() {
            match self.spool.sweep_done(self.settings.done_retention) {
                Ok(0) => {}
                Ok(n) => tracing::info!(files = n, "removed processed files past their retention"),
                Err(e) => self.spool_failed(&e),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_server::{event, invocations, project, server, trigger};

    #[test]
    fn events_left_in_the_outbox_without_a_live_owner_are_decided_and_leave_it() {
        let dir = project(&[("triggers/t.yaml", &trigger("t", "batch.job.done"))]);
        let mut server = server(dir.path());
        let value: serde_json::Value =
            serde_json::from_str(&event("e-left", "batch.job.done")).unwrap();
        server
            .runtime
            .store
            .write(|tx| tx.outbox_put("e-left", &value, None))
            .unwrap();

        server.outbox_leftovers();

        let all = invocations(&server);
        assert_eq!(all.len(), 1, "{all:?}");
        assert_eq!(all[0].event_id, "e-left");
        let left = server.runtime.store.read(|r| r.outbox_entries()).unwrap();
        assert!(left.is_empty(), "still in the outbox: {left:?}");
    }

    #[test]
    fn a_purge_pass_removes_what_is_past_its_retention_and_keeps_the_rest() {
        let dir = project(&[("pap.yaml", "serve:\n  audit_retention: 1d\n")]);
        let mut server = server(dir.path());
        let now = server.runtime.clock.now_ms();
        let entry = |at: i64, id: &str| crate::domain::AuditEntry {
            seq: 0,
            at,
            invocation_id: id.into(),
            trigger: "t".into(),
            agent: "worker".into(),
            risk: "low".into(),
            action: "decided".into(),
            actor: None,
            detail: None,
        };
        let old = now - 2 * server.settings.audit_retention.as_millis() as i64;
        server
            .runtime
            .store
            .write(|tx| {
                tx.audit(entry(old, "inv-old"))?;
                tx.audit(entry(now, "inv-new"))
            })
            .unwrap();

        server.purger.start_pass();
        server.purge_pass();

        let (kept, _) = server.runtime.store.read(|r| r.audit(None)).unwrap();
        let ids: Vec<_> = kept.iter().map(|e| e.invocation_id.as_str()).collect();
        assert_eq!(
            ids,
            ["inv-new"],
            "the audit past its retention stays, or the recent one went"
        );
    }
}

/// How long an idle state of the debounce table is kept (ms), by its bucket: a debounce's
/// quiet period, a batch's window, a group memory's idempotency TTL; `None` (it may go) when
/// its trigger no longer has what kept it.
fn kept_for(project: &crate::manifest::Project, bucket: &str) -> Option<i64> {
    if let Some(of) = crate::pipeline::group_memory::trigger_of(bucket) {
        project.trigger(of)?;
        return Some(i64::try_from(project.config.idempotency_ttl.as_millis()).unwrap_or(i64::MAX));
    }
    let t = project.trigger(bucket)?;
    match (&t.debounce, &t.batch) {
        (Some(d), _) => Some(crate::stages::debounce::quiet_ms(d)),
        (None, Some(b)) => Some(crate::stages::batch::window_ms(b)),
        (None, None) => None,
    }
}

#[cfg(test)]
mod kept_for_tests {
    use super::super::test_server::{project, trigger};

    #[test]
    fn a_batch_keeps_its_window_a_group_memory_its_ttl_and_a_plain_trigger_nothing() {
        let dir = project(&[
            (
                "triggers/b.yaml",
                &format!(
                    "{}  batch: {{max: 5, window: 30s}}\n",
                    trigger("b", "a.b.crossed")
                ),
            ),
            ("triggers/p.yaml", &trigger("p", "a.b.crossed")),
        ]);
        let loaded = crate::manifest::load(dir.path(), &[]);
        let project = loaded.project.expect("a project");
        assert_eq!(super::kept_for(&project, "b"), Some(30_000));
        assert_eq!(super::kept_for(&project, "p"), None);
        // A group memory lasts as long as an idempotency key (24 h by default), whatever the
        // trigger debounces, and goes with its trigger.
        assert_eq!(super::kept_for(&project, "p#group"), Some(86_400_000));
        assert_eq!(super::kept_for(&project, "gone#group"), None);
        assert_eq!(super::kept_for(&project, "gone"), None);
    }
}
