//! A write transaction on PostgreSQL (READ COMMITTED). Several nodes write at once, so what
//! must not be decided twice is made safe by the database, never by reading first and
//! writing later:
//!
//! - a claim is one `INSERT … ON CONFLICT … WHERE expired`: a second node claiming the same
//!   key waits for the first to commit, then finds its claim;
//! - windows that admit a number of invocations (throttle, budgets, debounce, concurrency
//!   keys, schedules, deduplication keys) take a transaction-scoped advisory lock on their
//!   key before they read it, so two nodes deciding under one key take turns and the second
//!   sees what the first committed;
//! - a write that changes a concurrency key's entries (a waiter added or gone, a run starting
//!   or ending) takes the key's lock and re-admits its waiters (`write_concurrency`): after
//!   the invocation's own row, and after its agent's budget lock (a key belongs to one agent;
//!   `agent::tokens::lock_budget`), never the other way round; a write that changes none (a
//!   lease taken or renewed) takes no key lock;
//! - a holder's fencing check locks the invocation's row until commit, so a takeover cannot
//!   slip in between the check and the write it guards;
//! - due work, timer jobs, approvals and debounces are looked up `FOR UPDATE SKIP LOCKED`, so
//!   nodes taking them at once take different ones without waiting on each other;
//! - inbox ids come from a counter row, locked to the commit, so they become visible in order.
//!
//! **The lock order.** Locks are taken by class, in this order; a transaction holding a lock
//! of one class does not wait for one of an earlier class:
//!
//! 1. advisory locks (throttle windows, budgets, debounces, deduplication keys, and the
//!    idempotency claims of a decision group), in ascending order of their hash when taken
//!    together (`lock_all`: a decision group takes every one its events will need up front,
//!    see `WriteTx::prelock`);
//! 2. idempotency claims (`pap_claims` rows);
//! 3. invocation rows;
//! 4. other rows (debounce, concurrency entries, notifications, queues, jobs);
//! 5. the inbox counter, last.
//!
//! Some paths cannot know all their keys first: an agent's start or end learns its
//! concurrency keys and its outcome's deduplication key from the invocation row it locks
//! (3 before 1), and a notification's id comes from the counter before a later key is
//! known. Where two such paths meet in a cycle, PostgreSQL rolls one back (40P01) and pap
//! runs that unit of work again (`super::retry`), so a conflict costs a moment, never a
//! failed command. The contention test (tests/postgres_contention.rs) counts the reruns.

use std::cell::RefCell;
use std::collections::HashSet;

use super::session::{Session, encode, signed, unsigned};
use pap_domain::budget::TokenUse;
use pap_domain::{AuditEntry, Claim, DebounceState, Invocation, Runner, Status};
use pap_storage::concurrency::{Entry, due_of, state_of};
use pap_storage::purge::{DebounceCursor, Purged};
use pap_storage::{Claimed, Error, Result, RowRef, Sequence};

pub(super) struct PgWrite<'c> {
    pub(super) s: Session<'c>,
    /// Advisory locks this transaction holds already (they last until it ends).
    locked: RefCell<HashSet<String>>,
    /// The inbox id this transaction appended last, if it did.
    pub(super) inbox_appended: Option<u64>,
    /// Whether it wrote a notification (`pap_notification`, the notifications mark file).
    pub(super) notifications_changed: bool,
    /// Whether it left an invocation queued without a lease: work for any node.
    pub(super) work_freed: std::cell::Cell<bool>,
    /// The key claimed anew and the ledger row its decision takes (the claim's `row_no`,
    /// which a duplicate names): `record_decision` writes the row there.
    claimed: Option<([u8; 32], u64)>,
}

