//! The concurrency index (a pap extension) of the redb store: per concurrency key, who holds
//! a slot and who waits, in decision order, with whether the key admits each waiter (see
//! `storage::concurrency`). Kept in step with every write of an invocation that has keys, in
//! the same transaction, together with the due-work entries (`WORK`) of the waiters every key
//! admits: a waiter the keys hold back is not due work, so a long queue behind a key costs a
//! scan for work nothing. The tables are opened on use: work without keys never touches them.

use redb::{ReadableTable, Table, WriteTransaction};

use super::id_codec;
use super::tables::{CONC_HOLDERS, CONC_KEYS, CONC_WAITERS, CONCURRENCY_6};
use super::tx::Tx;
use super::{Error, Result, redb_err};
use pap_domain::Invocation;
pub(super) use pap_storage::concurrency::state_of;
use pap_storage::concurrency::{self, Change, Entry, Holders, KeyIndex, KeyState, due_of, refresh};

/// A holder's value: its state, then the invocation id.
fn encode(entry: Entry, id: &str) -> Vec<u8> {
    let mut value = match entry {
        Entry::Waiting => vec![0],
        Entry::Running => vec![1],
        Entry::Stopping(until) => {
            let mut v = vec![2];
            v.extend_from_slice(&until.to_le_bytes());
            v
        }
    };
    value.extend_from_slice(id.as_bytes());
    value
}

/// The entry and the invocation id it is for (format 6's values too).
fn decode(bytes: &[u8]) -> Option<(Entry, &[u8])> {
    match bytes.split_first()? {
        (0, id) => Some((Entry::Waiting, id)),
        (1, id) => Some((Entry::Running, id)),
        (2, rest) if rest.len() >= 8 => {
            let (until, id) = rest.split_at(8);
            let until = i64::from_le_bytes(until.try_into().ok()?);
            Some((Entry::Stopping(until), id))
        }
        _ => None,
    }
}

/// A waiter's value: whether (and from when) its key admits it, then its packed id.
fn waiter(admitted: Option<i64>, packed: &[u8]) -> Vec<u8> {
    let mut value = match admitted {
        None => vec![0],
        Some(at) => {
            let mut v = vec![1];
            v.extend_from_slice(&at.to_le_bytes());
            v
        }
    };
    value.extend_from_slice(packed);
    value
}

fn decode_waiter(bytes: &[u8]) -> Option<(Option<i64>, &[u8])> {
    match bytes.split_first()? {
        (0, packed) => Some((None, packed)),
        (1, rest) if rest.len() >= 8 => {
            let (at, packed) = rest.split_at(8);
            Some((Some(i64::from_le_bytes(at.try_into().ok()?)), packed))
        }
        _ => None,
    }
}

pub(super) type Entries<'t> = Table<'t, (&'static str, u64), &'static [u8]>;

/// The three tables of the index, open in one write transaction.
pub(super) struct Index<'t> {
    pub(super) holders: Entries<'t>,
    pub(super) waiters: Entries<'t>,
    keys: Table<'t, &'static str, (u32, u32)>,
}

/// A waiter's entry: when its key admits it (none: not yet), and its packed id.
type Waiter = (Option<i64>, Vec<u8>);

impl<'t> Index<'t> {
    pub(super) fn open(
        txn: &'t WriteTransaction,
    ) -> std::result::Result<Index<'t>, redb::TableError> {
        Ok(Index {
            holders: txn.open_table(CONC_HOLDERS)?,
            waiters: txn.open_table(CONC_WAITERS)?,
            keys: txn.open_table(CONC_KEYS)?,
        })
    }

    /// The waiter of `key` with sequence number `seq`: (admitted at, packed id).
    fn waiter(
        &self,
        key: &str,
        seq: u64,
    ) -> std::result::Result<Option<Waiter>, redb::StorageError> {
        Ok(self
            .waiters
            .get((key, seq))?
            .and_then(|v| decode_waiter(v.value()).map(|(at, id)| (at, id.to_vec()))))
    }

    /// Where waiter `inv` (due at `due`) sits in `WORK`, as its keys admit it now; `in_key`
    /// overrides what `in_key.0` says.
    fn work_at(
        &self,
        inv: &Invocation,
        due: i64,
        in_key: Option<(&str, Option<i64>)>,
    ) -> std::result::Result<Option<i64>, redb::StorageError> {
        let mut admitted = Vec::with_capacity(inv.concurrency.len());
        for slot in &inv.concurrency {
            let key = slot.index_key();
            admitted.push(match in_key {
                Some((k, at)) if k == key => at,
                _ => self.waiter(&key, inv.seq)?.and_then(|(at, _)| at),
            });
        }
        Ok(concurrency::work_at(due, admitted))
    }
}

