//! Opaque cursors for paged listings: a version, what the listing is, and the sequence number
//! of the last row given, base64url without padding. A sequence number is assigned once and
//! never reused, so a cursor keeps naming the same place while rows are added (keyset
//! pagination: no offset shifts). A person or a script passes it back as it came.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

/// The layout's version, the first byte.
const VERSION: u8 = 1;

/// What a cursor pages through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Invocations (any filter): `pap invocations`, the console's `/invocations`.
    Invocations,
    /// Invocations awaiting approval: the console's `/approvals`.
    Approvals,
}

impl Kind {
    fn tag(self) -> u8 {
        match self {
            Kind::Invocations => b'i',
            Kind::Approvals => b'a',
        }
    }
}

/// The cursor after the row with sequence number `seq`.
pub fn encode(kind: Kind, seq: u64) -> String {
    let mut bytes = vec![VERSION, kind.tag()];
    bytes.extend_from_slice(&seq.to_be_bytes());
    URL_SAFE_NO_PAD.encode(bytes)
}

/// Why a cursor was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("{0:?} is not a cursor of this listing (pass back the one a page gave, as it came)")]
pub struct BadCursor(pub String);

/// The sequence number `text` (a cursor of `kind`) names.
pub fn decode(kind: Kind, text: &str) -> Result<u64, BadCursor> {
    let bad = || BadCursor(text.chars().take(64).collect());
    let bytes = URL_SAFE_NO_PAD.decode(text).map_err(|_| bad())?;
    match bytes.as_slice() {
        [VERSION, tag, seq @ ..] if *tag == kind.tag() && seq.len() == 8 => {
            Ok(u64::from_be_bytes(seq.try_into().expect("8 bytes")))
        }
        _ => Err(bad()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cursor_round_trips_and_is_refused_for_another_listing() {
        let c = encode(Kind::Invocations, 123_456);
        assert_eq!(decode(Kind::Invocations, &c), Ok(123_456));
        assert!(decode(Kind::Approvals, &c).is_err());
        assert!(decode(Kind::Invocations, "12").is_err());
        assert!(decode(Kind::Invocations, "not a cursor!").is_err());
    }
}
