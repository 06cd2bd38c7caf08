//! Regression tests for the hardening issue: each drives the real binary against a fixture
//! project and failed on the main branch before its fix.

use crate::common;

/// A fresh copy of tests/fixtures/hardening.
fn project() -> common::dispatch::Project {
    common::dispatch::Project {
        dir: common::fixture_copy("hardening"),
    }
}

mod clock;
mod jsonpath_cost;
mod keys;
mod project_files;
mod smaller;
mod spool;
mod store;
mod terminal;
