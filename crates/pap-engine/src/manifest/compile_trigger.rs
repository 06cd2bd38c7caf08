//! Trigger compile step: checks meaning (event type, JSONPath, operator/value fit, throttle)
//! and builds a [`Trigger`] ready for the dispatcher.

use std::collections::HashMap;
use std::time::Duration;

use super::regex_test::RegexTest;
use serde_json::Value;

use super::compiled::{Batch, CancelOn, Concurrency, Condition, Debounce, Test, Throttle, Trigger};
use super::file_ctx::{FileCtx, HelpExt};
use super::operators::{self, Arg, Takes};
use super::raw;
use super::yaml_tree::PathSeg;
use crate::diagnostics::did_you_mean;
use crate::event_type::{self, TypePattern, TypeProblem};
use crate::jsonpath::JsonPath;
use crate::path;

/// Agent ids known to the project: `Some(index)` for compiled agents, `None` for agent files
/// that failed their own checks (a trigger naming one is not reported as unknown).
pub(crate) type AgentIds = HashMap<String, Option<usize>>;

pub fn compile(raw: &raw::Trigger, ctx: &mut FileCtx, agents: &AgentIds) -> Option<Trigger> {
    let errors_before = ctx.error_count();
    check_id(ctx, &raw.id, &path!["trigger", "id"]);
    let pattern = compile_pattern(ctx, &raw.match_.event_type);
    let filter: Vec<Condition> = raw
        .filter
        .iter()
        .enumerate()
        .filter_map(|(i, c)| compile_condition(ctx, c, i))
        .collect();
    let throttles = raw
        .throttle
        .as_ref()
        .map(|t| compile_throttles(ctx, t))
        .unwrap_or_default();

    let debounce = raw.debounce.as_ref().and_then(|d| compile_debounce(ctx, d));
    let concurrency = raw
        .concurrency
        .as_ref()
        .and_then(|c| compile_concurrency(ctx, c, &path!["trigger", "concurrency"]));
    let notify = super::compile_notify::compile_routes(raw.notify.as_ref(), "trigger", ctx);
    for (kind, route) in &notify {
        if let Some(name) = route.agent.as_ref().filter(|n| !agents.contains_key(*n)) {
            ctx.at(
                "unknown-agent",
                &path!["trigger", "notify", kind.key(), "agent"],
                format!(
                    "`notify.{}.agent` names `{name}`, which no agent manifest defines",
                    kind.key()
                ),
            )
            .help("agents are defined in agents/**/*.yaml");
        }
    }
    let batch = match &raw.batch {
        None => Some(None),
        Some(b) => compile_batch(ctx, b, raw.debounce.is_some()).map(Some),
    };
    let cancel_on = match &raw.cancel_on {
        None => Some(None),
        Some(c) => compile_cancel_on(ctx, c).map(Some),
    };

    let agent = match agents.get(&raw.agent) {
        Some(index) => *index,
        None => {
            let d = ctx.at(
                "unknown-agent",
                &path!["trigger", "agent"],
                format!(
                    "trigger `{}` names agent `{}`, which no agent manifest defines",
                    raw.id, raw.agent
                ),
            );
            match did_you_mean(&raw.agent, agents.keys().map(String::as_str)) {
                Some(s) => d.help(s),
                None => d.help("agents are defined in agents/**/*.yaml"),
            }
            None
        }
    };

    if ctx.error_count() > errors_before {
        return None;
    }
    Some(Trigger {
        id: raw.id.clone(),
        description: raw.description.clone(),
        enabled: raw.enabled.unwrap_or(true),
        pattern: pattern?,
        filter,
        throttles,
        debounce,
        concurrency,
        cancel_on: cancel_on?,
        batch: batch?,
        notify,
        agent: agent?,
        agent_id: raw.agent.clone(),
        file: ctx.file.to_string(),
    })
}

