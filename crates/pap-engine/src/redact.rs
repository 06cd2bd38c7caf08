//! Redaction of the secret values pap knows, in every text it stores or prints.
//!
//! A provider or proxy may echo the API key in an error body, a program may print a token it
//! was given: that text would reach the invocation record, the failure event, the inbox, the
//! sinks and the terminal. The [`Redactor`] is built once from the loaded project (see
//! `manifest::secrets`) and replaces each known secret, in its plain, URL-encoded,
//! JSON-escaped and base64 forms, with `[REDACTED:NAME]`. It is applied where untrusted text
//! enters what pap keeps (see docs/src/security/secrets.md), so everything downstream inherits it.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};

use aho_corasick::{AhoCorasick, MatchKind};
use serde_json::Value;

/// Shorter values are not redacted: they would match ordinary text.
pub(crate) const MIN_SECRET_BYTES: usize = 8;

/// Whether a variable's name says it holds a secret (KEY, TOKEN, SECRET, PASS, AUTH).
pub(crate) fn looks_secret(name: &str) -> bool {
    let name = name.to_ascii_uppercase();
    ["KEY", "TOKEN", "SECRET", "PASS", "AUTH"]
        .iter()
        .any(|word| name.contains(word))
}

/// Replaces known secret values. Without secrets every call is a no-op that copies nothing.
#[derive(Default)]
pub(crate) struct Redactor {
    matcher: Option<AhoCorasick>,
    replacements: Vec<String>,
}

impl std::fmt::Debug for Redactor {
    /// Never the values: only how many forms are searched for.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Redactor({} patterns)", self.replacements.len())
    }
}

impl Redactor {
    /// From `(label, value)` pairs; values under [`MIN_SECRET_BYTES`] are left out. When two
    /// labels have the same value, the first one names it.
    pub(crate) fn new(secrets: impl IntoIterator<Item = (String, String)>) -> Redactor {
        let mut by_form: BTreeMap<String, String> = BTreeMap::new();
        for (label, value) in secrets {
            if value.len() < MIN_SECRET_BYTES {
                continue;
            }
            for form in forms(&value) {
                by_form
                    .entry(form)
                    .or_insert_with(|| format!("[REDACTED:{label}]"));
            }
        }
        if by_form.is_empty() {
            return Redactor::default();
        }
        let (patterns, replacements): (Vec<String>, Vec<String>) = by_form.into_iter().unzip();
        // Leftmost-longest: of overlapping forms (a key and `Bearer key`), the longest goes.
        let matcher = AhoCorasick::builder()
            .match_kind(MatchKind::LeftmostLongest)
            .build(&patterns)
            .expect("a few short literal patterns always build");
        Redactor {
            matcher: Some(matcher),
            replacements,
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.matcher.is_none()
    }

    /// `text` with every secret replaced; borrowed when there was none.
    pub(crate) fn text<'a>(&self, text: &'a str) -> Cow<'a, str> {
        match &self.matcher {
            Some(m) if m.is_match(text) => Cow::Owned(m.replace_all(text, &self.replacements)),
            _ => Cow::Borrowed(text),
        }
    }

    /// Redacts `text` in place.
    pub(crate) fn string(&self, text: &mut String) {
        if let Cow::Owned(clean) = self.text(text) {
            *text = clean;
        }
    }

    /// Redacts every string of a JSON value in place, object keys included.
    pub(crate) fn value(&self, value: &mut Value) {
        if self.is_empty() {
            return;
        }
        match value {
            Value::String(s) => self.string(s),
            Value::Array(items) => items.iter_mut().for_each(|v| self.value(v)),
            Value::Object(map) => {
                if map.keys().any(|k| matches!(self.text(k), Cow::Owned(_))) {
                    let old = std::mem::take(map);
                    for (k, v) in old {
                        map.insert(self.text(&k).into_owned(), v);
                    }
                }
                map.values_mut().for_each(|v| self.value(v));
            }
            _ => {}
        }
    }
}

/// The forms a value takes in text pap may see: as is, URL-encoded, JSON-escaped (once and
/// twice, `/` escaped or not, non-ASCII as `\uXXXX`), and base64 (standard and URL-safe) at
/// each of the three alignments it can have inside a longer encoded text, such as the
/// `user:password` of a Basic auth header.
fn forms(value: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    out.insert(value.to_owned());
    let url = percent_encode(value);
    out.insert(url.to_ascii_lowercase_hex());
    out.insert(url);
    if value.contains(' ') {
        out.insert(percent_encode(value).replace("%20", "+"));
    }
    let json = json_escape(value);
    out.insert(json_escape(&json));
    out.insert(json.replace('/', "\\/"));
    out.insert(ascii_json_escape(value));
    out.insert(json);
    for shift in 0..3 {
        let core = base64_core(value.as_bytes(), shift);
        out.insert(core.replace('+', "-").replace('/', "_"));
        out.insert(core);
    }
    out.retain(|f| f.len() >= MIN_SECRET_BYTES);
    out
}

fn json_escape(value: &str) -> String {
    let quoted = serde_json::to_string(value).expect("a string serialises");
    quoted[1..quoted.len() - 1].to_owned()
}

