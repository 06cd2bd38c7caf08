//! Finding the program a manifest names: a path (resolved against the project root when
//! relative) or a bare name looked up on PATH, as the system would run it.

use std::path::{Path, PathBuf};

crate::reason::reason_error!(
    /// Why a program a manifest names would not run.
    ProgramNotFound
);

/// Where `program` would be run from, or why it would not run.
pub fn locate(program: &str, root: &Path) -> Result<PathBuf, ProgramNotFound> {
    locate_reason(program, root).map_err(ProgramNotFound::from)
}

/// [`locate`], with the reason as text (for messages that quote it).
pub(crate) fn locate_reason(program: &str, root: &Path) -> Result<PathBuf, String> {
    if program.contains('/') {
        let path = if Path::new(program).is_absolute() {
            PathBuf::from(program)
        } else {
            // Without the `.` steps: `./bin/x` under the root reads as `<root>/bin/x`.
            root.join(program).components().collect()
        };
        return if is_executable(&path) {
            Ok(path)
        } else {
            Err(format!(
                "`{program}` does not exist or is not executable (resolved against the project root)"
            ))
        };
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|candidate| is_executable(candidate))
        .ok_or_else(|| format!("`{program}` is not on PATH"))
}

pub(crate) fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path)
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_and_names_are_found_as_the_system_would() {
        let root = Path::new("/");
        assert!(locate("sh", root).is_ok());
        assert!(locate("/bin/sh", root).is_ok());
        let err = locate("no-such-program-pap", root).unwrap_err();
        assert_eq!(err.reason(), "`no-such-program-pap` is not on PATH");
        assert!(
            locate("./nope.sh", root)
                .unwrap_err()
                .reason()
                .contains("does not exist")
        );
    }
}
