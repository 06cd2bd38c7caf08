//! Checks a located YAML tree against a manifest's JSON Schema, collecting every problem.
//!
//! The schema is the one `pap schema` prints (generated from the raw types), so what editors
//! flag as you type and what `pap lint` reports are the same rules. Only the keywords schemars
//! emits for our types are interpreted: `$ref`, `anyOf`, `type`, `enum`, `minimum`, `maximum`,
//! `properties`, `required`, `additionalProperties`, `items` and `minItems`.

use serde_json::Value;

use super::yaml_tree::{Located, Node, PathSeg, display_path};
use crate::diagnostics::{Diagnostic, did_you_mean};
use crate::text::clip;

/// Walks `tree` against `schema` (a whole generated schema with `$defs`).
pub fn check(tree: &Located<Node>, schema: &Value, file: &str) -> Vec<Diagnostic> {
    let mut walker = Walker {
        root: schema,
        file,
        tree,
        out: Vec::new(),
    };
    let mut path = Vec::new();
    walker.node(tree, schema, None, &mut path);
    walker.out
}

struct Walker<'a> {
    root: &'a Value,
    file: &'a str,
    tree: &'a Located<Node>,
    out: Vec<Diagnostic>,
}

impl<'a> Walker<'a> {
    fn resolve(&self, reference: &str) -> Option<(&'a Value, &'a str)> {
        let name = reference.strip_prefix("#/$defs/")?;
        let (key, def) = self.root.get("$defs")?.as_object()?.get_key_value(name)?;
        Some((def, key.as_str()))
    }

    fn node(
        &mut self,
        node: &Located<Node>,
        schema: &'a Value,
        def: Option<&'a str>,
        path: &mut Vec<PathSeg>,
    ) {
        if let Some(reference) = schema.get("$ref").and_then(Value::as_str)
            && let Some((target, name)) = self.resolve(reference)
        {
            return self.node(node, target, Some(name), path);
        }
        if let Some(variants) = schema.get("anyOf").and_then(Value::as_array) {
            return self.any_of(node, variants, def, path);
        }
        if let Some(expected) = schema.get("type")
            && !type_matches(expected, &node.value)
        {
            self.wrong_type(node, expected, def, path);
            return;
        }
        if let Some(allowed) = schema.get("enum").and_then(Value::as_array) {
            let value = node.value.to_json();
            if !allowed.contains(&value) {
                self.not_in_enum(node, allowed, def, path);
                return;
            }
        }
        if let Node::Number(n) = &node.value {
            self.range(node, n, schema, path);
        }
        match &node.value {
            Node::Map(entries) => self.object(node, entries, schema, path),
            Node::Seq(items) => {
                if let Some(min) = schema.get("minItems").and_then(Value::as_u64)
                    && (items.len() as u64) < min
                {
                    let code = match last_key(path) {
                        "throttle" => "throttle-range",
                        _ => "out-of-range",
                    };
                    self.out.push(Diagnostic::new(
                        code,
                        self.file,
                        node.pos,
                        format!(
                            "`{}` needs at least {min} item{}, found {}",
                            display_path(path),
                            if min == 1 { "" } else { "s" },
                            items.len()
                        ),
                    ));
                }
                if let Some(item_schema) = schema.get("items") {
                    for (i, item) in items.iter().enumerate() {
                        path.push(PathSeg::Index(i));
                        self.node(item, item_schema, None, path);
                        path.pop();
                    }
                }
            }
            _ => {}
        }
    }

