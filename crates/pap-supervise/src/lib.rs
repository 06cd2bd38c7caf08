//! The supervisor of one command agent: `pap __supervise FD -- PROGRAM ARGS…`, a hidden
//! subcommand pap runs instead of the program itself (see `command::run`).
//!
//! It leads the agent's process group (pap starts it with `process_group(0)`), starts the
//! program in that group with stdin, stdout, stderr, working directory and environment
//! exactly as pap gave them to it, and then does two things until the program exits:
//!
//! - it holds FD, one end of a socket pair whose other end only pap holds. When pap goes away
//!   however it ends (SIGKILL included), the kernel closes pap's end; the supervisor reads
//!   EOF and SIGKILLs its whole group, itself included. No agent outlives its runner.
//! - it waits for the program and exits as it did (same code, or the same signal), so pap
//!   sees the program's status as if it had started it directly.
//!
//! The program also gets `PR_SET_PDEATHSIG` = SIGKILL (Linux), set from the supervisor's
//! only thread at the time, which lives as long as the supervisor: if the supervisor itself
//! is killed, the program dies with it. (pap cannot set that flag on the program itself: it
//! fires when the spawning *thread* exits, and the async runtime retires idle threads.)
//!
//! pap writes `go` on FD once it has recorded the group; only then does the program start.
//! On a store several nodes share, the run has a lease with a deadline: pap writes `go AT`,
//! and `lease AT` whenever it renewed the lease, AT the moment the lease lapses on the
//! host's monotonic clock (see [`LEASE`]). Unless a later `lease` line came first, the
//! supervisor SIGKILLs the group at AT (see `domain::lease`); a lease that lapsed before
//! `go` arrived starts nothing.
//! The first line back tells pap whether it started: `ok`, or `err MESSAGE` (`err-missing
//! MESSAGE` when the program does not exist or may not be run).

use std::ffi::OsString;
use std::io::{Read, Write};
use std::os::fd::{FromRawFd, RawFd};
use std::os::unix::net::UnixStream;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::Command;
use std::time::{Duration, Instant};

use nix::sys::signal::{SigHandler, Signal, killpg, raise, signal};
use nix::unistd::{Pid, getpgrp, getpid, setpgid};

/// The hidden subcommand's name (never in `--help`: `main` takes it before the CLI parser).
pub const SUBCOMMAND: &str = "__supervise";

/// The answer when the program does not exist or may not be run (a retry cannot help); any
/// other failure to start is `err MESSAGE`.
pub const MISSING: &str = "err-missing ";

/// The supervisor's own small binary, installed beside `pap` (`src/bin/pap-supervise.rs`).
pub(crate) const BINARY: &str = "pap-supervise";

/// How to start a supervisor: the executable, and whether it needs [`SUBCOMMAND`] first.
#[derive(Debug, Clone)]
pub struct Supervisor {
    pub exe: std::path::PathBuf,
    pub subcommand: bool,
}

static EXE: std::sync::OnceLock<Supervisor> = std::sync::OnceLock::new();

/// Called by the `pap` binary: command agents run under a supervisor from now on. (A
/// library user without it, such as the unit tests, starts programs directly: they are
/// still killed with their group, but not on a SIGKILL of the process.)
///
/// The supervisor is `pap-supervise` beside pap when it is there: starting it costs a fifth
/// of starting pap itself (a few hundred kilobytes to load and relocate instead of tens of
/// megabytes), which is most of what pap adds to a run of a quick command. Otherwise it is
/// this same executable with the hidden subcommand.
pub fn enable() {
    let sibling = std::env::current_exe()
        .ok()
        .map(|exe| exe.with_file_name(BINARY))
        .filter(|p| p.is_file());
    let supervisor = match sibling {
        Some(exe) => Supervisor {
            exe,
            subcommand: false,
        },
        // Linux: the running image itself, even if the file was replaced since (an upgrade,
        // a rebuild) or its path is gone.
        None if cfg!(target_os = "linux") => Supervisor {
            exe: std::path::PathBuf::from("/proc/self/exe"),
            subcommand: true,
        },
        None => match std::env::current_exe() {
            Ok(exe) => Supervisor {
                exe,
                subcommand: true,
            },
            Err(_) => return,
        },
    };
    let _ = EXE.set(supervisor);
}

/// How to start supervisors, once [`enable`]d.
pub fn supervisor() -> Option<&'static Supervisor> {
    EXE.get()
}

