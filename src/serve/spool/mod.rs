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
//!
//! Serve never follows a link inside the spool: its directories are held open by descriptor
//! ([`held`]), every operation is relative to one, and before each pass [`Spool::check`]
//! makes sure each name still leads to the directory held. A link there stops the taking of
//! spool files until it is a directory again (see [`health`]); a directory that went missing
//! (on a shared spool another node may have taken this one for gone while it started, and
//! removed its empty `processing/NODE/`) is created again. The spool directory itself may be
//! a link (a spool on another disk): it is resolved once, at start.

pub(super) mod health;
mod held;
mod names;
pub(super) mod settle;

use std::collections::HashSet;
use std::ffi::OsString;
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use serde_json::json;

pub(super) use health::Health;
use held::{Held, Kind, OpenError, Still};
use names::{free_name, pap_wrote};
pub(super) use names::{is_event_file, node_dir};

/// Why the spool cannot be used.
#[derive(Debug, thiserror::Error)]
pub(super) enum SpoolError {
    /// One of the spool's directories is a link, or not a directory.
    #[error(
        "{} is {what}: serve never follows a link inside the spool, nor files anything through \
         one (make it a directory again; to keep the spool on another disk, make the spool \
         directory itself the link, or point spool_dir there)",
        path.display()
    )]
    NotADirectory { path: PathBuf, what: String },
    /// The spool directory's path leads elsewhere now.
    #[error(
        "{} is no longer the spool directory serve opened at start (it was moved, removed or \
         replaced): put it back, or restart serve to take the new one",
        path.display()
    )]
    Moved { path: PathBuf },
    #[error("{what} {}: {error}", path.display())]
    Io {
        what: &'static str,
        path: PathBuf,
        error: io::Error,
    },
}

impl SpoolError {
    fn io(what: &'static str, path: impl Into<PathBuf>, error: io::Error) -> SpoolError {
        SpoolError::Io {
            what,
            path: path.into(),
            error,
        }
    }
}

/// A file this process claimed: a name in its `processing/` directory.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Claimed(String);

impl Claimed {
    pub(super) fn name(&self) -> &str {
        &self.0
    }
}

pub(super) struct Spool {
    /// The spool directory, links resolved at start.
    pub dir: PathBuf,
    root: Held,
    /// `processing/`, whatever the node.
    processing_root: Held,
    /// This node's `processing/NODE/` on a shared store: its name and the directory.
    node: Option<(String, Held)>,
    done: Held,
    failed: Held,
    /// Entries serve will never take, already logged (each is logged once).
    ignored: Mutex<HashSet<OsString>>,
}

/// A bad event (or the whole file, when it could not be read) and why.
#[derive(Debug, Clone)]
pub(super) struct Problem {
    /// `NAME:LINE`, `NAME[INDEX]`, or `NAME` for the file itself.
    pub input: String,
    pub id: Option<String>,
    pub error: String,
}

impl Spool {
    /// The spool in `dir`, its directories created when missing; `node` is this node's id
    /// on a shared store. `dir` may be a link (resolved now, once, and logged); one of the
    /// directories in it that is a link is an error naming it.
    pub(super) fn open(dir: &Path, node: Option<&str>) -> Result<Spool, SpoolError> {
        let linked = std::fs::symlink_metadata(dir).is_ok_and(|m| m.file_type().is_symlink());
        if !linked {
            std::fs::create_dir_all(dir).map_err(|e| SpoolError::io("creating", dir, e))?;
        }
        let resolved = dir
            .canonicalize()
            .map_err(|e| SpoolError::io("resolving", dir, e))?;
        if linked {
            tracing::info!(
                spool = %dir.display(),
                resolved = %resolved.display(),
                "the spool directory is a link: resolved once, now; serve uses where it leads until it stops"
            );
        }
        let root = Held::open(&resolved).map_err(|e| match e {
            OpenError::NotDir => SpoolError::NotADirectory {
                path: resolved.clone(),
                what: "not a directory".into(),
            },
            OpenError::Io(e) => SpoolError::io("opening", &resolved, e),
        })?;
        let processing_root = sub(&root, "processing")?;
        let node = match node {
            Some(id) => {
                let name = node_dir(id);
                let held = sub(&processing_root, &name)?;
                Some((name, held))
            }
            None => None,
        };
        Ok(Spool {
            dir: resolved,
            done: sub(&root, "done")?,
            failed: sub(&root, "failed")?,
            root,
            processing_root,
            node,
            ignored: Default::default(),
        })
    }

