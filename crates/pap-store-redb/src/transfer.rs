//! Export and import of a whole state (see `storage::transfer`): the redb side.

use redb::{ReadTransaction, ReadableTable, ReadableTableMetadata, TableDefinition};

use super::ledger_block::{Block, Builder};
use super::tables::*;
use super::tx::{Reader, Tx, decode, malformed};
use super::{Result, Store, redb_err};
use pap_storage::ApprovalTx;
use pap_storage::transfer::{Counters, Item};
use pap_storage::{DecisionTx, InboxTx, LedgerTx, ReadTx, RowRef, WorkTx};

impl Store {
    /// Every item of the state, from one snapshot.
    pub(crate) fn export_items(&self, each: &mut dyn FnMut(Item) -> Result<()>) -> Result<()> {
        self.sync_pending();
        let path = self.path();
        self.with_reader(|open| {
            let txn = open.begin_read().map_err(|e| redb_err(&path, e))?;
            let reader = Reader::open(&txn, &path)?;
            Export {
                txn: &txn,
                path: &path,
            }
            .run(&reader, each)
        })
    }

    /// Whether the store holds no state at all (a copy goes only into an empty one).
    pub fn holds_nothing(&self) -> Result<bool> {
        let path = self.path();
        self.with_reader(|open| {
            let txn = open.begin_read().map_err(|e| redb_err(&path, e))?;
            let empty =
                |def: TableDefinition<'static, &'static [u8], &'static [u8]>| -> Result<bool> {
                    let t = txn.open_table(def).map_err(|e| redb_err(&path, e))?;
                    Ok(t.len().map_err(|e| redb_err(&path, e))? == 0)
                };
            let claims = txn.open_table(CLAIMS).map_err(|e| redb_err(&path, e))?;
            let ledger = txn.open_table(LEDGER).map_err(|e| redb_err(&path, e))?;
            let inbox = txn.open_table(INBOX).map_err(|e| redb_err(&path, e))?;
            let notifications = txn
                .open_table(NOTIFICATIONS)
                .map_err(|e| redb_err(&path, e))?;
            let none = |n: std::result::Result<u64, redb::StorageError>| -> Result<bool> {
                Ok(n.map_err(|e| redb_err(&path, e))? == 0)
            };
            Ok(empty(INVOCATIONS)?
                && none(claims.len())?
                && none(ledger.len())?
                && none(inbox.len())?
                && none(notifications.len())?)
        })
    }

    /// Imports a batch of items in one transaction.
    pub(crate) fn import_items(&self, items: &[Item]) -> Result<()> {
        self.write(|tx| {
            let mut ledger: Option<Builder> = None;
            for item in items {
                if !matches!(item, Item::Ledger { .. }) {
                    tx.store_ledger_block(&mut ledger)?;
                }
                import_one(tx, item, &mut ledger)?;
            }
            tx.store_ledger_block(&mut ledger)
        })
    }
}

struct Export<'a> {
    txn: &'a ReadTransaction,
    path: &'a std::path::Path,
}

