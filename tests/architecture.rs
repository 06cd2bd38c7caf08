//! The layers, as a test: which top-level modules of `src/` may not name which, read from the
//! `crate::` paths in the code (`use crate::x::…`, `use crate::{x, …}` and inline paths;
//! comment lines are skipped). Cross-module references in this codebase go through `crate::`,
//! so a `super::` path cannot cross a top-level module.
//!
//! `FORBIDDEN` are rules the code keeps: any reference fails; so is any reference to the
//! top (the command line, the commands, the composition root) from below it (`TOP`), and any
//! reference to a concrete store from outside the composition root and the store commands
//! (`STORES`). The rules between
//! crates (the domain at the ground, the storage interface naming no store, JSONPath below
//! the stages, `pap-supervise` on std and nix only) are cargo's to hold
//! (`tests/workspace.rs`). A file's
//! `#[cfg(test)] mod tests` is not read: unit tests may use the real store below them.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// (the module that may not name, the module it may not name, why).
const FORBIDDEN: &[(&str, &str, &str)] = &[
    (
        "serve",
        "cli",
        "serve does not know the command line: the CLI maps its flags onto serve's types",
    ),
    (
        "manifest",
        "pgstore",
        "the manifest checks `store:` with crate::database_url, the leaf the PostgreSQL store parses with too",
    ),
    (
        "clock",
        "storage",
        "the clock is below the store: composition::clock_for gives a process its store's clock",
    ),
];

/// The top of the program: the command line (`cli`), the commands (`cmd`) and the composition
/// root that opens their store (`composition`). Only they and the binary's `main` may name
/// them; what other surfaces share with the commands (the contract's JSON) lives in `views`,
/// and what serve or `pap test` needs of a store is handed to them.
const TOP: &[&str] = &["cli", "cmd", "composition"];
const TOP_FILES: &[&str] = &["src/cli.rs", "src/main.rs", "src/lib.rs"];

/// The source folders read: the root package's and the engine's (a crate of its own: what it
/// may not name across crates, cargo refuses, and its own modules' rules are read here). Module names are unique across the two.
pub(crate) const SOURCES: &[&str] = &["src", "crates/pap-engine/src"];

/// The stores (redb, PostgreSQL): only the composition root picks and opens one, and only the
/// commands that administer a store by kind (`pap store migrate`, `compact`, `copy`) and the
/// stores themselves name them. Unit tests below may use the real store (`#[cfg(test)]
/// modules are not read).
const STORES: &[&str] = &["store", "pgstore"];
const MAY_NAME_STORES: &[&str] = &["composition", "cmd", "store", "pgstore"];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The top-level module a file belongs to (`src/serve/log.rs` → `serve`).
fn module_of(path: &str) -> &str {
    let relative = SOURCES
        .iter()
        .find_map(|src| path.strip_prefix(&format!("{src}/")))
        .unwrap_or(path);
    let first = relative.split('/').next().unwrap_or(relative);
    first.strip_suffix(".rs").unwrap_or(first)
}

/// The top-level modules a line names through `crate::`.
fn named_modules(line: &str, into: &mut BTreeSet<String>) {
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect()
    };
    let mut rest = line;
    while let Some(at) = rest.find("crate::") {
        let after = &rest[at + "crate::".len()..];
        if let Some(group) = after.strip_prefix('{') {
            // `crate::{a::b, c}`: the first name of each item (nested groups are rare here).
            let end = group.find('}').unwrap_or(group.len());
            for item in group[..end].split(',') {
                let name = ident(item.trim());
                if !name.is_empty() {
                    into.insert(name);
                }
            }
        } else {
            let name = ident(after);
            if !name.is_empty() {
                into.insert(name);
            }
        }
        rest = after;
    }
}

/// For each file of [`SOURCES`] (its path from the workspace root), the top-level modules it
/// names.
fn references() -> BTreeMap<String, BTreeSet<String>> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for src in SOURCES {
        rust_files(&root.join(src), &mut files);
    }
    let test_only = test_only_files(&files);
    let mut out = BTreeMap::new();
    for file in files {
        // A module compiled for tests only (`#[cfg(test)] mod test_server;`) is read as a
        // file's unit tests are: not at all.
        if test_only.contains(&file) {
            continue;
        }
        let relative = file
            .strip_prefix(root)
            .unwrap()
            .to_string_lossy()
            .replace('\\', "/");
        let text = std::fs::read_to_string(&file).unwrap();
        let mut named = BTreeSet::new();
        let mut lines = text.lines().peekable();
        while let Some(line) = lines.next() {
            // A file's unit tests (`#[cfg(test)] mod tests { … }`, at its end) may use what
            // is below and beside it: the real store, say. They are not read.
            if line.trim() == "#[cfg(test)]"
                && lines
                    .peek()
                    .is_some_and(|next| next.trim_start().starts_with("mod tests"))
            {
                break;
            }
            if !line.trim_start().starts_with("//") {
                named_modules(line, &mut named);
            }
        }
        out.insert(relative, named);
    }
    out
}

