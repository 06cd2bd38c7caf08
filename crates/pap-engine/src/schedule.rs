//! When a cron schedule fires, and the event each fire emits.
//!
//! Fire times come from croner in the schedule's time zone. Daylight saving time follows
//! Vixie cron (croner's rule): a fixed time that a spring-forward skips (`30 2 * * *` on a
//! day 02:00 jumps to 03:00) fires once, right after the gap (03:00); a fixed time that a
//! fall-back repeats fires once, at its first occurrence. Interval patterns (`*/15 * * * *`,
//! `0 * * * *`) skip the times inside a gap and fire in both passes of a repeated hour,
//! since those are distinct real times.
//!
//! A fire is on time when it is seen within [`LATE_TOLERANCE`] of its time; older fires were
//! missed (serve was stopped) and are skipped, except the latest `catch_up` of them.

use std::collections::VecDeque;

use jiff::{Timestamp, Zoned};
use serde_json::{Value, json};

use crate::manifest::compiled::Schedule;

/// How late a fire may be seen and still count as on time.
pub(crate) const LATE_TOLERANCE_MS: i64 = 60_000;
/// Bound on the fires counted after a long stop, so a per-minute schedule stopped for years
/// does not take long to plan.
const COUNT_LIMIT: usize = 1_000_000;

/// The fire times strictly after `after`, at most `n`.
pub fn next_fires(s: &Schedule, after: Timestamp, n: usize) -> Vec<Zoned> {
    let start = after.to_zoned(s.timezone.clone());
    s.cron.iter_after(start).take(n).collect()
}

/// What to do at `now`, given the last fire time recorded.
#[derive(Debug, Default, PartialEq)]
pub struct Plan {
    /// Fire times to emit, oldest first.
    pub fire: Vec<Timestamp>,
    /// Fires missed and skipped (not caught up).
    pub skipped: usize,
}

/// Fires in `(last, now]`: the on-time ones plus the latest `catch_up` missed ones.
pub fn plan(s: &Schedule, last: Timestamp, now: Timestamp) -> Plan {
    let on_time_from = now.as_millisecond() - LATE_TOLERANCE_MS;
    let mut missed: VecDeque<Timestamp> = VecDeque::new();
    let mut missed_total = 0usize;
    let mut on_time = Vec::new();
    for (i, z) in s
        .cron
        .iter_after(last.to_zoned(s.timezone.clone()))
        .enumerate()
    {
        let at = z.timestamp();
        if at > now || i >= COUNT_LIMIT {
            break;
        }
        if at.as_millisecond() >= on_time_from {
            on_time.push(at);
        } else {
            missed_total += 1;
            missed.push_back(at);
            if missed.len() > s.catch_up as usize {
                missed.pop_front();
            }
        }
    }
    let caught_up = missed.len();
    let mut fire: Vec<Timestamp> = missed.into();
    fire.extend(on_time);
    Plan {
        fire,
        skipped: missed_total - caught_up,
    }
}

/// The event of one fire. Its id comes from the schedule id and the fire time, so a restart
/// (or a second look at the same fire) yields the same id, which idempotency then absorbs.
pub fn event(s: &Schedule, at: Timestamp) -> Value {
    json!({
        "pap_version": "0.2",
        "id": event_id(&s.id, at),
        "type": s.event_type,
        "source": format!("pap://schedule/{}", s.id),
        "time": format!("{at:.0}"),
        "data": Value::Object(s.data.clone()),
    })
}

