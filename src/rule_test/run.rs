//! Running rule test cases: each case decides its events through the real decision pipeline,
//! on a fresh store in memory, at simulated times (the case's start plus each step's offset),
//! and compares every expected outcome with what was decided. Agents are not run: an
//! `invoked` decision is recorded and left there.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::load::{Case, Expect, Step, Suite};
use crate::event::input::Location;
use crate::manifest::Project;
use crate::pipeline::report::TriggerReport;
use crate::pipeline::{Options, Pipeline};
use crate::stages::Outcome;
use crate::storage::{self, Storage};

/// How one case went.
#[derive(Debug, Clone)]
pub(crate) struct CaseResult {
    pub file: String,
    pub name: String,
    pub line: u32,
    pub failures: Vec<Failure>,
    pub elapsed: Duration,
}

impl CaseResult {
    pub(crate) fn passed(&self) -> bool {
        self.failures.is_empty()
    }
}

/// One expectation that did not hold, with the value seen.
#[derive(Debug, Clone)]
pub(crate) struct Failure {
    /// The step, counted from 1, and its offset as written.
    pub step: usize,
    pub at: String,
    /// Empty for what a trailing debounce fired.
    pub event_id: String,
    /// The line of the expectation in the test file.
    pub line: u32,
    pub trigger: String,
    /// What was expected and what was seen, as one sentence each.
    pub expected: String,
    pub saw: String,
}

impl Failure {
    /// `event 2 (+90s), trigger energy: expected throttled, saw invoked`.
    pub(crate) fn message(&self) -> String {
        if self.event_id.is_empty() {
            return format!(
                "step {} (at {}), trailing debounce of trigger `{}`: expected {}, saw {}",
                self.step, self.at, self.trigger, self.expected, self.saw
            );
        }
        format!(
            "event {} `{}` (at {}), trigger `{}`: expected {}, saw {}",
            self.step, self.event_id, self.at, self.trigger, self.expected, self.saw
        )
    }
}

/// What the cases exercised, for `--coverage`: per trigger (project order), whether any event
/// was decided by it, and per filter condition whether it was seen holding and failing.
#[derive(Debug, Clone)]
pub(crate) struct Coverage {
    pub decided: Vec<bool>,
    /// `(held, failed)` per condition of each trigger.
    pub conditions: Vec<Vec<(bool, bool)>>,
}

impl Coverage {
    pub(crate) fn new(project: &Project) -> Coverage {
        Coverage {
            decided: vec![false; project.triggers.len()],
            conditions: project
                .triggers
                .iter()
                .map(|t| vec![(false, false); t.filter.len()])
                .collect(),
        }
    }

    fn record(&mut self, index: usize, decided: &TriggerReport) {
        if decided.outcome == crate::stages::Outcome::Disabled {
            return;
        }
        self.decided[index] = true;
        let Some(explain) = &decided.explain else {
            return;
        };
        for (seen, checked) in self.conditions[index].iter_mut().zip(&explain.conditions) {
            if checked.holds {
                seen.0 = true;
            } else {
                seen.1 = true;
            }
        }
    }
}

/// A fresh, empty store for one case (the caller picks the kind: `pap test` keeps each in
/// memory).
pub(crate) type FreshStore<'a> = &'a dyn Fn() -> storage::Result<Arc<dyn Storage>>;

/// Runs every case of `suite`, each on its own store from `fresh_store`.
pub(crate) fn run_suite(
    project: &Arc<Project>,
    suite: &Suite,
    coverage: &mut Coverage,
    fresh_store: FreshStore,
) -> anyhow::Result<Vec<CaseResult>> {
    let pipeline = Pipeline::new(
        project,
        Options {
            no_run: false,
            dry_run: false,
            // Every condition's verdict, for the coverage and for a failure's explanation.
            explain: true,
            leave_blocked: false,
        },
    );
    let index: HashMap<&str, usize> = project
        .triggers
        .iter()
        .enumerate()
        .map(|(i, t)| (t.id.as_str(), i))
        .collect();
    suite
        .cases
        .iter()
        .map(|case| {
            run_case(
                project,
                &pipeline,
                &index,
                suite,
                case,
                coverage,
                fresh_store()?,
            )
        })
        .collect()
}

