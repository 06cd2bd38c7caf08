//! Sizes in pap.yaml (`store_cache`): a whole number with a binary unit, `512KiB`, `64MiB`,
//! `1GiB`. Only binary units are accepted: `MB` would leave a reader guessing whether it means
//! 10⁶ or 2²⁰ bytes.

/// Parses a size into bytes; the error says what is wrong in words.
pub(crate) fn parse(text: &str) -> Result<u64, String> {
    let s = text.trim();
    let digits = s.chars().take_while(char::is_ascii_digit).count();
    let (number, unit) = s.split_at(digits);
    let unit = unit.trim_start();
    if number.is_empty() {
        return Err(if s.is_empty() {
            "empty size".to_owned()
        } else {
            format!("`{s}` does not start with a whole number")
        });
    }
    let scale: u64 = match unit {
        "B" => 1,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        "TiB" => 1 << 40,
        "" => return Err(format!("`{number}` has no unit (write e.g. {number}MiB)")),
        "KB" | "kB" | "MB" | "GB" | "TB" | "K" | "M" | "G" | "T" | "k" | "m" | "g" => {
            return Err(format!(
                "`{unit}` is ambiguous: write a binary unit (KiB, MiB, GiB; 1 MiB is 1048576 bytes)"
            ));
        }
        _ => {
            return Err(format!(
                "unknown unit `{unit}` (use B, KiB, MiB, GiB or TiB)"
            ));
        }
    };
    number
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(scale))
        .ok_or_else(|| "size too large".to_owned())
}

/// Formats bytes in the largest binary unit that divides them (`268435456` → `256MiB`).
pub fn format(bytes: u64) -> String {
    for (unit, scale) in [
        ("TiB", 1u64 << 40),
        ("GiB", 1 << 30),
        ("MiB", 1 << 20),
        ("KiB", 1 << 10),
    ] {
        if bytes >= scale && bytes.is_multiple_of(scale) {
            return format!("{}{unit}", bytes / scale);
        }
    }
    format!("{bytes}B")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binary_units_are_read() {
        assert_eq!(parse("64MiB"), Ok(64 << 20));
        assert_eq!(parse("1GiB"), Ok(1 << 30));
        assert_eq!(parse(" 512 KiB "), Ok(512 << 10));
        assert_eq!(parse("4096B"), Ok(4096));
        assert_eq!(parse("2TiB"), Ok(2 << 40));
    }

    #[test]
    fn bad_sizes_say_why() {
        assert!(parse("64").unwrap_err().contains("no unit"));
        assert!(parse("64MB").unwrap_err().contains("ambiguous"));
        assert!(parse("1.5GiB").unwrap_err().contains("unknown unit"));
        assert!(parse("lots").unwrap_err().contains("whole number"));
        assert!(parse("").unwrap_err().contains("empty"));
        assert!(parse("99999999999TiB").unwrap_err().contains("too large"));
    }

    #[test]
    fn formats_in_the_largest_exact_unit() {
        assert_eq!(format(256 << 20), "256MiB");
        assert_eq!(format(1 << 30), "1GiB");
        assert_eq!(format(1536 << 10), "1536KiB");
        assert_eq!(format(1000), "1000B");
    }
}
