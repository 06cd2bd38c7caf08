//! The checked project, cached by the content of its manifests.
//!
//! Every command loads the project, and loading checks every manifest: on a project of a
//! thousand triggers that is most of a command's start-up (YAML, the shape check, the compile
//! steps). A project that loaded without errors is written to `<state>/project.cache` in its
//! compiled form, under a key that covers everything the load read: each manifest file's
//! name and bytes, the root, `$USER` (the inbox's default user), and the binary itself. The
//! next command whose key matches takes the project from there and checks nothing again.
//! Any change of a file, a file added or removed, or another build of pap is a miss, and the
//! full load runs (and reports what it finds, as `pap lint` does).
//!
//! What the cache cannot cover is made again at every load: the redactor (secret values come
//! from the environment). A command agent's program that went missing is only a warning of
//! the load (the run fails with a clear error), so the cache does not look for it either.
//! Regexes and JSONPath queries are compiled when first used (see `regex_test` and
//! `crate::jsonpath`).
//! A cache file that cannot be read, parsed or written is ignored: the cache only saves
//! time, never decides anything.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use sha2::{Digest, Sha256};

use super::compiled::Project;
use super::discover::{self, Found, Rules};
use super::yaml_tree::{self, Node};

/// Bumped when the cached form changes shape (the binary is in the key as well).
const FORMAT: &str = "pap-project-cache 6";

/// The cache file's name in the state dir.
pub const FILE: &str = "project.cache";

/// What identifies a project's manifests as read now, and where its cache lives.
pub struct Key {
    digest: [u8; 32],
    /// The cache file: `<state>/project.cache`.
    pub path: PathBuf,
}

/// The key of the project at `root` (canonical), its cache in `state` when given, else in
/// the state dir pap.yaml names. `None` when something the load would report stands in the
/// way (a manifest that cannot be read, a pap.yaml that does not parse): then only the full
/// load can say what is wrong.
pub fn key(root: &Path, state: Option<&Path>) -> Option<Key> {
    let config = read_config(root)?;
    let mut hash = Sha256::new();
    hash.update(FORMAT);
    hash.update([0]);
    hash.update(env!("CARGO_PKG_VERSION"));
    hash.update([0]);
    hash.update(binary_identity()?);
    hash.update(root.as_os_str().as_encoded_bytes());
    hash.update([0]);
    hash.update(std::env::var("USER").unwrap_or_default());
    hash.update([0]);
    let mut files: Vec<PathBuf> = Vec::new();
    for found in discover::discover(root, config.follow_symlinks) {
        match found {
            Found::File(path) => files.push(path),
            Found::Refused { .. } => return None,
        }
    }
    files.sort();
    for path in &files {
        let bytes = super::loader::read_regular(path).ok()?;
        let name = path.strip_prefix(root).unwrap_or(path);
        hash.update(name.as_os_str().as_encoded_bytes());
        hash.update([0]);
        hash.update((bytes.len() as u64).to_le_bytes());
        hash.update(&bytes);
    }
    let state = match state {
        Some(dir) => dir.to_path_buf(),
        None => root.join(config.state_dir.as_deref().unwrap_or(".pap")),
    };
    Some(Key {
        digest: hash.finalize().into(),
        path: state.join(FILE),
    })
}

/// The project cached under `key`, if there is one and it still holds.
pub fn lookup(key: &Key) -> Option<Project> {
    let bytes = read_trusted(&key.path)?;
    let rest = bytes.strip_prefix(header(key).as_bytes())?;
    let mut project: Project = serde_json::from_slice(rest).ok()?;
    let lookup = |name: &str| std::env::var(name).ok();
    project.redactor = Arc::new(super::secrets::redactor_for(
        &project.config,
        &project.agents,
        &lookup,
    ));
    Some(project)
}

/// Caches `project` under `key`, when its state dir exists (a command that only reads never
/// creates one). Written whole or not at all: a temporary file renamed into place.
pub fn store(key: &Key, project: &Project) {
    let Some(dir) = key.path.parent().filter(|d| d.is_dir()) else {
        return;
    };
    let Ok(json) = serde_json::to_vec(project) else {
        return;
    };
    let write = || -> std::io::Result<()> {
        let mut file = tempfile::Builder::new()
            .prefix(".project.cache-")
            .tempfile_in(dir)?;
        std::io::Write::write_all(&mut file, header(key).as_bytes())?;
        std::io::Write::write_all(&mut file, &json)?;
        file.persist(&key.path).map_err(|e| e.error)?;
        Ok(())
    };
    if let Err(e) = write() {
        tracing::debug!(error = %e, path = %key.path.display(), "cannot write the project cache");
    }
}

/// The cache file's bytes, if this user wrote it and nobody else may change it. The key is
/// no secret: whoever could write the file could choose the programs pap runs, so a file
/// another user owns, or one that group or others may write, is not used.
fn read_trusted(path: &Path) -> Option<Vec<u8>> {
    use std::io::Read;
    use std::os::unix::fs::MetadataExt;
    let me = std::fs::metadata("/proc/self").ok()?.uid();
    let mut file = crate::regular_file::open(path, crate::regular_file::Links::Refuse).ok()?;
    let meta = file.metadata().ok()?;
    if meta.uid() != me || meta.mode() & 0o022 != 0 {
        return None;
    }
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes).ok()?;
    Some(bytes)
}

fn header(key: &Key) -> String {
    let hex: String = key.digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("{FORMAT}\n{hex}\n")
}

