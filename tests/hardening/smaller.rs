//! The smaller items: a stepped-back clock, strict times, empty rejection reasons, a closed
//! pipe, an agent removed while its invocation waits, and an emit file that is not a file.

use std::process::Command;
use std::time::{Duration, Instant};

use crate::common::dispatch::{Project, T0, ev};
use crate::common::{code, stderr, stdout};
use serde_json::json;

use super::project;

#[test]
fn a_clock_stepped_back_does_not_keep_a_trigger_throttled() {
    let p = project();
    let first = p.events("a.ndjson", &[ev("s1", "test.clock.stepped", json!({}))]);
    let run = p.dispatch("2026-03-11T10:00:00Z", &first, &["--no-run"]);
    assert_eq!(run.outcome("s1", "hourly"), "queued");
    // The clock goes back an hour and a half: the 10:00 invocation is in its future.
    let second = p.events("b.ndjson", &[ev("s2", "test.clock.stepped", json!({}))]);
    let run = p.dispatch("2026-03-11T08:30:00Z", &second, &["--no-run"]);
    assert_eq!(run.outcome("s2", "hourly"), "queued", "{}", run.stdout);
    let third = p.events("c.ndjson", &[ev("s3", "test.clock.stepped", json!({}))]);
    let run = p.dispatch("2026-03-11T08:45:00Z", &third, &["--no-run"]);
    assert_eq!(run.outcome("s3", "hourly"), "throttled", "{}", run.stdout);
}

#[test]
fn event_times_are_checked_by_rfc_3339_not_by_a_library() {
    let p = project();
    let at = |id: &str, time: &str| {
        json!({"pap_version": "0.2", "id": id, "type": "test.clock.stepped", "source": "t",
               "time": time, "data": {}})
    };
    let file = p.events(
        "times.ndjson",
        &[
            at("fraction", "2026-03-11T06:00:00.123456789012Z"),
            at("late", "9999-12-31T23:59:59Z"),
            at("leap", "2016-12-31T23:59:60Z"),
            at("offset", "2026-03-11T06:00:00+25:00"),
            at("feb", "2025-02-29T06:00:00Z"),
        ],
    );
    let run = p.dispatch(T0, &file, &["--dry-run"]);
    for ok in ["fraction", "late", "leap"] {
        assert_eq!(
            run.event(ok)["status"],
            "dispatched",
            "{ok}: {}",
            run.stdout
        );
    }
    let offset = run.event("offset")["error"].as_str().unwrap().to_owned();
    assert!(
        offset.contains("the offset 25:00 is not -23:59 to +23:59"),
        "{offset}"
    );
    let feb = run.event("feb")["error"].as_str().unwrap().to_owned();
    assert!(feb.contains("day 29 is not in 2025-02"), "{feb}");
}

#[test]
fn a_rejection_needs_a_reason() {
    let p = project();
    for reason in ["", "   "] {
        let out = p
            .cmd(T0)
            .args(["reject", "inv_0", "--reason", reason])
            .output()
            .unwrap();
        assert_eq!(code(&out), 2, "{reason:?}");
        assert!(
            stderr(&out).contains("must not be empty"),
            "{}",
            stderr(&out)
        );
    }
}

/// Runs `pap … dispatch FILE` into `| head -1` with bash, stderr as `redirect` says;
/// returns pap's exit status and what reached the terminal's stderr.
fn into_head(p: &Project, file: &std::path::Path, redirect: &str) -> (i32, String) {
    let script = format!(
        r#""$0" --root "$1" dispatch --no-run "$2" {redirect} | head -1 >/dev/null; echo "status ${{PIPESTATUS[0]}}" >&3"#
    );
    let out = Command::new("bash")
        .arg("-c")
        .arg(format!("exec 3>&1; {script}"))
        .arg(env!("CARGO_BIN_EXE_pap"))
        .arg(p.root())
        .arg(file)
        .env("PAP_NOW", T0)
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    let status = stdout(&out)
        .trim()
        .strip_prefix("status ")
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("{}{}", stdout(&out), stderr(&out)));
    (status, stderr(&out))
}

