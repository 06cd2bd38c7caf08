//! The storage interface: what the engine needs from a store, in the domain's terms.
//!
//! Everything above the store (decisions, runs, notifications, commands) reaches the state
//! through these traits and knows nothing of how it is kept. `pap::store` (one redb file) is
//! the first implementation and the only code that knows redb; a PostgreSQL store implements
//! the same traits. The behaviour every implementation must have is pinned by the contract
//! suite in `contract` (run against each implementation) and by the model-based test in
//! `tests/storage_model.rs`.
//!
//! A unit of work is one transaction: [`Storage::write`] runs a closure on a [`WriteTx`] and
//! commits what it did when it returns `Ok` (nothing of it when it fails), [`Storage::read`]
//! runs one on a consistent snapshot ([`ReadTx`]). The traits are object safe, so a process
//! holds its store as an `Arc<dyn Storage>` and a backend is chosen at run time.
//!
//! Ownership of running work is a lease with a fencing token (see `domain::lease`): the store
//! issues tokens ([`WriteTx::issue_lease_token`]) and refuses a holder's write once its
//! lease is gone ([`WriteTx::check_lease`]).

pub mod concurrency;
#[cfg(any(test, feature = "contract"))]
pub mod contract;
#[cfg(any(test, feature = "contract"))]
mod contract_purge;
#[cfg(any(test, feature = "contract"))]
mod contract_reads;
pub mod cursor;
mod error;
pub mod inbox_mark;
mod mark_file;
pub mod notification_mark;
pub mod pages;
pub mod purge;
pub mod scan;
pub mod short_forms;
pub mod space;
pub mod transfer;

use std::path::PathBuf;
use std::sync::Arc;

use pap_domain as domain;

use crate::domain::{
    AuditEntry, Claim, DebounceState, InboxMessage, Invocation, LedgerRow, Notification,
    OutboxEntry, Status,
};

pub use error::{Error, Result};

/// redb's page cache in a process that writes, unless pap.yaml's `store_cache` says
/// otherwise. Idempotency keys are random, so a long stream touches pages all over the claims
/// table; below the working set, every lookup becomes a read from the file (at 1M decisions of
/// the invocation-heavy benchmark, 64 MiB took about half as long again as 256 MiB).
pub const DEFAULT_STORE_CACHE: u64 = 256 << 20;

/// What a claim of an idempotency key found.
#[derive(Debug, Clone, PartialEq)]
pub enum Claimed {
    /// The key was free (or its claim had expired): it is claimed now, and the decision's
    /// ledger row must be the next one written, as row `row`.
    New { row: u64 },
    /// A live claim holds the key: the event is a duplicate for this trigger.
    Live(Claim),
}

/// One decision as recorded in the ledger: borrowed, so recording it allocates nothing per
/// field.
#[derive(Debug, Clone, Copy)]
pub struct RowRef<'a> {
    pub event_id: &'a str,
    pub trigger: &'a str,
    pub kind: &'a str,
    pub depth: u32,
    pub outcome: &'a str,
    pub invocation_id: Option<&'a str>,
    pub decided_at: i64,
}

impl<'a> From<&'a LedgerRow> for RowRef<'a> {
    fn from(r: &'a LedgerRow) -> RowRef<'a> {
        RowRef {
            event_id: &r.event_id,
            trigger: &r.trigger,
            kind: &r.kind,
            depth: r.depth,
            outcome: &r.outcome,
            invocation_id: r.invocation_id.as_deref(),
            decided_at: r.decided_at,
        }
    }
}

/// The sequences a store keeps: each gives 1, 2, … in commit order, never a number twice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sequence {
    /// Invocations, in creation order (listings sort by it).
    Invocation,
    /// Notifications, in creation order.
    Notification,
}

/// How many expired claims a decision's transaction purges at most when nothing else purges
/// (`pap dispatch` without serve): a few, so that a decision stays quick and the claims a
/// stream makes are still purged at the pace it makes them.
pub const INLINE_PURGE: usize = 64;