/// What the key needs of pap.yaml before the load: whether to follow symlinks, and where
/// the state dir is.
struct ConfigFacts {
    follow_symlinks: bool,
    state_dir: Option<String>,
}

fn read_config(root: &Path) -> Option<ConfigFacts> {
    let rules = Rules {
        root,
        follow_outside: false,
    };
    for name in [super::loader::CONFIG_FILE, "pap.yml"] {
        if let Found::File(path) = discover::check_file(&root.join(name), rules) {
            let text = String::from_utf8(super::loader::read_regular(&path).ok()?).ok()?;
            let tree = yaml_tree::parse(&text).ok()?;
            let state_dir = match tree.value.get("state_dir").map(|v| &v.value) {
                None => None,
                Some(Node::String(s)) => Some(s.clone()),
                // Not what pap.yaml allows: the load says so.
                Some(_) => return None,
            };
            let follow_symlinks = tree
                .value
                .get("follow_symlinks")
                .is_some_and(|v| v.value == Node::Bool(true));
            return Some(ConfigFacts {
                follow_symlinks,
                state_dir,
            });
        }
    }
    Some(ConfigFacts {
        follow_symlinks: false,
        state_dir: None,
    })
}

/// This binary, by path, size and modification time: another build is another cache.
fn binary_identity() -> Option<Vec<u8>> {
    use std::os::unix::fs::MetadataExt;
    let exe = std::env::current_exe().ok()?;
    let meta = std::fs::metadata(&exe).ok()?;
    let mut id = exe.as_os_str().as_encoded_bytes().to_vec();
    id.extend(meta.len().to_le_bytes());
    id.extend(meta.mtime().to_le_bytes());
    id.extend(meta.mtime_nsec().to_le_bytes());
    Some(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every fixture project comes back from its cached form as it was compiled: triggers,
    /// agents, config (sinks, routes, servers) and schedules.
    #[test]
    fn a_project_survives_its_cached_form_unchanged() {
        let here = Path::new(env!("CARGO_MANIFEST_DIR"));
        for root in [
            here.to_path_buf(),
            here.join("tests/fixtures/dispatch"),
            here.join("tests/fixtures/notify"),
            here.join("tests/fixtures/serve"),
        ] {
            let loaded = super::super::load(&root, &[]);
            let fresh = loaded
                .project
                .unwrap_or_else(|| panic!("{} loads", root.display()));
            let json = serde_json::to_vec(&fresh).unwrap();
            let cached: Project = serde_json::from_slice(&json).unwrap();
            assert_eq!(
                format!("{:?}", (&cached.config, &cached.triggers, &cached.agents)),
                format!("{:?}", (&fresh.config, &fresh.triggers, &fresh.agents)),
                "{}",
                root.display()
            );
            assert_eq!(
                format!("{:?}", cached.schedules),
                format!("{:?}", fresh.schedules),
                "{}",
                root.display()
            );
            assert_eq!(cached.root, fresh.root);
        }
    }

    #[test]
    fn the_key_follows_the_content_and_the_cache_file_is_checked() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::write(
            root.join("pap.yaml"),
            "pap_version: \"0.2\"\nstate_dir: st\n",
        )
        .unwrap();
        std::fs::create_dir(root.join("agents")).unwrap();
        let agent = "pap_version: \"0.2\"\nagent:\n  id: a\n  risk_level: read_only\n  model:\n    provider: command\n    command: [\"true\"]\n";
        std::fs::write(root.join("agents/a.yaml"), agent).unwrap();
        let first = key(&root, None).unwrap();
        assert_eq!(
            first.path,
            root.join("st").join(FILE),
            "pap.yaml names the state dir"
        );
        assert_eq!(key(&root, None).unwrap().digest, first.digest, "stable");
        // One byte changed, same length: another key.
        std::fs::write(root.join("agents/a.yaml"), agent.replace("id: a", "id: b")).unwrap();
        assert_ne!(key(&root, None).unwrap().digest, first.digest);
        std::fs::write(root.join("agents/a.yaml"), agent).unwrap();
        // A file added: another key.
        std::fs::write(root.join("agents/b.yaml"), agent.replace("id: a", "id: b")).unwrap();
        let two = key(&root, None).unwrap();
        assert_ne!(two.digest, first.digest);

        let project = super::super::load(&root, &[]).project.expect("loads");
        store(&two, &project);
        assert!(!two.path.exists(), "no state dir yet: nothing is created");
        std::fs::create_dir(root.join("st")).unwrap();
        store(&two, &project);
        let back = lookup(&two).expect("cached");
        assert_eq!(back.agents.len(), 2);
        assert!(lookup(&first).is_none(), "another key does not match");
        // A cache others may write is not trusted: it could name any program.
        use std::os::unix::fs::PermissionsExt;
        let mode = |m| std::fs::set_permissions(&two.path, std::fs::Permissions::from_mode(m));
        mode(0o666).unwrap();
        assert!(lookup(&two).is_none(), "writable by others");
        mode(0o644).unwrap();
        assert!(lookup(&two).is_some(), "readable by others is fine");
        // A damaged cache is a miss, never an error.
        let mut bytes = std::fs::read(&two.path).unwrap();
        bytes.truncate(bytes.len() - 10);
        std::fs::write(&two.path, bytes).unwrap();
        assert!(lookup(&two).is_none());
        // `--state` puts it there instead.
        let elsewhere = key(&root, Some(&root.join("other"))).unwrap();
        assert_eq!(elsewhere.path, root.join("other").join(FILE));
        assert_eq!(elsewhere.digest, two.digest);
    }
}
