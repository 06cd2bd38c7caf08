//! Table definitions and the schema version, checked at every open.

use std::path::Path;

use redb::{Database, ReadOnlyDatabase, ReadableDatabase, ReadableTable, TableDefinition};

use super::{Error, Result, redb_err};

/// Bump when a table's layout changes; a newer file is refused at open, an older one of a
/// released format migrated in place (see `migrate`).
pub(super) const SCHEMA_VERSION: u64 = 10;

/// The first format a release of pap writes. Older files come from development builds, and
/// are refused with a message rather than migrated (see CHANGELOG.md).
pub(super) const FIRST_RELEASED_VERSION: u64 = 6;

/// `schema_version`, and counters (`invocation_seq`, `audit_seq`, `ledger_seq`: the number
/// of the next ledger row; `count.<status>`: how many invocations have that recorded status,
/// kept in the transaction that changes one, format 8; `notify.count.<status>` and
/// `notify.failing.<sink>`: the notifications' counts, format 9, see `notify_counts`).
pub(super) const META: TableDefinition<&str, u64> = TableDefinition::new("meta");
/// SHA-256(event.id ‖ trigger.id) → (expires_at, decided_at, number of the decision's ledger
/// row) (version 5; the outcome lives in the ledger row, so a claim is written once, at the
/// idempotency stage, in the same B-tree descent that finds an earlier one).
pub(super) const CLAIMS: TableDefinition<&[u8; 32], (i64, i64, u64)> =
    TableDefinition::new("claims");
/// (expires_at, number of the first key's ledger row) → the 32-byte keys that expire then,
/// concatenated: the index by expiry time, one row per transaction and expiry time instead of
/// one per key (version 5). A key renewed later stays listed here; the purge checks the claim.
pub(super) const CLAIM_EXPIRY: TableDefinition<(i64, u64), &[u8]> =
    TableDefinition::new("claim_expiry");
/// (trigger id, window key as JSON) → invocation times in the window, i64 little-endian.
pub(super) const THROTTLE: TableDefinition<(&str, &str), &[u8]> = TableDefinition::new("throttle");
/// (trigger id, window key as JSON) → DebounceState (JSON): where a debounced trigger's
/// burst stands (a pap extension, added to format 6 before its release; a write creates the
/// table in a file from before it, and readers never open it).
pub(super) const DEBOUNCE: TableDefinition<(&str, &str), &[u8]> = TableDefinition::new("debounce");
/// (due at, trigger id, window key) → (): trailing debounces waiting to fire.
pub(super) const DEBOUNCE_DUE: TableDefinition<(i64, &str, &str), ()> =
    TableDefinition::new("debounce_due");
/// Format 6's concurrency index, (concurrency key, invocation sequence number) → [1 running |
/// 0 waiting | 2 stopping, until] followed by the invocation id; format 7 splits it into the
/// three tables below (see `migrate`).
pub(super) const CONCURRENCY_6: TableDefinition<(&str, u64), &[u8]> =
    TableDefinition::new("concurrency");
/// (concurrency key: scope and key, see `ConcurrencySlot::index_key`, invocation sequence
/// number) → [1 running | 2 stopping, then until as i64 LE] followed by the invocation id:
/// who holds a slot of a key (format 7).
pub(super) const CONC_HOLDERS: TableDefinition<(&str, u64), &[u8]> =
    TableDefinition::new("concurrency_holders");
/// (concurrency key, invocation sequence number) → [0 | 1, then admitted at as i64 LE]
/// followed by the packed invocation id: who waits for a slot of a key, in decision order,
/// and whether the key admits it (then it is in `WORK` if its other keys admit it too;
/// format 7).
pub(super) const CONC_WAITERS: TableDefinition<(&str, u64), &[u8]> =
    TableDefinition::new("concurrency_waiters");
/// concurrency key → (the limit its waiters were last admitted under, how many were
/// admitted), while the key has waiters (format 7).
pub(super) const CONC_KEYS: TableDefinition<&str, (u32, u32)> =
    TableDefinition::new("concurrency_keys");
/// agent id → its token reservations and uses of the last 24 hours (JSON; a pap extension
/// added to format 6 before its release, like the debounce tables).
pub(super) const BUDGET_TOKENS: TableDefinition<&str, &[u8]> =
    TableDefinition::new("budget_tokens");
/// packed invocation id (see `id_codec`) → Invocation (see `invocation_codec`).
pub(super) const INVOCATIONS: TableDefinition<&[u8], &[u8]> = TableDefinition::new("invocations");
/// (sequence number, packed invocation id) → (): every invocation in creation order, for
/// listings that page by cursor and stream in constant memory (format 8).
pub(super) const INVOCATION_ORDER: TableDefinition<(u64, &[u8]), ()> =
    TableDefinition::new("invocation_order");
