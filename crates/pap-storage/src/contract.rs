//! The storage contract: behaviour every implementation of [`Storage`] must have. Each check
//! runs on a fresh, empty store; the composition root (`composition::contract_wiring`), the
//! one place that knows every store, runs them all against each, so that this module names
//! no implementation. A new store is added there and must pass every check here unchanged.

use serde_json::json;

use super::*;
use crate::domain::{DebounceState, InboxMessage, Invocation, Lease, Runner, Status};

/// One behaviour of the contract, checked on a fresh, empty store.
pub struct Check {
    pub name: &'static str,
    pub run: fn(&dyn Storage) -> Result<()>,
}

/// The checks named, each by its function's name.
macro_rules! checks {
    ($($name:ident),* $(,)?) => {
        &[$(super::contract::Check { name: stringify!($name), run: $name }),*]
    };
}
pub(super) use checks;

/// Every check of the contract, for the composition root to run against every store (a new
/// store must pass them all unchanged), and the copy between two stores in
/// [`a_copy_keeps_the_whole_state`].
pub fn all() -> impl Iterator<Item = &'static Check> {
    CHECKS
        .iter()
        .chain(super::contract_purge::CHECKS)
        .chain(super::contract_reads::CHECKS)
}

const CHECKS: &[Check] = checks![
    a_failed_write_leaves_nothing_behind,
    a_claim_holds_its_key_until_it_expires_and_names_its_decision,
    a_shortened_claim_frees_its_key_sooner_and_is_purged_then,
    sequences_and_lease_tokens_only_grow,
    only_the_current_lease_may_record_an_attempt,
    only_unfinished_invocations_are_cancellable_by_their_trigger_and_key,
    invocations_round_trip_and_list_in_creation_order,
    due_work_and_due_approvals_follow_status_and_times,
    throttle_windows_forget_what_left_them,
    debounce_state_keeps_its_pending_fire_due_in_order,
    a_concurrency_key_admits_its_limit_in_decision_order,
    only_the_first_waiters_of_a_key_are_due_work,
    a_waiter_behind_a_stopping_run_falls_due_when_the_slot_frees,
    a_retry_keeps_its_place_and_an_approved_one_goes_first,
    a_waiter_under_two_keys_is_due_when_both_admit_it,
    the_inbox_hands_out_increasing_ids_and_reads_strictly_after_a_watermark,
    agent_queues_sessions_jobs_dedup_and_atp_keep_what_they_are_given,
    the_outbox_and_the_audit_log_keep_order,
    notification_counts_follow_every_write,
    notifications_read_newest_first_stop_where_asked,
    a_purge_removes_expired_claims_and_old_decisions_only,
    due_work_is_taken_only_when_free_and_under_a_fresh_lease,
    concurrent_inbox_appenders_never_let_a_watermark_reader_skip_a_message,
    writers_changing_one_invocation_take_turns,
    a_shared_store_tells_listeners_of_freed_work_and_inbox_appends,
    a_shared_store_measures_its_clock,
];

pub(super) fn invocation(id: &str, seq: u64, status: Status) -> Invocation {
    Invocation {
        seq,
        event: json!({"id": format!("evt-{id}"), "data": {"n": seq}}),
        ..Invocation::for_tests(id, status)
    }
}

pub(super) fn lease(token: u64) -> Lease {
    Lease {
        holder: Runner {
            pid: 1,
            since: 0,
            started: None,
        },
        node: "test-node".into(),
        token,
        expires_at: 1_000,
        grace_ms: 0,
    }
}

fn key(n: u8) -> [u8; 32] {
    [n; 32]
}

fn row<'a>(event: &'a str, trigger: &'a str, invocation: Option<&'a str>) -> RowRef<'a> {
    RowRef {
        event_id: event,
        trigger,
        kind: "a.b.c",
        depth: 0,
        outcome: if invocation.is_some() {
            "invoked"
        } else {
            "filtered"
        },
        invocation_id: invocation,
        decided_at: 10,
    }
}

fn message(content: &str) -> InboxMessage {
    let mut m = InboxMessage::for_tests("system", "ntf-1", content);
    m.ts = 5;
    m
}

/// A refusal of the kind the engine's units of work make.
#[derive(Debug, PartialEq, thiserror::Error)]
#[error("declined: {0}")]
struct Declined(&'static str);

fn a_failed_write_leaves_nothing_behind(s: &dyn Storage) -> Result<()> {
    let failed = s.write(|tx| {
        tx.insert_invocation(&invocation("i1", 1, Status::Queued))?;
        assert!(matches!(tx.claim(&key(1), 0, 100)?, Claimed::New));
        tx.inbox_append(message("lost"))?;
        Err::<(), _>(Error::Unchanged)
    });
    assert!(matches!(failed, Err(Error::Unchanged)));
    // A refusal rolls back what the unit wrote before it refused, and comes back typed.
    let refused = s.write_or_refuse(|tx| {
        tx.insert_invocation(&invocation("i1", 1, Status::Queued))?;
        tx.inbox_append(message("lost"))?;
        Ok(Err::<(), _>(Declined("changed my mind")))
    })?;
    assert_eq!(refused, Err(Declined("changed my mind")));
    // A refusal carried inside the store's error keeps its type too.
    let carried = s
        .write(|_| Err::<(), _>(Error::refused(Declined("no"))))
        .unwrap_err();
    assert_eq!(carried.refusal::<Declined>(), Some(&Declined("no")));
    assert_eq!(carried.to_string(), "declined: no");
    s.read(|r| {
        assert!(r.invocation("i1")?.is_none());
        assert_eq!(r.inbox_last()?, 0);
        Ok(())
    })?;
    s.write(|tx| {
        assert!(matches!(tx.claim(&key(1), 0, 100)?, Claimed::New));
        Ok(())
    })
}

fn a_claim_holds_its_key_until_it_expires_and_names_its_decision(s: &dyn Storage) -> Result<()> {
    s.write(|tx| {
        let Claimed::New = tx.claim(&key(2), 0, 100)? else {
            panic!("a fresh key is claimed");
        };
        tx.record_decision(&key(2), row("e1", "t1", Some("inv-1")))
    })?;
    // A decision goes under the key its transaction claimed, once.
    let unclaimed = s.write(|tx| {
        let Claimed::New = tx.claim(&key(20), 0, 100)? else {
            panic!("a fresh key is claimed");
        };
        tx.record_decision(&key(21), row("e20", "t1", None))
    });
    assert!(
        matches!(unclaimed, Err(Error::DecisionNotClaimed { ref event_id, .. }) if event_id == "e20"),
        "{unclaimed:?}"
    );
    s.write(|tx| {
        let Claimed::Live(claim) = tx.claim(&key(2), 50, 150)? else {
            panic!("a live claim makes a duplicate");
        };
        assert_eq!(claim.expires_at, 100);
        assert_eq!(claim.outcome.as_deref(), Some("invoked"));
        assert_eq!(claim.invocation_id.as_deref(), Some("inv-1"));
        assert_eq!(claim.decided_pair, Some(("e1".to_owned(), "t1".to_owned())));
        // At its expiry the key is free again.
        let Claimed::New = tx.claim(&key(2), 100, 200)? else {
            panic!("an expired claim frees its key");
        };
        tx.record_decision(&key(2), row("e2", "t1", None))
    })?;
    s.read(|r| {
        let rows = r.ledger("e1")?;
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].trigger, "t1");
        Ok(())
    })
}

