//! Webhook adapters: any JSON webhook mapped to PAP events, declared in `pap.yaml`
//! (`adapters:`), with Alertmanager and Grafana as built-in presets of the same mechanism.
//!
//! A request body becomes one event, or one per element of the array `each` names. Each event
//! field is a list of alternatives, the first that is not empty winning (for `time`, a zero
//! time such as Alertmanager's `0001-01-01T00:00:00Z` counts as empty). An alternative is a
//! JSONPath (starting with `$`) or a template (`{item.fingerprint}-{item.status}`), both over
//! the document `{"item": ELEMENT, "body": BODY}`; without `each`, `item` is the body. While an
//! element is mapped, the array `each` walks is left out of `body`, and the body itself is
//! never copied per element; what a field selects from it is (a group's `commonLabels` in
//! every alert). That copying is bounded: each event is measured as it is made, one over
//! `max_event_bytes` is refused on its own, and once the events made add up to
//! [`Limits::total_bytes`] the whole body is refused, so a small body cannot ask for gigabytes.
//!
//! What comes out is checked as any event is (`event::validate`): a mapping is a convenience,
//! never a way around validation.

mod alert_text;
mod body;
pub(crate) mod group;
pub mod presets;

pub use alert_text::{lead as alert_lead, web_url};
pub use body::{BodyEvent, events_of_body};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::jsonpath::JsonPath;
use crate::template::{Scheme, Template};

/// What adapter templates may refer to.
pub(crate) const SCHEME: Scheme = Scheme {
    names: &[],
    roots: &["item", "body"],
};

/// Where adapter routes live: `/v1/ingest/NAME`.
pub(crate) const PATH_PREFIX: &str = "/v1/ingest/";

/// One value of an event field.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum Expr {
    Path(JsonPath),
    Template(Template),
}

impl Expr {
    /// A JSONPath when `text` starts with `$`, else a template.
    pub(crate) fn parse(text: &str) -> Result<Expr, String> {
        if text.starts_with('$') {
            JsonPath::parse(text)
                .map(Expr::Path)
                .map_err(|e| e.to_string())
        } else {
            Template::parse_in(text, &SCHEME).map(Expr::Template)
        }
    }

    /// The first value a path selects (cloned), or a template's text.
    fn value(&self, doc: &Value) -> Option<Value> {
        match self {
            Expr::Path(p) => p.select(doc).ok()?.first().map(|v| (*v).clone()),
            Expr::Template(t) => Some(Value::String(
                t.render_roots(|_| None, |root| doc.get(root)),
            )),
        }
    }

    /// As text: a string as it is, anything else as JSON, nothing or null as empty.
    fn text(&self, doc: &Value) -> String {
        match self.value(doc) {
            Some(Value::String(s)) => s,
            Some(Value::Null) | None => String::new(),
            Some(other) => other.to_string(),
        }
    }
}

/// A field: alternatives, the first non-empty one winning.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Field(pub Vec<Expr>);

impl Field {
    fn text(&self, doc: &Value, is_empty: impl Fn(&str) -> bool) -> Option<String> {
        self.0
            .iter()
            .map(|e| e.text(doc))
            .find(|t| !t.is_empty() && !is_empty(t))
    }
}

/// The event's `data`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum Data {
    /// The object one path selects.
    Whole(Expr),
    /// An object built field by field (a field with nothing selected is `null`).
    Fields(Vec<(String, Expr)>),
}

/// How a sender proves itself to one adapter (else the listener's principals decide).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AdapterAuth {
    /// The variable holding a bearer token only this adapter accepts.
    pub bearer_env: Option<String>,
    pub hmac: Option<Hmac>,
}

/// An HMAC-SHA256 signature of the raw body in a header, as GitHub's `X-Hub-Signature-256`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hmac {
    /// Lower-case header name.
    pub header: String,
    /// The variable holding the shared secret.
    pub secret_env: String,
    /// What precedes the hex digest in the header (`sha256=`).
    pub prefix: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Adapter {
    pub name: String,
    /// `/v1/ingest/…`.
    pub path: String,
    pub auth: AdapterAuth,
    /// Names from the body to the array of elements (`$.alerts` → ["alerts"]).
    pub each: Option<Vec<String>>,
    pub id: Field,
    pub kind: Field,
    pub source: Field,
    pub time: Field,
    pub data: Data,
    /// What besides the mapped id tells one occurrence of an alert from another.
    pub identity: Identity,
    /// Each element is an alert (`labels`, `annotations`): its event's `data` gets a one-line
    /// `summary` and the `links` to go to (see `alert_text`).
    pub alert: bool,
    /// `per: group`: one event per body, holding every element (see `group`).
    pub per_group: bool,
}

