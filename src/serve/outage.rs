//! A database outage in serve's log: the store says once that the database is unavailable
//! (and once that it is back, see `pgstore::outage`); each failed attempt in between is only
//! a debug line, and the spool waits a moment before it tries again instead of spinning.

use std::time::Duration;

use crate::storage;

/// How long the spool waits after the store was unavailable before it tries again.
pub(super) const PAUSE: Duration = Duration::from_millis(500);

/// Whether `e` (or what caused it) means "nothing was done, try again later": the store
/// is unavailable, or it kept rolling the work back for lock conflicts with other nodes
/// (then the spool file waits for the next round, as in an outage, and is never failed).
pub(super) fn is_outage(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        matches!(
            c.downcast_ref::<storage::Error>(),
            Some(storage::Error::Unavailable { .. } | storage::Error::Contended { .. })
        )
    })
}

/// Logs a failure of `what`: an error, a warning for work the database kept rolling back
/// (it is tried again), or a debug line during an outage (said once by the store).
pub(super) fn report(e: &anyhow::Error, what: &str) {
    let store = e.chain().find_map(|c| c.downcast_ref::<storage::Error>());
    match store {
        Some(s) => report_store_as(s, what, &crate::error_text::describe(e)),
        None => tracing::error!(error = %crate::error_text::describe(e), "{what}"),
    }
}

/// As [`report`], for a store's own error.
pub(super) fn report_store(e: &storage::Error, what: &str) {
    report_store_as(e, what, &e.to_string());
}

fn report_store_as(e: &storage::Error, what: &str, text: &str) {
    match e {
        storage::Error::Unavailable { .. } => tracing::debug!(error = %text, "{what}"),
        storage::Error::Contended { .. } => tracing::warn!(error = %text, "{what}"),
        _ => tracing::error!(error = %text, "{what}"),
    }
}
