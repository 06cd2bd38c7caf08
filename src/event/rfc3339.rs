//! Strict RFC 3339 `date-time` (section 5.6): a full date, `T`, a full time and an offset.
//!
//! jiff's parser alone is more lenient (a space for `T`, hour-only offsets, bracketed zone
//! annotations), so the shape is checked here and jiff then checks the ranges (month 13,
//! February 30, an offset of 25 hours).

pub fn check(text: &str) -> Result<(), String> {
    let b = text.as_bytes();
    let digits = |range: std::ops::Range<usize>| {
        b.get(range.clone())
            .is_some_and(|s| s.len() == range.len() && s.iter().all(u8::is_ascii_digit))
    };
    let at = |i: usize, c: u8| b.get(i) == Some(&c);
    let shape = digits(0..4)
        && at(4, b'-')
        && digits(5..7)
        && at(7, b'-')
        && digits(8..10)
        && (at(10, b'T') || at(10, b't'))
        && digits(11..13)
        && at(13, b':')
        && digits(14..16)
        && at(16, b':')
        && digits(17..19);
    if !shape {
        return Err("expected YYYY-MM-DDThh:mm:ss".into());
    }
    let mut i = 19;
    if at(i, b'.') {
        i += 1;
        let start = i;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        if i == start {
            return Err("a fraction needs digits after the `.`".into());
        }
    }
    let offset_ok = match b.get(i) {
        Some(b'Z' | b'z') => i + 1 == b.len(),
        Some(b'+' | b'-') => {
            digits(i + 1..i + 3) && at(i + 3, b':') && digits(i + 4..i + 6) && i + 6 == b.len()
        }
        _ => false,
    };
    if !offset_ok {
        return Err("the time needs an offset, `Z` or `±hh:mm`".into());
    }
    text.parse::<jiff::Timestamp>()
        .map(|_| ())
        .map_err(|err| err.to_string())
}

#[cfg(test)]
mod tests {
    use super::check;

    #[test]
    fn accepts_rfc3339() {
        for ok in [
            "2026-03-11T06:00:00Z",
            "2026-03-11t06:00:00z",
            "2026-03-11T06:00:00.123456789+01:00",
            "2026-03-11T06:00:00-05:30",
        ] {
            assert_eq!(check(ok), Ok(()), "{ok}");
        }
    }

    #[test]
    fn refuses_near_misses() {
        for bad in [
            "2026-03-11T06:00:00",
            "2026-03-11 06:00:00Z",
            "2026-03-11T06:00Z",
            "2026-03-11T06:00:00+01",
            "2026-03-11T06:00:00.Z",
            "2026-13-11T06:00:00Z",
            "2026-02-30T06:00:00Z",
            "2026-03-11T06:00:00Z[Europe/Oslo]",
            "2026-03-11T06:00:00Z ",
            "11/03/2026",
        ] {
            assert!(check(bad).is_err(), "{bad}");
        }
    }
}