/// A stamp of the stored state that changes when another process commits, for a long-lived
/// reader that should look only when there is something new (see [`Storage::stamp`]).
#[derive(Debug, Clone, Copy)]
pub struct Stamp {
    pub modified: std::time::SystemTime,
    pub len: u64,
    pub inode: u64,
    /// Taken within [`Stamp::SETTLING`] of a change: never trusted to be the same.
    pub recent: bool,
}

impl Stamp {
    pub const SETTLING: std::time::Duration = std::time::Duration::from_secs(1);

    /// Whether the state may have changed between the two stamps (always, without stamps).
    pub fn may_differ(earlier: Option<Stamp>, later: Option<Stamp>) -> bool {
        match (earlier, later) {
            (Some(a), Some(b)) => {
                a.recent || b.recent || (a.modified, a.len, a.inode) != (b.modified, b.len, b.inode)
            }
            _ => true,
        }
    }
}

/// What [`WriteTx::take_due_work`] is asked for.
pub struct TakeWork<'a> {
    pub now: i64,
    /// How many due ids to look at.
    pub limit: usize,
    /// How many to take at most.
    pub room: usize,
    /// Ids the caller has already (running, or about to).
    pub skip: &'a std::collections::HashSet<String>,
    /// What the caller knows of holders (this process, its node's processes).
    pub facts: &'a dyn crate::domain::lease::HolderFacts,
    /// The lease to record for a fresh token.
    pub lease: &'a dyn Fn(u64) -> crate::domain::Lease,
}

/// A `pap serve` process sharing a store with others.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Node {
    /// `PAP_NODE_ID`, else the host name and a digest of the state dir (stable across
    /// restarts, distinct for two serves on one host).
    pub id: String,
    pub host: String,
    pub pid: u32,
    pub version: String,
    /// When it started, and when it was last heard from (ms, the store's clock).
    pub started_at: i64,
    pub last_seen: i64,
    /// Its HTTP listener, when it listens.
    pub listen: Option<String>,
}

/// How often serve says it is alive, and after how long without a word a node counts as
/// gone.
pub const HEARTBEAT_MS: i64 = 10_000;
pub const NODE_GONE_MS: i64 = 3 * HEARTBEAT_MS;

/// When a write's commit counts as done.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Commit {
    /// Durable on its own before `write` returns.
    Durable,
    /// Durable before `write` returns, sharing the sync with other threads' commits made
    /// meanwhile (group commit: runs that start or end together pay for one sync).
    Grouped,
    /// Work done between decisions that is simply done again when lost (a purge step). It
    /// pays for its own I/O, so that the decision after it does not, and need not wait for
    /// the disk where the store can avoid that without burdening the next commit:
    /// - redb commits it durably. A commit without a sync leaves its pages in redb's write
    ///   buffer for the next durable commit, a decision's, to write and sync: `cargo bench
    ///   --bench purge` measured a decision's p99 at 10.7× the quiet one that way.
    /// - PostgreSQL commits it without waiting for its WAL flush: the WAL writer flushes it
    ///   in the background within `wal_writer_delay`, sequentially, and a crash of the server
    ///   before may lose it, never corrupt anything.
    Background,
}

/// The name of a lock a store shared by several processes takes on a key of `kind` (a
/// throttle window, a debounce, a budget, a deduplication key, an idempotency claim), the
/// same whether the stage takes it as it goes or a decision group takes it up front
/// ([`WriteTx::prelock`]).
pub fn lock_name(kind: &str, parts: &[&str]) -> String {
    let mut name = String::from(kind);
    for p in parts {
        name.push('\u{1f}');
        name.push_str(p);
    }
    name
}

/// The most lock names a decision group takes up front; a larger group takes them as its
/// stages go (PostgreSQL's lock table is shared by every connection, about 64 per
/// connection by default), and relies on running again after a deadlock.
pub const PRELOCK_MAX: usize = 2_048;

/// The operations of one write transaction. Nothing it does is visible to anyone else before
/// the commit, and nothing of it survives a failed one.
pub trait WriteTx {
    /// Takes the locks `names` (see [`lock_name`]) now, all at once, in the one order every
    /// process uses, so that two decision groups needing some of the same keys cannot each
    /// hold one the other waits for. A store with one writer has nothing to lock.
    fn prelock(&mut self, names: &[String]) -> Result<()> {
        let _ = names;
        Ok(())
    }

