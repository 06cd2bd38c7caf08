//! W3C Trace Context (<https://www.w3.org/TR/trace-context/>) as pap receives and passes it
//! on: an event's `traceparent` and `tracestate` (the CloudEvents distributed-tracing
//! extension, or the same fields on a PAP event, or the HTTP headers it came with) make its
//! decision part of the sender's trace.
//!
//! What comes in is untrusted: a `traceparent` is parsed strictly (version `00`, lowercase
//! hex, ids not all zero; a later version is read for its first four fields, as the
//! specification asks) and an invalid one is ignored. A `tracestate` is kept only beside a
//! valid `traceparent`, and only when it is well formed and within the specification's
//! limits (at most 32 members and 512 bytes); otherwise it is dropped and the parent kept.

use serde::{Deserialize, Serialize};

/// The most `tracestate` members kept.
pub const MAX_TRACESTATE_MEMBERS: usize = 32;
/// The most bytes of a `tracestate` kept.
pub const MAX_TRACESTATE_BYTES: usize = 512;

/// A valid incoming (or outgoing) context.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TraceContext {
    /// 32 lowercase hex digits, not all zero.
    pub trace_id: String,
    /// 16 lowercase hex digits, not all zero: the span this context's holder is a child of.
    pub parent_id: String,
    /// The trace flags; bit 0 is "sampled".
    pub flags: u8,
    /// The vendors' state, as received (already checked), when there was a valid one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tracestate: Option<String>,
}

impl TraceContext {
    /// Parses a `traceparent` and an optional `tracestate`; `None` when the parent is invalid
    /// (the state alone is dropped when only it is invalid).
    pub fn parse(traceparent: &str, tracestate: Option<&str>) -> Option<TraceContext> {
        let (trace_id, parent_id, flags) = parse_traceparent(traceparent)?;
        Some(TraceContext {
            trace_id,
            parent_id,
            flags,
            tracestate: tracestate.and_then(valid_tracestate),
        })
    }

    /// The context of an event, from its own fields (`traceparent`, `tracestate`) first,
    /// else from the HTTP headers it came with.
    pub fn of_event(
        event: &serde_json::Value,
        headers: Option<(&str, Option<&str>)>,
    ) -> Option<TraceContext> {
        let field = |name: &str| event.get(name).and_then(serde_json::Value::as_str);
        if let Some(parent) = field("traceparent") {
            // An event's own field wins: it is the context the event was made in. An invalid
            // one is ignored, and so is the header then (it would not be this event's).
            return TraceContext::parse(parent, field("tracestate"));
        }
        let (parent, state) = headers?;
        TraceContext::parse(parent, state)
    }

    pub fn sampled(&self) -> bool {
        self.flags & 1 == 1
    }

    /// The `traceparent` header of this context (version 00).
    pub fn traceparent(&self) -> String {
        format!("00-{}-{}-{:02x}", self.trace_id, self.parent_id, self.flags)
    }
}

