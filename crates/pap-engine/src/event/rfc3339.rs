//! Strict RFC 3339 `date-time` (section 5.6): a full date, `T`, a full time and an offset.
//!
//! Checked here in full, shape and ranges, without a date library: a library's own limits
//! (fractions of at most 9 digits, years up to 9999-12-30 in jiff) are not RFC 3339's, and
//! its messages are not ours. The RFC allows any number of fraction digits, a leap second
//! (`:60`), and offsets with hours 00-23 and minutes 00-59.

crate::reason::reason_error!(
    /// Why a time is not an RFC 3339 `date-time`.
    InvalidTimestamp
);

pub fn check(text: &str) -> Result<(), InvalidTimestamp> {
    check_reason(text).map_err(InvalidTimestamp::from)
}

/// [`check`], with the reason as text (for messages that quote it).
pub(crate) fn check_reason(text: &str) -> Result<(), String> {
    let b = text.as_bytes();
    let digits = |range: std::ops::Range<usize>| {
        b.get(range.clone())
            .is_some_and(|s| s.len() == range.len() && s.iter().all(u8::is_ascii_digit))
    };
    let number = |range: std::ops::Range<usize>| {
        b[range]
            .iter()
            .fold(0u32, |n, d| n * 10 + u32::from(d - b'0'))
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
    let offset = match b.get(i) {
        Some(b'Z' | b'z') if i + 1 == b.len() => Some(None),
        Some(b'+' | b'-')
            if digits(i + 1..i + 3)
                && at(i + 3, b':')
                && digits(i + 4..i + 6)
                && i + 6 == b.len() =>
        {
            Some(Some((number(i + 1..i + 3), number(i + 4..i + 6))))
        }
        _ => None,
    };
    let Some(offset) = offset else {
        return Err("the time needs an offset, `Z` or `±hh:mm`".into());
    };
    let (year, month, day) = (number(0..4), number(5..7), number(8..10));
    let (hour, minute, second) = (number(11..13), number(14..16), number(17..19));
    if !(1..=12).contains(&month) {
        return Err(format!("month {month:02} is not 01-12"));
    }
    let last_day = match month {
        2 if year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    };
    if day == 0 || day > last_day {
        return Err(format!("day {day:02} is not in {year:04}-{month:02}"));
    }
    if hour > 23 || minute > 59 || second > 60 {
        return Err(format!(
            "{hour:02}:{minute:02}:{second:02} is not a time of day"
        ));
    }
    if let Some((h, m)) = offset
        && (h > 23 || m > 59)
    {
        return Err(format!("the offset {h:02}:{m:02} is not -23:59 to +23:59"));
    }
    Ok(())
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
            "2026-03-11T06:00:00.123456789012Z",
            "9999-12-31T23:59:59Z",
            "0000-01-01T00:00:00+23:59",
            "2016-12-31T23:59:60Z",
            "2024-02-29T00:00:00Z",
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
            "2025-02-29T06:00:00Z",
            "2026-03-11T06:00:00+25:00",
            "2026-03-11T06:00:00+01:60",
            "2026-03-11T24:00:00Z",
            "2026-03-00T06:00:00Z",
            "2026-03-11T06:00:00Z[Europe/Oslo]",
            "2026-03-11T06:00:00Z ",
            "11/03/2026",
        ] {
            assert!(check(bad).is_err(), "{bad}");
        }
    }
}
