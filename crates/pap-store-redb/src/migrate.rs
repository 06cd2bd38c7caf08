//! In-place migrations of the store's format: each released format a later pap reads is
//! brought up to the current one by the first process that opens the file for writing (a
//! reader hands an older file to a writer first), in one transaction, so a crash leaves the
//! file as it was. Formats before the first released one are refused (see `tables`).

use std::path::Path;

use redb::Database;

use super::tables::{CONC_HOLDERS, CONC_KEYS, CONC_WAITERS, SCHEMA_VERSION};
use super::tx::Tx;
use super::{Result, redb_err};

/// Whether a file of format `found` is migrated to the current one.
pub(super) fn migrates(found: u64) -> bool {
    (6..=9).contains(&found)
}

/// Migrates a file of format `found` (see [`migrates`]) to the current format.
///
/// 6 → 7: format 6 kept a queued invocation in the work index however long it had to wait for
/// its concurrency keys; format 7 keeps one there only while its keys admit it, and splits
/// the concurrency index into holders, waiters (with their admission) and per-key states.
///
/// 7 → 8: adds the read indexes (creation order, the invocations awaiting approval, a count
/// per status; see `read_index`), built from the invocations in one pass.
///
/// 8 → 9: adds the notification counts (see `notify_counts`), from the notifications in one
/// pass.
///
/// 9 → 10: adds the index of the approvals by the middle of their time to answer
/// (`APPROVAL_HALVES`), from the index of those awaiting (no record is read), so `pap status`
/// counts those waiting past half without reading each one.
pub(super) fn to_current(db: &Database, path: &Path, found: u64) -> Result<()> {
    debug_assert!(migrates(found));
    let txn = db.begin_write().map_err(|e| redb_err(path, e))?;
    txn.open_table(CONC_HOLDERS)
        .map_err(|e| redb_err(path, e))?;
    txn.open_table(CONC_WAITERS)
        .map_err(|e| redb_err(path, e))?;
    txn.open_table(CONC_KEYS).map_err(|e| redb_err(path, e))?;
    {
        let mut tx = Tx::open(&txn, path)?;
        if found == 6 {
            tx.migrate_concurrency_6()?;
        }
        if found <= 7 {
            tx.build_read_indexes()?;
        }
        if found <= 8 {
            tx.build_notification_counts()?;
        }
        tx.build_approval_halves()?;
        tx.finish()?;
        tx.meta
            .insert("schema_version", SCHEMA_VERSION)
            .map_err(|e| redb_err(path, e))?;
    }
    txn.commit().map_err(|e| redb_err(path, e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Store;
    use pap_storage::{InboxTx, ReadTx, WorkTx};
    use redb::ReadableDatabase;

    /// The checked-in format-6 store with work behind concurrency keys (see
    /// `tests/fixtures/store/format-6-concurrency.sh`): db1-1 runs (lease lapsed) under the
    /// agent's key (limit 3) and host db1's (limit 1); db2-1, db1-2, db1-3, db2-2, db2-3 and
    /// db1-4 wait, in that decision order.
    #[test]
    fn a_format_6_store_keeps_only_admitted_waiters_as_due_work() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::copy(
            // The workspace's fixtures, which `tests/store_format.rs` upgrades too.
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../../tests/fixtures/store/format-6-concurrency.redb"),
            dir.path().join("state.redb"),
        )
        .unwrap();
        let store = Store::open(dir.path()).unwrap();
        let due = store.read(|r| r.work_due(i64::MAX, 100)).unwrap();
        let events: Vec<String> = due
            .iter()
            .map(|id| store.read(|r| r.invocation(id)).unwrap().unwrap().event_id)
            .collect();
        // db1-1 runs (first: running work comes first); the agent's key admits two waiters
        // beside it, db2-1 and db1-2, but host db1 is held by db1-1: only db2-1 is due.
        assert_eq!(events, ["db1-1", "db2-1"]);
        // Format 9's notification counts, built from the fixture's notifications.
        let counts = store.read(|r| r.notification_counts()).unwrap();
        let stored = store
            .read(|r| pap_storage::ReadTx::notifications(r, &|_| true, None))
            .unwrap()
            .1;
        assert_eq!(counts.by_status.values().sum::<u64>(), stored as u64);
        drop(store);
        // Migrated in place: format 7, without format 6's index.
        let db = Database::open(dir.path().join("state.redb")).unwrap();
        let txn = db.begin_read().unwrap();
        let meta = txn.open_table(super::super::tables::META).unwrap();
        let version = meta.get("schema_version").unwrap().unwrap().value();
        assert_eq!(version, SCHEMA_VERSION);
        assert!(matches!(
            txn.open_table(super::super::tables::CONCURRENCY_6),
            Err(redb::TableError::TableDoesNotExist(_))
        ));
    }

    /// A format-8 file is format 9 without the notification counts: built from a format-9
    /// file by dropping them, it is migrated at its next open, and its counts come back.
    #[test]
    fn a_format_8_store_gets_its_notification_counts() {
        use pap_domain::{NotifyStatus, SinkDelivery, SinkState};
        use redb::ReadableTable;
        let dir = tempfile::tempdir().unwrap();
        let counted = |store: &Store| store.read(|r| r.notification_counts()).unwrap();
        let before = {
            let store = Store::open(dir.path()).unwrap();
            store
                .write(|tx| {
                    for (seq, status, sink) in [
                        (1, NotifyStatus::Dispatched, Some(SinkState::Failed)),
                        (2, NotifyStatus::Delivered, Some(SinkState::Sent)),
                        (3, NotifyStatus::Dispatched, None),
                    ] {
                        let mut n = pap_domain::Notification::for_tests(status);
                        n.id = format!("ntf_{seq}");
                        n.seq = seq;
                        n.sinks = sink
                            .map(|state| SinkDelivery::for_tests("pager", state))
                            .into_iter()
                            .collect();
                        tx.put_notification(&n)?;
                    }
                    Ok(())
                })
                .unwrap();
            counted(&store)
        };
        assert_eq!(before.by_status["dispatched"], 2);
        assert_eq!(before.by_status["delivered"], 1);
        assert_eq!(before.failing_by_sink["pager"], 1);
        {
            let db = Database::create(dir.path().join("state.redb")).unwrap();
            let txn = db.begin_write().unwrap();
            {
                let mut meta = txn.open_table(super::super::tables::META).unwrap();
                let keys: Vec<String> = meta
                    .iter()
                    .unwrap()
                    .map(|r| r.unwrap().0.value().to_owned())
                    .filter(|k| k.starts_with("notify."))
                    .collect();
                assert_eq!(keys.len(), 3, "{keys:?}");
                for k in keys {
                    meta.remove(k.as_str()).unwrap();
                }
                meta.insert("schema_version", 8).unwrap();
            }
            txn.commit().unwrap();
        }
        let store = Store::open(dir.path()).unwrap();
        assert_eq!(counted(&store), before);
    }

    /// A format-7 file is format 8 without the read indexes: built from a format-8 file by
    /// dropping them, it is migrated at its next open, and its counts and pages come back.
    #[test]
    fn a_format_7_store_gets_its_read_indexes() {
        use pap_domain::{Invocation, Status};
        use pap_storage::scan::{Next, Only, Scan};
        use redb::ReadableTable;
        let dir = tempfile::tempdir().unwrap();
        {
            let store = Store::open(dir.path()).unwrap();
            store
                .write(|tx| {
                    for (seq, status) in [
                        (1, Status::AwaitingApproval),
                        (2, Status::Queued),
                        (3, Status::AwaitingApproval),
                        (4, Status::Succeeded),
                    ] {
                        let mut inv = Invocation::for_tests(&format!("i{seq}"), status);
                        inv.seq = seq;
                        tx.insert_invocation(&inv)?;
                    }
                    Ok(())
                })
                .unwrap();
        }
        {
            let db = Database::create(dir.path().join("state.redb")).unwrap();
            let txn = db.begin_write().unwrap();
            txn.delete_table(super::super::tables::INVOCATION_ORDER)
                .unwrap();
            txn.delete_table(super::super::tables::AWAITING).unwrap();
            {
                let mut meta = txn.open_table(super::super::tables::META).unwrap();
                let counts: Vec<String> = meta
                    .iter()
                    .unwrap()
                    .map(|r| r.unwrap().0.value().to_owned())
                    .filter(|k| k.starts_with("count."))
                    .collect();
                assert!(!counts.is_empty());
                for k in counts {
                    meta.remove(k.as_str()).unwrap();
                }
                meta.insert("schema_version", 7).unwrap();
            }
            txn.commit().unwrap();
        }
        let store = Store::open(dir.path()).unwrap();
        let (counts, awaiting, all) = store
            .read(|r| {
                let counts = r.queue_counts(0, -1)?;
                let seqs = |only| -> pap_storage::Result<Vec<u64>> {
                    let mut out = Vec::new();
                    let scan = Scan {
                        only,
                        ..Scan::all(0)
                    };
                    r.scan_invocations(&scan, &mut |i| {
                        out.push(i.seq);
                        Ok(Next::More)
                    })?;
                    Ok(out)
                };
                Ok((counts, seqs(Only::Awaiting)?, seqs(Only::All)?))
            })
            .unwrap();
        assert_eq!((counts.awaiting, counts.queued), (2, 1));
        assert_eq!(awaiting, [1, 3]);
        assert_eq!(all, [1, 2, 3, 4]);
    }
}
