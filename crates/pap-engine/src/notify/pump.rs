//! The notification timers: the watchdog (ANP 6.2) and sink deliveries with retries.
//! `pap serve` runs a pass every tick; the other commands run one before they exit, so a
//! notification they produced reaches its sinks without a serve.

use std::sync::Arc;

use serde_json::Value;

use super::ledger;
use super::produce::{escalate, millis, sink_job};
use super::{inbox, sinks};
use crate::domain::{NotifyStatus, SinkState};
use crate::manifest::Project;
use crate::storage::{self, Storage, WriteTx};

/// How many due jobs one pass takes at most.
const PASS: usize = 256;
/// A sink delivery is claimed for its timeout plus this: if the process dies meanwhile, the
/// delivery becomes due again (at least once).
const CLAIM_SLACK_MS: i64 = 30_000;

/// What a pass did, for logs and tests.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Pumped {
    pub escalated: usize,
    pub sent: usize,
    pub(crate) send_failures: usize,
}

struct Claimed {
    sink: String,
    notification: String,
    message: u64,
    claimed_until: i64,
    body: Value,
    /// The trace of the invocation the notification is about (when traces are exported).
    trace: Option<crate::trace_context::TraceContext>,
}

/// Runs the watchdog and the sink deliveries due at `now`.
pub async fn pump(
    store: Arc<dyn Storage>,
    project: Arc<Project>,
    now: i64,
) -> anyhow::Result<Pumped> {
    let s = store.clone();
    let due = tokio::task::spawn_blocking(move || s.read(|r| r.any_job_due(now))).await??;
    let mut done = Pumped::default();
    if !due {
        return Ok(done);
    }
    let (s, p) = (store.clone(), project.clone());
    let (escalated, claimed) =
        tokio::task::spawn_blocking(move || s.write(|tx| take_due(tx, &p, now))).await??;
    done.escalated = escalated;
    let mut results = Vec::new();
    for c in claimed {
        let Some(sink) = project
            .config
            .notify
            .sinks
            .iter()
            .find(|s| s.name == c.sink)
        else {
            results.push((c, Err("the sink is no longer in pap.yaml".to_owned())));
            continue;
        };
        // A sink program's stderr or a server's answer may quote a credential.
        let console = project.config.listen.public_url.as_deref();
        let span = delivery_span(&c, sink);
        let outcome = sinks::deliver(sink, &project.root, console, &c.body, span.context())
            .await
            .map_err(|e| project.redactor.text(&e).into_owned());
        if let Err(e) = &outcome {
            span.fail("sink_error", e);
        }
        drop(span);
        match &outcome {
            Ok(()) => {
                done.sent += 1;
                tracing::info!(sink = %c.sink, notification = %c.notification, "notification sent");
            }
            Err(e) => {
                done.send_failures += 1;
                tracing::warn!(sink = %c.sink, notification = %c.notification, error = %e, "notification not sent");
            }
        }
        results.push((c, outcome));
    }
    if !results.is_empty() {
        let p = project.clone();
        tokio::task::spawn_blocking(move || store.write(|tx| record(tx, &p, &results, now)))
            .await??;
    }
    Ok(done)
}

/// The span of one sink delivery: a child of the run the notification is about.
fn delivery_span(
    c: &Claimed,
    sink: &crate::manifest::compiled_notify::SinkSpec,
) -> crate::telemetry::Span {
    use crate::telemetry::{self, Attr};
    telemetry::start(
        || format!("deliver {}", sink.name),
        telemetry::Parent::Remote(c.trace.as_ref()),
        telemetry::Kind::Client,
        || {
            vec![
                Attr::new("pap.sink.name", sink.name.clone()),
                Attr::new("pap.notification.id", c.notification.clone()),
            ]
        },
    )
}

