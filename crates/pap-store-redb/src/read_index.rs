//! The read indexes of format 8: creation order (`INVOCATION_ORDER`), the invocations awaiting
//! approval (`AWAITING`) and a count per recorded status (`count.<status>` in `META`). They
//! are kept in the transaction that writes an invocation, so a listing pages by cursor and a
//! count is a table's length or a counter: no read decodes every record.

use redb::ReadableTable;

use super::tx::{Reader, Tx, decode_invocation, unpack_id};
use super::{Result, id_codec, redb_err};
use pap_domain::{Invocation, Status};
use pap_storage::scan::{COUNTED_EXACTLY, Next, Order, Scan};

/// Every status, so a rebuild sets each counter (a status without invocations to 0).
use super::invocation_codec::STATUSES;

/// Where an invocation's status is counted in `META`.
fn count_key(status: Status) -> String {
    format!("count.{}", status.as_str())
}

/// An invocation's entry in `AWAITING`, when it awaits approval.
fn awaiting_entry(inv: &Invocation) -> Option<(i64, i64)> {
    (inv.status == Status::AwaitingApproval)
        .then(|| (inv.created_at, inv.approval_deadline.unwrap_or(i64::MAX)))
}

/// Where an `AWAITING` entry (created, deadline) sits in `APPROVAL_HALVES`: the moment half
/// its time to answer is gone; none without a deadline.
pub(super) fn half_of((created, deadline): (i64, i64)) -> Option<i64> {
    (deadline != i64::MAX).then(|| created.saturating_add(deadline.saturating_sub(created) / 2))
}

impl Tx<'_> {
    /// Moves `new` in the read indexes from where `old` (its previous record, if any) was.
    pub(super) fn index_reads(&mut self, old: Option<&Invocation>, new: &Invocation) -> Result<()> {
        let path = self.path.clone();
        let e = |e| redb_err(&path, e);
        let packed = id_codec::pack(&new.id);
        let key = (new.seq, packed.as_slice());
        if old.is_none() {
            self.order.insert(key, ()).map_err(e)?;
        }
        if old.map(|o| o.status) != Some(new.status) {
            if let Some(old) = old {
                self.add_count(old.status, -1)?;
            }
            self.add_count(new.status, 1)?;
        }
        let (before, after) = (old.and_then(Invocation::cancel_entry), new.cancel_entry());
        if before != after {
            if let Some(entry) = before {
                self.cancel_keys.remove(entry).map_err(e)?;
            }
            if let Some(entry) = after {
                self.cancel_keys
                    .insert(entry, packed.as_slice())
                    .map_err(e)?;
            }
        }
        let before = old.and_then(awaiting_entry);
        let after = awaiting_entry(new);
        if before != after {
            if let Some(old) = old.filter(|_| before.is_some()) {
                let packed = id_codec::pack(&old.id);
                self.awaiting
                    .remove((old.seq, packed.as_slice()))
                    .map_err(e)?;
                if let Some(half) = before.and_then(half_of) {
                    self.halves.remove((half, packed.as_slice())).map_err(e)?;
                }
            }
            if let Some(entry) = after {
                self.awaiting.insert(key, entry).map_err(e)?;
                if let Some(half) = half_of(entry) {
                    self.halves
                        .insert((half, packed.as_slice()), ())
                        .map_err(e)?;
                }
            }
        }
        Ok(())
    }

    /// Format 9 to 10: the approvals' halves (`APPROVAL_HALVES`), from `AWAITING` (which
    /// holds each one's creation and deadline).
    pub(super) fn build_approval_halves(&mut self) -> Result<()> {
        let path = self.path.clone();
        let e = |e| redb_err(&path, e);
        let mut entries = Vec::new();
        for row in self.awaiting.iter().map_err(e)? {
            let (k, v) = row.map_err(e)?;
            if let Some(half) = half_of(v.value()) {
                entries.push((half, k.value().1.to_vec()));
            }
        }
        for (half, packed) in entries {
            self.halves
                .insert((half, packed.as_slice()), ())
                .map_err(e)?;
        }
        Ok(())
    }

    pub(super) fn add_count(&mut self, status: Status, by: i64) -> Result<()> {
        let key = count_key(status);
        let now = self.seq_value(&key)?;
        let next = now.saturating_add_signed(by);
        self.meta
            .insert(key.as_str(), next)
            .map_err(|e| redb_err(&self.path, e))?;
        Ok(())
    }

    /// Format 7 to 8: builds the read indexes from the invocations, in one pass.
    pub(super) fn build_read_indexes(&mut self) -> Result<()> {
        let path = self.path.clone();
        let e = |e| redb_err(&path, e);
        let mut counts = std::collections::BTreeMap::<&'static str, u64>::new();
        for status in STATUSES {
            counts.insert(status.as_str(), 0);
        }
        for row in self.invocations.iter().map_err(e)? {
            let (k, v) = row.map_err(e)?;
            let id = unpack_id(k.value(), &path)?;
            let (inv, _) = decode_invocation(&id, v.value(), &path)?;
            let key = (inv.seq, k.value());
            self.order.insert(key, ()).map_err(e)?;
            if let Some(entry) = awaiting_entry(&inv) {
                self.awaiting.insert(key, entry).map_err(e)?;
            }
            *counts.entry(inv.status.as_str()).or_default() += 1;
        }
        for (status, n) in counts {
            self.meta
                .insert(format!("count.{status}").as_str(), n)
                .map_err(e)?;
        }
        Ok(())
    }
}