impl<'c> PgWrite<'c> {
    pub(super) fn new(s: Session<'c>) -> PgWrite<'c> {
        PgWrite {
            s,
            locked: RefCell::new(HashSet::new()),
            inbox_appended: None,
            notifications_changed: false,
            work_freed: std::cell::Cell::new(false),
            claimed: None,
        }
    }

    /// Writes ledger row `row` (a decision, or a row a copy brings along).
    pub(super) fn insert_ledger_row(&self, row: u64, d: RowRef) -> Result<()> {
        self.s.execute(
            "INSERT INTO pap_ledger (row_no, event_id, trigger_id, kind, depth, outcome, \
             invocation_id, decided_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
            &[
                &signed(row),
                &d.event_id,
                &d.trigger,
                &d.kind,
                &i32::try_from(d.depth).unwrap_or(i32::MAX),
                &d.outcome,
                &d.invocation_id,
                &d.decided_at,
            ],
        )?;
        Ok(())
    }

    /// Serialises this transaction with every other that locks `key`, until it ends.
    pub(super) fn lock(&self, kind: &str, parts: &[&str]) -> Result<()> {
        let key = pap_storage::lock_name(kind, parts);
        if self.locked.borrow().contains(&key) {
            return Ok(());
        }
        self.s.execute(
            "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))",
            &[&key],
        )?;
        self.locked.borrow_mut().insert(key);
        Ok(())
    }

    /// Takes the advisory locks `names` not held yet in one statement, in ascending order
    /// of their lock identity (the hash), the order every process uses (see the lock order
    /// above). Volatile functions of a select list run after its ORDER BY (PostgreSQL 9.6
    /// and later), so the locks are taken in that order.
    pub(super) fn lock_all(&self, names: &[String]) -> Result<()> {
        let missing: Vec<&str> = {
            let held = self.locked.borrow();
            names
                .iter()
                .filter(|n| !held.contains(n.as_str()))
                .map(String::as_str)
                .collect()
        };
        if missing.is_empty() {
            return Ok(());
        }
        self.s.execute(
            "SELECT pg_advisory_xact_lock(h) FROM (SELECT DISTINCT hashtextextended(k, 0) AS h \
             FROM unnest($1::text[]) AS k) s ORDER BY h",
            &[&missing],
        )?;
        let mut held = self.locked.borrow_mut();
        held.extend(missing.into_iter().map(str::to_owned));
        Ok(())
    }

    fn claim_found(&self, key: &[u8; 32]) -> Result<Option<Claim>> {
        let row = self.s.query_opt(
            "SELECT c.expires_at, c.decided_at, l.outcome, l.invocation_id, l.event_id, \
             l.trigger_id FROM pap_claims c LEFT JOIN pap_ledger l ON l.row_no = c.row_no \
             WHERE c.key = $1",
            &[&key.as_slice()],
        )?;
        Ok(row.map(|r| {
            let event: Option<String> = r.get(4);
            let trigger: Option<String> = r.get(5);
            Claim {
                expires_at: r.get(0),
                decided_at: r.get(1),
                outcome: r.get(2),
                invocation_id: r.get(3),
                decided_pair: event
                    .zip(trigger)
                    .filter(|(e, t)| !e.is_empty() && !t.is_empty()),
            }
        }))
    }

    fn upsert_invocation(&self, inv: &Invocation, insert_only: bool) -> Result<()> {
        // (A waiter for concurrency keys is work once its keys admit it: see
        // `write_concurrency`.)
        if inv.status == Status::Queued && inv.lease.is_none() && work_at(inv).is_some() {
            self.work_freed.set(true);
        }
        let record = encode(inv);
        let status = super::status_name(inv.status);
        let work_at = work_at(inv);
        let deadline = deadline(inv);
        let token = inv.lease.as_ref().map(|l| signed(l.token));
        let params: super::session::Params = &[
            &inv.id,
            &signed(inv.seq),
            &status,
            &work_at,
            &deadline,
            &token,
            &record,
        ];
        if insert_only {
            self.s.execute(
                "INSERT INTO pap_invocations (id, seq, status, work_at, approval_deadline, \
                 lease_token, record) VALUES ($1, $2, $3, $4, $5, $6, $7::text::json)",
                params,
            )?;
        } else {
            self.s.execute(
                "INSERT INTO pap_invocations (id, seq, status, work_at, approval_deadline, \
                 lease_token, record) VALUES ($1, $2, $3, $4, $5, $6, $7::text::json) \
                 ON CONFLICT (id) DO UPDATE SET seq = EXCLUDED.seq, status = EXCLUDED.status, \
                 work_at = EXCLUDED.work_at, approval_deadline = EXCLUDED.approval_deadline, \
                 lease_token = EXCLUDED.lease_token, record = EXCLUDED.record",
                params,
            )?;
        }
        self.write_concurrency(inv, insert_only)
    }
}

/// Where an invocation sits among due work: running ones first (a dead runner's are resumed
/// before new work starts), then queued ones in the order they fall due. A waiter for
/// concurrency keys is due work through its admitted entries instead (`write_concurrency`).
pub(super) fn work_at(inv: &Invocation) -> Option<i64> {
    match inv.status {
        Status::Running => Some(i64::MIN),
        Status::Queued if state_of(inv) != Some(Entry::Waiting) => Some(due_of(inv)),
        _ => None,
    }
}

fn deadline(inv: &Invocation) -> Option<i64> {
    Some(inv)
        .filter(|i| i.status == Status::AwaitingApproval)
        .and_then(|i| i.approval_deadline)
}

pub(super) fn limit(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

impl pap_storage::DecisionTx for PgWrite<'_> {
    fn prelock(&mut self, names: &[String]) -> Result<()> {
        self.lock_all(names)
    }

    fn claim(&mut self, key: &[u8; 32], now: i64, expires_at: i64) -> Result<Claimed> {
        // A claim purged between the conflict and the look is free again: claim anew.
        for _ in 0..3 {
            let fresh = self.s.query_opt(
                "INSERT INTO pap_claims AS c (key, expires_at, decided_at, row_no) \
                 VALUES ($1, $2, $3, nextval('pap_ledger_row')) \
                 ON CONFLICT (key) DO UPDATE SET expires_at = EXCLUDED.expires_at, \
                 decided_at = EXCLUDED.decided_at, row_no = EXCLUDED.row_no \
                 WHERE c.expires_at <= EXCLUDED.decided_at RETURNING row_no",
                &[&key.as_slice(), &expires_at, &now],
            )?;
            if let Some(row) = fresh {
                self.claimed = Some((*key, unsigned(row.get(0))));
                return Ok(Claimed::New);
            }
            if let Some(live) = self.claim_found(key)? {
                return Ok(Claimed::Live(live));
            }
        }
        Err(Error::Unavailable {
            location: self.s_location(),
            reason: "an idempotency claim kept changing under this transaction".into(),
        })
    }

    fn extend_claim(&mut self, key: &[u8; 32], expires_at: i64) -> Result<()> {
        self.s.execute(
            "UPDATE pap_claims SET expires_at = $2 WHERE key = $1 AND expires_at < $2",
            &[&key.as_slice(), &expires_at],
        )?;
        Ok(())
    }

    fn shorten_claim(&mut self, key: &[u8; 32], expires_at: i64) -> Result<()> {
        self.s.execute(
            "UPDATE pap_claims SET expires_at = $2 WHERE key = $1 AND expires_at > $2",
            &[&key.as_slice(), &expires_at],
        )?;
        Ok(())
    }

    fn record_decision(&mut self, key: &[u8; 32], d: RowRef) -> Result<()> {
        let row = match self.claimed.take() {
            Some((claimed, row)) if claimed == *key => row,
            _ => {
                return Err(Error::DecisionNotClaimed {
                    location: self.s_location(),
                    event_id: d.event_id.to_owned(),
                });
            }
        };
        self.insert_ledger_row(row, d)
    }

    fn throttle_times(&self, trigger: &str, key: &str) -> Result<Vec<i64>> {
        self.lock("throttle", &[trigger, key])?;
        Ok(self
            .s
            .query_opt(
                "SELECT times FROM pap_throttle WHERE trigger_id = $1 AND window_key = $2",
                &[&trigger, &key],
            )?
            .map(|r| r.get(0))
            .unwrap_or_default())
    }

    fn throttle_record(
        &mut self,
        trigger: &str,
        key: &str,
        now: i64,
        window_ms: i64,
    ) -> Result<()> {
        let times = pap_storage::window_with(self.throttle_times(trigger, key)?, now, window_ms);
        self.s.execute(
            "INSERT INTO pap_throttle (trigger_id, window_key, times) VALUES ($1, $2, $3) \
             ON CONFLICT (trigger_id, window_key) DO UPDATE SET times = EXCLUDED.times",
            &[&trigger, &key, &times],
        )?;
        Ok(())
    }

    fn token_uses(&self, agent: &str) -> Result<Vec<TokenUse>> {
        self.lock("budget", &[agent])?;
        match self.s.query_opt(
            "SELECT uses::text FROM pap_budget_tokens WHERE agent = $1",
            &[&agent],
        )? {
            Some(r) => self.s.decode("token uses", r.get(0)),
            None => Ok(Vec::new()),
        }
    }

    fn set_token_uses(&mut self, agent: &str, uses: &[TokenUse]) -> Result<()> {
        self.s.execute(
            "INSERT INTO pap_budget_tokens (agent, uses) VALUES ($1, $2::text::json) \
             ON CONFLICT (agent) DO UPDATE SET uses = EXCLUDED.uses",
            &[&agent, &encode(&uses)],
        )?;
        Ok(())
    }

    fn debounce_state(&self, trigger: &str, key: &str) -> Result<Option<DebounceState>> {
        self.lock("debounce", &[trigger, key])?;
        match self.s.query_opt(
            "SELECT state::text FROM pap_debounce WHERE trigger_id = $1 AND window_key = $2",
            &[&trigger, &key],
        )? {
            Some(r) => self.s.decode("debounce state", r.get(0)).map(Some),
            None => Ok(None),
        }
    }

    fn debounce_put(&mut self, trigger: &str, key: &str, state: &DebounceState) -> Result<()> {
        self.lock("debounce", &[trigger, key])?;
        let due = state.pending.as_ref().map(|p| p.due);
        self.s.execute(
            "INSERT INTO pap_debounce (trigger_id, window_key, state, due_at) \
             VALUES ($1, $2, $3::text::json, $4) ON CONFLICT (trigger_id, window_key) \
             DO UPDATE SET state = EXCLUDED.state, due_at = EXCLUDED.due_at",
            &[&trigger, &key, &encode(state), &due],
        )?;
        Ok(())
    }

    fn debounce_due(&mut self, now: i64, max: usize) -> Result<Vec<(String, String)>> {
        Ok(self
            .s
            .query(
                "SELECT trigger_id, window_key FROM pap_debounce WHERE due_at <= $1 \
                 ORDER BY due_at, trigger_id, window_key LIMIT $2 FOR UPDATE SKIP LOCKED",
                &[&now, &limit(max)],
            )?
            .iter()
            .map(|r| (r.get(0), r.get(1)))
            .collect())
    }
}

impl pap_storage::WorkTx for PgWrite<'_> {
    fn next(&mut self, sequence: Sequence) -> Result<u64> {
        let sql = match sequence {
            Sequence::Invocation => "SELECT nextval('pap_invocation_seq')",
            Sequence::Notification => "SELECT nextval('pap_notification_seq')",
        };
        Ok(unsigned(self.s.query_one(sql, &[])?.get(0)))
    }

