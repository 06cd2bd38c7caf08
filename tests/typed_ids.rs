//! Ids a person can type: listings show short ids, and commands take the full id, a prefix of
//! it, or the short form; an id that names several exits 2 and lists them.

use crate::common;

use common::dispatch::{Project, T0, ev, lines};
use common::{code, stderr, stdout};
use serde_json::json;

#[test]
fn a_short_id_or_a_prefix_resolves_and_an_ambiguous_one_lists_the_candidates() {
    let p = Project::new();
    let file = p.events(
        "two.ndjson",
        &[
            ev("b1", "test.basic.happened", json!({})),
            ev("b2", "test.basic.happened", json!({})),
        ],
    );
    assert_eq!(p.dispatch(T0, &file, &["--no-run"]).code, 0);
    let rows = p.invocations();
    assert_eq!(rows.len(), 2);
    let (full, short) = (
        rows[0]["id"].as_str().unwrap(),
        rows[0]["short_id"].as_str().unwrap(),
    );
    assert!(short.len() >= 6 && full.ends_with(&full[16..]) && full[16..].starts_with(short));

    // The human listing shows the short forms.
    let listed = p.cmd(T0).args(["invocations"]).output().unwrap();
    assert!(stdout(&listed).starts_with(short), "{}", stdout(&listed));
    assert!(!stdout(&listed).contains(full));

    // Short form, a longer prefix of the random part, a prefix of the full id: all name it.
    for typed in [short, &full[16..26], &full[..30]] {
        let out = p
            .cmd(T0)
            .args(["invocations", "show", typed, "--json"])
            .output()
            .unwrap();
        assert_eq!(code(&out), 0, "{typed}: {}", stderr(&out));
        assert!(stdout(&out).contains(full));
    }

    // `inv_` names both: exit 2, both listed, nothing done.
    let out = p
        .cmd(T0)
        .args(["invocations", "cancel", "inv_"])
        .output()
        .unwrap();
    assert_eq!(code(&out), 2);
    let err = stderr(&out);
    assert!(err.contains("names more than one invocation"), "{err}");
    for row in &rows {
        assert!(err.contains(row["id"].as_str().unwrap()), "{err}");
    }
    assert!(p.invocations().iter().all(|r| r["status"] == "queued"));

    // A short form works where an id is taken to act on it.
    let out = p
        .cmd(T0)
        .args(["invocations", "cancel", short, "--json"])
        .output()
        .unwrap();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(lines(&stdout(&out))[0]["id"], full);
}

#[test]
fn approvals_and_notifications_take_short_ids_too() {
    let p = Project::new();
    let inv = p.awaiting("a1");
    let short = &p.invocations()[0]["short_id"];
    let out = p
        .cmd(T0)
        .args(["approve", short.as_str().unwrap(), "--by", "alice"])
        .output()
        .unwrap();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(p.invocation(&inv)["status"], "succeeded");

    // A notification by its number, and the approval request by a prefix of its ATP id.
    let request = p.invocation(&inv)["approval_request"]
        .as_str()
        .unwrap()
        .to_owned();
    let number = request.trim_start_matches("ntf_");
    let out = p
        .cmd(T0)
        .args(["notifications", "show", number, "--json"])
        .output()
        .unwrap();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let shown: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(shown["id"], request.as_str());
    let atp = shown["atp"]["id"].as_str().unwrap();
    let out = p
        .cmd(T0)
        .args(["notifications", "show", &atp[..8], "--json"])
        .output()
        .unwrap();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(stdout(&out).contains(&request));
}
