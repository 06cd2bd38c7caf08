//! Which triggers an event type matches: a hash lookup for exact types, a scan only over the
//! (few) patterns with a `*` segment.

use std::collections::HashMap;

use crate::manifest::Project;

pub(crate) struct TriggerIndex {
    exact: HashMap<String, Vec<usize>>,
    wildcard: Vec<usize>,
}

impl TriggerIndex {
    pub(crate) fn new(project: &Project) -> TriggerIndex {
        let mut exact: HashMap<String, Vec<usize>> = HashMap::new();
        let mut wildcard = Vec::new();
        for (i, t) in project.triggers.iter().enumerate() {
            if t.pattern.as_str().split('.').any(|s| s == "*") {
                wildcard.push(i);
            } else {
                exact
                    .entry(t.pattern.as_str().to_owned())
                    .or_default()
                    .push(i);
            }
        }
        TriggerIndex { exact, wildcard }
    }

    /// Indexes into `project.triggers` of every trigger (enabled or not) matching `kind`,
    /// in project order.
    pub(crate) fn matching(&self, project: &Project, kind: &str) -> Vec<usize> {
        let mut found: Vec<usize> = self.exact.get(kind).cloned().unwrap_or_default();
        found.extend(
            self.wildcard
                .iter()
                .copied()
                .filter(|i| project.triggers[*i].pattern.matches(kind)),
        );
        found.sort_unstable();
        found
    }
}
