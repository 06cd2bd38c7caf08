//! Who holds an invocation: the [`Runner`] in its lease (see `domain::lease`) names a process
//! by pid and start time, so a process that died (crash, SIGKILL) is told from a live one,
//! and a pid the system reused for another program is not mistaken for the holder; the
//! node (the boot id) tells this host's processes from another's.
//!
//! The same record names a command agent's process group (its leader is the agent's
//! supervisor, see `agent::supervise`): [`Runner::group_alive`] and
//! [`Runner::kill_group`] let a recovery make sure a crashed runner's agent is gone before the
//! invocation runs again.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

use crate::lease::{HolderFacts, Holding, holding};
use crate::{Lease, Runner};

/// This process's start time, read once: every invocation a dispatch decides records it.
fn own_start() -> Option<u64> {
    static START: OnceLock<Option<u64>> = OnceLock::new();
    *START.get_or_init(|| start_time(std::process::id()))
}

/// This node: the kernel's boot id (a new one at every boot), or the host name where there
/// is none; on a shared store, followed by `:` and a digest of the state dir (see
/// [`scope_to_state`]). Read once.
pub fn this_node() -> &'static str {
    SCOPED.get().copied().unwrap_or_else(boot)
}

fn boot() -> &'static str {
    static BOOT: OnceLock<String> = OnceLock::new();
    BOOT.get_or_init(|| {
        std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
            .or_else(|_| std::fs::read_to_string("/etc/hostname"))
            .map(|s| s.trim().to_owned())
            .unwrap_or_default()
    })
}

static SCOPED: OnceLock<&'static str> = OnceLock::new();

/// On a store several state dirs share (PostgreSQL), narrows this process's node to its
/// state dir. A holder's pid is checked exactly only within its node, and a node's agents'
/// process groups are recorded in its state dir (see `agent::groups`): a process of another
/// state dir on the same host could see a dead holder but not its agent, which may still be
/// dying, so it waits for the lease to lapse instead. Called when such a store opens, before
/// any lease is written; the first state dir wins.
pub fn scope_to_state(state_dir: &std::path::Path) {
    let dir = state_dir
        .canonicalize()
        .unwrap_or_else(|_| state_dir.to_path_buf());
    let digest = <sha2::Sha256 as sha2::Digest>::digest(dir.to_string_lossy().as_bytes());
    let scoped = format!(
        "{}:{}",
        boot(),
        digest[..4]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>()
    );
    let _ = SCOPED.set(Box::leak(scoped.into_boxed_str()));
}

/// Looks up, once, what leases name this process by (its node, its start time), so that the
/// first decisions of a long-lived process do not read /proc inside their transactions.
pub fn warm_up() {
    let _ = this_node();
    let _ = own_start();
}

/// What this process knows of lease holders: itself, and the processes of its node.
pub struct ThisProcess;

impl HolderFacts for ThisProcess {
    fn node(&self) -> &str {
        this_node()
    }
    fn is_me(&self, holder: &Runner) -> bool {
        holder.is_current()
    }
    fn is_alive(&self, holder: &Runner) -> bool {
        holder.is_alive()
    }
}

impl Lease {
    /// A lease for this process from `now` for `hold_ms`, under `token` (issued by the store).
    pub fn mine(token: u64, now: i64, hold_ms: i64) -> Lease {
        Lease {
            holder: Runner::current(now),
            node: this_node().to_owned(),
            token,
            expires_at: now.saturating_add(hold_ms),
            grace_ms: 0,
        }
    }

    /// Whether this process holds it, as of `now`.
    pub fn is_mine(&self, now: i64) -> bool {
        self.holding(now, &ThisProcess) == Holding::Mine
    }
}

/// Where an invocation's lease leaves this process, as of `now`.
pub fn holding_now(lease: Option<&Lease>, now: i64) -> Holding {
    holding(lease, now, &ThisProcess)
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

    /// A process of this pid, as a group: its process group id is its pid, and `started` its
    /// leader's start time.
    pub fn group_of(pid: u32, now: i64) -> Runner {
        Runner {
            pid,
            since: now,
            started: start_time(pid),
        }
    }

    /// Whether a process of the group this names (process group id = `pid`) still runs. The
    /// group is not this one when a different process now has its leader's pid: while any
    /// member of a group lives, the system gives nobody its id as a pid.
    pub(crate) fn group_alive(&self) -> bool {
        if self.pid <= 1 || self.leader_was_replaced() {
            return false;
        }
        if cfg!(target_os = "linux") {
            // Zombies are skipped: an orphan's may wait a while for its reaper.
            return group_members(self.pid) > 0;
        }
        killpg(Pid::from_raw(self.pid as i32), None).is_ok()
    }

    /// SIGKILLs the whole group, if it is still this one; returns whether a process of it was
    /// alive.
    pub fn kill_group(&self) -> bool {
        if !self.group_alive() {
            return false;
        }
        let _ = killpg(Pid::from_raw(self.pid as i32), Signal::SIGKILL);
        true
    }

    /// Sends `signal` to the whole group, if it is still this one; returns whether a process
    /// of it was alive.
    pub fn signal_group(&self, signal: Signal) -> bool {
        if !self.group_alive() {
            return false;
        }
        let _ = killpg(Pid::from_raw(self.pid as i32), signal);
        true
    }

    /// Waits, without signalling, until no process of the group runs, up to `bound`;
    /// whether it ended.
    pub fn wait_group_ended(&self, bound: Duration) -> bool {
        let started = Instant::now();
        while self.group_alive() {
            if started.elapsed() >= bound {
                return false;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        true
    }

    /// Waits until no process of the group runs, up to `bound`; whether it is gone.
    pub fn wait_group_gone(&self, bound: Duration) -> bool {
        let started = Instant::now();
        while self.group_alive() {
            if started.elapsed() >= bound {
                return false;
            }
            // The members may still be at fork: kill again what appeared meanwhile.
            let _ = killpg(Pid::from_raw(self.pid as i32), Signal::SIGKILL);
            std::thread::sleep(Duration::from_millis(10));
        }
        true
    }

    fn leader_was_replaced(&self) -> bool {
        match (self.started, start_time(self.pid)) {
            (Some(recorded), Some(now)) => recorded != now,
            _ => false,
        }
    }
}

/// Linux: how many live (not zombie) processes are in process group `pgid`, from /proc.
pub fn group_members(pgid: u32) -> usize {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return 0;
    };
    dir.filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| stat_fields(pid).is_some_and(|(_, pgrp, _)| pgrp == pgid))
        .count()
}

/// Linux: the process's start time in clock ticks after boot (field 22 of /proc/PID/stat),
/// `None` when there is no such process or it is a zombie. Elsewhere: `None`.
fn start_time(pid: u32) -> Option<u64> {
    stat_fields(pid).map(|(_, _, start)| start)
}

/// Linux: (state, process group, start time) of a live process (not a zombie), from
/// /proc/PID/stat.
fn stat_fields(pid: u32) -> Option<(char, u32, u64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold spaces or parentheses itself.
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    if matches!(state, 'Z' | 'X' | 'x') {
        return None;
    }
    // `rest` starts at field 3 (state): the group is field 5, the start time field 22.
    let pgrp = fields.nth(1)?.parse().ok()?;
    let start = fields.nth(16)?.parse().ok()?;
    Some((state, pgrp, start))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_current_and_alive() {
        let me = Runner::current(0);
        assert!(me.is_current());
        assert!(me.is_alive());
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
