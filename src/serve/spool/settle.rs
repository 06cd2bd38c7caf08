//! When a spool file may be claimed. A writer that renames a finished file into the spool
//! (the documented way) is taken at once; one that writes in place is taken only once it has
//! closed the file and the file has not changed for `spool_settle`, so no line written after
//! the claim is lost. The file is looked at relative to the spool directory's descriptor,
//! never through a link.

use std::os::fd::{AsRawFd, BorrowedFd};
use std::time::{Duration, SystemTime};

use nix::fcntl::AtFlags;

/// Whether a ready file may be claimed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Readiness {
    Now,
    /// Look again after this long.
    After(Duration),
}

/// File `name` in the directory held by `dir`. `renamed`: file-system events said the file
/// arrived by a rename. Otherwise the file must be unmodified for `settle` (by its mtime, on
/// the real clock: the file system's) and have no writer.
pub(crate) fn readiness(
    dir: BorrowedFd<'_>,
    name: &str,
    renamed: bool,
    settle: Duration,
) -> Readiness {
    if renamed {
        return Readiness::Now;
    }
    let Ok(st) = nix::sys::stat::fstatat(dir, name, AtFlags::AT_SYMLINK_NOFOLLOW) else {
        // Gone or unreadable: the claim finds out and says so.
        return Readiness::Now;
    };
    let modified = super::held::modified(&st);
    // A file's modification time is on the system's clock, so its age is too.
    #[allow(clippy::disallowed_methods)]
    let age = SystemTime::now()
        .duration_since(modified)
        .unwrap_or(Duration::ZERO);
    if age < settle {
        return Readiness::After(settle - age);
    }
    if has_writer(dir, name) == Some(true) {
        return Readiness::After(settle.max(Duration::from_millis(200)));
    }
    Readiness::Now
}

/// Whether some process has file `name` (in the directory held by `dir`) open for writing:
/// Linux refuses a read lease (`F_SETLEASE`) on such a file with EAGAIN. `None` when leases
/// cannot tell (another owner without CAP_LEASE, a file system without leases): then the
/// settle time alone decides.
pub(crate) fn has_writer(dir: BorrowedFd<'_>, name: &str) -> Option<bool> {
    let file = crate::regular_file::open_at(dir, name).ok()?;
    let fd = file.as_raw_fd();
    // SAFETY: fcntl on a descriptor this function owns, with integer arguments only.
    let set = unsafe { nix::libc::fcntl(fd, nix::libc::F_SETLEASE, nix::libc::F_RDLCK) };
    if set == 0 {
        // SAFETY: as above; releases the lease just taken.
        unsafe { nix::libc::fcntl(fd, nix::libc::F_SETLEASE, nix::libc::F_UNLCK) };
        return Some(false);
    }
    match std::io::Error::last_os_error().raw_os_error() {
        Some(nix::libc::EAGAIN) => Some(true),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::fd::AsFd;

    #[test]
    fn a_file_open_for_writing_has_a_writer_and_a_closed_one_not() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.ndjson");
        let held = std::fs::File::open(dir.path()).unwrap();
        let (fd, name) = (held.as_fd(), "a.ndjson");
        let mut writer = std::fs::File::create(&path).unwrap();
        writer.write_all(b"{}\n").unwrap();
        // Leases need the file's owner or CAP_LEASE (both hold for a file made here) and a
        // file system that has them.
        if has_writer(fd, name).is_none() {
            use std::io::Write as _;
            let _ = writeln!(
                std::io::stderr(),
                "note: skipped: no leases on this file system"
            );
            return;
        }
        assert_eq!(has_writer(fd, name), Some(true));
        assert!(matches!(
            readiness(fd, name, false, Duration::from_secs(60)),
            Readiness::After(_)
        ));
        drop(writer);
        assert_eq!(has_writer(fd, name), Some(false));
        assert_eq!(readiness(fd, name, false, Duration::ZERO), Readiness::Now);
        assert_eq!(
            readiness(fd, name, true, Duration::from_secs(60)),
            Readiness::Now
        );
    }
}