    // --- sequences and leases

    /// The next number of `sequence`.
    fn next(&mut self, sequence: Sequence) -> Result<u64>;
    /// A fencing token for a new lease: greater than every token issued before.
    fn issue_lease_token(&mut self) -> Result<u64>;
    /// Fails with [`Error::LeaseLost`] unless invocation `id` is still leased under `token`.
    fn check_lease(&self, id: &str, token: u64) -> Result<()>;

    // --- decisions: idempotency claims, throttle windows, the ledger

    /// Claims idempotency key `key` until `expires_at`, unless a live claim holds it.
    fn claim(&mut self, key: &[u8; 32], now: i64, expires_at: i64) -> Result<Claimed>;
    /// Moves the expiry of a claim this transaction made.
    fn extend_claim(&mut self, key: &[u8; 32], expires_at: i64) -> Result<()>;
    /// Records the decision of row `row` (the row a [`Claimed::New`] named).
    fn record_decision(&mut self, row: u64, decision: RowRef) -> Result<()>;
    /// Invocation times recorded for (trigger, window key), oldest first.
    fn throttle_times(&self, trigger: &str, key: &str) -> Result<Vec<i64>>;
    /// Records an invocation at `now`, forgetting times that left the window.
    fn throttle_record(&mut self, trigger: &str, key: &str, now: i64, window_ms: i64)
    -> Result<()>;
    /// An agent's token reservations and uses (those of the last 24 hours, and maybe older).
    fn token_uses(&self, agent: &str) -> Result<Vec<crate::domain::budget::TokenUse>>;
    fn set_token_uses(
        &mut self,
        agent: &str,
        uses: &[crate::domain::budget::TokenUse],
    ) -> Result<()>;
    /// Where the debounce of (trigger, window key) stands.
    fn debounce_state(&self, trigger: &str, key: &str) -> Result<Option<DebounceState>>;
    /// Records the debounce of (trigger, window key); its pending fire (if any) becomes due
    /// at its time (see [`WriteTx::debounce_due`]).
    fn debounce_put(&mut self, trigger: &str, key: &str, state: &DebounceState) -> Result<()>;
    /// (trigger, window key) of pending trailing debounces due at or before `now`, earliest
    /// first, at most `limit`.
    fn debounce_due(&mut self, now: i64, limit: usize) -> Result<Vec<(String, String)>>;
    /// Looks at up to `limit` debounce states after `after` (in key order) and removes those
    /// with no fire pending whose burst is over by `now` (`quiet_of`: a trigger's quiet
    /// period now, `None` when it no longer debounces). Returns where the next step goes on
    /// (`None`: the walk reached the end).
    fn purge_debounce(
        &mut self,
        now: i64,
        quiet_of: &dyn Fn(&str) -> Option<i64>,
        after: Option<&purge::DebounceCursor>,
        limit: usize,
    ) -> Result<(purge::Purged, Option<purge::DebounceCursor>)>;

    // --- invocations

    fn invocation(&self, id: &str) -> Result<Option<Invocation>>;
    /// Records a new invocation (its id is fresh: nothing to update).
    fn insert_invocation(&mut self, inv: &Invocation) -> Result<()>;
    /// Inserts or updates an invocation.
    fn put_invocation(&mut self, inv: &Invocation) -> Result<()>;
    /// Invocations awaiting approval whose deadline is at or before `now`.
    fn approvals_due(&mut self, now: i64) -> Result<Vec<String>>;
    /// Whether `inv` has to wait for one of its concurrency keys: the key's index name, and
    /// why (its limit is running, or invocations decided before it wait for the free slots).
    /// The store keeps who waits and who runs per key from the invocations it writes, and
    /// reads a key's holders and at most its limit of waiters (see `concurrency::blocking`).
    /// A run cancelled while it ran holds its slot until `stopping_until`, if that is after
    /// `now`.
    fn concurrency_block(&self, inv: &Invocation, now: i64) -> Result<Option<(String, String)>>;
    /// Why `inv` may not start an attempt at `now`, if it may not.
    fn concurrency_wait(&self, inv: &Invocation, now: i64) -> Result<Option<String>> {
        Ok(self.concurrency_block(inv, now)?.map(|(_, why)| why))
    }
    /// Admits the waiters of every key of `scope` (`trigger:ID` or `agent:ID`) under `limit`,
    /// what the manifests say now: a raised limit lets more start at once (the store admits
    /// a key's waiters under the limit the last invocation written under it carried).
    fn relimit_concurrency(&mut self, scope: &str, limit: u32) -> Result<()>;
    /// Ids of due work, at most `limit`, running ones first: every `running` invocation (its
    /// holder may be gone) and the `queued` ones due at or before `now`. A queued one with
    /// concurrency keys is due only while every key admits it (see `concurrency`), so a
    /// long queue behind a key adds nothing here but its first `limit`.
    fn work_due(&mut self, now: i64, limit: usize) -> Result<Vec<String>>;

