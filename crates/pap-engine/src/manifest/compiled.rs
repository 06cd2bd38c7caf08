//! Checked manifests: what the dispatcher runs on. Paths are parsed, regexes compiled and agents
//! resolved once, at load; nothing here can be invalid.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use super::raw::{Impact, Operator, Provider, RiskLevel, SchemaType, UnknownParentPolicy};
use crate::event_type::TypePattern;
use crate::jsonpath::JsonPath;

/// A whole project: config, triggers and agents, all cross-checked.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Project {
    pub root: PathBuf,
    pub config: Config,
    pub triggers: Vec<Trigger>,
    pub agents: Vec<Agent>,
    pub schedules: Vec<Schedule>,
    /// Replaces the secret values this project knows in every text pap stores or prints.
    /// Built from the environment at every load (see `Redactor::for_project`), never cached.
    #[serde(skip)]
    pub(crate) redactor: std::sync::Arc<crate::redact::Redactor>,
}

impl Project {
    /// A project with nothing in it, rooted at `.` (unit tests add what they need).
    #[cfg(test)]
    pub(crate) fn empty_for_tests() -> Project {
        Project {
            root: PathBuf::from("."),
            config: Default::default(),
            triggers: vec![],
            agents: vec![],
            schedules: vec![],
            redactor: Default::default(),
        }
    }

    pub fn agent(&self, id: &str) -> Option<&Agent> {
        self.agents.iter().find(|a| a.id == id)
    }

    pub fn schedule(&self, id: &str) -> Option<&Schedule> {
        self.schedules.iter().find(|s| s.id == id)
    }

    pub fn trigger(&self, id: &str) -> Option<&Trigger> {
        self.triggers.iter().find(|t| t.id == id)
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Trigger {
    pub id: String,
    pub description: Option<String>,
    pub enabled: bool,
    pub pattern: TypePattern,
    pub filter: Vec<Condition>,
    /// Every throttle window; an invocation needs room in each. Empty: no throttle.
    pub(crate) throttles: Vec<Throttle>,
    pub debounce: Option<Debounce>,
    pub concurrency: Option<Concurrency>,
    /// Events that end what it started (a pap extension).
    pub cancel_on: Option<CancelOn>,
    /// Bursts collected into one invocation (a pap extension).
    pub batch: Option<Batch>,
    /// Its invocations' notification routes, per outcome, over the agent's (a pap extension).
    pub notify: BTreeMap<super::compiled_notify::OutcomeKind, super::compiled_notify::RouteSpec>,
    /// Index into [`Project::agents`].
    pub agent: usize,
    pub agent_id: String,
    /// The manifest file, relative to the root.
    pub file: String,
}

/// One filter condition with its value already in the form its operator needs.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Condition {
    pub path: JsonPath,
    pub test: Test,
}

/// A condition's operator and its value in the form the operator uses.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Test {
    #[serde(with = "super::operators::by_name")]
    pub op: &'static super::operators::Operator,
    pub arg: super::operators::Arg,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Throttle {
    pub max_per_window: u64,
    pub window: Duration,
    pub window_key: Option<JsonPath>,
    /// A throttled decision holds the idempotency key only until this window has room.
    pub release_key: bool,
}

/// `batch`: at most `max` events per invocation, collected for `window` from the first, one
/// batch per value of `key`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Batch {
    pub max: u32,
    pub window: Duration,
    pub key: Option<JsonPath>,
}

/// `cancel_on`: events of `pattern` end the trigger's unfinished work with the same `key`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CancelOn {
    pub pattern: TypePattern,
    pub key: JsonPath,
    /// Running invocations too (a graceful stop).
    pub running: bool,
    /// Principals that may cancel any of the trigger's work.
    pub from: Vec<String>,
}

/// At most `limit` invocations run at once per value `key` selects (a pap extension).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Concurrency {
    pub limit: u32,
    pub key: Option<JsonPath>,
}

