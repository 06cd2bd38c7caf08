//! rustc-style output: a header with the code, the position, the source line and a caret.

use std::fmt::Write;

use super::{Diagnostic, Severity};

/// Whether to colour the output (only on a terminal, and never when NO_COLOR is set).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HumanStyle {
    pub color: bool,
}

struct Paint {
    on: bool,
}

impl Paint {
    fn wrap(&self, code: &str, text: &str) -> String {
        if self.on {
            format!("\x1b[{code}m{text}\x1b[0m")
        } else {
            text.to_string()
        }
    }
}

/// Renders diagnostics one after another. `source` returns a file's text, by its display path.
pub fn render_human<'a>(
    diagnostics: &[Diagnostic],
    source: impl Fn(&str) -> Option<&'a str>,
    style: HumanStyle,
) -> String {
    let paint = Paint { on: style.color };
    let mut out = String::new();
    for d in diagnostics {
        render_one(&mut out, d, source(&d.file), &paint);
    }
    out
}

fn render_one(out: &mut String, d: &Diagnostic, text: Option<&str>, paint: &Paint) {
    let (label, colour) = match d.severity {
        Severity::Error => ("error", "1;31"),
        Severity::Warning => ("warning", "1;33"),
    };
    let header = paint.wrap(colour, &format!("{label}[{}]", d.code));
    let _ = writeln!(
        out,
        "{header}{}",
        paint.wrap("1", &format!(": {}", d.message))
    );

    let line_no = d.pos.line.to_string();
    let gutter = " ".repeat(line_no.len());
    let arrow = paint.wrap("1;34", "-->");
    let _ = writeln!(
        out,
        "{gutter}{arrow} {}:{}:{}",
        d.file, d.pos.line, d.pos.column
    );

    // A quoted line never shows a password a URL in the file carries (CI logs keep it).
    let line_text = text
        .and_then(|t| t.lines().nth(d.pos.line.saturating_sub(1) as usize))
        .map(crate::text::hide_url_passwords);
    let line_text = line_text.as_deref();
    let bar = paint.wrap("1;34", "|");
    if let Some(line_text) = line_text {
        let _ = writeln!(out, "{gutter} {bar}");
        let _ = writeln!(
            out,
            "{} {bar} {}",
            paint.wrap("1;34", &line_no),
            line_text.trim_end()
        );
        let col = d.pos.column.saturating_sub(1) as usize;
        // Keep tabs so the caret lines up under tab-indented text.
        let pad: String = line_text
            .chars()
            .take(col)
            .map(|c| if c == '\t' { '\t' } else { ' ' })
            .collect();
        let width = caret_width(line_text, col, d.pos.len);
        let carets = paint.wrap(colour, &"^".repeat(width));
        match &d.help {
            Some(help) => {
                let _ = writeln!(
                    out,
                    "{gutter} {bar} {pad}{carets} {}",
                    paint.wrap("1;36", help)
                );
            }
            None => {
                let _ = writeln!(out, "{gutter} {bar} {pad}{carets}");
            }
        }
    } else if let Some(help) = &d.help {
        let _ = writeln!(out, "{gutter} = {} {help}", paint.wrap("1;36", "help:"));
    }
    out.push('\n');
}

/// How many characters to underline: the span's length when it stays on this line, otherwise
/// the token that starts at the column.
fn caret_width(line: &str, col: usize, span_len: usize) -> usize {
    let rest: String = line.chars().skip(col).collect();
    let rest_len = rest.trim_end().chars().count();
    if span_len > 0 && span_len <= rest_len {
        // span_len is in bytes; count the characters it covers.
        let mut bytes = 0;
        let mut chars = 0;
        for c in rest.chars() {
            if bytes >= span_len {
                break;
            }
            bytes += c.len_utf8();
            chars += 1;
        }
        return chars.max(1);
    }
    let token = match rest.chars().next() {
        Some(q @ ('"' | '\'')) => rest[1..].find(q).map_or(rest_len, |end| end + 2),
        _ => rest
            .find(|c: char| c.is_whitespace() || c == ',' || c == ']' || c == '}' || c == '#')
            .unwrap_or(rest_len),
    };
    let token = token.min(rest_len);
    rest[..rest
        .char_indices()
        .nth(token)
        .map_or(rest.len(), |(i, _)| i)]
        .trim_end_matches(':')
        .chars()
        .count()
        .max(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnostics::Pos;

    fn diag(line: u32, column: u32, help: Option<&str>) -> Diagnostic {
        Diagnostic {
            severity: Severity::Error,
            code: "unknown-field",
            file: "triggers/a.yaml".into(),
            pos: Pos {
                line,
                column,
                offset: 0,
                len: 0,
            },
            message: "unknown field `filtr` in `trigger`".into(),
            help: help.map(str::to_string),
        }
    }

    #[test]
    fn renders_a_rustc_style_snippet_with_caret_under_the_key() {
        let text = "trigger:\n  id: x\n  filtr: []\n";
        let out = render_human(
            &[diag(3, 3, Some("did you mean `filter`?"))],
            |_| Some(text),
            HumanStyle { color: false },
        );
        assert_eq!(
            out,
            "error[unknown-field]: unknown field `filtr` in `trigger`\n \
             --> triggers/a.yaml:3:3\n  |\n3 |   filtr: []\n  |   ^^^^^ did you mean `filter`?\n\n"
        );
    }

    #[test]
    fn quoted_values_are_underlined_whole() {
        assert_eq!(caret_width("    value: \"3 x\" # c", 11, 0), 5);
        assert_eq!(caret_width("  type: a.b", 8, 0), 3);
    }

    #[test]
    fn without_source_the_help_is_a_note() {
        let out = render_human(
            &[diag(9, 1, Some("hint"))],
            |_| None,
            HumanStyle { color: false },
        );
        assert!(out.contains(" = help: hint"), "{out}");
    }
}
