//! Output of `pap dispatch`: one JSON object per event (`--json`, contract section 4), or a
//! human summary with one line per event and one per trigger.

use std::fmt::Write;

use super::Tally;
use crate::pipeline::Options;
use crate::pipeline::report::{EventReport, TriggerReport};
use crate::stages::Outcome;
use crate::term::Paint;

#[derive(Debug, Clone, Copy)]
pub enum Format {
    Json,
    Human(Paint),
    /// `pap serve`: each event becomes a tracing span with one log event per trigger, at
    /// the level [`Detail`] says.
    Log(Detail),
}

/// At which level serve logs each event's decisions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Detail {
    /// DEBUG (the default): an HTTP request's one INFO line counts what its events decided,
    /// and a log under load stays readable.
    Debug,
    /// INFO (`serve.log_decisions: true`): every event's decision per trigger, as a full
    /// access log.
    Info,
}

impl Format {
    pub(crate) fn line(&self, r: &EventReport, out: &mut String) {
        match self {
            Format::Json => {
                out.push_str(&serde_json::to_string(r).expect("reports serialise"));
                out.push('\n');
            }
            Format::Human(p) => {
                let start = out.len();
                human(r, *p, out);
                crate::term::escape_from(out, start);
            }
            Format::Log(detail) => log(r, *detail),
        }
    }

    pub(crate) fn summary(&self, t: &Tally, options: Options) -> Option<String> {
        let Format::Human(p) = self else {
            return None;
        };
        let mut s = format!("{}: ", plural(t.events, "event"));
        let dispatched = t.events - t.invalid - t.no_match;
        let mut parts = vec![format!("{dispatched} dispatched")];
        if t.no_match > 0 {
            parts.push(format!("{} matched no trigger", t.no_match));
        }
        if t.invalid > 0 {
            parts.push(p.red(&format!("{} invalid", t.invalid)));
        }
        s.push_str(&parts.join(", "));
        let order = [
            Outcome::Invoked,
            Outcome::Queued,
            Outcome::AwaitingApproval,
            Outcome::Throttled,
            Outcome::Debounced,
            Outcome::Batched,
            Outcome::BudgetExceeded,
            Outcome::CascadeRejected,
            Outcome::Duplicate,
            Outcome::Filtered,
        ];
        let mut outcomes = Vec::new();
        for o in order {
            let n = t.outcomes.get(o.as_str()).copied().unwrap_or(0);
            if n == 0 {
                continue;
            }
            let mut part = format!("{n} {}", o.as_str().replace('_', " "));
            if o == Outcome::Invoked && !options.dry_run {
                let mut runs = vec![format!("{} succeeded", t.succeeded)];
                if t.failed > 0 {
                    runs.push(p.red(&format!("{} failed", t.failed)));
                }
                part.push_str(&format!(" ({})", runs.join(", ")));
            }
            outcomes.push(part);
        }
        if t.cancelled > 0 {
            outcomes.push(p.yellow(&format!("{} cancelled by cancel_on", t.cancelled)));
        }
        if !outcomes.is_empty() {
            s.push_str("; ");
            s.push_str(&outcomes.join(", "));
        }
        if options.dry_run {
            s.push_str(" (dry run: nothing was recorded or run)");
        }
        s.push('\n');
        Some(s)
    }
}

/// A log event at INFO or DEBUG, as `detail` says.
macro_rules! at {
    ($detail:expr, $($rest:tt)*) => {
        match $detail {
            Detail::Info => tracing::info!($($rest)*),
            Detail::Debug => tracing::debug!($($rest)*),
        }
    };
}

fn log(r: &EventReport, detail: Detail) {
    let span = tracing::info_span!(
        "event",
        id = r.event_id.as_deref().unwrap_or("-"),
        r#type = r.kind.as_deref().unwrap_or("-"),
        input = %r.input,
    );
    let _entered = span.enter();
    for c in &r.cancelled {
        let work = c
            .invocation_id
            .as_deref()
            .unwrap_or("pending debounce fire");
        match &c.refused {
            None => {
                tracing::info!(trigger = %c.trigger, work, was = c.was, started_by = %c.event_id, "cancelled (cancel_on)")
            }
            Some(why) => {
                tracing::warn!(trigger = %c.trigger, work, was = c.was, started_by = %c.event_id, reason = %why, "not cancelled (cancel_on)")
            }
        }
    }
    match r.status {
        // A request's sender is told in its answer (and the request's line counts it); an
        // event from a file or a schedule has no one else to tell.
        "invalid" if r.input.source.as_ref() == "request" => {
            at!(
                detail,
                reason = r.error.as_deref().unwrap_or(""),
                "invalid event"
            )
        }
        "invalid" => tracing::warn!(reason = r.error.as_deref().unwrap_or(""), "invalid event"),
        "no_match" => at!(detail, "no trigger matches the type"),
        _ => {
            for t in &r.triggers {
                if t.outcome == Outcome::Disabled {
                    continue;
                }
                at!(
                    detail,
                    trigger = %t.trigger,
                    agent = %t.agent,
                    outcome = t.outcome.as_str(),
                    invocation = t.invocation_id.as_deref(),
                    reason = t.reason.as_ref().map(tracing::field::display),
                    "decided"
                );
                for h in &t.handed_over {
                    at!(
                        detail,
                        trigger = %h.trigger,
                        agent = %h.agent,
                        outcome = h.outcome.as_str(),
                        invocation = h.invocation_id.as_deref(),
                        reason = h.reason.as_ref().map(tracing::field::display),
                        "batch handed over"
                    );
                }
            }
        }
    }
}

