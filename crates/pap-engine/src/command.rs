//! The `command` provider: a local program run without a shell.
//!
//! The program gets the invocation as one line of JSON on stdin and `PAP_*` variables naming
//! it; event content never reaches its command line. It runs in its own process group, so
//! a timeout kills everything it started, and anything still alive in the group when it
//! exits is killed too: nothing an agent starts outlives its invocation. The group is led by
//! a supervisor (`pap __supervise`, see [`pap_supervise`]) that kills it when pap goes
//! away, however pap ends: nothing an agent starts outlives its runner either.

use std::ffi::OsString;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::Command;

use crate::domain::Runner;
use pap_supervise as supervise;

/// What one run of the program needs.
pub struct Spec<'a> {
    pub program: &'a Path,
    pub args: &'a [String],
    pub cwd: &'a Path,
    pub stdin: Vec<u8>,
    pub env: Vec<(String, String)>,
    /// Whether the program also gets pap's own environment. Without it, it gets only
    /// [`base_env`] plus `env`.
    pub(crate) inherit_env: bool,
    pub timeout: Duration,
    /// Most stdout bytes accepted; more fails the attempt.
    pub(crate) max_output: usize,
    /// Called with the program's process group (its leader's pid and start time; `since`
    /// 0) before the program starts, to record it.
    pub started: Option<OnStart<'a>>,
    /// On a shared store: when the run's lease may lapse, updated at every renewal. The
    /// supervisor is told, and kills the group at that moment unless told of a later one.
    pub lease: Option<tokio::sync::watch::Receiver<std::time::Instant>>,
}

/// Records a program's process group before the program starts; `false` when the program
/// must not start after all (its invocation was cancelled meanwhile).
pub(crate) type OnStart<'a> = Box<dyn FnOnce(&Runner) -> bool + Send + 'a>;

/// Keeps this many bytes of stderr, the end of it, for the failure reason.
const STDERR_TAIL: usize = 4096;

/// Why a run failed, and whether the program could not be started at all.
#[derive(Debug)]
pub struct Failed {
    pub reason: String,
    /// The program does not exist or may not be run: trying again cannot help.
    pub(crate) cannot_start: bool,
}

impl From<String> for Failed {
    fn from(reason: String) -> Failed {
        Failed {
            reason,
            cannot_start: false,
        }
    }
}

/// Whether a failed spawn is the program's absence (or its permissions), not a passing
/// condition of the system.
fn missing(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::NotFound | std::io::ErrorKind::PermissionDenied
    )
}

