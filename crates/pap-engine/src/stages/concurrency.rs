//! Concurrency keys (a pap extension): at most `limit` runs at once per value of a trigger's
//! or an agent's `concurrency.key`. What an invocation runs under is worked out as it is
//! decided; the limits follow the manifests as they are now, for invocations already
//! waiting too (the store admits waiters under them).

use crate::manifest::Project;
use crate::manifest::compiled::Trigger;
use crate::storage::{self, WriteTx};

/// The concurrency keys an invocation of `trigger` runs under (a pap extension): the
/// trigger's and its agent's, each with the value its `key` selects in the event.
pub(crate) fn slots(
    trigger: &Trigger,
    agent: &crate::manifest::compiled::Agent,
    event: &serde_json::Value,
) -> Vec<crate::domain::ConcurrencySlot> {
    // Most triggers have none: nothing is allocated for them on the decision path.
    let scoped = [
        ("trigger", trigger.id.as_str(), trigger.concurrency.as_ref()),
        ("agent", agent.id.as_str(), agent.concurrency.as_ref()),
    ];
    scoped
        .into_iter()
        .filter_map(|(kind, id, c)| {
            let c = c?;
            Some(crate::domain::ConcurrencySlot {
                scope: format!("{kind}:{id}"),
                key: super::throttle::bucket_of(c.key.as_ref(), event),
                limit: c.limit,
            })
        })
        .collect()
}

/// Brings `slots`' limits to what the manifests say now: a limit raised or lowered after a
/// decision applies to the invocations already waiting. (A key whose `concurrency` was
/// removed keeps its last limit for them.)
pub(crate) fn refresh_limits(project: &Project, slots: &mut [crate::domain::ConcurrencySlot]) {
    for slot in slots {
        let limit = match slot.scope.split_once(':') {
            Some(("trigger", id)) => project
                .trigger(id)
                .and_then(|t| t.concurrency.as_ref())
                .map(|c| c.limit),
            Some(("agent", id)) => project
                .agent(id)
                .and_then(|a| a.concurrency.as_ref())
                .map(|c| c.limit),
            _ => None,
        };
        if let Some(limit) = limit {
            slot.limit = limit;
        }
    }
}

/// Tells the store the limit of every concurrency key as the manifests say now, so that the
/// invocations already waiting are admitted under it (`pap serve` at its start and at each
/// reload; otherwise a raised limit would let more start only once one of them started).
pub fn relimit_waiting(project: &Project, tx: &mut dyn WriteTx) -> storage::Result<()> {
    let scoped = project
        .triggers
        .iter()
        .map(|t| ("trigger", &t.id, t.concurrency.as_ref()))
        .chain(
            project
                .agents
                .iter()
                .map(|a| ("agent", &a.id, a.concurrency.as_ref())),
        );
    for (kind, id, c) in scoped {
        if let Some(c) = c {
            tx.relimit_concurrency(&format!("{kind}:{id}"), c.limit)?;
        }
    }
    Ok(())
}
