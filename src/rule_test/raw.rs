//! The rule test file as written (`rule-tests/*.yaml`), and the JSON Schema `pap schema
//! rule-test` prints. Checked for shape by the same schema walk as the manifests, then for
//! meaning by [`super::load`].

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value};

use crate::stages::Outcome;

/// A file of rule tests: cases, each decided on a fresh, throwaway state.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
#[schemars(title = "pap rule tests")]
pub(crate) struct RuleTestFile {
    /// The cases of this file, run in order, each on its own empty state.
    #[schemars(length(min = 1))]
    pub cases: Vec<Case>,
}

/// One scenario: events at offsets from a start time, and what each should decide.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub(crate) struct Case {
    /// What the case shows, as the test report names it.
    pub name: String,
    /// The simulated clock's time at `at: +0s` (RFC 3339). Default 2026-01-01T00:00:00Z.
    #[serde(default)]
    pub start: Option<String>,
    /// The events, decided in this order, each at its own `at`.
    #[schemars(length(min = 1))]
    pub events: Vec<Step>,
    /// Run the agents the events invoke, as `pap dispatch` does (retries included), so a
    /// `result` can be checked. Default false: decisions only.
    #[serde(default)]
    pub run: bool,
}

/// One event of a case and the outcomes expected for it.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub(crate) struct Step {
    /// When the event is decided, as an offset from the case's `start`: `+0s`, `+90s`,
    /// `+1h30m`. Default `+0s`.
    #[serde(default)]
    pub at: Option<String>,
    /// The event inline. Missing `pap_version`, `id`, `source` and `time` are filled in
    /// (`time` is the simulated time of the step).
    #[serde(default)]
    pub event: Option<Map<String, Value>>,
    /// A file holding one JSON event, relative to this test file (instead of `event`).
    #[serde(default)]
    pub file: Option<String>,
    /// A webhook body, mapped to events by an adapter as a post of it to `/v1/ingest/NAME`
    /// is (instead of `event` or `file`). Each event it makes is decided in turn at this
    /// step's time, and `expect` holds for each.
    #[serde(default)]
    pub webhook: Option<WebhookStep>,
    /// Expected outcome per trigger id. Triggers not named are not checked.
    #[serde(default)]
    pub expect: BTreeMap<String, Expectation>,
    /// Expected outcome per trigger of the trailing debounces that fired since the previous
    /// step, up to this step's time (`unmatched`: none fired). A step may have only this.
    #[serde(default)]
    pub fired: BTreeMap<String, Expectation>,
}

/// A webhook body for a step: inline, or from a file.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub(crate) struct WebhookStep {
    /// The adapter: a built-in one (`pap adapt --help` lists them) or a name under
    /// `adapters:` in pap.yaml.
    pub adapter: String,
    /// The body inline, as the sender posts it.
    #[serde(default)]
    pub body: Option<Value>,
    /// A file holding the body, relative to this test file (instead of `body`).
    #[serde(default)]
    pub file: Option<String>,
}

/// An outcome, or an outcome with a substring its reason must contain.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(untagged)]
pub(crate) enum Expectation {
    Outcome(ExpectedOutcome),
    Detailed(DetailedExpectation),
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub(crate) struct DetailedExpectation {
    pub outcome: ExpectedOutcome,
    /// A substring the decision's reason must contain.
    #[serde(default)]
    pub reason: Option<String>,
    /// How the invoked agent's run ended (a case with `run: true`).
    #[serde(default)]
    pub result: Option<ExpectedResult>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum ExpectedResult {
    Succeeded,
    Failed,
}

impl ExpectedResult {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            ExpectedResult::Succeeded => "succeeded",
            ExpectedResult::Failed => "failed",
        }
    }
}

/// What a trigger decided for the event. `unmatched`: the trigger did not consider the event
/// (another type), or (under `fired`) no trailing debounce of it fired. `invoked`: the agent
/// would run (`pap test` does not run agents).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum ExpectedOutcome {
    Invoked,
    Filtered,
    Duplicate,
    CascadeRejected,
    Throttled,
    Debounced,
    Batched,
    BudgetExceeded,
    AwaitingApproval,
    Disabled,
    Unmatched,
}

impl ExpectedOutcome {
    /// The decision this names (`None` for `unmatched`: no decision at all).
    pub(crate) fn outcome(self) -> Option<Outcome> {
        Some(match self {
            ExpectedOutcome::Invoked => Outcome::Invoked,
            ExpectedOutcome::Filtered => Outcome::Filtered,
            ExpectedOutcome::Duplicate => Outcome::Duplicate,
            ExpectedOutcome::CascadeRejected => Outcome::CascadeRejected,
            ExpectedOutcome::Throttled => Outcome::Throttled,
            ExpectedOutcome::Debounced => Outcome::Debounced,
            ExpectedOutcome::Batched => Outcome::Batched,
            ExpectedOutcome::BudgetExceeded => Outcome::BudgetExceeded,
            ExpectedOutcome::AwaitingApproval => Outcome::AwaitingApproval,
            ExpectedOutcome::Disabled => Outcome::Disabled,
            ExpectedOutcome::Unmatched => return None,
        })
    }

    /// As the decisions' own names are written (`pap dispatch --json`).
    pub(crate) fn as_str(self) -> &'static str {
        self.outcome().map_or("unmatched", Outcome::as_str)
    }
}

impl Expectation {
    pub(crate) fn outcome(&self) -> ExpectedOutcome {
        match self {
            Expectation::Outcome(o) => *o,
            Expectation::Detailed(d) => d.outcome,
        }
    }

    pub(crate) fn reason(&self) -> Option<&str> {
        match self {
            Expectation::Outcome(_) => None,
            Expectation::Detailed(d) => d.reason.as_deref(),
        }
    }

    pub(crate) fn result(&self) -> Option<ExpectedResult> {
        match self {
            Expectation::Outcome(_) => None,
            Expectation::Detailed(d) => d.result,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_expected_outcome_reads_as_the_decision_it_names() {
        for name in [
            "invoked",
            "filtered",
            "duplicate",
            "cascade_rejected",
            "throttled",
            "debounced",
            "batched",
            "budget_exceeded",
            "awaiting_approval",
            "disabled",
            "unmatched",
        ] {
            let parsed: ExpectedOutcome = serde_json::from_value(name.into()).unwrap();
            assert_eq!(parsed.as_str(), name);
        }
    }
}
