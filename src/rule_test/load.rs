//! Reading a rule test file: its shape against the schema, then its meaning (times, offsets,
//! events, trigger ids), every problem a diagnostic with the file, line and column, as
//! `pap lint` reports manifests.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use serde_json::{Map, Value};

use super::raw::{self, ExpectedOutcome, RuleTestFile};
use crate::diagnostics::{Diagnostic, Severity, did_you_mean};
use crate::event::{self, Origin};
use crate::manifest::file_ctx::{FileCtx, HelpExt};
use crate::manifest::loader::{display_name, read_yaml};
use crate::manifest::schema_check;
use crate::manifest::yaml_tree::PathSeg;
use pap_engine::path;

/// The folder `pap test` and `pap lint` look in by default, under the project root. Not
/// `tests/`, which a Rust or Python project around the manifests may already use.
pub(crate) const DEFAULT_DIR: &str = "rule-tests";

/// The simulated clock's start when a case names none.
pub(crate) const DEFAULT_START: &str = "2026-01-01T00:00:00Z";

/// 10000-01-01T00:00:00Z: the simulated clock stays before it.
const MAX_TIME_MS: i64 = 253_402_300_800_000;

/// A test file ready to run.
#[derive(Debug, Clone)]
pub(crate) struct Suite {
    /// As diagnostics name it: relative to the project root.
    pub file: String,
    pub cases: Vec<Case>,
}

#[derive(Debug, Clone)]
pub(crate) struct Case {
    pub name: String,
    pub line: u32,
    /// The simulated time of `at: +0s` (ms since the epoch).
    pub start_ms: i64,
    pub steps: Vec<Step>,
    /// Run the agents the events invoke.
    pub run: bool,
}

#[derive(Debug, Clone)]
pub(crate) struct Step {
    /// The offset from the case's start (ms) and as written (`+90s`).
    pub at_ms: i64,
    pub at: String,
    /// The event, with the defaults of an inline event filled in, checked valid; `None` for
    /// a step that only checks what fired.
    pub event: Option<event::Event>,
    pub line: u32,
    pub expect: Vec<Expect>,
    /// Expected outcomes of the trailing debounces fired since the previous step.
    pub fired: Vec<Expect>,
}

#[derive(Debug, Clone)]
pub(crate) struct Expect {
    pub trigger: String,
    pub outcome: ExpectedOutcome,
    pub reason: Option<String>,
    pub result: Option<raw::ExpectedResult>,
    pub line: u32,
}

/// What the checks need to know of the project.
pub(crate) struct ProjectFacts<'a> {
    pub root: &'a Path,
    /// Every trigger id; `None` when the project did not load (then ids are not checked).
    pub trigger_ids: Option<Vec<&'a str>>,
    pub max_event_bytes: u64,
    /// The project's webhook adapters, presets included; `None` when pap.yaml did not load
    /// (then `webhook` steps are not checked).
    pub adapters: Option<&'a [crate::adapter::Adapter]>,
    /// `listen.max_body_bytes`: the most a webhook body may have.
    pub max_body_bytes: u64,
}

/// The JSON Schema of rule test files, as `pap schema rule-test` prints it.
pub(crate) fn schema() -> &'static Value {
    static SCHEMA: OnceLock<Value> = OnceLock::new();
    SCHEMA.get_or_init(|| {
        serde_json::to_value(schemars::schema_for!(RuleTestFile)).expect("schemas serialise")
    })
}