/// Ids appear in idempotency keys, logs and `mcp://` URLs: keep them to a plain alphabet.
pub(crate) fn check_id(ctx: &mut FileCtx, id: &str, at: &[PathSeg]) {
    let ok = !id.is_empty()
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if !ok {
        ctx.at(
            "invalid-id",
            at,
            format!("id `{id}` must be non-empty and use only letters, digits, `-`, `_` and `.`"),
        );
    }
}

fn compile_pattern(ctx: &mut FileCtx, text: &str) -> Option<TypePattern> {
    let at = path!["trigger", "match", "type"];
    match TypePattern::new(text) {
        Ok(pattern) => {
            if let Some(word) = event_type::change_word(text) {
                ctx.at(
                    "change-not-crossing",
                    &at,
                    format!("event type `{text}` describes a change (`{word}`), not a threshold crossing"),
                )
                .help("PAP 0.2 naming: name what crossed a threshold, e.g. `energy.price.threshold_exceeded` instead of `energy.price.changed`");
            }
            Some(pattern)
        }
        Err(problem @ TypeProblem::Wildcard { .. }) => {
            ctx.at(
                "wildcard-in-segment",
                &at,
                format!("`match.type` `{text}` {problem}"),
            )
            .help("write e.g. `server.*.sla_breached`");
            None
        }
        Err(problem) => {
            ctx.at(
                "invalid-event-type",
                &at,
                format!("`match.type` `{text}` {problem}"),
            )
            .help("event types are dot notation: domain.object.condition");
            None
        }
    }
}

/// Paths whose cost can grow much faster than the event get a warning: they are bounded
/// (`jsonpath.max_nodes`), but on a large event they may then not hold.
fn warn_if_costly(ctx: &mut FileCtx, p: &JsonPath, at: &[PathSeg]) {
    if p.may_blow_up() {
        ctx.at(
            "jsonpath-cost",
            at,
            format!(
                "`{}` can visit far more nodes than the event has (nested descendant segments)",
                p.as_str()
            ),
        )
        .help("name the members you mean (`$.data.items[*].sku`); past jsonpath.max_nodes (100000) the condition does not hold");
    }
}

fn compile_condition(ctx: &mut FileCtx, c: &raw::Condition, i: usize) -> Option<Condition> {
    let path = match JsonPath::parse(&c.path) {
        Ok(p) => {
            warn_if_costly(ctx, &p, &path!["trigger", "filter", i, "path"]);
            Some(p)
        }
        Err(reason) => {
            ctx.at(
                "invalid-jsonpath",
                &path!["trigger", "filter", i, "path"],
                format!("`{}` is not valid JSONPath: {reason}", c.path),
            )
            .help("paths are RFC 9535 JSONPath over the whole event, e.g. `$.data.price`");
            None
        }
    };
    let test = compile_test(ctx, c, i);
    Some(Condition {
        path: path?,
        test: test?,
    })
}

