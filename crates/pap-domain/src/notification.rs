//! ANP notifications and the inbox, as plain serde types. The state machine itself (which
//! transition is allowed, leases) lives in `crate::notify`.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// ANP 5.1 states.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "clap", value(rename_all = "snake_case"))]
pub enum NotifyStatus {
    /// Made, not yet handed to its handler.
    Pending,
    /// Handed to its handler (an inbox, a sink, an agent); no one acknowledged it yet.
    Dispatched,
    /// Its handler took it and holds its lease.
    Locked,
    /// Acknowledged: a person saw it, or its agent got it.
    Delivered,
    /// Its delivery deadline passed unacknowledged; escalated to its escalation route.
    Escalated,
    /// It could not be delivered.
    Failed,
}

impl NotifyStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            NotifyStatus::Pending => "pending",
            NotifyStatus::Dispatched => "dispatched",
            NotifyStatus::Locked => "locked",
            NotifyStatus::Delivered => "delivered",
            NotifyStatus::Escalated => "escalated",
            NotifyStatus::Failed => "failed",
        }
    }

    /// ANP 5.1: DELIVERED and FAILED are immutable.
    pub fn is_terminal(self) -> bool {
        matches!(self, NotifyStatus::Delivered | NotifyStatus::Failed)
    }
}

/// JP RFD 011 levels, lowest first.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Level {
    #[default]
    Info,
    Warning,
    Error,
    Critical,
}

impl Level {
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Info => "info",
            Level::Warning => "warning",
            Level::Error => "error",
            Level::Critical => "critical",
        }
    }
}

/// ANP 2.1.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Address {
    #[default]
    User,
    Session,
}

/// ANP 2.2 (target) and 2.3 (handler) share the two values.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Party {
    #[default]
    User,
    Agent,
}

#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Handler {
    #[default]
    System,
    Agent,
}

/// The three ANP flags.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Routing {
    pub address: Address,
    pub target: Party,
    pub handler: Handler,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AgentInstructions {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub directive: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tone_hint: Option<String>,
}

