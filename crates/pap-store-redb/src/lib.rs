//! pap's store on one machine: the durable state in one redb file (`<state>/state.redb`),
//! behind the storage interface (`pap-storage`). The only crate that imports redb; the
//! composition root (`pap`'s `composition`) opens it.
//!
//! redb allows one writing process at a time. A pap process opens the file once and keeps it
//! between transactions, never forcing a commit's syncs on anyone else; a process that needs
//! the file while another has it asks for it (see `handle`), and the holder gives it up
//! between two transactions. So parallel `pap` processes on one state dir take turns
//! transaction by transaction, and a process that finds the file held waits with bounded
//! backoff instead of failing with `DatabaseAlreadyOpen`. Reading opens the file read-only,
//! which never syncs the disk.

mod check;
mod group;
mod handle;
mod id_codec;
mod invocation_codec;
mod ledger_block;
mod migrate;
mod notify_counts;
mod read;
mod read_index;
mod space;
mod tables;
mod time_count;
mod transfer;
mod tx;
mod tx_claims;
mod tx_concurrency;
mod tx_notify;
mod tx_retention;
mod varint;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use redb::backends::InMemoryBackend;
use redb::{Database, DatabaseError};

use handle::{Open, Shared};

pub use check::CheckReport;
pub use handle::release_all;
pub use pap_domain::*;
pub use pap_storage::{Claimed, Error, Result, RowRef, Stamp};
use pap_storage::{Commit, ReadTx, Storage, WriteTx};
pub use tx::{Reader, Tx};
pub use tx_notify::NotifyReader;

/// How long to wait for another process to release the store, unless `PAP_LOCK_TIMEOUT`
/// (seconds) says otherwise.
pub(crate) const DEFAULT_LOCK_TIMEOUT: Duration = Duration::from_secs(120);

/// The page cache of a process that only reads (`pap status`, the listings): they read
/// each page about once, so a large cache would only keep every page a long listing touched
/// (its memory would grow with the store). At 16 MiB a 150,000-row `pap invocations --json`
/// peaked at 64 MB and took as long as at 4 MiB (47 MB), in a debug build. So it stays fixed
/// whatever `store_cache` says (a writer's cache is that setting, see
/// [`pap_storage::DEFAULT_STORE_CACHE`]), and only a smaller `store_cache` lowers it.
const READER_CACHE_BYTES: usize = 4 * 1024 * 1024;

enum Backing {
    File(PathBuf),
    Memory,
}

pub use pap_storage::inbox_mark::{INBOX_MARK_FILE, inbox_mark_path};

/// A handle on the store: one per process (see the module's comment on how it is shared).
pub struct Store {
    backing: Backing,
    shared: Arc<Shared>,
    lock_timeout: Duration,
    /// Said once per process, so a long wait is not silent.
    told_waiting: AtomicBool,
    /// The directory of a dry run's private copy, removed on drop.
    scratch: Option<tempfile::TempDir>,
    /// The most memory redb's page cache may take in a handle that writes (it fills as pages
    /// are read and written): pap.yaml's `store_cache`.
    cache_bytes: usize,
}

impl Drop for Store {
    fn drop(&mut self) {
        // Closed cleanly before the scratch directory (if any) goes.
        self.shared.close();
    }
}

impl Store {
    /// The store in `state_dir`, created (with its directory) if missing, schema checked,
    /// with the default page cache.
    pub fn open(state_dir: &Path) -> Result<Store> {
        Store::open_with_cache(state_dir, pap_storage::DEFAULT_STORE_CACHE)
    }

    /// As [`Store::open`], with a page cache of `cache_bytes` when writing.
    pub fn open_with_cache(state_dir: &Path, cache_bytes: u64) -> Result<Store> {
        std::fs::create_dir_all(state_dir).map_err(|source| Error::Dir {
            path: state_dir.to_path_buf(),
            source,
        })?;
        let path = state_dir.join("state.redb");
        let store =
            Store::new(Backing::File(path.clone()), Some(want_path(&path))).with_cache(cache_bytes);
        store.read(|_| Ok(()))?;
        Ok(store)
    }