    fn issue_lease_token(&mut self) -> Result<u64> {
        Ok(unsigned(
            self.s
                .query_one("SELECT nextval('pap_lease_token')", &[])?
                .get(0),
        ))
    }

    fn check_lease(&self, id: &str, token: u64) -> Result<()> {
        // The row stays locked to the commit: a takeover waits for this transaction, then
        // sees what it wrote.
        let current: Option<i64> = self
            .s
            .query_opt(
                "SELECT lease_token FROM pap_invocations WHERE id = $1 FOR NO KEY UPDATE",
                &[&id],
            )?
            .and_then(|r| r.get(0));
        let current = current.map(unsigned);
        Error::lease_check(id, token, current)
    }

    fn invocation(&self, id: &str) -> Result<Option<Invocation>> {
        // Locked to the commit: a write transaction reads an invocation to change it, and two
        // nodes changing one (a start and a cancel, an approval and an expiry) must take
        // turns, the second seeing what the first wrote. (redb serialises every writer.)
        super::read::invocation_in(&self.s, id, true)
    }

    fn insert_invocation(&mut self, inv: &Invocation) -> Result<()> {
        self.upsert_invocation(inv, true)
    }

    fn put_invocation(&mut self, inv: &Invocation) -> Result<()> {
        self.upsert_invocation(inv, false)
    }

