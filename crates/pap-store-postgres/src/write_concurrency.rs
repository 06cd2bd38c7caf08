//! The concurrency index (a pap extension) on PostgreSQL: per key, who holds a slot and who
//! waits (`pap_concurrency`), and which waiters the key admits (`admitted_at`, with
//! `pap_concurrency_keys`), kept in step with every write of an invocation that has keys; see
//! `storage::concurrency`.
//!
//! A waiter's admission lives on its own entries, never in its invocation's row: a write
//! that changes a key holds that invocation's row and then the key's advisory lock, and
//! re-admitting under the key must not wait for another invocation's row (that order,
//! reversed, deadlocks). Due work reads the admitted entries, and a waiter is due once every
//! key admits it (`work_due`), so two keys admitting one waiter in two transactions need not
//! see each other.

use super::session::{signed, unsigned};
use super::write::PgWrite;
use pap_domain::Invocation;
use pap_storage::concurrency::{
    Entry, Holders, KeyIndex, KeyState, blocking, due_of, refresh, state_of,
};
use pap_storage::{Error, Result};

/// Due work for a read: queued invocations without keys and running ones, by
/// `pap_invocations.work_at`, and the waiters every key admits, by their entries. Each part
/// is limited on its own first, so a long backlog of either is read only as far as the limit
/// (the plain part by its index).
pub(super) const WORK_DUE: &str = "SELECT id FROM ((SELECT id, work_at AS at FROM pap_invocations \
     WHERE work_at <= $1 ORDER BY work_at, id LIMIT $2) \
     UNION ALL (SELECT invocation_id, max(greatest(due_at, admitted_at)) FROM pap_concurrency \
     WHERE state = 0 AND admitted_at IS NOT NULL GROUP BY invocation_id \
     HAVING count(*) = max(nkeys) AND max(greatest(due_at, admitted_at)) <= $1 \
     ORDER BY 2, 1 LIMIT $2)) due ORDER BY at, id LIMIT $2";

/// As [`WORK_DUE`], in a write: the rows come locked (`FOR UPDATE SKIP LOCKED`, so nodes
/// taking work at once take different invocations). Each part locks up to the limit; what
/// the merge leaves out stays locked only to the end of this transaction.
pub(super) const WORK_DUE_LOCKED: &str = "WITH plain AS (SELECT id, work_at AS at \
     FROM pap_invocations WHERE work_at <= $1 ORDER BY work_at, id LIMIT $2 \
     FOR UPDATE SKIP LOCKED), \
     waiting AS (SELECT i.id, w.at FROM (SELECT invocation_id, \
     max(greatest(due_at, admitted_at)) AS at FROM pap_concurrency \
     WHERE state = 0 AND admitted_at IS NOT NULL GROUP BY invocation_id \
     HAVING count(*) = max(nkeys) AND max(greatest(due_at, admitted_at)) <= $1) w \
     JOIN pap_invocations i ON i.id = w.invocation_id ORDER BY w.at, i.id LIMIT $2 \
     FOR UPDATE OF i SKIP LOCKED) \
     SELECT id FROM (SELECT id, at FROM plain UNION ALL SELECT id, at FROM waiting) due \
     ORDER BY at, id LIMIT $2";

