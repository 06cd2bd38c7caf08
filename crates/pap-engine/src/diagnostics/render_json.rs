//! `--format json`: one document with counts and every diagnostic (contract section 7).

use serde_json::{Value, json};

use super::{Diagnostic, Summary};

pub fn render_json(summary: Summary, diagnostics: &[Diagnostic]) -> String {
    let items: Vec<_> = diagnostics.iter().map(to_json).collect();
    let doc = json!({
        "files": summary.files,
        "errors": summary.errors,
        "warnings": summary.warnings,
        "diagnostics": items,
    });
    format!("{doc}\n")
}

/// One diagnostic as `pap lint --format json` writes it (also in `pap test`'s reports).
pub fn to_json(d: &Diagnostic) -> Value {
    json!({
        "severity": d.severity.as_str(),
        "code": d.code,
        "file": d.file,
        "line": d.pos.line,
        "column": d.pos.column,
        "message": d.message,
        "help": d.help,
    })
}
