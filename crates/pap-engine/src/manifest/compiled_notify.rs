//! Checked notification settings: each agent's `notify:` routes and pap.yaml's
//! `notifications:` (user, deadline, delivery filter, sinks).

use std::collections::BTreeMap;
use std::time::Duration;

pub use super::raw::{AtpFlag, SinkKind, WebhookFormat};
use crate::domain::{AgentInstructions, Level, Routing};
use crate::template::Template;

/// What an outcome of an invocation (or a tool call) is, for notifications.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
pub enum OutcomeKind {
    Succeeded,
    Failed,
    AwaitingApproval,
    Rejected,
    Expired,
    /// An operator cancelled it (`pap invocations cancel`).
    Cancelled,
    ExternalToolCall,
}

impl OutcomeKind {
    pub const ALL: [OutcomeKind; 7] = [
        OutcomeKind::Succeeded,
        OutcomeKind::Failed,
        OutcomeKind::AwaitingApproval,
        OutcomeKind::Rejected,
        OutcomeKind::Expired,
        OutcomeKind::Cancelled,
        OutcomeKind::ExternalToolCall,
    ];

    /// The key under `notify:`.
    pub fn key(self) -> &'static str {
        match self {
            OutcomeKind::Succeeded => "succeeded",
            OutcomeKind::Failed => "failed",
            OutcomeKind::AwaitingApproval => "awaiting_approval",
            OutcomeKind::Rejected => "rejected",
            OutcomeKind::Expired => "expired",
            OutcomeKind::Cancelled => "cancelled",
            OutcomeKind::ExternalToolCall => "external_tool_call",
        }
    }

    /// The notification kind, `source.name` (JP RFD 011).
    pub fn kind(self) -> &'static str {
        match self {
            OutcomeKind::Succeeded => "invocation.succeeded",
            OutcomeKind::Failed => "invocation.failed",
            OutcomeKind::AwaitingApproval => "invocation.awaiting_approval",
            OutcomeKind::Rejected => "invocation.rejected",
            OutcomeKind::Expired => "invocation.expired",
            OutcomeKind::Cancelled => "invocation.cancelled",
            OutcomeKind::ExternalToolCall => "tool.external_call",
        }
    }

    pub(crate) fn default_level(self) -> Level {
        match self {
            OutcomeKind::Succeeded | OutcomeKind::ExternalToolCall => Level::Info,
            OutcomeKind::AwaitingApproval
            | OutcomeKind::Rejected
            | OutcomeKind::Expired
            | OutcomeKind::Cancelled => Level::Warning,
            OutcomeKind::Failed => Level::Error,
        }
    }
}

/// One outcome's notification, as the manifest sets it (defaults applied).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct RouteSpec {
    pub enabled: bool,
    pub routing: Routing,
    pub session: Option<Template>,
    pub agent: Option<String>,
    pub level: Option<Level>,
    pub deduplication_key: Option<Template>,
    pub content: Option<Template>,
    pub instructions: Option<AgentInstructions>,
    pub deadline: Option<Duration>,
}

impl Default for RouteSpec {
    fn default() -> Self {
        RouteSpec {
            enabled: true,
            routing: Routing::default(),
            session: None,
            agent: None,
            level: None,
            deduplication_key: None,
            content: None,
            instructions: None,
            deadline: None,
        }
    }
}

/// `notifications:` in pap.yaml, with defaults applied.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct NotifyConfig {
    pub user: String,
    /// ATP `context.project`; `None`: the root directory's name.
    pub project: Option<String>,
    /// The default delivery deadline for handler-agent notifications.
    pub deadline: Duration,
    pub kinds: KindFilter,
    pub sinks: Vec<SinkSpec>,
}

impl Default for NotifyConfig {
    fn default() -> Self {
        NotifyConfig {
            user: default_user(),
            project: None,
            deadline: Duration::from_secs(300),
            kinds: KindFilter::default(),
            sinks: Vec::new(),
        }
    }
}

/// `$USER`, else `user`.
pub(crate) fn default_user() -> String {
    std::env::var("USER")
        .ok()
        .filter(|u| !u.is_empty())
        .unwrap_or_else(|| "user".to_owned())
}

/// JP RFD 011 delivery filter: per source an `enable` switch and per-name switches.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct KindFilter(pub BTreeMap<String, BTreeMap<String, bool>>);

impl KindFilter {
    /// Whether a notification of `kind` (`source.name`) reaches an agent.
    pub fn allows(&self, kind: &str) -> bool {
        let (source, name) = kind.split_once('.').unwrap_or((kind, ""));
        let Some(switches) = self.0.get(source) else {
            return true;
        };
        if switches.get("enable") == Some(&false) {
            return false;
        }
        switches.get(name).copied().unwrap_or(true)
    }
}

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct SinkSpec {
    pub name: String,
    pub target: SinkTarget,
    pub min_level: Level,
    /// Empty: every kind. `*` stands for one whole segment (`invocation.*`).
    pub kinds: Vec<String>,
    pub max_attempts: u32,
    pub backoff: Duration,
    pub timeout: Duration,
}

impl SinkSpec {
    pub fn wants(&self, kind: &str, level: Level) -> bool {
        level >= self.min_level
            && (self.kinds.is_empty() || self.kinds.iter().any(|p| kind_matches(p, kind)))
    }
}

/// `pattern` matches `kind` segment by segment, `*` matching any one segment.
pub(crate) fn kind_matches(pattern: &str, kind: &str) -> bool {
    let mut p = pattern.split('.');
    let mut k = kind.split('.');
    loop {
        match (p.next(), k.next()) {
            (None, None) => return true,
            (Some(a), Some(b)) if a == "*" || a == b => {}
            _ => return false,
        }
    }
}

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub enum SinkTarget {
    /// `url` and `headers` still hold `${NAME}` references, expanded at delivery, so a
    /// secret never sits in the compiled project (or in a log line printing it).
    Webhook {
        url: String,
        headers: BTreeMap<String, String>,
        format: WebhookFormat,
        topic: Option<String>,
    },
    Command {
        program: std::path::PathBuf,
        args: Vec<String>,
    },
    Ndjson {
        path: std::path::PathBuf,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kind_filters_switch_off_a_source_or_single_names() {
        let mut f = KindFilter::default();
        assert!(f.allows("invocation.failed"));
        f.0.insert("tool".into(), [("enable".to_owned(), false)].into());
        f.0.insert(
            "invocation".into(),
            [("succeeded".to_owned(), false)].into(),
        );
        assert!(!f.allows("tool.external_call"));
        assert!(!f.allows("invocation.succeeded"));
        assert!(f.allows("invocation.failed"));
        assert!(kind_matches("invocation.*", "invocation.failed"));
        assert!(!kind_matches("invocation.*", "tool.external_call.x"));
    }
}
