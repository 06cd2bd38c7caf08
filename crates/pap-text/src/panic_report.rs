//! A panic is a bug: it is reported in a few lines (never a backtrace of frames) and the
//! binary exits 1, not Rust's 101. Code that runs a library which may panic on damaged input
//! (redb on a damaged file) catches the panic itself with [`quietly`] and turns it into an
//! error; then nothing is reported here.

use std::cell::Cell;
use std::io::Write;

thread_local! {
    /// Set while [`quietly`] runs: the caller decides what a panic means.
    static QUIET: Cell<bool> = const { Cell::new(false) };
    /// Where the last quiet panic happened (`file:line`).
    static WHERE: Cell<Option<(&'static str, u32)>> = const { Cell::new(None) };
}

/// A panic caught by [`quietly`].
pub struct Caught {
    pub message: String,
    /// The source file it happened in, when known.
    pub file: Option<&'static str>,
    line: u32,
    payload: Box<dyn std::any::Any + Send>,
}

impl Caught {
    /// Whether it happened inside the crate whose sources live under `crate_dir` (a
    /// dependency's directory name, like `redb-`).
    pub fn inside(&self, crate_dir: &str) -> bool {
        self.file.is_some_and(|f| f.contains(crate_dir))
    }

    /// Reports it as the bug it is and carries on unwinding.
    pub fn resume(self) -> ! {
        report(&self.message, self.file.map(|f| (f, self.line)));
        std::panic::resume_unwind(self.payload)
    }
}

/// Replaces the default hook (message plus backtrace hint) with a short report on stderr.
pub fn install() {
    std::panic::set_hook(Box::new(|info| {
        let at = info.location().map(|l| {
            // Locations of our own code and of dependencies are 'static strings in the binary.
            let file: &'static str = Box::leak(l.file().to_owned().into_boxed_str());
            (file, l.line())
        });
        if QUIET.with(Cell::get) {
            WHERE.with(|w| w.set(at));
            return;
        }
        report(&message(info.payload()), at);
    }));
}

fn report(what: &str, at: Option<(&str, u32)>) {
    let at = at
        .map(|(file, line)| format!(" at {file}:{line}"))
        .unwrap_or_default();
    let text = format!(
        "pap: internal error: {what}{at}\npap: this is a bug in pap, not in your input; please report it with the command you ran (version {})",
        env!("CARGO_PKG_VERSION")
    );
    // stderr may be closed: nothing more can be done then.
    let _ = writeln!(std::io::stderr(), "{}", crate::term::for_humans(&text));
}

/// Runs `f`, returning what it panicked with instead of unwinding, with no report from the
/// hook (the caller reports it, or [`Caught::resume`]s it).
pub fn quietly<T>(f: impl FnOnce() -> T) -> Result<T, Caught> {
    let was = QUIET.with(|q| q.replace(true));
    WHERE.with(|w| w.set(None));
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    QUIET.with(|q| q.set(was));
    result.map_err(|payload| {
        let at = WHERE.with(Cell::take);
        Caught {
            message: message(payload.as_ref()),
            file: at.map(|(f, _)| f),
            line: at.map_or(0, |(_, l)| l),
            payload,
        }
    })
}

fn message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic without a message".to_owned()
    }
}

/// Whether an error comes from writing to a pipe whose reader has gone (`| head -1`).
pub fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
    })
}
