//! Token budgets at run time (a pap extension; the decision side is `stages::budget`): a run
//! of an agent with `budget.tokens_per_day` reserves the most it may use before it starts,
//! in the transaction that starts it, and settles to what it used when it ends. Runs that
//! start together therefore cannot spend past the budget, and a run that would not fit waits
//! (queued, due when enough spending has left the 24-hour window).

use crate::domain::Invocation;
use crate::domain::budget::{self, TokenUse, tokens_in_window};
use crate::manifest::compiled::Agent;
use crate::storage::{self, WriteTx};

/// The most one run of `agent` may use and the day's budget, when it has a token budget
/// (the reservation is worked out when the manifest is compiled).
pub fn reservation(agent: &Agent) -> Option<(u64, u64)> {
    let budget = agent.budget?;
    Some((budget.run_tokens?, budget.tokens_per_day?))
}

/// Reserves the run's tokens, or says why it must wait and until when (ms).
pub fn reserve(
    tx: &mut dyn WriteTx,
    agent: &Agent,
    inv: &Invocation,
    now: i64,
) -> storage::Result<Result<(), (String, i64)>> {
    let Some((needed, max)) = reservation(agent) else {
        return Ok(Ok(()));
    };
    let mut uses = tx.token_uses(&agent.id)?;
    // A reservation left by an attempt of this invocation that never ended is replaced.
    uses.retain(|u| !(u.reserved && u.invocation == inv.id));
    let used = tokens_in_window(&uses, now);
    if used.saturating_add(needed) > max {
        let at = budget::room_at(&uses, needed, max, now).unwrap_or(now + budget::DAY_MS);
        let why = format!(
            "waiting for the token budget: a run reserves {needed} tokens, and {used} of agent {}'s {max} for the last 24h are used or reserved; room at {}",
            agent.id,
            crate::clock::rfc3339_ms(at)
        );
        return Ok(Err((why, at)));
    }
    uses.retain(|u| u.at > now.saturating_sub(budget::DAY_MS));
    uses.push(TokenUse {
        at: now,
        tokens: needed,
        invocation: inv.id.clone(),
        reserved: true,
    });
    tx.set_token_uses(&agent.id, &uses)?;
    Ok(Ok(()))
}

/// Takes the lock of `agent`'s token budget now, if it has one (a store with several writers
/// serialises work under one budget with it). Decisions and ends of runs take an agent's
/// budget before its concurrency keys (a key belongs to one agent: the trigger's or the
/// agent's own); a start or a failure that takes a key first calls this before, so that no
/// two transactions take the two in opposite orders.
pub fn lock_budget(tx: &mut dyn WriteTx, agent: Option<&Agent>) -> storage::Result<()> {
    if let Some(agent) = agent.filter(|a| reservation(a).is_some()) {
        tx.token_uses(&agent.id)?;
    }
    Ok(())
}

/// Turns the reservation of `inv`'s attempt that just ended into what it used.
pub fn settle(
    tx: &mut dyn WriteTx,
    agent: Option<&Agent>,
    inv: &Invocation,
    now: i64,
) -> storage::Result<()> {
    if agent.and_then(reservation).is_none() {
        return Ok(());
    }
    let used = inv
        .history
        .last()
        .and_then(|a| a.transcript.as_ref())
        .map_or(0, |t| t.input_tokens.saturating_add(t.output_tokens));
    let mut uses = tx.token_uses(&inv.agent)?;
    budget::settle(&mut uses, &inv.id, used, now);
    tx.set_token_uses(&inv.agent, &uses)
}

/// Whether a run that has used `used` tokens may take another turn: a run stays within what
/// it reserved, so the day's budget holds however the conversation grows.
pub(crate) fn may_take_turn(agent: &Agent, used: u64) -> Result<(), String> {
    match reservation(agent) {
        Some((reserved, _)) if used >= reserved => Err(format!(
            "stopped: the run used the {reserved} tokens it reserved from agent {}'s daily budget ({used} used)",
            agent.id
        )),
        _ => Ok(()),
    }
}
