//! Batch stage (a pap extension): the events of a burst, per trigger and per value of the
//! batch `key`, are `batched`, and one invocation gets every one of them, in order, once
//! `window` has passed since the batch's first event (`pap serve` makes it then, as it fires
//! a trailing debounce: see `Pipeline::fire_debounced`) or at once when the batch holds `max`
//! events (the event that fills it hands it over in its own decision). The batch is kept
//! where a trailing debounce keeps its pending fire, in the deciding transaction, so an event
//! is in its batch before its sender has an answer, and a batch survives a crash or a
//! restart.
//!
//! `max` is a bound: ten events in one request with `max: 4` make three invocations (4, 4
//! and, after the window, 2), in order, each event in exactly one. A batch is also bounded
//! by bytes: the events it holds add up to at most the project's `max_event_bytes`. An event
//! that would go over hands the batch so far over at once and starts the next one.

use serde_json::Value;

pub use super::Arrival;
use super::{Outcome, Reason, Verdict};
use crate::domain::{DebounceState, PendingFire};
use crate::manifest::compiled::Batch;

/// The batch an event belongs to: as for throttle windows, the selected value as JSON.
pub fn key(batch: &Batch, event: &Value) -> String {
    super::throttle::bucket_of(batch.key.as_ref(), event)
}

/// How long a batch collects, in ms (a stale state's age, for the purge).
pub fn window_ms(batch: &Batch) -> i64 {
    i64::try_from(batch.window.as_millis()).unwrap_or(i64::MAX)
}

/// What one event does to its batch.
#[derive(Debug)]
pub struct Checked {
    /// Always `batched`: the event is in a batch (the one handed over, or the one collecting).
    pub verdict: Verdict,
    /// The state the batch key keeps after this event.
    pub next: DebounceState,
    /// Batches to hand over now, in this decision, oldest first: the one too full of bytes
    /// to take this event, and the one this event fills.
    pub handed_over: Vec<PendingFire>,
}

