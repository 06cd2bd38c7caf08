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

impl AuditEntry {
    /// A line for `inv` at `now` (its place in the log, `seq`, is the store's to give).
    pub fn of(
        inv: &crate::Invocation,
        now: i64,
        action: &str,
        actor: Option<String>,
        detail: Option<String>,
    ) -> AuditEntry {
        AuditEntry {
            seq: 0,
            at: now,
            invocation_id: inv.id.clone(),
            trigger: inv.trigger.clone(),
            agent: inv.agent.clone(),
            risk: inv.risk.clone(),
            action: action.to_owned(),
            actor,
            detail,
        }
    }
}

/// Whether invocations of `risk` (as stored) are audited: medium and high (PAP 0.2
/// section 5). Operators' actions are audited at every risk.
pub fn audited(risk: &str) -> bool {
    matches!(risk, "medium" | "high")
}