#[test]
fn a_reader_that_goes_away_is_not_an_error() {
    let p = project();
    let events: Vec<_> = (0..4000)
        .map(|i| ev(&format!("p{i}"), "test.key.collided", json!({})))
        .collect();
    let file = p.events("many.ndjson", &events);
    let (status, err) = into_head(&p, &file, "");
    assert_eq!(status, 0, "{err}");
    assert!(err.is_empty(), "{err}");
    // Every event was decided all the same.
    assert_eq!(p.invocations().len(), 8000);

    let again: Vec<_> = (0..4000)
        .map(|i| ev(&format!("q{i}"), "test.key.collided", json!({})))
        .collect();
    let file = p.events("again.ndjson", &again);
    let (status, err) = into_head(&p, &file, "2>&-");
    assert_eq!(status, 0, "with stderr closed too: {err}");
    assert_eq!(p.invocations().len(), 16000);
}

#[test]
fn an_invocation_whose_agent_was_removed_ends_failed() {
    let p = project();
    let file = p.events("a.ndjson", &[ev("r1", "test.key.audited", json!({}))]);
    let run = p.dispatch(T0, &file, &["--no-run"]);
    let id = run.trigger("r1", "audited")["invocation_id"]
        .as_str()
        .unwrap()
        .to_owned();
    std::fs::remove_file(p.root().join("agents/careful.yaml")).unwrap();
    std::fs::remove_file(p.root().join("triggers/audited.yaml")).unwrap();
    let out = p.cmd(T0).args(["serve", "--once"]).output().unwrap();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let inv = p.invocation(&id);
    assert_eq!(inv["status"], "failed", "{inv}");
    assert!(
        inv["error"]
            .as_str()
            .unwrap()
            .contains("agent careful is no longer in the project"),
        "{inv}"
    );
}

#[test]
fn an_emit_file_is_read_a_bounded_line_at_a_time_and_only_if_it_is_a_file() {
    let p = project();
    let file = p.events(
        "e.ndjson",
        &[
            ev("fifo", "test.emit.bad", json!({"how": "fifo"})),
            ev("huge", "test.emit.bad", json!({"how": "huge"})),
        ],
    );
    let started = Instant::now();
    let run = p.dispatch(T0, &file, &[]);
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "it waited on the FIFO"
    );
    assert_eq!(run.code, 4, "{}", run.stdout);
    let error = |event: &str| {
        let id = run.trigger(event, "bad-emit")["invocation_id"]
            .as_str()
            .unwrap()
            .to_owned();
        p.invocation(&id)["error"].as_str().unwrap().to_owned()
    };
    assert!(
        error("fifo").contains("not a regular file"),
        "{}",
        error("fifo")
    );
    assert!(
        error("huge").contains("line 1: longer than 1048576 bytes"),
        "{}",
        error("huge")
    );
}

#[test]
fn duplicate_member_names_make_an_event_invalid() {
    let p = project();
    let line = r#"{"pap_version":"0.2","id":"d1","type":"test.key.collided","type":"test.clock.stepped","source":"s","time":"2026-03-11T05:59:00Z","data":{}}"#;
    let nested = r#"{"pap_version":"0.2","id":"d2","type":"test.key.collided","source":"s","time":"2026-03-11T05:59:00Z","data":{"k":1,"k":2}}"#;
    let file = p.write("dup.ndjson", &format!("{line}\n{nested}\n"));
    let run = p.dispatch(T0, &file, &["--no-run"]);
    assert_eq!(run.code, 3, "{}", run.stdout);
    assert_eq!(run.lines.len(), 2);
    for l in &run.lines {
        assert_eq!(l["status"], "invalid", "{l}");
        assert!(
            l["error"].as_str().unwrap().contains("appears twice"),
            "{l}"
        );
    }
    assert!(p.invocations().is_empty());
    // In a JSON array too.
    let array = p.write("dup.json", &format!("[{nested}]"));
    let run = p.dispatch(T0, &array, &["--no-run"]);
    assert_eq!(run.code, 3, "{}", run.stdout);
}
