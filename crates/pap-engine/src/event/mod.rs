//! The PAP event: validation (contract section 2) and the CloudEvents 1.0 mapping.
//!
//! An event is untrusted data. Validation decides whether it may enter the pipeline at all;
//! after that its content is only ever read as data (JSONPath, JSON on an agent's stdin).

pub mod input;
pub mod json_stream;
pub mod rfc3339;
pub mod strict;

use serde_json::{Map, Value};

use crate::event_type;

/// The prefix reserved for events the dispatcher itself emits (PAP 0.2 section 3).
pub(crate) const RESERVED_PREFIX: &str = "pap.";

/// A valid event, normalised to the PAP 0.2 shape. `value` is what filters see and what agents
/// get: `pap_version`, `id`, `type`, `source`, `time`, `data`, optional `triggered_by`, and any
/// other field the producer sent (CloudEvents extensions are kept).
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    pub id: String,
    pub kind: String,
    pub triggered_by: Option<String>,
    pub value: Value,
    /// Who sent it over HTTP (route and principal); `None` for an event from this host. Not
    /// part of the event: how it arrived, which a trigger's `cancel_on` checks.
    pub sender: Option<crate::domain::Sender>,
    /// The trace it is part of, when traces are exported: its own `traceparent` field (the
    /// CloudEvents distributed-tracing extension), else the HTTP headers it came with. Not
    /// part of the event either.
    pub trace: Option<crate::trace_context::TraceContext>,
}

/// Who produced the event: only the dispatcher may use the reserved `pap.` prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    Outside,
    Dispatcher,
}

/// Why an event was refused, with whatever identity it had, for the output line.
#[derive(Debug, Clone, PartialEq)]
pub struct Invalid {
    pub id: Option<String>,
    pub kind: Option<String>,
    pub reason: String,
}

impl Invalid {
    pub fn new(reason: impl Into<String>) -> Invalid {
        Invalid {
            id: None,
            kind: None,
            reason: reason.into(),
        }
    }
}

/// Whether a media type (`Content-Type`, `datacontenttype`) is JSON: `application/json` or
/// any `+json` type, parameters aside.
pub fn is_json_media_type(content_type: &str) -> bool {
    let essence = content_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    essence == "application/json" || essence.ends_with("+json")
}

/// Validates one decoded JSON value. `encoded_len` is its size on the wire, checked against
/// `max_bytes`.
pub fn validate(
    value: Value,
    encoded_len: usize,
    max_bytes: u64,
    origin: Origin,
) -> Result<Event, Invalid> {
    let Value::Object(map) = value else {
        return Err(Invalid::new(format!(
            "an event is a JSON object, found {}",
            json_kind(&value)
        )));
    };
    // Identity first, so even a refused event's line names it where it can.
    let id = map.get("id").and_then(Value::as_str).map(str::to_owned);
    let kind = map.get("type").and_then(Value::as_str).map(str::to_owned);
    let fail = |reason: String| Invalid {
        id: id.clone(),
        kind: kind.clone(),
        reason,
    };
    if encoded_len as u64 > max_bytes {
        return Err(fail(format!(
            "event is {encoded_len} bytes, more than the {max_bytes} allowed (max_event_bytes)"
        )));
    }
    let map = if map.contains_key("specversion") {
        from_cloudevent(map).map_err(&fail)?
    } else {
        match map.get("pap_version") {
            Some(Value::String(v)) if v == "0.2" => map,
            Some(other) => {
                return Err(fail(format!(
                    "`pap_version` must be \"0.2\", found {}",
                    short(other)
                )));
            }
            None => {
                return Err(fail(
                    "neither a PAP event (`pap_version: \"0.2\"`) nor a CloudEvent (`specversion: \"1.0\"`)"
                        .into(),
                ));
            }
        }
    };
    check_fields(&map, origin).map_err(&fail)?;
    let triggered_by = map
        .get("triggered_by")
        .and_then(Value::as_str)
        .map(str::to_owned);
    Ok(Event {
        id: id.expect("checked"),
        kind: kind.expect("checked"),
        triggered_by,
        value: Value::Object(map),
        sender: None,
        trace: None,
    })
}