/// A burst of events is acted on once (a pap extension; see `stages::debounce`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Debounce {
    pub quiet: Duration,
    pub window_key: Option<JsonPath>,
    pub mode: super::raw::DebounceMode,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Agent {
    pub id: String,
    pub description: Option<String>,
    pub risk_level: RiskLevel,
    /// max(risk_level, every tool's risk_override) — PAP 0.2 section 5.
    pub effective_risk: RiskLevel,
    pub model: ModelSpec,
    pub system_prompt: Option<String>,
    pub tools: Vec<ToolSpec>,
    pub(crate) max_runtime: Option<Duration>,
    pub max_tool_calls: Option<u64>,
    pub output: OutputSpec,
    pub(crate) on_complete_emit: Option<String>,
    pub(crate) on_failure_emit: Option<String>,
    pub retry: RetryPolicy,
    pub emits: Vec<String>,
    /// ATP flags of approving a run (the agent's own and its tools').
    pub flags: Vec<super::compiled_notify::AtpFlag>,
    /// What each outcome becomes as a notification; an absent outcome takes the defaults.
    pub notify: BTreeMap<super::compiled_notify::OutcomeKind, super::compiled_notify::RouteSpec>,
    pub concurrency: Option<Concurrency>,
    pub budget: Option<Budget>,
    pub file: String,
}

/// What Anthropic's requests ask for when a manifest sets no `max_tokens` (the API requires
/// one).
pub(crate) const ANTHROPIC_DEFAULT_MAX_TOKENS: u32 = 4096;

/// An agent's spend limits over a sliding 24 hours (a pap extension).
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct Budget {
    pub invocations_per_day: Option<u64>,
    pub tokens_per_day: Option<u64>,
    /// `usd_per_day` or `money_per_day`, in micros of the price table's currency.
    pub money_per_day: Option<u64>,
    /// The budget was written as `usd_per_day` (the price table's currency must be USD).
    pub money_in_usd: bool,
    /// The most tokens one run may use: max_tokens × (max_tool_calls + 1); what it reserves
    /// of `tokens_per_day`, and what its money reservation is priced from. `None` for a
    /// command agent (it spends nothing) or without a token or money budget.
    pub(crate) run_tokens: Option<u64>,
}

impl Agent {
    /// Every event type this agent can cause to be emitted, for the cascade graph.
    pub(crate) fn emitted_types(&self) -> impl Iterator<Item = &str> {
        self.on_complete_emit
            .iter()
            .chain(self.on_failure_emit.iter())
            .chain(self.emits.iter())
            .map(String::as_str)
    }

    pub fn requires_approval(&self) -> bool {
        self.effective_risk == RiskLevel::High
    }

