//! Serve's purge: every kind of state that expires is removed in small transactions that
//! take turns with the decisions.
//!
//! One purge pass used to run to its end on the deciding thread: after a backfill of a
//! million events, the first purge of their keys a TTL later took 17–24 s, and every file
//! that arrived meanwhile waited for it. Now a pass is a series of steps. Each step is one
//! transaction on one kind of state, bounded by a number of records that adapts to how long
//! the last step of that kind took (about [`STEP_TARGET`], its commit included). Serve makes
//! at most one step per turn of its loop, after the decisions that were waiting, so a
//! decision waits behind one step at most.
//!
//! Each step pays for its own writes (see [`storage::Commit::Background`]), and after each
//! the purge rests, so that it takes only a share of the time ([`BASE_SHARE`]). Deleting
//! idempotency keys is write-heavy: they are random, so each one rewrites a leaf and a branch
//! page of its table (about 10 KB a key in small transactions), and a purge that kept the
//! disk busy made every decision's sync wait behind its writes (`cargo bench --bench purge`:
//! the p99 decision went from 3 ms to 344 ms, with stalls of a second). A pass that goes on
//! for long takes a larger share ([`BEHIND_AFTER`]), so the purge keeps up with any rate the
//! node decides at.

use std::time::{Duration, Instant};

use crate::storage::purge::{ClaimBatch, DebounceCursor, Purged};
use crate::storage::{self, Storage, WriteTx};

/// How long one step should take, its commit included. A decision that arrives during a
/// step waits for it, so this bounds what the purge adds to a decision's latency.
pub(super) const STEP_TARGET: Duration = Duration::from_millis(1);
/// The fewest and the most records one step looks at.
const MIN_LIMIT: usize = 16;
const MAX_LIMIT: usize = 4096;
/// What a kind's first step looks at, before its pace is measured.
const FIRST_LIMIT: usize = 256;
/// The share of the time a pass takes while it has work: after a step that took `t` the
/// purge rests `t × (1 / share − 1)`.
pub(super) const BASE_SHARE: f64 = 0.125;
/// Each time a pass has gone on this long, its share doubles, up to all the time the
/// decisions leave (a node that decides faster than a quarter of its time purges must not
/// fall behind for ever).
pub(super) const BEHIND_AFTER: Duration = Duration::from_secs(600);

/// The kinds of state the purge removes. A pass takes them in turn, one step each, so that a
/// purge short of time falls behind on every kind a little rather than starving the last
/// ones: when each step went to the first kind with work left, a soak whose purge was at its
/// share saw the invocations kept and the notifications and inbox grow without bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    /// Idempotency claims past their TTL.
    Claims,
    /// Ledger rows (decisions) past `ledger_retention`.
    Ledger,
    /// Debounce states of bursts long over.
    Debounce,
    /// Throttle windows (and budget and chat-rate windows) whose times all left them.
    Throttle,
    /// Finished invocations past `invocation_retention`, with their events' bodies.
    Invocations,
    /// Settled notifications past `notification_retention`.
    Notifications,
    /// Inbox messages past `inbox_retention`.
    Inbox,
    /// Audit entries past `audit_retention`.
    Audit,
}

impl Kind {
    pub(super) const ALL: [Kind; 8] = [
        Kind::Claims,
        Kind::Ledger,
        Kind::Debounce,
        Kind::Throttle,
        Kind::Invocations,
        Kind::Notifications,
        Kind::Inbox,
        Kind::Audit,
    ];

    /// The name logs and metrics use.
    pub(super) fn name(self) -> &'static str {
        match self {
            Kind::Claims => "claims",
            Kind::Ledger => "ledger",
            Kind::Debounce => "debounce",
            Kind::Throttle => "throttle",
            Kind::Invocations => "invocations",
            Kind::Notifications => "notifications",
            Kind::Inbox => "inbox",
            Kind::Audit => "audit",
        }
    }
}

/// What a step needs to know of the time and the settings.
pub(super) struct Due<'a> {
    pub now: i64,
    /// Records of each kind from before its cutoff go (see [`Cutoffs`]).
    pub cutoffs: Cutoffs,
    /// A trigger's debounce quiet period now (`None`: it no longer debounces).
    pub quiet_of: &'a dyn Fn(&str) -> Option<i64>,
}

/// Where each kind's retention ends (ms): what is older goes.
#[derive(Debug, Clone, Copy)]
pub(super) struct Cutoffs {
    pub ledger: i64,
    /// Throttle windows whose newest time is older than the longest window go.
    pub throttle: i64,
    pub invocations: i64,
    pub notifications: i64,
    pub inbox: i64,
    pub audit: i64,
}

/// One step's result.
#[derive(Debug, Clone, Copy)]
pub(super) struct Step {
    pub kind: Kind,
    pub purged: Purged,
    pub took: Duration,
}