fn a_shortened_claim_frees_its_key_sooner_and_is_purged_then(s: &dyn Storage) -> Result<()> {
    s.write(|tx| {
        let Claimed::New = tx.claim(&key(30), 0, 86_400)? else {
            panic!("a fresh key is claimed");
        };
        tx.record_decision(&key(30), row("e30", "t1", None))?;
        tx.shorten_claim(&key(30), 300)?;
        // Never lengthened by it.
        tx.shorten_claim(&key(30), 5_000)
    })?;
    s.write(|tx| {
        let Claimed::Live(claim) = tx.claim(&key(30), 299, 90_000)? else {
            panic!("held until the sooner expiry");
        };
        assert_eq!(claim.expires_at, 300);
        assert_eq!(claim.outcome.as_deref(), Some("filtered"));
        Ok(())
    })?;
    // The purge finds it at the sooner time, not a day later.
    let purged = s.write(|tx| tx.purge_expired_claims(300, 100))?;
    assert_eq!(purged.removed, 1, "{purged:?}");
    s.write(|tx| {
        let Claimed::New = tx.claim(&key(30), 300, 90_000)? else {
            panic!("free from the sooner expiry on");
        };
        tx.record_decision(&key(30), row("e30", "t1", None))
    })?;
    // The first decision stays in the ledger beside the second.
    s.read(|r| {
        assert_eq!(r.ledger("e30")?.len(), 2);
        Ok(())
    })
}

fn sequences_and_lease_tokens_only_grow(s: &dyn Storage) -> Result<()> {
    let mut last = (0, 0, 0);
    for _ in 0..3 {
        let now = s.write(|tx| {
            Ok((
                tx.next(Sequence::Invocation)?,
                tx.next(Sequence::Notification)?,
                tx.issue_lease_token()?,
            ))
        })?;
        assert!(now.0 > last.0 && now.1 > last.1 && now.2 > last.2);
        last = now;
    }
    Ok(())
}

fn only_unfinished_invocations_are_cancellable_by_their_trigger_and_key(
    s: &dyn Storage,
) -> Result<()> {
    use crate::domain::CancelKey;
    let keyed = |id: &str, seq: u64, status: Status, trigger: &str, key: &str| {
        let mut inv = invocation(id, seq, status);
        inv.trigger = trigger.into();
        inv.cancel = Some(CancelKey {
            key: key.into(),
            sender: None,
        });
        inv
    };
    let ids = |list: Vec<Invocation>| list.into_iter().map(|i| i.id).collect::<Vec<_>>();
    s.write(|tx| {
        tx.insert_invocation(&keyed("c1", 1, Status::AwaitingApproval, "t", "\"a\""))?;
        tx.insert_invocation(&keyed("c2", 2, Status::Queued, "t", "\"a\""))?;
        tx.insert_invocation(&keyed("c3", 3, Status::Running, "t", "\"a\""))?;
        tx.insert_invocation(&keyed("c4", 4, Status::Succeeded, "t", "\"a\""))?;
        tx.insert_invocation(&keyed("c5", 5, Status::Queued, "t", "\"b\""))?;
        tx.insert_invocation(&keyed("c6", 6, Status::Queued, "u", "\"a\""))?;
        // Without a cancel key, never.
        tx.insert_invocation(&invocation("c7", 7, Status::Queued))?;
        // Seen by the transaction that wrote them, oldest first, bounded.
        assert_eq!(ids(tx.cancellable("t", "\"a\"", 10)?), ["c1", "c2", "c3"]);
        assert_eq!(ids(tx.cancellable("t", "\"a\"", 2)?), ["c1", "c2"]);
        Ok(())
    })?;
    s.write(|tx| {
        let found = tx.cancellable("t", "\"a\"", 10)?;
        assert_eq!(
            found[0].event["data"]["n"], 1,
            "the whole invocation, event included"
        );
        // Once it ends, it leaves the index; a changed status of an open one keeps it there.
        let mut done = tx.invocation("c2")?.expect("c2");
        done.status = Status::Cancelled;
        tx.put_invocation(&done)?;
        let mut approved = tx.invocation("c1")?.expect("c1");
        approved.status = Status::Queued;
        tx.put_invocation(&approved)?;
        assert_eq!(ids(tx.cancellable("t", "\"a\"", 10)?), ["c1", "c3"]);
        assert_eq!(ids(tx.cancellable("t", "\"b\"", 10)?), ["c5"]);
        assert!(tx.cancellable("t", "\"z\"", 10)?.is_empty());
        Ok(())
    })?;
    s.write(|tx| {
        assert_eq!(ids(tx.cancellable("t", "\"a\"", 10)?), ["c1", "c3"]);
        Ok(())
    })
}

fn only_the_current_lease_may_record_an_attempt(s: &dyn Storage) -> Result<()> {
    let (first, second) = s.write(|tx| {
        let first = tx.issue_lease_token()?;
        let mut inv = invocation("i1", 1, Status::Running);
        inv.lease = Some(lease(first));
        tx.insert_invocation(&inv)?;
        tx.check_lease("i1", first)?;
        let second = tx.issue_lease_token()?;
        inv.lease = Some(lease(second));
        tx.put_invocation(&inv)?;
        Ok((first, second))
    })?;
    s.write(|tx| {
        match tx.check_lease("i1", first) {
            Err(Error::LeaseLost { current, .. }) => assert_eq!(current, Some(second)),
            other => panic!("a stale token was accepted: {other:?}"),
        }
        tx.check_lease("i1", second)?;
        assert!(matches!(
            tx.check_lease("nobody", second),
            Err(Error::LeaseLost { current: None, .. })
        ));
        Ok(())
    })
}