impl Export<'_> {
    fn table<K: redb::Key + 'static, V: redb::Value + 'static>(
        &self,
        def: TableDefinition<K, V>,
    ) -> Result<Option<redb::ReadOnlyTable<K, V>>> {
        match self.txn.open_table(def) {
            Ok(t) => Ok(Some(t)),
            Err(redb::TableError::TableDoesNotExist(_)) => Ok(None),
            Err(e) => Err(redb_err(self.path, e)),
        }
    }

    fn run(&self, reader: &Reader, each: &mut dyn FnMut(Item) -> Result<()>) -> Result<()> {
        let path = self.path;
        let e = |e: redb::StorageError| redb_err(path, e);
        if let Some(ledger) = self.table(LEDGER)? {
            for entry in ledger.iter().map_err(e)? {
                let (first, bytes) = entry.map_err(e)?;
                let block = Block::new(bytes.value()).map_err(|_| malformed(path))?;
                for (n, row) in block.rows().enumerate() {
                    let decision = row.map_err(|_| malformed(path))?;
                    each(Item::Ledger {
                        row: first.value() + n as u64,
                        decision,
                    })?;
                }
            }
        }
        if let Some(claims) = self.table(CLAIMS)? {
            for entry in claims.iter().map_err(e)? {
                let (key, value) = entry.map_err(e)?;
                let (expires_at, decided_at, row) = value.value();
                let key = key.value();
                each(Item::Claim {
                    key: *key,
                    expires_at,
                    decided_at,
                    row,
                })?;
            }
        }
        if let Some(throttle) = self.table(THROTTLE)? {
            for entry in throttle.iter().map_err(e)? {
                let (k, v) = entry.map_err(e)?;
                let (trigger, key) = k.value();
                let times = v
                    .value()
                    .chunks_exact(8)
                    .map(|c| i64::from_le_bytes(c.try_into().expect("8 bytes")))
                    .collect();
                each(Item::Throttle {
                    trigger: trigger.to_owned(),
                    key: key.to_owned(),
                    times,
                })?;
            }
        }
        if let Some(debounce) = self.table(DEBOUNCE)? {
            for entry in debounce.iter().map_err(e)? {
                let (k, v) = entry.map_err(e)?;
                let (trigger, key) = k.value();
                each(Item::Debounce {
                    trigger: trigger.to_owned(),
                    key: key.to_owned(),
                    state: decode(path, v.value())?,
                })?;
            }
        }
        if let Some(budget) = self.table(BUDGET_TOKENS)? {
            for entry in budget.iter().map_err(e)? {
                let (k, v) = entry.map_err(e)?;
                each(Item::TokenUses {
                    agent: k.value().to_owned(),
                    uses: decode(path, v.value())?,
                })?;
            }
        }
        for id in reader.invocation_ids(&|_| true, usize::MAX)? {
            if let Some(inv) = reader.invocation(&id)? {
                each(Item::Invocation(Box::new(inv)))?;
            }
        }
        if let Some(schedules) = self.table(SCHEDULES)? {
            for entry in schedules.iter().map_err(e)? {
                let (k, v) = entry.map_err(e)?;
                each(Item::Schedule {
                    id: k.value().to_owned(),
                    last: v.value(),
                })?;
            }
        }
        for (event_id, entry) in reader.outbox_entries()? {
            each(Item::Outbox { event_id, entry })?;
        }
        if let Some(audit) = self.table(AUDIT)? {
            for entry in audit.iter().map_err(e)? {
                let (_, v) = entry.map_err(e)?;
                each(Item::Audit(decode(path, v.value())?))?;
            }
        }
        let notify = reader.notify()?;
        if let Some(order) = self.table(NOTIFY_ORDER)? {
            for entry in order.iter().map_err(e)? {
                let (_, id) = entry.map_err(e)?;
                if let Some(n) = notify.notification(id.value())? {
                    each(Item::Notification(Box::new(n)))?;
                }
            }
        }
        self.pairs(NOTIFY_DEDUP, each, |key, notification| Item::Dedup {
            key,
            notification,
        })?;
        if let Some(due) = self.table(NOTIFY_DUE)? {
            for entry in due.iter().map_err(e)? {
                let (k, _) = entry.map_err(e)?;
                let (at, job) = k.value();
                each(Item::Job {
                    at,
                    job: job.to_owned(),
                })?;
            }
        }
        if let Some(inbox) = self.table(INBOX)? {
            for entry in inbox.iter().map_err(e)? {
                let (_, v) = entry.map_err(e)?;
                each(Item::Inbox(Box::new(decode(path, v.value())?)))?;
            }
        }
        if let Some(queue) = self.table(AGENT_QUEUE)? {
            for entry in queue.iter().map_err(e)? {
                let (k, v) = entry.map_err(e)?;
                each(Item::Queued {
                    agent: k.value().0.to_owned(),
                    notification: v.value().to_owned(),
                })?;
            }
        }
        if let Some(sessions) = self.table(SESSIONS)? {
            for entry in sessions.iter().map_err(e)? {
                let (k, v) = entry.map_err(e)?;
                each(Item::Session {
                    name: k.value().to_owned(),
                    opened_at: v.value(),
                })?;
            }
        }
        self.pairs(SESSION_AGENTS, each, |name, agent| Item::SessionAgent {
            name,
            agent,
        })?;
        self.pairs(ATP_INDEX, each, |atp_id, notification| Item::Atp {
            atp_id,
            notification,
        })?;
        each(Item::Counters(self.counters()?))
    }

    /// Every (key, value) of a text-to-text table, as items.
    fn pairs(
        &self,
        def: TableDefinition<&'static str, &'static str>,
        each: &mut dyn FnMut(Item) -> Result<()>,
        item: impl Fn(String, String) -> Item,
    ) -> Result<()> {
        let Some(table) = self.table(def)? else {
            return Ok(());
        };
        for entry in table.iter().map_err(|e| redb_err(self.path, e))? {
            let (k, v) = entry.map_err(|e| redb_err(self.path, e))?;
            each(item(k.value().to_owned(), v.value().to_owned()))?;
        }
        Ok(())
    }

    fn counters(&self) -> Result<Counters> {
        let meta = self.table(META)?.ok_or_else(|| malformed(self.path))?;
        let get = |name: &str| -> Result<u64> {
            Ok(meta
                .get(name)
                .map_err(|e| redb_err(self.path, e))?
                .map_or(0, |v| v.value()))
        };
        Ok(Counters {
            invocation: get("invocation_seq")?,
            notification: get("notification_seq")?,
            audit: get("audit_seq")?,
            lease_token: get("lease_token")?,
            inbox: get("inbox_seq")?,
            // redb keeps the number of the next row (rows start at 0).
            ledger_next: get("ledger_seq")?,
        })
    }
}

