//! A request body as events, by its content type (the HTTP API reference, docs/src/reference/http-api.md).
//!
//! - `application/json`: one event or an array of events (pretty-printed or not);
//! - `application/x-ndjson` (also `application/ndjson`, `application/jsonl`): one per line;
//! - `application/cloudevents+json`: one CloudEvent in structured mode;
//! - `application/cloudevents-batch+json`: an array of structured CloudEvents;
//! - any type with a `ce-specversion` header: one CloudEvent in binary mode (`ce-*` headers
//!   are the attributes, the body is `data`).
//!
//! Every event is validated as `pap dispatch` validates it (contract section 2); a bad one is
//! reported with its position (`request:LINE`, `request[INDEX]`) and the others still count.

use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use axum::http::{HeaderMap, header};
use serde_json::Value;

use super::cloudevents;
use crate::event::input::{self, Location};
use crate::event::strict::Strict;
use crate::event::{self, Event, Invalid, Origin};

/// Where events of a request body are said to come from.
pub(super) const SOURCE: &str = "request";

/// One event of a body, valid or not, with its position.
pub(super) struct Parsed {
    pub input: Location,
    pub event: Result<Event, Invalid>,
}

/// Why a body was not read as events at all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum BodyError {
    /// 415: a content type pap does not take.
    Unsupported(String),
}

/// The events of a body.
pub(super) fn parse(
    headers: &HeaderMap,
    body: &[u8],
    max_event_bytes: u64,
) -> Result<Vec<Parsed>, BodyError> {
    if headers.contains_key("ce-specversion") {
        let event = cloudevents::binary(headers, body, max_event_bytes);
        return Ok(vec![Parsed {
            input: location(None, None),
            event,
        }]);
    }
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .map(|v| v.to_str().unwrap_or("?"))
        .unwrap_or("");
    let media = MediaType::parse(content_type)?;
    match media.essence.as_str() {
        "application/json"
        | "application/x-ndjson"
        | "application/ndjson"
        | "application/jsonl" => Ok(read_dispatch_format(body, max_event_bytes)),
        "application/cloudevents+json" => Ok(vec![structured(body, max_event_bytes)]),
        "application/cloudevents-batch+json" => Ok(batch(body, max_event_bytes)),
        _ => Err(BodyError::Unsupported(format!(
            "content type `{}` is not taken here; send application/json, application/x-ndjson, \
             application/cloudevents+json, application/cloudevents-batch+json, or a binary-mode \
             CloudEvent (ce-* headers)",
            crate::term::for_humans(content_type)
        ))),
    }
}

struct MediaType {
    essence: String,
}

impl MediaType {
    fn parse(text: &str) -> Result<MediaType, BodyError> {
        if text.is_empty() {
            return Err(BodyError::Unsupported(
                "no Content-Type; send application/json (or another type the HTTP API lists)"
                    .into(),
            ));
        }
        let mut parts = text.split(';');
        let essence = parts.next().unwrap_or("").trim().to_ascii_lowercase();
        for param in parts {
            let Some((name, value)) = param.split_once('=') else {
                continue;
            };
            let value = value.trim().trim_matches('"');
            if name.trim().eq_ignore_ascii_case("charset") && !value.eq_ignore_ascii_case("utf-8") {
                return Err(BodyError::Unsupported(format!(
                    "charset `{}` is not taken; JSON is UTF-8",
                    crate::term::for_humans(value)
                )));
            }
        }
        Ok(MediaType { essence })
    }
}

fn location(line: Option<u64>, index: Option<usize>) -> Location {
    Location {
        source: Arc::from(SOURCE),
        line,
        index,
    }
}

/// What `pap dispatch` reads: one object, an array, or NDJSON.
fn read_dispatch_format(body: &[u8], max_event_bytes: u64) -> Vec<Parsed> {
    collected(|sink| {
        let consumed = AtomicU64::new(0);
        input::read_from(body, Arc::from(SOURCE), max_event_bytes, &consumed, sink)
    })
}

/// The items `read` hands its sink, as a body's events.
fn collected(read: impl FnOnce(&mut dyn input::Sink) -> std::io::Result<()>) -> Vec<Parsed> {
    let mut out = Vec::new();
    let mut sink = |item: input::Item| {
        out.push(Parsed {
            input: item.loc,
            event: item.event,
        })
    };
    // Reading a byte slice cannot fail.
    let _ = read(&mut sink);
    out
}