fn check_fields(map: &Map<String, Value>, origin: Origin) -> Result<(), String> {
    for field in ["id", "type", "source"] {
        non_empty_string(map, field)?;
        no_control_characters(map, field)?;
    }
    let kind = map["type"].as_str().expect("checked");
    if let Err(problem) = event_type::check(kind, false) {
        return Err(format!("`type` {kind:?} {problem}"));
    }
    if origin == Origin::Outside && kind.starts_with(RESERVED_PREFIX) {
        return Err(format!(
            "`type` {kind:?} uses the prefix `{RESERVED_PREFIX}`, reserved for events the dispatcher emits"
        ));
    }
    match map.get("time") {
        None => return Err("`time` is missing".into()),
        Some(Value::String(t)) => {
            if let Err(problem) = rfc3339::check(t) {
                return Err(format!(
                    "`time` {t:?} is not an RFC 3339 timestamp with an offset: {problem}"
                ));
            }
        }
        Some(other) => return Err(format!("`time` must be a string, found {}", short(other))),
    }
    match map.get("data") {
        Some(Value::Object(_)) => {}
        None => return Err("`data` is missing".into()),
        Some(other) => return Err(format!("`data` must be an object, found {}", short(other))),
    }
    if map.contains_key("triggered_by") {
        non_empty_string(map, "triggered_by")?;
        no_control_characters(map, "triggered_by")?;
    }
    Ok(())
}

/// Identity fields are printed, logged and used in file names and keys: a control character
/// in one (an escape sequence, a newline, NUL) is never legitimate, so the event is invalid.
fn no_control_characters(map: &Map<String, Value>, field: &str) -> Result<(), String> {
    let text = map[field].as_str().expect("checked");
    match text.char_indices().find(|(_, c)| c.is_control()) {
        Some((at, c)) => Err(format!(
            "`{field}` has the control character {} at byte {at}",
            c.escape_unicode()
        )),
        None => Ok(()),
    }
}

fn non_empty_string(map: &Map<String, Value>, field: &str) -> Result<(), String> {
    match map.get(field) {
        Some(Value::String(s)) if !s.is_empty() => Ok(()),
        Some(Value::String(_)) => Err(format!("`{field}` is empty")),
        None => Err(format!("`{field}` is missing")),
        Some(other) => Err(format!(
            "`{field}` must be a non-empty string, found {}",
            short(other)
        )),
    }
}

/// CloudEvents 1.0 structured mode → PAP: the core attributes map directly, null attributes
/// count as absent, and everything else (extensions, `subject`, …) is kept as is.
fn from_cloudevent(mut map: Map<String, Value>) -> Result<Map<String, Value>, String> {
    match map.get("specversion") {
        Some(Value::String(v)) if v == "1.0" => {}
        Some(other) => {
            return Err(format!(
                "CloudEvents `specversion` must be \"1.0\", found {}",
                short(other)
            ));
        }
        None => unreachable!("caller checked"),
    }
    map.retain(|_, v| !v.is_null());
    if map.contains_key("data_base64") {
        return Err(
            "CloudEvent carries `data_base64`; a PAP event needs `data` as a JSON object".into(),
        );
    }
    if let Some(ct) = map.get("datacontenttype").and_then(Value::as_str)
        && !is_json_media_type(ct)
    {
        return Err(format!(
            "CloudEvent `datacontenttype` {ct:?} is not JSON; a PAP event needs JSON `data`"
        ));
    }
    if !map.contains_key("time") {
        return Err(
            "CloudEvent has no `time`; PAP needs the time the threshold was crossed".into(),
        );
    }
    if map.contains_key("pap_version") && map.get("pap_version") != Some(&Value::from("0.2")) {
        return Err("`pap_version` must be \"0.2\" when present".into());
    }
    map.insert("pap_version".into(), Value::from("0.2"));
    Ok(map)
}

/// The size of `value` encoded as compact JSON (what `max_event_bytes` limits), counted
/// without writing the encoding anywhere.
pub(crate) fn encoded_len(value: &Value) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0 += bytes.len();
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    match serde_json::to_writer(&mut count, value) {
        Ok(()) => count.0,
        Err(_) => usize::MAX,
    }
}

