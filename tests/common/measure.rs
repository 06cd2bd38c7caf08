//! Measurements the benchmarks and the fuzz runs report beside their figures (Linux).

use std::path::Path;
use std::time::Instant;

/// Peak resident memory of a process (`VmHWM`) in KiB, 0 where /proc cannot tell.
pub(crate) fn peak_kib(pid: u32) -> u64 {
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
pub(crate) fn fsync_ms(dir: &Path) -> (f64, f64) {
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

/// Runs `cmd` to its end like `Command::output`, and returns its peak resident memory in KiB:
/// its own, from its exec on.
///
/// `wait4`'s `ru_maxrss` is not that: the kernel keeps the largest of every memory image the
/// process had, and before its exec the child's image is the test process's (shared outright
/// when std spawns with `posix_spawn`, copied when it forks), so a test binary that once grew
/// to 500 MB makes every child it measures read 500 MB. The child is therefore traced (it
/// stops at its exit with its memory still mapped, where `/proc/PID/status` gives `VmHWM`,
/// the peak of the image it exec'd). Where tracing is not allowed, `ru_maxrss` it is, an upper
/// bound. Signals the child gets are passed on to it; a stop signal would be passed on again
/// at each group stop (the tests' commands get none).
pub(crate) fn output_with_peak_kib(cmd: &mut std::process::Command) -> (std::process::Output, u64) {
    use std::io::Read;
    use std::process::Stdio;
    let mut child = traced(cmd.stdout(Stdio::piped()).stderr(Stdio::piped()));
    let read_all = |mut pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            let _ = pipe.read_to_end(&mut bytes);
            bytes
        })
    };
    let out = read_all(Box::new(child.stdout.take().expect("stdout")));
    let err = read_all(Box::new(child.stderr.take().expect("stderr")));
    let (status, peak) = wait_with_peak_kib(child);
    let output = std::process::Output {
        status,
        stdout: out.join().expect("stdout reader"),
        stderr: err.join().expect("stderr reader"),
    };
    (output, peak)
}

/// As [`output_with_peak_kib`], for a command whose output goes where `cmd` says (a
/// benchmark's gigabytes of lines to /dev/null): its exit status and peak in KiB.
pub(crate) fn status_with_peak_kib(
    cmd: &mut std::process::Command,
) -> (std::process::ExitStatus, u64) {
    wait_with_peak_kib(traced(cmd))
}

/// Starts `cmd` traced by this thread (see [`output_with_peak_kib`]).
fn traced(cmd: &mut std::process::Command) -> std::process::Child {
    use nix::libc;
    use std::os::unix::process::CommandExt;
    // SAFETY: ptrace(PTRACE_TRACEME) only marks this (forked) process as traced by its parent
    // and is async-signal-safe; if it fails, the child runs untraced and ru_maxrss is used.
    unsafe {
        cmd.pre_exec(|| {
            libc::ptrace(
                libc::PTRACE_TRACEME,
                0,
                std::ptr::null_mut::<libc::c_void>(),
                std::ptr::null_mut::<libc::c_void>(),
            );
            Ok(())
        });
    }
    cmd.spawn().expect("start the command")
}

/// Waits for a [`traced`] child to end; its status and its peak in KiB.
#[allow(clippy::zombie_processes)] // reaped by wait4 below, which Child does not see
fn wait_with_peak_kib(child: std::process::Child) -> (std::process::ExitStatus, u64) {
    use nix::libc;
    use std::os::unix::process::ExitStatusExt;
    let pid = child.id() as libc::pid_t;
    let mut exec_seen = false;
    let mut at_exit = None;
    // The tracing calls come from this thread, the one that forked the child (its tracer).
    let (status, usage) = loop {
        let mut status = 0;
        let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
        // SAFETY: wait4 on our own child's pid, with pointers to a status word and a zeroed
        // rusage.
        let got = unsafe { libc::wait4(pid, &mut status, 0, usage.as_mut_ptr()) };
        assert_eq!(got, pid, "wait4 failed");
        if !libc::WIFSTOPPED(status) {
            // SAFETY: zeroed, then filled by wait4.
            break (status, unsafe { usage.assume_init() });
        }
        let signal = libc::WSTOPSIG(status);
        let event = status >> 16;
        let mut pass_on = 0;
        if signal == libc::SIGTRAP && event == libc::PTRACE_EVENT_EXIT {
            at_exit = Some(peak_kib(pid as u32));
        } else if signal == libc::SIGTRAP && event == 0 && !exec_seen {
            // The stop at its exec: from here on, stop it once more at its exit.
            exec_seen = true;
            // SAFETY: our stopped tracee; an option word as the data argument.
            unsafe {
                libc::ptrace(
                    libc::PTRACE_SETOPTIONS,
                    pid,
                    std::ptr::null_mut::<libc::c_void>(),
                    (libc::PTRACE_O_TRACEEXIT | libc::PTRACE_O_EXITKILL) as *mut libc::c_void,
                );
            }
        } else {
            pass_on = signal;
        }
        // SAFETY: our stopped tracee, resumed with the signal it got (or none).
        unsafe {
            libc::ptrace(
                libc::PTRACE_CONT,
                pid,
                std::ptr::null_mut::<libc::c_void>(),
                pass_on as *mut libc::c_void,
            );
        }
    };
    let peak = match at_exit {
        Some(kib) if kib > 0 => kib,
        _ => usage.ru_maxrss.max(0) as u64,
    };
    (std::process::ExitStatus::from_raw(status), peak)
}
