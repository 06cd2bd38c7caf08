//! `{placeholder}` templates for notification content, session names and deduplication keys,
//! written in manifests. Placeholders are checked at load; `{event.data.x}` reads the event.
//!
//! A rendered template is display text or a key, never a command line: event content is
//! untrusted, and this is the only place it is spliced into anything.

use serde_json::Value;

/// Names a template may use besides `event.…`.
pub const NAMES: &[&str] = &[
    "invocation_id",
    "trigger",
    "agent",
    "event_id",
    "event_type",
    "status",
    "error",
    "attempts",
    "risk",
    "tool",
    "output",
];

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
enum Part {
    Text(String),
    Name(String),
    /// A dotted path into the event, `event.data.server` → ["data", "server"].
    Event(Vec<String>),
}

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Template {
    parts: Vec<Part>,
}

impl Template {
    /// Parses `text`; `{{` and `}}` are literal braces.
    pub fn parse(text: &str) -> Result<Template, String> {
        let mut parts = Vec::new();
        let mut literal = String::new();
        let mut chars = text.char_indices().peekable();
        while let Some((i, c)) = chars.next() {
            match c {
                '{' if chars.peek().map(|p| p.1) == Some('{') => {
                    chars.next();
                    literal.push('{');
                }
                '}' if chars.peek().map(|p| p.1) == Some('}') => {
                    chars.next();
                    literal.push('}');
                }
                '{' => {
                    let rest = &text[i + 1..];
                    let end = rest
                        .find('}')
                        .ok_or_else(|| format!("`{{` at {i} has no closing `}}`"))?;
                    let name = rest[..end].trim();
                    for _ in 0..rest[..=end].chars().count() {
                        chars.next();
                    }
                    if !literal.is_empty() {
                        parts.push(Part::Text(std::mem::take(&mut literal)));
                    }
                    parts.push(placeholder(name)?);
                }
                '}' => {
                    return Err(format!(
                        "`}}` at {i} without an opening `{{` (write `}}}}`)"
                    ));
                }
                c => literal.push(c),
            }
        }
        if !literal.is_empty() {
            parts.push(Part::Text(literal));
        }
        Ok(Template { parts })
    }

    /// Fills the placeholders: `lookup` answers names, `event` the `event.…` paths. A value
    /// that is absent renders as empty; a non-string as JSON.
    pub fn render(&self, lookup: impl Fn(&str) -> Option<String>, event: &Value) -> String {
        let mut out = String::new();
        for p in &self.parts {
            match p {
                Part::Text(t) => out.push_str(t),
                Part::Name(n) => out.push_str(&lookup(n).unwrap_or_default()),
                Part::Event(path) => {
                    let mut v = event;
                    let mut found = true;
                    for seg in path {
                        match v.get(seg.as_str()) {
                            Some(next) => v = next,
                            None => {
                                found = false;
                                break;
                            }
                        }
                    }
                    if found {
                        match v {
                            Value::String(s) => out.push_str(s),
                            Value::Null => {}
                            other => out.push_str(&other.to_string()),
                        }
                    }
                }
            }
        }
        out
    }
}

fn placeholder(name: &str) -> Result<Part, String> {
    if let Some(path) = name.strip_prefix("event.") {
        let segs: Vec<String> = path.split('.').map(str::to_owned).collect();
        if segs.iter().any(String::is_empty) {
            return Err(format!("`{{{name}}}`: an empty segment in the event path"));
        }
        return Ok(Part::Event(segs));
    }
    if NAMES.contains(&name) {
        return Ok(Part::Name(name.to_owned()));
    }
    let hint = crate::diagnostics::did_you_mean(name, NAMES.iter().copied())
        .map(|s| format!(" ({s})"))
        .unwrap_or_default();
    Err(format!(
        "unknown placeholder `{{{name}}}`{hint}; known: {}, and `event.PATH`",
        NAMES.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn placeholders_render_names_and_event_paths() {
        let t =
            Template::parse("{agent} failed on {event.data.server} ({event.data.n}){{x}}").unwrap();
        let event = json!({"data": {"server": "db-1", "n": 3}});
        let text = t.render(|n| (n == "agent").then(|| "fixer".to_owned()), &event);
        assert_eq!(text, "fixer failed on db-1 (3){x}");
        assert_eq!(
            Template::parse("{event.data.missing}!")
                .unwrap()
                .render(|_| None, &event),
            "!"
        );
    }

    #[test]
    fn unknown_placeholders_and_unbalanced_braces_are_refused() {
        let err = Template::parse("{agnet}").unwrap_err();
        assert!(err.contains("did you mean `agent`"), "{err}");
        assert!(Template::parse("{agent").is_err());
        assert!(Template::parse("agent}").is_err());
        assert!(Template::parse("{event.}").is_err());
    }
}
