//! The decision stages of PAP 0.2 section 6, in order: filter, idempotency, cascade,
//! throttle, risk. Each is a small unit deciding Continue or Stop for one (event, trigger);
//! the pipeline runs them in order and the first Stop decides the outcome.

pub mod cascade;
pub mod filter;
pub mod idempotency;
pub mod risk;
pub mod throttle;

use serde::Serialize;

/// Contract section 4: what happened to one trigger for one event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Invoked,
    Queued,
    Filtered,
    Duplicate,
    CascadeRejected,
    Throttled,
    AwaitingApproval,
    /// Only under `--explain`: a disabled trigger whose type matched.
    Disabled,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Invoked => "invoked",
            Outcome::Queued => "queued",
            Outcome::Filtered => "filtered",
            Outcome::Duplicate => "duplicate",
            Outcome::CascadeRejected => "cascade_rejected",
            Outcome::Throttled => "throttled",
            Outcome::AwaitingApproval => "awaiting_approval",
            Outcome::Disabled => "disabled",
        }
    }
}

/// A stage's answer.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    Continue,
    Stop(Outcome, String),
}
