//! The decision pipeline: for one event, every matching trigger goes through the stages in
//! PAP 0.2 order, and the whole decision (claims, throttle records, invocations, ledger,
//! audit) is written in the caller's transaction, so it commits (or not) as one.

pub mod cancel_on;
mod fire;
pub mod group_memory;
mod prelock;
mod prepare;
pub mod report;
mod trigger_index;

use crate::event::Event;
use crate::event::input::Location;
use crate::manifest::Project;
use crate::telemetry::{self, Attr, Parent, Span};
use crate::trace_context::TraceContext;
use std::sync::Arc;

use crate::domain::lease::HOLD_MARGIN_MS;
use crate::domain::{AuditEntry, CancelKey, Invocation, Lease, Provocation};
use crate::manifest::compiled::{RiskLevel, Trigger};
use crate::stages::cascade::Depth;
use crate::stages::{
    Outcome, Reason, Verdict, batch, budget, cascade, concurrency, debounce, idempotency, risk,
    throttle,
};
use crate::storage::{self, Claimed, RowRef, Sequence, WriteTx};
pub(crate) use fire::Fired;
pub(crate) use prepare::{Considered, Prepared};
use report::{EventReport, Explain, StageExplain, TriggerReport};
pub(crate) use trigger_index::TriggerIndex;

#[derive(Debug, Clone, Copy, Default)]
pub struct Options {
    /// Record invocations as `queued` instead of running them.
    pub no_run: bool,
    /// Decide in an aborted transaction: report what would happen, keep nothing.
    pub dry_run: bool,
    pub explain: bool,
    /// Leave an invocation whose concurrency key has no room at the decision in the queue,
    /// unheld, instead of holding it to run now (`pap serve`: its worker takes it once the
    /// key admits it, rather than trying it in vain and giving it back).
    pub leave_blocked: bool,
}

pub struct Pipeline<'p> {
    pub project: &'p Project,
    index: TriggerIndex,
    pub options: Options,
    /// Each trigger's id and its agent's id, shared by every report line instead of copied
    /// into each.
    names: Vec<(Arc<str>, Arc<str>)>,
    /// The triggers with a `cancel_on`, which every event is held against first.
    cancelers: Vec<usize>,
}

/// One event decided: its report line, and the invocations this process should now run.
#[derive(Debug)]
pub struct Decided {
    pub report: EventReport,
    pub to_run: Vec<String>,
    /// Runs its `cancel_on` ended while they ran: once committed, their process groups on
    /// this node are stopped.
    pub to_stop: Vec<(String, Lease)>,
    /// The failure events of the work its `cancel_on` ended (in the outbox), decided next.
    pub emitted: Vec<Event>,
}

