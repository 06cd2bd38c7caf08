//! Invocation ids as the store keys them: packed to bytes.
//!
//! An id is `inv_` + 12 hex digits of the decision time + 20 of a hash (36 characters), and it
//! is a key or a value in four places per invocation (the record, the creation order, the work
//! index, the ledger row). Packed, it takes 17 bytes: a tag and the 16 bytes the hex digits
//! spell, in the same order, so the invocation table still grows at its end. An internal
//! turn's id (`inv_turn_` + 24 hex digits) takes 13; any other id (tests use short ones) is
//! kept as its text behind a tag of its own. Only lowercase hex is packed, so unpacking gives
//! back exactly the id that was packed.

/// Another id, kept as text.
const TEXT: u8 = 0;
/// `inv_` + 32 lowercase hex digits.
const INVOCATION: u8 = 1;
/// `inv_turn_` + 24 lowercase hex digits.
const TURN: u8 = 2;

/// The bytes the store keys `id` by.
pub(super) fn pack(id: &str) -> Vec<u8> {
    let packed = |tag: u8, hex: &str, len: usize| {
        (hex.len() == len * 2
            && hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)))
        .then(|| {
            let mut out = Vec::with_capacity(len + 1);
            out.push(tag);
            out.extend(
                hex.as_bytes()
                    .chunks(2)
                    .map(|pair| nibble(pair[0]) << 4 | nibble(pair[1])),
            );
            out
        })
    };
    let found = if let Some(hex) = id.strip_prefix("inv_turn_") {
        packed(TURN, hex, 12)
    } else if let Some(hex) = id.strip_prefix("inv_") {
        packed(INVOCATION, hex, 16)
    } else {
        None
    };
    found.unwrap_or_else(|| {
        let mut out = Vec::with_capacity(id.len() + 1);
        out.push(TEXT);
        out.extend_from_slice(id.as_bytes());
        out
    })
}

/// The id `bytes` were packed from; `None` for bytes [`pack`] cannot have made.
pub(super) fn unpack(bytes: &[u8]) -> Option<String> {
    let (&tag, rest) = bytes.split_first()?;
    let hex = |prefix: &str, len: usize| {
        (rest.len() == len).then(|| {
            let mut id = String::with_capacity(prefix.len() + len * 2);
            id.push_str(prefix);
            pap_text::text::push_hex(&mut id, rest);
            id
        })
    };
    match tag {
        TEXT => String::from_utf8(rest.to_vec()).ok(),
        INVOCATION => hex("inv_", 16),
        TURN => hex("inv_turn_", 12),
        _ => None,
    }
}

/// The first six hex digits of a packed id's random part (see `short_id::head`), as the
/// three bytes they pack to; `None` for an id kept as text.
pub(super) fn random_head(packed: &[u8]) -> Option<[u8; 3]> {
    let (&tag, rest) = packed.split_first()?;
    // An invocation's random part follows six bytes of time; a turn's is all of it.
    let from = match (tag, rest.len()) {
        (INVOCATION, 16) => 6,
        (TURN, 12) => 0,
        _ => return None,
    };
    rest.get(from..from + 3)?.try_into().ok()
}

/// Six lowercase hex digits as the three bytes they pack to.
pub(super) fn head_bytes(hex: &str) -> Option<[u8; 3]> {
    let ok = hex.len() == 6
        && hex
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    ok.then(|| {
        let b = hex.as_bytes();
        [0, 2, 4].map(|i| nibble(b[i]) << 4 | nibble(b[i + 1]))
    })
}

fn nibble(b: u8) -> u8 {
    match b {
        b'0'..=b'9' => b - b'0',
        _ => b - b'a' + 10,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_and_pack_small() {
        for (id, len) in [
            ("inv_019cdb7b0b00373dbd64595f93f9d5d1", 17),
            ("inv_turn_0123456789abcdef01234567", 13),
            ("i1", 3),
            ("inv_019CDB7B0B00373DBD64595F93F9D5D1", 37),
            ("inv_019cdb7b0b00373dbd64595f93f9d5d", 36),
            ("inv_", 5),
            ("", 1),
        ] {
            let packed = pack(id);
            assert_eq!(packed.len(), len, "{id}");
            assert_eq!(unpack(&packed).as_deref(), Some(id));
        }
        assert_eq!(unpack(&[9, 1]), None);
        assert_eq!(unpack(&[INVOCATION, 1, 2]), None);
    }

    #[test]
    fn the_random_head_is_read_from_the_packed_bytes() {
        let inv = pack("inv_019cdb7b0b00373dbd64595f93f9d5d1");
        assert_eq!(random_head(&inv), head_bytes("373dbd"));
        let turn = pack("inv_turn_0123456789abcdef01234567");
        assert_eq!(random_head(&turn), head_bytes("012345"));
        assert_eq!(random_head(&pack("i1")), None);
        assert_eq!(head_bytes("37ZDBD"), None);
    }

    #[test]
    fn packed_ids_sort_as_their_times() {
        let early = pack("inv_019cdb7b0b00ffffffffffffffffffff");
        let later = pack("inv_019cdb7b0b0100000000000000000000");
        assert!(early < later);
    }
}
