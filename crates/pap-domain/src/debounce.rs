//! Where a trigger's debounce stands for one window key (a pap extension, see
//! `stages::debounce`): when the burst's last event came, and in trailing mode the
//! invocation that waits for the burst to go quiet.

use serde::{Deserialize, Serialize};
use serde_json::Value;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DebounceState {
    /// When the last event of the burst reached the debounce stage (ms).
    pub last_seen: i64,
    /// Trailing mode: the invocation to make once the burst has been quiet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending: Option<PendingFire>,
    /// Group events (a pap extension): the firing alerts of the group already decided for
    /// the trigger, by their events' ids; a repeat of the group with none new is a duplicate.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub seen: Vec<String>,
}

/// A trailing debounce's invocation-to-be: the burst's last event, and when it fires.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PendingFire {
    pub due: i64,
    /// The last event of the burst, as decided (its data is what the agent gets).
    pub event: Value,
    /// Who sent that event (a `cancel_on` event may end the fire only if it may end what
    /// that sender started).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sender: Option<crate::invocation::Sender>,
    /// A `batch` (a pap extension): every event of the burst so far, in order (`event` is the
    /// first). Empty for a trailing debounce.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub batch: Vec<Value>,
    /// The encoded bytes of `batch`, kept so that a new event is measured against the bound
    /// without encoding every event already in it again.
    #[serde(default, skip_serializing_if = "crate::is_zero")]
    pub batch_bytes: u64,
    /// The trace the fire continues when traces are exported: the decision of the event
    /// it uses (a debounce's last, a batch's first).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<crate::trace_context::TraceContext>,
    /// A batch's other events' decisions, linked from the fire's span (each is a trace of
    /// its own: one parent, the others links).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub links: Vec<crate::trace_context::TraceContext>,
}
