//! Loading a project: find the manifest files, read each into a located tree, check its shape,
//! compile it, then run the checks that span files (duplicate ids, agent references, cascade
//! loops). `lint`, `dispatch` and `serve` all load through here.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use serde::de::DeserializeOwned;
use serde_json::Value;

use super::cascade_graph;
use super::compile_agent::{self, AgentEnv};
use super::compile_config;
use super::compile_schedule;
use super::compile_trigger::{self, AgentIds};
use super::compiled::{Agent, Config, Project, Schedule, Trigger};
use super::discover::{self, Found};
use super::file_ctx::{FileCtx, HelpExt};
use super::raw::{AgentFile, ProjectConfig, ScheduleFile, TriggerFile};
use super::schema_check;
use super::yaml_tree::{self, Located, Node, PathSeg};
use crate::diagnostics::{self, Diagnostic, Severity};
use crate::path;

/// The result of loading: the project when there is no error, and everything found.
pub struct Loaded {
    pub project: Option<Project>,
    /// pap.yaml's settings when pap.yaml itself is sound, even if other manifests are not:
    /// commands that only read the state need no more (it may name the state dir).
    pub config: Option<Config>,
    pub diagnostics: Vec<Diagnostic>,
    /// Every file read, by display name (relative to the root), with its text for snippets.
    pub sources: BTreeMap<String, String>,
}

