//! The purge of records past their retention: finished invocations (with their events'
//! bodies), settled notifications (with their deduplication keys and ATP ids), inbox
//! messages and audit entries. Each call is one bounded step of serve's paced purge (see
//! `serve::purge`), and so are the expiry of claims, ledger rows, throttle windows and
//! debounce states: this file is the store's `UpkeepTx`.

use redb::ReadableTable;

use super::invocation_codec::EventRef;
use super::ledger_block::Block;
use super::tables::*;
use super::tx::{Tx, decode, decode_invocation, unpack_id};
use super::tx_claims::{BATCH_KEYS, GATHER_ENTRIES};
use super::{Result, redb_err};
use pap_domain::DebounceState;
use pap_domain::{AuditEntry, InboxMessage, Notification, Status};
use pap_storage::purge::Purged;
use pap_storage::purge::{ClaimBatch, DebounceCursor};

/// An invocation the step removes.
struct Gone {
    seq: u64,
    packed: Vec<u8>,
    status: Status,
    event: EventRef,
}

impl Tx<'_> {
    /// Whether an invocation left in the order next to where `g` was carries `g`'s event.
    /// An event's body is shared only by the invocations one transaction made of it (see
    /// `Tx::put_event`), which are consecutive in creation order: so once neither neighbour
    /// carries it, no invocation does.
    fn event_still_carried(&self, g: &Gone) -> Result<bool> {
        let path = self.path().to_path_buf();
        let e = |e| redb_err(&path, e);
        let at: (u64, &[u8]) = (g.seq, g.packed.as_slice());
        let before = self.order.range(..at).map_err(e)?.next_back();
        let after = self.order.range(at..).map_err(e)?.next();
        for row in [before, after].into_iter().flatten() {
            let (k, _) = row.map_err(e)?;
            let (_, packed) = k.value();
            let Some(bytes) = self.invocations.get(packed).map_err(e)? else {
                continue;
            };
            let id = unpack_id(packed, &path)?;
            if decode_invocation(&id, bytes.value(), &path)?.1 == g.event {
                return Ok(true);
            }
        }
        Ok(false)
    }
}

/// Removes the records of an append-only table (kept in order of time) made before
/// `cutoff`, oldest first, at most `limit`; `at` reads a record's time.
fn purge_oldest(
    table: &mut redb::Table<u64, &'static [u8]>,
    cutoff: i64,
    limit: usize,
    path: &std::path::Path,
    at: impl Fn(&[u8]) -> Result<i64>,
) -> Result<Purged> {
    let e = |e| redb_err(path, e);
    let mut old = Vec::new();
    for row in table.iter().map_err(e)? {
        if old.len() >= limit {
            break;
        }
        let (key, bytes) = row.map_err(e)?;
        if at(bytes.value())? >= cutoff {
            break;
        }
        old.push(key.value());
    }
    for key in &old {
        table.remove(key).map_err(e)?;
    }
    Ok(Purged::of(old.len(), old.len(), limit))
}

