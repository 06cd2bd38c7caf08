//! Reading events from files and stdin: one JSON object, a JSON array of objects, or NDJSON.
//!
//! The format is chosen per input by its first bytes: `[` starts an array; otherwise every
//! line is one event (NDJSON), unless the first line is an incomplete JSON value, which means
//! a pretty-printed document (one or more whole objects). In NDJSON a bad line is reported
//! with its number and the lines around it still count; a line longer than the event size
//! limit is skipped without being held in memory. Arrays and documents are read value by
//! value (`json_stream`) under the same bound: an element that is too large or not valid
//! JSON is reported on its own, and a break between values ends the input there, the values
//! before it having been handed on already.

use std::fmt;
use std::io::{self, BufRead, BufReader, Read};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::Value;

use super::json_stream::{self, Piece, Position, Splitter};
use super::strict::Strict;
use super::{Event, Invalid, Origin, encoded_len, validate};

#[derive(Debug, Clone)]
pub enum Source {
    Stdin,
    File(PathBuf),
}

impl Source {
    pub fn parse(arg: &std::path::Path) -> Source {
        if arg.as_os_str() == "-" {
            Source::Stdin
        } else {
            Source::File(arg.to_path_buf())
        }
    }

    pub fn name(&self) -> String {
        match self {
            Source::Stdin => "-".into(),
            Source::File(p) => p.display().to_string(),
        }
    }

    /// The size in bytes when known in advance (for a progress bar).
    pub fn size(&self) -> Option<u64> {
        match self {
            Source::Stdin => None,
            Source::File(p) => std::fs::metadata(p).ok().map(|m| m.len()),
        }
    }
}

/// Where an event came from: `file:LINE` in NDJSON, `file[INDEX]` in an array.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    pub source: Arc<str>,
    pub line: Option<u64>,
    pub index: Option<usize>,
}

impl Location {
    /// Where an event an invocation emitted "comes from".
    pub fn emitted() -> Location {
        Location {
            source: "emitted".into(),
            line: None,
            index: None,
        }
    }

    /// Whether this is [`Location::emitted`].
    pub(crate) fn is_emitted(&self) -> bool {
        self.line.is_none() && self.index.is_none() && &*self.source == "emitted"
    }
}

/// Written as its text (`file:LINE`); formatted only when printed, not per event read.
impl serde::Serialize for Location {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.source)?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
        }
        if let Some(index) = self.index {
            write!(f, "[{index}]")?;
        }
        Ok(())
    }
}

#[derive(Debug)]
pub struct Item {
    pub loc: Location,
    pub event: Result<Event, Invalid>,
}

/// Where [`read`] hands what it finds. A closure taking an [`Item`] is a sink.
pub trait Sink {
    fn item(&mut self, item: Item);

    /// Everything read so far has been handed over, and reading on may wait for the writer
    /// (a pipe that trickles): a sink that batches items passes its batch on now.
    fn caught_up(&mut self) {}
}

impl<F: FnMut(Item)> Sink for F {
    fn item(&mut self, item: Item) {
        self(item)
    }
}

/// Reads one input to its end, handing each event (valid or not) to `sink` in order.
/// An `Err` means the input itself could not be read (then no more items come from it).
/// `consumed` counts bytes read, for progress.
pub fn read(
    source: &Source,
    max_bytes: u64,
    consumed: &AtomicU64,
    sink: &mut dyn Sink,
) -> io::Result<()> {
    let name: Arc<str> = source.name().into();
    let reader: Box<dyn Read> = match source {
        Source::Stdin => Box::new(io::stdin().lock()),
        Source::File(path) => Box::new(std::fs::File::open(path)?),
    };
    read_from(reader, name, max_bytes, consumed, sink)
}

