//! A project whose agent is a shell command, for tests that watch runs through a log the
//! agent writes (concurrency keys, store migrations): one place writes its manifests.

use std::path::Path;

/// A project with agent `fix` running the shell `script` (made for the project's
/// `runs.log`) and trigger `restart` on `host.disk.full` for it. `agent_lines` and
/// `restart_lines` are YAML lines (each indented by two, ending in a newline) added to the
/// agent and to the trigger, such as `  concurrency: {limit: 1}\n`.
pub(crate) fn project(
    agent_lines: &str,
    restart_lines: &str,
    script: impl FnOnce(&Path) -> String,
) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir_all(root.join("triggers")).unwrap();
    std::fs::create_dir_all(root.join("agents")).unwrap();
    std::fs::write(root.join("pap.yaml"), "pap_version: \"0.2\"\n").unwrap();
    let script = script(&root.join("runs.log"));
    std::fs::write(
        root.join("agents/fix.yaml"),
        format!(
            "pap_version: \"0.2\"\nagent:\n  id: fix\n  risk_level: low\n{agent_lines}  model:\n    provider: command\n    command: [\"sh\", \"-c\", {}]\n",
            serde_json::to_string(&script).unwrap()
        ),
    )
    .unwrap();
    std::fs::write(
        root.join("triggers/restart.yaml"),
        format!(
            "pap_version: \"0.2\"\ntrigger:\n  id: restart\n  match:\n    type: host.disk.full\n{restart_lines}  agent: fix\n"
        ),
    )
    .unwrap();
    dir
}

/// One line of a `runs.log` whose agent writes `KIND HOST N NS` (`start` or `end`, the event's
/// host and number, the wall clock in ns).
pub(crate) type HostLine = (String, String, u32, u128);

/// The lines of the project's `runs.log` (none before the first run), each split at spaces.
pub(crate) fn log_fields(root: &Path) -> Vec<Vec<String>> {
    std::fs::read_to_string(root.join("runs.log"))
        .unwrap_or_default()
        .lines()
        .map(|l| l.split(' ').map(str::to_owned).collect())
        .collect()
}

/// The lines of the project's `runs.log`, as [`HostLine`]s.
pub(crate) fn host_log(root: &Path) -> Vec<HostLine> {
    log_fields(root)
        .into_iter()
        .map(|p| {
            let at = p[3].parse().unwrap();
            (p[0].clone(), p[1].clone(), p[2].parse().unwrap(), at)
        })
        .collect()
}
