//! What is wrong with a running serve that a person must see, though serve keeps going: its
//! spool cannot be taken (a directory turned into a link, an error that is being retried), a
//! reload it refused, settings that wait for a restart. Each is shown by `pap status` (through
//! the control socket, so also for a serve on a redb store) and by `/metrics`
//! (`pap_serve_condition{condition="…"}`, 1 while it holds, 0 otherwise, every condition
//! always present so that a dashboard or an `absent()` alert never sees a gap).
//!
//! Whoever finds a condition sets it with the sentence a person should read, and clears it
//! when it is over; the log line is theirs to write (once, not at every retry).

use std::collections::BTreeMap;
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

/// The kinds of condition, each at most once at a time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Condition {
    /// Spool files are not being taken (serve still decides HTTP events).
    Spool,
    /// The last reload was refused as a whole; the previous configuration keeps running.
    ReloadRefused,
    /// Settings changed in pap.yaml that take effect only when serve is restarted.
    RestartNeeded,
}

impl Condition {
    pub const ALL: [Condition; 3] = [
        Condition::Spool,
        Condition::ReloadRefused,
        Condition::RestartNeeded,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Condition::Spool => "spool",
            Condition::ReloadRefused => "reload_refused",
            Condition::RestartNeeded => "restart_needed",
        }
    }
}

/// One condition as `pap status` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shown {
    pub condition: String,
    pub message: String,
    /// When it began (RFC 3339, serve's clock).
    pub since: String,
}

#[derive(Debug, Default)]
pub struct Conditions {
    held: Mutex<BTreeMap<Condition, (String, String)>>,
}

impl Conditions {
    /// Sets `condition` with what a person should read; `now` is when it began (kept from
    /// the first time while the condition holds, whatever the message becomes).
    pub fn set(&self, condition: Condition, message: impl Into<String>, now: &str) {
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        let message = message.into();
        match held.get_mut(&condition) {
            Some(entry) => entry.0 = message,
            None => {
                held.insert(condition, (message, now.to_owned()));
            }
        }
    }

    /// Ends `condition`; whether it held.
    pub fn clear(&self, condition: Condition) -> bool {
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        held.remove(&condition).is_some()
    }

    pub fn holds(&self, condition: Condition) -> bool {
        let held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        held.contains_key(&condition)
    }

    /// Every condition that holds, in a fixed order.
    pub fn shown(&self) -> Vec<Shown> {
        let held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        held.iter()
            .map(|(c, (message, since))| Shown {
                condition: c.as_str().to_owned(),
                message: message.clone(),
                since: since.clone(),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_condition_keeps_its_start_while_its_message_changes() {
        let c = Conditions::default();
        assert!(c.shown().is_empty());
        c.set(Condition::Spool, "first", "t1");
        c.set(Condition::Spool, "second", "t2");
        c.set(Condition::ReloadRefused, "bad", "t3");
        let shown = c.shown();
        assert_eq!(shown.len(), 2);
        assert_eq!(shown[0].condition, "spool");
        assert_eq!(shown[0].message, "second");
        assert_eq!(shown[0].since, "t1");
        assert!(c.clear(Condition::Spool));
        assert!(!c.clear(Condition::Spool));
        assert!(!c.holds(Condition::Spool));
        assert!(c.holds(Condition::ReloadRefused));
    }
}
