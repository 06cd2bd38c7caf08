//! Deciding for a caller that waits for the answer (HTTP ingest): the group is committed, its
//! invocations are handed to serve's workers, and the reports come back instead of being
//! printed, each invocation shown as `queued` (it has not run yet, as with `--no-run`).

use super::{Dispatcher, Pending};
use crate::pipeline::report::EventReport;
use crate::stages::Outcome;

impl Dispatcher<'_> {
    /// Decides `group` in one durable transaction and returns one report per event, in order.
    /// Needs [`Dispatcher::defer_runs`]: nothing runs before the caller has its answer.
    pub fn decide_queued(&mut self, group: Vec<Pending>) -> anyhow::Result<Vec<EventReport>> {
        let decided = self.commit(group)?;
        let to_run: Vec<String> = decided
            .iter()
            .flat_map(|d| d.to_run.iter().cloned())
            .collect();
        let hand_over = self
            .defer
            .as_ref()
            .expect("decide_queued needs deferred runs");
        if !to_run.is_empty() {
            hand_over(to_run);
        }
        let mut reports: Vec<EventReport> = decided.into_iter().map(|d| d.report).collect();
        for r in &mut reports {
            // Counted as decided (`invoked`), as serve counts its other decisions.
            self.count(r);
            for t in &mut r.triggers {
                if t.outcome == Outcome::Invoked {
                    t.outcome = Outcome::Queued;
                    t.reason = Some("queued; pap serve runs it".into());
                }
            }
        }
        // The log (serve's format) gets its own copy.
        self.printer.send(reports.clone())?;
        Ok(reports)
    }
}
