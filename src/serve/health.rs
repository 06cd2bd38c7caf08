//! Whether this serve is degraded, as `/readyz`'s body and `/metrics` show it: an agent whose
//! recent runs all fail, a sink that fails, a refused reload or a spool it cannot take (see
//! `crate::health` and `conditions`). Worked out at most every [`FRESH_MS`] however many
//! probes ask (a probe every second must not read 500 invocations every second), on serve's
//! clock; a read that fails leaves the last answer.

use std::sync::{Arc, Mutex};

use super::conditions::{Condition, Conditions};
use crate::health::AgentFailing;
use crate::storage::{self, Storage};

/// How long an answer is reused.
pub(crate) const FRESH_MS: i64 = 15_000;

#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Snapshot {
    pub(crate) agents_failing: Vec<AgentFailing>,
    /// Sinks with deliveries failed or being retried.
    pub(crate) sinks_failing: Vec<String>,
    /// Serve's own conditions that keep it from doing its job (a refused reload, the spool).
    pub(crate) conditions: Vec<&'static str>,
}

impl Snapshot {
    pub(crate) fn degraded(&self) -> bool {
        !self.agents_failing.is_empty()
            || !self.sinks_failing.is_empty()
            || !self.conditions.is_empty()
    }
}

pub(crate) struct ServeHealth {
    conditions: Arc<Conditions>,
    last: Mutex<Option<(i64, Snapshot)>>,
}

impl ServeHealth {
    pub(crate) fn new(conditions: Arc<Conditions>) -> ServeHealth {
        ServeHealth {
            conditions,
            last: Mutex::new(None),
        }
    }

    /// The answer as of `now`: the last one if it is fresh, else read again.
    pub(crate) fn snapshot(&self, store: &dyn Storage, now: i64) -> storage::Result<Snapshot> {
        let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((at, snap)) = last.as_ref()
            && now.saturating_sub(*at) < FRESH_MS
            && *at <= now
        {
            let mut snap = snap.clone();
            // Serve's conditions cost nothing to read: always as of now.
            snap.conditions = self.conditions_now();
            return Ok(snap);
        }
        let agents_failing = crate::health::failing_agents(store, now)?;
        let sinks_failing = store
            .read(|r| r.notification_counts())?
            .failing_by_sink
            .into_iter()
            .filter(|(_, n)| *n > 0)
            .map(|(sink, _)| sink)
            .collect();
        let snap = Snapshot {
            agents_failing,
            sinks_failing,
            conditions: self.conditions_now(),
        };
        *last = Some((now, snap.clone()));
        Ok(snap)
    }

    fn conditions_now(&self) -> Vec<&'static str> {
        [Condition::ReloadRefused, Condition::Spool]
            .into_iter()
            .filter(|c| self.conditions.holds(*c))
            .map(Condition::as_str)
            .collect()
    }
}
