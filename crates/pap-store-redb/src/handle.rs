//! Keeping the store open: one handle per process, held between transactions, and given up
//! as soon as another process asks for the file.
//!
//! redb lets one process write a file at a time, and opening or closing it for writing costs
//! three syncs (it marks the file open, then clean). Opening per transaction made every pap
//! process pay them several times over. Instead a process keeps its handle and the other
//! processes ask for it: a process that finds the file taken holds a shared `flock` on
//! `<state>/state.want` while it waits, and the holder's janitor thread, which looks every
//! few milliseconds (less often once the holder is idle), closes the handle between two
//! transactions when that lock is held. So parallel processes still take turns transaction
//! by transaction, as before, but a process on its own (serve, a dispatch) opens the file
//! once.
//!
//! Reading never needs a writer: a process with no handle opens the file read-only, which
//! syncs nothing and shares the file with other readers. A writer's handle is kept until it
//! is asked for or the store is dropped; a reader's is also closed when idle, since reopening
//! it costs nothing and it keeps writers out.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

use nix::fcntl::{Flock, FlockArg};
use redb::{Database, ReadOnlyDatabase, ReadTransaction, ReadableDatabase, TransactionError};

/// How often a holder looks whether another process waits, while it is busy: a waiter
/// waits at most this long once the holder's transaction ends.
const POLL: Duration = Duration::from_millis(5);
/// How often an idle holder looks (nothing done for [`IDLE_AFTER`]): an idle serve, which
/// reads once a second, wakes about 40 times a second for this instead of 200.
const IDLE_POLL: Duration = Duration::from_millis(50);
const IDLE_AFTER: Duration = Duration::from_millis(100);
/// A read-only handle idle this long is closed (it keeps writers out; reopening is free).
const READER_IDLE: Duration = Duration::from_millis(50);

/// An open database, for writing or only for reading.
pub(super) enum Open {
    Writer(Database),
    Reader(ReadOnlyDatabase),
}

impl Open {
    pub(super) fn begin_read(&self) -> Result<ReadTransaction, TransactionError> {
        match self {
            Open::Writer(db) => db.begin_read(),
            Open::Reader(db) => db.begin_read(),
        }
    }
}

/// What the janitor and the store's users share.
pub(super) struct Slot {
    pub(super) open: Option<Open>,
    last_used: Instant,
    /// The store was dropped: the janitor stops.
    closed: bool,
}

pub(super) struct Shared {
    slot: Mutex<Slot>,
    /// Group commit (see `group`): commits made, commits known durable, and the last commit
    /// whose durability a failed sync may have lost.
    pub(super) committed: std::sync::atomic::AtomicU64,
    pub(super) durable: std::sync::atomic::AtomicU64,
    pub(super) lost: std::sync::atomic::AtomicU64,
    /// One thread at a time makes the others' commits durable; they wait here.
    pub(super) syncing: Mutex<bool>,
    pub(super) synced: Condvar,
    /// Wakes the janitor when a handle is opened (or the store dropped).
    opened: Condvar,
    want: Option<WantFile>,
    /// No janitor runs (it could not be started): close after every transaction.
    per_transaction: std::sync::atomic::AtomicBool,
}

impl Shared {
    /// A store of a file shared with other processes gets a want-file and a janitor; a
    /// private one (memory, a dry run's copy) keeps its handle for its whole life.
    pub(super) fn new(want: Option<PathBuf>) -> Arc<Shared> {
        let shared = Arc::new(Shared {
            slot: Mutex::new(Slot {
                open: None,
                last_used: Instant::now(),
                closed: false,
            }),
            committed: Default::default(),
            durable: Default::default(),
            lost: Default::default(),
            syncing: Mutex::new(false),
            synced: Condvar::new(),
            opened: Condvar::new(),
            want: want.map(WantFile::new),
            per_transaction: std::sync::atomic::AtomicBool::new(false),
        });
        if shared.want.is_some() {
            let weak = Arc::downgrade(&shared);
            let spawned = std::thread::Builder::new()
                .name("pap-store-janitor".into())
                .spawn(move || janitor(weak));
            if spawned.is_err() {
                // Without a janitor the handle is closed after every transaction (see
                // `Guard::drop`), as pap did before: slower, never stuck.
                shared
                    .per_transaction
                    .store(true, std::sync::atomic::Ordering::Relaxed);
            }
        }
        register(&shared);
        shared
    }

