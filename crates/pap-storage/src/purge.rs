//! What one purge transaction reports, for every kind of state that expires.
//!
//! A purge goes in small transactions that a long-running process interleaves with its
//! decisions (see `upkeep::purge`): each is bounded by a number of items to look at, which
//! the caller adapts to how long the last one took. So each transaction reports how much it
//! looked at besides how much it removed, and whether more may be due (the caller then comes
//! back soon instead of at its next interval).

/// The result of one purge transaction on one kind of state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Purged {
    /// Records removed.
    pub removed: usize,
    /// Records looked at (removed or kept): the work done, which the pace is set by.
    pub scanned: usize,
    /// Whether the transaction stopped at its limit, so more may be due now.
    pub more: bool,
    /// It removed bookkeeping besides records (expiry-index entries whose keys were all gone
    /// through), so it must be committed even when `removed` is 0.
    pub tidied: bool,
}

impl Purged {
    /// `removed` of `scanned` looked at, with a limit of `limit`: more may be due when the
    /// limit was reached.
    pub fn of(removed: usize, scanned: usize, limit: usize) -> Purged {
        Purged {
            removed,
            scanned,
            more: scanned >= limit,
            tidied: false,
        }
    }
}

impl Purged {
    /// The end of a step that walks a table in key order: it stopped at a young record
    /// (`young`: nothing after it is due yet) or after `scanned` of `limit` records, the last
    /// at `last`. Returns the step and where the next goes on (`None`: the walk is over).
    pub fn walked<K>(
        removed: usize,
        scanned: usize,
        limit: usize,
        young: bool,
        last: Option<K>,
    ) -> (Purged, Option<K>) {
        let more = !young && scanned >= limit;
        let step = Purged {
            removed,
            scanned,
            more,
            tidied: false,
        };
        (step, if more { last } else { None })
    }
}

/// Where a walk over the debounce states or the throttle windows goes on: after this
/// (trigger id or bucket, window key).
pub type DebounceCursor = (String, String);

/// Expired idempotency keys gathered from the expiry index, removed in key order over
/// several steps (see [`crate::storage::WriteTx::purge_claims_batched`]).
///
/// Keys are random, so removing them in the order they expire rewrites a leaf and a branch
/// page of the claims table for nearly every key (about 10 KB of writes each in small
/// transactions). Gathered by the hundred thousand and removed in key order, neighbours
/// share their pages' rewrites.
#[derive(Debug, Default)]
pub struct ClaimBatch {
    /// The keys gathered so far and not yet gone through, in key order.
    pub keys: std::collections::BTreeSet<[u8; 32]>,
    /// The expiry-index entries the keys came from (the store's own references to them),
    /// removed once every key is gone through; the last one is where gathering goes on.
    pub entries: Vec<(i64, u64)>,
    /// Gathering is over: the steps now remove the keys.
    pub removing: bool,
}
