//! Measurements the benchmarks and the fuzz runs report beside their figures (Linux).

use std::path::Path;
use std::time::Instant;

/// Peak resident memory of a process (`VmHWM`) in KiB, 0 where /proc cannot tell.
pub fn peak_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

/// What one `fdatasync` of a 4 KiB append costs in `dir` right now, in ms: (median, p90) of
/// 50. A figure that touches the disk means little without it.
pub fn fsync_ms(dir: &Path) -> (f64, f64) {
    use std::io::Write;
    let path = dir.join(".fsync-probe");
    let mut file = std::fs::File::create(&path).expect("fsync probe");
    let mut times: Vec<f64> = (0..50)
        .map(|_| {
            file.write_all(&[b'x'; 4096]).expect("write");
            let started = Instant::now();
            file.sync_data().expect("fdatasync");
            started.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    drop(file);
    let _ = std::fs::remove_file(&path);
    times.sort_by(f64::total_cmp);
    (times[25], times[45])
}

/// Runs `cmd` to its end like `Command::output`, and returns its peak resident memory in KiB
/// as the kernel counted it for that one child (`wait4`'s `ru_maxrss`). `RUSAGE_CHILDREN`
/// would be the largest of every child the test process ever waited for, which in a test
/// binary of many suites is some other test's.
#[allow(clippy::zombie_processes)] // reaped by wait4 below, which Child does not see
pub fn output_with_peak_kib(cmd: &mut std::process::Command) -> (std::process::Output, u64) {
    use std::io::Read;
    use std::os::unix::process::ExitStatusExt;
    use std::process::Stdio;
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the command");
    let mut out = child.stdout.take().expect("stdout");
    let mut err = child.stderr.take().expect("stderr");
    let reader = std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = out.read_to_end(&mut bytes);
        bytes
    });
    let mut stderr = Vec::new();
    let _ = err.read_to_end(&mut stderr);
    let stdout = reader.join().expect("stdout reader");
    let mut status = 0;
    let mut usage = std::mem::MaybeUninit::<nix::libc::rusage>::zeroed();
    // SAFETY: wait4 on our own child's pid, with pointers to a status word and a zeroed rusage.
    let pid = unsafe {
        nix::libc::wait4(
            child.id() as nix::libc::pid_t,
            &mut status,
            0,
            usage.as_mut_ptr(),
        )
    };
    assert_eq!(pid, child.id() as nix::libc::pid_t, "wait4 failed");
    // SAFETY: zeroed, then filled by wait4.
    let peak = unsafe { usage.assume_init() }.ru_maxrss.max(0) as u64;
    let output = std::process::Output {
        status: std::process::ExitStatus::from_raw(status),
        stdout,
        stderr,
    };
    (output, peak)
}

/// As [`output_with_peak_kib`], counting only `cmd`'s own memory. A child spawned straight from
/// the test process starts in that process's address space (vfork), and the kernel records the
/// parent's peak as the child's when it execs: in a test binary whose other suites hold
/// hundreds of MB, `ru_maxrss` reports theirs. GNU time (`/usr/bin/time`) forks `cmd` from its
/// own small process and reports `cmd`'s peak alone; without it this falls back to
/// [`output_with_peak_kib`] (a figure that can only be too high).
pub fn output_with_own_peak_kib(cmd: &mut std::process::Command) -> (std::process::Output, u64) {
    let time = Path::new("/usr/bin/time");
    if !time.exists() {
        return output_with_peak_kib(cmd);
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let report = dir.path().join("peak");
    let mut wrapped = std::process::Command::new(time);
    wrapped
        .arg("-f")
        .arg("%M")
        .arg("-o")
        .arg(&report)
        .arg(cmd.get_program())
        .args(cmd.get_args());
    if let Some(at) = cmd.get_current_dir() {
        wrapped.current_dir(at);
    }
    for (k, v) in cmd.get_envs() {
        match v {
            Some(v) => wrapped.env(k, v),
            None => wrapped.env_remove(k),
        };
    }
    let output = wrapped
        .output()
        .expect("start the command under /usr/bin/time");
    let text = std::fs::read_to_string(&report).unwrap_or_default();
    // GNU time writes "Command exited with non-zero status N" first when it does.
    let peak = text
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .next_back()
        .unwrap_or(0);
    (output, peak)
}
