//! A located YAML tree: every key and value of a manifest with the line and column it came from.
//!
//! `pap lint` must report *every* problem of a file at the exact place of the offending value.
//! Deserializing straight into the manifest structs would stop at the first unknown field or wrong
//! type, so the loader first builds this generic tree (through serde-saphyr's `Spanned`, so the
//! YAML rules — strict booleans, duplicate keys, alias budgets — are the parser's), then checks the
//! tree against the manifest schema collecting all problems, and only then converts it.

use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_saphyr::{DuplicateKeyPolicy, Options, Spanned};

use crate::diagnostics::Pos;

/// Where a YAML parser's location is, as a diagnostic's position.
fn pos_of(loc: &serde_saphyr::Location) -> Pos {
    let span = loc.span();
    Pos {
        line: u32::try_from(loc.line()).unwrap_or(u32::MAX).max(1),
        column: u32::try_from(loc.column()).unwrap_or(u32::MAX).max(1),
        offset: span.byte_offset().unwrap_or(0) as usize,
        len: span.byte_len().unwrap_or(0) as usize,
    }
}

/// A value with the position where it is written.
#[derive(Debug, Clone, PartialEq)]
pub struct Located<T> {
    pub value: T,
    pub pos: Pos,
}

/// One YAML node, resolved by the YAML 1.2 core schema (with strict booleans).
#[derive(Debug, Clone, PartialEq)]
pub enum Node {
    Null,
    Bool(bool),
    Number(serde_json::Number),
    String(String),
    Seq(Vec<Located<Node>>),
    Map(Vec<(Located<String>, Located<Node>)>),
}

impl Node {
    /// Looks up a key of a mapping node.
    pub fn get(&self, key: &str) -> Option<&Located<Node>> {
        match self {
            Node::Map(entries) => entries.iter().find(|(k, _)| k.value == key).map(|(_, v)| v),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Node::String(s) => Some(s),
            _ => None,
        }
    }

    /// Converts to JSON. Keys keep their order of appearance.
    pub fn to_json(&self) -> serde_json::Value {
        use serde_json::Value;
        match self {
            Node::Null => Value::Null,
            Node::Bool(b) => Value::Bool(*b),
            Node::Number(n) => Value::Number(n.clone()),
            Node::String(s) => Value::String(s.clone()),
            Node::Seq(items) => Value::Array(items.iter().map(|i| i.value.to_json()).collect()),
            Node::Map(entries) => Value::Object(
                entries
                    .iter()
                    .map(|(k, v)| (k.value.clone(), v.value.to_json()))
                    .collect(),
            ),
        }
    }
}

impl Located<Node> {
    /// Follows a path as far as it exists: the deepest node reached and how many steps it took.
    fn deepest(&self, path: &[PathSeg]) -> (&Located<Node>, usize) {
        let mut node = self;
        for (taken, seg) in path.iter().enumerate() {
            let next = match (seg, &node.value) {
                (PathSeg::Key(k), Node::Map(_)) => node.value.get(k),
                (PathSeg::Index(i), Node::Seq(items)) => items.get(*i),
                _ => None,
            };
            match next {
                Some(n) => node = n,
                None => return (node, taken),
            }
        }
        (node, path.len())
    }

    /// The position of the value at `path`, or of the deepest node that exists along the way,
    /// so a problem deep inside a missing parent still points somewhere useful.
    pub fn locate(&self, path: &[PathSeg]) -> Pos {
        self.deepest(path).0.pos
    }

    /// The position of a key itself (for "unknown field" and "duplicate" problems).
    pub fn locate_key(&self, path: &[PathSeg]) -> Pos {
        let Some((last, parent)) = path.split_last() else {
            return self.pos;
        };
        let (node, taken) = self.deepest(parent);
        if taken < parent.len() {
            return node.pos;
        }
        match (last, &node.value) {
            (PathSeg::Key(k), Node::Map(entries)) => entries
                .iter()
                .find(|(key, _)| &key.value == k)
                .map_or(node.pos, |(key, _)| key.pos),
            _ => self.locate(path),
        }
    }
}

/// One step of a path into a manifest: a mapping key or a sequence index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PathSeg {
    Key(String),
    Index(usize),
}

