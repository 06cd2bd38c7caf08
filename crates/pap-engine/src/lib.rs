//! pap's engine: what it decides and does, on the storage interface, naming no store.
//!
//! - [`manifest`]: pap.yaml, triggers, agents and schedules loaded, checked ([`diagnostics`])
//!   and compiled into a `Project`;
//! - [`event`]: PAP events read from files, streams and requests;
//! - [`pipeline`] and [`stages`]: one event through every matching trigger's stages (filter,
//!   idempotency, cascade, throttle, debounce, budget, risk) in one transaction;
//! - [`dispatcher`]: a stream of events decided in groups (`pap dispatch`);
//! - [`agent`]: attempts, retries, the LLM and command runners, MCP tools;
//! - [`control`]: an operator's cancel and retry, and what `cancel_on` ends; [`emit`]: the
//!   events an invocation produces (completion, failure, follow-ups) and the outbox;
//! - [`notify`] and [`chat`]: ANP notifications, routing, the inbox, ATP answers;
//! - [`schedule`], [`adapter`] (webhook presets), [`views`] (the contract's public JSON), and
//!   [`clock`] (time, injected in the suite's builds).
//!
//! The surfaces (`pap serve`, `pap mcp`, `pap test`) and the CLI are above it, in `pap`; the
//! stores are below it, and the composition root in `pap` hands it one as an
//! `Arc<dyn Storage>`.

pub mod adapter;
pub mod agent;
pub mod chat;
pub mod clock;
pub mod command;
pub mod control;
pub mod diagnostics;
pub mod dispatcher;
pub mod emit;
pub mod error_text;
pub mod event;
mod event_type;
mod http_client;
pub mod interpolate;
pub mod manifest;
pub mod notify;
pub mod pipeline;
pub mod program;
mod reason;
mod redact;
pub mod regular_file;
pub mod schedule;
pub mod stages;
mod template;
pub use pap_domain::trace_context;
pub mod telemetry;
pub mod views;

pub use pap_database_url as database_url;
pub use pap_domain as domain;
use pap_domain::liveness;
pub use pap_jsonpath as jsonpath;
pub use pap_storage as storage;
use pap_text::{panic_report, term, text};
// `crate::say!` and `crate::out!` across the crate.
use pap_text::say;

// The engine's unit tests run on the real redb store (a dev-dependency: the engine itself
// names no store).
#[cfg(test)]
use pap_store_redb as store;
