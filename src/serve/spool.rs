//! The spool directory: event files dropped by writers, claimed by serve.
//!
//! Layout under the spool dir: ready files at the top, `processing/` (claimed, being
//! dispatched), `done/` (dispatched), `failed/` (had invalid events or could not be read; a
//! `NAME.error.json` beside each says why). A claim is a rename, which is atomic: a file is
//! either still ready or wholly serve's. A crash leaves claimed files in `processing/`, where
//! the next start picks them up again; idempotency makes dispatching them twice harmless.
//!
//! Nodes on a shared store may share one spool directory. Each then claims into a
//! directory of its own, `processing/NODE/`, so a node resumes only what it claimed itself;
//! what a node that is gone (no heartbeat for a while) left claimed is adopted by another,
//! one rename per file (see [`Spool::adopt`]).

use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde_json::json;

pub struct Spool {
    pub dir: PathBuf,
    /// Where this process claims files: `processing/`, or `processing/NODE/` on a shared
    /// store.
    processing: PathBuf,
    /// `processing/`, whatever the node.
    processing_root: PathBuf,
    done: PathBuf,
    failed: PathBuf,
    /// Entries serve will never take, already logged (each is logged once).
    ignored: std::sync::Mutex<std::collections::HashSet<std::ffi::OsString>>,
}

/// A bad event (or the whole file, when it could not be read) and why.
#[derive(Debug, Clone)]
pub struct Problem {
    /// `NAME:LINE`, `NAME[INDEX]`, or `NAME` for the file itself.
    pub input: String,
    pub id: Option<String>,
    pub error: String,
}

impl Spool {
    /// The spool in `dir`; `node` is this node's id on a shared store.
    pub fn open(dir: &Path, node: Option<&str>) -> io::Result<Spool> {
        let processing_root = dir.join("processing");
        let spool = Spool {
            dir: dir.to_path_buf(),
            processing: match node {
                Some(id) => processing_root.join(node_dir(id)),
                None => processing_root.clone(),
            },
            processing_root,
            done: dir.join("done"),
            failed: dir.join("failed"),
            ignored: Default::default(),
        };
        for d in [&spool.dir, &spool.processing, &spool.done, &spool.failed] {
            std::fs::create_dir_all(d)?;
        }
        Ok(spool)
    }

    /// Files ready to claim, oldest name first: regular files named `*.json` and `*.ndjson`,
    /// not hidden, not `*.tmp` (writers write under such a name, then rename). Anything else
    /// (a link, a FIFO, a directory, another extension, a name that is not UTF-8) is never
    /// opened nor followed, and logged once.
    pub fn ready(&self, limit: usize) -> io::Result<Vec<PathBuf>> {
        let mut found = Vec::new();
        for entry in std::fs::read_dir(&self.dir)? {
            let entry = entry?;
            let raw_name = entry.file_name();
            let kind = entry.file_type()?;
            let why = match raw_name.to_str() {
                None => Some("its name is not UTF-8"),
                Some(name) if name.starts_with('.') || name.ends_with(".tmp") => continue,
                Some("processing" | "done" | "failed") if kind.is_dir() => continue,
                Some(name) if !is_event_file(name) => {
                    Some("only *.json and *.ndjson files are events")
                }
                Some(_) if kind.is_symlink() => Some("a symbolic link (never followed)"),
                Some(_) if !kind.is_file() => Some("not a regular file"),
                Some(_) => None,
            };
            match why {
                None => found.push(entry.path()),
                Some(why) => {
                    let mut ignored = self.ignored.lock().unwrap_or_else(|p| p.into_inner());
                    if ignored.len() < 10_000 && ignored.insert(raw_name) {
                        tracing::warn!(
                            path = %crate::term::for_humans(&entry.path().to_string_lossy()),
                            why,
                            "spool entry ignored"
                        );
                    }
                }
            }
        }
        found.sort();
        found.truncate(limit);
        Ok(found)
    }

    /// Files a crash left claimed: this node's, and on a shared store those an earlier
    /// release left in `processing/` itself (taken into this node's directory first, so no
    /// other node resumes them too).
    pub fn leftovers(&self) -> io::Result<Vec<PathBuf>> {
        let mut found = files_in(&self.processing)?;
        if self.processing != self.processing_root {
            found.extend(self.take_over(&self.processing_root)?);
        }
        found.sort();
        Ok(found)
    }

