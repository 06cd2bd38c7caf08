//! The three targets: how their inputs are generated, and what each input must satisfy.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use pap::event::input::{self, Item};
use pap::jsonpath::JsonPath;
use proptest::collection::vec;
use proptest::prelude::*;
use serde_json::{Number, Value};

// --- generators --------------------------------------------------------------------------

/// Strings with what senders should not send: control characters, C1 controls, non-ASCII.
fn text() -> impl Strategy<Value = String> {
    "[a-z.*_ 0-9\\x00-\\x1f\\x7f\\u{80}-\\u{9f}é☃\"\\\\]{0,12}"
}

/// Any JSON value, nested up to 8 deep, with a small key alphabet so paths meet members.
pub(super) fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        (-1e6f64..1e6).prop_map(|f| Number::from_f64(f).map_or(Value::Null, Value::Number)),
        text().prop_map(Value::from),
    ];
    leaf.prop_recursive(8, 256, 8, |inner| {
        prop_oneof![
            vec(inner.clone(), 0..8).prop_map(Value::Array),
            proptest::collection::btree_map("[abw]{0,2}", inner, 0..6)
                .prop_map(|m: BTreeMap<String, Value>| Value::Object(m.into_iter().collect())),
        ]
    })
}

const EVENT_KEYS: &[&str] = &[
    "pap_version",
    "id",
    "type",
    "source",
    "time",
    "data",
    "triggered_by",
    "specversion",
    "datacontenttype",
    "data_base64",
];

const GOOD_VALUES: &[&str] = &[
    r#""0.2""#,
    r#""1.0""#,
    r#""e1""#,
    r#""server.latency.sla_breached""#,
    r#""pap.invocation.completed""#,
    r#""monitor""#,
    r#""2026-03-11T06:00:00Z""#,
    r#""9999-12-31T23:59:60.123456789012+23:59""#,
    r#"{"region":"NO1","p":[1,2,3]}"#,
    r#""application/json""#,
];

/// One event-like object, serialised by hand so a member may appear twice.
fn event_text() -> impl Strategy<Value = String> {
    vec(
        (
            0..EVENT_KEYS.len(),
            prop_oneof![
                (0..GOOD_VALUES.len()).prop_map(|i| GOOD_VALUES[i].to_owned()),
                json_value().prop_map(|v| v.to_string()),
                text().prop_map(|t| Value::from(t).to_string()),
            ],
        ),
        0..10,
    )
    .prop_map(|members| {
        let body: Vec<String> = members
            .into_iter()
            .map(|(k, v)| format!("{}:{v}", Value::from(EVENT_KEYS[k])))
            .collect();
        format!("{{{}}}", body.join(","))
    })
}

/// Byte edits: flip, insert, delete, or insert a token that parsers find interesting.
fn mutations() -> impl Strategy<Value = Vec<(usize, u8, u8)>> {
    vec((any::<usize>(), any::<u8>(), 0u8..4), 0..8)
}

const TOKENS: &[&str] = &[
    "&a ",
    "*a",
    "<<: *a",
    "!!str ",
    "\t",
    "\u{1b}[2K",
    "\r",
    "{",
    "}",
    "[",
    "]",
    ": ",
    "\n- ",
    "\"",
    "'",
    "$..*",
    "\n",
    "#",
    "~",
    "null",
    "\u{feff}",
    "\\u0000",
    "1e999",
    "-0",
];

fn mutate(mut bytes: Vec<u8>, edits: &[(usize, u8, u8)]) -> Vec<u8> {
    for (at, byte, op) in edits {
        let at = if bytes.is_empty() {
            0
        } else {
            at % (bytes.len() + 1)
        };
        match op {
            0 if at < bytes.len() => bytes[at] ^= byte | 1,
            1 => bytes.insert(at, *byte),
            2 if at < bytes.len() => {
                bytes.remove(at);
            }
            _ => {
                let token = TOKENS[usize::from(*byte) % TOKENS.len()].as_bytes();
                bytes.splice(at..at, token.iter().copied());
            }
        }
    }
    bytes
}

/// A seed from the saved corpus, mutated.
fn mutated_seed(target: &'static str) -> impl Strategy<Value = Vec<u8>> {
    let seeds: Vec<Vec<u8>> = super::corpus(target).into_iter().map(|(_, b)| b).collect();
    let n = seeds.len().max(1);
    (0..n, mutations())
        .prop_map(move |(i, edits)| mutate(seeds.get(i).cloned().unwrap_or_default(), &edits))
}