impl fmt::Display for PathSeg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PathSeg::Key(k) => f.write_str(k),
            PathSeg::Index(i) => write!(f, "[{i}]"),
        }
    }
}

/// Renders a path like `trigger.filter[0].value` for messages.
pub(crate) fn display_path(path: &[PathSeg]) -> String {
    let mut out = String::new();
    for seg in path {
        match seg {
            PathSeg::Key(k) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(k);
            }
            PathSeg::Index(i) => out.push_str(&format!("[{i}]")),
        }
    }
    out
}

/// Builds a path from string keys and indexes: `path!["trigger", "filter", 0]`.
#[macro_export]
macro_rules! path {
    ($($seg:expr),* $(,)?) => {
        [$($crate::manifest::yaml_tree::PathSeg::from($seg)),*]
    };
}

impl From<&str> for PathSeg {
    fn from(s: &str) -> Self {
        PathSeg::Key(s.to_string())
    }
}
impl From<String> for PathSeg {
    fn from(s: String) -> Self {
        PathSeg::Key(s)
    }
}
impl From<usize> for PathSeg {
    fn from(i: usize) -> Self {
        PathSeg::Index(i)
    }
}

/// A YAML document that could not be read as a tree (syntax error, duplicate key, budget).
#[derive(Debug, Clone, PartialEq)]
pub struct YamlError {
    pub message: String,
    pub pos: Pos,
    pub(crate) duplicate_key: bool,
}

/// Parser settings shared by every manifest: YAML 1.2 booleans only (`NO` stays a string),
/// duplicate keys rejected, and serde-saphyr's default budgets against alias bombs.
fn options() -> Options {
    let mut options = Options::default();
    options.strict_booleans = true;
    options.duplicate_keys = DuplicateKeyPolicy::Error;
    options.with_snippet = false;
    options
}

/// Parses one YAML document into a located tree. An empty document is `Null` at 1:1.
pub fn parse(text: &str) -> Result<Located<Node>, YamlError> {
    if text.trim().is_empty()
        || text
            .lines()
            .all(|l| l.trim().is_empty() || l.trim_start().starts_with('#'))
    {
        return Ok(Located {
            value: Node::Null,
            pos: Pos::START,
        });
    }
    match serde_saphyr::from_str_with_options::<Spanned<Node>>(text, options()) {
        Ok(spanned) => Ok(located(spanned)),
        Err(err) => {
            let pos = err.location().map(|l| pos_of(&l)).unwrap_or(Pos::START);
            let mut message = plain_message(&err);
            let duplicate_key = message.to_ascii_lowercase().contains("duplicate");
            if duplicate_key {
                // The parser's text suggests a library option; say what the user should do.
                let key = message
                    .split_once("key:")
                    .map(|(_, rest)| rest.split(',').next().unwrap_or("").trim().to_string())
                    .unwrap_or_default();
                message = format!("duplicate key `{key}`: each key may appear once in a mapping");
            }
            Err(YamlError {
                message,
                pos,
                duplicate_key,
            })
        }
    }
}

/// serde-saphyr's `Display` appends the location ("at line 3, column 5"); lint prints positions
/// itself, so strip that suffix to keep one position per message.
fn plain_message(err: &serde_saphyr::Error) -> String {
    if let Some(breach) = budget_breach(err) {
        return budget_message(breach);
    }
    let full = err.to_string();
    let first = full.lines().next().unwrap_or("").trim().to_string();
    match first.rfind(" at line ") {
        Some(idx) => first[..idx].trim_end_matches([',', ':', ' ']).to_string(),
        None => first,
    }
}

/// The reader's budget that `err` reports breached, under any wrapping.
fn budget_breach(mut err: &serde_saphyr::Error) -> Option<&serde_saphyr::budget::BudgetBreach> {
    loop {
        match err {
            serde_saphyr::Error::Budget { breach, .. } => return Some(breach),
            serde_saphyr::Error::WithSnippet { error, .. }
            | serde_saphyr::Error::AliasError { error, .. } => err = error,
            _ => return None,
        }
    }
}

