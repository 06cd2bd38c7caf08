//! The redb store as an implementation of the storage interface (`pap_storage`): each
//! operation is the transaction's own method of that name.

use std::path::PathBuf;

use super::{Reader, Store, Tx};
use pap_domain::{
    AuditEntry, DebounceState, InboxMessage, Invocation, LedgerRow, Notification, OutboxEntry,
    Runner,
};
use pap_storage::purge::{DebounceCursor, Purged};
use pap_storage::{Claimed, Commit, ReadTx, Result, RowRef, Sequence, Stamp, Storage, WriteTx};

impl Storage for Store {
    fn write_dyn(
        &self,
        commit: Commit,
        f: &mut dyn FnMut(&mut dyn WriteTx) -> Result<()>,
    ) -> Result<()> {
        match commit {
            Commit::Durable | Commit::Background => Store::write(self, |tx| f(tx)),
            Commit::Grouped => Store::write_grouped(self, |tx| f(tx)),
        }
    }

    fn read_dyn(&self, f: &mut dyn FnMut(&dyn ReadTx) -> Result<()>) -> Result<()> {
        Store::read(self, |r| f(r))
    }

    fn table_sizes(&self) -> Result<Vec<pap_storage::space::TableSize>> {
        Store::table_sizes(self)
    }

    fn location(&self) -> PathBuf {
        self.path()
    }

    fn dir(&self) -> Option<PathBuf> {
        Store::dir(self)
    }

    fn export(
        &self,
        each: &mut dyn FnMut(pap_storage::transfer::Item) -> Result<()>,
    ) -> Result<()> {
        self.export_items(each)
    }

    fn import(&self, items: &[pap_storage::transfer::Item]) -> Result<()> {
        self.import_items(items)
    }

    fn is_empty(&self) -> Result<bool> {
        self.holds_nothing()
    }

    fn stamp(&self) -> Option<Stamp> {
        Store::stamp(self)
    }
}

fn counter(sequence: Sequence) -> &'static str {
    match sequence {
        Sequence::Invocation => "invocation_seq",
        Sequence::Notification => "notification_seq",
    }
}