    /// The tools whose own risk is high (their `risk_override`).
    pub fn high_risk_tools(&self) -> Vec<&str> {
        self.tools
            .iter()
            .filter(|t| t.risk == RiskLevel::High)
            .map(|t| t.name.as_str())
            .collect()
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum ModelSpec {
    Anthropic(LlmModel),
    Openai(LlmModel),
    /// A local program run without a shell. `program` is resolved against the project root when
    /// it contains a `/`, otherwise looked up on PATH.
    Command {
        program: PathBuf,
        args: Vec<String>,
        /// `model.env`: besides PATH, locale and `PAP_*`, the program's whole environment;
        /// values still hold `${NAME}`, expanded from pap's environment at each run.
        env: BTreeMap<String, String>,
    },
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LlmModel {
    pub model_id: String,
    pub max_tokens: Option<u32>,
    pub temperature: Option<f64>,
    pub base_url: Option<String>,
    pub api_key_env: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ToolSpec {
    pub name: String,
    /// The MCP server name from `mcp://NAME`.
    pub server: String,
    /// The tool's own risk: its override, else the agent's level.
    pub risk: RiskLevel,
    /// ANP 6.1: the user must be told of each call to an external tool.
    pub external: bool,
    pub flags: Vec<super::compiled_notify::AtpFlag>,
    /// The manifest's `notifications:` switches (JP RFD 011), each a name of
    /// [`ToolSpec::notification_names`]; a name not listed is on. They only decide what an
    /// agent's queue delivers: the user is told of every external call whatever they say.
    pub notifications: BTreeMap<String, bool>,
}

/// The name (source `tool`) of the notification an external tool's call produces:
/// `tool.external_call`, `OutcomeKind::ExternalToolCall`.
pub(crate) const EXTERNAL_CALL: &str = "external_call";

impl ToolSpec {
    /// The notification names (source `tool`, JP RFD 011) a call of this tool produces. The
    /// one list: a new producer of tool notifications adds its name here, and the manifest's
    /// `notifications:` switches are checked against it.
    pub(crate) fn notification_names(&self) -> &'static [&'static str] {
        if self.external { &[EXTERNAL_CALL] } else { &[] }
    }

    /// Whether this tool's notifications named `name` are delivered to an agent.
    pub fn delivers(&self, name: &str) -> bool {
        self.notifications.get(name).copied().unwrap_or(true)
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct OutputSpec {
    pub structured: bool,
    pub schema: Option<BTreeMap<String, SchemaType>>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RetryPolicy {
    /// Total attempts, the first included.
    pub max_attempts: u32,
    /// Delay before attempt 2; doubles for each later attempt.
    pub backoff: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 1,
            backoff: Duration::ZERO,
        }
    }
}

/// The project config, with defaults applied.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Config {
    /// Relative to the root unless absolute.
    pub state_dir: PathBuf,
    pub spool_dir: Option<PathBuf>,
    /// `store:`: the PostgreSQL URL of the state, as written (checked by lint; parsed when
    /// the store opens, with the environment's password).
    pub store: Option<String>,
    /// `store_cache:`: the bytes redb's page cache may take in a process that writes.
    pub store_cache: u64,
    pub idempotency_ttl: Duration,
    pub max_cascade_depth: u32,
    pub approval_timeout: Duration,
    pub unknown_triggered_by: UnknownParentPolicy,
    pub max_event_bytes: u64,
    /// Nodes one JSONPath evaluation may visit.
    pub(crate) jsonpath_max_nodes: usize,
    /// Bytes of selected values `--explain` quotes per condition.
    pub(crate) jsonpath_max_saw_bytes: usize,
    pub mcp_servers: BTreeMap<String, McpServerSpec>,
    pub serve: ServeConfig,
    pub notify: super::compiled_notify::NotifyConfig,
    /// Environment variables whose values are redacted wherever they appear (`secrets:`).
    pub secrets: Vec<String>,
    /// `listen:`: serve's HTTP listener.
    pub listen: super::compiled_listen::ListenConfig,
    /// `adapters:` merged with the built-in presets.
    pub adapters: Vec<crate::adapter::Adapter>,
    /// `chat:`.
    pub chat: ChatConfig,
    /// `prices:`.
    pub prices: super::prices::Prices,
    /// `traces:`.
    pub traces: TraceConfig,
}

/// `traces:` in pap.yaml, with defaults applied (the `OTEL_*` variables are read where the
/// exporter is made, and win).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TraceConfig {
    pub endpoint: Option<String>,
    pub service_name: String,
    pub max_queue: usize,
    /// `traceparent` on requests to LLM providers (third parties: off by default).
    pub to_providers: bool,
}

impl Default for TraceConfig {
    fn default() -> Self {
        TraceConfig {
            endpoint: None,
            service_name: "pap".to_owned(),
            max_queue: 2048,
            to_providers: false,
        }
    }
}

/// `chat:` in pap.yaml, with defaults applied.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ChatConfig {
    pub max_posts_per_minute: u32,
    /// `None`: the local user of a stdio `pap mcp` may approve.
    pub approvers: Option<Vec<String>>,
}

impl Default for ChatConfig {
    fn default() -> Self {
        ChatConfig {
            max_posts_per_minute: 20,
            approvers: None,
        }
    }
}

/// `serve:` in pap.yaml, with defaults applied.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ServeConfig {
    pub max_concurrent: usize,
    pub grace_period: Duration,
    pub rescan_interval: Duration,
    pub done_retention: Duration,
    pub ledger_retention: Duration,
    pub invocation_retention: Duration,
    pub notification_retention: Duration,
    pub inbox_retention: Duration,
    pub audit_retention: Duration,
    pub spool_settle: Duration,
    /// `serve.lease`: a running attempt's lease on a shared store, renewed every third.
    pub lease: Duration,
    /// `serve.log_decisions`: each event's decisions at INFO, not DEBUG.
    #[serde(default)]
    pub log_decisions: bool,
}

impl Default for ServeConfig {
    fn default() -> Self {
        ServeConfig {
            max_concurrent: 4,
            grace_period: Duration::from_secs(10),
            rescan_interval: Duration::from_secs(5),
            done_retention: Duration::from_secs(7 * 24 * 3600),
            ledger_retention: Duration::from_secs(30 * 24 * 3600),
            invocation_retention: Duration::from_secs(30 * 24 * 3600),
            notification_retention: Duration::from_secs(30 * 24 * 3600),
            inbox_retention: Duration::from_secs(30 * 24 * 3600),
            audit_retention: Duration::from_secs(30 * 24 * 3600),
            spool_settle: Duration::from_secs(1),
            lease: Duration::from_secs(30),
            log_decisions: false,
        }
    }
}

