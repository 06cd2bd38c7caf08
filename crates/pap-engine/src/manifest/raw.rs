//! Raw manifest types: exactly the YAML a user writes, nothing checked beyond shape.
//!
//! Unknown fields are denied by the schema (so lint reports them) but ignored by serde, so a
//! file whose only problem is a misspelt field still gets its other checks.
//!
//! These types are the single source of the manifest format: `pap schema` prints their JSON
//! Schema, lint checks the located YAML tree against that same schema (so the two can never
//! disagree), and `compile` turns a raw value into a checked manifest.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

/// The only PAP version this dispatcher speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
pub enum PapVersion {
    #[serde(rename = "0.2")]
    V0_2,
}

/// A trigger manifest file (PAP 0.2 section 4).
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
#[schemars(title = "PAP trigger manifest")]
pub struct TriggerFile {
    /// Always "0.2" (quoted: an unquoted 0.2 is a number).
    pub pap_version: PapVersion,
    pub trigger: Trigger,
}

/// A rule that binds an event type to an agent.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct Trigger {
    /// Unique among all triggers of the project. Part of the idempotency key.
    pub id: String,
    /// What the trigger is for, for humans.
    #[serde(default)]
    pub description: Option<String>,
    /// A disabled trigger is loaded and checked but never matches. Default true.
    #[serde(default)]
    pub enabled: Option<bool>,
    /// Which events the trigger considers.
    #[serde(rename = "match")]
    pub(crate) match_: Match,
    /// Guard conditions, all of which must hold (implicit AND).
    #[serde(default)]
    pub filter: Vec<Condition>,
    /// At most `max_per_window` invocations per sliding window; a list of windows (a pap
    /// extension) needs room in every one, e.g. 3 an hour and 7 a day.
    #[serde(default)]
    pub throttle: Option<Throttles>,
    /// A pap extension: act on a burst of events once, at its first event (`leading`) or
    /// once it has been quiet for `seconds` (`trailing`, with the last event's data).
    #[serde(default)]
    pub debounce: Option<Debounce>,
    /// A pap extension: at most `limit` of this trigger's invocations run at once per value
    /// of `key`; the others wait in the queue in the order they were decided.
    #[serde(default)]
    pub concurrency: Option<Concurrency>,
    /// A pap extension: events that end what this trigger started and has not finished (an
    /// alert's resolution ending the run its firing started).
    #[serde(default)]
    pub cancel_on: Option<CancelOn>,
    /// A pap extension: collect a burst of events into one invocation that gets every one of
    /// them, in order (the trailing debounce hands over only the last).
    #[serde(default)]
    pub batch: Option<Batch>,
    /// A pap extension: the notifications of this trigger's invocations, per outcome, as an
    /// agent's `notify:` says them; an outcome named here wins over the agent's.
    #[serde(default)]
    pub notify: Option<Notify>,
    /// The id of the agent to provoke.
    pub agent: String,
}

/// `trigger.batch`: the events of a burst (per value of `key`) are `batched`, and one
/// invocation gets them all once `window` has passed since the first, or once there are `max`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct Batch {
    /// The most events one invocation gets (1 to 1000).
    #[schemars(range(min = 1, max = 1000))]
    pub max: u32,
    /// How long a batch collects from its first event, e.g. `30s`.
    pub window: String,
    /// JSONPath whose value (serialised as JSON) separates batches, e.g. `$.data.groupKey`.
    #[serde(default)]
    pub key: Option<String>,
}

/// `trigger.cancel_on`: an event of `type` ends this trigger's pending debounce fire and its
/// queued and awaiting-approval invocations whose starting event has the same value at
/// `match`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct CancelOn {
    /// The type of the events that cancel, e.g. `alertmanager.alert.resolved`; `*` may stand
    /// for one whole segment.
    #[serde(rename = "type")]
    pub event_type: String,
    /// JSONPath evaluated on both events, e.g. `$.data.fingerprint`: an event ends the work
    /// whose starting event has the same value.
    #[serde(rename = "match")]
    pub key: String,
    /// Also end a running invocation, with the graceful stop `pap invocations cancel` gives.
    /// Default false.
    #[serde(default)]
    pub running: Option<bool>,
    /// Principals of `listen.auth` whose events may cancel any of this trigger's work.
    /// Without them, an event posted over HTTP cancels only work started through the same
    /// adapter route or by the same principal.
    #[serde(default)]
    pub from: Vec<String>,
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct Match {
    /// Event type in dot notation (`domain.object.condition`); `*` may stand for one whole segment.
    #[serde(rename = "type")]
    pub event_type: String,
}

/// One filter condition: the JSONPath `path` evaluated against the whole event, compared with
/// `operator` to `value`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct Condition {
    /// RFC 9535 JSONPath, e.g. `$.data.price_nok_per_kwh`.
    pub path: String,
    pub operator: Operator,
    /// The comparison value: a number for lt/lte/gt/gte, a list for in/not_in, a pattern for
    /// regex, an optional boolean for exists (false inverts it).
    #[serde(default, deserialize_with = "present")]
    pub value: Option<Value>,
}

/// A filter operator of PAP 0.2, by name: one of [`super::operators::ALL`], whose names are
/// the JSON Schema's enum (an unknown one is `unknown-operator`, with the list).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, Deserialize)]
#[serde(transparent)]
pub struct Operator(pub String);

