//! Events an invocation produces: its completion or failure event (`on_complete` /
//! `on_failure`), and follow-up events the agent wrote to the file named by `PAP_EMIT_FILE`.
//!
//! The dispatcher owns every field that places an event in a chain: ids are derived from the
//! invocation (the same invocation always emits the same ids), `triggered_by` is the
//! invocation id, `source` names the dispatcher and the agent, `time` is the dispatcher's.

use std::path::Path;

use serde_json::{Map, Value, json};

use crate::clock::rfc3339_ms;
use crate::domain::ids;
use crate::domain::{Invocation, Runner};
use crate::event::{Event, Origin, validate};
use crate::manifest::Project;
use crate::storage::{self, WriteTx};

/// How many follow-up events one attempt may emit.
pub(crate) const MAX_FOLLOW_UPS: usize = 100;

pub fn source(agent: &str) -> String {
    format!("pap://dispatcher/agents/{agent}")
}

/// How an invocation ended, for its outcome event.
pub enum Ending<'a> {
    Succeeded(&'a Value),
    Failed(&'a str),
    Rejected(&'a str),
    Expired(&'a str),
    /// Ended by an operator or a `cancel_on` event before it finished.
    Cancelled(&'a str),
}

/// The `on_complete` (success) or `on_failure` (anything else) event of `inv`.
pub(crate) fn outcome_event(
    inv: &Invocation,
    kind: &str,
    ending: Ending,
    now: i64,
    max_bytes: u64,
) -> Result<Event, String> {
    let (which, status) = match ending {
        Ending::Succeeded(_) => ("complete", "succeeded"),
        Ending::Failed(_) => ("failure", "failed"),
        Ending::Rejected(_) => ("failure", "rejected"),
        Ending::Expired(_) => ("failure", "expired"),
        Ending::Cancelled(_) => ("failure", "cancelled"),
    };
    let mut data = json!({
        "invocation_id": inv.id,
        "trigger": inv.trigger,
        "agent": inv.agent,
        "event_id": inv.event_id,
        "event_type": inv.event_type,
        "status": status,
        "attempts": inv.attempts,
    });
    match ending {
        Ending::Succeeded(output) => data["output"] = output.clone(),
        Ending::Failed(why)
        | Ending::Rejected(why)
        | Ending::Expired(why)
        | Ending::Cancelled(why) => data["error"] = Value::from(why),
    }
    build(
        inv,
        ids::outcome_event(&inv.id, which),
        kind,
        data,
        Map::new(),
        now,
        max_bytes,
    )
}

/// Blank lines are skipped, but not without end.
const MAX_BLANK_LINES: usize = 10_000;

/// Reads the follow-up events an attempt wrote (NDJSON, each `{"type": …, "data": {…}}`).
/// Every type must be one the manifest declares in `emits`.
pub(crate) fn read_follow_ups(
    path: &Path,
    inv: &Invocation,
    declared: &[String],
    now: i64,
    max_bytes: u64,
) -> Result<Vec<Event>, String> {
    // An agent writes this file: it may be huge, or not a file at all (a FIFO would block
    // the read for ever, a link could point anywhere, and a process the agent left behind
    // could swap one in at any moment). Only a regular file is read, a line at a time, and
    // no line past max_event_bytes is held in memory.
    use crate::regular_file::{self, Links};
    let file = match regular_file::open(path, Links::Refuse) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) if regular_file::is_not_regular(&e) => {
            return Err(
                "PAP_EMIT_FILE is not a regular file (a link, FIFO or device is refused)".into(),
            );
        }
        Err(e) => return Err(format!("cannot read PAP_EMIT_FILE: {e}")),
    };
    let mut reader = std::io::BufReader::new(file);
    let mut events = Vec::new();
    let mut buffer = Vec::new();
    for i in 0.. {
        buffer.clear();
        let read = std::io::BufRead::read_until(
            &mut std::io::Read::take(&mut reader, max_bytes.saturating_add(2)),
            b'\n',
            &mut buffer,
        )
        .map_err(|e| format!("cannot read PAP_EMIT_FILE: {e}"))?;
        if read == 0 {
            break;
        }
        let at = |msg: String| format!("PAP_EMIT_FILE line {}: {msg}", i + 1);
        if buffer.last() != Some(&b'\n') && read as u64 > max_bytes {
            return Err(at(format!(
                "longer than {max_bytes} bytes (max_event_bytes); the rest was not read"
            )));
        }
        let line = buffer.trim_ascii();
        if line.is_empty() {
            if i > MAX_BLANK_LINES {
                return Err(at(format!("more than {MAX_BLANK_LINES} lines")));
            }
            continue;
        }
        if events.len() == MAX_FOLLOW_UPS {
            return Err(at(format!("more than {MAX_FOLLOW_UPS} events")));
        }
        let crate::event::strict::Strict(value) =
            serde_json::from_slice(line).map_err(|e| at(format!("not valid JSON: {e}")))?;
        let Value::Object(mut map) = value else {
            return Err(at("each line must be a JSON object".into()));
        };
        let kind = match map.remove("type") {
            Some(Value::String(k)) => k,
            _ => return Err(at("`type` (a string) is required".into())),
        };
        if !declared.contains(&kind) {
            return Err(at(format!(
                "type {kind:?} is not declared in the agent's `emits` ({})",
                if declared.is_empty() {
                    "none declared".into()
                } else {
                    declared.join(", ")
                }
            )));
        }
        let data = map.remove("data").unwrap_or_else(|| json!({}));
        // The dispatcher sets these; whatever the agent wrote is replaced.
        for owned in [
            "pap_version",
            "id",
            "source",
            "time",
            "triggered_by",
            "specversion",
        ] {
            map.remove(owned);
        }
        let id = ids::follow_up_event(&inv.id, events.len());
        events.push(build(inv, id, &kind, data, map, now, max_bytes).map_err(at)?);
    }
    Ok(events)
}

fn build(
    inv: &Invocation,
    id: String,
    kind: &str,
    data: Value,
    extra: Map<String, Value>,
    now: i64,
    max_bytes: u64,
) -> Result<Event, String> {
    let mut map = Map::new();
    map.insert("pap_version".into(), "0.2".into());
    map.insert("id".into(), id.into());
    map.insert("type".into(), kind.into());
    map.insert("source".into(), source(&inv.agent).into());
    map.insert("time".into(), rfc3339_ms(now).into());
    map.insert("triggered_by".into(), inv.id.clone().into());
    map.insert("data".into(), data);
    // The attempt's trace goes on (the CloudEvents distributed-tracing extension): deciding
    // this event makes a span of the same trace, so a cascade is one trace. An attempt made
    // with traces off passes the invocation's context on unchanged.
    let trace = inv.history.last().and_then(|a| a.trace.as_ref());
    if let Some(cx) = trace.or(inv.trace.as_ref()) {
        map.insert("traceparent".into(), cx.traceparent().into());
        if let Some(state) = &cx.tracestate {
            map.insert("tracestate".into(), state.clone().into());
        }
    }
    map.extend(extra);
    let value = Value::Object(map);
    let len = serde_json::to_vec(&value).map_or(usize::MAX, |v| v.len());
    validate(value, len, max_bytes, Origin::Dispatcher).map_err(|e| e.reason)
}
/// The failure event an ending invocation declares could not be built (it would exceed
/// `max_event_bytes`, say): the ending is not recorded without it.
#[derive(Debug, thiserror::Error)]
#[error("failure event of {invocation}: {why}")]
pub(crate) struct FailureEventRefused {
    invocation: String,
    why: String,
}

/// The `on_failure` event of `inv` ending as `ending`, when its agent declares one (an agent
/// whose manifest is gone ends without one).
pub(crate) fn failure_events(
    project: &Project,
    inv: &Invocation,
    ending: Ending<'_>,
    now: i64,
) -> storage::Result<Vec<Event>> {
    let kind = project
        .agent(&inv.agent)
        .and_then(|a| a.on_failure_emit.as_ref());
    let Some(kind) = kind else {
        return Ok(Vec::new());
    };
    let event =
        outcome_event(inv, kind, ending, now, project.config.max_event_bytes).map_err(|why| {
            storage::Error::refused(FailureEventRefused {
                invocation: inv.id.clone(),
                why,
            })
        })?;
    Ok(vec![event])
}

/// Emitted events wait in the outbox until they are decided, so a crash in between loses none.
/// This process decides them next; if it dies first, `pap serve` finds them.
pub(crate) fn put_outbox(tx: &mut dyn WriteTx, events: &[Event], now: i64) -> storage::Result<()> {
    let owner = Runner::current(now);
    for e in events {
        tx.outbox_put(&e.id, &e.value, Some(&owner))?;
    }
    Ok(())
}
