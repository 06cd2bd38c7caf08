//! Cutting text for messages and records, so a long value cannot flood a terminal or the store.

/// `text` with the password of every URL in it (`scheme://user:password@host`) replaced by
/// `***`: for quoting a line of a user's file on a terminal or in CI logs.
pub fn hide_url_passwords(text: &str) -> std::borrow::Cow<'_, str> {
    static USERINFO: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(r#"([A-Za-z][A-Za-z0-9+.-]*://[^/?#@\s:"']*):[^\s"']*@"#)
            .expect("valid pattern")
    });
    USERINFO.replace_all(text, "$1:***@")
}

/// `text` up to `max` characters; a cut is marked with `…`.
pub fn clip(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        None => text.to_owned(),
        Some((cut, _)) => format!("{}…", &text[..cut]),
    }
}

/// Like [`clip`], but never inside a run of characters without a space (it goes on to the end
/// of that run, up to 1,024 characters more). Redaction matches whole secret values: a key cut
/// in two by a clip made before redaction would leave its first part in plain sight.
pub fn clip_whole(text: &str, max: usize) -> String {
    let Some((cut, _)) = text.char_indices().nth(max) else {
        return text.to_owned();
    };
    let end = text[cut..]
        .char_indices()
        .take(1024)
        .find(|(_, c)| c.is_whitespace())
        .map_or_else(
            || {
                text[cut..]
                    .char_indices()
                    .nth(1024)
                    .map_or(text.len(), |(i, _)| cut + i)
            },
            |(i, _)| cut + i,
        );
    if end >= text.len() {
        text.to_owned()
    } else {
        format!("{}…", &text[..end])
    }
}

/// Lower-case hex of `bytes`, appended to `out` (ids and keys are minted per decision, so
/// this avoids a `format!` per byte).
pub fn push_hex(out: &mut String, bytes: &[u8]) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    out.reserve(bytes.len() * 2);
    for b in bytes {
        out.push(DIGITS[(b >> 4) as usize] as char);
        out.push(DIGITS[(b & 0xf) as usize] as char);
    }
}

/// Lower-case hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    let mut out = String::new();
    push_hex(&mut out, bytes);
    out
}

/// Text for an XML or HTML attribute or element (JUnit reports, the web console). Characters XML 1.0 cannot carry at all (most
/// control characters) become U+FFFD, so a name from a test file cannot break the document.
pub fn markup(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\n' => out.push_str("&#10;"),
            '\t' => out.push_str("&#9;"),
            '\r' => out.push_str("&#13;"),
            c if (c as u32) < 0x20 || matches!(c, '\u{FFFE}' | '\u{FFFF}') => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::{clip, clip_whole, hex, markup};

    #[test]
    fn hex_is_lower_case_two_digits_per_byte() {
        assert_eq!(hex(&[0x00, 0x0f, 0xa5, 0xff]), "000fa5ff");
        assert_eq!(hex(&[]), "");
    }

    #[test]
    fn a_clip_never_splits_a_word() {
        let key = "sk-ant-0123456789abcdef";
        let text = format!("error: invalid key {key} for this request");
        // A plain clip at 25 would keep "sk-ant-"; this one keeps the whole key.
        assert_eq!(clip_whole(&text, 25), format!("error: invalid key {key}…"));
        assert_eq!(clip_whole("short", 25), "short");
    }

    #[test]
    fn cuts_at_characters_not_bytes() {
        assert_eq!(clip("abc", 3), "abc");
        assert_eq!(clip("abcd", 3), "abc…");
        assert_eq!(clip("øøøø", 2), "øø…");
        assert_eq!(clip("", 0), "");
    }

    #[test]
    fn markup_text_cannot_break_out_of_its_attribute() {
        assert_eq!(
            markup("a\"<b>&'\u{1}\n"),
            "a&quot;&lt;b&gt;&amp;&apos;\u{FFFD}&#10;"
        );
    }
}

#[cfg(test)]
mod url_password_tests {
    #[test]
    fn passwords_in_urls_are_hidden_and_the_rest_kept() {
        let line = r#"store: "postgres://pap:hunter2@db:5432/pap" and https://u@h/x"#;
        assert_eq!(
            super::hide_url_passwords(line),
            r#"store: "postgres://pap:***@db:5432/pap" and https://u@h/x"#
        );
        assert_eq!(super::hide_url_passwords("no urls here"), "no urls here");
        assert_eq!(
            super::hide_url_passwords("store: postgres://u:a/b@c@db/x"),
            "store: postgres://u:***@db/x"
        );
    }
}