impl Operator {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl JsonSchema for Operator {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Operator".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let names: Vec<&str> = super::operators::names().collect();
        schemars::json_schema!({
            "description": "A filter operator of PAP 0.2.",
            "type": "string",
            "enum": names,
        })
    }
}

/// PAP 0.2's one window, or (a pap extension) a list of windows, each with its own limit,
/// length and window key: an invocation needs room in every one.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum Throttles {
    One(Throttle),
    Several(#[schemars(length(min = 1))] Vec<Throttle>),
}

impl Throttles {
    /// The windows with the YAML path of each (`throttle` or `throttle[i]`), in file order.
    pub fn windows(&self) -> Vec<(&Throttle, Option<usize>)> {
        match self {
            Throttles::One(t) => vec![(t, None)],
            Throttles::Several(list) => {
                list.iter().enumerate().map(|(i, t)| (t, Some(i))).collect()
            }
        }
    }
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct Throttle {
    /// Invocations allowed per window (at least 1).
    #[schemars(range(min = 1))]
    pub max_per_window: i64,
    /// Window length in seconds (1 to 31536000, a year). The window slides on the
    /// dispatcher's clock.
    #[schemars(range(min = 1, max = 31536000))]
    pub window_seconds: i64,
    /// JSONPath whose value (serialised as JSON) separates windows, e.g. `$.data.region`.
    #[serde(default)]
    pub window_key: Option<String>,
    /// A pap extension: a throttled decision holds the event's idempotency key only until
    /// the window has room again, so that a repeat of the event (an alert that keeps firing)
    /// is decided again then instead of being a `duplicate` for the whole key TTL.
    #[serde(default)]
    pub release_key: Option<bool>,
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct Debounce {
    /// The quiet period that ends a burst, in seconds (1 to 31536000, a year).
    #[schemars(range(min = 1, max = 31536000))]
    pub seconds: i64,
    /// JSONPath whose value (serialised as JSON) separates bursts, e.g. `$.data.host`.
    #[serde(default)]
    pub window_key: Option<String>,
    /// `leading`: the first event of a burst provokes, the rest are `debounced`. `trailing`
    /// (default): every event is `debounced`, and once the burst has been quiet for
    /// `seconds` one invocation runs with the last event (`pap serve` fires it).
    #[serde(default)]
    pub mode: Option<DebounceMode>,
}

/// At most `limit` invocations run at once per value of `key` (a pap extension).
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct Concurrency {
    /// Runs at once per key value (at least 1).
    #[schemars(range(min = 1))]
    pub limit: i64,
    /// JSONPath over the event whose value (as JSON) is the key, e.g. `$.data.host`;
    /// without it, one key for all.
    #[serde(default)]
    pub key: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum DebounceMode {
    Leading,
    Trailing,
}

/// An agent manifest file (PAP 0.2 section 5).
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
#[schemars(title = "PAP agent manifest")]
pub struct AgentFile {
    /// Always "0.2" (quoted: an unquoted 0.2 is a number).
    pub pap_version: PapVersion,
    pub agent: Agent,
}

/// What an agent is and what it may do.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct Agent {
    /// Unique among all agents of the project; triggers refer to it.
    pub id: String,
    #[serde(default)]
    pub description: Option<String>,
    /// The agent's own risk; the effective risk is the highest of this and every tool's override.
    pub risk_level: RiskLevel,
    pub model: Model,
    /// Instructions for an LLM agent. Event content never goes here: it is sent as data.
    #[serde(default)]
    pub system_prompt: Option<String>,
    /// The only tools the agent is offered; each is served by an MCP server from pap.yaml.
    #[serde(default)]
    pub tools: Vec<Tool>,
    #[serde(default)]
    pub limits: Option<Limits>,
    #[serde(default)]
    pub output: Option<Output>,
    #[serde(default)]
    pub on_complete: Option<OnComplete>,
    #[serde(default)]
    pub on_failure: Option<OnFailure>,
    /// Extension: event types the agent may emit as follow-ups, besides on_complete/on_failure.
    #[serde(default)]
    pub emits: Vec<String>,
    /// Extension: ATP action flags of approving this agent's run (`destructive`, `costly`, ...).
    #[serde(default)]
    pub flags: Vec<AtpFlag>,
    /// Extension: what each outcome becomes as an ANP notification (routing, level, content).
    #[serde(default)]
    pub notify: Option<Notify>,
    /// A pap extension: at most `limit` runs of this agent at once per value of `key`.
    #[serde(default)]
    pub concurrency: Option<Concurrency>,
    /// A pap extension: what the agent may spend in any 24 hours (sliding, on the
    /// dispatcher's clock); past it, decisions are `budget_exceeded` and a human is told.
    #[serde(default)]
    pub budget: Option<Budget>,
}

/// An agent's spend limits over a sliding 24 hours (either or both).
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct Budget {
    /// Invocations decided (awaiting approval included) in any 24 hours (at least 1).
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub invocations_per_day: Option<i64>,
    /// Model tokens (input and output) in any 24 hours (at least 1); LLM agents only. A run
    /// reserves its most (`model.max_tokens` × (`limits.max_tool_calls` + 1)) when it
    /// starts and settles to what it used when it ends.
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub tokens_per_day: Option<i64>,
    /// US dollars in any 24 hours, at the prices of `prices` in pap.yaml (whose `currency`
    /// must then be USD); LLM agents only. A run reserves what its most tokens would cost
    /// at the model's dearest rate when it starts, and settles to what it cost when it ends.
    #[serde(default)]
    #[schemars(range(min = 0.000001))]
    pub usd_per_day: Option<f64>,
    /// As `usd_per_day`, in the currency `prices.currency` names (e.g. EUR).
    #[serde(default)]
    #[schemars(range(min = 0.000001))]
    pub money_per_day: Option<f64>,
}

/// ATP action flags.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum AtpFlag {
    Destructive,
    Irreversible,
    TimeSensitive,
    AffectsOthers,
    Costly,
    Experimental,
    RequiresConfirmation,
}

impl AtpFlag {
    pub fn as_str(self) -> &'static str {
        match self {
            AtpFlag::Destructive => "destructive",
            AtpFlag::Irreversible => "irreversible",
            AtpFlag::TimeSensitive => "time_sensitive",
            AtpFlag::AffectsOthers => "affects_others",
            AtpFlag::Costly => "costly",
            AtpFlag::Experimental => "experimental",
            AtpFlag::RequiresConfirmation => "requires_confirmation",
        }
    }
}

