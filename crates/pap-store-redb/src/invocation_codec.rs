//! The on-disk form of an invocation (format 6).
//!
//! An invocation is written at its decision and rewritten at each step of its life, and a
//! stream can queue hundreds of thousands. As JSON with the event inside, each took about
//! 1.1 KB; here the event is stored once (in `events`, under a sequence number, however many
//! triggers it provoked) and the fields every invocation has are packed: a version byte, varints, and
//! length-prefixed strings, then the optional parts (approval, lease, output, history, …)
//! as one JSON object, `{}` until there are any. The id is the table's key, not repeated.
//!
//! Layout: `version: u8` (1), `seq` (varint), `status: u8` (bit 7: an internal turn),
//! `depth`, `attempts`, `max_attempts` (varints), `created_at` (zigzag varint),
//! `updated_at − created_at` (zigzag varint), `trigger`, `agent`, `event_id`, `event_type`
//! (varint length + UTF-8), `risk` (a known level as a length of 0 and its code, else text),
//! the event's number in `events` (varint), then the JSON of [`Extras`].
//! A later format adds a version and keeps decoding this one.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::varint;
use pap_domain::Carried;
use pap_domain::{
    ApprovalDecision, Attempt, CancelKey, ConcurrencySlot, Invocation, Lease, Status,
};

const VERSION: u8 = 1;

/// An event's key in `events`: a sequence number, so the table grows at its end.
pub(super) type EventRef = u64;

/// The SHA-256 of an event's stored bytes, which finds a body already stored by this
/// transaction (the same event provoking several triggers).
pub(super) type EventHash = [u8; 32];

#[derive(Debug, thiserror::Error)]
#[error("invocation record: {0}")]
pub(super) struct Malformed(String);

fn bad(what: impl Into<String>) -> Malformed {
    Malformed(what.into())
}

/// What only some invocations have, kept as JSON (borrowed to write, owned when read).
#[derive(Serialize)]
struct ExtrasRef<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    approval_deadline: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    approval: Option<&'a ApprovalDecision>,
    #[serde(skip_serializing_if = "Option::is_none")]
    approval_request: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    next_attempt_at: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    lease: Option<&'a Lease>,
    #[serde(skip_serializing_if = "Option::is_none")]
    output: Option<&'a Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'a str>,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    emitted: &'a [String],
    #[serde(skip_serializing_if = "<[Attempt]>::is_empty")]
    history: &'a [Attempt],
    #[serde(skip_serializing_if = "<[Carried]>::is_empty")]
    notifications: &'a [Carried],
    #[serde(skip_serializing_if = "Option::is_none")]
    retry_of: Option<&'a str>,
    #[serde(skip_serializing_if = "<[ConcurrencySlot]>::is_empty")]
    concurrency: &'a [ConcurrencySlot],
    #[serde(skip_serializing_if = "Option::is_none")]
    stopping_until: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cancel: Option<&'a CancelKey>,
    #[serde(skip_serializing_if = "Option::is_none")]
    trace: Option<&'a pap_domain::trace_context::TraceContext>,
}

#[derive(Deserialize)]
struct Extras {
    #[serde(default)]
    approval_deadline: Option<i64>,
    #[serde(default)]
    approval: Option<ApprovalDecision>,
    #[serde(default)]
    approval_request: Option<String>,
    #[serde(default)]
    next_attempt_at: Option<i64>,
    #[serde(default)]
    lease: Option<Lease>,
    #[serde(default)]
    output: Option<Value>,
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    emitted: Vec<String>,
    #[serde(default)]
    history: Vec<Attempt>,
    #[serde(default)]
    notifications: Vec<Carried>,
    #[serde(default)]
    retry_of: Option<String>,
    #[serde(default)]
    concurrency: Vec<ConcurrencySlot>,
    #[serde(default)]
    stopping_until: Option<i64>,
    #[serde(default)]
    cancel: Option<CancelKey>,
    #[serde(default)]
    trace: Option<pap_domain::trace_context::TraceContext>,
}

/// The status byte's flag for an internal turn.
const INTERNAL: u8 = 0x80;

/// Risk levels stored as one byte (append only: a code's meaning never changes).
const RISKS: [&str; 4] = ["read_only", "low", "medium", "high"];

/// A status is its index here: new ones are only ever appended.
pub(super) const STATUSES: [Status; 8] = [
    Status::AwaitingApproval,
    Status::Queued,
    Status::Running,
    Status::Succeeded,
    Status::Failed,
    Status::Rejected,
    Status::Expired,
    Status::Cancelled,
];