    /// Takes over the files that nodes which are gone left claimed: `alive` says whether a
    /// node (by its directory's name, see [`node_dir`]) is still heard from. Each file is
    /// taken with a rename, so two nodes adopting at once never both take one. Returns the
    /// files now this node's to dispatch.
    pub fn adopt(&self, alive: &dyn Fn(&str) -> bool) -> io::Result<Vec<PathBuf>> {
        if self.processing == self.processing_root {
            return Ok(Vec::new());
        }
        let mut adopted = Vec::new();
        for entry in std::fs::read_dir(&self.processing_root)? {
            let entry = entry?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if entry.path() == self.processing
                || !entry.file_type().is_ok_and(|t| t.is_dir())
                || alive(&name)
            {
                continue;
            }
            adopted.extend(self.take_over(&entry.path())?);
            // Empty now, unless its node came back meanwhile and claimed again.
            let _ = std::fs::remove_dir(entry.path());
        }
        adopted.sort();
        Ok(adopted)
    }

    /// Renames every file of `dir` into this node's `processing/`; returns the new paths.
    fn take_over(&self, dir: &Path) -> io::Result<Vec<PathBuf>> {
        let mut taken = Vec::new();
        for file in files_in(dir)? {
            let target = free_name(
                &self.processing,
                &file.file_name().expect("a file").to_string_lossy(),
            );
            match std::fs::rename(&file, &target) {
                Ok(()) => taken.push(target),
                // Another node took it first.
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
        Ok(taken)
    }

    /// Moves a ready file into `processing/`; `None` when it is gone (its writer removed it).
    pub fn claim(&self, file: &Path) -> io::Result<Option<PathBuf>> {
        let target = self.processing.join(file.file_name().expect("a file"));
        match std::fs::rename(file, &target) {
            Ok(()) => Ok(Some(target)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Files a claimed file away: to `done/` (or deleted, with no retention), or with
    /// problems to `failed/` beside `NAME.error.json`. The error file is written first, so a
    /// crash in between leaves the file in `processing/` to be dispatched again.
    pub fn finish(
        &self,
        claimed: &Path,
        valid: usize,
        problems: &[Problem],
        keep_done: bool,
        now: &str,
    ) -> io::Result<PathBuf> {
        let name = claimed.file_name().expect("a file").to_string_lossy();
        if problems.is_empty() {
            if !keep_done {
                std::fs::remove_file(claimed)?;
                return Ok(claimed.to_path_buf());
            }
            let target = free_name(&self.done, &name);
            std::fs::rename(claimed, &target)?;
            return Ok(target);
        }
        let target = free_name(&self.failed, &name);
        let report = json!({
            "file": name,
            "failed_at": now,
            "valid_events": valid,
            "problems": problems.len(),
            "errors": problems.iter().map(|p| json!({
                "input": p.input,
                "id": p.id,
                "error": p.error,
            })).collect::<Vec<_>>(),
        });
        let mut error_path = target.clone().into_os_string();
        error_path.push(".error.json");
        let text = serde_json::to_string_pretty(&report).expect("serialisable") + "\n";
        write_atomically(Path::new(&error_path), text.as_bytes())?;
        std::fs::rename(claimed, &target)?;
        Ok(target)
    }

    /// Deletes files in `done/` older than `retention`; returns how many.
    pub fn sweep_done(&self, retention: Duration) -> io::Result<usize> {
        let cutoff = SystemTime::now() - retention;
        let mut removed = 0;
        for entry in std::fs::read_dir(&self.done)? {
            let entry = entry?;
            let old = entry
                .metadata()
                .and_then(|m| m.modified())
                .is_ok_and(|t| t < cutoff);
            if old && std::fs::remove_file(entry.path()).is_ok() {
                removed += 1;
            }
        }
        Ok(removed)
    }
}

/// Why a claimed file is not wholly read, if it grew while (or after) it was read: its
/// writer was still writing. What was read is decided; the rest is not, so the file goes to
/// `failed/`, never to `done/` with lines unread.
pub fn grew_after_read(path: &Path, read: u64) -> Option<String> {
    let now = std::fs::metadata(path).ok()?.len();
    (now > read).then(|| {
        format!(
            "the file grew while serve read it ({read} bytes read, {now} now): its writer was still writing. \
             The events read were decided; to decide the rest, move the file back into the spool \
             (the decided ones are then duplicates). Writers should write under a temporary name and rename."
        )
    })
}

/// The regular files directly in `dir`.
fn files_in(dir: &Path) -> io::Result<Vec<PathBuf>> {
    Ok(std::fs::read_dir(dir)?
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .map(|e| e.path())
        .collect())
}

/// The directory name of node `id` under `processing/`: the id itself when it is a safe
/// file name, else its hex.
pub fn node_dir(id: &str) -> String {
    let safe = !id.is_empty()
        && !id.starts_with('.')
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'));
    if safe {
        id.to_owned()
    } else {
        crate::text::hex(id.as_bytes())
    }
}

pub fn is_event_file(name: &str) -> bool {
    !name.starts_with('.')
        && !name.ends_with(".tmp")
        && (name.ends_with(".json") || name.ends_with(".ndjson"))
}

/// `dir/name`, or `dir/name.N` for the first free N when a file of that name was filed
/// before (writers may reuse names).
fn free_name(dir: &Path, name: &str) -> PathBuf {
    let first = dir.join(name);
    if !first.exists() {
        return first;
    }
    (1u64..)
        .map(|n| dir.join(format!("{name}.{n}")))
        .find(|p| !p.exists())
        .expect("some number is free")
}

fn write_atomically(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_longer_than_what_was_read_grew() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.ndjson");
        std::fs::write(&path, "12345\n").unwrap();
        assert_eq!(grew_after_read(&path, 6), None);
        let why = grew_after_read(&path, 3).unwrap();
        assert!(why.contains("3 bytes read, 6 now"), "{why}");
    }

    #[test]
    fn only_finished_event_files_are_ready() {
        assert!(is_event_file("a.json"));
        assert!(is_event_file("batch-1.ndjson"));
        assert!(!is_event_file(".a.json"));
        assert!(!is_event_file("a.json.tmp"));
        assert!(!is_event_file("a.txt"));
    }

    #[test]
    fn nodes_sharing_a_spool_claim_apart_and_adopt_what_a_gone_node_left() {
        let dir = tempfile::tempdir().unwrap();
        let a = Spool::open(dir.path(), Some("node-a")).unwrap();
        let b = Spool::open(dir.path(), Some("node/b")).unwrap();
        std::fs::write(dir.path().join("one.json"), "{}").unwrap();
        std::fs::write(dir.path().join("two.json"), "{}").unwrap();
        // An earlier release's leftover, in processing/ itself.
        std::fs::write(dir.path().join("processing/old.json"), "{}").unwrap();
        let one = a.claim(&dir.path().join("one.json")).unwrap().unwrap();
        assert!(one.ends_with("processing/node-a/one.json"), "{one:?}");
        assert_eq!(b.claim(&dir.path().join("one.json")).unwrap(), None);
        let two = b.claim(&dir.path().join("two.json")).unwrap().unwrap();
        // An id that is not a plain file name is spelt in hex.
        assert!(two.parent().unwrap().ends_with(node_dir("node/b")));
        assert_ne!(node_dir("node/b"), "node/b");
        // Each resumes its own, and the first to look takes the old leftover.
        let mine = a.leftovers().unwrap();
        assert_eq!(mine.len(), 2, "{mine:?}");
        assert!(
            mine.iter()
                .any(|p| p.ends_with("processing/node-a/old.json"))
        );
        assert_eq!(b.leftovers().unwrap(), std::slice::from_ref(&two));
        // While b is heard from, a leaves its claims alone; once it is gone, a takes them.
        assert!(a.adopt(&|_| true).unwrap().is_empty());
        let adopted = a.adopt(&|d| d == "node-a").unwrap();
        assert_eq!(adopted.len(), 1);
        assert!(adopted[0].ends_with("processing/node-a/two.json"));
        assert!(!two.exists());
        // A store of one node never adopts.
        let single = Spool::open(dir.path(), None).unwrap();
        assert!(single.adopt(&|_| false).unwrap().is_empty());
    }

    #[test]
    fn claims_and_files_away() {
        let dir = tempfile::tempdir().unwrap();
        let spool = Spool::open(dir.path(), None).unwrap();
        std::fs::write(dir.path().join("b.json"), "{}").unwrap();
        std::fs::write(dir.path().join("a.ndjson"), "{}").unwrap();
        std::fs::write(dir.path().join(".c.json"), "{}").unwrap();
        let ready = spool.ready(10).unwrap();
        let names: Vec<_> = ready.iter().map(|p| p.file_name().unwrap()).collect();
        assert_eq!(names, ["a.ndjson", "b.json"]);
        let claimed = spool.claim(&ready[0]).unwrap().unwrap();
        assert_eq!(spool.leftovers().unwrap(), std::slice::from_ref(&claimed));
        assert_eq!(spool.claim(&ready[0]).unwrap(), None, "already claimed");
        let done = spool.finish(&claimed, 1, &[], true, "now").unwrap();
        assert!(done.ends_with("done/a.ndjson"));
        // The same name again goes beside it.
        std::fs::write(dir.path().join("a.ndjson"), "{}").unwrap();
        let claimed = spool.claim(&dir.path().join("a.ndjson")).unwrap().unwrap();
        let problem = Problem {
            input: "a.ndjson:1".into(),
            id: None,
            error: "bad".into(),
        };
        let failed = spool.finish(&claimed, 0, &[problem], true, "now").unwrap();
        assert!(failed.ends_with("failed/a.ndjson"));
        assert!(dir.path().join("failed/a.ndjson.error.json").exists());
    }
}
