//! Group commit: the records of work that happens together share one sync.
//!
//! A runner's bookkeeping (an attempt starts, an attempt ends) is committed without a sync,
//! then the runner waits until a sync covers its commit before it acts on it (starts the
//! agent, reports the result). One waiting thread at a time makes that sync, an empty durable
//! commit that makes every commit before it durable (redb's `Durability::None` commits are
//! persisted by the next durable one); the others wait for it. So N runs that start or end
//! together cost one sync instead of N, and none is acknowledged before it is durable.
//!
//! Nothing not yet durable is acted on in this process either: a read waits for the sync
//! first (`Store::read`), a durable write makes everything before it durable, and a handle
//! given up to another process is synced before it is closed (`Shared::close_handle`). If that
//! last sync fails, the writers still waiting are told their commit may be lost.

use std::sync::atomic::Ordering::SeqCst;

use super::{Error, Result, Store, Tx, redb_err};

impl Store {
    /// Runs `f` in one write transaction and returns once its commit is durable, sharing the
    /// sync with the commits of other threads that happen meanwhile.
    pub fn write_grouped<T>(&self, f: impl FnOnce(&mut Tx) -> Result<T>) -> Result<T> {
        let (value, mine) = self.commit(f, false)?;
        self.sync_through(mine)?;
        Ok(value)
    }

    /// Makes this process's commits durable before a read (a failed sync is reported to the
    /// writers waiting for it; the read goes on).
    pub(super) fn sync_pending(&self) {
        let committed = self.shared.committed.load(SeqCst);
        if self.shared.durable.load(SeqCst) < committed {
            let _ = self.sync_through(committed);
        }
    }

    /// Waits until commit number `mine` is durable, making the sync itself if no other
    /// thread is making one.
    fn sync_through(&self, mine: u64) -> Result<()> {
        let shared = &self.shared;
        loop {
            if shared.durable.load(SeqCst) >= mine {
                return Ok(());
            }
            if shared.lost.load(SeqCst) >= mine {
                return Err(Error::NotDurable {
                    path: self.path(),
                    what: "the sync that would have covered it failed".into(),
                });
            }
            let mut syncing = shared.syncing.lock().unwrap_or_else(|p| p.into_inner());
            if *syncing {
                let _woken = shared
                    .synced
                    .wait(syncing)
                    .unwrap_or_else(|p| p.into_inner());
                continue;
            }
            *syncing = true;
            drop(syncing);
            let path = self.path();
            let synced = self.with_writer(|db| shared.sync_all(db).map_err(|e| redb_err(&path, e)));
            if synced.is_err() {
                shared.lost.fetch_max(mine, SeqCst);
            }
            *shared.syncing.lock().unwrap_or_else(|p| p.into_inner()) = false;
            shared.synced.notify_all();
            synced?;
        }
    }
}

#[cfg(test)]
mod tests {
    use pap_storage::{LedgerTx, ReadTx};
    use std::sync::Arc;

    use super::*;

    #[test]
    fn grouped_writes_are_durable_and_visible_to_readers() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(Store::open(dir.path()).unwrap());
        let threads: Vec<_> = (0..8)
            .map(|i| {
                let store = store.clone();
                std::thread::spawn(move || {
                    for j in 0..20 {
                        store
                            .write_grouped(|tx| {
                                tx.set_schedule_last(&format!("s{i}-{j}"), 1)?;
                                Ok(())
                            })
                            .unwrap();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let shared = &store.shared;
        assert_eq!(shared.committed.load(SeqCst), 160);
        assert_eq!(
            shared.durable.load(SeqCst),
            160,
            "every commit acknowledged is durable"
        );
        drop(store);
        // A fresh open (a new process, in effect) sees every one of them.
        let again = Store::open(dir.path()).unwrap();
        for i in 0..8 {
            for j in 0..20 {
                let last = again
                    .read(|r| r.schedule_last(&format!("s{i}-{j}")))
                    .unwrap();
                assert_eq!(last, Some(1), "s{i}-{j}");
            }
        }
    }

    #[test]
    fn a_read_first_makes_pending_commits_durable() {
        let store = Store::in_memory().unwrap();
        store
            .commit(|tx| tx.set_schedule_last("s", 5), false)
            .unwrap();
        assert_eq!(store.shared.durable.load(SeqCst), 0);
        assert_eq!(store.read(|r| r.schedule_last("s")).unwrap(), Some(5));
        assert_eq!(store.shared.durable.load(SeqCst), 1);
    }
}