fn compile_test(ctx: &mut FileCtx, c: &raw::Condition, i: usize) -> Option<Test> {
    let at = path!["trigger", "filter", i, "value"];
    // An unknown name was reported against the schema, with the list of operators.
    let op = operators::named(c.operator.as_str())?;
    let name = op.name;
    let value = match (&c.value, op.takes) {
        (None, Takes::OptionalBool) => {
            return Some(Test {
                op,
                arg: Arg::Flag(true),
            });
        }
        (None, _) => {
            ctx.at_key(
                "missing-value",
                &path!["trigger", "filter", i],
                format!("operator `{name}` needs a `value`"),
            );
            return None;
        }
        (Some(v), _) => v,
    };
    let mismatch = |ctx: &mut FileCtx| {
        let d = ctx.at(
            "value-type-mismatch",
            &at,
            format!(
                "operator `{name}` needs {}, found {}",
                op.takes.wanted(),
                json_kind(value)
            ),
        );
        if let Some(s) = value.as_str()
            && looks_numeric(s)
        {
            d.help(format!(
                "remove the quotes: `value: {}` is a number",
                s.trim()
            ));
        }
    };
    let arg = match op.takes {
        Takes::Any => {
            warn_numeric_string(ctx, value, &at);
            Arg::Value(value.clone())
        }
        Takes::Number => match value.as_f64() {
            Some(n) => Arg::Number(n),
            None => {
                mismatch(ctx);
                return None;
            }
        },
        Takes::List => {
            let Some(items) = value.as_array() else {
                mismatch(ctx);
                return None;
            };
            for (j, item) in items.iter().enumerate() {
                warn_numeric_string(ctx, item, &path!["trigger", "filter", i, "value", j]);
            }
            Arg::List(items.clone())
        }
        Takes::OptionalBool => match value {
            Value::Bool(b) => Arg::Flag(*b),
            _ => {
                mismatch(ctx);
                return None;
            }
        },
        Takes::Pattern => {
            let Some(pattern) = value.as_str() else {
                mismatch(ctx);
                return None;
            };
            match RegexTest::new(pattern) {
                Ok(re) => Arg::Regex(re),
                Err(e) => {
                    ctx.at(
                        "invalid-regex",
                        &at,
                        format!(
                            "regex `{pattern}` does not compile: {}",
                            one_line(&e.to_string())
                        ),
                    );
                    return None;
                }
            }
        }
    };
    Some(Test { op, arg })
}

fn compile_throttles(ctx: &mut FileCtx, raw: &raw::Throttles) -> Vec<Throttle> {
    let windows = raw.windows();
    if windows.is_empty() {
        ctx.at(
            "throttle-range",
            &path!["trigger", "throttle"],
            "`trigger.throttle` lists no window".to_string(),
        )
        .help("give at least one `{max_per_window, window_seconds}`, or remove `throttle`");
        return Vec::new();
    }
    let compiled: Vec<(Throttle, Vec<PathSeg>)> = windows
        .into_iter()
        .filter_map(|(t, index)| {
            let mut at = path!["trigger", "throttle"].to_vec();
            at.extend(index.map(PathSeg::Index));
            Some((compile_throttle(ctx, t, &at)?, at))
        })
        .collect();
    warn_unreachable_windows(ctx, &compiled);
    compiled.into_iter().map(|(t, _)| t).collect()
}

/// A window that can never be the one that refuses: a longer window with the same key whose
/// limit is at least what the shorter one lets through over its length (`3` an hour next to
/// `100` a day, when the hourly window admits at most 72 a day).
fn warn_unreachable_windows(ctx: &mut FileCtx, windows: &[(Throttle, Vec<PathSeg>)]) {
    for (long, long_at) in windows {
        let binding = windows.iter().find(|(short, _)| {
            short.window < long.window
                && short.window_key.as_ref().map(JsonPath::as_str)
                    == long.window_key.as_ref().map(JsonPath::as_str)
                && short.max_per_window.saturating_mul(
                    long.window.as_millis().div_ceil(short.window.as_millis()) as u64,
                ) <= long.max_per_window
        });
        if let Some((short, _)) = binding {
            ctx.at(
                "throttle-window-unreachable",
                long_at,
                format!(
                    "this window ({} per {}) never refuses anything: the {} window lets through at most {} in that time",
                    long.max_per_window,
                    super::duration::format(long.window),
                    super::duration::format(short.window),
                    short.max_per_window.saturating_mul(
                        long.window.as_millis().div_ceil(short.window.as_millis()) as u64
                    )
                ),
            )
            .help("lower its `max_per_window`, or remove it");
        }
    }
}

fn compile_debounce(ctx: &mut FileCtx, d: &raw::Debounce) -> Option<Debounce> {
    let window_key =
        compile_window_key(ctx, d.window_key.as_deref(), &path!["trigger", "debounce"])?;
    // The schema check already rejected values below 1.
    Some(Debounce {
        quiet: Duration::from_secs(u64::try_from(d.seconds).ok()?),
        window_key,
        mode: d.mode.unwrap_or(raw::DebounceMode::Trailing),
    })
}

