//! Idempotency claims, their index by expiry time, and the event ledger: what every decision
//! past the filter writes. This is the hot path of a stream, so each piece is laid out for
//! the fewest B-tree operations:
//!
//! - a claim is one insert that also returns the earlier claim under the same key (a live
//!   one is put back: a duplicate); its value points at the decision's ledger row;
//! - ledger rows are appended to an in-memory block and stored a block at a time;
//! - the expiry index gets one entry per transaction and expiry time, listing its keys.
//!
//! It implements the storage interface's `DecisionTx`, so the other tables a decision's
//! stages read and write are kept here too:
//! - throttle windows, per (trigger, window key);
//! - agents' token spending over the last 24 hours (a pap extension; see `domain::budget`),
//!   one JSON list per agent, pruned as it is written, in a table opened on use (agents
//!   without a token budget never touch it);
//! - debounce state (a pap extension): per (trigger, window key) where the burst stands, and
//!   an index of trailing debounces by the time they fire, so serve finds what is due
//!   without reading every key. The tables are opened on use: only triggers with a debounce
//!   pay for them, and a format-6 file from before them gets them at its first such write.
//!
//! Their purges are `UpkeepTx`'s, in `tx_retention`.

use super::ledger_block::{Block, Builder};
use super::tables::{BUDGET_TOKENS, DEBOUNCE, DEBOUNCE_DUE};
use super::tx::{Tx, malformed};
use super::tx::{decode, decode_times, encode};
use super::{Error, Result, redb_err};
use pap_domain::DebounceState;
use pap_domain::budget::TokenUse;
use pap_domain::{Claim, LedgerRow};
use pap_storage::{Claimed, RowRef};
use redb::ReadableTable;
#[cfg(test)]
use redb::ReadableTableMetadata;

/// Keys per expiry-index value: 1,000 keys (32,000 bytes) fit the 32 KiB that redb gives a
/// value of that size (it rounds large values up to a power of two of pages: 4,096 keys took
/// twice their size).
const EXPIRY_KEYS: usize = 1000;

/// The most keys a claims batch gathers (about 11 MB in memory): with a million claims
/// (25,000 pages of keys), a batch of this many removes about ten keys per page it rewrites.
pub(super) const BATCH_KEYS: usize = 1 << 18;
/// Expiry-index entries (up to [`EXPIRY_KEYS`] keys each) one gathering step reads: about a
/// millisecond of reading and sorting.
pub(super) const GATHER_ENTRIES: usize = 1;

/// This transaction's ledger rows and expiry-index entries, not yet stored.
#[derive(Debug, Default)]
pub(super) struct Decisions {
    /// The number of the next ledger row (read from `meta` on first use).
    next_row: Option<u64>,
    stored_next_row: u64,
    /// The block being filled: its first row plus its length is always the next row (it
    /// starts over, keeping its buffers, each time it is stored).
    block: Option<Builder>,
    expiring: Vec<Expiring>,
    /// How duplicate-heavy the claims so far were (0 ..= 8; see `claim`).
    duplicates: u8,
    /// The key claimed anew and the ledger row its decision takes: a claim points at its
    /// decision's row (a duplicate names that decision), so the row is fixed when the key
    /// is claimed, and `record_decision` writes it there.
    claimed: Option<([u8; 32], u64)>,
}

/// Keys claimed in this transaction that expire at `at`.
#[derive(Debug)]
struct Expiring {
    at: i64,
    first_row: u64,
    keys: Vec<u8>,
}

