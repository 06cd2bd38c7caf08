//! `token_file:` and `password_hash_file:`: a principal's credential in a file of its own,
//! read when serve starts and at every reload, so that a token rotates without a restart
//! (serve's environment is read once; systemd's `EnvironmentFile=` too).
//!
//! The file is opened only if it is a regular file (a link is followed: systemd credentials
//! and Kubernetes secret volumes are links), checked on the open handle: it must belong to
//! serve's user or root, nobody but its owner may write it, and a token file may not be
//! readable by others (group read is fine: `root:pap 0640`). Its content is one line; the
//! line end is dropped, anything else that is not visible (a space, a second line) is refused
//! rather than trimmed, so a stray space never becomes part of a token. No message ever
//! quotes the content.

use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use crate::regular_file::{self, Links};

/// The largest credential file read (a token or a PHC string is far shorter).
const MAX_BYTES: u64 = 4096;

/// What the file holds, and so how strictly it is guarded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    /// A secret: group may read, nobody else.
    Token,
    /// No secret, but whoever can change it owns the principal.
    PasswordHash,
}

impl Kind {
    fn key(self) -> &'static str {
        match self {
            Kind::Token => "token_file",
            Kind::PasswordHash => "password_hash_file",
        }
    }

    /// Permission bits that must be clear.
    fn forbidden_mode(self) -> u32 {
        match self {
            Kind::Token => 0o027,
            Kind::PasswordHash => 0o022,
        }
    }
}

/// The one line `path` holds, checked as said above; the error names the file and what to
/// change, never the content.
pub(super) fn read(path: &Path, kind: Kind) -> Result<String, String> {
    let key = kind.key();
    let shown = path.display();
    let mut file = regular_file::open(path, Links::Follow)
        .map_err(|e| format!("{key} {shown}: cannot be read ({e})"))?;
    let meta = file.metadata().map_err(|e| format!("{key} {shown}: {e}"))?;
    let me = std::fs::metadata("/proc/self").map_or(u32::MAX, |m| m.uid());
    if meta.uid() != me && meta.uid() != 0 {
        return Err(format!(
            "{key} {shown} belongs to uid {}, not to serve's user (uid {me}) or root: chown it",
            meta.uid()
        ));
    }
    let mode = meta.mode() & 0o7777;
    if mode & kind.forbidden_mode() != 0 {
        let (who, fix) = match kind {
            Kind::Token if mode & 0o007 != 0 => ("others may read or write it", "chmod 640"),
            Kind::Token => ("its group may write it", "chmod 640"),
            Kind::PasswordHash => ("its group or others may write it", "chmod 644"),
        };
        return Err(format!(
            "{key} {shown}: {who} (mode {mode:04o}): {fix} {shown}"
        ));
    }
    let mut bytes = Vec::new();
    file.by_ref()
        .take(MAX_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("{key} {shown}: {e}"))?;
    if bytes.len() as u64 > MAX_BYTES {
        return Err(format!(
            "{key} {shown} is larger than {MAX_BYTES} bytes: it should hold one line"
        ));
    }
    let text = String::from_utf8(bytes).map_err(|_| format!("{key} {shown} is not UTF-8 text"))?;
    let line = text.strip_suffix('\n').unwrap_or(&text);
    let line = line.strip_suffix('\r').unwrap_or(line);
    if line.is_empty() {
        return Err(format!("{key} {shown} is empty"));
    }
    if line.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(format!(
            "{key} {shown} holds more than one line, spaces or control characters: write the credential alone on one line"
        ));
    }
    Ok(line.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn file(dir: &Path, name: &str, text: &str, mode: u32) -> std::path::PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        path
    }

    #[test]
    fn one_line_is_read_and_its_line_end_dropped() {
        let dir = tempfile::tempdir().unwrap();
        for text in [
            "s3cret-0123456789",
            "s3cret-0123456789\n",
            "s3cret-0123456789\r\n",
        ] {
            let path = file(dir.path(), "t", text, 0o600);
            assert_eq!(read(&path, Kind::Token).unwrap(), "s3cret-0123456789");
        }
        // Group may read a token (root:pap 0640), and through a link (a secret volume).
        let path = file(dir.path(), "g", "abc", 0o640);
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&path, &link).unwrap();
        assert_eq!(read(&link, Kind::Token).unwrap(), "abc");
        // A hash is no secret: others may read it.
        let path = file(dir.path(), "h", "$argon2id$x\n", 0o644);
        assert_eq!(read(&path, Kind::PasswordHash).unwrap(), "$argon2id$x");
    }

    #[test]
    fn loose_modes_and_stray_content_are_refused_without_quoting_it() {
        let dir = tempfile::tempdir().unwrap();
        let cases = [
            ("a", "secret-aaaa", 0o644, Kind::Token, "others may read"),
            ("b", "secret-bbbb", 0o660, Kind::Token, "group may write"),
            ("c", "$argon2id$c", 0o664, Kind::PasswordHash, "may write"),
            (
                "d",
                "secret-dddd\nsecond",
                0o600,
                Kind::Token,
                "more than one line",
            ),
            ("e", "secret-eeee ", 0o600, Kind::Token, "spaces"),
            ("f", "\n", 0o600, Kind::Token, "is empty"),
        ];
        for (name, text, mode, kind, expected) in cases {
            let path = file(dir.path(), name, text, mode);
            let err = read(&path, kind).unwrap_err();
            assert!(err.contains(expected), "{name}: {err}");
            assert!(err.contains(&path.display().to_string()), "{err}");
            assert!(!err.contains("secret-") && !err.contains("argon2"), "{err}");
        }
        let big = file(dir.path(), "big", &"x".repeat(5000), 0o600);
        assert!(read(&big, Kind::Token).unwrap_err().contains("larger than"));
        let missing = read(&dir.path().join("none"), Kind::Token).unwrap_err();
        assert!(missing.contains("cannot be read"), "{missing}");
        let err = read(dir.path(), Kind::Token).unwrap_err();
        assert!(err.contains("not a regular file"), "{err}");
    }
}