    /// `Option<T>` comes out as `anyOf: [T, null]`: a null passes, anything else is checked
    /// against the first non-null variant so its messages are specific.
    fn any_of(
        &mut self,
        node: &Located<Node>,
        variants: &'a [Value],
        def: Option<&'a str>,
        path: &mut Vec<PathSeg>,
    ) {
        let is_null_schema = |v: &Value| v.get("type").and_then(Value::as_str) == Some("null");
        if matches!(node.value, Node::Null) && variants.iter().any(is_null_schema) {
            return;
        }
        // Of the variants that fail, report the first one whose type fits the node (a list
        // given for `One | Several` is checked as a list), so the messages are about the
        // value's own fields rather than "expected an object".
        let mut first_failure = None;
        let mut fitting_failure = None;
        for variant in variants.iter().filter(|v| !is_null_schema(v)) {
            let mut trial = Walker {
                root: self.root,
                file: self.file,
                tree: self.tree,
                out: Vec::new(),
            };
            trial.node(node, variant, def, path);
            if trial.out.is_empty() {
                return;
            }
            if fitting_failure.is_none() && self.type_fits(variant, &node.value) {
                fitting_failure = Some(trial.out);
            } else {
                first_failure.get_or_insert(trial.out);
            }
        }
        self.out
            .extend(fitting_failure.or(first_failure).unwrap_or_default());
    }

    /// Whether `schema` (after `$ref`s) states a `type` that `node` has.
    fn type_fits(&self, schema: &'a Value, node: &Node) -> bool {
        let mut schema = schema;
        while let Some(reference) = schema.get("$ref").and_then(Value::as_str) {
            match self.resolve(reference) {
                Some((target, _)) => schema = target,
                None => return false,
            }
        }
        schema
            .get("type")
            .is_some_and(|expected| type_matches(expected, node))
    }

    fn object(
        &mut self,
        node: &Located<Node>,
        entries: &[(Located<String>, Located<Node>)],
        schema: &'a Value,
        path: &mut Vec<PathSeg>,
    ) {
        let properties = schema.get("properties").and_then(Value::as_object);
        let additional = schema.get("additionalProperties");
        for (key, value) in entries {
            path.push(PathSeg::Key(key.value.clone()));
            match properties.and_then(|p| p.get(&key.value)) {
                Some(prop_schema) => self.node(value, prop_schema, None, path),
                None => match additional {
                    Some(Value::Bool(false)) => {
                        let known: Vec<&str> = properties
                            .map(|p| p.keys().map(String::as_str).collect())
                            .unwrap_or_default();
                        self.unknown_field(key, &known, path);
                    }
                    Some(extra) if extra.is_object() => self.node(value, extra, None, path),
                    _ => {}
                },
            }
            path.pop();
        }
        if let Some(required) = schema.get("required").and_then(Value::as_array) {
            for name in required.iter().filter_map(Value::as_str) {
                if !entries.iter().any(|(k, _)| k.value == name) {
                    self.missing_field(node, name, path);
                }
            }
        }
    }

    fn range(
        &mut self,
        node: &Located<Node>,
        n: &serde_json::Number,
        schema: &Value,
        path: &[PathSeg],
    ) {
        let Some(value) = n.as_f64() else { return };
        let field = last_key(path);
        let code = match field {
            "max_per_window" | "window_seconds" => "throttle-range",
            "seconds" => "debounce-range",
            "max_attempts" => "retry-attempts-range",
            _ => "out-of-range",
        };
        let min = schema.get("minimum").and_then(Value::as_f64);
        let max = schema.get("maximum").and_then(Value::as_f64);
        let message = match (min, max) {
            (Some(lo), Some(hi)) if value < lo || value > hi => format!(
                "`{}` must be between {} and {}, found {n}",
                display_path(path),
                fmt_num(lo),
                fmt_num(hi)
            ),
            (Some(lo), None) if value < lo => {
                format!(
                    "`{}` must be at least {}, found {n}",
                    display_path(path),
                    fmt_num(lo)
                )
            }
            (None, Some(hi)) if value > hi => {
                format!(
                    "`{}` must be at most {}, found {n}",
                    display_path(path),
                    fmt_num(hi)
                )
            }
            _ => return,
        };
        self.out
            .push(Diagnostic::new(code, self.file, node.pos, message));
    }

