//! Whether serve takes spool files now. A spool problem (one of its directories turned into a
//! link, an error listing, claiming or filing files) stops the taking: it shows as the `spool`
//! condition (`pap status`, `/metrics`), and the spool is looked at again with a backoff, from
//! 1 s doubling to 30 s. Once it is sound again, taking resumes and the condition ends. Each
//! is logged once, when the problem begins and when it ends, never at every retry. Serve
//! meanwhile goes on deciding HTTP events, schedules and runs.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::SpoolError;
use crate::serve::conditions::{Condition, Conditions};

const FIRST: Duration = Duration::from_secs(1);
const LONGEST: Duration = Duration::from_secs(30);

pub(crate) struct Health {
    conditions: Arc<Conditions>,
    trouble: Option<Trouble>,
}

struct Trouble {
    began: Instant,
    backoff: Duration,
    retry_at: Instant,
    /// What a person reads (the condition's message).
    message: String,
}

impl Health {
    pub(crate) fn new(conditions: Arc<Conditions>) -> Health {
        Health {
            conditions,
            trouble: None,
        }
    }

    /// Whether to use the spool now: always while it is sound, at the backoff's pace while
    /// it is not.
    pub(crate) fn due(&self, now: Instant) -> bool {
        self.trouble.as_ref().is_none_or(|t| now >= t.retry_at)
    }

    /// What is wrong with the spool, while something is.
    pub(crate) fn problem(&self) -> Option<&str> {
        self.trouble.as_ref().map(|t| t.message.as_str())
    }

    /// The spool failed with `e`; `since` is serve's clock (RFC 3339), for the condition.
    pub(crate) fn failed(&mut self, e: &SpoolError, now: Instant, since: &str) {
        let message = format!(
            "spool files are not taken: {e}; serve looks again with a backoff (HTTP events are still decided)"
        );
        match &mut self.trouble {
            None => {
                tracing::error!(
                    error = %e,
                    "spool files are not taken until the spool is sound again (looked at again after 1 s, doubling to 30 s); HTTP events are still decided"
                );
                self.trouble = Some(Trouble {
                    began: now,
                    backoff: FIRST,
                    retry_at: now + FIRST,
                    message: message.clone(),
                });
            }
            Some(t) => {
                t.backoff = (t.backoff * 2).min(LONGEST);
                t.retry_at = now + t.backoff;
                t.message.clone_from(&message);
            }
        }
        self.conditions.set(Condition::Spool, message, since);
    }

    /// The spool is sound: whether that ends a problem (then logged, the condition cleared).
    pub(crate) fn sound(&mut self, now: Instant) -> bool {
        let Some(t) = self.trouble.take() else {
            return false;
        };
        self.conditions.clear(Condition::Spool);
        tracing::info!(
            after_s = now.saturating_duration_since(t.began).as_secs(),
            "spool files are taken again: the spool is sound"
        );
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_problem_backs_off_shows_as_the_condition_and_ends() {
        let conditions = Arc::new(Conditions::default());
        let mut health = Health::new(conditions.clone());
        let t0 = Instant::now();
        assert!(health.due(t0));
        assert!(!health.sound(t0), "nothing to end");
        let e = SpoolError::Moved {
            path: "/spool".into(),
        };
        health.failed(&e, t0, "t0");
        assert!(conditions.holds(Condition::Spool));
        assert!(conditions.shown()[0].message.contains("/spool"));
        assert!(!health.due(t0 + Duration::from_millis(999)));
        assert!(health.due(t0 + FIRST));
        // Each failure doubles the wait, up to the longest.
        let mut at = t0;
        let mut waits = Vec::new();
        for _ in 0..7 {
            at += Duration::from_secs(100);
            health.failed(&e, at, "later");
            let wait = (1..=100)
                .map(Duration::from_secs)
                .find(|d| health.due(at + *d))
                .unwrap();
            waits.push(wait.as_secs());
        }
        assert_eq!(waits, [2, 4, 8, 16, 30, 30, 30]);
        assert_eq!(conditions.shown()[0].since, "t0", "since its start");
        assert!(health.problem().is_some());
        assert!(health.sound(at));
        assert!(!conditions.holds(Condition::Spool));
        assert!(health.due(at) && health.problem().is_none());
    }
}