/// Runs the program; `Ok(stdout)` when it exited 0 within the time limit.
pub async fn run(mut spec: Spec<'_>) -> Result<Vec<u8>, Failed> {
    let supervisor = supervise::supervisor();
    let mut cmd = match supervisor {
        Some(s) => {
            let mut cmd = Command::new(&s.exe);
            if s.subcommand {
                cmd.arg0("pap").arg(supervise::SUBCOMMAND);
            }
            cmd
        }
        None => Command::new(spec.program),
    };
    // The supervisor's end of the lifeline; pap's end closes when pap goes away.
    let lifeline =
        match supervisor {
            Some(_) => Some(lifeline_pair().map_err(|e| {
                Failed::from(format!("cannot start {}: {e}", spec.program.display()))
            })?),
            None => None,
        };
    if let Some((_, theirs)) = &lifeline {
        cmd.arg(theirs.as_raw_fd().to_string())
            .arg("--")
            .arg(spec.program);
    }
    if !spec.inherit_env {
        // The supervisor hands its environment to the program unchanged.
        cmd.env_clear().envs(base_env());
    }
    cmd.args(spec.args)
        .current_dir(spec.cwd)
        .envs(spec.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    let (mut child, lifeline) = spawn_with_lifeline(&mut cmd, lifeline).map_err(|e| Failed {
        reason: format!("cannot start {}: {e}", spec.program.display()),
        // Started directly, the error is the program's own; the supervisor is pap's.
        cannot_start: supervisor.is_none() && missing(&e),
    })?;
    drop(cmd);
    let pgid = child.id().map(|id| Pid::from_raw(id as i32));
    // If this run is dropped midway (serve stopping after its grace period), the whole
    // group goes, not only the direct child that `kill_on_drop` covers.
    let _group = GroupGuard(pgid);
    let mut lifeline = match lifeline {
        Some(ours) => {
            let ready = ours.set_nonblocking(true);
            ready
                .and_then(|()| tokio::net::UnixStream::from_std(ours))
                .ok()
        }
        None => None,
    };
    let group = child.id().map(|id| Runner::group_of(id, 0));

    let mut stdin = child.stdin.take().expect("piped");
    let input = std::mem::take(&mut spec.stdin);
    let writer = tokio::spawn(async move {
        // A program that does not read its input is not an error (EPIPE is ignored).
        let _ = stdin.write_all(&input).await;
        let _ = stdin.shutdown().await;
    });
    let stdout = child.stdout.take().expect("piped");
    let stderr = child.stderr.take().expect("piped");
    let max_output = spec.max_output;
    let started = spec.started.take();
    let lease = spec.lease.take();

    let work = async {
        if let (Some(record), Some(group)) = (started, &group)
            && !record(group)
        {
            // The supervisor waits for `go`, which never comes: the program never starts.
            kill_group(pgid);
            let _ = child.wait().await;
            return Err(Failed::from(
                "not started: the invocation was taken away (cancelled) before its program started"
                    .to_owned(),
            ));
        }
        // The supervisor knows when the lease lapses before the program starts: a pap paused
        // right after `go` must not leave a program running without a deadline.
        let first_lease = lease.as_ref().map(|l| *l.borrow());
        if let Some(lifeline) = lifeline.as_mut()
            && let Some(Err((e, missing))) = handshake(lifeline, first_lease).await
        {
            let _ = child.wait().await;
            return Err(Failed {
                reason: format!("cannot start {}: {e}", spec.program.display()),
                cannot_start: missing,
            });
        }
        let status = match (lifeline.as_mut(), lease) {
            (Some(lifeline), Some(lease)) => tokio::select! {
                status = child.wait() => status,
                () = report_lease(lifeline, lease) => child.wait().await,
            },
            _ => child.wait().await,
        };
        // The leader is gone; whatever it left behind in its group goes too.
        kill_group(pgid);
        Ok(status)
    };
    let all = async {
        tokio::join!(
            work,
            read_capped(stdout, max_output),
            read_tail(stderr, STDERR_TAIL)
        )
    };
    let result = tokio::time::timeout(spec.timeout, all).await;
    writer.abort();
    let (status, (out, out_len), err_tail) = match result {
        Ok((Err(cannot_start), _, _)) => return Err(cannot_start),
        Ok((Ok(status), out, err)) => (status, out, err),
        Err(_) => {
            kill_group(pgid);
            let _ = child.wait().await;
            return Err(format!(
                "ran longer than {} (limits.max_runtime_seconds); its process group was killed",
                crate::manifest::duration::format(spec.timeout)
            )
            .into());
        }
    };
    let status =
        status.map_err(|e| Failed::from(format!("waiting for the program failed: {e}")))?;
    let stderr_text = last_line(&err_tail);
    if !status.success() {
        let how = match (
            status.code(),
            std::os::unix::process::ExitStatusExt::signal(&status),
        ) {
            (Some(code), _) => format!("exited with status {code}"),
            (None, Some(sig)) => format!("was killed by signal {sig}"),
            _ => "failed".to_owned(),
        };
        return Err(match stderr_text {
            Some(line) => format!("{how}: {line}"),
            None => how,
        }
        .into());
    }
    if out_len > max_output {
        return Err(format!(
            "printed {out_len} bytes, more than the {max_output} an output may have"
        )
        .into());
    }
    Ok(out)
}

/// What a child that does not inherit pap's environment (where the API keys are) still gets
/// from it: `PATH` and the locale (`LANG`, `LANGUAGE`, `LC_*`).
pub(crate) fn base_env() -> Vec<(OsString, OsString)> {
    std::env::vars_os()
        .filter(|(name, _)| {
            let name = name.to_string_lossy();
            matches!(name.as_ref(), "PATH" | "LANG" | "LANGUAGE") || name.starts_with("LC_")
        })
        .collect()
}

/// A connected socket pair, the supervisor's end above the standard streams (pap started with
/// one of them closed could get fd 0, 1 or 2 for it, which the child's stdio would replace).
/// Only one supervisor's end of a lifeline is ever inheritable at a time (see below).
static SPAWNING: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Starts the supervisor with its end of the lifeline inherited, and closes that end here;
/// returns the child and pap's end.
///
/// The end is made inheritable for the moment of the spawn rather than in a `pre_exec` hook:
/// with a hook the standard library has to `fork` serve, copying its page tables and then
/// faulting in every page either side writes (most of a run's cost in a busy serve); without
/// one it uses `posix_spawn`, which does not copy the parent. Another program started by pap
/// in that moment (an MCP server, a sink) may inherit the end too, which is harmless: only
/// pap's end closing means "pap is gone", and the supervisor keeps no other descriptor from
/// its program.
fn spawn_with_lifeline(
    cmd: &mut Command,
    lifeline: Option<(
        std::os::unix::net::UnixStream,
        std::os::unix::net::UnixStream,
    )>,
) -> std::io::Result<(
    tokio::process::Child,
    Option<std::os::unix::net::UnixStream>,
)> {
    let Some((ours, theirs)) = lifeline else {
        return Ok((cmd.spawn()?, None));
    };
    let _one_at_a_time = SPAWNING.lock().unwrap_or_else(|p| p.into_inner());
    nix::fcntl::fcntl(
        &theirs,
        nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::empty()),
    )?;
    let child = cmd.spawn();
    drop(theirs);
    Ok((child?, Some(ours)))
}