    /// Takes due work under new leases: of the first `want.limit` due invocations (see
    /// [`work_due`](Self::work_due)), up to `want.room` that are queued or running, not in
    /// `want.skip`, and that nobody holds (as `want.facts` judges a holder), each leased to
    /// this process by `want.lease` with a fresh token. Returns their ids, and whether every
    /// due id was looked at.
    ///
    /// The default goes through the operations above; a store that can lock rows (PostgreSQL's
    /// `FOR UPDATE SKIP LOCKED`) does it in one statement.
    fn take_due_work(&mut self, want: TakeWork<'_>) -> Result<(Vec<String>, bool)> {
        let due = self.work_due(want.now, want.limit)?;
        let seen_all = due.len() < want.limit;
        let mut taken = Vec::new();
        for id in due {
            if taken.len() >= want.room {
                break;
            }
            if want.skip.contains(&id) {
                continue;
            }
            let Some(mut inv) = self.invocation(&id)? else {
                continue;
            };
            let free = crate::domain::lease::holding(inv.lease.as_ref(), want.now, want.facts)
                == crate::domain::Holding::Free;
            if !free || !matches!(inv.status, Status::Queued | Status::Running) {
                continue;
            }
            // A queued one with concurrency keys is due only while its keys admit it: the
            // start of its attempt asks the gate again, under the limits the manifests say
            // now (asked here, under the limits it was decided with, a raised limit would
            // never apply).
            inv.lease = Some((want.lease)(self.issue_lease_token()?));
            self.put_invocation(&inv)?;
            taken.push(id);
        }
        Ok((taken, seen_all))
    }

    // --- schedules, the outbox, the audit log

    fn schedule_last(&self, id: &str) -> Result<Option<i64>>;
    fn set_schedule_last(&mut self, id: &str, at: i64) -> Result<()>;
    /// Puts an emitted event in the outbox until it is decided; `owner` will decide it.
    fn outbox_put(
        &mut self,
        event_id: &str,
        event: &serde_json::Value,
        owner: Option<&crate::domain::Runner>,
    ) -> Result<()>;
    fn outbox_remove(&mut self, event_id: &str) -> Result<()>;
    /// Appends to the audit log; `entry.seq` is assigned here.
    fn audit(&mut self, entry: AuditEntry) -> Result<()>;

    // --- notifications, the inbox, agents' queues, sessions, ATP requests

