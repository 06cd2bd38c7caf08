//! The concurrency index (a pap extension): per concurrency key, the invocations that wait
//! (`queued`) or run (`running`) under it, in decision order (their sequence number). Kept
//! in step with every write of an invocation that has concurrency keys, so the gate at the
//! start of an attempt reads one short range per key. The table is opened on use: work
//! without concurrency keys never touches it.

use redb::ReadableTable;

use super::tables::CONCURRENCY;
use super::tx::Tx;
use super::{Result, redb_err};
use crate::domain::{Invocation, Status};

/// Where an invocation stands in the index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Entry {
    Waiting,
    Running,
    /// Cancelled while it ran: holds its slot until its processes are gone, at most until
    /// this time (ms), so a cancel that never finished stopping them cannot hold it forever.
    Stopping(i64),
}

impl Entry {
    fn encode(self, id: &str) -> Vec<u8> {
        let mut value = match self {
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
}

/// Where `inv` stands in the index: `None` (not in it), or its entry.
pub(super) fn state_of(inv: &Invocation) -> Option<Entry> {
    if inv.concurrency.is_empty() {
        return None;
    }
    if let Some(until) = inv.stopping_until {
        return Some(Entry::Stopping(until));
    }
    match inv.status {
        Status::Queued => Some(Entry::Waiting),
        Status::Running => Some(Entry::Running),
        _ => None,
    }
}

impl Tx<'_> {
    /// Moves `inv`'s entries from `old` to `new` (see [`state_of`]).
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
                        .insert((key.as_str(), inv.seq), entry.encode(&inv.id).as_slice())
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

/// The first of `inv`'s concurrency keys with no room for it, with why: the key has `limit`
/// running (then the key is named), or invocations decided before it wait for the free
/// slots (so runs start in decision order; then the key comes back empty).
pub(super) fn blocking_in(
    table: &impl ReadableTable<(&'static str, u64), &'static [u8]>,
    inv: &Invocation,
    now: i64,
) -> std::result::Result<Option<(String, String)>, redb::StorageError> {
    for slot in &inv.concurrency {
        let key = slot.index_key();
        let (mut running, mut ahead) = (0u32, 0u32);
        for entry in table.range((key.as_str(), 0)..=(key.as_str(), u64::MAX))? {
            let (k, v) = entry?;
            let (_, seq) = k.value();
            let Some((state, id)) = Entry::decode(v.value()) else {
                continue;
            };
            if id == inv.id.as_bytes() {
                continue;
            }
            match state {
                Entry::Running => running += 1,
                Entry::Stopping(until) if until > now => running += 1,
                Entry::Stopping(_) => {}
                Entry::Waiting if seq < inv.seq => ahead += 1,
                Entry::Waiting => {}
            }
        }
        if running.saturating_add(ahead) >= slot.limit {
            let mut why = format!(
                "waiting for a concurrency slot: {running} of {} running for key {} of {}",
                slot.limit,
                if slot.key.is_empty() {
                    "(none)"
                } else {
                    &slot.key
                },
                slot.scope
            );
            if ahead > 0 {
                why.push_str(&format!(", {ahead} decided earlier waiting before it"));
            }
            // Named only when the key itself is full; waiting behind earlier decisions says
            // nothing about the key's room for those earlier ones.
            let full = if running >= slot.limit {
                key
            } else {
                String::new()
            };
            return Ok(Some((full, why)));
        }
    }
    Ok(None)
}
