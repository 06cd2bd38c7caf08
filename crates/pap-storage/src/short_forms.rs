//! Short forms of invocation ids, unique in the store (see `domain::short_id`).

use std::collections::{HashMap, HashSet};

use super::{Result, Storage};
use crate::domain::short_id::{self, MIN};

/// The short form of each of `ids` (at least [`MIN`] digits of its random part, unique in the
/// store), read in one pass over the invocations that share a first [`MIN`] digits with one
/// of them.
pub fn short_forms(store: &dyn Storage, ids: &[&str]) -> Result<HashMap<String, String>> {
    let heads: HashSet<&str> = ids.iter().map(|id| short_id::head(id)).collect();
    let heads: Vec<&str> = heads.into_iter().collect();
    let alike = store.read(|r| r.ids_with_random_heads(&heads))?;
    let sorted = short_id::sorted_random_parts(&alike);
    Ok(ids
        .iter()
        .map(|id| (id.to_string(), short_id::short(id, &sorted)))
        .collect())
}

/// What `typed` names among the store's invocations: the full id, any prefix of it, or a
/// short form (a prefix of the random part, see `domain::short_id`), as every command that
/// takes an invocation id reads it, and the MCP tools too. An ambiguous id lists at most
/// `listed` + 1 candidates.
pub fn resolve_invocation(
    store: &dyn Storage,
    typed: &str,
    listed: usize,
) -> Result<short_id::Resolved> {
    let candidates = store.read(|r| {
        if r.invocation(typed)?.is_some() {
            return Ok(vec![typed.to_owned()]);
        }
        r.invocation_ids(&|id| short_id::names(id, typed), listed.saturating_add(1))
    })?;
    Ok(short_id::resolve(typed, candidates))
}

/// Short forms for a listing that streams every invocation: the first 16 hex digits of every
/// id's random part, sorted (8 bytes an invocation, read in one key-only pass), so each row's
/// short form is a binary search. An id whose random part is not 16 hex digits or more, or
/// shares all 16 with another, is looked up exactly ([`short_forms`]).
pub struct Streamed<'s> {
    store: &'s dyn Storage,
    sorted: Vec<u64>,
}

/// The first 16 hex digits of `id`'s random part, when it has them.
fn prefix64(id: &str) -> Option<u64> {
    let random = short_id::random_part(id);
    random
        .get(..16)
        .and_then(|digits| u64::from_str_radix(digits, 16).ok())
}

impl<'s> Streamed<'s> {
    pub fn new(store: &'s dyn Storage) -> Result<Streamed<'s>> {
        let sorted = std::cell::RefCell::new(Vec::new());
        store.read(|r| {
            r.invocation_ids(
                &|id| {
                    if let Some(p) = prefix64(id) {
                        sorted.borrow_mut().push(p);
                    }
                    false
                },
                usize::MAX,
            )
        })?;
        let mut sorted = sorted.into_inner();
        sorted.sort_unstable();
        Ok(Streamed { store, sorted })
    }

    /// The short form of `id` (an invocation of the store).
    pub fn short(&self, id: &str) -> Result<String> {
        let exact = |id: &str| -> Result<String> {
            Ok(short_forms(self.store, &[id])?
                .remove(id)
                .unwrap_or_else(|| id.to_owned()))
        };
        let Some(mine) = prefix64(id) else {
            return exact(id);
        };
        let at = self.sorted.partition_point(|p| *p < mine);
        let mut after = at;
        while after < self.sorted.len() && self.sorted[after] == mine {
            after += 1;
        }
        if after - at > 1 {
            // Another id shares all 16 digits.
            return exact(id);
        }
        let common = |other: u64| ((mine ^ other).leading_zeros() / 4) as usize;
        let mut shared = 0;
        if after < self.sorted.len() {
            shared = shared.max(common(self.sorted[after]));
        }
        if at > 0 {
            shared = shared.max(common(self.sorted[at - 1]));
        }
        let random = short_id::random_part(id);
        Ok(random[..MIN.max(shared + 1).min(random.len())].to_owned())
    }
}
