//! The reads of one consistent snapshot.

use crate::domain::{AuditEntry, InboxMessage, Invocation, LedgerRow, Notification, OutboxEntry};
use crate::{Result, scan};

/// The reads of one consistent snapshot. A reader never changes the state, and never waits
/// for a writer's sync: what is due (an expired approval) is computed, not recorded.
pub trait ReadTx {
    fn invocation(&self, id: &str) -> Result<Option<Invocation>>;
    /// Invocations in creation order that `keep` accepts (it sees each without its event);
    /// with `last`, only the last that many. Returns them and how many were kept in all.
    fn invocations(
        &self,
        keep: &dyn Fn(&Invocation) -> bool,
        last: Option<usize>,
    ) -> Result<(Vec<Invocation>, usize)>;
    /// Runs `each` on the invocations `scan` names, in its order, each without its event
    /// (which stays `null`), until it says [`scan::Next::Stop`]. Memory stays constant
    /// however many rows there are: a listing streams, a page stops.
    fn scan_invocations(
        &self,
        scan: &scan::Scan,
        each: &mut dyn FnMut(Invocation) -> Result<scan::Next>,
    ) -> Result<()>;
    /// The queue's counts as of `now` (see [`scan::QueueCounts`]), from indexes: never by
    /// reading the invocations.
    fn queue_counts(&self, now: i64, overdue_before: i64) -> Result<scan::QueueCounts>;
    /// The ids of invocations that `keep` accepts (it sees only the id), at most `max`, in
    /// id order: for resolving the short or partial ids people type.
    fn invocation_ids(&self, keep: &dyn Fn(&str) -> bool, max: usize) -> Result<Vec<String>>;
    /// The ids whose random part (see `domain::short_id`) starts with one of `heads` (each
    /// [`crate::domain::short_id::MIN`] hex digits), in id order: what a short form is
    /// worked out against. A store may compare its keys without making an id of each.
    fn ids_with_random_heads(&self, heads: &[&str]) -> Result<Vec<String>> {
        let heads: std::collections::HashSet<&str> = heads.iter().copied().collect();
        self.invocation_ids(
            &|id| heads.contains(crate::domain::short_id::head(id)),
            usize::MAX,
        )
    }
    /// As [`WriteTx::work_due`] (a look before taking work in a write).
    fn work_due(&self, now: i64, limit: usize) -> Result<Vec<String>>;
    /// As [`WriteTx::approvals_due`].
    fn approvals_due(&self, now: i64) -> Result<Vec<String>>;
    /// Every decision recorded for `event_id`, in the order they were made (a scan: for
    /// inspection and tests, not a hot path).
    fn ledger(&self, event_id: &str) -> Result<Vec<LedgerRow>>;
    fn schedule_last(&self, id: &str) -> Result<Option<i64>>;
    /// Every event waiting in the outbox, by id.
    fn outbox_entries(&self) -> Result<Vec<(String, OutboxEntry)>>;
    /// Audit entries in order; with `last`, only the last that many; and how many in all.
    fn audit(&self, last: Option<usize>) -> Result<(Vec<AuditEntry>, usize)>;
    fn notification(&self, id: &str) -> Result<Option<Notification>>;
    /// Notifications by recorded status and failing deliveries by sink (see
    /// [`scan::NotifyCounts`]), never by reading them all into pap.
    fn notification_counts(&self) -> Result<scan::NotifyCounts>;
    /// Notifications in creation order (`order`), those after the one numbered `after` in
    /// that order, each passed to `each` until it says [`scan::Next::Stop`]: a listing or a
    /// look at the recent ones that never holds the rest.
    fn scan_notifications(
        &self,
        order: scan::Order,
        after: Option<u64>,
        each: &mut dyn FnMut(Notification) -> Result<scan::Next>,
    ) -> Result<()>;
    /// Audit entries oldest first, those numbered above `after`, each passed to `each` until
    /// it says [`scan::Next::Stop`].
    fn scan_audit(
        &self,
        after: u64,
        each: &mut dyn FnMut(AuditEntry) -> Result<scan::Next>,
    ) -> Result<()>;
    /// Notifications in creation order, as [`ReadTx::invocations`].
    fn notifications(
        &self,
        keep: &dyn Fn(&Notification) -> bool,
        last: Option<usize>,
    ) -> Result<(Vec<Notification>, usize)>;
    /// Inbox messages with an id strictly above `after`, oldest first, those `keep`
    /// accepts, at most `limit`.
    fn inbox_after(
        &self,
        after: u64,
        limit: usize,
        keep: &dyn Fn(&InboxMessage) -> bool,
    ) -> Result<Vec<InboxMessage>>;
    /// The newest inbox id (0 when the inbox is empty).
    fn inbox_last(&self) -> Result<u64>;
    fn inbox_message(&self, id: u64) -> Result<Option<InboxMessage>>;
    /// Open sessions with the time they were opened.
    fn sessions(&self) -> Result<Vec<(String, i64)>>;
    fn session_agent(&self, name: &str) -> Result<Option<String>>;
    /// What waits in `agent`'s queue, oldest first, without taking it.
    fn queue_peek(&self, agent: &str) -> Result<Vec<String>>;
    fn atp_lookup(&self, atp_id: &str) -> Result<Option<String>>;
    /// When the earliest pending trailing debounce fires (ms), if any.
    fn debounce_next_due(&self) -> Result<Option<i64>>;
    /// Whether any timer job is due at or before `now`.
    fn any_job_due(&self, now: i64) -> Result<bool>;
    /// Timer jobs due after `after` and at or before `until`, earliest first, at most
    /// `limit` (an index range: what a watcher waits for next, what fell due since a look).
    fn jobs_between(&self, after: i64, until: i64, limit: usize) -> Result<Vec<(i64, String)>>;
}
