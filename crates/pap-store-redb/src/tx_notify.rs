//! Typed access to the notification tables (ANP ledger, inbox, agent queues, sessions).
//! A write transaction opens them on first use, so the decision hot path, which never
//! touches them, does not pay for opening eight more tables per group.

use redb::{ReadOnlyTable, ReadTransaction, ReadableTable, Table, WriteTransaction};

use super::tables::*;
use super::tx::ids_due_in;
use super::tx::{Reader, Tx, decode, encode};
use super::{Result, redb_err};
use pap_domain::{InboxMessage, Notification};

pub(super) struct NotifyTables<'t> {
    pub(super) notifications: Table<'t, &'static str, &'static [u8]>,
    pub(super) order: Table<'t, u64, &'static str>,
    pub(super) dedup: Table<'t, &'static str, &'static str>,
    due: Table<'t, (i64, &'static str), ()>,
    pub(super) inbox: Table<'t, u64, &'static [u8]>,
    queue: Table<'t, (&'static str, u64), &'static str>,
    sessions: Table<'t, &'static str, i64>,
    session_agents: Table<'t, &'static str, &'static str>,
    pub(super) atp: Table<'t, &'static str, &'static str>,
}

impl<'t> NotifyTables<'t> {
    pub(super) fn open(txn: &'t WriteTransaction, path: &std::path::Path) -> Result<Self> {
        let e = |e| redb_err(path, e);
        Ok(NotifyTables {
            notifications: txn.open_table(NOTIFICATIONS).map_err(e)?,
            order: txn.open_table(NOTIFY_ORDER).map_err(e)?,
            dedup: txn.open_table(NOTIFY_DEDUP).map_err(e)?,
            due: txn.open_table(NOTIFY_DUE).map_err(e)?,
            inbox: txn.open_table(INBOX).map_err(e)?,
            queue: txn.open_table(AGENT_QUEUE).map_err(e)?,
            sessions: txn.open_table(SESSIONS).map_err(e)?,
            session_agents: txn.open_table(SESSION_AGENTS).map_err(e)?,
            atp: txn.open_table(ATP_INDEX).map_err(e)?,
        })
    }
}

impl Tx<'_> {
    /// Stores an inbox message under its own id (a copy of a state).
    pub(super) fn import_inbox(&mut self, msg: &InboxMessage) -> Result<()> {
        let path = self.path().to_path_buf();
        let bytes = encode(msg);
        let t = self.notify_tables()?;
        t.inbox
            .insert(msg.id, bytes.as_slice())
            .map_err(|e| redb_err(&path, e))?;
        self.raise_counter("inbox_seq", msg.id)
    }
}

