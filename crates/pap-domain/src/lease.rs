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
//! On a store of one node (redb), an attempt's lease lasts as long as the attempt may run
//! (`limits.max_runtime_seconds`, after which the agent is killed) plus [`HOLD_MARGIN_MS`],
//! so it never needs renewing.
//!
//! On a store several nodes share (PostgreSQL), an attempt's lease is short (`serve.lease`)
//! and renewed while the agent runs (see `agent::renew`); the agent's supervisor kills its
//! process group when the lease was not renewed in time. Such a lease carries a takeover
//! grace ([`Lease::grace_ms`]): it binds a live holder until it expired plus that grace,
//! which is longer than the supervisor needs to act, and nobody else's work starts earlier.
//! A paused holder (SIGSTOP, a partition) therefore loses its work to the other nodes, and
//! its agent is gone before anyone runs the invocation again.

use serde::{Deserialize, Serialize};

use super::invocation::Runner;

/// How long a lease outlives what it covers: the time a holder needs to record its result
/// after its agent ended.
pub const HOLD_MARGIN_MS: i64 = 60_000;

/// How long past its expiry a lease of another node still binds.
pub(crate) const TAKEOVER_GRACE_MS: i64 = 30_000;

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
    /// Non-zero on a renewed lease (a shared store): past `expires_at` plus this long the
    /// lease is free even if its holder is alive (paused, cut off); its supervisor killed
    /// the agent at `expires_at`. Zero: a live holder on this node binds whatever the time.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub grace_ms: i64,
}

fn is_zero(n: &i64) -> bool {
    *n == 0
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
        } else if here && !facts.is_alive(&self.holder) {
            Holding::Free
        } else {
            // A live holder on this node binds for good unless its lease is a renewed one;
            // a holder elsewhere binds until its lease expired plus the grace.
            let binds_for_good = here && self.grace_ms == 0;
            let lapsed = now >= self.expires_at.saturating_add(self.takeover_grace());
            if binds_for_good || !lapsed {
                Holding::Other
            } else {
                Holding::Free
            }
        }
    }
}

impl Lease {
    /// How long past its expiry the lease binds a holder that may still be alive.
    pub(crate) fn takeover_grace(&self) -> i64 {
        if self.grace_ms > 0 {
            self.grace_ms
        } else {
            TAKEOVER_GRACE_MS
        }
    }

    /// The same lease, renewed while its attempt runs: it binds until expiry plus `grace_ms`.
    pub fn renewed_with_grace(self, grace_ms: i64) -> Lease {
        Lease { grace_ms, ..self }
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
            grace_ms: 0,
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
    fn a_renewed_lease_frees_a_live_holder_once_expired_plus_its_grace() {
        // Alive on this node (paused, say), but its lease lapsed: free after the grace.
        let paused = lease(11, "n1", 1000).renewed_with_grace(500);
        assert_eq!(paused.holding(1499, &HERE), Holding::Other);
        assert_eq!(paused.holding(1500, &HERE), Holding::Free);
        // Elsewhere, the same grace applies instead of the default one.
        let remote = lease(11, "n2", 1000).renewed_with_grace(500);
        assert_eq!(remote.holding(1499, &HERE), Holding::Other);
        assert_eq!(remote.holding(1500, &HERE), Holding::Free);
        // A dead holder on this node is free at once; this process's own lease is its own.
        assert_eq!(
            lease(12, "n1", i64::MAX)
                .renewed_with_grace(500)
                .holding(0, &HERE),
            Holding::Free
        );
        assert_eq!(
            lease(10, "n1", 0)
                .renewed_with_grace(500)
                .holding(1_000_000, &HERE),
            Holding::Mine
        );
    }

    #[test]
    fn no_lease_is_free() {
        assert_eq!(holding(None, 0, &HERE), Holding::Free);
    }
}
