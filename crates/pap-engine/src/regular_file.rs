//! Opening a file that someone else controls (a manifest in a pull request, a spool file, an
//! agent's emit file) only if it is a regular file: without blocking (opening a FIFO for
//! reading waits for a writer, for ever), optionally without following a final link, and
//! checked on the open handle, so nothing can be swapped in between a check and the open; or
//! relative to a directory held by its descriptor ([`open_at`], the spool).

use std::fs::File;
use std::io;
use std::os::fd::BorrowedFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// Whether a final symbolic link may be followed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Links {
    /// The caller already vetted where links lead (manifest discovery).
    Follow,
    /// A link is refused (`ELOOP`, reported as [`is_not_regular`]).
    Refuse,
}

/// `path` opened for reading, or an error; a FIFO, socket, device, directory (or, with
/// [`Links::Refuse`], a link) is an error for which [`is_not_regular`] holds.
pub fn open(path: &Path, links: Links) -> io::Result<File> {
    let mut flags = nix::libc::O_NONBLOCK;
    if links == Links::Refuse {
        flags |= nix::libc::O_NOFOLLOW;
    }
    let file = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(flags)
        .open(path)
    {
        Err(e) if e.raw_os_error() == Some(nix::libc::ELOOP) => return Err(not_regular()),
        other => other?,
    };
    regular(file)
}

/// Regular file `name` in the directory held by `dir`, opened for reading relative to that
/// descriptor, as [`open`] with [`Links::Refuse`] (the spool's held directories).
pub fn open_at(dir: BorrowedFd<'_>, name: &str) -> io::Result<File> {
    use nix::fcntl::OFlag;
    let flags = OFlag::O_RDONLY | OFlag::O_NONBLOCK | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    match nix::fcntl::openat(dir, name, flags, nix::sys::stat::Mode::empty()) {
        Ok(fd) => regular(File::from(fd)),
        Err(nix::errno::Errno::ELOOP) => Err(not_regular()),
        Err(e) => Err(e.into()),
    }
}

/// `file` if it is a regular file, checked on the open handle.
fn regular(file: File) -> io::Result<File> {
    if !file.metadata()?.is_file() {
        return Err(not_regular());
    }
    Ok(file)
}

fn not_regular() -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, NOT_REGULAR)
}

const NOT_REGULAR: &str = "not a regular file (a link, FIFO, socket, device or directory)";

/// Whether `open` refused the path for not being a regular file.
pub(crate) fn is_not_regular(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::InvalidInput && e.to_string() == NOT_REGULAR
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    #[test]
    fn only_regular_files_open_and_a_fifo_never_blocks() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a.json");
        std::fs::write(&file, "{}").unwrap();
        let link = dir.path().join("link.json");
        std::os::unix::fs::symlink(&file, &link).unwrap();
        let fifo = dir.path().join("fifo.json");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();

        assert!(open(&file, Links::Refuse).is_ok());
        assert!(open(&link, Links::Follow).is_ok());
        for (path, links) in [
            (&link, Links::Refuse),
            (&fifo, Links::Follow),
            (&dir.path().to_path_buf(), Links::Follow),
        ] {
            let err = open(path, links).unwrap_err();
            assert!(is_not_regular(&err), "{}: {err}", path.display());
        }
        let missing = open(&dir.path().join("none"), Links::Refuse).unwrap_err();
        assert_eq!(missing.kind(), io::ErrorKind::NotFound);
        // The same, relative to a directory's descriptor.
        let held = std::fs::File::open(dir.path()).unwrap();
        assert!(open_at(held.as_fd(), "a.json").is_ok());
        for name in ["link.json", "fifo.json", "."] {
            let err = open_at(held.as_fd(), name).unwrap_err();
            assert!(is_not_regular(&err), "{name}: {err}");
        }
        let missing = open_at(held.as_fd(), "none").unwrap_err();
        assert_eq!(missing.kind(), io::ErrorKind::NotFound);
    }
}