/// One notification (ANP 8.1 plus pap's fields).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Notification {
    pub id: String,
    /// Creation order, for listings.
    pub seq: u64,
    /// `source.name` (JP RFD 011), e.g. `invocation.failed`.
    pub kind: String,
    pub level: Level,
    pub content: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deduplication_key: Option<String>,
    #[serde(default)]
    pub metadata: Map<String, Value>,
    pub routing: Routing,
    /// The user it is addressed to.
    pub user: String,
    /// The session thread, for address `session`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// The agent that handles it (handler agent), receives it (target agent), or is made
    /// aware of it (handler system, target user).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_instructions: Option<AgentInstructions>,
    pub status: NotifyStatus,
    pub owner_lease: u64,
    /// Who holds it now: `system`, `agent:<invocation>`, `watchdog`, `user:<name>`.
    pub owner: String,
    pub created_at: i64,
    pub updated_at: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ack_at: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivery_deadline: Option<i64>,
    /// Inbox messages that carry it, oldest first.
    #[serde(default)]
    pub inbox: Vec<u64>,
    /// The invocation handling it (handler agent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn: Option<String>,
    /// The invocation whose prompt carried it (target agent, handler system).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivered_with: Option<String>,
    /// The turn this critical notification forced (JP RFD 011; target agent, handler
    /// system), which takes it from the agent's queue: a running tool loop leaves it there.
    /// None while it waits to ride on a running loop's next request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forced_turn: Option<String>,
    /// The agent and invocation that were first told of it (any routing), so a later human
    /// acknowledgement reaches that agent at its next turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub told: Option<Told>,
    /// Deliveries to the sinks of pap.yaml.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sinks: Vec<SinkDelivery>,
    /// An approval request's ATP notification object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub atp: Option<Value>,
    /// The answer to an approval request (ATP: a person's response).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<Answer>,
    /// An approval request that closed without an answer: its deadline passed, or an operator
    /// cancelled the invocation. Not an ATP response, so not an `answer`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub closed: Option<Closed>,
    /// Every transition, oldest first (the compliance trail of ANP 5).
    #[serde(default)]
    pub history: Vec<Transition>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Transition {
    pub at: i64,
    /// `None` for the creation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<NotifyStatus>,
    pub to: NotifyStatus,
    pub lease: u64,
    pub by: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl Notification {
    /// A notification `ntf_1` in `status`, every optional part empty (tests).
    #[cfg(any(test, feature = "test-support"))]
    pub fn for_tests(status: NotifyStatus) -> Notification {
        Notification {
            id: "ntf_1".into(),
            seq: 1,
            kind: "invocation.failed".into(),
            level: Level::Error,
            content: "x".into(),
            deduplication_key: None,
            metadata: Default::default(),
            routing: Routing::default(),
            user: "u".into(),
            session: None,
            agent: None,
            agent_instructions: None,
            status,
            owner_lease: 1,
            owner: "system".into(),
            created_at: 0,
            updated_at: 0,
            ack_at: None,
            delivery_deadline: None,
            inbox: vec![],
            turn: None,
            delivered_with: None,
            forced_turn: None,
            told: None,
            sinks: vec![],
            atp: None,
            answer: None,
            closed: None,
            history: vec![],
        }
    }

    /// The id of the ATP approval request it carries, if it carries one.
    /// Whether the purge may remove it at `cutoff` (see `serve::purge`): nothing changed it
    /// since before the cutoff, and nothing in pap will act on it any more: a terminal
    /// status, or shown to a person (dispatched to the system handler, or escalated to it)
    /// and only waiting for an acknowledgement that did not come within the retention; and
    /// no sink delivery still to make. One handed to an agent has a delivery deadline,
    /// which its watchdog acts on, so it is not settled before that.
    pub fn expired_by(&self, cutoff: i64) -> bool {
        let settled = match self.status {
            NotifyStatus::Delivered | NotifyStatus::Failed | NotifyStatus::Escalated => true,
            NotifyStatus::Dispatched => self.delivery_deadline.is_none(),
            NotifyStatus::Pending | NotifyStatus::Locked => false,
        };
        settled
            && self.updated_at < cutoff
            && !self
                .sinks
                .iter()
                .any(|d| matches!(d.state, SinkState::Pending | SinkState::Retrying))
    }

    pub fn atp_id(&self) -> Option<&str> {
        self.atp.as_ref().and_then(|a| a["id"].as_str())
    }

    /// The status as of `now`: one handed to an agent (DISPATCHED) past its delivery
    /// deadline has escalated, even before the watchdog of a writer (serve, a dispatch)
    /// records it. Readers show this and never write to record it.
    pub fn status_at(&self, now: i64) -> NotifyStatus {
        match (self.status, self.delivery_deadline) {
            (NotifyStatus::Dispatched, Some(due)) if due <= now => NotifyStatus::Escalated,
            (status, _) => status,
        }
    }

    /// As [`status_at`](Self::status_at) says, for a view: the status as of `now`, and the
    /// recorded one when they differ.
    pub fn as_of(mut self, now: i64) -> (Notification, Option<NotifyStatus>) {
        let status = self.status_at(now);
        let recorded = (status != self.status).then_some(self.status);
        self.status = status;
        (self, recorded)
    }
}

/// How one sink's delivery of a notification went. A sink that took it says nothing of
/// whether a person saw it: only an acknowledgement makes the notification DELIVERED.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SinkState {
    /// Not sent yet.
    Pending,
    /// The sink accepted it (a webhook's 2xx, a command's exit 0, a line appended).
    #[serde(alias = "delivered")]
    Sent,
    /// An attempt failed; another is due at `next_at`.
    Retrying,
    /// Every attempt failed; `error` says why the last did.
    Failed,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SinkDelivery {
    pub sink: String,
    pub state: SinkState,
    pub attempts: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_at: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// When the sink accepted it (after the request finished).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sent_at: Option<i64>,
    /// The inbox message it sends.
    pub message: u64,
}

impl SinkDelivery {
    /// A delivery to `sink` in `state`, after one attempt (unit tests).
    #[cfg(any(test, feature = "test-support"))]
    pub fn for_tests(sink: &str, state: SinkState) -> SinkDelivery {
        SinkDelivery {
            sink: sink.into(),
            state,
            attempts: 1,
            next_at: None,
            error: None,
            sent_at: None,
            message: 1,
        }
    }
}

/// Why an approval request closed unanswered, and when.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Closed {
    /// `expired` or `cancelled`.
    pub reason: String,
    pub at: i64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Answer {
    pub action_id: String,
    pub responder: Value,
    /// As the response message says (recorded, not checked).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub responded_at: Option<String>,
    pub recorded_at: i64,
}

/// One inbox message: immutable once appended (chat-inbox spec). The notification's live
/// status is joined in when it is read.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct InboxMessage {
    pub id: u64,
    pub ts: i64,
    /// The notification this entry shows; empty for a post (`author` `user` or `assistant`
    /// through MCP), which is a message, not a notification.
    #[serde(default)]
    pub notification_id: String,
    /// `system` (the notification itself), `assistant` (an agent's narration or post) or
    /// `user` (a human's post).
    pub author: String,
    pub kind: String,
    pub level: Level,
    pub content: String,
    pub routing: Routing,
    pub user: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    #[serde(default)]
    pub metadata: Map<String, Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deduplication_key: Option<String>,
    /// An earlier message of the same notification this one replaces (deduplication).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub supersedes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub atp: Option<Value>,
    /// The MIME type of `content`, when a poster named one (`text/markdown`, `text/plain`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime: Option<String>,
    /// Who posted it, for a post made over MCP.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub posted_by: Option<PostedBy>,
    /// The inbox message this post answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_reply_to: Option<u64>,
}

