//! Diagnostics: problems found in manifests, with a stable code and an exact position.
//!
//! Every check reports through [`Diagnostic`]; the renderers (human, JSON, GitHub annotations)
//! live beside it. The code table is the public list users can rely on and grep for.

mod codes;
mod render_github;
mod render_human;
mod render_json;

pub use codes::{CODES, CodeInfo, code_info};
pub use render_github::{
    escape_data as github_data, escape_property as github_property, render_github,
};
pub use render_human::{HumanStyle, render_human};
pub use render_json::{render_json, to_json as diagnostic_json};

/// A 1-based position in a manifest file. `offset`/`len` are byte offsets for snippets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Pos {
    pub line: u32,
    pub column: u32,
    pub offset: usize,
    pub len: usize,
}

impl Pos {
    pub const START: Pos = Pos {
        line: 1,
        column: 1,
        offset: 0,
        len: 0,
    };
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    Error,
    Warning,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
        }
    }
}

/// One problem in one file.
#[derive(Debug, Clone, PartialEq)]
pub struct Diagnostic {
    pub severity: Severity,
    /// Stable identifier, e.g. `unknown-field`; listed in [`CODES`].
    pub code: &'static str,
    /// Path relative to the project root, with `/` separators.
    pub file: String,
    pub pos: Pos,
    pub message: String,
    /// A suggestion shown under the snippet ("did you mean `filter`?").
    pub help: Option<String>,
}

impl Diagnostic {
    /// A diagnostic whose severity is the code's own (see the code table).
    pub fn new(code: &'static str, file: &str, pos: Pos, message: impl Into<String>) -> Self {
        Diagnostic {
            severity: code_info(code).map_or(Severity::Error, |c| c.severity),
            code,
            file: file.to_string(),
            pos,
            message: message.into(),
            help: None,
        }
    }

    pub(crate) fn with_help(mut self, help: impl Into<String>) -> Self {
        self.help = Some(help.into());
        self
    }
}

/// Counts of a finished check, as printed in summaries.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Summary {
    pub files: usize,
    pub errors: usize,
    pub warnings: usize,
}

impl Summary {
    pub fn of(files: usize, diagnostics: &[Diagnostic]) -> Summary {
        Summary {
            files,
            errors: diagnostics
                .iter()
                .filter(|d| d.severity == Severity::Error)
                .count(),
            warnings: diagnostics
                .iter()
                .filter(|d| d.severity == Severity::Warning)
                .count(),
        }
    }
}

/// Orders diagnostics by file, then position, then code, so output is stable across runs.
pub fn sort(diagnostics: &mut [Diagnostic]) {
    diagnostics.sort_by(|a, b| {
        (&a.file, a.pos.line, a.pos.column, a.code, &a.message).cmp(&(
            &b.file,
            b.pos.line,
            b.pos.column,
            b.code,
            &b.message,
        ))
    });
}

/// "did you mean …?" for a misspelt name, when one candidate is close enough.
pub fn did_you_mean<'a>(
    word: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<String> {
    let mut best: Option<(f64, &str)> = None;
    for candidate in candidates {
        let score = strsim::jaro_winkler(word, candidate);
        if score >= 0.8 && best.is_none_or(|(s, _)| score > s) {
            best = Some((score, candidate));
        }
    }
    best.map(|(_, c)| format!("did you mean `{c}`?"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn did_you_mean_picks_the_closest_candidate() {
        let fields = ["filter", "throttle", "agent", "match"];
        assert_eq!(
            did_you_mean("filtr", fields).as_deref(),
            Some("did you mean `filter`?")
        );
        assert_eq!(did_you_mean("zzz", fields), None);
    }

    #[test]
    fn every_code_is_unique_and_kebab_case() {
        let mut seen = std::collections::HashSet::new();
        for c in CODES {
            assert!(seen.insert(c.code), "duplicate code {}", c.code);
            assert!(
                c.code
                    .chars()
                    .all(|ch| ch.is_ascii_lowercase() || ch == '-'),
                "{}",
                c.code
            );
        }
    }
}
