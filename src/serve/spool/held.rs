//! A spool directory held open by its descriptor. Every create, move, listing and delete is
//! relative to the descriptor (`openat`, `renameat`, `unlinkat`, `fstatat` without following
//! a link), never to a path: a directory that is renamed, or replaced by a symbolic link,
//! after it was opened can never redirect what serve does to a place outside the spool.
//! Whether the name still leads to the directory held is checked with [`Held::still_at`].

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::{self, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag};
use nix::sys::stat::{FileStat, Mode, SFlag};
use nix::unistd::UnlinkatFlags;

/// What a name in a directory is, its final link not followed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    File,
    Dir,
    Link,
    /// A FIFO, socket or device.
    Other,
}

impl Kind {
    pub(super) fn of(st: &FileStat) -> Kind {
        match SFlag::from_bits_truncate(st.st_mode & SFlag::S_IFMT.bits()) {
            SFlag::S_IFREG => Kind::File,
            SFlag::S_IFDIR => Kind::Dir,
            SFlag::S_IFLNK => Kind::Link,
            _ => Kind::Other,
        }
    }

    fn of_entry(t: nix::dir::Type) -> Kind {
        match t {
            nix::dir::Type::File => Kind::File,
            nix::dir::Type::Directory => Kind::Dir,
            nix::dir::Type::Symlink => Kind::Link,
            _ => Kind::Other,
        }
    }
}

/// What stands where the name of a held directory should: for a message.
pub(super) fn describe(parent: &Held, name: &str) -> String {
    match parent.stat(name) {
        Ok(Some(st)) => match Kind::of(&st) {
            Kind::Link => match nix::fcntl::readlinkat(parent.fd(), name) {
                Ok(to) => format!("a symbolic link (to {})", Path::new(&to).display()),
                Err(_) => "a symbolic link".into(),
            },
            Kind::File => "a regular file, not a directory".into(),
            Kind::Other => "not a directory (a FIFO, socket or device)".into(),
            Kind::Dir => "a directory".into(),
        },
        Ok(None) => "missing".into(),
        Err(e) => format!("unreadable ({e})"),
    }
}

/// Whether the name of a held directory still leads to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Still {
    Same,
    Missing,
    /// Another directory (moved there, or made anew).
    OtherDir,
    /// A link, file or anything but a directory.
    NotDir,
}

pub(super) struct Held {
    fd: OwnedFd,
    /// Device and inode, to tell whether a name still leads here.
    id: (u64, u64),
    /// Where it was opened, for messages and logs only.
    pub path: PathBuf,
}

/// Why a directory could not be held.
#[derive(Debug)]
pub(super) enum OpenError {
    /// The name is a link, or not a directory: serve never follows one.
    NotDir,
    Io(io::Error),
}

impl Held {
    /// The directory at `path`, which must not itself be a link (the caller resolved it).
    pub(super) fn open(path: &Path) -> Result<Held, OpenError> {
        let fd = nix::fcntl::open(path, dir_flags(), Mode::empty()).map_err(open_error)?;
        Held::from_fd(fd, path.to_path_buf())
    }

    /// Directory `name` in this one, created first when `create` and missing (one that
    /// exists is accepted: several nodes may create it at the same moment). A link there is
    /// never followed: [`OpenError::NotDir`].
    pub(super) fn sub(&self, name: &str, create: bool) -> Result<Held, OpenError> {
        if create {
            let mode = Mode::S_IRWXU | Mode::S_IRWXG | Mode::S_IRWXO;
            match nix::sys::stat::mkdirat(self.fd(), name, mode) {
                Ok(()) | Err(Errno::EEXIST) => {}
                Err(e) => return Err(OpenError::Io(e.into())),
            }
        }
        let fd =
            nix::fcntl::openat(self.fd(), name, dir_flags(), Mode::empty()).map_err(open_error)?;
        Held::from_fd(fd, self.path.join(name))
    }

    fn from_fd(fd: OwnedFd, path: PathBuf) -> Result<Held, OpenError> {
        let st = nix::sys::stat::fstat(&fd).map_err(|e| OpenError::Io(e.into()))?;
        Ok(Held {
            fd,
            id: id_of(&st),
            path,
        })
    }

    pub(super) fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// Whether `name` in `parent` is still this directory.
    pub(super) fn still_at(&self, parent: &Held, name: &str) -> io::Result<Still> {
        Ok(match parent.stat(name)? {
            None => Still::Missing,
            Some(st) if Kind::of(&st) != Kind::Dir => Still::NotDir,
            Some(st) if id_of(&st) == self.id => Still::Same,
            Some(_) => Still::OtherDir,
        })
    }

    /// Whether `path` (resolved, links followed) still leads to this directory.
    pub(super) fn is_at(&self, path: &Path) -> bool {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(path).is_ok_and(|m| (m.dev(), m.ino()) == self.id)
    }