impl Loaded {
    /// The error diagnostics (warnings left out).
    pub fn errors(&self) -> Vec<Diagnostic> {
        self.diagnostics
            .iter()
            .filter(|d| d.severity == Severity::Error)
            .cloned()
            .collect()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Kind {
    Config,
    Trigger,
    Agent,
    Schedule,
}

struct SourceFile {
    display: String,
    kind: Option<Kind>,
    tree: Option<Located<Node>>,
}

pub(crate) const CONFIG_FILE: &str = "pap.yaml";

/// The JSON Schemas of the three manifest kinds, generated once from the raw types.
pub fn schema(kind: &str) -> Option<&'static Value> {
    static SCHEMAS: OnceLock<[Value; 4]> = OnceLock::new();
    let [trigger, agent, config, schedule] = SCHEMAS.get_or_init(|| {
        let to_value = |s: schemars::Schema| serde_json::to_value(s).expect("schemas serialise");
        [
            to_value(schemars::schema_for!(TriggerFile)),
            to_value(schemars::schema_for!(AgentFile)),
            to_value(schemars::schema_for!(ProjectConfig)),
            to_value(schemars::schema_for!(ScheduleFile)),
        ]
    });
    match kind {
        "trigger" => Some(trigger),
        "agent" => Some(agent),
        "config" => Some(config),
        "schedule" => Some(schedule),
        _ => None,
    }
}

/// How a file is named in diagnostics: relative to the root with `/`, else as given.
pub fn display_name(root: &Path, path: &Path) -> String {
    let rel = path.strip_prefix(root).unwrap_or(path);
    let text = rel.to_string_lossy().replace('\\', "/");
    text.strip_prefix("./").map(str::to_string).unwrap_or(text)
}

/// Loads the project at `root`, plus `extra` files (from `pap lint PATH...`) outside it.
pub fn load(root: &Path, extra: &[PathBuf]) -> Loaded {
    let follow = discover::config_follows_symlinks(root);
    let mut found = discover::discover(root, follow);
    let canonical = root.canonicalize().unwrap_or_else(|_| root.to_path_buf());
    let rules = discover::Rules {
        root: &canonical,
        follow_outside: follow,
    };
    for p in extra {
        if !found.iter().any(|f| f.path() == p) {
            found.push(discover::check_file(p, rules));
        }
    }
    let mut diags = Vec::new();
    let mut paths = Vec::new();
    for f in found {
        match f {
            Found::File(path) => paths.push(path),
            Found::Refused { path, why } => diags.push(
                Diagnostic::new(
                    "unreadable-file",
                    &display_name(root, &path),
                    crate::diagnostics::Pos::START,
                    why,
                )
                .with_help("pap reads manifests from regular files inside the project only; nothing of this one was read"),
            ),
        }
    }
    let config_path = paths
        .iter()
        .find(|p| p.parent() == Some(root) && is_config_name(p))
        .cloned();

    let mut sources = BTreeMap::new();
    let mut files = Vec::new();
    for path in &paths {
        let display = display_name(root, path);
        let is_config = Some(path) == config_path.as_ref();
        let file = read_file(path, &display, is_config, &mut diags, &mut sources);
        files.push(file);
    }

    // pap.yaml first: agents need its server names.
    let mut config = Config::default();
    let mut schedules: Vec<Schedule> = Vec::new();
    // Where each schedule's id is, to point at duplicates and unmatched types.
    let mut schedule_at: Vec<(String, Vec<PathSeg>, &Located<Node>)> = Vec::new();
    let mut schedule_seen: HashMap<String, String> = HashMap::new();
    let mut servers: Option<BTreeSet<String>> = Some(BTreeSet::new());
    for f in files.iter().filter(|f| f.kind == Some(Kind::Config)) {
        let Some(tree) = &f.tree else {
            servers = None;
            continue;
        };
        servers = server_names(tree);
        if let Some(raw) = convert::<ProjectConfig>(f, "config", &mut diags) {
            let mut ctx = FileCtx {
                file: &f.display,
                tree,
                diags: &mut diags,
            };
            config = compile_config::compile(&raw, &mut ctx, &canonical);
            for (i, raw) in raw.schedules.iter().enumerate() {
                let base = path!["schedules", i];
                if let Some(s) = compile_one_schedule(raw, &base, &mut ctx, &mut schedule_seen) {
                    schedule_at.push((f.display.clone(), base.to_vec(), tree));
                    schedules.push(s);
                }
            }
        }
    }
    for f in files.iter().filter(|f| f.kind == Some(Kind::Schedule)) {
        let Some(tree) = &f.tree else { continue };
        let Some(raw) = convert::<ScheduleFile>(f, "schedule", &mut diags) else {
            continue;
        };
        let mut ctx = FileCtx {
            file: &f.display,
            tree,
            diags: &mut diags,
        };
        let base = path!["schedule"];
        if let Some(s) = compile_one_schedule(&raw.schedule, &base, &mut ctx, &mut schedule_seen) {
            schedule_at.push((f.display.clone(), base.to_vec(), tree));
            schedules.push(s);
        }
    }

    // Agents, then triggers (which resolve agent ids).
    let mut agents: Vec<Agent> = Vec::new();
    let mut agent_ids: AgentIds = HashMap::new();
    let mut first_seen: HashMap<(Kind, String), String> = HashMap::new();
    let mut agent_trees: Vec<&Located<Node>> = Vec::new();
    for f in files.iter().filter(|f| f.kind == Some(Kind::Agent)) {
        let Some(tree) = &f.tree else { continue };
        let id = tree_id(tree, "agent");
        let duplicate = id
            .as_ref()
            .is_some_and(|id| is_duplicate(Kind::Agent, id, f, tree, &mut first_seen, &mut diags));
        if let Some(id) = id.as_ref().filter(|_| !duplicate) {
            agent_ids.insert(id.clone(), None);
        }
        let Some(raw) = convert::<AgentFile>(f, "agent", &mut diags) else {
            continue;
        };
        let env = AgentEnv {
            root,
            servers: servers.as_ref(),
        };
        let mut ctx = FileCtx {
            file: &f.display,
            tree,
            diags: &mut diags,
        };
        // A duplicate still gets its own checks, but only the first definition is used.
        if let Some(agent) = compile_agent::compile(&raw.agent, &mut ctx, &env)
            && !duplicate
        {
            agent_ids.insert(agent.id.clone(), Some(agents.len()));
            agents.push(agent);
            agent_trees.push(tree);
        }
    }

    check_route_agents(&agents, &agent_trees, &agent_ids, &mut diags);
    super::budget_check::check(&agents, &agent_trees, &config.prices, &mut diags);

    let mut triggers: Vec<Trigger> = Vec::new();
    let mut trigger_at: Vec<(&str, &Located<Node>)> = Vec::new();
    for f in files.iter().filter(|f| f.kind == Some(Kind::Trigger)) {
        let Some(tree) = &f.tree else { continue };
        let duplicate = tree_id(tree, "trigger").is_some_and(|id| {
            is_duplicate(Kind::Trigger, &id, f, tree, &mut first_seen, &mut diags)
        });
        let Some(raw) = convert::<TriggerFile>(f, "trigger", &mut diags) else {
            continue;
        };
        let mut ctx = FileCtx {
            file: &f.display,
            tree,
            diags: &mut diags,
        };
        if let Some(trigger) = compile_trigger::compile(&raw.trigger, &mut ctx, &agent_ids)
            && !duplicate
        {
            triggers.push(trigger);
            trigger_at.push((&f.display, tree));
        }
    }
    check_id_suffixes(&triggers, &trigger_at, &mut diags);
    super::cancel_check::check(&triggers, &trigger_at, &config.adapters, &mut diags);
    for trigger in &mut triggers {
        set_budgets(trigger, config.jsonpath_max_nodes);
    }
    for key in agents
        .iter_mut()
        .filter_map(|a| a.concurrency.as_mut().and_then(|c| c.key.as_mut()))
    {
        key.set_budget(config.jsonpath_max_nodes);
    }

    for (s, (file, base, tree)) in schedules.iter().zip(&schedule_at) {
        let matched = triggers
            .iter()
            .any(|t| t.enabled && t.pattern.matches(&s.event_type));
        if s.enabled && !matched {
            let mut at = base.clone();
            at.extend(path!["event", "type"]);
            diags.push(
                Diagnostic::new(
                    "schedule-unmatched",
                    file,
                    tree.locate(&at),
                    format!(
                        "schedule `{}` emits `{}`, which no enabled trigger matches: its events would provoke nothing",
                        s.id, s.event_type
                    ),
                )
                .with_help("add a trigger with this `match.type`, or fix the type"),
            );
        }
    }
    report_cycles(
        &agents,
        &triggers,
        &agent_trees,
        config.max_cascade_depth,
        &mut diags,
    );
    if files.is_empty() {
        diags.push(Diagnostic::new(
            "no-manifests",
            ".",
            crate::diagnostics::Pos::START,
            "no manifests found: expected pap.yaml, triggers/**/*.yaml and agents/**/*.yaml under the root",
        ));
    }
    diagnostics::sort(&mut diags);
    let ok = !diags.iter().any(|d| d.severity == Severity::Error);
    let config_name = config_path.as_ref().map(|p| display_name(root, p));
    let config_ok = !diags
        .iter()
        .any(|d| d.severity == Severity::Error && Some(&d.file) == config_name.as_ref());
    Loaded {
        config: config_ok.then(|| config.clone()),
        project: ok.then(|| {
            let lookup = |name: &str| std::env::var(name).ok();
            let redactor = super::secrets::redactor_for(&config, &agents, &lookup);
            Project {
                root: root.to_path_buf(),
                config,
                triggers,
                agents,
                schedules,
                redactor: std::sync::Arc::new(redactor),
            }
        }),
        diagnostics: diags,
        sources,
    }
}

/// Every path a trigger evaluates over events gets the project's node budget.
fn set_budgets(trigger: &mut Trigger, max_nodes: usize) {
    for c in &mut trigger.filter {
        c.path.set_budget(max_nodes);
    }
    let debounce_key = trigger
        .debounce
        .as_mut()
        .and_then(|d| d.window_key.as_mut());
    let concurrency_key = trigger.concurrency.as_mut().and_then(|c| c.key.as_mut());
    let cancel_key = trigger.cancel_on.as_mut().map(|c| &mut c.key);
    for key in trigger
        .throttles
        .iter_mut()
        .filter_map(|t| t.window_key.as_mut())
        .chain(debounce_key)
        .chain(concurrency_key)
        .chain(cancel_key)
    {
        key.set_budget(max_nodes);
    }
}

/// PAP's idempotency key hashes the event id and the trigger id with nothing between them,
/// so when one trigger id ends with another (`tx`, `x`) two different pairs share a key
/// (`e1`+`tx`, `e1t`+`x`). pap tells them apart, but a reader of the keys may not.
fn check_id_suffixes(
    triggers: &[Trigger],
    at: &[(&str, &Located<Node>)],
    diags: &mut Vec<Diagnostic>,
) {
    for (long, (file, tree)) in triggers.iter().zip(at) {
        for short in triggers {
            if short.id.len() < long.id.len() && long.id.ends_with(short.id.as_str()) {
                let head = &long.id[..long.id.len() - short.id.len()];
                diags.push(
                    Diagnostic::new(
                        "trigger-id-suffix",
                        file,
                        tree.locate(&path!["trigger", "id"]),
                        format!(
                            "trigger id `{}` ends with trigger id `{}`: PAP's idempotency key is the same for event `e1` with `{}` and event `e1{head}` with `{}`",
                            long.id, short.id, long.id, short.id
                        ),
                    )
                    .with_help("pap keeps such pairs apart, but other tools reading the keys may not: a separator-free suffix is best avoided (rename one trigger)"),
                );
            }
        }
    }
}

/// A `notify` route's `agent` must name an agent of the project.
fn check_route_agents(
    agents: &[Agent],
    trees: &[&Located<Node>],
    known: &AgentIds,
    diags: &mut Vec<Diagnostic>,
) {
    for (agent, tree) in agents.iter().zip(trees) {
        for (kind, route) in &agent.notify {
            let Some(name) = &route.agent else { continue };
            if known.contains_key(name) {
                continue;
            }
            let hint = diagnostics::did_you_mean(name, known.keys().map(String::as_str));
            let mut d = Diagnostic::new(
                "unknown-agent",
                &agent.file,
                tree.locate(&path!["agent", "notify", kind.key(), "agent"]),
                format!(
                    "`notify.{}.agent` names `{name}`, which no agent manifest defines",
                    kind.key()
                ),
            );
            if let Some(h) = hint {
                d = d.with_help(h);
            }
            diags.push(d);
        }
    }
}

fn is_config_name(p: &Path) -> bool {
    matches!(
        p.file_name().and_then(|n| n.to_str()),
        Some("pap.yaml" | "pap.yml")
    )
}

fn read_file(
    path: &Path,
    display: &str,
    is_config: bool,
    diags: &mut Vec<Diagnostic>,
    sources: &mut BTreeMap<String, String>,
) -> SourceFile {
    let mut file = SourceFile {
        display: display.to_string(),
        kind: is_config.then_some(Kind::Config),
        tree: None,
    };
    let Some(tree) = read_yaml(path, display, diags, sources) else {
        // A broken pap.yaml still counts as the config (its server names are unknown).
        return file;
    };
    if !is_config {
        file.kind = classify(&tree, path);
        if file.kind.is_none() {
            diags.push(
                Diagnostic::new(
                    "unknown-manifest-kind",
                    display,
                    tree.pos,
                    "not a manifest: expected a top-level `trigger:` or `agent:` mapping",
                )
                .with_help("trigger manifests live in triggers/, agent manifests in agents/, project settings in pap.yaml"),
            );
        }
    }
    file.tree = Some(tree);
    file
}

/// Reads and parses a YAML file into its located tree, keeping its text in `sources` for
/// snippets; what stands in the way is one diagnostic (`unreadable-file`, `yaml-syntax`,
/// `duplicate-key`).
pub fn read_yaml(
    path: &Path,
    display: &str,
    diags: &mut Vec<Diagnostic>,
    sources: &mut BTreeMap<String, String>,
) -> Option<Located<Node>> {
    let text = match read_regular(path) {
        Ok(bytes) => match String::from_utf8(bytes) {
            Ok(text) => text,
            Err(_) => {
                diags.push(Diagnostic::new(
                    "unreadable-file",
                    display,
                    crate::diagnostics::Pos::START,
                    "the file is not UTF-8 text",
                ));
                return None;
            }
        },
        Err(e) => {
            diags.push(Diagnostic::new(
                "unreadable-file",
                display,
                crate::diagnostics::Pos::START,
                format!("cannot read the file: {e}"),
            ));
            return None;
        }
    };
    let parsed = yaml_tree::parse(&text);
    sources.insert(display.to_string(), text);
    match parsed {
        Ok(tree) => Some(tree),
        Err(e) => {
            let code = if e.duplicate_key {
                "duplicate-key"
            } else {
                "yaml-syntax"
            };
            diags.push(Diagnostic::new(code, display, e.pos, e.message));
            None
        }
    }
}

/// A file's bytes, if it is (still) a regular file: a FIFO swapped in since discovery must
/// not hang the load. Discovery vetted where links lead.
pub(crate) fn read_regular(path: &Path) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let mut file = crate::regular_file::open(path, crate::regular_file::Links::Follow)?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// A file's kind comes from its content (`trigger:`/`agent:`), else from its folder.
fn classify(tree: &Located<Node>, path: &Path) -> Option<Kind> {
    if tree.value.get("trigger").is_some() {
        return Some(Kind::Trigger);
    }
    if tree.value.get("agent").is_some() {
        return Some(Kind::Agent);
    }
    if tree.value.get("schedule").is_some() {
        return Some(Kind::Schedule);
    }
    let in_dir = |name: &str| path.components().any(|c| c.as_os_str() == name);
    if in_dir("triggers") {
        Some(Kind::Trigger)
    } else if in_dir("agents") {
        Some(Kind::Agent)
    } else if in_dir("schedules") {
        Some(Kind::Schedule)
    } else {
        None
    }
}

/// Checks a file's shape against its schema and converts it. Problems other than unknown fields
/// stop the conversion (the file's meaning is unclear); unknown fields do not.
fn convert<T: DeserializeOwned>(
    f: &SourceFile,
    kind: &str,
    diags: &mut Vec<Diagnostic>,
) -> Option<T> {
    let tree = f.tree.as_ref()?;
    let schema = schema(kind).expect("known kind");
    let problems = schema_check::check(tree, schema, &f.display);
    let blocking = problems
        .iter()
        .any(|d| d.severity == Severity::Error && d.code != "unknown-field");
    diags.extend(problems);
    if blocking {
        return None;
    }
    match serde_json::from_value(tree.value.to_json()) {
        Ok(raw) => Some(raw),
        Err(e) => {
            // The schema and serde agree by construction; if they ever do not, say so plainly.
            diags.push(Diagnostic::new(
                "wrong-type",
                &f.display,
                tree.pos,
                format!("cannot read the manifest: {e}"),
            ));
            None
        }
    }
}

/// `trigger.id` / `agent.id` read straight from the tree, so even a broken file takes part in
/// the duplicate check and keeps triggers that name it from being reported as unknown.
fn tree_id(tree: &Located<Node>, section: &str) -> Option<String> {
    tree.value
        .get(section)?
        .value
        .get("id")?
        .value
        .as_str()
        .map(str::to_string)
}

fn server_names(tree: &Located<Node>) -> Option<BTreeSet<String>> {
    match tree.value.get("mcp_servers").map(|n| &n.value) {
        None | Some(Node::Null) => Some(BTreeSet::new()),
        Some(Node::Map(entries)) => Some(entries.iter().map(|(k, _)| k.value.clone()).collect()),
        Some(_) => None,
    }
}

/// Compiles a schedule and checks its id is unique across pap.yaml and schedules/.
fn compile_one_schedule(
    raw: &super::raw::Schedule,
    base: &[PathSeg],
    ctx: &mut FileCtx,
    seen: &mut HashMap<String, String>,
) -> Option<Schedule> {
    let schedule = compile_schedule::compile(raw, base, ctx)?;
    let mut at = base.to_vec();
    at.push(PathSeg::from("id"));
    let pos = ctx.tree.locate(&at);
    let here = format!("{}:{}:{}", ctx.file, pos.line, pos.column);
    if let Some(first) = seen.get(&schedule.id) {
        ctx.at(
            "duplicate-id",
            &at,
            format!(
                "schedule id `{}` is defined twice: at {first} and at {here}",
                schedule.id
            ),
        )
        .help("schedule ids must be unique across the project (they name the events it emits)");
        return None;
    }
    seen.insert(schedule.id.clone(), here);
    Some(schedule)
}

fn is_duplicate(
    kind: Kind,
    id: &str,
    f: &SourceFile,
    tree: &Located<Node>,
    first_seen: &mut HashMap<(Kind, String), String>,
    diags: &mut Vec<Diagnostic>,
) -> bool {
    let section = if kind == Kind::Trigger {
        "trigger"
    } else {
        "agent"
    };
    let at = path![section, "id"];
    let pos = tree.locate(&at);
    let here = format!("{}:{}:{}", f.display, pos.line, pos.column);
    match first_seen.get(&(kind, id.to_string())) {
        Some(first) => {
            diags.push(
                Diagnostic::new(
                    "duplicate-id",
                    &f.display,
                    pos,
                    format!("{section} id `{id}` is defined twice: at {first} and at {here}"),
                )
                .with_help(format!("{section} ids must be unique across the project")),
            );
            true
        }
        None => {
            first_seen.insert((kind, id.to_string()), here);
            false
        }
    }
}

fn report_cycles(
    agents: &[Agent],
    triggers: &[Trigger],
    agent_trees: &[&Located<Node>],
    depth: u32,
    diags: &mut Vec<Diagnostic>,
) {
    let edges = cascade_graph::edges(agents, triggers);
    for cycle in cascade_graph::cycles(agents.len(), &edges) {
        let first = &cycle[0];
        let agent = &agents[first.from];
        let mut text = String::new();
        for edge in &cycle {
            text.push_str(&format!(
                "agent `{}` emits `{}` → trigger `{}` → ",
                agents[edge.from].id, edge.event_type, triggers[edge.trigger].id
            ));
        }
        text.push_str(&format!("agent `{}`", agents[first.from].id));
        let pos = agent_trees[first.from].locate(&emit_path(agent, &first.event_type));
        diags.push(
            Diagnostic::new("cascade-cycle", &agent.file, pos, format!("cascade loop: {text}"))
                .with_help(format!(
                    "at run time the depth limit ({depth}) stops the loop; break it unless the repetition is intended"
                )),
        );
    }
}

/// Where an agent declares an emitted type, for pointing at it.
fn emit_path(agent: &Agent, event_type: &str) -> Vec<PathSeg> {
    if agent.on_complete_emit.as_deref() == Some(event_type) {
        return path!["agent", "on_complete", "emit_event"].to_vec();
    }
    if agent.on_failure_emit.as_deref() == Some(event_type) {
        return path!["agent", "on_failure", "emit_event"].to_vec();
    }
    match agent.emits.iter().position(|t| t == event_type) {
        Some(i) => path!["agent", "emits", i].to_vec(),
        None => path!["agent", "id"].to_vec(),
    }
}
