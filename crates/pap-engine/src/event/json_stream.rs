//! Splits a stream of JSON text into its values without ever holding more than one of them:
//! the elements of an array (`[a, b, …]`), or whitespace-separated documents (`a b …`, each
//! usually pretty-printed over many lines).
//!
//! Parsing a whole array at once costs memory in proportion to the whole input, whatever the
//! event size limit says (a 100 MB element cost over 400 MB). Here the bytes are walked with
//! only string, escape and nesting state, which is enough to find where a value ends; a value
//! is kept only while it fits the cap, and one that does not is counted to its end and
//! skipped. The caller parses each value on its own, so a value that is not valid JSON
//! inside costs only itself. What cannot be stepped over (a missing `,`, a bracket closing
//! the wrong kind, the input ending inside a value) stops the walk: it is reported with its
//! line and column, and nothing after it is read.

use std::io::{self, BufRead, BufReader, Read};
use std::sync::atomic::{AtomicU64, Ordering};

/// How deep the walk checks that each bracket closes its own kind; deeper levels are only
/// counted (the JSON parser refuses a value nested past 128 levels anyway, so such a value is
/// reported by the parse, and this bound keeps the walk's own state small).
const CHECKED_DEPTH: usize = 256;

/// Up to this size a value's buffer grows as it needs; past it, it takes the whole cap.
const GROW_FREELY: usize = 64 * 1024;

/// Where something is: the value's ordinal (an array's index, or the document's number from
/// 0), and its line and byte column (both from 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Position {
    pub index: usize,
    pub line: u64,
    pub column: u64,
}

/// What the walk found next.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Piece<'a> {
    /// One whole value as written, starting at `at`.
    Value { bytes: &'a [u8], at: Position },
    /// A value longer than the cap: `size` bytes as written, none of them kept.
    TooLong { size: u64, at: Position },
    /// The text is broken where no value can be stepped over: the walk ends here.
    Broken { reason: String, at: Position },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Before an array's `[`.
    Open,
    /// After `[`: a value or `]`.
    First,
    /// After `,`: a value.
    Next,
    /// After an element: `,` or `]`.
    After,
    /// After `]`: only whitespace.
    Closed,
    /// Documents: whitespace or a value.
    Between,
    /// Ended (broken): nothing more.
    Done,
}

/// The walk over one input. See the module's documentation.
pub(crate) struct Splitter<R: Read> {
    source: Source<R>,
    array: bool,
    cap: usize,
    state: State,
    held: Vec<u8>,
    index: usize,
    at: Tracker,
}

impl<R: Read> Splitter<R> {
    /// The elements of the array `reader` holds, keeping at most `cap` bytes of one.
    pub(crate) fn array(reader: BufReader<R>, cap: usize) -> Splitter<R> {
        Splitter::new(Vec::new(), reader, cap, 1, State::Open)
    }

    /// The documents in `prefix` (already read, starting at line `first_line`) followed by
    /// the rest of `reader`.
    pub(crate) fn documents(
        prefix: Vec<u8>,
        reader: BufReader<R>,
        cap: usize,
        first_line: u64,
    ) -> Splitter<R> {
        Splitter::new(prefix, reader, cap, first_line, State::Between)
    }

    fn new(
        prefix: Vec<u8>,
        reader: BufReader<R>,
        cap: usize,
        first_line: u64,
        state: State,
    ) -> Splitter<R> {
        Splitter {
            source: Source {
                prefix,
                at: 0,
                reader,
            },
            array: state == State::Open,
            cap,
            state,
            held: Vec::new(),
            index: 0,
            at: Tracker {
                line: first_line,
                column: 0,
            },
        }
    }

    /// Whether this walks an array's elements (rather than documents).
    pub(crate) fn is_array(&self) -> bool {
        self.array
    }

