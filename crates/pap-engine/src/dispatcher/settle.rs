//! What a command does about notifications before it exits: it runs the internal turns
//! (handling agents, critical deliveries) that are waiting, and one pass of the watchdog and
//! the sinks. `pap serve` does both on its own timers; without a serve, a `pap dispatch`
//! still gets its failure narrated and its webhook posted before it returns.

use crate::domain::ids;
use crate::domain::{Holding, Status};
use crate::liveness::holding_now;
use crate::notify::pump::{Pumped, pump};

use super::Dispatcher;

/// Rounds of turns per settle: a turn's end never starts another turn (its own notifications
/// go to the user), so more than a couple of rounds means something else keeps adding them.
const ROUNDS: usize = 4;

impl Dispatcher<'_> {
    /// Runs waiting internal turns, then the timers once. Nothing under `--dry-run`; under
    /// `--no-run` only the timers (an approval request still reaches its sinks).
    pub fn settle_notifications(&mut self) -> anyhow::Result<Pumped> {
        let options = self.options();
        if options.dry_run {
            return Ok(Pumped::default());
        }
        if !options.no_run {
            for _ in 0..ROUNDS {
                let turns = self.waiting_turns()?;
                if turns.is_empty() {
                    break;
                }
                let results = self.run_each(turns, true)?;
                let emitted = results.into_values().flat_map(|r| r.emitted).collect();
                self.dispatch_emitted(emitted)?;
            }
        }
        let (store, project, now) = (
            self.runtime.store.clone(),
            self.runtime.project.clone(),
            self.runtime.clock.now_ms(),
        );
        self.rt.block_on(pump(store, project, now))
    }

    /// Queued internal turns nobody holds (a live holder runs its own). Turns are told from
    /// other due work by their id, so a backlog of queued work is not decoded at every exit.
    fn waiting_turns(&self) -> anyhow::Result<Vec<String>> {
        let now = self.runtime.clock.now_ms();
        Ok(self.runtime.store.read(|r| {
            let mut out = Vec::new();
            let due = r.work_due(now, usize::MAX)?;
            for id in due
                .into_iter()
                .filter(|id| id.starts_with(ids::TURN_PREFIX))
            {
                let Some(inv) = r.invocation(&id)? else {
                    continue;
                };
                let free = holding_now(inv.lease.as_ref(), now) != Holding::Other;
                if inv.internal && inv.status == Status::Queued && free {
                    out.push(id);
                }
            }
            Ok(out)
        })?)
    }
}
