//! A server assembled as `run` assembles one, on a project written to a temp dir and the
//! redb store in memory, with a fake clock and nothing started beside it (no listener, no
//! watcher, no signals): for the unit tests of each pass (intake, upkeep, schedules, reload).

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use super::*;

/// When the tests' clock stands.
pub(super) const NOW: &str = "2026-03-11T06:00:00Z";

/// A project of `files` (path under the root, contents) with pap.yaml and a low-risk
/// command agent `worker` that succeeds; `pap_version` is added to every file.
pub(super) fn project(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let write = |path: &str, body: &str| {
        let at = dir.path().join(path);
        std::fs::create_dir_all(at.parent().unwrap()).unwrap();
        std::fs::write(at, format!("pap_version: \"0.2\"\n{body}")).unwrap();
    };
    write("pap.yaml", "");
    write(
        "agents/worker.yaml",
        "agent:\n  id: worker\n  risk_level: low\n  model:\n    provider: command\n    command: [\"true\"]\n",
    );
    for (path, body) in files {
        write(path, body);
    }
    dir
}

/// A trigger `id` that provokes `worker` on events of `kind`.
pub(super) fn trigger(id: &str, kind: &str) -> String {
    format!("trigger:\n  id: {id}\n  match:\n    type: {kind}\n  agent: worker\n")
}

/// The server of the project at `root`, as `pap serve --once` would start on it.
pub(super) fn server(root: &Path) -> Server {
    let loaded = crate::manifest::load(root, &[]);
    let errors = loaded.errors();
    assert!(errors.is_empty(), "the test project has errors: {errors:?}");
    let project = loaded.project.expect("a project");
    let state_dir = root.join(".pap");
    let clock = Clock::fake(NOW.parse().unwrap());
    let settings = Settings::new(
        &project.config,
        settings::Overrides::default(),
        true,
        log::LogFormat::Human,
    );
    let fixed = restart_only::Fixed::of(&project.config, &settings.overrides, false, false);
    let runtime = Runtime {
        project: Arc::new(project),
        store: crate::store::Store::memory_for_tests(),
        clock,
        queue_retries: true,
        environment: crate::agent::Environment::Serve {
            pid: std::process::id(),
        },
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let (wake_tx, wakes) = std::sync::mpsc::channel();
    let conditions = Arc::new(conditions::Conditions::default());
    let metrics = Arc::new(metrics::Metrics::new(conditions.clone()));
    let worker = Worker::start(&rt, runtime.clone(), 1, wake_tx, metrics.clone());
    let spool = Spool::open(&state_dir.join("spool"), None).unwrap();
    let node = node::this(&state_dir, runtime.clock.now_ms(), None);
    Server::assemble(Parts {
        root: root.to_path_buf(),
        runtime,
        rt,
        spool,
        worker,
        settings,
        wakes,
        stop: Arc::new(AtomicBool::new(false)),
        arrivals: watch::Arrivals::default(),
        listening: None,
        shared_project: None,
        metrics,
        recent: Arc::new(recent::RecentDecisions::default()),
        conditions,
        fixed,
        database_url: false,
        loaded_at: NOW.to_string(),
        node,
    })
}

/// Every invocation in the store, oldest first.
pub(super) fn invocations(server: &Server) -> Vec<crate::domain::Invocation> {
    server
        .runtime
        .store
        .read(|r| r.invocations(&|_| true, None))
        .unwrap()
        .0
}

/// A PAP event of `kind` with `id`, at the tests' clock.
pub(super) fn event(id: &str, kind: &str) -> String {
    format!(
        r#"{{"pap_version":"0.2","id":"{id}","type":"{kind}","source":"test","time":"{NOW}","data":{{}}}}"#
    )
}