    pub(super) fn lock(&self) -> Guard<'_> {
        Guard {
            slot: self.slot.lock().unwrap_or_else(|p| p.into_inner()),
            shared: self,
        }
    }

    /// From now on the handle is closed at the end of every transaction.
    pub(super) fn close_after_each_transaction(&self) {
        self.per_transaction
            .store(true, std::sync::atomic::Ordering::Relaxed);
        let mut slot = self.slot.lock().unwrap_or_else(|p| p.into_inner());
        self.close_handle(&mut slot);
    }

    pub(super) fn want(&self) -> Option<&WantFile> {
        self.want.as_ref()
    }

    /// Closes the handle (cleanly, so the next open needs no repair) and stops the janitor.
    pub(super) fn close(&self) {
        let mut slot = self.slot.lock().unwrap_or_else(|p| p.into_inner());
        self.close_handle(&mut slot);
        slot.closed = true;
        self.opened.notify_all();
    }

    /// Makes every commit counted so far durable with one empty durable commit on `db` (held
    /// under the slot's lock, so no commit slips in between): redb's `Durability::None`
    /// commits are persisted by the next durable one. The group commit's sync (`group`), and
    /// the last act before a handle with pending commits is closed.
    pub(super) fn sync_all(&self, db: &Database) -> Result<(), redb::Error> {
        use std::sync::atomic::Ordering::SeqCst;
        let target = self.committed.load(SeqCst);
        if self.durable.load(SeqCst) < target {
            db.begin_write()?.commit()?;
            self.durable.fetch_max(target, SeqCst);
        }
        Ok(())
    }

    /// Closes the handle in `slot`. Commits that are not durable yet (see `group`) are made
    /// durable first, by an empty durable commit; if that fails they may be lost, and their
    /// writers are told so instead of being told they are safe.
    pub(super) fn close_handle(&self, slot: &mut Slot) {
        use std::sync::atomic::Ordering::SeqCst;
        if let Some(Open::Writer(db)) = &slot.open {
            let pending = self.committed.load(SeqCst);
            if self.durable.load(SeqCst) < pending {
                if self.sync_all(db).is_err() {
                    self.lost.fetch_max(pending, SeqCst);
                }
                self.synced.notify_all();
            }
        }
        slot.open = None;
    }
}

/// The slot, locked for one operation.
pub(super) struct Guard<'a> {
    pub(super) slot: MutexGuard<'a, Slot>,
    shared: &'a Shared,
}

impl Guard<'_> {
    pub(super) fn set(&mut self, open: Open) {
        self.slot.open = Some(open);
        self.shared.opened.notify_all();
    }
}

impl Drop for Guard<'_> {
    fn drop(&mut self) {
        self.slot.last_used = Instant::now();
        let alone = self.slot.closed
            || self
                .shared
                .per_transaction
                .load(std::sync::atomic::Ordering::Relaxed);
        // Someone already waiting gets the file now rather than at the janitor's next look.
        if alone
            || self
                .shared
                .want
                .as_ref()
                .is_some_and(|w| w.others_waiting())
        {
            self.shared.close_handle(&mut self.slot);
        }
    }
}

fn janitor(shared: Weak<Shared>) {
    loop {
        let Some(s) = shared.upgrade() else { return };
        let pause = {
            let mut slot = s.slot.lock().unwrap_or_else(|p| p.into_inner());
            while slot.open.is_none() && !slot.closed {
                slot = s.opened.wait(slot).unwrap_or_else(|p| p.into_inner());
            }
            if slot.closed {
                return;
            }
            if slot.last_used.elapsed() >= IDLE_AFTER {
                IDLE_POLL
            } else {
                POLL
            }
        };
        std::thread::sleep(pause);
        let mut slot = s.slot.lock().unwrap_or_else(|p| p.into_inner());
        let idle_reader =
            matches!(slot.open, Some(Open::Reader(_))) && slot.last_used.elapsed() >= READER_IDLE;
        if slot.open.is_some()
            && (idle_reader || s.want.as_ref().is_some_and(|w| w.others_waiting()))
        {
            s.close_handle(&mut slot);
        }
    }
}

/// `<state>/state.want`: waiting processes hold a shared lock on it.
pub(super) struct WantFile {
    path: PathBuf,
    /// The holder's own descriptor, for the probe; opened on first use.
    probe: Mutex<Option<File>>,
}

impl WantFile {
    fn new(path: PathBuf) -> WantFile {
        WantFile {
            path,
            probe: Mutex::new(None),
        }
    }

    fn open(path: &Path) -> std::io::Result<File> {
        File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
    }

    /// Whether another process holds the shared lock, i.e. waits for the file. A probe that
    /// cannot be made says no: the holder then keeps its handle, and the waiter its backoff.
    fn others_waiting(&self) -> bool {
        let mut probe = self.probe.lock().unwrap_or_else(|p| p.into_inner());
        if probe.is_none() {
            *probe = WantFile::open(&self.path).ok();
        }
        let Some(file) = probe.take() else {
            return false;
        };
        match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
            Ok(locked) => {
                *probe = locked.unlock().ok();
                false
            }
            Err((file, errno)) => {
                *probe = Some(file);
                errno == nix::errno::Errno::EWOULDBLOCK
            }
        }
    }

    /// Says "I am waiting" until dropped.
    pub(super) fn ticket(&self) -> Option<Flock<File>> {
        let file = WantFile::open(&self.path).ok()?;
        Flock::lock(file, FlockArg::LockShared).ok()
    }
}

/// Every store of this process, so [`release_all`] can close them before the process ends.
static STORES: Mutex<Vec<Weak<Shared>>> = Mutex::new(Vec::new());

fn register(shared: &Arc<Shared>) {
    let mut stores = STORES.lock().unwrap_or_else(|p| p.into_inner());
    stores.retain(|w| w.strong_count() > 0);
    stores.push(Arc::downgrade(shared));
}

/// Closes every store handle of this process cleanly. `main` calls it last: a store still
/// referenced by a task that outlived the command would otherwise stay marked open, and the
/// next process to open it would have to repair it.
pub fn release_all() {
    let stores = std::mem::take(&mut *STORES.lock().unwrap_or_else(|p| p.into_inner()));
    for shared in stores.iter().filter_map(Weak::upgrade) {
        shared.close();
    }
}
