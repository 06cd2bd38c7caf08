//! The concurrency index (a pap extension): per concurrency key, the invocations that wait
//! (`queued`) or run (`running`) under it, in decision order (their sequence number). Kept
//! in step with every write of an invocation that has concurrency keys, so the gate at the
//! start of an attempt reads one short range per key. The table is opened on use: work
//! without concurrency keys never touches it.

use redb::ReadableTable;

use super::tables::CONCURRENCY;
use super::tx::Tx;
use super::{Result, redb_err};
use crate::domain::Invocation;
use crate::storage::concurrency::Entry;
pub(super) use crate::storage::concurrency::state_of;

/// The index value of an entry: its state, then the invocation id.
fn encode(entry: Entry, id: &str) -> Vec<u8> {
    let mut value = match entry {
        Entry::Waiting => vec![0],
        Entry::Running => vec![1],
        Entry::Stopping(until) => {
            let mut v = vec![2];
            v.extend_from_slice(&until.to_le_bytes());
            v
        }
    };
    value.extend_from_slice(id.as_bytes());
    value
}

/// The entry and the invocation id it is for.
fn decode(bytes: &[u8]) -> Option<(Entry, &[u8])> {
    match bytes.split_first()? {
        (0, id) => Some((Entry::Waiting, id)),
        (1, id) => Some((Entry::Running, id)),
        (2, rest) if rest.len() >= 8 => {
            let (until, id) = rest.split_at(8);
            let until = i64::from_le_bytes(until.try_into().ok()?);
            Some((Entry::Stopping(until), id))
        }
        _ => None,
    }
}

impl Tx<'_> {
    /// Moves `inv`'s entries from `old` to `new` (see `state_of`).
    pub(super) fn reindex_concurrency(
        &mut self,
        inv: &Invocation,
        old: Option<Entry>,
        new: Option<Entry>,
    ) -> Result<()> {
        if old == new || inv.concurrency.is_empty() {
            return Ok(());
        }
        let mut table = self
            .txn
            .open_table(CONCURRENCY)
            .map_err(|e| redb_err(&self.path, e))?;
        for slot in &inv.concurrency {
            let key = slot.index_key();
            match new {
                None => {
                    table
                        .remove((key.as_str(), inv.seq))
                        .map_err(|e| redb_err(&self.path, e))?;
                }
                Some(entry) => {
                    table
                        .insert((key.as_str(), inv.seq), encode(entry, &inv.id).as_slice())
                        .map_err(|e| redb_err(&self.path, e))?;
                }
            }
        }
        Ok(())
    }

    /// The first of `inv`'s keys that has no room for it now, and why (see
    /// [`blocking_in`]).
    pub fn concurrency_block(
        &self,
        inv: &Invocation,
        now: i64,
    ) -> Result<Option<(String, String)>> {
        if inv.concurrency.is_empty() {
            return Ok(None);
        }
        let table = self
            .txn
            .open_table(CONCURRENCY)
            .map_err(|e| redb_err(&self.path, e))?;
        blocking_in(&table, inv, now).map_err(|e| redb_err(&self.path, e))
    }
}

/// The first of `inv`'s concurrency keys with no room for it, with why (see
/// [`crate::storage::concurrency::blocking`]).
pub(super) fn blocking_in(
    table: &impl ReadableTable<(&'static str, u64), &'static [u8]>,
    inv: &Invocation,
    now: i64,
) -> std::result::Result<Option<(String, String)>, redb::StorageError> {
    crate::storage::concurrency::blocking(inv, now, |key| {
        let mut rows = Vec::new();
        for entry in table.range((key, 0)..=(key, u64::MAX))? {
            let (k, v) = entry?;
            if let Some((state, id)) = decode(v.value()) {
                rows.push((k.value().1, state, String::from_utf8_lossy(id).into_owned()));
            }
        }
        Ok(rows)
    })
}
