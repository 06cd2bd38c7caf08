//! The one-trigger project the serve and HTTP benchmarks decide on: the trigger's filter
//! holds for every event, so each decision is a full one (claim, throttle window,
//! invocation record, ledger row).

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Writes the project: trigger `bench` on `bench.event.happened` provoking agent `bench`,
/// whose command is `agent_command` (JSON list), with `pap_yaml` as pap.yaml.
pub(crate) fn write_project(root: &Path, agent_command: &str, pap_yaml: &str) {
    std::fs::create_dir_all(root.join("triggers")).unwrap();
    std::fs::create_dir_all(root.join("agents")).unwrap();
    std::fs::write(
        root.join("triggers/bench.yaml"),
        "pap_version: \"0.2\"\ntrigger:\n  id: bench\n  match:\n    type: bench.event.happened\n  filter:\n    - path: $.data.n\n      operator: gte\n      value: 0\n  agent: bench\n",
    )
    .unwrap();
    std::fs::write(
        root.join("agents/bench.yaml"),
        format!(
            "pap_version: \"0.2\"\nagent:\n  id: bench\n  risk_level: read_only\n  model:\n    provider: command\n    command: {agent_command}\n"
        ),
    )
    .unwrap();
    std::fs::write(root.join("pap.yaml"), pap_yaml).unwrap();
}

/// One event of the trigger's type.
pub(crate) fn event(id: &str) -> String {
    format!(
        r#"{{"pap_version":"0.2","id":"{id}","type":"bench.event.happened","source":"bench","time":"2026-03-11T05:59:00Z","data":{{"n":1}}}}"#
    )
}

/// The benchmarked binary on `root` with state in `state`, never on an injected clock.
pub(crate) fn pap(root: &Path, state: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_pap"));
    cmd.arg("--root").arg(root).arg("--state").arg(state);
    cmd.env_remove("PAP_NOW");
    cmd
}

/// Starts `pap serve --log-format json` on `state` (log in `state/serve.log`) with `env`
/// added, and waits until it has started.
#[allow(dead_code)]
pub(crate) fn start_serve(root: &Path, state: &Path, env: &[(&str, &str)]) -> Child {
    std::fs::create_dir_all(state.join("spool")).unwrap();
    let log = std::fs::File::create(state.join("serve.log")).unwrap();
    let child = pap(root, state)
        .envs(env.iter().copied())
        .args(["serve", "--log-format", "json"])
        .stderr(log)
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let log = state.join("serve.log");
    let started = Instant::now();
    while !std::fs::read_to_string(&log).is_ok_and(|t| t.contains("pap serve started")) {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "serve did not start"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    child
}

/// Stops a serve with SIGTERM and waits for it.
#[allow(dead_code)]
pub(crate) fn stop_serve(mut child: Child) {
    let _ = Command::new("kill").arg(child.id().to_string()).status();
    let _ = child.wait();
}
