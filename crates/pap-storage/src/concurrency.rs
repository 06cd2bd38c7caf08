//! The concurrency gate (a pap extension), for every store: where an invocation stands under
//! its concurrency keys, whether a key has room for it, and which of a key's waiters are
//! admitted (due work) at all.
//!
//! A store keeps, per key, who holds a slot (running, or stopping after a cancel) and who
//! waits, in decision order (the invocation's sequence number). A waiter may start when the
//! holders and the waiters decided before it leave a slot: `position + holders < limit`. So
//! at most `limit` waiters of a key are admitted, always its first ones, and the store lists
//! as due work only those ([`refresh`] keeps that list), never the blocked tail behind them:
//! a long queue behind a key costs nothing until its turn, and its turns come in decision
//! order. Both the gate ([`blocking`]) and [`refresh`] read a key's holders and at most about
//! `limit` of its waiters, whatever the length of its queue.

use crate::domain::{Invocation, Status};

/// Where an invocation stands under each of its concurrency keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Entry {
    Waiting,
    Running,
    /// Cancelled while it ran: holds its slot until its processes are gone, at most until
    /// this time (ms), so a cancel that never finished stopping them cannot hold it forever.
    Stopping(i64),
}

/// Where `inv` stands under its keys: `None` (not under any), or its entry.
pub fn state_of(inv: &Invocation) -> Option<Entry> {
    if inv.concurrency.is_empty() {
        return None;
    }
    if let Some(until) = inv.stopping_until {
        return Some(Entry::Stopping(until));
    }
    match inv.status {
        Status::Queued => Some(Entry::Waiting),
        Status::Running => Some(Entry::Running),
        _ => None,
    }
}

/// When a queued invocation falls due, leaving its keys aside: a retry at its next attempt
/// time, anything else at its creation (first in, first out).
pub fn due_of(inv: &Invocation) -> i64 {
    inv.next_attempt_at.unwrap_or(inv.created_at)
}

/// Where a waiter admitted under every one of its keys (`admitted`, one per key, `None` where
/// a key does not admit it) sits in the due-work index: at its due time, or later when a key
/// admits it only once a stopping run's time is up. `None`: not due work at all.
pub fn work_at(due: i64, admitted: impl IntoIterator<Item = Option<i64>>) -> Option<i64> {
    admitted
        .into_iter()
        .try_fold(due, |at, key| key.map(|k| at.max(k)))
}

/// The runs holding slots of one key.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Holders {
    pub running: u32,
    /// The times stopping runs hold their slots until, latest first.
    stopping: Vec<i64>,
}

impl Holders {
    pub fn add(&mut self, entry: Entry) {
        match entry {
            Entry::Running => self.running += 1,
            Entry::Stopping(until) => {
                let at = self.stopping.partition_point(|u| *u > until);
                self.stopping.insert(at, until);
            }
            Entry::Waiting => {}
        }
    }

    /// How many hold a slot at `now` (a stopping run until its time).
    pub fn at(&self, now: i64) -> u32 {
        let stopping = self.stopping.iter().filter(|u| **u > now).count();
        self.running
            .saturating_add(u32::try_from(stopping).unwrap_or(u32::MAX))
    }

    /// From when the waiter at `position` (0: decided first) may start under `limit`:
    /// `i64::MIN` at once, a stopping run's time once enough of them are up, `None` not
    /// before something else changes (a run ends, a waiter ahead starts or goes).
    pub fn admitted_at(&self, limit: u32, position: usize) -> Option<i64> {
        // Room left for it once every stopping run is gone: it needs at most `spare` of
        // them still holding.
        let spare = i64::from(limit) - i64::from(self.running) - 1 - position as i64;
        let spare = usize::try_from(spare).ok()?;
        Some(self.stopping.get(spare).copied().unwrap_or(i64::MIN))
    }

    /// How many waiters may be admitted at all (the first ones).
    fn open(&self, limit: u32) -> usize {
        limit.saturating_sub(self.running) as usize
    }
}

