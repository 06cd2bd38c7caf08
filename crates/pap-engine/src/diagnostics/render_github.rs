//! `--format github`: GitHub Actions workflow commands, which annotate the pull request diff.

use super::{Diagnostic, Severity};

pub fn render_github(diagnostics: &[Diagnostic]) -> String {
    let mut out = String::new();
    for d in diagnostics {
        let level = match d.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        };
        let mut message = d.message.clone();
        if let Some(help) = &d.help {
            message.push_str(" (");
            message.push_str(help);
            message.push(')');
        }
        out.push_str(&format!(
            "::{level} file={},line={},col={},title={}::{}\n",
            escape_property(&d.file),
            d.pos.line,
            d.pos.column,
            escape_property(&format!("pap lint {}", d.code)),
            escape_data(&message),
        ));
    }
    out
}

/// Message text: GitHub decodes %25, %0D and %0A.
pub fn escape_data(s: &str) -> String {
    s.replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

/// Property values additionally need `:` and `,` escaped.
pub fn escape_property(s: &str) -> String {
    escape_data(s).replace(':', "%3A").replace(',', "%2C")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnostics::Pos;

    #[test]
    fn annotations_escape_separators() {
        let d = Diagnostic {
            severity: Severity::Warning,
            code: "numeric-string",
            file: "triggers/a,b.yaml".into(),
            pos: Pos {
                line: 4,
                column: 12,
                offset: 0,
                len: 0,
            },
            message: "100% sure:\nyes".into(),
            help: None,
        };
        assert_eq!(
            render_github(&[d]),
            "::warning file=triggers/a%2Cb.yaml,line=4,col=12,title=pap lint numeric-string::100%25 sure:%0Ayes\n"
        );
    }
}
