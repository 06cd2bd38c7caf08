//! PostgreSQL going away under running nodes: serve stops deciding and says so, spool files
//! wait, nothing is lost or decided twice, and work resumes when the database is back. On a
//! server of its own, since it stops it, and the other tests of the binary share theirs.

use crate::common;

use common::dispatch::ev;
use common::postgres::use_database;
use common::serve::Project;
use serde_json::json;

#[test]
fn serve_waits_out_an_outage_and_loses_nothing() {
    let Some(server) = pap::pgstore::testing::private_server_or_skip("a database outage") else {
        return;
    };
    let p = Project::new();
    use_database(p.root(), &server.migrated_database());
    let serve = p.serve(&[]);
    p.drop_events(
        "before.ndjson",
        &[ev("o1", "test.plain.happened", json!({}))],
    );
    serve.wait_for("o1 ran", || p.runs().len() == 2);
    server.stop().expect("stop PostgreSQL");
    p.drop_events(
        "during.ndjson",
        &[ev("o2", "test.plain.happened", json!({}))],
    );
    // Serve says so once, and keeps the file in the spool (not decided, not quarantined).
    serve.wait_log("the database is unavailable: pap stops deciding");
    std::thread::sleep(std::time::Duration::from_secs(2));
    let during = serve.log_text();
    assert_eq!(
        during.matches("the database is unavailable").count(),
        1,
        "{during}"
    );
    assert!(
        !during.contains(" ERROR "),
        "an outage is not an error per attempt:\n{during}"
    );
    assert!(p.files_in("done").len() == 1 && p.files_in("failed").is_empty());
    assert_eq!(p.runs().len(), 2, "nothing ran meanwhile");
    // The status command and readiness say so too.
    let out = p.cmd().args(["status"]).output().unwrap();
    assert_ne!(out.status.code(), Some(0));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("is unavailable"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    server.start().expect("start PostgreSQL");
    // At least, then exactly: a run too many (o1's again) fails with the runs in the message.
    serve.wait_for("o2 ran after the outage", || p.runs().len() >= 4);
    assert_eq!(p.runs().len(), 4, "o1 and o2 ran once each: {:?}", p.runs());
    serve.wait_log("the database is back: deciding again");
    assert_eq!(p.invocations().len(), 2, "o1 and o2, each decided once");
    assert_eq!(serve.terminate().0, 0);
}