    /// As [`Store::open`], for a process that lives long and writes seldom (`pap mcp`): its
    /// handle is closed after every transaction instead of being kept until another process
    /// asks for it, so it never holds the file between two of its requests. Each write then
    /// pays the open's syncs, which a person's pace of writing affords.
    pub fn open_transient(state_dir: &Path, cache_bytes: u64) -> Result<Store> {
        let store = Store::open_with_cache(state_dir, cache_bytes)?;
        store.shared.close_after_each_transaction();
        Ok(store)
    }

    /// The store for `--dry-run`: a private copy of the real one when it exists (taken while
    /// holding its lock, so it is consistent), else an empty in-memory store. A dry run
    /// decides against real state and sees its own decisions, yet never changes the original.
    pub fn open_for_dry_run(state_dir: &Path, cache_bytes: u64) -> Result<Store> {
        let original = state_dir.join("state.redb");
        if !original.exists() {
            return Store::in_memory();
        }
        let scratch = tempfile::Builder::new()
            .prefix("pap-dry-run-")
            .tempdir()
            .map_err(|source| Error::Dir {
                path: std::env::temp_dir(),
                source,
            })?;
        let copy = scratch.path().join("state.redb");
        let holder = Store::new(Backing::File(original.clone()), Some(want_path(&original)));
        holder.with_reader(|_| {
            // Held open (no writer can commit) while copying; dropped right after.
            std::fs::copy(&original, &copy).map_err(|source| Error::Dir {
                path: copy.clone(),
                source,
            })?;
            Ok(())
        })?;
        drop(holder);
        // Private: no other process asks for it, so its handle is kept for good.
        let mut store = Store::new(Backing::File(copy), None).with_cache(cache_bytes);
        store.scratch = Some(scratch);
        store.read(|_| Ok(()))?;
        Ok(store)
    }

    /// An empty store in memory (dry runs, tests).
    pub fn in_memory() -> Result<Store> {
        let store = Store::new(Backing::Memory, None);
        store.read(|_| Ok(()))?;
        Ok(store)
    }

    /// An empty store in memory, as the engine holds one (its modules' unit tests: they test
    /// against the real store, and the store is below them; the `test-support` feature).
    #[cfg(any(test, feature = "test-support"))]
    pub fn memory_for_tests() -> std::sync::Arc<dyn pap_storage::Storage> {
        std::sync::Arc::new(Store::in_memory().expect("a store in memory"))
    }

    /// Opens the existing store read-only in spirit: `None` when there is none yet, so
    /// listing commands never create a state dir.
    pub fn open_existing(state_dir: &Path, cache_bytes: u64) -> Result<Option<Store>> {
        if state_dir.join("state.redb").exists() {
            Store::open_with_cache(state_dir, cache_bytes).map(Some)
        } else {
            Ok(None)
        }
    }

    /// A new redb file at `path` (a copy of a state goes there); refused if it exists.
    pub fn create_file(path: &Path) -> Result<Store> {
        if path.exists() {
            return Err(Error::CopyTargetInUse {
                location: path.display().to_string(),
                found: "exists",
                wants: "a new file",
            });
        }
        let store = Store::new(Backing::File(path.to_path_buf()), None);
        store.write(|_| Ok(()))?;
        Ok(store)
    }

    /// `want`: the want-file when other processes share the file (see `handle`).
    fn new(backing: Backing, want: Option<PathBuf>) -> Store {
        let lock_timeout = std::env::var("PAP_LOCK_TIMEOUT")
            .ok()
            .and_then(|s| s.parse::<f64>().ok())
            .filter(|s| s.is_finite() && *s >= 0.0)
            .map_or(DEFAULT_LOCK_TIMEOUT, Duration::from_secs_f64);
        Store {
            backing,
            shared: Shared::new(want),
            lock_timeout,
            told_waiting: AtomicBool::new(false),
            scratch: None,
            cache_bytes: usize::try_from(pap_storage::DEFAULT_STORE_CACHE).unwrap_or(usize::MAX),
        }
    }