/// The first of `inv`'s concurrency keys with no room for it at `now`, with why. `look`
/// gives a key's holders (without `inv` itself) and how many of its waiters were decided
/// before sequence number `before`, counting at most `max`.
pub fn blocking<E>(
    inv: &Invocation,
    now: i64,
    mut look: impl FnMut(&str, u64, usize) -> Result<(Holders, usize), E>,
) -> Result<Option<(String, String)>, E> {
    for slot in &inv.concurrency {
        let key = slot.index_key();
        let cap = slot.limit as usize;
        let (holders, ahead) = look(&key, inv.seq, cap)?;
        let running = holders.at(now);
        let ahead = u32::try_from(ahead.min(cap)).unwrap_or(u32::MAX);
        if running.saturating_add(ahead) >= slot.limit {
            let mut why = format!(
                "waiting for a concurrency slot: {running} of {} running for key {} of {}",
                slot.limit,
                if slot.key.is_empty() {
                    "(none)"
                } else {
                    &slot.key
                },
                slot.scope
            );
            if ahead > 0 {
                // Counted up to the limit only: the gate never reads a long queue through.
                let more = if ahead as usize >= cap {
                    " or more"
                } else {
                    ""
                };
                why.push_str(&format!(
                    ", {ahead}{more} decided earlier waiting before it"
                ));
            }
            return Ok(Some((key, why)));
        }
    }
    Ok(None)
}

/// A key's record beside its entries: the limit its last refresh used, and how many of its
/// waiters that refresh admitted. Kept only while the key has waiters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyState {
    pub limit: u32,
    pub admitted: u32,
}

/// What [`refresh`] needs of a store's index of one key.
pub trait KeyIndex {
    type Error;
    fn holders(&mut self, key: &str) -> Result<Holders, Self::Error>;
    fn key_state(&mut self, key: &str) -> Result<Option<KeyState>, Self::Error>;
    /// Records the key's state; `None` forgets it (the key has no waiters).
    fn set_key_state(&mut self, key: &str, state: Option<KeyState>) -> Result<(), Self::Error>;
    /// The key's first `n` waiters in decision order: (sequence number, admitted at).
    fn waiters(&mut self, key: &str, n: usize) -> Result<Vec<(u64, Option<i64>)>, Self::Error>;
    /// Whether the key's waiters were last admitted under `limit` and the waiter decided
    /// last before `seq` is not admitted (then one added at `seq` is not either, and no
    /// other admission changes).
    fn waits_behind(&mut self, key: &str, seq: u64, limit: u32) -> Result<bool, Self::Error>;
    fn set_admitted(&mut self, key: &str, seq: u64, at: Option<i64>) -> Result<(), Self::Error>;
}

/// A waiter whose admission [`refresh`] changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Change {
    pub seq: u64,
    pub was: Option<i64>,
    pub now: Option<i64>,
}