fn invocations_round_trip_and_list_in_creation_order(s: &dyn Storage) -> Result<()> {
    s.write(|tx| {
        for (seq, id) in [(1, "c"), (2, "a"), (3, "b")] {
            tx.insert_invocation(&invocation(id, seq, Status::Queued))?;
        }
        Ok(())
    })?;
    s.write(|tx| {
        let mut b = tx.invocation("b")?.expect("stored");
        assert_eq!(b.event["data"]["n"], 3, "the event comes back whole");
        b.start_attempt(lease(9), None, 20).expect("queued starts");
        tx.put_invocation(&b)
    })?;
    s.read(|r| {
        let (all, total) = r.invocations(&|_| true, None)?;
        let ids: Vec<&str> = all.iter().map(|i| i.id.as_str()).collect();
        assert_eq!((ids, total), (vec!["c", "a", "b"], 3));
        let (last, total) = r.invocations(&|i| i.status == Status::Queued, Some(1))?;
        assert_eq!((last.len(), last[0].id.as_str(), total), (1, "a", 2));
        let b = r.invocation("b")?.expect("stored");
        assert_eq!((b.status, b.attempts), (Status::Running, 1));
        assert_eq!(b.lease.map(|l| l.token), Some(9));
        assert_eq!(b.event["data"]["n"], 3);
        // Ids alone, in id order, filtered and bounded.
        let ids = r.invocation_ids(&|_| true, usize::MAX)?;
        assert_eq!(ids, ["a", "b", "c"]);
        assert_eq!(r.invocation_ids(&|id| id != "a", 1)?, ["b"]);
        Ok(())
    })
}

fn due_work_and_due_approvals_follow_status_and_times(s: &dyn Storage) -> Result<()> {
    s.write(|tx| {
        tx.insert_invocation(&invocation("queued", 1, Status::Queued))?;
        let mut later = invocation("retry", 2, Status::Queued);
        later.next_attempt_at = Some(500);
        tx.insert_invocation(&later)?;
        tx.insert_invocation(&invocation("running", 3, Status::Running))?;
        tx.insert_invocation(&invocation("done", 4, Status::Succeeded))?;
        let mut waiting = invocation("waiting", 5, Status::AwaitingApproval);
        waiting.approval_deadline = Some(300);
        tx.insert_invocation(&waiting)?;
        Ok(())
    })?;
    s.read(|r| {
        let mut due = r.work_due(100, 10)?;
        due.sort();
        assert_eq!(due, ["queued", "running"]);
        let mut due = r.work_due(500, 10)?;
        due.sort();
        assert_eq!(due, ["queued", "retry", "running"]);
        assert_eq!(r.work_due(500, 1)?.len(), 1, "the limit holds");
        assert!(r.approvals_due(299)?.is_empty());
        assert_eq!(r.approvals_due(300)?, ["waiting"]);
        Ok(())
    })?;
    s.write(|tx| {
        let mut w = tx.invocation("waiting")?.expect("stored");
        w.end(Status::Expired, "deadline", vec![], 300)
            .expect("awaiting expires");
        tx.put_invocation(&w)?;
        assert!(
            tx.approvals_due(1_000)?.is_empty(),
            "an ended one is not due"
        );
        Ok(())
    })
}

fn throttle_windows_forget_what_left_them(s: &dyn Storage) -> Result<()> {
    s.write(|tx| {
        tx.throttle_record("t", "k", 0, 1000)?;
        tx.throttle_record("t", "k", 500, 1000)?;
        tx.throttle_record("t", "k", 1200, 1000)?;
        Ok(())
    })?;
    s.write(|tx| {
        assert_eq!(tx.throttle_times("t", "k")?, [500, 1200]);
        assert!(tx.throttle_times("t", "other")?.is_empty());
        Ok(())
    })
}

fn debounce_state_keeps_its_pending_fire_due_in_order(s: &dyn Storage) -> Result<()> {
    use crate::domain::{DebounceState, PendingFire};
    let pending = |due: i64, n: i64| DebounceState {
        last_seen: due - 60,
        pending: Some(PendingFire {
            due,
            event: serde_json::json!({"n": n}),
            sender: None,
            batch: Vec::new(),
            batch_bytes: 0,
            trace: None,
            links: Vec::new(),
        }),
        seen: Vec::new(),
    };
    assert_eq!(s.read(|r| r.debounce_next_due())?, None);
    s.write(|tx| {
        assert_eq!(tx.debounce_state("t", "a")?, None);
        tx.debounce_put("t", "a", &pending(500, 1))?;
        tx.debounce_put("t", "b", &pending(300, 2))?;
        // A later event of burst a moves its fire.
        tx.debounce_put("t", "a", &pending(900, 3))?;
        Ok(())
    })?;
    assert_eq!(s.read(|r| r.debounce_next_due())?, Some(300));
    s.write(|tx| {
        assert_eq!(tx.debounce_due(600, 10)?, [("t".into(), "b".into())]);
        assert_eq!(
            tx.debounce_due(1000, 10)?,
            [("t".to_string(), "b".to_string()), ("t".into(), "a".into())]
        );
        assert_eq!(tx.debounce_state("t", "a")?, Some(pending(900, 3)));
        // Taking the fire leaves the state without it, and nothing due.
        let quiet = DebounceState {
            last_seen: 840,
            pending: None,
            seen: Vec::new(),
        };
        tx.debounce_put("t", "a", &quiet)?;
        tx.debounce_put("t", "b", &quiet)?;
        assert!(tx.debounce_due(i64::MAX, 10)?.is_empty());
        assert_eq!(tx.debounce_state("t", "a")?, Some(quiet));
        Ok(())
    })?;
    assert_eq!(s.read(|r| r.debounce_next_due())?, None);
    // Bursts over (quiet 60 by 1000) and a trigger that no longer debounces go; a
    // pending fire and a burst still going stay.
    s.write(|tx| {
        tx.debounce_put("t", "going", &pending(5000, 4))?;
        tx.debounce_put(
            "t",
            "recent",
            &DebounceState {
                last_seen: 990,
                pending: None,
                seen: Vec::new(),
            },
        )?;
        tx.debounce_put(
            "gone",
            "x",
            &DebounceState {
                last_seen: 999,
                pending: None,
                seen: Vec::new(),
            },
        )?;
        let quiet_of = |trigger: &str| (trigger == "t").then_some(60);
        // In steps of two, each going on where the last stopped.
        let (mut after, mut removed, mut steps) = (None, 0, 0);
        loop {
            let (step, next) = tx.purge_debounce(1000, &quiet_of, after.as_ref(), 2)?;
            assert!(step.scanned <= 2, "{step:?}");
            removed += step.removed;
            steps += 1;
            after = next;
            if after.is_none() {
                break;
            }
        }
        assert_eq!(removed, 3);
        assert!(steps >= 2, "{steps} steps");
        assert_eq!(tx.debounce_state("t", "a")?, None);
        assert_eq!(tx.debounce_state("gone", "x")?, None);
        assert!(tx.debounce_state("t", "recent")?.is_some());
        assert!(tx.debounce_state("t", "going")?.is_some());
        Ok(())
    })?;
    Ok(())
}

