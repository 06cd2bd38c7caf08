//! Deciding for a caller that waits for the answer (HTTP ingest): the group is committed and
//! the reports come back instead of being printed, each invocation shown as `queued` (it has
//! not run yet, as with `--no-run`). The caller hands the invocations to serve's workers once
//! it has sent its answers, so no agent starts before the sender has its 2xx.

use super::{Dispatcher, Pending};
use crate::pipeline::report::EventReport;
use crate::stages::Outcome;

impl Dispatcher<'_> {
    /// Decides `group` in one durable transaction; returns one report per event, in order,
    /// and the invocations to run.
    pub fn decide_queued(
        &mut self,
        group: Vec<Pending>,
    ) -> anyhow::Result<(Vec<EventReport>, Vec<String>)> {
        let decided = self.commit(group)?;
        let to_run: Vec<String> = decided
            .iter()
            .flat_map(|d| d.to_run.iter().cloned())
            .collect();
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
        Ok((reports, to_run))
    }
}