    /// The next value (or why the walk ends); `None` at the end of the input. Bytes taken from
    /// the reader are added to `consumed`; `caught_up` is called before any read that may wait
    /// for the writer (a pipe that trickles), so what was found so far can be passed on.
    pub(crate) fn next(
        &mut self,
        consumed: &AtomicU64,
        caught_up: &mut dyn FnMut(),
    ) -> io::Result<Option<Piece<'_>>> {
        loop {
            if self.state == State::Done {
                return Ok(None);
            }
            let Some(b) = self.skip_whitespace(consumed, caught_up)? else {
                return Ok(match self.state {
                    State::Open | State::Between | State::Closed => None,
                    _ => Some(self.broken("the input ends before the array's closing `]`")),
                });
            };
            match (self.state, b) {
                (State::Open, b'[') => {
                    self.step(consumed);
                    self.state = State::First;
                }
                (State::Open, _) => return Ok(Some(self.broken("expected `[`"))),
                (State::First | State::After, b']') => {
                    self.step(consumed);
                    self.state = State::Closed;
                }
                (State::After, b',') => {
                    self.step(consumed);
                    self.state = State::Next;
                }
                (State::After, _) => {
                    let reason = format!(
                        "expected `,` or `]` after element {}, found {}",
                        self.index - 1,
                        shown(b)
                    );
                    return Ok(Some(self.broken(&reason)));
                }
                (State::Closed, _) => {
                    let reason = format!("found {} after the array's closing `]`", shown(b));
                    return Ok(Some(self.broken(&reason)));
                }
                (State::First | State::Next | State::Between, b',' | b']' | b'}' | b':') => {
                    let reason = format!("expected a value, found {}", shown(b));
                    return Ok(Some(self.broken(&reason)));
                }
                (State::First | State::Next | State::Between, _) => {
                    self.state = match self.state {
                        State::Between => State::Between,
                        _ => State::After,
                    };
                    return self.value(consumed, caught_up).map(Some);
                }
                (State::Done, _) => unreachable!("returned above"),
            }
        }
    }

    /// Reads one value, from its first byte (not yet consumed) to its end.
    fn value(
        &mut self,
        consumed: &AtomicU64,
        caught_up: &mut dyn FnMut(),
    ) -> io::Result<Piece<'_>> {
        let at = self.position();
        self.index += 1;
        self.held.clear();
        let mut walk = Walk::default();
        let mut size = 0u64;
        let mut fits = true;
        loop {
            let chunk = self.source.fill(caught_up)?;
            if chunk.is_empty() {
                if walk.is_scalar() {
                    break;
                }
                let reason = format!(
                    "the input ends inside element {}, which began at line {} column {}",
                    at.index, at.line, at.column
                );
                return Ok(self.broken(&reason));
            }
            let (n, end) = match walk.feed(chunk) {
                Ok(found) => found,
                Err((n, reason)) => {
                    self.at.advance(&chunk[..n]);
                    self.source.consume(n, consumed);
                    return Ok(self.broken(&reason));
                }
            };
            fits = fits && hold(&mut self.held, &chunk[..n], self.cap);
            self.at.advance(&chunk[..n]);
            self.source.consume(n, consumed);
            size += n as u64;
            if end {
                break;
            }
        }
        Ok(if fits {
            Piece::Value {
                bytes: &self.held,
                at,
            }
        } else {
            Piece::TooLong { size, at }
        })
    }

    /// The first byte after any JSON whitespace (not consumed), or `None` at the end.
    fn skip_whitespace(
        &mut self,
        consumed: &AtomicU64,
        caught_up: &mut dyn FnMut(),
    ) -> io::Result<Option<u8>> {
        loop {
            let chunk = self.source.fill(caught_up)?;
            if chunk.is_empty() {
                return Ok(None);
            }
            let blank = chunk.iter().take_while(|b| is_whitespace(**b)).count();
            self.at.advance(&chunk[..blank]);
            let next = chunk.get(blank).copied();
            self.source.consume(blank, consumed);
            if next.is_some() {
                return Ok(next);
            }
        }
    }

    /// Consumes the one (structural, non-newline) byte just looked at.
    fn step(&mut self, consumed: &AtomicU64) {
        self.at.column += 1;
        self.source.consume(1, consumed);
    }

    fn position(&self) -> Position {
        Position {
            index: self.index,
            line: self.at.line,
            column: self.at.column + 1,
        }
    }

    fn broken(&mut self, reason: &str) -> Piece<'static> {
        self.state = State::Done;
        self.held = Vec::new();
        Piece::Broken {
            reason: reason.to_owned(),
            at: self.position(),
        }
    }
}

/// Where the bytes come from: what was read before the walk began, then the reader.
struct Source<R: Read> {
    prefix: Vec<u8>,
    at: usize,
    reader: BufReader<R>,
}

