//! The last decision this serve made for each trigger, for the console's manifests page
//! (decisions that invoke nothing, such as `throttled` or `filtered`, leave no invocation to
//! show). Kept in memory: it says what this serve saw since it started.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::pipeline::report::EventReport;
use crate::stages::Outcome;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LastDecision {
    pub outcome: &'static str,
    pub event_id: String,
    pub at: i64,
}

#[derive(Default)]
pub struct RecentDecisions {
    by_trigger: Mutex<HashMap<String, LastDecision>>,
}

impl RecentDecisions {
    pub fn note(&self, report: &EventReport, now: i64) {
        let Some(event_id) = &report.event_id else {
            return;
        };
        let mut map = self.by_trigger.lock().unwrap_or_else(|p| p.into_inner());
        for t in &report.triggers {
            if t.outcome == Outcome::Disabled {
                continue;
            }
            map.insert(
                t.trigger.to_string(),
                LastDecision {
                    outcome: t.outcome.as_str(),
                    event_id: event_id.clone(),
                    at: now,
                },
            );
        }
    }

    pub fn of(&self, trigger: &str) -> Option<LastDecision> {
        let map = self.by_trigger.lock().unwrap_or_else(|p| p.into_inner());
        map.get(trigger).cloned()
    }
}
