//! Whether this serve is degraded, as `/readyz`'s body and `/metrics` show it: an agent whose
//! recent runs all fail, a sink that fails, a refused reload or a spool it cannot take (see
//! `crate::health` and `conditions`). Worked out at most every [`FRESH_MS`] however many
//! probes ask (a probe every second must not read 500 invocations every second), on serve's
//! clock, and never on a probe's own time: `/readyz` reads the last answer and, when it is
//! stale, has it worked out again in the background. A read that fails leaves the last answer.

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

    /// The answer as of `now`: the last one if it is fresh, else read again (a read that
    /// fails keeps the last answer, and says so in the log).
    pub(crate) fn snapshot(
        &self,
        store: &dyn Storage,
        project: &crate::manifest::Project,
        now: i64,
    ) -> storage::Result<Snapshot> {
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
        let known = |agent: &str| project.agent(agent).is_some();
        let read = crate::health::failing_agents(store, &known, now).and_then(|failing| {
            let counts = store.read(|r| r.notification_counts())?;
            Ok((failing, counts))
        });
        let (agents_failing, counts) = match (read, last.as_ref()) {
            (Ok(read), _) => read,
            (Err(e), Some((_, snap))) => {
                tracing::warn!(error = %e, "health: the store could not be read; the last answer stands");
                let mut snap = snap.clone();
                snap.conditions = self.conditions_now();
                return Ok(snap);
            }
            (Err(e), None) => return Err(e),
        };
        let sinks_failing = counts
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

    /// The last answer, whatever its age, without waiting for one being worked out: what a
    /// probe reads (`None` before the first).
    pub(crate) fn last(&self) -> Option<Snapshot> {
        let last = self.last.try_lock().ok()?;
        last.as_ref().map(|(_, snap)| {
            let mut snap = snap.clone();
            snap.conditions = self.conditions_now();
            snap
        })
    }

    /// Whether the last answer is missing or older than [`FRESH_MS`] at `now`.
    pub(crate) fn stale(&self, now: i64) -> bool {
        match self.last.try_lock() {
            Ok(last) => last
                .as_ref()
                .is_none_or(|(at, _)| now.saturating_sub(*at) >= FRESH_MS || *at > now),
            // Being worked out now.
            Err(_) => false,
        }
    }

    fn conditions_now(&self) -> Vec<&'static str> {
        [Condition::ReloadRefused, Condition::Spool]
            .into_iter()
            .filter(|c| self.conditions.holds(*c))
            .map(Condition::as_str)
            .collect()
    }
}