impl PgWrite<'_> {
    /// Moves `inv`'s entries to where it stands now and re-admits its keys' waiters when
    /// that changed anything (`inserted`: it is new). Its own row is locked already (every
    /// writer of an invocation locks or inserts its row first), so its entries are read
    /// without the keys' locks, and a write that changes none of them (a lease taken or
    /// renewed) takes none.
    pub(super) fn write_concurrency(&self, inv: &Invocation, inserted: bool) -> Result<()> {
        if inv.concurrency.is_empty() {
            return Ok(());
        }
        let new = state_of(inv);
        let old = if inserted {
            None
        } else {
            self.s
                .query_opt(
                    "SELECT state, stopping_until, due_at FROM pap_concurrency \
                     WHERE invocation_id = $1 LIMIT 1",
                    &[&inv.id],
                )?
                .and_then(|r| Some((entry(r.get(0), r.get(1))?, r.get::<_, Option<i64>>(2))))
        };
        let moved = old.map(|o| o.0) != new;
        let mut keys: Vec<(String, u32)> = inv
            .concurrency
            .iter()
            .map(|s| (s.index_key(), s.limit))
            .collect();
        keys.sort();
        let waits_still = !moved && new == Some(Entry::Waiting);
        let due = due_of(inv);
        if waits_still && old.and_then(|o| o.1) != Some(due) {
            // Only its own entries: when it falls due does not change who is admitted.
            self.s.execute(
                "UPDATE pap_concurrency SET due_at = $2 WHERE invocation_id = $1",
                &[&inv.id, &due],
            )?;
        }
        if !(moved || (waits_still && self.relimited(&keys)?)) {
            return Ok(());
        }
        for (key, _) in &keys {
            self.lock("concurrency", &[key.as_str()])?;
        }
        if moved {
            if !inserted {
                self.s.execute(
                    "DELETE FROM pap_concurrency WHERE invocation_id = $1",
                    &[&inv.id],
                )?;
            }
            if let Some(entry) = new {
                self.insert_entries(inv, entry, &keys)?;
            }
        }
        let appended = (moved && new == Some(Entry::Waiting)).then_some(inv.seq);
        for (key, limit) in &keys {
            self.readmit(key, *limit, appended)?;
        }
        Ok(())
    }

    fn insert_entries(&self, inv: &Invocation, entry: Entry, keys: &[(String, u32)]) -> Result<()> {
        let (state, until): (i16, Option<i64>) = match entry {
            Entry::Waiting => (0, None),
            Entry::Running => (1, None),
            Entry::Stopping(until) => (2, Some(until)),
        };
        let waiting = entry == Entry::Waiting;
        let due = waiting.then(|| due_of(inv));
        let nkeys = waiting.then(|| i16::try_from(keys.len()).unwrap_or(i16::MAX));
        for (key, _) in keys {
            self.s.execute(
                "INSERT INTO pap_concurrency (slot_key, seq, state, stopping_until, \
                 invocation_id, due_at, nkeys) VALUES ($1, $2, $3, $4, $5, $6, $7)",
                &[key, &signed(inv.seq), &state, &until, &inv.id, &due, &nkeys],
            )?;
        }
        Ok(())
    }

    /// Whether a key of these was last admitted under another limit than the one given.
    fn relimited(&self, keys: &[(String, u32)]) -> Result<bool> {
        for (key, limit) in keys {
            let found = self.s.query_opt(
                "SELECT slot_limit FROM pap_concurrency_keys WHERE slot_key = $1",
                &[key],
            )?;
            if found.is_some_and(|r| r.get::<_, i32>(0) != limit_of(*limit)) {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Re-admits `key`'s waiters under `limit` (its lock held); other nodes hear of work
    /// that became due.
    fn readmit(&self, key: &str, limit: u32, appended: Option<u64>) -> Result<()> {
        let changes = refresh(&mut Keys(self), key, limit, appended)?;
        if changes.iter().any(|c| c.now.is_some()) {
            self.work_freed.set(true);
        }
        Ok(())
    }

    /// As `WriteTx::relimit_concurrency`.
    pub(super) fn relimit(&self, scope: &str, limit: u32) -> Result<()> {
        let prefix = format!("{scope}\u{1f}");
        let keys = self.s.query(
            "SELECT slot_key FROM pap_concurrency_keys \
             WHERE substr(slot_key, 1, length($1)) = $1 AND slot_limit <> $2 ORDER BY slot_key",
            &[&prefix, &limit_of(limit)],
        )?;
        for row in keys {
            let key: String = row.get(0);
            self.lock("concurrency", &[key.as_str()])?;
            self.readmit(&key, limit, None)?;
        }
        Ok(())
    }

    /// Admits every key's first waiters under the limit its latest waiter carries (the
    /// migration to schema 3, which starts with none admitted).
    pub(super) fn admit_all(&self) -> Result<()> {
        let latest = self.s.query(
            "SELECT DISTINCT ON (slot_key) slot_key, invocation_id FROM pap_concurrency \
             WHERE state = 0 ORDER BY slot_key, seq DESC",
            &[],
        )?;
        for row in latest {
            let (key, id): (String, String) = (row.get(0), row.get(1));
            let limit = super::read::invocation_in(&self.s, &id, false)?
                .and_then(|inv| inv.concurrency.into_iter().find(|s| s.index_key() == key))
                .map_or(1, |s| s.limit);
            self.readmit(&key, limit, None)?;
        }
        Ok(())
    }

    /// As `WriteTx::concurrency_block`: the keys are locked first, in one order, so two nodes
    /// admitting under one key take turns and never both see its last free slot.
    pub(super) fn block(&self, inv: &Invocation, now: i64) -> Result<Option<(String, String)>> {
        let mut keys: Vec<String> = inv.concurrency.iter().map(|s| s.index_key()).collect();
        keys.sort();
        for key in &keys {
            self.lock("concurrency", &[key.as_str()])?;
        }
        blocking(inv, now, |key, before, max| {
            let holders = self.holders_of(key, Some(inv.seq))?;
            let ahead: i64 = self
                .s
                .query_one(
                    "SELECT count(*) FROM (SELECT 1 FROM pap_concurrency WHERE slot_key = $1 \
                     AND state = 0 AND seq < $2 ORDER BY seq LIMIT $3) ahead",
                    &[
                        &key,
                        &signed(before),
                        &i64::try_from(max).unwrap_or(i64::MAX),
                    ],
                )?
                .get(0);
            Ok::<_, Error>((holders, usize::try_from(ahead).unwrap_or(0)))
        })
    }

    fn holders_of(&self, key: &str, but: Option<u64>) -> Result<Holders> {
        let mut holders = Holders::default();
        for row in self.s.query(
            "SELECT seq, state, stopping_until FROM pap_concurrency \
             WHERE slot_key = $1 AND state <> 0",
            &[&key],
        )? {
            if Some(unsigned(row.get(0))) == but {
                continue;
            }
            if let Some(e) = entry(row.get(1), row.get(2)) {
                holders.add(e);
            }
        }
        Ok(holders)
    }
}

fn entry(state: i16, until: Option<i64>) -> Option<Entry> {
    match state {
        0 => Some(Entry::Waiting),
        1 => Some(Entry::Running),
        2 => Some(Entry::Stopping(until.unwrap_or(0))),
        _ => None,
    }
}

fn limit_of(limit: u32) -> i32 {
    i32::try_from(limit).unwrap_or(i32::MAX)
}

/// One key's index, for `refresh`, in the caller's transaction (the key's lock held).
struct Keys<'a, 'c>(&'a PgWrite<'c>);

impl KeyIndex for Keys<'_, '_> {
    type Error = Error;

    fn holders(&mut self, key: &str) -> Result<Holders> {
        self.0.holders_of(key, None)
    }

    fn key_state(&mut self, key: &str) -> Result<Option<KeyState>> {
        Ok(self
            .0
            .s
            .query_opt(
                "SELECT slot_limit, admitted FROM pap_concurrency_keys WHERE slot_key = $1",
                &[&key],
            )?
            .map(|r| KeyState {
                limit: u32::try_from(r.get::<_, i32>(0)).unwrap_or(0),
                admitted: u32::try_from(r.get::<_, i32>(1)).unwrap_or(0),
            }))
    }

    fn set_key_state(&mut self, key: &str, state: Option<KeyState>) -> Result<()> {
        match state {
            Some(s) => self.0.s.execute(
                "INSERT INTO pap_concurrency_keys (slot_key, slot_limit, admitted) \
                 VALUES ($1, $2, $3) ON CONFLICT (slot_key) DO UPDATE SET \
                 slot_limit = EXCLUDED.slot_limit, admitted = EXCLUDED.admitted",
                &[&key, &limit_of(s.limit), &limit_of(s.admitted)],
            )?,
            None => self.0.s.execute(
                "DELETE FROM pap_concurrency_keys WHERE slot_key = $1",
                &[&key],
            )?,
        };
        Ok(())
    }

    fn waiters(&mut self, key: &str, n: usize) -> Result<Vec<(u64, Option<i64>)>> {
        Ok(self
            .0
            .s
            .query(
                "SELECT seq, admitted_at FROM pap_concurrency WHERE slot_key = $1 AND state = 0 \
                 ORDER BY seq LIMIT $2",
                &[&key, &i64::try_from(n).unwrap_or(i64::MAX)],
            )?
            .iter()
            .map(|r| (unsigned(r.get(0)), r.get(1)))
            .collect())
    }

    fn waits_behind(&mut self, key: &str, seq: u64, limit: u32) -> Result<bool> {
        // One round trip: a long queue growing pays this and its insert per invocation.
        Ok(self
            .0
            .s
            .query_one(
                "SELECT coalesce((SELECT slot_limit = $3 FROM pap_concurrency_keys \
                 WHERE slot_key = $1) AND (SELECT admitted_at IS NULL FROM pap_concurrency \
                 WHERE slot_key = $1 AND state = 0 AND seq < $2 ORDER BY seq DESC LIMIT 1), \
                 false)",
                &[&key, &signed(seq), &limit_of(limit)],
            )?
            .get(0))
    }

    fn set_admitted(&mut self, key: &str, seq: u64, at: Option<i64>) -> Result<()> {
        self.0.s.execute(
            "UPDATE pap_concurrency SET admitted_at = $3 WHERE slot_key = $1 AND seq = $2",
            &[&key, &signed(seq), &at],
        )?;
        Ok(())
    }
}