/// `notify:` in an agent manifest: one entry per outcome; an absent one takes the defaults
/// (address user, target user, handler system).
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct Notify {
    #[serde(default)]
    pub succeeded: Option<NotifyRoute>,
    #[serde(default)]
    pub failed: Option<NotifyRoute>,
    /// The approval request (always to a human: target user, handler system).
    #[serde(default)]
    pub awaiting_approval: Option<NotifyRoute>,
    #[serde(default)]
    pub rejected: Option<NotifyRoute>,
    #[serde(default)]
    pub expired: Option<NotifyRoute>,
    /// An operator cancelled the invocation (`pap invocations cancel`).
    #[serde(default)]
    pub cancelled: Option<NotifyRoute>,
    /// Each call of an EXTERNAL tool (ANP 6.1: the user must be made aware of it).
    #[serde(default)]
    pub external_tool_call: Option<NotifyRoute>,
}

/// How one outcome is notified.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct NotifyRoute {
    /// `false`: this outcome makes no notification. Default true.
    #[serde(default)]
    pub enabled: Option<bool>,
    /// `user` (the user's inbox) or `session` (a session thread). Default user.
    #[serde(default)]
    pub address: Option<crate::domain::Address>,
    /// The session thread for address `session`; may use placeholders like `{event.data.server}`.
    #[serde(default)]
    pub session: Option<String>,
    /// Who must receive it: `user` (guaranteed) or `agent`. Default user.
    #[serde(default)]
    pub target: Option<crate::domain::Party>,
    /// Who handles it: `system` (shown as is) or `agent` (narrated by `agent`). Default system.
    #[serde(default)]
    pub handler: Option<crate::domain::Handler>,
    /// The agent that handles it (handler agent) or receives it (target agent).
    #[serde(default)]
    pub agent: Option<String>,
    /// `info`, `warning`, `error` or `critical`. The default depends on the outcome.
    #[serde(default)]
    pub level: Option<crate::domain::Level>,
    /// ANP 7.1: notifications with the same key update each other while undelivered.
    #[serde(default)]
    pub deduplication_key: Option<String>,
    /// The text; placeholders `{agent}`, `{trigger}`, `{error}`, `{event.data.x}`, ...
    #[serde(default)]
    pub content: Option<String>,
    /// ANP agent_instructions.directive, for the handling agent.
    #[serde(default)]
    pub directive: Option<String>,
    /// ANP agent_instructions.tone_hint.
    #[serde(default)]
    pub tone_hint: Option<String>,
    /// How long a handling agent has before the watchdog escalates, e.g. `5m`.
    #[serde(default)]
    pub deadline: Option<String>,
}

/// PAP 0.2 risk levels, lowest first.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    serde::Serialize,
    Deserialize,
    JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum RiskLevel {
    ReadOnly,
    Low,
    Medium,
    High,
}

impl RiskLevel {
    pub fn as_str(self) -> &'static str {
        match self {
            RiskLevel::ReadOnly => "read_only",
            RiskLevel::Low => "low",
            RiskLevel::Medium => "medium",
            RiskLevel::High => "high",
        }
    }
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct Model {
    /// `anthropic`, `openai` (any OpenAI-compatible server), or `command` (a local program).
    pub provider: Provider,
    /// The model name, required for anthropic and openai.
    #[serde(default)]
    pub model_id: Option<String>,
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub max_tokens: Option<u32>,
    #[serde(default)]
    #[schemars(range(min = 0.0, max = 2.0))]
    pub temperature: Option<f64>,
    /// API base URL, as in the provider's SDK (e.g. `http://localhost:11434/v1` for Ollama).
    #[serde(default)]
    pub base_url: Option<String>,
    /// Environment variable holding the API key (default ANTHROPIC_API_KEY / OPENAI_API_KEY).
    #[serde(default)]
    pub api_key_env: Option<String>,
    /// For provider `command`: the program and its arguments, never through a shell.
    #[serde(default)]
    pub command: Option<Vec<String>>,
    /// For provider `command`: the program's environment besides PATH, the locale variables
    /// and `PAP_*`; `${NAME}` takes NAME from pap's environment, `$$` is a literal `$`.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Provider {
    Anthropic,
    Openai,
    Command,
}

