//! Running a write again when PostgreSQL cut it short for a lock conflict: a deadlock
//! (40P01), which the server breaks by rolling back one of the transactions in the cycle,
//! or a serialization failure (40001, under an isolation level raised by the server's
//! defaults). The server rolled the transaction back whole, so the same unit of work can
//! run again from the start in a new transaction, and usually goes through: the other side
//! of the cycle has committed meanwhile. Several `pap dispatch` and `pap serve` processes
//! deciding on one database meet this under load; without a retry one of them failed.
//!
//! The retry is bounded (a cycle that keeps coming back is a bug to report, not to hide)
//! and jittered, so the two sides of a cycle do not meet again in step.

use std::time::Duration;

/// How many times one unit of work runs at most.
pub(super) const TRIES: u32 = 5;

/// The first pause's ceiling; each further one doubles it, up to [`MAX_PAUSE`].
const FIRST_PAUSE: Duration = Duration::from_millis(20);
const MAX_PAUSE: Duration = Duration::from_secs(1);

/// Why the server rolled a transaction back so that it may simply run again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Conflict {
    Deadlock,
    Serialization,
}

impl Conflict {
    /// The conflict a driver error reports, if it is one.
    pub(super) fn of(e: &postgres::Error) -> Option<Conflict> {
        use postgres::error::SqlState;
        let code = e.code()?;
        if *code == SqlState::T_R_DEADLOCK_DETECTED {
            Some(Conflict::Deadlock)
        } else if *code == SqlState::T_R_SERIALIZATION_FAILURE {
            Some(Conflict::Serialization)
        } else {
            None
        }
    }

    pub(super) fn code(self) -> &'static str {
        match self {
            Conflict::Deadlock => "40P01",
            Conflict::Serialization => "40001",
        }
    }

    pub(super) fn words(self) -> &'static str {
        match self {
            Conflict::Deadlock => "deadlock detected",
            Conflict::Serialization => "serialization failure",
        }
    }
}

/// The pause before run `tries + 1`, after `tries` runs that conflicted: "full jitter", a
/// uniform draw below a ceiling that doubles from 20 ms up to 1 s. The most a unit waits in
/// all is under 2 s, well inside the margin a lease written in it keeps (`HOLD_MARGIN_MS`).
pub(super) fn pause(tries: u32) -> Duration {
    let ceiling = FIRST_PAUSE
        .saturating_mul(1u32 << tries.saturating_sub(1).min(16))
        .min(MAX_PAUSE);
    let mut bytes = [0u8; 8];
    // Without randomness the ceiling itself still spaces the runs out.
    if getrandom::fill(&mut bytes).is_err() {
        return ceiling;
    }
    let draw = u64::from_le_bytes(bytes) as u128;
    let nanos = draw % ceiling.as_nanos().max(1);
    Duration::from_nanos(nanos as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pauses_stay_under_a_doubling_ceiling_capped_at_a_second() {
        for _ in 0..200 {
            assert!(pause(1) < Duration::from_millis(20));
            assert!(pause(2) < Duration::from_millis(40));
            assert!(pause(4) < Duration::from_millis(160));
            assert!(pause(30) < Duration::from_secs(1));
        }
        let total: Duration = (1..TRIES).map(|_| MAX_PAUSE).sum();
        assert!(total < Duration::from_secs(pap_domain::lease::HOLD_MARGIN_MS as u64 / 1000));
    }

    #[test]
    fn pauses_are_spread_not_fixed() {
        let drawn: std::collections::HashSet<_> = (0..50).map(|_| pause(5)).collect();
        assert!(drawn.len() > 40, "{drawn:?}");
    }

    /// Two transactions that take the same two advisory locks in opposite orders: the
    /// server rolls one back (40P01), and its unit of work runs again and commits; the
    /// other commits at its first run.
    #[test]
    fn a_unit_rolled_back_for_a_deadlock_runs_again_and_commits_once() {
        use std::sync::atomic::{AtomicU32, Ordering};
        use std::sync::{Arc, Barrier};
        let Some(server) = crate::testing::server_or_skip("running again after a deadlock") else {
            return;
        };
        let url = pap_database_url::parse(
            &server.migrated_database(),
            pap_database_url::Origin::Environment,
            &|_| None,
        )
        .expect("test URL");
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn pap_storage::Storage> =
            Arc::new(crate::PgStore::open(&url, dir.path()).expect("store"));
        let met = Arc::new(Barrier::new(2));
        let runs = Arc::new(AtomicU32::new(0));
        let side = |first: &'static str, second: &'static str| {
            let (store, met, runs) = (store.clone(), met.clone(), runs.clone());
            std::thread::spawn(move || {
                let mut mine = 0;
                store.write(|tx| {
                    mine += 1;
                    runs.fetch_add(1, Ordering::SeqCst);
                    tx.throttle_times(first, "k")?;
                    if mine == 1 {
                        // Each holds its first lock before either asks for its second.
                        met.wait();
                    }
                    tx.throttle_times(second, "k")?;
                    tx.throttle_record(first, "k", 1_000, 60_000)
                })
            })
        };
        let (a, b) = (side("a", "b"), side("b", "a"));
        a.join().unwrap().expect("side a commits");
        b.join().unwrap().expect("side b commits");
        assert_eq!(runs.load(Ordering::SeqCst), 3, "one side ran twice");
        let times = |bucket| store.write(|tx| tx.throttle_times(bucket, "k")).unwrap();
        assert_eq!(times("a"), vec![1_000], "committed once");
        assert_eq!(times("b"), vec![1_000], "committed once");
    }
}