/// Reads and checks the rule test file at `path`. The suite is `None` when any error was
/// found: a test file with a mistake in it must not run half its cases and pass.
pub(crate) fn load(
    path: &Path,
    project: &ProjectFacts,
    diags: &mut Vec<Diagnostic>,
    sources: &mut BTreeMap<String, String>,
) -> Option<Suite> {
    let display = display_name(project.root, path);
    let tree = read_yaml(path, &display, diags, sources)?;
    let errors_before = count_errors(diags);
    diags.extend(schema_check::check(&tree, schema(), &display));
    if count_errors(diags) > errors_before {
        return None;
    }
    let raw: RuleTestFile = match serde_json::from_value(tree.value.to_json()) {
        Ok(raw) => raw,
        Err(e) => {
            diags.push(Diagnostic::new(
                "wrong-type",
                &display,
                tree.pos,
                format!("cannot read the rule tests: {e}"),
            ));
            return None;
        }
    };
    let mut ctx = FileCtx {
        file: &display,
        tree: &tree,
        diags,
    };
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut names: HashMap<&str, usize> = HashMap::new();
    let mut cases = Vec::new();
    for (i, case) in raw.cases.iter().enumerate() {
        let first = *names.entry(case.name.as_str()).or_insert(i);
        if first != i {
            ctx.at(
                "duplicate-id",
                &path!["cases", i, "name"],
                format!(
                    "two cases are named `{}` (cases {} and {})",
                    case.name,
                    first + 1,
                    i + 1
                ),
            )
            .help("a report names cases by name: give each its own");
        }
        cases.extend(compile_case(&mut ctx, case, i, dir, project));
    }
    if count_errors(ctx.diags) > errors_before {
        return None;
    }
    Some(Suite {
        file: display.clone(),
        cases,
    })
}

fn count_errors(diags: &[Diagnostic]) -> usize {
    diags
        .iter()
        .filter(|d| d.severity == Severity::Error)
        .count()
}

fn compile_case(
    ctx: &mut FileCtx,
    case: &raw::Case,
    i: usize,
    dir: &Path,
    project: &ProjectFacts,
) -> Option<Case> {
    let start_text = case.start.as_deref().unwrap_or(DEFAULT_START);
    let start_ms = match parse_time(start_text) {
        Ok(ms) => Some(ms),
        Err(why) => {
            ctx.at(
                "invalid-timestamp",
                &path!["cases", i, "start"],
                format!("`start` {start_text:?} is not an RFC 3339 time: {why}"),
            )
            .help("e.g. `2026-03-11T06:00:00Z`");
            None
        }
    };
    let mut steps = Vec::new();
    for (j, step) in case.events.iter().enumerate() {
        for (trigger, e) in &step.expect {
            if e.result().is_some() && !case.run {
                ctx.at(
                    "rule-test-event",
                    &path!["cases", i, "events", j, "expect", trigger.as_str(), "result"],
                    "a `result` is only seen when the case runs its agents: add `run: true` to the case",
                );
            }
        }
        if let Some(start_ms) = start_ms {
            steps.extend(
                compile_step(ctx, step, (i, j), start_ms, dir, project)
                    .into_iter()
                    .flatten(),
            );
        }
    }
    Some(Case {
        name: case.name.clone(),
        line: ctx.tree.locate(&path!["cases", i]).line,
        start_ms: start_ms?,
        steps,
        run: case.run,
    })
}