    fn wrong_type(
        &mut self,
        node: &Located<Node>,
        expected: &Value,
        def: Option<&str>,
        path: &[PathSeg],
    ) {
        let wanted: Vec<&str> = match expected {
            Value::String(s) => vec![s.as_str()],
            Value::Array(items) => items
                .iter()
                .filter_map(Value::as_str)
                .filter(|t| *t != "null")
                .collect(),
            _ => vec![],
        };
        let wanted = wanted
            .iter()
            .map(|t| article(t))
            .collect::<Vec<_>>()
            .join(" or ");
        let found = describe(&node.value);
        if def == Some("PapVersion") {
            let d = Diagnostic::new(
                "pap-version",
                self.file,
                node.pos,
                format!("`pap_version` must be the string \"0.2\", found {found}"),
            );
            self.out.push(
                d.with_help("write pap_version: \"0.2\" (quoted; an unquoted 0.2 is a number)"),
            );
            return;
        }
        let message = format!("`{}` must be {wanted}, found {found}", display_path(path));
        self.out
            .push(Diagnostic::new("wrong-type", self.file, node.pos, message));
    }

    fn not_in_enum(
        &mut self,
        node: &Located<Node>,
        allowed: &[Value],
        def: Option<&str>,
        path: &[PathSeg],
    ) {
        let names: Vec<&str> = allowed.iter().filter_map(Value::as_str).collect();
        let (code, what) = match def {
            Some("Operator") => ("unknown-operator", "filter operator"),
            Some("RiskLevel") => ("unknown-risk-level", "risk level"),
            Some("Provider") => ("unknown-provider", "model provider"),
            Some("OutputType") => ("unknown-output-type", "output type"),
            Some("Impact") => ("unknown-impact", "tool impact"),
            Some("SchemaType") => ("invalid-schema-type", "output schema type"),
            Some("PapVersion") => ("pap-version", "pap_version"),
            _ => ("invalid-value", "value"),
        };
        let found = match &node.value {
            Node::String(s) => format!("`{}`", clip(s, 40)),
            other => describe(other),
        };
        let message = if code == "pap-version" {
            format!(
                "pap_version must be \"0.2\", found {found}: this dispatcher implements PAP 0.2"
            )
        } else {
            format!("unknown {what} {found} at `{}`", display_path(path))
        };
        let expected = format!("expected one of: {}", names.join(", "));
        let help = match node
            .value
            .as_str()
            .and_then(|s| did_you_mean(s, names.iter().copied()))
        {
            Some(suggestion) => format!("{suggestion} ({expected})"),
            None => expected,
        };
        self.out
            .push(Diagnostic::new(code, self.file, node.pos, message).with_help(help));
    }

    fn unknown_field(&mut self, key: &Located<String>, known: &[&str], path: &[PathSeg]) {
        let parent = &path[..path.len() - 1];
        let place = if parent.is_empty() {
            "at the top level".to_string()
        } else {
            format!("in `{}`", display_path(parent))
        };
        let message = format!("unknown field `{}` {place}", key.value);
        let help = did_you_mean(&key.value, known.iter().copied())
            .unwrap_or_else(|| format!("known fields: {}", known.join(", ")));
        self.out
            .push(Diagnostic::new("unknown-field", self.file, key.pos, message).with_help(help));
    }

    fn missing_field(&mut self, node: &Located<Node>, name: &str, path: &[PathSeg]) {
        let place = if path.is_empty() {
            "at the top level".to_string()
        } else {
            format!("in `{}`", display_path(path))
        };
        // Point at the key that owns the mapping ("trigger:"), which is where a reader looks.
        let pos = if path.is_empty() {
            node.pos
        } else {
            self.tree.locate_key(path)
        };
        let message = format!("missing required field `{name}` {place}");
        self.out
            .push(Diagnostic::new("missing-field", self.file, pos, message));
    }
}

fn type_matches(expected: &Value, node: &Node) -> bool {
    let one = |t: &str| match (t, node) {
        ("null", Node::Null) => true,
        ("boolean", Node::Bool(_)) => true,
        ("string", Node::String(_)) => true,
        ("array", Node::Seq(_)) => true,
        ("object", Node::Map(_)) => true,
        ("number", Node::Number(_)) => true,
        ("integer", Node::Number(n)) => n.is_i64() || n.is_u64(),
        _ => false,
    };
    match expected {
        Value::String(t) => one(t),
        Value::Array(ts) => ts.iter().filter_map(Value::as_str).any(one),
        _ => true,
    }
}

