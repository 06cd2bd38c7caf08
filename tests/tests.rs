//! The integration tests, one binary: each module was its own test binary once, and each
//! linked the whole dependency tree (45 links of ~400 MB each per build). One binary links
//! once; `cargo test` runs its tests on every core, as it ran each binary's before.
//!
//! Run one suite: `cargo test --test tests dispatch::` (the module path is the filter).
//! `storage_model` stays a binary of its own: it has its own harness, and it starts itself
//! again as the crash child.

// A harness around pap reads the system's time to set the clock of what it runs (clippy.toml
// keeps the product to the injected clock).
#![allow(clippy::disallowed_methods)]

mod common;

mod adapt;
mod agent_lifetime;
mod alert_identity;
mod alert_texts;
mod approvals;
mod architecture;
mod auth_backoff;
mod auth_reload;
mod batch;
mod book_walkthrough;
mod budget;
mod cancel_on;
mod cli_conventions;
mod cluster_crash;
mod concurrency;
mod container_image;
mod debounce;
mod dispatch;
mod dispatch_memory;
mod docs;
mod doctor;
mod durability;
mod example_project;
mod fuzz;
mod group_events;
mod hardening;
mod health;
mod help;
mod http_adapters;
mod http_clients;
mod http_console;
mod http_crash;
mod http_ingest;
mod invocation_control;
mod jsonpath_cts;
mod kubernetes_manifests;
mod kubernetes_volume;
mod large_input;
mod lint;
mod llm;
mod manifest_cache;
mod mcp_server;
mod mcp_stdio;
mod monitoring;
mod notify_lifecycle;
mod notify_routing;
mod notify_watch;
mod postgres;
mod postgres_contention;
mod postgres_outage;
mod project_root;
mod reads;
mod retention;
mod rfd011;
mod rfd011_tool_switch;
mod rule_tests;
mod schema;
mod secrets;
mod serve;
mod serve_crash;
mod service_unit;
mod soak_judge;
mod status;
mod store_format;
mod suite_on_postgres;
mod supervisor_lease;
mod syncs;
mod traces;
mod typed_ids;
mod workspace;
