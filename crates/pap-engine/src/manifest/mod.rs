//! Manifests: loading, checking and compiling trigger, agent and project files.
//!
//! raw (serde mirror of the YAML) → schema_check (shape, every problem) → compile_* (meaning)
//! → compiled (what the dispatcher runs on). `loader` drives it for a whole project.

mod budget_check;
pub mod cache;
mod cancel_check;
pub mod cascade_graph;
pub mod compile_adapter;
pub mod compile_agent;
pub mod compile_config;
pub mod compile_listen;
pub mod compile_notify;
pub mod compile_schedule;
pub mod compile_trigger;
pub mod compiled;
pub mod compiled_listen;
pub mod compiled_notify;
pub mod discover;
pub mod duration;
pub mod file_ctx;
pub mod loader;
pub mod operators;
pub mod prices;
pub mod raw;
pub mod regex_test;
pub mod schema_check;
pub(crate) mod secrets;
pub mod size;
pub mod yaml_tree;

pub use compiled::Project;
pub use loader::{Loaded, load};
