//! RFC 9535 JSONPath, parsed once at load and evaluated per event (jsonpath-rust).

use jsonpath_rust::parser::model::JpQuery;
use jsonpath_rust::parser::parse_json_path;
use jsonpath_rust::query::js_path_process;
use serde_json::Value;

/// A parsed JSONPath query together with its source text.
#[derive(Debug, Clone)]
pub struct JsonPath {
    text: String,
    query: JpQuery,
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
            })
            .map_err(|e| explain(&e.to_string()))
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The nodes the query selects, in document order. Evaluation errors select nothing.
    pub fn select<'a>(&self, value: &'a Value) -> Vec<&'a Value> {
        js_path_process(&self.query, value)
            .map(|refs| refs.into_iter().map(|r| r.val).collect())
            .unwrap_or_default()
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
    fn multi_node_paths_select_every_match() {
        let p = JsonPath::parse("$.data.items[*].sku").unwrap();
        let event = json!({"data": {"items": [{"sku": "a"}, {"sku": "b"}]}});
        assert_eq!(p.select(&event).len(), 2);
    }
}
