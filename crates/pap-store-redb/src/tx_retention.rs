//! The purge of records past their retention: finished invocations (with their events'
//! bodies), settled notifications (with their deduplication keys and ATP ids), inbox
//! messages and audit entries. Each call is one bounded step of serve's paced purge (see
//! `serve::purge`); the expiry of claims, ledger rows and debounce states is in `tx_claims`
//! and `tx_debounce`.

use redb::ReadableTable;

use super::invocation_codec::EventRef;
use super::tx::{Tx, decode, decode_invocation, unpack_id};
use super::{Result, redb_err};
use pap_domain::{AuditEntry, InboxMessage, Notification, Status};
use pap_storage::purge::Purged;

/// An invocation the step removes.
struct Gone {
    seq: u64,
    packed: Vec<u8>,
    status: Status,
    event: EventRef,
}

impl Tx<'_> {
    /// See [`pap_storage::WriteTx::purge_invocations`].
    pub fn purge_invocations(
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

    /// See [`pap_storage::WriteTx::purge_notifications`].
    pub fn purge_notifications(
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
    pub fn purge_inbox(&mut self, cutoff: i64, limit: usize) -> Result<Purged> {
        let path = self.path().to_path_buf();
        let t = self.notify_tables()?;
        purge_oldest(&mut t.inbox, cutoff, limit, &path, |bytes| {
            Ok(decode::<InboxMessage>(&path, bytes)?.ts)
        })
    }

    /// See [`pap_storage::WriteTx::purge_audit`].
    pub fn purge_audit(&mut self, cutoff: i64, limit: usize) -> Result<Purged> {
        let path = self.path().to_path_buf();
        purge_oldest(&mut self.audit, cutoff, limit, &path, |bytes| {
            Ok(decode::<AuditEntry>(&path, bytes)?.at)
        })
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
