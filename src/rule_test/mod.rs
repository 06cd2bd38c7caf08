//! Rule tests (`pap test`): YAML cases of events at offsets from a start time, each with the
//! outcome expected per trigger, decided by the real pipeline on a throwaway state and a
//! simulated clock. The simulated clock is this module's alone: it is the time handed to
//! each decision, not the process clock, so it exists in release builds without letting
//! anything else move time (see `crate::clock`).

pub(crate) mod load;
pub(crate) mod raw;
pub(crate) mod render;
pub(crate) mod run;

use std::path::{Path, PathBuf};

use crate::manifest::discover::{self, Rules};

/// Test files found, and paths that looked like test files but were refused (a FIFO, a link
/// out of the project), each with why.
#[derive(Debug, Default)]
pub(crate) struct Found {
    pub files: Vec<PathBuf>,
    pub refused: Vec<(PathBuf, String)>,
}

/// The test files named by `paths` (files, or folders searched for `*.yaml`/`*.yml`), or
/// those under `<root>/rule-tests/` when none are named; sorted, each once. A named path
/// that does not exist is an error.
pub(crate) fn find(root: &Path, paths: &[PathBuf]) -> Result<Found, String> {
    let rules = Rules {
        root,
        follow_outside: false,
    };
    let default = [root.join(load::DEFAULT_DIR)];
    let named = !paths.is_empty();
    let mut found = Found::default();
    for p in if named { paths } else { &default[..] } {
        let meta = match std::fs::metadata(p) {
            Ok(meta) => meta,
            Err(_) if !named => return Ok(found),
            Err(_) => return Err(format!("{}: no such file or directory", p.display())),
        };
        if meta.is_dir() {
            let mut walked = Vec::new();
            discover::walk_yaml(p, rules, &mut walked);
            for f in walked {
                match f {
                    discover::Found::File(path) => found.files.push(path),
                    discover::Found::Refused { path, why } => found.refused.push((path, why)),
                }
            }
        } else {
            found.files.push(p.clone());
        }
    }
    // `rule-tests/a.yaml` and `./rule-tests/a.yaml` are one file.
    let mut files: Vec<PathBuf> = found
        .files
        .into_iter()
        .map(|f| f.canonicalize().unwrap_or(f))
        .collect();
    files.sort();
    files.dedup();
    found.files = files;
    Ok(found)
}