/// Decides one event at `now` against the batch so far. `max_bytes` bounds the encoded
/// events a batch holds.
pub fn check(
    batch: &Batch,
    key: &str,
    state: Option<&DebounceState>,
    event: &Value,
    arrival: Arrival<'_>,
    max_bytes: usize,
    now: i64,
) -> Checked {
    let size = crate::event::encoded_len(event) as u64;
    let mut pending = state.and_then(|s| s.pending.clone());
    let mut handed_over = Vec::new();
    if pending
        .as_ref()
        .is_some_and(|p| p.batch_bytes.saturating_add(size) > max_bytes as u64)
    {
        // It does not fit: the batch so far goes now, and this event starts the next one.
        handed_over.extend(pending.take());
    }
    let pending = match pending {
        Some(mut p) => {
            p.batch.push(event.clone());
            p.batch_bytes = p.batch_bytes.saturating_add(size);
            p.links.extend(arrival.trace.cloned());
            p
        }
        None => PendingFire {
            due: now.saturating_add(window_ms(batch)),
            event: event.clone(),
            sender: arrival.sender.cloned(),
            batch: vec![event.clone()],
            batch_bytes: size,
            trace: arrival.trace.cloned(),
            links: Vec::new(),
        },
    };
    let count = pending.batch.len();
    let full = count >= batch.max as usize;
    let reason = Reason::Batched {
        count,
        max: batch.max,
        key: key.to_owned(),
        due: if full { now } else { pending.due },
        full,
    };
    let kept = if full {
        // Full with this event: handed over in this decision, so the next event starts a
        // new batch.
        handed_over.push(pending);
        None
    } else {
        Some(pending)
    };
    Checked {
        verdict: Verdict::Stop(Outcome::Batched, reason),
        next: DebounceState {
            last_seen: now,
            pending: kept,
            seen: Vec::new(),
        },
        handed_over,
    }
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
    use crate::trace_context::TraceContext;
    use serde_json::json;
    use std::time::Duration;

    fn batch(max: u32) -> Batch {
        Batch {
            max,
            window: Duration::from_secs(30),
            key: None,
        }
    }

    fn ids(p: &PendingFire) -> Vec<&str> {
        p.batch.iter().map(|e| e["id"].as_str().unwrap()).collect()
    }

    fn event(n: u32) -> Value {
        json!({"id": format!("e{n}")})
    }

    #[test]
    fn events_collect_until_the_window_and_the_one_that_fills_it_hands_it_over() {
        let b = batch(3);
        let c = check(&b, "", None, &event(1), Arrival::default(), 1 << 20, 1_000);
        assert!(matches!(c.verdict, Verdict::Stop(Outcome::Batched, _)));
        assert!(c.handed_over.is_empty());
        assert_eq!(c.next.pending.as_ref().unwrap().due, 31_000);
        let c = check(
            &b,
            "",
            Some(&c.next),
            &event(2),
            Arrival::default(),
            1 << 20,
            2_000,
        );
        assert_eq!(c.next.pending.as_ref().unwrap().due, 31_000);
        // The third fills it: it is handed over in this decision, and nothing is kept.
        let c = check(
            &b,
            "",
            Some(&c.next),
            &event(3),
            Arrival::default(),
            1 << 20,
            3_000,
        );
        let Verdict::Stop(_, reason) = &c.verdict else {
            panic!()
        };
        assert!(
            reason.to_string().contains("batch of 3 (at most 3)"),
            "{reason}"
        );
        assert!(reason.to_string().contains("full"), "{reason}");
        assert_eq!(c.next.pending, None);
        assert_eq!(c.handed_over.len(), 1);
        let event = handed_over(c.handed_over.into_iter().next().unwrap());
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
    fn ten_events_at_once_with_max_four_make_batches_of_four_four_and_two() {
        let b = batch(4);
        let mut state: Option<DebounceState> = None;
        let mut handed = Vec::new();
        for n in 1..=10 {
            let c = check(
                &b,
                "",
                state.as_ref(),
                &event(n),
                Arrival::default(),
                1 << 20,
                1_000,
            );
            handed.extend(c.handed_over);
            state = Some(c.next);
        }
        let sizes: Vec<Vec<&str>> = handed.iter().map(ids).collect();
        assert_eq!(
            sizes,
            [vec!["e1", "e2", "e3", "e4"], vec!["e5", "e6", "e7", "e8"]]
        );
        let left = state.unwrap().pending.unwrap();
        assert_eq!((ids(&left), left.due), (vec!["e9", "e10"], 31_000));
    }

    #[test]
    fn an_event_that_does_not_fit_the_bytes_hands_the_batch_over_and_starts_the_next() {
        let b = batch(100);
        // 11 bytes, then 421: together over 430.
        let big = json!({"id": "e2", "data": "x".repeat(400)});
        let c = check(&b, "", None, &event(1), Arrival::default(), 430, 1_000);
        let c = check(&b, "", Some(&c.next), &big, Arrival::default(), 430, 2_000);
        assert!(matches!(c.verdict, Verdict::Stop(Outcome::Batched, _)));
        let handed: Vec<Vec<&str>> = c.handed_over.iter().map(ids).collect();
        assert_eq!(handed, [vec!["e1"]]);
        let next = c.next.pending.unwrap();
        assert_eq!((ids(&next), next.due), (vec!["e2"], 32_000));
    }

    #[test]
    fn a_lowered_max_hands_over_both_the_batch_that_overflowed_and_the_new_one() {
        // A reload lowered `max` below what a pending batch holds.
        let c = check(
            &batch(10),
            "",
            None,
            &event(1),
            Arrival::default(),
            1 << 20,
            1_000,
        );
        let big = json!({"id": "e2", "data": "x".repeat(400)});
        let c = check(
            &batch(1),
            "",
            Some(&c.next),
            &big,
            Arrival::default(),
            430,
            2_000,
        );
        let handed: Vec<Vec<&str>> = c.handed_over.iter().map(ids).collect();
        assert_eq!(handed, [vec!["e1"], vec!["e2"]]);
        assert_eq!(c.next.pending, None);
    }

    #[test]
    fn the_first_event_s_trace_is_continued_and_the_others_linked() {
        let tc = |n: char| TraceContext {
            trace_id: n.to_string().repeat(32),
            parent_id: n.to_string().repeat(16),
            flags: 1,
            tracestate: None,
        };
        let (a, b2) = (tc('a'), tc('b'));
        let at = |t| Arrival {
            sender: None,
            trace: Some(t),
        };
        let c = check(&batch(5), "", None, &event(1), at(&a), 1 << 20, 1_000);
        let c = check(
            &batch(5),
            "",
            Some(&c.next),
            &event(2),
            at(&b2),
            1 << 20,
            1_000,
        );
        let p = c.next.pending.unwrap();
        assert_eq!((p.trace, p.links), (Some(a), vec![b2]));
    }
}
