//! Typed access inside one transaction: [`Tx`] for writes, [`Reader`] for snapshots.

use std::path::{Path, PathBuf};

use redb::{ReadOnlyTable, ReadTransaction, ReadableTable, Table, WriteTransaction};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::id_codec;
use super::invocation_codec::{self, EventHash, EventRef};
use super::tables::*;
use super::tx_claims::Decisions;
use super::tx_concurrency::{Entries, Index, holders_in};
use super::tx_notify::{NotifyReader, NotifyTables};
use super::{Error, Result, redb_err};
use pap_domain::{AuditEntry, Invocation, OutboxEntry, Runner, Status};
use pap_storage::Sequence;
use pap_storage::concurrency::blocking;
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
    pub(super) approval_deadlines: Table<'t, (i64, &'static [u8]), ()>,
    pub(super) ledger: Table<'t, u64, &'static [u8]>,
    pub(super) audit: Table<'t, u64, &'static [u8]>,
    outbox: Table<'t, &'static str, &'static [u8]>,
    work: Table<'t, (i64, &'static [u8]), ()>,
    schedules: Table<'t, &'static str, i64>,
    /// The read indexes (see `read_index`).
    pub(super) order: Table<'t, (u64, &'static [u8]), ()>,
    pub(super) awaiting: Table<'t, (u64, &'static [u8]), (i64, i64)>,
    pub(super) halves: Table<'t, (i64, &'static [u8]), ()>,
    pub(super) cancel_keys: Table<'t, (&'static str, &'static str, u64), &'static [u8]>,
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
            halves: txn.open_table(APPROVAL_HALVES).map_err(e)?,
            cancel_keys: txn.open_table(CANCEL_KEYS).map_err(e)?,
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

    // --- throttle windows ---------------------------------------------------------------

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
    pub(super) fn write_fresh(&mut self) -> Result<()> {
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

    // --- schedules ----------------------------------------------------------------------

    // --- ledger and audit ---------------------------------------------------------------
}