pub(crate) fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// A value for an error message: scalars in full (cut when long), containers by kind.
pub fn short(value: &Value) -> String {
    match value {
        Value::String(s) if s.chars().count() > 60 => {
            format!("{:?}…", s.chars().take(60).collect::<String>())
        }
        Value::Array(_) | Value::Object(_) => json_kind(value).to_owned(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check(v: Value) -> Result<Event, Invalid> {
        let len = v.to_string().len();
        validate(v, len, 1 << 20, Origin::Outside)
    }

    fn pap() -> Value {
        json!({"pap_version":"0.2","id":"evt_1","type":"energy.price.threshold_exceeded",
               "source":"mon","time":"2026-03-11T06:00:00Z","data":{"x":1}})
    }

    fn with(field: &str, value: Value) -> Value {
        let mut v = pap();
        v[field] = value;
        v
    }

    fn reason(v: Value) -> String {
        check(v).unwrap_err().reason
    }

    #[test]
    fn accepts_the_spec_example() {
        let e = check(pap()).unwrap();
        assert_eq!(
            (e.id.as_str(), e.kind.as_str()),
            ("evt_1", "energy.price.threshold_exceeded")
        );
        assert_eq!(e.triggered_by, None);
    }

    #[test]
    fn refuses_each_broken_field_with_its_name() {
        assert!(reason(with("pap_version", json!("0.1"))).contains("pap_version"));
        assert!(reason(with("id", json!(""))).contains("`id` is empty"));
        assert!(
            reason(with("id", json!("e\u{1b}]8;;x\u{7}")))
                .contains("`id` has the control character \\u{1b} at byte 1")
        );
        assert!(reason(with("source", json!("a\nb"))).contains("`source` has the control"));
        assert!(reason(with("source", json!(3))).contains("`source` must be"));
        assert!(reason(with("type", json!("energy.price"))).contains("at least three"));
        assert!(reason(with("type", json!("a..b.c"))).contains("empty segment"));
        assert!(reason(with("time", json!("2026-03-11T06:00:00"))).contains("offset"));
        assert!(reason(with("time", json!("2026-03-11 06:00:00Z"))).contains("RFC 3339"));
        assert!(reason(with("data", json!([1]))).contains("`data` must be an object"));
        assert!(reason(with("triggered_by", json!(""))).contains("triggered_by"));
        assert!(reason(json!([1])).contains("found an array"));
    }

    #[test]
    fn reserved_prefix_only_for_the_dispatcher() {
        let v = with("type", json!("pap.agent.invocation.completed"));
        assert!(reason(v.clone()).contains("reserved"));
        assert!(validate(v, 10, 1 << 20, Origin::Dispatcher).is_ok());
    }

    #[test]
    fn refused_events_keep_their_identity() {
        let err = check(with("time", json!("yesterday"))).unwrap_err();
        assert_eq!(err.id.as_deref(), Some("evt_1"));
        assert_eq!(err.kind.as_deref(), Some("energy.price.threshold_exceeded"));
    }

    #[test]
    fn size_limit() {
        assert!(
            validate(pap(), 2000, 1024, Origin::Outside)
                .unwrap_err()
                .reason
                .contains("2000 bytes")
        );
    }

    #[test]
    fn cloudevents_map_directly_and_keep_extensions() {
        let ce = json!({"specversion":"1.0","id":"a1","type":"com.example.object.deleted",
            "source":"/x","time":"2026-01-01T00:00:00+01:00","subject":null,
            "datacontenttype":"application/json","traceparent":"00-ab","data":{"k":true}});
        let e = check(ce).unwrap();
        assert_eq!(e.value["pap_version"], "0.2");
        assert_eq!(e.value["traceparent"], "00-ab");
        assert!(
            e.value.get("subject").is_none(),
            "null attributes are absent"
        );
    }

    #[test]
    fn cloudevents_that_cannot_be_pap_events() {
        let base = json!({"specversion":"1.0","id":"a1","type":"com.example.object.deleted",
            "source":"/x","time":"2026-01-01T00:00:00Z","data":{}});
        let mut b64 = base.clone();
        b64.as_object_mut().unwrap().remove("data");
        b64["data_base64"] = json!("AAEC");
        assert!(reason(b64).contains("data_base64"));
        let mut no_time = base.clone();
        no_time["time"] = Value::Null;
        assert!(reason(no_time).contains("no `time`"));
        let mut text = base.clone();
        text["data"] = json!("hello");
        assert!(reason(text).contains("`data` must be an object"));
        let mut v03 = base.clone();
        v03["specversion"] = json!("0.3");
        assert!(reason(v03).contains("specversion"));
        let mut xml = base;
        xml["datacontenttype"] = json!("application/xml");
        assert!(reason(xml).contains("not JSON"));
    }
}
