//! The decision stages of PAP 0.2 section 6, in order: filter, idempotency, cascade,
//! (debounce, a pap extension), throttle, (budget, a pap extension), risk. Each is a small unit deciding Continue or Stop for one (event, trigger);
//! the pipeline runs them in order and the first Stop decides the outcome.

pub mod batch;
pub mod batch_text;
pub mod budget;
pub mod cascade;
pub mod concurrency;
pub mod debounce;
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
    /// A pap extension: part of a burst a debounce acts on once.
    Debounced,
    /// A pap extension: collected into a batch that one invocation gets whole.
    Batched,
    /// A pap extension: the agent's budget for the last 24 hours is used up.
    BudgetExceeded,
    AwaitingApproval,
    /// Only under `--explain`: a disabled trigger whose type matched.
    Disabled,
}

impl Outcome {
    /// Every outcome a decision can have (`Disabled` is only `--explain`'s).
    pub const DECIDED: [Outcome; 10] = [
        Outcome::Invoked,
        Outcome::Queued,
        Outcome::Filtered,
        Outcome::Duplicate,
        Outcome::CascadeRejected,
        Outcome::Throttled,
        Outcome::Debounced,
        Outcome::Batched,
        Outcome::BudgetExceeded,
        Outcome::AwaitingApproval,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Invoked => "invoked",
            Outcome::Queued => "queued",
            Outcome::Filtered => "filtered",
            Outcome::Duplicate => "duplicate",
            Outcome::CascadeRejected => "cascade_rejected",
            Outcome::Throttled => "throttled",
            Outcome::Debounced => "debounced",
            Outcome::Batched => "batched",
            Outcome::BudgetExceeded => "budget_exceeded",
            Outcome::AwaitingApproval => "awaiting_approval",
            Outcome::Disabled => "disabled",
        }
    }
}

/// A stage's answer.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    Continue,
    Stop(Outcome, Reason),
}

/// Why a stage stopped a trigger. The throttle's reason stays data until it is printed: in a
/// burst nearly every event is throttled, and formatting its sentence (durations, a
/// timestamp) on the deciding thread cost more than the throttle lookup itself.
#[derive(Debug, Clone, PartialEq)]
pub enum Reason {
    Text(String),
    Throttled {
        used: usize,
        max: u64,
        window: std::time::Duration,
        /// The window key (JSON), empty for the single bucket of a trigger without one.
        key: String,
        /// When the oldest invocation in the window leaves it (ms).
        next: i64,
    },
    Batched {
        /// Events in the batch with this one.
        count: usize,
        max: u32,
        /// The batch key (JSON), empty without one.
        key: String,
        /// When the batch is handed over (ms).
        due: i64,
        /// Full with this event: handed over in this decision.
        full: bool,
    },
    Debounced {
        trailing: bool,
        quiet: std::time::Duration,
        /// The window key (JSON), empty without one.
        key: String,
        /// Leading: when the burst's previous event came. Trailing: when the invocation is
        /// made unless another event comes first (ms).
        at: i64,
    },
}

/// What an event brings to a debounce or a batch besides its body: who sent it (a
/// `cancel_on` event may end a fire only as it could have ended the event), and its
/// decision's trace (a fire continues it; a batch's later events are linked).
#[derive(Debug, Clone, Copy, Default)]
pub struct Arrival<'a> {
    pub sender: Option<&'a crate::domain::Sender>,
    pub trace: Option<&'a crate::trace_context::TraceContext>,
}

impl std::fmt::Display for Reason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Reason::Text(text) => f.write_str(text),
            Reason::Throttled {
                used,
                max,
                window,
                key,
                next,
            } => {
                f.write_str(&throttle::usage(*used, *max, *window))?;
                if !key.is_empty() {
                    write!(f, " for window key {key}")?;
                }
                write!(f, "; next slot {}", crate::clock::at_or_never(*next))
            }
            Reason::Batched {
                count,
                max,
                key,
                due,
                full,
            } => {
                let key = if key.is_empty() {
                    String::new()
                } else {
                    format!(" (batch key {key})")
                };
                if *full {
                    write!(
                        f,
                        "batch of {count} (at most {max}){key}: full, so one invocation gets every event of it now"
                    )
                } else {
                    write!(
                        f,
                        "batch of {count} (at most {max}){key}: one invocation gets every event of it {}, or as soon as it is full; `pap serve` makes it",
                        crate::clock::at_or_never(*due)
                    )
                }
            }
            Reason::Debounced {
                trailing,
                quiet,
                key,
                at,
            } => {
                let quiet = crate::manifest::duration::format(*quiet);
                let key = if key.is_empty() {
                    String::new()
                } else {
                    format!(" (window key {key})")
                };
                let at = crate::clock::at_or_never(*at);
                if *trailing {
                    write!(
                        f,
                        "trailing debounce: one invocation with the last event of the burst once it has been quiet for {quiet}{key}, {at} unless another event comes first; `pap serve` makes it"
                    )
                } else {
                    write!(
                        f,
                        "leading debounce: the burst goes on (its last event came {at}, within the quiet period of {quiet}){key}; the next event after {quiet} of quiet provokes"
                    )
                }
            }
        }
    }
}

impl Serialize for Reason {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl From<String> for Reason {
    fn from(text: String) -> Reason {
        Reason::Text(text)
    }
}

impl From<&str> for Reason {
    fn from(text: &str) -> Reason {
        Reason::Text(text.to_owned())
    }
}