    fn with_cache(mut self, bytes: u64) -> Store {
        self.cache_bytes = usize::try_from(bytes).unwrap_or(usize::MAX);
        self
    }

    /// The directory of a file store (`None` in memory).
    pub fn dir(&self) -> Option<PathBuf> {
        match &self.backing {
            Backing::File(p) => p.parent().map(Path::to_path_buf),
            Backing::Memory => None,
        }
    }

    pub fn path(&self) -> PathBuf {
        match &self.backing {
            Backing::File(p) => p.clone(),
            Backing::Memory => PathBuf::from("(memory)"),
        }
    }

    /// A stamp of the file that changes when another process commits (its modification time,
    /// size and inode), for a long-lived reader that should open the file only when there is
    /// something new: each open by a reader makes a writer give the file up. A stamp taken
    /// within [`Stamp::SETTLING`] of a change is never trusted to be the same, since the
    /// file system's clock can put two commits in one tick. `None` in memory.
    pub fn stamp(&self) -> Option<Stamp> {
        use std::os::unix::fs::MetadataExt;
        let Backing::File(path) = &self.backing else {
            return None;
        };
        let m = std::fs::metadata(path).ok()?;
        let modified = m.modified().ok()?;
        let recent = modified.elapsed().map_or(true, |age| age < Stamp::SETTLING);
        Some(Stamp {
            modified,
            len: m.len(),
            inode: m.ino(),
            recent,
        })
    }

    /// Runs `f` in one write transaction and commits it (durably) when `f` returns `Ok`.
    pub fn write<T>(&self, f: impl FnOnce(&mut Tx) -> Result<T>) -> Result<T> {
        self.commit(f, true).map(|(value, _)| value)
    }

    /// Runs `f` in one write transaction and commits it, `durable`ly (with a sync) or not;
    /// returns `f`'s value and the commit's number once committed. Every commit counts in
    /// `committed`; a durable one makes every earlier one durable too.
    fn commit<T>(&self, f: impl FnOnce(&mut Tx) -> Result<T>, durable: bool) -> Result<(T, u64)> {
        use std::sync::atomic::Ordering::SeqCst;
        let path = self.path();
        self.with_writer(|db| {
            let mut txn = db.begin_write().map_err(|e| redb_err(&path, e))?;
            if !durable {
                txn.set_durability(redb::Durability::None)
                    .map_err(|e| Error::NotDurable {
                        path: path.clone(),
                        what: e.to_string(),
                    })?;
            }
            let (value, appended, changed) = {
                let mut tx = Tx::open(&txn, &path)?;
                let value = f(&mut tx)?;
                tx.finish()?;
                (value, tx.inbox_appended, tx.notifications_changed)
            };
            txn.commit().map_err(|e| redb_err(&path, e))?;
            if let Backing::File(file) = &self.backing {
                let dir = file.parent().unwrap_or(Path::new("."));
                if let Some(mark) = appended {
                    pap_storage::inbox_mark::write(dir, mark);
                }
                if changed {
                    pap_storage::notification_mark::write(dir);
                }
            }
            let n = self.shared.committed.fetch_add(1, SeqCst) + 1;
            if durable {
                self.shared.durable.fetch_max(n, SeqCst);
            }
            Ok((value, n))
        })
    }

    /// Runs `f` on a consistent snapshot of what is durable: a commit of this process that
    /// waits for its sync (see `group`) is made durable first, so nothing is read, and acted
    /// on, that a crash could still take back.
    pub fn read<T>(&self, f: impl FnOnce(&Reader) -> Result<T>) -> Result<T> {
        self.sync_pending();
        let path = self.path();
        self.with_reader(|open| {
            let txn = open.begin_read().map_err(|e| redb_err(&path, e))?;
            let reader = Reader::open(&txn, &path)?;
            f(&reader)
        })
    }

