//! The state on PostgreSQL: the second implementation of `pap_storage`, for several
//! `pap serve` nodes sharing one set of decisions (and for teams that keep their state in
//! PostgreSQL anyway). The only crate that imports the PostgreSQL driver; the composition
//! root (`pap`'s `composition`) opens it, from the URL `pap-database-url` reads.
//!
//! The driver is `postgres`, the blocking face of `tokio-postgres`: the engine's units of
//! work are synchronous closures run on plain or `spawn_blocking` threads, and each needs one
//! connection for its whole transaction, which a blocking client checked out of a small pool
//! gives by construction, independent of the caller's async runtime (pap builds several).
//! TLS is `tokio-postgres-rustls` with the aws-lc-rs provider pap uses elsewhere.
//!
//! Local files still live in the node's state dir (agents' process groups, serve's socket,
//! the inbox mark): `dir()` names it.

mod listen;
#[cfg(test)]
mod migrate_test;
mod outage;
mod pool;
mod read;
mod retry;
pub mod schema;
mod session;
mod tls;
mod transfer;

mod write;
mod write_concurrency;
mod write_notify;
mod write_retention;

use std::path::{Path, PathBuf};

use pap_domain::Status;
use pap_storage::{Commit, Error, ReadTx, Result, Stamp, Storage, WriteTx};
use session::Session;

pub use pap_database_url::{DatabaseUrl, Origin};

/// What goes wrong inside this module, before it becomes a `storage::Error`.
#[derive(Debug, thiserror::Error)]
pub enum PgError {
    /// Every pooled connection stayed in use: the same work may succeed in a moment.
    #[error("{0}")]
    Busy(String),
    #[error("{}", describe(.0))]
    Driver(#[from] postgres::Error),
    #[error("{0}")]
    Schema(String),
    #[error("{0}")]
    Setup(String),
}

impl PgError {
    fn into_storage(self, location: &str) -> Error {
        match self {
            PgError::Driver(e) => storage_error(location, e),
            PgError::Busy(reason) => Error::Unavailable {
                location: location.to_owned(),
                reason,
            },
            PgError::Schema(message) | PgError::Setup(message) => Error::Setup {
                location: location.to_owned(),
                message,
            },
        }
    }
}

/// A driver error in words: the server's message when there is one (the driver's own
/// `Display` says only "db error").
pub fn describe(e: &postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!("{}: {} ({})", db.severity(), db.message(), db.code().code()),
        None => {
            let mut text = e.to_string();
            let mut source = std::error::Error::source(e);
            while let Some(s) = source {
                text.push_str(": ");
                text.push_str(&s.to_string());
                source = s.source();
            }
            text
        }
    }
}

/// A driver error as a storage error: unavailable when the same work may succeed later (the
/// connection is gone, the server is shutting down, a deadlock or lock wait was cut short),
/// a backend failure otherwise.
pub(crate) fn storage_error(location: &str, e: postgres::Error) -> Error {
    use postgres::error::SqlState;
    let transient = match e.code() {
        // Without a server's code: the connection (closed, refused, cut, timed out) is
        // transient; a TLS failure, a missing password or a driver complaint is not (waiting
        // would not help, and it must not pass for an outage).
        None => e.is_closed() || connection_failed(&e),
        Some(code) => {
            let c = code.code();
            c.starts_with("08")
                || c.starts_with("57P")
                || c.starts_with("53")
                || *code == SqlState::T_R_DEADLOCK_DETECTED
                || *code == SqlState::T_R_SERIALIZATION_FAILURE
                || *code == SqlState::LOCK_NOT_AVAILABLE
                || *code == SqlState::QUERY_CANCELED
                || *code == SqlState::IDLE_IN_TRANSACTION_SESSION_TIMEOUT
                || *code == SqlState::READ_ONLY_SQL_TRANSACTION
        }
    };
    if transient {
        Error::Unavailable {
            location: location.to_owned(),
            reason: describe(&e),
        }
    } else {
        Error::Backend {
            path: PathBuf::from(location),
            source: Box::new(e),
        }
    }
}

