//! An invocation: one provocation of one agent by one trigger for one event, with its
//! attempts. Times are milliseconds since the Unix epoch (the dispatcher's clock); the
//! public JSON views turn them into RFC 3339.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Contract section 5: `awaiting_approval → queued → running → succeeded | failed`, or
/// `awaiting_approval → rejected | expired`; an operator may cancel any unfinished one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "clap", value(rename_all = "snake_case"))]
pub enum Status {
    /// A high-risk run waits for a person's answer (`pap approve`, `pap reject`).
    AwaitingApproval,
    /// Decided and waiting to run (or for its next attempt).
    Queued,
    /// An attempt is under way.
    Running,
    /// It ran and succeeded.
    Succeeded,
    /// It ran and failed after its retries.
    Failed,
    /// A person rejected it.
    Rejected,
    /// Nobody answered before its deadline (a denial).
    Expired,
    /// Stopped by an operator (`pap invocations cancel`) before it finished.
    Cancelled,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::AwaitingApproval => "awaiting_approval",
            Status::Queued => "queued",
            Status::Running => "running",
            Status::Succeeded => "succeeded",
            Status::Failed => "failed",
            Status::Rejected => "rejected",
            Status::Expired => "expired",
            Status::Cancelled => "cancelled",
        }
    }

    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            Status::Succeeded
                | Status::Failed
                | Status::Rejected
                | Status::Expired
                | Status::Cancelled
        )
    }
}

impl Invocation {
    /// Whether the purge may remove it at `cutoff` (see `serve::purge`): it ended, and
    /// nothing changed it since before the cutoff.
    pub fn expired_by(&self, cutoff: i64) -> bool {
        self.status.is_terminal() && self.updated_at < cutoff
    }
}

/// One provocation of one agent by one trigger for one event.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Invocation {
    pub id: String,
    /// Creation order, for listings.
    pub seq: u64,
    pub status: Status,
    pub trigger: String,
    pub agent: String,
    pub event_id: String,
    pub event_type: String,
    /// Cascade depth of the event that started it; events it emits are one deeper.
    pub depth: u32,
    pub risk: String,
    /// The current (or last) attempt number; 0 before the first starts. An attempt cut short
    /// by a crash runs again under the same number.
    pub attempts: u32,
    pub max_attempts: u32,
    pub created_at: i64,
    pub updated_at: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval_deadline: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval: Option<ApprovalDecision>,
    /// The notification carrying its approval request (ATP), while or after it awaits one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval_request: Option<String>,
    /// When the next attempt is due, after a failed one (persisted so a restart keeps it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_attempt_at: Option<i64>,
    /// Who runs it (or holds it to run it), until when, under which fencing token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease: Option<super::lease::Lease>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default)]
    pub emitted: Vec<String>,
    #[serde(default)]
    pub history: Vec<Attempt>,
    /// The whole event, so the invocation can run later (`--no-run`, approvals, retries).
    pub event: Value,
    /// An internal turn (ANP channel C): started to handle notifications, not by a trigger.
    /// Its own outcome is the fate of the notifications it handles, not a new notification.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub internal: bool,
    /// Notifications its prompt carries (handled ones, and those queued for its agent).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notifications: Vec<super::notification::Carried>,
    /// The invocation this one re-runs (`pap invocations retry`), under the same claim.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_of: Option<String>,
    /// The concurrency keys it runs under (a pap extension): it starts only when each has
    /// a free slot and no earlier invocation waits for one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub concurrency: Vec<ConcurrencySlot>,
    /// Cancelled while it ran: its processes may still be stopping until then (ms), so it
    /// keeps its concurrency slots until they are gone or this time has passed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopping_until: Option<i64>,
    /// How a later event may end it before it finishes (its trigger's `cancel_on`, a pap
    /// extension): stores index the unfinished ones by trigger and key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cancel: Option<CancelKey>,
    /// The trace its decision was part of, when traces are exported: the span of
    /// its trigger's decision, which its attempts' spans are children of.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<crate::trace_context::TraceContext>,
}

/// Who sent an event over HTTP: the route it came through and the principal that posted it
/// (`None`: anonymous). An event from this host (the command line, the spool, a schedule,
/// an agent's emitted event) has no sender.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sender {
    pub route: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub principal: Option<String>,
}

/// The key under which a later event of its trigger's `cancel_on` finds an unfinished
/// invocation, and who sent the event that started it (who may cancel it depends on that).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CancelKey {
    /// What `cancel_on.match` selected in the starting event, as JSON.
    pub key: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sender: Option<Sender>,
}

impl Invocation {
    /// Its entry in a store's cancel index while it is unfinished and has a cancel key:
    /// (trigger, key, creation order).
    pub fn cancel_entry(&self) -> Option<(&str, &str, u64)> {
        let cancel = self.cancel.as_ref()?;
        (!self.status.is_terminal()).then_some((
            self.trigger.as_str(),
            cancel.key.as_str(),
            self.seq,
        ))
    }
}

/// One concurrency key of an invocation: at most `limit` invocations with the same `scope`
/// (`trigger:ID` or `agent:ID`) and `key` (the value its JSONPath selected, as JSON) run at
/// once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConcurrencySlot {
    pub scope: String,
    pub key: String,
    pub limit: u32,
}

impl ConcurrencySlot {
    /// The slot's name in a store's index: scope and key with a separator neither has.
    pub fn index_key(&self) -> String {
        format!("{}\u{1f}{}", self.scope, self.key)
    }
}

