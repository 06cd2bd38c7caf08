//! A filter's `regex` pattern, compiled when first used.
//!
//! Compiling a regex builds automata (a DFA for small patterns), about 0.1 ms each: a project
//! of a thousand triggers with a regex each spent a third of its start-up on patterns that the
//! event at hand never reaches. A pattern is checked once (by `pap lint`, or the load that
//! wrote the project's cache, see `super::cache`) and compiled only when a filter evaluates it.

use std::sync::OnceLock;

use regex::{Regex, RegexBuilder};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The most memory one compiled pattern may take.
pub(crate) const REGEX_SIZE_LIMIT: usize = 1 << 20;

#[derive(Clone)]
pub struct RegexTest {
    source: String,
    compiled: OnceLock<Regex>,
}

impl RegexTest {
    /// Checks and compiles `source`; the error is the regex crate's own.
    pub fn new(source: &str) -> Result<RegexTest, regex::Error> {
        let compiled = build(source)?;
        Ok(RegexTest {
            source: source.to_owned(),
            compiled: OnceLock::from(compiled),
        })
    }

    /// A pattern known to compile (it did when it was cached), compiled on first use.
    fn checked(source: String) -> RegexTest {
        RegexTest {
            source,
            compiled: OnceLock::new(),
        }
    }

    pub fn as_str(&self) -> &str {
        &self.source
    }

    pub fn is_match(&self, text: &str) -> bool {
        self.compiled
            .get_or_init(|| {
                // The same builder accepted it before, in this same build of pap (the cache
                // is keyed by the binary); failing now would be a bug, so it matches nothing
                // rather than bring the dispatcher down.
                build(&self.source)
                    .unwrap_or_else(|_| build("[^\\s\\S]").expect("a pattern that matches nothing"))
            })
            .is_match(text)
    }
}

fn build(source: &str) -> Result<Regex, regex::Error> {
    RegexBuilder::new(source)
        .size_limit(REGEX_SIZE_LIMIT)
        .build()
}

impl std::fmt::Debug for RegexTest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RegexTest({:?})", self.source)
    }
}

impl Serialize for RegexTest {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.source)
    }
}

impl<'de> Deserialize<'de> for RegexTest {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<RegexTest, D::Error> {
        String::deserialize(d).map(RegexTest::checked)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cached_pattern_compiles_when_first_used() {
        let fresh = RegexTest::new("^web-[0-9]+$").unwrap();
        let json = serde_json::to_string(&fresh).unwrap();
        let cached: RegexTest = serde_json::from_str(&json).unwrap();
        assert!(cached.compiled.get().is_none(), "not compiled yet");
        assert!(cached.is_match("web-12") && !cached.is_match("db-1"));
        assert_eq!(cached.as_str(), "^web-[0-9]+$");
        assert!(RegexTest::new("(").is_err());
    }
}