    fn notification(&mut self, id: &str) -> Result<Option<Notification>>;
    fn put_notification(&mut self, n: &Notification) -> Result<()>;
    /// The notification a deduplication key maps to.
    fn dedup_lookup(&mut self, key: &str) -> Result<Option<String>>;
    fn set_dedup(&mut self, key: &str, id: &str) -> Result<()>;
    /// A timer job (`job` names what to do) due at `at`.
    fn add_job(&mut self, at: i64, job: &str) -> Result<()>;
    fn remove_job(&mut self, at: i64, job: &str) -> Result<()>;
    /// Jobs due at or before `now`, earliest first, at most `limit`.
    fn jobs_due(&mut self, now: i64, limit: usize) -> Result<Vec<(i64, String)>>;
    /// Appends to the inbox; returns the message's id (assigned here, increasing).
    fn inbox_append(&mut self, msg: InboxMessage) -> Result<u64>;
    /// The id the last appended inbox message got (0 before any).
    fn inbox_mark(&self) -> Result<u64>;
    fn inbox_message(&mut self, id: u64) -> Result<Option<InboxMessage>>;
    /// Queues notification `id` for `agent`'s next turn.
    fn queue_push(&mut self, agent: &str, id: &str) -> Result<()>;
    /// Takes everything queued for `agent`, oldest first.
    fn queue_take(&mut self, agent: &str) -> Result<Vec<String>>;
    /// Opens a session; whether it is new (was not open already).
    fn session_open(&mut self, name: &str, at: i64) -> Result<bool>;
    /// Closes a session; whether it was open.
    fn session_close(&mut self, name: &str) -> Result<bool>;
    fn session_is_open(&mut self, name: &str) -> Result<bool>;
    /// Binds an open session to an agent (`None` unbinds it); closing a session unbinds it.
    fn session_bind(&mut self, name: &str, agent: Option<&str>) -> Result<()>;
    fn session_agent(&mut self, name: &str) -> Result<Option<String>>;
    /// Maps an ATP request id to the notification that carries it.
    fn atp_put(&mut self, atp_id: &str, notification: &str) -> Result<()>;
    fn atp_lookup(&mut self, atp_id: &str) -> Result<Option<String>>;

    // --- purge: each call is one bounded step of a paced purge (see `purge`)

    /// Goes through up to `limit` keys of the idempotency claims due to expire by `now`,
    /// removing each that is still expired (one claimed again since stays).
    fn purge_expired_claims(&mut self, now: i64, limit: usize) -> Result<purge::Purged>;
    /// As [`purge_expired_claims`](Self::purge_expired_claims), for a caller that keeps
    /// `batch` from one step to the next (and drops it when a step fails). A store that
    /// keeps claims in key order (redb) gathers many due keys first, then removes them in
    /// key order, so neighbours share their page writes (see [`purge::ClaimBatch`]); a store
    /// that removes a key without rewriting a page for it (PostgreSQL) ignores `batch`.
    fn purge_claims_batched(
        &mut self,
        now: i64,
        limit: usize,
        batch: &mut purge::ClaimBatch,
    ) -> Result<purge::Purged> {
        let _ = batch;
        self.purge_expired_claims(now, limit)
    }
    /// Removes ledger rows decided before `cutoff` from the oldest on, looking at about
    /// `limit` rows (a file store removes whole blocks of rows). It stops at the first row
    /// (block) decided at or after `cutoff`: rows are numbered in decision order, so what
    /// follows is younger, and a row out of order (a clock stepped back) waits for a later
    /// pass instead of every pass reading the whole ledger.
    fn purge_ledger(&mut self, cutoff: i64, limit: usize) -> Result<purge::Purged>;
    /// Looks at up to `limit` throttle windows after `after` (in key order) and removes those
    /// whose newest time is before `cutoff` (no window can count them any more). Returns where
    /// the next step goes on (`None`: the walk reached the end).
    fn purge_throttle(
        &mut self,
        cutoff: i64,
        after: Option<&purge::DebounceCursor>,
        limit: usize,
    ) -> Result<(purge::Purged, Option<purge::DebounceCursor>)>;
    /// Walks the invocations in creation order after sequence number `after`, looking at up
    /// to `limit`: removes each that [`Invocation::expired_by`] `cutoff` (with its event's
    /// body once no invocation is left that carries it), and stops at the first created at
    /// or after `cutoff`. Returns where the next step goes on (`None`: the walk is over).
    fn purge_invocations(
        &mut self,
        cutoff: i64,
        after: Option<u64>,
        limit: usize,
    ) -> Result<(purge::Purged, Option<u64>)>;
    /// As [`purge_invocations`](Self::purge_invocations), for notifications (see
    /// [`Notification::expired_by`]): a removed one also leaves the deduplication key and
    /// the ATP request id that led to it.
    fn purge_notifications(
        &mut self,
        cutoff: i64,
        after: Option<u64>,
        limit: usize,
    ) -> Result<(purge::Purged, Option<u64>)>;
    /// Removes inbox messages posted before `cutoff`, oldest first, at most `limit`.
    fn purge_inbox(&mut self, cutoff: i64, limit: usize) -> Result<purge::Purged>;
    /// Removes audit entries made before `cutoff`, oldest first, at most `limit`.
    fn purge_audit(&mut self, cutoff: i64, limit: usize) -> Result<purge::Purged>;
}

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