impl Provider {
    pub fn as_str(self) -> &'static str {
        match self {
            Provider::Anthropic => "anthropic",
            Provider::Openai => "openai",
            Provider::Command => "command",
        }
    }
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct Tool {
    /// The tool's name as its MCP server lists it.
    pub name: String,
    /// `mcp://NAME`, NAME being a server defined under `mcp_servers` in pap.yaml.
    pub source: String,
    /// Risk of calling this tool; raises the invocation's effective risk.
    #[serde(default)]
    pub risk_override: Option<RiskLevel>,
    /// Whether a call reaches outside (the user is told of every external call). Default external.
    #[serde(default)]
    pub impact: Option<Impact>,
    /// ATP action flags this tool adds to an approval request (`destructive`, `costly`, ...).
    #[serde(default)]
    pub flags: Vec<AtpFlag>,
    /// JP RFD 011 per-tool switches, by the names this tool emits (source `tool`; an external
    /// tool emits `external_call`, an internal one none): `NAME: false` keeps them from being
    /// delivered to an agent (its queue). Default: all on. It never stops the user from being
    /// told of an external call (ANP 6.1 requires that); only the agent's copy is held back.
    #[serde(default)]
    pub notifications: BTreeMap<String, bool>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Impact {
    Internal,
    External,
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct Limits {
    /// Wall-clock limit for one attempt, in seconds (1 to 86400, a day).
    #[serde(default)]
    #[schemars(range(min = 1, max = 86400))]
    pub max_runtime_seconds: Option<u64>,
    /// Most tool calls one attempt may make.
    #[serde(default)]
    pub max_tool_calls: Option<u64>,
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct Output {
    /// `structured` (a JSON object, checked against `schema`) or `text`.
    #[serde(rename = "type")]
    pub(crate) output_type: OutputType,
    /// Field name → type, for structured output.
    #[serde(default)]
    pub schema: Option<BTreeMap<String, SchemaType>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum OutputType {
    Structured,
    Text,
}

/// The JSON types an output field may have.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SchemaType {
    String,
    Number,
    Integer,
    Boolean,
    Array,
    Object,
}

impl SchemaType {
    pub fn as_str(self) -> &'static str {
        match self {
            SchemaType::String => "string",
            SchemaType::Number => "number",
            SchemaType::Integer => "integer",
            SchemaType::Boolean => "boolean",
            SchemaType::Array => "array",
            SchemaType::Object => "object",
        }
    }
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct OnComplete {
    /// Event type emitted when the agent succeeds, e.g. `pap.agent.invocation.completed`.
    #[serde(default)]
    pub emit_event: Option<String>,
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct OnFailure {
    #[serde(default)]
    pub retry: Option<Retry>,
    /// Event type emitted when the last attempt failed, e.g. `pap.agent.invocation.failed`.
    #[serde(default)]
    pub emit_event: Option<String>,
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct Retry {
    /// Total attempts, the first included (1 to 10).
    #[schemars(range(min = 1, max = 10))]
    pub max_attempts: i64,
    /// Delay before the second attempt (0 to 86400, a day); doubles after each further
    /// failure.
    #[serde(default)]
    #[schemars(range(min = 0, max = 86400))]
    pub backoff_seconds: Option<f64>,
}

/// The project file `pap.yaml` (an extension of PAP 0.2). Every field is optional.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
#[schemars(title = "pap project config (pap.yaml)")]
pub struct ProjectConfig {
    #[serde(default)]
    pub pap_version: Option<PapVersion>,
    /// State directory (store, spool), relative to the project root. Default `.pap`.
    #[serde(default)]
    pub state_dir: Option<String>,
    /// Spool directory watched by `pap serve`. Default `<state_dir>/spool`.
    #[serde(default)]
    pub spool_dir: Option<String>,
    /// Keep the state in PostgreSQL instead of the redb file in `state_dir`, so several
    /// `pap serve` nodes share one set of decisions: a `postgres://user@host:port/db` URL,
    /// without a password (PAP_DATABASE_PASSWORD or PGPASSWORD gives it). TLS with the
    /// certificate verified unless the host is loopback (`sslmode`, `sslrootcert`).
    /// `PAP_DATABASE_URL` wins over it.
    #[serde(default)]
    pub store: Option<String>,
    /// The page cache of the redb file for a process that writes it (`pap dispatch`, `pap
    /// serve`), a size like `64MiB` or `1GiB` (at least 1MiB). Default `256MiB`. It bounds
    /// the memory that grows with the state: a long stream's random idempotency keys read
    /// pages all over the file, and a page not in the cache is read from the file again.
    /// Ignored when the state is in PostgreSQL.
    #[serde(default)]
    pub store_cache: Option<String>,
    /// Follow symbolic links under triggers/, agents/ and schedules/ that lead outside the
    /// project root (links inside it are always followed). Default false.
    #[serde(default)]
    pub follow_symlinks: Option<bool>,
    /// How long idempotency keys are kept, e.g. `48h` (never below 24h). Default `24h`.
    #[serde(default)]
    pub idempotency_ttl: Option<String>,
    /// Events this deep in a `triggered_by` chain are rejected. Default 3.
    #[serde(default)]
    #[schemars(range(min = 1, max = 100))]
    pub max_cascade_depth: Option<u32>,
    /// How long an invocation waits for approval before it expires, e.g. `24h`. Default `24h`.
    #[serde(default)]
    pub approval_timeout: Option<String>,
    /// What to do with an event whose `triggered_by` names an unknown invocation. Default reject.
    #[serde(default)]
    pub unknown_triggered_by: Option<UnknownParentPolicy>,
    /// Largest accepted encoded event, in bytes. Default 1048576 (1 MiB).
    #[serde(default)]
    #[schemars(range(min = 1024))]
    pub max_event_bytes: Option<u64>,
    /// What one JSONPath evaluation over an event may cost (filters, window keys).
    #[serde(default)]
    pub jsonpath: Option<JsonPathLimits>,
    /// MCP servers by name; agents refer to them as `mcp://NAME`.
    #[serde(default)]
    pub mcp_servers: BTreeMap<String, McpServer>,
    /// Settings of `pap serve`; its command-line options win over them.
    #[serde(default)]
    pub serve: Option<ServeSettings>,
    /// Cron schedules that make `pap serve` emit events (also `schedules/**/*.yaml`).
    #[serde(default)]
    pub schedules: Vec<Schedule>,
    /// Notifications: the user, delivery to agents, and sinks besides the inbox.
    #[serde(default)]
    pub notifications: Option<NotificationSettings>,
    /// Environment variables whose values pap redacts wherever they would appear, besides
    /// the ones it knows (API keys, header values, `${NAME}` whose NAME looks secret).
    #[serde(default)]
    pub secrets: Vec<String>,
    /// `pap serve`'s HTTP listener: ingest, health, metrics and the console.
    #[serde(default)]
    pub listen: Option<ListenSettings>,
    /// The chat inbox over MCP (`pap mcp` and `/mcp`): human posts and who answers approvals.
    #[serde(default)]
    pub chat: Option<ChatSettings>,
    /// OpenTelemetry traces of what pap does, over OTLP HTTP/protobuf. Off unless an endpoint
    /// is given here or by `OTEL_EXPORTER_OTLP_ENDPOINT`; the standard `OTEL_*` variables win.
    #[serde(default)]
    pub traces: Option<TraceSettings>,
    /// What model tokens cost, per provider and model, for what runs cost (`invocations
    /// show`, the console, `/metrics`) and money budgets (`budget.usd_per_day`).
    #[serde(default)]
    pub prices: Option<PriceSettings>,
    /// Webhooks mapped to PAP events, each at `/v1/ingest/NAME`. Some are built in (`pap adapt
    /// --help` lists them); an entry with a built-in one's name changes the fields it gives.
    #[serde(default)]
    pub adapters: Vec<AdapterSettings>,
}

/// `traces:` in pap.yaml.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct TraceSettings {
    /// Where spans are posted (OTLP HTTP/protobuf), e.g. `http://otel-collector:4318/v1/traces`.
    /// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` and `OTEL_EXPORTER_OTLP_ENDPOINT` win. Headers
    /// (credentials) only from `OTEL_EXPORTER_OTLP_HEADERS`, never from this file.
    #[serde(default)]
    pub endpoint: Option<String>,
    /// The `service.name` of pap's spans. Default `pap`; `OTEL_SERVICE_NAME` wins.
    #[serde(default)]
    pub service_name: Option<String>,
    /// Spans waiting to be exported, at most; more are dropped and counted
    /// (`pap_trace_spans_dropped_total`). Default 2048.
    #[serde(default)]
    #[schemars(range(min = 1, max = 1000000))]
    pub max_queue: Option<u32>,
    /// Send the `traceparent` header to LLM providers too (third parties). Default false:
    /// HTTP MCP servers and webhook sinks get it, providers do not.
    #[serde(default)]
    pub to_providers: Option<bool>,
}

/// `prices:` in pap.yaml: what a million tokens of each model cost.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct PriceSettings {
    /// The ISO 4217 code every price here is in (three capital letters). Default USD.
    #[serde(default)]
    #[schemars(regex(pattern = r"^[A-Z]{3}$"))]
    pub currency: Option<String>,
    /// Models of `provider: anthropic`, by `model.id`.
    #[serde(default)]
    pub anthropic: BTreeMap<String, ModelPrice>,
    /// Models of `provider: openai` (and OpenAI-compatible servers), by `model.id`.
    #[serde(default)]
    pub openai: BTreeMap<String, ModelPrice>,
}

/// What a million tokens of one model cost, in `prices.currency`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct ModelPrice {
    /// A million input tokens not read from the prompt cache.
    #[schemars(range(min = 0))]
    pub input: f64,
    /// A million output tokens.
    #[schemars(range(min = 0))]
    pub output: f64,
    /// A million input tokens read from the provider's prompt cache. Default: `input`.
    #[serde(default)]
    #[schemars(range(min = 0))]
    pub cached_input: Option<f64>,
    /// A million input tokens written to the prompt cache (Anthropic's
    /// `cache_creation_input_tokens`). Default: 1.25 × `input`, Anthropic's 5-minute cache.
    #[serde(default)]
    #[schemars(range(min = 0))]
    pub cache_write: Option<f64>,
}

/// `chat:` in pap.yaml.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct ChatSettings {
    /// Human posts accepted per minute, all posters together; the rest are refused until
    /// the minute frees up. Bounds a loop of posts and agent replies. Default 20.
    #[serde(default)]
    #[schemars(range(min = 1, max = 10000))]
    pub max_posts_per_minute: Option<u32>,
    /// Who may answer approval requests through `pap mcp` over stdio (the local user, named
    /// by `--as` or `notifications.user`). Default: whoever runs it. Over HTTP, the `approve`
    /// scope of `listen.auth` decides.
    #[serde(default)]
    pub approvers: Option<Vec<String>>,
}

/// One webhook adapter of `adapters:`.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct AdapterSettings {
    /// Letters, digits, `-` and `_`; the route is `/v1/ingest/NAME` unless `path` says.
    pub name: String,
    /// The route, under `/v1/ingest/`.
    #[serde(default)]
    pub path: Option<String>,
    /// How senders prove themselves to this adapter; without it, `listen.auth` decides
    /// (the `ingest` scope).
    #[serde(default)]
    pub auth: Option<AdapterAuthSettings>,
    /// A plain path to an array in the body (`$.alerts`): one event per element.
    #[serde(default)]
    pub each: Option<String>,
    /// The event's fields, each a JSONPath (`$.item.x`) or a template (`{item.x}-{body.y}`)
    /// over `{"item": ELEMENT, "body": BODY}`, or a list of them (the first non-empty wins).
    #[serde(default)]
    pub event: Option<AdapterEventSettings>,
    /// Annotations of each element (`item.annotations.NAME`) whose values are part of the
    /// event's identity, e.g. `[summary]`. None by default: annotations templated with
    /// `{{ $value }}` would otherwise make every repeat of a firing alert a new event.
    #[serde(default)]
    pub identity_annotations: Option<Vec<String>>,
    /// A firing element (`item.status: firing`) received this long after its
    /// `item.startsAt` is a new event, once per whole period (`4h`), so that an alert that
    /// keeps firing is looked at again. Default: never.
    #[serde(default)]
    pub refire_after: Option<String>,
    /// Each element is an alert (`labels`, `annotations`, as Alertmanager's and Grafana's
    /// are): its event's `data` gets `summary` (name, severity, instance and summary
    /// annotation, one line) and `links` (source, runbook, dashboard, silence). The presets
    /// say true.
    #[serde(default)]
    pub alert: Option<bool>,
    /// `alert` (default): one event per element of `each`. `group`: one event per body, with
    /// every element under `data.alerts` (Alertmanager's and Grafana's notification groups).
    #[serde(default)]
    pub per: Option<AdapterPer>,
}

