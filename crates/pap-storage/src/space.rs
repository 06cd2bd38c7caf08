//! How much room the state takes, table by table (`pap status`), and what giving free room
//! back to the file system did (`pap store compact`).

use serde::Serialize;

/// One table of the state.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct TableSize {
    pub name: String,
    /// Rows (on PostgreSQL the planner's estimate, which autovacuum's analyse keeps).
    pub rows: u64,
    /// Bytes its pages take: redb's B-tree pages (data, metadata and the unused part of
    /// them); PostgreSQL's `pg_total_relation_size` (with indexes and TOAST).
    pub bytes: u64,
}

/// What `pap store compact` did.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
pub struct Compacted {
    /// The file's size before and after.
    pub before: u64,
    pub after: u64,
    /// The pages the tables take after (the sum of [`TableSize::bytes`]).
    pub live: u64,
}