fn compile_step(
    ctx: &mut FileCtx,
    step: &raw::Step,
    (i, j): (usize, usize),
    start_ms: i64,
    dir: &Path,
    project: &ProjectFacts,
) -> Option<Vec<Step>> {
    let base = path!["cases", i, "events", j];
    let at_text = step.at.clone().unwrap_or_else(|| "+0s".to_string());
    let at_ms = match parse_offset(&at_text) {
        Ok(ms) => Some(ms),
        Err(why) => {
            ctx.at(
                "invalid-duration",
                &[&base[..], &path!["at"]].concat(),
                format!("`at` {at_text:?} is not an offset such as `+90s`: {why}"),
            )
            .help("an offset from the case's `start`: `+0s`, `+90s`, `+1h30m`, `+2d`");
            None
        }
    };
    // The simulated time stays a time RFC 3339 can write (before the year 10000).
    let at_ms = at_ms.and_then(|ms| {
        if start_ms.checked_add(ms).is_some_and(|t| t < MAX_TIME_MS) {
            Some(ms)
        } else {
            ctx.at(
                "invalid-duration",
                &[&base[..], &path!["at"]].concat(),
                format!("`at` {at_text:?} takes the simulated clock past the year 9999"),
            );
            None
        }
    });
    let expect = compile_expectations(ctx, &step.expect, &base, "expect", project);
    let fired = compile_expectations(ctx, &step.fired, &base, "fired", project);
    let now_ms = start_ms.saturating_add(at_ms?);
    let line = ctx.tree.locate(&base).line;
    if let Some(webhook) = &step.webhook {
        let events = webhook_events(ctx, step, webhook, &base, dir, project, now_ms)?;
        let (at_ms, expect, mut fired) = (at_ms?, expect?, fired?);
        // One step per event, decided in turn at the same time, each held to `expect`; what
        // fired before the step is checked once, with the first.
        let steps = events
            .into_iter()
            .map(|event| Step {
                at_ms,
                at: at_text.clone(),
                event: Some(event),
                line,
                expect: expect.clone(),
                fired: std::mem::take(&mut fired),
            })
            .collect();
        return Some(steps);
    }
    let only_fired = step.event.is_none() && step.file.is_none() && !step.fired.is_empty();
    let event = if only_fired {
        if !step.expect.is_empty() {
            ctx.at(
                "rule-test-event",
                &base,
                "a step with `expect` needs an event (`event`, `file` or `webhook`)".to_string(),
            );
            return None;
        }
        None
    } else {
        let value = step_event(
            ctx,
            step,
            &base,
            now_ms,
            dir,
            project.root,
            project.max_event_bytes,
        )?;
        let encoded = value.to_string().len();
        let at_event = event_path(step, &base);
        match event::validate(value, encoded, project.max_event_bytes, Origin::Outside) {
            Ok(event) => Some(event),
            Err(invalid) => {
                ctx.at(
                    "rule-test-event",
                    &at_event,
                    format!("the event is not valid: {}", invalid.reason),
                );
                return None;
            }
        }
    };
    Some(vec![Step {
        at_ms: at_ms?,
        at: at_text,
        event,
        line,
        expect: expect?,
        fired: fired?,
    }])
}

/// The events of a `webhook` step's body, each valid, in the order its adapter made them:
/// the adapter's own mapping, as serve applies it to a post (`adapter::events_of_body`).
fn webhook_events(
    ctx: &mut FileCtx,
    step: &raw::Step,
    webhook: &raw::WebhookStep,
    base: &[PathSeg],
    dir: &Path,
    project: &ProjectFacts,
    now_ms: i64,
) -> Option<Vec<event::Event>> {
    let at = [base, &path!["webhook"]].concat();
    if step.event.is_some() || step.file.is_some() {
        ctx.at(
            "rule-test-event",
            base,
            "a step needs exactly one of `event` (inline), `file` and `webhook`".to_string(),
        );
        return None;
    }
    let body = match (&webhook.body, &webhook.file) {
        (Some(body), None) => body.to_string().into_bytes(),
        (None, Some(file)) => {
            match read_project_file(&dir.join(file), project.root, project.max_body_bytes) {
                Ok(bytes) => bytes,
                Err(why) => {
                    ctx.at(
                        "rule-test-event",
                        &[&at[..], &path!["file"]].concat(),
                        format!("`{file}`: {why} (listen.max_body_bytes for a webhook body)"),
                    );
                    return None;
                }
            }
        }
        _ => {
            ctx.at(
                "rule-test-event",
                &at,
                "a webhook needs exactly one of `body` (inline) and `file`".to_string(),
            );
            return None;
        }
    };
    // Without a project that loaded, the adapter cannot be looked up (lint says why).
    let adapters = project.adapters?;
    let adapter = match crate::adapter::named(adapters, &webhook.adapter) {
        Ok(adapter) => adapter,
        Err(why) => {
            ctx.at(
                "rule-test-event",
                &[&at[..], &path!["adapter"]].concat(),
                why.to_string(),
            );
            return None;
        }
    };
    let made = match crate::adapter::events_of_body(adapter, &body, project.max_event_bytes, now_ms)
    {
        Ok(made) => made,
        Err(why) => {
            ctx.at(
                "rule-test-event",
                &at,
                format!("the body makes no events: {why}"),
            );
            return None;
        }
    };
    let mut events = Vec::with_capacity(made.len());
    for m in made {
        match m.event {
            Ok(event) => events.push(event),
            Err(bad) => {
                let element = m
                    .index
                    .map(|i| format!(" (element {i})"))
                    .unwrap_or_default();
                ctx.at(
                    "rule-test-event",
                    &at,
                    format!("the body's event{element} is not valid: {}", bad.reason),
                );
                return None;
            }
        }
    }
    if events.is_empty() {
        ctx.at(
            "rule-test-event",
            &at,
            "the body makes no events".to_string(),
        );
        return None;
    }
    Some(events)
}