fn a_concurrency_key_admits_its_limit_in_decision_order(s: &dyn Storage) -> Result<()> {
    use crate::domain::ConcurrencySlot;
    let keyed = |id: &str, seq: u64, key: &str| Invocation {
        concurrency: vec![ConcurrencySlot {
            scope: "trigger:t".into(),
            key: key.into(),
            limit: 1,
        }],
        ..invocation(id, seq, Status::Queued)
    };
    s.write(|tx| {
        for (id, seq, key) in [
            ("a1", 1, "a"),
            ("a2", 2, "a"),
            ("a3", 3, "a"),
            ("b1", 4, "b"),
        ] {
            tx.insert_invocation(&keyed(id, seq, key))?;
        }
        Ok(())
    })?;
    s.write(|tx| {
        let get = |tx: &mut dyn WriteTx, id: &str| tx.invocation(id).map(Option::unwrap);
        // The first decided may start; the later ones wait for it; another key is free.
        let a1 = get(tx, "a1")?;
        assert_eq!(tx.concurrency_wait(&a1, 0)?, None);
        let a2 = get(tx, "a2")?;
        let (key, why) = tx.concurrency_block(&a2, 0)?.expect("a1 was decided first");
        // Counted up to the limit: the gate never reads a long queue through.
        assert!(why.contains("1 or more decided earlier waiting"), "{why}");
        assert!(why.contains("0 of 1 running"), "{why}");
        assert_eq!(key, "trigger:t\u{1f}a", "a2 waits its turn in the key");
        let b1 = get(tx, "b1")?;
        assert_eq!(tx.concurrency_wait(&b1, 0)?, None);
        // a1 runs: a2 waits for its slot.
        let mut running = a1.clone();
        running.status = Status::Running;
        tx.put_invocation(&running)?;
        let (key, why) = tx.concurrency_block(&a2, 0)?.expect("a1 holds the slot");
        assert!(why.contains("1 of 1 running"), "{why}");
        assert_eq!(key, "trigger:t\u{1f}a", "the key is full");
        // a1 ends: a2 is next, a3 still waits behind it.
        running.status = Status::Succeeded;
        tx.put_invocation(&running)?;
        assert_eq!(tx.concurrency_wait(&a2, 0)?, None);
        let a3 = get(tx, "a3")?;
        assert!(tx.concurrency_wait(&a3, 0)?.is_some());
        // a2 runs and is cancelled: its processes may still be stopping until 5000, so
        // it keeps the slot until then, and not after.
        let mut a2 = get(tx, "a2")?;
        a2.status = Status::Cancelled;
        a2.stopping_until = Some(5000);
        tx.put_invocation(&a2)?;
        let why = tx.concurrency_wait(&a3, 4999)?.expect("a2 is stopping");
        assert!(why.contains("1 of 1 running"), "{why}");
        assert_eq!(tx.concurrency_wait(&a3, 5000)?, None);
        // Once its processes are gone the slot is free at any time.
        a2.stopping_until = None;
        tx.put_invocation(&a2)?;
        assert_eq!(tx.concurrency_wait(&a3, 0)?, None);
        Ok(())
    })
}

/// An invocation under concurrency keys `keys` (key under scope `trigger:t`, limit).
fn keyed(id: &str, seq: u64, status: Status, keys: &[(&str, u32)]) -> Invocation {
    Invocation {
        concurrency: keys
            .iter()
            .map(|(key, limit)| crate::domain::ConcurrencySlot {
                scope: "trigger:t".into(),
                key: (*key).into(),
                limit: *limit,
            })
            .collect(),
        ..invocation(id, seq, status)
    }
}

/// Due work at `now`, sorted (the order among equal due times is the store's).
fn due_at(s: &dyn Storage, now: i64) -> Result<Vec<String>> {
    let mut due = s.read(|r| r.work_due(now, 100))?;
    due.sort();
    Ok(due)
}

/// Changes invocation `id` with `change`, in a transaction of its own.
fn change(s: &dyn Storage, id: &str, mut change: impl FnMut(&mut Invocation)) -> Result<()> {
    s.write(|tx| {
        let mut inv = tx.invocation(id)?.expect("there");
        change(&mut inv);
        tx.put_invocation(&inv)
    })
}

/// A queue behind a key is due work only at its head: a scan for work never reads the
/// blocked tail, whatever order its ids come in (a group's ids are hashes).
fn only_the_first_waiters_of_a_key_are_due_work(s: &dyn Storage) -> Result<()> {
    s.write(|tx| {
        // Ids in the reverse of decision order.
        for seq in 1..=2000u64 {
            let id = format!("w{:04}", 2001 - seq);
            tx.insert_invocation(&keyed(&id, seq, Status::Queued, &[("a", 1)]))?;
        }
        tx.insert_invocation(&invocation("x-free", 3000, Status::Queued))?;
        Ok(())
    })?;
    assert_eq!(due_at(s, 0)?, ["w2000", "x-free"]);
    // Taking work finds the head at once, in a narrow look.
    let (mut taken, seen_all) = s.write(|tx| {
        tx.take_due_work(TakeWork {
            now: 0,
            limit: 36,
            room: 4,
            skip: &Default::default(),
            facts: &Facts,
            lease: &|token| lease(token),
        })
    })?;
    taken.sort();
    assert_eq!(
        (taken, seen_all),
        (vec!["w2000".into(), "x-free".into()], true)
    );
    // The head runs: nothing else of the key is due; it ends: the next one is.
    change(s, "w2000", |i| i.status = Status::Running)?;
    assert_eq!(due_at(s, 0)?, ["w2000", "x-free"]);
    change(s, "w2000", |i| i.status = Status::Succeeded)?;
    assert_eq!(due_at(s, 0)?, ["w1999", "x-free"]);
    // The manifests raise the limit to 3: the first three are due.
    s.write(|tx| tx.relimit_concurrency("trigger:t", 3))?;
    assert_eq!(due_at(s, 0)?, ["w1997", "w1998", "w1999", "x-free"]);
    // A waiter written under limit 1 again (a start refused under the manifests' limit)
    // takes the others back out.
    change(s, "w1997", |i| i.concurrency[0].limit = 1)?;
    assert_eq!(due_at(s, 0)?, ["w1999", "x-free"]);
    Ok(())
}

/// A stopping run holds its slot until its time: the waiter behind it falls due then, or at
/// once when its processes are gone.
fn a_waiter_behind_a_stopping_run_falls_due_when_the_slot_frees(s: &dyn Storage) -> Result<()> {
    s.write(|tx| {
        let mut a = keyed("a", 1, Status::Cancelled, &[("k", 1)]);
        a.stopping_until = Some(5000);
        tx.insert_invocation(&a)?;
        tx.insert_invocation(&keyed("b", 2, Status::Queued, &[("k", 1)]))
    })?;
    assert_eq!(due_at(s, 4999)?, Vec::<String>::new());
    assert_eq!(due_at(s, 5000)?, ["b"]);
    change(s, "a", |i| i.stopping_until = None)?;
    assert_eq!(due_at(s, 0)?, ["b"]);
    Ok(())
}