    fn cancellable(&self, trigger: &str, key: &str, max: usize) -> Result<Vec<Invocation>> {
        // The partial expression index of migration 5 holds exactly these rows.
        let rows = self.s.query(
            "SELECT record::text FROM pap_invocations \
             WHERE record->'cancel' IS NOT NULL \
             AND status IN ('queued', 'awaiting_approval', 'running') \
             AND record->>'trigger' = $1 AND record#>>'{cancel,key}' = $2 \
             ORDER BY seq LIMIT $3 FOR NO KEY UPDATE",
            &[&trigger, &key, &limit(max)],
        )?;
        rows.iter()
            .map(|r| self.s.decode("invocation", r.get(0)))
            .collect()
    }

    fn concurrency_block(&self, inv: &Invocation, now: i64) -> Result<Option<(String, String)>> {
        if inv.concurrency.is_empty() {
            return Ok(None);
        }
        self.block(inv, now)
    }

    fn relimit_concurrency(&mut self, scope: &str, limit: u32) -> Result<()> {
        self.relimit(scope, limit)
    }

    fn work_due(&mut self, now: i64, max: usize) -> Result<Vec<String>> {
        Ok(self
            .s
            .query(
                super::write_concurrency::WORK_DUE_LOCKED,
                &[&now, &limit(max)],
            )?
            .iter()
            .map(|r| r.get(0))
            .collect())
    }
}

