//! Event types in dot notation (`domain.object.condition`) and trigger patterns over them.
//!
//! Shared by lint (manifest types), the dispatcher (validating incoming events) and trigger
//! matching, so "valid" means the same thing everywhere.

use std::fmt;

/// Why a string is not a valid event type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TypeProblem {
    TooFewSegments(usize),
    EmptySegment,
    Whitespace,
    /// `*` inside a segment (`lat*`), or any `*` where no wildcard is allowed.
    Wildcard {
        allowed: bool,
    },
}

impl fmt::Display for TypeProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TypeProblem::TooFewSegments(n) => write!(
                f,
                "has {n} segment{}; PAP event types have at least three (domain.object.condition)",
                if *n == 1 { "" } else { "s" }
            ),
            TypeProblem::EmptySegment => f.write_str(
                "has an empty segment (two dots in a row, or a leading or trailing dot)",
            ),
            TypeProblem::Whitespace => f.write_str("contains whitespace"),
            TypeProblem::Wildcard { allowed: true } => {
                f.write_str("uses `*` inside a segment; `*` may only stand for one whole segment")
            }
            TypeProblem::Wildcard { allowed: false } => {
                f.write_str("contains `*`, which only trigger patterns may use")
            }
        }
    }
}

/// Checks an event type. With `wildcards`, a segment may be exactly `*`.
pub(crate) fn check(s: &str, wildcards: bool) -> Result<(), TypeProblem> {
    if s.chars().any(char::is_whitespace) {
        return Err(TypeProblem::Whitespace);
    }
    let segments: Vec<&str> = s.split('.').collect();
    if segments.iter().any(|seg| seg.is_empty()) && segments.len() >= 3 {
        return Err(TypeProblem::EmptySegment);
    }
    let non_empty = segments.iter().filter(|seg| !seg.is_empty()).count();
    if segments.len() < 3 || non_empty < 3 {
        return Err(TypeProblem::TooFewSegments(non_empty));
    }
    for seg in &segments {
        if seg.contains('*') && !(wildcards && *seg == "*") {
            return Err(TypeProblem::Wildcard { allowed: wildcards });
        }
    }
    Ok(())
}

/// Words in a condition segment that describe a change rather than a threshold crossing
/// (PAP 0.2, "Event type naming").
const CHANGE_WORDS: &[&str] = &["changed", "updated", "incremented"];

/// The change word the last segment uses, if any (`price.changed`, `value_updated`).
pub(crate) fn change_word(s: &str) -> Option<&'static str> {
    let condition = s.rsplit('.').next()?;
    condition.split(['_', '-']).find_map(|word| {
        CHANGE_WORDS
            .iter()
            .copied()
            .find(|w| word.eq_ignore_ascii_case(w))
    })
}

/// A trigger's `match.type`, compiled: literal segments and `*` wildcards. Cached as its
/// text.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct TypePattern {
    text: String,
    segments: Vec<Option<String>>,
}

impl TryFrom<String> for TypePattern {
    type Error = String;
    fn try_from(text: String) -> Result<TypePattern, String> {
        TypePattern::new(&text).map_err(|e| format!("{e:?}"))
    }
}

impl From<TypePattern> for String {
    fn from(p: TypePattern) -> String {
        p.text
    }
}

impl TypePattern {
    /// Compiles a pattern that passed [`check`] with wildcards allowed.
    pub fn new(s: &str) -> Result<TypePattern, TypeProblem> {
        check(s, true)?;
        Ok(TypePattern {
            text: s.to_string(),
            segments: s
                .split('.')
                .map(|seg| (seg != "*").then(|| seg.to_string()))
                .collect(),
        })
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Whether an event type matches: same number of segments, literals equal.
    pub fn matches(&self, event_type: &str) -> bool {
        let mut parts = event_type.split('.');
        for seg in &self.segments {
            match (seg, parts.next()) {
                (_, None) => return false,
                (Some(lit), Some(part)) if lit != part => return false,
                _ => {}
            }
        }
        parts.next().is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dot_notation_needs_three_non_empty_segments() {
        assert_eq!(check("energy.price.threshold_exceeded", false), Ok(()));
        assert_eq!(check("pap.agent.invocation.completed", false), Ok(()));
        assert_eq!(
            check("energy.price", false),
            Err(TypeProblem::TooFewSegments(2))
        );
        assert_eq!(check("energy", false), Err(TypeProblem::TooFewSegments(1)));
        assert_eq!(check("a..b", false), Err(TypeProblem::EmptySegment));
        assert_eq!(check("a.b.c.", false), Err(TypeProblem::EmptySegment));
        assert_eq!(check("a.b .c", false), Err(TypeProblem::Whitespace));
    }

    #[test]
    fn wildcards_only_as_whole_segments_in_patterns() {
        assert_eq!(check("server.*.sla_breached", true), Ok(()));
        assert_eq!(
            check("server.lat*.sla_breached", true),
            Err(TypeProblem::Wildcard { allowed: true })
        );
        assert_eq!(
            check("server.*.sla_breached", false),
            Err(TypeProblem::Wildcard { allowed: false })
        );
    }

    #[test]
    fn patterns_match_whole_segments() {
        let p = TypePattern::new("server.*.sla_breached").unwrap();
        assert!(p.matches("server.latency.sla_breached"));
        assert!(!p.matches("server.latency.p99.sla_breached"));
        assert!(!p.matches("server.latency"));
        assert!(!p.matches("server.latency.ok"));
        let exact = TypePattern::new("a.b.c").unwrap();
        assert!(exact.matches("a.b.c"));
        assert!(!exact.matches("a.b.c.d"));
    }

    #[test]
    fn change_words_are_found_in_the_condition_segment() {
        assert_eq!(change_word("energy.price.changed"), Some("changed"));
        assert_eq!(
            change_word("article.age.value_incremented"),
            Some("incremented")
        );
        assert_eq!(change_word("server.updated.sla_breached"), None);
        assert_eq!(change_word("stock.price.dropped_significantly"), None);
    }
}