/// A retry waiting out its backoff keeps its place at the head, holding back the rest of its
/// key until it falls due; one decided earlier that comes back to the queue (an approval)
/// goes before the waiter that was due.
fn a_retry_keeps_its_place_and_an_approved_one_goes_first(s: &dyn Storage) -> Result<()> {
    s.write(|tx| {
        let mut h = keyed("h", 1, Status::Queued, &[("k", 1)]);
        h.next_attempt_at = Some(100);
        tx.insert_invocation(&h)?;
        tx.insert_invocation(&keyed("w", 2, Status::Queued, &[("k", 1)]))?;
        tx.insert_invocation(&keyed("p", 10, Status::AwaitingApproval, &[("j", 1)]))?;
        tx.insert_invocation(&keyed("q", 11, Status::Queued, &[("j", 1)]))
    })?;
    assert_eq!(due_at(s, 99)?, ["q"]);
    assert_eq!(due_at(s, 100)?, ["h", "q"]);
    change(s, "p", |i| i.status = Status::Queued)?;
    assert_eq!(due_at(s, 100)?, ["h", "p"]);
    Ok(())
}

/// An invocation under two keys is due once both admit it, and holds its place in both.
fn a_waiter_under_two_keys_is_due_when_both_admit_it(s: &dyn Storage) -> Result<()> {
    s.write(|tx| {
        tx.insert_invocation(&keyed("r", 1, Status::Running, &[("b", 1)]))?;
        tx.insert_invocation(&keyed("x", 2, Status::Queued, &[("a", 1), ("b", 1)]))?;
        tx.insert_invocation(&keyed("y", 3, Status::Queued, &[("a", 1)]))
    })?;
    assert_eq!(due_at(s, 0)?, ["r"]);
    change(s, "r", |i| i.status = Status::Succeeded)?;
    assert_eq!(due_at(s, 0)?, ["x"]);
    change(s, "x", |i| i.status = Status::Running)?;
    assert_eq!(due_at(s, 0)?, ["x"]);
    change(s, "x", |i| i.status = Status::Failed)?;
    assert_eq!(due_at(s, 0)?, ["y"]);
    Ok(())
}

fn the_inbox_hands_out_increasing_ids_and_reads_strictly_after_a_watermark(
    s: &dyn Storage,
) -> Result<()> {
    let ids = s.write(|tx| {
        let a = tx.inbox_append(message("one"))?;
        let b = tx.inbox_append(message("two"))?;
        assert_eq!(tx.inbox_mark()?, b);
        Ok((a, b))
    })?;
    assert!(ids.1 > ids.0);
    s.read(|r| {
        assert_eq!(r.inbox_last()?, ids.1);
        let after = r.inbox_after(ids.0, 10, &|_| true)?;
        assert_eq!(after.len(), 1);
        assert_eq!(after[0].content, "two");
        assert_eq!(r.inbox_after(0, 1, &|_| true)?[0].content, "one");
        assert!(r.inbox_after(ids.1, 10, &|_| true)?.is_empty());
        assert_eq!(r.inbox_message(ids.0)?.expect("stored").content, "one");
        Ok(())
    })
}

fn agent_queues_sessions_jobs_dedup_and_atp_keep_what_they_are_given(
    s: &dyn Storage,
) -> Result<()> {
    s.write(|tx| {
        tx.queue_push("ag", "n1")?;
        tx.queue_push("ag", "n2")?;
        tx.queue_push("other", "n3")?;
        assert!(tx.session_open("s1", 5)?, "a new session");
        assert!(!tx.session_open("s1", 6)?, "open already");
        tx.add_job(30, "escalate:n1")?;
        tx.add_job(10, "deliver:n2")?;
        tx.add_job(99, "late")?;
        tx.set_dedup("key", "n1")?;
        tx.atp_put("atp-1", "n2")?;
        tx.set_schedule_last("nightly", 77)?;
        Ok(())
    })?;
    s.write(|tx| {
        assert_eq!(tx.queue_take("ag")?, ["n1", "n2"]);
        assert!(tx.queue_take("ag")?.is_empty(), "taking empties the queue");
        assert!(tx.session_is_open("s1")?);
        assert_eq!(
            tx.jobs_due(50, 10)?,
            [
                (10, "deliver:n2".to_owned()),
                (30, "escalate:n1".to_owned())
            ]
        );
        tx.remove_job(10, "deliver:n2")?;
        assert_eq!(tx.jobs_due(50, 10)?.len(), 1);
        assert_eq!(tx.dedup_lookup("key")?.as_deref(), Some("n1"));
        assert_eq!(tx.atp_lookup("atp-1")?.as_deref(), Some("n2"));
        assert!(tx.session_close("s1")?);
        assert!(!tx.session_close("s1")?);
        Ok(())
    })?;
    // A session bound to an agent says so until it is unbound or closed; a queue can be
    // looked at without taking it.
    s.write(|tx| {
        tx.session_open("s2", 7)?;
        tx.session_bind("s2", Some("ag"))?;
        tx.queue_push("ag", "n9")?;
        Ok(())
    })?;
    s.read(|r| {
        assert_eq!(r.session_agent("s2")?.as_deref(), Some("ag"));
        assert_eq!(r.queue_peek("ag")?, ["n9"]);
        assert!(r.queue_peek("nobody")?.is_empty());
        Ok(())
    })?;
    s.write(|tx| {
        assert_eq!(tx.session_agent("s2")?.as_deref(), Some("ag"));
        tx.session_bind("s2", None)?;
        assert_eq!(tx.session_agent("s2")?, None);
        tx.session_bind("s2", Some("ag"))?;
        assert!(tx.session_close("s2")?);
        assert_eq!(tx.session_agent("s2")?, None, "closing unbinds");
        tx.queue_take("ag")?;
        Ok(())
    })?;
    assert!(s.read(|r| r.queue_peek("ag"))?.is_empty());
    s.read(|r| {
        assert!(r.sessions()?.is_empty());
        assert!(r.any_job_due(30)?);
        assert!(!r.any_job_due(29)?);
        assert_eq!(r.atp_lookup("atp-1")?.as_deref(), Some("n2"));
        assert_eq!(r.schedule_last("nightly")?, Some(77));
        assert_eq!(r.schedule_last("never")?, None);
        Ok(())
    })
}

fn the_outbox_and_the_audit_log_keep_order(s: &dyn Storage) -> Result<()> {
    s.write(|tx| {
        tx.outbox_put("e1", &json!({"id": "e1"}), None)?;
        tx.outbox_put("e2", &json!({"id": "e2"}), None)?;
        tx.outbox_remove("e1")?;
        for action in ["decided", "attempt_started", "succeeded"] {
            tx.audit(crate::domain::AuditEntry {
                seq: 0,
                at: 1,
                invocation_id: "i".into(),
                trigger: "t".into(),
                agent: "a".into(),
                risk: "high".into(),
                action: action.into(),
                actor: None,
                detail: None,
            })?;
        }
        Ok(())
    })?;
    s.read(|r| {
        let outbox = r.outbox_entries()?;
        assert_eq!(outbox.len(), 1);
        assert_eq!(outbox[0].0, "e2");
        let (last, total) = r.audit(Some(2))?;
        assert_eq!(total, 3);
        let actions: Vec<&str> = last.iter().map(|a| a.action.as_str()).collect();
        assert_eq!(actions, ["attempt_started", "succeeded"]);
        assert!(last[0].seq < last[1].seq);
        Ok(())
    })
}