/// What another process committed that this one may wait for (see [`Storage::listen`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// Work free for any node: an invocation queued without a lease.
    Work,
    /// Messages appended to the inbox.
    Inbox,
    /// A notification changed (acknowledged, answered, a sink's result, a new one).
    Notifications,
}

/// Keeps a [`Storage::listen`] going while held.
pub type Listening = Box<dyn std::any::Any + Send>;

/// A store: units of work on the state, and what a process needs to know of where it is.
pub trait Storage: Send + Sync {
    /// Runs `f` in one write transaction, committed as `commit` says when `f` returns `Ok`.
    /// The generic [`write`](Self::write) is the one to call.
    fn write_dyn(
        &self,
        commit: Commit,
        f: &mut dyn FnMut(&mut dyn WriteTx) -> Result<()>,
    ) -> Result<()>;
    /// Runs `f` on a consistent snapshot of what is durable. See [`read`](Self::read).
    fn read_dyn(&self, f: &mut dyn FnMut(&dyn ReadTx) -> Result<()>) -> Result<()>;
    /// Where the state is, for messages (a path, or a description).
    fn location(&self) -> PathBuf;
    /// The state directory of a file store, where pap keeps its other files beside it
    /// (agents' process groups, serve's socket); `None` for a store in memory.
    fn dir(&self) -> Option<PathBuf>;
    /// A stamp that changes when another process commits; `None` when the store cannot tell
    /// cheaply (then a watcher reads every time).
    fn stamp(&self) -> Option<Stamp>;
    /// Every item of the state, from one consistent snapshot (see `transfer`).
    fn export(&self, each: &mut dyn FnMut(transfer::Item) -> Result<()>) -> Result<()>;
    /// Imports a batch of items in one transaction (into a store that was empty).
    fn import(&self, items: &[transfer::Item]) -> Result<()>;
    /// Whether the store holds no state at all.
    fn is_empty(&self) -> Result<bool>;
    /// For a store several hosts share: the offset (ms) of its clock from this host's,
    /// which it keeps measuring, so that every node decides on the store's time (see
    /// `Clock::for_store`). `None`: this host's clock is the one.
    fn clock_offset(&self) -> Option<Arc<std::sync::atomic::AtomicI64>> {
        None
    }
    /// Records that serve node `node` is alive (a store several nodes share keeps them).
    fn heartbeat(&self, node: &Node) -> Result<()> {
        let _ = node;
        Ok(())
    }
    /// Forgets node `id` (it stopped cleanly).
    fn node_stopped(&self, id: &str) -> Result<()> {
        let _ = id;
        Ok(())
    }
    /// The nodes sharing this store, as their last heartbeats left them (empty for a store
    /// only one host uses).
    fn nodes(&self) -> Result<Vec<Node>> {
        Ok(Vec::new())
    }
    /// Each table of the state with its rows and bytes, largest first (`pap status`).
    fn table_sizes(&self) -> Result<Vec<space::TableSize>>;
    /// What kind of store this is, for `pap status` and messages.
    fn kind(&self) -> &'static str {
        "redb"
    }
    /// Whether processes on other hosts may share this store: then no holder's liveness can
    /// be checked by pid, so an attempt's lease is short, renewed while the agent runs, and
    /// taken over once it lapsed (see `domain::lease`).
    fn shared(&self) -> bool {
        false
    }
    /// On a shared store: calls `on` (from a thread of its own) whenever another process
    /// committed something this one may be waiting for, until the returned guard is dropped.
    /// `None` where no other host writes (then this host's own wake-ups suffice).
    fn listen(&self, on: Box<dyn Fn(Change) + Send>) -> Option<Listening> {
        let _ = on;
        None
    }
    /// How many bytes the store takes, when it is not the file in [`Storage::dir`].
    fn bytes(&self) -> Result<Option<u64>> {
        Ok(None)
    }
}