/// Who provoked which agent with what: everything a new invocation starts from.
#[derive(Debug, Clone)]
pub struct Provocation {
    pub id: String,
    /// Its number in the store's invocation sequence.
    pub seq: u64,
    pub trigger: String,
    pub agent: String,
    pub event: Value,
    pub event_id: String,
    pub event_type: String,
    pub depth: u32,
    pub risk: String,
    pub max_attempts: u32,
}

impl Invocation {
    /// A new invocation with no attempt yet: awaiting approval until `approval_deadline`
    /// when it has one, else queued.
    pub fn new(p: Provocation, approval_deadline: Option<i64>, now: i64) -> Invocation {
        Invocation {
            id: p.id,
            seq: p.seq,
            status: if approval_deadline.is_some() {
                Status::AwaitingApproval
            } else {
                Status::Queued
            },
            trigger: p.trigger,
            agent: p.agent,
            event_id: p.event_id,
            event_type: p.event_type,
            depth: p.depth,
            risk: p.risk,
            attempts: 0,
            max_attempts: p.max_attempts,
            created_at: now,
            updated_at: now,
            approval_deadline,
            approval: None,
            approval_request: None,
            next_attempt_at: None,
            lease: None,
            output: None,
            error: None,
            emitted: Vec::new(),
            history: Vec::new(),
            event: p.event,
            internal: false,
            notifications: Vec::new(),
            retry_of: None,
            concurrency: Vec::new(),
            stopping_until: None,
            cancel: None,
            trace: None,
        }
    }

    /// A bare invocation for unit tests: every optional part empty, no attempt yet.
    #[cfg(any(test, feature = "test-support"))]
    pub fn for_tests(id: &str, status: Status) -> Invocation {
        let provocation = Provocation {
            id: id.into(),
            seq: 1,
            trigger: "t".into(),
            agent: "a".into(),
            event: Value::Object(Default::default()),
            event_id: "e".into(),
            event_type: "a.b.c".into(),
            depth: 0,
            risk: "high".into(),
            max_attempts: 3,
        };
        Invocation {
            status,
            ..Invocation::new(provocation, None, 0)
        }
    }

    /// The status as of `now`: one awaiting approval past its deadline has expired, even
    /// before a writer (serve, a dispatch, an approval) records it. Readers show this, and
    /// never write to record it.
    pub fn status_at(&self, now: i64) -> Status {
        match (self.status, self.approval_deadline) {
            (Status::AwaitingApproval, Some(deadline)) if deadline <= now => Status::Expired,
            (status, _) => status,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ApprovalDecision {
    pub approved: bool,
    pub by: String,
    pub at: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// A process, by pid and start time: the holder of a lease (see `super::lease`), the owner
/// of an emitted event waiting for its decision, the leader of an agent's process group. See
/// `crate::liveness`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Runner {
    pub pid: u32,
    pub since: i64,
    /// The process's start time (Linux: clock ticks after boot), so a reused pid is not
    /// mistaken for the runner.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started: Option<u64>,
}

/// An emitted event waiting for its decision, and the process that will make it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct OutboxEntry {
    pub owner: Option<Runner>,
    pub event: Value,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Attempt {
    pub attempt: u32,
    pub started_at: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// What an LLM agent's attempt said and did (none for `command` agents).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transcript: Option<Transcript>,
    /// The process group (its leader, the agent's supervisor, by pid and start time) of a
    /// command agent's run that pap's crash cut short, as the recovery found it (see
    /// `agent::groups`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<Runner>,
    /// The attempt's span when traces are exported: the context its emitted events
    /// and a command agent's `TRACEPARENT` carry on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<crate::trace_context::TraceContext>,
}

/// One LLM attempt: each model turn with its tool calls, token usage and timings. Texts are
/// truncated (see `agent::llm::transcript`) so a chatty model cannot bloat the store.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Transcript {
    pub provider: String,
    pub model: String,
    #[serde(default)]
    pub turns: Vec<Turn>,
    /// Every input token, those read from the provider's prompt cache included.
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// The input tokens read from the provider's prompt cache (part of `input_tokens`,
    /// priced at `cached_input`).
    #[serde(default, skip_serializing_if = "crate::is_zero")]
    pub cached_input_tokens: u64,
    /// The input tokens written to the provider's prompt cache (part of `input_tokens`,
    /// priced at `cache_write`: Anthropic bills them above the input rate).
    #[serde(default, skip_serializing_if = "crate::is_zero")]
    pub cache_write_input_tokens: u64,
    /// What the run cost at `prices` in pap.yaml as it ran; none when its model has no price.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<super::money::Cost>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Turn {
    /// Wall-clock milliseconds of the provider request (retries included).
    pub request_ms: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<String>,
    /// The model's text in this turn (truncated).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub text: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCallRecord>,
    pub input_tokens: u64,
    pub output_tokens: u64,
    #[serde(default, skip_serializing_if = "crate::is_zero")]
    pub cached_input_tokens: u64,
    #[serde(default, skip_serializing_if = "crate::is_zero")]
    pub cache_write_input_tokens: u64,
    /// Notifications (and session posts) queued while the loop ran, carried on the request
    /// after this turn's tool results (JP RFD 011).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub carried: Vec<super::notification::Carried>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ToolCallRecord {
    /// The provider's call id (the tool result answers it).
    pub id: String,
    pub tool: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub server: String,
    /// The arguments as the model sent them (truncated).
    pub arguments: String,
    /// What went back to the model (truncated).
    pub result: String,
    pub is_error: bool,
    /// ANP 6.1: a call that reaches outside; the user is told of each.
    pub external: bool,
    /// Refused by pap before reaching a server (unlisted tool, invalid arguments, no approval).
    pub refused: bool,
    pub duration_ms: u64,
}
