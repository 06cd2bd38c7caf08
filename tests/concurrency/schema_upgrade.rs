//! A PostgreSQL database of schema 2 with a queue behind a concurrency key, through the real
//! binary: this pap refuses it until `pap store migrate`, and once migrated to schema 3 (which
//! admits each key's first waiters), `pap serve` runs the whole queue at the key's pace, one
//! at a time, in decision order.
//!
//! The schema-2 database is made by this pap and then given schema 2's shape: [`TO_SCHEMA_2`]
//! undoes migration 3, leaving exactly the rows schema 2 wrote for the same invocations (the
//! records and concurrency entries are the same; schema 2 listed every queued invocation as
//! due work at its next attempt, else its creation).

use crate::common;

use super::backlog::{events, one_at_a_time_in_order, project, queue, runs};

/// Migration 3 undone: the admission columns, indexes and table dropped, every waiter due
/// work again, and the database's record of schema 3 removed.
const TO_SCHEMA_2: &str = "
UPDATE pap_invocations SET work_at = coalesce((record->>'next_attempt_at')::bigint,
                                              (record->>'created_at')::bigint)
 WHERE status = 'queued' AND work_at IS NULL;
DROP TABLE pap_concurrency_keys;
DROP INDEX pap_concurrency_holders, pap_concurrency_admitted;
ALTER TABLE pap_concurrency DROP COLUMN admitted_at, DROP COLUMN due_at, DROP COLUMN nkeys;
DELETE FROM pap_schema_migrations WHERE version = 3;
UPDATE pap_schema SET compat_min = 0;
";

#[test]
fn a_schema_2_database_with_a_queue_behind_a_key_runs_it_in_order_once_migrated() {
    let Some(server) =
        pap::pgstore::testing::server_or_skip("the upgrade of a queue behind a key to schema 3")
    else {
        return;
    };
    let url = common::postgres::migrated_by_pap(server);
    let database = url.rsplit('/').next().unwrap().to_owned();
    let dir = project(Some(1), |log| {
        format!(
            "echo \"start $n\" >> '{log}'; echo \"end $n\" >> '{log}'; echo '{{}}'",
            log = log.display()
        )
    });
    let root = dir.path();
    common::postgres::use_database(root, &url);
    // One group: the ids are in hash order, the decision order is 0, 1, 2…
    let count = 30;
    queue(root, &events(root, "host.disk.full", 0, count));
    server
        .psql(&database, TO_SCHEMA_2)
        .expect("schema 2's shape");
    let due: usize = server
        .psql(
            &database,
            "SELECT count(*) FROM pap_invocations WHERE work_at IS NOT NULL",
        )
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(due, count, "schema 2 lists every waiter as due work");

    let refused = common::pap_at(root)
        .args(["serve", "--once"])
        .output()
        .unwrap();
    assert_ne!(common::code(&refused), 0);
    assert!(
        common::stderr(&refused).contains("pap store migrate"),
        "{}",
        common::stderr(&refused)
    );
    let migrate = common::pap_at(root)
        .args(["store", "migrate"])
        .output()
        .unwrap();
    assert_eq!(common::code(&migrate), 0, "{}", common::stderr(&migrate));

    let serve = common::pap_at(root)
        .args(["serve", "--once"])
        .output()
        .unwrap();
    assert_eq!(common::code(&serve), 0, "{}", common::stderr(&serve));
    let lines = runs(root);
    assert_eq!(
        lines.len(),
        2 * count,
        "every run started and ended: {lines:?}"
    );
    one_at_a_time_in_order(&lines);
}
