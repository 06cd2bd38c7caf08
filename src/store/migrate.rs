//! Upgrades an older store file in place, in one transaction (a crash leaves the old version).

use std::path::Path;

use redb::{Database, ReadableTable};

use super::records::{Invocation, OutboxEntry};
use super::tables::*;
use super::tx::work_key;
use super::{Error, Result, redb_err};

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
        let mut meta = txn.open_table(META).map_err(|x| redb_err(path, x))?;
        meta.insert("schema_version", 3)
            .map_err(|x| redb_err(path, x))?;
    }
    txn.commit().map_err(|x| redb_err(path, x))
}

/// Version 3 → 4: adds the notification tables (ANP ledger, inbox, agent queues, sessions);
/// nothing older changes.
pub fn from_3(db: &Database, path: &Path) -> Result<()> {
    let txn = db.begin_write().map_err(|x| redb_err(path, x))?;
    create_notify_tables(&txn, path)?;
    {
        let mut meta = txn.open_table(META).map_err(|x| redb_err(path, x))?;
        meta.insert("schema_version", SCHEMA_VERSION)
            .map_err(|x| redb_err(path, x))?;
    }
    txn.commit().map_err(|x| redb_err(path, x))
}

#[cfg(test)]
mod tests {
    use redb::backends::InMemoryBackend;
    use redb::{ReadableDatabase, ReadableTableMetadata};
    use serde_json::json;

    use super::*;

    #[test]
    fn version_2_gains_the_work_index_outbox_owners_and_notification_tables() {
        let db = Database::builder()
            .create_with_backend(InMemoryBackend::new())
            .unwrap();
        let path = Path::new("(memory)");
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
}
