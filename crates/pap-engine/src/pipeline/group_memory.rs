//! What a trigger remembers of an alert group: a group event (`per: group`, see
//! `adapter::group`) names its firing alerts in `data.members`. A repeat of the group that
//! only drops alerts (they resolved) has a new event id, but nothing new to look at: every
//! member was decided already. So per trigger and group, the members decided are kept (where
//! debounces keep their state, under `TRIGGER#group`, `#` being outside the id alphabet), and
//! such a repeat is decided `duplicate`. The memory lasts as long as an idempotency key
//! (`idempotency_ttl`), after which serve's purge lets it go, and holds at most
//! [`MAX_MEMBERS`] ids (the oldest go first).

use super::Pipeline;
use crate::domain::DebounceState;
use crate::event::Event;
use crate::stages::{Outcome, Verdict};
use crate::storage::{self, WriteTx};

/// The most member ids one trigger remembers of one group.
pub(crate) const MAX_MEMBERS: usize = 10_000;

/// Where a trigger's group memory is kept among the debounce states.
pub fn bucket(trigger: &str) -> String {
    format!("{trigger}#group")
}

/// The trigger a bucket of [`bucket`] belongs to.
pub fn trigger_of(bucket: &str) -> Option<&str> {
    bucket.strip_suffix("#group")
}

/// A firing group event's group key and members.
fn members_of(event: &Event) -> Option<(&str, Vec<&str>)> {
    if !event.kind.ends_with(".group.firing") {
        return None;
    }
    let data = event.value.get("data")?;
    let key = data.get("groupKey")?.as_str()?;
    let members = data
        .get("members")?
        .as_array()?
        .iter()
        .filter_map(serde_json::Value::as_str)
        .collect();
    Some((key, members))
}

impl Pipeline<'_> {
    /// For a firing group event: `duplicate` when the trigger decided every member of it
    /// already, else `Continue`, remembering its members.
    pub(super) fn group_check(
        &self,
        tx: &mut dyn WriteTx,
        trigger: &str,
        event: &Event,
        now: i64,
    ) -> storage::Result<Verdict> {
        let Some((key, members)) = members_of(event) else {
            return Ok(Verdict::Continue);
        };
        let bucket = bucket(trigger);
        let mut state = tx.debounce_state(&bucket, key)?.unwrap_or(DebounceState {
            last_seen: now,
            pending: None,
            seen: Vec::new(),
        });
        // Up to MAX_MEMBERS remembered: looked up as a set, not once per member.
        let seen: std::collections::HashSet<&str> = state.seen.iter().map(String::as_str).collect();
        let new: Vec<String> = members
            .iter()
            .filter(|m| !seen.contains(**m))
            .map(|m| (*m).to_owned())
            .collect();
        drop(seen);
        if new.is_empty() && !members.is_empty() {
            return Ok(Verdict::Stop(
                Outcome::Duplicate,
                format!(
                    "every firing alert of group {key} was decided already ({} of them): alerts only dropped out",
                    members.len()
                )
                .into(),
            ));
        }
        state.seen.extend(new);
        let over = state.seen.len().saturating_sub(MAX_MEMBERS);
        state.seen.drain(..over);
        state.last_seen = now;
        tx.debounce_put(&bucket, key, &state)?;
        Ok(Verdict::Continue)
    }
}
