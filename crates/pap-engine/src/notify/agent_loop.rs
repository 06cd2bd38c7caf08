//! JP RFD 011, "during tool execution": a critical notification for an agent whose tool loop
//! is running rides on that loop's next request, with the tool responses, instead of forcing
//! a second, concurrent turn of the same agent. Only an agent with no running loop gets the
//! forced turn at once.
//!
//! Which agents are inside a loop is kept in the store, so every pap process sees it: one
//! row per LLM agent holding until when its newest loop is known to run (its lease's end,
//! raised at each renewal, cleared when an attempt ends), and one row saying the agent is
//! owed a forced turn, with the cascade depth that turn runs at. Both rows sit beside the
//! schedules' last fire times (`WriteTx::schedule_last`), under names no schedule can have,
//! so no store format changes for them; on PostgreSQL each is read and written under its
//! own advisory lock, which orders a loop's end against a notification routed at the same
//! moment.
//!
//! A loop that ends with a critical notification still queued (the model gave its last
//! answer, with no tool call to ride on) forces the turn then: its end is the next contact
//! point. A loop cut short (its lease lapsed) leaves the notification queued for the retry's
//! start, which takes the whole queue.

use super::produce::force_turn;
use crate::domain::{Handler, Level, Notification, NotifyStatus, Party};
use crate::manifest::Project;
use crate::storage::{self, WriteTx, lock_name};

/// Until when `agent`'s newest tool loop is known to run.
fn until_key(agent: &str) -> String {
    lock_name("pap.agent-loop", &[agent])
}

/// Whether `agent` is owed a forced turn, and at which cascade depth (depth + 1; 0: not).
fn owed_key(agent: &str) -> String {
    lock_name("pap.agent-loop-owes", &[agent])
}

/// Whether a tool loop of `agent` runs at `now`.
pub(crate) fn running(tx: &mut dyn WriteTx, agent: &str, now: i64) -> storage::Result<bool> {
    Ok(tx
        .schedule_last(&until_key(agent))?
        .is_some_and(|until| until > now))
}

/// A tool loop of `agent` runs until at least `until` (an attempt started, or its lease was
/// renewed).
pub(crate) fn opened(tx: &mut dyn WriteTx, agent: &str, until: i64) -> storage::Result<()> {
    let key = until_key(agent);
    if tx.schedule_last(&key)?.is_none_or(|known| known < until) {
        tx.set_schedule_last(&key, until)?;
    }
    Ok(())
}

/// A critical notification was queued for `agent` while its loop ran: if the loop ends
/// without taking it, the end forces a turn at `depth`.
pub(crate) fn owe(tx: &mut dyn WriteTx, agent: &str, depth: u32) -> storage::Result<()> {
    let key = owed_key(agent);
    let wanted = i64::from(depth).saturating_add(1);
    if tx.schedule_last(&key)?.is_none_or(|owed| owed < wanted) {
        tx.set_schedule_last(&key, wanted)?;
    }
    Ok(())
}

/// An attempt of `agent` ended (succeeded, failed or is to be retried): its loop is over.
/// A critical notification it did not take forces the agent's turn now. When two loops of
/// one agent run at once, the first to end says none runs: a critical notification arriving
/// before the other renews its lease gets a forced turn, as with no loop.
pub(crate) fn closed(
    tx: &mut dyn WriteTx,
    project: &Project,
    agent: &str,
    now: i64,
) -> storage::Result<()> {
    let until = until_key(agent);
    if tx.schedule_last(&until)?.is_some_and(|u| u != 0) {
        tx.set_schedule_last(&until, 0)?;
    }
    let owed_at = owed_key(agent);
    let owed = tx.schedule_last(&owed_at)?.unwrap_or(0);
    if owed == 0 {
        return Ok(());
    }
    tx.set_schedule_last(&owed_at, 0)?;
    let depth = u32::try_from(owed - 1).unwrap_or(u32::MAX);
    let queued = tx.queue_take(agent)?;
    let mut turn: Option<String> = None;
    for id in &queued {
        tx.queue_push(agent, id)?;
    }
    for id in &queued {
        let Some(mut n) = tx.notification(id)? else {
            continue;
        };
        if !waits_for_a_turn(&n) {
            continue;
        }
        let forced = match &turn {
            Some(t) => t.clone(),
            // One turn takes the whole queue at its start.
            None => force_turn(tx, project, agent, &n, depth, now)?,
        };
        n.forced_turn = Some(forced.clone());
        tx.put_notification(&n)?;
        turn = Some(forced);
    }
    Ok(())
}

/// A critical notification targeted at the agent that nobody took yet and no turn was forced
/// for.
fn waits_for_a_turn(n: &Notification) -> bool {
    n.level == Level::Critical
        && n.routing.target == Party::Agent
        && n.routing.handler == Handler::System
        && n.status == NotifyStatus::Pending
        && n.told.is_none()
        && n.forced_turn.is_none()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_loop_runs_until_its_latest_lease_end_and_stops_when_an_attempt_ends() {
        let s = crate::store::Store::memory_for_tests();
        let p = Project::empty_for_tests();
        let run = |now| s.write(|tx| running(tx, "a", now)).unwrap();
        assert!(!run(0), "no loop ever ran");
        s.write(|tx| opened(tx, "a", 100)).unwrap();
        s.write(|tx| opened(tx, "a", 50)).unwrap();
        assert!(run(99), "an earlier end never shortens it");
        assert!(!run(100), "a lease that ended ends the loop");
        assert!(!s.write(|tx| running(tx, "b", 0)).unwrap());
        s.write(|tx| closed(tx, &p, "a", 10)).unwrap();
        assert!(!run(10));
    }

    #[test]
    fn a_debt_keeps_the_deepest_depth_it_was_owed_at() {
        let s = crate::store::Store::memory_for_tests();
        s.write(|tx| owe(tx, "a", 3)).unwrap();
        s.write(|tx| owe(tx, "a", 1)).unwrap();
        let owed = s.write(|tx| tx.schedule_last(&owed_key("a"))).unwrap();
        assert_eq!(owed, Some(4));
    }
}