fn is_lower_hex(s: &str, len: usize) -> bool {
    s.len() == len
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

fn all_zero(s: &str) -> bool {
    s.bytes().all(|b| b == b'0')
}

fn parse_traceparent(value: &str) -> Option<(String, String, u8)> {
    let value = value.trim_matches([' ', '\t']);
    // Version, trace id, parent id, flags: 2 + 1 + 32 + 1 + 16 + 1 + 2.
    if value.len() < 55 || !value.is_ascii() {
        return None;
    }
    let version = &value[..2];
    if !is_lower_hex(version, 2) || version == "ff" {
        return None;
    }
    // Version 00 is exactly 55 characters; a later version may add fields after a `-`.
    if version == "00" && value.len() != 55 {
        return None;
    }
    if value.len() > 55 && value.as_bytes()[55] != b'-' {
        return None;
    }
    let b = value.as_bytes();
    if b[2] != b'-' || b[35] != b'-' || b[52] != b'-' {
        return None;
    }
    let (trace_id, parent_id, flags) = (&value[3..35], &value[36..52], &value[53..55]);
    if !is_lower_hex(trace_id, 32) || all_zero(trace_id) {
        return None;
    }
    if !is_lower_hex(parent_id, 16) || all_zero(parent_id) {
        return None;
    }
    if !is_lower_hex(flags, 2) {
        return None;
    }
    let flags = u8::from_str_radix(flags, 16).ok()?;
    Some((trace_id.to_owned(), parent_id.to_owned(), flags))
}

/// The `tracestate` when it is well formed and within the limits, else `None`.
fn valid_tracestate(value: &str) -> Option<String> {
    if value.len() > MAX_TRACESTATE_BYTES {
        return None;
    }
    let members: Vec<&str> = value
        .split(',')
        .map(|m| m.trim_matches([' ', '\t']))
        .filter(|m| !m.is_empty())
        .collect();
    if members.is_empty() || members.len() > MAX_TRACESTATE_MEMBERS {
        return None;
    }
    let mut keys = std::collections::BTreeSet::new();
    for m in &members {
        let (key, val) = m.split_once('=')?;
        if !valid_key(key) || !valid_value(val) || !keys.insert(key) {
            return None;
        }
    }
    Some(members.join(","))
}

fn valid_key(key: &str) -> bool {
    let simple = |k: &str, max: usize| {
        let b = k.as_bytes();
        !b.is_empty()
            && b.len() <= max
            && (b[0].is_ascii_lowercase() || b[0].is_ascii_digit())
            && b.iter().all(|c| {
                c.is_ascii_lowercase()
                    || c.is_ascii_digit()
                    || matches!(c, b'_' | b'-' | b'*' | b'/')
            })
    };
    match key.split_once('@') {
        // A multi-tenant key: tenant (up to 241) @ system (up to 14).
        Some((tenant, system)) => {
            simple(tenant, 241) && simple(system, 14) && system.as_bytes()[0].is_ascii_lowercase()
        }
        None => simple(key, 256) && key.as_bytes()[0].is_ascii_lowercase(),
    }
}

fn valid_value(value: &str) -> bool {
    let b = value.as_bytes();
    !b.is_empty()
        && b.len() <= 256
        && b.iter()
            .all(|c| (0x20..=0x7e).contains(c) && *c != b',' && *c != b'=')
        && b[b.len() - 1] != b' '
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn a_valid_traceparent_is_read_and_written_back() {
        let c =
            TraceContext::parse(GOOD, Some("congo=t61rcWkgMzE, rojo=00f067aa0ba902b7")).unwrap();
        assert_eq!(c.trace_id, "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(c.parent_id, "00f067aa0ba902b7");
        assert!(c.sampled());
        assert_eq!(c.traceparent(), GOOD);
        assert_eq!(
            c.tracestate.as_deref(),
            Some("congo=t61rcWkgMzE,rojo=00f067aa0ba902b7")
        );
        // A later version keeps its first four fields.
        let later = format!("01{}-more", &GOOD[2..]);
        assert!(TraceContext::parse(&later, None).is_some());
    }

    #[test]
    fn an_invalid_traceparent_is_ignored() {
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0x",
            "zz-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01é",
        ] {
            assert_eq!(TraceContext::parse(bad, None), None, "{bad}");
        }
    }

    #[test]
    fn a_tracestate_past_its_limits_is_dropped_and_the_parent_kept() {
        let members: Vec<String> = (0..33).map(|i| format!("k{i}=v")).collect();
        let c = TraceContext::parse(GOOD, Some(&members.join(","))).unwrap();
        assert_eq!(c.tracestate, None, "33 members");
        let c = TraceContext::parse(GOOD, Some(&members[..32].join(","))).unwrap();
        assert!(c.tracestate.is_some(), "32 members");
        let long = format!("k={}", "v".repeat(511));
        assert_eq!(
            TraceContext::parse(GOOD, Some(&long)).unwrap().tracestate,
            None
        );
        for bad in [
            "noequals",
            "Upper=v",
            "k=v,k=w",
            "k=va=lue",
            "k=v\u{7f}",
            "=v",
            "k=",
        ] {
            assert_eq!(
                TraceContext::parse(GOOD, Some(bad)).unwrap().tracestate,
                None,
                "{bad}"
            );
        }
        let tenant = TraceContext::parse(GOOD, Some("fw529a3039@dt=ZGV2")).unwrap();
        assert_eq!(tenant.tracestate.as_deref(), Some("fw529a3039@dt=ZGV2"));
    }

    #[test]
    fn an_events_own_field_wins_over_the_header() {
        let other = "00-11111111111111111111111111111111-2222222222222222-00";
        let event = serde_json::json!({"traceparent": GOOD});
        assert_eq!(
            TraceContext::of_event(&event, Some((other, None)))
                .unwrap()
                .traceparent(),
            GOOD
        );
        let bare = serde_json::json!({"id": "e"});
        assert_eq!(
            TraceContext::of_event(&bare, Some((other, None)))
                .unwrap()
                .traceparent(),
            other
        );
        let invalid = serde_json::json!({"traceparent": "junk"});
        assert_eq!(TraceContext::of_event(&invalid, Some((other, None))), None);
    }
}
