//! Cascade stage: PAP 0.2 section 6, "Depth ≥ 3 → reject".
//!
//! An event without `triggered_by` has depth 0; one whose `triggered_by` names an invocation
//! has that invocation's depth + 1. A `triggered_by` naming an invocation this dispatcher
//! does not know is rejected (fail closed) unless `unknown_triggered_by: accept`, which
//! treats it as one level below an outside root (depth 1).

use super::{Outcome, Verdict};
use crate::manifest::compiled::UnknownParentPolicy;

/// Where an event sits in a `triggered_by` chain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Depth {
    Root,
    /// The parent invocation is known; `depth` is the event's own depth.
    Child {
        parent: String,
        depth: u32,
    },
    UnknownParent(String),
}

impl Depth {
    /// `parent_depth` is the depth recorded on the invocation `triggered_by` names.
    pub fn of(triggered_by: Option<&str>, parent_depth: Option<u32>) -> Depth {
        match (triggered_by, parent_depth) {
            (None, _) => Depth::Root,
            (Some(p), Some(d)) => Depth::Child {
                parent: p.to_owned(),
                depth: d.saturating_add(1),
            },
            (Some(p), None) => Depth::UnknownParent(p.to_owned()),
        }
    }

    /// The number reported and recorded (an accepted unknown parent counts as depth 1).
    pub fn value(&self) -> u32 {
        match self {
            Depth::Root => 0,
            Depth::Child { depth, .. } => *depth,
            Depth::UnknownParent(_) => 1,
        }
    }
}

pub fn check(depth: &Depth, max_depth: u32, unknown: UnknownParentPolicy) -> Verdict {
    match depth {
        Depth::UnknownParent(parent) if unknown == UnknownParentPolicy::Reject => Verdict::Stop(
            Outcome::CascadeRejected,
            format!(
                "triggered_by {parent:?} names no invocation this dispatcher knows \
                 (unknown_triggered_by: reject)"
            )
            .into(),
        ),
        _ if depth.value() >= max_depth => Verdict::Stop(
            Outcome::CascadeRejected,
            format!(
                "cascade depth {} reaches max_cascade_depth {max_depth}",
                depth.value()
            )
            .into(),
        ),
        _ => Verdict::Continue,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use UnknownParentPolicy::{Accept, Reject};

    #[test]
    fn depth_follows_the_parent() {
        assert_eq!(Depth::of(None, None).value(), 0);
        assert_eq!(Depth::of(Some("inv_1"), Some(0)).value(), 1);
        assert_eq!(Depth::of(Some("inv_2"), Some(2)).value(), 3);
    }

    #[test]
    fn depth_three_is_rejected_by_default() {
        assert_eq!(
            check(&Depth::of(Some("i"), Some(1)), 3, Reject),
            Verdict::Continue
        );
        let Verdict::Stop(Outcome::CascadeRejected, why) =
            check(&Depth::of(Some("i"), Some(2)), 3, Reject)
        else {
            panic!()
        };
        assert!(why.to_string().contains("depth 3"), "{why}");
        assert!(matches!(check(&Depth::Root, 0, Reject), Verdict::Stop(..)));
    }

    #[test]
    fn unknown_parent_fails_closed_unless_accepted() {
        let d = Depth::of(Some("inv_forged"), None);
        let Verdict::Stop(_, why) = check(&d, 3, Reject) else {
            panic!()
        };
        assert!(why.to_string().contains("inv_forged"));
        assert_eq!(check(&d, 3, Accept), Verdict::Continue);
        assert!(matches!(check(&d, 1, Accept), Verdict::Stop(..)));
    }
}