fn import_one(tx: &mut Tx, item: &Item, ledger: &mut Option<Builder>) -> Result<()> {
    match item {
        Item::Ledger { row, decision } => {
            let fits = ledger
                .as_ref()
                .is_some_and(|b| b.first + b.len() as u64 == *row && !b.is_full());
            if !fits {
                tx.store_ledger_block(ledger)?;
                *ledger = Some(Builder::new(*row));
            }
            let builder = ledger.as_mut().expect("a block to fill");
            builder
                .push(RowRef::from(decision))
                .map_err(|_| malformed(tx.path()))?;
            Ok(())
        }
        Item::Claim {
            key,
            expires_at,
            decided_at,
            row,
        } => tx.import_claim(key, *expires_at, *decided_at, *row),
        Item::Throttle {
            trigger,
            key,
            times,
        } => tx.import_throttle(trigger, key, times),
        Item::Debounce {
            trigger,
            key,
            state,
        } => tx.debounce_put(trigger, key, state),
        Item::TokenUses { agent, uses } => tx.set_token_uses(agent, uses),
        Item::Invocation(inv) => tx.insert_invocation(inv),
        Item::Schedule { id, last } => tx.set_schedule_last(id, *last),
        Item::Outbox { event_id, entry } => {
            tx.outbox_put(event_id, &entry.event, entry.owner.as_ref())
        }
        Item::Audit(entry) => tx.import_audit(entry),
        Item::Notification(n) => tx.put_notification(n),
        Item::Dedup { key, notification } => tx.set_dedup(key, notification),
        Item::Job { at, job } => tx.add_job(*at, job),
        Item::Inbox(msg) => tx.import_inbox(msg),
        Item::Queued {
            agent,
            notification,
        } => tx.queue_push(agent, notification),
        Item::Session { name, opened_at } => tx.session_open(name, *opened_at).map(drop),
        Item::SessionAgent { name, agent } => tx.session_bind(name, Some(agent)),
        Item::Atp {
            atp_id,
            notification,
        } => tx.atp_put(atp_id, notification),
        Item::Counters(c) => tx.import_counters(c),
    }
}

impl Tx<'_> {
    fn store_ledger_block(&mut self, ledger: &mut Option<Builder>) -> Result<()> {
        if let Some(mut block) = ledger.take().filter(|b| b.len() > 0) {
            let first = block.first;
            let next = first + block.len() as u64;
            self.ledger
                .insert(first, block.finish())
                .map_err(|e| redb_err(&self.path, e))?;
            self.raise_counter("ledger_seq", next)?;
        }
        Ok(())
    }

    fn import_claim(
        &mut self,
        key: &[u8; 32],
        expires_at: i64,
        decided_at: i64,
        row: u64,
    ) -> Result<()> {
        self.claims
            .insert(key, (expires_at, decided_at, row))
            .map_err(|e| redb_err(&self.path, e))?;
        // The expiry index: one entry per (time, row) listing its keys.
        let mut keys = self
            .claim_expiry
            .get((expires_at, row))
            .map_err(|e| redb_err(&self.path, e))?
            .map(|v| v.value().to_vec())
            .unwrap_or_default();
        keys.extend_from_slice(key);
        self.claim_expiry
            .insert((expires_at, row), keys.as_slice())
            .map_err(|e| redb_err(&self.path, e))?;
        Ok(())
    }

    fn import_counters(&mut self, c: &Counters) -> Result<()> {
        self.raise_counter("invocation_seq", c.invocation)?;
        self.raise_counter("notification_seq", c.notification)?;
        self.raise_counter("audit_seq", c.audit)?;
        self.raise_counter("lease_token", c.lease_token)?;
        self.raise_counter("inbox_seq", c.inbox)?;
        self.raise_counter("ledger_seq", c.ledger_next)
    }

    pub(super) fn raise_counter(&mut self, name: &str, at_least: u64) -> Result<()> {
        if self.seq_value(name)? < at_least {
            self.meta
                .insert(name, at_least)
                .map_err(|e| redb_err(&self.path, e))?;
        }
        Ok(())
    }
}