    /// `name`'s status, its final link not followed; `None` when there is no such name.
    pub(super) fn stat(&self, name: impl AsRef<OsStr>) -> io::Result<Option<FileStat>> {
        match nix::sys::stat::fstatat(self.fd(), name.as_ref(), AtFlags::AT_SYMLINK_NOFOLLOW) {
            Ok(st) => Ok(Some(st)),
            Err(Errno::ENOENT) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// The entries (not `.` and `..`) and what each is, links not followed.
    pub(super) fn entries(&self) -> io::Result<Vec<(OsString, Kind)>> {
        // A descriptor of its own: reading moves a descriptor's position, and this one's is
        // shared by nothing.
        let mut dir = nix::dir::Dir::openat(self.fd(), ".", dir_flags(), Mode::empty())?;
        let mut found = Vec::new();
        for entry in dir.iter() {
            let entry = entry?;
            let name = OsStr::from_bytes(entry.file_name().to_bytes());
            if name == "." || name == ".." {
                continue;
            }
            let kind = match entry.file_type() {
                Some(t) => Kind::of_entry(t),
                // File systems that do not say in the listing.
                None => match self.stat(name)? {
                    Some(st) => Kind::of(&st),
                    None => continue,
                },
            };
            found.push((name.to_owned(), kind));
        }
        Ok(found)
    }

    /// Regular file `name` opened for reading, never through a link nor blocking on a FIFO.
    pub(super) fn open_file(&self, name: &str) -> io::Result<File> {
        crate::regular_file::open_at(self.fd(), name)
    }

    /// Moves `name` to `to`'s `new_name` (replacing a file there, as a rename does).
    pub(super) fn rename(&self, name: &str, to: &Held, new_name: &str) -> io::Result<()> {
        Ok(nix::fcntl::renameat(self.fd(), name, to.fd(), new_name)?)
    }

    /// Removes `name` (a link itself, never what it points to; never a directory).
    pub(super) fn unlink(&self, name: &str) -> io::Result<()> {
        Ok(nix::unistd::unlinkat(
            self.fd(),
            name,
            UnlinkatFlags::NoRemoveDir,
        )?)
    }

    /// Removes directory `name` if it is empty.
    pub(super) fn rmdir(&self, name: &str) -> io::Result<()> {
        Ok(nix::unistd::unlinkat(
            self.fd(),
            name,
            UnlinkatFlags::RemoveDir,
        )?)
    }

    /// Writes `name` whole: under `name.tmp` first, then renamed, so a reader never sees half.
    pub(super) fn write_whole(&self, name: &str, bytes: &[u8]) -> io::Result<()> {
        let tmp = format!("{name}.tmp");
        let flags = OFlag::O_WRONLY
            | OFlag::O_CREAT
            | OFlag::O_TRUNC
            | OFlag::O_NOFOLLOW
            | OFlag::O_CLOEXEC;
        let mode = Mode::S_IRUSR | Mode::S_IWUSR | Mode::S_IRGRP | Mode::S_IROTH;
        let fd = nix::fcntl::openat(self.fd(), tmp.as_str(), flags, mode)?;
        File::from(fd).write_all(bytes)?;
        self.rename(&tmp, self, name)
    }
}

/// When a file was last modified, from its status.
pub(super) fn modified(st: &FileStat) -> SystemTime {
    SystemTime::UNIX_EPOCH
        + Duration::new(
            u64::try_from(st.st_mtime).unwrap_or(0),
            u32::try_from(st.st_mtime_nsec).unwrap_or(0),
        )
}

/// Device and inode.
#[allow(clippy::unnecessary_cast)] // not u64 on every target
fn id_of(st: &FileStat) -> (u64, u64) {
    (st.st_dev as u64, st.st_ino as u64)
}

fn dir_flags() -> OFlag {
    OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC
}

fn open_error(e: Errno) -> OpenError {
    match e {
        Errno::ELOOP | Errno::ENOTDIR => OpenError::NotDir,
        e => OpenError::Io(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn a_link_is_never_held_nor_followed_and_a_swap_is_seen() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("x.json"), "{}").unwrap();
        let root = Held::open(dir.path()).unwrap_or_else(|_| panic!("open"));
        let done = root.sub("done", true).unwrap_or_else(|_| panic!("sub"));
        // Created again by another: accepted.
        assert!(root.sub("done", true).is_ok());
        assert_eq!(done.still_at(&root, "done").unwrap(), Still::Same);
        symlink(outside.path(), dir.path().join("link")).unwrap();
        assert!(matches!(root.sub("link", true), Err(OpenError::NotDir)));
        assert!(describe(&root, "link").contains(&outside.path().display().to_string()));
        // The name turns into a link: seen, and the held directory is still the one used.
        std::fs::rename(dir.path().join("done"), dir.path().join("moved")).unwrap();
        assert_eq!(done.still_at(&root, "done").unwrap(), Still::Missing);
        std::fs::rename(dir.path().join("link"), dir.path().join("done")).unwrap();
        assert_eq!(done.still_at(&root, "done").unwrap(), Still::NotDir);
        done.write_whole("a.json", b"{}").unwrap();
        assert!(dir.path().join("moved/a.json").exists());
        assert!(!outside.path().join("a.json").exists());
        // Listing and deleting never go through the link.
        let listed = root.entries().unwrap();
        assert!(listed.contains(&("done".into(), Kind::Link)), "{listed:?}");
        assert!(root.unlink("done").is_ok());
        assert!(outside.path().join("x.json").exists());
        std::fs::create_dir(dir.path().join("done")).unwrap();
        assert_eq!(done.still_at(&root, "done").unwrap(), Still::OtherDir);
    }
}