/// `adapters[].per`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum AdapterPer {
    Alert,
    Group,
}

/// `adapters[].auth`.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct AdapterAuthSettings {
    /// A bearer token only this adapter accepts, as `${NAME}`.
    #[serde(default)]
    pub bearer: Option<String>,
    /// An HMAC-SHA256 signature of the body in a header (GitHub's `X-Hub-Signature-256`).
    #[serde(default)]
    pub hmac: Option<HmacSettings>,
}

/// `adapters[].auth.hmac`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct HmacSettings {
    /// The header that carries the signature, e.g. `X-Hub-Signature-256`.
    pub header: String,
    /// The shared secret, as `${NAME}`.
    pub secret: String,
    /// What precedes the hex digest in the header. Default `sha256=`.
    #[serde(default)]
    pub prefix: Option<String>,
}

/// `adapters[].event`.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct AdapterEventSettings {
    #[serde(default)]
    pub id: Option<AdapterField>,
    #[serde(default, rename = "type")]
    pub kind: Option<AdapterField>,
    #[serde(default)]
    pub source: Option<AdapterField>,
    #[serde(default)]
    pub time: Option<AdapterField>,
    /// A JSONPath selecting an object (default `$.item`), or an object built field by field.
    #[serde(default)]
    pub data: Option<AdapterData>,
}

