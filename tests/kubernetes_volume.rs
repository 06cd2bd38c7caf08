//! A project whose manifests come from a Kubernetes ConfigMap volume. The kubelet's atomic
//! writer makes every visible name a link into a hidden, timestamped folder
//! (`a.yaml -> ..data/a.yaml`, `..data -> ..2026_…`) and changes the volume by writing a new
//! folder and renaming a new `..data` over the old one. pap refuses links to hidden files
//! (`.git/config`), so this layout is recognised exactly, and lookalikes are still refused.
//! The kubelet's steps are replayed here as it takes them (pkg/volume/util/atomic_writer.go).

use std::os::unix::fs::symlink;
use std::path::Path;

use crate::common;

use common::dispatch::ev;
use common::serve::{Project, wait_until};
use common::{code, stderr, stdout};
use serde_json::json;

/// What the kubelet writes for a volume at `dir` holding `files` (path, text; a path is a
/// ConfigMap item's `path`, so it may name a folder), at `stamp`: the files in `..<stamp>`,
/// `..data` swapped to it in one rename, a link per visible name (`triggers -> ..data/triggers`
/// for an item at `triggers/t.yaml`), and the previous folder removed.
pub(crate) fn write_volume(dir: &Path, stamp: &str, files: &[(String, String)]) {
    std::fs::create_dir_all(dir).unwrap();
    let folder = format!("..{stamp}");
    for (path, text) in files {
        let file = dir.join(&folder).join(path);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(file, text).unwrap();
    }
    let previous = std::fs::read_link(dir.join("..data")).ok();
    symlink(&folder, dir.join("..data_tmp")).unwrap();
    std::fs::rename(dir.join("..data_tmp"), dir.join("..data")).unwrap();
    for (path, _) in files {
        let name = path.split('/').next().unwrap();
        let link = dir.join(name);
        if std::fs::symlink_metadata(&link).is_err() {
            symlink(format!("..data/{name}"), &link).unwrap();
        }
    }
    if let Some(previous) = previous {
        std::fs::remove_dir_all(dir.join(previous)).unwrap();
    }
}

/// The files under `root` at `paths` (files, or folders taken whole), removed, as (path
/// relative to `root`, text).
fn take(root: &Path, paths: &[&str]) -> Vec<(String, String)> {
    fn walk(root: &Path, at: &Path, out: &mut Vec<(String, String)>) {
        if at.is_dir() {
            for entry in std::fs::read_dir(at).unwrap() {
                walk(root, &entry.unwrap().path(), out);
            }
            std::fs::remove_dir(at).unwrap();
        } else {
            let text = std::fs::read_to_string(at).unwrap();
            std::fs::remove_file(at).unwrap();
            let rel = at.strip_prefix(root).unwrap();
            out.push((rel.to_string_lossy().into_owned(), text));
        }
    }
    let mut files = Vec::new();
    for path in paths {
        walk(root, &root.join(path), &mut files);
    }
    files.sort();
    files
}

/// Waits until the event `id` was decided and its run succeeded.
fn wait_succeeded(p: &Project, id: &str) {
    wait_until(&format!("{id} decided and run"), || {
        p.invocations_of(id)
            .iter()
            .any(|i| i["status"] == "succeeded")
    });
}

const NEW_TRIGGER: &str = "pap_version: \"0.2\"\ntrigger:\n  id: t-new\n  match:\n    type: test.new.happened\n  agent: quick\n";

