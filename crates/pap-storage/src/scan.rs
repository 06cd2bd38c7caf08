//! Reads whose cost must not grow with the store: invocations in creation order from a
//! cursor (keyset on the sequence number, never an offset, so a page's cursor still names the
//! right next rows after inserts), and the queue's counts taken from indexes, never by
//! loading the set.

use crate::domain::{Invocation, Status};

/// Which way a scan walks the creation order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    Oldest,
    Newest,
}

/// Which invocations a scan reads from an index; any other filter is the caller's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Only {
    All,
    /// Awaiting approval as of the scan's `now` (an approval past its deadline has expired).
    Awaiting,
}

/// One scan: rows strictly beyond `after` (a sequence number) in `order`.
#[derive(Debug, Clone, Copy)]
pub struct Scan {
    pub only: Only,
    pub order: Order,
    pub after: Option<u64>,
    pub now: i64,
}

impl Scan {
    /// Every invocation, oldest first.
    pub fn all(now: i64) -> Scan {
        Scan {
            only: Only::All,
            order: Order::Oldest,
            after: None,
            now,
        }
    }

    /// Whether `seq` lies beyond the cursor in this scan's order.
    pub fn beyond(&self, seq: u64) -> bool {
        match (self.after, self.order) {
            (None, _) => true,
            (Some(after), Order::Oldest) => seq > after,
            (Some(after), Order::Newest) => seq < after,
        }
    }

    /// Whether `inv` belongs to this scan (the stores read from an index; this is the rule
    /// the index implements, for the rows a store filters itself).
    pub fn keeps(&self, inv: &Invocation) -> bool {
        match self.only {
            Only::All => true,
            Only::Awaiting => inv.status_at(self.now) == Status::AwaitingApproval,
        }
    }
}

/// What a scan's callback says after each row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    More,
    Stop,
}

/// The invocations not yet ended, counted as of `now` from the stores' indexes (redb) or by
/// indexed counts (PostgreSQL): what `pap status`, `/status` and `/metrics` show.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueueCounts {
    /// Awaiting approval, past their deadline or not (the recorded status).
    pub awaiting: u64,
    /// Of those, past their deadline (expired as of now, not yet recorded). Counted up to
    /// [`COUNTED_EXACTLY`] (see there).
    pub expired_unrecorded: u64,
    pub queued: u64,
    pub running: u64,
    /// Queued work due before the `overdue_before` asked for (work waiting for a
    /// concurrency key is not due, so not overdue). Counted up to [`COUNTED_EXACTLY`].
    pub overdue: u64,
    /// Awaiting approval as of now, with more than half their time to answer gone. Counted
    /// up to [`COUNTED_EXACTLY`].
    pub past_half: u64,
    /// When the oldest approval awaiting an answer as of now was made (ms).
    pub oldest_waiting: Option<i64>,
}

/// A store may count what depends on the time (overdue work, approvals past half or past
/// their deadline) from the side of the moment that holds fewer, walking at most this many
/// entries a side; when both sides hold more, the count reads this bound, a floor: "at least
/// 10000". So a count costs what the smaller side holds, never the whole queue.
pub const COUNTED_EXACTLY: u64 = 10_000;

impl QueueCounts {
    /// `n` as a person reads it: "at least N" when it may be the floor of a longer count
    /// (a count past the bound was counted from its shorter side, so it is exact).
    pub fn said(n: u64) -> String {
        if n == COUNTED_EXACTLY {
            format!("at least {COUNTED_EXACTLY}")
        } else {
            n.to_string()
        }
    }
}

impl QueueCounts {
    /// Awaiting an answer as of now.
    pub fn waiting(&self) -> u64 {
        self.awaiting.saturating_sub(self.expired_unrecorded)
    }
}

/// Notifications by recorded status, and each sink's failing deliveries (failed for good, or
/// being retried), from kept counters (redb) or one aggregate query (PostgreSQL): never by
/// reading the notifications into pap.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NotifyCounts {
    pub by_status: std::collections::BTreeMap<String, u64>,
    pub failing_by_sink: std::collections::BTreeMap<String, u64>,
}

impl NotifyCounts {
    /// Moves `n` dispatched notifications to escalated: their delivery deadline passed, and
    /// no writer recorded it yet (ANP 6.2: every reader shows them escalated).
    pub fn move_escalated(&mut self, n: u64) {
        use crate::domain::NotifyStatus;
        if n == 0 {
            return;
        }
        let dispatched = NotifyStatus::Dispatched.as_str().to_owned();
        if let Some(d) = self.by_status.get_mut(&dispatched) {
            *d = d.saturating_sub(n);
            if *d == 0 {
                self.by_status.remove(&dispatched);
            }
        }
        *self
            .by_status
            .entry(NotifyStatus::Escalated.as_str().to_owned())
            .or_default() += n;
    }
}

/// Whether more than half of the time to answer an approval made at `created_at` with
/// `deadline` has passed at `now` (the rule `pap status` warns by).
pub fn past_half(created_at: i64, deadline: Option<i64>, now: i64) -> bool {
    deadline.is_some_and(|deadline| {
        now.saturating_sub(created_at) > deadline.saturating_sub(created_at) / 2
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cursor_excludes_its_own_row_in_either_order() {
        let mut s = Scan::all(0);
        s.after = Some(5);
        assert!(s.beyond(6) && !s.beyond(5) && !s.beyond(4));
        s.order = Order::Newest;
        assert!(s.beyond(4) && !s.beyond(5) && !s.beyond(6));
    }

    #[test]
    fn an_approval_is_late_past_half_its_deadline() {
        assert!(!past_half(1_000, Some(11_000), 6_000));
        assert!(past_half(1_000, Some(11_000), 6_001));
        assert!(!past_half(1_000, None, i64::MAX));
    }
}