impl InboxMessage {
    /// A post made over MCP rather than a notification's entry.
    pub fn is_post(&self) -> bool {
        self.notification_id.is_empty()
    }

    /// A bare message for unit tests: `author` wrote `content`, every optional part empty.
    #[cfg(any(test, feature = "test-support"))]
    pub fn for_tests(author: &str, notification_id: &str, content: &str) -> InboxMessage {
        InboxMessage {
            id: 0,
            ts: 0,
            notification_id: notification_id.into(),
            author: author.into(),
            kind: "invocation.failed".into(),
            level: Level::Error,
            content: content.into(),
            routing: Routing::default(),
            user: "ann".into(),
            session: None,
            metadata: Default::default(),
            deduplication_key: None,
            supersedes: None,
            atp: None,
            mime: None,
            posted_by: None,
            in_reply_to: None,
        }
    }
}

/// An agent that was told of a notification, and the invocation that carried it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Told {
    pub agent: String,
    pub invocation: String,
}

/// The principal behind a post and the MCP client it used (its `clientInfo`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PostedBy {
    pub principal: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_version: Option<String>,
    /// The invocation whose agent posted, when the poster ran inside one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub invocation: Option<String>,
    /// A random id of the MCP session that posted, so that session is never told of its own
    /// post (no self-echo), however soon the post is seen. Not shown in views.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mcp_session: Option<String>,
}

/// A human's post in a session thread, carried to the agent bound to the session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UserPost {
    /// Its inbox id.
    pub message: u64,
    pub session: String,
    pub by: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_reply_to: Option<u64>,
}

/// What an invocation's prompt carried: one queued or handled notification.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Carried {
    pub id: String,
    pub kind: String,
    pub level: Level,
    pub content: String,
    /// The lease the handling agent acts with (handled notifications only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease: Option<u64>,
    /// This invocation handles it (handler agent), rather than just being told.
    #[serde(default)]
    pub handle: bool,
    /// The user already acknowledged it (ANP 5.2): context, not news.
    #[serde(default)]
    pub seen_by_user: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub directive: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tone_hint: Option<String>,
    /// The inbox high-water mark when it was delivered (every system entry at or below it
    /// was already in the inbox: ANP 6.4).
    pub inbox_mark: u64,
    /// The agent was told of it before and the user has acknowledged it since (ANP "seen
    /// by the user"): news about the notification, not the notification again.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub ack_update: bool,
    /// Not a notification: a human's post in the agent's session thread (`content` is the
    /// text), given to the agent as user text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_post: Option<UserPost>,
}
