//! The test PostgreSQL server (see `pap::pgstore::testing`), for end-to-end tests: a fresh
//! migrated database per test, and fixture projects pointed at it through `store:` in their
//! pap.yaml, as a user would.

use std::path::Path;

/// A fresh database with pap's schema, or `None` with a skip note naming what goes
/// unchecked (a failure instead when `PAP_TEST_REQUIRE_POSTGRES` is set).
pub fn migrated_database(unchecked: &str) -> Option<String> {
    pap::pgstore::testing::server_or_skip(unchecked).map(|s| s.migrated_database())
}

/// A fresh database without pap's schema.
pub fn empty_database(unchecked: &str) -> Option<String> {
    pap::pgstore::testing::server_or_skip(unchecked).map(|s| s.database())
}

/// Points the project at `root` to the database at `url` (`store:` in its pap.yaml).
pub fn use_database(root: &Path, url: &str) {
    let config = root.join("pap.yaml");
    let mut text = std::fs::read_to_string(&config).expect("pap.yaml");
    if !text.ends_with('\n') {
        text.push('\n');
    }
    text.push_str(&format!("store: \"{url}\"\n"));
    std::fs::write(&config, text).expect("write pap.yaml");
}
