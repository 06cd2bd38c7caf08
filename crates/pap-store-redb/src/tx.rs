//! Typed access inside one transaction: [`Tx`] for writes, [`Reader`] for snapshots.

use std::path::{Path, PathBuf};

use redb::{
    ReadOnlyTable, ReadTransaction, ReadableTable, ReadableTableMetadata, Table, WriteTransaction,
};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::id_codec;
use super::invocation_codec::{self, EventHash, EventRef};
use super::ledger_block::Block;
use super::tables::*;
use super::tx_claims::Decisions;
use super::tx_notify::{NotifyReader, NotifyTables};
use super::{Error, Result, redb_err};
use pap_domain::{AuditEntry, Invocation, LedgerRow, OutboxEntry, Runner, Status};
use pap_storage::concurrency::{Entry, due_of, state_of};

pub struct Tx<'t> {
    pub(super) path: PathBuf,
    pub(super) txn: &'t WriteTransaction,
    /// Opened on first use (see `tx_notify`).
    notify: Option<NotifyTables<'t>>,
    /// The concurrency index, opened on first use and kept to the end (see
    /// `tx_concurrency`).
    pub(super) concurrency: Option<super::tx_concurrency::Index<'t>>,
    /// The newest inbox id this transaction appended, for the mark file (see
    /// [`super::INBOX_MARK_FILE`]).
    pub(super) inbox_appended: Option<u64>,
    /// Whether it wrote a notification, for the notifications mark file.
    pub(super) notifications_changed: bool,
    pub(super) meta: Table<'t, &'static str, u64>,
    pub(super) claims: Table<'t, &'static [u8; 32], (i64, i64, u64)>,
    pub(super) claim_expiry: Table<'t, (i64, u64), &'static [u8]>,
    /// Ledger rows and expiry-index entries of this transaction, written at [`Tx::finish`].
    pub(super) decisions: Decisions,
    pub(super) throttle: Table<'t, (&'static str, &'static str), &'static [u8]>,
    pub(super) invocations: Table<'t, &'static [u8], &'static [u8]>,
    pub(super) events: Table<'t, u64, &'static [u8]>,
    /// Invocations this transaction created, written in id order at [`Tx::finish`]: a
    /// batch's ids share their time prefix, and written as they come their random tails
    /// would split pages all over the batch's range, leaving them half empty.
    fresh: std::collections::BTreeMap<String, Fresh>,
    /// Event bodies this transaction stored, so an event provoking several triggers is
    /// stored once.
    events_stored: std::collections::HashMap<EventHash, EventRef>,
    approval_deadlines: Table<'t, (i64, &'static [u8]), ()>,
    pub(super) ledger: Table<'t, u64, &'static [u8]>,
    pub(super) audit: Table<'t, u64, &'static [u8]>,
    outbox: Table<'t, &'static str, &'static [u8]>,
    work: Table<'t, (i64, &'static [u8]), ()>,
    schedules: Table<'t, &'static str, i64>,
    /// The read indexes (see `read_index`).
    pub(super) order: Table<'t, (u64, &'static [u8]), ()>,
    pub(super) awaiting: Table<'t, (u64, &'static [u8]), (i64, i64)>,
}

impl<'t> Tx<'t> {
    pub(super) fn open(txn: &'t WriteTransaction, path: &Path) -> Result<Tx<'t>> {
        let e = |e| redb_err(path, e);
        Ok(Tx {
            path: path.to_path_buf(),
            txn,
            notify: None,
            concurrency: None,
            inbox_appended: None,
            notifications_changed: false,
            meta: txn.open_table(META).map_err(e)?,
            claims: txn.open_table(CLAIMS).map_err(e)?,
            claim_expiry: txn.open_table(CLAIM_EXPIRY).map_err(e)?,
            decisions: Decisions::default(),
            throttle: txn.open_table(THROTTLE).map_err(e)?,
            invocations: txn.open_table(INVOCATIONS).map_err(e)?,
            events: txn.open_table(EVENTS).map_err(e)?,
            fresh: Default::default(),
            events_stored: Default::default(),
            approval_deadlines: txn.open_table(APPROVAL_DEADLINES).map_err(e)?,
            ledger: txn.open_table(LEDGER).map_err(e)?,
            audit: txn.open_table(AUDIT).map_err(e)?,
            outbox: txn.open_table(OUTBOX).map_err(e)?,
            work: txn.open_table(WORK).map_err(e)?,
            schedules: txn.open_table(SCHEDULES).map_err(e)?,
            order: txn.open_table(INVOCATION_ORDER).map_err(e)?,
            awaiting: txn.open_table(AWAITING).map_err(e)?,
        })
    }

    pub(super) fn path(&self) -> &Path {
        &self.path
    }

    /// Writes what this transaction kept in memory (ledger blocks, the expiry index, the
    /// ledger counter); called once, before the commit.
    pub(super) fn finish(&mut self) -> Result<()> {
        self.write_fresh()?;
        self.finish_decisions()
    }

    pub(super) fn notify_tables(&mut self) -> Result<&mut NotifyTables<'t>> {
        if self.notify.is_none() {
            self.notify = Some(NotifyTables::open(self.txn, &self.path)?);
        }
        Ok(self.notify.as_mut().expect("opened"))
    }

