//! Whether the database can be reached, so that an outage is said once and not hammered:
//! after a failed connection, checkouts fail at once (without connecting) until the next try
//! is due, backing off from a quarter of a second to five seconds; the first failure and the
//! recovery are logged, the attempts in between are not.

use std::sync::Mutex;
use std::time::{Duration, Instant};

const FIRST_BACKOFF: Duration = Duration::from_millis(250);
const MAX_BACKOFF: Duration = Duration::from_secs(5);

#[derive(Default)]
pub(super) struct Outage {
    state: Mutex<Option<Down>>,
}

struct Down {
    since: Instant,
    next_try: Instant,
    backoff: Duration,
    reason: String,
}

impl Outage {
    /// `Some(why)` while the database is known down and the next try is not due yet.
    pub(super) fn wait(&self) -> Option<String> {
        let state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let down = state.as_ref()?;
        let now = Instant::now();
        (now < down.next_try).then(|| {
            format!(
                "{} (down for {:.0?}; pap decides nothing until it is back, next try in {:.1?})",
                down.reason,
                now - down.since,
                down.next_try - now
            )
        })
    }

    /// Whether the database is known down (a try may be due).
    pub(super) fn is_down(&self) -> bool {
        self.state
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_some()
    }

    /// A connection failed for `reason`.
    pub(super) fn failed(&self, location: &str, reason: &str) {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        match state.as_mut() {
            Some(down) => {
                down.backoff = (down.backoff * 2).min(MAX_BACKOFF);
                down.next_try = now + down.backoff;
                down.reason = reason.to_owned();
            }
            None => {
                tracing::warn!(
                    database = location,
                    error = reason,
                    "the database is unavailable: pap stops deciding until it is back \
                     (spool files wait, HTTP ingest answers 503)"
                );
                *state = Some(Down {
                    since: now,
                    next_try: now + FIRST_BACKOFF,
                    backoff: FIRST_BACKOFF,
                    reason: reason.to_owned(),
                });
            }
        }
    }

    /// A connection succeeded.
    pub(super) fn reached(&self, location: &str) {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(down) = state.take() {
            tracing::info!(
                database = location,
                down_for = ?down.since.elapsed(),
                "the database is back: deciding again"
            );
        }
    }
}
