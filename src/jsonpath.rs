//! RFC 9535 JSONPath, parsed once at load and evaluated per event (jsonpath-rust).
//!
//! Most trigger paths are plain walks (`$.data.region`, `$.data.items[0].sku`). Those are
//! also compiled to a list of steps and evaluated directly, which is several times faster
//! than the general evaluator and selects exactly the same node (a test compares the two).

use jsonpath_rust::parser::model::JpQuery;
use jsonpath_rust::parser::parse_json_path;
use jsonpath_rust::query::js_path_process;
use serde_json::Value;

/// A parsed JSONPath query together with its source text.
#[derive(Debug, Clone)]
pub struct JsonPath {
    text: String,
    query: JpQuery,
    /// The steps of a singular query made only of names and indexes, if it is one.
    walk: Option<Vec<Step>>,
}

#[derive(Debug, Clone, PartialEq)]
enum Step {
    Name(String),
    Index(i64),
}

impl JsonPath {
    /// Parses a query; the error is the parser's own explanation.
    pub fn parse(text: &str) -> Result<JsonPath, String> {
        // The RFC forbids leading and trailing whitespace; the parser tolerates some of it.
        if text.trim() != text {
            return Err("leading or trailing whitespace is not allowed".to_string());
        }
        parse_json_path(text)
            .map(|query| JsonPath {
                text: text.to_string(),
                query,
                walk: simple_walk(text),
            })
            .map_err(|e| explain(&e.to_string()))
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The nodes the query selects, in document order. Evaluation errors select nothing.
    pub fn select<'a>(&self, value: &'a Value) -> Vec<&'a Value> {
        if let Some(steps) = &self.walk {
            return walk(steps, value).into_iter().collect();
        }
        js_path_process(&self.query, value)
            .map(|refs| refs.into_iter().map(|r| r.val).collect())
            .unwrap_or_default()
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
        assert_eq!(p.select(&event), vec![&json!("NO1")]);
        assert!(p.select(&json!({})).is_empty());
        assert_eq!(
            JsonPath::parse("$.data[").unwrap_err(),
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
            let general: Vec<&Value> = js_path_process(&p.query, &doc)
                .map(|refs| refs.into_iter().map(|r| r.val).collect())
                .unwrap_or_default();
            assert_eq!(p.select(&doc), general, "{text}");
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
    fn multi_node_paths_select_every_match() {
        let p = JsonPath::parse("$.data.items[*].sku").unwrap();
        let event = json!({"data": {"items": [{"sku": "a"}, {"sku": "b"}]}});
        assert_eq!(p.select(&event).len(), 2);
    }
}