impl Tx<'_> {
    pub(super) fn next_row(&mut self) -> Result<u64> {
        if let Some(n) = self.decisions.next_row {
            return Ok(n);
        }
        let n = self.seq_value("ledger_seq")?;
        self.decisions.next_row = Some(n);
        self.decisions.stored_next_row = n;
        Ok(n)
    }

    /// Lists `key` in the expiry index under `expires_at` (stored by `finish_decisions`).
    fn index_expiry(&mut self, key: &[u8; 32], expires_at: i64, row: u64) {
        let entry = match self.decisions.expiring.last_mut() {
            Some(e) if e.at == expires_at && e.keys.len() < EXPIRY_KEYS * 32 => e,
            _ => {
                self.decisions.expiring.push(Expiring {
                    at: expires_at,
                    first_row: row,
                    // Small: a migration makes one entry per old expiry time.
                    keys: Vec::with_capacity(64 * 32),
                });
                self.decisions.expiring.last_mut().expect("just pushed")
            }
        };
        entry.keys.extend_from_slice(key);
    }

    /// Gives the claim on `key` the expiry `expires_at`, keeping its decision, when its
    /// present expiry passes `wanted`; the claim's row when it did.
    fn move_claim_expiry(
        &mut self,
        key: &[u8; 32],
        expires_at: i64,
        wanted: impl Fn(i64) -> bool,
    ) -> Result<Option<u64>> {
        let found = self
            .claims
            .get(key)
            .map_err(|e| redb_err(&self.path, e))?
            .map(|v| v.value());
        let Some((_, decided_at, row)) = found.filter(|(old, _, _)| wanted(*old)) else {
            return Ok(None);
        };
        self.claims
            .insert(key, (expires_at, decided_at, row))
            .map_err(|e| redb_err(&self.path, e))?;
        Ok(Some(row))
    }

    /// The live claim on `key` at `now`, without claiming (an expired one reads as absent).
    pub(crate) fn live_claim(&self, key: &[u8; 32], now: i64) -> Result<Option<Claim>> {
        let found = self
            .claims
            .get(key)
            .map_err(|e| redb_err(&self.path, e))?
            .map(|v| v.value());
        match found {
            Some(value) if value.0 > now => Ok(Some(self.claim_from(value))),
            _ => Ok(None),
        }
    }

    fn claim_from(&self, (expires_at, decided_at, row): (i64, i64, u64)) -> Claim {
        // The row is gone only if the ledger was swept while the claim lived (the sweep
        // keeps rows at least as long as claims, so only after a change of configuration).
        // A damaged block costs the reason its detail, never the decision: the claim stands.
        let Some(decision) = self.ledger_row(row).ok().flatten() else {
            return Claim {
                expires_at,
                decided_at,
                outcome: None,
                invocation_id: None,
                decided_pair: None,
            };
        };
        // Rows kept by the v4 -> v5 migration for claims whose decision was swept have no ids.
        let known = !decision.event_id.is_empty() && !decision.trigger.is_empty();
        Claim {
            expires_at,
            decided_at,
            outcome: Some(decision.outcome),
            invocation_id: decision.invocation_id,
            decided_pair: known.then_some((decision.event_id, decision.trigger)),
        }
    }

    /// Records a decision as ledger row `row`, which `claim` just handed out.
    pub(crate) fn put_ledger(&mut self, row: u64, decision: RowRef) -> Result<()> {
        let next = self.next_row()?;
        if row != next {
            // A claim would point at another decision's row: refuse rather than mislead.
            return Err(Error::Corrupt {
                path: self.path.clone(),
                message: format!("ledger row {row} written where row {next} was due"),
            });
        }
        let block = self
            .decisions
            .block
            .get_or_insert_with(|| Builder::new(next));
        block.push(decision).map_err(|_| Error::Corrupt {
            path: self.path.clone(),
            message: format!("the ledger row of event {} is too large", decision.event_id),
        })?;
        let full = block.is_full();
        self.decisions.next_row = Some(next + 1);
        if full {
            self.store_block()?;
        }
        Ok(())
    }

    fn store_block(&mut self) -> Result<()> {
        let Some(block) = self.decisions.block.as_mut().filter(|b| b.len() > 0) else {
            return Ok(());
        };
        let (first, next) = (block.first, block.first + block.len() as u64);
        self.ledger
            .insert(first, block.finish())
            .map_err(|e| redb_err(&self.path, e))?;
        block.reset(next);
        Ok(())
    }

    /// Ledger row `row`, whether stored or still in this transaction's block.
    pub fn ledger_row(&self, row: u64) -> Result<Option<LedgerRow>> {
        if let Some(block) = &self.decisions.block
            && row >= block.first
        {
            let index = (row - block.first) as usize;
            return (index < block.len())
                .then(|| block.row(index))
                .transpose()
                .map_err(|_| malformed(&self.path));
        }
        let found = self
            .ledger
            .range(..=row)
            .map_err(|e| redb_err(&self.path, e))?
            .next_back()
            .transpose()
            .map_err(|e| redb_err(&self.path, e))?;
        let Some((first, bytes)) = found else {
            return Ok(None);
        };
        let block = Block::new(bytes.value()).map_err(|_| malformed(&self.path))?;
        let index = (row - first.value()) as usize;
        if index >= block.len() {
            return Ok(None);
        }
        block
            .row(index)
            .map(Some)
            .map_err(|_| malformed(&self.path))
    }

    /// Stores the open ledger block, the expiry-index entries and the ledger counter.
    pub(super) fn finish_decisions(&mut self) -> Result<()> {
        self.store_block()?;
        for e in std::mem::take(&mut self.decisions.expiring) {
            self.claim_expiry
                .insert((e.at, e.first_row), e.keys.as_slice())
                .map_err(|x| redb_err(&self.path, x))?;
        }
        if let Some(next) = self.decisions.next_row
            && next != self.decisions.stored_next_row
        {
            self.meta
                .insert("ledger_seq", next)
                .map_err(|e| redb_err(&self.path, e))?;
            self.decisions.stored_next_row = next;
        }
        Ok(())
    }
}