fn event_path(step: &raw::Step, base: &[PathSeg]) -> Vec<PathSeg> {
    let field = if step.file.is_some() { "file" } else { "event" };
    [base, &path![field]].concat()
}

/// The step's event: inline with its defaults, or read from its file.
fn step_event(
    ctx: &mut FileCtx,
    step: &raw::Step,
    base: &[PathSeg],
    now_ms: i64,
    dir: &Path,
    root: &Path,
    max_bytes: u64,
) -> Option<Value> {
    match (&step.event, &step.file) {
        (Some(_), Some(_)) | (None, None) => {
            ctx.at(
                "rule-test-event",
                base,
                "a step needs exactly one of `event` (inline), `file` and `webhook`".to_string(),
            );
            None
        }
        (Some(inline), None) => Some(with_defaults(inline, base, now_ms)),
        (None, Some(file)) => {
            let at = [base, &path!["file"]].concat();
            match read_event_file(&dir.join(file), root, max_bytes) {
                Ok(value) => Some(value),
                Err(why) => {
                    ctx.at("rule-test-event", &at, format!("`{file}`: {why}"));
                    None
                }
            }
        }
    }
}

/// An inline event needs only what the case is about (`type`, `data`): the envelope is
/// filled in, its id named after where it stands in the file so a report can name it.
fn with_defaults(inline: &Map<String, Value>, base: &[PathSeg], now_ms: i64) -> Value {
    let mut event = inline.clone();
    let place = match base {
        [_, PathSeg::Index(i), _, PathSeg::Index(j)] => format!("case{}-event{}", i + 1, j + 1),
        _ => "event".to_string(),
    };
    let defaults = [
        ("pap_version", Value::from("0.2")),
        ("id", Value::from(place)),
        ("source", Value::from("pap-test")),
        ("time", Value::from(crate::clock::rfc3339_ms(now_ms))),
        ("data", Value::Object(Map::new())),
    ];
    for (field, value) in defaults {
        event.entry(field).or_insert(value);
    }
    Value::Object(event)
}

/// One JSON event from a file inside the project, outside its hidden places (`.git/`,
/// `.env`, `.pap/`), at most `max_bytes` long: a test file in an untrusted change must not
/// read other files into a CI log, nor tell which exist.
fn read_event_file(path: &Path, root: &Path, max_bytes: u64) -> Result<Value, String> {
    let bytes = read_project_file(path, root, max_bytes).map_err(|why| {
        if why.starts_with("the file is more than") {
            format!("{why} (max_event_bytes)")
        } else {
            why
        }
    })?;
    serde_json::from_slice::<event::strict::Strict>(&bytes)
        .map(|event::strict::Strict(value)| value)
        .map_err(|e| format!("not one JSON event: {e}"))
}

