//! Reads: a consistent snapshot (REPEATABLE READ, READ ONLY), and the lookups the write side
//! shares with it.

use super::session::{Session, signed, unsigned};
use pap_domain::{AuditEntry, InboxMessage, Invocation, LedgerRow, Notification, OutboxEntry};
use pap_storage::scan::{Next, Only, Order, QueueCounts, Scan};
use pap_storage::{ReadTx, Result};

pub(super) struct PgRead<'c> {
    pub(super) s: Session<'c>,
}

/// Invocation `id`; `locked`: its row locked to the end of the (write) transaction.
pub(super) fn invocation_in(s: &Session, id: &str, locked: bool) -> Result<Option<Invocation>> {
    let sql = if locked {
        "SELECT record::text FROM pap_invocations WHERE id = $1 FOR NO KEY UPDATE"
    } else {
        "SELECT record::text FROM pap_invocations WHERE id = $1"
    };
    match s.query_opt(sql, &[&id])? {
        Some(r) => s.decode(&format!("invocation {id}"), r.get(0)).map(Some),
        None => Ok(None),
    }
}

/// As [`invocation_in`], for a notification.
pub(super) fn notification_in(s: &Session, id: &str, locked: bool) -> Result<Option<Notification>> {
    let sql = if locked {
        "SELECT record::text FROM pap_notifications WHERE id = $1 FOR NO KEY UPDATE"
    } else {
        "SELECT record::text FROM pap_notifications WHERE id = $1"
    };
    match s.query_opt(sql, &[&id])? {
        Some(r) => s.decode(&format!("notification {id}"), r.get(0)).map(Some),
        None => Ok(None),
    }
}

pub(super) fn inbox_message_in(s: &Session, id: u64) -> Result<Option<InboxMessage>> {
    match s.query_opt(
        "SELECT message::text FROM pap_inbox WHERE id = $1",
        &[&signed(id)],
    )? {
        Some(r) => s.decode(&format!("inbox message {id}"), r.get(0)).map(Some),
        None => Ok(None),
    }
}

pub(super) fn session_agent_in(s: &Session, name: &str) -> Result<Option<String>> {
    Ok(s.query_opt(
        "SELECT agent FROM pap_session_agents WHERE name = $1",
        &[&name],
    )?
    .map(|r| r.get(0)))
}

pub(super) fn atp_lookup_in(s: &Session, atp_id: &str) -> Result<Option<String>> {
    Ok(s.query_opt(
        "SELECT notification_id FROM pap_atp WHERE atp_id = $1",
        &[&atp_id],
    )?
    .map(|r| r.get(0)))
}

fn ids(rows: Vec<postgres::Row>) -> Vec<String> {
    rows.iter().map(|r| r.get(0)).collect()
}

/// Records `(id, JSON)` that `sql` lists in order, as `storage::keep_last` keeps them.
/// Every row of a table in creation order, through `keep` (and with `last`, only the last
/// that many kept): read in keyset pages, so memory holds a page and what is kept, never the
/// whole table (a count that keeps nothing runs in constant memory).
fn listed<T: serde::de::DeserializeOwned>(
    s: &Session,
    what: &str,
    page_sql: &'static str,
    keep: &dyn Fn(&T) -> bool,
    last: Option<usize>,
) -> Result<(Vec<T>, usize)> {
    let mut after: (i64, String) = (i64::MIN, String::new());
    let mut page: std::vec::IntoIter<(String, String)> = Vec::new().into_iter();
    let mut done = false;
    let rows = std::iter::from_fn(|| {
        loop {
            if let Some((id, record)) = page.next() {
                return Some(s.decode(&format!("{what} {id}"), &record).map(Some));
            }
            if done {
                return None;
            }
            let fetched = match s.query(page_sql, &[&after.0, &after.1, &SCAN_PAGE]) {
                Ok(rows) => rows,
                Err(e) => {
                    done = true;
                    return Some(Err(e));
                }
            };
            done = (fetched.len() as i64) < SCAN_PAGE;
            let mut next = Vec::with_capacity(fetched.len());
            for r in &fetched {
                after = (r.get(0), r.get(1));
                next.push((r.get::<_, String>(1), r.get::<_, String>(2)));
            }
            page = next.into_iter();
        }
    });
    pap_storage::keep_last(rows, keep, last)
}

