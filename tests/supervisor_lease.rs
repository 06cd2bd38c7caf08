//! The agent supervisor's lease: on a shared store pap tells the supervisor when
//! the run's lease lapses (`lease MS` on the lifeline), and the supervisor kills the agent's
//! process group then unless a renewal came first, whatever pap is doing (paused, cut off).
//! The real `pap-supervise` binary, driven over a real socket pair as pap drives it.

use std::io::{BufRead, BufReader, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

/// This host's CLOCK_MONOTONIC in milliseconds, as the lease lines name moments.
fn monotonic_ms() -> u64 {
    pap::agent::supervise::monotonic_ms()
}

/// `lease AT` for a lease that lapses `ms` from now.
fn lease_in(ms: u64) -> String {
    format!("lease {}\n", monotonic_ms() + ms)
}

/// Starts `sh -c script` under the supervisor, lets it go (with a lease of `first_lease_ms`),
/// and returns the child and pap's end.
fn supervised(script: &str, first_lease_ms: Option<u64>) -> (Child, UnixStream) {
    let (mut ours, theirs) = UnixStream::pair().unwrap();
    // The supervisor's end must survive exec: clear close-on-exec on it.
    nix::fcntl::fcntl(
        &theirs,
        nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::empty()),
    )
    .unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_pap-supervise"))
        .arg(theirs.as_raw_fd().to_string())
        .arg("--")
        .arg("/bin/sh")
        .arg("-c")
        .arg(script)
        .process_group(0)
        .spawn()
        .unwrap();
    drop(theirs);
    let go = match first_lease_ms {
        Some(ms) => format!("go {}\n", monotonic_ms() + ms),
        None => "go\n".to_owned(),
    };
    ours.write_all(go.as_bytes()).unwrap();
    let mut answer = String::new();
    BufReader::new(ours.try_clone().unwrap())
        .read_line(&mut answer)
        .unwrap();
    assert_eq!(answer, "ok\n");
    (child, ours)
}

/// Waits up to `within` for the child; its status, or `None` if still running.
fn ended_within(child: &mut Child, within: Duration) -> Option<std::process::ExitStatus> {
    let until = Instant::now() + within;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(status);
        }
        if Instant::now() >= until {
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn without_a_lease_the_program_runs_to_its_end() {
    let (mut child, _ours) = supervised("sleep 0.5; exit 3", None);
    let status = ended_within(&mut child, Duration::from_secs(10)).expect("ended");
    assert_eq!(status.code(), Some(3));
}

#[test]
fn a_lease_not_renewed_kills_the_group_when_it_lapses() {
    let started = Instant::now();
    // The program keeps a helper in its group: both must go.
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("helper.pid");
    let script = format!("sleep 60 & echo $! > {}; wait", pid_file.display());
    let (mut child, _ours) = supervised(&script, Some(400));
    let status = ended_within(&mut child, Duration::from_secs(10)).expect("killed");
    let took = started.elapsed();
    assert_eq!(status.signal(), Some(9), "SIGKILL, got {status:?}");
    assert!(
        took >= Duration::from_millis(400),
        "not before the lease lapsed: {took:?}"
    );
    let helper: i32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let until = Instant::now() + Duration::from_secs(5);
    while std::path::Path::new(&format!("/proc/{helper}/stat")).exists()
        && !std::fs::read_to_string(format!("/proc/{helper}/stat"))
            .unwrap_or_default()
            .contains(") Z")
    {
        assert!(Instant::now() < until, "the helper outlived the lapse");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn renewals_keep_the_program_running_until_they_stop() {
    let (mut child, mut ours) = supervised("sleep 60", Some(400));
    // Renewed every 100 ms for 1.5 s, far past the first lease.
    let renewing_until = Instant::now() + Duration::from_millis(1500);
    while Instant::now() < renewing_until {
        ours.write_all(lease_in(400).as_bytes()).unwrap();
        assert!(child.try_wait().unwrap().is_none(), "killed while renewed");
        std::thread::sleep(Duration::from_millis(100));
    }
    let stopped_renewing = Instant::now();
    let status = ended_within(&mut child, Duration::from_secs(10)).expect("killed");
    assert_eq!(status.signal(), Some(9));
    let after = stopped_renewing.elapsed();
    assert!(
        after >= Duration::from_millis(250),
        "killed before the last lease lapsed: {after:?}"
    );
}

#[test]
fn a_lease_that_lapsed_before_go_starts_nothing() {
    let (mut ours, theirs) = UnixStream::pair().unwrap();
    nix::fcntl::fcntl(
        &theirs,
        nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::empty()),
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    let mut child = Command::new(env!("CARGO_BIN_EXE_pap-supervise"))
        .arg(theirs.as_raw_fd().to_string())
        .args(["--", "/bin/sh", "-c"])
        .arg(format!("touch {}", marker.display()))
        .process_group(0)
        .spawn()
        .unwrap();
    drop(theirs);
    ours.write_all(format!("go {}\n", monotonic_ms() - 1).as_bytes())
        .unwrap();
    let mut answer = String::new();
    BufReader::new(ours.try_clone().unwrap())
        .read_line(&mut answer)
        .unwrap();
    assert!(answer.starts_with("err the lease lapsed"), "{answer}");
    let status = ended_within(&mut child, Duration::from_secs(5)).expect("ended");
    assert_eq!(status.code(), Some(125));
    assert!(!marker.exists(), "the program never started");
}

#[test]
fn pap_going_away_still_kills_at_once() {
    let (mut child, ours) = supervised("sleep 60", Some(60_000));
    drop(ours);
    let status = ended_within(&mut child, Duration::from_secs(5)).expect("killed");
    assert_eq!(status.signal(), Some(9));
}
