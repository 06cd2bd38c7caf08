//! A webhook body, as it arrived, to the events it makes, each validated as any event from
//! outside is. `POST /v1/ingest/NAME` decides them, `pap adapt` prints them and `pap dispatch
//! --adapter` decides them: one function for the three, so a body tried offline makes exactly
//! the events a post of it would.

use serde_json::Value;

use super::{Adapter, Limits, UnmappableBody};
use crate::event::strict::Strict;
use crate::event::{self, Event, Invalid, Origin};

/// One event a body made (or why the element is not one), with its element's index when the
/// adapter walks an array (`each`).
#[derive(Debug)]
pub struct BodyEvent {
    pub index: Option<usize>,
    pub event: Result<Event, Invalid>,
}

/// The events of `bytes` by `adapter`, received at `now` (ms: `refire_after` counts to it).
/// `Err` when the body makes none: it is not JSON (a
/// duplicate key included, as for any event), its `each` names no array, or its events would
/// add up to more than a few times the body.
pub fn events_of_body(
    adapter: &Adapter,
    bytes: &[u8],
    max_event_bytes: u64,
    now: i64,
) -> Result<Vec<BodyEvent>, UnmappableBody> {
    let Strict(body) = serde_json::from_slice::<Strict>(bytes)
        .map_err(|e| format!("the body is not valid JSON: {e}"))?;
    // The events may copy parts of the body into each element; they may add up to a few
    // times the body (an event per alert with the group's labels), never more.
    let limits = Limits {
        event_bytes: usize::try_from(max_event_bytes).unwrap_or(usize::MAX),
        total_bytes: bytes.len().saturating_mul(4).max(1 << 20),
    };
    let mapped = adapter
        .map_reason(body, limits, now)
        .map_err(|why| format!("adapter `{}`: {why}", adapter.name))?;
    Ok(mapped
        .into_iter()
        .map(|m| {
            let event = m.event.map_err(|e| Invalid {
                id: e.id,
                kind: None,
                reason: e.reason,
            });
            let event = event.and_then(|value: Value| {
                let len = serde_json::to_vec(&value).map_or(usize::MAX, |b| b.len());
                event::validate(value, len, max_event_bytes, Origin::Outside).map_err(|mut bad| {
                    bad.reason = format!(
                        "adapter `{}` made an invalid event: {}",
                        adapter.name, bad.reason
                    );
                    bad
                })
            });
            BodyEvent {
                index: m.index,
                event,
            }
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alertmanager() -> Adapter {
        crate::manifest::compile_adapter::all_presets()
            .into_iter()
            .find(|a| a.name == "alertmanager")
            .unwrap()
    }

    #[test]
    fn each_alert_of_a_group_is_an_event_and_a_bad_one_is_named_by_its_index() {
        let body = br#"{"receiver":"pap","status":"firing","externalURL":"http://am:9093",
            "groupKey":"{}:{}","groupLabels":{},"commonLabels":{},"commonAnnotations":{},
            "alerts":[
              {"status":"firing","fingerprint":"aa","labels":{"alertname":"A"},"annotations":{},
               "startsAt":"2026-11-28T08:00:00Z","endsAt":"0001-01-01T00:00:00Z","generatorURL":""},
              {"status":"firing","labels":{"alertname":"B"},"annotations":{},
               "startsAt":"not a time","endsAt":"0001-01-01T00:00:00Z","generatorURL":""}]}"#;
        let events = events_of_body(&alertmanager(), body, 1 << 20, 0).unwrap();
        assert_eq!(events.len(), 2);
        assert_eq!(events[0].index, Some(0));
        let first = events[0].event.as_ref().unwrap();
        assert_eq!(first.kind, "alertmanager.alert.firing");
        assert_eq!(events[1].index, Some(1));
        let why = events[1].event.as_ref().unwrap_err();
        assert!(why.reason.starts_with("adapter `alertmanager`"), "{why:?}");
    }

    #[test]
    fn a_body_that_is_not_json_or_has_no_alerts_makes_no_events() {
        let why = events_of_body(&alertmanager(), b"{\"alerts\": [", 1 << 20, 0).unwrap_err();
        assert!(
            why.reason().starts_with("the body is not valid JSON"),
            "{why}"
        );
        let why = events_of_body(&alertmanager(), b"{\"a\": 1, \"a\": 2}", 1 << 20, 0).unwrap_err();
        assert!(why.reason().contains("appears twice"), "{why}");
        let why =
            events_of_body(&alertmanager(), b"{\"status\": \"firing\"}", 1 << 20, 0).unwrap_err();
        assert_eq!(
            why.reason(),
            "adapter `alertmanager`: the body has no `$.alerts`"
        );
    }
}
