//! Filter stage: every condition must hold (contract section 3).
//!
//! A path that selects nothing is *missing*: every operator is then false except the
//! negations `ne` and `not_in`, and `exists` with `value: false`. Over a path selecting
//! several nodes a condition holds when any node satisfies it (`ne`/`not_in` negate that).

use serde_json::Value;

use super::{Outcome, Verdict};
use crate::jsonpath::OverBudget;
use crate::manifest::compiled::{Condition, Trigger};

/// One condition checked against one event, with what its path saw (for `--explain`).
#[derive(Debug, Clone, PartialEq)]
pub struct Checked<'e> {
    pub holds: bool,
    pub saw: Vec<&'e Value>,
    /// The path went over its budget: the condition does not hold, whatever the operator.
    pub over_budget: Option<OverBudget>,
}

pub fn check(trigger: &Trigger, event: &Value) -> Verdict {
    for cond in &trigger.filter {
        let checked = evaluate(cond, event);
        if !checked.holds {
            return Verdict::Stop(Outcome::Filtered, describe_failure(cond, &checked).into());
        }
    }
    Verdict::Continue
}

pub(crate) fn evaluate<'e>(cond: &Condition, event: &'e Value) -> Checked<'e> {
    let saw = match cond.path.select(event) {
        Ok(saw) => saw,
        Err(over) => {
            return Checked {
                holds: false,
                saw: Vec::new(),
                over_budget: Some(over),
            };
        }
    };
    let holds = cond.test.op.holds(&cond.test.arg, &saw);
    Checked {
        holds,
        saw,
        over_budget: None,
    }
}

/// The condition as written: `$.data.region eq "NO1"` (`exists` without a value: bare).
pub fn describe(cond: &Condition) -> String {
    let op = cond.test.op.name;
    match &cond.test.arg {
        crate::manifest::operators::Arg::Flag(true) => format!("{} {op}", cond.path.as_str()),
        arg => format!("{} {op} {}", cond.path.as_str(), arg.shown()),
    }
}

/// What a path saw, for messages: `missing`, one value, or a list, cut at 120 characters.
/// Only what is shown is ever written out: a path that selected a whole large event costs
/// no more than a small one here.
pub fn describe_saw(saw: &[&Value]) -> String {
    const MAX: usize = 120;
    let mut out = Limited::new(MAX * 4);
    let _ = match saw {
        [] => return "missing".into(),
        [one] => serde_json::to_writer(&mut out, one),
        many => serde_json::to_writer(&mut out, many),
    };
    let text = String::from_utf8_lossy(&out.bytes);
    if out.full || text.chars().count() > MAX {
        format!("{}…", text.chars().take(MAX).collect::<String>())
    } else {
        text.into_owned()
    }
}

/// The values a path saw, for `--explain`: as many as fit in `max_bytes` of JSON text, and
/// whether some were left out.
pub(crate) fn saw_within(saw: &[&Value], max_bytes: usize) -> (Vec<Value>, bool) {
    let mut left = max_bytes;
    let mut kept = Vec::new();
    for v in saw {
        let mut out = Limited::new(left);
        if serde_json::to_writer(&mut out, v).is_err() || out.full {
            return (kept, true);
        }
        left -= out.bytes.len();
        kept.push((*v).clone());
    }
    (kept, false)
}

/// A writer that takes at most `max` bytes, then fails (so serialising stops there).
struct Limited {
    bytes: Vec<u8>,
    max: usize,
    full: bool,
}

impl Limited {
    fn new(max: usize) -> Limited {
        Limited {
            bytes: Vec::new(),
            max,
            full: false,
        }
    }
}

