//! Debounce stage (a pap extension): a burst of events, per trigger and per value of
//! `window_key`, is acted on once. A burst ends when no event has reached this stage for
//! `seconds`. Leading mode: the burst's first event goes on to the next stages, the others
//! are `debounced`. Trailing mode: every event is `debounced`, and once the burst has been
//! quiet for `seconds` one invocation is made with its last event (`pap serve` fires it:
//! see `Pipeline::fire_debounced`). Measured on the dispatcher's clock.

use serde_json::Value;

use super::{Arrival, Outcome, Reason, Verdict};
use crate::domain::{DebounceState, PendingFire};
use crate::manifest::compiled::Debounce;
use crate::manifest::raw::DebounceMode;

/// The burst an event belongs to: as for throttle windows, the selected value as JSON.
pub fn window_key(debounce: &Debounce, event: &Value) -> String {
    super::throttle::bucket_of(debounce.window_key.as_ref(), event)
}

/// Decides one event at `now` against the burst's state so far, and says what the state
/// becomes (every event that reaches the stage is part of the burst).
pub fn check(
    debounce: &Debounce,
    key: &str,
    state: Option<&DebounceState>,
    event: &Value,
    arrival: Arrival<'_>,
    now: i64,
) -> (Verdict, DebounceState) {
    let quiet = quiet_ms(debounce);
    // Two processes may commit out of the order of their clocks: a burst's last event can
    // be one that reached the store before this one with a later time. Within the quiet
    // period that is the same burst; further apart (a clock stepped back) it is not.
    let last = state.map(|s| s.last_seen);
    let same_burst = last.is_some_and(|last| now.abs_diff(last) < quiet.unsigned_abs());
    let latest = match last {
        Some(last) if same_burst => last.max(now),
        _ => now,
    };
    match debounce.mode {
        DebounceMode::Leading => {
            let verdict = match last {
                Some(last) if same_burst => Verdict::Stop(
                    Outcome::Debounced,
                    Reason::Debounced {
                        trailing: false,
                        quiet: debounce.quiet,
                        key: key.to_owned(),
                        at: last,
                    },
                ),
                _ => Verdict::Continue,
            };
            let next = DebounceState {
                last_seen: latest,
                pending: None,
                seen: Vec::new(),
            };
            (verdict, next)
        }
        DebounceMode::Trailing => {
            // The fire carries the burst's latest event: this one, unless one decided with
            // a later time is already pending.
            let keep = state
                .filter(|s| same_burst && s.last_seen > now)
                .and_then(|s| s.pending.clone());
            let pending = keep.unwrap_or_else(|| PendingFire {
                due: now.saturating_add(quiet),
                event: event.clone(),
                sender: arrival.sender.cloned(),
                batch: Vec::new(),
                batch_bytes: 0,
                trace: arrival.trace.cloned(),
                links: Vec::new(),
            });
            let verdict = Verdict::Stop(
                Outcome::Debounced,
                Reason::Debounced {
                    trailing: true,
                    quiet: debounce.quiet,
                    key: key.to_owned(),
                    at: pending.due,
                },
            );
            let next = DebounceState {
                last_seen: latest,
                pending: Some(pending),
                seen: Vec::new(),
            };
            (verdict, next)
        }
    }
}

pub fn quiet_ms(debounce: &Debounce) -> i64 {
    i64::try_from(debounce.quiet.as_millis()).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::time::Duration;

    fn debounce(mode: DebounceMode) -> Debounce {
        Debounce {
            quiet: Duration::from_secs(60),
            window_key: None,
            mode,
        }
    }

    #[test]
    fn leading_lets_the_first_of_a_burst_through_and_waits_for_quiet() {
        let d = debounce(DebounceMode::Leading);
        let e = json!({});
        let (first, s1) = check(&d, "", None, &e, Arrival::default(), 0);
        assert_eq!(first, Verdict::Continue);
        // 59.999 s after the last event: still the same burst, which goes on from here.
        let (second, s2) = check(&d, "", Some(&s1), &e, Arrival::default(), 59_999);
        assert!(matches!(second, Verdict::Stop(Outcome::Debounced, _)));
        let (third, s3) = check(&d, "", Some(&s2), &e, Arrival::default(), 119_000);
        assert!(matches!(third, Verdict::Stop(Outcome::Debounced, _)));
        // A full minute of quiet: a new burst.
        let (fourth, _) = check(&d, "", Some(&s3), &e, Arrival::default(), 179_000);
        assert_eq!(fourth, Verdict::Continue);
    }

    #[test]
    fn trailing_debounces_every_event_and_keeps_the_last() {
        let d = debounce(DebounceMode::Trailing);
        let (v, s1) = check(&d, "", None, &json!({"n": 1}), Arrival::default(), 0);
        assert!(matches!(v, Verdict::Stop(Outcome::Debounced, _)));
        let (_, s2) = check(
            &d,
            "",
            Some(&s1),
            &json!({"n": 2}),
            Arrival::default(),
            30_000,
        );
        let pending = s2.pending.unwrap();
        assert_eq!((pending.due, pending.event), (90_000, json!({"n": 2})));
    }

    #[test]
    fn a_burst_decided_out_of_clock_order_is_still_one_burst() {
        // A process with a later clock committed first.
        let lead = debounce(DebounceMode::Leading);
        let (_, s) = check(&lead, "", None, &json!({}), Arrival::default(), 200_000);
        let (v, s) = check(&lead, "", Some(&s), &json!({}), Arrival::default(), 199_000);
        assert!(matches!(v, Verdict::Stop(Outcome::Debounced, _)));
        assert_eq!(s.last_seen, 200_000);
        // A clock stepped back by more than the quiet period starts a new burst.
        let (v, s) = check(&lead, "", Some(&s), &json!({}), Arrival::default(), 100_000);
        assert_eq!((v, s.last_seen), (Verdict::Continue, 100_000));

        let trail = debounce(DebounceMode::Trailing);
        let (_, s) = check(
            &trail,
            "",
            None,
            &json!({"n": 2}),
            Arrival::default(),
            10_000,
        );
        let (_, s) = check(
            &trail,
            "",
            Some(&s),
            &json!({"n": 1}),
            Arrival::default(),
            9_000,
        );
        let p = s.pending.unwrap();
        assert_eq!((p.due, p.event), (70_000, json!({"n": 2})));
    }

    #[test]
    fn reasons_say_when_it_acts() {
        let d = debounce(DebounceMode::Trailing);
        let (Verdict::Stop(_, why), _) =
            check(&d, "\"db1\"", None, &json!({}), Arrival::default(), 0)
        else {
            panic!()
        };
        assert_eq!(
            why.to_string(),
            "trailing debounce: one invocation with the last event of the burst once it has been quiet for 1m (window key \"db1\"), at 1970-01-01T00:01:00.000Z unless another event comes first; `pap serve` makes it"
        );
        let d = debounce(DebounceMode::Leading);
        let (_, s) = check(&d, "", None, &json!({}), Arrival::default(), 0);
        let (Verdict::Stop(_, why), _) =
            check(&d, "", Some(&s), &json!({}), Arrival::default(), 1000)
        else {
            panic!()
        };
        assert_eq!(
            why.to_string(),
            "leading debounce: the burst goes on (its last event came at 1970-01-01T00:00:00.000Z, within the quiet period of 1m); the next event after 1m of quiet provokes"
        );
    }
}