/// [`read`] of any reader (`name` names it in locations): what the fuzz targets feed bytes to.
pub fn read_from(
    reader: impl Read,
    name: Arc<str>,
    max_bytes: u64,
    consumed: &AtomicU64,
    sink: &mut dyn Sink,
) -> io::Result<()> {
    let mut reader = BufReader::with_capacity(256 * 1024, reader);
    let first = loop {
        let buf = reader.fill_buf()?;
        match buf.iter().position(|b| !b.is_ascii_whitespace()) {
            Some(i) => break Some(buf[i]),
            None if buf.is_empty() => break None,
            None => {
                let n = buf.len();
                consumed.fetch_add(n as u64, Ordering::Relaxed);
                reader.consume(n);
            }
        }
    };
    match first {
        None => Ok(()),
        Some(b'[') => read_array(reader, name, max_bytes, consumed, sink),
        Some(_) => read_lines(reader, name, max_bytes, consumed, sink),
    }
}

/// The cap on what is held of one value: a little slack over the limit so the size error can
/// give the real figure for values just over it (and pretty-printing's indentation fits);
/// longer values are skipped unread.
fn held_cap(max_bytes: u64) -> usize {
    max_bytes.saturating_mul(2).max(4096) as usize
}

fn read_array(
    reader: BufReader<impl Read>,
    name: Arc<str>,
    max_bytes: u64,
    consumed: &AtomicU64,
    sink: &mut dyn Sink,
) -> io::Result<()> {
    let splitter = Splitter::array(reader, held_cap(max_bytes));
    read_values(splitter, name, max_bytes, consumed, sink, &|value, len| {
        validate(value, len, max_bytes, Origin::Outside)
    })
}

/// The elements of a JSON array, each made an event by `make` (given the value and its
/// encoded size) and handed to `sink` as `NAME[INDEX]`, read as [`read_from`] reads an array:
/// one element at a time, an element larger than twice `max_bytes` skipped unread.
pub fn read_array_of(
    reader: impl Read,
    name: Arc<str>,
    max_bytes: u64,
    sink: &mut dyn Sink,
    make: &dyn Fn(Value, usize) -> Result<Event, Invalid>,
) -> io::Result<()> {
    let splitter = Splitter::array(BufReader::new(reader), held_cap(max_bytes));
    read_values(splitter, name, max_bytes, &AtomicU64::new(0), sink, make)
}

/// Hands each value the splitter finds to `sink`: an array's as `NAME[INDEX]`, a document's
/// as `NAME:LINE`. A value that is not valid JSON, or too large, is reported and the walk goes
/// on; a break in the text between values ends it, reported with its line and column.
fn read_values(
    mut splitter: Splitter<impl Read>,
    name: Arc<str>,
    max_bytes: u64,
    consumed: &AtomicU64,
    sink: &mut dyn Sink,
    make: &dyn Fn(Value, usize) -> Result<Event, Invalid>,
) -> io::Result<()> {
    let array = splitter.is_array();
    let loc = |at: Position| Location {
        source: name.clone(),
        line: (!array).then_some(at.line),
        index: array.then_some(at.index),
    };
    loop {
        let Some(piece) = splitter.next(consumed, &mut || sink.caught_up())? else {
            return Ok(());
        };
        let item = match piece {
            Piece::Value { bytes, at } => Item {
                loc: loc(at),
                event: match serde_json::from_slice::<Strict>(bytes) {
                    Ok(Strict(value)) => {
                        let len = encoded_len(&value);
                        make(value, len)
                    }
                    Err(err) => {
                        // The error's place within the value, made the place in the input.
                        let line = at.line + err.line().saturating_sub(1) as u64;
                        let column = match err.line() {
                            1 => at.column + err.column().saturating_sub(1) as u64,
                            _ => err.column() as u64,
                        };
                        Err(Invalid::new(format!(
                            "not valid JSON: {} at line {line} column {column}",
                            without_position(&err)
                        )))
                    }
                },
            },
            Piece::TooLong { size, at } => Item {
                loc: loc(at),
                event: Err(Invalid::new(format!(
                    "the value is {size} bytes as written, more than twice the {max_bytes} an \
                     event may have (max_event_bytes); it was skipped without being held in memory"
                ))),
            },
            Piece::Broken { reason, at } => Item {
                loc: Location {
                    source: name.clone(),
                    line: Some(at.line),
                    index: None,
                },
                event: Err(Invalid::new(format!(
                    "not valid JSON: {reason} at line {} column {} (the rest of this input was \
                     not read; what came before it was)",
                    at.line, at.column
                ))),
            },
        };
        sink.item(item);
    }
}

