//! The book's walkthrough (docs/src/tutorials/walkthrough.md) is real: its `console` blocks are
//! replayed in order on a fresh copy of the example project (as a fresh clone has it), and each
//! command must print exactly what the page shows. The clock is fixed (a test build's `PAP_NOW`), so ids and times match;
//! the project's directory is shown as `.`.

use crate::common;

use std::path::Path;
use std::process::Command;

/// The instant the walkthrough runs at.
const NOW: &str = "2026-03-11T06:00:00Z";

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The page the walkthrough is on.
const PAGE: &str = "docs/src/tutorials/walkthrough.md";

/// (command, expected output) pairs from the `console` blocks of the walkthrough's page.
fn steps(page: &str) -> Vec<(String, String)> {
    let mut steps: Vec<(String, String)> = Vec::new();
    let mut in_block = false;
    for line in page.lines() {
        if line == "```console" {
            in_block = true;
            continue;
        }
        if in_block && line == "```" {
            in_block = false;
            continue;
        }
        if !in_block {
            continue;
        }
        match line.strip_prefix("$ ") {
            Some(command) => steps.push((command.to_owned(), String::new())),
            None => {
                let (_, out) = steps.last_mut().expect("output follows a command");
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    steps
}

#[test]
fn the_walkthrough_replays_from_a_fresh_clone() {
    let page = std::fs::read_to_string(root().join(PAGE)).unwrap();
    let steps = steps(&page);
    assert!(steps.len() >= 8, "{steps:?}");
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().join("project");
    for part in ["triggers", "agents", "examples", "workspace"] {
        common::copy_dir(&root().join(part), &project.join(part));
    }
    std::fs::copy(root().join("pap.yaml"), project.join("pap.yaml")).unwrap();
    let bin = Path::new(env!("CARGO_BIN_EXE_pap")).parent().unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let shown_root = project.canonicalize().unwrap();
    for (command, expected) in steps {
        let out = Command::new("sh")
            .arg("-c")
            .arg(format!("{command} 2>&1"))
            .current_dir(&project)
            .env("PATH", &path)
            .env("PAP_NOW", NOW)
            .env("NO_COLOR", "1")
            .env("USER", "alice")
            .env("COLUMNS", "100")
            .env_remove("PAP_ROOT")
            .env_remove("PAP_STATE")
            .env_remove("ANTHROPIC_API_KEY")
            .env_remove("OPENAI_API_KEY")
            .output()
            .unwrap();
        let got =
            String::from_utf8_lossy(&out.stdout).replace(&shown_root.display().to_string(), ".");
        assert_eq!(
            got, expected,
            "{PAGE}: `$ {command}` printed (left) not what the page shows (right)"
        );
    }
}