/// Whether a driver error without a server code is the network or the server going away.
fn connection_failed(e: &postgres::Error) -> bool {
    use std::io::ErrorKind::*;
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        if let Some(io) = s.downcast_ref::<std::io::Error>() {
            return matches!(
                io.kind(),
                NotFound
                    | ConnectionRefused
                    | ConnectionReset
                    | ConnectionAborted
                    | NotConnected
                    | BrokenPipe
                    | TimedOut
                    | UnexpectedEof
                    | HostUnreachable
                    | NetworkUnreachable
                    | AddrNotAvailable
            );
        }
        source = s.source();
    }
    // The driver's own timeouts and closed connections say so in words only.
    let text = e.to_string();
    text.contains("timeout") || text.contains("connection closed")
}

/// An invocation's status as stored in its column (its JSON name).
fn status_name(status: Status) -> String {
    match serde_json::to_value(status) {
        Ok(serde_json::Value::String(s)) => s,
        _ => format!("{status:?}"),
    }
}

/// How often each process measures the database's clock against its own.
const CLOCK_LOOK: std::time::Duration = std::time::Duration::from_secs(60);

/// How many connections one process keeps at most.
const POOL_SIZE: usize = 16;

pub struct PgStore {
    pool: pool::Pool,
    outage: outage::Outage,
    /// The database's clock minus this host's (ms), and when it was last measured.
    offset: std::sync::Arc<std::sync::atomic::AtomicI64>,
    measured: std::sync::Mutex<Option<std::time::Instant>>,
    shown: String,
    state_dir: PathBuf,
}

impl PgStore {
    /// The store at `url`, checked to have this pap's schema; local files go in `state_dir`.
    pub fn open(url: &DatabaseUrl, state_dir: &Path) -> Result<PgStore> {
        // Leases name this state dir's node, not only this host (see `liveness`). Not in the
        // library's own unit tests, where stores of many state dirs share one process and
        // the contract tests give leases their node explicitly.
        if !cfg!(test) {
            pap_domain::liveness::scope_to_state(state_dir);
        }
        let pool = pool::Pool::new(url, POOL_SIZE).map_err(|e| e.into_storage(&url.shown))?;
        outside_async(|| {
            let mut conn = pool.get()?;
            schema::check(&mut conn.conn().client)
        })
        .map_err(|e| e.into_storage(&url.shown))?;
        let store = PgStore {
            pool,
            outage: outage::Outage::default(),
            offset: Default::default(),
            measured: std::sync::Mutex::new(None),
            shown: url.shown.clone(),
            state_dir: state_dir.to_path_buf(),
        };
        // Decisions made right after the open already use the database's clock.
        outside_async(|| {
            if let Ok(mut conn) = store.pool.get() {
                store.measure_clock(&mut conn);
            }
        });
        Ok(store)
    }

    /// Applies this pap's missing schema migrations (`pap store migrate`).
    pub fn migrate(url: &DatabaseUrl, applied_by: &str) -> Result<schema::Migrated> {
        let pool = pool::Pool::new(url, 1).map_err(|e| e.into_storage(&url.shown))?;
        let mut client = pool.connect().map_err(|e| e.into_storage(&url.shown))?;
        outside_async(|| schema::migrate(&mut client, applied_by))
            .map_err(|e| e.into_storage(&url.shown))
    }

