//! What the commands that touch the state share: the checked project, the state dir, the
//! store, the clock and the async runtime.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, bail};

use crate::agent::Runtime;
use crate::cli::Cli;
use crate::composition;
use crate::diagnostics::{self, HumanStyle};
use crate::manifest::compiled::Config;
use crate::manifest::{self, Project};
use crate::storage;

/// The nearest directory from `start` upward that holds a project: a `pap.yaml`, or both
/// `triggers/` and `agents/` (as cargo looks for Cargo.toml). The search stays inside what
/// the user owns: it stops at the first directory owned by someone else (`/tmp`, `/home`),
/// and takes no project whose directory or `pap.yaml` another user owns. A project runs its
/// agents' programs, so one planted in a shared directory (`/tmp/pap.yaml`) must never be
/// picked up by a pap started below it (git's safe.directory guards the same way).
pub(super) fn find_root(start: &Path) -> Option<PathBuf> {
    use std::os::unix::fs::MetadataExt;
    let me = nix::unistd::geteuid().as_raw();
    let mine = |path: &Path| std::fs::metadata(path).is_ok_and(|m| m.uid() == me);
    for dir in start.ancestors() {
        if !mine(dir) {
            return None;
        }
        let config = dir.join("pap.yaml");
        let is_project = if config.is_file() {
            mine(&config)
        } else {
            dir.join("triggers").is_dir() && dir.join("agents").is_dir()
        };
        if is_project {
            return Some(dir.to_path_buf());
        }
    }
    None
}

/// Loads the project as `pap lint` would; any error stops the command (with the diagnostics
/// on stderr), since deciding with a half-loaded project would be wrong.
pub(super) fn load_project(cli: &Cli) -> anyhow::Result<Project> {
    let root = cli
        .root()
        .canonicalize()
        .with_context(|| format!("project root {}", cli.root().display()))?;
    // The project as the last load that found no error compiled it, if no manifest changed
    // since (see `manifest::cache`).
    let key = manifest::cache::key(&root, cli.state.as_deref());
    if let Some(project) = key.as_ref().and_then(manifest::cache::lookup) {
        return Ok(project);
    }
    let loaded = manifest::load(&root, &[]);
    let errors = loaded.errors();
    match loaded.project {
        Some(project) if errors.is_empty() => {
            if let Some(key) = &key {
                manifest::cache::store(key, &project);
            }
            Ok(project)
        }
        _ => {
            let text = diagnostics::render_human(
                &errors,
                |f| loaded.sources.get(f).map(String::as_str),
                HumanStyle { color: false },
            );
            crate::say!("{}", text.trim_end_matches('\n'));
            bail!(
                "the project under {} has {} error(s); `pap lint` shows them all",
                root.display(),
                errors.len()
            )
        }
    }
}

/// The project if it loads, for what only improves a view (no diagnostics are printed).
pub(super) fn project_quietly(cli: &Cli) -> Option<Project> {
    project_at(&cli.root().canonicalize().ok()?, cli.state.as_deref())
}

/// As [`project_quietly`], for the project at `root` (canonical) with state dir `state`.
pub(super) fn project_at(root: &Path, state: Option<&Path>) -> Option<Project> {
    let root = root.to_path_buf();
    let key = manifest::cache::key(&root, state);
    if let Some(project) = key.as_ref().and_then(manifest::cache::lookup) {
        return Some(project);
    }
    let loaded = manifest::load(&root, &[]);
    loaded
        .errors()
        .is_empty()
        .then_some(loaded.project)
        .flatten()
}

/// Where the state of a command that only reads is (a listing, the inbox): as [`place`].
/// Such a command works while a trigger or agent manifest is broken (mid-edit, say), as
/// long as pap.yaml, which may name the state dir and the database, is sound; it says so on
/// stderr.
pub(super) fn place_to_read(cli: &Cli) -> anyhow::Result<composition::Place> {
    let (dir, config) = project_state_to_read(cli)?;
    let place = composition::Place::resolve(dir, config.as_ref().and_then(|c| c.store.as_deref()))?;
    Ok(match config {
        Some(config) => place.with_cache(config.store_cache),
        None => place,
    })
}