fn lifeline_pair() -> std::io::Result<(
    std::os::unix::net::UnixStream,
    std::os::unix::net::UnixStream,
)> {
    let (ours, theirs) = std::os::unix::net::UnixStream::pair()?;
    // `try_clone` duplicates to the lowest free fd from 3 on, close-on-exec.
    let theirs = if theirs.as_raw_fd() < 3 {
        theirs.try_clone()?
    } else {
        theirs
    };
    Ok((ours, theirs))
}

/// Lets the supervisor start the program and reads its answer: `Some(Ok)` the program runs,
/// `Some(Err(why))` it could not start, `None` no word (the supervisor died: its exit status
/// tells the rest).
/// Lets the supervisor start the program; `Err((why, missing))` when it could not, `missing`
/// when the program does not exist or may not be run.
async fn handshake(
    lifeline: &mut tokio::net::UnixStream,
    lease: Option<std::time::Instant>,
) -> Option<Result<(), (String, bool)>> {
    let go = match lease {
        Some(lapses_at) => format!("go {}\n", monotonic_at(lapses_at)),
        None => "go\n".to_owned(),
    };
    lifeline.write_all(go.as_bytes()).await.ok()?;
    let mut line = Vec::new();
    let mut buf = [0u8; 512];
    while !line.contains(&b'\n') && line.len() < 4096 {
        match lifeline.read(&mut buf).await {
            Ok(0) | Err(_) => return None,
            Ok(n) => line.extend_from_slice(&buf[..n]),
        }
    }
    let text = String::from_utf8_lossy(&line);
    let text = text.lines().next().unwrap_or_default();
    if let Some(why) = text.strip_prefix(supervise::MISSING) {
        return Some(Err((why.to_owned(), true)));
    }
    match text.strip_prefix("err ") {
        Some(why) => Some(Err((why.to_owned(), false))),
        None => (text == "ok").then_some(Ok(())),
    }
}

/// Tells the supervisor when the lease lapses, now and after every renewal; returns only if
/// the supervisor can no longer be told (it is gone: the wait for it tells the rest).
async fn report_lease(
    lifeline: &mut tokio::net::UnixStream,
    mut lease: tokio::sync::watch::Receiver<std::time::Instant>,
) {
    loop {
        let lapses_at = *lease.borrow_and_update();
        if lifeline
            .write_all(lease_line(lapses_at).as_bytes())
            .await
            .is_err()
        {
            return;
        }
        if lease.changed().await.is_err() {
            // No more renewals come (the run is being dropped): the last word stands.
            std::future::pending::<()>().await;
        }
    }
}

/// `lease AT`: when the lease lapses (see [`supervise::LEASE`]).
fn lease_line(lapses_at: std::time::Instant) -> String {
    format!("{}{}\n", supervise::LEASE, monotonic_at(lapses_at))
}

/// `at` as milliseconds of the host's monotonic clock, rounded down (never later than `at`).
fn monotonic_at(at: std::time::Instant) -> u64 {
    let now = std::time::Instant::now();
    let mono = supervise::monotonic_ms();
    match at.checked_duration_since(now) {
        Some(left) => mono.saturating_add(left.as_millis() as u64),
        None => mono.saturating_sub(now.duration_since(at).as_millis() as u64 + 1),
    }
}

struct GroupGuard(Option<Pid>);