impl pap_storage::LedgerTx for PgWrite<'_> {
    fn schedule_last(&self, id: &str) -> Result<Option<i64>> {
        // Locked, so each fire time is recorded by one node: the other waits, then sees it.
        self.lock("schedule", &[id])?;
        Ok(self
            .s
            .query_opt("SELECT last_fire FROM pap_schedules WHERE id = $1", &[&id])?
            .map(|r| r.get(0)))
    }

    fn set_schedule_last(&mut self, id: &str, at: i64) -> Result<()> {
        self.s.execute(
            "INSERT INTO pap_schedules (id, last_fire) VALUES ($1, $2) \
             ON CONFLICT (id) DO UPDATE SET last_fire = EXCLUDED.last_fire",
            &[&id, &at],
        )?;
        Ok(())
    }

    fn outbox_put(
        &mut self,
        event_id: &str,
        event: &serde_json::Value,
        owner: Option<&Runner>,
    ) -> Result<()> {
        let entry = encode(&pap_domain::OutboxEntry {
            owner: owner.cloned(),
            event: event.clone(),
        });
        self.s.execute(
            "INSERT INTO pap_outbox (event_id, entry) VALUES ($1, $2::text::json) \
             ON CONFLICT (event_id) DO UPDATE SET entry = EXCLUDED.entry",
            &[&event_id, &entry],
        )?;
        Ok(())
    }

    fn outbox_remove(&mut self, event_id: &str) -> Result<()> {
        self.s
            .execute("DELETE FROM pap_outbox WHERE event_id = $1", &[&event_id])?;
        Ok(())
    }

    fn audit(&mut self, mut entry: AuditEntry) -> Result<()> {
        entry.seq = unsigned(
            self.s
                .query_one("SELECT nextval('pap_audit_seq')", &[])?
                .get(0),
        );
        self.s.execute(
            "INSERT INTO pap_audit (seq, entry) VALUES ($1, $2::text::json)",
            &[&signed(entry.seq), &encode(&entry)],
        )?;
        Ok(())
    }
}

