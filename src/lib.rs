//! pap: a dispatcher for the Provoke the Agent Protocol (PAP 0.2).
//!
//! The binary is a thin shell over [`run`]; every command lives in [`cmd`].

pub mod adapter;
pub mod agent;
pub mod allocator;
pub mod chat;
pub mod cli;
pub mod clock;
pub mod cmd;
pub mod composition;
pub mod database_url;
pub mod diagnostics;
pub mod dispatcher;
pub mod domain;
pub mod error_text;
pub mod event;
pub mod event_type;
pub mod http_client;
pub mod interpolate;
pub mod jsonpath;
pub mod liveness;
pub mod manifest;
pub mod mcp_server;
pub mod notify;
pub mod panic_report;
pub mod pgstore;
pub mod pipeline;
pub mod program;
pub mod regular_file;
pub mod rule_test;
pub mod schedule;
pub mod secrets;
pub mod serve;
pub mod stages;
pub mod status_report;
pub mod storage;
pub mod store;
pub mod template;
pub mod term;
pub mod text;
pub mod ui_status;
pub mod views;

pub use cmd::run;
