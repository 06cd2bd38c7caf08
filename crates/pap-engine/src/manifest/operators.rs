//! The filter operators, in one list: each one's name, what its `value` is, what it means
//! (the reference's table says the same, and `tests/docs.rs` holds it to this list), and when
//! it holds. Everything else is derived from [`ALL`]: the manifests' JSON Schema (`pap schema
//! trigger`, the shipped `schemas/`), `pap lint`'s "unknown operator" help, the compiled
//! condition, the filter stage and `--explain`. An operator whose value is of a kind already
//! here is one entry in [`ALL`] and its row in the reference.
//!
//! Over a path that selects several nodes an operator holds when any node satisfies it (a
//! negation: when none does); a path that selects nothing leaves an empty list, where only the
//! negations (and `exists: false`) hold.

use serde_json::Value;

use super::regex_test::RegexTest;
use crate::jsonpath::json_eq;

/// One operator.
#[derive(Debug)]
pub struct Operator {
    pub name: &'static str,
    /// What its `value` is.
    pub takes: Takes,
    /// When it holds, in the reference's words.
    pub meaning: &'static str,
    /// Whether it holds over the values a path selected.
    holds: fn(&Arg, &[&Value]) -> bool,
}

/// The kinds of `value` an operator takes: each has its check in `pap lint` and its compiled
/// form ([`Arg`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Takes {
    /// Any JSON value (a quoted number is warned about: it never equals a number).
    Any,
    Number,
    /// A list of JSON values.
    List,
    /// An optional boolean; without `value`, `true`.
    OptionalBool,
    /// A regular expression (Rust's `regex` syntax, bounded in size).
    Pattern,
}

impl Takes {
    /// What a message says an operator of this kind needs.
    pub fn wanted(self) -> &'static str {
        match self {
            Takes::Any => "a value",
            Takes::Number => "a number",
            Takes::List => "a list",
            Takes::OptionalBool => "an optional boolean (`value: false` inverts it)",
            Takes::Pattern => "a string pattern",
        }
    }
}

/// A condition's value in the form its operator uses.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub enum Arg {
    Value(Value),
    Number(f64),
    List(Vec<Value>),
    Flag(bool),
    Regex(RegexTest),
}

impl Arg {
    /// As written in the manifest, for messages (`--explain`, a filtered decision's reason).
    pub fn shown(&self) -> String {
        match self {
            Arg::Value(v) => v.to_string(),
            Arg::Number(n) => number(*n),
            Arg::List(list) => Value::Array(list.clone()).to_string(),
            Arg::Flag(b) => b.to_string(),
            Arg::Regex(re) => Value::from(re.as_str()).to_string(),
        }
    }
}

/// A number as JSON writes it.
fn number(n: f64) -> String {
    serde_json::Number::from_f64(n).map_or_else(|| n.to_string(), |n| n.to_string())
}