/// The record of `inv`, whose event is stored under `event`.
pub(super) fn encode(inv: &Invocation, event: EventRef) -> Vec<u8> {
    let mut out = Vec::with_capacity(128);
    out.push(VERSION);
    varint::put(&mut out, inv.seq);
    let status = STATUSES.iter().position(|s| *s == inv.status).unwrap_or(0) as u8;
    out.push(status | if inv.internal { INTERNAL } else { 0 });
    varint::put(&mut out, u64::from(inv.depth));
    varint::put(&mut out, u64::from(inv.attempts));
    varint::put(&mut out, u64::from(inv.max_attempts));
    varint::put_signed(&mut out, inv.created_at);
    varint::put_signed(&mut out, inv.updated_at.wrapping_sub(inv.created_at));
    for text in [&inv.trigger, &inv.agent, &inv.event_id, &inv.event_type] {
        varint::put(&mut out, text.len() as u64);
        out.extend_from_slice(text.as_bytes());
    }
    match RISKS.iter().position(|r| *r == inv.risk) {
        // A known level is one byte, after a length of 0 that no text has.
        Some(i) => out.extend_from_slice(&[0, i as u8]),
        None => {
            varint::put(&mut out, inv.risk.len() as u64);
            out.extend_from_slice(inv.risk.as_bytes());
        }
    }
    varint::put(&mut out, event);
    let extras = ExtrasRef {
        approval_deadline: inv.approval_deadline,
        approval: inv.approval.as_ref(),
        approval_request: inv.approval_request.as_deref(),
        next_attempt_at: inv.next_attempt_at,
        lease: inv.lease.as_ref(),
        output: inv.output.as_ref(),
        error: inv.error.as_deref(),
        emitted: &inv.emitted,
        history: &inv.history,
        notifications: &inv.notifications,
        retry_of: inv.retry_of.as_deref(),
        concurrency: &inv.concurrency,
        stopping_until: inv.stopping_until,
        cancel: inv.cancel.as_ref(),
        trace: inv.trace.as_ref(),
    };
    serde_json::to_writer(&mut out, &extras).expect("records serialise");
    out
}

/// The invocation `id` from its record, with its event left `null`, and the event's key.
pub(super) fn decode(id: &str, bytes: &[u8]) -> Result<(Invocation, EventRef), Malformed> {
    let mut r = Reader { bytes };
    let version = r.u8()?;
    if version != VERSION {
        return Err(bad(format!("unknown record version {version}")));
    }
    let seq = r.varint()?;
    let status_byte = r.u8()?;
    let internal = status_byte & INTERNAL != 0;
    let status = *STATUSES
        .get(usize::from(status_byte & !INTERNAL))
        .ok_or_else(|| bad("unknown status"))?;
    let depth = r.u32()?;
    let attempts = r.u32()?;
    let max_attempts = r.u32()?;
    let created_at = r.signed()?;
    let updated_at = created_at.wrapping_add(r.signed()?);
    let trigger = r.text()?;
    let agent = r.text()?;
    let event_id = r.text()?;
    let event_type = r.text()?;
    let risk = match r.text()? {
        empty if empty.is_empty() => RISKS
            .get(usize::from(r.u8()?))
            .ok_or_else(|| bad("unknown risk level"))?
            .to_string(),
        text => text,
    };
    let event: EventRef = r.varint()?;
    // Always there (`{}` at least), so a record cut short is an error, not a fresh one.
    let extras: Extras =
        serde_json::from_slice(r.bytes).map_err(|e| bad(format!("optional fields: {e}")))?;
    let inv = Invocation {
        id: id.to_owned(),
        seq,
        status,
        trigger,
        agent,
        event_id,
        event_type,
        depth,
        risk,
        attempts,
        max_attempts,
        created_at,
        updated_at,
        approval_deadline: extras.approval_deadline,
        approval: extras.approval,
        approval_request: extras.approval_request,
        next_attempt_at: extras.next_attempt_at,
        lease: extras.lease,
        output: extras.output,
        error: extras.error,
        emitted: extras.emitted,
        history: extras.history,
        event: Value::Null,
        internal,
        notifications: extras.notifications,
        retry_of: extras.retry_of,
        concurrency: extras.concurrency,
        stopping_until: extras.stopping_until,
        cancel: extras.cancel,
        trace: extras.trace,
    };
    Ok((inv, event))
}

/// The stored bytes of an event and their key.
pub(super) fn event_bytes(event: &Value) -> (Vec<u8>, EventHash) {
    use sha2::Digest;
    let bytes = serde_json::to_vec(event).expect("events serialise");
    let key: EventHash = sha2::Sha256::digest(&bytes).into();
    (bytes, key)
}