impl pap_storage::UpkeepTx for Tx<'_> {
    /// Looks at up to `limit` debounce states after `after`, removing those that can no
    /// longer change a decision: no fire pending, and the burst over (`quiet_of` gives a
    /// trigger's quiet period now; `None`: the trigger no longer debounces, so its states
    /// go). Returns where the next step goes on (`None`: the end was reached).
    fn purge_debounce(
        &mut self,
        now: i64,
        quiet_of: &dyn Fn(&str) -> Option<i64>,
        after: Option<&DebounceCursor>,
        limit: usize,
    ) -> Result<(Purged, Option<DebounceCursor>)> {
        use std::ops::Bound;
        let mut table = self
            .txn
            .open_table(DEBOUNCE)
            .map_err(|e| redb_err(&self.path, e))?;
        let mut stale: Vec<(String, String)> = Vec::new();
        let (mut scanned, mut last) = (0, None);
        {
            let start = match after {
                Some((t, k)) => Bound::Excluded((t.as_str(), k.as_str())),
                None => Bound::Unbounded,
            };
            let range = table
                .range::<(&str, &str)>((start, Bound::Unbounded))
                .map_err(|e| redb_err(&self.path, e))?;
            for entry in range {
                if scanned >= limit {
                    break;
                }
                let (k, v) = entry.map_err(|e| redb_err(&self.path, e))?;
                let (trigger, key) = k.value();
                scanned += 1;
                last = Some((trigger.to_owned(), key.to_owned()));
                let state: DebounceState = decode(&self.path, v.value())?;
                let over = quiet_of(trigger)
                    .is_none_or(|quiet| state.last_seen.saturating_add(quiet) <= now);
                if state.pending.is_none() && over {
                    stale.push((trigger.to_owned(), key.to_owned()));
                }
            }
        }
        for (trigger, key) in &stale {
            table
                .remove((trigger.as_str(), key.as_str()))
                .map_err(|e| redb_err(&self.path, e))?;
        }
        Ok(Purged::walked(stale.len(), scanned, limit, false, last))
    }

    /// Goes through up to `limit` keys of the expiry index that are due at `now`, removing
    /// each claim that is still expired (one renewed since is left alone).
    fn purge_expired_claims(&mut self, now: i64, limit: usize) -> Result<Purged> {
        let mut due = Vec::new();
        let mut budget = limit;
        for entry in self
            .claim_expiry
            .range(..=(now, u64::MAX))
            .map_err(|e| redb_err(&self.path, e))?
        {
            if budget == 0 {
                break;
            }
            let (k, v) = entry.map_err(|e| redb_err(&self.path, e))?;
            let keys = v.value();
            let take = (keys.len() / 32).min(budget);
            budget -= take;
            due.push((k.value(), keys.to_vec(), take));
        }
        let (mut went_through, mut removed) = (0, 0);
        for ((at, first_row), keys, take) in due {
            let (done, rest) = keys.split_at(take * 32);
            for key in done.chunks_exact(32) {
                let key: &[u8; 32] = key.try_into().expect("32 bytes");
                let expired = self
                    .claims
                    .get(key)
                    .map_err(|e| redb_err(&self.path, e))?
                    .is_some_and(|v| v.value().0 <= now);
                if expired {
                    self.claims
                        .remove(key)
                        .map_err(|e| redb_err(&self.path, e))?;
                    removed += 1;
                }
            }
            went_through += take;
            if rest.is_empty() {
                self.claim_expiry
                    .remove((at, first_row))
                    .map_err(|e| redb_err(&self.path, e))?;
            } else {
                self.claim_expiry
                    .insert((at, first_row), rest)
                    .map_err(|e| redb_err(&self.path, e))?;
            }
        }
        Ok(Purged::of(removed, went_through, limit))
    }

    /// See [`pap_storage::WriteTx::purge_claims_batched`]: a step either gathers up to
    /// [`GATHER_ENTRIES`] due expiry-index entries into `batch` (reads only), or, once the
    /// batch is full or nothing more is due, removes up to `limit` of its keys in key order
    /// (each still expired), and with its last keys the entries they came from.
    fn purge_claims_batched(
        &mut self,
        now: i64,
        limit: usize,
        batch: &mut ClaimBatch,
    ) -> Result<Purged> {
        use std::ops::Bound::{Excluded, Included, Unbounded};
        let e = |x| redb_err(&self.path, x);
        if !batch.removing {
            let from = batch
                .entries
                .last()
                .map_or(Unbounded, |&last| Excluded(last));
            let mut exhausted = true;
            for (read, entry) in self
                .claim_expiry
                .range::<(i64, u64)>((from, Included((now, u64::MAX))))
                .map_err(e)?
                .enumerate()
            {
                if read == GATHER_ENTRIES || batch.keys.len() >= BATCH_KEYS {
                    exhausted = false;
                    break;
                }
                let (k, v) = entry.map_err(e)?;
                for key in v.value().chunks_exact(32) {
                    batch.keys.insert(key.try_into().expect("32 bytes"));
                }
                batch.entries.push(k.value());
            }
            batch.removing =
                !batch.entries.is_empty() && (exhausted || batch.keys.len() >= BATCH_KEYS);
            return Ok(Purged {
                more: !batch.entries.is_empty(),
                ..Purged::default()
            });
        }
        let (mut removed, mut scanned) = (0, 0);
        while scanned < limit {
            let Some(key) = batch.keys.pop_first() else {
                break;
            };
            scanned += 1;
            let expired = self
                .claims
                .get(&key)
                .map_err(e)?
                .is_some_and(|v| v.value().0 <= now);
            if expired {
                self.claims.remove(&key).map_err(e)?;
                removed += 1;
            }
        }
        if !batch.keys.is_empty() {
            return Ok(Purged {
                removed,
                scanned,
                more: true,
                tidied: false,
            });
        }
        let tidied = !batch.entries.is_empty();
        for entry in batch.entries.drain(..) {
            self.claim_expiry.remove(entry).map_err(e)?;
        }
        batch.removing = false;
        let more = self
            .claim_expiry
            .range(..=(now, u64::MAX))
            .map_err(e)?
            .next()
            .is_some();
        Ok(Purged {
            removed,
            scanned,
            more,
            tidied,
        })
    }

    /// Removes ledger blocks whose every row was decided before `cutoff`, from the first
    /// block on, until about `limit` rows were looked at (at least one block) or a block
    /// with a row decided at or after `cutoff` is reached.
    fn purge_ledger(&mut self, cutoff: i64, limit: usize) -> Result<Purged> {
        let mut old = Vec::new();
        let (mut scanned, mut young) = (0, false);
        for block in self.ledger.iter().map_err(|e| redb_err(&self.path, e))? {
            if scanned >= limit {
                break;
            }
            let (first, bytes) = block.map_err(|e| redb_err(&self.path, e))?;
            match Block::new(bytes.value()) {
                Ok(block) if block.max_decided_at() < cutoff => {
                    scanned += block.len();
                    old.push((first.value(), block.len()));
                }
                Ok(_) => {
                    young = true;
                    break;
                }
                // A damaged block is stepped over (and kept), so that it does not stop the
                // purge of what follows it for good.
                Err(_) => scanned += 1,
            }
        }
        let mut removed = 0;
        for (first, rows) in old {
            self.ledger
                .remove(first)
                .map_err(|e| redb_err(&self.path, e))?;
            removed += rows;
        }
        Ok(Purged {
            removed,
            scanned,
            more: !young && scanned >= limit,
            tidied: false,
        })
    }

    /// See [`pap_storage::WriteTx::purge_throttle`].
    fn purge_throttle(
        &mut self,
        cutoff: i64,
        after: Option<&pap_storage::purge::DebounceCursor>,
        limit: usize,
    ) -> Result<(Purged, Option<pap_storage::purge::DebounceCursor>)> {
        use std::ops::Bound;
        let mut stale: Vec<(String, String)> = Vec::new();
        let (mut scanned, mut last) = (0, None);
        {
            let start = match after {
                Some((t, k)) => Bound::Excluded((t.as_str(), k.as_str())),
                None => Bound::Unbounded,
            };
            let range = self
                .throttle
                .range::<(&str, &str)>((start, Bound::Unbounded))
                .map_err(|e| redb_err(&self.path, e))?;
            for entry in range {
                if scanned >= limit {
                    break;
                }
                let (k, v) = entry.map_err(|e| redb_err(&self.path, e))?;
                let (bucket, key) = k.value();
                scanned += 1;
                last = Some((bucket.to_owned(), key.to_owned()));
                let newest = v
                    .value()
                    .chunks_exact(8)
                    .map(|c| i64::from_le_bytes(c.try_into().expect("8 bytes")))
                    .max();
                if newest.is_none_or(|t| t < cutoff) {
                    stale.push((bucket.to_owned(), key.to_owned()));
                }
            }
        }
        for (bucket, key) in &stale {
            self.throttle
                .remove((bucket.as_str(), key.as_str()))
                .map_err(|e| redb_err(&self.path, e))?;
        }
        Ok(Purged::walked(stale.len(), scanned, limit, false, last))
    }

    /// See [`pap_storage::WriteTx::purge_invocations`].
    fn purge_invocations(
        &mut self,
        cutoff: i64,
        after: Option<u64>,
        limit: usize,
    ) -> Result<(Purged, Option<u64>)> {
        let path = self.path().to_path_buf();
        let e = |e| redb_err(&path, e);
        let mut gone = Vec::new();
        let (mut scanned, mut last, mut young) = (0, None, false);
        {
            // Rows strictly after the cursor (an empty id sorts first).
            let lower: (u64, &[u8]) = (after.map_or(0, |a| a.saturating_add(1)), &[]);
            for row in self.order.range(lower..).map_err(e)? {
                if scanned >= limit {
                    break;
                }
                let (k, _) = row.map_err(e)?;
                let (seq, packed) = k.value();
                let Some(bytes) = self.invocations.get(packed).map_err(e)? else {
                    // An index row without its record is left to `pap store check`.
                    scanned += 1;
                    last = Some(seq);
                    continue;
                };
                let id = unpack_id(packed, &path)?;
                let (inv, event) = decode_invocation(&id, bytes.value(), &path)?;
                if inv.created_at >= cutoff {
                    young = true;
                    break;
                }
                scanned += 1;
                last = Some(seq);
                if inv.expired_by(cutoff) {
                    gone.push(Gone {
                        seq,
                        packed: packed.to_vec(),
                        status: inv.status,
                        event,
                    });
                }
            }
        }
        for g in &gone {
            self.invocations.remove(g.packed.as_slice()).map_err(e)?;
            self.order.remove((g.seq, g.packed.as_slice())).map_err(e)?;
            self.add_count(g.status, -1)?;
        }
        for g in &gone {
            if !self.event_still_carried(g)? {
                self.events.remove(g.event).map_err(e)?;
            }
        }
        Ok(Purged::walked(gone.len(), scanned, limit, young, last))
    }

    /// See [`pap_storage::WriteTx::purge_notifications`].
    fn purge_notifications(
        &mut self,
        cutoff: i64,
        after: Option<u64>,
        limit: usize,
    ) -> Result<(Purged, Option<u64>)> {
        let path = self.path().to_path_buf();
        let e = |e| redb_err(&path, e);
        let mut gone: Vec<Notification> = Vec::new();
        let (mut scanned, mut last, mut young) = (0, None, false);
        {
            let t = self.notify_tables()?;
            let start = after.map_or(0, |a| a.saturating_add(1));
            for row in t.order.range(start..).map_err(e)? {
                if scanned >= limit {
                    break;
                }
                let (seq, id) = row.map_err(e)?;
                let seq = seq.value();
                let Some(bytes) = t.notifications.get(id.value()).map_err(e)? else {
                    scanned += 1;
                    last = Some(seq);
                    continue;
                };
                let n: Notification = decode(&path, bytes.value())?;
                if n.created_at >= cutoff {
                    young = true;
                    break;
                }
                scanned += 1;
                last = Some(seq);
                if n.expired_by(cutoff) {
                    gone.push(n);
                }
            }
        }
        for n in &gone {
            {
                let t = self.notify_tables()?;
                t.notifications.remove(n.id.as_str()).map_err(e)?;
                t.order.remove(n.seq).map_err(e)?;
                // A key or ATP id that a later notification took over stays.
                if let Some(key) = &n.deduplication_key
                    && t.dedup
                        .get(key.as_str())
                        .map_err(e)?
                        .map(|v| v.value() == n.id)
                        == Some(true)
                {
                    t.dedup.remove(key.as_str()).map_err(e)?;
                }
                if let Some(atp) = n.atp_id()
                    && t.atp.get(atp).map_err(e)?.map(|v| v.value() == n.id) == Some(true)
                {
                    t.atp.remove(atp).map_err(e)?;
                }
            }
            self.uncount_notification(n)?;
        }
        if !gone.is_empty() {
            self.notifications_changed = true;
        }
        Ok(Purged::walked(gone.len(), scanned, limit, young, last))
    }

    /// See [`pap_storage::WriteTx::purge_inbox`].
    fn purge_inbox(&mut self, cutoff: i64, limit: usize) -> Result<Purged> {
        let path = self.path().to_path_buf();
        let t = self.notify_tables()?;
        purge_oldest(&mut t.inbox, cutoff, limit, &path, |bytes| {
            Ok(decode::<InboxMessage>(&path, bytes)?.ts)
        })
    }

    /// See [`pap_storage::WriteTx::purge_audit`].
    fn purge_audit(&mut self, cutoff: i64, limit: usize) -> Result<Purged> {
        let path = self.path().to_path_buf();
        purge_oldest(&mut self.audit, cutoff, limit, &path, |bytes| {
            Ok(decode::<AuditEntry>(&path, bytes)?.at)
        })
    }
}
