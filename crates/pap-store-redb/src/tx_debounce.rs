//! Debounce state (a pap extension): per (trigger, window key) where the burst stands, and an
//! index of trailing debounces by the time they fire, so serve finds what is due without
//! reading every key. The tables are opened on use: only triggers with a debounce pay for
//! them, and a format-6 file from before them gets them at its first such write.

use redb::ReadableTable;

use super::tables::{DEBOUNCE, DEBOUNCE_DUE};
use super::tx::{Tx, decode, encode};
use super::{Result, redb_err};
use pap_domain::DebounceState;
use pap_storage::purge::{DebounceCursor, Purged};

impl Tx<'_> {
    pub fn debounce_state(&self, trigger: &str, key: &str) -> Result<Option<DebounceState>> {
        let table = self
            .txn
            .open_table(DEBOUNCE)
            .map_err(|x| redb_err(&self.path, x))?;
        let found = table
            .get((trigger, key))
            .map_err(|x| redb_err(&self.path, x))?;
        found.map(|v| decode(&self.path, v.value())).transpose()
    }

    /// Records the state, keeping the due index in step: the old pending fire's entry goes,
    /// the new one's (if any) comes.
    pub fn debounce_put(&mut self, trigger: &str, key: &str, state: &DebounceState) -> Result<()> {
        let old = self.debounce_state(trigger, key)?;
        let mut due = self
            .txn
            .open_table(DEBOUNCE_DUE)
            .map_err(|x| redb_err(&self.path, x))?;
        if let Some(p) = old.and_then(|s| s.pending) {
            due.remove((p.due, trigger, key))
                .map_err(|x| redb_err(&self.path, x))?;
        }
        if let Some(p) = &state.pending {
            due.insert((p.due, trigger, key), ())
                .map_err(|x| redb_err(&self.path, x))?;
        }
        let mut table = self
            .txn
            .open_table(DEBOUNCE)
            .map_err(|x| redb_err(&self.path, x))?;
        table
            .insert((trigger, key), encode(state).as_slice())
            .map_err(|x| redb_err(&self.path, x))?;
        Ok(())
    }

    /// (trigger, window key) of trailing debounces due at or before `now`, earliest first,
    /// at most `limit`.
    pub fn debounce_due(&self, now: i64, limit: usize) -> Result<Vec<(String, String)>> {
        let due = self
            .txn
            .open_table(DEBOUNCE_DUE)
            .map_err(|x| redb_err(&self.path, x))?;
        let mut out = Vec::new();
        for entry in due
            .range((i64::MIN, "", "")..)
            .map_err(|x| redb_err(&self.path, x))?
            .take(limit)
        {
            let (k, _) = entry.map_err(|x| redb_err(&self.path, x))?;
            let (at, trigger, key) = k.value();
            if at > now {
                break;
            }
            out.push((trigger.to_owned(), key.to_owned()));
        }
        Ok(out)
    }

    /// Looks at up to `limit` debounce states after `after`, removing those that can no
    /// longer change a decision: no fire pending, and the burst over (`quiet_of` gives a
    /// trigger's quiet period now; `None`: the trigger no longer debounces, so its states
    /// go). Returns where the next step goes on (`None`: the end was reached).
    pub fn purge_debounce(
        &mut self,
        now: i64,
        quiet_of: &dyn Fn(&str) -> Option<i64>,
        after: Option<&DebounceCursor>,
        limit: usize,
    ) -> Result<(Purged, Option<DebounceCursor>)> {
        use std::ops::Bound;
        let mut table = self
            .txn
            .open_table(DEBOUNCE)
            .map_err(|e| redb_err(&self.path, e))?;
        let mut stale: Vec<(String, String)> = Vec::new();
        let (mut scanned, mut last) = (0, None);
        {
            let start = match after {
                Some((t, k)) => Bound::Excluded((t.as_str(), k.as_str())),
                None => Bound::Unbounded,
            };
            let range = table
                .range::<(&str, &str)>((start, Bound::Unbounded))
                .map_err(|e| redb_err(&self.path, e))?;
            for entry in range {
                if scanned >= limit {
                    break;
                }
                let (k, v) = entry.map_err(|e| redb_err(&self.path, e))?;
                let (trigger, key) = k.value();
                scanned += 1;
                last = Some((trigger.to_owned(), key.to_owned()));
                let state: DebounceState = decode(&self.path, v.value())?;
                let over = quiet_of(trigger)
                    .is_none_or(|quiet| state.last_seen.saturating_add(quiet) <= now);
                if state.pending.is_none() && over {
                    stale.push((trigger.to_owned(), key.to_owned()));
                }
            }
        }
        for (trigger, key) in &stale {
            table
                .remove((trigger.as_str(), key.as_str()))
                .map_err(|e| redb_err(&self.path, e))?;
        }
        Ok(Purged::walked(stale.len(), scanned, limit, false, last))
    }
}