fn read_lines(
    mut reader: BufReader<impl Read>,
    name: Arc<str>,
    max_bytes: u64,
    consumed: &AtomicU64,
    sink: &mut dyn Sink,
) -> io::Result<()> {
    let cap = held_cap(max_bytes);
    let mut line = Vec::with_capacity(4096);
    let mut number = 0u64;
    let mut seen_event = false;
    loop {
        line.clear();
        let (read, whole) = read_line_capped(&mut reader, &mut line, cap, sink)?;
        if read == 0 {
            return Ok(());
        }
        consumed.fetch_add(read as u64, Ordering::Relaxed);
        number += 1;
        let loc = Location {
            source: name.clone(),
            line: Some(number),
            index: None,
        };
        if !whole {
            sink.item(Item {
                loc,
                event: Err(Invalid::new(format!(
                    "line is {read} bytes, more than the {max_bytes} an event may have (max_event_bytes)"
                ))),
            });
            seen_event = true;
            continue;
        }
        let text = line.trim_ascii();
        if text.is_empty() {
            continue;
        }
        match serde_json::from_slice::<Strict>(text) {
            Ok(Strict(value)) => sink.item(Item {
                loc,
                event: validate(value, text.len(), max_bytes, Origin::Outside),
            }),
            Err(err) if err.is_eof() && !seen_event => {
                // A pretty-printed document: its first line is not a whole value.
                let first = std::mem::take(&mut line);
                let splitter = Splitter::documents(first, reader, cap, number);
                return read_values(splitter, name, max_bytes, consumed, sink, &|value, len| {
                    validate(value, len, max_bytes, Origin::Outside)
                });
            }
            Err(err) => sink.item(Item {
                loc,
                event: Err(Invalid::new(format!(
                    "not valid JSON: {}",
                    without_position(&err)
                ))),
            }),
        }
        seen_event = true;
    }
}

/// Reads through the next `\n` (included in the count), storing at most `cap` bytes.
/// Returns (bytes read, whether the whole line fit).
/// Before any read that may wait for the writer, `sink` is told it has everything so far.
fn read_line_capped(
    reader: &mut BufReader<impl Read>,
    out: &mut Vec<u8>,
    cap: usize,
    sink: &mut dyn Sink,
) -> io::Result<(usize, bool)> {
    let mut read = 0;
    let mut whole = true;
    loop {
        if reader.buffer().is_empty() {
            sink.caught_up();
        }
        let buf = match reader.fill_buf() {
            Ok(buf) => buf,
            Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
            Err(err) => return Err(err),
        };
        if buf.is_empty() {
            return Ok((read, whole));
        }
        let (chunk, done) = match buf.iter().position(|b| *b == b'\n') {
            Some(i) => (&buf[..=i], true),
            None => (buf, false),
        };
        whole = whole && json_stream::hold(out, chunk, cap);
        let n = chunk.len();
        read += n;
        reader.consume(n);
        if done {
            return Ok((read, whole));
        }
    }
}

