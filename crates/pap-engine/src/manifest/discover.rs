//! Finding a project's manifest files without trusting the file system: only regular files
//! are read; a symbolic link is followed only to a regular file or directory inside the
//! project root (unless `follow_symlinks: true`); FIFOs, sockets and devices are refused
//! (opening a FIFO would hang every command); a directory reached twice (a link loop) is
//! read once. Each refusal is one diagnostic that quotes nothing of the target: a link to
//! `~/.ssh/id_rsa` named `triggers/x.yaml` in an untrusted pull request must not end up in a
//! CI log.
//!
//! A link into a hidden file or folder of the project is refused (`.git/config`, `.env`), with
//! one exception: the layout Kubernetes gives a ConfigMap or Secret volume, whose visible names
//! are links into a hidden, timestamped folder (see [`kubernetes_volume_link`]).

use std::collections::HashSet;
use std::ffi::OsStr;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Component, Path, PathBuf};

/// A manifest file found, or a path that looked like one and was refused.
#[derive(Debug, Clone, PartialEq)]
pub enum Found {
    File(PathBuf),
    Refused { path: PathBuf, why: String },
}

impl Found {
    pub fn path(&self) -> &Path {
        match self {
            Found::File(p) | Found::Refused { path: p, .. } => p,
        }
    }
}

/// How far links may lead.
#[derive(Debug, Clone, Copy)]
pub struct Rules<'a> {
    /// The canonical project root.
    pub root: &'a Path,
    /// `follow_symlinks: true`: links may lead outside the root.
    pub follow_outside: bool,
}

/// Manifest files of a project in a stable order: pap.yaml, triggers/**, agents/**,
/// schedules/**.
pub fn discover(root: &Path, follow_outside: bool) -> Vec<Found> {
    let canonical = root.canonicalize().unwrap_or_else(|_| root.to_path_buf());
    let rules = Rules {
        root: &canonical,
        follow_outside,
    };
    let mut files = Vec::new();
    for name in [super::loader::CONFIG_FILE, "pap.yml"] {
        let p = root.join(name);
        if std::fs::symlink_metadata(&p).is_ok() {
            files.push(check_file(&p, rules));
            break;
        }
    }
    for dir in ["triggers", "agents", "schedules"] {
        let mut found = Vec::new();
        let path = root.join(dir);
        // The folders themselves may be links too: the same rules apply to them.
        if std::fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_symlink())
            && let Err(why) = followable(&path, rules)
        {
            files.push(Found::Refused { path, why });
            continue;
        }
        walk_yaml(&path, rules, &mut found);
        found.sort_by(|a, b| a.path().cmp(b.path()));
        files.extend(found);
    }
    files
}

/// Every `*.yaml`/`*.yml` under `dir`, skipping hidden entries.
pub fn walk_yaml(dir: &Path, rules: Rules, out: &mut Vec<Found>) {
    let mut seen = HashSet::new();
    if let Ok(meta) = std::fs::metadata(dir) {
        seen.insert((meta.dev(), meta.ino()));
    }
    walk(dir, rules, &mut seen, out);
}

fn walk(dir: &Path, rules: Rules, seen: &mut HashSet<(u64, u64)>, out: &mut Vec<Found>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if entry.file_name().to_string_lossy().starts_with('.') {
            continue;
        }
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        let yaml = is_yaml_name(&path);
        if kind.is_dir()
            || (kind.is_symlink() && std::fs::metadata(&path).is_ok_and(|m| m.is_dir()))
        {
            let target = match kind.is_symlink() {
                true => match followable(&path, rules) {
                    Ok(()) => std::fs::metadata(&path),
                    Err(why) => {
                        out.push(Found::Refused { path, why });
                        continue;
                    }
                },
                false => std::fs::metadata(&path),
            };
            let Ok(meta) = target else { continue };
            if !seen.insert((meta.dev(), meta.ino())) {
                out.push(Found::Refused {
                    path,
                    why: "a link back to a directory already read (a loop): skipped".into(),
                });
                continue;
            }
            walk(&path, rules, seen, out);
        } else if yaml {
            out.push(check_file(&path, rules));
        }
    }
}

/// A path named like a manifest: a regular file, or a link allowed to lead to one.
pub(crate) fn check_file(path: &Path, rules: Rules) -> Found {
    let refuse = |why: String| Found::Refused {
        path: path.to_path_buf(),
        why,
    };
    let Ok(own) = std::fs::symlink_metadata(path) else {
        return refuse("cannot be read".into());
    };
    if own.file_type().is_symlink()
        && let Err(why) = followable(path, rules)
    {
        return refuse(why);
    }
    match std::fs::metadata(path) {
        Ok(meta) if meta.is_file() => Found::File(path.to_path_buf()),
        Ok(meta) => refuse(format!(
            "not a regular file ({}): pap reads manifests only from regular files",
            kind_name(&meta.file_type())
        )),
        Err(e) => refuse(format!("cannot be read: {e}")),
    }
}

/// Whether the link at `path` may be followed: its target resolves (no loop, not dangling)
/// and lies inside the root, unless links may lead outside.
fn followable(path: &Path, rules: Rules) -> Result<(), String> {
    let target = path.canonicalize().map_err(|e| {
        if e.raw_os_error() == Some(nix::libc::ELOOP) {
            "a symbolic link loop".to_string()
        } else {
            "a symbolic link whose target does not exist".to_string()
        }
    })?;
    if rules.follow_outside {
        return Ok(());
    }
    let Ok(inside) = target.strip_prefix(rules.root) else {
        return Err("a symbolic link to outside the project root: not followed (`follow_symlinks: true` in pap.yaml allows it)".into());
    };
    // `.git/config` (a CI token), `.env`, `.pap/`: hidden places are never manifests.
    if has_hidden_part(inside) && !kubernetes_volume_link(path, &target) {
        return Err(
            "a symbolic link to a hidden file or folder of the project: not followed".into(),
        );
    }
    Ok(())
}