/// Read-only notification tables, for listings and the look before a write.
pub struct NotifyReader {
    path: std::path::PathBuf,
    notifications: ReadOnlyTable<&'static str, &'static [u8]>,
    order: ReadOnlyTable<u64, &'static str>,
    due: ReadOnlyTable<(i64, &'static str), ()>,
    inbox: ReadOnlyTable<u64, &'static [u8]>,
    queue: ReadOnlyTable<(&'static str, u64), &'static str>,
    sessions: ReadOnlyTable<&'static str, i64>,
    /// `None` in a file from before the table (see `tables::SESSION_AGENTS`).
    session_agents: Option<ReadOnlyTable<&'static str, &'static str>>,
    atp: ReadOnlyTable<&'static str, &'static str>,
}

impl NotifyReader {
    pub(super) fn open(txn: &ReadTransaction, path: &std::path::Path) -> Result<NotifyReader> {
        let e = |e| redb_err(path, e);
        Ok(NotifyReader {
            path: path.to_path_buf(),
            notifications: txn.open_table(NOTIFICATIONS).map_err(e)?,
            order: txn.open_table(NOTIFY_ORDER).map_err(e)?,
            due: txn.open_table(NOTIFY_DUE).map_err(e)?,
            inbox: txn.open_table(INBOX).map_err(e)?,
            queue: txn.open_table(AGENT_QUEUE).map_err(e)?,
            sessions: txn.open_table(SESSIONS).map_err(e)?,
            session_agents: match txn.open_table(SESSION_AGENTS) {
                Ok(table) => Some(table),
                Err(redb::TableError::TableDoesNotExist(_)) => None,
                Err(other) => return Err(redb_err(path, other)),
            },
            atp: txn.open_table(ATP_INDEX).map_err(e)?,
        })
    }

    pub fn notification(&self, id: &str) -> Result<Option<Notification>> {
        let found = self
            .notifications
            .get(id)
            .map_err(|e| redb_err(&self.path, e))?;
        found.map(|v| decode(&self.path, v.value())).transpose()
    }

    /// Notifications in creation order, those `keep` accepts; with `last`, the last that many.
    pub fn notifications(
        &self,
        keep: impl Fn(&Notification) -> bool,
        last: Option<usize>,
    ) -> Result<(Vec<Notification>, usize)> {
        let path = &self.path;
        let ids = self
            .order
            .iter()
            .map_err(|e| redb_err(path, e))?
            .map(|row| {
                let (_, id) = row.map_err(|e| redb_err(path, e))?;
                Ok(id.value().to_owned())
            });
        pap_storage::keep_last(ids.map(|id| self.notification(&id?)), keep, last)
    }

    /// Notifications in `order` after number `after`, until `each` says stop.
    pub fn scan(
        &self,
        order: pap_storage::scan::Order,
        after: Option<u64>,
        each: &mut dyn FnMut(Notification) -> Result<pap_storage::scan::Next>,
    ) -> Result<()> {
        use pap_storage::scan::{Next, Order};
        let path = &self.path;
        let rows = match (order, after) {
            (Order::Oldest, None) => self.order.range(0..),
            (Order::Oldest, Some(a)) => self.order.range(a.saturating_add(1)..),
            (Order::Newest, None) => self.order.range(0..),
            (Order::Newest, Some(a)) => self.order.range(..a),
        }
        .map_err(|e| redb_err(path, e))?;
        let mut visit = |row: std::result::Result<_, redb::StorageError>| -> Result<bool> {
            let (_, id): (redb::AccessGuard<u64>, redb::AccessGuard<&str>) =
                row.map_err(|e| redb_err(path, e))?;
            Ok(match self.notification(id.value())? {
                Some(n) => each(n)? == Next::Stop,
                None => false,
            })
        };
        match order {
            Order::Oldest => {
                for row in rows {
                    if visit(row)? {
                        break;
                    }
                }
            }
            Order::Newest => {
                for row in rows.rev() {
                    if visit(row)? {
                        break;
                    }
                }
            }
        }
        Ok(())
    }

    /// Inbox messages with an id strictly above `after`, oldest first, those `keep` accepts,
    /// at most `limit`.
    pub fn inbox_after(
        &self,
        after: u64,
        limit: usize,
        keep: impl Fn(&InboxMessage) -> bool,
    ) -> Result<Vec<InboxMessage>> {
        let mut out = Vec::new();
        if limit == 0 {
            return Ok(out);
        }
        let start = after.saturating_add(1);
        if start == 0 || after == u64::MAX {
            return Ok(out);
        }
        for row in self
            .inbox
            .range(start..)
            .map_err(|e| redb_err(&self.path, e))?
        {
            let (_, v) = row.map_err(|e| redb_err(&self.path, e))?;
            let msg: InboxMessage = decode(&self.path, v.value())?;
            if keep(&msg) {
                out.push(msg);
                if out.len() >= limit {
                    break;
                }
            }
        }
        Ok(out)
    }

    /// The newest inbox id (0 when the inbox is empty).
    pub fn inbox_last(&self) -> Result<u64> {
        let last = self.inbox.last().map_err(|e| redb_err(&self.path, e))?;
        Ok(last.map_or(0, |(k, _)| k.value()))
    }

    pub fn inbox_message(&self, id: u64) -> Result<Option<InboxMessage>> {
        let found = self.inbox.get(id).map_err(|e| redb_err(&self.path, e))?;
        found.map(|v| decode(&self.path, v.value())).transpose()
    }

    /// Open sessions with the time they were opened.
    pub fn sessions(&self) -> Result<Vec<(String, i64)>> {
        let mut out = Vec::new();
        for row in self.sessions.iter().map_err(|e| redb_err(&self.path, e))? {
            let (k, v) = row.map_err(|e| redb_err(&self.path, e))?;
            out.push((k.value().to_owned(), v.value()));
        }
        Ok(out)
    }

    /// The agent a session is bound to, if any.
    pub fn session_agent(&self, name: &str) -> Result<Option<String>> {
        let Some(table) = &self.session_agents else {
            return Ok(None);
        };
        let found = table.get(name).map_err(|e| redb_err(&self.path, e))?;
        Ok(found.map(|v| v.value().to_owned()))
    }

    /// What waits in `agent`'s queue, oldest first (the look before taking it mid-loop).
    pub fn queue_peek(&self, agent: &str) -> Result<Vec<String>> {
        let mut ids = Vec::new();
        for row in self
            .queue
            .range((agent, 0)..=(agent, u64::MAX))
            .map_err(|e| redb_err(&self.path, e))?
        {
            let (_, v) = row.map_err(|e| redb_err(&self.path, e))?;
            ids.push(v.value().to_owned());
        }
        Ok(ids)
    }

    pub fn atp_lookup(&self, atp_id: &str) -> Result<Option<String>> {
        let found = self.atp.get(atp_id).map_err(|e| redb_err(&self.path, e))?;
        Ok(found.map(|v| v.value().to_owned()))
    }

    /// Whether any timer job is due at or before `now` (the look before a write).
    pub fn any_job_due(&self, now: i64) -> Result<bool> {
        Ok(!jobs_in(&self.due, now, 1, &self.path)?.is_empty())
    }

    pub fn jobs_between(&self, after: i64, until: i64, limit: usize) -> Result<Vec<(i64, String)>> {
        if after >= until {
            return Ok(Vec::new());
        }
        let mut found = Vec::new();
        for row in self
            .due
            .range((after.saturating_add(1), "")..=(until, "\u{10FFFF}"))
            .map_err(|e| redb_err(&self.path, e))?
            .take(limit)
        {
            let (k, _) = row.map_err(|e| redb_err(&self.path, e))?;
            let (at, job) = k.value();
            found.push((at, job.to_owned()));
        }
        Ok(found)
    }
}

fn jobs_in(
    index: &impl ReadableTable<(i64, &'static str), ()>,
    now: i64,
    limit: usize,
    path: &std::path::Path,
) -> Result<Vec<(i64, String)>> {
    let mut due = Vec::new();
    for row in index
        .range(..=(now, "\u{10FFFF}"))
        .map_err(|e| redb_err(path, e))?
        .take(limit)
    {
        let (k, _) = row.map_err(|e| redb_err(path, e))?;
        let (at, job) = k.value();
        due.push((at, job.to_owned()));
    }
    Ok(due)
}

impl Reader {
    /// The notification tables of this snapshot.
    pub fn notify(&self) -> Result<&NotifyReader> {
        Ok(&self.notify)
    }
}

impl pap_storage::ApprovalTx for Tx<'_> {
    /// Invocations awaiting approval whose deadline is at or before `now`.
    fn approvals_due(&mut self, now: i64) -> Result<Vec<String>> {
        self.write_fresh()?;
        ids_due_in(&self.approval_deadlines, now, usize::MAX, &self.path)
    }

    fn atp_put(&mut self, atp_id: &str, notification: &str) -> Result<()> {
        let path = self.path().to_path_buf();
        let t = self.notify_tables()?;
        t.atp
            .insert(atp_id, notification)
            .map_err(|e| redb_err(&path, e))?;
        Ok(())
    }

    fn atp_lookup(&mut self, atp_id: &str) -> Result<Option<String>> {
        let path = self.path().to_path_buf();
        let t = self.notify_tables()?;
        let found = t.atp.get(atp_id).map_err(|e| redb_err(&path, e))?;
        Ok(found.map(|v| v.value().to_owned()))
    }
}

impl pap_storage::InboxTx for Tx<'_> {
    fn notification(&mut self, id: &str) -> Result<Option<Notification>> {
        let path = self.path().to_path_buf();
        let t = self.notify_tables()?;
        let found = t.notifications.get(id).map_err(|e| redb_err(&path, e))?;
        found.map(|v| decode(&path, v.value())).transpose()
    }

    /// Inserts or updates a notification (a new one also joins the listing order).
    fn put_notification(&mut self, n: &Notification) -> Result<()> {
        let path = self.path().to_path_buf();
        let bytes = encode(n);
        self.notifications_changed = true;
        let old: Option<Notification> = {
            let t = self.notify_tables()?;
            let replaced = t
                .notifications
                .insert(n.id.as_str(), bytes.as_slice())
                .map_err(|e| redb_err(&path, e))?;
            let old = match replaced {
                Some(bytes) => Some(decode(&path, bytes.value())?),
                None => None,
            };
            if old.is_none() {
                t.order
                    .insert(n.seq, n.id.as_str())
                    .map_err(|e| redb_err(&path, e))?;
            }
            old
        };
        self.count_notification(old.as_ref(), n)
    }

    /// The latest notification carrying a deduplication key.
    fn dedup_lookup(&mut self, key: &str) -> Result<Option<String>> {
        let path = self.path().to_path_buf();
        let t = self.notify_tables()?;
        let found = t.dedup.get(key).map_err(|e| redb_err(&path, e))?;
        Ok(found.map(|v| v.value().to_owned()))
    }

    fn set_dedup(&mut self, key: &str, id: &str) -> Result<()> {
        let path = self.path().to_path_buf();
        let t = self.notify_tables()?;
        t.dedup.insert(key, id).map_err(|e| redb_err(&path, e))?;
        Ok(())
    }

    /// Schedules a timer job (`watchdog:<id>`, `sink:<name>:<id>`) at `at`.
    fn add_job(&mut self, at: i64, job: &str) -> Result<()> {
        let path = self.path().to_path_buf();
        let t = self.notify_tables()?;
        t.due
            .insert((at, job), ())
            .map_err(|e| redb_err(&path, e))?;
        Ok(())
    }

    fn remove_job(&mut self, at: i64, job: &str) -> Result<()> {
        let path = self.path().to_path_buf();
        let t = self.notify_tables()?;
        t.due.remove((at, job)).map_err(|e| redb_err(&path, e))?;
        Ok(())
    }

    /// Jobs due at or before `now`, earliest first, at most `limit`.
    fn jobs_due(&mut self, now: i64, limit: usize) -> Result<Vec<(i64, String)>> {
        let path = self.path().to_path_buf();
        let t = self.notify_tables()?;
        jobs_in(&t.due, now, limit, &path)
    }

    /// Appends to the inbox; the message's id is assigned here, strictly above every earlier
    /// one (write transactions are serialised, across processes too).
    fn inbox_append(&mut self, mut msg: InboxMessage) -> Result<u64> {
        msg.id = self.next_seq("inbox_seq")?;
        self.inbox_appended = Some(msg.id);
        let path = self.path().to_path_buf();
        let bytes = encode(&msg);
        let t = self.notify_tables()?;
        t.inbox
            .insert(msg.id, bytes.as_slice())
            .map_err(|e| redb_err(&path, e))?;
        Ok(msg.id)
    }

    /// The highest inbox id so far (0 when empty).
    fn inbox_mark(&self) -> Result<u64> {
        self.seq_value("inbox_seq")
    }

    fn inbox_message(&mut self, id: u64) -> Result<Option<InboxMessage>> {
        let path = self.path().to_path_buf();
        let t = self.notify_tables()?;
        let found = t.inbox.get(id).map_err(|e| redb_err(&path, e))?;
        found.map(|v| decode(&path, v.value())).transpose()
    }

    /// Queues a notification for an agent's next invocation.
    fn queue_push(&mut self, agent: &str, id: &str) -> Result<()> {
        let seq = self.next_seq("queue_seq")?;
        let path = self.path().to_path_buf();
        let t = self.notify_tables()?;
        t.queue
            .insert((agent, seq), id)
            .map_err(|e| redb_err(&path, e))?;
        Ok(())
    }

    /// Takes every notification queued for `agent`, oldest first (they leave the queue).
    fn queue_take(&mut self, agent: &str) -> Result<Vec<String>> {
        let path = self.path().to_path_buf();
        let t = self.notify_tables()?;
        let mut taken = Vec::new();
        for row in t
            .queue
            .range((agent, 0)..=(agent, u64::MAX))
            .map_err(|e| redb_err(&path, e))?
        {
            let (k, v) = row.map_err(|e| redb_err(&path, e))?;
            taken.push((k.value().1, v.value().to_owned()));
        }
        for (seq, _) in &taken {
            t.queue
                .remove((agent, *seq))
                .map_err(|e| redb_err(&path, e))?;
        }
        Ok(taken.into_iter().map(|(_, id)| id).collect())
    }

    fn session_open(&mut self, name: &str, at: i64) -> Result<bool> {
        let path = self.path().to_path_buf();
        let t = self.notify_tables()?;
        let old = t
            .sessions
            .insert(name, at)
            .map_err(|e| redb_err(&path, e))?;
        Ok(old.is_none())
    }

    fn session_close(&mut self, name: &str) -> Result<bool> {
        let path = self.path().to_path_buf();
        let t = self.notify_tables()?;
        let old = t.sessions.remove(name).map_err(|e| redb_err(&path, e))?;
        t.session_agents
            .remove(name)
            .map_err(|e| redb_err(&path, e))?;
        Ok(old.is_some())
    }

    fn session_is_open(&mut self, name: &str) -> Result<bool> {
        let path = self.path().to_path_buf();
        let t = self.notify_tables()?;
        let found = t.sessions.get(name).map_err(|e| redb_err(&path, e))?;
        Ok(found.is_some())
    }

    /// Binds an open session to `agent` (or unbinds it).
    fn session_bind(&mut self, name: &str, agent: Option<&str>) -> Result<()> {
        let path = self.path().to_path_buf();
        let t = self.notify_tables()?;
        match agent {
            Some(agent) => t.session_agents.insert(name, agent).map(drop),
            None => t.session_agents.remove(name).map(drop),
        }
        .map_err(|e| redb_err(&path, e))
    }

    fn session_agent(&mut self, name: &str) -> Result<Option<String>> {
        let path = self.path().to_path_buf();
        let t = self.notify_tables()?;
        let found = t.session_agents.get(name).map_err(|e| redb_err(&path, e))?;
        Ok(found.map(|v| v.value().to_owned()))
    }
}