/// The files of modules declared under `#[cfg(test)]` (`#[cfg(test)]` then `mod name;`):
/// `name.rs` or `name/mod.rs` beside the declaring `mod.rs` or `lib.rs`, or under the
/// declaring file's own folder.
fn test_only_files(files: &[PathBuf]) -> BTreeSet<PathBuf> {
    let mut out = BTreeSet::new();
    for file in files {
        let text = std::fs::read_to_string(file).unwrap();
        let mut lines = text.lines().peekable();
        while let Some(line) = lines.next() {
            if line.trim() != "#[cfg(test)]" {
                continue;
            }
            let Some(name) = lines
                .peek()
                .and_then(|next| next.trim().strip_prefix("mod "))
                .and_then(|rest| rest.strip_suffix(';'))
            else {
                continue;
            };
            let stem = file.file_stem().unwrap().to_string_lossy();
            let dir = if stem == "mod" || stem == "lib" || stem == "main" {
                file.parent().unwrap().to_path_buf()
            } else {
                file.with_extension("")
            };
            out.insert(dir.join(format!("{name}.rs")));
            out.insert(dir.join(name).join("mod.rs"));
        }
    }
    out
}

/// The engine's modules (`crates/pap-engine/src`), lowest first: each may name only the ones
/// before it (and the crates below the engine). ARCHITECTURE.md gives the same order, with
/// what each floor holds.
pub(crate) const ENGINE_ORDER: &[&str] = &[
    // The ground: no other module of the engine.
    "clock",
    "error_text",
    "event_type",
    "http_client",
    "interpolate",
    "reason",
    "regular_file",
    "program",
    "redact",
    // Reading what comes in.
    "diagnostics",
    "telemetry",
    "event",
    "template",
    "adapter",
    "manifest",
    // Deciding, and what a decision or a run produces.
    "schedule",
    "command",
    "emit",
    "stages",
    "views",
    "notify",
    "chat",
    "control",
    "pipeline",
    // Running, and a stream of events.
    "agent",
    "dispatcher",
];

/// The engine's files: their top module is in [`ENGINE_ORDER`].
fn engine_file(file: &str) -> bool {
    file.starts_with("crates/pap-engine/src/") && file != "crates/pap-engine/src/lib.rs"
}

/// Whether a file's module (of the engine) may name module `to`: a module of the engine
/// before it in [`ENGINE_ORDER`], or anything that is not one of the engine's (a crate below).
fn engine_may_name(from: &str, to: &str) -> bool {
    let place = |m: &str| ENGINE_ORDER.iter().position(|x| *x == m);
    match (place(from), place(to)) {
        (Some(f), Some(t)) => t < f,
        _ => true,
    }
}

fn breaking(refs: &BTreeMap<String, BTreeSet<String>>, from: &str, to: &str) -> BTreeSet<String> {
    refs.iter()
        .filter(|(file, named)| module_of(file) == from && named.contains(to))
        .map(|(file, _)| file.clone())
        .collect()
}

#[test]
fn no_module_names_one_its_layer_forbids() {
    let refs = references();
    assert!(
        refs.len() > 100,
        "read only {} files of {SOURCES:?}: is the walk broken?",
        refs.len()
    );
    let mut broken = Vec::new();
    for (from, to, why) in FORBIDDEN {
        for file in breaking(&refs, from, to) {
            broken.push(format!("{file} names crate::{to}: {why}"));
        }
    }
    assert!(
        broken.is_empty(),
        "layer rules broken:\n{}",
        broken.join("\n")
    );
}

#[test]
fn only_the_commands_name_the_command_line_and_the_commands() {
    let refs = references();
    let mut broken = Vec::new();
    for (file, named) in &refs {
        if module_of(file) == "cmd" || TOP_FILES.contains(&file.as_str()) {
            continue;
        }
        for top in TOP {
            if named.contains(*top) {
                broken.push(format!(
                    "{file} names crate::{top}: below the commands, share through crate::views or the module's own types"
                ));
            }
        }
    }
    assert!(broken.is_empty(), "{}", broken.join("\n"));
}