    /// Runs `f` with the file open for writing (opening it so first if needed); no other
    /// process can have it meanwhile (redb's integrity check needs that too).
    fn with_writer<T>(&self, f: impl FnOnce(&mut Database) -> Result<T>) -> Result<T> {
        let mut guard = self.shared.lock();
        if !matches!(guard.slot.open, Some(Open::Writer(_))) {
            // A read-only handle of ours would keep our own writer out.
            guard.slot.open = None;
            let open = self.acquire(true)?;
            guard.set(open);
        }
        let Some(Open::Writer(db)) = guard.slot.open.as_mut() else {
            unreachable!("a writer was just opened")
        };
        let result = quietly(|| f(db)).unwrap_or_else(|panic| Err(damaged(&self.path(), panic)));
        if matches!(result, Err(Error::Damaged { .. })) {
            // Whatever state redb is in, the next try starts from the file.
            self.shared.close_handle(&mut guard.slot);
        }
        result
    }

    /// Runs `f` with the file open at least for reading: the handle this process has, or a
    /// read-only one, which other readers share and which never syncs the disk.
    fn with_reader<T>(&self, f: impl FnOnce(&Open) -> Result<T>) -> Result<T> {
        let mut guard = self.shared.lock();
        if guard.slot.open.is_none() {
            let open = self.acquire(false)?;
            guard.set(open);
        }
        let open = guard.slot.open.as_ref().expect("opened");
        let result = quietly(|| f(open)).unwrap_or_else(|panic| Err(damaged(&self.path(), panic)));
        if matches!(result, Err(Error::Damaged { .. })) {
            self.shared.close_handle(&mut guard.slot);
        }
        result
    }

    /// Opens the database, for writing or (when `writer` is false and the file allows it)
    /// read-only, waiting while another process has it: with backoff, and holding a ticket
    /// that asks the holder to give the file up.
    fn acquire(&self, mut writer: bool) -> Result<Open> {
        let path = match &self.backing {
            Backing::Memory => {
                let db = Database::builder()
                    .create_with_backend(InMemoryBackend::new())
                    .map_err(|e| redb_err(Path::new("(memory)"), e))?;
                tables::init(&db, Path::new("(memory)"))?;
                return Ok(Open::Writer(db));
            }
            Backing::File(path) => path,
        };
        if !path.exists() {
            create_new(path)?;
        }
        let started = Instant::now();
        let mut pause = Duration::from_millis(1);
        let mut ticket = None;
        loop {
            // A store is only ever created whole (see `create_new`), so an empty file was
            // truncated: opening it would silently start afresh and forget every claim.
            if std::fs::metadata(path).is_ok_and(|m| m.len() == 0) {
                return Err(damaged(path, "the file is empty (0 bytes)".into()));
            }
            let opened = quietly(|| {
                let mut builder = Database::builder();
                builder.set_cache_size(if writer {
                    pages_within(self.cache_bytes)
                } else {
                    READER_CACHE_BYTES.min(self.cache_bytes)
                });
                if writer {
                    builder.open(path).map(Open::Writer)
                } else {
                    builder.open_read_only(path).map(Open::Reader)
                }
            })
            .map_err(|panic| damaged(path, panic))?;
            match opened {
                Ok(Open::Writer(db)) => {
                    quietly(|| tables::init(&db, path)).map_err(|panic| damaged(path, panic))??;
                    return Ok(Open::Writer(db));
                }
                Ok(Open::Reader(db)) => {
                    let current = quietly(|| tables::is_current(&db, path))
                        .map_err(|panic| damaged(path, panic))??;
                    if current {
                        return Ok(Open::Reader(db));
                    }
                    // An older format to migrate (or a newer one to refuse): a writer's job.
                    writer = true;
                }
                // The last writer did not close the file (it was killed): only a writer
                // repairs it.
                Err(DatabaseError::RepairAborted) if !writer => writer = true,
                Err(DatabaseError::DatabaseAlreadyOpen) => {
                    let waited = started.elapsed();
                    if waited >= self.lock_timeout {
                        return Err(Error::Locked {
                            path: path.clone(),
                            waited,
                        });
                    }
                    if ticket.is_none() {
                        ticket = self.shared.want().and_then(|w| w.ticket());
                    }
                    if waited > Duration::from_secs(2)
                        && !self.told_waiting.swap(true, Ordering::Relaxed)
                    {
                        pap_text::say!(
                            "pap: waiting for the state store {} (in use by another pap process)",
                            path.display()
                        );
                    }
                    // Real time, even under a fake clock: this waits for another process.
                    std::thread::sleep(pause.min(self.lock_timeout.saturating_sub(waited)));
                    pause = (pause * 2).min(MAX_PAUSE) + jitter();
                }
                Err(e) => return Err(redb_err(path, e)),
            }
        }
    }
}

