//! LEB128 varints and zigzag, for the packed records (`invocation_codec`, `ledger_block`).

pub(super) fn put(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

pub(super) fn put_signed(out: &mut Vec<u8>, v: i64) {
    put(out, ((v << 1) ^ (v >> 63)) as u64);
}

/// Reads a varint off the front of `bytes`; `None` when truncated or longer than 64 bits.
pub(super) fn take(bytes: &mut &[u8]) -> Option<u64> {
    let mut v: u64 = 0;
    for shift in (0..64).step_by(7) {
        let (&b, rest) = bytes.split_first()?;
        *bytes = rest;
        v |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

pub(super) fn take_signed(bytes: &mut &[u8]) -> Option<i64> {
    let v = take(bytes)?;
    Some(((v >> 1) as i64) ^ -((v & 1) as i64))
}

/// The bytes [`put`] writes for `v`.
pub(super) fn len(mut v: u64) -> usize {
    let mut n = 1;
    while v >= 0x80 {
        v >>= 7;
        n += 1;
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_round_trip() {
        for v in [0, 1, 127, 128, 300, u64::from(u32::MAX), u64::MAX] {
            let mut out = Vec::new();
            put(&mut out, v);
            assert_eq!(out.len(), len(v));
            assert_eq!(take(&mut out.as_slice()), Some(v));
        }
        for v in [0, -1, 1, i64::MIN, i64::MAX, 1_700_000_000_000] {
            let mut out = Vec::new();
            put_signed(&mut out, v);
            assert_eq!(take_signed(&mut out.as_slice()), Some(v));
        }
        assert_eq!(take(&mut [0x80u8, 0x80].as_slice()), None);
    }
}