fn human(r: &EventReport, p: Paint, out: &mut String) {
    let id = r.event_id.as_deref().unwrap_or("(no id)");
    let kind = r.kind.as_deref().unwrap_or("(no type)");
    match r.status {
        "invalid" => {
            let _ = writeln!(
                out,
                "{} {}: {} {}",
                p.red("✗"),
                r.input,
                p.red("invalid:"),
                r.error.as_deref().unwrap_or("")
            );
        }
        "no_match" if r.triggers.is_empty() && r.cancelled.is_empty() => {
            let _ = writeln!(
                out,
                "{} {} {}: {}",
                p.dim("·"),
                id,
                kind,
                p.dim("no trigger matches")
            );
        }
        _ => {
            let depth = match r.depth {
                Some(d) if d > 0 => format!(
                    " (depth {d}, triggered by {})",
                    r.triggered_by.as_deref().unwrap_or("?")
                ),
                _ => String::new(),
            };
            let from = if r.input.is_emitted() {
                " emitted".to_owned()
            } else {
                String::new()
            };
            let _ = writeln!(out, "{} {} {}{from}{depth}", p.bold("●"), p.bold(id), kind);
            for c in &r.cancelled {
                cancel_line(c, p, out);
            }
            for t in &r.triggers {
                trigger_line(t, p, out, "    ");
                for h in &t.handed_over {
                    trigger_line(h, p, out, "      ↳ batch handed over: ");
                }
            }
        }
    }
}

fn trigger_line(t: &TriggerReport, p: Paint, out: &mut String, lead: &str) {
    let outcome = t.outcome.as_str().replace('_', " ");
    let painted = match t.outcome {
        Outcome::Invoked if t.result == Some("failed") => p.red(&outcome),
        Outcome::Invoked | Outcome::Queued => p.green(&outcome),
        Outcome::AwaitingApproval
        | Outcome::Throttled
        | Outcome::Debounced
        | Outcome::Batched
        | Outcome::BudgetExceeded
        | Outcome::CascadeRejected => p.yellow(&outcome),
        Outcome::Filtered | Outcome::Duplicate | Outcome::Disabled => p.dim(&outcome),
    };
    let mut line = format!("{lead}{} → {}: {painted}", t.trigger, t.agent);
    if let Some(result) = t.result {
        let attempts = t.attempts.unwrap_or(0);
        let word = if result == "failed" {
            p.red(result)
        } else {
            p.green(result)
        };
        let _ = write!(
            line,
            ", {word} after {}",
            plural(attempts as usize, "attempt")
        );
    }
    if let Some(id) = &t.invocation_id {
        let _ = write!(line, " {}", p.dim(id));
    }
    if let Some(reason) = &t.reason {
        let _ = write!(line, " — {reason}");
    }
    if let Some(emitted) = t.emitted.as_ref().filter(|e| !e.is_empty()) {
        let _ = write!(line, "; emitted {}", emitted.join(", "));
    }
    out.push_str(&line);
    out.push('\n');
    if let Some(ex) = &t.explain {
        let _ = writeln!(out, "        {}", p.dim(&format!("defined in {}", ex.file)));
        let mark = |ok: bool| if ok { p.green("✓") } else { p.red("✗") };
        for c in &ex.conditions {
            let saw = if c.over_budget {
                "nothing: the path went over jsonpath.max_nodes and was stopped".to_owned()
            } else {
                crate::stages::filter::describe_saw(&c.saw.iter().collect::<Vec<_>>())
            };
            let _ = writeln!(out, "        {} {}   saw {saw}", mark(c.holds), c.condition);
        }
        for s in &ex.stages {
            if s.stage == "filter" && s.passed {
                continue;
            }
            let _ = writeln!(out, "        {} {}: {}", mark(s.passed), s.stage, s.note);
        }
    }
}

fn cancel_line(c: &crate::pipeline::cancel_on::Cancellation, p: Paint, out: &mut String) {
    let work = match &c.invocation_id {
        Some(id) => format!("{} ({})", p.dim(id), c.was.replace('_', " ")),
        None => "its pending debounce fire".to_owned(),
    };
    let _ = match &c.refused {
        None => writeln!(
            out,
            "    {} cancel_on: {} {work}, started by {}",
            c.trigger,
            p.yellow("cancelled"),
            c.event_id
        ),
        Some(why) => writeln!(
            out,
            "    {} cancel_on: {} {work} — {why}",
            c.trigger,
            p.dim("left"),
        ),
    };
}

fn plural(n: usize, word: &str) -> String {
    format!("{n} {word}{}", if n == 1 { "" } else { "s" })
}
