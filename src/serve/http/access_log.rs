//! Serve's one log line per HTTP request: method, path, status, milliseconds, the client's
//! address (and the proxy it came through), and for a request that posted events what was
//! decided, in counts (`events=3 decided="invoked:1 duplicate:2"`). What each event did, per
//! trigger, is logged at DEBUG (`PAP_LOG=debug`), or at INFO with `serve.log_decisions:
//! true`: at thousands of events a second, one line a request is what a log can carry. Probes
//! that succeed (`/healthz`, `/readyz`, `/status`, `/metrics`) log at DEBUG, failures at WARN.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::pipeline::report::EventReport;

/// What a request's events came to, attached to its response for the log line.
#[derive(Debug, Clone, Default)]
pub(crate) struct Decided {
    pub events: usize,
    /// `outcome:count` per outcome of the triggers' decisions (`invalid:N` for events that
    /// were not), ordered by name, space separated.
    pub outcomes: String,
}

impl Decided {
    pub(crate) fn of(reports: &[EventReport]) -> Decided {
        let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
        for r in reports {
            match r.status {
                "invalid" => *counts.entry("invalid").or_default() += 1,
                "no_match" if r.triggers.is_empty() => *counts.entry("no_match").or_default() += 1,
                _ => {}
            }
            for t in &r.triggers {
                *counts.entry(t.outcome.as_str()).or_default() += 1;
                for h in &t.handed_over {
                    *counts.entry(h.outcome.as_str()).or_default() += 1;
                }
            }
        }
        let mut outcomes = String::new();
        for (outcome, n) in counts {
            if !outcomes.is_empty() {
                outcomes.push(' ');
            }
            let _ = write!(outcomes, "{outcome}:{n}");
        }
        Decided {
            events: reports.len(),
            outcomes,
        }
    }
}
