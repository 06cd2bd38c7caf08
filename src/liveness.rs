//! Who holds an invocation: the [`Runner`] recorded on it names a process by pid and start
//! time, so a process that died (crash, SIGKILL) is told from a live one, and a pid the
//! system reused for another program is not mistaken for the runner.

use std::sync::OnceLock;

use crate::store::Runner;

/// This process's start time, read once: every invocation a dispatch decides records it.
fn own_start() -> Option<u64> {
    static START: OnceLock<Option<u64>> = OnceLock::new();
    *START.get_or_init(|| start_time(std::process::id()))
}

impl Runner {
    /// This process, from `now` on.
    pub fn current(now: i64) -> Runner {
        Runner {
            pid: std::process::id(),
            since: now,
            started: own_start(),
        }
    }

    /// Whether this is the calling process.
    pub fn is_current(&self) -> bool {
        self.pid == std::process::id() && self.started == own_start()
    }

    /// Whether the process still runs (a zombie does not).
    pub fn is_alive(&self) -> bool {
        if cfg!(target_os = "linux") {
            return match (self.started, start_time(self.pid)) {
                (_, None) => false,
                (Some(recorded), Some(now)) => recorded == now,
                (None, Some(_)) => true,
            };
        }
        let pid = nix::unistd::Pid::from_raw(self.pid as i32);
        match nix::sys::signal::kill(pid, None) {
            Ok(()) => true,
            Err(errno) => errno == nix::errno::Errno::EPERM,
        }
    }

    /// Whether another process that is still alive holds the invocation.
    pub fn is_other_live(&self) -> bool {
        !self.is_current() && self.is_alive()
    }
}

/// Linux: the process's start time in clock ticks after boot (field 22 of /proc/PID/stat),
/// `None` when there is no such process or it is a zombie. Elsewhere: `None`.
fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold spaces or parentheses itself.
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    let state = fields.next()?;
    if matches!(state, "Z" | "X" | "x") {
        return None;
    }
    // `rest` starts at field 3 (state); field 22 is 19 further on.
    fields.nth(18)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_current_and_alive() {
        let me = Runner::current(0);
        assert!(me.is_current());
        assert!(me.is_alive());
        assert!(!me.is_other_live());
    }

    #[test]
    fn a_dead_child_is_not_alive_and_a_reused_pid_is_not_the_runner() {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        let gone = Runner {
            pid,
            since: 0,
            started: Some(1),
        };
        assert!(!gone.is_alive());
        let impostor = Runner {
            pid: std::process::id(),
            since: 0,
            started: Some(1),
        };
        assert!(!impostor.is_alive(), "same pid, other start time");
    }
}
