//! The append-only audit log of medium and high risk invocations.

use serde::{Deserialize, Serialize};

/// One line of the append-only audit log (medium and high risk invocations).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AuditEntry {
    pub seq: u64,
    pub at: i64,
    pub invocation_id: String,
    pub trigger: String,
    pub agent: String,
    pub risk: String,
    /// `decided`, `approved`, `rejected`, `expired`, `attempt_started`, `attempt_failed`,
    /// `succeeded`, `failed`.
    pub action: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub actor: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}