    /// The current value of a counter (0 before its first use).
    pub(super) fn seq_value(&self, counter: &str) -> Result<u64> {
        Ok(self
            .meta
            .get(counter)
            .map_err(|e| redb_err(&self.path, e))?
            .map_or(0, |v| v.value()))
    }

    /// The next value of a counter (1, 2, …).
    pub(crate) fn next_seq(&mut self, counter: &str) -> Result<u64> {
        let next = self
            .meta
            .get(counter)
            .map_err(|e| redb_err(&self.path, e))?
            .map_or(0, |v| v.value())
            + 1;
        self.meta
            .insert(counter, next)
            .map_err(|e| redb_err(&self.path, e))?;
        Ok(next)
    }

    // --- leases -------------------------------------------------------------------------

    /// A fencing token for a new lease: greater than every token issued before.
    pub fn issue_lease_token(&mut self) -> Result<u64> {
        self.next_seq("lease_token")
    }

    /// Fails with [`Error::LeaseLost`] unless invocation `id` is still leased under `token`:
    /// the check a holder makes before it records anything about its attempt.
    pub fn check_lease(&self, id: &str, token: u64) -> Result<()> {
        let current = self
            .invocation_record(id)?
            .and_then(|(inv, _)| inv.lease.map(|l| l.token));
        Error::lease_check(id, token, current)
    }

    // --- throttle windows ---------------------------------------------------------------

    /// Invocation times recorded for (trigger, window key), oldest first.
    pub fn throttle_times(&self, trigger: &str, key: &str) -> Result<Vec<i64>> {
        let found = self
            .throttle
            .get((trigger, key))
            .map_err(|e| redb_err(&self.path, e))?;
        Ok(found.map(|v| decode_times(v.value())).unwrap_or_default())
    }

    /// Records an invocation at `now`, forgetting times that left the window.
    pub fn throttle_record(
        &mut self,
        trigger: &str,
        key: &str,
        now: i64,
        window_ms: i64,
    ) -> Result<()> {
        let times = pap_storage::window_with(self.throttle_times(trigger, key)?, now, window_ms);
        let bytes: Vec<u8> = times.iter().flat_map(|t| t.to_le_bytes()).collect();
        self.throttle
            .insert((trigger, key), bytes.as_slice())
            .map_err(|e| redb_err(&self.path, e))?;
        Ok(())
    }

    /// Stores a window's times as they are (a copy of a state).
    pub(super) fn import_throttle(
        &mut self,
        trigger: &str,
        key: &str,
        times: &[i64],
    ) -> Result<()> {
        let bytes: Vec<u8> = times.iter().flat_map(|t| t.to_le_bytes()).collect();
        self.throttle
            .insert((trigger, key), bytes.as_slice())
            .map_err(|e| redb_err(&self.path, e))?;
        Ok(())
    }

    /// Stores an audit entry under its own number (a copy of a state).
    pub(super) fn import_audit(&mut self, entry: &AuditEntry) -> Result<()> {
        self.audit
            .insert(entry.seq, encode(entry).as_slice())
            .map_err(|e| redb_err(&self.path, e))?;
        self.raise_counter("audit_seq", entry.seq)
    }

    // --- invocations --------------------------------------------------------------------

    pub fn invocation(&self, id: &str) -> Result<Option<Invocation>> {
        let Some((mut inv, event)) = self.invocation_record(id)? else {
            return Ok(None);
        };
        inv.event = load_event(&self.events, event, &self.path)?;
        Ok(Some(inv))
    }

