//! Where a compile step reports: one file's display name, its located tree, the diagnostics list.

use super::yaml_tree::{Located, Node, PathSeg};
use crate::diagnostics::Diagnostic;

pub struct FileCtx<'a> {
    pub file: &'a str,
    pub tree: &'a Located<Node>,
    pub diags: &'a mut Vec<Diagnostic>,
}

impl FileCtx<'_> {
    /// Reports a problem at the value found at `path`.
    pub fn at(
        &mut self,
        code: &'static str,
        path: &[PathSeg],
        message: impl Into<String>,
    ) -> &mut Diagnostic {
        let pos = self.tree.locate(path);
        self.push(Diagnostic::new(code, self.file, pos, message))
    }

    /// Reports a problem at the key of `path` (for fields that should not be there).
    pub fn at_key(
        &mut self,
        code: &'static str,
        path: &[PathSeg],
        message: impl Into<String>,
    ) -> &mut Diagnostic {
        let pos = self.tree.locate_key(path);
        self.push(Diagnostic::new(code, self.file, pos, message))
    }

    /// Errors reported so far; a compile step compares before/after to know if its part failed.
    pub(crate) fn error_count(&self) -> usize {
        self.diags
            .iter()
            .filter(|d| d.severity == crate::diagnostics::Severity::Error)
            .count()
    }

    fn push(&mut self, d: Diagnostic) -> &mut Diagnostic {
        self.diags.push(d);
        self.diags.last_mut().expect("just pushed")
    }
}

/// Sets the help text of a diagnostic just reported.
pub trait HelpExt {
    fn help(&mut self, help: impl Into<String>);
}

impl HelpExt for Diagnostic {
    fn help(&mut self, help: impl Into<String>) {
        self.help = Some(help.into());
    }
}