impl pap_storage::InboxTx for PgWrite<'_> {
    fn notification(&mut self, id: &str) -> Result<Option<pap_domain::Notification>> {
        // Locked to the commit, as an invocation is: ANP's lease compare-and-swap.
        super::read::notification_in(&self.s, id, true)
    }

    fn put_notification(&mut self, n: &pap_domain::Notification) -> Result<()> {
        self.notifications_changed = true;
        self.notify_put(n)
    }

    fn dedup_lookup(&mut self, key: &str) -> Result<Option<String>> {
        self.notify_dedup_lookup(key)
    }

    fn set_dedup(&mut self, key: &str, id: &str) -> Result<()> {
        self.notify_set_dedup(key, id)
    }

    fn add_job(&mut self, at: i64, job: &str) -> Result<()> {
        self.jobs_add(at, job)
    }

    fn remove_job(&mut self, at: i64, job: &str) -> Result<()> {
        self.jobs_remove(at, job)
    }

    fn jobs_due(&mut self, now: i64, max: usize) -> Result<Vec<(i64, String)>> {
        self.jobs_take_due(now, max)
    }

    fn inbox_append(&mut self, msg: pap_domain::InboxMessage) -> Result<u64> {
        self.inbox_push(msg)
    }

    fn inbox_mark(&self) -> Result<u64> {
        self.inbox_counter()
    }

    fn inbox_message(&mut self, id: u64) -> Result<Option<pap_domain::InboxMessage>> {
        super::read::inbox_message_in(&self.s, id)
    }

    fn queue_push(&mut self, agent: &str, id: &str) -> Result<()> {
        self.agent_queue_push(agent, id)
    }

    fn queue_take(&mut self, agent: &str) -> Result<Vec<String>> {
        self.agent_queue_take(agent)
    }

    fn session_open(&mut self, name: &str, at: i64) -> Result<bool> {
        self.sessions_open(name, at)
    }

    fn session_close(&mut self, name: &str) -> Result<bool> {
        self.sessions_close(name)
    }

    fn session_is_open(&mut self, name: &str) -> Result<bool> {
        self.sessions_is_open(name)
    }

    fn session_bind(&mut self, name: &str, agent: Option<&str>) -> Result<()> {
        self.sessions_bind(name, agent)
    }

    fn session_agent(&mut self, name: &str) -> Result<Option<String>> {
        super::read::session_agent_in(&self.s, name)
    }
}

impl pap_storage::ApprovalTx for PgWrite<'_> {
    fn approvals_due(&mut self, now: i64) -> Result<Vec<String>> {
        Ok(self
            .s
            .query(
                "SELECT id FROM pap_invocations WHERE approval_deadline <= $1 \
                 ORDER BY approval_deadline, id FOR UPDATE SKIP LOCKED",
                &[&now],
            )?
            .iter()
            .map(|r| r.get(0))
            .collect())
    }

    fn atp_put(&mut self, atp_id: &str, notification: &str) -> Result<()> {
        self.atp_index_put(atp_id, notification)
    }

    fn atp_lookup(&mut self, atp_id: &str) -> Result<Option<String>> {
        super::read::atp_lookup_in(&self.s, atp_id)
    }
}