/// A breached budget in words (the library says it in Rust's debug form, `Nodes { nodes:
/// 250001 }`). The budgets stop a generated or hostile file from costing unbounded time and
/// memory; a manifest a person wrote is nowhere near them.
fn budget_message(breach: &serde_saphyr::budget::BudgetBreach) -> String {
    use serde_saphyr::budget::BudgetBreach as B;
    let (what, count) = match breach {
        B::Events { events } => ("parser events", *events),
        B::Aliases { aliases } => ("aliases (`*name`)", *aliases),
        B::Anchors { anchors } => ("anchors (`&name`)", *anchors),
        B::Depth { depth } => ("levels of nesting", *depth),
        B::Documents { documents } => ("documents", *documents),
        B::Nodes { nodes } => ("values (mappings, sequences and scalars)", *nodes),
        B::ScalarBytes { total_scalar_bytes } => ("bytes of scalar text", *total_scalar_bytes),
        B::MergeKeys { merge_keys } => ("merge keys (`<<`)", *merge_keys),
        B::InputBytes { input_bytes } => ("bytes", *input_bytes),
        B::AliasAnchorRatio { aliases, anchors } => {
            return format!(
                "the YAML expands {aliases} aliases from {anchors} anchors, more than the reader \
                 allows (an alias bomb?); write the values out instead"
            );
        }
        B::SequenceUnbalanced => {
            return "the YAML's structure does not balance (a sequence or mapping closes that \
                    never opened: is the file cut short?)"
                .into();
        }
        _ => return "the YAML is past one of the reader's limits".into(),
    };
    format!(
        "the YAML is past the reader's limit of {what} (reached {count}): a file this large \
         is generated or hostile; split it or simplify it"
    )
}

fn located(s: Spanned<Node>) -> Located<Node> {
    Located {
        value: s.value,
        pos: pos_of(&s.referenced),
    }
}

impl<'de> Deserialize<'de> for Node {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(NodeVisitor)
    }
}

struct NodeVisitor;