    /// Invocation `id` without its event (which stays `null`).
    pub(super) fn invocation_head(&self, id: &str) -> Result<Option<Invocation>> {
        Ok(self.invocation_record(id)?.map(|(inv, _)| inv))
    }

    /// The record without its event (which stays `null`), and the event's key.
    fn invocation_record(&self, id: &str) -> Result<Option<(Invocation, EventRef)>> {
        if let Some(fresh) = self.fresh.get(id) {
            return decode_invocation(id, &fresh.record, &self.path).map(Some);
        }
        read_record(&self.invocations, id, &self.path)
    }

    /// Records a new invocation (its id is fresh: nothing to update).
    pub fn insert_invocation(&mut self, inv: &Invocation) -> Result<()> {
        self.write_invocation(inv, None)
    }

    /// Inserts or updates an invocation, keeping the approval-deadline index in step.
    pub fn put_invocation(&mut self, inv: &Invocation) -> Result<()> {
        let old = self.invocation_record(&inv.id)?;
        self.write_invocation(inv, old)
    }

    fn write_invocation(
        &mut self,
        inv: &Invocation,
        old: Option<(Invocation, EventRef)>,
    ) -> Result<()> {
        let id = inv.id.as_str();
        self.index_reads(old.as_ref().map(|(old, _)| old), inv)?;
        let Some((old, event)) = old else {
            self.reindex_concurrency(inv, None)?;
            let event = self.put_event(&inv.event)?;
            self.fresh.insert(id.to_owned(), Fresh::of(inv, event));
            return Ok(());
        };
        // An invocation's event never changes: it is stored already.
        if let Some(fresh) = self.fresh.get(id) {
            let was_in = fresh.concurrency;
            self.reindex_concurrency(inv, was_in)?;
            self.fresh.insert(id.to_owned(), Fresh::of(inv, event));
            return Ok(());
        }
        let was_in = state_of(&old).map(|entry| (entry, due_of(&old)));
        self.reindex_concurrency(inv, was_in)?;
        let packed = id_codec::pack(id);
        let old_deadline = deadline_key(&old);
        reindex(
            &mut self.approval_deadlines,
            old_deadline,
            deadline_key(inv),
            &packed,
            &self.path,
        )?;
        reindex(
            &mut self.work,
            work_key(&old),
            work_key(inv),
            &packed,
            &self.path,
        )?;
        let bytes = invocation_codec::encode(inv, event);
        self.invocations
            .insert(packed.as_slice(), bytes.as_slice())
            .map_err(|e| redb_err(&self.path, e))?;
        Ok(())
    }

    /// Writes the invocations this transaction created, and their index entries, in order.
    fn write_fresh(&mut self) -> Result<()> {
        for (id, fresh) in std::mem::take(&mut self.fresh) {
            let packed = id_codec::pack(&id);
            let id = packed.as_slice();
            self.invocations
                .insert(id, fresh.record.as_slice())
                .map_err(|e| redb_err(&self.path, e))?;
            if let Some(at) = fresh.work {
                self.work
                    .insert((at, id), ())
                    .map_err(|e| redb_err(&self.path, e))?;
            }
            if let Some(at) = fresh.deadline {
                self.approval_deadlines
                    .insert((at, id), ())
                    .map_err(|e| redb_err(&self.path, e))?;
            }
        }
        Ok(())
    }

    /// Lists `packed` as due work at `at`.
    pub(super) fn work_insert(&mut self, at: i64, packed: &[u8]) -> Result<()> {
        self.work
            .insert((at, packed), ())
            .map_err(|e| redb_err(&self.path, e))?;
        Ok(())
    }

    pub(super) fn work_remove(&mut self, at: i64, packed: &[u8]) -> Result<()> {
        self.work
            .remove((at, packed))
            .map_err(|e| redb_err(&self.path, e))?;
        Ok(())
    }

    /// Stores an event's body once, whatever number of invocations it provokes.
    fn put_event(&mut self, event: &serde_json::Value) -> Result<EventRef> {
        let (bytes, hash) = invocation_codec::event_bytes(event);
        if let Some(key) = self.events_stored.get(&hash) {
            return Ok(*key);
        }
        let key = self.next_seq("event_seq")?;
        self.events
            .insert(key, bytes.as_slice())
            .map_err(|e| redb_err(&self.path, e))?;
        self.events_stored.insert(hash, key);
        Ok(key)
    }

