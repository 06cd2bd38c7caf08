//! `cancel_on` (a pap extension): an event that ends what a trigger started and has
//! not finished, such as an alert's resolution ending the run its firing started.
//!
//! For each trigger whose `cancel_on.type` matches an event, and before the event goes
//! through the stages of its own triggers, the event's value at `cancel_on.match` (as JSON)
//! is the key. It ends, in the deciding transaction:
//! - the trigger's pending trailing-debounce fire in the burst the event falls in, when the
//!   fire's event has the same key;
//! - the trigger's queued and awaiting-approval invocations with that key (the store's cancel
//!   index, see `WorkTx::cancellable`), and its running ones when `cancel_on.running` says so,
//!   through `control::cancel`, as `pap invocations cancel` ends them: the approval
//!   request closes unanswered, the audit and the outcome notification record it.
//!
//! Two guards keep it from ending what it should not:
//! - **Who may cancel.** An event from this host (the command line, the spool, a schedule, an
//!   agent) may end anything: whoever runs those can cancel with `pap invocations cancel`.
//!   One posted over HTTP ends work only if it came from the same sender as the event that
//!   started the work (the same named principal on any route; an anonymous sender only
//!   through the same adapter route), or from a principal the trigger lists in
//!   `cancel_on.from`. Otherwise anyone allowed to post could forge a
//!   resolution and end a pending high-risk approval.
//! - **Order.** An event ends only work whose starting event's `time` is not after its own,
//!   so a late resolution of an alert's previous firing leaves its next firing alone.
//!
//! At most [`MAX_PER_TRIGGER`] invocations per trigger and event are looked at: the cost of
//! one event stays bounded whatever the queue holds.

use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;

use super::Pipeline;
use crate::control;
use crate::domain::{Lease, Sender, Status};
use crate::event::Event;
use crate::manifest::compiled::{CancelOn, Trigger};
use crate::manifest::raw::DebounceMode;
use crate::stages::{debounce, throttle};
use crate::storage::{self, WriteTx};

/// The most unfinished invocations of one trigger one event looks at.
pub(crate) const MAX_PER_TRIGGER: usize = 256;

/// What one event ended of one trigger's work, or why it left it alone.
#[derive(Debug, Clone, Serialize)]
pub struct Cancellation {
    pub trigger: Arc<str>,
    /// The invocation ended (or left alone); none for a pending debounce fire.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub invocation_id: Option<String>,
    /// The event that started the work.
    pub event_id: String,
    /// What the work was: `queued`, `awaiting_approval`, `running`, `debounce` for a
    /// trailing debounce's pending fire, or `batch` for a pending batch.
    pub was: &'static str,
    pub cancelled: bool,
    /// Why it was left alone.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refused: Option<String>,
}

/// What an event's `cancel_on` step did: its report lines, and the runs it ended that were
/// running (their process groups are stopped once the decision is committed).
#[derive(Debug, Default)]
pub(crate) struct Ended {
    pub lines: Vec<Cancellation>,
    pub running: Vec<(String, Lease)>,
    /// The failure events of what was ended (in the outbox), to decide after this event.
    pub emitted: Vec<crate::event::Event>,
}

/// One trigger's `cancel_on` asked by one event: the key it selected, and the trigger's name
/// for report lines.
#[derive(Clone, Copy)]
struct Asked<'a> {
    trigger: &'a Trigger,
    cancel: &'a CancelOn,
    key: &'a str,
    event: &'a Event,
    name: &'a Arc<str>,
}

