//! A database outage in serve's log: the store says once that the database is unavailable
//! (and once that it is back, see `pgstore::outage`); each failed attempt in between is only
//! a debug line, and the spool waits a moment before it tries again instead of spinning.

use std::time::Duration;

use crate::storage;

/// How long the spool waits after the store was unavailable before it tries again.
pub const PAUSE: Duration = Duration::from_millis(500);

/// Whether `e` (or what caused it) is the store being unavailable.
pub fn is_outage(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        matches!(
            c.downcast_ref::<storage::Error>(),
            Some(storage::Error::Unavailable { .. })
        )
    })
}

/// Logs a failure of `what`: an error, or a debug line during an outage.
pub fn report(e: &anyhow::Error, what: &str) {
    if is_outage(e) {
        tracing::debug!(error = %crate::error_text::describe(e), "{what}");
    } else {
        tracing::error!(error = %crate::error_text::describe(e), "{what}");
    }
}

/// As [`report`], for a store's own error.
pub fn report_store(e: &storage::Error, what: &str) {
    if matches!(e, storage::Error::Unavailable { .. }) {
        tracing::debug!(error = %e, "{what}");
    } else {
        tracing::error!(error = %e, "{what}");
    }
}
