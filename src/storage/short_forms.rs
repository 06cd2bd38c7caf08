//! Short forms of invocation ids, unique in the store (see `domain::short_id`).

use std::collections::{HashMap, HashSet};

use super::{Result, Storage};
use crate::domain::short_id::{self, MIN};

/// The short form of each of `ids` (at least [`MIN`] digits of its random part, unique in the
/// store), read in one pass over the invocations that share a first [`MIN`] digits with one
/// of them.
pub fn short_forms(store: &dyn Storage, ids: &[&str]) -> Result<HashMap<String, String>> {
    let heads: HashSet<&str> = ids.iter().map(|id| head(id)).collect();
    let alike = store.read(|r| r.invocation_ids(&|id| heads.contains(head(id)), usize::MAX))?;
    let sorted = short_id::sorted_random_parts(&alike);
    Ok(ids
        .iter()
        .map(|id| (id.to_string(), short_id::short(id, &sorted)))
        .collect())
}

fn head(id: &str) -> &str {
    let random = short_id::random_part(id);
    &random[..MIN.min(random.len())]
}
