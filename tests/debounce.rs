//! Debounce (a pap extension) through the real binary on the injected clock: a leading
//! debounce lets the first event of a burst through and waits for a quiet period; a trailing
//! one decides every event of a burst `debounced` and, once it has been quiet, `pap serve`
//! makes one invocation with the last event's data, exactly once across serve restarts.

use crate::common;

use std::path::Path;
use std::process::Output;

use serde_json::{Value, json};

const T0_SECS: i64 = 1_773_208_800; // 2026-03-11T06:00:00Z

fn at(offset_secs: i64) -> String {
    jiff::Timestamp::from_second(T0_SECS + offset_secs)
        .unwrap()
        .to_string()
}

/// A project with one debounced trigger (`mode`), whose agent appends the invocation it
/// gets to `runs.ndjson` in the project.
fn project(mode: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir_all(root.join("triggers")).unwrap();
    std::fs::create_dir_all(root.join("agents")).unwrap();
    std::fs::write(root.join("pap.yaml"), "pap_version: \"0.2\"\n").unwrap();
    let runs = root.join("runs.ndjson");
    std::fs::write(
        root.join("agents/fix.yaml"),
        format!(
            "pap_version: \"0.2\"\nagent:\n  id: fix\n  risk_level: low\n  model:\n    provider: command\n    command: [\"sh\", \"-c\", \"cat >> '{}'; echo >> '{}'; echo '{{}}'\"]\n",
            runs.display(),
            runs.display()
        ),
    )
    .unwrap();
    std::fs::write(
        root.join("triggers/alert.yaml"),
        format!(
            "pap_version: \"0.2\"\ntrigger:\n  id: alert\n  match:\n    type: host.alert.fired\n  debounce: {{seconds: 60, window_key: $.data.host, mode: {mode}}}\n  agent: fix\n"
        ),
    )
    .unwrap();
    dir
}

fn dispatch(root: &Path, offset: i64, id: &str, host: &str, n: u32, extra: &[&str]) -> Value {
    let event = json!({
        "pap_version": "0.2", "id": id, "type": "host.alert.fired", "source": "test",
        "time": at(offset), "data": {"host": host, "n": n}
    });
    let file = root.join(format!("{id}.json"));
    std::fs::write(&file, event.to_string()).unwrap();
    let out = common::pap_at(root)
        .env("PAP_NOW", at(offset))
        .arg("dispatch")
        .arg(&file)
        .args(["--json"])
        .args(extra)
        .output()
        .unwrap();
    assert_eq!(common::code(&out), 0, "{}", common::stderr(&out));
    let line: Value = serde_json::from_str(common::stdout(&out).lines().next().unwrap()).unwrap();
    line["triggers"][0].clone()
}

fn serve_once(root: &Path, offset: i64) -> Output {
    let out = common::pap_at(root)
        .env("PAP_NOW", at(offset))
        .args(["serve", "--once", "--log-format", "json"])
        .output()
        .unwrap();
    assert_eq!(common::code(&out), 0, "{}", common::stderr(&out));
    out
}