struct Reader<'a> {
    bytes: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], Malformed> {
        if self.bytes.len() < n {
            return Err(bad("truncated"));
        }
        let (head, rest) = self.bytes.split_at(n);
        self.bytes = rest;
        Ok(head)
    }

    fn u8(&mut self) -> Result<u8, Malformed> {
        Ok(self.take(1)?[0])
    }

    fn varint(&mut self) -> Result<u64, Malformed> {
        varint::take(&mut self.bytes).ok_or_else(|| bad("truncated number"))
    }

    fn signed(&mut self) -> Result<i64, Malformed> {
        varint::take_signed(&mut self.bytes).ok_or_else(|| bad("truncated number"))
    }

    fn u32(&mut self) -> Result<u32, Malformed> {
        u32::try_from(self.varint()?).map_err(|_| bad("number out of range"))
    }

    fn text(&mut self) -> Result<String, Malformed> {
        let len = usize::try_from(self.varint()?).map_err(|_| bad("length out of range"))?;
        let bytes = self.take(len)?;
        String::from_utf8(bytes.to_vec()).map_err(|_| bad("text is not UTF-8"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn sample() -> Invocation {
        Invocation {
            id: "inv_x".into(),
            seq: 300,
            status: Status::Running,
            trigger: "t".into(),
            agent: "a".into(),
            event_id: "e".into(),
            event_type: "a.b.c".into(),
            depth: 2,
            risk: "high".into(),
            attempts: 1,
            max_attempts: 3,
            created_at: 1_700_000_000_000,
            updated_at: 1_700_000_000_500,
            approval_deadline: Some(5),
            approval: Some(ApprovalDecision {
                approved: true,
                by: "ann".into(),
                at: 4,
                note: None,
            }),
            approval_request: Some("n1".into()),
            next_attempt_at: None,
            lease: Some(Lease {
                holder: pap_domain::Runner {
                    pid: 7,
                    since: 3,
                    started: Some(9),
                },
                node: "boot-1".into(),
                token: 12,
                expires_at: 99,
                grace_ms: 2_000,
            }),
            output: Some(json!({"ok": true})),
            error: None,
            emitted: vec!["e2".into()],
            history: vec![Attempt {
                attempt: 1,
                started_at: 2,
                ended_at: None,
                error: None,
                transcript: None,
                group: None,
                trace: None,
            }],
            event: Value::Null,
            internal: true,
            notifications: Vec::new(),
            retry_of: Some("inv_0".into()),
            concurrency: vec![ConcurrencySlot {
                scope: "agent:a".into(),
                key: "\"db1\"".into(),
                limit: 2,
            }],
            stopping_until: Some(9),
            cancel: Some(CancelKey {
                key: "\"fp1\"".into(),
                sender: Some(pap_domain::Sender {
                    route: "/v1/ingest/alertmanager".into(),
                    principal: Some("am".into()),
                }),
            }),
            trace: Some(pap_domain::trace_context::TraceContext {
                trace_id: "4bf92f3577b34da6a3ce929d0e0e4736".into(),
                parent_id: "00f067aa0ba902b7".into(),
                flags: 1,
                tracestate: None,
            }),
        }
    }

    #[test]
    fn records_round_trip() {
        let inv = sample();
        let key = 1 << 40;
        let (back, got) = decode("inv_x", &encode(&inv, key)).unwrap();
        assert_eq!(got, key);
        assert_eq!(format!("{back:?}"), format!("{inv:?}"));
        // A risk level without a code, and an ordinary invocation.
        let other = Invocation {
            risk: "unheard_of".into(),
            internal: false,
            ..inv
        };
        let (back, _) = decode("inv_x", &encode(&other, 0)).unwrap();
        assert_eq!(format!("{back:?}"), format!("{other:?}"));
    }

    #[test]
    fn a_fresh_invocation_is_small() {
        let mut inv = sample();
        (inv.approval, inv.approval_request, inv.lease, inv.output) = (None, None, None, None);
        inv.approval_deadline = None;
        inv.retry_of = None;
        inv.concurrency.clear();
        inv.stopping_until = None;
        inv.cancel = None;
        inv.trace = None;
        inv.emitted.clear();
        inv.history.clear();
        assert!(encode(&inv, 1_000_000).len() < 40);
    }

    #[test]
    fn damaged_records_are_errors() {
        let bytes = encode(&sample(), 5);
        for cut in 0..bytes.len() - 2 {
            assert!(decode("i", &bytes[..cut]).is_err(), "cut at {cut}");
        }
        let mut other = bytes.clone();
        other[0] = 9;
        assert!(decode("i", &other).is_err());
    }
}