impl WriteTx for Tx<'_> {
    fn next(&mut self, sequence: Sequence) -> Result<u64> {
        self.next_seq(counter(sequence))
    }
    fn issue_lease_token(&mut self) -> Result<u64> {
        Tx::issue_lease_token(self)
    }
    fn check_lease(&self, id: &str, token: u64) -> Result<()> {
        Tx::check_lease(self, id, token)
    }
    fn claim(&mut self, key: &[u8; 32], now: i64, expires_at: i64) -> Result<Claimed> {
        Tx::claim(self, key, now, expires_at)
    }
    fn extend_claim(&mut self, key: &[u8; 32], expires_at: i64) -> Result<()> {
        Tx::extend_claim(self, key, expires_at)
    }
    fn record_decision(&mut self, row: u64, decision: RowRef) -> Result<()> {
        self.put_ledger(row, decision)
    }
    fn throttle_times(&self, trigger: &str, key: &str) -> Result<Vec<i64>> {
        Tx::throttle_times(self, trigger, key)
    }
    fn throttle_record(
        &mut self,
        trigger: &str,
        key: &str,
        now: i64,
        window_ms: i64,
    ) -> Result<()> {
        Tx::throttle_record(self, trigger, key, now, window_ms)
    }
    fn token_uses(&self, agent: &str) -> Result<Vec<pap_domain::budget::TokenUse>> {
        Tx::token_uses(self, agent)
    }
    fn set_token_uses(&mut self, agent: &str, uses: &[pap_domain::budget::TokenUse]) -> Result<()> {
        Tx::set_token_uses(self, agent, uses)
    }
    fn concurrency_block(&self, inv: &Invocation, now: i64) -> Result<Option<(String, String)>> {
        Tx::concurrency_block(self, inv, now)
    }
    fn relimit_concurrency(&mut self, scope: &str, limit: u32) -> Result<()> {
        for (key, was) in self.concurrency_keys(scope)? {
            if was != limit {
                self.relimit_key(&key, limit)?;
            }
        }
        Ok(())
    }
    fn debounce_state(&self, trigger: &str, key: &str) -> Result<Option<DebounceState>> {
        Tx::debounce_state(self, trigger, key)
    }
    fn debounce_put(&mut self, trigger: &str, key: &str, state: &DebounceState) -> Result<()> {
        Tx::debounce_put(self, trigger, key, state)
    }
    fn debounce_due(&mut self, now: i64, limit: usize) -> Result<Vec<(String, String)>> {
        Tx::debounce_due(self, now, limit)
    }
    fn purge_debounce(
        &mut self,
        now: i64,
        quiet_of: &dyn Fn(&str) -> Option<i64>,
        after: Option<&DebounceCursor>,
        limit: usize,
    ) -> Result<(Purged, Option<DebounceCursor>)> {
        Tx::purge_debounce(self, now, quiet_of, after, limit)
    }
    fn invocation(&self, id: &str) -> Result<Option<Invocation>> {
        Tx::invocation(self, id)
    }
    fn insert_invocation(&mut self, inv: &Invocation) -> Result<()> {
        Tx::insert_invocation(self, inv)
    }
    fn put_invocation(&mut self, inv: &Invocation) -> Result<()> {
        Tx::put_invocation(self, inv)
    }
    fn approvals_due(&mut self, now: i64) -> Result<Vec<String>> {
        Tx::approvals_due(self, now)
    }
    fn work_due(&mut self, now: i64, limit: usize) -> Result<Vec<String>> {
        Tx::work_due(self, now, limit)
    }
    fn schedule_last(&self, id: &str) -> Result<Option<i64>> {
        Tx::schedule_last(self, id)
    }
    fn set_schedule_last(&mut self, id: &str, at: i64) -> Result<()> {
        Tx::set_schedule_last(self, id, at)
    }
    fn outbox_put(
        &mut self,
        event_id: &str,
        event: &serde_json::Value,
        owner: Option<&Runner>,
    ) -> Result<()> {
        Tx::outbox_put(self, event_id, event, owner)
    }
    fn outbox_remove(&mut self, event_id: &str) -> Result<()> {
        Tx::outbox_remove(self, event_id)
    }
    fn audit(&mut self, entry: AuditEntry) -> Result<()> {
        Tx::audit(self, entry)
    }
    fn notification(&mut self, id: &str) -> Result<Option<Notification>> {
        Tx::notification(self, id)
    }
    fn put_notification(&mut self, n: &Notification) -> Result<()> {
        Tx::put_notification(self, n)
    }
    fn dedup_lookup(&mut self, key: &str) -> Result<Option<String>> {
        Tx::dedup_lookup(self, key)
    }
    fn set_dedup(&mut self, key: &str, id: &str) -> Result<()> {
        Tx::set_dedup(self, key, id)
    }
    fn add_job(&mut self, at: i64, job: &str) -> Result<()> {
        Tx::add_job(self, at, job)
    }
    fn remove_job(&mut self, at: i64, job: &str) -> Result<()> {
        Tx::remove_job(self, at, job)
    }
    fn jobs_due(&mut self, now: i64, limit: usize) -> Result<Vec<(i64, String)>> {
        Tx::jobs_due(self, now, limit)
    }
    fn inbox_append(&mut self, msg: InboxMessage) -> Result<u64> {
        Tx::inbox_append(self, msg)
    }
    fn inbox_mark(&self) -> Result<u64> {
        Tx::inbox_mark(self)
    }
    fn inbox_message(&mut self, id: u64) -> Result<Option<InboxMessage>> {
        Tx::inbox_message(self, id)
    }
    fn queue_push(&mut self, agent: &str, id: &str) -> Result<()> {
        Tx::queue_push(self, agent, id)
    }
    fn queue_take(&mut self, agent: &str) -> Result<Vec<String>> {
        Tx::queue_take(self, agent)
    }
    fn session_open(&mut self, name: &str, at: i64) -> Result<bool> {
        Tx::session_open(self, name, at)
    }
    fn session_close(&mut self, name: &str) -> Result<bool> {
        Tx::session_close(self, name)
    }
    fn session_is_open(&mut self, name: &str) -> Result<bool> {
        Tx::session_is_open(self, name)
    }
    fn session_bind(&mut self, name: &str, agent: Option<&str>) -> Result<()> {
        Tx::session_bind(self, name, agent)
    }
    fn session_agent(&mut self, name: &str) -> Result<Option<String>> {
        Tx::session_agent(self, name)
    }
    fn atp_put(&mut self, atp_id: &str, notification: &str) -> Result<()> {
        Tx::atp_put(self, atp_id, notification)
    }
    fn atp_lookup(&mut self, atp_id: &str) -> Result<Option<String>> {
        Tx::atp_lookup(self, atp_id)
    }
    fn purge_expired_claims(&mut self, now: i64, limit: usize) -> Result<Purged> {
        Tx::purge_expired_claims(self, now, limit)
    }
    fn purge_claims_batched(
        &mut self,
        now: i64,
        limit: usize,
        batch: &mut pap_storage::purge::ClaimBatch,
    ) -> Result<Purged> {
        Tx::purge_claims_batched(self, now, limit, batch)
    }
    fn purge_ledger(&mut self, cutoff: i64, limit: usize) -> Result<Purged> {
        Tx::purge_ledger(self, cutoff, limit)
    }
    fn purge_throttle(
        &mut self,
        cutoff: i64,
        after: Option<&DebounceCursor>,
        limit: usize,
    ) -> Result<(Purged, Option<DebounceCursor>)> {
        Tx::purge_throttle(self, cutoff, after, limit)
    }
    fn purge_invocations(
        &mut self,
        cutoff: i64,
        after: Option<u64>,
        limit: usize,
    ) -> Result<(Purged, Option<u64>)> {
        Tx::purge_invocations(self, cutoff, after, limit)
    }
    fn purge_notifications(
        &mut self,
        cutoff: i64,
        after: Option<u64>,
        limit: usize,
    ) -> Result<(Purged, Option<u64>)> {
        Tx::purge_notifications(self, cutoff, after, limit)
    }
    fn purge_inbox(&mut self, cutoff: i64, limit: usize) -> Result<Purged> {
        Tx::purge_inbox(self, cutoff, limit)
    }
    fn purge_audit(&mut self, cutoff: i64, limit: usize) -> Result<Purged> {
        Tx::purge_audit(self, cutoff, limit)
    }
}

