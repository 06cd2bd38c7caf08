//! Upgrades an older store file in place, in one transaction (a crash leaves the old version).

use std::path::Path;

use std::collections::HashMap;

use redb::{Database, ReadableTable, TableDefinition};

use super::ledger_block::RowRef;
use super::records::{Invocation, LedgerRow, OutboxEntry};
use super::tables::*;
use super::tx::{Tx, work_key};
use super::tx_claims::Claimed;
use super::{Error, Result, redb_err};

/// Version 4's claims: key → (expires_at, decided_at, outcome, invocation id or "").
const V4_CLAIMS: TableDefinition<&[u8; 32], (i64, i64, &str, &str)> =
    TableDefinition::new("claims");
/// Version 4's expiry index: one (expires_at, key) row per claim.
const V4_CLAIM_EXPIRY: TableDefinition<(i64, &[u8; 32]), ()> = TableDefinition::new("claim_expiry");
/// Version 4's ledger: (event id, trigger id) → (decided_at, depth, outcome, invocation id or
/// "", event type).
type V4LedgerValue = (i64, u32, &'static str, &'static str, &'static str);
const V4_LEDGER: TableDefinition<(&[u8], &[u8]), V4LedgerValue> = TableDefinition::new("ledger");

/// Version 2 → 3: adds the work index (built from the invocations), the schedule table, and
/// the owner beside each outbox event (none: whoever finds a leftover may dispatch it).
pub fn from_2(db: &Database, path: &Path) -> Result<()> {
    let txn = db.begin_write().map_err(|x| redb_err(path, x))?;
    {
        let invocations = txn.open_table(INVOCATIONS).map_err(|x| redb_err(path, x))?;
        let mut work = txn.open_table(WORK).map_err(|x| redb_err(path, x))?;
        for row in invocations.iter().map_err(|x| redb_err(path, x))? {
            let (_, v) = row.map_err(|x| redb_err(path, x))?;
            let inv: Invocation =
                serde_json::from_slice(v.value()).map_err(|err| Error::Corrupt {
                    path: path.to_path_buf(),
                    message: err.to_string(),
                })?;
            if let Some(due) = work_key(&inv) {
                work.insert((due, inv.id.as_str()), ())
                    .map_err(|x| redb_err(path, x))?;
            }
        }
        let mut outbox = txn.open_table(OUTBOX).map_err(|x| redb_err(path, x))?;
        let mut entries = Vec::new();
        for row in outbox.iter().map_err(|x| redb_err(path, x))? {
            let (k, v) = row.map_err(|x| redb_err(path, x))?;
            let event = serde_json::from_slice(v.value()).map_err(|err| Error::Corrupt {
                path: path.to_path_buf(),
                message: err.to_string(),
            })?;
            entries.push((k.value().to_owned(), OutboxEntry { owner: None, event }));
        }
        for (id, entry) in entries {
            let bytes = serde_json::to_vec(&entry).expect("serialisable");
            outbox
                .insert(id.as_str(), bytes.as_slice())
                .map_err(|x| redb_err(path, x))?;
        }
        txn.open_table(SCHEDULES).map_err(|x| redb_err(path, x))?;
    }
    commit_as(txn, 3, path)
}

/// Version 3 → 4: adds the notification tables (ANP ledger, inbox, agent queues, sessions);
/// nothing older changes.
pub fn from_3(db: &Database, path: &Path) -> Result<()> {
    let txn = db.begin_write().map_err(|x| redb_err(path, x))?;
    create_notify_tables(&txn, path)?;
    commit_as(txn, 4, path)
}

/// Ends a step: the file says `version`, in the same transaction as the step's changes.
fn commit_as(txn: redb::WriteTransaction, version: u64, path: &Path) -> Result<()> {
    txn.open_table(META)
        .map_err(|x| redb_err(path, x))?
        .insert("schema_version", version)
        .map_err(|x| redb_err(path, x))?;
    txn.commit().map_err(|x| redb_err(path, x))
}

/// Version 4 → 5: the ledger moves to numbered rows in blocks, claims point at their ledger
/// row instead of carrying the outcome, and the expiry index lists keys per expiry time. Rows
/// are numbered in the order they were decided; a claim whose ledger row was swept gets a
/// row of its own (without event and trigger ids, which a claim does not hold).
pub fn from_4(db: &Database, path: &Path) -> Result<()> {
    let txn = db.begin_write().map_err(|x| redb_err(path, x))?;
    {
        let mut rows = Vec::new();
        for row in txn
            .open_table(V4_LEDGER)
            .map_err(|x| redb_err(path, x))?
            .iter()
            .map_err(|x| redb_err(path, x))?
        {
            let (k, v) = row.map_err(|x| redb_err(path, x))?;
            let (event_id, trigger) = k.value();
            let (decided_at, depth, outcome, inv, kind) = v.value();
            rows.push(LedgerRow {
                event_id: String::from_utf8_lossy(event_id).into_owned(),
                trigger: String::from_utf8_lossy(trigger).into_owned(),
                kind: kind.to_owned(),
                depth,
                outcome: outcome.to_owned(),
                invocation_id: (!inv.is_empty()).then(|| inv.to_owned()),
                decided_at,
            });
        }
        rows.sort_by_key(|r| r.decided_at);
        let mut claims = HashMap::new();
        for row in txn
            .open_table(V4_CLAIMS)
            .map_err(|x| redb_err(path, x))?
            .iter()
            .map_err(|x| redb_err(path, x))?
        {
            let (k, v) = row.map_err(|x| redb_err(path, x))?;
            let (expires_at, decided_at, outcome, inv) = v.value();
            claims.insert(
                *k.value(),
                (expires_at, decided_at, outcome.to_owned(), inv.to_owned()),
            );
        }
        txn.delete_table(V4_LEDGER).map_err(|x| redb_err(path, x))?;
        txn.delete_table(V4_CLAIMS).map_err(|x| redb_err(path, x))?;
        txn.delete_table(V4_CLAIM_EXPIRY)
            .map_err(|x| redb_err(path, x))?;

        let mut tx = Tx::open(&txn, path)?;
        for row in &rows {
            // The key as the dispatcher computes it (contract section 3).
            let key = crate::stages::idempotency::key(&row.event_id, &row.trigger);
            let number = match claims.remove(&key) {
                Some((expires_at, decided_at, ..)) => {
                    match tx.claim(&key, decided_at, expires_at)? {
                        Claimed::New { row } => row,
                        Claimed::Live(_) => tx.next_row()?,
                    }
                }
                None => tx.next_row()?,
            };
            tx.put_ledger(number, RowRef::from(row))?;
        }
        let mut orphans: Vec<_> = claims.into_iter().collect();
        orphans.sort_by_key(|(_, (_, decided_at, ..))| *decided_at);
        for (key, (expires_at, decided_at, outcome, inv)) in orphans {
            if let Claimed::New { row } = tx.claim(&key, decided_at, expires_at)? {
                tx.put_ledger(
                    row,
                    RowRef {
                        event_id: "",
                        trigger: "",
                        kind: "",
                        depth: 0,
                        outcome: &outcome,
                        invocation_id: (!inv.is_empty()).then_some(inv.as_str()),
                        decided_at,
                    },
                )?;
            }
        }
        tx.finish()?;
    }
    commit_as(txn, SCHEMA_VERSION, path)
}

#[cfg(test)]
mod tests {
    use redb::backends::InMemoryBackend;
    use redb::{ReadableDatabase, ReadableTableMetadata};
    use serde_json::json;

    use super::*;

    fn memory_db() -> (Database, &'static Path) {
        let db = Database::builder()
            .create_with_backend(InMemoryBackend::new())
            .unwrap();
        (db, Path::new("(memory)"))
    }

    #[test]
    fn version_2_gains_the_work_index_outbox_owners_and_notification_tables() {
        let (db, path) = memory_db();
        let queued = json!({
            "id": "inv_1", "seq": 1, "status": "queued", "trigger": "t", "agent": "a",
            "event_id": "e", "event_type": "a.b.c", "depth": 0, "risk": "low", "attempts": 0,
            "max_attempts": 1, "created_at": 5, "updated_at": 5, "event": {}
        });
        let mut done = queued.clone();
        done["id"] = json!("inv_2");
        done["status"] = json!("succeeded");
        let txn = db.begin_write().unwrap();
        {
            let mut meta = txn.open_table(META).unwrap();
            meta.insert("schema_version", 2).unwrap();
            let mut invs = txn.open_table(INVOCATIONS).unwrap();
            for inv in [&queued, &done] {
                let bytes = serde_json::to_vec(inv).unwrap();
                invs.insert(inv["id"].as_str().unwrap(), bytes.as_slice())
                    .unwrap();
            }
            let mut outbox = txn.open_table(OUTBOX).unwrap();
            outbox
                .insert("evt_1", br#"{"id":"evt_1"}"#.as_slice())
                .unwrap();
        }
        txn.commit().unwrap();

        init(&db, path).unwrap();

        let txn = db.begin_read().unwrap();
        let work = txn.open_table(WORK).unwrap();
        assert_eq!(work.len().unwrap(), 1);
        assert!(work.get((5, "inv_1")).unwrap().is_some());
        let outbox = txn.open_table(OUTBOX).unwrap();
        let entry: OutboxEntry =
            serde_json::from_slice(outbox.get("evt_1").unwrap().unwrap().value()).unwrap();
        assert!(entry.owner.is_none());
        assert_eq!(entry.event["id"], "evt_1");
        let meta = txn.open_table(META).unwrap();
        assert_eq!(
            meta.get("schema_version").unwrap().unwrap().value(),
            SCHEMA_VERSION
        );
        txn.open_table(SCHEDULES).unwrap();
        txn.open_table(INBOX).unwrap();
        txn.open_table(NOTIFICATIONS).unwrap();
    }

    #[test]
    fn version_4_claims_point_at_ledger_rows_in_blocks() {
        use crate::stages::idempotency::key;
        let (db, path) = memory_db();
        let (k1, k2, orphan) = (key("e1", "t1"), key("e2", "t1"), [9u8; 32]);
        let txn = db.begin_write().unwrap();
        {
            txn.open_table(META)
                .unwrap()
                .insert("schema_version", 4)
                .unwrap();
            let mut ledger = txn.open_table(V4_LEDGER).unwrap();
            ledger
                .insert(
                    (b"e1".as_slice(), b"t1".as_slice()),
                    (5, 0, "invoked", "inv_1", "a.b.c"),
                )
                .unwrap();
            ledger
                .insert(
                    (b"e2".as_slice(), b"t1".as_slice()),
                    (3, 1, "throttled", "", "a.b.c"),
                )
                .unwrap();
            let mut claims = txn.open_table(V4_CLAIMS).unwrap();
            claims.insert(&k1, (100, 5, "invoked", "inv_1")).unwrap();
            claims.insert(&k2, (100, 3, "throttled", "")).unwrap();
            claims.insert(&orphan, (200, 1, "filtered", "")).unwrap();
            let mut expiry = txn.open_table(V4_CLAIM_EXPIRY).unwrap();
            for (at, k) in [(100, &k1), (100, &k2), (200, &orphan)] {
                expiry.insert((at, k), ()).unwrap();
            }
        }
        txn.commit().unwrap();

        init(&db, path).unwrap();

        let txn = db.begin_write().unwrap();
        {
            let mut tx = Tx::open(&txn, path).unwrap();
            let c1 = tx.live_claim(&k1, 50).unwrap().unwrap();
            assert_eq!(c1.outcome.as_deref(), Some("invoked"));
            assert_eq!(c1.invocation_id.as_deref(), Some("inv_1"));
            assert_eq!((c1.expires_at, c1.decided_at), (100, 5));
            let lost = tx.live_claim(&orphan, 150).unwrap().unwrap();
            assert_eq!(lost.outcome.as_deref(), Some("filtered"));
            // Rows are numbered in decision order: e2 (at 3), e1 (at 5), then the orphan.
            assert_eq!(tx.ledger_row(0).unwrap().unwrap().event_id, "e2");
            assert_eq!(tx.ledger_row(1).unwrap().unwrap().depth, 0);
            assert_eq!(tx.ledger_row(2).unwrap().unwrap().event_id, "");
            assert_eq!(tx.purge_expired_claims(100).unwrap(), 2);
            assert!(tx.live_claim(&orphan, 150).unwrap().is_some());
            assert_eq!(tx.seq_value("ledger_seq").unwrap(), 3);
            assert_eq!(tx.seq_value("schema_version").unwrap(), SCHEMA_VERSION);
        }
        drop(txn);
        let read = db.begin_read().unwrap();
        assert!(
            read.open_table(V4_CLAIMS).is_err(),
            "the old tables are gone"
        );
        assert!(read.open_table(V4_LEDGER).is_err());
    }

    #[test]
    fn version_4_claims_with_many_expiry_times_migrate_one_by_one() {
        use crate::stages::idempotency::key;
        let (db, path) = memory_db();
        let n = 3_000i64;
        let txn = db.begin_write().unwrap();
        {
            txn.open_table(META)
                .unwrap()
                .insert("schema_version", 4)
                .unwrap();
            let mut ledger = txn.open_table(V4_LEDGER).unwrap();
            let mut claims = txn.open_table(V4_CLAIMS).unwrap();
            for i in 0..n {
                // A trickled stream: every decision at its own time.
                let event = format!("e{i}");
                ledger
                    .insert(
                        (event.as_bytes(), b"t".as_slice()),
                        (i, 0, "throttled", "", "a.b.c"),
                    )
                    .unwrap();
                claims
                    .insert(&key(&event, "t"), (1_000 + i, i, "throttled", ""))
                    .unwrap();
            }
        }
        txn.commit().unwrap();

        init(&db, path).unwrap();

        let txn = db.begin_write().unwrap();
        let mut tx = Tx::open(&txn, path).unwrap();
        for i in [0, n / 2, n - 1] {
            let claim = tx.live_claim(&key(&format!("e{i}"), "t"), 999).unwrap();
            assert_eq!(claim.unwrap().outcome.as_deref(), Some("throttled"));
        }
        // Expired up to 1_000 + 499: the first 500 keys, one entry each.
        assert_eq!(tx.purge_expired_claims(1_499).unwrap(), 500);
        assert!(tx.live_claim(&key("e499", "t"), 0).unwrap().is_none());
        assert!(tx.live_claim(&key("e500", "t"), 0).unwrap().is_some());
    }
}