/// One kind's place in the pass.
#[derive(Debug)]
struct Lane {
    kind: Kind,
    /// Work is left in this pass.
    due: bool,
    /// Records the next step looks at.
    limit: usize,
    /// Where the walk over the debounce states goes on.
    debounce_after: Option<DebounceCursor>,
    /// Where the walk over invocations or notifications goes on (a sequence number).
    seq_after: Option<u64>,
    /// The expired claims gathered and being removed (kept from one pass to the next).
    claims: ClaimBatch,
    /// This pass's totals, for the log line at its end.
    removed: usize,
    steps: usize,
    longest: Duration,
}

/// The purge's state between steps.
#[derive(Debug)]
pub(super) struct Purger {
    lanes: Vec<Lane>,
    /// The lane whose turn is next (the search for one with work left starts there).
    turn: usize,
    /// When the pass going on started.
    pass_started: Instant,
    /// Until when the purge rests after its last step.
    rest_until: Option<Instant>,
}

impl Default for Purger {
    fn default() -> Self {
        Purger::new()
    }
}

impl Purger {
    pub(super) fn new() -> Purger {
        let lanes = Kind::ALL
            .into_iter()
            .map(|kind| Lane {
                kind,
                due: false,
                limit: FIRST_LIMIT,
                debounce_after: None,
                seq_after: None,
                claims: ClaimBatch::default(),
                removed: 0,
                steps: 0,
                longest: Duration::ZERO,
            })
            .collect();
        Purger {
            lanes,
            turn: 0,
            pass_started: Instant::now(),
            rest_until: None,
        }
    }

    /// Starts a pass over every kind (a pass still going just goes on).
    pub(super) fn start_pass(&mut self) {
        if !self.busy() {
            self.pass_started = Instant::now();
        }
        for lane in &mut self.lanes {
            lane.due = true;
        }
    }

    /// Whether the pass has work left.
    pub(super) fn busy(&self) -> bool {
        self.lanes.iter().any(|l| l.due)
    }

    /// How long until the next step is due: `None` when the pass is over (the caller then
    /// waits for the next pass), zero when a step is due now.
    pub(super) fn next_step_in(&self) -> Option<Duration> {
        if !self.busy() {
            return None;
        }
        Some(self.rest_until.map_or(Duration::ZERO, |at| {
            at.saturating_duration_since(Instant::now())
        }))
    }

    /// The share of the time this pass takes now (see [`BEHIND_AFTER`]).
    fn share(&self) -> f64 {
        let behind = self.pass_started.elapsed().as_secs_f64() / BEHIND_AFTER.as_secs_f64();
        (BASE_SHARE * 2f64.powi(behind.floor().min(8.0) as i32)).min(1.0)
    }

    /// Makes one step now on the next kind in turn with work left (resting or not; see
    /// [`next_step_in`](Self::next_step_in)); `None` when the pass is over. A failed step
    /// ends its kind's pass (the next pass tries again).
    pub(super) fn step(&mut self, store: &dyn Storage, due: &Due) -> storage::Result<Option<Step>> {
        let count = self.lanes.len();
        let Some(at) = (0..count)
            .map(|i| (self.turn + i) % count)
            .find(|&i| self.lanes[i].due)
        else {
            return Ok(None);
        };
        self.turn = (at + 1) % count;
        let lane = &mut self.lanes[at];
        let limit = lane.limit;
        let started = Instant::now();
        let result = match lane.kind {
            Kind::Claims => {
                let batch = &mut lane.claims;
                in_background(store, |tx| tx.purge_claims_batched(due.now, limit, batch))
            }
            Kind::Ledger => in_background(store, |tx| tx.purge_ledger(due.cutoffs.ledger, limit)),
            Kind::Inbox => in_background(store, |tx| tx.purge_inbox(due.cutoffs.inbox, limit)),
            Kind::Audit => in_background(store, |tx| tx.purge_audit(due.cutoffs.audit, limit)),
            Kind::Invocations | Kind::Notifications => {
                let after = lane.seq_after.take();
                let cutoffs = due.cutoffs;
                let kind = lane.kind;
                in_background_with(store, |tx| match kind {
                    Kind::Invocations => tx.purge_invocations(cutoffs.invocations, after, limit),
                    _ => tx.purge_notifications(cutoffs.notifications, after, limit),
                })
                .map(|(purged, next)| {
                    lane.seq_after = next;
                    purged
                })
            }
            Kind::Debounce | Kind::Throttle => {
                let after = lane.debounce_after.take();
                let (kind, cutoff) = (lane.kind, due.cutoffs.throttle);
                in_background_with(store, |tx| match kind {
                    Kind::Throttle => tx.purge_throttle(cutoff, after.as_ref(), limit),
                    _ => tx.purge_debounce(due.now, due.quiet_of, after.as_ref(), limit),
                })
                .map(|(purged, next)| {
                    lane.debounce_after = next;
                    purged
                })
            }
        };
        let took = started.elapsed();
        let purged = match result {
            Ok(p) => p,
            Err(e) => {
                lane.due = false;
                lane.debounce_after = None;
                lane.seq_after = None;
                // Keys taken from the batch may not be gone: gather them again.
                lane.claims = ClaimBatch::default();
                return Err(e);
            }
        };
        tracing::debug!(
            kind = lane.kind.name(),
            removed = purged.removed,
            scanned = purged.scanned,
            took_ms = took.as_secs_f64() * 1000.0,
            "purge step"
        );
        lane.limit = next_limit(limit, purged.scanned, took);
        lane.removed += purged.removed;
        lane.steps += 1;
        lane.longest = lane.longest.max(took);
        lane.due = purged.more;
        if !lane.due {
            log_pass(lane);
            lane.removed = 0;
            lane.steps = 0;
            lane.longest = Duration::ZERO;
        }
        let kind = lane.kind;
        let share = self.share();
        self.rest_until = Some(Instant::now() + took.mul_f64(1.0 / share - 1.0));
        Ok(Some(Step { kind, purged, took }))
    }