    /// Makes sure each of the spool's directories is still the one held: the spool
    /// directory's path, and the names `processing/`, this node's directory in it, `done/`
    /// and `failed/`, none followed if a link. One that went missing is created again, and
    /// another directory put in one's place is taken (each logged); a link, or anything but a
    /// directory, is an error, and nothing is done through it.
    pub(super) fn check(&mut self) -> Result<(), SpoolError> {
        if !self.root.is_at(&self.dir) {
            return Err(SpoolError::Moved {
                path: self.dir.clone(),
            });
        }
        keep(&self.root, "processing", &mut self.processing_root)?;
        if let Some((name, held)) = &mut self.node {
            keep(&self.processing_root, name, held)?;
        }
        keep(&self.root, "done", &mut self.done)?;
        keep(&self.root, "failed", &mut self.failed)
    }

    /// Where this process claims files: `processing/`, or `processing/NODE/` on a shared
    /// store.
    fn claims(&self) -> &Held {
        self.node
            .as_ref()
            .map_or(&self.processing_root, |(_, held)| held)
    }

    /// Names of files ready to claim, oldest name first: regular files named `*.json` and
    /// `*.ndjson`, not hidden, not `*.tmp` (writers write under such a name, then rename).
    /// Anything else (a link, a FIFO, a directory, another extension, a name that is not
    /// UTF-8) is never opened nor followed, and logged once.
    pub(super) fn ready(&self, limit: usize) -> Result<Vec<String>, SpoolError> {
        let mut found = Vec::new();
        let entries = self
            .root
            .entries()
            .map_err(|e| SpoolError::io("listing", &self.dir, e))?;
        for (raw_name, kind) in entries {
            let why = match raw_name.to_str() {
                None => Some("its name is not UTF-8"),
                Some(name) if name.starts_with('.') || name.ends_with(".tmp") => continue,
                // The spool's own directories: [`Spool::check`] looks at them.
                Some("processing" | "done" | "failed") => continue,
                Some(name) if !is_event_file(name) => {
                    Some("only *.json and *.ndjson files are events")
                }
                Some(_) if kind == Kind::Link => Some("a symbolic link (never followed)"),
                Some(_) if kind != Kind::File => Some("not a regular file"),
                Some(name) => {
                    found.push(name.to_owned());
                    None
                }
            };
            if let Some(why) = why {
                let path = self.dir.join(&raw_name);
                let mut ignored = self.ignored.lock().unwrap_or_else(|p| p.into_inner());
                if ignored.len() < 10_000 && ignored.insert(raw_name) {
                    tracing::warn!(
                        path = %crate::term::for_humans(&path.to_string_lossy()),
                        why,
                        "spool entry ignored"
                    );
                }
            }
        }
        found.sort();
        found.truncate(limit);
        Ok(found)
    }

    /// Whether ready file `name` may be claimed now (see [`settle`]).
    pub(super) fn readiness(&self, name: &str, renamed: bool, wait: Duration) -> settle::Readiness {
        settle::readiness(self.root.fd(), name, renamed, wait)
    }

    /// Files a crash left claimed: this node's, and on a shared store those an earlier
    /// release left in `processing/` itself (taken into this node's directory first, so no
    /// other node resumes them too).
    pub(super) fn leftovers(&self) -> Result<Vec<Claimed>, SpoolError> {
        let mut found: Vec<Claimed> = files_in(self.claims())?.into_iter().map(Claimed).collect();
        if self.node.is_some() {
            found.extend(self.take_over(&self.processing_root)?);
        }
        found.sort();
        Ok(found)
    }

    /// Takes over the files that nodes which are gone left claimed: `alive` says whether a
    /// node (by its directory's name, see [`node_dir`]) is still heard from. Each file is
    /// taken with a rename, so two nodes adopting at once never both take one; a link in
    /// `processing/` is never followed. Returns the files now this node's to dispatch.
    pub(super) fn adopt(&self, alive: &dyn Fn(&str) -> bool) -> Result<Vec<Claimed>, SpoolError> {
        let Some((own, _)) = &self.node else {
            return Ok(Vec::new());
        };
        let entries = self
            .processing_root
            .entries()
            .map_err(|e| SpoolError::io("listing", &self.processing_root.path, e))?;
        let mut adopted = Vec::new();
        for (name, kind) in entries {
            let Some(name) = name.to_str() else { continue };
            if kind != Kind::Dir || name == own || alive(name) {
                continue;
            }
            // Gone meanwhile (another node adopted it), or turned into a link: not followed.
            let Ok(dir) = self.processing_root.sub(name, false) else {
                continue;
            };
            adopted.extend(self.take_over(&dir)?);
            // Empty now, unless its node came back meanwhile and claimed again (a node whose
            // directory is removed as it starts creates it again).
            let _ = self.processing_root.rmdir(name);
        }
        adopted.sort();
        Ok(adopted)
    }

