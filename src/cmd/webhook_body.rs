//! Webhook bodies read from files for `pap adapt` and `pap dispatch --adapter`: the adapter
//! named on the command line, and each body read whole, bounded as serve bounds a posted one
//! (`listen.max_body_bytes`).

use std::io::Read;

use anyhow::bail;

use crate::adapter::Adapter;
use crate::event::input::Source;
use crate::manifest::Project;

/// The adapter `name` of the project: a built-in preset or one under `adapters:`.
pub(super) fn adapter<'p>(project: &'p Project, name: &str) -> anyhow::Result<&'p Adapter> {
    let adapters = &project.config.adapters;
    if let Some(found) = adapters.iter().find(|a| a.name == name) {
        return Ok(found);
    }
    let known: Vec<&str> = adapters.iter().map(|a| a.name.as_str()).collect();
    bail!(
        "no adapter `{name}` (this project has {}; declare others under `adapters:` in pap.yaml)",
        known.join(", ")
    )
}

/// The whole body in `source`, refused past `max_bytes` (as serve answers 413).
pub(super) fn read(source: &Source, max_bytes: u64) -> std::io::Result<Vec<u8>> {
    let reader: Box<dyn Read> = match source {
        Source::Stdin => Box::new(std::io::stdin().lock()),
        Source::File(path) => Box::new(std::fs::File::open(path)?),
    };
    let mut body = Vec::new();
    reader
        .take(max_bytes.saturating_add(1))
        .read_to_end(&mut body)?;
    if body.len() as u64 > max_bytes {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!(
                "the body is larger than {max_bytes} bytes (listen.max_body_bytes), as serve \
                 would refuse it"
            ),
        ));
    }
    Ok(body)
}