/// `identity_annotations` and `refire_after`: what an alert adapter adds to the id its `event.id`
/// makes, so that a repeat of the same alert is the same event (hence `duplicate`) unless
/// something an on-call person cares about changed.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Identity {
    /// Annotations (`item.annotations.NAME`) whose values are part of the identity. None by
    /// default: annotations are often templated with `{{ $value }}`, and would otherwise make
    /// every repeat of a storm a new event.
    pub annotations: Vec<String>,
    /// A firing element (`item.status` is `firing`) received this long (ms) or more after its
    /// `item.startsAt` is a new event: one per whole period it has been firing.
    pub refire_after_ms: Option<i64>,
}

impl Identity {
    /// What to append to the element's id when it is received at `now` (ms): `-a` and 12 hex
    /// digits of the annotations' SHA-256 when any are named, `-refireN` from the first whole
    /// period on. Empty when neither applies, so an adapter without them keeps its ids.
    fn suffix(&self, item: &Value, now: i64) -> String {
        let mut out = String::new();
        if !self.annotations.is_empty() {
            use sha2::{Digest, Sha256};
            let values: Vec<Value> = self
                .annotations
                .iter()
                .map(|name| {
                    item.get("annotations")
                        .and_then(|a| a.get(name))
                        .cloned()
                        .unwrap_or(Value::Null)
                })
                .collect();
            let digest = Sha256::digest(Value::Array(values).to_string());
            out.push_str("-a");
            out.push_str(&crate::text::hex(digest.as_slice())[..12]);
        }
        if let Some(period) = self.refire_after_ms.filter(|p| *p > 0)
            && item.get("status").and_then(Value::as_str) == Some("firing")
            && let Some(started) = item
                .get("startsAt")
                .and_then(Value::as_str)
                .and_then(|t| t.parse::<jiff::Timestamp>().ok())
        {
            let periods = now.saturating_sub(started.as_millisecond()) / period;
            if periods > 0 {
                out.push_str(&format!("-refire{periods}"));
            }
        }
        out
    }
}

/// What mapping one body may cost.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// An event larger than this (encoded) is refused (`max_event_bytes`).
    pub event_bytes: usize,
    /// The events of one body, added up, at most.
    pub total_bytes: usize,
}

/// One event an adapter made from a body (or why it could not), with the element's index.
#[derive(Debug)]
pub struct Mapped {
    pub index: Option<usize>,
    pub event: Result<Value, MapError>,
}

/// An element the mapping could not make an event of, with whatever identity it found.
#[derive(Debug, Clone, PartialEq)]
pub struct MapError {
    pub id: Option<String>,
    pub reason: String,
}

/// `$.a.b` → ["a", "b"]: the only form `each` takes (a plain path of names).
pub(crate) fn parse_each(text: &str) -> Result<Vec<String>, String> {
    let rest = text
        .strip_prefix("$.")
        .ok_or("`each` is a plain path of names from the body, like `$.alerts`")?;
    let names: Vec<String> = rest.split('.').map(str::to_owned).collect();
    if names.iter().any(|n| {
        n.is_empty()
            || !n
                .chars()
                .all(|c| c.is_alphanumeric() || c == '_' || c == '-')
    }) {
        return Err(format!(
            "`{text}`: `each` is a plain path of names from the body, like `$.alerts`"
        ));
    }
    Ok(names)
}

/// A time that stands for "none": Go's zero time, as Alertmanager sends for `endsAt`.
fn zero_time(text: &str) -> bool {
    text.starts_with("0001-01-01")
}

impl Adapter {
    /// The events of `body`, received at `now` (ms; see [`Identity`]). `Err` when `each` does
    /// not name an array in it, or when the events would add up to more than
    /// `limits.total_bytes`.
    pub fn map(
        &self,
        body: Value,
        limits: Limits,
        now: i64,
    ) -> Result<Vec<Mapped>, UnmappableBody> {
        self.map_reason(body, limits, now)
            .map_err(UnmappableBody::from)
    }