impl pap_storage::UpkeepTx for PgWrite<'_> {
    fn purge_debounce(
        &mut self,
        now: i64,
        quiet_of: &dyn Fn(&str) -> Option<i64>,
        after: Option<&DebounceCursor>,
        max: usize,
    ) -> Result<(Purged, Option<DebounceCursor>)> {
        // Trigger ids are never empty, so ('', '') is before every key.
        let (t, k) = after.map_or(("", ""), |(t, k)| (t.as_str(), k.as_str()));
        let rows = self.s.query(
            "SELECT trigger_id, window_key, state::text FROM pap_debounce \
             WHERE due_at IS NULL AND (trigger_id, window_key) > ($1, $2) \
             ORDER BY trigger_id, window_key LIMIT $3 FOR UPDATE SKIP LOCKED",
            &[&t, &k, &limit(max)],
        )?;
        let (mut triggers, mut keys) = (Vec::new(), Vec::new());
        let mut last = None;
        for r in &rows {
            let (trigger, key): (String, String) = (r.get(0), r.get(1));
            let state: DebounceState = self.s.decode("debounce state", r.get(2))?;
            let over =
                quiet_of(&trigger).is_none_or(|quiet| state.last_seen.saturating_add(quiet) <= now);
            if state.pending.is_none() && over {
                triggers.push(trigger.clone());
                keys.push(key.clone());
            }
            last = Some((trigger, key));
        }
        if !triggers.is_empty() {
            self.s.execute(
                "DELETE FROM pap_debounce d USING unnest($1::text[], $2::text[]) AS g(t, k) \
                 WHERE d.trigger_id = g.t AND d.window_key = g.k",
                &[&triggers, &keys],
            )?;
        }
        Ok(Purged::walked(triggers.len(), rows.len(), max, false, last))
    }

    fn purge_expired_claims(&mut self, now: i64, max: usize) -> Result<Purged> {
        let gone = self.s.execute(
            "DELETE FROM pap_claims WHERE key IN (SELECT key FROM pap_claims \
             WHERE expires_at <= $1 ORDER BY expires_at LIMIT $2 FOR UPDATE SKIP LOCKED) \
             AND expires_at <= $1",
            &[&now, &limit(max)],
        )?;
        let gone = usize::try_from(gone).unwrap_or(usize::MAX);
        Ok(Purged::of(gone, gone, max))
    }

    fn purge_ledger(&mut self, cutoff: i64, max: usize) -> Result<Purged> {
        // The oldest `max` rows; those before the first young one go (see the trait).
        let r = self.s.query_one(
            "WITH head AS (SELECT row_no, decided_at FROM pap_ledger ORDER BY row_no LIMIT $1), \
             young AS (SELECT min(row_no) AS row_no FROM head WHERE decided_at >= $2), \
             gone AS (DELETE FROM pap_ledger l USING head h WHERE l.row_no = h.row_no \
             AND h.decided_at < $2 \
             AND h.row_no < coalesce((SELECT row_no FROM young), 9223372036854775807) \
             RETURNING 1) \
             SELECT (SELECT count(*) FROM gone), (SELECT count(*) FROM head), \
             (SELECT row_no FROM young) IS NOT NULL",
            &[&limit(max), &cutoff],
        )?;
        let (gone, scanned, young): (i64, i64, bool) = (r.get(0), r.get(1), r.get(2));
        let (gone, scanned) = (
            usize::try_from(gone).unwrap_or(0),
            usize::try_from(scanned).unwrap_or(0),
        );
        Ok(Purged {
            removed: gone,
            scanned,
            more: !young && scanned >= max,
            tidied: false,
        })
    }

    fn purge_invocations(
        &mut self,
        cutoff: i64,
        after: Option<u64>,
        max: usize,
    ) -> Result<(Purged, Option<u64>)> {
        self.purge_invocations_step(cutoff, after, max)
    }

    fn purge_throttle(
        &mut self,
        cutoff: i64,
        after: Option<&DebounceCursor>,
        max: usize,
    ) -> Result<(Purged, Option<DebounceCursor>)> {
        self.purge_throttle_step(cutoff, after, max)
    }

    fn purge_notifications(
        &mut self,
        cutoff: i64,
        after: Option<u64>,
        max: usize,
    ) -> Result<(Purged, Option<u64>)> {
        self.purge_notifications_step(cutoff, after, max)
    }

    fn purge_inbox(&mut self, cutoff: i64, max: usize) -> Result<Purged> {
        self.purge_inbox_step(cutoff, max)
    }

    fn purge_audit(&mut self, cutoff: i64, max: usize) -> Result<Purged> {
        self.purge_audit_step(cutoff, max)
    }
}

impl PgWrite<'_> {
    fn s_location(&self) -> String {
        self.s.location().to_owned()
    }
}
