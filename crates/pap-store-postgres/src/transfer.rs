//! Export and import of a whole state (see `storage::transfer`): the PostgreSQL side.
//! Export reads one REPEATABLE READ snapshot; import writes a batch per transaction, keeping
//! row numbers, ids and sequence positions as they were.

use super::read::PgRead;
use super::session::{Session, encode, signed, unsigned};
use super::write::PgWrite;
use pap_storage::transfer::{Counters, Item};
use pap_storage::{ApprovalTx, DecisionTx, InboxTx, LedgerTx, Result, WorkTx};

impl PgRead<'_> {
    pub(super) fn export(&self, each: &mut dyn FnMut(Item) -> Result<()>) -> Result<()> {
        let s = &self.s;
        // The snapshot stays open while the target writes (a slow target may take longer
        // than the idle timeout between two tables).
        s.execute("SET LOCAL idle_in_transaction_session_timeout = 0", &[])?;
        s.for_each(
            "SELECT row_no, event_id, trigger_id, kind, depth, outcome, invocation_id, \
             decided_at FROM pap_ledger ORDER BY row_no",
            |r| {
                each(Item::Ledger {
                    row: unsigned(r.get(0)),
                    decision: pap_domain::LedgerRow {
                        event_id: r.get(1),
                        trigger: r.get(2),
                        kind: r.get(3),
                        depth: u32::try_from(r.get::<_, i32>(4)).unwrap_or(0),
                        outcome: r.get(5),
                        invocation_id: r.get(6),
                        decided_at: r.get(7),
                    },
                })
            },
        )?;
        s.for_each(
            "SELECT key, expires_at, decided_at, row_no FROM pap_claims ORDER BY key",
            |r| {
                let key: &[u8] = r.get(0);
                let Ok(key) = <[u8; 32]>::try_from(key) else {
                    return Err(pap_storage::Error::Corrupt {
                        path: s.location().into(),
                        message: "an idempotency key is not 32 bytes".into(),
                    });
                };
                each(Item::Claim {
                    key,
                    expires_at: r.get(1),
                    decided_at: r.get(2),
                    row: unsigned(r.get(3)),
                })
            },
        )?;
        s.for_each(
            "SELECT trigger_id, window_key, times FROM pap_throttle ORDER BY 1, 2",
            |r| {
                each(Item::Throttle {
                    trigger: r.get(0),
                    key: r.get(1),
                    times: r.get(2),
                })
            },
        )?;
        s.for_each(
            "SELECT trigger_id, window_key, state::text FROM pap_debounce ORDER BY 1, 2",
            |r| {
                each(Item::Debounce {
                    trigger: r.get(0),
                    key: r.get(1),
                    state: s.decode("debounce state", r.get(2))?,
                })
            },
        )?;
        s.for_each(
            "SELECT agent, uses::text FROM pap_budget_tokens ORDER BY agent",
            |r| {
                each(Item::TokenUses {
                    agent: r.get(0),
                    uses: s.decode("token uses", r.get(1))?,
                })
            },
        )?;
        s.for_each(
            "SELECT id, record::text FROM pap_invocations ORDER BY seq, id",
            |r| {
                let id: &str = r.get(0);
                let inv = s.decode(&format!("invocation {id}"), r.get(1))?;
                each(Item::Invocation(Box::new(inv)))
            },
        )?;
        s.for_each("SELECT id, last_fire FROM pap_schedules ORDER BY id", |r| {
            each(Item::Schedule {
                id: r.get(0),
                last: r.get(1),
            })
        })?;
        s.for_each(
            "SELECT event_id, entry::text FROM pap_outbox ORDER BY event_id",
            |r| {
                each(Item::Outbox {
                    event_id: r.get(0),
                    entry: s.decode("outbox entry", r.get(1))?,
                })
            },
        )?;
        s.for_each("SELECT entry::text FROM pap_audit ORDER BY seq", |r| {
            each(Item::Audit(s.decode("audit entry", r.get(0))?))
        })?;
        s.for_each(
            "SELECT id, record::text FROM pap_notifications ORDER BY seq, id",
            |r| {
                let id: &str = r.get(0);
                let n = s.decode(&format!("notification {id}"), r.get(1))?;
                each(Item::Notification(Box::new(n)))
            },
        )?;
        s.for_each(
            "SELECT key, notification_id FROM pap_notify_dedup ORDER BY key",
            |r| {
                each(Item::Dedup {
                    key: r.get(0),
                    notification: r.get(1),
                })
            },
        )?;
        s.for_each("SELECT due_at, job FROM pap_jobs ORDER BY 1, 2", |r| {
            each(Item::Job {
                at: r.get(0),
                job: r.get(1),
            })
        })?;
        s.for_each("SELECT message::text FROM pap_inbox ORDER BY id", |r| {
            each(Item::Inbox(Box::new(s.decode("inbox message", r.get(0))?)))
        })?;
        s.for_each(
            "SELECT agent, notification_id FROM pap_agent_queue ORDER BY agent, seq",
            |r| {
                each(Item::Queued {
                    agent: r.get(0),
                    notification: r.get(1),
                })
            },
        )?;
        s.for_each(
            "SELECT name, opened_at FROM pap_sessions ORDER BY name",
            |r| {
                each(Item::Session {
                    name: r.get(0),
                    opened_at: r.get(1),
                })
            },
        )?;
        s.for_each(
            "SELECT name, agent FROM pap_session_agents ORDER BY name",
            |r| {
                each(Item::SessionAgent {
                    name: r.get(0),
                    agent: r.get(1),
                })
            },
        )?;
        s.for_each(
            "SELECT atp_id, notification_id FROM pap_atp ORDER BY atp_id",
            |r| {
                each(Item::Atp {
                    atp_id: r.get(0),
                    notification: r.get(1),
                })
            },
        )?;
        each(Item::Counters(counters(s)?))
    }
}

