//! Budget stage (a pap extension): an agent may spend at most `invocations_per_day`
//! invocations, `tokens_per_day` model tokens and `usd_per_day` (or `money_per_day`) in any
//! 24 hours, sliding on the
//! dispatcher's clock (not a calendar day: with one, twice the budget could go around
//! midnight, and the day would need a zone). An invocation counts when it is decided
//! (awaiting approval included); tokens and money count as runs reserve and use them (see
//! `domain::budget`). Past any, the decision is `budget_exceeded`; so is every decision for
//! an agent with a money budget whose model has no price (its cost could not be bounded).

use super::{Outcome, Reason, Verdict};
use crate::domain::budget::{DAY_MS, Measure, TokenUse, in_window, tokens_in_window};
use crate::domain::money::cost_of;
use crate::domain::money::format_micros;
use crate::manifest::compiled::{Agent, Budget, ModelSpec};
use crate::manifest::prices::Prices;

/// Where an agent's invocation times are kept in the throttle windows' table: `:` is
/// outside the trigger id alphabet, so no trigger's window shares it.
pub fn bucket(agent: &str) -> String {
    format!("budget:{agent}")
}

/// What the budget stage knows of prices.
#[derive(Debug, Clone, Copy)]
pub struct Money<'a> {
    /// The price table's currency.
    pub currency: &'a str,
    /// The agent's model has a price (always true without a money budget).
    pub priced: bool,
}

/// `invocations` are the agent's recorded invocation times, `tokens` its token and money uses.
pub fn check(
    budget: &Budget,
    agent: &str,
    invocations: &[i64],
    tokens: &[TokenUse],
    money: Money<'_>,
    now: i64,
) -> Verdict {
    if let Some(max) = budget.invocations_per_day {
        let used = invocations
            .iter()
            .filter(|t| super::throttle::counts(**t, now, DAY_MS))
            .count() as u64;
        if used >= max {
            return exceeded(format!(
                "agent {agent} has used its budget: {used} of {max} invocations in the last 24h"
            ));
        }
    }
    if let Some(max) = budget.tokens_per_day {
        let used = tokens_in_window(tokens, now);
        if used >= max {
            return exceeded(format!(
                "agent {agent} has used its budget: {used} of {max} tokens in the last 24h (runs in progress count what they reserved)"
            ));
        }
    }
    if let Some(max) = budget.money_per_day {
        let currency = money.currency;
        if !money.priced {
            return exceeded(format!(
                "agent {agent} has a budget of {} {currency} a day, but its model has no price in pap.yaml's `prices`: its runs' cost cannot be bounded",
                format_micros(max)
            ));
        }
        let used = in_window(tokens, Measure::Money, now);
        if used >= max {
            return exceeded(format!(
                "agent {agent} has used its budget: {} of {} {currency} in the last 24h (runs in progress count what they reserved)",
                format_micros(used),
                format_micros(max)
            ));
        }
    }
    Verdict::Continue
}

fn exceeded(why: String) -> Verdict {
    Verdict::Stop(Outcome::BudgetExceeded, Reason::Text(why))
}

/// What one run of an agent reserves against its day's budgets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reservation {
    /// (tokens one run reserves, the day's token budget).
    pub tokens: Option<(u64, u64)>,
    /// (micros one run reserves, the day's budget in micros); `Err` with the day's budget
    /// when the agent's model has no price.
    pub money: Option<Result<(u64, u64), u64>>,
}

impl Reservation {
    pub(crate) fn any(&self) -> bool {
        self.tokens.is_some() || self.money.is_some()
    }
}

/// What `agent` reserves per run, when it has a token or money budget (its token bound is
/// worked out when the manifest is compiled).
pub fn reservation(agent: &Agent, prices: &Prices) -> Reservation {
    let Some(b) = agent.budget else {
        return Reservation {
            tokens: None,
            money: None,
        };
    };
    let run = b.run_tokens;
    Reservation {
        tokens: run.zip(b.tokens_per_day),
        money: b.money_per_day.filter(|_| run.is_some()).map(|max| {
            model_price(agent, prices)
                .map(|dearest| (cost_of(run.unwrap_or(0), dearest), max))
                .ok_or(max)
        }),
    }
}

/// The dearest rate of `agent`'s model, in micros per million tokens.
fn model_price(agent: &Agent, prices: &Prices) -> Option<u64> {
    let (provider, model) = match &agent.model {
        ModelSpec::Anthropic(m) => ("anthropic", &m.model_id),
        ModelSpec::Openai(m) => ("openai", &m.model_id),
        ModelSpec::Command { .. } => return None,
    };
    prices.of(provider, model).map(|p| p.dearest())
}

#[cfg(test)]
mod tests {
    use super::*;

    const USD: Money<'static> = Money {
        currency: "USD",
        priced: true,
    };

    #[test]
    fn money_counts_reservations_and_refuses_an_unpriced_model() {
        let b = Budget {
            invocations_per_day: None,
            tokens_per_day: None,
            money_per_day: Some(2_000_000),
            money_in_usd: true,
            run_tokens: Some(100),
        };
        let uses = [TokenUse {
            at: 0,
            tokens: 10,
            micros: 2_000_000,
            invocation: "i1".into(),
            reserved: true,
        }];
        let Verdict::Stop(_, why) = check(&b, "a", &[], &uses, USD, 20) else {
            panic!()
        };
        assert!(
            why.to_string().contains("2.000000 of 2.000000 USD"),
            "{why}"
        );
        assert_eq!(check(&b, "a", &[], &[], USD, 20), Verdict::Continue);
        let unpriced = Money {
            currency: "USD",
            priced: false,
        };
        let Verdict::Stop(_, why) = check(&b, "a", &[], &[], unpriced, 20) else {
            panic!()
        };
        assert!(why.to_string().contains("no price"), "{why}");
    }

    #[test]
    fn invocations_count_over_a_sliding_day() {
        let b = Budget {
            invocations_per_day: Some(2),
            tokens_per_day: None,
            money_per_day: None,
            money_in_usd: false,
            run_tokens: None,
        };
        let times = [0, 1000];
        assert!(matches!(
            check(&b, "a", &times, &[], USD, 5000),
            Verdict::Stop(Outcome::BudgetExceeded, _)
        ));
        // 24 h after the first, one slot is back.
        assert_eq!(check(&b, "a", &times, &[], USD, DAY_MS), Verdict::Continue);
    }

    #[test]
    fn tokens_count_reservations_and_uses() {
        let b = Budget {
            invocations_per_day: None,
            tokens_per_day: Some(1000),
            money_per_day: None,
            money_in_usd: false,
            run_tokens: Some(100),
        };
        let uses = [
            TokenUse {
                at: 0,
                tokens: 600,
                micros: 0,
                invocation: "i1".into(),
                reserved: false,
            },
            TokenUse {
                at: 10,
                tokens: 400,
                micros: 0,
                invocation: "i2".into(),
                reserved: true,
            },
        ];
        let Verdict::Stop(_, why) = check(&b, "a", &[], &uses, USD, 20) else {
            panic!()
        };
        assert!(why.to_string().contains("1000 of 1000 tokens"), "{why}");
        assert_eq!(check(&b, "a", &[], &uses[..1], USD, 20), Verdict::Continue);
    }
}
