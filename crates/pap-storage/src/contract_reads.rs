//! The storage contract for reads that must not grow with the store (see `scan`): paging by
//! cursor, and the queue's counts, the same on every implementation.

use super::contract::{Check, checks, invocation};
use super::scan::{Next, Only, Order, QueueCounts, Scan};
use super::*;
use crate::domain::Status;

/// The sequence numbers `scan` gives, at most `max`.
fn seqs(s: &dyn Storage, scan: Scan, max: usize) -> Result<Vec<u64>> {
    s.read(|r| {
        let mut out = Vec::new();
        r.scan_invocations(&scan, &mut |inv| {
            assert!(inv.event.is_null(), "a scan reads no event");
            out.push(inv.seq);
            Ok(if out.len() < max {
                Next::More
            } else {
                Next::Stop
            })
        })?;
        Ok(out)
    })
}

fn scan(only: Only, order: Order, after: Option<u64>, now: i64) -> Scan {
    Scan {
        only,
        order,
        after,
        now,
    }
}

fn a_scan_pages_by_cursor_and_the_cursor_holds_while_rows_are_added(s: &dyn Storage) -> Result<()> {
    s.write(|tx| {
        for seq in 1..=5 {
            tx.insert_invocation(&invocation(&format!("i{seq}"), seq, Status::Queued))?;
        }
        Ok(())
    })?;
    let first = seqs(s, scan(Only::All, Order::Oldest, None, 0), 2)?;
    assert_eq!(first, [1, 2]);
    let newest = seqs(s, scan(Only::All, Order::Newest, None, 0), 2)?;
    assert_eq!(newest, [5, 4]);
    // Rows added after the first pages were read.
    s.write(|tx| {
        for seq in 6..=7 {
            tx.insert_invocation(&invocation(&format!("i{seq}"), seq, Status::Queued))?;
        }
        Ok(())
    })?;
    let next = seqs(s, scan(Only::All, Order::Oldest, Some(2), 0), 100)?;
    assert_eq!(next, [3, 4, 5, 6, 7], "the next page follows the cursor");
    let older = seqs(s, scan(Only::All, Order::Newest, Some(4), 0), 100)?;
    assert_eq!(
        older,
        [3, 2, 1],
        "an older page is the same whatever came since"
    );
    assert!(seqs(s, scan(Only::All, Order::Oldest, Some(7), 0), 100)?.is_empty());
    Ok(())
}

fn an_awaiting_scan_follows_status_and_deadline_as_of_now(s: &dyn Storage) -> Result<()> {
    s.write(|tx| {
        let mut open = invocation("open", 1, Status::AwaitingApproval);
        open.approval_deadline = Some(1_000);
        let mut lapsed = invocation("lapsed", 2, Status::AwaitingApproval);
        lapsed.approval_deadline = Some(100);
        tx.insert_invocation(&open)?;
        tx.insert_invocation(&lapsed)?;
        tx.insert_invocation(&invocation("forever", 3, Status::AwaitingApproval))?;
        tx.insert_invocation(&invocation("queued", 4, Status::Queued))?;
        tx.insert_invocation(&invocation("answered", 5, Status::AwaitingApproval))
    })?;
    let awaiting = |now| seqs(s, scan(Only::Awaiting, Order::Oldest, None, now), 100);
    assert_eq!(awaiting(50)?, [1, 2, 3, 5]);
    assert_eq!(
        awaiting(500)?,
        [1, 3, 5],
        "past its deadline it has expired"
    );
    s.write(|tx| {
        let mut answered = tx.invocation("answered")?.expect("stored");
        answered.status = Status::Queued;
        tx.put_invocation(&answered)
    })?;
    assert_eq!(awaiting(500)?, [1, 3]);
    let newest = seqs(s, scan(Only::Awaiting, Order::Newest, Some(3), 50), 100)?;
    assert_eq!(newest, [2, 1]);
    Ok(())
}

fn queue_counts_follow_every_write(s: &dyn Storage) -> Result<()> {
    s.write(|tx| {
        let mut early = invocation("early", 1, Status::AwaitingApproval);
        (early.created_at, early.approval_deadline) = (100, Some(1_100));
        let mut late = invocation("late", 2, Status::AwaitingApproval);
        (late.created_at, late.approval_deadline) = (200, Some(300));
        let mut plain = invocation("plain", 3, Status::AwaitingApproval);
        plain.created_at = 400;
        tx.insert_invocation(&early)?;
        tx.insert_invocation(&late)?;
        tx.insert_invocation(&plain)?;
        for (seq, due) in [(4, 10), (5, 700)] {
            let mut q = invocation(&format!("q{seq}"), seq, Status::Queued);
            q.created_at = due;
            tx.insert_invocation(&q)?;
        }
        tx.insert_invocation(&invocation("done", 6, Status::Succeeded))
    })?;
    let counts = s.read(|r| r.queue_counts(700, 100))?;
    assert_eq!(
        counts,
        QueueCounts {
            awaiting: 3,
            expired_unrecorded: 1,
            queued: 2,
            running: 0,
            overdue: 1,
            past_half: 1,
            oldest_waiting: Some(100),
        }
    );
    assert_eq!(counts.waiting(), 2);
    s.write(|tx| {
        let mut q = tx.invocation("q4")?.expect("stored");
        q.start_attempt(super::contract::lease(3), None, 800)
            .expect("queued starts");
        tx.put_invocation(&q)?;
        let mut early = tx.invocation("early")?.expect("stored");
        early.status = Status::Rejected;
        tx.put_invocation(&early)
    })?;
    let counts = s.read(|r| r.queue_counts(700, 100))?;
    assert_eq!(
        (
            counts.awaiting,
            counts.queued,
            counts.running,
            counts.overdue
        ),
        (2, 1, 1, 0)
    );
    assert_eq!((counts.past_half, counts.oldest_waiting), (0, Some(400)));
    Ok(())
}

pub(super) const CHECKS: &[Check] = checks![
    a_scan_pages_by_cursor_and_the_cursor_holds_while_rows_are_added,
    an_awaiting_scan_follows_status_and_deadline_as_of_now,
    queue_counts_follow_every_write,
];
