//! The test PostgreSQL server (see `pap::pgstore::testing`), for end-to-end tests: a fresh
//! migrated database per test, and fixture projects pointed at it through `store:` in their
//! pap.yaml, as a user would.

use std::path::Path;

/// A fresh database with pap's schema, or `None` with a skip note naming what goes
/// unchecked (a failure instead when `PAP_TEST_REQUIRE_POSTGRES` is set).
pub(crate) fn migrated_database(unchecked: &str) -> Option<String> {
    pap::pgstore::testing::server_or_skip(unchecked).map(migrated_by_pap)
}

/// A fresh database of `server`, migrated by the `pap` binary under test (`pap store
/// migrate`), so its schema is the binary's even when this test binary is older.
pub(crate) fn migrated_by_pap(server: &pap::pgstore::testing::TestServer) -> String {
    let url = server.database();
    let out = super::pap()
        .env("PAP_DATABASE_URL", &url)
        .args(["--state", "/nonexistent-state-dir", "store", "migrate"])
        .output()
        .expect("pap store migrate");
    assert!(
        out.status.success(),
        "pap store migrate: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    url
}

/// A fresh database without pap's schema.
pub(crate) fn empty_database(unchecked: &str) -> Option<String> {
    pap::pgstore::testing::server_or_skip(unchecked).map(|s| s.database())
}

/// Points the project at `root` to the database at `url` (`store:` in its pap.yaml).
pub(crate) fn use_database(root: &Path, url: &str) {
    let config = root.join("pap.yaml");
    let mut text = std::fs::read_to_string(&config).expect("pap.yaml");
    if !text.ends_with('\n') {
        text.push('\n');
    }
    text.push_str(&format!("store: \"{url}\"\n"));
    std::fs::write(&config, text).expect("write pap.yaml");
}
