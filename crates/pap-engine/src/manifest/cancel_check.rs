//! `pap lint` for a trigger's `cancel_on.match`: the key is read from the events that start
//! the work (`match.type`) and from those that end it (`cancel_on.type`). When an adapter makes
//! events of a type (a preset or an `adapters:` entry of pap.yaml), their shape is known, and a
//! key path naming a field they never have is an error: it would select nothing, and nothing
//! would ever be cancelled. For a type no adapter makes, the key cannot be checked: a warning
//! says so.

use super::compiled::Trigger;
use super::yaml_tree::{Located, Node};
use crate::adapter::{Adapter, Data, Expr};
use crate::diagnostics::Diagnostic;
use crate::event_type::TypePattern;
use crate::path;

/// The top-level fields of an event an adapter makes.
const EVENT_FIELDS: [&str; 6] = ["pap_version", "id", "type", "source", "time", "data"];

/// Checks every trigger's `cancel_on.match` against the adapters that make its two types.
pub(crate) fn check(
    triggers: &[Trigger],
    at: &[(&str, &Located<Node>)],
    adapters: &[Adapter],
    diags: &mut Vec<Diagnostic>,
) {
    for (trigger, (file, tree)) in triggers.iter().zip(at) {
        let Some(cancel) = &trigger.cancel_on else {
            continue;
        };
        let key_at = tree.locate(&path!["trigger", "cancel_on", "match"]);
        let key = cancel.key.as_str();
        for (side, pattern) in [
            ("match.type", &trigger.pattern),
            ("cancel_on.type", &cancel.pattern),
        ] {
            let makers: Vec<&Adapter> = adapters.iter().filter(|a| makes(a, pattern)).collect();
            if makers.is_empty() {
                diags.push(
                    Diagnostic::new(
                        "cancel-key-unchecked",
                        file,
                        key_at,
                        format!(
                            "`cancel_on.match` `{key}` could not be checked against `{}` events ({side}): no adapter makes them",
                            pattern.as_str()
                        ),
                    )
                    .with_help("make sure the events on both sides carry the key; `pap dispatch --explain` shows what a path selects"),
                );
                continue;
            }
            for adapter in makers {
                if let Some(why) = missing(adapter, key) {
                    diags.push(
                        Diagnostic::new(
                            "cancel-key-unknown",
                            file,
                            key_at,
                            format!(
                                "`cancel_on.match` `{key}` selects nothing in the `{}` events adapter `{}` makes ({side}): {why}",
                                pattern.as_str(),
                                adapter.name
                            ),
                        )
                        .with_help(fields_help(adapter)),
                    );
                }
            }
        }
    }
}

/// Whether `adapter` can make events of a type `pattern` matches.
fn makes(adapter: &Adapter, pattern: &TypePattern) -> bool {
    if adapter.per_group {
        return ["firing", "resolved"]
            .iter()
            .any(|s| pattern.matches(&format!("{}.group.{s}", adapter.name)));
    }
    // A `*` segment stands for a value a placeholder can take.
    let example = pattern.as_str().replace('*', "x");
    adapter.kind.0.iter().any(|e| match e {
        Expr::Template(t) => t.could_render(&example),
        // A type read from the body may be anything.
        Expr::Path(_) => true,
    })
}

/// Why `key` selects nothing in the events `adapter` makes, when its shape says so.
fn missing(adapter: &Adapter, key: &str) -> Option<String> {
    let names = leading_names(key)?;
    let first = names.first()?;
    if !EVENT_FIELDS.contains(&first.as_str()) {
        return Some(format!(
            "an event has no `{first}` (it has {})",
            EVENT_FIELDS.join(", ")
        ));
    }
    let (Some(field), true) = (names.get(1), first == "data") else {
        return None;
    };
    let known: Vec<&str> = if adapter.per_group {
        crate::adapter::group::data_fields(adapter)
    } else {
        match &adapter.data {
            Data::Fields(fields) => fields.iter().map(|(n, _)| n.as_str()).collect(),
            Data::Whole(_) => return None,
        }
    };
    // An alert adapter adds `summary` and `links` to every event's data.
    let added = adapter.alert && matches!(field.as_str(), "summary" | "links");
    if added || known.contains(&field.as_str()) {
        return None;
    }
    Some(format!("its `data` has no `{field}`"))
}