/// A checked cron schedule. Cached by its texts: the cron expression and the zone are
/// parsed again on load (see `ScheduleText`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(into = "ScheduleText", try_from = "ScheduleText")]
pub struct Schedule {
    pub id: String,
    /// Where it is defined, for messages.
    pub file: String,
    pub cron_text: String,
    pub cron: croner::Cron,
    pub timezone: jiff::tz::TimeZone,
    pub timezone_name: String,
    pub enabled: bool,
    pub catch_up: u32,
    pub event_type: String,
    pub data: serde_json::Map<String, Value>,
}

/// A schedule as cached.
#[derive(Serialize, Deserialize)]
pub(crate) struct ScheduleText {
    id: String,
    file: String,
    cron: String,
    timezone: String,
    enabled: bool,
    catch_up: u32,
    event_type: String,
    data: serde_json::Map<String, Value>,
}

impl From<Schedule> for ScheduleText {
    fn from(s: Schedule) -> ScheduleText {
        ScheduleText {
            id: s.id,
            file: s.file,
            cron: s.cron_text,
            timezone: s.timezone_name,
            enabled: s.enabled,
            catch_up: s.catch_up,
            event_type: s.event_type,
            data: s.data,
        }
    }
}

impl TryFrom<ScheduleText> for Schedule {
    type Error = String;
    fn try_from(s: ScheduleText) -> Result<Schedule, String> {
        Ok(Schedule {
            cron: super::compile_schedule::parse_cron(&s.cron)?,
            timezone: jiff::tz::TimeZone::get(&s.timezone).map_err(|e| e.to_string())?,
            id: s.id,
            file: s.file,
            cron_text: s.cron,
            timezone_name: s.timezone,
            enabled: s.enabled,
            catch_up: s.catch_up,
            event_type: s.event_type,
            data: s.data,
        })
    }
}

pub(crate) const MIN_IDEMPOTENCY_TTL: Duration = Duration::from_secs(24 * 3600);

impl Default for Config {
    fn default() -> Self {
        Config {
            state_dir: PathBuf::from(".pap"),
            store: None,
            store_cache: crate::storage::DEFAULT_STORE_CACHE,
            spool_dir: None,
            idempotency_ttl: MIN_IDEMPOTENCY_TTL,
            max_cascade_depth: 3,
            approval_timeout: Duration::from_secs(24 * 3600),
            unknown_triggered_by: UnknownParentPolicy::Reject,
            max_event_bytes: 1024 * 1024,
            jsonpath_max_nodes: crate::jsonpath::DEFAULT_MAX_NODES,
            jsonpath_max_saw_bytes: 1024 * 1024,
            mcp_servers: BTreeMap::new(),
            serve: ServeConfig::default(),
            notify: super::compiled_notify::NotifyConfig::default(),
            secrets: Vec::new(),
            listen: Default::default(),
            adapters: super::compile_adapter::all_presets(),
            chat: ChatConfig::default(),
            prices: Default::default(),
            traces: TraceConfig::default(),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum McpServerSpec {
    Stdio {
        command: String,
        args: Vec<String>,
        env: BTreeMap<String, String>,
    },
    Http {
        url: String,
        headers: BTreeMap<String, String>,
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::compiled_notify::OutcomeKind;

    #[test]
    fn an_external_tool_emits_external_call_which_a_switch_turns_off() {
        let mut tool = ToolSpec {
            name: "echo".into(),
            server: "s".into(),
            risk: RiskLevel::Low,
            external: true,
            flags: vec![],
            notifications: BTreeMap::new(),
        };
        assert_eq!(tool.notification_names(), [EXTERNAL_CALL]);
        // The name is the one the producer writes, under source `tool`.
        assert_eq!(
            OutcomeKind::ExternalToolCall.kind(),
            format!("tool.{EXTERNAL_CALL}")
        );
        assert!(tool.delivers(EXTERNAL_CALL), "on by default");
        tool.notifications.insert(EXTERNAL_CALL.into(), false);
        assert!(!tool.delivers(EXTERNAL_CALL));
        tool.external = false;
        assert!(tool.notification_names().is_empty());
    }
}
