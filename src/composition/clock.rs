//! The clock a process decides on, given its store.

use crate::clock::Clock;
use crate::storage::Storage;

/// The clock for work on `store`: a database's clock when the store keeps one (see
/// `Storage::clock_offset`: every node sharing a database decides on its clock), else as
/// [`Clock::from_env`]. The test clock wins.
pub fn clock_for(store: &dyn Storage) -> anyhow::Result<Clock> {
    Ok(match (Clock::from_env()?, store.clock_offset()) {
        (Clock::System, Some(offset)) => Clock::Offset(offset),
        (clock, _) => clock,
    })
}