fn notification_counts_follow_every_write(s: &dyn Storage) -> Result<()> {
    use crate::domain::{NotifyStatus, SinkDelivery, SinkState};
    let delivery = |state| SinkDelivery::for_tests("pager", state);
    let mut n = crate::domain::Notification::for_tests(NotifyStatus::Pending);
    n.id = "ntf_1".into();
    n.seq = 1;
    s.write(|tx| {
        tx.put_notification(&n)?;
        let mut m = n.clone();
        m.id = "ntf_2".into();
        m.seq = 2;
        m.sinks = vec![delivery(SinkState::Retrying)];
        tx.put_notification(&m)
    })?;
    let counts = s.read(|r| r.notification_counts())?;
    assert_eq!(counts.by_status.get("pending"), Some(&2));
    assert_eq!(counts.failing_by_sink.get("pager"), Some(&1));
    // A rewrite moves its counts; a sink that took it is failing no more.
    s.write(|tx| {
        let mut m = tx.notification("ntf_2")?.expect("stored");
        m.status = NotifyStatus::Dispatched;
        m.sinks = vec![delivery(SinkState::Sent)];
        tx.put_notification(&m)
    })?;
    let counts = s.read(|r| r.notification_counts())?;
    assert_eq!(counts.by_status.get("pending"), Some(&1));
    assert_eq!(counts.by_status.get("dispatched"), Some(&1));
    assert_eq!(counts.failing_by_sink.get("pager"), None);
    Ok(())
}

fn notifications_read_newest_first_stop_where_asked(s: &dyn Storage) -> Result<()> {
    s.write(|tx| {
        // More than a PostgreSQL page, so the scan goes on across pages.
        for seq in 1..=300u64 {
            let mut n =
                crate::domain::Notification::for_tests(crate::domain::NotifyStatus::Pending);
            n.id = format!("ntf_{seq}");
            n.seq = seq;
            tx.put_notification(&n)?;
        }
        Ok(())
    })?;
    s.read(|r| {
        let mut seen = Vec::new();
        r.scan_notifications(scan::Order::Newest, None, &mut |n| {
            seen.push(n.seq);
            Ok(if seen.len() < 280 {
                scan::Next::More
            } else {
                scan::Next::Stop
            })
        })?;
        assert_eq!(seen.len(), 280);
        assert_eq!((seen[0], seen[279]), (300, 21));
        assert!(seen.windows(2).all(|w| w[0] > w[1]));
        Ok(())
    })
}

fn a_purge_removes_expired_claims_and_old_decisions_only(s: &dyn Storage) -> Result<()> {
    s.write(|tx| {
        for (n, expires_at) in [(1, 100), (2, 100), (3, 10_000)] {
            let Claimed::New = tx.claim(&key(n), 0, expires_at)? else {
                panic!("fresh");
            };
            tx.record_decision(&key(n), row("e", "t", None))?;
        }
        Ok(())
    })?;
    let purged = s.write(|tx| tx.purge_expired_claims(500, 100))?;
    assert_eq!((purged.removed, purged.more), (2, false));
    s.write(|tx| {
        assert!(matches!(tx.claim(&key(3), 500, 600)?, Claimed::Live(_)));
        let Claimed::New = tx.claim(&key(1), 500, 600)? else {
            panic!("a purged claim frees its key");
        };
        tx.record_decision(&key(1), row("e-later", "t", None))
    })?;
    // Rows decided at 10 go once the cutoff passes them; none is left to go after.
    let gone = s.write(|tx| tx.purge_ledger(11, 100))?;
    assert!(gone.removed >= 3 && !gone.more, "{gone:?}");
    s.read(|r| {
        assert!(r.ledger("e")?.is_empty());
        Ok(())
    })
}

/// What the contract's holder checks see: this process is pid 1; pid 2 is alive; every
/// other pid on this node is dead.
struct Facts;

impl crate::domain::lease::HolderFacts for Facts {
    fn node(&self) -> &str {
        "test-node"
    }
    fn is_me(&self, holder: &Runner) -> bool {
        holder.pid == 1
    }
    fn is_alive(&self, holder: &Runner) -> bool {
        matches!(holder.pid, 1 | 2)
    }
}

fn due_work_is_taken_only_when_free_and_under_a_fresh_lease(s: &dyn Storage) -> Result<()> {
    let held_by = |pid: u32, token: u64| Lease {
        holder: Runner {
            pid,
            since: 0,
            started: None,
        },
        ..lease(token)
    };
    s.write(|tx| {
        tx.insert_invocation(&invocation("a-free", 1, Status::Queued))?;
        let mut other = invocation("b-held", 2, Status::Queued);
        other.lease = Some(held_by(2, 1));
        tx.insert_invocation(&other)?;
        let mut orphan = invocation("c-orphan", 3, Status::Running);
        orphan.lease = Some(held_by(99, 2));
        tx.insert_invocation(&orphan)?;
        let mut mine = invocation("d-mine", 4, Status::Queued);
        mine.lease = Some(held_by(1, 3));
        tx.insert_invocation(&mine)?;
        tx.insert_invocation(&invocation("e-skipped", 5, Status::Queued))?;
        tx.insert_invocation(&invocation("f-free", 6, Status::Queued))?;
        Ok(())
    })?;
    let skip: std::collections::HashSet<String> = ["e-skipped".to_owned()].into();
    let take = |room: usize| {
        s.write(|tx| {
            let before = tx.issue_lease_token()?;
            let make = |token| Lease {
                expires_at: 77,
                ..lease(token)
            };
            let (taken, seen_all) = tx.take_due_work(TakeWork {
                now: 10,
                limit: 100,
                room,
                skip: &skip,
                facts: &Facts,
                lease: &make,
            })?;
            Ok((before, taken, seen_all))
        })
    };
    let (before, mut taken, seen_all) = take(2)?;
    assert!(seen_all);
    assert_eq!(taken.len(), 2, "room for two: {taken:?}");
    let (_, more, _) = take(10)?;
    taken.extend(more);
    taken.sort();
    assert_eq!(taken, ["a-free", "c-orphan", "f-free"]);
    s.read(|r| {
        for id in &taken {
            let l = r.invocation(id)?.and_then(|i| i.lease).expect("leased");
            assert!(l.token > before, "{id}: a fresh token");
            assert_eq!(l.expires_at, 77);
        }
        let held = r.invocation("b-held")?.and_then(|i| i.lease).expect("kept");
        assert_eq!(held.holder.pid, 2, "a live holder keeps its work");
        Ok(())
    })
}