    /// Renames every file of `from` into this node's directory; returns them.
    fn take_over(&self, from: &Held) -> Result<Vec<Claimed>, SpoolError> {
        let mine = self.claims();
        let mut taken = Vec::new();
        for name in files_in(from)? {
            let path = from.path.join(&name);
            let target =
                free_name(mine, &name).map_err(|e| SpoolError::io("taking over", &path, e))?;
            // `false`: another node took it first.
            if moved(from, &name, mine, &target)
                .map_err(|e| SpoolError::io("taking over", &path, e))?
            {
                taken.push(Claimed(target));
            }
        }
        Ok(taken)
    }

    /// Moves ready file `name` into this node's `processing/`; `None` when it is gone (its
    /// writer removed it, or another node claimed it).
    pub(super) fn claim(&mut self, name: &str) -> Result<Option<Claimed>, SpoolError> {
        let claim = |spool: &Spool| moved(&spool.root, name, spool.claims(), name);
        let done = match claim(self) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                // The file is there, the directory this node claims into is not: created
                // again, and the claim tried once more.
                self.check()?;
                claim(self)
            }
            other => other,
        };
        match done {
            Ok(true) => Ok(Some(Claimed(name.to_owned()))),
            Ok(false) => Ok(None),
            Err(e) => Err(SpoolError::io("claiming", self.dir.join(name), e)),
        }
    }

    /// Claimed file `c` opened for reading: a regular file, never through a link.
    pub(super) fn open_claimed(&self, c: &Claimed) -> io::Result<File> {
        self.claims().open_file(&c.0)
    }

    /// Puts a claimed file back among the ready ones (nothing of it was decided).
    pub(super) fn unclaim(&self, c: &Claimed) -> io::Result<()> {
        self.claims().rename(&c.0, &self.root, &c.0)
    }

    /// Why claimed file `c` is not wholly read, if it grew while (or after) it was read: its
    /// writer was still writing. What was read is decided; the rest is not, so the file goes
    /// to `failed/`, never to `done/` with lines unread.
    pub(super) fn grew_after_read(&self, c: &Claimed, read: u64) -> Option<String> {
        let now = self.claims().stat(&c.0).ok()??.st_size;
        let now = u64::try_from(now).unwrap_or(0);
        (now > read).then(|| {
            format!(
                "the file grew while serve read it ({read} bytes read, {now} now): its writer was still writing. \
                 The events read were decided; to decide the rest, move the file back into the spool \
                 (the decided ones are then duplicates). Writers should write under a temporary name and rename."
            )
        })
    }

    /// Files a claimed file away: to `done/` (or deleted, with no retention), or with
    /// problems to `failed/` beside `NAME.error.json`. The error file is written first, so a
    /// crash in between leaves the file in `processing/` to be dispatched again. Where it
    /// went, or `None` when it was gone (on a shared spool, another node took it over).
    pub(super) fn finish(
        &self,
        c: &Claimed,
        valid: usize,
        problems: &[Problem],
        keep_done: bool,
        now: &str,
    ) -> Result<Option<PathBuf>, SpoolError> {
        let (from, name) = (self.claims(), c.name());
        let path = from.path.join(name);
        let failed = |e| SpoolError::io("filing away", &path, e);
        if problems.is_empty() {
            if !keep_done {
                return match from.unlink(name) {
                    Ok(()) => Ok(Some(path.clone())),
                    Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
                    Err(e) => Err(failed(e)),
                };
            }
            let target = free_name(&self.done, name).map_err(failed)?;
            let moved = moved(from, name, &self.done, &target).map_err(failed)?;
            return Ok(moved.then(|| self.done.path.join(target)));
        }
        let target = free_name(&self.failed, name).map_err(failed)?;
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
        let text = serde_json::to_string_pretty(&report).expect("serialisable") + "\n";
        self.failed
            .write_whole(&format!("{target}.error.json"), text.as_bytes())
            .map_err(failed)?;
        let moved = moved(from, name, &self.failed, &target).map_err(failed)?;
        Ok(moved.then(|| self.failed.path.join(target)))
    }

    /// Deletes what pap filed in `done/` longer than `retention` ago: regular files (not
    /// followed if a link) whose names pap writes; anything else there is left alone.
    /// Returns how many.
    pub(super) fn sweep_done(&self, retention: Duration) -> Result<usize, SpoolError> {
        // Compared with files' modification times, which are on the system's clock.
        #[allow(clippy::disallowed_methods)]
        let cutoff = SystemTime::now() - retention;
        let entries = self
            .done
            .entries()
            .map_err(|e| SpoolError::io("listing", &self.done.path, e))?;
        let mut removed = 0;
        for (name, kind) in entries {
            let Some(name) = name.to_str() else { continue };
            if kind != Kind::File || !pap_wrote(name) {
                continue;
            }
            // Looked at again, on the name itself: the listing may be old.
            let old = self
                .done
                .stat(name)
                .ok()
                .flatten()
                .is_some_and(|st| Kind::of(&st) == Kind::File && held::modified(&st) < cutoff);
            if old && self.done.unlink(name).is_ok() {
                removed += 1;
            }
        }
        Ok(removed)
    }
}

