//! Whether pap is *degraded*: working, but not doing its job for someone. Two of
//! the conditions are read here from the store, the same way for `pap status`, serve's
//! `GET /status`, `/readyz`'s body and `/metrics`:
//!
//! - an agent whose recent runs all failed: among the newest [`LOOK`] invocations made in the
//!   last 24 hours, its newest [`RECENT`] that ended (succeeded or failed) are all `failed`;
//! - work is due and no serve runs it (this host's serve answers on its socket, or a node of
//!   a shared store was heard from lately).
//!
//! The others are serve's own (a refused reload, a spool it cannot take: see
//! `serve::conditions`) and the sinks' (see `status_report`). Every read here is bounded: a
//! probe's cost does not grow with the store.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::clock::rfc3339_ms;
use crate::domain::Status;
use crate::storage::scan::{Next, Order, Scan};
use crate::storage::{self, Storage};

/// How many of the newest invocations are looked at.
pub(crate) const LOOK: usize = 500;

/// How many of an agent's newest ended runs must all have failed.
pub(crate) const RECENT: usize = 3;

/// Runs older than this say nothing of an agent now.
const WITHIN_MS: i64 = 24 * 60 * 60 * 1000;

/// An agent whose recent runs all failed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct AgentFailing {
    pub agent: String,
    /// How many of its newest ended runs failed (all of those looked at, at most [`RECENT`]).
    pub failed: usize,
    /// The newest failure's error, as stored (redacted when it was recorded).
    pub last_error: String,
    /// When the newest failed run ended.
    pub last_failed_at: String,
}

/// The agents whose recent runs all failed, by agent id; only those `known` says the project
/// has (an agent removed from it leaves runs that fail for that reason: not a condition of
/// the agents that run now).
pub(crate) fn failing_agents(
    store: &dyn Storage,
    known: &dyn Fn(&str) -> bool,
    now: i64,
) -> storage::Result<Vec<AgentFailing>> {
    // agent → its newest ended runs, newest first: (failed, error, ended at).
    let mut recent: BTreeMap<String, Vec<(bool, String, i64)>> = BTreeMap::new();
    let mut looked = 0;
    let scan = Scan {
        order: Order::Newest,
        ..Scan::all(now)
    };
    store.read(|r| {
        r.scan_invocations(&scan, &mut |inv| {
            looked += 1;
            if inv.created_at < now.saturating_sub(WITHIN_MS) {
                return Ok(Next::Stop);
            }
            let failed = match inv.status {
                Status::Failed => true,
                Status::Succeeded => false,
                // Not a run that ended on its own (an operator's cancel, a person's no, a
                // deadline) or not ended yet: it says nothing of whether the agent works.
                _ => return Ok(more(looked)),
            };
            if !known(&inv.agent) {
                return Ok(more(looked));
            }
            let runs = recent.entry(inv.agent.clone()).or_default();
            if runs.len() < RECENT {
                runs.push((
                    failed,
                    inv.error.clone().unwrap_or_default(),
                    inv.updated_at,
                ));
            }
            Ok(more(looked))
        })
    })?;
    Ok(recent
        .into_iter()
        .filter(|(_, runs)| runs.iter().all(|(failed, ..)| *failed))
        .filter_map(|(agent, runs)| {
            let newest = runs.iter().max_by_key(|(_, _, at)| *at)?;
            Some(AgentFailing {
                failed: runs.len(),
                last_error: newest.1.clone(),
                last_failed_at: rfc3339_ms(newest.2),
                agent,
            })
        })
        .collect())
}

fn more(looked: usize) -> Next {
    if looked < LOOK {
        Next::More
    } else {
        Next::Stop
    }
}

/// The sentence `pap status` shows for a failing agent.
pub(crate) fn failing_sentence(a: &AgentFailing) -> String {
    let runs = if a.failed == 1 {
        "its latest run failed".to_owned()
    } else {
        format!("its latest {} runs all failed", a.failed)
    };
    format!(
        "agent {}: {runs} (the last at {}): {}",
        a.agent,
        a.last_failed_at,
        crate::text::clip(&a.last_error, 300)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::Invocation;

    fn run(store: &dyn Storage, id: &str, agent: &str, seq: u64, status: Status, at: i64) {
        store
            .write(|tx: &mut dyn crate::storage::WriteTx| {
                let mut inv = Invocation::for_tests(id, status);
                inv.agent = agent.into();
                inv.seq = seq;
                inv.created_at = at;
                inv.updated_at = at;
                if status == Status::Failed {
                    inv.error = Some(format!("boom {seq}"));
                }
                tx.insert_invocation(&inv)
            })
            .unwrap();
    }

    #[test]
    fn an_agent_is_failing_while_its_newest_ended_runs_all_failed() {
        let store = crate::store::Store::memory_for_tests();
        let day = WITHIN_MS;
        // `flaky` failed twice after a success: its newest three include the success.
        run(&*store, "f1", "flaky", 1, Status::Succeeded, day);
        run(&*store, "f2", "flaky", 2, Status::Failed, day + 1);
        run(&*store, "f3", "flaky", 3, Status::Failed, day + 2);
        // `broken` failed three times, a queued run and a cancel after them change nothing.
        run(&*store, "b1", "broken", 4, Status::Failed, day + 3);
        run(&*store, "b2", "broken", 5, Status::Failed, day + 4);
        run(&*store, "b3", "broken", 6, Status::Failed, day + 5);
        run(&*store, "b4", "broken", 7, Status::Cancelled, day + 6);
        run(&*store, "b5", "broken", 8, Status::Queued, day + 7);
        let failing = failing_agents(&*store, &|_| true, day + 10).unwrap();
        assert_eq!(failing.len(), 1, "{failing:?}");
        assert_eq!(failing[0].agent, "broken");
        assert_eq!(failing[0].failed, 3);
        assert_eq!(failing[0].last_error, "boom 6");
        // A success after them: it works again.
        run(&*store, "b6", "broken", 9, Status::Succeeded, day + 8);
        assert!(
            failing_agents(&*store, &|_| true, day + 10)
                .unwrap()
                .is_empty()
        );
        // Failures older than a day say nothing of now.
        run(&*store, "o1", "old", 10, Status::Failed, 0);
        assert!(
            failing_agents(&*store, &|_| true, 3 * day)
                .unwrap()
                .is_empty()
        );
    }
}