impl KeyIndex for Index<'_> {
    type Error = redb::StorageError;

    fn holders(&mut self, key: &str) -> std::result::Result<Holders, Self::Error> {
        holders_in(&self.holders, key, None)
    }

    fn key_state(&mut self, key: &str) -> std::result::Result<Option<KeyState>, Self::Error> {
        Ok(self.keys.get(key)?.map(|v| {
            let (limit, admitted) = v.value();
            KeyState { limit, admitted }
        }))
    }

    fn set_key_state(
        &mut self,
        key: &str,
        state: Option<KeyState>,
    ) -> std::result::Result<(), Self::Error> {
        match state {
            Some(s) => self.keys.insert(key, (s.limit, s.admitted))?,
            None => self.keys.remove(key)?,
        };
        Ok(())
    }

    fn waiters(
        &mut self,
        key: &str,
        n: usize,
    ) -> std::result::Result<Vec<(u64, Option<i64>)>, Self::Error> {
        let mut out = Vec::new();
        for row in self.waiters.range((key, 0)..=(key, u64::MAX))?.take(n) {
            let (k, v) = row?;
            out.push((k.value().1, decode_waiter(v.value()).and_then(|(at, _)| at)));
        }
        Ok(out)
    }

    fn waits_behind(
        &mut self,
        key: &str,
        seq: u64,
        limit: u32,
    ) -> std::result::Result<bool, Self::Error> {
        if self.key_state(key)?.is_none_or(|s| s.limit != limit) {
            return Ok(false);
        }
        let Some(row) = self.waiters.range((key, 0)..(key, seq))?.next_back() else {
            return Ok(false);
        };
        let (_, v) = row?;
        Ok(decode_waiter(v.value()).is_some_and(|(at, _)| at.is_none()))
    }

    fn set_admitted(
        &mut self,
        key: &str,
        seq: u64,
        at: Option<i64>,
    ) -> std::result::Result<(), Self::Error> {
        if let Some((_, packed)) = self.waiter(key, seq)? {
            self.waiters
                .insert((key, seq), waiter(at, &packed).as_slice())?;
        }
        Ok(())
    }
}

