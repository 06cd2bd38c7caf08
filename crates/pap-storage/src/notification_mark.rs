//! Beside the state, a token rewritten after each commit that changed a notification (an
//! acknowledgement, an answer, a sink's result, a new one). A `pap mcp` in another process
//! watches this small file, as it watches the inbox mark (`inbox_mark`), to tell its
//! subscribers of `pap://notifications/{id}` and the inbox that a notification changed,
//! without opening the store at each look. A PostgreSQL store also tells other nodes through
//! `LISTEN/NOTIFY` (`pap_notification`).

use std::path::{Path, PathBuf};

pub(crate) const NOTIFICATIONS_MARK_FILE: &str = "notifications.mark";

/// The notifications mark file of the state in `state_dir`.
pub fn notifications_mark_path(state_dir: &Path) -> PathBuf {
    state_dir.join(NOTIFICATIONS_MARK_FILE)
}

/// Replaces the mark file with a token no earlier write had (this process's id and the
/// time in nanoseconds): a watcher only asks whether it differs from the last it read. As
/// with the inbox mark, the commit stands whatever happens here.
pub fn write(state_dir: &Path) {
    let path = notifications_mark_path(state_dir);
    // A token that differs from the last, not a time.
    #[allow(clippy::disallowed_methods)]
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    let token = format!("{nanos}.{}", std::process::id());
    let written = super::mark_file::replace(state_dir, NOTIFICATIONS_MARK_FILE, &token);
    if let Err(e) = written {
        tracing::warn!(path = %path.display(), error = %e, "cannot update the notifications mark file");
    }
}

/// The token in the mark file; `None` when it is missing or being replaced.
pub fn read(path: &Path) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    let token = text.trim();
    (!token.is_empty()).then(|| token.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_write_leaves_a_new_token() {
        let dir = tempfile::tempdir().unwrap();
        let path = notifications_mark_path(dir.path());
        assert_eq!(read(&path), None);
        write(dir.path());
        let first = read(&path).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(2));
        write(dir.path());
        assert_ne!(read(&path).unwrap(), first);
    }
}
