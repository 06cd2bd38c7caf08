//! Where command agents write their follow-up events (`PAP_EMIT_FILE`): one private directory
//! per pap process (mode 0700), created at the first run and removed when pap exits, with one
//! file per attempt in it, removed when the attempt's events are read.
//!
//! The directory lives in the state dir's `scratch/` (the temp dir for a store in memory),
//! named after the process: `emit-<pid>-<random>`. A pap that was killed cannot remove its
//! own, so the next one to create a directory there removes those whose process is gone: a
//! service that is restarted by SIGKILL now and then does not fill the disk with them.
//!
//! A directory per attempt cost a `mkdir` and a recursive removal on every run: about 3% of
//! the CPU of a backlog of no-op agents, measured with perf (see the book's benchmarks, docs/src/design/benchmarks.md).

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

static DIR: Mutex<Option<tempfile::TempDir>> = Mutex::new(None);
static NEXT: AtomicU64 = AtomicU64::new(0);

/// One attempt's emit file: its path, free (no file there yet), removed on drop.
pub(crate) struct EmitFile {
    pub path: PathBuf,
}

impl Drop for EmitFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// A fresh emit file path in this process's scratch directory, made under `state_dir`'s
/// `scratch/` (else the temp dir) at the first call.
pub(crate) fn emit_file(state_dir: Option<&Path>) -> std::io::Result<EmitFile> {
    let mut dir = DIR.lock().unwrap_or_else(|p| p.into_inner());
    if dir.is_none() {
        use std::os::unix::fs::PermissionsExt;
        let mut builder = tempfile::Builder::new();
        let prefix = format!("emit-{}-", std::process::id());
        builder
            .prefix(&prefix)
            .permissions(std::fs::Permissions::from_mode(0o700));
        *dir = Some(match state_dir {
            Some(state) => {
                let base = state.join("scratch");
                std::fs::create_dir_all(&base)?;
                sweep(&base);
                builder.tempdir_in(&base)?
            }
            None => builder.tempdir()?,
        });
    }
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let path = dir
        .as_ref()
        .expect("created")
        .path()
        .join(format!("emit-{n}.ndjson"));
    Ok(EmitFile { path })
}

/// Removes the scratch directories in `base` whose process is gone (killed before it could
/// remove its own). A directory whose name does not say a pid is left alone.
fn sweep(base: &Path) {
    let Ok(entries) = std::fs::read_dir(base) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix("emit-"))
            .and_then(|rest| rest.split('-').next())
            .and_then(|pid| pid.parse::<i32>().ok())
        else {
            continue;
        };
        if pid > 0 && !alive(pid) {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// Whether a process with this pid exists (signal 0 asks without sending anything).
fn alive(pid: i32) -> bool {
    use nix::errno::Errno;
    match nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None) {
        Ok(()) => true,
        Err(Errno::ESRCH) => false,
        // EPERM: it exists, as another user's.
        Err(_) => true,
    }
}

/// Removes the scratch directory (at exit; a killed pap leaves it until the next one sweeps).
pub fn remove() {
    let dir = DIR.lock().unwrap_or_else(|p| p.into_inner()).take();
    drop(dir);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_attempt_gets_its_own_file_and_it_goes_with_the_attempt() {
        let a = emit_file(None).unwrap();
        let b = emit_file(None).unwrap();
        assert_ne!(a.path, b.path);
        assert_eq!(a.path.parent(), b.path.parent());
        std::fs::write(&a.path, "{}\n").unwrap();
        let path = a.path.clone();
        drop(a);
        assert!(!path.exists());
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(path.parent().unwrap())
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o700, "private to pap's user");
    }

    #[test]
    fn a_sweep_removes_the_directories_of_processes_that_are_gone() {
        let base = tempfile::tempdir().unwrap();
        // No process has pid i32::MAX (pid_max is at most 2^22).
        let gone = base.path().join(format!("emit-{}-abc", i32::MAX));
        let mine = base.path().join(format!("emit-{}-xyz", std::process::id()));
        let other = base.path().join("not-ours");
        for d in [&gone, &mine, &other] {
            std::fs::create_dir(d).unwrap();
        }
        std::fs::write(gone.join("emit-0.ndjson"), "{}").unwrap();
        sweep(base.path());
        assert!(!gone.exists());
        assert!(mine.exists() && other.exists());
    }
}