    /// [`Self::map`], with the reason as text.
    pub(crate) fn map_reason(
        &self,
        body: Value,
        limits: Limits,
        now: i64,
    ) -> Result<Vec<Mapped>, String> {
        let mut total = 0usize;
        let Some(each) = &self.each else {
            let doc = json!({ "item": body.clone(), "body": body });
            return Ok(vec![Mapped {
                index: None,
                event: self.measured(&doc, limits, now, &mut total)?,
            }]);
        };
        let mut body = body;
        let items = match take_at(&mut body, each) {
            Some(Value::Array(items)) => items,
            Some(other) => {
                return Err(format!(
                    "`$.{}` is {}, not an array",
                    each.join("."),
                    crate::event::json_kind(&other)
                ));
            }
            None => return Err(format!("the body has no `$.{}`", each.join("."))),
        };
        if self.per_group {
            return Ok(vec![Mapped {
                index: None,
                event: Self::measure(self.group_event(items, body, now), limits, &mut total)?,
            }]);
        }
        let mut doc = Value::Object(Map::from_iter([
            ("item".to_owned(), Value::Null),
            ("body".to_owned(), body),
        ]));
        let mut out = Vec::with_capacity(items.len());
        for (i, item) in items.into_iter().enumerate() {
            doc["item"] = item;
            out.push(Mapped {
                index: Some(i),
                event: self.measured(&doc, limits, now, &mut total)?,
            });
        }
        Ok(out)
    }

    /// [`Adapter::event`], measured: an event over the event limit is refused on its own
    /// (and not kept), and `total` going over the body's budget refuses the whole body.
    fn measured(
        &self,
        doc: &Value,
        limits: Limits,
        now: i64,
        total: &mut usize,
    ) -> Result<Result<Value, MapError>, String> {
        Self::measure(self.event(doc, now), limits, total)
    }

    /// An event made (or why not), measured against `limits`: one over the event limit is
    /// refused on its own, `total` going over the body's budget refuses the whole body.
    fn measure(
        made: Result<Value, MapError>,
        limits: Limits,
        total: &mut usize,
    ) -> Result<Result<Value, MapError>, String> {
        let event = match made {
            Ok(event) => event,
            Err(e) => return Ok(Err(e)),
        };
        let size = crate::event::encoded_len(&event);
        *total = total.saturating_add(size);
        if *total > limits.total_bytes {
            return Err(format!(
                "the events made from this body add up to more than {} bytes; send fewer elements per request",
                limits.total_bytes
            ));
        }
        if size > limits.event_bytes {
            return Ok(Err(MapError {
                id: event["id"].as_str().map(str::to_owned),
                reason: format!(
                    "the event made is {size} bytes, more than the {} allowed (max_event_bytes)",
                    limits.event_bytes
                ),
            }));
        }
        Ok(Ok(event))
    }

    fn event(&self, doc: &Value, now: i64) -> Result<Value, MapError> {
        let suffix = self.identity.suffix(&doc["item"], now);
        let id = self.id.text(doc, |_| false).map(|id| id + &suffix);
        let fail = |reason: String| MapError {
            id: id.clone(),
            reason,
        };
        let need = |field: &Field, name: &str, is_empty: &dyn Fn(&str) -> bool| {
            field.text(doc, is_empty).ok_or_else(|| {
                fail(format!(
                    "adapter `{}`: every alternative of `{name}` is empty for this element",
                    self.name
                ))
            })
        };
        let id_text = need(&self.id, "id", &|_| false)? + &suffix;
        let kind = need(&self.kind, "type", &|_| false)?;
        let source = need(&self.source, "source", &|_| false)?;
        let time = need(&self.time, "time", &zero_time)?;
        let data = match &self.data {
            Data::Whole(expr) => expr.value(doc).unwrap_or(Value::Null),
            Data::Fields(fields) => Value::Object(
                fields
                    .iter()
                    .map(|(k, e)| (k.clone(), e.value(doc).unwrap_or(Value::Null)))
                    .collect(),
            ),
        };
        let mut data = data;
        if self.alert
            && let Some(fields) = data.as_object_mut()
            && let Some(summary) = alert_text::summary(&doc["item"])
        {
            fields
                .entry("summary")
                .or_insert_with(|| Value::String(summary));
            fields
                .entry("links")
                .or_insert_with(|| Value::Array(alert_text::links(&doc["item"], &doc["body"])));
        }
        Ok(json!({
            "pap_version": "0.2",
            "id": id_text,
            "type": kind,
            "source": source,
            "time": time,
            "data": data,
        }))
    }
}

