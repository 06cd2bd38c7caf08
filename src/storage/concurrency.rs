//! The concurrency gate (a pap extension), for every store: where an invocation stands under
//! its concurrency keys, and whether a key has room for it. A store keeps, per key, who waits
//! (`queued`) and who runs (`running`) in decision order, and hands the entries of one key
//! to [`blocking`].

use crate::domain::{Invocation, Status};

/// Where an invocation stands under each of its concurrency keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Entry {
    Waiting,
    Running,
    /// Cancelled while it ran: holds its slot until its processes are gone, at most until
    /// this time (ms), so a cancel that never finished stopping them cannot hold it forever.
    Stopping(i64),
}

/// Where `inv` stands under its keys: `None` (not under any), or its entry.
pub fn state_of(inv: &Invocation) -> Option<Entry> {
    if inv.concurrency.is_empty() {
        return None;
    }
    if let Some(until) = inv.stopping_until {
        return Some(Entry::Stopping(until));
    }
    match inv.status {
        Status::Queued => Some(Entry::Waiting),
        Status::Running => Some(Entry::Running),
        _ => None,
    }
}

/// The first of `inv`'s concurrency keys with no room for it, with why: the key has `limit`
/// running (then the key is named), or invocations decided before it wait for the free
/// slots (so runs start in decision order; then the key comes back empty). `entries` gives
/// a key's (sequence number, entry, invocation id) rows.
pub fn blocking<E>(
    inv: &Invocation,
    now: i64,
    mut entries: impl FnMut(&str) -> Result<Vec<(u64, Entry, String)>, E>,
) -> Result<Option<(String, String)>, E> {
    for slot in &inv.concurrency {
        let key = slot.index_key();
        let (mut running, mut ahead) = (0u32, 0u32);
        for (seq, state, id) in entries(&key)? {
            if id == inv.id {
                continue;
            }
            match state {
                Entry::Running => running += 1,
                Entry::Stopping(until) if until > now => running += 1,
                Entry::Stopping(_) => {}
                Entry::Waiting if seq < inv.seq => ahead += 1,
                Entry::Waiting => {}
            }
        }
        if running.saturating_add(ahead) >= slot.limit {
            let mut why = format!(
                "waiting for a concurrency slot: {running} of {} running for key {} of {}",
                slot.limit,
                if slot.key.is_empty() {
                    "(none)"
                } else {
                    &slot.key
                },
                slot.scope
            );
            if ahead > 0 {
                why.push_str(&format!(", {ahead} decided earlier waiting before it"));
            }
            // Named only when the key itself is full; waiting behind earlier decisions says
            // nothing about the key's room for those earlier ones.
            let full = if running >= slot.limit {
                key
            } else {
                String::new()
            };
            return Ok(Some((full, why)));
        }
    }
    Ok(None)
}