/// Runs the supervisor; never returns. `args` are what follows the subcommand.
pub fn main(args: Vec<OsString>) -> ! {
    let fd: Option<RawFd> = args.first().and_then(|a| a.to_str()?.parse().ok());
    let (Some(fd), Some("--"), Some(program)) =
        (fd, args.get(1).and_then(|a| a.to_str()), args.get(2))
    else {
        let _ = writeln!(
            std::io::stderr(),
            "pap {SUBCOMMAND}: internal to pap (usage: FD -- PROGRAM ARGS...)"
        );
        std::process::exit(2);
    };
    // SAFETY: pap passes the fd it opened for this process; nothing else here owns it.
    let mut lifeline = unsafe { UnixStream::from_raw_fd(fd) };
    // The program must not hold it: only pap's going away may close the other end. Nor
    // anything else inherited past stdio (pap may have been starting another program at the
    // same moment: see `command::spawn_with_lifeline`).
    let _ = nix::fcntl::fcntl(
        &lifeline,
        nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::FD_CLOEXEC),
    );
    #[cfg(target_os = "linux")]
    // SAFETY: only sets close-on-exec on descriptors; none is closed or reused.
    unsafe {
        nix::libc::close_range(3, u32::MAX, nix::libc::CLOSE_RANGE_CLOEXEC as i32);
    }
    if getpgrp() != getpid() {
        // Started by hand: lead a group of its own, so the kill below hits only the agent.
        let _ = setpgid(Pid::from_raw(0), Pid::from_raw(0));
    }
    if getpgrp() != getpid() {
        let _ = lifeline.write_all(b"err the supervisor cannot lead a process group\n");
        std::process::exit(125);
    }

    // pap records the group before the program may start (`go`), so no agent process ever
    // runs unrecorded; if pap goes away first, nothing starts. A lease that lapsed before
    // the start (pap was slow or paused) starts nothing either.
    let Some(lapses_at) = wait_for_go(&mut lifeline) else {
        std::process::exit(125);
    };
    let deadline = match lapses_at.map(instant_at) {
        Some(None) => {
            let _ = lifeline.write_all(b"err the lease lapsed before the program started\n");
            std::process::exit(125);
        }
        Some(Some(at)) => Some(at),
        None => None,
    };

    let mut cmd = Command::new(program);
    cmd.args(&args[3..]);
    #[cfg(target_os = "linux")]
    {
        let me = getpid();
        // SAFETY: prctl, getppid and raise are async-signal-safe; nothing is allocated.
        unsafe {
            cmd.pre_exec(move || {
                nix::sys::prctl::set_pdeathsig(Signal::SIGKILL)?;
                // The supervisor died before the flag was set: go with it.
                if nix::unistd::getppid() != me {
                    let _ = raise(Signal::SIGKILL);
                }
                Ok(())
            });
        }
    }
    let mut child = match cmd.spawn() {
        Ok(child) => {
            // A SIGTERM to the group (`pap invocations cancel`) is for the program, which
            // may shut down cleanly: the supervisor stays to report how it ended (were it to
            // die first, the program would get SIGKILL at once). Set after the spawn, so
            // the program keeps the default disposition.
            // SAFETY: ignoring a signal installs no handler.
            let _ = unsafe { signal(Signal::SIGTERM, SigHandler::SigIgn) };
            let _ = lifeline.write_all(b"ok\n");
            child
        }
        Err(e) => {
            let missing = matches!(
                e.kind(),
                std::io::ErrorKind::NotFound | std::io::ErrorKind::PermissionDenied
            );
            let tag = if missing { MISSING } else { "err " };
            let _ = lifeline.write_all(format!("{tag}{e}\n").as_bytes());
            std::process::exit(127);
        }
    };
    // Only the program holds its stdio now, so pap sees EOF when the program closes it.
    if let Ok(null) = std::fs::File::options()
        .read(true)
        .write(true)
        .open("/dev/null")
    {
        let _ = nix::unistd::dup2_stdin(&null);
        let _ = nix::unistd::dup2_stdout(&null);
        let _ = nix::unistd::dup2_stderr(&null);
    }

    std::thread::spawn(move || {
        watch_lifeline(&mut lifeline, deadline);
        let _ = killpg(getpgrp(), Signal::SIGKILL);
    });

    let status = match child.wait() {
        Ok(status) => status,
        Err(_) => std::process::exit(125),
    };
    if let Some(code) = status.code() {
        std::process::exit(code);
    }
    if let Some(sig) = status.signal().and_then(|s| Signal::try_from(s).ok()) {
        // Die of the same signal, without a core file of the supervisor's own.
        let _ = nix::sys::resource::setrlimit(nix::sys::resource::Resource::RLIMIT_CORE, 0, 0);
        // SAFETY: the default disposition installs no handler.
        let _ = unsafe { signal(sig, SigHandler::SigDfl) };
        let _ = nix::sys::signal::sigprocmask(
            nix::sys::signal::SigmaskHow::SIG_UNBLOCK,
            Some(&nix::sys::signal::SigSet::from(sig)),
            None,
        );
        let _ = raise(sig);
    }
    std::process::exit(128 + status.signal().unwrap_or(0));
}