/// Directory `name` in `parent`, created when missing.
fn sub(parent: &Held, name: &str) -> Result<Held, SpoolError> {
    parent.sub(name, true).map_err(|e| match e {
        OpenError::NotDir => SpoolError::NotADirectory {
            path: parent.path.join(name),
            what: held::describe(parent, name),
        },
        OpenError::Io(e) => SpoolError::io("opening", parent.path.join(name), e),
    })
}

/// Makes sure `name` in `parent` is still `held` (see [`Spool::check`]).
fn keep(parent: &Held, name: &str, held: &mut Held) -> Result<(), SpoolError> {
    let still = held
        .still_at(parent, name)
        .map_err(|e| SpoolError::io("looking at", parent.path.join(name), e))?;
    let why = match still {
        Still::Same => return Ok(()),
        Still::NotDir => {
            return Err(SpoolError::NotADirectory {
                path: parent.path.join(name),
                what: held::describe(parent, name),
            });
        }
        Still::Missing => "was gone: created it again",
        Still::OtherDir => "was replaced by another directory: using that one",
    };
    *held = sub(parent, name)?;
    tracing::warn!(dir = %held.path.display(), "spool directory {why}");
    Ok(())
}

/// Renames `name` in `from` to `new_name` in `to`: `false` when there is no `name` (someone
/// else moved it). An error when `to` is gone (removed under its descriptor).
fn moved(from: &Held, name: &str, to: &Held, new_name: &str) -> io::Result<bool> {
    match from.rename(name, to, new_name) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::NotFound => match from.stat(name)? {
            None => Ok(false),
            Some(_) => Err(e),
        },
        Err(e) => Err(e),
    }
}

