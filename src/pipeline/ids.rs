//! Identifiers the dispatcher mints. Emitted events get deterministic ids, so a re-run of the
//! same invocation emits the same ids and idempotency absorbs any repeat.

use sha2::{Digest, Sha256};

fn hex_prefix(parts: &[&[u8]], chars: usize) -> String {
    let mut h = Sha256::new();
    for p in parts {
        h.update((p.len() as u64).to_le_bytes());
        h.update(p);
    }
    h.finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<String>()[..chars]
        .to_owned()
}

/// `inv_…` from the idempotency key and the decision time: unique per decision, also when a
/// key is decided again after its TTL.
pub fn invocation(key: &[u8; 32], decided_at: i64) -> String {
    format!("inv_{}", hex_prefix(&[key, &decided_at.to_le_bytes()], 24))
}

/// Internal turns' ids start with this (ordinary ones are `inv_` and hex), so they can be
/// told apart in the work index by key alone.
pub const TURN_PREFIX: &str = "inv_turn_";

/// An internal turn started for notification `notification` (the `n`th turn it caused).
pub fn turn(notification: &str, n: u64) -> String {
    format!(
        "{TURN_PREFIX}{}",
        hex_prefix(&[b"turn", notification.as_bytes(), &n.to_le_bytes()], 24)
    )
}

/// The completion (`complete`) or failure (`failure`) event of an invocation.
pub fn outcome_event(invocation_id: &str, which: &str) -> String {
    format!(
        "evt_{}",
        hex_prefix(&[invocation_id.as_bytes(), which.as_bytes()], 24)
    )
}

/// The `n`th follow-up event an invocation's agent emitted.
pub fn follow_up_event(invocation_id: &str, n: usize) -> String {
    format!(
        "evt_{}",
        hex_prefix(&[invocation_id.as_bytes(), b"emits", &n.to_le_bytes()], 24)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_deterministic_and_distinct() {
        assert_eq!(
            outcome_event("inv_1", "complete"),
            outcome_event("inv_1", "complete")
        );
        assert_ne!(
            outcome_event("inv_1", "complete"),
            outcome_event("inv_1", "failure")
        );
        assert_ne!(follow_up_event("inv_1", 0), follow_up_event("inv_1", 1));
        assert_ne!(invocation(&[0; 32], 1), invocation(&[0; 32], 2));
        assert_eq!(invocation(&[0; 32], 1).len(), 28);
    }
}
