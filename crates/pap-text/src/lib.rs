//! Text pap shows to people, below every other layer: the stores report a damaged file with
//! it, the engine its decisions, the CLI everything else.
//!
//! - [`term`]: what reaches a terminal is escaped ([`term::for_humans`]: no control sequence
//!   from an event, a webhook or agent output can move the cursor or forge a line), coloured
//!   as `--color` says; [`say!`] and [`out!`] write through it and never panic on a closed
//!   stream.
//! - [`text`]: clipping long values for messages and records, hex, hiding URL passwords.
//! - [`panic_report`]: a panic reported in a few lines, and [`panic_report::quietly`] for code
//!   that runs a library which may panic on damaged input.

pub mod panic_report;
pub mod term;
pub mod text;
