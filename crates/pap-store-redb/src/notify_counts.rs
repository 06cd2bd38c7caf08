//! Notification counts kept beside the notifications (format 9): how many have each recorded
//! status (`notify.count.<status>` in `META`) and how many deliveries of each sink are
//! failing, failed for good or being retried (`notify.failing.<sink>`). Each write of a
//! notification moves its counts from its previous record's in the same transaction, so
//! `/metrics` counts without reading a notification however many the store keeps.

use std::collections::BTreeMap;

use redb::ReadableTable;

use super::tx::Tx;
use super::{Result, redb_err};
use pap_domain::{Notification, SinkState};

pub(super) const STATUS_PREFIX: &str = "notify.count.";
pub(super) const FAILING_PREFIX: &str = "notify.failing.";

/// The counters one notification adds to, each by one.
fn counted(n: &Notification) -> Vec<String> {
    let mut keys = vec![format!("{STATUS_PREFIX}{}", n.status.as_str())];
    keys.extend(
        n.sinks
            .iter()
            .filter(|d| matches!(d.state, SinkState::Failed | SinkState::Retrying))
            .map(|d| format!("{FAILING_PREFIX}{}", d.sink)),
    );
    keys
}

impl Tx<'_> {
    /// Moves the counts of a notification from `old` (its previous record, if any) to `new`.
    pub(super) fn count_notification(
        &mut self,
        old: Option<&Notification>,
        new: &Notification,
    ) -> Result<()> {
        let mut by: BTreeMap<String, i64> = BTreeMap::new();
        for key in old.map(counted).unwrap_or_default() {
            *by.entry(key).or_default() -= 1;
        }
        for key in counted(new) {
            *by.entry(key).or_default() += 1;
        }
        for (key, by) in by.into_iter().filter(|(_, by)| *by != 0) {
            self.add_to_counter(&key, by)?;
        }
        Ok(())
    }

    /// Takes a removed notification's counts away.
    pub(super) fn uncount_notification(&mut self, gone: &Notification) -> Result<()> {
        for key in counted(gone) {
            self.add_to_counter(&key, -1)?;
        }
        Ok(())
    }

    fn add_to_counter(&mut self, key: &str, by: i64) -> Result<()> {
        let next = self.seq_value(key)?.saturating_add_signed(by);
        let path = self.path().to_path_buf();
        if next == 0 {
            self.meta.remove(key).map_err(|e| redb_err(&path, e))?;
        } else {
            self.meta
                .insert(key, next)
                .map_err(|e| redb_err(&path, e))?;
        }
        Ok(())
    }

    /// Format 8 to 9: counts every notification once.
    pub(super) fn build_notification_counts(&mut self) -> Result<()> {
        let path = self.path().to_path_buf();
        let mut counts: BTreeMap<String, u64> = BTreeMap::new();
        {
            let t = self.notify_tables()?;
            for row in t.notifications.iter().map_err(|e| redb_err(&path, e))? {
                let (_, bytes) = row.map_err(|e| redb_err(&path, e))?;
                let n: Notification = super::tx::decode(&path, bytes.value())?;
                for key in counted(&n) {
                    *counts.entry(key).or_default() += 1;
                }
            }
        }
        for (key, n) in counts {
            self.meta
                .insert(key.as_str(), n)
                .map_err(|e| redb_err(&path, e))?;
        }
        Ok(())
    }
}
