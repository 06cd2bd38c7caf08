//! Terminal styling: ANSI colour as `--color` says; by default only on a terminal, and never
//! when NO_COLOR is set.

use std::io::IsTerminal;
use std::sync::atomic::{AtomicU8, Ordering};

use anstyle::{AnsiColor, Effects, Style};

/// `--color`: when human output is coloured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum ColorChoice {
    /// On a terminal, unless NO_COLOR is set.
    #[default]
    Auto,
    /// Always, also into a pipe or a file.
    Always,
    /// Never.
    Never,
}

static CHOICE: AtomicU8 = AtomicU8::new(0);

/// Sets the process's colour choice (from `--color`, once at start).
pub fn set_color(choice: ColorChoice) {
    CHOICE.store(choice as u8, Ordering::Relaxed);
}

/// Whether output to a stream (a terminal or not) is coloured.
pub fn colored(is_terminal: bool) -> bool {
    match CHOICE.load(Ordering::Relaxed) {
        1 => true,
        2 => false,
        _ => is_terminal && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Paint {
    pub on: bool,
}

impl Paint {
    pub fn for_stdout() -> Paint {
        Paint {
            on: colored(std::io::stdout().is_terminal()),
        }
    }

    fn paint(&self, style: Style, text: &str) -> String {
        if self.on {
            format!("{}{text}{}", style.render(), style.render_reset())
        } else {
            text.to_string()
        }
    }

    pub fn red(&self, t: &str) -> String {
        self.paint(AnsiColor::Red.on_default(), t)
    }
    pub fn green(&self, t: &str) -> String {
        self.paint(AnsiColor::Green.on_default(), t)
    }
    pub fn yellow(&self, t: &str) -> String {
        self.paint(AnsiColor::Yellow.on_default(), t)
    }
    pub fn dim(&self, t: &str) -> String {
        self.paint(Style::new().effects(Effects::DIMMED), t)
    }
    pub fn bold(&self, t: &str) -> String {
        self.paint(Style::new().effects(Effects::BOLD), t)
    }
}

/// Text for a person's terminal: every control character (C0 but newline and tab, DEL, C1)
/// becomes a visible escape (`\u{1b}`), so an event id, agent output or a provider's error
/// cannot move the cursor, rewrite earlier lines, retitle the window or plant an OSC 8 link.
/// Exactly the SGR sequences that [`Paint`] writes (reset, bold, dim, red, green, yellow)
/// are kept. Human output is assembled from untrusted fields in many places; escaping once,
/// where it is written, is the one place it cannot be forgotten. JSON output is never
/// passed through here: serde_json already escapes every control character a string holds.
pub fn for_humans(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.chars().any(needs_escape) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        if c == '\x1b'
            && let Some(sgr) = PAINT_SGR.iter().find(|s| rest.starts_with(*s))
        {
            out.push_str(sgr);
            rest = &rest[sgr.len()..];
            continue;
        }
        if needs_escape(c) {
            out.extend(c.escape_unicode());
        } else {
            out.push(c);
        }
        rest = &rest[c.len_utf8()..];
    }
    std::borrow::Cow::Owned(out)
}

/// [`for_humans`] on what was appended to `out` since `start` (a human line just rendered).
pub fn escape_from(out: &mut String, start: usize) {
    if let std::borrow::Cow::Owned(safe) = for_humans(&out[start..]) {
        out.truncate(start);
        out.push_str(&safe);
    }
}

/// The escape sequences [`Paint::wrap`] produces.
const PAINT_SGR: [&str; 6] = [
    "\x1b[0m", "\x1b[1m", "\x1b[2m", "\x1b[31m", "\x1b[32m", "\x1b[33m",
];

fn needs_escape(c: char) -> bool {
    c.is_control() && c != '\n' && c != '\t'
}

/// `eprintln!` that never panics: a message for a person on stderr, dropped if stderr is
/// closed (`2>&-`). The text passes through [`for_humans`].
#[macro_export]
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let text = format!($($arg)*);
        let _ = writeln!(std::io::stderr(), "{}", $crate::term::for_humans(&text));
    }};
}

/// `println!` that returns the write's error (`?`) instead of panicking when stdout is a
/// pipe whose reader went away; the binary then exits quietly.
#[macro_export]
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let text = format!($($arg)*);
        writeln!(std::io::stdout(), "{}", $crate::term::for_humans(&text))
    }};
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_are_escaped_and_paint_is_kept() {
        let p = Paint { on: true };
        let hostile = "id\x1b]8;;http://evil\x07click\x1b]8;;\x07\r\x1b[2Kfake\u{9b}31m\0";
        let text = format!("{} {hostile}\nnext\tcol", p.red("ok"));
        let shown = for_humans(&text);
        assert_eq!(
            shown,
            "\x1b[31mok\x1b[0m id\\u{1b}]8;;http://evil\\u{7}click\\u{1b}]8;;\\u{7}\\u{d}\\u{1b}[2Kfake\\u{9b}31m\\u{0}\nnext\tcol"
        );
        assert!(matches!(
            for_humans("plain ✓ text"),
            std::borrow::Cow::Borrowed(_)
        ));
    }
}
