//! The redb store's reads: the storage interface's `ReadTx` on one snapshot ([`Reader`]).
//! Notifications, the inbox and sessions are read through the snapshot's `NotifyReader`.

use redb::{ReadableTable, ReadableTableMetadata};

use super::invocation_codec::EventRef;
use super::ledger_block::Block;
use super::notify_counts::{FAILING_PREFIX, STATUS_PREFIX};
use super::read_index::walk;
use super::tx::{
    Reader, decode, decode_invocation, ids_due_in, load_event, malformed, read_record, unpack_id,
};
use super::{Result, id_codec, redb_err, time_count};
use pap_domain::{
    AuditEntry, InboxMessage, Invocation, LedgerRow, Notification, OutboxEntry, Status,
};
use pap_storage::scan::{Next, NotifyCounts, Only, QueueCounts, Scan};

impl pap_storage::ReadTx for Reader {
    /// When the earliest pending trailing debounce fires (ms), if any.
    fn debounce_next_due(&self) -> Result<Option<i64>> {
        let Some(table) = &self.debounce_due else {
            return Ok(None);
        };
        let first = table.first().map_err(|e| redb_err(&self.path, e))?;
        Ok(first.map(|(k, _)| k.value().0))
    }

    fn invocation(&self, id: &str) -> Result<Option<Invocation>> {
        let Some((mut inv, event)) = read_record(&self.invocations, id, &self.path)? else {
            return Ok(None);
        };
        inv.event = load_event(&self.events, event, &self.path)?;
        Ok(Some(inv))
    }

