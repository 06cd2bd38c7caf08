//! Where a running command agent's process group is recorded: one small file per running
//! invocation, `<state>/groups/<invocation id>`, holding its leader's pid and start time as
//! JSON. It is written before the program may start and removed when the run is over, so a
//! recovery after a crash finds the group of the run that was cut short.
//!
//! A file, not the store: a store transaction opens and syncs the redb file (measured: one
//! more per run made a batch of quick runs three times slower), and this record only has to
//! survive pap's own death, which the page cache does. A machine that restarts ends every
//! process anyway, so the file is not synced.

use std::path::{Path, PathBuf};

use crate::domain::Runner;

/// The record of one run; removed when dropped.
pub struct Record(PathBuf);

impl Drop for Record {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn path(state_dir: &Path, invocation: &str) -> PathBuf {
    // Ids are `inv_` and hex; anything else is spelt out in hex, so it stays one file name.
    let name = if invocation
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    {
        invocation.to_owned()
    } else {
        crate::text::hex(invocation.as_bytes())
    };
    state_dir.join("groups").join(name)
}

/// Records `group` as the one running `invocation`.
pub fn write(state_dir: &Path, invocation: &str, group: &Runner) -> std::io::Result<Record> {
    let file = path(state_dir, invocation);
    if let Some(dir) = file.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let text = serde_json::to_vec(group).expect("serialisable");
    std::fs::write(&file, text)?;
    Ok(Record(file))
}

/// The group recorded for `invocation`, if a run of it did not end cleanly.
pub fn read(state_dir: &Path, invocation: &str) -> Option<Runner> {
    let text = std::fs::read(path(state_dir, invocation)).ok()?;
    serde_json::from_slice(&text).ok()
}

/// Forgets the group of `invocation` (it is gone).
pub fn remove(state_dir: &Path, invocation: &str) {
    let _ = std::fs::remove_file(path(state_dir, invocation));
}
