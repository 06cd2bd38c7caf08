//! `pap lint` for money budgets against `prices:` in pap.yaml: `usd_per_day` needs prices in
//! USD, and a budget in money needs its model's price (without it a run's cost is unknown, and
//! the budget stage refuses the agent's runs: see `stages::budget`).

use super::compiled::{Agent, ModelSpec};
use super::prices::Prices;
use super::yaml_tree::{Located, Node};
use crate::diagnostics::Diagnostic;
use crate::path;

pub(crate) fn check(
    agents: &[Agent],
    trees: &[&Located<Node>],
    prices: &Prices,
    diags: &mut Vec<Diagnostic>,
) {
    for (agent, tree) in agents.iter().zip(trees) {
        let Some(budget) = agent.budget.filter(|b| b.money_per_day.is_some()) else {
            continue;
        };
        let field = if budget.money_in_usd {
            "usd_per_day"
        } else {
            "money_per_day"
        };
        let at = tree.locate(&path!["agent", "budget", field]);
        if budget.money_in_usd && prices.currency != "USD" {
            diags.push(
                Diagnostic::new(
                    "budget-currency",
                    &agent.file,
                    at,
                    format!(
                        "agent {} has `usd_per_day`, but pap.yaml's prices are in {}",
                        agent.id, prices.currency
                    ),
                )
                .with_help(format!(
                    "write `money_per_day` (in {}), or give prices in USD",
                    prices.currency
                )),
            );
            continue;
        }
        let (provider, model) = match &agent.model {
            ModelSpec::Anthropic(m) => ("anthropic", &m.model_id),
            ModelSpec::Openai(m) => ("openai", &m.model_id),
            ModelSpec::Command { .. } => continue,
        };
        // A budget smaller than what one run reserves would let every decision through and
        // no run ever start: refused, as a token budget smaller than one run is.
        if let (Some(price), Some(run), Some(max)) = (
            prices.of(provider, model),
            budget.run_tokens,
            budget.money_per_day,
        ) {
            let needed = crate::domain::money::cost_of(run, price.dearest());
            if needed > max {
                diags.push(
                    Diagnostic::new(
                        "budget-needs-turn-limit",
                        &agent.file,
                        at,
                        format!(
                            "`{field}` {} is less than one run reserves: {} {} ({run} tokens at {provider} `{model}`'s dearest rate): no run could start",
                            crate::domain::money::format_micros(max),
                            crate::domain::money::format_micros(needed),
                            prices.currency
                        ),
                    )
                    .with_help("raise the budget, or lower `model.max_tokens` or `limits.max_tool_calls`"),
                );
            }
            continue;
        }
        if prices.of(provider, model).is_none() {
            diags.push(
                Diagnostic::new(
                    "unpriced-model",
                    &agent.file,
                    at,
                    format!(
                        "agent {} has a budget in money, but {provider} model `{model}` has no price in pap.yaml: its runs are refused (budget_exceeded) until it has one",
                        agent.id
                    ),
                )
                .with_help(format!(
                    "add `prices: {{{provider}: {{{model}: {{input: 3.0, output: 15.0}}}}}}` (per million tokens) to pap.yaml"
                )),
            );
        }
    }
}
