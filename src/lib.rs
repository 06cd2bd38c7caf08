//! pap: a dispatcher for the Provoke the Agent Protocol (PAP 0.2).
//!
//! The binary is a thin shell over [`run`]; every command lives in `cmd`.
//!
//! The public modules are the ones something outside this crate uses: the binaries, the
//! integration tests and the benchmarks (which drive pap as a user does, and reach inside only
//! to build fixtures or check a store). Every other module is private, and its items are
//! `pub(crate)` at most (`unreachable_pub` holds it). The layers inside the crate are held by
//! `tests/architecture.rs`, and the crates under `crates/` by cargo (see ARCHITECTURE.md).

mod adapter;
pub mod agent;
pub mod allocator;
mod chat;
pub mod cli;
mod clock;
mod cmd;
pub mod composition;
pub use pap_database_url as database_url;
pub mod diagnostics;
mod dispatcher;
pub use pap_domain as domain;
pub mod error_text;
pub mod event;
mod event_type;
mod http_client;
mod interpolate;
use pap_domain::liveness;
pub use pap_jsonpath as jsonpath;
pub mod manifest;
mod mcp_server;
mod notify;
pub use pap_store_postgres as pgstore;
pub use pap_text::panic_report;
mod pipeline;
mod program;
mod regular_file;
mod rule_test;
mod schedule;
mod secrets;
pub mod serve;
pub mod stages;
mod status_report;
pub use pap_storage as storage;
pub use pap_store_redb as store;
mod template;
pub use pap_text::term;
use pap_text::text;
mod ui_status;
mod views;

// `crate::say!` and `crate::out!` across the crate, as before they moved to pap-text.
use pap_text::{out, say};

pub use cmd::run;