impl<'de> Visitor<'de> for NodeVisitor {
    type Value = Node;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any YAML value")
    }
    fn visit_unit<E>(self) -> Result<Node, E> {
        Ok(Node::Null)
    }
    fn visit_none<E>(self) -> Result<Node, E> {
        Ok(Node::Null)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Node, D::Error> {
        Node::deserialize(d)
    }
    fn visit_bool<E>(self, v: bool) -> Result<Node, E> {
        Ok(Node::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Node, E> {
        Ok(Node::Number(v.into()))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Node, E> {
        Ok(Node::Number(v.into()))
    }
    fn visit_i128<E: de::Error>(self, v: i128) -> Result<Node, E> {
        i64::try_from(v)
            .map(|v| Node::Number(v.into()))
            .map_err(|_| E::custom("integer out of range"))
    }
    fn visit_u128<E: de::Error>(self, v: u128) -> Result<Node, E> {
        u64::try_from(v)
            .map(|v| Node::Number(v.into()))
            .map_err(|_| E::custom("integer out of range"))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Node, E> {
        serde_json::Number::from_f64(v)
            .map(Node::Number)
            .ok_or_else(|| E::custom("`.inf` and `.nan` are not allowed in a manifest"))
    }
    fn visit_str<E>(self, v: &str) -> Result<Node, E> {
        Ok(Node::String(v.to_string()))
    }
    fn visit_string<E>(self, v: String) -> Result<Node, E> {
        Ok(Node::String(v))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Node, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element::<Spanned<Node>>()? {
            items.push(located(item));
        }
        Ok(Node::Seq(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Node, A::Error> {
        let mut entries = Vec::new();
        while let Some(key) = map.next_key::<Spanned<KeyText>>()? {
            let value = map.next_value::<Spanned<Node>>()?;
            entries.push((
                Located {
                    value: key.value.0,
                    pos: pos_of(&key.referenced),
                },
                located(value),
            ));
        }
        Ok(Node::Map(entries))
    }
}

/// A mapping key as text: manifests only have string keys, but `1: x` or `true: y` should reach
/// the schema check as the key "1"/"true" (and be reported as unknown) rather than fail parsing.
struct KeyText(String);

impl<'de> Deserialize<'de> for KeyText {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = KeyText;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a scalar mapping key")
            }
            fn visit_str<E>(self, v: &str) -> Result<KeyText, E> {
                Ok(KeyText(v.to_string()))
            }
            fn visit_string<E>(self, v: String) -> Result<KeyText, E> {
                Ok(KeyText(v))
            }
            fn visit_bool<E>(self, v: bool) -> Result<KeyText, E> {
                Ok(KeyText(v.to_string()))
            }
            fn visit_i64<E>(self, v: i64) -> Result<KeyText, E> {
                Ok(KeyText(v.to_string()))
            }
            fn visit_u64<E>(self, v: u64) -> Result<KeyText, E> {
                Ok(KeyText(v.to_string()))
            }
            fn visit_f64<E>(self, v: f64) -> Result<KeyText, E> {
                Ok(KeyText(v.to_string()))
            }
            fn visit_unit<E>(self) -> Result<KeyText, E> {
                Ok(KeyText("null".to_string()))
            }
        }
        d.deserialize_any(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_ok(text: &str) -> Located<Node> {
        parse(text).unwrap_or_else(|e| panic!("{e:?}"))
    }

    #[test]
    fn plain_scalars_follow_the_core_schema_and_quoted_ones_stay_strings() {
        let tree = parse_ok("a: 3\nb: \"3\"\nc: 3.0\nd: true\ne: NO\nf: ~\ng: '4.5'\n");
        let get = |k: &str| tree.value.get(k).unwrap().value.clone();
        assert_eq!(get("a"), Node::Number(3.into()));
        assert_eq!(get("b"), Node::String("3".into()));
        assert!(matches!(get("c"), Node::Number(n) if n.as_f64() == Some(3.0)));
        assert_eq!(get("d"), Node::Bool(true));
        assert_eq!(
            get("e"),
            Node::String("NO".into()),
            "strict booleans keep NO a string"
        );
        assert_eq!(get("f"), Node::Null);
        assert_eq!(get("g"), Node::String("4.5".into()));
    }

    #[test]
    fn positions_are_one_based_and_point_at_keys_and_values() {
        let tree = parse_ok("trigger:\n  id: x\n  filter:\n    - path: \"$.a\"\n");
        let path = path!["trigger", "filter", 0usize, "path"];
        let pos = tree.locate(&path);
        assert_eq!((pos.line, pos.column), (4, 13));
        let key = tree.locate_key(&path);
        assert_eq!((key.line, key.column), (4, 7));
        let id = tree.locate(&path!["trigger", "id"]);
        assert_eq!((id.line, id.column), (2, 7));
    }

    #[test]
    fn locate_stops_at_the_deepest_existing_node() {
        let tree = parse_ok("trigger:\n  id: x\n");
        // A block mapping starts at its first entry.
        let pos = tree.locate(&path!["trigger", "match", "type"]);
        assert_eq!((pos.line, pos.column), (2, 3));
        let key = tree.locate_key(&path!["trigger", "match"]);
        assert_eq!((key.line, key.column), (2, 3));
        let parent_key = tree.locate_key(&path!["trigger"]);
        assert_eq!((parent_key.line, parent_key.column), (1, 1));
    }

    #[test]
    fn duplicate_keys_are_errors_at_the_second_key() {
        let err = parse("a: 1\nb: 2\na: 3\n").unwrap_err();
        assert!(err.duplicate_key, "{err:?}");
        assert_eq!(err.pos.line, 3);
    }

    #[test]
    fn syntax_errors_carry_a_position() {
        let err = parse("a: [1, 2\nb: 3\n").unwrap_err();
        assert!(!err.duplicate_key);
        assert!(err.pos.line >= 1);
        assert!(!err.message.contains(" at line "), "{}", err.message);
    }

    #[test]
    fn non_string_keys_become_text() {
        let tree = parse_ok("1: x\ntrue: y\n");
        assert!(tree.value.get("1").is_some());
        assert!(tree.value.get("true").is_some());
    }

    #[test]
    fn empty_and_comment_only_documents_are_null() {
        assert_eq!(parse_ok("").value, Node::Null);
        assert_eq!(parse_ok("# nothing\n\n").value, Node::Null);
    }

    #[test]
    fn aliases_expand() {
        let tree = parse_ok("a: &x [1, 2]\nb: *x\n");
        assert_eq!(
            tree.value.get("b").unwrap().value.to_json(),
            serde_json::json!([1, 2])
        );
    }
}