fn article(t: &str) -> String {
    match t {
        "integer" | "array" | "object" => format!("an {t}"),
        "null" => "null".to_string(),
        _ => format!("a {t}"),
    }
}

/// "the string `eq`", "the number 3", "a list", "a mapping", "null".
fn describe(node: &Node) -> String {
    match node {
        Node::Null => "null (an empty value)".to_string(),
        Node::Bool(b) => format!("the boolean `{b}`"),
        Node::Number(n) => format!("the number {n}"),
        Node::String(s) => format!("the string `{}`", clip(s, 40)),
        Node::Seq(_) => "a list".to_string(),
        Node::Map(_) => "a mapping".to_string(),
    }
}

fn fmt_num(v: f64) -> String {
    if v.fract() == 0.0 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

fn last_key(path: &[PathSeg]) -> &str {
    path.iter()
        .rev()
        .find_map(|s| match s {
            PathSeg::Key(k) => Some(k.as_str()),
            PathSeg::Index(_) => None,
        })
        .unwrap_or("")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::raw::TriggerFile;
    use crate::manifest::yaml_tree::parse;

    fn problems(yaml: &str) -> Vec<(String, u32, u32)> {
        let schema = serde_json::to_value(schemars::schema_for!(TriggerFile)).unwrap();
        let tree = parse(yaml).unwrap();
        check(&tree, &schema, "t.yaml")
            .into_iter()
            .map(|d| (d.code.to_string(), d.pos.line, d.pos.column))
            .collect()
    }

    #[test]
    fn a_valid_trigger_has_no_problems() {
        let yaml = "pap_version: \"0.2\"\ntrigger:\n  id: t\n  match:\n    type: a.b.c\n  agent: x\n  filter:\n    - path: $.data.x\n      operator: gt\n      value: 3\n";
        assert_eq!(problems(yaml), vec![]);
    }

    #[test]
    fn every_problem_of_a_file_is_reported() {
        let yaml = "pap_version: 0.2\ntrigger:\n  id: t\n  filtr: []\n  enabled: yes\n  throttle:\n    max_per_window: 0\n    window_seconds: 60\n  agent: x\n";
        let got = problems(yaml);
        assert_eq!(
            got,
            vec![
                ("pap-version".into(), 1, 14),
                ("unknown-field".into(), 4, 3),
                ("wrong-type".into(), 5, 12),
                ("throttle-range".into(), 7, 21),
                ("missing-field".into(), 2, 1),
            ]
        );
    }

    #[test]
    fn a_list_given_where_one_or_several_fit_is_checked_as_a_list() {
        // `throttle` is one window or a list: a misspelt field inside the list is reported
        // there, not as "expected an object" at the list.
        let yaml = "pap_version: \"0.2\"\ntrigger:\n  id: t\n  match:\n    type: a.b.c\n  agent: x\n  throttle:\n    - max_per_window: 3\n      window_seconds: 60\n    - max_per_windw: 7\n      window_seconds: 600\n";
        assert_eq!(
            problems(yaml),
            vec![
                ("unknown-field".into(), 10, 7),
                ("missing-field".into(), 10, 7),
            ]
        );
    }

    #[test]
    fn enum_errors_get_specific_codes_and_suggestions() {
        let schema = serde_json::to_value(schemars::schema_for!(TriggerFile)).unwrap();
        let yaml = "pap_version: \"0.2\"\ntrigger:\n  id: t\n  match: {type: a.b.c}\n  agent: x\n  filter:\n    - {path: $.a, operator: greater}\n";
        let tree = parse(yaml).unwrap();
        let d = check(&tree, &schema, "t.yaml");
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].code, "unknown-operator");
        assert!(
            d[0].help
                .as_deref()
                .unwrap()
                .contains("expected one of: eq, ne"),
            "{:?}",
            d[0].help
        );
    }
}
