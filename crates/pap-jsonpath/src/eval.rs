//! RFC 9535 evaluation over jsonpath-rust's parsed query, with a budget.
//!
//! jsonpath-rust parses well (its grammar follows the RFC closely), but its evaluator builds a
//! normalized path string for every node it touches and has no way to stop: one hostile event
//! under the size limit made `$..*..*..*` cost minutes and gigabytes. This evaluator walks
//! the same syntax tree over borrowed nodes, builds no paths, and counts every node it visits
//! (including those a filter's sub-queries visit); past the budget it stops and says so. It
//! also selects in the RFC's order where jsonpath-rust does not (a descendant segment with
//! several selectors applies all of them at each node, in document order) and evaluates
//! nested filters.

use std::cmp::Ordering;
use std::collections::HashMap;

use jsonpath_rust::parser::model::{
    Comparable, Comparison, Filter, FilterAtom, FnArg, JpQuery, Literal, Segment, Selector,
    SingularQuery, SingularQuerySegment, Test, TestFunction,
};
use regex::Regex;
use serde_json::{Number, Value};

/// The evaluation visited more nodes than its budget allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OverBudget {
    pub max_nodes: usize,
}

type Nodes<'a> = Vec<&'a Value>;
type Eval<T> = Result<T, OverBudget>;

/// Evaluates `query` against `root`, visiting at most `max_nodes` nodes.
pub(super) fn select<'a>(query: &JpQuery, root: &'a Value, max_nodes: usize) -> Eval<Nodes<'a>> {
    let mut ev = Evaluator {
        root,
        left: max_nodes,
        max_nodes,
        regexes: HashMap::new(),
    };
    ev.segments(&query.segments, vec![root])
}

struct Evaluator<'a> {
    root: &'a Value,
    left: usize,
    max_nodes: usize,
    /// Patterns of `match()`/`search()` compiled once per evaluation (`None`: not valid).
    regexes: HashMap<(String, bool), Option<Regex>>,
}

/// A function's or a singular query's result: a JSON value, or nothing (RFC 9535 2.4.1).
#[derive(Debug, Clone, PartialEq)]
enum Val<'a> {
    Ref(&'a Value),
    Owned(Value),
    Nothing,
}

impl<'a> Val<'a> {
    fn get(&self) -> Option<&Value> {
        match self {
            Val::Ref(v) => Some(v),
            Val::Owned(v) => Some(v),
            Val::Nothing => None,
        }
    }
}

impl<'a> Evaluator<'a> {
    fn visit(&mut self, n: usize) -> Eval<()> {
        match self.left.checked_sub(n) {
            Some(left) => {
                self.left = left;
                Ok(())
            }
            None => {
                self.left = 0;
                Err(OverBudget {
                    max_nodes: self.max_nodes,
                })
            }
        }
    }

