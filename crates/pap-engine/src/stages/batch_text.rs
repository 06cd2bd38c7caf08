//! What a person reads of a batch before approving its run: the agent acts on every event
//! of it, so every event is shown wherever someone decides (the approval request and its
//! notification, a chat message, the console, `pap invocations show`, MCP's form), not only
//! the first. One line an event, from its alert summary when an alert adapter made it, else
//! its id and a few of its data's fields; at most [`SHOWN`] lines, then how many more (the
//! invocation's JSON has them all).

use serde_json::Value;

/// The most events a description lists by line.
pub const SHOWN: usize = 20;
/// The most characters of one event's line.
const LINE_CHARS: usize = 200;
/// The data fields a line quotes for an event that is not an alert.
const FIELDS: usize = 4;

/// A batch's events, as lines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Described {
    /// How many events the batch holds.
    pub total: usize,
    /// One line for each of the first [`SHOWN`].
    pub lines: Vec<String>,
}

impl Described {
    /// How many are not listed.
    pub fn more(&self) -> usize {
        self.total - self.lines.len()
    }

    /// The lines joined with `sep`, and "and N more" when some are not listed.
    pub fn joined(&self, sep: &str) -> String {
        let mut out = self.lines.join(sep);
        if self.more() > 0 {
            out.push_str(sep);
            out.push_str(&format!("and {} more", self.more()));
        }
        out
    }
}

/// The events of `event`'s `batch` (what a batch's invocation gets), or `None` for an event
/// that is not a batch.
pub fn described(event: &Value) -> Option<Described> {
    let events = event.get("batch")?.as_array()?;
    Some(Described {
        total: events.len(),
        lines: events.iter().take(SHOWN).map(line).collect(),
    })
}

/// One event's line: `ID: SUMMARY` for an alert, else `ID TYPE (name=value, …)`.
fn line(event: &Value) -> String {
    let id = event.get("id").and_then(Value::as_str).unwrap_or("?");
    let data = event.get("data");
    let text = match data.and_then(|d| d.get("summary")).and_then(Value::as_str) {
        Some(summary) => format!("{id}: {summary}"),
        None => {
            let kind = event.get("type").and_then(Value::as_str).unwrap_or("?");
            let fields: Vec<String> = data
                .and_then(Value::as_object)
                .into_iter()
                .flatten()
                .filter_map(|(name, value)| match value {
                    Value::String(s) => Some(format!("{name}={s}")),
                    Value::Number(n) => Some(format!("{name}={n}")),
                    Value::Bool(b) => Some(format!("{name}={b}")),
                    _ => None,
                })
                .take(FIELDS)
                .collect();
            if fields.is_empty() {
                format!("{id} {kind}")
            } else {
                format!("{id} {kind} ({})", fields.join(", "))
            }
        }
    };
    // One line, whatever the event holds.
    let one: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    crate::text::clip_whole(&one, LINE_CHARS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_event_is_a_line_up_to_the_bound_then_a_count() {
        let batch: Vec<Value> = (0..25)
            .map(|n| {
                if n % 2 == 0 {
                    json!({"id": format!("e{n}"), "type": "host.disk.full",
                           "data": {"host": format!("db-{n}"), "pct": 97, "nested": {"x": 1}}})
                } else {
                    json!({"id": format!("e{n}"), "type": "alertmanager.alert.firing",
                           "data": {"summary": format!("NodeDown (page) on node{n}\nsecond line")}})
                }
            })
            .collect();
        let d = described(&json!({"id": "e0", "batch": batch})).unwrap();
        assert_eq!((d.total, d.lines.len(), d.more()), (25, SHOWN, 5));
        assert_eq!(d.lines[0], "e0 host.disk.full (host=db-0, pct=97)");
        assert_eq!(d.lines[1], "e1: NodeDown (page) on node1 second line");
        assert!(d.joined("; ").ends_with("; and 5 more"));
        assert_eq!(described(&json!({"id": "x"})), None);
    }
}
