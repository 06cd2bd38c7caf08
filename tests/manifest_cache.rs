//! The compiled-project cache (`<state>/project.cache`, see `crates/pap-engine/src/manifest/cache.rs`) through
//! the real binary: a cached project decides exactly as a fresh load, any change of a
//! manifest is seen at once (by content, not by time), and a damaged cache file is only a
//! miss.

use crate::common;

use common::dispatch::{Project, Run, T0, ev, filter_events};
use serde_json::{Value, json};

fn stream(p: &Project) -> std::path::PathBuf {
    let mut events = filter_events();
    events.push(ev("d", "test.basic.happened", json!({})));
    p.events("mixed.ndjson", &events)
}

fn cache_file(p: &Project) -> std::path::PathBuf {
    p.root().join(".pap/project.cache")
}

/// `dispatch --dry-run --explain --json`: every decision with every condition's value.
fn explain(p: &Project, file: &std::path::Path) -> Run {
    let run = p.dispatch(T0, file, &["--dry-run", "--explain"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    run
}

#[test]
fn a_cached_project_decides_as_a_fresh_load() {
    let p = Project::new();
    let file = stream(&p);
    // No state dir yet: this load cannot write a cache.
    let fresh = explain(&p, &file);
    assert!(!cache_file(&p).exists());
    std::fs::create_dir_all(p.root().join(".pap")).unwrap();
    let writes = explain(&p, &file);
    assert!(cache_file(&p).exists(), "a sound project is cached");
    let cached = explain(&p, &file);
    assert_eq!(writes.lines, fresh.lines);
    assert_eq!(
        cached.lines, fresh.lines,
        "the cached project decides the same"
    );
    assert!(cached.stdout.contains("f-regex"), "{}", cached.stdout);
}

#[test]
fn the_cache_is_what_runs_and_any_edit_replaces_it() {
    let p = Project::new();
    let file = stream(&p);
    std::fs::create_dir_all(p.root().join(".pap")).unwrap();
    let before = explain(&p, &file);
    assert_eq!(before.outcome("d", "t-echo"), "invoked");
    // Proof that the cache is what runs: switch the trigger off inside it.
    let bytes = std::fs::read(cache_file(&p)).unwrap();
    let header_end = bytes
        .iter()
        .enumerate()
        .filter(|(_, b)| **b == b'\n')
        .nth(1)
        .unwrap()
        .0
        + 1;
    let mut body: Value = serde_json::from_slice(&bytes[header_end..]).unwrap();
    for t in body["triggers"].as_array_mut().unwrap() {
        if t["id"] == "t-echo" {
            t["enabled"] = json!(false);
        }
    }
    let mut tampered = bytes[..header_end].to_vec();
    tampered.extend(serde_json::to_vec(&body).unwrap());
    std::fs::write(cache_file(&p), tampered).unwrap();
    assert_eq!(explain(&p, &file).outcome("d", "t-echo"), "disabled");

    // An edit of the same length, the file's time put back: seen by its content.
    let path = p.root().join("triggers/f-regex.yaml");
    let time = std::fs::metadata(&path).unwrap().modified().unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, text.replace("\"l+o\"", "\"x+o\"")).unwrap();
    std::fs::File::options()
        .write(true)
        .open(&path)
        .unwrap()
        .set_modified(time)
        .unwrap();
    let after = explain(&p, &file);
    assert_eq!(after.outcome("a", "f-regex"), "filtered");
    assert_eq!(
        after.outcome("d", "t-echo"),
        "invoked",
        "the tampered cache is gone"
    );
}

#[test]
fn a_damaged_cache_is_a_miss_and_is_written_again() {
    let p = Project::new();
    let file = stream(&p);
    std::fs::create_dir_all(p.root().join(".pap")).unwrap();
    explain(&p, &file);
    assert!(cache_file(&p).exists());

    // Garbage in the cache: a miss, then a fresh cache.
    std::fs::write(cache_file(&p), b"pap-project-cache 1\nnot the key\n{").unwrap();
    let run = explain(&p, &file);
    assert_eq!(run.outcome("d", "t-echo"), "invoked");
    let rewritten = std::fs::read(cache_file(&p)).unwrap();
    assert!(rewritten.len() > 100, "rewritten whole");
}
