//! Throttle stage: at most `max_per_window` invocations per sliding `window_seconds`, per
//! trigger and per value of `window_key` (serialised as JSON; a missing value is its own
//! bucket). Measured on the dispatcher's clock; only invocations count. A trigger may list
//! several windows (a pap extension): an invocation needs room in every one.

use std::borrow::Cow;

use serde_json::Value;

use super::{Outcome, Reason, Verdict};
use crate::manifest::compiled::Throttle;

/// The bucket an event falls in: the selected value as JSON, `""` when missing (or when the
/// trigger has no `window_key`, or the path went over its budget), a JSON array when the
/// path selects several nodes.
pub fn window_key(throttle: &Throttle, event: &Value) -> String {
    bucket_of(throttle.window_key.as_ref(), event)
}

/// The value `path` selects in `event`, as JSON text (a JSON array when it selects several
/// nodes); `None` when it selects nothing or went over its budget. An event is untrusted: a
/// path it makes too costly names no key at all, never a key shared by every such event (a
/// `cancel_on` key that every overflowing event shared would let one resolution end them
/// all).
pub(crate) fn key_of(path: &crate::jsonpath::JsonPath, event: &Value) -> Option<String> {
    let selected = path.select(event).ok()?;
    match selected.as_slice() {
        [] => None,
        [one] => Some(one.to_string()),
        many => Some(Value::Array(many.iter().map(|v| (*v).clone()).collect()).to_string()),
    }
}

/// The bucket `path` selects in `event` (a throttle's, a debounce's, a batch's or a
/// concurrency key): its key, or `""` without a path or a key (the bucket of events where
/// the value is missing).
pub(crate) fn bucket_of(path: Option<&crate::jsonpath::JsonPath>, event: &Value) -> String {
    path.and_then(|p| key_of(p, event)).unwrap_or_default()
}

/// Where window `index` of a trigger keeps its times: the first under the trigger's id, as
/// when a trigger had one window (so a store from then keeps its counts), the others under
/// `id#index` (`#` is outside the trigger id alphabet, so no trigger's first window is
/// another's second).
pub fn bucket(trigger: &str, index: usize) -> Cow<'_, str> {
    if index == 0 {
        Cow::Borrowed(trigger)
    } else {
        Cow::Owned(format!("{trigger}#{index}"))
    }
}

/// Of two windows' verdicts, the one that decides: a refusal over room, and of two
/// refusals the one whose next slot comes later (the event needs room in both).
pub(crate) fn stricter(a: Verdict, b: Verdict) -> Verdict {
    let next = |v: &Verdict| match v {
        Verdict::Stop(_, Reason::Throttled { next, .. }) => Some(*next),
        _ => None,
    };
    match (next(&a), next(&b)) {
        (Some(x), Some(y)) if y > x => b,
        (Some(_), _) => a,
        (None, Some(_)) => b,
        (None, None) => a,
    }
}

/// `times` are the invocation times recorded for this bucket (ms).
pub fn check(throttle: &Throttle, key: &str, times: &[i64], now: i64) -> Verdict {
    let window = window_ms(throttle);
    let mut in_window: Vec<i64> = times
        .iter()
        .copied()
        .filter(|t| counts(*t, now, window))
        .collect();
    let used = in_window.len();
    let max = usize::try_from(throttle.max_per_window).unwrap_or(usize::MAX);
    if used < max {
        return Verdict::Continue;
    }
    // Room comes back when enough have left the window that fewer than `max` remain: an
    // operator's retry, counted but never refused, can leave more than `max` in it.
    in_window.sort_unstable();
    let next = in_window
        .get(used - max)
        .map_or(now, |t| t.saturating_add(window));
    Verdict::Stop(
        Outcome::Throttled,
        Reason::Throttled {
            used,
            max: throttle.max_per_window,
            window: throttle.window,
            key: key.to_owned(),
            next,
        },
    )
}

/// "2 of 3 invocations used in the last 1h": a window's use, in reasons and `--explain`.
pub fn usage(used: usize, max: u64, window: std::time::Duration) -> String {
    format!(
        "{used} of {max} invocations used in the last {}",
        crate::manifest::duration::format(window)
    )
}

/// Whether an invocation at `t` counts in the window ending at `now`. A time after `now` was
/// recorded before the clock was stepped back; counting it would keep the trigger throttled
/// for the whole step, so it does not count (and the next record drops it).
pub fn counts(t: i64, now: i64, window_ms: i64) -> bool {
    t > now.saturating_sub(window_ms) && t <= now
}

pub fn window_ms(throttle: &Throttle) -> i64 {
    i64::try_from(throttle.window.as_millis()).unwrap_or(i64::MAX)
}

