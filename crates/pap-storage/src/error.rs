//! What can go wrong with a store, for any implementation.

use std::path::PathBuf;
use std::time::Duration;

pub type Result<T> = std::result::Result<T, Error>;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(
        "the state store {path} stayed in use by another pap process for {waited:?} \
         (is a `pap serve` or a stuck `pap` running? PAP_LOCK_TIMEOUT sets the wait in seconds)"
    )]
    Locked { path: PathBuf, waited: Duration },
    #[error(
        "the state store {path} has schema version {found}, this pap reads version {expected} \
         (use the pap that wrote it, or move the state dir aside)"
    )]
    SchemaVersion {
        path: PathBuf,
        found: u64,
        expected: u64,
    },
    #[error(
        "the state store {path} has format {found}, written by a development build of pap \
         before the first released format; this pap cannot read it. Move the state dir aside \
         to start afresh (its idempotency keys and invocations are then forgotten)"
    )]
    DevelopmentFormat { path: PathBuf, found: u64 },
    /// A commit could not be made durable (the disk failed a sync): what it recorded may be
    /// lost.
    #[error("state store {path}: a commit could not be made durable ({what}); it may be lost")]
    NotDurable { path: PathBuf, what: String },
    /// The storage engine failed (I/O, a limit, an internal error).
    #[error("state store {path}: {source}")]
    Backend {
        path: PathBuf,
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    #[error(
        "state store {path}: a record is corrupt: {message} (`pap store check` lists the \
         damage; a copy made by `pap store backup` can replace the file)"
    )]
    Corrupt { path: PathBuf, message: String },
    /// The file itself is damaged (not a redb file any more, checksums wrong, truncated).
    #[error(
        "the state store {path} is damaged: {what}. Stop every pap using this state dir, then \
         restore a copy made by `pap store backup`, or move the file aside to start with an \
         empty state (every idempotency key and invocation is then forgotten); `pap store \
         check` verifies a store"
    )]
    Damaged { path: PathBuf, what: String },
    /// A unit of work found nothing to change and asks for its transaction to be rolled back
    /// instead of committed (a purge step that removed nothing: an empty commit would still
    /// count as one to make durable, and an idle serve would sync for it).
    #[error("nothing to commit")]
    Unchanged,
    /// The unit of work refused a step: a rule of the domain said no (a lifecycle transition
    /// that is not allowed, a notification's ledger refusing a change), and nothing of the
    /// transaction was committed. The refusal keeps its type: [`Error::refusal`] reads it
    /// back. A refusal a caller answers a person with is returned beside the store's errors
    /// instead (see `write_or_refuse`).
    #[error("{0}")]
    Refused(Box<dyn std::error::Error + Send + Sync>),
    /// A decision was recorded under a key its transaction did not claim (a bug of the
    /// caller's: see `DecisionTx::record_decision`); nothing of the transaction is kept.
    #[error(
        "state store {location}: the decision of event {event_id} was recorded under a key \
         this transaction did not claim"
    )]
    DecisionNotClaimed { location: String, event_id: String },
    /// A copy of a state was pointed at a store or a file that already holds one.
    #[error("{location} {found}: a copy goes into {wants} only")]
    CopyTargetInUse {
        location: String,
        found: &'static str,
        wants: &'static str,
    },
    /// The invocation is not this process's to run: another live process holds it, or it is
    /// no longer queued or running. A worker that meets this simply moves on.
    #[error("{0}")]
    NotOurs(String),
    /// The holder of a lease tried to record its attempt after another process took the
    /// invocation over (its lease expired, or its holder was found dead): what it would
    /// record is dropped, the new holder's stands.
    #[error(
        "invocation {id} was taken over by another holder (lease {token} lost{}); this \
         process's result for it is dropped",
        current.map(|c| format!(", now held under lease {c}")).unwrap_or_default()
    )]
    LeaseLost {
        id: String,
        token: u64,
        current: Option<u64>,
    },
    /// The database cannot be reached or gave up on the transaction (a connection lost, a
    /// deadlock or a lock wait cut short): nothing of the transaction was committed, and the
    /// same work can be tried again once it is back.
    #[error("the database {location} is unavailable: {reason}")]
    Unavailable { location: String, reason: String },
    /// The database rolled the same unit of work back for a lock conflict (a deadlock, a
    /// serialization failure) every time it was run (see `pgstore::retry`): nothing of it
    /// was committed, and it may be tried again later.
    #[error(
        "the database {location} rolled the transaction back for a lock conflict with other \
         pap processes each of the {tries} times it ran ({reason}); nothing of it was \
         committed, and running it again later is safe"
    )]
    Contended {
        location: String,
        reason: String,
        tries: u32,
    },
    /// The store cannot be used as configured (a database URL, its TLS, its schema).
    #[error("state store {location}: {message}")]
    Setup { location: String, message: String },
    #[error("cannot create the state dir {path}: {source}")]
    Dir {
        path: PathBuf,
        source: std::io::Error,
    },
}

impl Error {
    /// A refusal of the domain's, carried through a transaction with its type.
    pub fn refused(why: impl std::error::Error + Send + Sync + 'static) -> Error {
        Error::Refused(Box::new(why))
    }

    /// The refusal of type `T` this error carries, if it carries one.
    pub fn refusal<T: std::error::Error + 'static>(&self) -> Option<&T> {
        match self {
            Error::Refused(why) => why.downcast_ref(),
            _ => None,
        }
    }

    /// `Ok` when the invocation `id` is leased under `token` (its lease's token is
    /// `current`), else [`Error::LeaseLost`].
    pub fn lease_check(id: &str, token: u64, current: Option<u64>) -> Result<()> {
        if current == Some(token) {
            return Ok(());
        }
        Err(Error::LeaseLost {
            id: id.to_owned(),
            token,
            current,
        })
    }
}