/// Takes the value at `names` out of `body` (leaving null), if there is one.
fn take_at(body: &mut Value, names: &[String]) -> Option<Value> {
    let mut v = body;
    for n in names {
        v = v.get_mut(n.as_str())?;
    }
    Some(v.take())
}

crate::reason::reason_error!(
    /// The adapter a command or a rule test named is not one the project has.
    UnknownAdapter
);

/// The adapter `name` among `adapters` (a project's: presets and `adapters:` of pap.yaml), or
/// why not, naming the ones there are.
pub fn named<'a>(adapters: &'a [Adapter], name: &str) -> Result<&'a Adapter, UnknownAdapter> {
    adapters.iter().find(|a| a.name == name).ok_or_else(|| {
        let known: Vec<&str> = adapters.iter().map(|a| a.name.as_str()).collect();
        UnknownAdapter::from(format!(
            "no adapter `{name}` (this project has {}; declare others under `adapters:` in pap.yaml)",
            known.join(", ")
        ))
    })
}

crate::reason::reason_error!(
    /// Why a webhook body makes no events at all: it is not JSON, its `each` names no array, or its events would add up to too much.
    UnmappableBody
);

#[cfg(test)]
mod tests {
    use super::*;

    fn expr(t: &str) -> Expr {
        Expr::parse(t).unwrap()
    }

    fn field(ts: &[&str]) -> Field {
        Field(ts.iter().map(|t| expr(t)).collect())
    }

    fn alerts() -> Adapter {
        Adapter {
            name: "t".into(),
            path: "/v1/ingest/t".into(),
            auth: AdapterAuth::default(),
            each: Some(vec!["alerts".into()]),
            id: field(&["{item.fp}-{item.status}"]),
            kind: field(&["x.alert.{item.status}"]),
            source: field(&["{body.url}", "fallback"]),
            time: field(&["{item.endsAt}", "{item.startsAt}"]),
            data: Data::Fields(vec![
                ("labels".into(), expr("$.item.labels")),
                ("receiver".into(), expr("$.body.receiver")),
                ("missing".into(), expr("$.item.nope")),
            ]),
            identity: Identity::default(),
            alert: false,
            per_group: false,
        }
    }

    #[test]
    fn each_element_becomes_an_event_and_a_zero_time_is_skipped() {
        let body = json!({"receiver": "r", "alerts": [
            {"fp": "a1", "status": "firing", "labels": {"s": 1},
             "startsAt": "2026-01-01T00:00:00Z", "endsAt": "0001-01-01T00:00:00Z"},
            {"fp": "a2", "status": "resolved", "labels": {},
             "startsAt": "2026-01-01T00:00:00Z", "endsAt": "2026-01-01T01:00:00Z"}
        ]});
        let got = alerts().map(body, LIMITS, 0).unwrap();
        let e0 = got[0].event.as_ref().unwrap();
        assert_eq!(e0["id"], "a1-firing");
        assert_eq!(e0["type"], "x.alert.firing");
        assert_eq!(e0["source"], "fallback");
        assert_eq!(e0["time"], "2026-01-01T00:00:00Z");
        assert_eq!(
            e0["data"],
            json!({"labels": {"s": 1}, "receiver": "r", "missing": null})
        );
        let e1 = got[1].event.as_ref().unwrap();
        assert_eq!(e1["time"], "2026-01-01T01:00:00Z");
        assert_eq!(got[1].index, Some(1));
    }

    #[test]
    fn an_element_without_a_needed_field_is_an_error_naming_it() {
        let got = alerts()
            .map(
                json!({"alerts": [{"status": "firing", "fp": "z"}]}),
                LIMITS,
                0,
            )
            .unwrap();
        let err = got[0].event.as_ref().unwrap_err();
        assert_eq!(err.id.as_deref(), Some("z-firing"));
        assert!(err.reason.contains("`time`"), "{}", err.reason);
        assert!(alerts().map(json!({"alerts": 3}), LIMITS, 0).is_err());
        assert!(alerts().map(json!({}), LIMITS, 0).is_err());
    }

    const LIMITS: Limits = Limits {
        event_bytes: 1 << 20,
        total_bytes: 1 << 24,
    };