/// An event field: one expression, or alternatives.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum AdapterField {
    One(String),
    Alternatives(#[schemars(length(min = 1))] Vec<String>),
}

/// `adapters[].event.data`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum AdapterData {
    Whole(String),
    Fields(BTreeMap<String, String>),
}

/// `listen:` in pap.yaml: where `pap serve` answers HTTP, and who may do what there.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct ListenSettings {
    /// `HOST:PORT` to listen on, e.g. `127.0.0.1:8080` (`pap serve --listen` wins). Without
    /// it (and without `--listen`), serve answers no HTTP.
    #[serde(default)]
    pub address: Option<String>,
    /// A certificate chain and its private key (PEM files, relative to the project root):
    /// the listener then speaks HTTPS only.
    #[serde(default)]
    pub tls: Option<TlsSettings>,
    /// Host names (with an optional `:PORT`) requests may name in `Host` and `Origin`, besides
    /// the listen address and loopback names. Guards against DNS rebinding and cross-site posts.
    #[serde(default)]
    pub allowed_hosts: Vec<String>,
    /// Allow a non-loopback address with no principal configured. Default false: anyone who
    /// can reach the port could then post events.
    #[serde(default)]
    pub allow_unauthenticated: Option<bool>,
    /// Largest request body in bytes. Default 10485760 (10 MiB).
    #[serde(default)]
    #[schemars(range(min = 1024))]
    pub max_body_bytes: Option<u64>,
    /// How long a client may take to send its headers and its body, e.g. `30s`. Default `30s`.
    #[serde(default)]
    pub read_timeout: Option<String>,
    /// Events waiting to be decided at most; past it, ingest answers 503 with `Retry-After`.
    /// Default 100000.
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub max_queued_events: Option<u64>,
    /// Open connections at most; more wait to be accepted. Default 1024.
    #[serde(default)]
    #[schemars(range(min = 1, max = 65536))]
    pub max_connections: Option<u32>,
    /// Who may do what.
    #[serde(default)]
    pub auth: Option<AuthSettings>,
    /// The console's address as people reach it (behind a proxy, say), e.g.
    /// `https://pap.example.com`: messages sent out (a Slack sink's) link to the invocation
    /// there.
    #[serde(default)]
    pub public_url: Option<String>,
    /// Reverse proxies and ingresses in front of serve, as addresses or CIDRs (`10.0.0.0/8`,
    /// `::1`). From these peers the client's address is taken from `Forwarded` or
    /// `X-Forwarded-For`; from anyone else those headers are ignored. Logs and the back-off
    /// after failed credentials use the client's address. Default: none.
    #[serde(default)]
    pub trusted_proxies: Vec<String>,
}

