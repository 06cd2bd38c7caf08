//! Finding the project like cargo and just: without --root or PAP_ROOT, pap uses the nearest
//! directory upward with a pap.yaml (or triggers/ and agents/); with none, it says so.

use crate::common;

use common::dispatch::{T0, ev};
use common::{code, fixture_copy, pap, stderr, stdout};
use serde_json::json;

#[test]
fn pap_finds_the_project_from_a_directory_inside_it() {
    let dir = fixture_copy("dispatch");
    let root = dir.path();
    std::fs::write(
        root.join("e.json"),
        ev("up1", "test.basic.happened", json!({})).to_string(),
    )
    .unwrap();
    let out = pap()
        .current_dir(root.join("triggers"))
        .env("PAP_NOW", T0)
        .args(["dispatch", "../e.json", "--json"])
        .output()
        .unwrap();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(stdout(&out).contains("\"t-echo\""), "{}", stdout(&out));
    // (On PostgreSQL the state is in the database, and the listing below finds it.)
    assert!(
        common::on_postgres() || root.join(".pap/state.redb").is_file(),
        "the project's state"
    );
    assert!(
        !root.join("triggers/.pap").exists(),
        "not a state beside the cwd"
    );

    // `pap lint` from deep inside checks the whole project.
    let out = pap()
        .current_dir(root.join("bin"))
        .args(["lint", "--format", "json"])
        .output()
        .unwrap();
    assert_eq!(code(&out), 0, "{}", stdout(&out));
}

#[test]
fn outside_any_project_dispatch_says_so_and_creates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let here = dir.path().join("not-a-project");
    std::fs::create_dir(&here).unwrap();
    let out = dispatch_an_event_in(&here);
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("no pap project in"),
        "{}",
        stderr(&out)
    );
    assert!(!here.join(".pap").exists());

    // --root turns the search off: the directory given is the project, as before.
    let out = pap()
        .current_dir(&here)
        .args(["--root", ".", "invocations"])
        .output()
        .unwrap();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("no state store at"),
        "a listing says there is no state yet: {}",
        stderr(&out)
    );
}

#[test]
fn a_project_someone_else_owns_above_the_directory_is_not_picked_up() {
    use std::os::unix::fs::MetadataExt;
    let dir = tempfile::tempdir().unwrap();
    if std::fs::metadata(dir.path()).unwrap().uid() != 0 {
        common::skip_note("not root: cannot give a planted pap.yaml to another user");
        return;
    }
    // A shared directory with a pap.yaml another user planted, and my work below it.
    let shared = dir.path().join("shared");
    let mine = shared.join("work");
    std::fs::create_dir_all(&mine).unwrap();
    std::fs::write(shared.join("pap.yaml"), "pap_version: \"0.2\"\n").unwrap();
    let nobody = nix::unistd::Uid::from_raw(65534);
    nix::unistd::chown(&shared.join("pap.yaml"), Some(nobody), None).unwrap();
    let out = dispatch_an_event_in(&mine);
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    assert!(stderr(&out).contains("that you own"), "{}", stderr(&out));
    assert!(!shared.join(".pap").exists());

    // The same directory given to another user stops the search there.
    nix::unistd::chown(&shared, Some(nobody), None).unwrap();
    let out = dispatch_an_event_in(&mine);
    assert_eq!(code(&out), 2, "{}", stderr(&out));
}

/// `pap dispatch e.json` run in `dir` with no --root, on an event written there.
fn dispatch_an_event_in(dir: &std::path::Path) -> std::process::Output {
    std::fs::write(
        dir.join("e.json"),
        ev("x1", "test.basic.happened", json!({})).to_string(),
    )
    .unwrap();
    pap()
        .current_dir(dir)
        .args(["dispatch", "e.json"])
        .output()
        .unwrap()
}
