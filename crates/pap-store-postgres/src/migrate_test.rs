//! Schema 2 to 3 on a database with work behind concurrency keys: a database as the previous
//! release left it (every waiter listed as due work, no admission), migrated, lists as due
//! work only what its keys admit, and goes on admitting, in decision order, as runs end.

use serde_json::json;

use super::PgStore;
use pap_domain::{ConcurrencySlot, Invocation, Status};
use pap_storage::Storage;

/// An invocation under key `key` (of limit `limit`) of trigger `t`, as schema 2 stored it.
fn stored(id: &str, seq: i64, status: Status, key: &str, limit: u32) -> (Invocation, String) {
    let mut inv = Invocation::for_tests(id, status);
    inv.seq = seq as u64;
    inv.created_at = 1000 + seq;
    inv.concurrency = vec![ConcurrencySlot {
        scope: "trigger:t".into(),
        key: key.into(),
        limit,
    }];
    let record = serde_json::to_string(&inv).expect("records serialise");
    (inv, record)
}

/// Writes the rows schema 2's `upsert_invocation` wrote for one invocation: its due-work
/// place (running first, then every queued one at its creation) and one concurrency entry.
fn insert_as_schema_2(
    client: &mut postgres::Client,
    (id, seq, status, key, limit): (&str, i64, Status, &str, u32),
) {
    let (inv, record) = stored(id, seq, status, key, limit);
    let (work_at, state) = match status {
        Status::Running => (i64::MIN, 1i16),
        _ => (inv.created_at, 0),
    };
    client
        .execute(
            "INSERT INTO pap_invocations (id, seq, status, work_at, record) \
             VALUES ($1, $2, $3, $4, $5::text::json)",
            &[&id, &seq, &super::status_name(status), &work_at, &record],
        )
        .expect("an invocation");
    client
        .execute(
            "INSERT INTO pap_concurrency (slot_key, seq, state, invocation_id) \
             VALUES ($1, $2, $3, $4)",
            &[&format!("trigger:t\u{1f}{key}"), &seq, &state, &id],
        )
        .expect("its entry");
}

/// Sets `id`'s status as a run would (queued → running → succeeded).
fn set_status(store: &dyn Storage, id: &str, status: Status) {
    store
        .write(|tx| {
            let mut inv = tx.invocation(id)?.expect("the invocation");
            inv.status = status;
            if status == Status::Succeeded {
                inv.output = Some(json!({}));
            }
            tx.put_invocation(&inv)
        })
        .unwrap();
}

#[test]
fn a_schema_2_database_with_waiters_admits_them_at_their_keys_pace_once_migrated() {
    let Some(server) = super::testing::server_or_skip("the migration of concurrency keys") else {
        return;
    };
    let url = pap_database_url::parse(&server.database(), super::Origin::Environment, &|_| None)
        .expect("test URL");
    let pool = super::pool::Pool::new(&url, 1).expect("pool");
    let mut client = pool.connect().expect("connection");
    super::schema::migrate_up_to(&mut client, "test", 2).expect("schema 2");
    // Key a (limit 1): r runs, x1 and x2 wait behind it. Key b (limit 2): y1..y3 wait.
    for row in [
        ("r", 1, Status::Running, "a", 1),
        ("x1", 2, Status::Queued, "a", 1),
        ("x2", 3, Status::Queued, "a", 1),
        ("y1", 4, Status::Queued, "b", 2),
        ("y2", 5, Status::Queued, "b", 2),
        ("y3", 6, Status::Queued, "b", 2),
    ] {
        insert_as_schema_2(&mut client, row);
    }
    let migrated = super::schema::migrate(&mut client, "test").expect("schema 3");
    // Schema 3 first; later migrations follow it.
    assert_eq!(migrated.applied[0], (3, "concurrency admission"));
    drop(client);

    let dir = tempfile::tempdir().unwrap();
    let store = PgStore::open(&url, dir.path()).expect("the store");
    let store: &dyn Storage = &store;
    let due = || store.read(|r| r.work_due(i64::MAX, 10)).unwrap();
    assert_eq!(due(), ["r", "y1", "y2"], "each key's first free slots");
    set_status(store, "r", Status::Succeeded);
    assert_eq!(due(), ["x1", "y1", "y2"], "r's end admits x1, not x2");
    set_status(store, "x1", Status::Running);
    assert_eq!(due(), ["x1", "y1", "y2"], "x1 running holds key a");
    set_status(store, "y1", Status::Running);
    set_status(store, "y1", Status::Succeeded);
    assert_eq!(due(), ["x1", "y2", "y3"], "y1's end admits y3");
    set_status(store, "x1", Status::Succeeded);
    assert_eq!(due(), ["x2", "y2", "y3"], "x1's end admits x2");
}
