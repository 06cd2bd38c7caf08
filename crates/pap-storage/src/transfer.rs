//! Moving a whole state between stores (`pap store copy`, and what builds on it: a
//! PostgreSQL state's backup to a redb file, its check, and the private copy of a dry run).
//!
//! A store exports its state as [`Item`]s from one consistent snapshot, and imports them
//! into an empty store a batch per transaction. The items keep what decisions depend on
//! exactly: idempotency claims with the ledger rows they name (row numbers included),
//! throttle windows, debounces and budgets, invocations with their leases, the notification
//! ledger, the inbox with its ids, queues in order, and the numbers each sequence has
//! issued, so the copy never issues one twice.

use crate::domain::budget::TokenUse;
use crate::domain::{
    AuditEntry, DebounceState, InboxMessage, Invocation, LedgerRow, Notification, OutboxEntry,
};

/// The last number each sequence issued (0: none yet), and the ledger's next row.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counters {
    pub invocation: u64,
    pub notification: u64,
    pub audit: u64,
    pub lease_token: u64,
    pub inbox: u64,
    /// The lowest ledger row number not issued yet (stores number rows from 0 or 1).
    pub ledger_next: u64,
}

impl Counters {
    /// Each counter at the larger of the two.
    pub fn max(&self, other: &Counters) -> Counters {
        Counters {
            invocation: self.invocation.max(other.invocation),
            notification: self.notification.max(other.notification),
            audit: self.audit.max(other.audit),
            lease_token: self.lease_token.max(other.lease_token),
            inbox: self.inbox.max(other.inbox),
            ledger_next: self.ledger_next.max(other.ledger_next),
        }
    }
}

/// One piece of a state.
#[derive(Debug, Clone)]
pub enum Item {
    /// A decision, as ledger row `row`.
    Ledger {
        row: u64,
        decision: LedgerRow,
    },
    /// An idempotency claim, naming the ledger row of its decision.
    Claim {
        key: [u8; 32],
        expires_at: i64,
        decided_at: i64,
        row: u64,
    },
    Throttle {
        trigger: String,
        key: String,
        times: Vec<i64>,
    },
    Debounce {
        trigger: String,
        key: String,
        state: DebounceState,
    },
    TokenUses {
        agent: String,
        uses: Vec<TokenUse>,
    },
    Invocation(Box<Invocation>),
    Schedule {
        id: String,
        last: i64,
    },
    Outbox {
        event_id: String,
        entry: OutboxEntry,
    },
    Audit(AuditEntry),
    Notification(Box<Notification>),
    Dedup {
        key: String,
        notification: String,
    },
    Job {
        at: i64,
        job: String,
    },
    Inbox(Box<InboxMessage>),
    /// A notification queued for an agent; an agent's items come in queue order.
    Queued {
        agent: String,
        notification: String,
    },
    Session {
        name: String,
        opened_at: i64,
    },
    SessionAgent {
        name: String,
        agent: String,
    },
    Atp {
        atp_id: String,
        notification: String,
    },
    /// Last: what each sequence issued.
    Counters(Counters),
}

impl Item {
    /// What kind of record it is, for counts.
    pub fn kind(&self) -> &'static str {
        match self {
            Item::Ledger { .. } => "ledger rows",
            Item::Claim { .. } => "idempotency claims",
            Item::Throttle { .. } => "throttle windows",
            Item::Debounce { .. } => "debounce states",
            Item::TokenUses { .. } => "token budgets",
            Item::Invocation(_) => "invocations",
            Item::Schedule { .. } => "schedules",
            Item::Outbox { .. } => "outbox events",
            Item::Audit(_) => "audit entries",
            Item::Notification(_) => "notifications",
            Item::Dedup { .. } => "deduplication keys",
            Item::Job { .. } => "timer jobs",
            Item::Inbox(_) => "inbox messages",
            Item::Queued { .. } => "queued notifications",
            Item::Session { .. } => "sessions",
            Item::SessionAgent { .. } => "session bindings",
            Item::Atp { .. } => "approval requests",
            Item::Counters(_) => "counters",
        }
    }
}

/// Counts `item` in `counts` (kinds in the order they come, as an export gives them).
pub fn tally(counts: &mut Copied, item: &Item) {
    match counts.last_mut() {
        Some((kind, n)) if *kind == item.kind() => *n += 1,
        _ => counts.push((item.kind(), 1)),
    }
}

/// How many items one import transaction takes.
pub(crate) const IMPORT_BATCH: usize = 2_000;

/// What a copy moved, by kind, in export order.
pub type Copied = Vec<(&'static str, u64)>;

/// Copies the whole state of `from` into `to`, which must be empty; `progress` hears the
/// running total after each batch.
pub fn copy(
    from: &dyn super::Storage,
    to: &dyn super::Storage,
    progress: &mut dyn FnMut(u64),
) -> super::Result<Copied> {
    if !to.is_empty()? {
        return Err(super::Error::CopyTargetInUse {
            location: to.location().display().to_string(),
            found: "already holds a state",
            wants: "an empty store",
        });
    }
    let mut copied: Copied = Vec::new();
    let mut batch = Vec::with_capacity(IMPORT_BATCH);
    let mut total = 0u64;
    from.export(&mut |item| {
        tally(&mut copied, &item);
        batch.push(item);
        if batch.len() >= IMPORT_BATCH {
            to.import(&batch)?;
            total += batch.len() as u64;
            batch.clear();
            progress(total);
        }
        Ok(())
    })?;
    if !batch.is_empty() {
        to.import(&batch)?;
        total += batch.len() as u64;
        progress(total);
    }
    copied.retain(|(kind, _)| *kind != "counters");
    Ok(copied)
}
