//! Idempotency stage: an (event, trigger) pair is decided once (PAP 0.2 section 4).
//!
//! The key is SHA-256 over the UTF-8 of `event.id` followed by `trigger.id`. The claim is
//! written by the pipeline with the final outcome, in the same transaction as the rest of
//! the decision, and lives at least 24 hours (an expired claim reads as absent).
//!
//! Since that concatenation is ambiguous (`e1`+`tx` and `e1t`+`x` share a key), a live
//! claim counts only for the pair it was made for; another pair whose PAP key collides is
//! claimed under [`pair_key`] instead, so no decision is ever lost as a false duplicate.

use sha2::{Digest, Sha256};

use super::{Outcome, Verdict};
use crate::clock::rfc3339_ms;
use crate::domain::Claim;

pub fn key(event_id: &str, trigger_id: &str) -> [u8; 32] {
    let mut hasher = Sha256::new();
    hasher.update(event_id.as_bytes());
    hasher.update(trigger_id.as_bytes());
    hasher.finalize().into()
}

/// The key a pair is claimed under when PAP's key is already held by another pair (see
/// [`Claim::is_for_another_pair`]): each id length-prefixed, so no two pairs share it, and
/// under its own prefix, so it cannot meet a PAP key either.
pub(crate) fn pair_key(event_id: &str, trigger_id: &str) -> [u8; 32] {
    let mut hasher = Sha256::new();
    hasher.update(b"pap-claim-pair\0");
    for part in [event_id, trigger_id] {
        hasher.update((part.len() as u64).to_le_bytes());
        hasher.update(part.as_bytes());
    }
    hasher.finalize().into()
}

pub fn hex(key: &[u8; 32]) -> String {
    crate::text::hex(key)
}

/// `claim` is the live claim for the key, if any.
pub fn check(claim: Option<&Claim>) -> Verdict {
    match claim {
        None => Verdict::Continue,
        Some(c) => {
            let inv = c
                .invocation_id
                .as_deref()
                .map(|id| format!(" ({id})"))
                .unwrap_or_default();
            let how = c
                .outcome
                .as_deref()
                .map(|o| format!(": {o}{inv}"))
                .unwrap_or_default();
            Verdict::Stop(
                Outcome::Duplicate,
                format!(
                    "already decided at {}{how}; the key is kept until {}",
                    rfc3339_ms(c.decided_at),
                    rfc3339_ms(c.expires_at)
                )
                .into(),
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_is_sha256_of_event_id_then_trigger_id() {
        // printf 'evt_a3f92benergy-price-optimizer' | sha256sum
        assert_eq!(
            hex(&key("evt_a3f92b", "energy-price-optimizer")),
            "580d6a2789d2a981664828c9b934c5c3d6145597df21df8a07e5b0ec373ffb05"
        );
    }

    #[test]
    fn a_live_claim_is_a_duplicate() {
        assert_eq!(check(None), Verdict::Continue);
        let claim = Claim {
            expires_at: 86_400_000,
            decided_at: 0,
            outcome: Some("invoked".into()),
            invocation_id: Some("inv_1".into()),
            decided_pair: None,
        };
        let Verdict::Stop(Outcome::Duplicate, reason) = check(Some(&claim)) else {
            panic!()
        };
        assert!(reason.to_string().contains("invoked (inv_1)"), "{reason}");
    }
}
