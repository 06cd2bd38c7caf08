//! Webhook bodies read from files for `pap adapt` and `pap dispatch --adapter`: each body read
//! whole, bounded as serve bounds a posted one (`listen.max_body_bytes`).

use std::io::Read;

use crate::event::input::Source;

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