impl pap_storage::DecisionTx for Tx<'_> {
    /// Claims `key` from `now` until `expires_at`, unless a live claim holds it.
    fn claim(&mut self, key: &[u8; 32], now: i64, expires_at: i64) -> Result<Claimed> {
        let row = self.next_row()?;
        // Two ways to the same result. A fresh stream is cheapest with one insert that also
        // returns any earlier claim (put back when live). A stream sent again (a re-run CI
        // job) is all duplicates, and for those a read alone avoids rewriting the claim's
        // page; so after a run of duplicates, look first.
        if self.decisions.duplicates > 4
            && let Some(live) = self.live_claim(key, now)?
        {
            self.decisions.duplicates = (self.decisions.duplicates + 1).min(8);
            return Ok(Claimed::Live(live));
        }
        let old = self
            .claims
            .insert(key, (expires_at, now, row))
            .map_err(|e| redb_err(&self.path, e))?
            .map(|v| v.value());
        if let Some(old) = old.filter(|(old_expiry, _, _)| *old_expiry > now) {
            self.claims
                .insert(key, old)
                .map_err(|e| redb_err(&self.path, e))?;
            self.decisions.duplicates = (self.decisions.duplicates + 1).min(8);
            return Ok(Claimed::Live(self.claim_from(old)));
        }
        self.decisions.duplicates = self.decisions.duplicates.saturating_sub(1);
        self.index_expiry(key, expires_at, row);
        self.decisions.claimed = Some((*key, row));
        Ok(Claimed::New)
    }

    /// Keeps the claim on `key` (if any) until at least `expires_at`, pointing at the same
    /// decision. Used when another pair collides with this key: that pair's own claim must
    /// not outlive this one, or once this one expired the other pair would find the PAP key
    /// free and be decided again. Claims are kept "at least" their TTL, so this is allowed.
    fn extend_claim(&mut self, key: &[u8; 32], expires_at: i64) -> Result<()> {
        if self
            .move_claim_expiry(key, expires_at, |old| old < expires_at)?
            .is_none()
        {
            return Ok(());
        }
        let next = self.next_row()?;
        self.index_expiry(key, expires_at, next);
        Ok(())
    }

    /// Keeps the claim's decision and row, with the sooner expiry, listed in the expiry index
    /// under it as well (its first entry, at the old expiry, then finds it gone or renewed).
    fn shorten_claim(&mut self, key: &[u8; 32], expires_at: i64) -> Result<()> {
        let Some(row) = self.move_claim_expiry(key, expires_at, |old| old > expires_at)? else {
            return Ok(());
        };
        // Under the claim's own row: no other entry of the index is (this time, this row).
        self.index_expiry(key, expires_at, row);
        Ok(())
    }

    fn record_decision(&mut self, key: &[u8; 32], decision: RowRef) -> Result<()> {
        match self.decisions.claimed.take() {
            Some((claimed, row)) if claimed == *key => self.put_ledger(row, decision),
            _ => Err(Error::DecisionNotClaimed {
                location: self.path.display().to_string(),
                event_id: decision.event_id.to_owned(),
            }),
        }
    }

    /// Invocation times recorded for (trigger, window key), oldest first.
    fn throttle_times(&self, trigger: &str, key: &str) -> Result<Vec<i64>> {
        let found = self
            .throttle
            .get((trigger, key))
            .map_err(|e| redb_err(&self.path, e))?;
        Ok(found.map(|v| decode_times(v.value())).unwrap_or_default())
    }

    /// Records an invocation at `now`, forgetting times that left the window.
    fn throttle_record(
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

    fn token_uses(&self, agent: &str) -> Result<Vec<TokenUse>> {
        let table = self
            .txn
            .open_table(BUDGET_TOKENS)
            .map_err(|e| redb_err(&self.path, e))?;
        let found = table.get(agent).map_err(|e| redb_err(&self.path, e))?;
        Ok(match found {
            Some(v) => decode(&self.path, v.value())?,
            None => Vec::new(),
        })
    }

    fn set_token_uses(&mut self, agent: &str, uses: &[TokenUse]) -> Result<()> {
        let mut table = self
            .txn
            .open_table(BUDGET_TOKENS)
            .map_err(|e| redb_err(&self.path, e))?;
        table
            .insert(agent, encode(&uses).as_slice())
            .map_err(|e| redb_err(&self.path, e))?;
        Ok(())
    }

    fn debounce_state(&self, trigger: &str, key: &str) -> Result<Option<DebounceState>> {
        let table = self
            .txn
            .open_table(DEBOUNCE)
            .map_err(|x| redb_err(&self.path, x))?;
        let found = table
            .get((trigger, key))
            .map_err(|x| redb_err(&self.path, x))?;
        found.map(|v| decode(&self.path, v.value())).transpose()
    }

    /// Records the state, keeping the due index in step: the old pending fire's entry goes,
    /// the new one's (if any) comes.
    fn debounce_put(&mut self, trigger: &str, key: &str, state: &DebounceState) -> Result<()> {
        let old = self.debounce_state(trigger, key)?;
        let mut due = self
            .txn
            .open_table(DEBOUNCE_DUE)
            .map_err(|x| redb_err(&self.path, x))?;
        if let Some(p) = old.and_then(|s| s.pending) {
            due.remove((p.due, trigger, key))
                .map_err(|x| redb_err(&self.path, x))?;
        }
        if let Some(p) = &state.pending {
            due.insert((p.due, trigger, key), ())
                .map_err(|x| redb_err(&self.path, x))?;
        }
        let mut table = self
            .txn
            .open_table(DEBOUNCE)
            .map_err(|x| redb_err(&self.path, x))?;
        table
            .insert((trigger, key), encode(state).as_slice())
            .map_err(|x| redb_err(&self.path, x))?;
        Ok(())
    }

    /// (trigger, window key) of trailing debounces due at or before `now`, earliest first,
    /// at most `limit`.
    fn debounce_due(&mut self, now: i64, limit: usize) -> Result<Vec<(String, String)>> {
        let due = self
            .txn
            .open_table(DEBOUNCE_DUE)
            .map_err(|x| redb_err(&self.path, x))?;
        let mut out = Vec::new();
        for entry in due
            .range((i64::MIN, "", "")..)
            .map_err(|x| redb_err(&self.path, x))?
            .take(limit)
        {
            let (k, _) = entry.map_err(|x| redb_err(&self.path, x))?;
            let (at, trigger, key) = k.value();
            if at > now {
                break;
            }
            out.push((trigger.to_owned(), key.to_owned()));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Store;
    use crate::ledger_block::BLOCK_ROWS;
    use pap_storage::purge::{ClaimBatch, Purged};
    use pap_storage::{DecisionTx, ReadTx, UpkeepTx};

    fn key(i: u32) -> [u8; 32] {
        let mut key = [0u8; 32];
        key[..4].copy_from_slice(&i.to_le_bytes());
        key
    }

    /// What the pipeline does for a decision past the filter: claim, then the ledger row.
    fn decide(tx: &mut Tx, i: u32, now: i64, expires_at: i64) -> Result<Claimed> {
        let claimed = tx.claim(&key(i), now, expires_at)?;
        if let Claimed::New = claimed {
            let event_id = format!("e{i}");
            let inv = format!("inv_{i}");
            tx.record_decision(
                &key(i),
                RowRef {
                    event_id: &event_id,
                    trigger: "t",
                    kind: "a.b.c",
                    depth: 0,
                    outcome: if i.is_multiple_of(2) {
                        "invoked"
                    } else {
                        "throttled"
                    },
                    invocation_id: i.is_multiple_of(2).then_some(inv.as_str()),
                    decided_at: now,
                },
            )?;
        }
        Ok(claimed)
    }

    #[test]
    fn expired_claims_read_as_absent_and_are_purged_in_batches() {
        let store = Store::in_memory().unwrap();
        store
            .write(|tx| {
                for i in 0..2500 {
                    decide(tx, i, 0, if i < 2400 { 100 } else { 10_000 })?;
                }
                Ok(())
            })
            .unwrap();
        store
            .write(|tx| {
                assert!(tx.live_claim(&key(0), 99)?.is_some());
                assert!(tx.live_claim(&key(0), 100)?.is_none(), "expired at 100");
                let step = |tx: &mut Tx| tx.purge_expired_claims(100, 1000);
                assert_eq!(step(tx)?, Purged::of(1000, 1000, 1000));
                assert!(step(tx)?.more);
                assert_eq!(step(tx)?, Purged::of(400, 400, 1000));
                assert_eq!(step(tx)?, Purged::of(0, 0, 1000));
                assert!(
                    tx.claims.get(&key(5)).unwrap().is_none(),
                    "removed, not just hidden"
                );
                assert!(tx.live_claim(&key(2450), 100)?.is_some());
                Ok(())
            })
            .unwrap();
    }

    #[test]
    fn a_live_claim_is_a_duplicate_with_the_first_decision() {
        let store = Store::in_memory().unwrap();
        // More than a block, so rows come from stored blocks and from the open one.
        let n = BLOCK_ROWS as u32 + 10;
        store
            .write(|tx| {
                for i in 0..n {
                    assert!(matches!(decide(tx, i, 5, 100)?, Claimed::New));
                }
                let Claimed::Live(dup) = decide(tx, n - 1, 6, 200)? else {
                    panic!("the same key in the same transaction is a duplicate")
                };
                assert_eq!(dup.outcome.as_deref(), Some("throttled"));
                Ok(())
            })
            .unwrap();
        store
            .write(|tx| {
                let Claimed::Live(dup) = decide(tx, 2, 50, 200)? else {
                    panic!("live across transactions")
                };
                assert_eq!(
                    dup,
                    Claim {
                        expires_at: 100,
                        decided_at: 5,
                        outcome: Some("invoked".into()),
                        invocation_id: Some("inv_2".into()),
                        decided_pair: Some(("e2".into(), "t".into())),
                    }
                );
                // The duplicate left the first claim as it was.
                assert_eq!(tx.live_claim(&key(2), 99)?, Some(dup));
                Ok(())
            })
            .unwrap();
        let rows = store.read(|r| r.ledger("e1030")).unwrap();
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].outcome, "invoked");
    }

    #[test]
    fn a_batched_purge_removes_expired_keys_then_the_index_entries_they_came_from() {
        let store = Store::in_memory().unwrap();
        store
            .write(|tx| {
                for i in 0..3000 {
                    decide(tx, i, 0, 100)?;
                }
                for i in 3000..3500 {
                    decide(tx, i, 0, 1000)?;
                }
                Ok(())
            })
            .unwrap();
        // Key 7 claimed again after it expired: its old entry is due, its claim is not.
        store
            .write(|tx| {
                assert!(matches!(decide(tx, 7, 150, 500)?, Claimed::New));
                Ok(())
            })
            .unwrap();
        let mut batch = ClaimBatch::default();
        let (mut removed, mut steps, mut largest) = (0, 0, 0);
        loop {
            let step = store
                .write(|tx| tx.purge_claims_batched(200, 100, &mut batch))
                .unwrap();
            largest = largest.max(batch.keys.len());
            removed += step.removed;
            steps += 1;
            assert!(step.scanned <= 100);
            assert!(steps < 100, "the purge does not end");
            if !step.more {
                break;
            }
        }
        assert_eq!(removed, 2999);
        assert_eq!(largest, 3000, "every due key was gathered before any went");
        assert!(batch.keys.is_empty() && batch.entries.is_empty() && !batch.removing);
        store
            .write(|tx| {
                assert!(tx.live_claim(&key(7), 200)?.is_some());
                assert!(tx.live_claim(&key(3001), 200)?.is_some());
                assert!(tx.claims.get(&key(5)).unwrap().is_none());
                assert_eq!(tx.claims.len().unwrap(), 501);
                // Only entries not due yet are left; the next step finds nothing.
                assert!(
                    tx.claim_expiry
                        .range(..=(200, u64::MAX))
                        .unwrap()
                        .next()
                        .is_none()
                );
                let again = tx.purge_claims_batched(200, 100, &mut batch)?;
                assert_eq!(again, Purged::default());
                Ok(())
            })
            .unwrap();
    }

    #[test]
    fn a_claim_renewed_after_expiry_survives_the_purge_of_its_old_entry() {
        let store = Store::in_memory().unwrap();
        store.write(|tx| decide(tx, 7, 0, 100)).unwrap();
        store
            .write(|tx| {
                assert!(matches!(decide(tx, 7, 150, 500)?, Claimed::New));
                Ok(())
            })
            .unwrap();
        store
            .write(|tx| {
                // The old entry (due at 100) is gone through; the renewed claim stays.
                assert_eq!(tx.purge_expired_claims(200, 10)?, Purged::of(0, 1, 10));
                assert!(tx.live_claim(&key(7), 200)?.is_some());
                assert_eq!(tx.purge_expired_claims(500, 10)?, Purged::of(1, 1, 10));
                assert!(tx.live_claim(&key(7), 200)?.is_none());
                Ok(())
            })
            .unwrap();
        // Both decisions are in the ledger.
        assert_eq!(store.read(|r| r.ledger("e7")).unwrap().len(), 2);
    }

    #[test]
    fn the_ledger_sweep_drops_old_blocks_in_batches() {
        let store = Store::in_memory().unwrap();
        // Three full blocks decided at 10, one block at 1_000 (separate transactions).
        for (first, now) in [(0, 10), (1, 10), (2, 10), (3, 1_000)] {
            store
                .write(|tx| {
                    for i in 0..BLOCK_ROWS as u32 {
                        decide(tx, first * BLOCK_ROWS as u32 + i, now, i64::MAX)?;
                    }
                    Ok(())
                })
                .unwrap();
        }
        let mut removed = 0;
        let mut batches = 0;
        loop {
            let step = store
                .write(|tx| tx.purge_ledger(500, 2 * BLOCK_ROWS))
                .unwrap();
            removed += step.removed;
            batches += 1;
            if !step.more {
                break;
            }
        }
        assert_eq!(removed, 3 * BLOCK_ROWS);
        assert_eq!(
            batches, 2,
            "a batch looks at 2 blocks at most, and stops at a young one"
        );
        assert!(store.read(|r| r.ledger("e5")).unwrap().is_empty());
        assert_eq!(store.read(|r| r.ledger("e3500")).unwrap().len(), 1);
        // A claim whose row was swept still reads as a duplicate, without the outcome.
        store
            .write(|tx| {
                let Claimed::Live(dup) = decide(tx, 5, 2_000, i64::MAX)? else {
                    panic!("still claimed")
                };
                assert_eq!(dup.outcome, None);
                Ok(())
            })
            .unwrap();
    }

    #[test]
    fn the_ledger_sweep_stops_at_the_first_young_block() {
        let store = Store::in_memory().unwrap();
        // An old block, a young one, then an old one again (a clock stepped back).
        for (first, now) in [(0, 10), (1, 1_000), (2, 10)] {
            store
                .write(|tx| {
                    for i in 0..BLOCK_ROWS as u32 {
                        decide(tx, first * BLOCK_ROWS as u32 + i, now, i64::MAX)?;
                    }
                    Ok(())
                })
                .unwrap();
        }
        let step = store.write(|tx| tx.purge_ledger(500, usize::MAX)).unwrap();
        assert_eq!((step.removed, step.more), (BLOCK_ROWS, false));
        assert_eq!(store.read(|r| r.ledger("e2100")).unwrap().len(), 1);
    }

    #[test]
    fn a_damaged_block_costs_a_duplicate_its_detail_not_its_decision() {
        let store = Store::in_memory().unwrap();
        store
            .write(|tx| {
                for i in 0..10 {
                    decide(tx, i, 5, 1_000)?;
                }
                Ok(())
            })
            .unwrap();
        store
            .write(|tx| {
                tx.ledger.insert(0, b"junk".as_slice()).unwrap();
                Ok(())
            })
            .unwrap();
        store
            .write(|tx| {
                let Claimed::Live(dup) = decide(tx, 3, 6, 2_000)? else {
                    panic!("still a duplicate")
                };
                assert_eq!((dup.outcome, dup.decided_at), (None, 5));
                // The sweep steps over the block instead of failing on it forever.
                assert_eq!(tx.purge_ledger(i64::MAX, 10)?, Purged::of(0, 1, 10));
                Ok(())
            })
            .unwrap();
    }

    #[test]
    fn a_decision_under_a_key_not_claimed_is_refused() {
        let store = Store::in_memory().unwrap();
        let err = store
            .write(|tx| {
                let Claimed::New = tx.claim(&key(1), 0, 100)? else {
                    panic!()
                };
                let row_ref = RowRef {
                    event_id: "e",
                    trigger: "t",
                    kind: "a.b.c",
                    depth: 0,
                    outcome: "queued",
                    invocation_id: None,
                    decided_at: 0,
                };
                tx.record_decision(&key(2), row_ref)
            })
            .unwrap_err();
        assert!(err.to_string().contains("did not claim"), "{err}");
    }

    #[test]
    fn a_run_of_duplicates_switches_to_looking_first_with_the_same_answers() {
        let store = Store::in_memory().unwrap();
        store
            .write(|tx| {
                for i in 0..20 {
                    decide(tx, i, 0, if i == 19 { 50 } else { 1_000 })?;
                }
                Ok(())
            })
            .unwrap();
        store
            .write(|tx| {
                for i in 0..19 {
                    let Claimed::Live(dup) = decide(tx, i, 100, 2_000)? else {
                        panic!("{i} is a duplicate")
                    };
                    assert_eq!(dup.expires_at, 1_000, "the first claim stands");
                }
                assert!(tx.decisions.duplicates > 4, "looking first by now");
                // Expired, and never seen: both claimed, in the same mode.
                assert!(matches!(decide(tx, 19, 100, 2_000)?, Claimed::New));
                assert!(matches!(decide(tx, 77, 100, 2_000)?, Claimed::New));
                assert_eq!(tx.live_claim(&key(19), 100)?.unwrap().expires_at, 2_000);
                Ok(())
            })
            .unwrap();
    }
}