/// JSON as Python's `json.dumps` writes it by default: non-ASCII as `\uXXXX`.
fn ascii_json_escape(value: &str) -> String {
    let mut out = String::new();
    for c in json_escape(value).chars() {
        if c.is_ascii() {
            out.push(c);
        } else {
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{unit:04x}"));
            }
        }
    }
    out
}

/// Every byte but the unreserved ones (RFC 3986) as `%XX`.
fn percent_encode(value: &str) -> String {
    let mut out = String::new();
    for &b in value.as_bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

trait LowerHex {
    fn to_ascii_lowercase_hex(&self) -> String;
}

impl LowerHex for String {
    /// `%2F` as `%2f`, the rest unchanged.
    fn to_ascii_lowercase_hex(&self) -> String {
        let mut out = String::with_capacity(self.len());
        let mut hex_left = 0;
        for c in self.chars() {
            if c == '%' {
                hex_left = 2;
                out.push(c);
            } else if hex_left > 0 {
                hex_left -= 1;
                out.push(c.to_ascii_lowercase());
            } else {
                out.push(c);
            }
        }
        out
    }
}

pub(crate) fn percent_decode(value: &str) -> String {
    let bytes = value.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The base64 characters that depend only on `value` when it starts `shift` bytes into the
/// encoded text: whatever comes before or after, an encoding that holds the value holds these.
fn base64_core(value: &[u8], shift: usize) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let bytes: Vec<u8> = std::iter::repeat_n(0, shift)
        .chain(value.iter().copied())
        .collect();
    let bits = bytes.len() * 8;
    let first = (shift * 8).div_ceil(6);
    let end = bits / 6;
    (first..end)
        .map(|i| {
            let (byte, offset) = (i * 6 / 8, i * 6 % 8);
            let pair =
                (u16::from(bytes[byte]) << 8) | u16::from(*bytes.get(byte + 1).unwrap_or(&0));
            ALPHABET[usize::from((pair >> (10 - offset)) & 0x3f)] as char
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "sk-test-Zq9/x+y=\"w\"é";

    fn redactor() -> Redactor {
        Redactor::new([
            ("API_KEY".to_owned(), KEY.to_owned()),
            ("SHORT".to_owned(), "short".to_owned()),
        ])
    }

    fn b64(bytes: &[u8]) -> String {
        // Full standard encoding with padding, to check the cores are found inside it.
        let rest = bytes.len() % 3;
        let mut s = base64_core(&bytes[..bytes.len() - rest], 0);
        if rest != 0 {
            let tail = &bytes[bytes.len() - rest..];
            let mut padded = tail.to_vec();
            padded.resize(3, 0);
            let enc = base64_core(&padded, 0);
            s.push_str(&enc[..rest + 1]);
            s.push_str(&"=".repeat(3 - rest));
        }
        s
    }

    #[test]
    fn base64_matches_a_known_encoding() {
        assert_eq!(b64(b"user:pass"), "dXNlcjpwYXNz");
        assert_eq!(b64(b"user:passw"), "dXNlcjpwYXNzdw==");
        assert_eq!(b64(b"Ma"), "TWE=");
    }

    #[test]
    fn every_form_is_replaced() {
        let r = redactor();
        let url = percent_encode(KEY);
        let json = json_escape(KEY);
        for (prefix, form) in [
            ("plain", KEY.to_owned()),
            ("url", url.clone()),
            ("url lower", url.to_ascii_lowercase_hex()),
            ("json", json.clone()),
            ("json twice", json_escape(&json)),
            ("json ascii", ascii_json_escape(KEY)),
            ("basic a", b64(format!("a:{KEY}").as_bytes())),
            ("basic ab", b64(format!("ab:{KEY}").as_bytes())),
            ("basic abc", b64(format!("abc:{KEY}").as_bytes())),
        ] {
            let text = format!("{prefix}: <{form}> end");
            let clean = r.text(&text);
            assert!(clean.contains("[REDACTED:API_KEY]"), "{prefix}: {clean}");
            assert!(!clean.contains(&form), "{prefix}: {clean}");
        }
    }

    #[test]
    fn short_values_and_clean_text_are_left_alone() {
        let r = redactor();
        assert!(matches!(r.text("a short text"), Cow::Borrowed(_)));
        let none = Redactor::new([("X".to_owned(), "1234567".to_owned())]);
        assert!(none.is_empty());
        assert!(matches!(none.text("1234567"), Cow::Borrowed(_)));
    }

    #[test]
    fn json_values_are_redacted_keys_included() {
        let r = redactor();
        let mut v = serde_json::json!({"a": [KEY, 1], KEY: {"b": format!("x{KEY}y")}});
        r.value(&mut v);
        let text = v.to_string();
        assert!(!text.contains("sk-test"), "{text}");
        assert_eq!(v["a"][0], "[REDACTED:API_KEY]");
        assert_eq!(v["[REDACTED:API_KEY]"]["b"], "x[REDACTED:API_KEY]y");
    }

    #[test]
    fn names_that_look_secret() {
        for name in [
            "OPENAI_API_KEY",
            "GITHUB_TOKEN",
            "db_password",
            "X_AUTH",
            "MY_SECRET",
        ] {
            assert!(looks_secret(name), "{name}");
        }
        for name in ["PATH", "HOME", "LANG", "PAP_TEST_DIR"] {
            assert!(!looks_secret(name), "{name}");
        }
    }
}
