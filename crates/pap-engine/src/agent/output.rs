//! An agent's output: JSON checked against `output.schema` when the manifest says
//! `type: structured`, else the text as printed.

use serde_json::{Map, Value};

use crate::event::json_kind;
use crate::manifest::compiled::{OutputSpec, SchemaType};

/// Why an agent's output is refused (its attempt then fails, and may be retried).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum OutputError {
    #[error("printed nothing; structured output must be one JSON value")]
    Empty,
    #[error("output is not valid JSON: {0}")]
    NotJson(String),
    #[error("output must be a JSON object, found {0}")]
    NotAnObject(&'static str),
    /// Each field that is missing or of the wrong type.
    #[error("output does not match output.schema: {}", .0.join("; "))]
    Schema(Vec<String>),
}

pub fn parse(spec: &OutputSpec, stdout: &[u8]) -> Result<Value, OutputError> {
    let text = String::from_utf8_lossy(stdout);
    if !spec.structured {
        return Ok(Value::String(
            text.trim_end_matches(['\n', '\r']).to_owned(),
        ));
    }
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Err(OutputError::Empty);
    }
    let value: Value =
        serde_json::from_str(trimmed).map_err(|e| OutputError::NotJson(e.to_string()))?;
    if let Some(schema) = &spec.schema {
        let Value::Object(map) = &value else {
            return Err(OutputError::NotAnObject(json_kind(&value)));
        };
        check_fields(schema, map)?;
    }
    Ok(value)
}

/// A model's final answer: like [`parse`], but a JSON answer may come inside a fenced
/// block (models often wrap it in ```json … ```), which is taken out first.
pub(crate) fn parse_answer(spec: &OutputSpec, text: &str) -> Result<Value, OutputError> {
    if !spec.structured {
        return Ok(Value::String(text.trim().to_owned()));
    }
    parse(spec, fenced(text).unwrap_or(text).as_bytes())
}

/// The inside of the first ``` fence, without its language tag.
fn fenced(text: &str) -> Option<&str> {
    let start = text.find("```")?;
    let after = &text[start + 3..];
    let body_start = after.find('\n')? + 1;
    let body = &after[body_start..];
    let end = body.find("```")?;
    Some(&body[..end])
}

fn check_fields(
    schema: &std::collections::BTreeMap<String, SchemaType>,
    map: &Map<String, Value>,
) -> Result<(), OutputError> {
    let mut problems = Vec::new();
    for (field, want) in schema {
        match map.get(field) {
            None => problems.push(format!("`{field}` is missing")),
            Some(v) if !fits(*want, v) => problems.push(format!(
                "`{field}` must be {} {}, found {}",
                article(*want),
                want.as_str(),
                json_kind(v)
            )),
            Some(_) => {}
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(OutputError::Schema(problems))
    }
}

fn fits(want: SchemaType, v: &Value) -> bool {
    match want {
        SchemaType::String => v.is_string(),
        SchemaType::Number => v.is_number(),
        SchemaType::Integer => {
            v.is_i64() || v.is_u64() || v.as_f64().is_some_and(|f| f.fract() == 0.0)
        }
        SchemaType::Boolean => v.is_boolean(),
        SchemaType::Array => v.is_array(),
        SchemaType::Object => v.is_object(),
    }
}

fn article(t: SchemaType) -> &'static str {
    match t {
        SchemaType::Integer | SchemaType::Array | SchemaType::Object => "an",
        _ => "a",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_fenced_answer_is_taken_out_of_its_fence() {
        let spec = OutputSpec {
            structured: true,
            schema: None,
        };
        let text = "Here you go:\n```json\n{\"a\": 1}\n```\nDone.";
        assert_eq!(parse_answer(&spec, text).unwrap(), json!({"a": 1}));
        assert_eq!(
            parse_answer(&spec, " {\"b\": 2} ").unwrap(),
            json!({"b": 2})
        );
        assert!(parse_answer(&spec, "no json here").is_err());
        let text_spec = OutputSpec::default();
        assert_eq!(parse_answer(&text_spec, " hi \n").unwrap(), json!("hi"));
    }

    fn spec(fields: &[(&str, SchemaType)]) -> OutputSpec {
        OutputSpec {
            structured: true,
            schema: Some(fields.iter().map(|(k, t)| (k.to_string(), *t)).collect()),
        }
    }

    #[test]
    fn structured_output_is_checked_field_by_field() {
        let s = spec(&[("plan", SchemaType::Array), ("n", SchemaType::Integer)]);
        assert_eq!(
            parse(&s, b" {\"plan\":[],\"n\":2.0,\"extra\":1}\n").unwrap()["n"],
            json!(2.0)
        );
        let err = parse(&s, br#"{"plan":{},"x":1}"#).unwrap_err();
        assert_eq!(
            err.to_string(),
            "output does not match output.schema: `n` is missing; `plan` must be an array, found an object"
        );
        assert_eq!(
            parse(&s, b"[1]").unwrap_err(),
            OutputError::NotAnObject("an array")
        );
        assert!(matches!(
            parse(&s, b"plan: 1").unwrap_err(),
            OutputError::NotJson(_)
        ));
        assert_eq!(parse(&s, b"\n").unwrap_err(), OutputError::Empty);
    }

    #[test]
    fn text_output_is_kept_as_printed() {
        let text = OutputSpec::default();
        assert_eq!(parse(&text, b"hello\n").unwrap(), json!("hello"));
    }
}
