//! Where command agents write their follow-up events (`PAP_EMIT_FILE`): one private directory
//! per pap process (mode 0700, a random name under the temp dir), created at the first run
//! and removed when pap exits, with one file per attempt in it, removed when the attempt's
//! events are read.
//!
//! A directory per attempt cost a `mkdir` and a recursive removal on every run: about 3% of
//! the CPU of a backlog of no-op agents, measured with perf (see the README's benchmarks).

use std::path::PathBuf;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

static DIR: Mutex<Option<tempfile::TempDir>> = Mutex::new(None);
static NEXT: AtomicU64 = AtomicU64::new(0);

/// One attempt's emit file: its path, free (no file there yet), removed on drop.
pub struct EmitFile {
    pub path: PathBuf,
}

impl Drop for EmitFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// A fresh emit file path in this process's scratch directory.
pub fn emit_file() -> std::io::Result<EmitFile> {
    let mut dir = DIR.lock().unwrap_or_else(|p| p.into_inner());
    if dir.is_none() {
        use std::os::unix::fs::PermissionsExt;
        *dir = Some(
            tempfile::Builder::new()
                .prefix("pap-emit-")
                .permissions(std::fs::Permissions::from_mode(0o700))
                .tempdir()?,
        );
    }
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let path = dir
        .as_ref()
        .expect("created")
        .path()
        .join(format!("emit-{n}.ndjson"));
    Ok(EmitFile { path })
}

/// Removes the scratch directory (at exit; a killed pap leaves it in the temp dir, as it
/// would leave any temporary directory).
pub fn remove() {
    let dir = DIR.lock().unwrap_or_else(|p| p.into_inner()).take();
    drop(dir);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_attempt_gets_its_own_file_and_it_goes_with_the_attempt() {
        let a = emit_file().unwrap();
        let b = emit_file().unwrap();
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
}
