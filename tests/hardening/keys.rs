//! PAP's idempotency key concatenates the ids with nothing between them; a collision of two
//! different (event, trigger) pairs must never make one of them a `duplicate`.

use crate::common::dispatch::{T0, ev};
use crate::common::{code, pap_at, stderr, stdout};
use serde_json::{Value, json};

use super::project;

#[test]
fn colliding_pairs_are_both_decided_and_each_is_its_own_duplicate() {
    let p = project();
    // sha256("e1" + "tx") == sha256("e1t" + "x")
    let file = p.events(
        "events.ndjson",
        &[
            ev("e1", "test.key.collided", json!({})),
            ev("e1t", "test.key.collided", json!({})),
        ],
    );
    let run = p.dispatch(T0, &file, &["--no-run"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    for (event, trigger) in [("e1", "tx"), ("e1", "x"), ("e1t", "tx"), ("e1t", "x")] {
        assert_eq!(
            run.outcome(event, trigger),
            "queued",
            "{event} {trigger}: {}",
            run.stdout
        );
    }
    // Four invocations, four ids.
    assert_eq!(p.invocations().len(), 4);
    // Sent again (also an hour later, and in the other order): every pair is a duplicate of
    // its own first decision.
    let again = p.events(
        "again.ndjson",
        &[
            ev("e1t", "test.key.collided", json!({})),
            ev("e1", "test.key.collided", json!({})),
        ],
    );
    for at in [T0, "2026-03-11T07:00:00Z"] {
        let run = p.dispatch(at, &again, &["--no-run"]);
        for (event, trigger) in [("e1", "tx"), ("e1", "x"), ("e1t", "tx"), ("e1t", "x")] {
            assert_eq!(run.outcome(event, trigger), "duplicate", "{}", run.stdout);
        }
    }
    // After the 24 h TTL of the later claim, all four are decided afresh.
    let later = p.dispatch("2026-03-12T07:00:01Z", &again, &["--no-run"]);
    for (event, trigger) in [("e1", "tx"), ("e1", "x"), ("e1t", "tx"), ("e1t", "x")] {
        assert_eq!(later.outcome(event, trigger), "queued", "{}", later.stdout);
    }
    let out = pap_at(p.root()).arg("lint").output().unwrap();
    assert!(
        stdout(&out).contains("trigger-id-suffix"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn a_colliding_pair_stays_a_duplicate_while_its_own_claim_lives() {
    let p = project();
    let first = p.events("a.ndjson", &[ev("e1", "test.key.collided", json!({}))]);
    let second = p.events("b.ndjson", &[ev("e1t", "test.key.collided", json!({}))]);
    // (e1, tx) claims the shared key at 06:00; (e1t, x) collides with it at 07:00.
    p.dispatch(T0, &first, &["--no-run"]);
    let run = p.dispatch("2026-03-11T07:00:00Z", &second, &["--no-run"]);
    assert_eq!(run.outcome("e1t", "x"), "queued", "{}", run.stdout);
    // After the first claim's 24 h, before the second's: (e1t, x) is still a duplicate (the
    // shared key was kept as long as the pair's own claim), (e1, tx) is decided anew.
    let run = p.dispatch("2026-03-12T06:30:00Z", &second, &["--no-run"]);
    assert_eq!(run.outcome("e1t", "x"), "duplicate", "{}", run.stdout);
}

#[test]
fn the_key_is_shown_in_hex_by_explain_invocations_show_and_audit() {
    let p = project();
    let file = p.events("e.ndjson", &[ev("e1", "test.key.collided", json!({}))]);
    let run = p.dispatch(T0, &file, &["--no-run"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    // sha256("e1tx"), the PAP key of (e1, tx)
    let key = "6bb8f963149afb279bb4e37c92ef7e56031ac6e3a5ec7bc25e77c0dee9dae585";
    let explained = p
        .cmd(T0)
        .args(["dispatch", "--dry-run", "--explain"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(stdout(&explained).contains(key), "{}", stdout(&explained));

    let id = run.trigger("e1", "tx")["invocation_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let shown: Value = p.invocation(&id);
    assert_eq!(shown["idempotency_key"], key);
    let human = p
        .cmd(T0)
        .args(["invocations", "show", &id])
        .output()
        .unwrap();
    assert_eq!(code(&human), 0, "{}", stderr(&human));
    assert!(stdout(&human).contains(key), "{}", stdout(&human));
}

#[test]
fn the_audit_log_names_the_key() {
    let p = project();
    let file = p.events("a.ndjson", &[ev("a1", "test.key.audited", json!({}))]);
    let run = p.dispatch(T0, &file, &[]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    // sha256("a1audited")
    let key = "2b7f3b1389c0f3c26f4a37a270e9c72a7f91c299dce3ddc827ac73f1b12e426f";
    let out = p.cmd(T0).args(["audit", "--json"]).output().unwrap();
    let entries: Vec<Value> = crate::common::dispatch::lines(&stdout(&out));
    assert!(!entries.is_empty());
    assert!(
        entries.iter().all(|e| e["idempotency_key"] == key),
        "{entries:?}"
    );
    let human = p.cmd(T0).arg("audit").output().unwrap();
    assert!(stdout(&human).contains(key), "{}", stdout(&human));
}
