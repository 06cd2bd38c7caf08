//! The CloudEvents HTTP protocol binding, binary mode: attributes in `ce-*` headers, the
//! body as `data` (CloudEvents HTTP binding 1.0, section 3.1).
//!
//! Header values are percent-decoded as the binding asks. `Content-Type` is the event's
//! `datacontenttype`; a PAP event's `data` is a JSON object, so the body must be JSON.

use axum::http::{HeaderMap, header};
use serde_json::{Map, Value};

use crate::event::strict::Strict;
use crate::event::{self, Event, Invalid, Origin};

/// The event of a binary-mode request.
pub(super) fn binary(
    headers: &HeaderMap,
    body: &[u8],
    max_event_bytes: u64,
) -> Result<Event, Invalid> {
    let mut map = Map::new();
    for (name, value) in headers {
        let Some(attr) = name.as_str().strip_prefix("ce-") else {
            continue;
        };
        let text = decode(value.as_bytes())
            .map_err(|why| Invalid::new(format!("header `{}`: {why}", name.as_str())))?;
        if map.insert(attr.to_owned(), Value::String(text)).is_some() {
            return Err(Invalid::new(format!(
                "header `{}` is given twice",
                name.as_str()
            )));
        }
    }
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let (id, kind) = (
        map.get("id").and_then(Value::as_str).map(str::to_owned),
        map.get("type").and_then(Value::as_str).map(str::to_owned),
    );
    let identity = |reason: String| Invalid {
        id: id.clone(),
        kind: kind.clone(),
        reason,
    };
    if !content_type.is_empty() {
        if !event::is_json_media_type(content_type) {
            return Err(identity(format!(
                "a binary-mode CloudEvent's data must be JSON for pap (a PAP event's data is an object); Content-Type is `{}`",
                crate::term::for_humans(content_type)
            )));
        }
        map.insert(
            "datacontenttype".into(),
            Value::String(content_type.to_owned()),
        );
    }
    let data = match serde_json::from_slice::<Strict>(body) {
        Ok(Strict(data)) => data,
        Err(e) => {
            return Err(identity(format!(
                "the body (the event's data) is not valid JSON: {e}"
            )));
        }
    };
    map.insert("data".into(), data);
    let len = body.len() + map.len() * 16;
    event::validate(Value::Object(map), len, max_event_bytes, Origin::Outside)
}

/// Percent-decoding of a header value into UTF-8.
fn decode(raw: &[u8]) -> Result<String, String> {
    let bytes: Vec<u8> = percent_encoding::percent_decode(raw).collect();
    String::from_utf8(bytes).map_err(|_| "not UTF-8 once percent-decoded".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::serve::http::test_headers as headers;

    fn base() -> Vec<(&'static str, &'static str)> {
        vec![
            ("ce-specversion", "1.0"),
            ("ce-id", "b1"),
            ("ce-type", "disk.usage.crossed"),
            ("ce-source", "%2Fhosts%2Fdb1"),
            ("ce-time", "2026-11-23T10:00:00Z"),
            ("ce-region", "eu%20west"),
            ("content-type", "application/json"),
        ]
    }

    #[test]
    fn headers_become_attributes_and_the_body_data() {
        let e = binary(&headers(&base()), br#"{"pct": 97}"#, 1 << 20).unwrap();
        assert_eq!(e.id, "b1");
        assert_eq!(e.value["source"], "/hosts/db1");
        assert_eq!(e.value["region"], "eu west");
        assert_eq!(e.value["data"]["pct"], 97);
    }

    #[test]
    fn non_json_data_or_a_non_object_is_invalid() {
        let mut h = base();
        h.retain(|(k, _)| *k != "content-type");
        h.push(("content-type", "text/plain"));
        let err = binary(&headers(&h), b"hello", 1 << 20).unwrap_err();
        assert!(err.reason.contains("must be JSON"), "{}", err.reason);
        assert_eq!(err.id.as_deref(), Some("b1"));
        assert!(binary(&headers(&base()), b"[1]", 1 << 20).is_err());
        assert!(binary(&headers(&base()), b"{", 1 << 20).is_err());
    }
}
