//! The ANP state machine (section 5.1) and ownership fencing (6.3).
//!
//! Every change of a notification's status goes through [`transition`] or [`take_over`]
//! inside a write transaction: the caller names the lease it holds, and the change is
//! refused when the stored lease differs. Write transactions are serialised (across
//! processes too), so read–compare–write inside one is a compare-and-swap.

use crate::domain::{Notification, NotifyStatus, Transition};

/// Why a transition was refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Refused {
    #[error("{id}: stale lease {given} (the current lease is {current}); the action is rejected")]
    StaleLease {
        id: String,
        given: u64,
        current: u64,
    },
    #[error("{id} is {} already, a final state", status.as_str())]
    Terminal { id: String, status: NotifyStatus },
    #[error("{id}: {} → {} is not an ANP transition", from.as_str(), to.as_str())]
    NotAllowed {
        id: String,
        from: NotifyStatus,
        to: NotifyStatus,
    },
}

/// ANP 5.1: PENDING → DISPATCHED → LOCKED → (DELIVERED | ESCALATED → (DELIVERED | FAILED) | FAILED).
pub(crate) fn allowed(from: NotifyStatus, to: NotifyStatus) -> bool {
    use NotifyStatus::*;
    matches!(
        (from, to),
        (Pending, Dispatched)
            | (Dispatched, Locked)
            | (Locked, Delivered)
            | (Locked, Escalated)
            | (Locked, Failed)
            | (Escalated, Delivered)
            | (Escalated, Failed)
    )
}

/// Moves `n` to `to` if `lease` is its current lease and the edge is allowed.
pub(crate) fn transition(
    n: &mut Notification,
    lease: u64,
    to: NotifyStatus,
    by: &str,
    note: Option<String>,
    now: i64,
) -> Result<(), Refused> {
    check(n, lease)?;
    if !allowed(n.status, to) {
        return Err(Refused::NotAllowed {
            id: n.id.clone(),
            from: n.status,
            to,
        });
    }
    n.history.push(Transition {
        at: now,
        from: Some(n.status),
        to,
        lease,
        by: by.to_owned(),
        note,
    });
    n.status = to;
    n.updated_at = now;
    Ok(())
}

/// Walks `n` along several transitions (e.g. DISPATCHED → LOCKED → DELIVERED) under one
/// lease; nothing changes unless every step is allowed.
pub(crate) fn walk(
    n: &mut Notification,
    lease: u64,
    steps: &[NotifyStatus],
    by: &str,
    note: Option<String>,
    now: i64,
) -> Result<(), Refused> {
    let mut copy = n.clone();
    for (i, to) in steps.iter().enumerate() {
        let note = if i + 1 == steps.len() {
            note.clone()
        } else {
            None
        };
        transition(&mut copy, lease, *to, by, note, now)?;
    }
    *n = copy;
    Ok(())
}

/// Ends `n` in DELIVERED or FAILED from where it is: DISPATCHED passes through LOCKED,
/// LOCKED and ESCALATED go straight there. The one way acknowledgements, answers and sinks
/// finish a notification.
pub(crate) fn finish(
    n: &mut Notification,
    lease: u64,
    to: NotifyStatus,
    by: &str,
    note: Option<String>,
    now: i64,
) -> Result<(), Refused> {
    let steps: &[NotifyStatus] = match n.status {
        NotifyStatus::Dispatched => &[NotifyStatus::Locked, to],
        _ => &[to],
    };
    walk(n, lease, steps, by, note, now)
}

/// The watchdog's claim (ANP 6.2): LOCKED under a new lease, one above the old, with `by` as
/// owner. Anyone still acting with the old lease is refused from now on.
pub(crate) fn take_over(
    n: &mut Notification,
    lease: u64,
    by: &str,
    now: i64,
) -> Result<u64, Refused> {
    check(n, lease)?;
    if !allowed(n.status, NotifyStatus::Locked) {
        return Err(Refused::NotAllowed {
            id: n.id.clone(),
            from: n.status,
            to: NotifyStatus::Locked,
        });
    }
    let new = lease + 1;
    n.history.push(Transition {
        at: now,
        from: Some(n.status),
        to: NotifyStatus::Locked,
        lease: new,
        by: by.to_owned(),
        note: Some(format!("lease {lease} → {new}")),
    });
    n.status = NotifyStatus::Locked;
    n.owner_lease = new;
    n.owner = by.to_owned();
    n.updated_at = now;
    Ok(new)
}

/// Records a refused action in the trail (the audit of who was fenced off, and when).
pub(crate) fn record_refusal(n: &mut Notification, lease: u64, by: &str, why: &Refused, now: i64) {
    n.history.push(Transition {
        at: now,
        from: Some(n.status),
        to: n.status,
        lease,
        by: by.to_owned(),
        note: Some(format!("refused: {why}")),
    });
}

/// Whether `lease` may act on `n` at all: not final, and the current lease.
pub(crate) fn check(n: &Notification, lease: u64) -> Result<(), Refused> {
    if n.status.is_terminal() {
        return Err(Refused::Terminal {
            id: n.id.clone(),
            status: n.status,
        });
    }
    if n.owner_lease != lease {
        return Err(Refused::StaleLease {
            id: n.id.clone(),
            given: lease,
            current: n.owner_lease,
        });
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use NotifyStatus::*;

    pub(crate) fn sample(status: NotifyStatus) -> Notification {
        Notification::for_tests(status)
    }

    #[test]
    fn only_the_edges_of_section_5_1_are_allowed() {
        let all = [Pending, Dispatched, Locked, Delivered, Escalated, Failed];
        let mut edges = Vec::new();
        for from in all {
            for to in all {
                if allowed(from, to) {
                    edges.push((from.as_str(), to.as_str()));
                }
            }
        }
        assert_eq!(
            edges,
            [
                ("pending", "dispatched"),
                ("dispatched", "locked"),
                ("locked", "delivered"),
                ("locked", "escalated"),
                ("locked", "failed"),
                ("escalated", "delivered"),
                ("escalated", "failed"),
            ]
        );
    }

    #[test]
    fn terminal_states_are_immutable() {
        for status in [Delivered, Failed] {
            let mut n = sample(status);
            let err = transition(&mut n, 1, Escalated, "t", None, 5).unwrap_err();
            assert!(matches!(err, Refused::Terminal { .. }), "{err}");
            assert_eq!(n.status, status);
        }
    }

    #[test]
    fn a_stale_lease_is_refused_after_a_take_over() {
        let mut n = sample(Dispatched);
        assert_eq!(take_over(&mut n, 1, "watchdog", 10).unwrap(), 2);
        let err = walk(&mut n, 1, &[Delivered], "agent:inv_1", None, 11).unwrap_err();
        assert_eq!(
            err,
            Refused::StaleLease {
                id: "ntf_1".into(),
                given: 1,
                current: 2
            }
        );
        transition(&mut n, 2, Escalated, "watchdog", None, 12).unwrap();
        assert_eq!((n.status, n.owner_lease), (Escalated, 2));
    }

    #[test]
    fn a_walk_changes_nothing_unless_every_step_is_allowed() {
        let mut n = sample(Dispatched);
        let before = n.history.len();
        assert!(walk(&mut n, 1, &[Locked, Pending], "x", None, 1).is_err());
        assert_eq!((n.status, n.history.len()), (Dispatched, before));
        walk(&mut n, 1, &[Locked, Delivered], "x", None, 1).unwrap();
        assert_eq!(n.status, Delivered);
    }
}