/// A consistent read-only view, for listings.
pub struct Reader {
    pub(super) path: PathBuf,
    pub(super) invocations: ReadOnlyTable<&'static [u8], &'static [u8]>,
    pub(super) events: ReadOnlyTable<u64, &'static [u8]>,
    pub(super) ledger: ReadOnlyTable<u64, &'static [u8]>,
    pub(super) audit: ReadOnlyTable<u64, &'static [u8]>,
    pub(super) schedules: ReadOnlyTable<&'static str, i64>,
    pub(super) work: ReadOnlyTable<(i64, &'static [u8]), ()>,
    pub(super) outbox: ReadOnlyTable<&'static str, &'static [u8]>,
    pub(super) approval_deadlines: ReadOnlyTable<(i64, &'static [u8]), ()>,
    pub(super) order: ReadOnlyTable<(u64, &'static [u8]), ()>,
    pub(super) awaiting: ReadOnlyTable<(u64, &'static [u8]), (i64, i64)>,
    pub(super) halves: ReadOnlyTable<(i64, &'static [u8]), ()>,
    pub(super) meta: ReadOnlyTable<&'static str, u64>,
    /// `None` in a file from before the debounce tables (no write has created them yet).
    pub(super) debounce_due: Option<ReadOnlyTable<(i64, &'static str, &'static str), ()>>,
    pub(super) notify: NotifyReader,
}

impl Reader {
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
            halves: txn.open_table(APPROVAL_HALVES).map_err(e)?,
            meta: txn.open_table(META).map_err(e)?,
            debounce_due: match txn.open_table(DEBOUNCE_DUE) {
                Ok(table) => Some(table),
                Err(redb::TableError::TableDoesNotExist(_)) => None,
                Err(other) => return Err(redb_err(path, other)),
            },
            notify: NotifyReader::open(txn, path)?,
        })
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
}

/// An invocation id from its packed form in a key or value.
pub(super) fn unpack_id(bytes: &[u8], path: &Path) -> Result<String> {
    id_codec::unpack(bytes).ok_or_else(|| Error::Corrupt {
        path: path.to_path_buf(),
        message: "an invocation id does not unpack".into(),
    })
}

/// Ids in a (time, packed id) index with a time at or before `now`, earliest first.
pub(super) fn ids_due_in(
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
pub(super) fn read_record(
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
pub(super) fn load_event(
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

pub(super) fn decode_times(bytes: &[u8]) -> Vec<i64> {
    bytes
        .chunks_exact(8)
        .map(|c| i64::from_le_bytes(c.try_into().expect("8 bytes")))
        .collect()
}

impl pap_storage::WorkTx for Tx<'_> {
    fn next(&mut self, sequence: Sequence) -> Result<u64> {
        self.next_seq(counter(sequence))
    }

    /// A fencing token for a new lease: greater than every token issued before.
    fn issue_lease_token(&mut self) -> Result<u64> {
        self.next_seq("lease_token")
    }

    /// Fails with [`Error::LeaseLost`] unless invocation `id` is still leased under `token`:
    /// the check a holder makes before it records anything about its attempt.
    fn check_lease(&self, id: &str, token: u64) -> Result<()> {
        let current = self
            .invocation_record(id)?
            .and_then(|(inv, _)| inv.lease.map(|l| l.token));
        Error::lease_check(id, token, current)
    }

    /// The first of `inv`'s keys that has no room for it now, and why (see
    /// [`concurrency::blocking`]): the key's holders and at most `limit` waiters before it.
    fn concurrency_block(&self, inv: &Invocation, now: i64) -> Result<Option<(String, String)>> {
        if inv.concurrency.is_empty() {
            return Ok(None);
        }
        let look = |holders: &Entries<'_>, waiters: &Entries<'_>| {
            blocking(inv, now, |key, before, max| {
                let held = holders_in(holders, key, Some(inv.seq))?;
                let ahead = waiters.range((key, 0)..(key, before))?.take(max).count();
                Ok::<_, redb::StorageError>((held, ahead))
            })
        };
        match &self.concurrency {
            Some(ix) => look(&ix.holders, &ix.waiters),
            None => {
                let ix = Index::open(self.txn).map_err(|e| self.conc_err(e))?;
                look(&ix.holders, &ix.waiters)
            }
        }
        .map_err(|e| self.conc_err(e))
    }

    fn relimit_concurrency(&mut self, scope: &str, limit: u32) -> Result<()> {
        for (key, was) in self.concurrency_keys(scope)? {
            if was != limit {
                self.relimit_key(&key, limit)?;
            }
        }
        Ok(())
    }

    fn invocation(&self, id: &str) -> Result<Option<Invocation>> {
        let Some((mut inv, event)) = self.invocation_record(id)? else {
            return Ok(None);
        };
        inv.event = load_event(&self.events, event, &self.path)?;
        Ok(Some(inv))
    }

    /// Records a new invocation (its id is fresh: nothing to update).
    fn insert_invocation(&mut self, inv: &Invocation) -> Result<()> {
        self.write_invocation(inv, None)
    }

    /// Inserts or updates an invocation, keeping the approval-deadline index in step.
    fn put_invocation(&mut self, inv: &Invocation) -> Result<()> {
        let old = self.invocation_record(&inv.id)?;
        self.write_invocation(inv, old)
    }

    fn cancellable(&self, trigger: &str, key: &str, limit: usize) -> Result<Vec<Invocation>> {
        let mut ids = Vec::new();
        for row in self
            .cancel_keys
            .range((trigger, key, 0)..=(trigger, key, u64::MAX))
            .map_err(|e| redb_err(&self.path, e))?
            .take(limit)
        {
            let (_, packed) = row.map_err(|e| redb_err(&self.path, e))?;
            ids.push(unpack_id(packed.value(), &self.path)?);
        }
        let mut found = Vec::with_capacity(ids.len());
        for id in ids {
            found.extend(pap_storage::WorkTx::invocation(self, &id)?);
        }
        Ok(found)
    }

    /// Ids of `queued` invocations due at or before `now` and of every `running` one (whose
    /// runner may have died), running ones first, at most `limit`.
    fn work_due(&mut self, now: i64, limit: usize) -> Result<Vec<String>> {
        self.write_fresh()?;
        ids_due_in(&self.work, now, limit, &self.path)
    }
}

impl pap_storage::LedgerTx for Tx<'_> {
    /// The last fire time recorded for a schedule.
    fn schedule_last(&self, id: &str) -> Result<Option<i64>> {
        let found = self
            .schedules
            .get(id)
            .map_err(|e| redb_err(&self.path, e))?;
        Ok(found.map(|v| v.value()))
    }

    fn set_schedule_last(&mut self, id: &str, at: i64) -> Result<()> {
        self.schedules
            .insert(id, at)
            .map_err(|e| redb_err(&self.path, e))?;
        Ok(())
    }

    /// Puts an emitted event in the outbox; `owner` is the process that will decide it.
    fn outbox_put(
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
    fn outbox_remove(&mut self, event_id: &str) -> Result<()> {
        self.outbox
            .remove(event_id)
            .map_err(|e| redb_err(&self.path, e))?;
        Ok(())
    }

    /// Appends to the audit log; `entry.seq` is assigned here.
    fn audit(&mut self, mut entry: AuditEntry) -> Result<()> {
        entry.seq = self.next_seq("audit_seq")?;
        let bytes = encode(&entry);
        self.audit
            .insert(entry.seq, bytes.as_slice())
            .map_err(|e| redb_err(&self.path, e))?;
        Ok(())
    }
}

/// The counter a sequence is kept under.
fn counter(sequence: Sequence) -> &'static str {
    match sequence {
        Sequence::Invocation => "invocation_seq",
        Sequence::Notification => "notification_seq",
    }
}