pub(super) fn event_bytes() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        vec(any::<u8>(), 0..512),
        // NDJSON, an array, or pretty-printed documents.
        (vec(event_text(), 1..5), 0u8..3).prop_map(|(events, how)| match how {
            0 => events.join("\n").into_bytes(),
            1 => format!("[{}]", events.join(",")).into_bytes(),
            _ => events
                .iter()
                .map(|e| e.replace(',', ",\n  "))
                .collect::<Vec<_>>()
                .join("\n")
                .into_bytes(),
        }),
        (vec(event_text(), 1..4), mutations())
            .prop_map(|(events, edits)| mutate(events.join("\n").into_bytes(), &edits)),
        mutated_seed("events"),
    ]
}

const SEGMENTS: &[&str] = &[
    ".a",
    ".b",
    ".w",
    "..a",
    "..w",
    "..*",
    "[*]",
    ".*",
    "[0]",
    "[-1]",
    "[1:3]",
    "[::-1]",
    "[::0]",
    "['a','b']",
    "[?@.a]",
    "[?!@.a]",
    "[?@.a > 1]",
    "[?@ == 'x']",
    "[?@..b == 1]",
    "[?count(@..*) > 2]",
    "[?length(@) < 3]",
    "[?value(@..a) == null]",
    "[?match(@, 'a.*')]",
    "[?search(@.a, '[')]",
    "[?@[?@ > 1]]",
    "[?@.a && (@.b || !@.w)]",
    "[?$..a]",
    "[",
    "..",
    "[?",
    "['\\u0000']",
    "[0:18446744073709551615]",
    "[?length(@..*) > 1]",
];

/// A generated value, or many copies of one: large enough for nested descendant segments to
/// reach the budget.
fn document() -> impl Strategy<Value = Value> {
    prop_oneof![
        json_value(),
        (json_value(), 2..60usize).prop_map(|(v, n)| Value::Array(vec![v; n])),
    ]
}

pub(super) fn path_and_document() -> impl Strategy<Value = Vec<u8>> {
    let path = (
        0u8..10,
        vec(0..SEGMENTS.len(), 0..7),
        "[$@.\\[\\]*?()'a-z0-9:,!=<> ]{0,4}",
    )
        .prop_map(|(dice, segments, tail)| {
            // Mostly well-formed, so most cases reach the evaluator.
            let mut p = String::from(if dice > 0 { "$" } else { "" });
            let tail = if dice > 7 { tail } else { String::new() };
            for s in segments {
                p.push_str(SEGMENTS[s]);
            }
            p.push_str(&tail);
            p
        });
    prop_oneof![
        4 => (path, document()).prop_map(|(p, doc)| format!("{p}\n{doc}").into_bytes()),
        1 => mutated_seed("jsonpath"),
    ]
}

pub(super) fn manifest_yaml() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        4 => mutated_seed("manifests"),
        1 => vec(
            prop_oneof![
                (0..TOKENS.len()).prop_map(|i| TOKENS[i].to_owned()),
                "[a-z_]{1,8}: ".prop_map(String::from),
                " {0,6}".prop_map(String::from),
            ],
            0..64
        )
        .prop_map(|parts| parts.concat().into_bytes()),
    ]
}

// --- checks ------------------------------------------------------------------------------

fn within(bound: Duration, started: Instant, what: &str) -> Result<(), String> {
    let took = started.elapsed();
    if took > bound {
        return Err(format!("{what} took {took:?}, more than {bound:?}"));
    }
    Ok(())
}

/// The event parser: whatever the bytes, every item comes out, no valid event has a control
/// character in its identity, and the input is read in bounded time.
pub(super) fn check_events(bytes: &[u8]) -> Result<(), String> {
    let started = Instant::now();
    let consumed = AtomicU64::new(0);
    let mut items: Vec<Item> = Vec::new();
    let mut sink = |item: Item| items.push(item);
    input::read_from(bytes, Arc::from("fuzz"), 64 * 1024, &consumed, &mut sink)
        .map_err(|e| format!("reading from memory failed: {e}"))?;
    for item in &items {
        if let Ok(event) = &item.event {
            EVENTS_VALID.fetch_add(1, Ordering::Relaxed);
            for field in [&event.id, &event.kind] {
                if field.chars().any(char::is_control) {
                    return Err(format!("a valid event has a control character: {field:?}"));
                }
            }
        }
    }
    within(Duration::from_secs(2), started, "reading the input")
}