/// The regular files directly in `dir` (by name; not followed if a link).
fn files_in(dir: &Held) -> Result<Vec<String>, SpoolError> {
    let entries = dir
        .entries()
        .map_err(|e| SpoolError::io("listing", &dir.path, e))?;
    Ok(entries
        .into_iter()
        .filter(|(_, kind)| *kind == Kind::File)
        .filter_map(|(name, _)| name.into_string().ok())
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(claimed: &[Claimed]) -> Vec<&str> {
        claimed.iter().map(Claimed::name).collect()
    }

    #[test]
    fn a_file_longer_than_what_was_read_grew() {
        let dir = tempfile::tempdir().unwrap();
        let mut spool = Spool::open(dir.path(), None).unwrap();
        std::fs::write(dir.path().join("a.ndjson"), "12345\n").unwrap();
        let c = spool.claim("a.ndjson").unwrap().unwrap();
        assert_eq!(spool.grew_after_read(&c, 6), None);
        let why = spool.grew_after_read(&c, 3).unwrap();
        assert!(why.contains("3 bytes read, 6 now"), "{why}");
    }

    #[test]
    fn nodes_sharing_a_spool_claim_apart_and_adopt_what_a_gone_node_left() {
        let dir = tempfile::tempdir().unwrap();
        let mut a = Spool::open(dir.path(), Some("node-a")).unwrap();
        let mut b = Spool::open(dir.path(), Some("node/b")).unwrap();
        std::fs::write(dir.path().join("one.json"), "{}").unwrap();
        std::fs::write(dir.path().join("two.json"), "{}").unwrap();
        // An earlier release's leftover, in processing/ itself.
        std::fs::write(dir.path().join("processing/old.json"), "{}").unwrap();
        let one = a.claim("one.json").unwrap().unwrap();
        assert!(dir.path().join("processing/node-a/one.json").exists());
        assert_eq!(b.claim("one.json").unwrap(), None);
        let two = b.claim("two.json").unwrap().unwrap();
        // An id that is not a plain file name is spelt in hex.
        let b_dir = dir.path().join("processing").join(node_dir("node/b"));
        assert!(b_dir.join("two.json").exists());
        assert_ne!(node_dir("node/b"), "node/b");
        // Each resumes its own, and the first to look takes the old leftover.
        assert_eq!(names(&a.leftovers().unwrap()), ["old.json", one.name()]);
        assert!(dir.path().join("processing/node-a/old.json").exists());
        assert_eq!(b.leftovers().unwrap(), std::slice::from_ref(&two));
        // While b is heard from, a leaves its claims alone; once it is gone, a takes them.
        assert!(a.adopt(&|_| true).unwrap().is_empty());
        let adopted = a.adopt(&|d| d == "node-a").unwrap();
        assert_eq!(names(&adopted), ["two.json"]);
        assert!(dir.path().join("processing/node-a/two.json").exists());
        assert!(!b_dir.exists(), "its empty directory is removed");
        // b, still running, creates its directory again at its next look, and claims.
        std::fs::write(dir.path().join("three.json"), "{}").unwrap();
        assert!(b.claim("three.json").unwrap().is_some());
        assert!(b_dir.join("three.json").exists());
        // A store of one node never adopts.
        let single = Spool::open(dir.path(), None).unwrap();
        assert!(single.adopt(&|_| false).unwrap().is_empty());
    }

    #[test]
    fn claims_and_files_away() {
        let dir = tempfile::tempdir().unwrap();
        let mut spool = Spool::open(dir.path(), None).unwrap();
        std::fs::write(dir.path().join("b.json"), "{}").unwrap();
        std::fs::write(dir.path().join("a.ndjson"), "{}").unwrap();
        std::fs::write(dir.path().join(".c.json"), "{}").unwrap();
        assert_eq!(spool.ready(10).unwrap(), ["a.ndjson", "b.json"]);
        // The same name again goes beside the first.
        for filed in ["done/a.ndjson", "done/a.ndjson.1"] {
            std::fs::write(dir.path().join("a.ndjson"), "{}").unwrap();
            let claimed = spool.claim("a.ndjson").unwrap().unwrap();
            assert_eq!(spool.leftovers().unwrap(), std::slice::from_ref(&claimed));
            assert_eq!(spool.claim("a.ndjson").unwrap(), None, "already claimed");
            let to = spool.finish(&claimed, 1, &[], true, "now").unwrap();
            assert!(to.unwrap().ends_with(filed));
        }
        std::fs::write(dir.path().join("a.ndjson"), "{}").unwrap();
        let claimed = spool.claim("a.ndjson").unwrap().unwrap();
        let problem = Problem {
            input: "a.ndjson:1".into(),
            id: None,
            error: "bad".into(),
        };
        let failed = spool.finish(&claimed, 0, &[problem], true, "now").unwrap();
        assert!(failed.unwrap().ends_with("failed/a.ndjson"));
        assert!(dir.path().join("failed/a.ndjson.error.json").exists());
        // Gone meanwhile (another node took it over): said so, not an error.
        assert_eq!(spool.finish(&claimed, 0, &[], true, "now").unwrap(), None);
    }

    #[test]
    fn a_directory_that_is_a_link_is_refused_at_open_and_seen_by_the_check() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("done")).unwrap();
        let err = Spool::open(dir.path(), None).err().unwrap();
        let text = err.to_string();
        assert!(text.contains("done is a symbolic link"), "{text}");
        std::fs::remove_file(dir.path().join("done")).unwrap();
        let mut spool = Spool::open(dir.path(), None).unwrap();
        spool.check().unwrap();
        // failed/ swapped for a link while running: an error, and nothing goes there.
        std::fs::rename(dir.path().join("failed"), dir.path().join("failed.old")).unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("failed")).unwrap();
        let err = spool.check().unwrap_err();
        assert!(matches!(err, SpoolError::NotADirectory { .. }), "{err}");
        // Put back: sound again. Missing: created again.
        std::fs::remove_file(dir.path().join("failed")).unwrap();
        std::fs::rename(dir.path().join("failed.old"), dir.path().join("failed")).unwrap();
        spool.check().unwrap();
        std::fs::remove_dir(dir.path().join("done")).unwrap();
        spool.check().unwrap();
        assert!(dir.path().join("done").is_dir());
        assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);
    }
}