/// (sequence number, packed invocation id) → (created at, approval deadline or `i64::MAX`):
/// exactly the invocations whose recorded status is `awaiting_approval`, so their count is
/// the table's length and a page of the oldest reads no other record (format 8).
pub(super) const AWAITING: TableDefinition<(u64, &[u8]), (i64, i64)> =
    TableDefinition::new("awaiting");
/// (the middle of the time to answer, packed invocation id) → (): the invocations awaiting
/// approval that have a deadline, by the moment half their time to answer is gone, so how
/// many waited past it is a range of keys (format 10).
pub(super) const APPROVAL_HALVES: TableDefinition<(i64, &[u8]), ()> =
    TableDefinition::new("approval_halves");
/// (trigger id, cancel key, sequence number) → packed invocation id: exactly the unfinished
/// invocations with a cancel key (a trigger's `cancel_on`), so an event that cancels reads
/// only its own (added to format 9 as the debounce tables were to 6: a write creates it in a
/// file from before it, and only writers read it).
pub(super) const CANCEL_KEYS: TableDefinition<(&str, &str, u64), &[u8]> =
    TableDefinition::new("cancel_keys");
/// event number (`event_seq`) → the event's JSON: each event's body once, however many
/// invocations it provoked (version 6).
pub(super) const EVENTS: TableDefinition<u64, &[u8]> = TableDefinition::new("events");
/// (approval deadline, packed invocation id) → (): finds expired approvals.
pub(super) const APPROVAL_DEADLINES: TableDefinition<(i64, &[u8]), ()> =
    TableDefinition::new("approval_deadlines");
/// Number of a block's first row → a block of consecutive ledger rows (event id, trigger id,
/// type, depth, outcome, invocation id, decision time): see `ledger_block` (version 5; before,
/// one row per (event id, trigger id) key).
pub(super) const LEDGER: TableDefinition<u64, &[u8]> = TableDefinition::new("ledger_blocks");
/// event id → an emitted event (JSON) not yet decided: a crash between an invocation's end
/// and the decision on what it emitted loses nothing.
pub(super) const OUTBOX: TableDefinition<&str, &[u8]> = TableDefinition::new("outbox");
/// (due at, packed invocation id) → (): every `queued` or `running` invocation, so `pap serve` finds
/// the work that is due without scanning every invocation ever made. A `running` one sorts
/// first (`i64::MIN`): it is always looked at, to find runners that died (version 3). A queued
/// one waiting for concurrency keys is here only while every key admits it (format 7), at its
/// due time or when a stopping run's slot frees, whichever is later.
pub(super) const WORK: TableDefinition<(i64, &[u8]), ()> = TableDefinition::new("work");
/// schedule id → the last fire time (ms) whose event was recorded: a restart never fires the
/// same time twice (version 3).
pub(super) const SCHEDULES: TableDefinition<&str, i64> = TableDefinition::new("schedules");
/// notification id → Notification (JSON) (version 4, as every table below up to AUDIT).
pub(super) const NOTIFICATIONS: TableDefinition<&str, &[u8]> =
    TableDefinition::new("notifications");
/// creation sequence → notification id, for listings in order.
pub(super) const NOTIFY_ORDER: TableDefinition<u64, &str> = TableDefinition::new("notify_order");
/// deduplication key → the latest notification carrying it (ANP 7.1).
pub(super) const NOTIFY_DEDUP: TableDefinition<&str, &str> = TableDefinition::new("notify_dedup");
/// (due at, job) → (): watchdog deadlines (`watchdog:<id>`) and sink deliveries
/// (`sink:<sink>:<id>`), so the timers find what is due without scanning every notification.
pub(super) const NOTIFY_DUE: TableDefinition<(i64, &str), ()> = TableDefinition::new("notify_due");
/// inbox id → InboxMessage (JSON); append-only, ids strictly increasing.
pub(super) const INBOX: TableDefinition<u64, &[u8]> = TableDefinition::new("inbox");
/// (agent id, sequence) → notification id: what waits for the agent's next invocation.
pub(super) const AGENT_QUEUE: TableDefinition<(&str, u64), &str> =
    TableDefinition::new("agent_queue");
/// session name → when it was opened (ms).
pub(super) const SESSIONS: TableDefinition<&str, i64> = TableDefinition::new("sessions");
/// session name → the agent bound to it: a human's post in the session reaches that agent at
/// its next turn. Part of format 6 since the MCP server; a file from before it gets it at its
/// first write, and readers treat it as empty until then.
pub(super) const SESSION_AGENTS: TableDefinition<&str, &str> =
    TableDefinition::new("session_agents");
