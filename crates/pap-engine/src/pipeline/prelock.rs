//! The locks a decision group will need, known before it decides: a store several
//! processes share takes them all up front in one order (`WriteTx::prelock`), so two
//! groups deciding the same or overlapping events at once take turns instead of
//! deadlocking on keys each took in its own events' order.

use super::Pipeline;
use super::prepare::Prepared;
use crate::stages::{budget, throttle};
use crate::storage::lock_name;

impl Pipeline<'_> {
    /// Adds to `names` the lock names the decision of an event prepared as `prepared` may
    /// take: its idempotency claims, throttle windows, debounce keys, and its agents'
    /// budgets. A superset is harmless (a lock no stage wanted only serialises).
    pub(crate) fn lock_names(&self, prepared: &Prepared, names: &mut Vec<String>) {
        for c in &prepared.triggers {
            let Some(key) = &c.key else {
                // Filtered out (or disabled): decided without the store.
                continue;
            };
            let trigger = &self.project.triggers[c.index];
            let hex: String = key.iter().map(|b| format!("{b:02x}")).collect();
            names.push(lock_name("claim", &[&hex]));
            for (index, window) in c.window_keys.iter().enumerate() {
                names.push(lock_name(
                    "throttle",
                    &[&throttle::bucket(&trigger.id, index), window],
                ));
            }
            if let Some(key) = &c.debounce_key {
                names.push(lock_name("debounce", &[&trigger.id, key]));
            }
            let agent = &self.project.agents[trigger.agent];
            if let Some(b) = &agent.budget {
                if b.invocations_per_day.is_some() {
                    names.push(lock_name("throttle", &[&budget::bucket(&agent.id), ""]));
                }
                names.push(lock_name("budget", &[&agent.id]));
                let exceeded = format!("budget.exceeded:{}", agent.id);
                names.push(lock_name("dedup", &[&exceeded]));
            }
        }
    }
}