/// Whether a part of `path` is hidden (starts with a dot).
fn has_hidden_part(path: &Path) -> bool {
    path.components()
        .any(|c| c.as_os_str().to_string_lossy().starts_with('.'))
}

/// Whether the link at `path`, which resolves to `target`, is a name of a Kubernetes ConfigMap
/// or Secret volume. The kubelet's atomic writer lays one out as
///
/// ```text
/// triggers/a.yaml -> ..data/a.yaml
/// triggers/..data -> ..2026_11_27_13_00_00.1234567890
/// triggers/..2026_11_27_13_00_00.1234567890/a.yaml      (the file)
/// ```
///
/// and on a change writes a new timestamped folder and swaps `..data` in one rename. Only that
/// exact shape passes: the link says `..data/NAME` with nothing hidden in NAME, `..data` beside
/// it names one sibling folder of the writer's timestamp form, and the link resolves inside that
/// folder. A link to `.git/config`, a `..data` leading anywhere else, or a file in the folder
/// that links out of it are refused as before.
fn kubernetes_volume_link(path: &Path, target: &Path) -> bool {
    let Some(parent) = path.parent() else {
        return false;
    };
    let Ok(text) = std::fs::read_link(path) else {
        return false;
    };
    let Ok(name) = text.strip_prefix("..data") else {
        return false;
    };
    let plain = name.components().all(|c| matches!(c, Component::Normal(_)));
    if name.as_os_str().is_empty() || !plain || has_hidden_part(name) {
        return false;
    }
    let Ok(data) = std::fs::read_link(parent.join("..data")) else {
        return false;
    };
    let mut parts = data.components();
    let (Some(Component::Normal(folder)), None) = (parts.next(), parts.next()) else {
        return false;
    };
    if !is_atomic_writer_folder(folder) {
        return false;
    }
    parent
        .canonicalize()
        .is_ok_and(|parent| target.starts_with(parent.join(folder)))
}

/// `..YYYY_MM_DD_HH_MM_SS.DIGITS`: the folder name the kubelet's atomic writer makes (Go's
/// `MkdirTemp` with the pattern `..2006_01_02_15_04_05.`).
fn is_atomic_writer_folder(name: &OsStr) -> bool {
    let digits = |s: &str, len: Option<usize>| {
        !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) && len.is_none_or(|n| s.len() == n)
    };
    let Some(rest) = name.to_str().and_then(|s| s.strip_prefix("..")) else {
        return false;
    };
    let Some((stamp, random)) = rest.split_once('.') else {
        return false;
    };
    let fields: Vec<&str> = stamp.split('_').collect();
    fields.len() == 6
        && fields
            .iter()
            .zip([4, 2, 2, 2, 2, 2])
            .all(|(field, len)| digits(field, Some(len)))
        && digits(random, None)
}

fn kind_name(kind: &std::fs::FileType) -> &'static str {
    if kind.is_fifo() {
        "a FIFO"
    } else if kind.is_socket() {
        "a socket"
    } else if kind.is_block_device() || kind.is_char_device() {
        "a device"
    } else if kind.is_dir() {
        "a directory"
    } else {
        "not a file"
    }
}

fn is_yaml_name(path: &Path) -> bool {
    matches!(
        path.extension().and_then(|e| e.to_str()),
        Some("yaml" | "yml")
    )
}

/// Whether pap.yaml (a regular file inside the root) says `follow_symlinks: true`. Read
/// before the rest, since it decides how the rest is found; a full check comes with the
/// project's load.
pub(crate) fn config_follows_symlinks(root: &Path) -> bool {
    let canonical = root.canonicalize().unwrap_or_else(|_| root.to_path_buf());
    let rules = Rules {
        root: &canonical,
        follow_outside: false,
    };
    for name in [super::loader::CONFIG_FILE, "pap.yml"] {
        let p = root.join(name);
        if let Found::File(path) = check_file(&p, rules) {
            let Ok(text) = std::fs::read_to_string(path) else {
                return false;
            };
            return super::yaml_tree::parse(&text).is_ok_and(|tree| {
                tree.value
                    .get("follow_symlinks")
                    .is_some_and(|v| v.value == super::yaml_tree::Node::Bool(true))
            });
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::is_atomic_writer_folder;
    use std::ffi::OsStr;

    #[test]
    fn only_the_atomic_writers_folder_names_pass() {
        for good in [
            "..2026_11_27_13_00_00.1234567890",
            "..2019_01_01_00_00_00.1",
        ] {
            assert!(is_atomic_writer_folder(OsStr::new(good)), "{good}");
        }
        for bad in [
            "..data",
            ".git",
            "..",
            "..2026_11_27_13_00_00",
            "..2026_11_27_13_00_00.",
            "..2026_11_27_13_00.123",
            "..2026_11_27_13_00_0x.123",
            "..26_11_27_13_00_00.123",
            "..2026_11_27_13_00_00.12a",
            "..2026_11_27_13_00_00.1/..",
            ".2026_11_27_13_00_00.123",
        ] {
            assert!(!is_atomic_writer_folder(OsStr::new(bad)), "{bad}");
        }
    }
}
