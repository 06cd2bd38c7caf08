//! `{placeholder}` templates written in manifests: notification content, session names and
//! deduplication keys (`{agent}`, `{event.data.x}`), and the webhook adapters' event fields
//! (`{item.fingerprint}`, `{body.receiver}`). Placeholders are checked at load against the
//! template's [`Scheme`]: the plain names it knows and the roots its dotted paths start from.
//!
//! A rendered template is display text, a key or an event field, never a command line:
//! what it reads is untrusted, and this is the only place it is spliced into anything.

use serde_json::Value;

/// Names a template may use besides `event.…`.
pub(crate) const NAMES: &[&str] = &[
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

/// What a kind of template may refer to.
pub(crate) struct Scheme {
    /// Plain names (`{agent}`).
    pub names: &'static [&'static str],
    /// Roots of dotted paths (`{event.data.x}` has the root `event`).
    pub roots: &'static [&'static str],
}

/// Notification content, sessions and deduplication keys.
pub(crate) const NOTIFY: Scheme = Scheme {
    names: NAMES,
    roots: &["event"],
};

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
enum Part {
    Text(String),
    Name(String),
    /// A dotted path from a root, `event.data.server` → ("event", ["data", "server"]).
    Path(String, Vec<String>),
}

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Template {
    parts: Vec<Part>,
}

impl Template {
    /// Parses a notification template ([`NOTIFY`]).
    pub(crate) fn parse(text: &str) -> Result<Template, String> {
        Template::parse_in(text, &NOTIFY)
    }

    /// Parses `text` for `scheme`; `{{` and `}}` are literal braces.
    pub(crate) fn parse_in(text: &str, scheme: &Scheme) -> Result<Template, String> {
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
                    parts.push(placeholder(name, scheme)?);
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

    /// Whether some values of its placeholders render it as `text`: each placeholder stands
    /// for any text that is not empty (lint asks which adapter can make an event type).
    pub(crate) fn could_render(&self, text: &str) -> bool {
        fn from(parts: &[Part], text: &str) -> bool {
            match parts.split_first() {
                None => text.is_empty(),
                Some((Part::Text(t), rest)) => {
                    text.strip_prefix(t.as_str()).is_some_and(|r| from(rest, r))
                }
                Some((_, rest)) => (1..=text.len())
                    .filter(|i| text.is_char_boundary(*i))
                    .any(|i| from(rest, &text[i..])),
            }
        }
        from(&self.parts, text)
    }

    /// Fills the placeholders: `lookup` answers names, `event` the `event.…` paths. A value
    /// that is absent renders as empty; a non-string as JSON.
    pub fn render(&self, lookup: impl Fn(&str) -> Option<String>, event: &Value) -> String {
        self.render_roots(lookup, |root| (root == "event").then_some(event))
    }

    /// As [`Template::render`], with `root` giving the value each path root stands for.
    pub(crate) fn render_roots<'v>(
        &self,
        lookup: impl Fn(&str) -> Option<String>,
        root: impl Fn(&str) -> Option<&'v Value>,
    ) -> String {
        let mut out = String::new();
        for p in &self.parts {
            match p {
                Part::Text(t) => out.push_str(t),
                Part::Name(n) => out.push_str(&lookup(n).unwrap_or_default()),
                Part::Path(start, path) => {
                    let found = path
                        .iter()
                        .try_fold(root(start), |v, seg| Some(v?.get(seg.as_str())))
                        .flatten();
                    match found {
                        Some(Value::String(s)) => out.push_str(s),
                        Some(Value::Null) | None => {}
                        Some(other) => out.push_str(&other.to_string()),
                    }
                }
            }
        }
        out
    }
}

fn placeholder(name: &str, scheme: &Scheme) -> Result<Part, String> {
    if let Some((root, path)) = name.split_once('.')
        && scheme.roots.contains(&root)
    {
        let segs: Vec<String> = path.split('.').map(str::to_owned).collect();
        if segs.iter().any(String::is_empty) {
            return Err(format!("`{{{name}}}`: an empty segment in the {root} path"));
        }
        return Ok(Part::Path(root.to_owned(), segs));
    }
    if scheme.names.contains(&name) {
        return Ok(Part::Name(name.to_owned()));
    }
    let hint = crate::diagnostics::did_you_mean(name, scheme.names.iter().copied())
        .map(|s| format!(" ({s})"))
        .unwrap_or_default();
    let roots: Vec<String> = scheme.roots.iter().map(|r| format!("`{r}.PATH`")).collect();
    let known = if scheme.names.is_empty() {
        roots.join(" and ")
    } else {
        format!("{}, and {}", scheme.names.join(", "), roots.join(" and "))
    };
    Err(format!(
        "unknown placeholder `{{{name}}}`{hint}; known: {known}"
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

    #[test]
    fn a_scheme_sets_the_roots_of_paths() {
        const ADAPTER: Scheme = Scheme {
            names: &[],
            roots: &["item", "body"],
        };
        let t = Template::parse_in("{item.a}-{body.b.c}", &ADAPTER).unwrap();
        let (item, body) = (json!({"a": 1}), json!({"b": {"c": "x"}}));
        let text = t.render_roots(
            |_| None,
            |root| match root {
                "item" => Some(&item),
                "body" => Some(&body),
                _ => None,
            },
        );
        assert_eq!(text, "1-x");
        let err = Template::parse_in("{event.a}", &ADAPTER).unwrap_err();
        assert!(err.contains("`item.PATH` and `body.PATH`"), "{err}");
    }
}