/// The inbox's ids are a watermark: a reader that has seen every id up to 42 must never find
/// 41 committed later. Appenders race here, each holding its transaction open a moment after
/// taking its id, while a reader advances its watermark to the highest id it saw.
fn concurrent_inbox_appenders_never_let_a_watermark_reader_skip_a_message(
    s: &dyn Storage,
) -> Result<()> {
    const APPENDERS: usize = 4;
    let per_appender: usize = std::env::var("PAP_TEST_INBOX_RACE")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(60);
    let done = std::sync::atomic::AtomicUsize::new(0);
    let seen = std::thread::scope(|scope| {
        for a in 0..APPENDERS {
            let done = &done;
            scope.spawn(move || {
                for i in 0..per_appender {
                    s.write(|tx| {
                        tx.inbox_append(message(&format!("{a}-{i}")))?;
                        // Work after the id was taken, as a real notification's
                        // transaction does: a later appender may commit meanwhile.
                        if i % 3 == a % 3 {
                            std::thread::sleep(std::time::Duration::from_millis(2));
                        }
                        tx.outbox_put(&format!("race-{a}-{i}"), &json!({}), None)
                    })
                    .expect("append");
                }
                done.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            });
        }
        let mut watermark = 0;
        let mut seen = Vec::new();
        loop {
            let finished = done.load(std::sync::atomic::Ordering::SeqCst) == APPENDERS;
            let batch = s
                .read(|r| r.inbox_after(watermark, 10_000, &|_| true))
                .expect("read");
            for m in &batch {
                seen.push(m.id);
                watermark = watermark.max(m.id);
            }
            if finished && batch.is_empty() {
                break seen;
            }
        }
    });
    let total = (APPENDERS * per_appender) as u64;
    let mut sorted = seen.clone();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(sorted.len(), seen.len(), "an id was read twice");
    let missed: Vec<u64> = (1..=total)
        .filter(|id| sorted.binary_search(id).is_err())
        .collect();
    assert!(missed.is_empty(), "the reader skipped {missed:?}");
    Ok(())
}

/// A state with something of every kind `transfer::Item` names.
fn populate(s: &dyn Storage) -> Result<()> {
    s.write(|tx| {
        let Claimed::New = tx.claim(&key(7), 10, 90_000)? else {
            panic!("fresh");
        };
        tx.record_decision(&key(7), row("ev-1", "t1", Some("inv-a")))?;
        let Claimed::New = tx.claim(&key(8), 11, 90_000)? else {
            panic!("fresh");
        };
        tx.record_decision(&key(8), row("ev-2", "t1", None))?;
        tx.throttle_record("t1", "\"host-a\"", 50, 1_000)?;
        tx.throttle_record("t1", "\"host-a\"", 60, 1_000)?;
        tx.debounce_put(
            "t2",
            "",
            &DebounceState {
                last_seen: 70,
                pending: Some(crate::domain::debounce::PendingFire {
                    due: 500,
                    event: json!({"id": "ev-3", "data": {"z": 1, "a": 2}}),
                    sender: Some(crate::domain::Sender {
                        route: "/v1/ingest/alertmanager".into(),
                        principal: None,
                    }),
                    batch: vec![json!({"id": "ev-2"}), json!({"id": "ev-3"})],
                    batch_bytes: 26,
                    // The trace the fire continues and the other events' it links.
                    trace: Some(crate::domain::trace_context::TraceContext {
                        trace_id: "4bf92f3577b34da6a3ce929d0e0e4736".into(),
                        parent_id: "00f067aa0ba902b7".into(),
                        flags: 1,
                        tracestate: Some("congo=t61rcWkgMzE".into()),
                    }),
                    links: vec![crate::domain::trace_context::TraceContext {
                        trace_id: "0af7651916cd43dd8448eb211c80319c".into(),
                        parent_id: "b7ad6b7169203331".into(),
                        flags: 0,
                        tracestate: None,
                    }],
                }),
                seen: Vec::new(),
            },
        )?;
        tx.set_token_uses(
            "agent-b",
            &[crate::domain::budget::TokenUse {
                at: 5,
                tokens: 1200,
                micros: 3600,
                invocation: "inv-a".into(),
                reserved: false,
            }],
        )?;
        let seq = tx.next(Sequence::Invocation)?;
        let mut a = invocation("inv-a", seq, Status::Running);
        a.lease = Some(lease(tx.issue_lease_token()?));
        a.concurrency = vec![crate::domain::ConcurrencySlot {
            scope: "agent:x".into(),
            key: "\"k\"".into(),
            limit: 1,
        }];
        tx.insert_invocation(&a)?;
        // Waiting for a's key, and the first of another key.
        for (id, key) in [("inv-c", "\"k\""), ("inv-d", "\"k\""), ("inv-e", "\"j\"")] {
            let seq = tx.next(Sequence::Invocation)?;
            let mut w = invocation(id, seq, Status::Queued);
            w.concurrency = vec![crate::domain::ConcurrencySlot {
                scope: "agent:x".into(),
                key: key.into(),
                limit: 1,
            }];
            tx.insert_invocation(&w)?;
        }
        let seq = tx.next(Sequence::Invocation)?;
        let mut b = invocation("inv-b", seq, Status::AwaitingApproval);
        b.approval_deadline = Some(9_000);
        tx.insert_invocation(&b)?;
        tx.set_schedule_last("nightly", 1234)?;
        tx.outbox_put("ev-out", &json!({"id": "ev-out", "type": "a.b"}), None)?;
        tx.audit(crate::domain::AuditEntry {
            seq: 0,
            at: 3,
            invocation_id: "inv-b".into(),
            trigger: "t1".into(),
            agent: "x".into(),
            risk: "high".into(),
            action: "decided".into(),
            actor: None,
            detail: None,
        })?;
        let mut n = crate::domain::Notification::for_tests(crate::domain::NotifyStatus::Pending);
        n.seq = tx.next(Sequence::Notification)?;
        tx.put_notification(&n)?;
        tx.set_dedup("dk", &n.id)?;
        tx.add_job(700, "watchdog:ntf_1")?;
        tx.inbox_append(message("first"))?;
        tx.inbox_append(message("second"))?;
        tx.queue_push("agent-b", "ntf_1")?;
        tx.queue_push("agent-b", "ntf_0")?;
        tx.session_open("ops", 9)?;
        tx.session_bind("ops", Some("agent-b"))?;
        tx.atp_put("atp-9", "ntf_1")?;
        Ok(())
    })
}

/// Everything a store exports, as sorted text (stores list some kinds in different orders).
fn exported(s: &dyn Storage) -> Result<Vec<String>> {
    let mut items = Vec::new();
    s.export(&mut |item| {
        items.push(format!("{item:?}"));
        Ok(())
    })?;
    items.sort();
    Ok(items)
}

