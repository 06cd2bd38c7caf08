//! Identifiers the dispatcher mints. Emitted events get deterministic ids, so a re-run of the
//! same invocation emits the same ids and idempotency absorbs any repeat.

use sha2::{Digest, Sha256};

/// Lowercase hex of `bytes`.
fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(DIGITS[usize::from(b >> 4)] as char);
        out.push(DIGITS[usize::from(b & 15)] as char);
    }
    out
}

/// The first `chars` (even) hex digits of a SHA-256 over `parts`, each length-prefixed.
fn hex_prefix(parts: &[&[u8]], chars: usize) -> String {
    let mut h = Sha256::new();
    for p in parts {
        h.update((p.len() as u64).to_le_bytes());
        h.update(p);
    }
    hex(&h.finalize()[..chars / 2])
}

/// `inv_` + the decision time (ms, 12 hex digits) + 20 hex digits from the idempotency key
/// and that time: unique per decision, also when a key is decided again after its TTL.
/// Starting with the time makes ids sort by creation, so the invocation table grows at its
/// end: with random ids every new record rewrote a page somewhere in the table, a tenth of a
/// stream's time.
pub fn invocation(key: &[u8; 32], decided_at: i64) -> String {
    let time = (decided_at.max(0) as u64) & 0xffff_ffff_ffff;
    let mut id = String::with_capacity(36);
    id.push_str("inv_");
    id.push_str(&hex(&time.to_be_bytes()[2..]));
    id.push_str(&hex_prefix(&[key, &decided_at.to_le_bytes()], 20));
    id
}

/// A retry of invocation `original` (`pap invocations retry`): the same form as
/// [`invocation`], from the original's id and the retry's place in the invocation sequence,
/// so two retries of one invocation never share an id.
pub fn retry(original: &str, seq: u64, decided_at: i64) -> String {
    let time = (decided_at.max(0) as u64) & 0xffff_ffff_ffff;
    let mut id = String::with_capacity(36);
    id.push_str("inv_");
    id.push_str(&hex(&time.to_be_bytes()[2..]));
    id.push_str(&hex_prefix(
        &[b"retry", original.as_bytes(), &seq.to_le_bytes()],
        20,
    ));
    id
}

pub use crate::short_id::TURN_PREFIX;

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
    fn invocation_ids_sort_by_decision_time() {
        let a = invocation(&[9; 32], 1_700_000_000_000);
        let b = invocation(&[1; 32], 1_700_000_000_001);
        assert!(a < b, "{a} {b}");
        assert_eq!(a.len(), 36);
        assert!(a[4..].bytes().all(|c| c.is_ascii_hexdigit()), "{a}");
        assert_eq!(&a[4..16], "018bcfe56800");
        assert_ne!(invocation(&[9; 32], 5), invocation(&[8; 32], 5));
    }

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
        assert_eq!(invocation(&[0; 32], 1).len(), 36);
    }
}