/// The longest window any row of the throttle table is counted in: the project's longest
/// throttle, and never less than a day (spend budgets count a sliding day in the same table,
/// the chat's post rate a minute). A row whose newest time is older can go (see
/// `serve::purge`).
pub fn longest_window_ms(project: &crate::manifest::Project) -> i64 {
    project
        .triggers
        .iter()
        .flat_map(|t| t.throttles.iter().map(window_ms))
        .fold(crate::domain::budget::DAY_MS, i64::max)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jsonpath::JsonPath;
    use serde_json::json;
    use std::time::Duration;

    fn throttle(max: u64, secs: u64, key: Option<&str>) -> Throttle {
        Throttle {
            max_per_window: max,
            window: Duration::from_secs(secs),
            window_key: key.map(|k| JsonPath::parse(k).unwrap()),
            release_key: false,
        }
    }

    #[test]
    fn times_from_a_clock_since_stepped_back_do_not_count() {
        let t = throttle(1, 3600, None);
        // Recorded at 10:00, then the clock went back to 09:00.
        let times = [36_000_000];
        assert_eq!(check(&t, "", &times, 32_400_000), Verdict::Continue);
        assert!(matches!(
            check(&t, "", &times, 36_000_001),
            Verdict::Stop(..)
        ));
    }

    #[test]
    fn window_slides() {
        let t = throttle(2, 60, None);
        let times = [0, 30_000];
        assert!(matches!(check(&t, "", &times, 59_999), Verdict::Stop(..)));
        // At 60 s the first invocation has left the window.
        assert_eq!(check(&t, "", &times, 60_000), Verdict::Continue);
    }

    #[test]
    fn keys_are_json_and_missing_is_its_own_bucket() {
        let t = throttle(1, 60, Some("$.data.region"));
        assert_eq!(
            window_key(&t, &json!({"data": {"region": "NO1"}})),
            "\"NO1\""
        );
        assert_eq!(window_key(&t, &json!({"data": {"region": 1}})), "1");
        assert_eq!(window_key(&t, &json!({"data": {}})), "");
        let many = throttle(1, 60, Some("$.data.r[*]"));
        assert_eq!(
            window_key(&many, &json!({"data": {"r": [1, "a"]}})),
            "[1,\"a\"]"
        );
    }

    #[test]
    fn the_window_whose_slot_comes_last_decides() {
        let hour = throttle(3, 3600, None);
        let day = throttle(7, 86_400, None);
        let now = 3_600_000 * 5;
        // 3 in the last hour, 7 today: both full; the day's slot is later.
        let hourly = [now - 3000, now - 2000, now - 1000];
        let daily = [0, 1, 2, now - 4000, now - 3000, now - 2000, now - 1000];
        let decided = stricter(check(&hour, "", &hourly, now), check(&day, "", &daily, now));
        let Verdict::Stop(_, Reason::Throttled { next, max, .. }) = decided else {
            panic!("{decided:?}")
        };
        assert_eq!((max, next), (7, 86_400_000));
        // Room in the day, none in the hour: the hour refuses.
        let decided = stricter(
            check(&hour, "", &hourly, now),
            check(&day, "", &hourly, now),
        );
        assert!(matches!(
            decided,
            Verdict::Stop(_, Reason::Throttled { max: 3, .. })
        ));
        assert_eq!(
            stricter(Verdict::Continue, Verdict::Continue),
            Verdict::Continue
        );
    }

    #[test]
    fn the_next_slot_waits_until_fewer_than_max_remain() {
        // max 1, two in the window (a retry is counted without being refused).
        let t = throttle(1, 3600, None);
        let Verdict::Stop(_, Reason::Throttled { next, .. }) =
            check(&t, "", &[600_000, 0], 1_200_000)
        else {
            panic!()
        };
        assert_eq!(next, 600_000 + 3_600_000);
        // Near the end of time the slot saturates instead of overflowing.
        let Verdict::Stop(_, Reason::Throttled { next, .. }) =
            check(&t, "", &[i64::MAX - 5], i64::MAX - 1)
        else {
            panic!()
        };
        assert_eq!(next, i64::MAX);
    }

    #[test]
    fn the_first_window_keeps_the_trigger_id_as_its_bucket() {
        assert_eq!(bucket("t", 0), "t");
        assert_eq!(bucket("t", 1), "t#1");
    }

    #[test]
    fn reason_names_the_bucket_and_next_slot() {
        let t = throttle(1, 3600, Some("$.data.region"));
        let Verdict::Stop(Outcome::Throttled, why) = check(&t, "\"NO1\"", &[0], 1000) else {
            panic!()
        };
        assert_eq!(
            why.to_string(),
            "1 of 1 invocations used in the last 1h for window key \"NO1\"; next slot at 1970-01-01T01:00:00.000Z"
        );
    }
}
