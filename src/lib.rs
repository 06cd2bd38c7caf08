//! pap: a dispatcher for the Provoke the Agent Protocol (PAP 0.2).
//!
//! The binary is a thin shell over [`run`]; every command lives in `cmd`.
//!
//! The public modules are the ones something outside this crate uses: the binaries, the
//! integration tests and the benchmarks (which drive pap as a user does, and reach inside only
//! to build fixtures or check a store). Every other module is private, and its items are
//! `pub(crate)` at most (`unreachable_pub` holds it). The layers inside the crate are held by
//! `tests/architecture.rs`, and the crates under `crates/` by cargo (see ARCHITECTURE.md).

pub mod allocator;
pub mod cli;
mod cmd;
pub mod composition;
pub use pap_database_url as database_url;
mod env_view;
mod health;
pub use pap_domain as domain;
use pap_domain::liveness;
pub use pap_jsonpath as jsonpath;
mod mcp_server;
pub use pap_store_postgres as pgstore;
pub use pap_text::panic_report;
mod rule_test;
pub mod serve;
mod status_report;
pub mod telemetry;
pub use pap_storage as storage;
pub use pap_store_redb as store;
pub use pap_text::term;
use pap_text::text;
mod ui_status;

// `crate::say!` and `crate::out!` across the crate, as before they moved to pap-text.
use pap_text::{out, say};

// The engine's modules under their old names, so `crate::manifest::Project` reads as before.
pub use pap_engine::{
    adapter, agent, chat, clock, control, diagnostics, dispatcher, emit, error_text, event,
    interpolate, manifest, notify, pipeline, program, regular_file, schedule, stages,
    trace_context, views,
};

pub use cmd::run;
