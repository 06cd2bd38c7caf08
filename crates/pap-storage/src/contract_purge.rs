//! The storage contract for the purge of records past their retention (see `purge`): what
//! goes, what stays, and that a walk in small steps goes on where the last one stopped, the
//! same on every implementation.

use super::contract::{Check, checks, invocation};
use super::*;
use crate::domain::{AuditEntry, InboxMessage, NotifyStatus, Status};

/// One step of a purge that walks by sequence number.
type SeqStep = dyn Fn(&mut dyn WriteTx, Option<u64>) -> Result<(purge::Purged, Option<u64>)>;

/// Runs a seq-walking purge in steps of `limit` until it is over; what it removed in all.
fn walk(s: &dyn Storage, limit: usize, step: &SeqStep) -> Result<usize> {
    let (mut after, mut removed, mut steps) = (None, 0, 0);
    loop {
        let (done, next) = s.write(|tx| step(tx, after))?;
        assert!(done.scanned <= limit, "{done:?}");
        removed += done.removed;
        steps += 1;
        assert!(steps < 100, "the walk does not end");
        after = next;
        if after.is_none() {
            return Ok(removed);
        }
    }
}

fn finished_invocations_past_the_cutoff_go_with_their_events_and_the_rest_stay(
    s: &dyn Storage,
) -> Result<()> {
    // Created at 10, changed at 20: three ended, one still queued; then one created at 500.
    let states = [
        ("i1", Status::Succeeded),
        ("i2", Status::Queued),
        ("i3", Status::Failed),
        ("i4", Status::Cancelled),
    ];
    s.write(|tx| {
        for (n, (id, status)) in states.iter().enumerate() {
            let mut inv = invocation(id, n as u64 + 1, *status);
            (inv.created_at, inv.updated_at) = (10, 20);
            tx.insert_invocation(&inv)?;
        }
        let mut young = invocation("i5", 5, Status::Succeeded);
        (young.created_at, young.updated_at) = (500, 500);
        tx.insert_invocation(&young)
    })?;
    let removed = walk(s, 1, &|tx, after| tx.purge_invocations(100, after, 1))?;
    assert_eq!(removed, 3);
    s.read(|r| {
        for gone in ["i1", "i3", "i4"] {
            assert!(r.invocation(gone)?.is_none(), "{gone} is gone");
        }
        // What stays reads whole, its event included.
        for kept in ["i2", "i5"] {
            let inv = r.invocation(kept)?.expect("kept");
            assert_eq!(inv.event["id"], format!("evt-{kept}"));
        }
        let counts = r.queue_counts(1_000, 0)?;
        assert_eq!(counts.queued, 1);
        Ok(())
    })?;
    // Nothing more is due.
    assert_eq!(
        walk(s, 10, &|tx, after| tx.purge_invocations(100, after, 10))?,
        0
    );
    Ok(())
}

fn settled_notifications_past_the_cutoff_go_with_their_keys(s: &dyn Storage) -> Result<()> {
    let note = |id: &str, seq: u64, status: NotifyStatus, key: &str| {
        let mut n = crate::domain::Notification::for_tests(status);
        (n.id, n.seq, n.created_at, n.updated_at) = (id.into(), seq, 10, 20);
        n.deduplication_key = Some(key.into());
        n.delivery_deadline = None;
        n
    };
    s.write(|tx| {
        let done = note("ntf_1", 1, NotifyStatus::Delivered, "k1");
        let shown = note("ntf_2", 2, NotifyStatus::Dispatched, "k2");
        let mut for_agent = note("ntf_3", 3, NotifyStatus::Dispatched, "k3");
        for_agent.delivery_deadline = Some(50);
        let pending = note("ntf_4", 4, NotifyStatus::Pending, "k4");
        for n in [&done, &shown, &for_agent, &pending] {
            tx.put_notification(n)?;
            tx.set_dedup(n.deduplication_key.as_deref().unwrap(), &n.id)?;
        }
        Ok(())
    })?;
    let removed = walk(s, 2, &|tx, after| tx.purge_notifications(100, after, 2))?;
    assert_eq!(removed, 2, "delivered, and shown to a person long ago");
    s.write(|tx| {
        assert!(tx.notification("ntf_1")?.is_none());
        assert!(tx.notification("ntf_2")?.is_none());
        assert!(
            tx.notification("ntf_3")?.is_some(),
            "its watchdog still acts"
        );
        assert!(tx.notification("ntf_4")?.is_some());
        assert_eq!(tx.dedup_lookup("k1")?, None);
        assert_eq!(tx.dedup_lookup("k3")?.as_deref(), Some("ntf_3"));
        Ok(())
    })?;
    let counts = s.read(|r| r.notification_counts())?;
    assert_eq!(counts.by_status.get("delivered"), None);
    assert_eq!(counts.by_status.get("dispatched"), Some(&1));
    Ok(())
}

fn old_inbox_messages_and_audit_entries_go_oldest_first(s: &dyn Storage) -> Result<()> {
    s.write(|tx| {
        for ts in [10, 20, 30, 500] {
            let mut m = InboxMessage::for_tests("system", "ntf-1", "x");
            m.ts = ts;
            tx.inbox_append(m)?;
            tx.audit(AuditEntry {
                seq: 0,
                at: ts,
                invocation_id: "i".into(),
                trigger: "t".into(),
                agent: "a".into(),
                risk: "low".into(),
                action: "cancelled".into(),
                actor: None,
                detail: None,
            })?;
        }
        Ok(())
    })?;
    // Two at a time: the second step stops at the young one.
    let first = s.write(|tx| tx.purge_inbox(100, 2))?;
    assert_eq!((first.removed, first.more), (2, true));
    let second = s.write(|tx| tx.purge_inbox(100, 2))?;
    assert_eq!((second.removed, second.more), (1, false));
    let audit = s.write(|tx| tx.purge_audit(100, 10))?;
    assert_eq!((audit.removed, audit.more), (3, false));
    s.read(|r| {
        let last = r.inbox_last()?;
        assert!(r.inbox_message(last)?.is_some(), "the young message stays");
        assert_eq!(r.audit(None)?.1, 1);
        Ok(())
    })
}

fn throttle_windows_whose_times_all_left_go_in_steps(s: &dyn Storage) -> Result<()> {
    s.write(|tx| {
        // Three windows last used at 10, one at 500.
        for (key, at) in [("a", 10), ("b", 10), ("c", 10), ("d", 500)] {
            tx.throttle_record("t", key, at, 1_000)?;
        }
        Ok(())
    })?;
    s.write(|tx| {
        let (mut after, mut removed, mut steps) = (None, 0, 0);
        loop {
            let (step, next) = tx.purge_throttle(100, after.as_ref(), 2)?;
            assert!(step.scanned <= 2, "{step:?}");
            removed += step.removed;
            steps += 1;
            after = next;
            if after.is_none() {
                break;
            }
        }
        assert_eq!((removed, steps >= 2), (3, true));
        assert!(tx.throttle_times("t", "a")?.is_empty());
        assert_eq!(tx.throttle_times("t", "d")?, [500]);
        Ok(())
    })
}

pub(super) const CHECKS: &[Check] = checks![
    finished_invocations_past_the_cutoff_go_with_their_events_and_the_rest_stay,
    settled_notifications_past_the_cutoff_go_with_their_keys,
    old_inbox_messages_and_audit_entries_go_oldest_first,
    throttle_windows_whose_times_all_left_go_in_steps,
];
