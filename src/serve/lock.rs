//! One `pap serve` per state dir: an exclusive `flock` on `<state>/serve.lock`, which the
//! kernel releases when the process dies however it dies, so a crash never leaves a stale
//! lock. The file names the holder, for the message a second serve prints.

use std::fs::File;
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use nix::fcntl::{Flock, FlockArg};
use serde::{Deserialize, Serialize};

pub const LOCK_FILE: &str = "serve.lock";

/// Who holds the lock.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Holder {
    pub pid: u32,
    pub started_at: String,
    pub root: PathBuf,
}

/// Held for as long as serve runs.
pub struct ServeLock {
    _lock: Flock<File>,
}

pub fn acquire(state_dir: &Path, holder: &Holder) -> anyhow::Result<ServeLock> {
    let path = state_dir.join(LOCK_FILE);
    let file = File::options()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .with_context(|| format!("opening {}", path.display()))?;
    let mut lock = match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
        Ok(lock) => lock,
        Err((mut file, _)) => bail!("{}", refusal(&mut file, state_dir)),
    };
    lock.set_len(0)?;
    lock.rewind()?;
    lock.write_all(serde_json::to_string(holder)?.as_bytes())?;
    lock.sync_data()?;
    Ok(ServeLock { _lock: lock })
}

/// The message for a second serve, naming the first.
fn refusal(file: &mut File, state_dir: &Path) -> String {
    let mut holder = None;
    // The first serve writes its details right after taking the lock: give it a moment.
    for _ in 0..20 {
        let mut text = String::new();
        let _ = file.rewind();
        let _ = file.read_to_string(&mut text);
        holder = serde_json::from_str::<Holder>(&text).ok();
        if holder.is_some() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    match holder {
        Some(h) => format!(
            "another `pap serve` already runs on the state dir {} (pid {}, started {}, project {}); \
             stop it first (kill -TERM {}), or give this one its own --state",
            state_dir.display(),
            h.pid,
            h.started_at,
            h.root.display(),
            h.pid
        ),
        None => format!(
            "another `pap serve` already runs on the state dir {} ({} is locked)",
            state_dir.display(),
            state_dir.join(LOCK_FILE).display()
        ),
    }
}