/// Every filter operator, in the order the reference lists them.
pub static ALL: &[Operator] = &[
    Operator {
        name: "eq",
        takes: Takes::Any,
        meaning: "JSON equality, numbers by value (`3` equals `3.0`), no string↔number coercion",
        holds: |a, saw| any(saw, |v| matches!(a, Arg::Value(w) if json_eq(v, w))),
    },
    Operator {
        name: "ne",
        takes: Takes::Any,
        meaning: "the negation of `eq`",
        holds: |a, saw| !any(saw, |v| matches!(a, Arg::Value(w) if json_eq(v, w))),
    },
    Operator {
        name: "lt",
        takes: Takes::Number,
        meaning: "the field is a number below the value",
        holds: |a, saw| compare(a, saw, |x, n| x < n),
    },
    Operator {
        name: "lte",
        takes: Takes::Number,
        meaning: "the field is a number at most the value",
        holds: |a, saw| compare(a, saw, |x, n| x <= n),
    },
    Operator {
        name: "gt",
        takes: Takes::Number,
        meaning: "the field is a number above the value",
        holds: |a, saw| compare(a, saw, |x, n| x > n),
    },
    Operator {
        name: "gte",
        takes: Takes::Number,
        meaning: "the field is a number at least the value",
        holds: |a, saw| compare(a, saw, |x, n| x >= n),
    },
    Operator {
        name: "in",
        takes: Takes::List,
        meaning: "the field equals a member",
        holds: |a, saw| any(saw, |v| member(a, v)),
    },
    Operator {
        name: "not_in",
        takes: Takes::List,
        meaning: "the negation of `in`",
        holds: |a, saw| !any(saw, |v| member(a, v)),
    },
    Operator {
        name: "contains",
        takes: Takes::Any,
        meaning: "a string field contains the string, or an array field has an equal element",
        holds: |a, saw| any(saw, |v| matches!(a, Arg::Value(w) if contains(v, w))),
    },
    Operator {
        name: "exists",
        takes: Takes::OptionalBool,
        meaning: "present and not null (`value: false` inverts it)",
        holds: |a, saw| matches!(a, Arg::Flag(present) if any(saw, |v| !v.is_null()) == *present),
    },
    Operator {
        name: "regex",
        takes: Takes::Pattern,
        meaning: "the field is a string and the pattern matches somewhere in it (anchor with `^…$`)",
        holds: |a, saw| {
            any(
                saw,
                |v| matches!((a, v.as_str()), (Arg::Regex(re), Some(s)) if re.is_match(s)),
            )
        },
    },
];

impl Operator {
    /// Whether it holds over what its path selected.
    pub fn holds(&self, arg: &Arg, saw: &[&Value]) -> bool {
        (self.holds)(arg, saw)
    }
}

/// The operator called `name`.
pub fn named(name: &str) -> Option<&'static Operator> {
    ALL.iter().find(|o| o.name == name)
}

/// Every operator's name, in order.
pub fn names() -> impl Iterator<Item = &'static str> {
    ALL.iter().map(|o| o.name)
}

fn any(saw: &[&Value], f: impl Fn(&Value) -> bool) -> bool {
    saw.iter().any(|v| f(v))
}

fn compare(a: &Arg, saw: &[&Value], f: fn(f64, f64) -> bool) -> bool {
    let Arg::Number(n) = a else { return false };
    any(saw, |v| v.as_f64().is_some_and(|x| f(x, *n)))
}

fn member(a: &Arg, v: &Value) -> bool {
    matches!(a, Arg::List(list) if list.iter().any(|w| json_eq(v, w)))
}

fn contains(field: &Value, want: &Value) -> bool {
    match (field, want) {
        (Value::String(s), Value::String(w)) => s.contains(w.as_str()),
        (Value::Array(items), w) => items.iter().any(|item| json_eq(item, w)),
        _ => false,
    }
}

/// A compiled operator is stored by its name (the project cache is JSON).
pub(crate) mod by_name {
    use super::{Operator, named};

    pub(crate) fn serialize<S: serde::Serializer>(op: &&Operator, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(op.name)
    }

    pub(crate) fn deserialize<'de, D: serde::Deserializer<'de>>(
        d: D,
    ) -> Result<&'static Operator, D::Error> {
        let name = <String as serde::Deserialize>::deserialize(d)?;
        named(&name).ok_or_else(|| serde::de::Error::custom(format!("no operator `{name}`")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn names_are_unique_and_each_kind_has_its_argument() {
        let mut seen = std::collections::BTreeSet::new();
        for op in ALL {
            assert!(seen.insert(op.name), "{} twice", op.name);
            assert!(op.name.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'));
        }
        let saw = [&json!(3)];
        assert!(named("gte").unwrap().holds(&Arg::Number(3.0), &saw));
        assert!(!named("lt").unwrap().holds(&Arg::Number(3.0), &saw));
        assert!(named("ne").unwrap().holds(&Arg::Value(json!("x")), &[]));
        assert!(named("exists").unwrap().holds(&Arg::Flag(false), &[]));
        assert!(!named("exists").unwrap().holds(&Arg::Flag(true), &[]));
    }
}
