//! The names in the spool: which entries are event files, a node's directory under
//! `processing/`, the `NAME.N` a file gets beside one of the same name, and which names in
//! `done/` pap wrote (the only ones retention deletes).

use std::io;

use super::held::Held;

pub(crate) fn is_event_file(name: &str) -> bool {
    !name.starts_with('.')
        && !name.ends_with(".tmp")
        && (name.ends_with(".json") || name.ends_with(".ndjson"))
}

/// The directory name of node `id` under `processing/`: the id itself when it is a safe
/// file name, else its hex.
pub(crate) fn node_dir(id: &str) -> String {
    let safe = !id.is_empty()
        && !id.starts_with('.')
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'));
    if safe {
        id.to_owned()
    } else {
        crate::text::hex(id.as_bytes())
    }
}

/// Whether pap could have filed a file of this name: an event file's name, followed by any
/// number of `.N` (a second file of a name, [`free_name`], taken over from another node and
/// filed again).
pub(super) fn pap_wrote(name: &str) -> bool {
    let mut base = name;
    while let Some((head, n)) = base.rsplit_once('.')
        && !n.is_empty()
        && n.bytes().all(|b| b.is_ascii_digit())
    {
        base = head;
    }
    is_event_file(base)
}

/// `name`, or `name.N` for the first free N when `dir` holds that name already (writers may
/// reuse names).
pub(super) fn free_name(dir: &Held, name: &str) -> io::Result<String> {
    if dir.stat(name)?.is_none() {
        return Ok(name.to_owned());
    }
    for n in 1u64.. {
        let candidate = format!("{name}.{n}");
        if dir.stat(&candidate)?.is_none() {
            return Ok(candidate);
        }
    }
    unreachable!("some number is free")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_finished_event_files_are_ready() {
        assert!(is_event_file("a.json"));
        assert!(is_event_file("batch-1.ndjson"));
        assert!(!is_event_file(".a.json"));
        assert!(!is_event_file("a.json.tmp"));
        assert!(!is_event_file("a.txt"));
    }

    #[test]
    fn pap_wrote_event_file_names_and_their_numbered_seconds() {
        for name in [
            "a.json",
            "b.ndjson",
            "a.json.1",
            "a.json.2.13",
            "a.json.error.json",
        ] {
            assert!(pap_wrote(name), "{name}");
        }
        for name in [
            "notes.txt",
            "README",
            ".a.json",
            "a.json.tmp",
            "a.json.",
            "a.json.x1",
            "12",
            ".1",
        ] {
            assert!(!pap_wrote(name), "{name}");
        }
    }
}