    /// Measures the database's clock against this host's when the last look is older than
    /// [`CLOCK_LOOK`]: one query, its error at most half a round trip.
    fn measure_clock(&self, conn: &mut pool::Pooled<'_>) {
        {
            let mut measured = self.measured.lock().unwrap_or_else(|p| p.into_inner());
            if measured.is_some_and(|at| at.elapsed() < CLOCK_LOOK) {
                return;
            }
            *measured = Some(std::time::Instant::now());
        }
        // The offset is between this host's clock and the database's: the system's time is
        // the one measured.
        #[allow(clippy::disallowed_methods)]
        let local = || jiff::Timestamp::now().as_millisecond();
        let before = local();
        let found = conn.conn().client.query_one(
            "SELECT (extract(epoch FROM clock_timestamp()) * 1000)::int8",
            &[],
        );
        let after = local();
        match found {
            Ok(row) => {
                let database: i64 = row.get(0);
                let offset = database - (before + after) / 2;
                let old = self
                    .offset
                    .swap(offset, std::sync::atomic::Ordering::Relaxed);
                if (offset - old).abs() > 1_000 {
                    tracing::info!(
                        database = %self.shown,
                        offset_ms = offset,
                        "deciding on the database's clock, {offset} ms from this host's"
                    );
                }
            }
            // The next checkout looks again.
            Err(_) => *self.measured.lock().unwrap_or_else(|p| p.into_inner()) = None,
        }
    }

    /// A pooled connection; while the database is known down, a failure at once.
    fn checkout(&self) -> Result<pool::Pooled<'_>> {
        if let Some(why) = self.outage.wait() {
            return Err(Error::Unavailable {
                location: self.shown.clone(),
                reason: why,
            });
        }
        // Only a new connection tells that a down database is back.
        if self.outage.is_down() {
            self.pool.drop_idle();
        }
        match self.pool.get() {
            Ok(mut conn) => {
                self.outage.reached(&self.shown);
                self.measure_clock(&mut conn);
                Ok(conn)
            }
            Err(e) => {
                let e = e.into_storage(&self.shown);
                if let Error::Unavailable { reason, .. } = &e {
                    self.outage.failed(&self.shown, reason);
                }
                Err(e)
            }
        }
    }
}

/// Runs blocking database work from any thread: on a thread that drives async tasks, the
/// runtime is told the thread blocks (the driver runs its own small runtime, which may not
/// be entered from inside another).
fn outside_async<T>(work: impl FnOnce() -> T) -> T {
    if tokio::runtime::Handle::try_current().is_ok() {
        tokio::task::block_in_place(work)
    } else {
        work()
    }
}

impl PgStore {
    /// One write transaction on a pooled connection, committed when `f` returns `Ok`. When
    /// the server rolls it back for a lock conflict, `f` runs again in a new transaction,
    /// a few times at most, after a short jittered pause (see `retry`).
    fn write_session(&self, f: &mut dyn FnMut(&mut write::PgWrite) -> Result<()>) -> Result<()> {
        outside_async(|| {
            let mut tries = 0;
            loop {
                tries += 1;
                let (conflict, e) = match self.write_once(f) {
                    Ok(()) => return Ok(()),
                    Err((Some(conflict), e)) => (conflict, e),
                    Err((None, e)) => return Err(e),
                };
                if tries >= retry::TRIES {
                    return Err(Error::Contended {
                        location: self.shown.clone(),
                        reason: format!("{} ({})", conflict.words(), conflict.code()),
                        tries,
                    });
                }
                tracing::info!(
                    sqlstate = conflict.code(),
                    run = tries + 1,
                    of = retry::TRIES,
                    error = %e,
                    "the database rolled a transaction back for a lock conflict; running it again"
                );
                // The connection went back to the pool with the rolled-back transaction.
                std::thread::sleep(retry::pause(tries));
            }
        })
    }