    /// Runs the pass to its end (`pap serve --once`, which has no decisions to take turns
    /// with). A kind that fails ends its pass; the first failure is returned once every
    /// other kind had its turn.
    pub(super) fn finish_pass(&mut self, store: &dyn Storage, due: &Due) -> storage::Result<()> {
        let mut failed = None;
        while self.busy() {
            if let Err(e) = self.step(store, due) {
                failed.get_or_insert(e);
            }
        }
        failed.map_or(Ok(()), Err)
    }
}

/// Runs one purge step committed in the background (see [`storage::Commit::Background`]),
/// or rolled back when it removed nothing.
fn in_background(
    store: &dyn Storage,
    mut f: impl FnMut(&mut dyn WriteTx) -> storage::Result<Purged>,
) -> storage::Result<Purged> {
    in_background_with(store, |tx| Ok((f(tx)?, ()))).map(|(p, ())| p)
}

/// As [`in_background`], for a step that also says where the next goes on.
fn in_background_with<T>(
    store: &dyn Storage,
    mut f: impl FnMut(&mut dyn WriteTx) -> storage::Result<(Purged, T)>,
) -> storage::Result<(Purged, T)> {
    let mut unchanged = None;
    let result = store.write_background(|tx| {
        let (purged, next) = f(tx)?;
        if purged.removed == 0 && !purged.tidied {
            unchanged = Some((purged, next));
            return Err(storage::Error::Unchanged);
        }
        Ok((purged, next))
    });
    match result {
        Err(storage::Error::Unchanged) => Ok(unchanged.expect("set before the rollback")),
        other => other,
    }
}

/// The limit for a kind's next step: what fits in [`STEP_TARGET`] at the pace of the step
/// that just looked at `scanned` records in `took`, at most halving or doubling at once (one
/// slow commit should not shrink the next step to nothing, nor one fast one let it balloon).
fn next_limit(limit: usize, scanned: usize, took: Duration) -> usize {
    if scanned == 0 {
        return limit;
    }
    let per_record = took.as_secs_f64() / scanned as f64;
    let fits = if per_record > 0.0 {
        STEP_TARGET.as_secs_f64() / per_record
    } else {
        f64::MAX
    };
    let fits = fits.min(MAX_LIMIT as f64) as usize;
    fits.clamp(limit / 2, limit.saturating_mul(2))
        .clamp(MIN_LIMIT, MAX_LIMIT)
}

