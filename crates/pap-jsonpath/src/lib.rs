//! RFC 9535 JSONPath, parsed once at load (jsonpath-rust's parser) and evaluated per event
//! by our own evaluator ([`eval`]), which has a budget: an event is untrusted, and a path
//! with descendant segments over a hostile event must not cost more than a bounded number of
//! node visits.
//!
//! Most trigger paths are plain walks (`$.data.region`, `$.data.items[0].sku`). Those are
//! also compiled to a list of steps and evaluated directly, which is several times faster
//! than the general evaluator and selects exactly the same node (a test compares the two).

mod eval;
mod typecheck;

use jsonpath_rust::parser::model::{JpQuery, Segment, Selector};
use jsonpath_rust::parser::parse_json_path;
use serde_json::Value;

pub use eval::OverBudget;

/// JSON equality where numbers compare by value (`3` equals `3.0`), recursively; no
/// coercion between strings and numbers.
pub fn json_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_i64(), y.as_i64()) {
            (Some(x), Some(y)) => x == y,
            _ => match (x.as_u64(), y.as_u64()) {
                (Some(x), Some(y)) => x == y,
                _ => x.as_f64() == y.as_f64(),
            },
        },
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| json_eq(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| json_eq(v, w)))
        }
        _ => a == b,
    }
}

/// Nodes one evaluation may visit, unless `limits.jsonpath_nodes` in pap.yaml says otherwise.
pub const DEFAULT_MAX_NODES: usize = 100_000;

/// A parsed JSONPath query together with its source text.
///
/// Cached projects (`manifest::cache`) keep the text only: a plain path (`$.data.host`, by
/// far the most common) is walked without the parsed query, and the query of any other is
/// parsed when first evaluated.
#[derive(Clone)]
pub struct JsonPath {
    text: String,
    query: std::sync::OnceLock<JpQuery>,
    /// The steps of a singular query made only of names and indexes, if it is one.
    walk: Option<Vec<Step>>,
    max_nodes: usize,
}

#[derive(Debug, Clone, PartialEq)]
enum Step {
    Name(String),
    Index(i64),
}

/// Why a query is not valid JSONPath, in words a person can act on (the parser's own
/// explanation, or the RFC 9535 rule it breaks); shown after "is not valid JSONPath: ".
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    reason: String,
}

impl std::fmt::Display for ParseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.reason)
    }
}

impl std::error::Error for ParseError {}

impl From<String> for ParseError {
    fn from(reason: String) -> ParseError {
        ParseError { reason }
    }
}

impl JsonPath {
    /// Parses a query; the error is the parser's own explanation.
    pub fn parse(text: &str) -> Result<JsonPath, ParseError> {
        // The RFC forbids leading and trailing whitespace; the parser tolerates some of it.
        if text.trim() != text {
            return Err(ParseError::from(
                "leading or trailing whitespace is not allowed".to_string(),
            ));
        }
        let query = parse_json_path(text).map_err(|e| ParseError::from(explain(&e.to_string())))?;
        typecheck::check(&query)?;
        Ok(JsonPath {
            text: text.to_string(),
            query: std::sync::OnceLock::from(query),
            walk: simple_walk(text),
            max_nodes: DEFAULT_MAX_NODES,
        })
    }

    /// The parsed query, parsed now if this path came from a cache.
    fn query(&self) -> &JpQuery {
        self.query.get_or_init(|| {
            // It parsed when it was cached, in this same build of pap (the cache is keyed
            // by the binary).
            parse_json_path(&self.text).expect("a cached path parses as it did")
        })
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Sets how many nodes one evaluation may visit.
    pub fn set_budget(&mut self, max_nodes: usize) {
        self.max_nodes = max_nodes;
    }

    /// The nodes the query selects, in document order, or that it went over its budget.
    pub fn select<'a>(&self, value: &'a Value) -> Result<Vec<&'a Value>, OverBudget> {
        if let Some(steps) = &self.walk {
            return Ok(walk(steps, value).into_iter().collect());
        }
        eval::select(self.query(), value, self.max_nodes)
    }

    /// Whether the cost of this path can grow much faster than the event (for `pap lint`):
    /// two descendant segments, or a descendant wildcard followed by more segments.
    pub fn may_blow_up(&self) -> bool {
        let segments = &self.query().segments;
        let descendant = |s: &Segment| matches!(s, Segment::Descendant(_));
        let wildcard_descendant = |s: &Segment| {
            matches!(s, Segment::Descendant(inner)
                if matches!(inner.as_ref(), Segment::Selector(Selector::Wildcard)))
        };
        segments.iter().filter(|s| descendant(s)).count() >= 2
            || segments
                .iter()
                .position(wildcard_descendant)
                .is_some_and(|i| i + 1 < segments.len())
    }
}

impl std::fmt::Debug for JsonPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JsonPath")
            .field("text", &self.text)
            .field("max_nodes", &self.max_nodes)
            .finish()
    }
}

/// A path as cached: its text and budget.
#[derive(serde::Serialize, serde::Deserialize)]
struct CachedPath {
    text: String,
    max_nodes: usize,
}

impl serde::Serialize for JsonPath {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        CachedPath {
            text: self.text.clone(),
            max_nodes: self.max_nodes,
        }
        .serialize(s)
    }
}

impl<'de> serde::Deserialize<'de> for JsonPath {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<JsonPath, D::Error> {
        let cached = CachedPath::deserialize(d)?;
        Ok(JsonPath {
            walk: simple_walk(&cached.text),
            text: cached.text,
            query: std::sync::OnceLock::new(),
            max_nodes: cached.max_nodes,
        })
    }
}