    /// One run of [`write_session`](Self::write_session): its error, with the lock conflict
    /// behind it when there was one.
    fn write_once(
        &self,
        f: &mut dyn FnMut(&mut write::PgWrite) -> Result<()>,
    ) -> std::result::Result<(), (Option<retry::Conflict>, Error)> {
        let mut pooled = self.checkout().map_err(|e| (None, e))?;
        let pool::Conn { client, statements } = pooled.conn();
        let tx = client
            .transaction()
            .map_err(|e| (None, storage_error(&self.shown, e)))?;
        let mut w = write::PgWrite::new(Session::new(tx, statements, &self.shown));
        let ran = f(&mut w).and_then(|()| {
            // Other nodes hear of it (delivered only if this commits, after it).
            let channels: Vec<&str> = [
                (w.work_freed.get(), listen::WORK_CHANNEL),
                (w.inbox_appended.is_some(), listen::INBOX_CHANNEL),
                (w.notifications_changed, listen::NOTIFICATION_CHANNEL),
            ]
            .into_iter()
            .filter_map(|(sent, channel)| sent.then_some(channel))
            .collect();
            if !channels.is_empty() {
                w.s.execute(
                    "SELECT pg_notify(c, '') FROM unnest($1::text[]) AS c",
                    &[&channels],
                )?;
            }
            Ok(())
        });
        if let Err(e) = ran {
            return Err((w.s.conflict(), e));
        }
        let (appended, changed) = (w.inbox_appended, w.notifications_changed);
        // A conflict reported at the commit (a serialization failure) rolled it back too;
        // any other failure there leaves the outcome unknown, and is not run again.
        w.s.into_transaction()
            .commit()
            .map_err(|e| (retry::Conflict::of(&e), storage_error(&self.shown, e)))?;
        if let Some(mark) = appended {
            pap_storage::inbox_mark::write(&self.state_dir, mark);
        }
        if changed {
            pap_storage::notification_mark::write(&self.state_dir);
        }
        Ok(())
    }

    /// One consistent snapshot (REPEATABLE READ, READ ONLY) on a pooled connection.
    fn read_session<T>(&self, f: impl FnOnce(&read::PgRead) -> Result<T>) -> Result<T> {
        outside_async(|| {
            let mut pooled = self.checkout()?;
            let pool::Conn { client, statements } = pooled.conn();
            let tx = client
                .build_transaction()
                .isolation_level(postgres::IsolationLevel::RepeatableRead)
                .read_only(true)
                .start()
                .map_err(|e| storage_error(&self.shown, e))?;
            let r = read::PgRead {
                s: Session::new(tx, statements, &self.shown),
            };
            let value = f(&r)?;
            // Nothing to keep: ending a read-only transaction either way is the same.
            r.s.into_transaction()
                .commit()
                .map_err(|e| storage_error(&self.shown, e))?;
            Ok(value)
        })
    }
}

impl Storage for PgStore {
    fn write_dyn(
        &self,
        commit: Commit,
        f: &mut dyn FnMut(&mut dyn WriteTx) -> Result<()>,
    ) -> Result<()> {
        // Every commit is durable when it returns (PostgreSQL's own group commit shares the
        // WAL flush between concurrent transactions), so the durable kinds are the same. A
        // background one does not wait for its WAL flush (the server flushes it within
        // `wal_writer_delay`; a crash of the server before may lose it, never corrupt).
        self.write_session(&mut |w| {
            if commit == Commit::Background {
                w.s.execute("SET LOCAL synchronous_commit TO off", &[])?;
            }
            f(w)
        })
    }

    fn read_dyn(&self, f: &mut dyn FnMut(&dyn ReadTx) -> Result<()>) -> Result<()> {
        self.read_session(|r| f(r))
    }

    fn location(&self) -> PathBuf {
        PathBuf::from(&self.shown)
    }

    fn dir(&self) -> Option<PathBuf> {
        Some(self.state_dir.clone())
    }

    fn stamp(&self) -> Option<Stamp> {
        None
    }

    fn export(
        &self,
        each: &mut dyn FnMut(pap_storage::transfer::Item) -> Result<()>,
    ) -> Result<()> {
        self.read_session(|r| r.export(each))
    }

    fn import(&self, items: &[pap_storage::transfer::Item]) -> Result<()> {
        self.write_session(&mut |w| w.import(items))
    }

    fn is_empty(&self) -> Result<bool> {
        self.read_session(|r| transfer::holds_nothing(&r.s))
    }