/// The bytes of a file inside the project, outside its hidden places, at most `max_bytes`.
fn read_project_file(path: &Path, root: &Path, max_bytes: u64) -> Result<Vec<u8>, String> {
    use std::io::Read;
    let root = root.canonicalize().unwrap_or_else(|_| root.to_path_buf());
    // Where the path leads, judged before asking whether the file exists.
    let lexical = normalize(path);
    let resolved = path.canonicalize().unwrap_or_else(|_| lexical.clone());
    for place in [&lexical, &resolved] {
        let Ok(inside) = place.strip_prefix(&root) else {
            return Err("the file is outside the project root".to_string());
        };
        if inside
            .components()
            .any(|c| c.as_os_str().to_string_lossy().starts_with('.'))
        {
            return Err("the file is in a hidden place of the project".to_string());
        }
    }
    let file = crate::regular_file::open(&resolved, crate::regular_file::Links::Follow)
        .map_err(|e| format!("cannot read it: {e}"))?;
    let mut bytes = Vec::new();
    file.take(max_bytes.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read it: {e}"))?;
    if bytes.len() as u64 > max_bytes {
        return Err(format!(
            "the file is more than the {max_bytes} bytes allowed"
        ));
    }
    Ok(bytes)
}

/// `path` with `.` and `..` resolved by name (the file may not exist).
fn normalize(path: &Path) -> PathBuf {
    use std::path::Component;
    let absolute = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir().unwrap_or_default().join(path)
    };
    let mut out = PathBuf::new();
    for c in absolute.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    // The root itself may be reached through a link (`/tmp` on some systems): judge the
    // canonical form of the deepest existing ancestor.
    let mut existing = out.clone();
    let mut rest = Vec::new();
    while !existing.exists() {
        match (
            existing.file_name().map(ToOwned::to_owned),
            existing.parent(),
        ) {
            (Some(name), Some(parent)) => {
                rest.push(name);
                existing = parent.to_path_buf();
            }
            _ => break,
        }
    }
    let mut resolved = existing.canonicalize().unwrap_or(existing);
    for name in rest.into_iter().rev() {
        resolved.push(name);
    }
    resolved
}

fn compile_expectations(
    ctx: &mut FileCtx,
    expectations: &BTreeMap<String, raw::Expectation>,
    base: &[PathSeg],
    field: &str,
    project: &ProjectFacts,
) -> Option<Vec<Expect>> {
    let mut out = Vec::new();
    let mut ok = true;
    for (trigger, expectation) in expectations {
        let at = [base, &path![field, trigger.as_str()]].concat();
        if let Some(ids) = &project.trigger_ids
            && !ids.contains(&trigger.as_str())
        {
            let d = ctx.at_key(
                "unknown-trigger",
                &at,
                format!("no trigger manifest defines `{trigger}`"),
            );
            match did_you_mean(trigger, ids.iter().copied()) {
                Some(s) => d.help(s),
                None => d.help("expectations are keyed by trigger id (`trigger.id`)"),
            }
            ok = false;
            continue;
        }
        out.push(Expect {
            trigger: trigger.clone(),
            outcome: expectation.outcome(),
            reason: expectation.reason().map(str::to_string),
            result: expectation.result(),
            line: ctx.tree.locate_key(&at).line,
        });
    }
    // In file order, so a report lists them as written.
    out.sort_by_key(|e| e.line);
    ok.then_some(out)
}

/// An offset from a case's start: `+90s`, `90s`, `+1h30m` (ms).
pub(crate) fn parse_offset(text: &str) -> Result<i64, String> {
    let body = text.strip_prefix('+').unwrap_or(text);
    if body.starts_with('-') {
        return Err("offsets count forward from `start`".to_string());
    }
    let d = crate::manifest::duration::parse(body).map_err(|e| e.to_string())?;
    i64::try_from(d.as_millis()).map_err(|_| "too large".to_string())
}

/// A strict RFC 3339 time (ms since the epoch).
pub(crate) fn parse_time(text: &str) -> Result<i64, String> {
    crate::event::rfc3339::check(text).map_err(|e| e.to_string())?;
    let at: jiff::Timestamp = text.parse().map_err(|e| format!("{e}"))?;
    Ok(at.as_millisecond())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_count_forward_from_the_start() {
        assert_eq!(parse_offset("+0s"), Ok(0));
        assert_eq!(parse_offset("+90s"), Ok(90_000));
        assert_eq!(parse_offset("1h30m"), Ok(5_400_000));
        assert!(parse_offset("-5s").is_err());
        assert!(parse_offset("+soon").is_err());
    }

    #[test]
    fn an_inline_event_gets_its_envelope_from_its_place_and_time() {
        let inline: Map<String, Value> =
            serde_json::from_str(r#"{"type": "a.b.crossed", "data": {"x": 1}}"#).unwrap();
        let base = path!["cases", 1, "events", 2];
        let event = with_defaults(&inline, &base, 0);
        assert_eq!(
            event,
            serde_json::json!({
                "type": "a.b.crossed", "data": {"x": 1}, "pap_version": "0.2",
                "id": "case2-event3", "source": "pap-test", "time": "1970-01-01T00:00:00.000Z"
            })
        );
    }
}