/// Escalates notifications past their deadline and claims the sink deliveries that are due.
fn take_due(
    tx: &mut dyn WriteTx,
    project: &Project,
    now: i64,
) -> storage::Result<(usize, Vec<Claimed>)> {
    let mut escalated = 0;
    let mut claimed = Vec::new();
    for (at, job) in tx.jobs_due(now, PASS)? {
        tx.remove_job(at, &job)?;
        if let Some(id) = job.strip_prefix("watchdog:") {
            let Some(mut n) = tx.notification(id)? else {
                continue;
            };
            if n.status != NotifyStatus::Dispatched {
                continue;
            }
            let lease = n.owner_lease;
            let why = format!(
                "not delivered by its deadline {}",
                crate::clock::rfc3339_ms(n.delivery_deadline.unwrap_or(at))
            );
            escalate(tx, project, &mut n, lease, "watchdog", &why, now)?;
            tx.put_notification(&n)?;
            escalated += 1;
        } else if let Some(rest) = job.strip_prefix("sink:") {
            let mut parts = rest.splitn(3, ':');
            let (Some(sink), Some(id), Some(message)) = (parts.next(), parts.next(), parts.next())
            else {
                continue;
            };
            let Ok(message) = message.parse::<u64>() else {
                continue;
            };
            let (Some(n), Some(msg)) = (tx.notification(id)?, tx.inbox_message(message)?) else {
                continue;
            };
            let timeout = project
                .config
                .notify
                .sinks
                .iter()
                .find(|s| s.name == sink)
                .map_or(0, |s| millis(s.timeout));
            let claimed_until = now.saturating_add(timeout + CLAIM_SLACK_MS);
            tx.add_job(claimed_until, &job)?;
            let trace = match n.metadata.get("invocation_id").and_then(Value::as_str) {
                // Best effort: a record that cannot be read loses its span's parent, not the
                // delivery.
                Some(inv) if crate::telemetry::enabled() => tx
                    .invocation(inv)
                    .ok()
                    .flatten()
                    .and_then(|i| i.history.last().and_then(|a| a.trace.clone()).or(i.trace)),
                _ => None,
            };
            claimed.push(Claimed {
                sink: sink.to_owned(),
                notification: id.to_owned(),
                message,
                claimed_until,
                body: inbox::view(&msg, Some(&n), now),
                trace,
            });
        }
    }
    Ok((escalated, claimed))
}

/// Records each delivery beside the notification: sent, retrying (with backoff) or failed,
/// with the cause. A sink taking a notification does not deliver it (ANP: DELIVERED means a
/// person acknowledged it); a notification with an inbox entry stays acknowledgeable however
/// its sinks fare, and only one without any becomes FAILED when every sink gave up.
fn record(
    tx: &mut dyn WriteTx,
    project: &Project,
    results: &[(Claimed, Result<(), String>)],
    now: i64,
) -> storage::Result<()> {
    for (c, outcome) in results {
        let job = sink_job(&c.sink, &c.notification, c.message);
        tx.remove_job(c.claimed_until, &job)?;
        let Some(mut n) = tx.notification(&c.notification)? else {
            continue;
        };
        let spec = project
            .config
            .notify
            .sinks
            .iter()
            .find(|s| s.name == c.sink);
        let Some(d) = n
            .sinks
            .iter_mut()
            .find(|d| d.sink == c.sink && d.message == c.message)
        else {
            continue;
        };
        d.attempts += 1;
        let by = format!("sink:{}", c.sink);
        match outcome {
            Ok(()) => {
                d.state = SinkState::Sent;
                d.next_at = None;
                d.error = None;
                d.sent_at = Some(now);
            }
            Err(error) => {
                let max = spec.map_or(1, |s| s.max_attempts);
                d.error = Some(error.clone());
                if d.attempts < max
                    && let Some(spec) = spec
                {
                    let delay = spec
                        .backoff
                        .saturating_mul(2u32.saturating_pow(d.attempts.saturating_sub(1)));
                    let at = now.saturating_add(millis(delay));
                    d.next_at = Some(at);
                    d.state = SinkState::Retrying;
                    tx.add_job(at, &job)?;
                } else {
                    d.state = SinkState::Failed;
                    d.next_at = None;
                    let message = c.message;
                    let all_failed = n
                        .sinks
                        .iter()
                        .filter(|d| d.message == message)
                        .all(|d| d.state == SinkState::Failed);
                    let lease = n.owner_lease;
                    let note = Some(format!(
                        "every sink gave up (last: {} after {} attempt(s): {error})",
                        c.sink, max
                    ));
                    // A person can still see it in the inbox: it is not lost.
                    let in_inbox = !n.inbox.is_empty();
                    if all_failed
                        && !in_inbox
                        && ledger::finish(&mut n, lease, NotifyStatus::Failed, &by, note, now)
                            .is_ok()
                    {
                        tracing::warn!(notification = %n.id, "notification FAILED: every sink gave up");
                    }
                }
            }
        }
        tx.put_notification(&n)?;
    }
    Ok(())
}