/// The holders of `key`, leaving out sequence number `but`.
pub(super) fn holders_in(
    table: &impl ReadableTable<(&'static str, u64), &'static [u8]>,
    key: &str,
    but: Option<u64>,
) -> std::result::Result<Holders, redb::StorageError> {
    let mut holders = Holders::default();
    for row in table.range((key, 0)..=(key, u64::MAX))? {
        let (k, v) = row?;
        if Some(k.value().1) == but {
            continue;
        }
        if let Some((entry, _)) = decode(v.value()) {
            holders.add(entry);
        }
    }
    Ok(holders)
}

impl<'t> Tx<'t> {
    pub(super) fn conc_err(&self, e: impl Into<redb::Error>) -> Error {
        redb_err(self.path(), e)
    }

    /// Runs `f` on the index (opened on first use, then kept to the end of the transaction),
    /// taken out of the transaction meanwhile so that `f` may write the rest of it.
    fn with_index<T>(
        &mut self,
        f: impl FnOnce(&mut Self, &mut Index<'t>) -> Result<T>,
    ) -> Result<T> {
        let mut ix = match self.concurrency.take() {
            Some(ix) => ix,
            None => Index::open(self.txn).map_err(|e| self.conc_err(e))?,
        };
        let done = f(self, &mut ix);
        self.concurrency = Some(ix);
        done
    }

    /// Moves `inv`'s entries to where it stands now (`old`: its entry and due time before this
    /// write), brings its keys' admissions up to date, and keeps `WORK` in step: `inv` is due
    /// work as a waiter only while every key admits it.
    pub(super) fn reindex_concurrency(
        &mut self,
        inv: &Invocation,
        old: Option<(Entry, i64)>,
    ) -> Result<()> {
        if inv.concurrency.is_empty() {
            return Ok(());
        }
        self.with_index(|tx, ix| tx.reindex_in(ix, inv, old))
    }

    fn reindex_in(
        &mut self,
        ix: &mut Index<'t>,
        inv: &Invocation,
        old: Option<(Entry, i64)>,
    ) -> Result<()> {
        let new = state_of(inv);
        let packed = id_codec::pack(&inv.id);
        if let Some((Entry::Waiting, due)) = old
            && let Some(at) = ix.work_at(inv, due, None).map_err(|e| self.conc_err(e))?
        {
            self.work_remove(at, &packed)?;
        }
        let moved = old.map(|o| o.0) != new;
        let path = self.path.clone();
        let e = |e: redb::StorageError| redb_err(&path, e);
        // Its own admission under each key, known without a lookup when it was just added
        // (not admitted, unless the refresh says so).
        let mut own = Vec::with_capacity(inv.concurrency.len());
        for slot in &inv.concurrency {
            let key = slot.index_key();
            let k = key.as_str();
            if moved {
                match old.map(|o| o.0) {
                    Some(Entry::Waiting) => ix.waiters.remove((k, inv.seq)).map_err(e)?,
                    Some(_) => ix.holders.remove((k, inv.seq)).map_err(e)?,
                    None => None,
                };
                match new {
                    Some(Entry::Waiting) => ix
                        .waiters
                        .insert((k, inv.seq), waiter(None, &packed).as_slice())
                        .map_err(e)?,
                    Some(entry) => ix
                        .holders
                        .insert((k, inv.seq), encode(entry, &inv.id).as_slice())
                        .map_err(e)?,
                    None => None,
                };
            }
            // A waiter written with another limit (the manifests changed) re-admits its key.
            let relimited = !moved
                && new == Some(Entry::Waiting)
                && ix
                    .key_state(k)
                    .map_err(e)?
                    .is_some_and(|s| s.limit != slot.limit);
            let mut changes = Vec::new();
            if moved || relimited {
                let appended = (moved && new == Some(Entry::Waiting)).then_some(inv.seq);
                changes = refresh(ix, k, slot.limit, appended).map_err(e)?;
                self.readmit(ix, k, &changes, Some(inv.seq))?;
            }
            own.push(
                changes
                    .iter()
                    .find(|c| c.seq == inv.seq)
                    .and_then(|c| c.now),
            );
        }
        if new == Some(Entry::Waiting) {
            let due = due_of(inv);
            let at = if moved {
                concurrency::work_at(due, own)
            } else {
                ix.work_at(inv, due, None).map_err(|e| self.conc_err(e))?
            };
            if let Some(at) = at {
                self.work_insert(at, &packed)?;
            }
        }
        Ok(())
    }

    /// Moves the `WORK` entries of the waiters whose admission under `key` changed (but the
    /// one with sequence number `but`, whose own write places it).
    fn readmit(
        &mut self,
        ix: &Index<'_>,
        key: &str,
        changes: &[Change],
        but: Option<u64>,
    ) -> Result<()> {
        let path = self.path.clone();
        let e = |e: redb::StorageError| redb_err(&path, e);
        for c in changes.iter().filter(|c| Some(c.seq) != but) {
            let Some((_, packed)) = ix.waiter(key, c.seq).map_err(e)? else {
                continue;
            };
            let id = id_codec::unpack(&packed).ok_or_else(|| Error::Corrupt {
                path: self.path.clone(),
                message: format!("a waiter of concurrency key {key} has no invocation id"),
            })?;
            let Some(inv) = self.invocation_head(&id)? else {
                continue;
            };
            let due = due_of(&inv);
            let was = ix.work_at(&inv, due, Some((key, c.was))).map_err(e)?;
            let now = ix.work_at(&inv, due, Some((key, c.now))).map_err(e)?;
            if was != now {
                if let Some(at) = was {
                    self.work_remove(at, &packed)?;
                }
                if let Some(at) = now {
                    self.work_insert(at, &packed)?;
                }
            }
        }
        Ok(())
    }

    /// Admits `key`'s waiters under `limit` (the manifests changed), if that limit is not the
    /// one they were admitted under.
    pub(crate) fn relimit_key(&mut self, key: &str, limit: u32) -> Result<()> {
        self.with_index(|tx, ix| {
            let e = |e| tx.conc_err(e);
            if ix
                .key_state(key)
                .map_err(e)?
                .is_none_or(|s| s.limit == limit)
            {
                return Ok(());
            }
            let changes = refresh(ix, key, limit, None).map_err(e)?;
            tx.readmit(ix, key, &changes, None)
        })
    }

    /// The keys with waiters under `scope` (`trigger:ID` or `agent:ID`), and the limit they
    /// were last admitted under.
    pub(crate) fn concurrency_keys(&mut self, scope: &str) -> Result<Vec<(String, u32)>> {
        let from = format!("{scope}\u{1f}");
        let to = format!("{scope}\u{20}");
        self.with_index(|tx, ix| {
            let mut out = Vec::new();
            let rows = ix
                .keys
                .range(from.as_str()..to.as_str())
                .map_err(|e| tx.conc_err(e))?;
            for row in rows {
                let (k, v) = row.map_err(|e| tx.conc_err(e))?;
                out.push((k.value().to_owned(), v.value().0));
            }
            Ok(out)
        })
    }

    /// Format 6 to 7: splits format 6's index into holders and waiters, takes the waiters out
    /// of `WORK`, and admits each key's first ones under the limit its latest waiter carries
    /// (a file from before the index has nothing to move).
    pub(super) fn migrate_concurrency_6(&mut self) -> Result<()> {
        let txn = self.txn;
        let rows = {
            let old = match txn.open_table(CONCURRENCY_6) {
                Ok(t) => t,
                Err(redb::TableError::TableDoesNotExist(_)) => return Ok(()),
                Err(e) => return Err(self.conc_err(e)),
            };
            let mut rows = Vec::new();
            for row in old.iter().map_err(|e| self.conc_err(e))? {
                let (k, v) = row.map_err(|e| self.conc_err(e))?;
                let (key, seq) = k.value();
                let Some((entry, id)) = decode(v.value()) else {
                    continue;
                };
                let id = String::from_utf8_lossy(id).into_owned();
                rows.push((key.to_owned(), seq, entry, id));
            }
            rows
        };
        txn.delete_table(CONCURRENCY_6)
            .map_err(|e| self.conc_err(e))?;
        self.with_index(|tx, ix| {
            let path = tx.path.clone();
            let e = |e: redb::StorageError| redb_err(&path, e);
            let mut limits: Vec<(String, u32)> = Vec::new();
            for (key, seq, entry, id) in &rows {
                let Some(inv) = tx.invocation_head(id)? else {
                    continue;
                };
                let packed = id_codec::pack(id);
                if entry != &Entry::Waiting {
                    ix.holders
                        .insert((key.as_str(), *seq), encode(*entry, id).as_slice())
                        .map_err(e)?;
                    continue;
                }
                // Format 6 listed every queued invocation as due work.
                tx.work_remove(due_of(&inv), &packed)?;
                ix.waiters
                    .insert((key.as_str(), *seq), waiter(None, &packed).as_slice())
                    .map_err(e)?;
                let limit = inv
                    .concurrency
                    .iter()
                    .find(|s| s.index_key() == *key)
                    .map_or(1, |s| s.limit);
                // Rows come in key order, then decision order: the latest waiter's limit is
                // the key's.
                match limits.last_mut() {
                    Some((k, l)) if k == key => *l = limit,
                    _ => limits.push((key.clone(), limit)),
                }
            }
            for (key, limit) in &limits {
                let changes = refresh(ix, key, *limit, None).map_err(e)?;
                tx.readmit(ix, key, &changes, None)?;
            }
            Ok(())
        })
    }
}