/// What each sequence issued so far.
fn counters(s: &Session) -> Result<Counters> {
    let r = s.query_one(
        "SELECT \
         (SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM pap_invocation_seq), \
         (SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM pap_notification_seq), \
         (SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM pap_audit_seq), \
         (SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM pap_lease_token), \
         (SELECT value FROM pap_counters WHERE name = 'inbox'), \
         (SELECT CASE WHEN is_called THEN last_value + 1 ELSE last_value END FROM pap_ledger_row)",
        &[],
    )?;
    Ok(Counters {
        invocation: unsigned(r.get(0)),
        notification: unsigned(r.get(1)),
        audit: unsigned(r.get(2)),
        lease_token: unsigned(r.get(3)),
        inbox: unsigned(r.get(4)),
        ledger_next: unsigned(r.get(5)),
    })
}

/// Whether the database holds no state (a copy goes only into an empty one).
pub(super) fn holds_nothing(s: &Session) -> Result<bool> {
    Ok(s.query_one(
        "SELECT NOT EXISTS (SELECT 1 FROM pap_claims) AND NOT EXISTS (SELECT 1 FROM pap_ledger) \
         AND NOT EXISTS (SELECT 1 FROM pap_invocations) AND NOT EXISTS (SELECT 1 FROM pap_inbox) \
         AND NOT EXISTS (SELECT 1 FROM pap_notifications)",
        &[],
    )?
    .get(0))
}

impl PgWrite<'_> {
    pub(super) fn import(&mut self, items: &[Item]) -> Result<()> {
        for item in items {
            self.import_one(item)?;
        }
        Ok(())
    }

    fn import_one(&mut self, item: &Item) -> Result<()> {
        let s = &self.s;
        match item {
            Item::Ledger { row, decision } => {
                // The sequence moves with the counters, last.
                self.insert_ledger_row(*row, pap_storage::RowRef::from(decision))?;
            }
            Item::Claim {
                key,
                expires_at,
                decided_at,
                row,
            } => {
                s.execute(
                    "INSERT INTO pap_claims (key, expires_at, decided_at, row_no) \
                     VALUES ($1, $2, $3, $4)",
                    &[&key.as_slice(), expires_at, decided_at, &signed(*row)],
                )?;
            }
            Item::Throttle {
                trigger,
                key,
                times,
            } => {
                s.execute(
                    "INSERT INTO pap_throttle (trigger_id, window_key, times) VALUES ($1, $2, $3)",
                    &[trigger, key, times],
                )?;
            }
            Item::Debounce {
                trigger,
                key,
                state,
            } => self.debounce_put(trigger, key, state)?,
            Item::TokenUses { agent, uses } => self.set_token_uses(agent, uses)?,
            Item::Invocation(inv) => self.insert_invocation(inv)?,
            Item::Schedule { id, last } => self.set_schedule_last(id, *last)?,
            Item::Outbox { event_id, entry } => {
                self.outbox_put(event_id, &entry.event, entry.owner.as_ref())?
            }
            Item::Audit(entry) => {
                s.execute(
                    "INSERT INTO pap_audit (seq, entry) VALUES ($1, $2::text::json)",
                    &[&signed(entry.seq), &encode(entry)],
                )?;
            }
            Item::Notification(n) => self.put_notification(n)?,
            Item::Dedup { key, notification } => self.set_dedup(key, notification)?,
            Item::Job { at, job } => self.add_job(*at, job)?,
            Item::Inbox(msg) => {
                s.execute(
                    "INSERT INTO pap_inbox (id, message) VALUES ($1, $2::text::json)",
                    &[&signed(msg.id), &encode(msg)],
                )?;
                s.execute(
                    "UPDATE pap_counters SET value = GREATEST(value, $1) WHERE name = 'inbox'",
                    &[&signed(msg.id)],
                )?;
            }
            Item::Queued {
                agent,
                notification,
            } => self.queue_push(agent, notification)?,
            Item::Session { name, opened_at } => {
                self.session_open(name, *opened_at)?;
            }
            Item::SessionAgent { name, agent } => self.session_bind(name, Some(agent))?,
            Item::Atp {
                atp_id,
                notification,
            } => self.atp_put(atp_id, notification)?,
            Item::Counters(c) => {
                s.execute(
                    "UPDATE pap_counters SET value = GREATEST(value, $1) WHERE name = 'inbox'",
                    &[&signed(c.inbox)],
                )?;
                for (sequence, value) in [
                    ("pap_invocation_seq", c.invocation),
                    ("pap_notification_seq", c.notification),
                    ("pap_audit_seq", c.audit),
                    ("pap_lease_token", c.lease_token),
                    // setval names the last number issued.
                    ("pap_ledger_row", c.ledger_next.saturating_sub(1)),
                ] {
                    if value > 0 {
                        s.execute(
                            "SELECT setval($1::text::regclass, GREATEST($2, COALESCE(( \
                             SELECT last_value FROM pg_sequences \
                             WHERE schemaname = current_schema() AND sequencename = $1::text), 0)))",
                            &[&sequence, &signed(value)],
                        )?;
                    }
                }
            }
        }
        Ok(())
    }
}
