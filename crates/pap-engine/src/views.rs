//! The public JSON of pap's records: what the contract promises to scripts (`--json` rows,
//! contract section 5) and what MCP resources and tools show. It lives apart from the
//! commands so that every surface (CLI, MCP, console) shows the same shape and none of them
//! reaches into another's files.

use serde_json::{Value, json};

use crate::clock::rfc3339_ms;
use crate::domain::Invocation;

/// The public JSON of an invocation (`--json` rows, contract section 5); `detail` adds the
/// attempt history and the event.
pub fn invocation(inv: &Invocation, detail: bool) -> Value {
    let opt_time = |t: Option<i64>| t.map(rfc3339_ms);
    let mut v = json!({
        "id": inv.id,
        "status": inv.status.as_str(),
        "trigger": inv.trigger,
        "agent": inv.agent,
        "event_id": inv.event_id,
        "event_type": inv.event_type,
        "risk": inv.risk,
        "depth": inv.depth,
        "attempts": inv.attempts,
        "max_attempts": inv.max_attempts,
        "created_at": rfc3339_ms(inv.created_at),
        "updated_at": rfc3339_ms(inv.updated_at),
        "approval_deadline": opt_time(inv.approval_deadline),
        "next_attempt_at": opt_time(inv.next_attempt_at),
        "approval": inv.approval.as_ref().map(|a| json!({
            "approved": a.approved, "by": a.by, "at": rfc3339_ms(a.at), "note": a.note,
        })),
        "output": inv.output,
        "error": inv.error,
        "emitted": inv.emitted,
        "internal": inv.internal,
        "approval_request": inv.approval_request,
        "notifications": inv.notifications,
        "retry_of": inv.retry_of,
    });
    if let Some(cost) = cost_of_runs(inv) {
        v["cost"] = json!({
            "currency": cost.currency,
            "amount": crate::domain::money::format_micros(cost.micros),
            "micros": cost.micros,
        });
    }
    if detail {
        v["idempotency_key"] = json!(idempotency_key(inv));
        v["history"] = inv
            .history
            .iter()
            .map(|a| {
                let mut row = json!({
                    "attempt": a.attempt,
                    "started_at": rfc3339_ms(a.started_at),
                    "ended_at": opt_time(a.ended_at),
                    "error": a.error,
                });
                if let Some(t) = &a.transcript {
                    row["transcript"] = serde_json::to_value(t).expect("JSON");
                }
                if let Some(g) = &a.group {
                    row["process_group"] = json!(g.pid);
                }
                if let Some(t) = &a.trace {
                    // The attempt's span, to find it in the tracing backend.
                    row["trace"] = json!({"trace_id": t.trace_id, "span_id": t.parent_id});
                }
                row
            })
            .collect();
        v["event"] = inv.event.clone();
    }
    v
}

/// What every priced attempt of `inv` cost together (attempts in another currency, after a
/// change of `prices.currency`, are left out of the sum).
pub fn cost_of_runs(inv: &Invocation) -> Option<crate::domain::money::Cost> {
    let mut costs = inv
        .history
        .iter()
        .filter_map(|a| a.transcript.as_ref()?.cost.as_ref());
    let mut total = costs.next()?.clone();
    for c in costs.filter(|c| c.currency == total.currency) {
        total.micros = total.micros.saturating_add(c.micros);
    }
    Some(total)
}

/// A transcript's tokens and cost on one line: `tokens in 1200 (cached 800) out 90 · cost
/// 0.004512 USD`, or `cost unknown (no price)`.
pub fn spend_line(t: &crate::domain::Transcript) -> String {
    let cached = match (t.cached_input_tokens, t.cache_write_input_tokens) {
        (0, 0) => String::new(),
        (read, 0) => format!(" (cached {read})"),
        (read, written) => format!(" (cached {read}, written to the cache {written})"),
    };
    let cost = t.cost.as_ref().map_or_else(
        || "cost unknown (no price for the model in pap.yaml)".to_owned(),
        |c| format!("cost {}", c.display()),
    );
    format!(
        "tokens in {}{cached} out {} · {cost}",
        t.input_tokens, t.output_tokens
    )
}

/// The PAP idempotency key of the invocation's (event, trigger) pair, in hex (contract
/// section 3); internal notification turns have none.
pub fn idempotency_key(inv: &Invocation) -> Option<String> {
    (!inv.internal).then(|| {
        let key = crate::stages::idempotency::key(&inv.event_id, &inv.trigger);
        crate::stages::idempotency::hex(&key)
    })
}

/// An invocation with its status as of now, the stored one kept in `recorded` when they
/// differ (JSON: `recorded_status`).
pub struct AsOf {
    pub inv: Invocation,
    pub recorded: Option<crate::domain::Status>,
}

impl AsOf {
    pub fn view(&self, detail: bool) -> Value {
        let mut v = invocation(&self.inv, detail);
        if let Some(recorded) = self.recorded {
            v["recorded_status"] = json!(recorded.as_str());
        }
        v
    }
}

pub fn as_of(mut inv: Invocation, now: i64) -> AsOf {
    let status = inv.status_at(now);
    let recorded = (status != inv.status).then_some(inv.status);
    inv.status = status;
    AsOf { inv, recorded }
}
