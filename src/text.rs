//! Cutting text for messages and records, so a long value cannot flood a terminal or the store.

/// `text` up to `max` characters; a cut is marked with `…`.
pub fn clip(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        None => text.to_owned(),
        Some((cut, _)) => format!("{}…", &text[..cut]),
    }
}

#[cfg(test)]
mod tests {
    use super::clip;

    #[test]
    fn cuts_at_characters_not_bytes() {
        assert_eq!(clip("abc", 3), "abc");
        assert_eq!(clip("abcd", 3), "abc…");
        assert_eq!(clip("øøøø", 2), "øø…");
        assert_eq!(clip("", 0), "");
    }
}