impl Pipeline<'_> {
    /// Ends what `event` ends of every trigger whose `cancel_on` it matches, at `now`.
    pub(super) fn cancel_on(
        &self,
        tx: &mut dyn WriteTx,
        event: &Event,
        now: i64,
    ) -> storage::Result<Ended> {
        let mut ended = Ended::default();
        for &index in &self.cancelers {
            let trigger = &self.project.triggers[index];
            let Some(cancel) = &trigger.cancel_on else {
                continue;
            };
            if !cancel.pattern.matches(&event.kind) {
                continue;
            }
            let Some(key) = throttle::key_of(&cancel.key, &event.value) else {
                // It selects nothing here (or went over its budget), so it names no work.
                continue;
            };
            let asked = Asked {
                trigger,
                cancel,
                key: &key,
                event,
                name: &self.names[index].0,
            };
            self.cancel_fire(tx, &asked, &mut ended)?;
            self.cancel_invocations(tx, &asked, now, &mut ended)?;
        }
        Ok(ended)
    }

    /// The pending trailing-debounce fire in the burst the event falls in.
    fn cancel_fire(
        &self,
        tx: &mut dyn WriteTx,
        asked: &Asked<'_>,
        ended: &mut Ended,
    ) -> storage::Result<()> {
        let Asked {
            trigger,
            cancel,
            key,
            event,
            name,
        } = *asked;
        let burst = match (&trigger.batch, &trigger.debounce) {
            (Some(b), _) => crate::stages::batch::key(b, &event.value),
            (None, Some(d)) if d.mode == DebounceMode::Trailing => {
                debounce::window_key(d, &event.value)
            }
            _ => return Ok(()),
        };
        let Some(mut state) = tx.debounce_state(&trigger.id, &burst)? else {
            return Ok(());
        };
        let Some(pending) = state
            .pending
            .as_ref()
            .filter(|p| throttle::key_of(&cancel.key, &p.event).as_deref() == Some(key))
        else {
            return Ok(());
        };
        let refused = refusal(cancel, &pending.event, pending.sender.as_ref(), event);
        ended.lines.push(Cancellation {
            trigger: name.clone(),
            invocation_id: None,
            event_id: pending.event["id"].as_str().unwrap_or_default().to_owned(),
            was: if pending.batch.is_empty() {
                "debounce"
            } else {
                "batch"
            },
            cancelled: refused.is_none(),
            refused: refused.clone(),
        });
        if refused.is_none() {
            state.pending = None;
            tx.debounce_put(&trigger.id, &burst, &state)?;
        }
        Ok(())
    }

    /// The trigger's unfinished invocations with the key.
    fn cancel_invocations(
        &self,
        tx: &mut dyn WriteTx,
        asked: &Asked<'_>,
        now: i64,
        ended: &mut Ended,
    ) -> storage::Result<()> {
        let Asked {
            trigger,
            cancel,
            key,
            event,
            name,
        } = *asked;
        let grace_ms =
            i64::try_from(self.project.config.serve.grace_period.as_millis()).unwrap_or(i64::MAX);
        let by = sender_name(event.sender.as_ref());
        let reason = format!(
            "cancelled by event {} ({}) from {by}: cancel_on of trigger {}",
            event.id, event.kind, trigger.id
        );
        for inv in tx.cancellable(&trigger.id, key, MAX_PER_TRIGGER)? {
            let started_by = inv.cancel.as_ref().and_then(|c| c.sender.as_ref());
            let mut refused = refusal(cancel, &inv.event, started_by, event);
            if refused.is_none() && inv.status == Status::Running && !cancel.running {
                refused = Some(
                    "it is running, and cancel_on.running is not true: it runs to its end".into(),
                );
            }
            let was = inv.status.as_str();
            let mut line = Cancellation {
                trigger: name.clone(),
                invocation_id: Some(inv.id.clone()),
                event_id: inv.event_id.clone(),
                was,
                cancelled: false,
                refused,
            };
            if line.refused.is_none() {
                match control::cancel(tx, self.project, &inv.id, &reason, &by, now, grace_ms)? {
                    Ok(done) => {
                        line.cancelled = true;
                        if let Some(lease) = done.lease {
                            ended.running.push((inv.id.clone(), lease));
                        }
                        ended.emitted.extend(done.emitted);
                    }
                    Err(why) => line.refused = Some(why.to_string()),
                }
            }
            ended.lines.push(line);
        }
        Ok(())
    }
}

/// How audit entries and reasons name who sent an event.
fn sender_name(sender: Option<&Sender>) -> String {
    match sender {
        None => "this host".to_owned(),
        Some(Sender {
            principal: Some(p), ..
        }) => p.clone(),
        Some(Sender {
            route,
            principal: None,
        }) => format!("anonymous via {route}"),
    }
}

