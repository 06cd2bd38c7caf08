//! Durations in pap.yaml and in flags: `500ms`, `90s`, `30m`, `24h`, `7d`, or combinations
//! like `1h30m`.

use std::time::Duration;

crate::reason::reason_error!(
    /// Why a duration (`90s`, `1h30m`) is not one.
    InvalidDuration
);

/// Parses a duration; the error says what is wrong in words.
pub fn parse(text: &str) -> Result<Duration, InvalidDuration> {
    parse_reason(text).map_err(InvalidDuration::from)
}

/// [`parse`], with the reason as text (for messages that quote it).
pub(crate) fn parse_reason(text: &str) -> Result<Duration, String> {
    let s = text.trim();
    if s.is_empty() {
        return Err("empty duration".to_string());
    }
    // In milliseconds, so `ms` (for the short intervals of flags) is exact.
    let mut total: u64 = 0;
    let mut digits = String::new();
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c.is_ascii_digit() {
            digits.push(c);
            continue;
        }
        let unit = match c {
            'm' if chars.peek() == Some(&'s') => {
                chars.next();
                1
            }
            's' => 1000,
            'm' => 60_000,
            'h' => 3_600_000,
            'd' => 86_400_000,
            'w' => 7 * 86_400_000,
            _ => return Err(format!("unknown unit `{c}` (use ms, s, m, h, d or w)")),
        };
        if digits.is_empty() {
            return Err(format!("unit `{c}` without a number before it"));
        }
        let n: u64 = digits.parse().map_err(|_| "number too large".to_string())?;
        total = n
            .checked_mul(unit)
            .and_then(|v| total.checked_add(v))
            .ok_or("duration too large")?;
        digits.clear();
    }
    if !digits.is_empty() {
        return Err(format!(
            "`{digits}` has no unit (write e.g. {digits}s or {digits}h)"
        ));
    }
    Ok(Duration::from_millis(total))
}

/// A year, for durations too long to read in days.
const YEAR_SECS: u64 = 365 * 86_400;

/// Formats a duration for people: whole seconds in the largest exact units (`86400` → `1d`,
/// `5400` → `1h30m`, as pap.yaml writes them), below a second in `ms`, and from a year on in
/// years (`about 3385083 years`: a value nobody meant, which `pap lint` refuses where a
/// manifest could set it).
pub fn format(d: Duration) -> String {
    let mut secs = d.as_secs();
    if secs == 0 {
        return match d.subsec_millis() {
            0 => "0s".to_string(),
            ms => format!("{ms}ms"),
        };
    }
    if secs >= YEAR_SECS {
        let years = secs / YEAR_SECS;
        return match (years, secs % YEAR_SECS) {
            (1, 0) => "1 year".to_owned(),
            (n, 0) => format!("{n} years"),
            (n, _) => format!("about {n} year{}", if n == 1 { "" } else { "s" }),
        };
    }
    let mut out = String::new();
    for (unit, size) in [("d", 86_400), ("h", 3600), ("m", 60), ("s", 1)] {
        if secs >= size {
            out.push_str(&format!("{}{unit}", secs / size));
            secs %= size;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_units_and_combinations() {
        assert_eq!(parse("24h"), Ok(Duration::from_secs(86_400)));
        assert_eq!(parse("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse("7d"), Ok(Duration::from_secs(604_800)));
        assert_eq!(parse("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse("1m30s250ms"), Ok(Duration::from_millis(90_250)));
        assert!(parse("24").unwrap_err().reason().contains("no unit"));
        assert!(parse("3y").unwrap_err().reason().contains("unknown unit"));
        assert!(parse("h").is_err());
        assert!(parse("").is_err());
    }

    #[test]
    fn formats_in_largest_units() {
        assert_eq!(format(Duration::from_secs(86_400)), "1d");
        assert_eq!(format(Duration::from_secs(5400)), "1h30m");
        assert_eq!(format(Duration::from_millis(250)), "250ms");
        assert_eq!(format(Duration::from_secs(364 * 86_400)), "364d");
        assert_eq!(format(Duration::from_secs(365 * 86_400)), "1 year");
        // The debounce a manifest once set to 106751991167300 seconds, in words.
        assert_eq!(
            format(Duration::from_secs(106_751_991_167_300)),
            "about 3385083 years"
        );
    }
}
