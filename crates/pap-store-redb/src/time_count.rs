//! Counting the keys of a time index (`(time, packed id) → ()`: due work, approval deadlines,
//! approvals' halves) on one side of a moment, without walking the whole index: the keys
//! before it and the keys from it on are walked in turn, and the shorter walk ends first.
//! The table's length is kept by redb, so the shorter side gives the other. Each side is
//! walked [`COUNTED_EXACTLY`] keys at most: when both are longer, the count is that bound, a
//! floor (see `pap_storage::scan::COUNTED_EXACTLY`).
//!
//! So `pap status` and a scrape of `/metrics` cost what the smaller side of each moment
//! holds (usually a handful: the work that is overdue, the approvals already expired), not
//! what the queue holds.

use redb::{ReadOnlyTable, ReadableTableMetadata};

use super::{Result, redb_err};
pub(super) use pap_storage::scan::COUNTED_EXACTLY;

type TimeIndex = ReadOnlyTable<(i64, &'static [u8]), ()>;

/// How many keys of `index` have a time before `moment`.
pub(super) fn before(index: &TimeIndex, moment: i64, path: &std::path::Path) -> Result<u64> {
    let e = |e| redb_err(path, e);
    let total = index.len().map_err(e)?;
    let at: (i64, &[u8]) = (moment, &[]);
    let mut low = index.range(..at).map_err(e)?;
    let mut high = index.range(at..).map_err(e)?;
    let mut walked = 0;
    while walked < COUNTED_EXACTLY {
        match low.next() {
            None => return Ok(walked),
            Some(row) => {
                row.map_err(e)?;
            }
        }
        match high.next() {
            None => return Ok(total.saturating_sub(walked)),
            Some(row) => {
                row.map_err(e)?;
            }
        }
        walked += 1;
    }
    // Both sides are longer than the bound: at least that many are before.
    Ok(COUNTED_EXACTLY)
}

#[cfg(test)]
mod tests {
    use super::*;
    use redb::{Database, ReadableDatabase, TableDefinition};

    const T: TableDefinition<(i64, &[u8]), ()> = TableDefinition::new("t");

    fn index(times: impl Iterator<Item = i64>) -> (tempfile::TempDir, Database) {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::create(dir.path().join("t.redb")).unwrap();
        let txn = db.begin_write().unwrap();
        {
            let mut t = txn.open_table(T).unwrap();
            for (n, time) in times.enumerate() {
                let id = (n as u64).to_be_bytes();
                t.insert((time, id.as_slice()), ()).unwrap();
            }
        }
        txn.commit().unwrap();
        (dir, db)
    }

    #[test]
    fn counts_exactly_from_the_shorter_side_and_floors_when_both_are_long() {
        let path = std::path::Path::new("t");
        // 30,000 keys at times 0..30,000.
        let (_dir, db) = index(0..30_000);
        let txn = db.begin_read().unwrap();
        let t = txn.open_table(T).unwrap();
        assert_eq!(before(&t, 0, path).unwrap(), 0);
        assert_eq!(before(&t, 5, path).unwrap(), 5);
        assert_eq!(before(&t, 29_990, path).unwrap(), 29_990);
        assert_eq!(before(&t, 40_000, path).unwrap(), 30_000);
        assert_eq!(before(&t, 15_000, path).unwrap(), COUNTED_EXACTLY);
        // Keys at the moment itself are not before it.
        let (_dir, db) = index([7, 7, 7, 9].into_iter());
        let txn = db.begin_read().unwrap();
        let t = txn.open_table(T).unwrap();
        assert_eq!(before(&t, 7, path).unwrap(), 0);
        assert_eq!(before(&t, 8, path).unwrap(), 3);
    }
}
