//! Replacing a small mark file beside the state (`inbox_mark`, `notification_mark`) by a
//! rename, so a reader never sees half of it.
//!
//! The temporary name carries the process id and a counter: threads of one process commit
//! at the same time (serve's workers on PostgreSQL), and with one temporary name per process
//! the second rename found the first had already taken the file away (`ENOENT`).

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

static NEXT: AtomicU64 = AtomicU64::new(0);

/// Writes `contents` to `<dir>/.<name>.<pid>.<n>`, then renames it over `<dir>/<name>`.
pub(super) fn replace(dir: &Path, name: &str, contents: &str) -> std::io::Result<()> {
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let tmp = dir.join(format!(".{name}.{}.{n}", std::process::id()));
    let written =
        std::fs::write(&tmp, contents).and_then(|_| std::fs::rename(&tmp, dir.join(name)));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threads_replacing_one_mark_at_once_all_succeed_and_leave_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let threads: Vec<_> = (0..8)
            .map(|t| {
                let dir = dir.path().to_path_buf();
                std::thread::spawn(move || {
                    for i in 0..200 {
                        replace(&dir, "x.mark", &format!("{t}.{i}")).unwrap();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(names, ["x.mark"]);
        let last = std::fs::read_to_string(dir.path().join("x.mark")).unwrap();
        assert!(last.ends_with(".199"), "{last}");
    }
}
