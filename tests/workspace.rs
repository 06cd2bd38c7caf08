//! The crate graph, from `cargo metadata`: every crate of the workspace has its place in
//! [`LAYERS`] (the order ARCHITECTURE.md gives, lowest first), and none depends on a crate at
//! or above its own place. Dev-dependencies may reach further (a crate's tests may use a real
//! store above it), so they are not held to it.

use serde_json::Value;

/// The workspace's crates, from the ground up.
const LAYERS: &[&str] = &[
    "pap-text",
    "pap-domain",
    "pap-jsonpath",
    "pap-database-url",
    "pap-storage",
    "pap-store-redb",
    "pap-store-postgres",
    "pap-supervise",
    "pap-engine",
    "pap-dispatch",
];

/// Edges the order allows but the house does not: (crate, crate it may not depend on, why).
const NOT_BESIDE: &[(&str, &str, &str)] = &[
    (
        "pap-engine",
        "pap-store-redb",
        "the engine works on the Arc<dyn Storage> the composition root hands it",
    ),
    (
        "pap-engine",
        "pap-store-postgres",
        "the engine works on the Arc<dyn Storage> the composition root hands it; the manifest checks `store:` with pap-database-url",
    ),
];

fn metadata() -> Value {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = std::process::Command::new(cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo metadata runs");
    assert!(
        out.status.success(),
        "cargo metadata: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("cargo metadata prints JSON")
}

/// (crate, the workspace crates it depends on, dev-dependencies left out).
fn graph(meta: &Value) -> Vec<(String, Vec<String>)> {
    let members: Vec<String> = meta["packages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap().to_owned())
        .collect();
    meta["packages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let deps = p["dependencies"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|d| d["kind"].as_str() != Some("dev"))
                .map(|d| d["name"].as_str().unwrap().to_owned())
                .filter(|name| members.contains(name))
                .collect();
            (p["name"].as_str().unwrap().to_owned(), deps)
        })
        .collect()
}

fn place(name: &str) -> Option<usize> {
    LAYERS.iter().position(|l| *l == name)
}

/// The edges that break the order: a crate on one at or above its place, or one not placed.
fn upward(graph: &[(String, Vec<String>)]) -> Vec<String> {
    let mut wrong = Vec::new();
    for (name, deps) in graph {
        let Some(at) = place(name) else {
            wrong.push(format!(
                "{name} has no place in LAYERS (tests/workspace.rs): put it there and in ARCHITECTURE.md"
            ));
            continue;
        };
        for dep in deps {
            match place(dep) {
                Some(below) if below < at => {}
                _ => wrong.push(format!(
                    "{name} depends on {dep}, which is not below it (LAYERS in tests/workspace.rs)"
                )),
            }
        }
    }
    wrong
}

#[test]
fn no_crate_depends_on_one_above_it() {
    let graph = graph(&metadata());
    assert!(
        graph.len() >= LAYERS.len(),
        "cargo metadata listed {} crates: {graph:?}",
        graph.len()
    );
    let wrong = upward(&graph);
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn the_engine_names_no_store() {
    let graph = graph(&metadata());
    let mut wrong = Vec::new();
    for (from, to, why) in NOT_BESIDE {
        let deps = &graph
            .iter()
            .find(|(name, _)| name == from)
            .unwrap_or_else(|| panic!("{from} is not in the workspace"))
            .1;
        if deps.iter().any(|d| d == to) {
            wrong.push(format!("{from} depends on {to}: {why}"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn every_layer_is_a_crate_of_the_workspace() {
    let graph = graph(&metadata());
    for layer in LAYERS {
        assert!(
            graph.iter().any(|(name, _)| name == layer),
            "{layer} is in LAYERS but not in the workspace"
        );
    }
}

#[test]
fn an_upward_edge_is_caught() {
    let graph = vec![
        ("pap-dispatch".to_owned(), vec!["pap-supervise".to_owned()]),
        ("pap-supervise".to_owned(), vec!["pap-dispatch".to_owned()]),
        ("pap-unplaced".to_owned(), vec![]),
    ];
    let wrong = upward(&graph);
    assert_eq!(wrong.len(), 2, "{wrong:?}");
    assert!(wrong[0].contains("pap-supervise depends on pap-dispatch"));
    assert!(wrong[1].contains("pap-unplaced has no place"));
}

/// ARCHITECTURE.md gives the same order as [`LAYERS`], and every file or folder it names in
/// backticks exists: the map must match the house.
#[test]
fn the_architecture_document_matches_the_workspace() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let doc = std::fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap();
    let order = LAYERS
        .iter()
        .map(|l| format!("`{l}`"))
        .collect::<Vec<_>>()
        .join(", ");
    assert!(
        doc.contains(&format!("The order, lowest first: {order}.")),
        "ARCHITECTURE.md does not give the order {order}"
    );
    let mut missing = Vec::new();
    for quoted in doc.split('`').skip(1).step_by(2) {
        let is_path = (quoted.starts_with("src/")
            || quoted.starts_with("crates/")
            || quoted.starts_with("tests/"))
            && !quoted.contains(' ');
        // A module's file named from src/ or the engine's src/ (`serve/decider.rs`).
        let is_module_file = quoted.ends_with(".rs") && !quoted.contains(' ') && !is_path;
        let module_file_exists = || {
            crate::architecture::SOURCES
                .iter()
                .any(|src| root.join(src).join(quoted).exists())
        };
        if (is_path && !root.join(quoted).exists()) || (is_module_file && !module_file_exists()) {
            missing.push(quoted.to_owned());
        }
    }
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md names what is not there: {missing:?}"
    );
}

/// The dev profile's `[profile.dev.package.<name>]` table of `manifest` (the root Cargo.toml),
/// its lines up to the next table; None without one.
fn dev_profile_of<'a>(manifest: &'a str, name: &str) -> Option<Vec<&'a str>> {
    let header = format!("[profile.dev.package.{name}]");
    let mut lines = manifest.lines().skip_while(|l| l.trim() != header);
    lines.next()?;
    Some(
        lines
            .take_while(|l| !l.trim_start().starts_with('['))
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
            .collect(),
    )
}

/// The dev profile optimises the dependencies (opt-level 1) and leaves build scripts and proc
/// macros to cargo's build-override (the root Cargo.toml says why); that holds only while every
/// crate of ours is named at opt-level 0, so a new crate must be named too.
#[test]
fn every_crate_of_ours_is_built_unoptimised_in_dev() {
    let manifest = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml"))
        .expect("the root Cargo.toml");
    let meta = metadata();
    let mut wrong = Vec::new();
    for (name, _) in graph(&meta) {
        match dev_profile_of(&manifest, &name) {
            None => wrong.push(format!(
                "{name}: no [profile.dev.package.{name}] in Cargo.toml (opt-level = 0, debug = \"line-tables-only\")"
            )),
            Some(lines) if !lines.contains(&"opt-level = 0") => wrong.push(format!(
                "{name}: [profile.dev.package.{name}] does not say opt-level = 0"
            )),
            Some(_) => {}
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    assert_eq!(dev_profile_of("[a]\nx = 1\n", "pap"), None);
    assert_eq!(
        dev_profile_of("[profile.dev.package.pap]\nopt-level = 0\n\n[b]\n", "pap"),
        Some(vec!["opt-level = 0"])
    );
}

/// Every crate of the workspace is publishable with what crates.io shows and checks: a
/// description, the license (its files at the root), the pinned toolchain as `rust-version`,
/// keywords and categories. The names were checked free on crates.io's index by hand (`pap` is
/// taken by an unrelated crate, so the root package is `pap-dispatch`).
#[test]
fn every_crate_carries_what_crates_io_shows() {
    let meta = metadata();
    let toolchain =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/rust-toolchain.toml"))
            .unwrap();
    let pinned = toolchain
        .lines()
        .find_map(|l| l.strip_prefix("channel = \""))
        .and_then(|v| v.strip_suffix('"'))
        .expect("rust-toolchain.toml's channel");
    let mut wrong = Vec::new();
    for p in meta["packages"].as_array().unwrap() {
        let name = p["name"].as_str().unwrap();
        if !p["publish"].is_null() {
            wrong.push(format!("{name}: publish is restricted ({})", p["publish"]));
        }
        if p["description"].as_str().is_none_or(|d| d.len() < 20) {
            wrong.push(format!("{name}: no description"));
        }
        if p["license"] != "MIT OR Apache-2.0" {
            wrong.push(format!("{name}: license {}", p["license"]));
        }
        // rust-version "1.95" against the pinned "1.95.0".
        if !p["rust_version"]
            .as_str()
            .is_some_and(|v| pinned.starts_with(v))
        {
            wrong.push(format!(
                "{name}: rust-version {} is not the pinned {pinned}",
                p["rust_version"]
            ));
        }
        for list in ["keywords", "categories"] {
            if p[list].as_array().is_none_or(Vec::is_empty) {
                wrong.push(format!("{name}: no {list}"));
            }
        }
    }
    for file in ["LICENSE-MIT", "LICENSE-APACHE"] {
        if !std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join(file)
            .exists()
        {
            wrong.push(format!("{file} is missing"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
