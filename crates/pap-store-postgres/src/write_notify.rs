//! The notification side of a write transaction: the ANP ledger, deduplication keys, timer
//! jobs, the inbox, agents' queues, sessions and the ATP index.

use super::session::{encode, signed, unsigned};
use super::write::PgWrite;
use pap_domain::{InboxMessage, Notification};
use pap_storage::Result;

impl PgWrite<'_> {
    pub(super) fn notify_put(&self, n: &Notification) -> Result<()> {
        self.s.execute(
            "INSERT INTO pap_notifications (id, seq, record) VALUES ($1, $2, $3::text::json) \
             ON CONFLICT (id) DO UPDATE SET record = EXCLUDED.record",
            &[&n.id, &signed(n.seq), &encode(n)],
        )?;
        Ok(())
    }

    /// The latest notification carrying `key`, the key locked to the commit: two nodes
    /// producing under one key take turns, so the second finds the first's notification.
    pub(super) fn notify_dedup_lookup(&self, key: &str) -> Result<Option<String>> {
        self.lock("dedup", &[key])?;
        Ok(self
            .s
            .query_opt(
                "SELECT notification_id FROM pap_notify_dedup WHERE key = $1",
                &[&key],
            )?
            .map(|r| r.get(0)))
    }

    pub(super) fn notify_set_dedup(&self, key: &str, id: &str) -> Result<()> {
        self.s.execute(
            "INSERT INTO pap_notify_dedup (key, notification_id) VALUES ($1, $2) \
             ON CONFLICT (key) DO UPDATE SET notification_id = EXCLUDED.notification_id",
            &[&key, &id],
        )?;
        Ok(())
    }

    pub(super) fn jobs_add(&self, at: i64, job: &str) -> Result<()> {
        self.s.execute(
            "INSERT INTO pap_jobs (due_at, job) VALUES ($1, $2) ON CONFLICT DO NOTHING",
            &[&at, &job],
        )?;
        Ok(())
    }

    pub(super) fn jobs_remove(&self, at: i64, job: &str) -> Result<()> {
        self.s.execute(
            "DELETE FROM pap_jobs WHERE due_at = $1 AND job = $2",
            &[&at, &job],
        )?;
        Ok(())
    }

    /// Due jobs, locked: a node working through them is not joined by another on the same.
    pub(super) fn jobs_take_due(&self, now: i64, max: usize) -> Result<Vec<(i64, String)>> {
        Ok(self
            .s
            .query(
                "SELECT due_at, job FROM pap_jobs WHERE due_at <= $1 ORDER BY due_at, job \
                 LIMIT $2 FOR UPDATE SKIP LOCKED",
                &[&now, &i64::try_from(max).unwrap_or(i64::MAX)],
            )?
            .iter()
            .map(|r| (r.get(0), r.get(1)))
            .collect())
    }

    /// Appends to the inbox. The id comes from the counter row, which stays locked until
    /// this transaction ends: the next appender waits, so ids become visible in order.
    pub(super) fn inbox_push(&mut self, mut msg: InboxMessage) -> Result<u64> {
        let id: i64 = self
            .s
            .query_one(
                "UPDATE pap_counters SET value = value + 1 WHERE name = 'inbox' RETURNING value",
                &[],
            )?
            .get(0);
        msg.id = unsigned(id);
        self.s.execute(
            "INSERT INTO pap_inbox (id, message) VALUES ($1, $2::text::json)",
            &[&id, &encode(&msg)],
        )?;
        self.inbox_appended = Some(msg.id);
        Ok(msg.id)
    }

    pub(super) fn inbox_counter(&self) -> Result<u64> {
        if let Some(id) = self.inbox_appended {
            return Ok(id);
        }
        Ok(unsigned(
            self.s
                .query_one("SELECT value FROM pap_counters WHERE name = 'inbox'", &[])?
                .get(0),
        ))
    }

    pub(super) fn agent_queue_push(&self, agent: &str, id: &str) -> Result<()> {
        self.s.execute(
            "INSERT INTO pap_agent_queue (agent, seq, notification_id) \
             VALUES ($1, nextval('pap_queue_seq'), $2)",
            &[&agent, &id],
        )?;
        Ok(())
    }

    pub(super) fn agent_queue_take(&self, agent: &str) -> Result<Vec<String>> {
        let mut taken: Vec<(i64, String)> = self
            .s
            .query(
                "DELETE FROM pap_agent_queue WHERE agent = $1 RETURNING seq, notification_id",
                &[&agent],
            )?
            .iter()
            .map(|r| (r.get(0), r.get(1)))
            .collect();
        taken.sort_unstable_by_key(|(seq, _)| *seq);
        Ok(taken.into_iter().map(|(_, id)| id).collect())
    }

    /// Opens a session (again: its time moves); whether it was not open before.
    pub(super) fn sessions_open(&self, name: &str, at: i64) -> Result<bool> {
        Ok(self
            .s
            .query_one(
                "INSERT INTO pap_sessions (name, opened_at) VALUES ($1, $2) \
                 ON CONFLICT (name) DO UPDATE SET opened_at = EXCLUDED.opened_at \
                 RETURNING (xmax = 0)",
                &[&name, &at],
            )?
            .get(0))
    }

    pub(super) fn sessions_close(&self, name: &str) -> Result<bool> {
        self.s
            .execute("DELETE FROM pap_session_agents WHERE name = $1", &[&name])?;
        Ok(self
            .s
            .execute("DELETE FROM pap_sessions WHERE name = $1", &[&name])?
            > 0)
    }

    pub(super) fn sessions_is_open(&self, name: &str) -> Result<bool> {
        Ok(self
            .s
            .query_opt("SELECT 1 FROM pap_sessions WHERE name = $1", &[&name])?
            .is_some())
    }

    pub(super) fn sessions_bind(&self, name: &str, agent: Option<&str>) -> Result<()> {
        match agent {
            Some(agent) => self.s.execute(
                "INSERT INTO pap_session_agents (name, agent) VALUES ($1, $2) \
                 ON CONFLICT (name) DO UPDATE SET agent = EXCLUDED.agent",
                &[&name, &agent],
            )?,
            None => self
                .s
                .execute("DELETE FROM pap_session_agents WHERE name = $1", &[&name])?,
        };
        Ok(())
    }

    pub(super) fn atp_index_put(&self, atp_id: &str, notification: &str) -> Result<()> {
        self.s.execute(
            "INSERT INTO pap_atp (atp_id, notification_id) VALUES ($1, $2) \
             ON CONFLICT (atp_id) DO UPDATE SET notification_id = EXCLUDED.notification_id",
            &[&atp_id, &notification],
        )?;
        Ok(())
    }
}
