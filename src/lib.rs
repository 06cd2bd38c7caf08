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
pub mod database_url;
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
pub mod panic_report;
pub mod pgstore;
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
pub mod store;
mod template;
pub mod term;
mod text;
mod ui_status;
mod views;

pub use cmd::run;
