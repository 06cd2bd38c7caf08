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
mod read;
pub mod scan;
pub mod short_forms;
pub mod space;
pub mod transfer;
mod write;

use std::path::PathBuf;
use std::sync::Arc;

use pap_domain as domain;

use crate::domain::{Claim, LedgerRow};

pub use error::{Error, Result};
pub use read::ReadTx;
pub use write::{ApprovalTx, DecisionTx, InboxTx, LedgerTx, UpkeepTx, WorkTx, WriteTx};

/// redb's page cache in a process that writes, unless pap.yaml's `store_cache` says
/// otherwise. Idempotency keys are random, so a long stream touches pages all over the claims
/// table; below the working set, every lookup becomes a read from the file (at 1M decisions of
/// the invocation-heavy benchmark, 64 MiB took about half as long again as 256 MiB).
pub const DEFAULT_STORE_CACHE: u64 = 256 << 20;

/// What a claim of an idempotency key found.
#[derive(Debug, Clone, PartialEq)]
pub enum Claimed {
    /// The key was free (or its claim had expired): it is claimed now, for the decision
    /// that [`WriteTx::record_decision`] records.
    New,
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
