//! File-system events: new spool files and changed manifests wake serve at once. Events alone
//! are not reliable (network file systems, overflowing queues), so serve also rescans on a
//! timer; a watcher that cannot start is logged and the timer does the work.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex};

use notify::event::{ModifyKind, RenameMode};
use notify::{EventKind, RecommendedWatcher, RecursiveMode, Watcher};

use super::Wake;

/// Keeps the watches alive.
pub(super) struct Watches {
    _watcher: Option<RecommendedWatcher>,
}

/// Spool files that arrived by a rename (finished before they appeared), shared between the
/// watcher's thread and serve. Bounded: names of files renamed in and then removed by someone
/// else would otherwise pile up.
#[derive(Clone, Default)]
pub(super) struct Arrivals(Arc<Mutex<HashSet<PathBuf>>>);

impl Arrivals {
    pub(super) fn add(&self, path: PathBuf) {
        let mut set = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if set.len() >= 100_000 {
            set.clear();
        }
        set.insert(path);
    }

    /// Whether `path` arrived by a rename; forgets it.
    pub(super) fn take(&self, path: &Path) -> bool {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(path)
    }
}

pub(super) fn start(root: &Path, spool: &Path, wake: Sender<Wake>, arrivals: Arrivals) -> Watches {
    let spool_dir = spool.to_path_buf();
    let manifest_dirs: Vec<PathBuf> = ["triggers", "agents", "schedules"]
        .iter()
        .map(|d| root.join(d))
        .collect();
    // `..data`: a project root that is a Kubernetes ConfigMap volume changes by a rename of
    // that link, not of pap.yaml (the manifest folders are watched whole, theirs included).
    let config_files = [
        root.join("pap.yaml"),
        root.join("pap.yml"),
        root.join("..data"),
    ];
    let dirs = manifest_dirs.clone();
    let handler = move |res: notify::Result<notify::Event>| {
        let Ok(event) = res else {
            // An overflowed queue: rescan everything.
            let _ = wake.send(Wake::Spool);
            return;
        };
        if matches!(event.kind, EventKind::Access(_)) {
            return;
        }
        // A rename into the spool: the writer finished the file before it appeared.
        let renamed_to = match event.kind {
            EventKind::Modify(ModifyKind::Name(RenameMode::To)) => event.paths.first(),
            EventKind::Modify(ModifyKind::Name(RenameMode::Both)) => event.paths.get(1),
            _ => None,
        };
        if let Some(path) = renamed_to.filter(|p| p.parent() == Some(spool_dir.as_path())) {
            arrivals.add(path.clone());
            let _ = wake.send(Wake::Spool);
            return;
        }
        for path in &event.paths {
            if path.parent() == Some(spool_dir.as_path()) {
                let _ = wake.send(Wake::Spool);
            } else if config_files.iter().any(|c| c == path)
                || dirs.iter().any(|d| path.starts_with(d))
            {
                let _ = wake.send(Wake::Manifests);
            }
        }
    };
    let watcher = match notify::recommended_watcher(handler) {
        Ok(mut w) => {
            let mut watch = |p: &Path, mode| {
                if let Err(e) = w.watch(p, mode) {
                    tracing::warn!(path = %p.display(), error = %e, "cannot watch; relying on rescans");
                }
            };
            watch(spool, RecursiveMode::NonRecursive);
            watch(root, RecursiveMode::NonRecursive);
            for d in manifest_dirs.iter().filter(|d| d.is_dir()) {
                watch(d, RecursiveMode::Recursive);
            }
            Some(w)
        }
        Err(e) => {
            tracing::warn!(error = %e, "file-system events unavailable; relying on rescans");
            None
        }
    };
    Watches { _watcher: watcher }
}
