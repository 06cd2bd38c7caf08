//! The example project and a stream of its events, for the benchmarks that dispatch them.

use std::path::Path;

/// Copies the example project (its manifests, examples, workspace and pap.yaml) into `to`.
pub(crate) fn copy_example_project(root: &Path, to: &Path) {
    for part in ["triggers", "agents", "examples", "workspace"] {
        copy_dir(&root.join(part), &to.join(part));
    }
    std::fs::copy(root.join("pap.yaml"), to.join("pap.yaml")).unwrap();
}

/// `count` events cycling through the example events, each with its own id; the file's bytes.
pub(crate) fn generate(examples: &Path, out: &Path, count: usize) -> usize {
    let mut templates: Vec<serde_json::Value> = std::fs::read_dir(examples)
        .unwrap()
        .map(|e| serde_json::from_slice(&std::fs::read(e.unwrap().path()).unwrap()).unwrap())
        .collect();
    templates.sort_by_key(|t| t["id"].to_string());
    let mut text = String::new();
    for i in 0..count {
        let mut e = templates[i % templates.len()].clone();
        e["id"] = format!("bench-{i:06}").into();
        text.push_str(&e.to_string());
        text.push('\n');
    }
    std::fs::write(out, &text).unwrap();
    text.len()
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}