fn run_case(
    project: &Arc<Project>,
    pipeline: &Pipeline,
    index: &HashMap<&str, usize>,
    suite: &Suite,
    case: &Case,
    coverage: &mut Coverage,
    store: Arc<dyn Storage>,
) -> anyhow::Result<CaseResult> {
    let started = Instant::now();
    // A case that runs its agents runs them as `pap dispatch` does, on the case's clock.
    let rt = if case.run {
        Some(
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?,
        )
    } else {
        None
    };
    let source: Arc<str> = suite.file.as_str().into();
    let mut failures = Vec::new();
    // What trailing debounces made since the last `fired` check, as serve would have made
    // them on its clock.
    let mut fired = Vec::new();
    for (n, step) in case.steps.iter().enumerate() {
        let now = case.start_ms.saturating_add(step.at_ms);
        fired.extend(
            store
                .write(|tx| pipeline.fire_debounced(tx, now))?
                .into_iter()
                .filter_map(|f| f.decided),
        );
        if !step.fired.is_empty() {
            for expect in &step.fired {
                let seen = fired.iter().rev().find(|t| *t.trigger == *expect.trigger);
                if let Some(failure) = check(n + 1, step, expect, seen, Seen::Fired) {
                    failures.push(failure);
                }
            }
            fired.clear();
        }
        let Some(event) = &step.event else {
            continue;
        };
        let input = Location {
            source: source.clone(),
            line: Some(u64::from(step.line)),
            index: None,
        };
        let (mut decided, _body) =
            store.write(|tx| pipeline.decide(tx, event.clone(), None, input.clone(), now))?;
        if let Some(rt) = &rt {
            run_invoked(rt, project, &store, &mut decided.report.triggers, now)?;
        }
        // A batch this event filled was handed over in its decision: for the case, that is
        // a fire (`fired:` checks it), as a batch whose window ends is.
        fired.extend(
            decided
                .report
                .triggers
                .iter()
                .flat_map(|t| t.handed_over.iter().cloned()),
        );
        for t in &decided.report.triggers {
            if let Some(i) = index.get(&*t.trigger) {
                coverage.record(*i, t);
            }
        }
        for expect in &step.expect {
            let seen = decided
                .report
                .triggers
                .iter()
                .find(|t| *t.trigger == *expect.trigger);
            if let Some(failure) = check(n + 1, step, expect, seen, Seen::Decided) {
                failures.push(failure);
            }
        }
    }
    Ok(CaseResult {
        file: suite.file.clone(),
        name: case.name.clone(),
        line: case.line,
        failures,
        elapsed: started.elapsed(),
    })
}

/// Runs the agents a decision invoked, each to its end, and notes how it ended on its
/// trigger's report (as `pap dispatch` reports it). The events the runs emit are not decided
/// in the case.
fn run_invoked(
    rt: &tokio::runtime::Runtime,
    project: &Arc<Project>,
    store: &Arc<dyn storage::Storage>,
    triggers: &mut [TriggerReport],
    now: i64,
) -> anyhow::Result<()> {
    let at = jiff::Timestamp::from_millisecond(now)?;
    let runtime = crate::agent::Runtime {
        project: project.clone(),
        store: store.clone(),
        clock: crate::clock::Clock::fake(at),
        queue_retries: false,
        environment: crate::agent::Environment::ThisCommand,
    };
    for t in triggers.iter_mut() {
        let Some(id) = t
            .invocation_id
            .clone()
            .filter(|_| t.outcome == Outcome::Invoked)
        else {
            continue;
        };
        match rt.block_on(runtime.run(&id)) {
            Ok(r) => {
                t.result = Some(if r.succeeded { "succeeded" } else { "failed" });
                t.attempts = Some(r.attempts);
                if !r.succeeded {
                    t.reason = r.error.map(Into::into);
                }
            }
            Err(crate::agent::RunError::Waiting(w)) => t.reason = Some(w.why.into()),
            Err(e) => return Err(anyhow::anyhow!("running {id}: {e}")),
        }
    }
    Ok(())
}

/// What an expectation is about: the step's own event's decision, or what trailing
/// debounces made since the previous check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Seen {
    Decided,
    Fired,
}

/// Compares one expectation with what was `seen` for its trigger (`None`: not decided, or
/// under `fired`, nothing fired).
fn check(
    n: usize,
    step: &Step,
    expect: &Expect,
    decided: Option<&TriggerReport>,
    what: Seen,
) -> Option<Failure> {
    let saw_outcome = decided.map_or("unmatched", |t| t.outcome.as_str());
    let saw_reason = decided
        .and_then(|t| t.reason.as_ref())
        .map(ToString::to_string);
    let fail = |expected: String, saw: String| Failure {
        step: n,
        at: step.at.clone(),
        event_id: match (what, &step.event) {
            (Seen::Decided, Some(e)) => e.id.clone(),
            _ => String::new(),
        },
        line: expect.line,
        trigger: expect.trigger.clone(),
        expected,
        saw,
    };
    let expected = expect.outcome.as_str();
    if saw_outcome != expected {
        let saw = match (&saw_reason, decided) {
            (Some(reason), _) => format!("{saw_outcome} ({reason})"),
            (None, None) if what == Seen::Fired => {
                "unmatched (no trailing debounce of the trigger fired)".into()
            }
            (None, None) => "unmatched (the trigger did not consider this event's type)".into(),
            (None, Some(_)) => saw_outcome.to_string(),
        };
        return Some(fail(expected.to_string(), saw));
    }
    if let Some(want) = expect.result {
        let got = decided.and_then(|t| t.result).unwrap_or("no run");
        if got != want.as_str() {
            let why = saw_reason
                .as_deref()
                .map_or(String::new(), |r| format!(" ({r})"));
            return Some(fail(
                format!("{expected}, and its run {}", want.as_str()),
                format!("{expected}, and its run {got}{why}"),
            ));
        }
    }
    let wanted = expect.reason.as_deref()?;
    let reason = saw_reason.unwrap_or_default();
    if reason.contains(wanted) {
        return None;
    }
    Some(fail(
        format!("{expected} with a reason containing {wanted:?}"),
        if reason.is_empty() {
            format!("{expected} with no reason")
        } else {
            format!("{expected} with the reason {reason:?}")
        },
    ))
}
