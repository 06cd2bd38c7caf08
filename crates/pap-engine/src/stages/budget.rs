//! Budget stage (a pap extension): an agent may spend at most `invocations_per_day`
//! invocations and `tokens_per_day` model tokens in any 24 hours, sliding on the
//! dispatcher's clock (not a calendar day: with one, twice the budget could go around
//! midnight, and the day would need a zone). An invocation counts when it is decided
//! (awaiting approval included); tokens count as runs reserve and use them (see
//! `domain::budget`). Past either, the decision is `budget_exceeded`.

use super::{Outcome, Reason, Verdict};
use crate::domain::budget::{DAY_MS, TokenUse, tokens_in_window};
use crate::manifest::compiled::Budget;

/// Where an agent's invocation times are kept in the throttle windows' table: `:` is
/// outside the trigger id alphabet, so no trigger's window shares it.
pub fn bucket(agent: &str) -> String {
    format!("budget:{agent}")
}

/// `invocations` are the agent's recorded invocation times, `tokens` its token uses.
pub fn check(
    budget: &Budget,
    agent: &str,
    invocations: &[i64],
    tokens: &[TokenUse],
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
    Verdict::Continue
}

fn exceeded(why: String) -> Verdict {
    Verdict::Stop(Outcome::BudgetExceeded, Reason::Text(why))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invocations_count_over_a_sliding_day() {
        let b = Budget {
            invocations_per_day: Some(2),
            tokens_per_day: None,
            run_tokens: None,
        };
        let times = [0, 1000];
        assert!(matches!(
            check(&b, "a", &times, &[], 5000),
            Verdict::Stop(Outcome::BudgetExceeded, _)
        ));
        // 24 h after the first, one slot is back.
        assert_eq!(check(&b, "a", &times, &[], DAY_MS), Verdict::Continue);
    }

    #[test]
    fn tokens_count_reservations_and_uses() {
        let b = Budget {
            invocations_per_day: None,
            tokens_per_day: Some(1000),
            run_tokens: Some(100),
        };
        let uses = [
            TokenUse {
                at: 0,
                tokens: 600,
                invocation: "i1".into(),
                reserved: false,
            },
            TokenUse {
                at: 10,
                tokens: 400,
                invocation: "i2".into(),
                reserved: true,
            },
        ];
        let Verdict::Stop(_, why) = check(&b, "a", &[], &uses, 20) else {
            panic!()
        };
        assert!(why.to_string().contains("1000 of 1000 tokens"), "{why}");
        assert_eq!(check(&b, "a", &[], &uses[..1], 20), Verdict::Continue);
    }
}
