//! pap: a dispatcher for the Provoke the Agent Protocol (PAP 0.2).
//!
//! The binary is a thin shell over [`run`]; every command lives in [`cmd`].

pub mod cli;
pub mod cmd;
pub mod diagnostics;
pub mod event_type;
pub mod interpolate;
pub mod jsonpath;
pub mod manifest;

pub use cmd::run;