    /// Invocations awaiting approval whose deadline is at or before `now`.
    pub fn approvals_due(&mut self, now: i64) -> Result<Vec<String>> {
        self.write_fresh()?;
        ids_due_in(&self.approval_deadlines, now, usize::MAX, &self.path)
    }

    /// Ids of `queued` invocations due at or before `now` and of every `running` one (whose
    /// runner may have died), running ones first, at most `limit`.
    pub fn work_due(&mut self, now: i64, limit: usize) -> Result<Vec<String>> {
        self.write_fresh()?;
        ids_due_in(&self.work, now, limit, &self.path)
    }

    // --- schedules ----------------------------------------------------------------------

    /// The last fire time recorded for a schedule.
    pub fn schedule_last(&self, id: &str) -> Result<Option<i64>> {
        let found = self
            .schedules
            .get(id)
            .map_err(|e| redb_err(&self.path, e))?;
        Ok(found.map(|v| v.value()))
    }

    pub fn set_schedule_last(&mut self, id: &str, at: i64) -> Result<()> {
        self.schedules
            .insert(id, at)
            .map_err(|e| redb_err(&self.path, e))?;
        Ok(())
    }

    // --- ledger and audit ---------------------------------------------------------------

    /// Puts an emitted event in the outbox; `owner` is the process that will decide it.
    pub fn outbox_put(
        &mut self,
        event_id: &str,
        event: &serde_json::Value,
        owner: Option<&Runner>,
    ) -> Result<()> {
        let bytes = encode(&OutboxEntry {
            owner: owner.cloned(),
            event: event.clone(),
        });
        self.outbox
            .insert(event_id, bytes.as_slice())
            .map_err(|e| redb_err(&self.path, e))?;
        Ok(())
    }

    /// Removes an emitted event from the outbox once it is decided.
    pub fn outbox_remove(&mut self, event_id: &str) -> Result<()> {
        self.outbox
            .remove(event_id)
            .map_err(|e| redb_err(&self.path, e))?;
        Ok(())
    }

    /// Appends to the audit log; `entry.seq` is assigned here.
    pub fn audit(&mut self, mut entry: AuditEntry) -> Result<()> {
        entry.seq = self.next_seq("audit_seq")?;
        let bytes = encode(&entry);
        self.audit
            .insert(entry.seq, bytes.as_slice())
            .map_err(|e| redb_err(&self.path, e))?;
        Ok(())
    }
}