fn structured(body: &[u8], max_event_bytes: u64) -> Parsed {
    let event = match serde_json::from_slice::<Strict>(body) {
        Ok(Strict(value)) => structured_event(value, body.len(), max_event_bytes),
        Err(e) => Err(Invalid::new(format!("not valid JSON: {e}"))),
    };
    Parsed {
        input: location(None, None),
        event,
    }
}

fn structured_event(value: Value, len: usize, max_event_bytes: u64) -> Result<Event, Invalid> {
    if !value.get("specversion").is_some_and(Value::is_string) {
        return Err(Invalid {
            id: value.get("id").and_then(Value::as_str).map(str::to_owned),
            kind: value.get("type").and_then(Value::as_str).map(str::to_owned),
            reason: "a structured CloudEvent needs `specversion` (\"1.0\")".into(),
        });
    }
    event::validate(value, len, max_event_bytes, Origin::Outside)
}

/// A CloudEvents batch, read element by element as `pap dispatch` reads an array.
fn batch(body: &[u8], max_event_bytes: u64) -> Vec<Parsed> {
    if body.trim_ascii_start().first() != Some(&b'[') {
        return vec![Parsed {
            input: location(None, None),
            event: Err(Invalid::new(
                "a CloudEvents batch is a JSON array of structured events",
            )),
        }];
    }
    collected(|sink| {
        input::read_array_of(
            body,
            Arc::from(SOURCE),
            max_event_bytes,
            sink,
            &|value, len| structured_event(value, len, max_event_bytes),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::serve::http::test_headers as headers;

    const PAP: &str = r#"{"pap_version":"0.2","id":"e1","type":"a.b.c","source":"s","time":"2026-11-23T10:00:00Z","data":{}}"#;
    const CE: &str = r#"{"specversion":"1.0","id":"c1","type":"a.b.c","source":"s","time":"2026-11-23T10:00:00Z","data":{}}"#;

    #[test]
    fn json_takes_an_object_an_array_or_lines() {
        let h = headers(&[("content-type", "application/json; charset=utf-8")]);
        assert_eq!(parse(&h, PAP.as_bytes(), 1 << 20).unwrap().len(), 1);
        let array = format!("[{PAP},{CE}]");
        let got = parse(&h, array.as_bytes(), 1 << 20).unwrap();
        assert!(got.iter().all(|p| p.event.is_ok()));
        assert_eq!(got[1].input.to_string(), "request[1]");
        let h = headers(&[("content-type", "application/x-ndjson")]);
        let lines = format!("{PAP}\nnot json\n{CE}\n");
        let got = parse(&h, lines.as_bytes(), 1 << 20).unwrap();
        assert_eq!(got.len(), 3);
        assert!(got[1].event.is_err());
        assert_eq!(got[1].input.to_string(), "request:2");
    }

    #[test]
    fn structured_and_batched_cloudevents_need_a_specversion() {
        let h = headers(&[("content-type", "application/cloudevents+json")]);
        assert!(parse(&h, CE.as_bytes(), 1 << 20).unwrap()[0].event.is_ok());
        let got = parse(&h, PAP.as_bytes(), 1 << 20).unwrap();
        assert!(
            got[0]
                .event
                .as_ref()
                .unwrap_err()
                .reason
                .contains("specversion")
        );
        let h = headers(&[("content-type", "application/cloudevents-batch+json")]);
        let got = parse(&h, format!("[{CE},{PAP}]").as_bytes(), 1 << 20).unwrap();
        assert!(got[0].event.is_ok() && got[1].event.is_err());
        let got = parse(&h, CE.as_bytes(), 1 << 20).unwrap();
        assert!(got[0].event.as_ref().unwrap_err().reason.contains("batch"));
    }

    #[test]
    fn unknown_or_missing_content_types_and_other_charsets_are_refused() {
        for h in [
            headers(&[("content-type", "text/plain")]),
            headers(&[]),
            headers(&[("content-type", "application/json; charset=latin1")]),
        ] {
            assert!(matches!(
                parse(&h, PAP.as_bytes(), 1 << 20),
                Err(BodyError::Unsupported(_))
            ));
        }
    }
}
