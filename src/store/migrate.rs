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
        meta.insert("schema_version", SCHEMA_VERSION)
            .map_err(|x| redb_err(path, x))?;
    }
    txn.commit().map_err(|x| redb_err(path, x))
}