impl<'p> Pipeline<'p> {
    pub fn new(project: &'p Project, options: Options) -> Pipeline<'p> {
        let names = project
            .triggers
            .iter()
            .map(|t| {
                (
                    t.id.as_str().into(),
                    project.agents[t.agent].id.as_str().into(),
                )
            })
            .collect();
        let cancelers = project
            .triggers
            .iter()
            .enumerate()
            .filter(|(_, t)| t.cancel_on.is_some())
            .map(|(i, _)| i)
            .collect();
        Pipeline {
            project,
            index: TriggerIndex::new(project),
            options,
            names,
            cancelers,
        }
    }

    /// Decides `event` at `now` (ms) inside `tx`; `prepared` is [`Pipeline::prepare`]'s
    /// result for it (computed here when the caller has none). The event's id, type and
    /// `triggered_by` move into the report; its body is handed back for the caller to free.
    pub fn decide(
        &self,
        tx: &mut dyn WriteTx,
        event: Event,
        prepared: Option<Prepared>,
        input: Location,
        now: i64,
    ) -> storage::Result<(Decided, serde_json::Value)> {
        let prepared = prepared.unwrap_or_else(|| self.prepare(&event));
        let mut report = EventReport {
            event_id: None,
            kind: None,
            status: "no_match",
            depth: None,
            triggers: Vec::with_capacity(prepared.triggers.len()),
            error: None,
            input,
            triggered_by: None,
            cancelled: Vec::new(),
        };
        let mut to_run = Vec::new();
        // `cancel_on` first: what this event ends is ended before it provokes anything.
        let ended = if self.cancelers.is_empty() {
            cancel_on::Ended::default()
        } else {
            self.cancel_on(tx, &event, now)?
        };
        report.cancelled = ended.lines;
        // The depth needs a store read; only events that reach the cascade stage pay for it.
        let mut depth: Option<Depth> = None;
        let event_span = decision_span(&event);
        for considered in prepared.triggers {
            let trigger = &self.project.triggers[considered.index];
            if !trigger.enabled {
                if self.options.explain {
                    report.triggers.push(self.disabled(considered.index));
                }
                continue;
            }
            report.status = "dispatched";
            let span = telemetry::start(
                || format!("trigger {}", trigger.id),
                Parent::Span(&event_span),
                telemetry::Kind::Internal,
                || {
                    vec![
                        Attr::new("pap.trigger.id", trigger.id.clone()),
                        Attr::new("pap.agent.id", self.names[considered.index].1.to_string()),
                    ]
                },
            );
            // With traces off here, what the event came with is passed on unchanged, so a
            // run (approved later, by whatever surface) continues the sender's trace.
            let trace = span.context().or_else(|| incoming_trace(&event));
            let mut decided =
                self.decide_trigger(tx, &event, considered, now, &mut depth, trace.as_ref())?;
            if span.is_recording() {
                trace_verdict(&span, &decided, &self.project.redactor);
                if !self.options.explain {
                    decided.explain = None;
                }
            }
            if !self.options.dry_run {
                for d in std::iter::once(&decided).chain(&decided.handed_over) {
                    if d.outcome == Outcome::Invoked && d.held {
                        to_run.extend(d.invocation_id.clone());
                    }
                }
            }
            report.triggers.push(decided);
        }
        event_span.set(Attr::new("pap.event.status", report.status));
        if report.status == "dispatched" {
            let depth = match &depth {
                Some(d) => d.clone(),
                None => self.depth_of(tx, &event)?,
            };
            report.depth = Some(depth.value());
        }
        if self.options.dry_run {
            for t in &mut report.triggers {
                t.invocation_id = None;
            }
        }
        report.event_id = Some(event.id);
        report.kind = Some(event.kind);
        report.triggered_by = event.triggered_by;
        let (to_stop, emitted) = if self.options.dry_run {
            (Vec::new(), Vec::new())
        } else {
            (ended.running, ended.emitted)
        };
        Ok((
            Decided {
                report,
                to_run,
                to_stop,
                emitted,
            },
            event.value,
        ))
    }

    fn depth_of(&self, tx: &dyn WriteTx, event: &Event) -> storage::Result<Depth> {
        depth_of_parent(tx, event.triggered_by.as_deref())
    }

    /// The depth a fire runs at: its event's, or for a batch the deepest of its events'.
    fn deepest_of(&self, tx: &dyn WriteTx, event: &Event) -> storage::Result<Depth> {
        let mut deepest = self.depth_of(tx, event)?;
        let Some(events) = event
            .value
            .get("batch")
            .and_then(serde_json::Value::as_array)
        else {
            return Ok(deepest);
        };
        for e in events {
            let parent = e.get("triggered_by").and_then(serde_json::Value::as_str);
            if parent.is_none() || parent == event.triggered_by.as_deref() {
                continue;
            }
            let depth = depth_of_parent(tx, parent)?;
            if depth.value() > deepest.value() {
                deepest = depth;
            }
        }
        Ok(deepest)
    }

    fn decide_trigger(
        &self,
        tx: &mut dyn WriteTx,
        event: &Event,
        considered: Considered,
        now: i64,
        depth: &mut Option<Depth>,
        trace: Option<&TraceContext>,
    ) -> storage::Result<TriggerReport> {
        let considered_index = considered.index;
        let trigger = &self.project.triggers[considered_index];
        let agent = &self.project.agents[trigger.agent];
        let config = &self.project.config;
        // A trace's span carries the stages' verdicts as events: they are worked out as for
        // `--explain` while one records (and left out of the report unless asked for).
        let mut explain = (self.options.explain || trace.is_some()).then(|| Explain {
            file: trigger.file.clone(),
            ..Explain::default()
        });
        // filter (evaluated in `prepare`)
        let mut verdict = considered.filter;
        if let Some(ex) = explain.as_mut() {
            ex.conditions = considered.conditions;
            // Where `cancel_on` sits: held against every event before any trigger's stages,
            // it ends this trigger's work later; the key this event would leave is shown.
            if let Some(c) = &trigger.cancel_on {
                let key = throttle::key_of(&c.key, &event.value).unwrap_or_default();
                ex.stages.push(StageExplain {
                    stage: "cancel_on",
                    passed: true,
                    note: format!(
                        "a later `{}` event with the same {} ({}) ends what this starts; every event meets cancel_on before any stage",
                        c.pattern.as_str(),
                        c.key.as_str(),
                        if key.is_empty() { "nothing here: this event's work cannot be ended".to_owned() } else { key }
                    ),
                });
            }
        }
        note(&mut explain, "filter", &verdict, || {
            format!("{} condition(s) hold", trigger.filter.len())
        });

        // idempotency (a filtered trigger has no key: it never gets this far)
        let key = match considered.key {
            Some(key) => key,
            None if verdict == Verdict::Continue => idempotency::key(&event.id, &trigger.id),
            None => [0; 32],
        };
        // Whether the key is claimed anew: then this decision is recorded in the ledger.
        let mut claimed_new = false;
        // The key the claim was taken under: PAP's, or the pair's own after a collision.
        // Invocation ids derive from it, so two colliding pairs never share an id.
        let mut claimed_key = key;
        if verdict == Verdict::Continue {
            let ttl = i64::try_from(config.idempotency_ttl.as_millis()).unwrap_or(i64::MAX);
            let expires_at = now.saturating_add(ttl);
            let mut claimed = tx.claim(&key, now, expires_at)?;
            if let Claimed::Live(claim) = &claimed
                && claim.is_for_another_pair(&event.id, &trigger.id)
            {
                let own = idempotency::pair_key(&event.id, &trigger.id);
                claimed = tx.claim(&own, now, expires_at)?;
                claimed_key = own;
                if matches!(claimed, Claimed::New) {
                    tx.extend_claim(&key, expires_at)?;
                }
            }
            match claimed {
                Claimed::New => claimed_new = true,
                Claimed::Live(claim) => verdict = idempotency::check(Some(&claim)),
            }
            // A group event with no new firing alert is a repeat that only dropped some.
            if claimed_new {
                verdict = self.group_check(tx, &trigger.id, event, now)?;
            }
            note(&mut explain, "idempotency", &verdict, || {
                format!("new key {}", idempotency::hex(&key))
            });
            if let (Verdict::Stop(..), Some(ex)) = (&verdict, explain.as_mut())
                && let Some(last) = ex.stages.last_mut()
            {
                // A duplicate's reason names the first decision; --explain adds the key.
                last.note = format!("{} (key {})", last.note, idempotency::hex(&key));
            }
        }

        // cascade
        if verdict == Verdict::Continue {
            if depth.is_none() {
                *depth = Some(self.depth_of(tx, event)?);
            }
            let d = depth.as_ref().expect("just set");
            verdict = cascade::check(d, config.max_cascade_depth, config.unknown_triggered_by);
            note(&mut explain, "cascade", &verdict, || {
                format!(
                    "depth {} below max_cascade_depth {}",
                    d.value(),
                    config.max_cascade_depth
                )
            });
        }

        // debounce (a pap extension)
        if verdict == Verdict::Continue
            && let Some(d) = &trigger.debounce
        {
            let key = considered
                .debounce_key
                .unwrap_or_else(|| debounce::window_key(d, &event.value));
            let state = tx.debounce_state(&trigger.id, &key)?;
            let (decided, next) = debounce::check(
                d,
                &key,
                state.as_ref(),
                &event.value,
                crate::stages::Arrival {
                    sender: event.sender.as_ref(),
                    trace,
                },
                now,
            );
            tx.debounce_put(&trigger.id, &key, &next)?;
            verdict = decided;
            note(&mut explain, "debounce", &verdict, || {
                "the first event of a burst".to_string()
            });
        }

        // batch (a pap extension)
        let mut handed_over = Vec::new();
        if verdict == Verdict::Continue
            && let Some(b) = &trigger.batch
        {
            let key = batch::key(b, &event.value);
            let state = tx.debounce_state(&trigger.id, &key)?;
            let max_bytes = usize::try_from(config.max_event_bytes).unwrap_or(usize::MAX);
            let arrival = crate::stages::Arrival {
                sender: event.sender.as_ref(),
                trace,
            };
            let checked = batch::check(
                b,
                &key,
                state.as_ref(),
                &event.value,
                arrival,
                max_bytes,
                now,
            );
            tx.debounce_put(&trigger.id, &key, &checked.next)?;
            verdict = checked.verdict;
            note(&mut explain, "batch", &verdict, String::new);
            // A full batch (or one too full of bytes for this event) goes now, in this
            // decision: `max` bounds what one invocation gets.
            for pending in checked.handed_over {
                match self.fire_pending(tx, considered_index, pending, now)? {
                    Ok(report) => handed_over.push(report),
                    Err(why) => tracing::warn!(
                        trigger = %trigger.id,
                        why,
                        "a full batch could not be handed over"
                    ),
                }
            }
        }

        let (outcome, reason, invocation_id, held) = if verdict == Verdict::Continue {
            self.decide_rest(
                tx,
                event,
                considered_index,
                considered.window_keys,
                &claimed_key,
                depth,
                now,
                &mut explain,
                trace,
            )?
        } else {
            let Verdict::Stop(outcome, reason) = verdict else {
                unreachable!("checked above")
            };
            (outcome, Some(reason), None, false)
        };
        if claimed_new && let Some(until) = released_at(trigger, outcome, reason.as_ref()) {
            // `release_key`: a throttled decision holds its key only until the window has
            // room, so a repeat then (an alert still firing) is decided again.
            tx.shorten_claim(&claimed_key, until)?;
        }
        if claimed_new {
            tx.record_decision(
                &claimed_key,
                RowRef {
                    event_id: &event.id,
                    trigger: &trigger.id,
                    kind: &event.kind,
                    depth: depth.as_ref().map_or(0, Depth::value),
                    outcome: outcome.as_str(),
                    invocation_id: invocation_id.as_deref(),
                    decided_at: now,
                },
            )?;
        }

        let (trigger_name, agent_name) = &self.names[considered_index];
        Ok(TriggerReport {
            trigger: trigger_name.clone(),
            agent: agent_name.clone(),
            outcome,
            reason,
            invocation_id,
            risk: agent.effective_risk.as_str(),
            result: None,
            attempts: None,
            emitted: None,
            explain,
            held,
            handed_over,
        })
    }

    /// The stages after debounce (throttle, risk) and what they decide: the invocation, when
    /// one is made, and whether this process holds it to run it. A trailing debounce's fire
    /// starts here too (see `fire`).
    #[allow(clippy::too_many_arguments)]
    fn decide_rest(
        &self,
        tx: &mut dyn WriteTx,
        event: &Event,
        index: usize,
        window_keys: Vec<String>,
        claimed_key: &[u8; 32],
        depth: &Option<Depth>,
        now: i64,
        explain: &mut Option<Explain>,
        trace: Option<&TraceContext>,
    ) -> storage::Result<(Outcome, Option<Reason>, Option<String>, bool)> {
        let trigger = &self.project.triggers[index];
        let agent = &self.project.agents[trigger.agent];
        // throttle: room is needed in every window
        let mut verdict = Verdict::Continue;
        let mut buckets = Vec::new();
        if !trigger.throttles.is_empty() {
            let mut keys = window_keys.into_iter();
            let mut decided = Verdict::Continue;
            let mut used_in = Vec::new();
            for (index, t) in trigger.throttles.iter().enumerate() {
                let key = keys
                    .next()
                    .unwrap_or_else(|| throttle::window_key(t, &event.value));
                let bucket = throttle::bucket(&trigger.id, index);
                let times = tx.throttle_times(&bucket, &key)?;
                decided = throttle::stricter(decided, throttle::check(t, &key, &times, now));
                if explain.is_some() {
                    let window = throttle::window_ms(t);
                    let used = times
                        .iter()
                        .filter(|x| throttle::counts(**x, now, window))
                        .count();
                    used_in.push(throttle::usage(used, t.max_per_window, t.window));
                }
                buckets.push((bucket.into_owned(), key, throttle::window_ms(t)));
            }
            verdict = decided;
            note(explain, "throttle", &verdict, || used_in.join("; "));
        }

        // budget (a pap extension)
        if verdict == Verdict::Continue
            && let Some(b) = &agent.budget
        {
            let times = if b.invocations_per_day.is_some() {
                tx.throttle_times(&budget::bucket(&agent.id), "")?
            } else {
                Vec::new()
            };
            let uses = if b.tokens_per_day.is_some() || b.money_per_day.is_some() {
                tx.token_uses(&agent.id)?
            } else {
                Vec::new()
            };
            let money = budget::Money {
                currency: &self.project.config.prices.currency,
                priced: budget::reservation(agent, &self.project.config.prices)
                    .money
                    .is_none_or(|r| r.is_ok()),
            };
            verdict = budget::check(b, &agent.id, &times, &uses, money, now);
            note(explain, "budget", &verdict, || {
                "within the agent's budget for the last 24h".to_string()
            });
            if let Verdict::Stop(_, why) = &verdict {
                crate::notify::outcome::budget_exceeded(
                    tx,
                    self.project,
                    agent,
                    &trigger.id,
                    event,
                    &why.to_string(),
                    now,
                )?;
            }
        }

        // risk
        if verdict == Verdict::Continue {
            verdict = risk::check(agent);
            note(explain, "risk", &verdict, || {
                format!("effective risk {}", agent.effective_risk.as_str())
            });
        }

        let (outcome, reason) = match verdict {
            Verdict::Stop(outcome, reason) => (outcome, Some(reason)),
            Verdict::Continue if self.options.no_run => (Outcome::Queued, None),
            Verdict::Continue => (Outcome::Invoked, None),
        };

        let creates_invocation = matches!(
            outcome,
            Outcome::Invoked | Outcome::Queued | Outcome::AwaitingApproval
        );
        let mut invocation_id = None;
        let mut held = false;
        if creates_invocation {
            let id = crate::domain::ids::invocation(claimed_key, now);
            for (bucket, key, window_ms) in &buckets {
                tx.throttle_record(bucket, key, now, *window_ms)?;
            }
            if agent
                .budget
                .is_some_and(|b| b.invocations_per_day.is_some())
            {
                let bucket = budget::bucket(&agent.id);
                tx.throttle_record(&bucket, "", now, crate::domain::budget::DAY_MS)?;
            }
            let mut inv = self.new_invocation(tx, &id, event, trigger, outcome, depth, now)?;
            inv.trace = trace.cloned();
            if outcome == Outcome::AwaitingApproval {
                inv.approval_request = Some(crate::notify::outcome::approval_request(
                    tx,
                    self.project,
                    &inv,
                    now,
                )?);
            }
            held = inv.lease.is_some();
            tx.insert_invocation(&inv)?;
            if agent.effective_risk >= RiskLevel::Medium {
                tx.audit(AuditEntry::of(
                    &inv,
                    now,
                    "decided",
                    None,
                    Some(outcome.as_str().into()),
                ))?;
            }
            invocation_id = Some(id);
        }
        Ok((outcome, reason, invocation_id, held))
    }

    #[allow(clippy::too_many_arguments)]
    fn new_invocation(
        &self,
        tx: &mut dyn WriteTx,
        id: &str,
        event: &Event,
        trigger: &Trigger,
        outcome: Outcome,
        depth: &Option<Depth>,
        now: i64,
    ) -> storage::Result<Invocation> {
        let agent = &self.project.agents[trigger.agent];
        let awaiting = outcome == Outcome::AwaitingApproval;
        let timeout =
            i64::try_from(self.project.config.approval_timeout.as_millis()).unwrap_or(i64::MAX);
        let provocation = Provocation {
            id: id.to_owned(),
            seq: tx.next(Sequence::Invocation)?,
            trigger: trigger.id.clone(),
            agent: agent.id.clone(),
            event: event.value.clone(),
            event_id: event.id.clone(),
            event_type: event.kind.clone(),
            depth: depth.as_ref().map_or(0, Depth::value),
            risk: agent.effective_risk.as_str().to_owned(),
            max_attempts: agent.retry.max_attempts,
        };
        let deadline = awaiting.then(|| now.saturating_add(timeout));
        let mut inv = Invocation::new(provocation, deadline, now);
        inv.concurrency = concurrency::slots(trigger, agent, &event.value);
        // Indexed by the store under its trigger and key while it is unfinished, so a
        // `cancel_on` event finds it (a key that selects nothing names no work to end).
        inv.cancel = trigger.cancel_on.as_ref().and_then(|c| {
            throttle::key_of(&c.key, &event.value).map(|key| CancelKey {
                key,
                sender: event.sender.clone(),
            })
        });
        // Held from the decision on by the process that will run it, so a `pap serve`
        // watching the queue does not start it too; `--no-run` leaves it to serve, and so
        // does `leave_blocked` one that waits for its keys (the gate reads their holders and
        // first waiters only).
        let blocked = || -> storage::Result<bool> {
            Ok(self.options.leave_blocked
                && !inv.concurrency.is_empty()
                && tx.concurrency_block(&inv, now)?.is_some())
        };
        if !awaiting && !self.options.no_run && !blocked()? {
            inv.lease = Some(Lease::mine(tx.issue_lease_token()?, now, HOLD_MARGIN_MS));
        }
        Ok(inv)
    }

    fn disabled(&self, index: usize) -> TriggerReport {
        let trigger = &self.project.triggers[index];
        let agent = &self.project.agents[trigger.agent];
        TriggerReport {
            trigger: self.names[index].0.clone(),
            agent: self.names[index].1.clone(),
            outcome: Outcome::Disabled,
            reason: Some("the trigger has `enabled: false`".into()),
            invocation_id: None,
            risk: agent.effective_risk.as_str(),
            result: None,
            attempts: None,
            emitted: None,
            explain: Some(Explain {
                file: trigger.file.clone(),
                ..Explain::default()
            }),
            held: false,
            handed_over: Vec::new(),
        }
    }
}

/// The trace an event came with: its HTTP request's, else its own `traceparent` field.
fn incoming_trace(event: &Event) -> Option<TraceContext> {
    event
        .trace
        .clone()
        .or_else(|| TraceContext::of_event(&event.value, None))
}

/// The span of one event's decision: a child of the trace the event came with, if any.
fn decision_span(event: &Event) -> Span {
    if !telemetry::enabled() {
        return Span::none();
    }
    let parent = incoming_trace(event);
    telemetry::start(
        || format!("decide {}", event.kind),
        Parent::Remote(parent.as_ref()),
        telemetry::Kind::Internal,
        || {
            vec![
                Attr::new("pap.event.id", event.id.clone()),
                Attr::new("pap.event.type", event.kind.clone()),
            ]
        },
    )
}

/// The depth of an event whose `triggered_by` is `parent`.
fn depth_of_parent(tx: &dyn WriteTx, parent: Option<&str>) -> storage::Result<Depth> {
    let parent_depth = match parent {
        Some(parent) => tx.invocation(parent)?.map(|inv| inv.depth),
        None => None,
    };
    Ok(Depth::of(parent, parent_depth))
}

/// A trigger's verdict on its span: the outcome, the reason (redacted: it may quote the
/// event), the invocation, and each stage as an event.
fn trace_verdict(span: &Span, decided: &TriggerReport, redactor: &crate::redact::Redactor) {
    span.set(Attr::new("pap.outcome", decided.outcome.as_str()));
    if let Some(reason) = &decided.reason {
        span.set(Attr::new(
            "pap.reason",
            redactor.text(&reason.to_string()).into_owned(),
        ));
    }
    if let Some(id) = &decided.invocation_id {
        span.set(Attr::new("pap.invocation.id", id.clone()));
    }
    for stage in decided.explain.iter().flat_map(|e| &e.stages) {
        span.event(
            stage.stage,
            vec![
                Attr::new("pap.stage.passed", stage.passed),
                Attr::new("pap.stage.note", redactor.text(&stage.note).into_owned()),
            ],
        );
    }
}

fn note(
    explain: &mut Option<Explain>,
    stage: &'static str,
    verdict: &Verdict,
    ok: impl FnOnce() -> String,
) {
    if let Some(ex) = explain.as_mut() {
        let (passed, note) = match verdict {
            Verdict::Continue => (true, ok()),
            Verdict::Stop(_, why) => (false, why.to_string()),
        };
        ex.stages.push(StageExplain {
            stage,
            passed,
            note,
        });
    }
}

/// When a throttled decision lets go of its key under `release_key`: once every refusing
/// window has room (the reason's next slot). `None` when the key is held its whole TTL.
fn released_at(trigger: &Trigger, outcome: Outcome, reason: Option<&Reason>) -> Option<i64> {
    if outcome != Outcome::Throttled || !trigger.throttles.iter().any(|t| t.release_key) {
        return None;
    }
    match reason {
        Some(Reason::Throttled { next, .. }) => Some(*next),
        _ => None,
    }
}
