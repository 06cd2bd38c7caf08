//! Trailing debounces and batches firing: once a burst has been quiet for its period, one
//! invocation is made with the burst's last event; once a batch's window has passed (or it
//! is full), one invocation with every event of it. `pap serve` calls this on its clock (and
//! `pap test` on its simulated one); the pending fire is taken and the invocation decided in
//! the caller's transaction, so a fire happens once even across a crash or a restart.

use std::sync::Arc;

use super::Pipeline;
use super::report::TriggerReport;
use crate::domain::PendingFire;
use crate::event::{self, Event, Origin};
use crate::manifest::raw::DebounceMode;
use crate::stages::idempotency;
use crate::storage::{self, WriteTx};
use crate::telemetry::{self, Attr, Parent};
use crate::trace_context::TraceContext;

/// How many due fires one call takes at most (the rest wait for the next call).
pub(crate) const FIRE_BATCH: usize = 256;

/// One fire: which trigger and burst, the event it used, and what was decided (`None` when
/// the trigger no longer has a trailing debounce, or the stored event no longer reads).
#[derive(Debug)]
pub struct Fired {
    pub trigger: String,
    pub key: String,
    pub event_id: String,
    pub decided: Option<TriggerReport>,
    /// Why nothing was decided.
    pub dropped: Option<String>,
}

impl Pipeline<'_> {
    /// Fires the trailing debounces due at or before `now`: each goes through the stages
    /// after debounce (throttle, risk) with the burst's last event.
    pub fn fire_debounced(&self, tx: &mut dyn WriteTx, now: i64) -> storage::Result<Vec<Fired>> {
        let mut fired = Vec::new();
        for (trigger_id, key) in tx.debounce_due(now, FIRE_BATCH)? {
            let Some(mut state) = tx.debounce_state(&trigger_id, &key)? else {
                continue;
            };
            let Some(pending) = state.pending.take() else {
                continue;
            };
            // Taken in this transaction: whatever happens next, it does not fire again.
            tx.debounce_put(&trigger_id, &key, &state)?;
            let event_id = pending.event["id"].as_str().unwrap_or_default().to_owned();
            let index = self.project.triggers.iter().position(|t| {
                t.id == trigger_id
                    && t.enabled
                    && (t.batch.is_some()
                        || t.debounce
                            .as_ref()
                            .is_some_and(|d| d.mode == DebounceMode::Trailing))
            });
            let (decided, dropped) = match index {
                None => (
                    None,
                    Some(
                        "the trigger no longer has an enabled trailing debounce or batch"
                            .to_owned(),
                    ),
                ),
                Some(index) => match self.fire_pending(tx, index, pending, now)? {
                    Ok(report) => (Some(report), None),
                    Err(why) => (None, Some(why)),
                },
            };
            let fire = Fired {
                trigger: trigger_id.clone(),
                key,
                event_id,
                decided,
                dropped,
            };
            fired.push(fire);
        }
        Ok(fired)
    }

    /// Decides a debounce's or a batch's invocation from its pending fire, through the
    /// stages after debounce and batch (throttle, budget, risk); `Err` says why nothing was
    /// decided (its stored event no longer reads). A batch is handed over here at once when
    /// it fills, and by [`Pipeline::fire_debounced`] when its window ends.
    pub(super) fn fire_pending(
        &self,
        tx: &mut dyn WriteTx,
        index: usize,
        mut pending: PendingFire,
        now: i64,
    ) -> storage::Result<Result<TriggerReport, String>> {
        let sender = pending.sender.clone();
        let trace = pending.trace.clone();
        let links = std::mem::take(&mut pending.links);
        // A batch hands over every event of it; a debounce its last.
        let value = if pending.batch.is_empty() {
            pending.event
        } else {
            crate::stages::batch::handed_over(pending)
        };
        // Checked when it was decided; `Dispatcher` lets a completion event's type pass.
        let encoded = value.to_string().len();
        let mut event = match event::validate(value, encoded, u64::MAX, Origin::Dispatcher) {
            Ok(event) => event,
            Err(bad) => return Ok(Err(format!("its event is not valid: {}", bad.reason))),
        };
        // Who sent the burst's event stays with it: a `cancel_on` event may end the
        // invocation it makes only as it could have ended the fire.
        event.sender = sender;
        self.decide_fire(tx, &event, index, trace.as_ref(), &links, now)
            .map(Ok)
    }

    fn decide_fire(
        &self,
        tx: &mut dyn WriteTx,
        event: &Event,
        index: usize,
        trace: Option<&TraceContext>,
        links: &[TraceContext],
        now: i64,
    ) -> storage::Result<TriggerReport> {
        let trigger = &self.project.triggers[index];
        // A batch runs at the depth of its deepest event, so what it emits is one deeper
        // than that: a trigger batching its own agent's events cannot escape the cascade
        // limit through an outside event at the head of its batch.
        let depth = Some(self.deepest_of(tx, event)?);
        // The fire continues the trace of the event it uses, and links a batch's others.
        let span = telemetry::start_linked(
            || format!("fire {}", trigger.id),
            Parent::Remote(trace),
            links,
            || vec![Attr::new("pap.trigger.id", trigger.id.clone())],
        );
        let trace = span.context().or_else(|| trace.cloned());
        let key = idempotency::key(&event.id, &trigger.id);
        let mut explain = None;
        let (outcome, reason, invocation_id, held) = self.decide_rest(
            tx,
            event,
            index,
            Vec::new(),
            &key,
            &depth,
            now,
            &mut explain,
            trace.as_ref(),
        )?;
        let (trigger_name, agent_name) = &self.names[index];
        Ok(TriggerReport {
            trigger: Arc::clone(trigger_name),
            agent: Arc::clone(agent_name),
            outcome,
            reason,
            invocation_id,
            risk: self.project.agents[trigger.agent].effective_risk.as_str(),
            result: None,
            attempts: None,
            emitted: None,
            explain: None,
            held,
            handed_over: Vec::new(),
        })
    }
}