/// `pap store copy` from `from` (empty) to `to` (empty), of any two stores: the copy exports
/// exactly what the original does, and goes on where the original stopped (claims live,
/// sequences past what was issued). `what` names the pair in a failure.
pub fn a_copy_keeps_the_whole_state(from: &dyn Storage, to: &dyn Storage, what: &str) {
    populate(from).unwrap_or_else(|e| panic!("{what}: {e}"));
    let original = exported(from).expect("export");
    assert!(original.len() >= 20, "{original:#?}");
    let copied = transfer::copy(from, to, &mut |_| {}).unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(
        copied
            .iter()
            .any(|(kind, n)| *kind == "invocations" && *n == 5)
    );
    assert_eq!(exported(to).expect("export"), original, "{what}");
    assert!(
        matches!(
            transfer::copy(from, to, &mut |_| {}),
            Err(Error::CopyTargetInUse { .. })
        ),
        "{what}: a copy into a store that holds a state is refused"
    );
    to.write(|tx| {
        assert!(matches!(tx.claim(&key(7), 20, 95_000)?, Claimed::Live(_)));
        assert!(tx.next(Sequence::Invocation)? > 5, "{what}");
        assert!(tx.next(Sequence::Notification)? > 1, "{what}");
        assert!(tx.issue_lease_token()? > 1, "{what}");
        assert_eq!(tx.inbox_append(message("third"))?, 3, "{what}");
        let Claimed::New = tx.claim(&key(9), 20, 95_000)? else {
            panic!("{what}: a new key");
        };
        tx.record_decision(&key(9), row("ev-9", "t1", None))
    })
    .unwrap_or_else(|e| panic!("{what}: {e}"));
    // The ledger's numbering went across too: the new decision took a row of its own.
    let rows: Vec<String> = exported(to)
        .expect("export")
        .into_iter()
        .filter(|i| i.starts_with("Ledger {"))
        .filter_map(|i| i.split(',').next().map(str::to_owned))
        .collect();
    let distinct: std::collections::HashSet<&String> = rows.iter().collect();
    assert_eq!(
        rows.len(),
        original
            .iter()
            .filter(|i| i.starts_with("Ledger {"))
            .count()
            + 1,
        "{what}"
    );
    assert_eq!(
        distinct.len(),
        rows.len(),
        "{what}: a ledger row issued again: {rows:?}"
    );
    to.read(|r| {
        // The waiters behind a's key are not due; the first of the other key is.
        assert_eq!(r.work_due(i64::MAX, 10)?, ["inv-a", "inv-e"], "{what}");
        assert_eq!(r.approvals_due(9_000)?, ["inv-b"], "{what}");
        assert_eq!(r.debounce_next_due()?, Some(500), "{what}");
        assert_eq!(r.queue_peek("agent-b")?, ["ntf_1", "ntf_0"], "{what}");
        Ok(())
    })
    .unwrap_or_else(|e| panic!("{what}: {e}"));
}

/// Two writers changing one invocation (a start on one node, a cancel on another) take
/// turns: the second reads what the first wrote, never the state both started from.
fn writers_changing_one_invocation_take_turns(s: &dyn Storage) -> Result<()> {
    s.write(|tx| tx.insert_invocation(&invocation("race", 1, Status::Queued)))?;
    let first_read = std::sync::Barrier::new(2);
    let seen_by_second = std::thread::scope(|scope| {
        let first = scope.spawn(|| {
            s.write(|tx| {
                let mut inv = tx.invocation("race")?.expect("stored");
                first_read.wait();
                // Long enough for the second writer to have read, were it not held.
                std::thread::sleep(std::time::Duration::from_millis(200));
                inv.status = Status::Running;
                tx.put_invocation(&inv)
            })
        });
        let second = scope.spawn(|| {
            first_read.wait();
            s.write(|tx| {
                let mut inv = tx.invocation("race")?.expect("stored");
                let seen = inv.status;
                inv.status = Status::Cancelled;
                tx.put_invocation(&inv)?;
                Ok(seen)
            })
        });
        first.join().expect("first writer").expect("first write");
        second.join().expect("second writer").expect("second write")
    });
    assert_eq!(seen_by_second, Status::Running, "a lost update");
    Ok(())
}

/// A store several hosts share keeps the offset of its clock, measured at open; one host's
/// store has none (its host's clock is the one).
fn a_shared_store_measures_its_clock(s: &dyn Storage) -> Result<()> {
    match s.clock_offset() {
        Some(offset) => {
            assert!(s.shared(), "only a shared store keeps a clock");
            let ms = offset.load(std::sync::atomic::Ordering::Relaxed);
            // The test server runs on this host: the clocks agree within a round trip.
            assert!(ms.abs() < 1_000, "offset {ms} ms");
        }
        None => assert!(!s.shared(), "a shared store keeps its clock"),
    }
    Ok(())
}

fn a_shared_store_tells_listeners_of_freed_work_and_inbox_appends(s: &dyn Storage) -> Result<()> {
    use crate::Change;
    use std::time::{Duration, Instant};
    let (heard, hears) = std::sync::mpsc::channel();
    let listening = s.listen(Box::new(move |c| {
        let _ = heard.send(c);
    }));
    assert_eq!(
        listening.is_some(),
        s.shared(),
        "only a shared store listens"
    );
    if listening.is_none() {
        return Ok(());
    }
    // Having connected, the listener calls back once for each kind (it may have missed
    // notifications while it did not listen).
    let mut first = Vec::new();
    let until = Instant::now() + Duration::from_secs(10);
    while first.len() < 3 && Instant::now() < until {
        if let Ok(c) = hears.recv_timeout(Duration::from_millis(100)) {
            first.push(c);
        }
    }
    assert_eq!(first, [Change::Work, Change::Inbox, Change::Notifications]);
    // Work a process holds is nobody else's: no notice. Work queued free: a notice.
    s.write(|tx| {
        let mut held = invocation("held", 1, Status::Queued);
        held.lease = Some(lease(1));
        tx.insert_invocation(&held)
    })?;
    assert!(hears.recv_timeout(Duration::from_millis(500)).is_err());
    s.write(|tx| tx.insert_invocation(&invocation("free", 2, Status::Queued)))?;
    assert_eq!(hears.recv_timeout(Duration::from_secs(5)), Ok(Change::Work));
    s.write(|tx| tx.inbox_append(message("hello")).map(drop))?;
    assert_eq!(
        hears.recv_timeout(Duration::from_secs(5)),
        Ok(Change::Inbox)
    );
    // A transaction that fails sends nothing.
    let failed = s.write(|tx| {
        tx.insert_invocation(&invocation("gone", 3, Status::Queued))?;
        Err::<(), _>(Error::Unchanged)
    });
    assert!(failed.is_err());
    assert!(hears.recv_timeout(Duration::from_millis(500)).is_err());
    drop(listening);
    Ok(())
}