impl Reader {
    /// When the oldest approval still waiting at `now` was made: the first entry of
    /// `AWAITING` (creation order) whose deadline has not passed. Those expired but not yet
    /// recorded are skipped, [`COUNTED_EXACTLY`] at most (serve records them as they expire).
    pub(super) fn oldest_waiting(&self, now: i64) -> Result<Option<i64>> {
        let e = |e| redb_err(&self.path, e);
        for row in self
            .awaiting
            .iter()
            .map_err(e)?
            .take(COUNTED_EXACTLY as usize)
        {
            let (_, v) = row.map_err(e)?;
            let (created, deadline) = v.value();
            if deadline > now {
                return Ok(Some(created));
            }
        }
        Ok(None)
    }

    pub(super) fn count(&self, status: Status) -> Result<u64> {
        let found = self
            .meta
            .get(count_key(status).as_str())
            .map_err(|e| redb_err(&self.path, e))?;
        Ok(found.map_or(0, |v| v.value()))
    }
}

/// What a walk hands each row: its sequence number, packed id and approval deadline.
type Visit<'a> = dyn FnMut(u64, &[u8], Option<i64>) -> Result<Next> + 'a;

/// Walks a (sequence number, packed id) index from `scan`'s cursor in its order, handing
/// `visit` each row's key and what `deadline` reads from its value.
pub(super) fn walk<V: redb::Value + 'static>(
    table: &redb::ReadOnlyTable<(u64, &'static [u8]), V>,
    scan: &Scan,
    path: &std::path::Path,
    deadline: &dyn Fn(&redb::AccessGuard<V>) -> Option<i64>,
    visit: &mut Visit<'_>,
) -> Result<()> {
    let e = |e| redb_err(path, e);
    // Rows strictly beyond the cursor (an empty id sorts first).
    let lower: (u64, &[u8]) = (scan.after.map_or(0, |a| a.saturating_add(1)), &[]);
    let upper: (u64, &[u8]) = (scan.after.unwrap_or(u64::MAX), &[]);
    let rows = match (scan.order, scan.after) {
        (Order::Newest, Some(_)) => table.range(..upper).map_err(e)?,
        _ => table.range(lower..).map_err(e)?,
    };
    let mut step = |row: std::result::Result<_, redb::StorageError>| -> Result<Next> {
        let (k, v): (redb::AccessGuard<(u64, &[u8])>, redb::AccessGuard<V>) = row.map_err(e)?;
        let (seq, packed) = k.value();
        visit(seq, packed, deadline(&v))
    };
    match scan.order {
        Order::Oldest => {
            for row in rows {
                if step(row)? == Next::Stop {
                    break;
                }
            }
        }
        Order::Newest => {
            for row in rows.rev() {
                if step(row)? == Next::Stop {
                    break;
                }
            }
        }
    }
    Ok(())
}