fn log_pass(lane: &Lane) {
    if lane.removed == 0 {
        return;
    }
    tracing::info!(
        kind = lane.kind.name(),
        removed = lane.removed,
        steps = lane.steps,
        longest_step_ms = lane.longest.as_secs_f64() * 1000.0,
        "purged expired state"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn never_debounces(_: &str) -> Option<i64> {
        None
    }

    /// What a step needs at `now`, with every retention's cutoff at 0 (nothing but claims
    /// is old enough to go).
    fn due_at(now: i64) -> Due<'static> {
        Due {
            now,
            cutoffs: Cutoffs {
                ledger: 0,
                throttle: 0,
                invocations: 0,
                notifications: 0,
                inbox: 0,
                audit: 0,
            },
            quiet_of: &never_debounces,
        }
    }

    /// `n` claims that expired at 100, each with its decision (decided at 0).
    fn claims_expired_at_100(store: &dyn Storage, n: u32) {
        store
            .write(|tx| {
                for i in 0u32..n {
                    let mut key = [0u8; 32];
                    key[..4].copy_from_slice(&i.to_le_bytes());
                    let storage::Claimed::New = tx.claim(&key, 0, 100)? else {
                        panic!("fresh key");
                    };
                    tx.record_decision(
                        &key,
                        storage::RowRef {
                            event_id: "e",
                            trigger: "t",
                            kind: "a.b",
                            depth: 0,
                            outcome: "throttled",
                            invocation_id: None,
                            decided_at: 0,
                        },
                    )?;
                }
                Ok(())
            })
            .unwrap();
    }

    #[test]
    fn the_limit_follows_the_pace_but_at_most_halves_or_doubles() {
        // 1,000 records in half the target: 2,000 fit in it.
        assert_eq!(next_limit(1000, 1000, STEP_TARGET / 2), 2000);
        // 1,000 records in 20 ms: 100 would fit, but a step at most halves.
        assert_eq!(next_limit(1000, 1000, Duration::from_millis(20)), 500);
        // Very fast: at most doubles, never past the most.
        assert_eq!(next_limit(10_000, 10, Duration::from_nanos(1)), MAX_LIMIT);
        // Nothing looked at: the pace is unknown, the limit stays.
        assert_eq!(next_limit(300, 0, Duration::from_secs(1)), 300);
        // Never below the fewest.
        assert_eq!(next_limit(20, 20, Duration::from_secs(1)), MIN_LIMIT);
    }

    #[test]
    fn a_pass_goes_in_steps_until_every_kind_is_done() {
        let store = crate::store::Store::in_memory().unwrap();
        let store: &dyn Storage = &store;
        claims_expired_at_100(store, 3000);
        let due = due_at(200);
        let mut purger = Purger::new();
        assert!(!purger.busy());
        assert!(
            purger.step(store, &due).unwrap().is_none(),
            "no pass started"
        );
        purger.start_pass();
        let (mut claims, mut steps) = (0, 0);
        while let Some(step) = purger.step(store, &due).unwrap() {
            steps += 1;
            if step.kind == Kind::Claims {
                claims += step.purged.removed;
                assert!(step.purged.scanned <= MAX_LIMIT);
            }
        }
        assert_eq!(claims, 3000);
        assert!(
            steps >= 3,
            "{steps} steps: the first looks at {FIRST_LIMIT} keys"
        );
        assert!(!purger.busy());
    }

    #[test]
    fn kinds_with_work_take_turns() {
        let store = crate::store::Store::in_memory().unwrap();
        let store: &dyn Storage = &store;
        // The decisions are past their retention as well.
        claims_expired_at_100(store, 3000);
        let mut due = due_at(200);
        due.cutoffs.ledger = 1;
        let mut purger = Purger::new();
        purger.start_pass();
        let mut kinds = Vec::new();
        while let Some(step) = purger.step(store, &due).unwrap() {
            kinds.push(step.kind);
        }
        // The ledger's first step comes right after the claims' first, not after all of them.
        assert_eq!(kinds[..2], [Kind::Claims, Kind::Ledger], "{kinds:?}");
        let claims = kinds.iter().filter(|k| **k == Kind::Claims).count();
        let ledger = kinds.iter().filter(|k| **k == Kind::Ledger).count();
        assert!(claims >= 3 && ledger >= 3, "{kinds:?}");
        let last_ledger = kinds.iter().rposition(|k| *k == Kind::Ledger).unwrap();
        let first_claims_after = kinds[2..].iter().position(|k| *k == Kind::Claims).unwrap() + 2;
        assert!(
            first_claims_after < last_ledger,
            "the claims had another turn before the ledger was done: {kinds:?}"
        );
    }

    #[test]
    fn a_pass_over_keys_all_claimed_again_ends_and_drops_their_entries() {
        let store = crate::store::Store::in_memory().unwrap();
        let store: &dyn Storage = &store;
        let key = [9u8; 32];
        for (now, expires_at) in [(0, 100), (150, 500)] {
            store
                .write(|tx| {
                    assert!(matches!(
                        tx.claim(&key, now, expires_at)?,
                        storage::Claimed::New
                    ));
                    Ok(())
                })
                .unwrap();
        }
        let due = due_at(200);
        let mut purger = Purger::new();
        purger.start_pass();
        let mut steps = 0;
        while purger.step(store, &due).unwrap().is_some() {
            steps += 1;
            assert!(
                steps < 50,
                "a step that removes no key must still end the pass"
            );
        }
        // The entry due at 100 is gone (its step committed although it removed no key); the
        // claim renewed until 500 stays.
        let left = store.write(|tx| tx.purge_expired_claims(200, 10)).unwrap();
        assert_eq!(left.scanned, 0);
        let live = store.write(|tx| tx.purge_expired_claims(500, 10)).unwrap();
        assert_eq!(live.removed, 1);
    }
}
