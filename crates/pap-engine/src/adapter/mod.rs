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

mod body;
pub(crate) mod presets;

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
    /// The events of `body`. `Err` when `each` does not name an array in it, or when the
    /// events would add up to more than `limits.total_bytes`.
    pub fn map(&self, body: Value, limits: Limits) -> Result<Vec<Mapped>, UnmappableBody> {
        self.map_reason(body, limits).map_err(UnmappableBody::from)
    }

    /// [`Self::map`], with the reason as text.
    pub(crate) fn map_reason(&self, body: Value, limits: Limits) -> Result<Vec<Mapped>, String> {
        let mut total = 0usize;
        let Some(each) = &self.each else {
            let doc = json!({ "item": body.clone(), "body": body });
            return Ok(vec![Mapped {
                index: None,
                event: self.measured(&doc, limits, &mut total)?,
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
        let mut doc = Value::Object(Map::from_iter([
            ("item".to_owned(), Value::Null),
            ("body".to_owned(), body),
        ]));
        let mut out = Vec::with_capacity(items.len());
        for (i, item) in items.into_iter().enumerate() {
            doc["item"] = item;
            out.push(Mapped {
                index: Some(i),
                event: self.measured(&doc, limits, &mut total)?,
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
        total: &mut usize,
    ) -> Result<Result<Value, MapError>, String> {
        let event = match self.event(doc) {
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

    fn event(&self, doc: &Value) -> Result<Value, MapError> {
        let id = self.id.text(doc, |_| false);
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
        let id_text = need(&self.id, "id", &|_| false)?;
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
        let got = alerts().map(body, LIMITS).unwrap();
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
            .map(json!({"alerts": [{"status": "firing", "fp": "z"}]}), LIMITS)
            .unwrap();
        let err = got[0].event.as_ref().unwrap_err();
        assert_eq!(err.id.as_deref(), Some("z-firing"));
        assert!(err.reason.contains("`time`"), "{}", err.reason);
        assert!(alerts().map(json!({"alerts": 3}), LIMITS).is_err());
        assert!(alerts().map(json!({}), LIMITS).is_err());
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
            .map(json!({"receiver": big, "alerts": alerts}), limits)
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

    #[test]
    fn each_is_a_plain_path_of_names() {
        assert_eq!(parse_each("$.a.b").unwrap(), ["a", "b"]);
        assert!(parse_each("$..a").is_err());
        assert!(parse_each("$.a[*]").is_err());
        assert!(parse_each("alerts").is_err());
    }
}