/// Brings the admission of `key`'s waiters up to date under `limit`, after one change of its
/// entries (a waiter added or gone, a holder added, gone or changed) or of its limit; returns
/// the waiters whose admission changed. `appended`: the change was waiter `seq` added, which
/// changes nothing when the waiter before it is not admitted either (the common case of a
/// long queue growing: one lookup).
///
/// Reads the holders and at most `max(limit, admitted before + 1)` waiters: after one change,
/// the waiters admitted before are among that many first ones (one added in front moves them
/// back by one), so every admission that has to change is seen.
pub fn refresh<I: KeyIndex>(
    ix: &mut I,
    key: &str,
    limit: u32,
    appended: Option<u64>,
) -> Result<Vec<Change>, I::Error> {
    if let Some(seq) = appended
        && ix.waits_behind(key, seq, limit)?
    {
        return Ok(Vec::new());
    }
    let state = ix.key_state(key)?;
    let holders = ix.holders(key)?;
    let before = state.map_or(0, |s| s.admitted as usize);
    let walk = holders.open(limit).max(before + 1);
    let mut changes = Vec::new();
    let mut admitted = 0u32;
    let waiters = ix.waiters(key, walk)?;
    for (position, (seq, was)) in waiters.iter().copied().enumerate() {
        let now = holders.admitted_at(limit, position);
        admitted += u32::from(now.is_some());
        if now != was {
            ix.set_admitted(key, seq, now)?;
            changes.push(Change { seq, was, now });
        }
    }
    let next = (!waiters.is_empty()).then_some(KeyState { limit, admitted });
    if next != state {
        ix.set_key_state(key, next)?;
    }
    Ok(changes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// A key's index in memory, as a store keeps it.
    #[derive(Default)]
    struct Key {
        holders: Holders,
        waiters: BTreeMap<u64, Option<i64>>,
        state: Option<KeyState>,
        reads: usize,
    }

    impl KeyIndex for Key {
        type Error = ();
        fn holders(&mut self, _: &str) -> Result<Holders, ()> {
            Ok(self.holders.clone())
        }
        fn key_state(&mut self, _: &str) -> Result<Option<KeyState>, ()> {
            Ok(self.state)
        }
        fn set_key_state(&mut self, _: &str, state: Option<KeyState>) -> Result<(), ()> {
            self.state = state;
            Ok(())
        }
        fn waiters(&mut self, _: &str, n: usize) -> Result<Vec<(u64, Option<i64>)>, ()> {
            let found: Vec<_> = self.waiters.iter().take(n).map(|(s, a)| (*s, *a)).collect();
            self.reads += found.len();
            Ok(found)
        }
        fn waits_behind(&mut self, _: &str, seq: u64, limit: u32) -> Result<bool, ()> {
            self.reads += 1;
            let before = self.waiters.range(..seq).next_back().map(|(_, a)| *a);
            Ok(self.state.is_some_and(|s| s.limit == limit) && before == Some(None))
        }
        fn set_admitted(&mut self, _: &str, seq: u64, at: Option<i64>) -> Result<(), ()> {
            self.waiters.insert(seq, at);
            Ok(())
        }
    }

    impl Key {
        fn admitted(&self) -> Vec<(u64, i64)> {
            self.waiters
                .iter()
                .filter_map(|(s, a)| a.map(|a| (*s, a)))
                .collect()
        }

        fn add(&mut self, seq: u64, limit: u32) -> Vec<Change> {
            self.waiters.insert(seq, None);
            refresh(self, "k", limit, Some(seq)).unwrap()
        }
    }

    #[test]
    fn only_the_first_waiters_are_admitted_and_a_long_queue_is_never_read_through() {
        let mut k = Key::default();
        k.holders.add(Entry::Running);
        for seq in 1..=10_000 {
            k.add(seq, 1);
        }
        assert_eq!(k.admitted(), []);
        assert!(k.reads < 30_000, "{} reads for 10,000 waiters", k.reads);
        // The run ends: the first waiter, and only it, is admitted.
        k.holders = Holders::default();
        k.reads = 0;
        let changes = refresh(&mut k, "k", 1, None).unwrap();
        assert_eq!(
            changes,
            [Change {
                seq: 1,
                was: None,
                now: Some(i64::MIN)
            }]
        );
        assert!(k.reads <= 2, "{}", k.reads);
        // It starts: the next one is admitted.
        k.waiters.remove(&1);
        k.holders.add(Entry::Running);
        assert_eq!(refresh(&mut k, "k", 1, None).unwrap(), []);
        k.holders = Holders::default();
        refresh(&mut k, "k", 1, None).unwrap();
        assert_eq!(k.admitted(), [(2, i64::MIN)]);
        // A limit of 3 admits the first three; back to 1, two of them go.
        refresh(&mut k, "k", 3, None).unwrap();
        assert_eq!(k.admitted().len(), 3);
        let changes = refresh(&mut k, "k", 1, None).unwrap();
        assert_eq!(changes.len(), 2);
        assert_eq!(k.admitted(), [(2, i64::MIN)]);
    }

    #[test]
    fn a_waiter_added_in_front_moves_the_admitted_back() {
        let mut k = Key::default();
        for seq in [10, 11, 12] {
            k.add(seq, 2);
        }
        assert_eq!(k.admitted(), [(10, i64::MIN), (11, i64::MIN)]);
        // A retry decided earlier comes back to the queue.
        k.waiters.insert(5, None);
        refresh(&mut k, "k", 2, None).unwrap();
        assert_eq!(k.admitted(), [(5, i64::MIN), (10, i64::MIN)]);
        assert_eq!(k.state.unwrap().admitted, 2);
        // Every waiter gone: nothing is kept of the key.
        k.waiters.clear();
        refresh(&mut k, "k", 2, None).unwrap();
        assert_eq!(k.state, None);
    }

    #[test]
    fn a_stopping_run_admits_at_its_time() {
        let mut h = Holders::default();
        h.add(Entry::Stopping(50));
        h.add(Entry::Stopping(100));
        assert_eq!(h.at(49), 2);
        assert_eq!(h.at(50), 1);
        assert_eq!(h.at(100), 0);
        // Limit 2: the first waiter once one of them is up, the second once both are.
        assert_eq!(h.admitted_at(2, 0), Some(50));
        assert_eq!(h.admitted_at(2, 1), Some(100));
        assert_eq!(h.admitted_at(2, 2), None);
        h.add(Entry::Running);
        assert_eq!(h.admitted_at(2, 0), Some(100));
        assert_eq!(h.admitted_at(2, 1), None);
        assert_eq!(work_at(70, [Some(100), Some(i64::MIN)]), Some(100));
        assert_eq!(work_at(170, [Some(100)]), Some(170));
        assert_eq!(work_at(70, [Some(100), None]), None);
    }
}
