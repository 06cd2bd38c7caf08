//! What a person types for an id, resolved against the store: for invocations the full id,
//! any prefix of it, or a short form (see `domain::short_id`); for notifications the full id,
//! its number alone (`12` for `ntf_12`), or its ATP request's id or a prefix of it. An id
//! that names several is a usage error (exit 2) that lists them; an id that names none is
//! passed on as typed, so the command says what it says of an unknown id.

use super::Outcome;
use crate::domain::short_id::{self, MIN, Resolved};
use crate::storage::{self, Storage};

/// How many candidates an ambiguous id lists.
const LISTED: usize = 10;

/// The invocation `typed` names, or the outcome to end the command with (said on stderr).
pub(super) fn invocation(
    store: &dyn Storage,
    typed: &str,
) -> storage::Result<Result<String, Outcome>> {
    let resolved = storage::short_forms::resolve_invocation(store, typed, LISTED)?;
    Ok(settled("invocation", typed, resolved))
}

/// The notification `typed` names, as [`invocation`] does.
pub(super) fn notification(
    store: &dyn Storage,
    typed: &str,
) -> storage::Result<Result<String, Outcome>> {
    let numbered = typed
        .bytes()
        .all(|b| b.is_ascii_digit())
        .then(|| format!("ntf_{typed}"));
    let full = numbered.as_deref().unwrap_or(typed);
    let candidates = store.read(|r| {
        if r.notification(full)?.is_some() {
            return Ok(vec![full.to_owned()]);
        }
        if typed.len() < MIN {
            return Ok(Vec::new());
        }
        // An ATP request's id (a UUID) or a prefix of it.
        let (found, _) = r.notifications(
            &|n| n.atp_id().is_some_and(|atp| atp.starts_with(typed)),
            Some(LISTED + 1),
        )?;
        Ok(found.into_iter().map(|n| n.id).collect())
    })?;
    Ok(settle("notification", typed, candidates))
}

fn settle(what: &str, typed: &str, candidates: Vec<String>) -> Result<String, Outcome> {
    settled(what, typed, short_id::resolve(typed, candidates))
}

fn settled(what: &str, typed: &str, resolved: Resolved) -> Result<String, Outcome> {
    match resolved {
        Resolved::One(id) => Ok(id),
        Resolved::None => Ok(typed.to_owned()),
        Resolved::Many(ids) => {
            let more = if ids.len() > LISTED {
                " (and more)"
            } else {
                ""
            };
            let listed: Vec<&str> = ids.iter().take(LISTED).map(String::as_str).collect();
            crate::say!(
                "error: {typed} names more than one {what}{more}; type more of it:\n  {}",
                listed.join("\n  ")
            );
            Err(Outcome::Usage)
        }
    }
}

pub(super) use crate::storage::short_forms::short_forms;
