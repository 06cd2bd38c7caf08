//! Beside the state, the newest inbox id, rewritten after each commit that appended to the
//! inbox. Subscribers in other processes (`pap mcp`) watch this small file, which costs a
//! `stat`, instead of opening the store, which would make a writing serve give up and reopen
//! its handle each time. Every store writes it in the state dir of the process that
//! appended; a PostgreSQL store also tells other nodes through `LISTEN/NOTIFY`.

use std::path::{Path, PathBuf};

pub const INBOX_MARK_FILE: &str = "inbox.mark";

/// The inbox mark file of the state in `state_dir`.
pub fn inbox_mark_path(state_dir: &Path) -> PathBuf {
    state_dir.join(INBOX_MARK_FILE)
}

/// Replaces the mark file (a rename, so a reader never sees half of it). The commit stands
/// whatever happens here: a failure is logged, and subscribers in other processes then hear
/// of this append with the next one whose mark is written.
pub fn write(state_dir: &Path, mark: u64) {
    let path = inbox_mark_path(state_dir);
    let written = super::mark_file::replace(state_dir, INBOX_MARK_FILE, &mark.to_string());
    if let Err(e) = written {
        tracing::warn!(path = %path.display(), error = %e, "cannot update the inbox mark file");
    }
}
