//! The records that mean something to a user, apart from how they are stored: invocations
//! and their attempts, decisions (claims and ledger rows), notifications and the inbox, the
//! audit log, leases. A store persists them behind the storage interface
//! (`pap::storage`); the layers above use them without knowing the storage.

pub mod audit;
pub mod budget;
pub mod debounce;
pub mod decision;
pub mod ids;
pub mod invocation;
pub mod lease;
pub mod lifecycle;
pub mod liveness;
pub mod money;
pub mod notification;
pub mod short_id;
pub mod trace_context;

/// For `skip_serializing_if`: a count of 0 is left out of a record.
pub(crate) fn is_zero(n: &u64) -> bool {
    *n == 0
}

pub use audit::AuditEntry;
pub use debounce::{DebounceState, PendingFire};
pub use decision::{Claim, LedgerRow};
pub use invocation::*;
pub use lease::{Holding, Lease};
pub use lifecycle::NotAllowed;
pub use notification::*;
