//! The room the redb file takes: each table's pages (`pap status`), and compaction, which
//! moves the live pages to the front of the file and gives the rest back to the file system
//! (`pap store compact`).
//!
//! The purge frees pages as it removes records, and redb reuses free pages for later
//! writes, so a steady workload holds a steady file without compaction. What compaction adds
//! is shrinking the file after a one-off surplus (a backfill purged a TTL later). redb's
//! `Database::compact` needs the database to itself (`&mut`, no transaction open), so it runs
//! with the file held for writing: other processes wait for it like for any long
//! transaction, and serve refuses to run beside it (see `cmd::store`).

use redb::{ReadableTableMetadata, TableDefinition, TableError, TableHandle};

use super::tables::*;
use super::{Error, Result, Store, redb_err};
use pap_storage::space::{Compacted, TableSize};

impl Store {
    /// Each table with its rows and the bytes of its pages, largest first.
    pub fn table_sizes(&self) -> Result<Vec<TableSize>> {
        let path = self.path();
        self.with_reader(|open| {
            let txn = open.begin_read().map_err(|e| redb_err(&path, e))?;
            let mut out = Vec::new();
            let mut add = |name: &str, found: std::result::Result<(u64, u64), TableError>| {
                match found {
                    Ok((rows, bytes)) => {
                        out.push(TableSize {
                            name: name.to_owned(),
                            rows,
                            bytes,
                        });
                        Ok(())
                    }
                    // A table a file from before it has not created yet.
                    Err(TableError::TableDoesNotExist(_)) => Ok(()),
                    Err(e) => Err(redb_err(&path, e)),
                }
            };
            macro_rules! measure {
                ($($t:expr),* $(,)?) => {$(
                    add($t.name(), size_of(&txn, $t))?;
                )*};
            }
            measure!(META, CLAIMS, CLAIM_EXPIRY, THROTTLE, DEBOUNCE, DEBOUNCE_DUE);
            measure!(CONC_HOLDERS, CONC_WAITERS, CONC_KEYS, BUDGET_TOKENS);
            measure!(
                INVOCATIONS,
                INVOCATION_ORDER,
                AWAITING,
                APPROVAL_HALVES,
                CANCEL_KEYS,
                EVENTS,
                APPROVAL_DEADLINES
            );
            measure!(LEDGER, OUTBOX, WORK, SCHEDULES, NOTIFICATIONS, NOTIFY_ORDER);
            measure!(
                NOTIFY_DEDUP,
                NOTIFY_DUE,
                INBOX,
                AGENT_QUEUE,
                SESSIONS,
                SESSION_AGENTS
            );
            measure!(ATP_INDEX, AUDIT);
            out.sort_by(|a, b| b.bytes.cmp(&a.bytes).then_with(|| a.name.cmp(&b.name)));
            Ok(out)
        })
    }

    /// Gives the file's free pages back to the file system; the sizes before and after.
    pub fn compact(&self) -> Result<Compacted> {
        let path = self.path();
        let len = || {
            std::fs::metadata(&path)
                .map(|m| m.len())
                .map_err(|source| Error::Dir {
                    path: path.clone(),
                    source,
                })
        };
        let before = len()?;
        self.with_writer(|db| {
            // Each call moves what it can; the file shrinks once nothing more moves.
            while db.compact().map_err(|e| redb_err(&path, e))? {}
            Ok(())
        })?;
        // Closing writes the allocator's state, which takes a few pages again: the size
        // reported is the one the file keeps.
        self.shared.close();
        let after = len()?;
        let live = self.table_sizes()?.iter().map(|t| t.bytes).sum();
        Ok(Compacted {
            before,
            after,
            live,
        })
    }
}

/// A table's rows and the bytes of its pages.
fn size_of<K: redb::Key + 'static, V: redb::Value + 'static>(
    txn: &redb::ReadTransaction,
    table: TableDefinition<K, V>,
) -> std::result::Result<(u64, u64), TableError> {
    let t = txn.open_table(table)?;
    let stats = t.stats().map_err(TableError::Storage)?;
    let rows = t.len().map_err(TableError::Storage)?;
    let bytes = stats.stored_bytes() + stats.metadata_bytes() + stats.fragmented_bytes();
    Ok((rows, bytes))
}