impl ReadTx for Reader {
    fn debounce_next_due(&self) -> Result<Option<i64>> {
        Reader::debounce_next_due(self)
    }
    fn invocation(&self, id: &str) -> Result<Option<Invocation>> {
        Reader::invocation(self, id)
    }
    fn invocations(
        &self,
        keep: &dyn Fn(&Invocation) -> bool,
        last: Option<usize>,
    ) -> Result<(Vec<Invocation>, usize)> {
        Reader::invocations(self, keep, last)
    }
    fn invocation_ids(&self, keep: &dyn Fn(&str) -> bool, max: usize) -> Result<Vec<String>> {
        Reader::invocation_ids(self, keep, max)
    }
    fn scan_invocations(
        &self,
        scan: &pap_storage::scan::Scan,
        each: &mut dyn FnMut(Invocation) -> Result<pap_storage::scan::Next>,
    ) -> Result<()> {
        Reader::scan_invocations(self, scan, each)
    }
    fn queue_counts(
        &self,
        now: i64,
        overdue_before: i64,
    ) -> Result<pap_storage::scan::QueueCounts> {
        Reader::queue_counts(self, now, overdue_before)
    }
    fn work_due(&self, now: i64, limit: usize) -> Result<Vec<String>> {
        Reader::work_due(self, now, limit)
    }
    fn approvals_due(&self, now: i64) -> Result<Vec<String>> {
        Reader::approvals_due(self, now)
    }
    fn ledger(&self, event_id: &str) -> Result<Vec<LedgerRow>> {
        Reader::ledger(self, event_id)
    }
    fn schedule_last(&self, id: &str) -> Result<Option<i64>> {
        Reader::schedule_last(self, id)
    }
    fn outbox_entries(&self) -> Result<Vec<(String, OutboxEntry)>> {
        Reader::outbox_entries(self)
    }
    fn audit(&self, last: Option<usize>) -> Result<(Vec<AuditEntry>, usize)> {
        Reader::audit(self, last)
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
    fn notification_counts(&self) -> Result<pap_storage::scan::NotifyCounts> {
        Reader::notification_counts(self)
    }
    fn scan_notifications(
        &self,
        order: pap_storage::scan::Order,
        after: Option<u64>,
        each: &mut dyn FnMut(Notification) -> Result<pap_storage::scan::Next>,
    ) -> Result<()> {
        self.notify.scan(order, after, each)
    }
    fn scan_audit(
        &self,
        after: u64,
        each: &mut dyn FnMut(AuditEntry) -> Result<pap_storage::scan::Next>,
    ) -> Result<()> {
        Reader::scan_audit(self, after, each)
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