fn runs(root: &Path) -> Vec<Value> {
    std::fs::read_to_string(root.join("runs.ndjson"))
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn leading_debounce_acts_on_the_first_event_of_a_burst() {
    let dir = project("leading");
    let root = dir.path();
    let first = dispatch(root, 0, "e1", "db1", 1, &["--no-run"]);
    assert_eq!(first["outcome"], "queued");
    // 30 s later, then 50 s after that: the burst goes on.
    let second = dispatch(root, 30, "e2", "db1", 2, &["--no-run"]);
    assert_eq!(second["outcome"], "debounced");
    let reason = second["reason"].as_str().unwrap();
    assert!(
        reason.contains("leading debounce")
            && reason.contains("2026-03-11T06:00:00.000Z")
            && reason.contains("window key \"db1\""),
        "{reason}"
    );
    assert_eq!(
        dispatch(root, 80, "e3", "db1", 3, &["--no-run"])["outcome"],
        "debounced"
    );
    // Another host is another burst.
    assert_eq!(
        dispatch(root, 81, "e4", "db2", 1, &["--no-run"])["outcome"],
        "queued"
    );
    // 61 s after the last event of db1's burst: a new burst.
    let explained = dispatch(root, 141, "e5", "db1", 4, &["--no-run", "--explain"]);
    assert_eq!(explained["outcome"], "queued");
    let stages: Vec<&str> = explained["explain"]["stages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["stage"].as_str().unwrap())
        .collect();
    assert_eq!(
        stages,
        ["filter", "idempotency", "cascade", "debounce", "risk"]
    );
    // A debounced event was decided: sent again, it is a duplicate.
    assert_eq!(
        dispatch(root, 150, "e2", "db1", 2, &["--no-run"])["outcome"],
        "duplicate"
    );
}

/// The boundary: a burst of 10 with a trailing debounce fires once after the quiet
/// period, with the last event's data, also across serve restarts (every `serve --once` is
/// a new process).
#[test]
fn trailing_debounce_fires_once_after_the_quiet_period() {
    let dir = project("trailing");
    let root = dir.path();
    for i in 0..10u32 {
        let t = dispatch(root, i64::from(i) * 10, &format!("e{i}"), "db1", i + 1, &[]);
        assert_eq!(t["outcome"], "debounced", "event {i}");
        assert!(t["invocation_id"].is_null());
        if i == 9 {
            let reason = t["reason"].as_str().unwrap();
            assert!(
                reason.contains("at 2026-03-11T06:02:30.000Z") && reason.contains("pap serve"),
                "{reason}"
            );
        }
    }
    // Nothing ran during the burst, and nothing fires a second before its time.
    let before = serve_once(root, 149);
    assert!(runs(root).is_empty(), "{}", common::stderr(&before));
    // The quiet period has passed: one invocation, with the last event.
    let fired = serve_once(root, 150);
    let log = common::stderr(&fired);
    assert!(log.contains("trailing debounce fired"), "{log}");
    let ran = runs(root);
    assert_eq!(ran.len(), 1, "{log}");
    assert_eq!(ran[0]["event"]["id"], "e9");
    assert_eq!(ran[0]["event"]["data"]["n"], 10);
    // Later serves (new processes) never fire it again.
    serve_once(root, 151);
    serve_once(root, 3600);
    assert_eq!(runs(root).len(), 1);
    // A new burst later fires again.
    dispatch(root, 4000, "late", "db1", 11, &[]);
    serve_once(root, 4059);
    assert_eq!(runs(root).len(), 1);
    serve_once(root, 4060);
    let ran = runs(root);
    assert_eq!(ran.len(), 2);
    assert_eq!(ran[1]["event"]["id"], "late");
}

/// Durations are said in words: a quiet period past any sensible bound is a lint error that
/// names the file and the line, and a valid one reads as a duration in every reason.
#[test]
fn a_quiet_period_past_a_year_is_refused_and_valid_ones_read_as_durations() {
    let dir = project("trailing");
    let root = dir.path();
    let trigger = root.join("triggers/alert.yaml");
    let text = std::fs::read_to_string(&trigger).unwrap();
    std::fs::write(
        &trigger,
        text.replace("seconds: 60", "seconds: 106751991167300"),
    )
    .unwrap();
    let out = common::pap_at(root).arg("lint").output().unwrap();
    assert_eq!(common::code(&out), 1);
    let said = common::stdout(&out);
    assert!(said.contains("debounce-range"), "{said}");
    assert!(said.contains("triggers/alert.yaml:"), "{said}");
    assert!(said.contains("between 1 and 31536000"), "{said}");
    // Dispatch refuses the project as lint does: nothing is decided with such a value.
    let file = root.join("e.json");
    std::fs::write(
        &file,
        json!({"pap_version": "0.2", "id": "e1", "type": "host.alert.fired", "source": "t",
               "time": at(0), "data": {"host": "h"}})
        .to_string(),
    )
    .unwrap();
    let out = common::pap_at(root)
        .arg("dispatch")
        .arg(&file)
        .output()
        .unwrap();
    assert_ne!(common::code(&out), 0);

    // Two hours and a half: said as such, not as a count of seconds.
    std::fs::write(&trigger, text.replace("seconds: 60", "seconds: 9000")).unwrap();
    let out = common::pap_at(root)
        .env("PAP_NOW", at(0))
        .args(["dispatch", "--dry-run"])
        .arg(&file)
        .output()
        .unwrap();
    let said = common::stdout(&out);
    assert!(said.contains("quiet for 2h30m"), "{said}");
    assert!(!said.contains("9000"), "{said}");
}

/// A trailing debounce whose burst went quiet is made by `pap serve`: with none running,
/// `pap status` says the fire is due and needs a person (exit 5), as it does for due work.
#[test]
fn status_says_a_fire_is_due_when_no_serve_runs() {
    let dir = project("trailing");
    let root = dir.path();
    let first = dispatch(root, 0, "e1", "db1", 1, &["--no-run"]);
    assert_eq!(first["outcome"], "debounced");
    let status = |offset: i64| {
        common::pap_at(root)
            .env("PAP_NOW", at(offset))
            .arg("status")
            .output()
            .unwrap()
    };
    let quiet = status(30);
    assert_eq!(common::code(&quiet), 0, "{}", common::stdout(&quiet));
    let due = status(61);
    assert_eq!(common::code(&due), 5, "{}", common::stdout(&due));
    assert!(
        common::stdout(&due)
            .contains("a debounce or batch has been due since 2026-03-11T06:01:00.000Z"),
        "{}",
        common::stdout(&due)
    );
}