    fn segments(&mut self, segments: &[Segment], mut nodes: Nodes<'a>) -> Eval<Nodes<'a>> {
        for segment in segments {
            let mut next = Vec::new();
            for node in nodes {
                self.segment(segment, node, &mut next)?;
            }
            nodes = next;
        }
        Ok(nodes)
    }

    fn segment(&mut self, segment: &Segment, node: &'a Value, out: &mut Nodes<'a>) -> Eval<()> {
        match segment {
            Segment::Selector(s) => self.selector(s, node, out),
            Segment::Selectors(list) => {
                for s in list {
                    self.selector(s, node, out)?;
                }
                Ok(())
            }
            // The inner segment applied to the node and to each descendant, in document order.
            Segment::Descendant(inner) => {
                self.visit(1)?;
                self.segment(inner, node, out)?;
                for child in children(node) {
                    self.segment(segment, child, out)?;
                }
                Ok(())
            }
        }
    }

    fn selector(&mut self, selector: &Selector, node: &'a Value, out: &mut Nodes<'a>) -> Eval<()> {
        let start = out.len();
        match (selector, node) {
            (Selector::Name(name), Value::Object(map)) => out.extend(map.get(name)),
            (Selector::Wildcard, _) => out.extend(children(node)),
            (Selector::Index(i), Value::Array(items)) => {
                out.extend(index(items.len(), *i).and_then(|i| items.get(i)))
            }
            (Selector::Slice(start, end, step), Value::Array(items)) => {
                for i in slice(items.len(), *start, *end, *step) {
                    self.visit(1)?;
                    out.push(&items[i]);
                }
            }
            (Selector::Filter(filter), Value::Array(_) | Value::Object(_)) => {
                for child in children(node) {
                    self.visit(1)?;
                    if self.logical(filter, child)? {
                        out.push(child);
                    }
                }
            }
            _ => {}
        }
        self.visit(out.len() - start)
    }

    fn logical(&mut self, filter: &Filter, current: &'a Value) -> Eval<bool> {
        match filter {
            Filter::Or(list) => {
                for f in list {
                    if self.logical(f, current)? {
                        return Ok(true);
                    }
                }
                Ok(false)
            }
            Filter::And(list) => {
                for f in list {
                    if !self.logical(f, current)? {
                        return Ok(false);
                    }
                }
                Ok(true)
            }
            Filter::Atom(FilterAtom::Filter { expr, not }) => {
                Ok(self.logical(expr, current)? != *not)
            }
            Filter::Atom(FilterAtom::Test { expr, not }) => Ok(self.test(expr, current)? != *not),
            Filter::Atom(FilterAtom::Comparison(cmp)) => self.comparison(cmp, current),
        }
    }

    /// An existence test, or a function of logical type.
    fn test(&mut self, test: &Test, current: &'a Value) -> Eval<bool> {
        match test {
            Test::RelQuery(segments) => Ok(!self.segments(segments, vec![current])?.is_empty()),
            Test::AbsQuery(query) => {
                Ok(!self.segments(&query.segments, vec![self.root])?.is_empty())
            }
            Test::Function(f) => match f.as_ref() {
                TestFunction::Match(s, re) => self.regex(s, re, current, false),
                TestFunction::Search(s, re) => self.regex(s, re, current, true),
                // Value-typed functions are not tests (the parser lets them through): as a
                // test, a value counts when there is one.
                other => Ok(self.function(other, current)? != Val::Nothing),
            },
        }
    }

    fn comparison(&mut self, cmp: &Comparison, current: &'a Value) -> Eval<bool> {
        let (l, r) = cmp.vals();
        let (l, r) = (self.comparable(l, current)?, self.comparable(r, current)?);
        let (l, r) = (l.get(), r.get());
        Ok(match cmp {
            Comparison::Eq(..) => equal(l, r),
            Comparison::Ne(..) => !equal(l, r),
            Comparison::Lt(..) => less(l, r),
            Comparison::Lte(..) => less(l, r) || equal(l, r),
            Comparison::Gt(..) => less(r, l),
            Comparison::Gte(..) => less(r, l) || equal(l, r),
        })
    }

    fn comparable(&mut self, c: &Comparable, current: &'a Value) -> Eval<Val<'a>> {
        match c {
            Comparable::Literal(lit) => Ok(Val::Owned(literal(lit))),
            Comparable::SingularQuery(q) => Ok(self.singular(q, current)),
            Comparable::Function(f) => self.function(f, current),
        }
    }

    fn singular(&mut self, q: &SingularQuery, current: &'a Value) -> Val<'a> {
        let (mut node, segments) = match q {
            SingularQuery::Current(s) => (current, s),
            SingularQuery::Root(s) => (self.root, s),
        };
        for segment in segments {
            let next = match (segment, node) {
                (SingularQuerySegment::Name(name), Value::Object(map)) => map.get(name),
                (SingularQuerySegment::Index(i), Value::Array(items)) => {
                    index(items.len(), *i).and_then(|i| items.get(i))
                }
                _ => None,
            };
            match next {
                Some(n) => node = n,
                None => return Val::Nothing,
            }
        }
        Val::Ref(node)
    }

    fn function(&mut self, f: &TestFunction, current: &'a Value) -> Eval<Val<'a>> {
        Ok(match f {
            TestFunction::Length(arg) => match self.value_arg(arg, current)?.get() {
                Some(Value::String(s)) => {
                    self.visit(s.len() / 64 + 1)?;
                    Val::Owned(s.chars().count().into())
                }
                Some(Value::Array(a)) => Val::Owned(a.len().into()),
                Some(Value::Object(o)) => Val::Owned(o.len().into()),
                _ => Val::Nothing,
            },
            TestFunction::Count(arg) => Val::Owned(self.nodes_arg(arg, current)?.len().into()),
            TestFunction::Value(arg) => match self.nodes_arg(arg, current)?.as_slice() {
                [one] => Val::Ref(one),
                _ => Val::Nothing,
            },
            TestFunction::Match(..) | TestFunction::Search(..) | TestFunction::Custom(..) => {
                Val::Nothing
            }
        })
    }

    /// A function argument of value type: a literal, a singular query's node, or a function.
    fn value_arg(&mut self, arg: &FnArg, current: &'a Value) -> Eval<Val<'a>> {
        match arg {
            FnArg::Literal(lit) => Ok(Val::Owned(literal(lit))),
            FnArg::Test(test) => match test.as_ref() {
                Test::Function(f) => self.function(f, current),
                _ => Ok(match self.query_arg(test, current)?.as_slice() {
                    [one] => Val::Ref(one),
                    _ => Val::Nothing,
                }),
            },
            FnArg::Filter(_) => Ok(Val::Nothing),
        }
    }

    /// A function argument of nodes type: a query.
    fn nodes_arg(&mut self, arg: &FnArg, current: &'a Value) -> Eval<Nodes<'a>> {
        match arg {
            FnArg::Test(test) => self.query_arg(test, current),
            _ => Ok(Vec::new()),
        }
    }

    fn query_arg(&mut self, test: &Test, current: &'a Value) -> Eval<Nodes<'a>> {
        match test {
            Test::RelQuery(segments) => self.segments(segments, vec![current]),
            Test::AbsQuery(query) => self.segments(&query.segments, vec![self.root]),
            Test::Function(_) => Ok(Vec::new()),
        }
    }

    /// `match()` (whole string) and `search()` (a substring) with an I-Regexp (RFC 9485).
    fn regex(&mut self, s: &FnArg, re: &FnArg, current: &'a Value, search: bool) -> Eval<bool> {
        let text = self.value_arg(s, current)?;
        let pattern = self.value_arg(re, current)?;
        let (Some(Value::String(text)), Some(Value::String(pattern))) = (text.get(), pattern.get())
        else {
            return Ok(false);
        };
        // A pattern may come from the event: its compilation counts against the budget, and
        // so does the text it runs over (a match is linear in it, but not free).
        self.visit(pattern.len() / 64 + 1)?;
        self.visit(text.len() / 64 + 1)?;
        let compiled = self
            .regexes
            .entry((pattern.clone(), search))
            .or_insert_with(|| i_regexp(pattern, search));
        Ok(compiled.as_ref().is_some_and(|re| re.is_match(text)))
    }
}

/// An object's member values or an array's elements, in order; nothing for a scalar.
fn children(node: &Value) -> Box<dyn Iterator<Item = &Value> + '_> {
    match node {
        Value::Array(items) => Box::new(items.iter()),
        Value::Object(map) => Box::new(map.values()),
        _ => Box::new(std::iter::empty()),
    }
}

fn index(len: usize, i: i64) -> Option<usize> {
    let i = if i < 0 { len as i64 + i } else { i };
    usize::try_from(i).ok().filter(|i| *i < len)
}

/// The indexes an array slice selects (RFC 9535 2.3.4.2.2).
fn slice(len: usize, start: Option<i64>, end: Option<i64>, step: Option<i64>) -> Vec<usize> {
    let len = len as i64;
    let step = step.unwrap_or(1);
    let norm = |i: i64| if i >= 0 { i } else { len + i };
    let mut out = Vec::new();
    if step > 0 {
        let lower = norm(start.unwrap_or(0)).clamp(0, len);
        let upper = norm(end.unwrap_or(len)).clamp(0, len);
        let mut i = lower;
        while i < upper {
            out.push(i as usize);
            i += step;
        }
    } else if step < 0 {
        let upper = norm(start.unwrap_or(len - 1)).clamp(-1, len - 1);
        let lower = norm(end.unwrap_or(-len - 1)).clamp(-1, len - 1);
        let mut i = upper;
        while lower < i {
            out.push(i as usize);
            i += step;
        }
    }
    out
}

fn literal(lit: &Literal) -> Value {
    match lit {
        Literal::Int(i) => (*i).into(),
        Literal::Float(f) => Number::from_f64(*f).map_or(Value::Null, Value::Number),
        Literal::String(s) => Value::String(s.clone()),
        Literal::Bool(b) => Value::Bool(*b),
        Literal::Null => Value::Null,
    }
}

/// `==` of RFC 9535 2.3.5.2.2: two nothings are equal; numbers by value; deep otherwise.
fn equal(a: Option<&Value>, b: Option<&Value>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(a), Some(b)) => super::json_eq(a, b),
        _ => false,
    }
}

/// `<`: only between two numbers or two strings (by Unicode scalar values).
fn less(a: Option<&Value>, b: Option<&Value>) -> bool {
    match (a, b) {
        (Some(Value::Number(x)), Some(Value::Number(y))) => {
            compare_numbers(x, y) == Some(Ordering::Less)
        }
        (Some(Value::String(x)), Some(Value::String(y))) => x < y,
        _ => false,
    }
}

fn compare_numbers(x: &Number, y: &Number) -> Option<Ordering> {
    match (x.as_i64(), y.as_i64()) {
        (Some(x), Some(y)) => Some(x.cmp(&y)),
        _ => x.as_f64()?.partial_cmp(&y.as_f64()?),
    }
}

/// An I-Regexp in the `regex` crate's syntax: `.` outside a class does not match `\n` or
/// `\r`, and `match()` anchors the whole pattern. Compiled with a size limit, since the
/// pattern may come from an event.
fn i_regexp(pattern: &str, search: bool) -> Option<Regex> {
    let mut out = String::with_capacity(pattern.len() + 8);
    let mut chars = pattern.chars();
    let mut in_class = false;
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                out.push(c);
                out.extend(chars.next());
            }
            '[' if !in_class => {
                in_class = true;
                out.push(c);
            }
            ']' if in_class => {
                in_class = false;
                out.push(c);
            }
            '.' if !in_class => out.push_str(r"[^\n\r]"),
            _ => out.push(c),
        }
    }
    let out = if search { out } else { format!("^(?:{out})$") };
    regex::RegexBuilder::new(&out)
        .size_limit(1 << 20)
        .build()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use jsonpath_rust::parser::parse_json_path;
    use serde_json::json;

    fn run(path: &str, doc: &Value, budget: usize) -> Eval<Vec<Value>> {
        let q = parse_json_path(path).unwrap();
        select(&q, doc, budget).map(|n| n.into_iter().cloned().collect())
    }

    #[test]
    fn selects_in_document_order_with_several_selectors() {
        let doc = json!({"o": {"a": 1, "b": [{"a": 2}, 3]}});
        assert_eq!(run("$..['a','b']", &doc, 1000).unwrap().len(), 3);
        assert_eq!(run("$..a", &doc, 1000).unwrap(), vec![json!(1), json!(2)]);
        assert_eq!(
            run("$.o.b[?@.a == 2]", &doc, 1000).unwrap(),
            vec![json!({"a": 2})]
        );
        assert_eq!(run("$.o.b[::-1]", &doc, 1000).unwrap().len(), 2);
        assert_eq!(
            run("$[?count(@..*) > 2]", &json!([[1, [2, 3]], [4]]), 1000).unwrap(),
            vec![json!([1, [2, 3]])]
        );
        assert_eq!(
            run("$[?match(@, 'a.c')]", &json!(["abc", "a\nc", "xabc"]), 1000).unwrap(),
            vec![json!("abc")]
        );
    }

    #[test]
    fn stops_at_the_budget() {
        // 3 levels of 30 members: $..*..*..* visits far more than 2,000 nodes.
        let level = |inner: Value| {
            Value::Object((0..30).map(|i| (format!("k{i}"), inner.clone())).collect())
        };
        let doc = level(level(level(json!(1))));
        assert_eq!(
            run("$..*..*..*", &doc, 2000),
            Err(OverBudget { max_nodes: 2000 })
        );
        assert!(run("$.k1.k2.k3", &doc, 2000).is_ok());
    }
}