/// What of `store_cache` redb may fill with pages: redb counts only the pages' bytes, and each
/// cached page also costs its cache entry and queue slot and the allocator's header, about 100
/// bytes a 4 KiB page (6 MB of a full 256 MiB cache, more while its tables grow). A 32nd is
/// kept for that, so the setting bounds the memory the cache takes, not only its pages: with
/// the whole setting for pages, 10M decisions peaked 0.8 MB over `store_cache` + 64 MB.
fn pages_within(cache_bytes: usize) -> usize {
    cache_bytes - cache_bytes / 32
}

/// The longest pause between two tries to open a file another process holds: the holder
/// gives it up within a few milliseconds of being asked.
const MAX_PAUSE: Duration = Duration::from_millis(8);

/// `<state>/state.want`, beside the store (see `handle`).
fn want_path(store: &Path) -> PathBuf {
    store.with_file_name("state.want")
}

/// A few milliseconds of spread, so waiting processes do not retry in lockstep.
fn jitter() -> Duration {
    // Noise for the spread, not a time.
    #[allow(clippy::disallowed_methods)]
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    Duration::from_micros(u64::from((nanos ^ std::process::id()) % 1000))
}

fn redb_err(path: &Path, e: impl Into<redb::Error>) -> Error {
    match e.into() {
        redb::Error::Corrupted(what) => damaged(path, what),
        // What the file holds is not what redb wrote (another file in its place, its start
        // overwritten, cut short): the file is damaged, not the disk failing.
        redb::Error::Io(io) if io.kind() == std::io::ErrorKind::InvalidData => {
            let what = io.to_string();
            damaged(
                path,
                if what.contains("magic number") {
                    "it is not a redb file (its first bytes are not redb's magic number)".into()
                } else {
                    what
                },
            )
        }
        redb::Error::Io(io) if io.kind() == std::io::ErrorKind::UnexpectedEof => {
            damaged(path, format!("it ends too soon ({io})"))
        }
        source => Error::Backend {
            path: path.to_path_buf(),
            source: Box::new(source),
        },
    }
}

fn damaged(path: &Path, what: String) -> Error {
    Error::Damaged {
        path: path.to_path_buf(),
        what: pap_text::text::clip(&what, 300),
    }
}

/// redb may panic on a damaged file: that is an error about the file, not a bug in pap. A
/// panic anywhere else (pap's own code inside a transaction) is a bug and unwinds as one.
fn quietly<T>(f: impl FnOnce() -> T) -> std::result::Result<T, String> {
    pap_text::panic_report::quietly(f).map_err(|caught| {
        if !caught.inside("/redb-") {
            caught.resume();
        }
        // Rust's wording for an `unreachable!` in redb would read as a bug of pap's; here
        // it is a page that does not say what redb expects.
        let what = caught
            .message
            .strip_prefix("internal error: ")
            .unwrap_or(&caught.message);
        format!("the storage engine stopped on an inconsistent page ({what})")
    })
}

