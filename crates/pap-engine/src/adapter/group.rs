//! Group events (`per: group`): one event per notification instead of one per
//! alert. Alertmanager already groups alerts (`group_by`) and sends a group's alerts in one
//! webhook; with `per: group` that webhook is one event, so a storm from one rack is one
//! decision.
//!
//! The event:
//! - `type`: `NAME.group.firing` while any alert of it fires, else `NAME.group.resolved`;
//! - `id`: `NAME-group-` and 12 hex digits of the SHA-256 of `groupKey`, then `-` and 12 of
//!   the sorted ids its firing alerts' own events would have (`-resolved-` and the resolved
//!   ones' when none fires): a repeat of the same group is the same event, and a new alert,
//!   or a re-fire, is a new one;
//! - `source` is the first alert's, `time` the latest of its alerts';
//! - `data`: the body's `groupKey`, `status`, `receiver`, `groupLabels`, `commonLabels`,
//!   `commonAnnotations` and `externalURL`, the counts `firing` and `resolved`, `members` (the
//!   firing alerts' event ids, sorted), `alerts` (each alert's `data` as `per: alert` maps it,
//!   with its event `id`), and for alert adapters a `summary` and the first firing alert's
//!   `links`.
//!
//! A repeat that only drops alerts (they resolved) has a new id but nothing new to look at:
//! the pipeline remembers, per trigger and group, the members it decided, and decides such a
//! repeat `duplicate` (see `pipeline::group_memory`).

use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use super::{Adapter, MapError};

/// The body's fields a group event keeps.
const GROUP_FIELDS: [&str; 7] = [
    "groupKey",
    "status",
    "receiver",
    "groupLabels",
    "commonLabels",
    "commonAnnotations",
    "externalURL",
];

/// Every field of a group event's `data` (lint checks key paths against them).
pub(crate) fn data_fields(adapter: &Adapter) -> Vec<&'static str> {
    let mut fields = GROUP_FIELDS.to_vec();
    fields.extend(["firing", "resolved", "members", "alerts"]);
    if adapter.alert {
        fields.extend(["summary", "links"]);
    }
    fields
}

fn sha12(text: &str) -> String {
    crate::text::hex(Sha256::digest(text.as_bytes()).as_slice())[..12].to_owned()
}

impl Adapter {
    /// The one event of a body's `items` (the array `each` named, taken out of `body`).
    pub(super) fn group_event(
        &self,
        items: Vec<Value>,
        body: Value,
        now: i64,
    ) -> Result<Value, MapError> {
        let group_key = body
            .get("groupKey")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| MapError {
                id: None,
                reason: format!(
                    "adapter `{}` makes one event per group (`per: group`), and this body has no `groupKey`",
                    self.name
                ),
            })?;
        let mut doc = json!({"item": Value::Null, "body": body});
        let (mut alerts, mut firing, mut resolved) = (Vec::new(), Vec::new(), Vec::new());
        let (mut source, mut latest): (Option<Value>, Option<(jiff::Timestamp, Value)>) =
            (None, None);
        let mut lead: Option<Value> = None;
        for item in items {
            let is_firing = item.get("status").and_then(Value::as_str) == Some("firing");
            doc["item"] = item;
            let event = self.event(&doc, now)?;
            let id = event["id"].as_str().unwrap_or_default().to_owned();
            if is_firing {
                firing.push(id.clone());
                if lead.is_none() {
                    lead = Some(event["data"].clone());
                }
            } else {
                resolved.push(id.clone());
            }
            source.get_or_insert_with(|| event["source"].clone());
            if let Some(t) = event["time"].as_str().and_then(|t| t.parse().ok())
                && latest.as_ref().is_none_or(|(l, _)| t > *l)
            {
                latest = Some((t, event["time"].clone()));
            }
            let mut data = event["data"].clone();
            if let Some(fields) = data.as_object_mut() {
                fields.insert("id".into(), Value::String(id));
            }
            alerts.push(data);
        }
        firing.sort();
        resolved.sort();
        let (status, members) = if firing.is_empty() {
            ("resolved", &resolved)
        } else {
            ("firing", &firing)
        };
        let id = if firing.is_empty() {
            format!(
                "{}-group-{}-resolved-{}",
                self.name,
                sha12(&group_key),
                sha12(&resolved.join("\n"))
            )
        } else {
            format!(
                "{}-group-{}-{}",
                self.name,
                sha12(&group_key),
                sha12(&firing.join("\n"))
            )
        };
        let body = doc["body"].take();
        let mut data = Map::new();
        for name in GROUP_FIELDS {
            data.insert(name.into(), body.get(name).cloned().unwrap_or(Value::Null));
        }
        data.insert("firing".into(), json!(firing.len()));
        data.insert("resolved".into(), json!(resolved.len()));
        data.insert("members".into(), json!(firing));
        if self.alert {
            let lead = lead.or_else(|| alerts.first().cloned());
            let first = lead
                .as_ref()
                .and_then(|d| d.get("summary"))
                .and_then(Value::as_str)
                .unwrap_or("");
            let count = members.len();
            let summary = match (status, count) {
                (_, 1) => first.to_owned(),
                ("firing", n) => format!("{n} alerts firing: {first}, and {} more", n - 1),
                (_, n) => format!("{n} alerts resolved: {first}, and {} more", n - 1),
            };
            data.insert("summary".into(), Value::String(summary));
            let links = lead
                .as_ref()
                .and_then(|d| d.get("links"))
                .cloned()
                .unwrap_or_else(|| json!([]));
            data.insert("links".into(), links);
        }
        data.insert("alerts".into(), Value::Array(alerts));
        let time = latest.map(|(_, t)| t).ok_or_else(|| MapError {
            id: Some(id.clone()),
            reason: format!(
                "adapter `{}`: the group has no alert with a time",
                self.name
            ),
        })?;
        Ok(json!({
            "pap_version": "0.2",
            "id": id,
            "type": format!("{}.group.{status}", self.name),
            "source": source.unwrap_or(Value::Null),
            "time": time,
            "data": data,
        }))
    }
}