/// The longest batch window (a week).
const MAX_BATCH_WINDOW: Duration = Duration::from_secs(7 * 86_400);

/// `batch`: its window (a duration of at least a second and at most a week) and key; a trigger cannot both
/// debounce and batch (both keep the burst's one pending invocation).
fn compile_batch(ctx: &mut FileCtx, b: &raw::Batch, debounces: bool) -> Option<Batch> {
    if debounces {
        ctx.at(
            "batch-with-debounce",
            &path!["trigger", "batch"],
            "a trigger cannot both `debounce` and `batch` a burst".to_owned(),
        )
        .help("`batch` is the trailing debounce that hands over every event: keep one of them");
        return None;
    }
    let window = match super::duration::parse(&b.window) {
        Ok(d) if d > MAX_BATCH_WINDOW => {
            // A batch holds its events in the store until it is handed over: a window past
            // a week is a value nobody meant.
            ctx.at(
                "invalid-duration",
                &path!["trigger", "batch", "window"],
                format!(
                    "batch window `{}` ({}) is longer than {}",
                    b.window,
                    super::duration::format(d),
                    super::duration::format(MAX_BATCH_WINDOW)
                ),
            )
            .help("a batch collects a burst: seconds to minutes, such as `30s` or `5m`");
            None
        }
        Ok(d) if d >= Duration::from_secs(1) => Some(d),
        Ok(_) => {
            ctx.at(
                "invalid-duration",
                &path!["trigger", "batch", "window"],
                format!("batch window `{}` is shorter than a second", b.window),
            );
            None
        }
        Err(why) => {
            ctx.at(
                "invalid-duration",
                &path!["trigger", "batch", "window"],
                format!("batch window `{}`: {}", b.window, why.reason()),
            )
            .help("a duration such as `30s` or `5m`");
            None
        }
    };
    let key = compile_window_key_named(ctx, b.key.as_deref(), &path!["trigger", "batch"], "key")?;
    Some(Batch {
        max: b.max,
        window: window?,
        key,
    })
}

/// `cancel_on`: its type (as `match.type`: `*` for a whole segment) and key path.
fn compile_cancel_on(ctx: &mut FileCtx, c: &raw::CancelOn) -> Option<CancelOn> {
    let pattern = match TypePattern::new(&c.event_type) {
        Ok(p) => Some(p),
        Err(problem) => {
            ctx.at(
                "invalid-event-type",
                &path!["trigger", "cancel_on", "type"],
                format!("`cancel_on.type` `{}` {problem}", c.event_type),
            )
            .help("the type of the events that end this trigger's work, e.g. `alertmanager.alert.resolved`");
            None
        }
    };
    let at = path!["trigger", "cancel_on", "match"];
    let key = match JsonPath::parse(&c.key) {
        Ok(p) => {
            warn_if_costly(ctx, &p, &at);
            Some(p)
        }
        Err(reason) => {
            ctx.at(
                "invalid-jsonpath",
                &at,
                format!(
                    "`cancel_on.match` `{}` is not valid JSONPath: {reason}",
                    c.key
                ),
            )
            .help("e.g. `$.data.fingerprint`: the value both events share");
            None
        }
    };
    Some(CancelOn {
        pattern: pattern?,
        key: key?,
        running: c.running.unwrap_or(false),
        from: c.from.clone(),
    })
}