/// Why `event` may not end work started by `started` (sent by `started_by`), if it may not.
fn refusal(
    cancel: &CancelOn,
    started: &Value,
    started_by: Option<&Sender>,
    event: &Event,
) -> Option<String> {
    if let (Some(began), Some(now)) = (time_of(started), time_of(&event.value))
        && began > now
    {
        return Some(format!(
            "its event's time ({began}) is after this event's ({now}): this event ends an earlier occurrence"
        ));
    }
    may_cancel(cancel, started_by, event.sender.as_ref()).err()
}

/// An event's `time`, when it reads as one.
fn time_of(event: &Value) -> Option<jiff::Timestamp> {
    event.get("time")?.as_str()?.parse().ok()
}

/// Whether an event sent by `by` may end work an event sent by `started_by` started: see the
/// module's notes.
pub(crate) fn may_cancel(
    cancel: &CancelOn,
    started_by: Option<&Sender>,
    by: Option<&Sender>,
) -> Result<(), String> {
    let Some(by) = by else {
        return Ok(());
    };
    if by
        .principal
        .as_ref()
        .is_some_and(|p| cancel.from.contains(p))
    {
        return Ok(());
    }
    let who = sender_name(Some(by));
    let Some(started_by) = started_by else {
        return Err(format!(
            "sent by {who} over HTTP; the work was started on this host, so only events from this host or from a principal in cancel_on.from end it"
        ));
    };
    // The same named principal, on any route; anonymous senders are told apart only by the
    // adapter route they used. A route alone proves nothing: without an `auth` of its own, an
    // adapter's route takes posts from every principal with the `ingest` scope.
    let same_route =
        started_by.route == by.route && by.route.starts_with(crate::adapter::PATH_PREFIX);
    if started_by.principal == by.principal && (by.principal.is_some() || same_route) {
        return Ok(());
    }
    Err(format!(
        "sent by {who} through {}; the work was started by {} through {}, and cancel_on.from does not name {who}",
        by.route,
        sender_name(Some(started_by)),
        started_by.route
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event_type::TypePattern;
    use crate::jsonpath::JsonPath;

    fn cancel(from: &[&str]) -> CancelOn {
        CancelOn {
            pattern: TypePattern::new("a.b.resolved").unwrap(),
            key: JsonPath::parse("$.data.fp").unwrap(),
            running: false,
            from: from.iter().map(|s| s.to_string()).collect(),
        }
    }

    fn sent(route: &str, principal: Option<&str>) -> Sender {
        Sender {
            route: route.into(),
            principal: principal.map(str::to_owned),
        }
    }

    #[test]
    fn the_same_sender_or_a_principal_cancel_on_names_may_cancel() {
        let am = sent("/v1/ingest/alertmanager", None);
        let alice = sent("/v1/events", Some("alice"));
        let bob = sent("/v1/events", Some("bob"));
        let anon = sent("/v1/events", None);
        let c = cancel(&[]);
        // From this host: always.
        assert!(may_cancel(&c, Some(&am), None).is_ok());
        // The same adapter route, even anonymous.
        assert!(may_cancel(&c, Some(&am), Some(&am)).is_ok());
        // The same principal.
        assert!(may_cancel(&c, Some(&alice), Some(&alice)).is_ok());
        // Another principal, or the generic route without one: no.
        let why = may_cancel(&c, Some(&alice), Some(&bob)).unwrap_err();
        assert!(
            why.contains("sent by bob") && why.contains("started by alice"),
            "{why}"
        );
        assert!(may_cancel(&c, Some(&anon), Some(&anon)).is_err());
        assert!(may_cancel(&c, Some(&am), Some(&bob)).is_err());
        // Another principal through the same adapter route: no (the route takes anyone's).
        let bob_am = sent("/v1/ingest/alertmanager", Some("bob"));
        assert!(may_cancel(&c, Some(&am), Some(&bob_am)).is_err());
        let alice_am = sent("/v1/ingest/alertmanager", Some("alice"));
        assert!(may_cancel(&c, Some(&alice_am), Some(&bob_am)).is_err());
        assert!(may_cancel(&c, Some(&alice_am), Some(&alice)).is_ok());
        // Work started on this host: only this host, or `from`.
        assert!(may_cancel(&c, None, Some(&alice)).is_err());
        assert!(may_cancel(&cancel(&["bob"]), None, Some(&bob)).is_ok());
        assert!(may_cancel(&cancel(&["bob"]), Some(&alice), Some(&bob)).is_ok());
    }
}
