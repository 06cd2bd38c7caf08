//! Who may run an invocation: a lease with an expiry and a fencing token.
//!
//! A process that takes work (to run it, or to hold it while it waits out a backoff or runs
//! what it just decided) records a [`Lease`] on it: the holding process, the node it runs on,
//! until when the lease holds, and a fencing token the store issues and never issues again.
//! Every write that ends an attempt names the token it started under; the store refuses it
//! once another process took the invocation over (see `storage::Error::LeaseLost`), so a
//! holder that was paused or cut off can never record a result over the new owner's.
//!
//! Whether a lease still binds is decided with what the deciding process can know:
//! - a holder on this node (same boot of the same host) is checked exactly, by pid and
//!   process start time: a dead holder's work is free at once, a live holder keeps it;
//! - a holder on another node cannot be checked, so its lease binds until it expires, plus
//!   [`TAKEOVER_GRACE`] for clocks that differ a little and a holder that is still stopping.
//!
//! An attempt's lease lasts as long as the attempt may run (`limits.max_runtime_seconds`,
//! after which the agent is killed) plus [`HOLD_MARGIN`], so it never needs renewing.

use serde::{Deserialize, Serialize};

use super::invocation::Runner;

/// How long a lease outlives what it covers: the time a holder needs to record its result
/// after its agent ended.
pub const HOLD_MARGIN_MS: i64 = 60_000;

/// How long past its expiry a lease of another node still binds.
pub const TAKEOVER_GRACE_MS: i64 = 30_000;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Lease {
    pub holder: Runner,
    /// The node the holder runs on (its boot id on Linux): a pid and a start time only
    /// identify a process within one boot of one host.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub node: String,
    /// Issued by the store, increasing, never issued twice.
    pub token: u64,
    pub expires_at: i64,
}

/// What a process knows of a lease's holder (see `crate::liveness` for the real one).
pub trait HolderFacts {
    /// This process's node.
    fn node(&self) -> &str;
    /// Whether `holder` is this process.
    fn is_me(&self, holder: &Runner) -> bool;
    /// Whether `holder`, a process of this node, still runs.
    fn is_alive(&self, holder: &Runner) -> bool;
}

/// Where an invocation's lease leaves a process that wants to run it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Holding {
    /// Nobody holds it (no lease, its holder died, or it expired long enough ago).
    Free,
    /// This process holds it.
    Mine,
    /// Another process holds it, and may still be running it.
    Other,
}

impl Lease {
    /// Whether the lease still binds, and whom, as of `now`.
    pub fn holding(&self, now: i64, facts: &(impl HolderFacts + ?Sized)) -> Holding {
        let here = self.node.is_empty() || self.node == facts.node();
        if here && facts.is_me(&self.holder) {
            Holding::Mine
        } else if here {
            if facts.is_alive(&self.holder) {
                Holding::Other
            } else {
                Holding::Free
            }
        } else if now < self.expires_at.saturating_add(TAKEOVER_GRACE_MS) {
            Holding::Other
        } else {
            Holding::Free
        }
    }
}

/// Where `lease` leaves a process that wants the invocation (no lease: free).
pub fn holding(lease: Option<&Lease>, now: i64, facts: &(impl HolderFacts + ?Sized)) -> Holding {
    lease.map_or(Holding::Free, |l| l.holding(now, facts))
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Facts {
        node: &'static str,
        me: u32,
        alive: &'static [u32],
    }

    impl HolderFacts for Facts {
        fn node(&self) -> &str {
            self.node
        }
        fn is_me(&self, holder: &Runner) -> bool {
            holder.pid == self.me
        }
        fn is_alive(&self, holder: &Runner) -> bool {
            holder.pid == self.me || self.alive.contains(&holder.pid)
        }
    }

    fn lease(pid: u32, node: &str, expires_at: i64) -> Lease {
        Lease {
            holder: Runner {
                pid,
                since: 0,
                started: None,
            },
            node: node.into(),
            token: 7,
            expires_at,
        }
    }

    const HERE: Facts = Facts {
        node: "n1",
        me: 10,
        alive: &[11],
    };

    #[test]
    fn a_holder_on_this_node_is_checked_exactly_whatever_the_expiry() {
        assert_eq!(lease(10, "n1", 0).holding(1_000_000, &HERE), Holding::Mine);
        assert_eq!(lease(11, "n1", 0).holding(1_000_000, &HERE), Holding::Other);
        assert_eq!(lease(12, "n1", i64::MAX).holding(0, &HERE), Holding::Free);
    }

    #[test]
    fn a_holder_elsewhere_binds_until_expiry_and_grace() {
        // Same pid as this process, other node: not this process.
        let other = lease(10, "n2", 1000);
        assert_eq!(other.holding(999, &HERE), Holding::Other);
        assert_eq!(
            other.holding(1000 + TAKEOVER_GRACE_MS - 1, &HERE),
            Holding::Other
        );
        assert_eq!(
            other.holding(1000 + TAKEOVER_GRACE_MS, &HERE),
            Holding::Free
        );
    }

    #[test]
    fn no_lease_is_free() {
        assert_eq!(holding(None, 0, &HERE), Holding::Free);
    }
}