/// `listen.tls`: PEM files.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct TlsSettings {
    /// The certificate chain, leaf first.
    pub cert: String,
    /// The private key (PKCS#8, PKCS#1 or SEC1).
    pub key: String,
}

/// `listen.auth`.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct AuthSettings {
    /// Named principals, each with a token (from the environment or a file) or a password
    /// hash (inline or from a file).
    #[serde(default)]
    pub principals: Vec<PrincipalSettings>,
    /// What a request without credentials may do. Default: `ingest`, `read` and `metrics`
    /// when no principal is configured, nothing otherwise. Never `approve`.
    #[serde(default)]
    pub anonymous: Option<Vec<crate::manifest::compiled_listen::Scope>>,
}

/// One principal of `listen.auth.principals`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct PrincipalSettings {
    /// The name the audit records (an approval names it as the ATP responder).
    pub name: String,
    /// A bearer token, only as `${NAME}`: taken from pap's environment, which serve reads
    /// once, at start (a reload cannot see a variable set since; use `token_file` to rotate).
    #[serde(default)]
    pub token: Option<String>,
    /// A file holding the bearer token (one line), relative to the project root unless
    /// absolute; read at start and at every reload, so a token rotates without a restart.
    /// Others may not read it and only its owner may write it (e.g. mode 0640), and it
    /// belongs to serve's user or root.
    #[serde(default)]
    pub token_file: Option<String>,
    /// An argon2 password hash in PHC form (`$argon2id$…`), as `pap hash-password` prints.
    #[serde(default)]
    pub password_hash: Option<String>,
    /// A file holding the password hash (one line), relative to the project root unless
    /// absolute; read at start and at every reload. Only its owner may write it, and it
    /// belongs to serve's user or root.
    #[serde(default)]
    pub password_hash_file: Option<String>,
    /// What it may do: `ingest`, `read`, `approve`, `metrics`.
    #[schemars(length(min = 1))]
    pub scopes: Vec<crate::manifest::compiled_listen::Scope>,
}

/// `notifications:` in pap.yaml.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct NotificationSettings {
    /// The user notifications are addressed to. Default `$USER`, else `user`.
    #[serde(default)]
    pub user: Option<String>,
    /// The project named in approval requests (ATP `context.project`). Default the root's name.
    #[serde(default)]
    pub project: Option<String>,
    /// How long a handling agent has before the watchdog escalates, e.g. `5m`. Default `5m`.
    #[serde(default)]
    pub deadline: Option<String>,
    /// Which kinds reach agents, by source and name (JP RFD 011): `{tool: {enable: false}}`
    /// turns a source off, `{invocation: {succeeded: false}}` one kind. Applied at delivery.
    #[serde(default)]
    pub kinds: BTreeMap<String, BTreeMap<String, bool>>,
    /// Where notifications go besides the inbox.
    #[serde(default)]
    pub sinks: Vec<Sink>,
}

