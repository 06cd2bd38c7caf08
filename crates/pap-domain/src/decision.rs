//! What a decision leaves behind: the idempotency claim on an (event, trigger) pair and the
//! ledger row that says how it was decided.

/// An idempotency claim: this (event, trigger) was decided, and how (from its ledger row;
/// `None` if that row is gone).
#[derive(Debug, Clone, PartialEq)]
pub struct Claim {
    pub expires_at: i64,
    pub decided_at: i64,
    pub outcome: Option<String>,
    pub invocation_id: Option<String>,
    /// The (event id, trigger id) the claim was made for, from its ledger row; `None` when
    /// that row is gone or predates the ids (then the claim is taken at its word).
    pub decided_pair: Option<(String, String)>,
}

impl Claim {
    /// Whether this claim is known to belong to another (event id, trigger id) pair: PAP's
    /// key hashes the two ids with nothing between them, so `e1t`+`x` and `e1`+`tx` share it.
    pub fn is_for_another_pair(&self, event_id: &str, trigger_id: &str) -> bool {
        self.decided_pair
            .as_ref()
            .is_some_and(|(e, t)| e != event_id || t != trigger_id)
    }
}

/// The event ledger: one row per (event, trigger) the dispatcher decided (beyond the filter),
/// with the event's cascade depth and the outcome. Written once per decision and stored in
/// blocks (see `ledger_block`); read only for a duplicate's reason and by the sweep.
#[derive(Debug, Clone, PartialEq)]
pub struct LedgerRow {
    pub event_id: String,
    pub trigger: String,
    pub kind: String,
    pub depth: u32,
    pub outcome: String,
    pub invocation_id: Option<String>,
    pub decided_at: i64,
}