/// Creates the store whole: initialised in a private file beside it, then linked into place
/// (`link` fails if another process got there first, and then its file is used). So
/// `state.redb` never exists half made, and an empty one can only be a damaged one.
fn create_new(path: &Path) -> Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let io = |source: std::io::Error| Error::Dir {
        path: dir.to_path_buf(),
        source,
    };
    // Mode 0666 less the umask, as a file redb created itself would have (tempfile's 0600
    // would lock out the other users of a shared state dir).
    let fresh = tempfile::Builder::new()
        .prefix(".state.redb.new-")
        .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o666))
        .tempfile_in(dir)
        .map_err(io)?;
    {
        let db = Database::builder()
            .create(fresh.path())
            .map_err(|e| redb_err(fresh.path(), e))?;
        tables::init(&db, fresh.path())?;
    }
    match std::fs::hard_link(fresh.path(), path) {
        Ok(()) => {
            std::fs::File::open(dir)
                .and_then(|d| d.sync_all())
                .map_err(io)?;
            Ok(())
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(io(e)),
    }
}

/// The redb store as the storage interface: the transactions ([`Tx`], [`Reader`]) implement
/// its operations where their tables are kept (`tx`, `tx_claims`, `tx_notify`,
/// `tx_retention`, `read`).
impl Storage for Store {
    fn write_dyn(
        &self,
        commit: Commit,
        f: &mut dyn FnMut(&mut dyn WriteTx) -> Result<()>,
    ) -> Result<()> {
        match commit {
            Commit::Durable | Commit::Background => Store::write(self, |tx| f(tx)),
            Commit::Grouped => Store::write_grouped(self, |tx| f(tx)),
        }
    }

    fn read_dyn(&self, f: &mut dyn FnMut(&dyn ReadTx) -> Result<()>) -> Result<()> {
        Store::read(self, |r| f(r))
    }

    fn table_sizes(&self) -> Result<Vec<pap_storage::space::TableSize>> {
        Store::table_sizes(self)
    }

    fn location(&self) -> PathBuf {
        self.path()
    }

    fn dir(&self) -> Option<PathBuf> {
        Store::dir(self)
    }

    fn export(
        &self,
        each: &mut dyn FnMut(pap_storage::transfer::Item) -> Result<()>,
    ) -> Result<()> {
        self.export_items(each)
    }

    fn import(&self, items: &[pap_storage::transfer::Item]) -> Result<()> {
        self.import_items(items)
    }

    fn is_empty(&self) -> Result<bool> {
        self.holds_nothing()
    }