/// How the generated inputs fared, so a run shows it exercised the evaluator and not only
/// the parser's refusals.
static PATHS_PARSED: AtomicU64 = AtomicU64::new(0);
static PATHS_OVER_BUDGET: AtomicU64 = AtomicU64::new(0);
static EVENTS_VALID: AtomicU64 = AtomicU64::new(0);
static MANIFESTS_PARSED: AtomicU64 = AtomicU64::new(0);

/// What the counters say about `target`.
pub(super) fn stats(target: &str) -> String {
    let n = |c: &AtomicU64| c.load(Ordering::Relaxed);
    match target {
        "jsonpath" => format!(
            "{} paths parsed, {} of them over budget",
            n(&PATHS_PARSED),
            n(&PATHS_OVER_BUDGET)
        ),
        "events" => format!("{} valid events", n(&EVENTS_VALID)),
        "manifests" => format!(
            "{} of the loads got past YAML to the schema and compile checks",
            n(&MANIFESTS_PARSED)
        ),
        _ => String::new(),
    }
}

/// The evaluator: a path either does not parse or selects within its budget, and what it
/// saw is described within bounds.
pub(super) fn check_jsonpath(bytes: &[u8]) -> Result<(), String> {
    let text = String::from_utf8_lossy(bytes);
    let (path, doc) = text.split_once('\n').unwrap_or((&text, "null"));
    let doc: Value = serde_json::from_str(doc).unwrap_or(Value::Null);
    let Ok(mut path) = JsonPath::parse(path) else {
        return Ok(());
    };
    // Small, so generated documents of a few hundred nodes reach it.
    const BUDGET: usize = 1_000;
    path.set_budget(BUDGET);
    PATHS_PARSED.fetch_add(1, Ordering::Relaxed);
    let started = Instant::now();
    let selected = path.select(&doc);
    if selected.is_err() {
        PATHS_OVER_BUDGET.fetch_add(1, Ordering::Relaxed);
    }
    if let Ok(nodes) = selected {
        if nodes.len() > BUDGET {
            return Err(format!("{} nodes selected, over the budget", nodes.len()));
        }
        let saw = pap::stages::filter::describe_saw(&nodes);
        if saw.chars().count() > 121 {
            return Err(format!(
                "a described value of {} characters",
                saw.chars().count()
            ));
        }
    }
    within(Duration::from_millis(500), started, "one evaluation")
}

const VALID_AGENT: &str = "pap_version: \"0.2\"\nagent:\n  id: a\n  risk_level: low\n  model:\n    provider: command\n    command: [\"cat\"]\n";
const VALID_TRIGGER: &str =
    "pap_version: \"0.2\"\ntrigger:\n  id: t\n  match:\n    type: a.b.crossed\n  agent: a\n";

/// The loader: the YAML as a trigger, as an agent and as pap.yaml, each beside valid files;
/// it loads (with or without diagnostics) in bounded time, and its report renders.
pub(super) fn check_manifests(bytes: &[u8]) -> Result<(), String> {
    let started = Instant::now();
    for slot in ["triggers/x.yaml", "agents/x.yaml", "pap.yaml"] {
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let root = dir.path();
        for sub in ["triggers", "agents"] {
            std::fs::create_dir(root.join(sub)).map_err(|e| e.to_string())?;
        }
        std::fs::write(root.join("agents/a.yaml"), VALID_AGENT).map_err(|e| e.to_string())?;
        std::fs::write(root.join("triggers/t.yaml"), VALID_TRIGGER).map_err(|e| e.to_string())?;
        std::fs::write(root.join(slot), bytes).map_err(|e| e.to_string())?;
        let loaded = pap::manifest::loader::load(root, &[]);
        let shown = pap::diagnostics::render_human(
            &loaded.diagnostics,
            |f| loaded.sources.get(f).map(String::as_str),
            pap::diagnostics::HumanStyle { color: false },
        );
        let parsed = !loaded.diagnostics.iter().any(|d| {
            d.file == slot && matches!(d.code, "yaml-syntax" | "duplicate-key" | "unreadable-file")
        });
        if parsed {
            MANIFESTS_PARSED.fetch_add(1, Ordering::Relaxed);
        }
        if loaded.project.is_some()
            && loaded
                .diagnostics
                .iter()
                .any(|d| d.severity == pap::diagnostics::Severity::Error)
        {
            return Err(format!("a project with errors was accepted:\n{shown}"));
        }
    }
    within(Duration::from_secs(3), started, "three loads")
}