/// `$` followed only by `.name` (ASCII member-name shorthand) and `[N]` steps.
fn simple_walk(text: &str) -> Option<Vec<Step>> {
    let mut rest = text.strip_prefix('$')?;
    let mut steps = Vec::new();
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix('.') {
            let end = after
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(after.len());
            let name = &after[..end];
            if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
                return None;
            }
            steps.push(Step::Name(name.to_owned()));
            rest = &after[end..];
        } else if let Some(after) = rest.strip_prefix('[') {
            let end = after.find(']')?;
            let digits = &after[..end];
            let unsigned = digits.strip_prefix('-').unwrap_or(digits);
            let canonical = !unsigned.is_empty()
                && unsigned.bytes().all(|b| b.is_ascii_digit())
                && (unsigned == "0" || !unsigned.starts_with('0'))
                && digits != "-0";
            if !canonical {
                return None;
            }
            steps.push(Step::Index(digits.parse().ok()?));
            rest = &after[end + 1..];
        } else {
            return None;
        }
    }
    Some(steps)
}

fn walk<'a>(steps: &[Step], mut node: &'a Value) -> Option<&'a Value> {
    for step in steps {
        node = match (step, node) {
            (Step::Name(name), Value::Object(map)) => member(map, name)?,
            (Step::Index(i), Value::Array(items)) => {
                let i = if *i < 0 { items.len() as i64 + i } else { *i };
                items.get(usize::try_from(i).ok()?)?
            }
            _ => return None,
        };
    }
    Some(node)
}

/// An object member by name. Event objects are small, and comparing a dozen keys is cheaper
/// than hashing the name with the map's SipHash (a tenth of a stream's filter time).
fn member<'a>(map: &'a serde_json::Map<String, Value>, name: &str) -> Option<&'a Value> {
    if map.len() <= 16 {
        map.iter().find(|(k, _)| *k == name).map(|(_, v)| v)
    } else {
        map.get(name)
    }
}

/// The parser reports pest's multi-line layout (`--> 1:8`, the line, `= expected selector`);
/// turn that into one sentence with the character position.
fn explain(raw: &str) -> String {
    let expected = raw
        .lines()
        .find_map(|l| l.trim().strip_prefix("= "))
        .map(str::to_string);
    let column = raw
        .find("--> ")
        .map(|i| &raw[i + 4..])
        .and_then(|pos| pos.split_whitespace().next())
        .and_then(|pos| pos.split(':').nth(1))
        .map(str::to_string);
    match (expected, column) {
        (Some(what), Some(col)) => format!("{what} at character {col}"),
        (Some(what), None) => what,
        _ => raw
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect::<Vec<_>>()
            .join(" "),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn selects_fields_and_reports_bad_syntax() {
        let p = JsonPath::parse("$.data.region").unwrap();
        let event = json!({"data": {"region": "NO1"}});
        assert_eq!(p.select(&event).unwrap(), vec![&json!("NO1")]);
        assert!(p.select(&json!({})).unwrap().is_empty());
        assert_eq!(
            JsonPath::parse("$.data[").unwrap_err().to_string(),
            "expected selector at character 8"
        );
        assert!(JsonPath::parse("data.region").is_err());
        assert!(JsonPath::parse(" $.a").is_err());
    }

    #[test]
    fn plain_walks_select_what_the_general_evaluator_selects() {
        let doc = json!({"data": {"a_1": [10, {"b": null}], "x": {"y": 2}, "": 1},
                         "arr": [[1, 2], [3]]});
        let paths = [
            "$",
            "$.data",
            "$.data.a_1",
            "$.data.a_1[0]",
            "$.data.a_1[-1].b",
            "$.data.a_1[2]",
            "$.data.a_1[-3]",
            "$.data.x.y",
            "$.data.x.y.z",
            "$.arr[0][1]",
            "$.missing",
            "$.data.a_1.b",
            "$.arr[1][0]",
        ];
        for text in paths {
            let p = JsonPath::parse(text).unwrap();
            assert!(p.walk.is_some(), "{text} should take the fast path");
            let general = eval::select(p.query(), &doc, DEFAULT_MAX_NODES).unwrap();
            assert_eq!(p.select(&doc).unwrap(), general, "{text}");
        }
        for general_only in [
            "$.data[*]",
            "$..y",
            "$['data']",
            "$.data[0:1]",
            "$[01]",
            "$.a[?@.b]",
        ] {
            let walk = simple_walk(general_only);
            assert!(walk.is_none(), "{general_only}");
        }
    }

    #[test]
    fn paths_that_can_blow_up_are_told_apart() {
        for risky in ["$..*..*", "$..a..w", "$..*.x", "$..*..*..*"] {
            assert!(JsonPath::parse(risky).unwrap().may_blow_up(), "{risky}");
        }
        for fine in ["$..*", "$..a", "$.data[*].x", "$.a..b", "$..a.b"] {
            assert!(!JsonPath::parse(fine).unwrap().may_blow_up(), "{fine}");
        }
    }

    #[test]
    fn multi_node_paths_select_every_match() {
        let p = JsonPath::parse("$.data.items[*].sku").unwrap();
        let event = json!({"data": {"items": [{"sku": "a"}, {"sku": "b"}]}});
        assert_eq!(p.select(&event).unwrap().len(), 2);
    }
}