/// The layout the book recommends: one ConfigMap mounted at the project root, its items
/// placing pap.yaml and each manifest (`triggers/t-quick.yaml`…).
#[test]
fn a_project_from_one_configmap_is_loaded_and_reloaded_when_the_kubelet_swaps_it() {
    let p = Project::new();
    let root = p.root();
    let mut files = take(root, &["pap.yaml", "triggers", "agents", "schedules"]);
    write_volume(root, "2026_11_27_10_00_00.1111111111", &files);
    assert!(
        std::fs::symlink_metadata(root.join("triggers"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
    let lint = p.cmd().args(["lint"]).output().unwrap();
    assert_eq!(code(&lint), 0, "{}{}", stdout(&lint), stderr(&lint));
    assert!(!stdout(&lint).contains("not followed"), "{}", stdout(&lint));

    let serve = p.serve(&[]);
    p.drop_events("q.json", &[ev("q1", "test.quick.happened", json!({}))]);
    wait_succeeded(&p, "q1");

    // The ConfigMap gains a trigger: a new folder, and `..data` renamed over the old one.
    files.push(("triggers/t-new.yaml".into(), NEW_TRIGGER.into()));
    write_volume(root, "2026_11_27_10_05_00.2222222222", &files);
    serve.wait_log("manifests reloaded");
    p.drop_events("n.json", &[ev("n1", "test.new.happened", json!({}))]);
    wait_succeeded(&p, "n1");
    // Again: the folder serve watched as `triggers/` went with the first swap, so this one is
    // seen only as the rename of the root's `..data`.
    files.push((
        "triggers/t-newer.yaml".into(),
        NEW_TRIGGER
            .replace("t-new", "t-newer")
            .replace("test.new", "test.newer"),
    ));
    write_volume(root, "2026_11_27_10_10_00.5555555555", &files);
    wait_until("a second reload", || {
        serve.log_text().matches("manifests reloaded").count() >= 2
    });
    p.drop_events("m.json", &[ev("m1", "test.newer.happened", json!({}))]);
    wait_succeeded(&p, "m1");
    assert!(
        !serve.log_text().contains("not followed"),
        "{}",
        serve.log_text()
    );
    assert_eq!(serve.terminate().0, 0);
}

/// A folder of manifests as a volume of its own (`triggers/t-quick.yaml -> ..data/t-quick.yaml`).
#[test]
fn a_manifest_folder_from_a_configmap_is_loaded_and_reloaded() {
    let p = Project::new();
    let triggers = p.root().join("triggers");
    let mut files: Vec<(String, String)> = take(p.root(), &["triggers"])
        .into_iter()
        .map(|(path, text)| (path.trim_start_matches("triggers/").to_owned(), text))
        .collect();
    write_volume(&triggers, "2026_11_27_10_00_00.3333333333", &files);
    let lint = p.cmd().args(["lint"]).output().unwrap();
    assert_eq!(code(&lint), 0, "{}{}", stdout(&lint), stderr(&lint));

    let serve = p.serve(&[]);
    files.push(("t-new.yaml".into(), NEW_TRIGGER.into()));
    write_volume(&triggers, "2026_11_27_10_05_00.4444444444", &files);
    serve.wait_log("manifests reloaded");
    p.drop_events("n.json", &[ev("n1", "test.new.happened", json!({}))]);
    wait_succeeded(&p, "n1");
    assert_eq!(serve.terminate().0, 0);
}

#[test]
fn lookalikes_of_the_layout_still_reach_no_hidden_file() {
    let p = Project::new();
    let root = p.root();
    std::fs::create_dir(root.join(".git")).unwrap();
    std::fs::write(
        root.join(".git/config"),
        "extraheader = AUTHORIZATION: basic c2VjcmV0\n",
    )
    .unwrap();
    let triggers = root.join("triggers");
    // Links made in `dir` (created): (link name, what it says).
    let links = |dir: &Path, pairs: &[(&str, &str)]| {
        std::fs::create_dir_all(dir).unwrap();
        for (name, target) in pairs {
            symlink(target, dir.join(name)).unwrap();
        }
    };
    const STAMP: &str = "..2026_11_27_10_00_00.4444444444";
    // `..data` leading to .git itself, not to a timestamped folder beside it.
    links(
        &root.join("agents/ns"),
        &[("..data", "../../.git"), ("a.yaml", "..data/config")],
    );
    // A timestamped folder that is itself a link to .git.
    links(
        &triggers.join("cm"),
        &[
            (STAMP, "../../.git"),
            ("..data", STAMP),
            ("b.yaml", "..data/config"),
        ],
    );
    // A genuine folder, but its file links out to .git/config.
    links(
        &triggers.join("cm2").join(STAMP),
        &[("c.yaml", "../../../.git/config")],
    );
    links(
        &triggers.join("cm2"),
        &[("..data", STAMP), ("c.yaml", "..data/c.yaml")],
    );
    // A link naming `..data` with a hidden name under it.
    std::fs::create_dir_all(triggers.join("cm3").join(STAMP).join(".env")).unwrap();
    std::fs::write(
        triggers.join("cm3").join(STAMP).join(".env/d.yaml"),
        "pap_version: \"0.2\"\n",
    )
    .unwrap();
    links(
        &triggers.join("cm3"),
        &[("..data", STAMP), ("d.yaml", "..data/.env/d.yaml")],
    );

    let lint = p.cmd().args(["lint"]).output().unwrap();
    let text = format!("{}{}", stdout(&lint), stderr(&lint));
    assert_eq!(code(&lint), 1, "{text}");
    assert!(!text.contains("c2VjcmV0"), "{text}");
    for refused in [
        "agents/ns/a.yaml",
        "triggers/cm/b.yaml",
        "triggers/cm2/c.yaml",
        "triggers/cm3/d.yaml",
    ] {
        // One diagnostic per file: its message, then `--> PATH:1:1`.
        assert!(
            text.split("\n\n")
                .any(|d| d.contains(&format!("--> {refused}:")) && d.contains("hidden")),
            "{refused} was not refused as a link to a hidden file:\n{text}"
        );
    }
}
