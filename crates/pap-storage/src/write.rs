//! The operations of one write transaction, grouped by concern. A store implements each
//! concern in one place; [`WriteTx`] is all of them, and what a unit of work is handed
//! (`&mut dyn WriteTx`). Adding a piece of state costs one method here and its body in each
//! store.

use crate::domain::{AuditEntry, DebounceState, InboxMessage, Invocation, Notification, Status};
use crate::{Claimed, Result, RowRef, Sequence, TakeWork, purge};

/// The operations of one write transaction. Nothing it does is visible to anyone else before
/// the commit, and nothing of it survives a failed one.
pub trait WriteTx: DecisionTx + WorkTx + LedgerTx + InboxTx + ApprovalTx + UpkeepTx {}

impl<T: DecisionTx + WorkTx + LedgerTx + InboxTx + ApprovalTx + UpkeepTx + ?Sized> WriteTx for T {}

/// A decision's stages: idempotency claims and the decision's ledger row, throttle windows,
/// token budgets, debounces, and the locks a decision group takes up front.
pub trait DecisionTx {
    /// Takes the locks `names` (see [`lock_name`](crate::lock_name)) now, all at once, in the one order every
    /// process uses, so that two decision groups needing some of the same keys cannot each
    /// hold one the other waits for. A store with one writer has nothing to lock.
    fn prelock(&mut self, names: &[String]) -> Result<()> {
        let _ = names;
        Ok(())
    }

    /// Claims idempotency key `key` until `expires_at`, unless a live claim holds it. A new
    /// claim is one decision: [`record_decision`](Self::record_decision) records it under
    /// the same key before the transaction ends (where its row goes in the ledger, and how
    /// a duplicate finds it, is the store's business).
    fn claim(&mut self, key: &[u8; 32], now: i64, expires_at: i64) -> Result<Claimed>;

    /// Moves the expiry of a claim this transaction made.
    fn extend_claim(&mut self, key: &[u8; 32], expires_at: i64) -> Result<()>;

    /// Ends the claim on `key` at `expires_at` when that is sooner than it would: the key is
    /// free from then on, while its decision stays in the ledger. A throttled decision under
    /// `release_key` holds its key only until the window has room again.
    fn shorten_claim(&mut self, key: &[u8; 32], expires_at: i64) -> Result<()>;

    /// Records the decision made under `key`, which this transaction claimed
    /// ([`Claimed::New`]): the decision's row in the ledger, the one a later duplicate of
    /// the key names.
    fn record_decision(&mut self, key: &[u8; 32], decision: RowRef) -> Result<()>;

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
}

/// Work: invocations, their sequences and leases, the concurrency gate, and taking due work.
pub trait WorkTx {
    /// The next number of `sequence`.
    fn next(&mut self, sequence: Sequence) -> Result<u64>;

    /// A fencing token for a new lease: greater than every token issued before.
    fn issue_lease_token(&mut self) -> Result<u64>;

    /// Fails with [`Error::LeaseLost`] unless invocation `id` is still leased under `token`.
    fn check_lease(&self, id: &str, token: u64) -> Result<()>;

    fn invocation(&self, id: &str) -> Result<Option<Invocation>>;

    /// Records a new invocation (its id is fresh: nothing to update).
    fn insert_invocation(&mut self, inv: &Invocation) -> Result<()>;

    /// Inserts or updates an invocation.
    fn put_invocation(&mut self, inv: &Invocation) -> Result<()>;

    /// The unfinished invocations (queued, awaiting approval, running) of `trigger` whose
    /// cancel key is `key` (see [`Invocation::cancel_entry`]), oldest first, at most `limit`:
    /// what an event of the trigger's `cancel_on` may end. The store keeps the index from the
    /// invocations it writes, so this reads no other invocation.
    fn cancellable(&self, trigger: &str, key: &str, limit: usize) -> Result<Vec<Invocation>>;

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
}

/// The records kept beside the decisions: the audit log, the outbox of emitted events,
/// when each schedule last fired.
pub trait LedgerTx {
    /// Appends to the audit log; `entry.seq` is assigned here.
    fn audit(&mut self, entry: AuditEntry) -> Result<()>;

    /// Puts an emitted event in the outbox until it is decided; `owner` will decide it.
    fn outbox_put(
        &mut self,
        event_id: &str,
        event: &serde_json::Value,
        owner: Option<&crate::domain::Runner>,
    ) -> Result<()>;

    fn outbox_remove(&mut self, event_id: &str) -> Result<()>;

    fn schedule_last(&self, id: &str) -> Result<Option<i64>>;

    fn set_schedule_last(&mut self, id: &str, at: i64) -> Result<()>;
}

/// Notifications and where they go: the inbox, agents' queues, sessions, deduplication keys
/// and the timers that move notifications on.
pub trait InboxTx {
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
}

/// Approvals: what waits past its deadline, and the ATP requests that ask a person.
pub trait ApprovalTx {
    /// Invocations awaiting approval whose deadline is at or before `now`.
    fn approvals_due(&mut self, now: i64) -> Result<Vec<String>>;

    /// Maps an ATP request id to the notification that carries it.
    fn atp_put(&mut self, atp_id: &str, notification: &str) -> Result<()>;

    fn atp_lookup(&mut self, atp_id: &str) -> Result<Option<String>>;
}

/// Upkeep: each call is one bounded step of a paced purge (see `purge`).
pub trait UpkeepTx {
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