/// serde_json appends " at line L column C"; within one NDJSON line that is noise.
fn without_position(err: &serde_json::Error) -> String {
    let text = err.to_string();
    match text.rfind(" at line ") {
        Some(i) => text[..i].to_owned(),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn items_of(text: &str) -> Vec<(String, Result<String, String>)> {
        let mut file = tempfile::NamedTempFile::new().unwrap();
        file.write_all(text.as_bytes()).unwrap();
        let source = Source::File(file.path().to_path_buf());
        let prefix = source.name();
        let mut out = Vec::new();
        read(&source, 2048, &AtomicU64::new(0), &mut |item: Item| {
            out.push((
                item.loc.to_string().replacen(&prefix, "f", 1),
                item.event.map(|e| e.id).map_err(|e| e.reason),
            ))
        })
        .unwrap();
        out
    }

    fn ev(id: &str) -> String {
        format!(
            r#"{{"pap_version":"0.2","id":"{id}","type":"a.b.c","source":"s","time":"2026-01-01T00:00:00Z","data":{{}}}}"#
        )
    }

    #[test]
    fn ndjson_bad_line_keeps_neighbours() {
        let text = format!("{}\n\n{{oops\n{}\n", ev("e1"), ev("e3"));
        let items = items_of(&text);
        assert_eq!(items.len(), 3);
        assert_eq!(items[0], ("f:1".into(), Ok("e1".into())));
        assert_eq!(items[1].0, "f:3");
        assert!(
            items[1]
                .1
                .as_ref()
                .unwrap_err()
                .starts_with("not valid JSON")
        );
        assert_eq!(items[2], ("f:4".into(), Ok("e3".into())));
    }

    #[test]
    fn array_elements_have_indexes() {
        let items = items_of(&format!("[{}, 7]", ev("e1")));
        assert_eq!(items[0], ("f[0]".into(), Ok("e1".into())));
        assert_eq!(items[1].0, "f[1]");
        assert!(items[1].1.as_ref().unwrap_err().contains("found a number"));
    }

    #[test]
    fn pretty_printed_documents() {
        let pretty =
            serde_json::to_string_pretty(&serde_json::from_str::<Value>(&ev("e1")).unwrap())
                .unwrap();
        let items = items_of(&format!("\n{pretty}\n{pretty}"));
        assert_eq!(items.len(), 2);
        assert_eq!(items[0], ("f:2".into(), Ok("e1".into())));
        assert_eq!(items[1].0, format!("f:{}", 2 + pretty.lines().count()));
    }

    #[test]
    fn overlong_line_is_skipped_not_held() {
        let long = format!(r#"{{"x":"{}"}}"#, "a".repeat(10_000));
        let items = items_of(&format!("{long}\n{}\n", ev("e2")));
        assert!(
            items[0]
                .1
                .as_ref()
                .unwrap_err()
                .contains("more than the 2048")
        );
        assert_eq!(items[1], ("f:2".into(), Ok("e2".into())));
    }

    #[test]
    fn an_array_is_read_element_by_element() {
        let big = format!(r#"{{"x":"{}"}}"#, "a".repeat(10_000));
        let text = format!(
            "[\n  {},\n  {big},\n  {{\"a\": tru}},\n  {}\n  {}\n]",
            ev("e1"),
            ev("e2"),
            ev("e3")
        );
        let items = items_of(&text);
        assert_eq!(items.len(), 5, "{items:?}");
        assert_eq!(items[0], ("f[0]".into(), Ok("e1".into())));
        // Too large: skipped unread, named by its index, with its size.
        assert_eq!(items[1].0, "f[1]");
        let too_long = items[1].1.as_ref().unwrap_err();
        assert!(too_long.contains("10008 bytes as written"), "{too_long}");
        // Not valid JSON inside: only this element, placed in the input.
        assert_eq!(items[2].0, "f[2]");
        let bad = items[2].1.as_ref().unwrap_err();
        assert!(bad.contains("at line 4 column"), "{bad}");
        assert_eq!(items[3], ("f[3]".into(), Ok("e2".into())));
        // A missing comma cannot be stepped over: the rest is not read, the rest before was.
        assert_eq!(items[4].0, "f:6");
        let broken = items[4].1.as_ref().unwrap_err();
        assert!(
            broken.starts_with("not valid JSON: expected `,` or `]` after element 3, found `{` at line 6 column 3 (the rest of this input was not read"),
            "{broken}"
        );
    }

    #[test]
    fn pretty_printed_documents_with_a_bad_one_in_between() {
        let pretty =
            serde_json::to_string_pretty(&serde_json::from_str::<Value>(&ev("e1")).unwrap())
                .unwrap();
        let items = items_of(&format!("{pretty}\n{{\n  \"a\" 1\n}}\n{pretty}\n"));
        assert_eq!(items.len(), 3, "{items:?}");
        let n = pretty.lines().count();
        assert_eq!(items[0], ("f:1".into(), Ok("e1".into())));
        assert_eq!(items[1].0, format!("f:{}", n + 1));
        assert_eq!(items[2], (format!("f:{}", n + 4), Ok("e1".into())));
    }

    #[test]
    fn empty_input_has_no_events() {
        assert!(items_of(" \n\n").is_empty());
    }
}
