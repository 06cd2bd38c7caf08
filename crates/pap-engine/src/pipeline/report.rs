//! What `pap dispatch` reports per event: the `--json` line of contract section 4, which the
//! human format renders too.

use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;

use crate::event::input::Location;
use crate::stages::{Outcome, Reason};

#[derive(Debug, Clone, Serialize)]
pub struct EventReport {
    pub event_id: Option<String>,
    #[serde(rename = "type")]
    pub kind: Option<String>,
    /// `dispatched`, `no_match` or `invalid`.
    pub status: &'static str,
    pub depth: Option<u32>,
    pub triggers: Vec<TriggerReport>,
    /// The reason, when `status` is `invalid`.
    pub error: Option<String>,
    /// Where the event came from (`file:LINE`, `file[INDEX]`), or `emitted` for events an
    /// agent run produced.
    pub input: Location,
    pub triggered_by: Option<String>,
    /// What the event ended through triggers' `cancel_on` (a pap extension), and what it
    /// was refused to end.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub cancelled: Vec<super::cancel_on::Cancellation>,
}

#[derive(Debug, Clone, Serialize)]
pub struct TriggerReport {
    pub trigger: Arc<str>,
    pub agent: Arc<str>,
    pub outcome: Outcome,
    pub reason: Option<Reason>,
    pub invocation_id: Option<String>,
    pub risk: &'static str,
    /// `succeeded` or `failed`, once an invoked agent has run.
    pub result: Option<&'static str>,
    pub attempts: Option<u32>,
    pub emitted: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub explain: Option<Explain>,
    /// Whether the deciding process holds the invocation to run it (not when its concurrency
    /// key had no room and `Options::leave_blocked` left it in the queue).
    #[serde(skip)]
    pub held: bool,
    /// Batches this event handed over in its own decision (it filled one, or one was too
    /// full of bytes to take it): each one invocation's decision, in order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub handed_over: Vec<TriggerReport>,
}

/// `--explain`: every condition with what it saw, and every stage's note.
#[derive(Debug, Clone, Serialize, Default)]
pub struct Explain {
    pub file: String,
    pub conditions: Vec<ConditionExplain>,
    pub stages: Vec<StageExplain>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ConditionExplain {
    pub condition: String,
    pub holds: bool,
    pub saw: Vec<Value>,
    /// `saw` holds only the first values (`jsonpath.max_saw_bytes`).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub(crate) saw_truncated: bool,
    /// The path went over `jsonpath.max_nodes` and was stopped.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub over_budget: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct StageExplain {
    pub stage: &'static str,
    pub passed: bool,
    pub note: String,
}

impl EventReport {
    pub fn invalid(
        input: Location,
        id: Option<String>,
        kind: Option<String>,
        reason: String,
    ) -> Self {
        EventReport {
            event_id: id,
            kind,
            status: "invalid",
            depth: None,
            triggers: Vec::new(),
            error: Some(reason),
            input,
            triggered_by: None,
            cancelled: Vec::new(),
        }
    }
}