/// ATP notification id (UUID) → the notification carrying the approval request.
pub(super) const ATP_INDEX: TableDefinition<&str, &str> = TableDefinition::new("atp_index");
/// sequence → AuditEntry (JSON); append-only.
pub(super) const AUDIT: TableDefinition<u64, &[u8]> = TableDefinition::new("audit");

/// Whether a file opened read-only has this pap's format, so a reader can use it as it is;
/// `false` when a writer has to create or migrate the tables first. A newer format is refused.
pub(super) fn is_current(db: &ReadOnlyDatabase, path: &Path) -> Result<bool> {
    let stored = (|| {
        let txn = db.begin_read().ok()?;
        let meta = txn.open_table(META).ok()?;
        meta.get("schema_version").ok()?.map(|v| v.value())
    })();
    match stored {
        Some(found) if found == SCHEMA_VERSION => Ok(true),
        Some(found) if super::migrate::migrates(found) => Ok(false),
        Some(found) => Err(version_error(path, found)),
        None => Ok(false),
    }
}

/// Creates the tables of a new file, and checks the version of an existing one (migrating a
/// released format older than this pap's).
pub(super) fn init(db: &Database, path: &Path) -> Result<()> {
    // The common case, an existing file of this version, needs only a read.
    let stored = (|| {
        let txn = db.begin_read().ok()?;
        let meta = txn.open_table(META).ok()?;
        meta.get("schema_version").ok()?.map(|v| v.value())
    })();
    if let Some(found) = stored {
        if found == SCHEMA_VERSION {
            return Ok(());
        }
        if super::migrate::migrates(found) {
            return super::migrate::to_current(db, path, found);
        }
        return Err(version_error(path, found));
    }
    let txn = db.begin_write().map_err(|e| redb_err(path, e))?;
    {
        let mut meta = txn.open_table(META).map_err(|e| redb_err(path, e))?;
        let found = meta
            .get("schema_version")
            .map_err(|e| redb_err(path, e))?
            .map(|v| v.value());
        match found {
            Some(v) if v == SCHEMA_VERSION => return Ok(()),
            Some(found) => return Err(version_error(path, found)),
            None => {
                meta.insert("schema_version", SCHEMA_VERSION)
                    .map_err(|e| redb_err(path, e))?;
            }
        }
        // Creating every table now lets read transactions open them unconditionally.
        macro_rules! create {
            ($($t:expr),*) => {$( txn.open_table($t).map_err(|e| redb_err(path, e))?; )*};
        }
        create!(CLAIMS, CLAIM_EXPIRY, THROTTLE, INVOCATIONS, EVENTS);
        create!(APPROVAL_DEADLINES, LEDGER, AUDIT, OUTBOX, WORK, SCHEDULES);
        create!(DEBOUNCE, DEBOUNCE_DUE, BUDGET_TOKENS);
        create!(CONC_HOLDERS, CONC_WAITERS, CONC_KEYS);
        create!(INVOCATION_ORDER, AWAITING, APPROVAL_HALVES, CANCEL_KEYS);
        create_notify_tables(&txn, path)?;
    }
    txn.commit().map_err(|e| redb_err(path, e))
}

/// The error for a file of another format: a development build's (before the first
/// released format) or a newer pap's.
fn version_error(path: &Path, found: u64) -> Error {
    if found < FIRST_RELEASED_VERSION {
        Error::DevelopmentFormat {
            path: path.to_path_buf(),
            found,
        }
    } else {
        Error::SchemaVersion {
            path: path.to_path_buf(),
            found,
            expected: SCHEMA_VERSION,
        }
    }
}

/// The notification and inbox tables.
fn create_notify_tables(txn: &redb::WriteTransaction, path: &Path) -> Result<()> {
    let e = |e| super::redb_err(path, e);
    txn.open_table(NOTIFICATIONS).map_err(e)?;
    txn.open_table(NOTIFY_ORDER).map_err(e)?;
    txn.open_table(NOTIFY_DEDUP).map_err(e)?;
    txn.open_table(NOTIFY_DUE).map_err(e)?;
    txn.open_table(INBOX).map_err(e)?;
    txn.open_table(AGENT_QUEUE).map_err(e)?;
    txn.open_table(SESSIONS).map_err(e)?;
    txn.open_table(SESSION_AGENTS).map_err(e)?;
    txn.open_table(ATP_INDEX).map_err(e)?;
    Ok(())
}