/// Returns when the agent must go: pap's end closed (it went away, or dropped the run), or
/// the lease pap last reported (`lease AT`, see [`LEASE`]) lapsed without a renewal. The
/// deadline is on this host's monotonic clock, which pap and the supervisor share and a
/// paused pap does not stop: a pap that was stopped past its lease finds its agent gone.
fn watch_lifeline(lifeline: &mut UnixStream, mut deadline: Option<Instant>) {
    let mut pending = Vec::new();
    let mut buf = [0u8; 256];
    loop {
        let wait = match deadline {
            Some(at) => match at.checked_duration_since(Instant::now()) {
                Some(left) if !left.is_zero() => Some(left),
                _ => return,
            },
            None => None,
        };
        if lifeline.set_read_timeout(wait).is_err() {
            return;
        }
        match lifeline.read(&mut buf) {
            Ok(0) => return,
            Ok(n) => {
                pending.extend_from_slice(&buf[..n]);
                while let Some(end) = pending.iter().position(|b| *b == b'\n') {
                    let line: Vec<u8> = pending.drain(..=end).collect();
                    if let Some(at) = lease_line(&line[..end]) {
                        match instant_at(at) {
                            Some(at) => deadline = Some(at),
                            None => return,
                        }
                    }
                }
                // Only pap writes here, in short lines; anything longer is not from it.
                if pending.len() > 64 {
                    return;
                }
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::Interrupted
                        | std::io::ErrorKind::WouldBlock
                        | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => return,
        }
    }
}

/// `lease AT`: when the lease lapses.
fn lease_line(line: &[u8]) -> Option<u64> {
    std::str::from_utf8(line)
        .ok()?
        .strip_prefix(LEASE)?
        .parse()
        .ok()
}

/// How pap reports a renewed lease on the lifeline: this, then the moment the lease lapses
/// as milliseconds of this host's `CLOCK_MONOTONIC` (see [`monotonic_ms`]), then `\n`. A
/// moment, not a span: the time the line takes to arrive does not move the deadline on.
pub const LEASE: &str = "lease ";

/// This host's `CLOCK_MONOTONIC` in milliseconds, which every process of the host shares
/// (it does not stop while a process is stopped).
pub fn monotonic_ms() -> u64 {
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC)
        .map(|t| {
            let ms = t.tv_sec() as i128 * 1000 + t.tv_nsec() as i128 / 1_000_000;
            u64::try_from(ms).unwrap_or(0)
        })
        .unwrap_or(0)
}

/// The [`monotonic_ms`] moment `at` as an `Instant`; `None` when it has passed.
fn instant_at(at: u64) -> Option<Instant> {
    let left = at.checked_sub(monotonic_ms()).filter(|ms| *ms > 0)?;
    Some(Instant::now() + Duration::from_millis(left))
}

/// Reads pap's `go` (with the moment the lease lapses, on a shared store: `go AT`); `None`
/// when pap went away (or said anything else) first.
fn wait_for_go(lifeline: &mut UnixStream) -> Option<Option<u64>> {
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    while line.len() < 32 {
        match lifeline.read(&mut byte) {
            Ok(1) if byte[0] == b'\n' => {
                let text = std::str::from_utf8(&line).ok()?;
                return match text.strip_prefix("go") {
                    Some("") => Some(None),
                    Some(at) => at.strip_prefix(' ')?.parse().ok().map(Some),
                    None => None,
                };
            }
            Ok(1) => line.push(byte[0]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            _ => return None,
        }
    }
    None
}
