//! Batch stage (a pap extension, issue 34): the events of a burst, per trigger and per value
//! of the batch `key`, are `batched`, and one invocation gets every one of them, in order,
//! once `window` has passed since the batch's first event or once it holds `max` events
//! (`pap serve` makes it, as it fires a trailing debounce: see `Pipeline::fire_debounced`).
//! The batch is kept where a trailing debounce keeps its pending fire, in the deciding
//! transaction, so an event is in its batch before its sender has an answer, and a batch
//! survives a crash or a restart.
//!
//! A batch is bounded by `max` and by bytes: the events it holds add up to at most the
//! project's `max_event_bytes`. An event that would go over goes on alone through the stages
//! after this one (its own invocation), and the batch it did not fit is handed over at once.

use serde_json::Value;

use super::{Outcome, Reason, Verdict};
use crate::domain::{DebounceState, PendingFire, Sender};
use crate::manifest::compiled::Batch;

/// The batch an event belongs to: as for throttle windows, the selected value as JSON.
pub fn key(batch: &Batch, event: &Value) -> String {
    super::throttle::key_of(batch.key.as_ref(), event)
}

/// How long a batch collects, in ms (a stale state's age, for the purge).
pub fn window_ms(batch: &Batch) -> i64 {
    i64::try_from(batch.window.as_millis()).unwrap_or(i64::MAX)
}

/// Decides one event at `now` against the batch so far: `batched` and the state it becomes,
/// or `Continue` (the event goes on alone) with the state that hands the full batch over.
/// `max_bytes` bounds the encoded events a batch holds.
pub fn check(
    batch: &Batch,
    key: &str,
    state: Option<&DebounceState>,
    event: &Value,
    sender: Option<&Sender>,
    max_bytes: usize,
    now: i64,
) -> (Verdict, DebounceState) {
    let size = crate::event::encoded_len(event) as u64;
    let mut pending = state.and_then(|s| s.pending.clone());
    if let Some(p) = pending.as_mut() {
        if p.batch_bytes.saturating_add(size) > max_bytes as u64 {
            // It does not fit: the batch goes now, and this event on alone.
            p.due = p.due.min(now);
            let next = DebounceState {
                last_seen: now,
                pending,
                seen: Vec::new(),
            };
            return (Verdict::Continue, next);
        }
        p.batch.push(event.clone());
        p.batch_bytes = p.batch_bytes.saturating_add(size);
    }
    let mut pending = pending.unwrap_or_else(|| PendingFire {
        due: now.saturating_add(window_ms(batch)),
        event: event.clone(),
        sender: sender.cloned(),
        batch: vec![event.clone()],
        batch_bytes: size,
    });
    if pending.batch.len() >= batch.max as usize {
        pending.due = pending.due.min(now);
    }
    let verdict = Verdict::Stop(
        Outcome::Batched,
        Reason::Batched {
            count: pending.batch.len(),
            max: batch.max,
            key: key.to_owned(),
            due: pending.due,
        },
    );
    let next = DebounceState {
        last_seen: now,
        pending: Some(pending),
        seen: Vec::new(),
    };
    (verdict, next)
}

/// The event the batch's invocation gets: its first event, with every event of the batch in
/// order under `batch` (a top-level extension field, as CloudEvents extensions are kept).
pub fn handed_over(pending: PendingFire) -> Value {
    let mut event = pending.event;
    if let Some(fields) = event.as_object_mut() {
        fields.insert("batch".into(), Value::Array(pending.batch));
    }
    event
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::time::Duration;

    fn batch(max: u32) -> Batch {
        Batch {
            max,
            window: Duration::from_secs(30),
            key: None,
        }
    }

    #[test]
    fn events_collect_until_the_window_or_max_then_one_event_holds_them_all() {
        let b = batch(3);
        let (v, s) = check(&b, "", None, &json!({"id": "e1"}), None, 1 << 20, 1_000);
        assert!(matches!(v, Verdict::Stop(Outcome::Batched, _)));
        assert_eq!(s.pending.as_ref().unwrap().due, 31_000);
        let (_, s) = check(&b, "", Some(&s), &json!({"id": "e2"}), None, 1 << 20, 2_000);
        assert_eq!(s.pending.as_ref().unwrap().due, 31_000);
        // The third fills it: it is due at once.
        let (v, s) = check(&b, "", Some(&s), &json!({"id": "e3"}), None, 1 << 20, 3_000);
        let Verdict::Stop(_, reason) = v else {
            panic!()
        };
        assert!(
            reason.to_string().contains("batch of 3 (at most 3)"),
            "{reason}"
        );
        let pending = s.pending.unwrap();
        assert_eq!(pending.due, 3_000);
        let event = handed_over(pending);
        assert_eq!(event["id"], "e1");
        let ids: Vec<&str> = event["batch"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["id"].as_str().unwrap())
            .collect();
        assert_eq!(ids, ["e1", "e2", "e3"]);
    }

    #[test]
    fn an_event_that_does_not_fit_the_bytes_goes_on_alone_and_the_batch_goes_now() {
        let b = batch(100);
        let big = json!({"id": "e2", "data": "x".repeat(600)});
        let (_, s) = check(&b, "", None, &json!({"id": "e1"}), None, 500, 1_000);
        let (v, s) = check(&b, "", Some(&s), &big, None, 500, 2_000);
        assert_eq!(v, Verdict::Continue);
        let pending = s.pending.unwrap();
        assert_eq!((pending.due, pending.batch.len()), (2_000, 1));
    }
}