const LIST_INVOCATIONS: &str = "SELECT seq, id, record::text FROM pap_invocations \
     WHERE (seq, id) > ($1, $2) ORDER BY seq, id LIMIT $3";
const LIST_NOTIFICATIONS: &str = "SELECT seq, id, record::text FROM pap_notifications \
     WHERE (seq, id) > ($1, $2) ORDER BY seq, id LIMIT $3";

/// How many invocations one query of a scan fetches.
const SCAN_PAGE: i64 = 256;

/// Runs a keyset-paged scan: `sql` returns `seq, <record>::text` rows past `$1` (the last
/// `seq` seen, exclusive, in the query's order) with `$2` rows at most, and takes `extra` as
/// `$3`. Each record, decoded as `what`, goes to `each` until it says stop or a page comes
/// back short: no result set holds more than a page.
fn keyset_pages<T: serde::de::DeserializeOwned>(
    s: &Session,
    what: &str,
    sql: &'static str,
    mut from: i64,
    extra: Option<&(dyn postgres::types::ToSql + Sync)>,
    each: &mut dyn FnMut(T) -> Result<Next>,
) -> Result<()> {
    loop {
        let rows = match extra {
            None => s.query(sql, &[&from, &SCAN_PAGE])?,
            Some(extra) => s.query(sql, &[&from, &SCAN_PAGE, extra])?,
        };
        let full = rows.len() as i64 == SCAN_PAGE;
        for row in rows {
            from = row.get(0);
            if each(s.decode(what, row.get(1))?)? == Next::Stop {
                return Ok(());
            }
        }
        if !full {
            return Ok(());
        }
    }
}

const SCAN_ALL_OLDEST: &str = "SELECT seq, record::text FROM pap_invocations \
     WHERE seq > $1 ORDER BY seq LIMIT $2";
const SCAN_ALL_NEWEST: &str = "SELECT seq, record::text FROM pap_invocations \
     WHERE seq < $1 ORDER BY seq DESC LIMIT $2";
/// Awaiting approval as of now (`$3`): recorded so, and not past its deadline.
const SCAN_AWAITING_OLDEST: &str = "SELECT seq, record::text FROM pap_invocations \
     WHERE status = 'awaiting_approval' AND seq > $1 \
     AND (approval_deadline IS NULL OR approval_deadline > $3) ORDER BY seq LIMIT $2";
const SCAN_AWAITING_NEWEST: &str = "SELECT seq, record::text FROM pap_invocations \
     WHERE status = 'awaiting_approval' AND seq < $1 \
     AND (approval_deadline IS NULL OR approval_deadline > $3) ORDER BY seq DESC LIMIT $2";

/// The queue's counts (see `QueueCounts`) as of `$1`, overdue before `$2`: one pass over the
/// active statuses through `pap_invocations_status_seq`, never over ended invocations.
const QUEUE_COUNTS: &str = "SELECT \
     count(*) FILTER (WHERE status = 'awaiting_approval'), \
     count(*) FILTER (WHERE status = 'awaiting_approval' AND approval_deadline <= $1), \
     count(*) FILTER (WHERE status = 'queued'), \
     count(*) FILTER (WHERE status = 'running'), \
     count(*) FILTER (WHERE status = 'queued' AND work_at > -9223372036854775808 \
                      AND work_at <= $2), \
     count(*) FILTER (WHERE status = 'awaiting_approval' AND approval_deadline > $1 \
                      AND $1 - (record->>'created_at')::bigint \
                          > (approval_deadline - (record->>'created_at')::bigint) / 2), \
     min((record->>'created_at')::bigint) FILTER (WHERE status = 'awaiting_approval' \
                      AND (approval_deadline IS NULL OR approval_deadline > $1)) \
     FROM pap_invocations WHERE status IN ('awaiting_approval', 'queued', 'running')";