    fn stamp(&self) -> Option<Stamp> {
        Store::stamp(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pap_storage::{ApprovalTx, DecisionTx, WorkTx};

    fn inv(id: &str, seq: u64, status: Status, deadline: Option<i64>) -> Invocation {
        Invocation {
            seq,
            approval_deadline: deadline,
            max_attempts: 1,
            ..Invocation::for_tests(id, status)
        }
    }

    #[test]
    fn approval_deadlines_follow_the_status() {
        let store = Store::in_memory().unwrap();
        store
            .write(|tx| {
                tx.put_invocation(&inv("i1", 1, Status::AwaitingApproval, Some(50)))?;
                tx.put_invocation(&inv("i2", 2, Status::AwaitingApproval, Some(80)))?;
                assert_eq!(tx.approvals_due(60)?, ["i1"]);
                assert_eq!(tx.approvals_due(80)?, ["i1", "i2"]);
                tx.put_invocation(&inv("i1", 1, Status::Queued, Some(50)))?;
                assert_eq!(tx.approvals_due(100)?, ["i2"]);
                Ok(())
            })
            .unwrap();
    }

    #[test]
    fn listings_keep_creation_order_and_take_the_last_n() {
        let store = Store::in_memory().unwrap();
        store
            .write(|tx| {
                for (i, id) in ["c", "a", "b"].iter().enumerate() {
                    tx.put_invocation(&inv(id, i as u64 + 1, Status::Queued, None))?;
                }
                Ok(())
            })
            .unwrap();
        let (all, total) = store.read(|r| r.invocations(&|_| true, None)).unwrap();
        let ids: Vec<&str> = all.iter().map(|i| i.id.as_str()).collect();
        assert_eq!((ids, total), (vec!["c", "a", "b"], 3));
        let (last, total) = store.read(|r| r.invocations(&|_| true, Some(2))).unwrap();
        assert_eq!((last.len(), last[0].id.as_str(), total), (2, "a", 3));
    }

    #[test]
    fn a_lost_lease_cannot_record_an_attempt() {
        let store = Store::in_memory().unwrap();
        store
            .write(|tx| {
                let first = tx.issue_lease_token()?;
                let mut i = inv("i1", 1, Status::Running, None);
                i.lease = Some(Lease::mine(first, 0, 1000));
                tx.put_invocation(&i)?;
                tx.check_lease("i1", first)?;
                // Another holder takes it over.
                let second = tx.issue_lease_token()?;
                assert!(second > first);
                i.lease = Some(Lease::mine(second, 0, 1000));
                tx.put_invocation(&i)?;
                let lost = tx.check_lease("i1", first).unwrap_err();
                assert!(
                    matches!(lost, Error::LeaseLost { token, current: Some(c), .. } if token == first && c == second),
                    "{lost}"
                );
                assert!(lost.to_string().contains("taken over"), "{lost}");
                assert!(tx.check_lease("missing", first).is_err());
                Ok(())
            })
            .unwrap();
    }

    #[test]
    fn throttle_records_forget_times_outside_the_window() {
        let store = Store::in_memory().unwrap();
        store
            .write(|tx| {
                tx.throttle_record("t", "\"a\"", 0, 1000)?;
                tx.throttle_record("t", "\"a\"", 500, 1000)?;
                tx.throttle_record("t", "\"a\"", 1200, 1000)?;
                assert_eq!(tx.throttle_times("t", "\"a\"")?, [500, 1200]);
                assert!(tx.throttle_times("t", "\"b\"")?.is_empty());
                Ok(())
            })
            .unwrap();
    }

    /// Opening a store whose file says it has format `version`.
    fn open_as_version(version: u64) -> Error {
        let dir = tempfile::tempdir().unwrap();
        Store::open(dir.path()).unwrap();
        {
            let db = Database::create(dir.path().join("state.redb")).unwrap();
            let txn = db.begin_write().unwrap();
            txn.open_table(tables::META)
                .unwrap()
                .insert("schema_version", version)
                .unwrap();
            txn.commit().unwrap();
        }
        Store::open(dir.path()).err().expect("refused")
    }

    #[test]
    fn a_newer_format_is_refused_at_open() {
        let err = open_as_version(99);
        assert!(
            matches!(err, Error::SchemaVersion { found: 99, .. }),
            "{err}"
        );
        assert!(err.to_string().contains("schema version 99"), "{err}");
    }

    #[test]
    fn a_development_format_is_refused_with_a_message() {
        let err = open_as_version(5);
        assert!(
            matches!(err, Error::DevelopmentFormat { found: 5, .. }),
            "{err}"
        );
        assert!(err.to_string().contains("development build"), "{err}");
    }

    #[test]
    fn a_store_held_elsewhere_is_waited_for_then_reported() {
        let dir = tempfile::tempdir().unwrap();
        Store::open(dir.path()).unwrap();
        let held = Database::create(dir.path().join("state.redb")).unwrap();
        let mut waiter = Store::new(Backing::File(dir.path().join("state.redb")), None);
        waiter.lock_timeout = Duration::from_millis(50);
        let err = waiter.read(|_| Ok(())).expect_err("locked");
        assert!(matches!(err, Error::Locked { .. }), "{err}");
        drop(held);
        waiter.read(|_| Ok(())).expect("free once released");
    }
}
