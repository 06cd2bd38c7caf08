//! The storage contract (`storage::contract`) run against every store pap has: redb in
//! memory, redb in a file, and PostgreSQL when a test server can start (a skip note says so
//! otherwise; `PAP_TEST_REQUIRE_POSTGRES` makes it a failure). Each check gets a fresh, empty
//! store, and a store's test runs every check before it fails, naming each that broke.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use super::{Place, open};
use crate::database_url::{self, Origin};
use crate::pgstore::PgStore;
use crate::storage::{Storage, contract};
use crate::store::Store;

/// A store under test, and what keeps it alive (a temporary directory).
struct Subject {
    store: Arc<dyn Storage>,
    _dir: Option<tempfile::TempDir>,
}

type Fresh = fn() -> Subject;

fn redb_in_memory() -> Subject {
    Subject {
        store: Arc::new(Store::in_memory().expect("redb memory store")),
        _dir: None,
    }
}

fn redb_file() -> Subject {
    let dir = tempfile::tempdir().expect("temp dir");
    Subject {
        store: open(&Place::file(dir.path().to_path_buf())).expect("redb file store"),
        _dir: Some(dir),
    }
}

/// A store on a fresh database of the test PostgreSQL server (started once per process).
fn postgres() -> Subject {
    let server = crate::pgstore::testing::server_or_skip("the storage contract")
        .expect("checked by postgres_or_skip");
    let url = database_url::parse(&server.migrated_database(), Origin::Environment, &|_| None)
        .expect("test URL");
    let dir = tempfile::tempdir().expect("temp dir");
    Subject {
        store: Arc::new(PgStore::open(&url, dir.path()).expect("PostgreSQL store")),
        _dir: Some(dir),
    }
}

fn postgres_or_skip() -> Option<Fresh> {
    crate::pgstore::testing::server_or_skip("the storage contract").map(|_| postgres as Fresh)
}

fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| (*s).to_owned()))
        .unwrap_or_else(|| "a panic".to_owned())
}

/// Runs every check of the contract on fresh stores from `fresh`, and fails naming each
/// check that failed or panicked.
fn keeps_the_contract(name: &str, fresh: Fresh) {
    let mut failed = Vec::new();
    let mut ran = 0;
    for check in contract::all() {
        ran += 1;
        let subject = fresh();
        let result =
            std::panic::catch_unwind(AssertUnwindSafe(|| (check.run)(subject.store.as_ref())));
        match result {
            Ok(Ok(())) => {}
            Ok(Err(e)) => failed.push(format!("{}: {e}", check.name)),
            Err(panic) => failed.push(format!("{}: {}", check.name, panic_text(&*panic))),
        }
    }
    assert!(ran >= 30, "only {ran} checks: the contract lost some");
    assert!(
        failed.is_empty(),
        "{name} broke {} of the contract's {ran} checks:\n  {}",
        failed.len(),
        failed.join("\n  ")
    );
}

#[test]
fn redb_in_memory_keeps_the_storage_contract() {
    keeps_the_contract("redb in memory", redb_in_memory);
}

#[test]
fn redb_file_keeps_the_storage_contract() {
    keeps_the_contract("redb file", redb_file);
}

#[test]
fn postgres_keeps_the_storage_contract() {
    if let Some(fresh) = postgres_or_skip() {
        keeps_the_contract("PostgreSQL", fresh);
    }
}

/// `pap store copy` in every direction between the stores there are.
#[test]
fn a_copy_between_any_two_stores_keeps_the_whole_state() {
    let stores: Vec<(&str, Fresh)> = [
        ("redb in memory", redb_in_memory as Fresh),
        ("redb file", redb_file as Fresh),
    ]
    .into_iter()
    .chain(postgres_or_skip().map(|f| ("PostgreSQL", f)))
    .collect();
    for (from_name, from) in &stores {
        for (to_name, to) in &stores {
            let (source, target) = (from(), to());
            contract::a_copy_keeps_the_whole_state(
                source.store.as_ref(),
                target.store.as_ref(),
                &format!("{from_name} -> {to_name}"),
            );
        }
    }
}