fn fields_help(adapter: &Adapter) -> String {
    if adapter.per_group {
        let names: Vec<String> = crate::adapter::group::data_fields(adapter)
            .iter()
            .map(|n| format!("$.data.{n}"))
            .collect();
        return format!("its group events carry {}", names.join(", "));
    }
    match &adapter.data {
        Data::Fields(fields) => {
            let names: Vec<String> = fields.iter().map(|(n, _)| format!("$.data.{n}")).collect();
            format!("its events carry {}", names.join(", "))
        }
        Data::Whole(_) => "see the adapter's `event.data`".to_owned(),
    }
}

/// The member names a path starts with (`$.data.fingerprint`, `$['data']['x']`), up to the
/// first step that is not a plain name; `None` when it does not start with one.
fn leading_names(path: &str) -> Option<Vec<String>> {
    let mut rest = path.strip_prefix('$')?;
    let mut names = Vec::new();
    loop {
        if let Some(r) = rest.strip_prefix('.') {
            let end = r
                .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == '-'))
                .unwrap_or(r.len());
            if end == 0 {
                break;
            }
            names.push(r[..end].to_owned());
            rest = &r[end..];
        } else if let Some(r) = rest.strip_prefix("['") {
            let end = r.find("']")?;
            names.push(r[..end].to_owned());
            rest = &r[end + 2..];
        } else {
            break;
        }
    }
    (!names.is_empty()).then_some(names)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::compile_adapter::all_presets;

    fn preset(name: &str) -> Adapter {
        all_presets().into_iter().find(|a| a.name == name).unwrap()
    }

    #[test]
    fn a_type_is_made_by_the_adapters_whose_template_can_render_it() {
        let am = preset("alertmanager");
        let p = |t: &str| TypePattern::new(t).unwrap();
        assert!(makes(&am, &p("alertmanager.alert.resolved")));
        assert!(makes(&am, &p("alertmanager.alert.*")));
        assert!(!makes(&am, &p("grafana.alert.resolved")));
        assert!(!makes(&am, &p("alertmanager.silence.created")));
    }

    #[test]
    fn a_key_outside_the_adapters_shape_is_named() {
        let am = preset("alertmanager");
        assert_eq!(missing(&am, "$.data.fingerprint"), None);
        assert_eq!(missing(&am, "$['data']['labels']"), None);
        assert_eq!(missing(&am, "$.data.labels.instance"), None);
        assert_eq!(missing(&am, "$.id"), None);
        assert!(
            missing(&am, "$.data.fingerprnt")
                .unwrap()
                .contains("no `fingerprnt`")
        );
        assert!(
            missing(&am, "$.fingerprint")
                .unwrap()
                .contains("an event has no")
        );
        // What a filter or recursion selects is not judged.
        assert_eq!(missing(&am, "$..fingerprint"), None);
        // Group events have their own shape.
        let mut group = preset("alertmanager");
        group.per_group = true;
        assert_eq!(missing(&group, "$.data.groupKey"), None);
        assert!(missing(&group, "$.data.fingerprint").is_some());
        let p = TypePattern::new("alertmanager.group.resolved").unwrap();
        assert!(makes(&group, &p) && !makes(&am, &p));
    }

    #[test]
    fn leading_names_stop_at_the_first_step_that_is_not_a_name() {
        assert_eq!(leading_names("$.a.b[0].c").unwrap(), ["a", "b"]);
        assert_eq!(leading_names("$['a'].b").unwrap(), ["a", "b"]);
        assert_eq!(leading_names("$[0]"), None);
    }
}