    #[test]
    fn what_is_copied_per_element_is_bounded() {
        // A large group field copied into each of many alerts: refused as a whole.
        let big = "x".repeat(10_000);
        let alerts: Vec<Value> = (0..100)
            .map(|i| json!({"fp": i, "status": "firing", "startsAt": "2026-01-01T00:00:00Z"}))
            .collect();
        let mut a = super::tests::alerts();
        a.data = Data::Fields(vec![("receiver".into(), expr("$.body.receiver"))]);
        let limits = Limits {
            event_bytes: 20_000,
            total_bytes: 200_000,
        };
        let err = a
            .map(json!({"receiver": big, "alerts": alerts}), limits, 0)
            .unwrap_err();
        assert!(err.reason().contains("add up to more than 200000"), "{err}");
        // One event over the event limit is refused alone.
        let small = Limits {
            event_bytes: 500,
            total_bytes: 1 << 20,
        };
        let got = a
            .map(
                json!({"receiver": "x".repeat(600), "alerts": [{"fp": 1, "status": "firing", "startsAt": "t"}]}),
                small,
                0,
            )
            .unwrap();
        assert!(
            got[0]
                .event
                .as_ref()
                .unwrap_err()
                .reason
                .contains("max_event_bytes")
        );
    }

    fn alert(summary: &str, value: &str, starts: &str) -> Value {
        json!({"fp": "f1", "status": "firing", "startsAt": starts, "endsAt": "0001-01-01T00:00:00Z",
               "annotations": {"summary": summary, "value": value}})
    }

    fn id_of(a: &Adapter, item: Value, now: i64) -> String {
        let got = a.map(json!({"alerts": [item]}), LIMITS, now).unwrap();
        got[0].event.as_ref().unwrap()["id"]
            .as_str()
            .unwrap()
            .to_owned()
    }

    const START: &str = "2026-01-01T00:00:00Z";
    const START_MS: i64 = 1_767_225_600_000;

    #[test]
    fn without_identity_settings_annotations_and_time_do_not_change_the_id() {
        let a = alerts();
        let first = id_of(&a, alert("disk full", "91%", START), START_MS);
        assert_eq!(first, "f1-firing");
        let repeat = id_of(&a, alert("disk full", "97%", START), START_MS + 86_400_000);
        assert_eq!(repeat, first);
    }

    #[test]
    fn identity_annotations_are_part_of_the_id_and_others_are_not() {
        let mut a = alerts();
        a.identity.annotations = vec!["summary".into()];
        let first = id_of(&a, alert("disk full", "91%", START), START_MS);
        assert!(first.starts_with("f1-firing-a"), "{first}");
        assert_eq!(first.len(), "f1-firing-a".len() + 12);
        assert_eq!(id_of(&a, alert("disk full", "97%", START), START_MS), first);
        assert_ne!(
            id_of(&a, alert("disk nearly full", "91%", START), START_MS),
            first
        );
        // A missing annotation is a value too (null), not an error.
        let mut bare = alert("x", "y", START);
        bare["annotations"] = json!({});
        assert!(id_of(&a, bare, START_MS).starts_with("f1-firing-a"));
    }

    #[test]
    fn refire_after_makes_a_new_id_per_whole_period_of_firing() {
        let mut a = alerts();
        a.identity.refire_after_ms = Some(4 * 3_600_000);
        let at = |hours: i64| id_of(&a, alert("s", "v", START), START_MS + hours * 3_600_000);
        assert_eq!(at(0), "f1-firing");
        assert_eq!(at(3), "f1-firing");
        assert_eq!(at(4), "f1-firing-refire1");
        assert_eq!(at(7), "f1-firing-refire1");
        assert_eq!(at(9), "f1-firing-refire2");
        // A resolution is one event however long the alert fired.
        let mut resolved = alert("s", "v", START);
        resolved["status"] = json!("resolved");
        resolved["endsAt"] = json!("2026-01-02T00:00:00Z");
        assert_eq!(
            id_of(&a, resolved, START_MS + 30 * 3_600_000),
            "f1-resolved"
        );
        // A clock behind `startsAt` is period 0, not a negative one.
        assert_eq!(at(-5), "f1-firing");
    }

    #[test]
    fn each_is_a_plain_path_of_names() {
        assert_eq!(parse_each("$.a.b").unwrap(), ["a", "b"]);
        assert!(parse_each("$..a").is_err());
        assert!(parse_each("$.a[*]").is_err());
        assert!(parse_each("alerts").is_err());
    }
}
