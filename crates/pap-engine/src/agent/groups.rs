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

/// Stops a running agent's process group: SIGTERM, then SIGKILL once `grace` has passed.
/// Returns whether a process of it was running.
pub fn stop(group: &Runner, grace: std::time::Duration) -> bool {
    if !group.signal_group(nix::sys::signal::Signal::SIGTERM) {
        return false;
    }
    if !group.wait_group_ended(grace) {
        group.kill_group();
        group.wait_group_gone(std::time::Duration::from_secs(5));
    }
    true
}

/// Stops the process groups of runs a decision cancelled while they ran (a trigger's
/// `cancel_on`), as `pap invocations cancel` stops them, on a thread of its own: the deciding
/// thread does not wait out their grace period. Runs on another node stop when their runner
/// finds its lease gone. Once stopped, the concurrency slots they kept are freed.
pub fn stop_cancelled(
    store: std::sync::Arc<dyn crate::storage::Storage>,
    runs: Vec<(String, crate::domain::Lease)>,
    grace: std::time::Duration,
) {
    let Some(dir) = store.dir() else {
        return;
    };
    let here: Vec<String> = runs
        .into_iter()
        .filter(|(_, lease)| lease.node == crate::liveness::this_node())
        .map(|(id, _)| id)
        .collect();
    if here.is_empty() {
        return;
    }
    let spawned = std::thread::Builder::new()
        .name("pap-cancel-stop".into())
        .spawn(move || {
            for id in &here {
                if let Some(group) = read(&dir, id) {
                    stop(&group, grace);
                }
            }
            let freed = store.write(|tx| {
                for id in &here {
                    super::release_stopping(tx, id)?;
                }
                Ok(())
            });
            if let Err(e) = freed {
                tracing::warn!(error = %e, "cannot free the concurrency slots of cancelled runs; they free at their stopping time");
            }
        });
    if let Err(e) = spawned {
        tracing::warn!(error = %e, "cannot start the thread that stops cancelled runs");
    }
}