/// A `concurrency` block under `at` (a trigger's or an agent's).
pub(crate) fn compile_concurrency(
    ctx: &mut FileCtx,
    c: &raw::Concurrency,
    at: &[PathSeg],
) -> Option<Concurrency> {
    let key = match &c.key {
        None => None,
        Some(text) => {
            let key_at: Vec<PathSeg> = at.iter().cloned().chain([PathSeg::from("key")]).collect();
            match JsonPath::parse(text) {
                Ok(p) => {
                    warn_if_costly(ctx, &p, &key_at);
                    Some(p)
                }
                Err(reason) => {
                    ctx.at(
                        "invalid-jsonpath",
                        &key_at,
                        format!("concurrency `key` `{text}` is not valid JSONPath: {reason}"),
                    )
                    .help("e.g. `$.data.host`: at most `limit` at once per host");
                    return None;
                }
            }
        }
    };
    // The schema check already rejected a limit below 1.
    Some(Concurrency {
        limit: u32::try_from(c.limit).unwrap_or(u32::MAX),
        key,
    })
}

/// A `window_key` under `at`: `Some(None)` when there is none, `None` when it is invalid
/// (reported).
fn compile_window_key(
    ctx: &mut FileCtx,
    text: Option<&str>,
    at: &[PathSeg],
) -> Option<Option<JsonPath>> {
    compile_window_key_named(ctx, text, at, "window_key")
}

/// A key path named `name` under `at` (`window_key`, or a batch's `key`): `Some(None)` when
/// there is none, `None` when it is invalid (reported).
fn compile_window_key_named(
    ctx: &mut FileCtx,
    text: Option<&str>,
    at: &[PathSeg],
    name: &'static str,
) -> Option<Option<JsonPath>> {
    let Some(text) = text else {
        return Some(None);
    };
    let key_at: Vec<PathSeg> = at.iter().cloned().chain([PathSeg::from(name)]).collect();
    match JsonPath::parse(text) {
        Ok(p) => {
            warn_if_costly(ctx, &p, &key_at);
            Some(Some(p))
        }
        Err(reason) => {
            ctx.at(
                "invalid-window-key",
                &key_at,
                format!("`{name}` `{text}` is not valid JSONPath: {reason}"),
            )
            .help("e.g. `$.data.region`: one window per region");
            None
        }
    }
}

fn compile_throttle(ctx: &mut FileCtx, t: &raw::Throttle, at: &[PathSeg]) -> Option<Throttle> {
    let window_key = compile_window_key(ctx, t.window_key.as_deref(), at)?;
    // The schema check already rejected values below 1.
    Some(Throttle {
        max_per_window: u64::try_from(t.max_per_window).ok()?,
        window: Duration::from_secs(u64::try_from(t.window_seconds).ok()?),
        window_key,
        release_key: t.release_key.unwrap_or(false),
    })
}

fn warn_numeric_string(ctx: &mut FileCtx, value: &Value, at: &[PathSeg]) {
    if let Some(s) = value.as_str()
        && looks_numeric(s)
    {
        ctx.at(
            "numeric-string",
            at,
            format!("\"{s}\" is a string that looks like a number; it never equals the number {}", s.trim()),
        )
        .help(format!("write {} without quotes to compare numbers; keep the quotes if the field really holds text", s.trim()));
    }
}

fn looks_numeric(s: &str) -> bool {
    let t = s.trim();
    !t.is_empty()
        && t.parse::<f64>().is_ok()
        && !t.eq_ignore_ascii_case("nan")
        && !t.to_ascii_lowercase().contains("inf")
}

fn json_kind(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(b) => format!("the boolean {b}"),
        Value::Number(n) => format!("the number {n}"),
        Value::String(s) => format!("the string \"{s}\""),
        Value::Array(_) => "a list".into(),
        Value::Object(_) => "a mapping".into(),
    }
}

fn one_line(s: &str) -> String {
    s.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numeric_strings_are_recognised() {
        assert!(looks_numeric("3"));
        assert!(looks_numeric(" 4.82 "));
        assert!(looks_numeric("-1e3"));
        assert!(!looks_numeric("NO1"));
        assert!(!looks_numeric("inf"));
        assert!(!looks_numeric("NaN"));
        assert!(!looks_numeric(""));
    }
}
