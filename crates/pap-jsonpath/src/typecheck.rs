//! The well-typedness rules of RFC 9535 section 2.4.3 that jsonpath-rust's parser does not
//! enforce: a function of value type (`length`, `count`, `value`) is not a test on its own
//! (its result must be compared), and `length()` takes a value, so a query argument must be
//! singular.

use jsonpath_rust::parser::model::{
    Comparable, Filter, FilterAtom, FnArg, JpQuery, Segment, Selector, Test, TestFunction,
};

/// Why the query is not well-typed, if it is not.
pub(super) fn check(query: &JpQuery) -> Result<(), String> {
    query.segments.iter().try_for_each(segment)
}

fn segment(s: &Segment) -> Result<(), String> {
    match s {
        Segment::Descendant(inner) => segment(inner),
        Segment::Selector(sel) => selector(sel),
        Segment::Selectors(list) => list.iter().try_for_each(selector),
    }
}

fn selector(s: &Selector) -> Result<(), String> {
    match s {
        Selector::Filter(f) => filter(f),
        _ => Ok(()),
    }
}

fn filter(f: &Filter) -> Result<(), String> {
    match f {
        Filter::Or(list) | Filter::And(list) => list.iter().try_for_each(filter),
        Filter::Atom(FilterAtom::Filter { expr, .. }) => filter(expr),
        Filter::Atom(FilterAtom::Test { expr, .. }) => match expr.as_ref() {
            Test::Function(func) if is_value_typed(func) => Err(format!(
                "the result of `{}` must be compared (it is a value, not a test)",
                name(func)
            )),
            other => test(other),
        },
        Filter::Atom(FilterAtom::Comparison(cmp)) => {
            let (l, r) = cmp.vals();
            comparable(l)?;
            comparable(r)
        }
    }
}

fn comparable(c: &Comparable) -> Result<(), String> {
    match c {
        Comparable::Function(f) => function(f),
        _ => Ok(()),
    }
}

fn test(t: &Test) -> Result<(), String> {
    match t {
        Test::RelQuery(segments) => segments.iter().try_for_each(segment),
        Test::AbsQuery(q) => check(q),
        Test::Function(f) => function(f),
    }
}

fn function(f: &TestFunction) -> Result<(), String> {
    match f {
        TestFunction::Length(arg) => {
            if let FnArg::Test(t) = arg.as_ref()
                && !is_singular(t)
            {
                return Err("`length` takes a value: its query argument must be singular".into());
            }
            fn_arg(arg)
        }
        TestFunction::Value(arg) | TestFunction::Count(arg) => fn_arg(arg),
        TestFunction::Search(a, b) | TestFunction::Match(a, b) => {
            fn_arg(a)?;
            fn_arg(b)
        }
        TestFunction::Custom(_, args) => args.iter().try_for_each(fn_arg),
    }
}

fn fn_arg(a: &FnArg) -> Result<(), String> {
    match a {
        FnArg::Literal(_) => Ok(()),
        FnArg::Test(t) => test(t),
        FnArg::Filter(f) => filter(f),
    }
}

fn is_value_typed(f: &TestFunction) -> bool {
    matches!(
        f,
        TestFunction::Length(_) | TestFunction::Count(_) | TestFunction::Value(_)
    )
}

fn name(f: &TestFunction) -> &str {
    match f {
        TestFunction::Length(_) => "length()",
        TestFunction::Count(_) => "count()",
        TestFunction::Value(_) => "value()",
        TestFunction::Search(..) => "search()",
        TestFunction::Match(..) => "match()",
        TestFunction::Custom(name, _) => name,
    }
}

/// A query of names and indexes only, one per segment: it selects at most one node.
fn is_singular(t: &Test) -> bool {
    let segments = match t {
        Test::RelQuery(s) => s.as_slice(),
        Test::AbsQuery(q) => q.segments.as_slice(),
        Test::Function(_) => return true,
    };
    segments
        .iter()
        .all(|s| matches!(s, Segment::Selector(Selector::Name(_) | Selector::Index(_))))
}
