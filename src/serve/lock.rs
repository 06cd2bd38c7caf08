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
    /// What holds it when it is not serve (`pap store compact`, which needs the store to
    /// itself), for the message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
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
    let mut file = file;
    let mut waited = std::time::Duration::ZERO;
    let mut lock = loop {
        match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
            Ok(lock) => break lock,
            Err((back, _)) => file = back,
        }
        // A serve that just died (SIGKILL, a crash) can leave its lock held for a moment by
        // a child it was starting: the child shares the lock until its exec closes it. When
        // the named holder is gone, wait for that moment to pass instead of refusing.
        if waited >= HOLDER_GONE_WAIT || holder_alive(&mut file) {
            bail!("{}", refusal(&mut file, state_dir));
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
        waited += std::time::Duration::from_millis(20);
    };
    lock.set_len(0)?;
    lock.rewind()?;
    lock.write_all(serde_json::to_string(holder)?.as_bytes())?;
    lock.sync_data()?;
    Ok(ServeLock { _lock: lock })
}

/// The serve the lock file names, when that process is alive: serve may run without an
/// answering socket (a path too long to bind, another user's 0600 socket). Read without taking
/// the lock, so a serve starting at that moment is never refused because of it.
pub fn live_holder(state_dir: &Path) -> Option<Holder> {
    let text = std::fs::read_to_string(state_dir.join(LOCK_FILE)).ok()?;
    let holder: Holder = serde_json::from_str(&text).ok()?;
    let pid = nix::unistd::Pid::from_raw(i32::try_from(holder.pid).ok()?);
    let alive = !matches!(
        nix::sys::signal::kill(pid, None),
        Err(nix::errno::Errno::ESRCH)
    );
    (alive && holder.command.is_none()).then_some(holder)
}

/// How long a new serve waits for a lock whose named holder is dead.
const HOLDER_GONE_WAIT: std::time::Duration = std::time::Duration::from_secs(3);

/// Whether the serve the lock file names still runs (or cannot be told: then it does).
fn holder_alive(file: &mut File) -> bool {
    let mut text = String::new();
    let _ = file.rewind();
    let _ = file.read_to_string(&mut text);
    let Ok(holder) = serde_json::from_str::<Holder>(&text) else {
        // Not written yet: a serve that is starting.
        return true;
    };
    let pid = nix::unistd::Pid::from_raw(holder.pid as i32);
    !matches!(
        nix::sys::signal::kill(pid, None),
        Err(nix::errno::Errno::ESRCH)
    )
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
            "another `{}` already runs on the state dir {} (pid {}, started {}, project {}); \
             stop it first (kill -TERM {}), or give this one its own --state",
            h.command.as_deref().unwrap_or("pap serve"),
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;
    use std::time::{Duration, Instant};

    fn holder(pid: u32) -> String {
        serde_json::to_string(&Holder {
            pid,
            started_at: "2026-03-11T06:00:00Z".into(),
            root: "/p".into(),
            command: None,
        })
        .unwrap()
    }

    /// `flock(1)` holds the lock for `secs` in another process, as a child of a dead serve
    /// would until its exec.
    fn hold_elsewhere(path: &Path, secs: &str) -> Option<std::process::Child> {
        let child = Command::new("flock")
            .arg(path)
            .args(["sleep", secs])
            .spawn()
            .ok()?;
        std::thread::sleep(Duration::from_millis(150));
        Some(child)
    }

    #[test]
    fn a_lock_left_for_a_moment_by_a_dead_serve_is_waited_for_a_live_one_refuses() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(LOCK_FILE);
        // A pid that is surely gone: a child that ran and was reaped.
        let mut gone = Command::new("true").spawn().unwrap();
        let dead = gone.id();
        gone.wait().unwrap();
        std::fs::write(&path, holder(dead)).unwrap();
        let Some(mut other) = hold_elsewhere(&path, "0.5") else {
            eprintln!("note: skipped: flock(1) is not installed");
            return;
        };
        let me = Holder {
            pid: std::process::id(),
            started_at: "now".into(),
            root: "/p".into(),
            command: None,
        };
        let started = Instant::now();
        let lock = acquire(dir.path(), &me).expect("taken once the moment passed");
        assert!(started.elapsed() >= Duration::from_millis(200));
        drop(lock);
        other.wait().unwrap();

        // A holder that runs (this test's own process) is refused at once.
        std::fs::write(&path, holder(std::process::id())).unwrap();
        let mut other = hold_elsewhere(&path, "2").unwrap();
        let started = Instant::now();
        let err = acquire(dir.path(), &me).err().expect("refused");
        assert!(started.elapsed() < Duration::from_secs(2), "not waited for");
        assert!(err.to_string().contains("already runs"), "{err}");
        other.kill().unwrap();
        other.wait().unwrap();
    }
}