/// How many inbox messages one query fetches while looking for `limit` that `keep` accepts.
const INBOX_PAGE: i64 = 500;

impl ReadTx for PgRead<'_> {
    fn invocation(&self, id: &str) -> Result<Option<Invocation>> {
        invocation_in(&self.s, id, false)
    }

    fn invocations(
        &self,
        keep: &dyn Fn(&Invocation) -> bool,
        last: Option<usize>,
    ) -> Result<(Vec<Invocation>, usize)> {
        listed(&self.s, "invocation", LIST_INVOCATIONS, keep, last)
    }

    fn scan_invocations(
        &self,
        scan: &Scan,
        each: &mut dyn FnMut(Invocation) -> Result<Next>,
    ) -> Result<()> {
        let newest = scan.order == Order::Newest;
        let from: i64 = match scan.after {
            Some(seq) => signed(seq),
            None if newest => i64::MAX,
            None => -1,
        };
        let sql = match (scan.only, newest) {
            (Only::All, false) => SCAN_ALL_OLDEST,
            (Only::All, true) => SCAN_ALL_NEWEST,
            (Only::Awaiting, false) => SCAN_AWAITING_OLDEST,
            (Only::Awaiting, true) => SCAN_AWAITING_NEWEST,
        };
        let extra = (scan.only == Only::Awaiting)
            .then_some(&scan.now as &(dyn postgres::types::ToSql + Sync));
        keyset_pages(
            &self.s,
            "invocation",
            sql,
            from,
            extra,
            &mut |mut inv: Invocation| {
                inv.event = serde_json::Value::Null;
                each(inv)
            },
        )
    }

    fn queue_counts(&self, now: i64, overdue_before: i64) -> Result<QueueCounts> {
        let r = self.s.query_one(QUEUE_COUNTS, &[&now, &overdue_before])?;
        let n = |i: usize| unsigned(r.get::<_, i64>(i));
        Ok(QueueCounts {
            awaiting: n(0),
            expired_unrecorded: n(1),
            queued: n(2),
            running: n(3),
            overdue: n(4),
            past_half: n(5),
            oldest_waiting: r.get(6),
        })
    }

    fn invocation_ids(&self, keep: &dyn Fn(&str) -> bool, max: usize) -> Result<Vec<String>> {
        // Streamed: the ids are not all held at once (a caller may keep none of them).
        let mut out = Vec::new();
        self.s
            .for_each("SELECT id FROM pap_invocations ORDER BY id", |row| {
                let id: &str = row.get(0);
                if out.len() < max && keep(id) {
                    out.push(id.to_owned());
                }
                Ok(())
            })?;
        Ok(out)
    }

    fn work_due(&self, now: i64, limit: usize) -> Result<Vec<String>> {
        Ok(ids(self.s.query(
            super::write_concurrency::WORK_DUE,
            &[&now, &i64::try_from(limit).unwrap_or(i64::MAX)],
        )?))
    }

    fn approvals_due(&self, now: i64) -> Result<Vec<String>> {
        Ok(ids(self.s.query(
            "SELECT id FROM pap_invocations WHERE approval_deadline <= $1 \
             ORDER BY approval_deadline, id",
            &[&now],
        )?))
    }

    fn ledger(&self, event_id: &str) -> Result<Vec<LedgerRow>> {
        Ok(self
            .s
            .query(
                "SELECT event_id, trigger_id, kind, depth, outcome, invocation_id, decided_at \
                 FROM pap_ledger WHERE event_id = $1 ORDER BY row_no",
                &[&event_id],
            )?
            .iter()
            .map(|r| LedgerRow {
                event_id: r.get(0),
                trigger: r.get(1),
                kind: r.get(2),
                depth: u32::try_from(r.get::<_, i32>(3)).unwrap_or(0),
                outcome: r.get(4),
                invocation_id: r.get(5),
                decided_at: r.get(6),
            })
            .collect())
    }

    fn schedule_last(&self, id: &str) -> Result<Option<i64>> {
        Ok(self
            .s
            .query_opt("SELECT last_fire FROM pap_schedules WHERE id = $1", &[&id])?
            .map(|r| r.get(0)))
    }

    fn outbox_entries(&self) -> Result<Vec<(String, OutboxEntry)>> {
        self.s
            .query(
                "SELECT event_id, entry::text FROM pap_outbox ORDER BY event_id",
                &[],
            )?
            .iter()
            .map(|r| {
                let id: String = r.get(0);
                let entry = self.s.decode(&format!("outbox entry {id}"), r.get(1))?;
                Ok((id, entry))
            })
            .collect()
    }

    fn audit(&self, last: Option<usize>) -> Result<(Vec<AuditEntry>, usize)> {
        let total: i64 = self
            .s
            .query_one("SELECT count(*) FROM pap_audit", &[])?
            .get(0);
        let total = usize::try_from(total).unwrap_or(0);
        // The newest `last` by the primary key, read backwards: an OFFSET would walk past
        // every older entry first.
        let rows = match last {
            Some(n) => {
                let mut rows = self.s.query(
                    "SELECT entry::text FROM pap_audit ORDER BY seq DESC LIMIT $1",
                    &[&i64::try_from(n).unwrap_or(i64::MAX)],
                )?;
                rows.reverse();
                rows
            }
            None => self
                .s
                .query("SELECT entry::text FROM pap_audit ORDER BY seq", &[])?,
        };
        let entries = rows
            .iter()
            .map(|r| self.s.decode("audit entry", r.get(0)))
            .collect::<Result<Vec<_>>>()?;
        Ok((entries, total))
    }

    fn notification(&self, id: &str) -> Result<Option<Notification>> {
        notification_in(&self.s, id, false)
    }

    fn notifications(
        &self,
        keep: &dyn Fn(&Notification) -> bool,
        last: Option<usize>,
    ) -> Result<(Vec<Notification>, usize)> {
        listed(&self.s, "notification", LIST_NOTIFICATIONS, keep, last)
    }

    fn notification_counts(&self) -> Result<pap_storage::scan::NotifyCounts> {
        // Counted in the database, one aggregate each: no notification reaches pap.
        let mut counts = pap_storage::scan::NotifyCounts::default();
        for row in self.s.query(
            "SELECT record->>'status', count(*) FROM pap_notifications GROUP BY 1",
            &[],
        )? {
            let status: Option<String> = row.get(0);
            let n: i64 = row.get(1);
            if let Some(status) = status {
                counts
                    .by_status
                    .insert(status, u64::try_from(n).unwrap_or(0));
            }
        }
        for row in self.s.query(
            "SELECT d->>'sink', count(*) FROM pap_notifications, \
             json_array_elements(COALESCE(record->'sinks', '[]'::json)) AS d \
             WHERE d->>'state' IN ('failed', 'retrying') GROUP BY 1",
            &[],
        )? {
            let sink: Option<String> = row.get(0);
            let n: i64 = row.get(1);
            if let Some(sink) = sink {
                counts
                    .failing_by_sink
                    .insert(sink, u64::try_from(n).unwrap_or(0));
            }
        }
        Ok(counts)
    }

    fn scan_notifications(
        &self,
        order: Order,
        after: Option<u64>,
        each: &mut dyn FnMut(Notification) -> Result<Next>,
    ) -> Result<()> {
        let newest = order == Order::Newest;
        let from: i64 = match after {
            Some(seq) => signed(seq),
            None if newest => i64::MAX,
            None => -1,
        };
        let sql = if newest {
            "SELECT seq, record::text FROM pap_notifications \
             WHERE seq < $1 ORDER BY seq DESC LIMIT $2"
        } else {
            "SELECT seq, record::text FROM pap_notifications \
             WHERE seq > $1 ORDER BY seq LIMIT $2"
        };
        keyset_pages(&self.s, "notification", sql, from, None, each)
    }

    fn scan_audit(
        &self,
        after: u64,
        each: &mut dyn FnMut(AuditEntry) -> Result<Next>,
    ) -> Result<()> {
        keyset_pages(
            &self.s,
            "audit entry",
            "SELECT seq, entry::text FROM pap_audit WHERE seq > $1 ORDER BY seq LIMIT $2",
            signed(after),
            None,
            each,
        )
    }

    fn inbox_after(
        &self,
        after: u64,
        limit: usize,
        keep: &dyn Fn(&InboxMessage) -> bool,
    ) -> Result<Vec<InboxMessage>> {
        let mut out = Vec::new();
        let mut from = signed(after);
        while out.len() < limit {
            let rows = self.s.query(
                "SELECT id, message::text FROM pap_inbox WHERE id > $1 ORDER BY id LIMIT $2",
                &[&from, &INBOX_PAGE],
            )?;
            let Some(last) = rows.last() else {
                break;
            };
            from = last.get(0);
            let fetched = rows.len();
            for r in &rows {
                let id: i64 = r.get(0);
                let msg: InboxMessage = self.s.decode(&format!("inbox message {id}"), r.get(1))?;
                if keep(&msg) {
                    out.push(msg);
                    if out.len() >= limit {
                        break;
                    }
                }
            }
            if (fetched as i64) < INBOX_PAGE {
                break;
            }
        }
        Ok(out)
    }

    fn inbox_last(&self) -> Result<u64> {
        Ok(unsigned(
            self.s
                .query_one("SELECT coalesce(max(id), 0) FROM pap_inbox", &[])?
                .get(0),
        ))
    }

    fn inbox_message(&self, id: u64) -> Result<Option<InboxMessage>> {
        inbox_message_in(&self.s, id)
    }

    fn sessions(&self) -> Result<Vec<(String, i64)>> {
        Ok(self
            .s
            .query(
                "SELECT name, opened_at FROM pap_sessions ORDER BY name",
                &[],
            )?
            .iter()
            .map(|r| (r.get(0), r.get(1)))
            .collect())
    }

    fn session_agent(&self, name: &str) -> Result<Option<String>> {
        session_agent_in(&self.s, name)
    }

    fn queue_peek(&self, agent: &str) -> Result<Vec<String>> {
        Ok(ids(self.s.query(
            "SELECT notification_id FROM pap_agent_queue WHERE agent = $1 ORDER BY seq",
            &[&agent],
        )?))
    }

    fn atp_lookup(&self, atp_id: &str) -> Result<Option<String>> {
        atp_lookup_in(&self.s, atp_id)
    }

    fn debounce_next_due(&self) -> Result<Option<i64>> {
        Ok(self
            .s
            .query_one("SELECT min(due_at) FROM pap_debounce", &[])?
            .get(0))
    }

    fn any_job_due(&self, now: i64) -> Result<bool> {
        Ok(self
            .s
            .query_one(
                "SELECT EXISTS (SELECT 1 FROM pap_jobs WHERE due_at <= $1)",
                &[&now],
            )?
            .get(0))
    }

    fn jobs_between(&self, after: i64, until: i64, limit: usize) -> Result<Vec<(i64, String)>> {
        Ok(self
            .s
            .query(
                "SELECT due_at, job FROM pap_jobs WHERE due_at > $1 AND due_at <= $2 \
                 ORDER BY due_at, job LIMIT $3",
                &[&after, &until, &i64::try_from(limit).unwrap_or(i64::MAX)],
            )?
            .iter()
            .map(|r| (r.get(0), r.get(1)))
            .collect())
    }
}