    fn invocations(
        &self,
        keep: &dyn Fn(&Invocation) -> bool,
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
    fn invocation_ids(&self, keep: &dyn Fn(&str) -> bool, max: usize) -> Result<Vec<String>> {
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

    /// As the default, comparing the packed keys of the creation-order index: only an id
    /// that shares a head is made into text.
    fn ids_with_random_heads(&self, heads: &[&str]) -> Result<Vec<String>> {
        let packed: std::collections::HashSet<[u8; 3]> = heads
            .iter()
            .filter_map(|h| id_codec::head_bytes(h))
            .collect();
        let mut out = Vec::new();
        for row in self.order.iter().map_err(|e| redb_err(&self.path, e))? {
            let (key, _) = row.map_err(|e| redb_err(&self.path, e))?;
            let bytes = key.value().1;
            let hit = match id_codec::random_head(bytes) {
                Some(head) => packed.contains(&head),
                None => {
                    let id = unpack_id(bytes, &self.path)?;
                    heads.contains(&pap_domain::short_id::head(&id))
                }
            };
            if hit {
                out.push(unpack_id(bytes, &self.path)?);
            }
        }
        out.sort_unstable();
        Ok(out)
    }

    /// See [`pap_storage::ReadTx::scan_invocations`].
    fn scan_invocations(
        &self,
        scan: &Scan,
        each: &mut dyn FnMut(Invocation) -> Result<Next>,
    ) -> Result<()> {
        let e = |e| redb_err(&self.path, e);
        let mut visit = |seq: u64, packed: &[u8], deadline: Option<i64>| -> Result<Next> {
            if !scan.beyond(seq) || deadline.is_some_and(|d| d <= scan.now) {
                return Ok(Next::More);
            }
            let Some(record) = self.invocations.get(packed).map_err(e)? else {
                return Ok(Next::More);
            };
            let id = unpack_id(packed, &self.path)?;
            let (inv, _) = decode_invocation(&id, record.value(), &self.path)?;
            each(inv)
        };
        match scan.only {
            Only::All => walk(&self.order, scan, &self.path, &|_| None, &mut visit),
            Only::Awaiting => walk(
                &self.awaiting,
                scan,
                &self.path,
                &|v: &redb::AccessGuard<(i64, i64)>| Some(v.value().1),
                &mut visit,
            ),
        }
    }

    /// See [`pap_storage::ReadTx::queue_counts`]: lengths and counters, and what depends on
    /// the time counted from the shorter side of `now` in the time indexes (see
    /// `time_count`): no record is decoded, and nothing walks the whole queue.
    fn queue_counts(&self, now: i64, overdue_before: i64) -> Result<QueueCounts> {
        let e = |e| redb_err(&self.path, e);
        let after_now = now.saturating_add(1);
        let expired_unrecorded =
            time_count::before(&self.approval_deadlines, after_now, &self.path)?;
        // Past half as of now and not yet past the deadline (an expired one is past half too).
        let past_half = time_count::before(&self.halves, after_now, &self.path)?
            .saturating_sub(expired_unrecorded);
        Ok(QueueCounts {
            awaiting: self.awaiting.len().map_err(e)?,
            expired_unrecorded,
            queued: self.count(Status::Queued)?,
            running: self.count(Status::Running)?,
            // Running work sits first in the index (at the earliest time), never overdue.
            overdue: time_count::before(&self.work, overdue_before.saturating_add(1), &self.path)?
                .saturating_sub(time_count::before(&self.work, i64::MIN + 1, &self.path)?),
            past_half,
            oldest_waiting: self.oldest_waiting(now)?,
        })
    }

    /// Ids of due work, as [`Tx::work_due`] (a look before claiming in a write).
    fn work_due(&self, now: i64, limit: usize) -> Result<Vec<String>> {
        ids_due_in(&self.work, now, limit, &self.path)
    }

    /// As [`Tx::approvals_due`]: a look before expiring in a write.
    fn approvals_due(&self, now: i64) -> Result<Vec<String>> {
        ids_due_in(&self.approval_deadlines, now, usize::MAX, &self.path)
    }

    /// Every decision recorded for `event_id`, in the order they were made. The ledger has
    /// no index by event (it is written for cheap appends), so this reads all of it: for
    /// tests and inspection, not for a hot path.
    fn ledger(&self, event_id: &str) -> Result<Vec<LedgerRow>> {
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

    /// The last fire time recorded for a schedule.
    fn schedule_last(&self, id: &str) -> Result<Option<i64>> {
        let found = self
            .schedules
            .get(id)
            .map_err(|e| redb_err(&self.path, e))?;
        Ok(found.map(|v| v.value()))
    }

    /// Every event waiting in the outbox, by id.
    fn outbox_entries(&self) -> Result<Vec<(String, OutboxEntry)>> {
        let mut out = Vec::new();
        for row in self.outbox.iter().map_err(|e| redb_err(&self.path, e))? {
            let (k, v) = row.map_err(|e| redb_err(&self.path, e))?;
            out.push((k.value().to_owned(), decode(&self.path, v.value())?));
        }
        Ok(out)
    }

    fn audit(&self, last: Option<usize>) -> Result<(Vec<AuditEntry>, usize)> {
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

    fn notification(&self, id: &str) -> Result<Option<Notification>> {
        self.notify.notification(id)
    }

    fn notifications(
        &self,
        keep: &dyn Fn(&Notification) -> bool,
        last: Option<usize>,
    ) -> Result<(Vec<Notification>, usize)> {
        self.notify.notifications(keep, last)
    }

    /// The counts by recorded status (see `NotifyCounts`).
    fn notification_counts(&self) -> Result<NotifyCounts> {
        let path = self.path.clone();
        let mut counts = NotifyCounts::default();
        for row in self
            .meta
            .range(STATUS_PREFIX..)
            .map_err(|e| redb_err(&path, e))?
        {
            let (k, v) = row.map_err(|e| redb_err(&path, e))?;
            let Some(status) = k.value().strip_prefix(STATUS_PREFIX) else {
                break;
            };
            counts.by_status.insert(status.to_owned(), v.value());
        }
        for row in self
            .meta
            .range(FAILING_PREFIX..)
            .map_err(|e| redb_err(&path, e))?
        {
            let (k, v) = row.map_err(|e| redb_err(&path, e))?;
            let Some(sink) = k.value().strip_prefix(FAILING_PREFIX) else {
                break;
            };
            counts.failing_by_sink.insert(sink.to_owned(), v.value());
        }
        Ok(counts)
    }

    fn scan_notifications(
        &self,
        order: pap_storage::scan::Order,
        after: Option<u64>,
        each: &mut dyn FnMut(Notification) -> Result<pap_storage::scan::Next>,
    ) -> Result<()> {
        self.notify.scan(order, after, each)
    }

    /// Audit entries in order; with `last`, only the last that many.
    /// Audit entries numbered above `after`, oldest first, until `each` says stop.
    fn scan_audit(
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

    fn inbox_after(
        &self,
        after: u64,
        limit: usize,
        keep: &dyn Fn(&InboxMessage) -> bool,
    ) -> Result<Vec<InboxMessage>> {
        self.notify.inbox_after(after, limit, keep)
    }

    fn inbox_last(&self) -> Result<u64> {
        self.notify.inbox_last()
    }

    fn inbox_message(&self, id: u64) -> Result<Option<InboxMessage>> {
        self.notify.inbox_message(id)
    }

    fn sessions(&self) -> Result<Vec<(String, i64)>> {
        self.notify.sessions()
    }

    fn session_agent(&self, name: &str) -> Result<Option<String>> {
        self.notify.session_agent(name)
    }

    fn queue_peek(&self, agent: &str) -> Result<Vec<String>> {
        self.notify.queue_peek(agent)
    }

    fn atp_lookup(&self, atp_id: &str) -> Result<Option<String>> {
        self.notify.atp_lookup(atp_id)
    }

    fn any_job_due(&self, now: i64) -> Result<bool> {
        self.notify.any_job_due(now)
    }

    fn jobs_between(&self, after: i64, until: i64, limit: usize) -> Result<Vec<(i64, String)>> {
        self.notify.jobs_between(after, until, limit)
    }
}