    fn table_sizes(&self) -> Result<Vec<pap_storage::space::TableSize>> {
        self.read_session(|r| {
            // reltuples is -1 for a table never analysed: then it is shown as 0.
            let rows = r.s.query(
                "SELECT c.relname::text, greatest(c.reltuples, 0)::bigint, \
                 pg_total_relation_size(c.oid) FROM pg_class c \
                 JOIN pg_namespace n ON n.oid = c.relnamespace \
                 WHERE c.relkind = 'r' AND c.relname LIKE 'pap\\_%' \
                 AND n.nspname = current_schema() \
                 ORDER BY pg_total_relation_size(c.oid) DESC, c.relname",
                &[],
            )?;
            Ok(rows
                .iter()
                .map(|r| pap_storage::space::TableSize {
                    name: r.get(0),
                    rows: session::unsigned(r.get(1)),
                    bytes: session::unsigned(r.get(2)),
                })
                .collect())
        })
    }

    fn kind(&self) -> &'static str {
        "postgresql"
    }
    fn shared(&self) -> bool {
        true
    }

    fn listen(
        &self,
        on: Box<dyn Fn(pap_storage::Change) + Send>,
    ) -> Option<pap_storage::Listening> {
        match listen::start(self.pool.dialer(), on) {
            Ok(listening) => Some(Box::new(listening)),
            Err(e) => {
                tracing::warn!(error = %e, "cannot start listening for other nodes' changes");
                None
            }
        }
    }

    fn heartbeat(&self, node: &pap_storage::Node) -> Result<()> {
        self.write_session(&mut |w| {
            w.s.execute(
                "INSERT INTO pap_nodes (node_id, host, pid, version, started_at, last_seen, listen) \
                 VALUES ($1, $2, $3, $4, $5, (extract(epoch FROM clock_timestamp()) * 1000)::int8, $6) \
                 ON CONFLICT (node_id) DO UPDATE SET host = EXCLUDED.host, pid = EXCLUDED.pid, \
                 version = EXCLUDED.version, started_at = EXCLUDED.started_at, \
                 last_seen = EXCLUDED.last_seen, listen = EXCLUDED.listen",
                &[
                    &node.id,
                    &node.host,
                    &i32::try_from(node.pid).unwrap_or(i32::MAX),
                    &node.version,
                    &node.started_at,
                    &node.listen,
                ],
            )?;
            Ok(())
        })
    }

    fn node_stopped(&self, id: &str) -> Result<()> {
        self.write_session(&mut |w| {
            w.s.execute("DELETE FROM pap_nodes WHERE node_id = $1", &[&id])?;
            Ok(())
        })
    }

    fn nodes(&self) -> Result<Vec<pap_storage::Node>> {
        self.read_session(|r| {
            Ok(r.s
                .query(
                    "SELECT node_id, host, pid, version, started_at, last_seen, listen \
                     FROM pap_nodes ORDER BY node_id",
                    &[],
                )?
                .iter()
                .map(|row| pap_storage::Node {
                    id: row.get(0),
                    host: row.get(1),
                    pid: u32::try_from(row.get::<_, i32>(2)).unwrap_or(0),
                    version: row.get(3),
                    started_at: row.get(4),
                    last_seen: row.get(5),
                    listen: row.get(6),
                })
                .collect())
        })
    }

    fn clock_offset(&self) -> Option<std::sync::Arc<std::sync::atomic::AtomicI64>> {
        Some(self.offset.clone())
    }

    fn bytes(&self) -> Result<Option<u64>> {
        outside_async(|| {
            let mut pooled = self.checkout()?;
            let size: i64 = pooled
                .conn()
                .client
                .query_one("SELECT pg_database_size(current_database())", &[])
                .map_err(|e| storage_error(&self.shown, e))?
                .get(0);
            Ok(Some(u64::try_from(size).unwrap_or(0)))
        })
    }
}

/// A PostgreSQL server for tests, started on loopback (the `testing` feature: the suite's
/// builds turn it on, release builds never have it).
#[cfg(any(test, feature = "testing"))]
pub mod testing;