/// A consistent read-only view, for listings.
pub struct Reader {
    pub(super) path: PathBuf,
    pub(super) invocations: ReadOnlyTable<&'static [u8], &'static [u8]>,
    events: ReadOnlyTable<u64, &'static [u8]>,
    ledger: ReadOnlyTable<u64, &'static [u8]>,
    audit: ReadOnlyTable<u64, &'static [u8]>,
    schedules: ReadOnlyTable<&'static str, i64>,
    pub(super) work: ReadOnlyTable<(i64, &'static [u8]), ()>,
    outbox: ReadOnlyTable<&'static str, &'static [u8]>,
    pub(super) approval_deadlines: ReadOnlyTable<(i64, &'static [u8]), ()>,
    pub(super) order: ReadOnlyTable<(u64, &'static [u8]), ()>,
    pub(super) awaiting: ReadOnlyTable<(u64, &'static [u8]), (i64, i64)>,
    pub(super) meta: ReadOnlyTable<&'static str, u64>,
    /// `None` in a file from before the debounce tables (no write has created them yet).
    debounce_due: Option<ReadOnlyTable<(i64, &'static str, &'static str), ()>>,
    pub(super) notify: NotifyReader,
}

impl Reader {
    /// When the earliest pending trailing debounce fires (ms), if any.
    pub fn debounce_next_due(&self) -> Result<Option<i64>> {
        let Some(table) = &self.debounce_due else {
            return Ok(None);
        };
        let first = table.first().map_err(|e| redb_err(&self.path, e))?;
        Ok(first.map(|(k, _)| k.value().0))
    }

    pub(super) fn open(txn: &ReadTransaction, path: &Path) -> Result<Reader> {
        let e = |e| redb_err(path, e);
        Ok(Reader {
            path: path.to_path_buf(),
            invocations: txn.open_table(INVOCATIONS).map_err(e)?,
            events: txn.open_table(EVENTS).map_err(e)?,
            ledger: txn.open_table(LEDGER).map_err(e)?,
            audit: txn.open_table(AUDIT).map_err(e)?,
            schedules: txn.open_table(SCHEDULES).map_err(e)?,
            work: txn.open_table(WORK).map_err(e)?,
            outbox: txn.open_table(OUTBOX).map_err(e)?,
            approval_deadlines: txn.open_table(APPROVAL_DEADLINES).map_err(e)?,
            order: txn.open_table(INVOCATION_ORDER).map_err(e)?,
            awaiting: txn.open_table(AWAITING).map_err(e)?,
            meta: txn.open_table(META).map_err(e)?,
            debounce_due: match txn.open_table(DEBOUNCE_DUE) {
                Ok(table) => Some(table),
                Err(redb::TableError::TableDoesNotExist(_)) => None,
                Err(other) => return Err(redb_err(path, other)),
            },
            notify: NotifyReader::open(txn, path)?,
        })
    }

    /// The last fire time recorded for a schedule.
    pub fn schedule_last(&self, id: &str) -> Result<Option<i64>> {
        let found = self
            .schedules
            .get(id)
            .map_err(|e| redb_err(&self.path, e))?;
        Ok(found.map(|v| v.value()))
    }

    /// Ids of due work, as [`Tx::work_due`] (a look before claiming in a write).
    pub fn work_due(&self, now: i64, limit: usize) -> Result<Vec<String>> {
        ids_due_in(&self.work, now, limit, &self.path)
    }

    /// As [`Tx::approvals_due`]: a look before expiring in a write.
    pub fn approvals_due(&self, now: i64) -> Result<Vec<String>> {
        ids_due_in(&self.approval_deadlines, now, usize::MAX, &self.path)
    }

    /// Every event waiting in the outbox, by id.
    pub fn outbox_entries(&self) -> Result<Vec<(String, OutboxEntry)>> {
        let mut out = Vec::new();
        for row in self.outbox.iter().map_err(|e| redb_err(&self.path, e))? {
            let (k, v) = row.map_err(|e| redb_err(&self.path, e))?;
            out.push((k.value().to_owned(), decode(&self.path, v.value())?));
        }
        Ok(out)
    }

    pub fn invocation(&self, id: &str) -> Result<Option<Invocation>> {
        let Some((mut inv, event)) = read_record(&self.invocations, id, &self.path)? else {
            return Ok(None);
        };
        inv.event = load_event(&self.events, event, &self.path)?;
        Ok(Some(inv))
    }

    /// Invocations in creation order, keeping those `keep` accepts (it sees each record
    /// without its event); with `last`, only the last that many. Returns them and how many
    /// were kept in all (for "N of M shown").
    ///
    /// There is no creation-order index (it cost 48 bytes an invocation): the records carry
    /// their sequence number, and the ones kept are sorted by it.
    /// The ids of invocations that `keep` accepts, at most `max`, from the keys alone (no
    /// record is decoded): for resolving what a person typed.
    /// Read from the creation-order index, whose keys are all there is to it: the records'
    /// table would read every record's pages (about a hundred times the bytes) to see its
    /// keys. What `keep` accepts is sorted into id order, then cut at `max`.
    pub fn invocation_ids(&self, keep: &dyn Fn(&str) -> bool, max: usize) -> Result<Vec<String>> {
        let mut out = Vec::new();
        for row in self.order.iter().map_err(|e| redb_err(&self.path, e))? {
            let (key, _) = row.map_err(|e| redb_err(&self.path, e))?;
            let id = unpack_id(key.value().1, &self.path)?;
            if keep(&id) {
                out.push(id);
            }
        }
        out.sort_unstable();
        out.truncate(max);
        Ok(out)
    }

    pub fn invocations(
        &self,
        keep: impl Fn(&Invocation) -> bool,
        last: Option<usize>,
    ) -> Result<(Vec<Invocation>, usize)> {
        // Each record is decoded once; with `last`, only about that many are kept at a time
        // (the latest by sequence; ids mostly, not exactly, follow it).
        let mut kept: Vec<(Invocation, EventRef)> = Vec::new();
        let mut total = 0;
        let trim = |kept: &mut Vec<(Invocation, EventRef)>, n: usize| {
            kept.sort_unstable_by_key(|(inv, _)| inv.seq);
            let extra = kept.len().saturating_sub(n);
            kept.drain(..extra);
        };
        for row in self
            .invocations
            .iter()
            .map_err(|e| redb_err(&self.path, e))?
        {
            let (key, record) = row.map_err(|e| redb_err(&self.path, e))?;
            let id = unpack_id(key.value(), &self.path)?;
            let (inv, event) = decode_invocation(&id, record.value(), &self.path)?;
            if !keep(&inv) {
                continue;
            }
            total += 1;
            kept.push((inv, event));
            if let Some(n) = last
                && kept.len() > n.saturating_mul(2).max(64)
            {
                trim(&mut kept, n);
            }
        }
        trim(&mut kept, last.unwrap_or(usize::MAX));
        let mut out = Vec::with_capacity(kept.len());
        for (mut inv, event) in kept {
            inv.event = load_event(&self.events, event, &self.path)?;
            out.push(inv);
        }
        Ok((out, total))
    }

    /// Every stored ledger block with its first row number (for `store check`).
    pub(super) fn ledger_blocks(&self) -> Result<Vec<(u64, Vec<u8>)>> {
        let mut blocks = Vec::new();
        for row in self.ledger.iter().map_err(|e| redb_err(&self.path, e))? {
            let (first, bytes) = row.map_err(|e| redb_err(&self.path, e))?;
            blocks.push((first.value(), bytes.value().to_vec()));
        }
        Ok(blocks)
    }

    /// Every decision recorded for `event_id`, in the order they were made. The ledger has
    /// no index by event (it is written for cheap appends), so this reads all of it: for
    /// tests and inspection, not for a hot path.
    pub fn ledger(&self, event_id: &str) -> Result<Vec<LedgerRow>> {
        let mut rows = Vec::new();
        for block in self.ledger.iter().map_err(|e| redb_err(&self.path, e))? {
            let (_, bytes) = block.map_err(|e| redb_err(&self.path, e))?;
            let block = Block::new(bytes.value()).map_err(|_| malformed(&self.path))?;
            for row in block.rows() {
                let row = row.map_err(|_| malformed(&self.path))?;
                if row.event_id == event_id {
                    rows.push(row);
                }
            }
        }
        Ok(rows)
    }

    /// Audit entries in order; with `last`, only the last that many.
    /// Audit entries numbered above `after`, oldest first, until `each` says stop.
    pub fn scan_audit(
        &self,
        after: u64,
        each: &mut dyn FnMut(AuditEntry) -> Result<pap_storage::scan::Next>,
    ) -> Result<()> {
        let rows = self
            .audit
            .range(after.saturating_add(1)..)
            .map_err(|e| redb_err(&self.path, e))?;
        for row in rows {
            let (_, bytes) = row.map_err(|e| redb_err(&self.path, e))?;
            let entry: AuditEntry = decode(&self.path, bytes.value())?;
            if each(entry)? == pap_storage::scan::Next::Stop {
                break;
            }
        }
        Ok(())
    }

    pub fn audit(&self, last: Option<usize>) -> Result<(Vec<AuditEntry>, usize)> {
        let total = self.audit.len().map_err(|e| redb_err(&self.path, e))? as usize;
        let rows = self.audit.iter().map_err(|e| redb_err(&self.path, e))?;
        let mut out: Vec<AuditEntry> = Vec::new();
        // The newest `last`, read from the end: skipping from the start would walk every
        // older entry first.
        let newest_first = rows.rev().take(last.unwrap_or(usize::MAX));
        for row in newest_first {
            let (_, v) = row.map_err(|e| redb_err(&self.path, e))?;
            out.push(decode(&self.path, v.value())?);
        }
        out.reverse();
        Ok((out, total))
    }
}

/// An invocation id from its packed form in a key or value.
pub(super) fn unpack_id(bytes: &[u8], path: &Path) -> Result<String> {
    id_codec::unpack(bytes).ok_or_else(|| Error::Corrupt {
        path: path.to_path_buf(),
        message: "an invocation id does not unpack".into(),
    })
}

/// Ids in a (time, packed id) index with a time at or before `now`, earliest first.
fn ids_due_in(
    index: &impl ReadableTable<(i64, &'static [u8]), ()>,
    now: i64,
    limit: usize,
    path: &Path,
) -> Result<Vec<String>> {
    let mut due = Vec::new();
    let before: (i64, &[u8]) = (now.saturating_add(1), &[]);
    for row in index
        .range(..before)
        .map_err(|e| redb_err(path, e))?
        .take(limit)
    {
        let (k, _) = row.map_err(|e| redb_err(path, e))?;
        due.push(unpack_id(k.value().1, path)?);
    }
    Ok(due)
}

/// Moves `id` in a (time, packed id) index from `old` to `new` (either may be absent).
fn reindex(
    table: &mut Table<'_, (i64, &'static [u8]), ()>,
    old: Option<i64>,
    new: Option<i64>,
    id: &[u8],
    path: &Path,
) -> Result<()> {
    if old == new {
        return Ok(());
    }
    if let Some(at) = old {
        table.remove((at, id)).map_err(|e| redb_err(path, e))?;
    }
    if let Some(at) = new {
        table.insert((at, id), ()).map_err(|e| redb_err(path, e))?;
    }
    Ok(())
}

/// The error for a ledger block that does not follow its layout.
pub(super) fn malformed(path: &Path) -> Error {
    Error::Corrupt {
        path: path.to_path_buf(),
        message: "a ledger block does not follow its layout".into(),
    }
}

/// Where an invocation sits in the approval-deadline index (only while it awaits approval).
fn deadline_key(inv: &Invocation) -> Option<i64> {
    Some(inv)
        .filter(|i| i.status == Status::AwaitingApproval)
        .and_then(|i| i.approval_deadline)
}

/// A new invocation, written at the end of its transaction.
struct Fresh {
    record: Vec<u8>,
    work: Option<i64>,
    deadline: Option<i64>,
    /// Where it stands in the concurrency index, and its due time (the index and a waiter's
    /// due-work entry are written at once, not at the end).
    concurrency: Option<(Entry, i64)>,
}

impl Fresh {
    fn of(inv: &Invocation, event: EventRef) -> Fresh {
        Fresh {
            record: invocation_codec::encode(inv, event),
            work: work_key(inv),
            deadline: deadline_key(inv),
            concurrency: state_of(inv).map(|entry| (entry, due_of(inv))),
        }
    }
}

/// Where an invocation sits in the work index: running ones first (a dead runner's are
/// resumed before new work starts), then queued ones in the order they fall due. A waiter
/// for concurrency keys is placed by the concurrency index instead (`tx_concurrency`), only
/// while its keys admit it.
pub(super) fn work_key(inv: &Invocation) -> Option<i64> {
    match inv.status {
        Status::Running => Some(i64::MIN),
        Status::Queued if state_of(inv) != Some(Entry::Waiting) => Some(due_of(inv)),
        _ => None,
    }
}

/// The record of invocation `id` in `table`, without its event, and the event's key.
fn read_record(
    table: &impl ReadableTable<&'static [u8], &'static [u8]>,
    id: &str,
    path: &Path,
) -> Result<Option<(Invocation, EventRef)>> {
    let found = table
        .get(id_codec::pack(id).as_slice())
        .map_err(|e| redb_err(path, e))?;
    found
        .map(|v| decode_invocation(id, v.value(), path))
        .transpose()
}

pub(super) fn decode_invocation(
    id: &str,
    bytes: &[u8],
    path: &Path,
) -> Result<(Invocation, EventRef)> {
    invocation_codec::decode(id, bytes).map_err(|e| Error::Corrupt {
        path: path.to_path_buf(),
        message: format!("invocation {id}: {e}"),
    })
}

/// An invocation's event, by its key.
fn load_event(
    events: &impl ReadableTable<u64, &'static [u8]>,
    key: EventRef,
    path: &Path,
) -> Result<serde_json::Value> {
    let found = events.get(key).map_err(|e| redb_err(path, e))?;
    match found {
        Some(bytes) => decode(path, bytes.value()),
        None => Err(Error::Corrupt {
            path: path.to_path_buf(),
            message: "an invocation's event is missing".into(),
        }),
    }
}

pub(super) fn encode(value: &impl Serialize) -> Vec<u8> {
    serde_json::to_vec(value).expect("records serialise")
}

pub(super) fn decode<T: DeserializeOwned>(path: &Path, bytes: &[u8]) -> Result<T> {
    serde_json::from_slice(bytes).map_err(|e| Error::Corrupt {
        path: path.to_path_buf(),
        message: e.to_string(),
    })
}

fn decode_times(bytes: &[u8]) -> Vec<i64> {
    bytes
        .chunks_exact(8)
        .map(|c| i64::from_le_bytes(c.try_into().expect("8 bytes")))
        .collect()
}