pub fn event_id(schedule: &str, at: Timestamp) -> String {
    format!("sch_{schedule}_{}", at.strftime("%Y%m%dT%H%M%SZ"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::compile_schedule::parse_cron;

    fn schedule(cron: &str, tz: &str, catch_up: u32) -> Schedule {
        Schedule {
            id: "s".into(),
            file: "pap.yaml".into(),
            cron_text: cron.into(),
            cron: parse_cron(cron).unwrap(),
            timezone: jiff::tz::TimeZone::get(tz).unwrap(),
            timezone_name: tz.into(),
            enabled: true,
            catch_up,
            event_type: "reports.daily.due".into(),
            data: Default::default(),
        }
    }

    fn ts(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn utc(fires: &[Zoned]) -> Vec<String> {
        fires
            .iter()
            .map(|z| format!("{:.0}", z.timestamp()))
            .collect()
    }

    #[test]
    fn crosses_a_month_boundary() {
        let s = schedule("0 0 1 * *", "UTC", 0);
        let fires = next_fires(&s, ts("2026-01-15T00:00:00Z"), 3);
        assert_eq!(
            utc(&fires),
            [
                "2026-02-01T00:00:00Z",
                "2026-03-01T00:00:00Z",
                "2026-04-01T00:00:00Z"
            ]
        );
        let last_of_month = schedule("30 23 28-31 * *", "UTC", 0);
        let fires = next_fires(&last_of_month, ts("2026-02-27T00:00:00Z"), 2);
        assert_eq!(
            utc(&fires),
            ["2026-02-28T23:30:00Z", "2026-03-28T23:30:00Z"]
        );
    }

    #[test]
    fn a_time_skipped_by_spring_forward_fires_once_after_the_gap() {
        // Europe/Berlin, 2026-03-29: 02:00 CET becomes 03:00 CEST.
        let s = schedule("30 2 * * *", "Europe/Berlin", 0);
        let fires = next_fires(&s, ts("2026-03-27T12:00:00Z"), 3);
        assert_eq!(
            utc(&fires),
            [
                "2026-03-28T01:30:00Z", // 02:30 CET
                "2026-03-29T01:00:00Z", // the gap: 03:00 CEST, right after it
                "2026-03-30T00:30:00Z", // 02:30 CEST
            ]
        );
    }

    #[test]
    fn a_time_repeated_by_fall_back_fires_once() {
        // Europe/Berlin, 2026-10-25: 03:00 CEST becomes 02:00 CET; 02:30 happens twice.
        let s = schedule("30 2 * * *", "Europe/Berlin", 0);
        let fires = next_fires(&s, ts("2026-10-24T12:00:00Z"), 2);
        assert_eq!(
            utc(&fires),
            ["2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z"]
        );
        // An hourly pattern fires in both passes of the repeated hour: they are real hours.
        let hourly = schedule("0 * * * *", "Europe/Berlin", 0);
        let fires = next_fires(&hourly, ts("2026-10-24T23:30:00Z"), 3);
        assert_eq!(
            utc(&fires),
            [
                "2026-10-25T00:00:00Z",
                "2026-10-25T01:00:00Z",
                "2026-10-25T02:00:00Z"
            ]
        );
    }

    #[test]
    fn plans_on_time_fires_and_skips_missed_ones_unless_caught_up() {
        let s = schedule("0 * * * *", "UTC", 0);
        let p = plan(&s, ts("2026-05-01T09:00:00Z"), ts("2026-05-01T10:00:20Z"));
        assert_eq!(p.fire, [ts("2026-05-01T10:00:00Z")]);
        assert_eq!(p.skipped, 0);
        // Stopped from 09:00 to 13:30: 10, 11, 12 and 13 o'clock were missed.
        let p = plan(&s, ts("2026-05-01T09:00:00Z"), ts("2026-05-01T13:30:00Z"));
        assert_eq!(
            p,
            Plan {
                fire: vec![],
                skipped: 4
            }
        );
        let s = schedule("0 * * * *", "UTC", 2);
        let p = plan(&s, ts("2026-05-01T09:00:00Z"), ts("2026-05-01T13:30:00Z"));
        assert_eq!(
            p.fire,
            [ts("2026-05-01T12:00:00Z"), ts("2026-05-01T13:00:00Z")]
        );
        assert_eq!(p.skipped, 2);
        // Nothing after the last fire: nothing to do.
        let p = plan(&s, ts("2026-05-01T13:00:00Z"), ts("2026-05-01T13:30:00Z"));
        assert_eq!(p, Plan::default());
    }

    #[test]
    fn event_ids_name_the_schedule_and_the_fire_time() {
        let s = schedule("0 6 * * *", "UTC", 0);
        let e = event(&s, ts("2026-05-01T06:00:00Z"));
        assert_eq!(e["id"], "sch_s_20260501T060000Z");
        assert_eq!(e["time"], "2026-05-01T06:00:00Z");
        assert_eq!(e["source"], "pap://schedule/s");
        assert_eq!(e["type"], "reports.daily.due");
    }
}