#[cfg(test)]
mod tests {
    use crate::adapter::{Limits, Mapped};
    use crate::manifest::compile_adapter::all_presets;
    use serde_json::{Value, json};

    const LIMITS: Limits = Limits {
        event_bytes: 1 << 20,
        total_bytes: 1 << 24,
    };

    fn alert(n: u32, status: &str) -> Value {
        json!({"status": status, "fingerprint": format!("fp{n:02}"),
               "labels": {"alertname": "NodeDown", "severity": "page", "instance": format!("node{n:02}")},
               "annotations": {"summary": "unreachable"},
               "startsAt": "2026-01-01T00:00:00Z",
               "endsAt": if status == "firing" { "0001-01-01T00:00:00Z" } else { "2026-01-01T01:00:00Z" },
               "generatorURL": "http://prom/graph"})
    }

    fn group(alerts: Vec<Value>) -> Value {
        json!({"receiver": "pap", "status": "firing", "groupKey": "{}:{alertname=\"NodeDown\"}",
               "groupLabels": {"alertname": "NodeDown"}, "externalURL": "http://am:9093",
               "alerts": alerts})
    }

    fn one(body: Value) -> Value {
        let mut am = all_presets()
            .into_iter()
            .find(|a| a.name == "alertmanager")
            .unwrap();
        am.per_group = true;
        let mut got: Vec<Mapped> = am.map(body, LIMITS, 0).unwrap();
        assert_eq!(got.len(), 1);
        got.remove(0).event.unwrap()
    }

    #[test]
    fn a_group_is_one_event_holding_every_alert() {
        let event = one(group((0..40).map(|n| alert(n, "firing")).collect()));
        assert_eq!(event["type"], "alertmanager.group.firing");
        assert!(
            event["id"]
                .as_str()
                .unwrap()
                .starts_with("alertmanager-group-")
        );
        assert_eq!(event["data"]["alerts"].as_array().unwrap().len(), 40);
        assert_eq!(event["data"]["firing"], 40);
        assert_eq!(event["data"]["members"].as_array().unwrap().len(), 40);
        assert_eq!(
            event["data"]["summary"],
            "40 alerts firing: NodeDown (page) on node00: unreachable, and 39 more"
        );
        assert_eq!(event["data"]["groupLabels"]["alertname"], "NodeDown");
        assert_eq!(event["source"], "http://am:9093");
    }

    #[test]
    fn the_id_follows_the_firing_alerts_not_their_order_or_annotations() {
        let a = one(group(vec![alert(1, "firing"), alert(2, "firing")]));
        let mut reordered = vec![alert(2, "firing"), alert(1, "firing")];
        reordered[0]["annotations"]["summary"] = json!("value 97");
        assert_eq!(one(group(reordered))["id"], a["id"]);
        let grown = one(group(vec![
            alert(1, "firing"),
            alert(2, "firing"),
            alert(3, "firing"),
        ]));
        assert_ne!(grown["id"], a["id"]);
        let mut done = group(vec![alert(1, "resolved"), alert(2, "resolved")]);
        done["status"] = json!("resolved");
        let done = one(done);
        assert_eq!(done["type"], "alertmanager.group.resolved");
        assert!(done["id"].as_str().unwrap().contains("-resolved-"));
    }

    #[test]
    fn a_body_without_a_group_key_is_refused_with_a_reason() {
        let mut body = group(vec![alert(1, "firing")]);
        body.as_object_mut().unwrap().remove("groupKey");
        let mut am = all_presets()
            .into_iter()
            .find(|a| a.name == "alertmanager")
            .unwrap();
        am.per_group = true;
        let got = am.map(body, LIMITS, 0).unwrap();
        let err = got[0].event.as_ref().unwrap_err();
        assert!(err.reason.contains("no `groupKey`"), "{}", err.reason);
    }
}