impl dyn Storage + '_ {
    /// Runs `f` in one write transaction and commits it durably when `f` returns `Ok`.
    ///
    /// `f` may run more than once: a store shared by several processes (PostgreSQL) runs
    /// the unit again in a new transaction when the server cut it short for a deadlock or a
    /// serialization failure (see `pgstore::retry`), so `f` keeps what it consumes outside
    /// (clones per run) and has no effect beyond the transaction before it returns.
    pub fn write<T>(&self, f: impl FnMut(&mut dyn WriteTx) -> Result<T>) -> Result<T> {
        self.write_with(Commit::Durable, f)
    }

    /// As [`write`](Self::write), sharing the sync with other threads' commits.
    pub fn write_grouped<T>(&self, f: impl FnMut(&mut dyn WriteTx) -> Result<T>) -> Result<T> {
        self.write_with(Commit::Grouped, f)
    }

    /// As [`write`](Self::write), for work between decisions (see [`Commit::Background`]).
    pub fn write_background<T>(&self, f: impl FnMut(&mut dyn WriteTx) -> Result<T>) -> Result<T> {
        self.write_with(Commit::Background, f)
    }

    /// As [`write`](Self::write), for a unit of work that may refuse what it was asked:
    /// `f` returns `Ok(Err(refusal))` to refuse, and then nothing it wrote is committed (an
    /// approval records the ATP answer before the lifecycle may still refuse it) and the
    /// refusal comes back as it is, typed, beside the store's own errors.
    pub fn write_or_refuse<T, R>(
        &self,
        mut f: impl FnMut(&mut dyn WriteTx) -> Result<std::result::Result<T, R>>,
    ) -> Result<std::result::Result<T, R>> {
        // A run again after a deadlock (PostgreSQL) starts over: only the last run's
        // refusal counts.
        let mut refused = None;
        let written = self.write_with(Commit::Durable, |tx| {
            refused = None;
            match f(tx)? {
                Ok(value) => Ok(value),
                Err(refusal) => {
                    refused = Some(refusal);
                    Err(Error::Unchanged)
                }
            }
        });
        match (written, refused) {
            (Ok(value), _) => Ok(Ok(value)),
            (Err(Error::Unchanged), Some(refusal)) => Ok(Err(refusal)),
            (Err(e), _) => Err(e),
        }
    }

    fn write_with<T>(
        &self,
        commit: Commit,
        mut f: impl FnMut(&mut dyn WriteTx) -> Result<T>,
    ) -> Result<T> {
        let mut value = None;
        self.write_dyn(commit, &mut |tx| {
            value = Some(f(tx)?);
            Ok(())
        })?;
        Ok(value.expect("a committed write ran its closure"))
    }

    /// Runs `f` on a consistent snapshot of what is durable.
    pub fn read<T>(&self, f: impl FnOnce(&dyn ReadTx) -> Result<T>) -> Result<T> {
        let mut f = Some(f);
        let mut value = None;
        self.read_dyn(&mut |r| {
            let f = f.take().expect("a read runs its closure once");
            value = Some(f(r)?);
            Ok(())
        })?;
        Ok(value.expect("a read ran its closure"))
    }
}

/// A throttle window's times once an invocation at `now` is recorded: times that left the
/// window go, and so do times after `now` (recorded before a step back of the clock, they
/// no longer count).
pub fn window_with(mut times: Vec<i64>, now: i64, window_ms: i64) -> Vec<i64> {
    times.retain(|t| *t > now.saturating_sub(window_ms) && *t <= now);
    times.push(now);
    times
}

/// Of `items` in their order, keeps those `keep` accepts and, with `last`, only the last
/// that many. Returns them and how many were kept in all (for "N of M shown"). A `None`
/// item (a record gone meanwhile) is passed over.
pub fn keep_last<T>(
    items: impl Iterator<Item = Result<Option<T>>>,
    keep: impl Fn(&T) -> bool,
    last: Option<usize>,
) -> Result<(Vec<T>, usize)> {
    let mut out = std::collections::VecDeque::new();
    let mut total = 0;
    for item in items {
        let Some(item) = item? else {
            continue;
        };
        if !keep(&item) {
            continue;
        }
        total += 1;
        out.push_back(item);
        if last.is_some_and(|n| out.len() > n) {
            out.pop_front();
        }
    }
    Ok((out.into(), total))
}