/// The state dir, and pap.yaml's settings when there is a project to read them from.
fn project_state_to_read(cli: &Cli) -> anyhow::Result<(PathBuf, Option<Config>)> {
    if let Some(dir) = &cli.state {
        // `--state` names the state dir; a project, if there is one, may still name the
        // database (PAP_DATABASE_URL does anyway). No project is fine.
        let config = load_project(cli).ok().map(|p| p.config);
        return Ok((dir.clone(), config));
    }
    let root = cli
        .root()
        .canonicalize()
        .with_context(|| format!("project root {}", cli.root().display()))?;
    let key = manifest::cache::key(&root, None);
    if let Some(project) = key.as_ref().and_then(manifest::cache::lookup) {
        return Ok((state_dir(cli, &project), Some(project.config)));
    }
    let loaded = manifest::load(&root, &[]);
    if let Some(project) = &loaded.project {
        return Ok((state_dir(cli, project), Some(project.config.clone())));
    }
    match &loaded.config {
        Some(config) => {
            crate::say!(
                "warning: the project under {} has {} error(s) (`pap lint` shows them); reading the state anyway",
                root.display(),
                loaded.errors().len()
            );
            let dir = match &cli.state {
                Some(dir) => dir.clone(),
                None => root.join(&config.state_dir),
            };
            Ok((dir, Some(config.clone())))
        }
        // pap.yaml itself is broken: where the state is cannot be known.
        None => load_project(cli).map(|project| (state_dir(cli, &project), Some(project.config))),
    }
}

/// The store of a command that only reads, or `None` (said on stderr) when there is none
/// yet: a listing never creates a state dir.
pub(super) fn store_to_read(cli: &Cli) -> anyhow::Result<Option<Arc<dyn storage::Storage>>> {
    let place = place_to_read(cli)?;
    let store = composition::open_existing(&place)?;
    if store.is_none() {
        crate::say!(
            "no state store at {} yet: nothing was decided here",
            place.shown()
        );
    }
    Ok(store)
}

/// `--state`, else `state_dir` from pap.yaml (relative to the root), else `<root>/.pap`.
pub(super) fn state_dir(cli: &Cli, project: &Project) -> PathBuf {
    match &cli.state {
        Some(dir) => dir.clone(),
        None => project.root.join(&project.config.state_dir),
    }
}

/// Where the project's state is: its state dir, and its database when `PAP_DATABASE_URL` or
/// `store:` in pap.yaml names one.
pub(super) fn place(cli: &Cli, project: &Project) -> anyhow::Result<composition::Place> {
    Ok(
        composition::Place::resolve(state_dir(cli, project), project.config.store.as_deref())?
            .with_cache(project.config.store_cache),
    )
}

/// `--grace`, else the configured grace period.
pub(super) fn grace(
    arg: Option<std::time::Duration>,
    configured: std::time::Duration,
) -> anyhow::Result<std::time::Duration> {
    Ok(arg.unwrap_or(configured))
}

pub(super) fn tokio_runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")
}

/// The trace exporter for a command that answers or runs invocations (approve, reject,
/// retry, cancel), when the project exports traces: its spans (the wait for the answer, the
/// run) join the event's trace as serve's and dispatch's do. Hold it until the command ends,
/// declared after `rt`, so that it is flushed while the runtime still runs.
pub(super) fn traces(
    runtime: &Runtime,
    rt: &tokio::runtime::Runtime,
) -> Option<crate::telemetry::Installed> {
    crate::telemetry::install(&runtime.project.config.traces, rt.handle())
}

/// Project, store and clock for a command that writes.
pub(super) fn runtime(cli: &Cli, dry_run: bool) -> anyhow::Result<Runtime> {
    let project = load_project(cli)?;
    let place = place(cli, &project)?;
    let store = if dry_run {
        composition::open_for_dry_run(&place)?
    } else {
        composition::open(&place)?
    };
    let clock = composition::clock_for(&*store)?;
    Ok(Runtime {
        project: Arc::new(project),
        store,
        clock,
        queue_retries: false,
        environment: crate::agent::Environment::ThisCommand,
    })
}

/// Who is acting, for approvals: `--by`, else $USER, else "unknown".
pub(super) fn actor(by: &Option<String>) -> String {
    by.clone()
        .or_else(|| std::env::var("USER").ok())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "unknown".into())
}
