//! Token and money budgets at run time (a pap extension; the decision side is
//! `stages::budget`): a run of an agent with `budget.tokens_per_day` or a budget in money
//! reserves the most it may use before it starts, in the transaction that starts it, and
//! settles to what it used when it ends. Runs that start together therefore cannot spend
//! past the budget, and a run that would not fit waits (queued, due when enough spending has
//! left the 24-hour window). A run's money reservation is its token bound priced at the
//! model's dearest rate, since the bound counts input and output together.

use crate::domain::Invocation;
use crate::domain::budget::{self, Measure, TokenUse};
use crate::domain::money::format_micros;
use crate::manifest::compiled::Agent;
use crate::manifest::prices::Prices;
use crate::stages::budget::reservation;
use crate::storage::{self, WriteTx};

/// When a run whose model has no price checks again whether it has one (a reload may add it).
const UNPRICED_RECHECK_MS: i64 = 60 * 60 * 1000;

/// Reserves the run's tokens and money, or says why it must wait and until when (ms).
pub fn reserve(
    tx: &mut dyn WriteTx,
    agent: &Agent,
    prices: &Prices,
    inv: &Invocation,
    now: i64,
) -> storage::Result<Result<(), (String, i64)>> {
    let r = reservation(agent, prices);
    if !r.any() {
        return Ok(Ok(()));
    }
    let mut uses = tx.token_uses(&agent.id)?;
    // A reservation left by an attempt of this invocation that never ended is replaced.
    uses.retain(|u| !(u.reserved && u.invocation == inv.id));
    let mut reserved = TokenUse {
        at: now,
        tokens: 0,
        micros: 0,
        invocation: inv.id.clone(),
        reserved: true,
    };
    if let Some((needed, max)) = r.tokens {
        if let Err(wait) = fits(&uses, Measure::Tokens, needed, max, now) {
            return Ok(Err((
                format!(
                    "waiting for the token budget: a run reserves {needed} tokens, and {} of agent {}'s {max} for the last 24h are used or reserved; room at {}",
                    wait.used,
                    agent.id,
                    crate::clock::rfc3339_ms(wait.at)
                ),
                wait.at,
            )));
        }
        reserved.tokens = needed;
    }
    match r.money {
        Some(Ok((needed, max))) => {
            if let Err(wait) = fits(&uses, Measure::Money, needed, max, now) {
                let currency = &prices.currency;
                return Ok(Err((
                    format!(
                        "waiting for the money budget: a run reserves {} {currency}, and {} of agent {}'s {} {currency} for the last 24h are spent or reserved; room at {}",
                        format_micros(needed),
                        format_micros(wait.used),
                        agent.id,
                        format_micros(max),
                        crate::clock::rfc3339_ms(wait.at)
                    ),
                    wait.at,
                )));
            }
            reserved.micros = needed;
        }
        Some(Err(_)) => {
            return Ok(Err((
                format!(
                    "waiting for a price: agent {} has a budget in money, but its model has no price in pap.yaml's `prices`",
                    agent.id
                ),
                now.saturating_add(UNPRICED_RECHECK_MS),
            )));
        }
        None => {}
    }
    uses.retain(|u| u.at > now.saturating_sub(budget::DAY_MS));
    uses.push(reserved);
    tx.set_token_uses(&agent.id, &uses)?;
    Ok(Ok(()))
}

struct Wait {
    used: u64,
    at: i64,
}

fn fits(uses: &[TokenUse], measure: Measure, needed: u64, max: u64, now: i64) -> Result<(), Wait> {
    let used = budget::in_window(uses, measure, now);
    if used.saturating_add(needed) <= max {
        return Ok(());
    }
    let at = budget::room_for(uses, measure, needed, max, now)
        .unwrap_or(now.saturating_add(budget::DAY_MS));
    Err(Wait { used, at })
}

/// Takes the lock of `agent`'s budget now, if it has a token or money budget (a store with
/// several writers serialises work under one budget with it). Decisions and ends of runs take
/// an agent's budget before its concurrency keys (a key belongs to one agent: the trigger's
/// or the agent's own); a start or a failure that takes a key first calls this before, so
/// that no two transactions take the two in opposite orders.
pub fn lock_budget(tx: &mut dyn WriteTx, agent: Option<&Agent>) -> storage::Result<()> {
    if let Some(agent) = agent.filter(|a| budgeted(a)) {
        tx.token_uses(&agent.id)?;
    }
    Ok(())
}

/// Whether runs of `agent` reserve against a budget (prices aside).
fn budgeted(agent: &Agent) -> bool {
    agent.budget.is_some_and(|b| {
        b.run_tokens.is_some() && (b.tokens_per_day.is_some() || b.money_per_day.is_some())
    })
}

/// Turns the reservation of `inv`'s attempt that just ended into what it used.
pub fn settle(
    tx: &mut dyn WriteTx,
    agent: Option<&Agent>,
    inv: &Invocation,
    now: i64,
) -> storage::Result<()> {
    if !agent.is_some_and(budgeted) {
        return Ok(());
    }
    let transcript = inv.history.last().and_then(|a| a.transcript.as_ref());
    let used = transcript.map_or(0, |t| t.input_tokens.saturating_add(t.output_tokens));
    let micros = transcript
        .and_then(|t| t.cost.as_ref())
        .map_or(0, |c| c.micros);
    let mut uses = tx.token_uses(&inv.agent)?;
    budget::settle(&mut uses, &inv.id, used, micros, now);
    tx.set_token_uses(&inv.agent, &uses)
}

/// Whether a run that has used `used` tokens costing `spent` micros may take another turn: a
/// run stays within what it reserved, so the day's budgets hold however the conversation
/// grows.
pub(crate) fn may_take_turn(
    agent: &Agent,
    prices: &Prices,
    used: u64,
    spent: u64,
) -> Result<(), String> {
    let r = reservation(agent, prices);
    if let Some((reserved, _)) = r.tokens
        && used >= reserved
    {
        return Err(format!(
            "stopped: the run used the {reserved} tokens it reserved from agent {}'s daily budget ({used} used)",
            agent.id
        ));
    }
    if let Some(Ok((reserved, _))) = r.money
        && spent >= reserved
    {
        return Err(format!(
            "stopped: the run spent the {} {} it reserved from agent {}'s daily budget ({} spent)",
            format_micros(reserved),
            prices.currency,
            agent.id,
            format_micros(spent)
        ));
    }
    Ok(())
}