impl Drop for GroupGuard {
    fn drop(&mut self) {
        kill_group(self.0);
    }
}

fn kill_group(pgid: Option<Pid>) {
    if let Some(pgid) = pgid {
        // ESRCH (nothing left) is the normal case.
        let _ = killpg(pgid, Signal::SIGKILL);
    }
}

/// Reads to EOF keeping at most `cap` bytes; returns them and the total length.
async fn read_capped(mut r: impl AsyncRead + Unpin, cap: usize) -> (Vec<u8>, usize) {
    let mut kept = Vec::new();
    let mut total = 0;
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match r.read(&mut buf).await {
            Ok(0) | Err(_) => return (kept, total),
            Ok(n) => {
                total += n;
                if kept.len() < cap {
                    let room = cap - kept.len();
                    kept.extend_from_slice(&buf[..n.min(room)]);
                }
            }
        }
    }
}

/// Reads to EOF keeping the last `keep` bytes.
async fn read_tail(mut r: impl AsyncRead + Unpin, keep: usize) -> Vec<u8> {
    let mut tail = Vec::new();
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        match r.read(&mut buf).await {
            Ok(0) | Err(_) => return tail,
            Ok(n) => {
                tail.extend_from_slice(&buf[..n]);
                if tail.len() > keep * 2 {
                    // Cut at a line start, so no secret is left in half for redaction to miss.
                    let from = tail.len() - keep;
                    let from = tail[from..]
                        .iter()
                        .position(|b| *b == b'\n')
                        .map_or(from, |i| from + i + 1);
                    tail.drain(..from);
                }
            }
        }
    }
}

/// The last non-empty line of stderr, cut to a readable length.
fn last_line(bytes: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(bytes);
    let line = text.lines().rev().find(|l| !l.trim().is_empty())?.trim();
    let line: String = line.chars().filter(|c| !c.is_control()).collect();
    // Redacted later: never cut inside a word.
    Some(crate::text::clip_whole(&line, 300))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec<'a>(args: &'a [String], timeout_ms: u64) -> Spec<'a> {
        Spec {
            program: Path::new("/bin/sh"),
            args,
            cwd: Path::new("/"),
            stdin: b"{\"x\":1}\n".to_vec(),
            env: vec![("PAP_TEST".into(), "v".into())],
            inherit_env: false,
            timeout: Duration::from_millis(timeout_ms),
            max_output: 64,
            started: None,
            lease: None,
        }
    }

    fn sh(script: &str) -> Vec<String> {
        vec!["-c".into(), script.into()]
    }

    #[tokio::test]
    async fn passes_stdin_and_env_and_returns_stdout() {
        let args = sh(r#"read line; printf '%s %s' "$line" "$PAP_TEST""#);
        assert_eq!(run(spec(&args, 10_000)).await.unwrap(), b"{\"x\":1} v");
    }

    #[tokio::test]
    async fn without_inheritance_only_path_locale_and_the_given_env_pass() {
        // CARGO_MANIFEST_DIR is in the environment of every `cargo test` run.
        let args =
            sh(r#"printf '%s|%s|%s' "${CARGO_MANIFEST_DIR:+dir}" "$PAP_TEST" "${PATH:+path}""#);
        assert_eq!(run(spec(&args, 10_000)).await.unwrap(), b"|v|path");
        let mut s = spec(&args, 10_000);
        s.inherit_env = true;
        assert_eq!(run(s).await.unwrap(), b"dir|v|path");
    }

    #[tokio::test]
    async fn non_zero_exit_reports_the_last_stderr_line() {
        let args = sh("echo first >&2; echo 'no key' >&2; exit 3");
        assert_eq!(
            run(spec(&args, 10_000)).await.unwrap_err().reason,
            "exited with status 3: no key"
        );
    }

    #[tokio::test]
    async fn too_much_output_fails() {
        let args = sh("head -c 1000 /dev/zero");
        assert!(
            run(spec(&args, 10_000))
                .await
                .unwrap_err()
                .reason
                .contains("1000 bytes")
        );
    }

    #[tokio::test]
    async fn missing_program_is_a_clear_error() {
        let mut s = spec(&[], 1000);
        s.program = Path::new("/nonexistent/agent");
        let failed = run(s).await.unwrap_err();
        assert!(failed.reason.starts_with("cannot start /nonexistent/agent"));
        assert!(failed.cannot_start, "no attempt can start it");
    }
}