impl std::io::Write for Limited {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let room = self.max - self.bytes.len();
        if buf.len() > room {
            self.bytes.extend_from_slice(&buf[..room]);
            self.full = true;
            return Err(std::io::Error::other("limit reached"));
        }
        self.bytes.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn describe_failure(cond: &Condition, checked: &Checked) -> String {
    if let Some(over) = checked.over_budget {
        return format!(
            "{} does not hold: its path visited more than {} nodes of this event (jsonpath.max_nodes) and was stopped",
            describe(cond),
            over.max_nodes
        );
    }
    format!(
        "{} does not hold (saw {})",
        describe(cond),
        describe_saw(&checked.saw)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jsonpath::JsonPath;
    use crate::manifest::compiled::Test;
    use crate::manifest::operators::Arg;
    use serde_json::json;

    fn t(name: &str, arg: Arg) -> Test {
        Test {
            op: crate::manifest::operators::named(name).unwrap(),
            arg,
        }
    }

    fn cond(path: &str, test: Test) -> Condition {
        Condition {
            path: JsonPath::parse(path).unwrap(),
            test,
        }
    }

    fn holds(path: &str, test: Test, event: Value) -> bool {
        evaluate(&cond(path, test), &event).holds
    }

    #[test]
    fn missing_field_is_false_except_for_negations() {
        let e = json!({"data": {}});
        let p = "$.data.x";
        assert!(!holds(p, t("eq", Arg::Value(json!(1))), e.clone()));
        assert!(holds(p, t("ne", Arg::Value(json!(1))), e.clone()));
        assert!(!holds(p, t("lt", Arg::Number(1.0)), e.clone()));
        assert!(!holds(p, t("gte", Arg::Number(1.0)), e.clone()));
        assert!(!holds(p, t("in", Arg::List(vec![json!(1)])), e.clone()));
        assert!(holds(p, t("not_in", Arg::List(vec![json!(1)])), e.clone()));
        assert!(!holds(p, t("contains", Arg::Value(json!("a"))), e.clone()));
        assert!(!holds(p, t("exists", Arg::Flag(true)), e.clone()));
        assert!(holds(p, t("exists", Arg::Flag(false)), e.clone()));
        let re = crate::manifest::regex_test::RegexTest::new(".*").unwrap();
        assert!(!holds(p, t("regex", Arg::Regex(re)), e));
    }

    #[test]
    fn numbers_compare_by_value_without_coercion() {
        assert!(holds(
            "$.x",
            t("eq", Arg::Value(json!(3))),
            json!({"x": 3.0})
        ));
        assert!(holds(
            "$.x",
            t("in", Arg::List(vec![json!(3.0)])),
            json!({"x": 3})
        ));
        assert!(!holds(
            "$.x",
            t("eq", Arg::Value(json!("3"))),
            json!({"x": 3})
        ));
        assert!(!holds("$.x", t("gt", Arg::Number(1.0)), json!({"x": "5"})));
        assert!(holds(
            "$.x",
            t("eq", Arg::Value(json!({"a": [1]}))),
            json!({"x": {"a": [1.0]}})
        ));
        assert!(holds(
            "$.x",
            t("eq", Arg::Value(json!(u64::MAX))),
            json!({"x": u64::MAX})
        ));
        assert!(!holds(
            "$.x",
            t("eq", Arg::Value(json!(u64::MAX))),
            json!({"x": u64::MAX - 1})
        ));
    }

    #[test]
    fn comparisons_need_numbers() {
        let e = json!({"x": 4.82});
        assert!(holds("$.x", t("gt", Arg::Number(3.0)), e.clone()));
        assert!(holds("$.x", t("lte", Arg::Number(4.82)), e.clone()));
        assert!(!holds("$.x", t("lt", Arg::Number(4.82)), e));
        assert!(!holds(
            "$.x",
            t("lt", Arg::Number(10.0)),
            json!({"x": null})
        ));
        assert!(!holds(
            "$.x",
            t("lt", Arg::Number(10.0)),
            json!({"x": true})
        ));
    }

    #[test]
    fn contains_strings_and_arrays() {
        let e = json!({"s": "disk full on db-1", "a": ["x", 2]});
        assert!(holds(
            "$.s",
            t("contains", Arg::Value(json!("db-1"))),
            e.clone()
        ));
        assert!(!holds(
            "$.s",
            t("contains", Arg::Value(json!("db-2"))),
            e.clone()
        ));
        assert!(holds(
            "$.a",
            t("contains", Arg::Value(json!(2.0))),
            e.clone()
        ));
        assert!(!holds("$.a", t("contains", Arg::Value(json!("2"))), e));
    }

    #[test]
    fn exists_means_present_and_not_null() {
        assert!(!holds(
            "$.x",
            t("exists", Arg::Flag(true)),
            json!({"x": null})
        ));
        assert!(holds(
            "$.x",
            t("exists", Arg::Flag(false)),
            json!({"x": null})
        ));
        assert!(holds(
            "$.x",
            t("exists", Arg::Flag(true)),
            json!({"x": false})
        ));
    }

    #[test]
    fn regex_is_unanchored_and_needs_a_string() {
        let re = |p: &str| {
            t(
                "regex",
                Arg::Regex(crate::manifest::regex_test::RegexTest::new(p).unwrap()),
            )
        };
        assert!(holds("$.s", re("full"), json!({"s": "disk full"})));
        assert!(!holds("$.s", re("^full$"), json!({"s": "disk full"})));
        assert!(!holds("$.s", re("1"), json!({"s": 1})));
    }

    #[test]
    fn multi_node_paths_are_any_of_and_negations_cover_the_selection() {
        let e = json!({"items": [{"p": 1}, {"p": 5}]});
        assert!(holds("$.items[*].p", t("gt", Arg::Number(4.0)), e.clone()));
        assert!(holds(
            "$.items[*].p",
            t("eq", Arg::Value(json!(1))),
            e.clone()
        ));
        assert!(!holds(
            "$.items[*].p",
            t("ne", Arg::Value(json!(1))),
            e.clone()
        ));
        assert!(holds(
            "$.items[*].p",
            t("ne", Arg::Value(json!(2))),
            e.clone()
        ));
        assert!(!holds(
            "$.items[*].p",
            t("not_in", Arg::List(vec![json!(5)])),
            e
        ));
    }

    #[test]
    fn failure_reason_names_the_condition_and_the_value() {
        let c = cond("$.data.region", t("eq", Arg::Value(json!("NO1"))));
        let e = json!({"data": {"region": "NO2"}});
        assert_eq!(
            describe_failure(&c, &evaluate(&c, &e)),
            r#"$.data.region eq "NO1" does not hold (saw "NO2")"#
        );
        let c = cond("$.data.p", t("gt", Arg::Number(3.0)));
        assert_eq!(
            describe_failure(&c, &evaluate(&c, &e)),
            "$.data.p gt 3.0 does not hold (saw missing)"
        );
    }
}
