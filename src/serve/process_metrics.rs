//! What the process and its state directory look like at a scrape: the
//! Prometheus client libraries' standard `process_*` families (CPU seconds, resident memory,
//! open file descriptors, start time), read from Linux's `/proc/self`, and the bytes the state
//! takes and the bytes free on its file system. A value that cannot be read is left out of
//! that scrape rather than shown as a wrong zero.

use std::path::Path;

/// One reading of the process.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(super) struct Process {
    /// User plus system CPU time, seconds.
    pub cpu_seconds: Option<f64>,
    pub resident_bytes: Option<u64>,
    pub open_fds: Option<u64>,
    /// Seconds since the epoch.
    pub start_time_seconds: Option<f64>,
}

/// Reads `/proc/self`; on another system every part is `None`.
pub(super) fn read_process() -> Process {
    let ticks = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .ok()
        .flatten()
        .filter(|t| *t > 0)
        .map(|t| t as f64);
    let page = nix::unistd::sysconf(nix::unistd::SysconfVar::PAGE_SIZE)
        .ok()
        .flatten()
        .filter(|p| *p > 0)
        .map(|p| p as u64);
    let stat = std::fs::read_to_string("/proc/self/stat").ok();
    let fields = stat.as_deref().and_then(stat_fields);
    let field = |n: usize| -> Option<f64> { fields.as_ref()?.get(n)?.parse().ok() };
    // Fields after the command name, counted from 3 (`state`) as proc(5) numbers them.
    let at = |number: usize| field(number - 3);
    let cpu_seconds = ticks.and_then(|t| Some((at(14)? + at(15)?) / t));
    let boot = std::fs::read_to_string("/proc/stat").ok().and_then(|s| {
        s.lines()
            .find_map(|l| l.strip_prefix("btime "))
            .and_then(|v| v.trim().parse::<f64>().ok())
    });
    let start_time_seconds = ticks.and_then(|t| Some(boot? + at(22)? / t));
    let resident_bytes = page.and_then(|p| {
        let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
        let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
        Some(pages * p)
    });
    let open_fds = std::fs::read_dir("/proc/self/fd")
        .ok()
        .map(|d| d.count() as u64);
    Process {
        cpu_seconds,
        resident_bytes,
        open_fds,
        start_time_seconds,
    }
}

/// The fields of `/proc/self/stat` after the command name (which may hold spaces and `)`).
fn stat_fields(stat: &str) -> Option<Vec<String>> {
    let after = &stat[stat.rfind(')')? + 1..];
    Some(after.split_whitespace().map(str::to_owned).collect())
}

/// The bytes the files of `dir` take (not following links), and the bytes free to an
/// unprivileged writer on its file system.
pub(super) fn state_bytes(dir: &Path) -> (Option<u64>, Option<u64>) {
    let used = std::fs::read_dir(dir).ok().map(|entries| {
        entries
            .flatten()
            .filter_map(|e| e.metadata().ok())
            .filter(|m| m.is_file())
            .map(|m| m.len())
            .sum()
    });
    let free = nix::sys::statvfs::statvfs(dir)
        .ok()
        .map(|s| s.blocks_available().saturating_mul(s.fragment_size()));
    (used, free)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    // The process's start is the system's time, which is what it is compared with here.
    #[allow(clippy::disallowed_methods)]
    fn this_process_reads_as_itself() {
        let p = read_process();
        assert!(p.cpu_seconds.is_some_and(|s| s >= 0.0), "{p:?}");
        assert!(p.resident_bytes.is_some_and(|b| b > 1 << 20), "{p:?}");
        assert!(p.open_fds.is_some_and(|n| n >= 3), "{p:?}");
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        assert!(
            p.start_time_seconds
                .is_some_and(|t| t <= now + 1.0 && t > now - 86_400.0 * 365.0),
            "{p:?}"
        );
    }

    #[test]
    fn a_command_name_with_spaces_and_parentheses_is_skipped() {
        let fields = stat_fields("42 (a (b) c) S 1 2 3").unwrap();
        assert_eq!(fields, ["S", "1", "2", "3"]);
    }

    #[test]
    fn the_state_directory_is_measured() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("state.redb"), vec![0u8; 5000]).unwrap();
        let (used, free) = state_bytes(dir.path());
        assert_eq!(used, Some(5000));
        assert!(free.is_some_and(|f| f > 0));
    }
}