/// A delivery channel for notifications shown to the user.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct Sink {
    /// Unique name, used in logs and `pap notifications show`.
    pub name: String,
    #[serde(rename = "type")]
    pub kind: SinkKind,
    /// webhook: the URL (POST); `${NAME}` takes NAME from pap's environment.
    #[serde(default)]
    pub url: Option<String>,
    /// webhook: extra headers; `${NAME}` takes NAME from pap's environment.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// webhook: the body: `anp` (the inbox message, default), `slack` or `ntfy`.
    #[serde(default)]
    pub format: Option<WebhookFormat>,
    /// webhook with format ntfy: the topic.
    #[serde(default)]
    pub(crate) topic: Option<String>,
    /// command: the program and its arguments (no shell); the message is its stdin.
    #[serde(default)]
    pub command: Option<Vec<String>>,
    /// ndjson: the file to append to, relative to the root.
    #[serde(default)]
    pub path: Option<String>,
    /// Only notifications at or above this level. Default info (all).
    #[serde(default)]
    pub min_level: Option<crate::domain::Level>,
    /// Only these kinds (`invocation.failed`, `invocation.*`). Default all.
    #[serde(default)]
    pub kinds: Vec<String>,
    /// Total attempts per notification, the first included. Default 5.
    #[serde(default)]
    #[schemars(range(min = 1, max = 100))]
    pub max_attempts: Option<u32>,
    /// Delay before the second attempt; doubles after each. Default 2.
    #[serde(default)]
    #[schemars(range(min = 0.0))]
    pub backoff_seconds: Option<f64>,
    /// Per attempt. Default 10.
    #[serde(default)]
    #[schemars(range(min = 1, max = 3600))]
    pub(crate) timeout_seconds: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SinkKind {
    Webhook,
    Command,
    Ndjson,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum WebhookFormat {
    #[default]
    Anp,
    Slack,
    Ntfy,
}

/// `serve:` in pap.yaml.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct ServeSettings {
    /// How many invocations run at once. Default 4.
    #[serde(default)]
    #[schemars(range(min = 1, max = 1024))]
    pub max_concurrent: Option<u32>,
    /// How long running agents may finish after SIGINT/SIGTERM, e.g. `10s`. Default `10s`.
    #[serde(default)]
    pub grace_period: Option<String>,
    /// How often the spool is rescanned besides file-system events, e.g. `5s`. Default `5s`.
    #[serde(default)]
    pub rescan_interval: Option<String>,
    /// How long processed files stay in `done/`, e.g. `7d`; `0s` deletes them. Default `7d`.
    #[serde(default)]
    pub done_retention: Option<String>,
    /// How long a spool file written in place (not renamed in) must be closed and unchanged
    /// before serve claims it, e.g. `1s`. Default `1s`.
    #[serde(default)]
    pub spool_settle: Option<String>,
    /// How long ledger rows (decisions) are kept, e.g. `30d`. Default `30d`.
    #[serde(default)]
    pub ledger_retention: Option<String>,
    /// How long a finished invocation (succeeded, failed, rejected, expired, cancelled) is
    /// kept after its last change, e.g. `30d`. Default `30d`.
    #[serde(default)]
    pub invocation_retention: Option<String>,
    /// How long a settled notification is kept after its last change, e.g. `30d`: one
    /// delivered, failed, or shown to a person and never acknowledged, with no sink delivery
    /// left. Never less than twice `approval_timeout`. Default `30d`.
    #[serde(default)]
    pub notification_retention: Option<String>,
    /// How long inbox messages are kept, e.g. `30d`. Default `30d`.
    #[serde(default)]
    pub inbox_retention: Option<String>,
    /// How long audit entries are kept, e.g. `90d`. Default `30d`.
    #[serde(default)]
    pub audit_retention: Option<String>,
    /// On a store several nodes share (PostgreSQL): how long a running attempt's lease lasts
    /// unless renewed (it is renewed every third of it), e.g. `30s`. An agent whose lease
    /// was not renewed in time is killed; other nodes take the work over once the lease
    /// lapsed plus as long again. At least `1s`. Default `30s`.
    #[serde(default)]
    pub lease: Option<String>,
    /// Log each event's decision per trigger at INFO (a full access log). Default false:
    /// an HTTP request's one INFO line counts what its events decided, and the per-event
    /// lines are at DEBUG (`PAP_LOG=debug`).
    #[serde(default)]
    pub log_decisions: Option<bool>,
}

/// Budgets of one JSONPath evaluation: an event is untrusted, and a path with descendant
/// segments can otherwise cost far more than the event's size.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(deny_unknown_fields)]
pub struct JsonPathLimits {
    /// Nodes one evaluation may visit; past it, the condition does not hold. Default 100000.
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub max_nodes: Option<u64>,
    /// Bytes of selected values `--explain` quotes per condition. Default 1048576 (1 MiB).
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub(crate) max_saw_bytes: Option<u64>,
}

/// A schedule manifest file: `schedules/**/*.yaml`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
#[schemars(title = "pap schedule manifest")]
pub struct ScheduleFile {
    pub pap_version: PapVersion,
    pub schedule: Schedule,
}

/// A cron schedule: at each fire time `pap serve` emits `event` as a PAP event.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct Schedule {
    pub id: String,
    /// Standard 5-field cron: minute hour day-of-month month day-of-week, e.g. `0 6 * * MON-FRI`.
    pub cron: String,
    /// IANA time zone the cron fields are read in, e.g. `Europe/Berlin`. Default `UTC`.
    #[serde(default)]
    pub timezone: Option<String>,
    /// Default true.
    #[serde(default)]
    pub enabled: Option<bool>,
    /// Fires missed while serve was stopped that are still emitted at start (the latest
    /// ones). Default 0: none.
    #[serde(default)]
    #[schemars(range(min = 0, max = 1000))]
    pub catch_up: Option<u32>,
    pub event: ScheduleEvent,
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct ScheduleEvent {
    /// The event type, in dot notation (`domain.object.condition`).
    #[serde(rename = "type")]
    pub kind: String,
    /// The event's `data`. Default `{}`.
    #[serde(default)]
    pub data: serde_json::Map<String, Value>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum UnknownParentPolicy {
    Reject,
    Accept,
}

/// An MCP server: a local program spoken to over stdio (`command`), or a streamable HTTP `url`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct McpServer {
    #[serde(default)]
    pub description: Option<String>,
    /// Program to start (stdio transport).
    #[serde(default)]
    pub command: Option<String>,
    #[serde(default)]
    pub args: Vec<String>,
    /// The server's whole environment besides PATH; `${NAME}` takes NAME from pap's environment.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Streamable HTTP endpoint.
    #[serde(default)]
    pub url: Option<String>,
    /// HTTP headers for `url`; `${NAME}` takes NAME from pap's environment.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
}

/// Keeps an explicit `null` distinct from an absent key: `value: null` is `Some(Null)`.
fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}