#[test]
fn only_the_composition_root_and_the_store_commands_name_a_store() {
    let refs = references();
    let mut broken = Vec::new();
    for (file, named) in &refs {
        let module = module_of(file);
        if MAY_NAME_STORES.contains(&module) || TOP_FILES.contains(&file.as_str()) {
            continue;
        }
        for store in STORES {
            if named.contains(*store) {
                broken.push(format!(
                    "{file} names crate::{store}: work on the Arc<dyn Storage> handed down from crate::composition"
                ));
            }
        }
    }
    assert!(broken.is_empty(), "{}", broken.join("\n"));
}

#[test]
fn the_reader_sees_grouped_and_inline_paths() {
    let mut named = BTreeSet::new();
    named_modules(
        "use crate::{cli::LogFormat, serve}; let x = crate::stages::filter::f();",
        &mut named,
    );
    assert_eq!(
        named,
        ["cli", "serve", "stages"]
            .into_iter()
            .map(String::from)
            .collect()
    );
    assert_eq!(module_of("serve/log.rs"), "serve");
    assert_eq!(module_of("clock.rs"), "clock");
}

#[test]
fn modules_compiled_for_tests_only_are_found_and_others_are_not() {
    let dir = tempfile::tempdir().unwrap();
    let serve = dir.path().join("serve");
    std::fs::create_dir_all(&serve).unwrap();
    let module = serve.join("mod.rs");
    std::fs::write(
        &module,
        "mod intake;\n#[cfg(test)]\nmod test_server;\n#[cfg(test)]\nmod tests {\n}\n",
    )
    .unwrap();
    let found = test_only_files(&[module]);
    assert!(found.contains(&serve.join("test_server.rs")), "{found:?}");
    assert!(!found.contains(&serve.join("intake.rs")), "{found:?}");
    assert!(!found.iter().any(|f| f.ends_with("tests.rs")), "{found:?}");
}

/// The engine calls downward only: no module of it names one above it in [`ENGINE_ORDER`],
/// so no circle can form between its modules, and every module has its place.
#[test]
fn the_engine_s_modules_name_only_those_below_them() {
    let refs = references();
    let mut broken = Vec::new();
    let mut unplaced = BTreeSet::new();
    for (file, named) in refs.iter().filter(|(f, _)| engine_file(f)) {
        let from = module_of(file);
        if !ENGINE_ORDER.contains(&from) {
            unplaced.insert(from.to_owned());
            continue;
        }
        for to in named {
            if to != from && !engine_may_name(from, to) {
                broken.push(format!(
                    "{file} ({from}) names crate::{to}, which is above it (tests/architecture.rs ENGINE_ORDER; ARCHITECTURE.md)"
                ));
            }
        }
    }
    assert!(
        unplaced.is_empty(),
        "engine modules with no place in ENGINE_ORDER: {unplaced:?}"
    );
    assert!(broken.is_empty(), "{}", broken.join("\n"));
    // The rule itself: down is allowed, up is not, and a crate below is anyone's.
    assert!(engine_may_name("pipeline", "control"));
    assert!(!engine_may_name("control", "pipeline"));
    assert!(engine_may_name("stages", "domain"));
}

/// Errors cross a module boundary typed: no `pub fn` (visible outside its crate) returns
/// `Result<_, String>`. A `pub(crate)` helper may (an internal `*_reason` one, wrapped in a
/// typed error by its caller).
#[test]
fn no_public_function_returns_an_error_as_a_string() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    for entry in std::fs::read_dir(root.join("crates")).unwrap() {
        let src = entry.unwrap().path().join("src");
        if src.is_dir() {
            rust_files(&src, &mut files);
        }
    }
    let mut found = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        // Unit tests at the file's end are not read.
        let text = text.split("\n#[cfg(test)]\nmod tests").next().unwrap_or("");
        let mut rest = text;
        while let Some(at) = rest.find("pub fn ") {
            let start = at;
            // Plain `pub` only: `pub(crate) fn` does not contain `pub fn `.
            let signature: String = rest[start..]
                .chars()
                .take_while(|c| *c != '{' && *c != ';')
                .collect();
            let returns = signature.split("->").nth(1).unwrap_or("");
            let compact: String = returns.split_whitespace().collect();
            if compact.starts_with("Result<") && compact.ends_with(",String>") {
                let name = signature["pub fn ".len()..]
                    .split(['(', '<'])
                    .next()
                    .unwrap_or("?");
                found.push(format!(
                    "{}: pub fn {name} returns Result<_, String>",
                    file.strip_prefix(root).unwrap().display()
                ));
            }
            rest = &rest[start + "pub fn ".len()..];
        }
    }
    assert!(found.is_empty(), "{}", found.join("\n"));
}