impl<R: Read> Source<R> {
    /// The bytes available now (empty at the end of the input).
    fn fill(&mut self, caught_up: &mut dyn FnMut()) -> io::Result<&[u8]> {
        if self.at < self.prefix.len() {
            return Ok(&self.prefix[self.at..]);
        }
        loop {
            if self.reader.buffer().is_empty() {
                caught_up();
            }
            match self.reader.fill_buf() {
                Ok(_) => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
        Ok(self.reader.buffer())
    }

    fn consume(&mut self, n: usize, consumed: &AtomicU64) {
        if self.at < self.prefix.len() {
            // `fill` handed out only the prefix: `n` is within it.
            self.at += n;
            if self.at == self.prefix.len() {
                self.prefix = Vec::new();
                self.at = 0;
            }
        } else {
            self.reader.consume(n);
            consumed.fetch_add(n as u64, Ordering::Relaxed);
        }
    }
}

/// Line and column of the next byte.
struct Tracker {
    line: u64,
    /// Bytes since the line began.
    column: u64,
}

impl Tracker {
    fn advance(&mut self, span: &[u8]) {
        match memchr::memrchr(b'\n', span) {
            Some(last) => {
                self.line += memchr::memchr_iter(b'\n', span).count() as u64;
                self.column = (span.len() - last - 1) as u64;
            }
            None => self.column += span.len() as u64,
        }
    }
}

/// The state of the walk through one value, kept across chunks.
#[derive(Default)]
struct Walk {
    /// Bytes of the value walked so far.
    seen: u64,
    /// The value is a number, `true`, `false`, `null` or some other bare word.
    scalar: bool,
    in_string: bool,
    escaped: bool,
    depth: usize,
    /// The open brackets, innermost last, down to `CHECKED_DEPTH`.
    open: Vec<u8>,
}

impl Walk {
    fn is_scalar(&self) -> bool {
        self.scalar
    }

    /// How many bytes of `chunk` belong to the value, and whether it ends there; or where
    /// (and why) the text is broken.
    fn feed(&mut self, chunk: &[u8]) -> Result<(usize, bool), (usize, String)> {
        if self.seen == 0 {
            self.scalar = !matches!(chunk[0], b'"' | b'{' | b'[');
        }
        let found = if self.scalar {
            self.feed_scalar(chunk)
        } else {
            self.feed_nested(chunk)
        };
        if let Ok((n, _)) = found {
            self.seen += n as u64;
        }
        found
    }

    /// A bare word ends before the next whitespace or structural byte (its first byte is
    /// always its own, so the walk moves on).
    fn feed_scalar(&mut self, chunk: &[u8]) -> Result<(usize, bool), (usize, String)> {
        let from = usize::from(self.seen == 0);
        match chunk[from..].iter().position(|b| {
            is_whitespace(*b) || matches!(b, b',' | b']' | b'}' | b'[' | b'{' | b'"' | b':')
        }) {
            Some(i) => Ok((from + i, true)),
            None => Ok((chunk.len(), false)),
        }
    }

    fn feed_nested(&mut self, chunk: &[u8]) -> Result<(usize, bool), (usize, String)> {
        let mut i = 0;
        while i < chunk.len() {
            if self.in_string {
                if self.escaped {
                    self.escaped = false;
                    i += 1;
                    continue;
                }
                // Most of a large value is string content: jump to what can end it.
                match memchr::memchr2(b'"', b'\\', &chunk[i..]) {
                    None => return Ok((chunk.len(), false)),
                    Some(j) => {
                        i += j;
                        if chunk[i] == b'\\' {
                            self.escaped = true;
                        } else {
                            self.in_string = false;
                            if self.depth == 0 {
                                return Ok((i + 1, true));
                            }
                        }
                        i += 1;
                        continue;
                    }
                }
            }
            match chunk[i] {
                b'"' => self.in_string = true,
                open @ (b'{' | b'[') => {
                    self.depth += 1;
                    if self.open.len() < CHECKED_DEPTH {
                        self.open.push(open);
                    }
                }
                close @ (b'}' | b']') => {
                    if self.depth <= CHECKED_DEPTH {
                        let expected = match self.open.pop() {
                            Some(b'{') => b'}',
                            _ => b']',
                        };
                        if close != expected {
                            return Err((
                                i,
                                format!(
                                    "`{}` closes a `{}`",
                                    close as char,
                                    if expected == b'}' { '{' } else { '[' }
                                ),
                            ));
                        }
                    }
                    self.depth -= 1;
                    if self.depth == 0 {
                        return Ok((i + 1, true));
                    }
                }
                _ => {}
            }
            i += 1;
        }
        Ok((chunk.len(), false))
    }
}

/// Appends `bytes` to `held` if the whole stays within `cap` bytes; else empties `held` (its
/// room kept for the next value) and returns false.
pub(crate) fn hold(held: &mut Vec<u8>, bytes: &[u8], cap: usize) -> bool {
    let wanted = held.len() + bytes.len();
    if wanted > cap {
        held.clear();
        return false;
    }
    if wanted > held.capacity() && wanted > GROW_FREELY {
        // Room for the largest value at once: growing by doubling would leave every smaller
        // buffer behind in the allocator, several times the cap in all, while room reserved
        // and not written costs no memory.
        held.reserve_exact(cap - held.len());
    }
    held.extend_from_slice(bytes);
    true
}

/// JSON's whitespace (RFC 8259): space, tab, line feed, carriage return.
fn is_whitespace(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

/// A byte for an error message.
fn shown(b: u8) -> String {
    if b.is_ascii_graphic() {
        format!("`{}`", b as char)
    } else {
        format!("byte 0x{b:02x}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every piece of `text` walked as `shape`, with `cap`, fed in `chunk`-byte reads.
    fn pieces(text: &str, cap: usize, array: bool, chunk: usize) -> Vec<String> {
        let reader = BufReader::with_capacity(chunk, text.as_bytes());
        let mut s = if array {
            Splitter::array(reader, cap)
        } else {
            Splitter::documents(Vec::new(), reader, cap, 1)
        };
        let consumed = AtomicU64::new(0);
        let mut out = Vec::new();
        while let Some(p) = s.next(&consumed, &mut || {}).unwrap() {
            out.push(match p {
                Piece::Value { bytes, at } => format!(
                    "{}@{}:{}={}",
                    at.index,
                    at.line,
                    at.column,
                    String::from_utf8_lossy(bytes)
                ),
                Piece::TooLong { size, at } => {
                    format!("{}@{}:{} too long {size}", at.index, at.line, at.column)
                }
                Piece::Broken { reason, at } => {
                    format!("broken@{}:{} {reason}", at.line, at.column)
                }
            });
        }
        if !out.last().is_some_and(|l| l.starts_with("broken")) {
            assert_eq!(consumed.into_inner(), text.len() as u64, "{text:?}");
        }
        out
    }

    /// The same pieces whatever the read size: 1 byte at a time, 3, and all at once.
    fn walk(text: &str, cap: usize, array: bool) -> Vec<String> {
        let whole = pieces(text, cap, array, 1 << 16);
        for chunk in [1, 3] {
            assert_eq!(pieces(text, cap, array, chunk), whole, "chunk {chunk}");
        }
        whole
    }

    fn array(text: &str) -> Vec<String> {
        walk(text, 1 << 10, true)
    }

    #[test]
    fn strings_hold_brackets_commas_and_escaped_quotes() {
        let got = array(r#"[{"a":"]},[{\"x\\"}, "q\"]", 7 ,{"b":[1,{"c":"}"}]}]"#);
        assert_eq!(
            got,
            [
                r#"0@1:2={"a":"]},[{\"x\\"}"#,
                r#"1@1:22="q\"]""#,
                "2@1:30=7",
                r#"3@1:33={"b":[1,{"c":"}"}]}"#,
            ]
        );
    }

    #[test]
    fn nested_arrays_are_one_element() {
        assert_eq!(
            array("[[1,[2,[3]]],[]]"),
            ["0@1:2=[1,[2,[3]]]", "1@1:14=[]"]
        );
        assert!(array("[]").is_empty());
        assert!(array("  [ \n ] \n").is_empty());
    }

    #[test]
    fn whitespace_and_crlf_between_and_inside() {
        let got = array("[\r\n  {\r\n    \"a\": 1\r\n  },\r\n\t2\r\n]\r\n");
        assert_eq!(got, ["0@2:3={\r\n    \"a\": 1\r\n  }", "1@5:2=2"]);
    }

    #[test]
    fn documents_one_after_another() {
        let text = "{\n  \"a\": [1, 2]\n}\n{\"b\": \"}\"}{\"c\":0}\n  7 true\n";
        assert_eq!(
            walk(text, 1 << 10, false),
            [
                "0@1:1={\n  \"a\": [1, 2]\n}",
                "1@4:1={\"b\": \"}\"}",
                "2@4:11={\"c\":0}",
                "3@5:3=7",
                "4@5:5=true",
            ]
        );
    }

    #[test]
    fn a_document_prefix_then_the_reader() {
        let reader = BufReader::with_capacity(2, &b" \"x\": 1\n}\n{}"[..]);
        let mut s = Splitter::documents(b"\n{\n".to_vec(), reader, 100, 4);
        let consumed = AtomicU64::new(0);
        let Some(Piece::Value { bytes, at }) = s.next(&consumed, &mut || {}).unwrap() else {
            panic!()
        };
        assert_eq!((bytes, at.line), (&b"{\n \"x\": 1\n}"[..], 5));
        assert!(matches!(
            s.next(&consumed, &mut || {}).unwrap(),
            Some(Piece::Value {
                at: Position { line: 8, .. },
                ..
            })
        ));
        assert_eq!(s.next(&consumed, &mut || {}).unwrap(), None);
        // Only what came from the reader counts as consumed here.
        assert_eq!(consumed.into_inner(), 12);
    }

    #[test]
    fn truncated_input_is_broken_where_it_ends() {
        assert_eq!(
            array("[{\"a\": 1}, {\"b\": \"x"),
            [
                "0@1:2={\"a\": 1}",
                "broken@1:20 the input ends inside element 1, which began at line 1 column 12"
            ]
        );
        assert_eq!(
            array("[1,\n2"),
            [
                "0@1:2=1",
                "1@2:1=2",
                "broken@2:2 the input ends before the array's closing `]`"
            ]
        );
        assert_eq!(
            walk("{\"a\":\n[1\n", 100, false),
            ["broken@3:1 the input ends inside element 0, which began at line 1 column 1"]
        );
    }

    #[test]
    fn separators_are_checked() {
        assert_eq!(
            array("[{} {}]"),
            [
                "0@1:2={}",
                "broken@1:5 expected `,` or `]` after element 0, found `{`"
            ]
        );
        assert_eq!(
            array("[1,]"),
            ["0@1:2=1", "broken@1:4 expected a value, found `]`"]
        );
        assert_eq!(array("[,1]"), ["broken@1:2 expected a value, found `,`"]);
        assert_eq!(
            array("[1] x"),
            [
                "0@1:2=1",
                "broken@1:5 found `x` after the array's closing `]`"
            ]
        );
        assert_eq!(array("[{\"a\": [1}]"), ["broken@1:10 `}` closes a `[`"]);
        assert_eq!(
            walk("{} ] {}", 100, false),
            ["0@1:1={}", "broken@1:4 expected a value, found `]`"]
        );
    }

    #[test]
    fn deep_nesting_is_walked_without_holding_more_than_the_depth_bound() {
        let deep = format!("[{}{}, 1]", "[".repeat(100_000), "]".repeat(100_000));
        let got = walk(&deep, 1 << 20, true);
        assert_eq!(got.len(), 2);
        assert_eq!(got[1], "1@1:200004=1");
        // Mismatches below the checked depth are still found.
        let bad = format!("[{}{{]{}]", "[".repeat(10), "]".repeat(10));
        assert_eq!(
            pieces(&bad, 100, true, 1 << 16),
            ["broken@1:13 `]` closes a `{`"]
        );
    }

    #[test]
    fn a_value_over_the_cap_is_measured_not_held() {
        let text = format!(
            "[\"{}\", {{\"k\": [{}]}}, 3]",
            "x".repeat(50),
            "1,".repeat(30) + "1"
        );
        assert_eq!(
            walk(&text, 40, true),
            ["0@1:2 too long 52", "1@1:56 too long 70", "2@1:128=3"]
        );
    }

    #[test]
    fn a_bare_word_is_a_value_for_the_parser_to_refuse() {
        assert_eq!(array("[tru, nul]"), ["0@1:2=tru", "1@1:7=nul"]);
        assert_eq!(walk("x {}", 100, false), ["0@1:1=x", "1@1:3={}"]);
    }

    #[test]
    fn nothing_before_the_bracket_is_an_array() {
        assert_eq!(array("{}"), ["broken@1:1 expected `[`"]);
        assert!(array("").is_empty());
    }

    #[test]
    fn the_sink_hears_before_a_read_that_may_wait() {
        let reader = BufReader::with_capacity(4, &b"[1, 22, 333]"[..]);
        let mut s = Splitter::array(reader, 100);
        let consumed = AtomicU64::new(0);
        let mut told = 0;
        let mut count = 0;
        while s.next(&consumed, &mut || told += 1).unwrap().is_some() {
            count += 1;
        }
        assert_eq!(count, 3);
        assert!(told >= 3, "{told}");
    }

    mod generated {
        use super::*;
        use proptest::prelude::*;
        use serde_json::Value;

        /// Strings full of what a naive splitter trips on.
        fn text() -> impl Strategy<Value = String> {
            proptest::string::string_regex(r#"[\[\]{}",:\\ a\n\u{e9}]{0,12}"#).unwrap()
        }

        /// JSON values with such strings, nested.
        fn value() -> impl Strategy<Value = Value> {
            let leaf = prop_oneof![
                Just(Value::Null),
                any::<bool>().prop_map(Value::from),
                any::<i64>().prop_map(Value::from),
                text().prop_map(Value::from),
            ];
            leaf.prop_recursive(6, 64, 6, move |inner| {
                prop_oneof![
                    prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                    prop::collection::vec((text(), inner), 0..6)
                        .prop_map(|members| Value::Object(members.into_iter().collect())),
                ]
            })
        }

        fn values_of(text: &[u8], array: bool) -> Vec<Result<Value, String>> {
            let reader = BufReader::with_capacity(7, text);
            let mut s = if array {
                Splitter::array(reader, 1 << 20)
            } else {
                Splitter::documents(Vec::new(), reader, 1 << 20, 1)
            };
            let consumed = AtomicU64::new(0);
            let mut out = Vec::new();
            while let Some(p) = s.next(&consumed, &mut || {}).unwrap() {
                out.push(match p {
                    Piece::Value { bytes, .. } => {
                        serde_json::from_slice(bytes).map_err(|e| e.to_string())
                    }
                    other => Err(format!("{other:?}")),
                });
            }
            out
        }

        proptest! {
            #[test]
            fn every_element_is_found_whole(elements in prop::collection::vec(value(), 0..6)) {
                let want: Vec<Result<Value, String>> = elements.iter().cloned().map(Ok).collect();
                let array = Value::Array(elements.clone());
                for text in [array.to_string(), serde_json::to_string_pretty(&array).unwrap()] {
                    prop_assert_eq!(&values_of(text.as_bytes(), true), &want, "{}", text);
                }
                let documents: String = elements
                    .iter()
                    .map(|e| format!("{}\n", serde_json::to_string_pretty(e).unwrap()))
                    .collect();
                // Two bare words in a row need the space between them; pretty-printing puts
                // a newline there.
                prop_assert_eq!(&values_of(documents.as_bytes(), false), &want, "{}", documents);
            }

            #[test]
            fn a_cut_array_ends_broken_after_the_whole_elements(
                elements in prop::collection::vec(value(), 1..6),
                cut in any::<prop::sample::Index>(),
            ) {
                let text = serde_json::to_string_pretty(&Value::Array(elements.clone())).unwrap();
                let cut = cut.index(text.len());
                let got = values_of(&text.as_bytes()[..cut], true);
                if cut > 0 {
                    prop_assert!(got.last().is_some_and(|l| l.as_ref().is_err_and(|e| e.contains("Broken"))), "{:?}", got);
                }
                // Whole elements come out as they were; only the last may be a cut-short
                // bare word (a number the cut shortened).
                let values: Vec<&Value> = got.iter().filter_map(|v| v.as_ref().ok()).collect();
                for (i, v) in values.iter().enumerate() {
                    let whole = *v == &elements[i];
                    prop_assert!(whole || (i + 1 == values.len() && !v.is_object() && !v.is_array()), "{:?} {:?}", v, elements[i]);
                }
            }
        }
    }
}
