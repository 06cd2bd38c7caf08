//! Rule tests (`pap test`): YAML cases of events at offsets from a start time, each with the
//! outcome expected per trigger, decided by the real pipeline on a throwaway state and a
//! simulated clock. The simulated clock is this module's alone: it is the time handed to
//! each decision, not the process clock, so it exists in release builds without letting
//! anything else move time (see `crate::clock`).

pub mod load;
pub mod raw;
pub mod render;
pub mod run;

use std::path::{Path, PathBuf};

use crate::manifest::discover::{self, Found, Rules};

/// The test files named by `paths` (files, or folders searched for `*.yaml`/`*.yml`), or
/// those under `<root>/rule-tests/` when none are named; sorted, each once. A path refused
/// by discovery (a FIFO, a link out of the project) is an error naming it.
pub fn find(root: &Path, paths: &[PathBuf]) -> Result<Vec<PathBuf>, String> {
    let rules = Rules {
        root,
        follow_outside: false,
    };
    let default = [root.join(load::DEFAULT_DIR)];
    let named = !paths.is_empty();
    let mut files = Vec::new();
    for p in if named { paths } else { &default[..] } {
        let meta = match std::fs::metadata(p) {
            Ok(meta) => meta,
            Err(_) if !named => return Ok(Vec::new()),
            Err(_) => return Err(format!("{}: no such file or directory", p.display())),
        };
        if meta.is_dir() {
            let mut found = Vec::new();
            discover::walk_yaml(p, rules, &mut found);
            for f in found {
                match f {
                    Found::File(path) => files.push(path),
                    Found::Refused { path, why } => {
                        return Err(format!("{}: {why}", path.display()));
                    }
                }
            }
        } else {
            files.push(p.clone());
        }
    }
    files.sort();
    files.dedup();
    Ok(files)
}
