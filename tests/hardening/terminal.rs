//! Untrusted text never reaches a terminal raw: control characters in an event's identity
//! make it invalid, and agent output and errors are escaped in human output (JSON stays
//! exact JSON).

use crate::common::dispatch::{T0, ev, lines};
use crate::common::stdout;
use serde_json::{Value, json};

use super::project;

/// No byte of a terminal control sequence (ESC, BEL, CR, NUL, C1 CSI) in `text`.
fn assert_inert(text: &str) {
    for bad in ['\x1b', '\x07', '\r', '\0', '\u{9b}'] {
        assert!(!text.contains(bad), "raw {bad:?} in:\n{text:?}");
    }
}

#[test]
fn control_characters_in_identity_make_an_event_invalid() {
    let p = project();
    let file = p.events(
        "e.ndjson",
        &[
            ev("e1\u{1b}[2K\rforged", "test.output.hostile", json!({})),
            ev("e2", "test.output.\u{1b}hostile", json!({})),
            json!({"pap_version": "0.2", "id": "e3", "type": "test.output.hostile",
                   "source": "s\u{9b}1A", "time": "2026-03-11T05:59:00Z", "data": {}}),
        ],
    );
    let run = p.dispatch(T0, &file, &["--no-run"]);
    assert_eq!(run.code, 3, "{}", run.stdout);
    assert_eq!(run.lines.len(), 3);
    for line in &run.lines {
        assert_eq!(line["status"], "invalid", "{line}");
    }
    assert!(
        run.lines[0]["error"]
            .as_str()
            .unwrap()
            .contains("`id` has the control character")
    );
    assert!(
        run.lines[2]["error"]
            .as_str()
            .unwrap()
            .contains("`source` has the control")
    );
    // The human lines name them with the characters escaped.
    let human = p
        .cmd(T0)
        .args(["dispatch", "--no-run"])
        .arg(&file)
        .output()
        .unwrap();
    let text = stdout(&human);
    assert_inert(&text);
    assert!(text.contains("invalid"), "{text}");
}

#[test]
fn agent_output_and_errors_are_escaped_for_humans_and_exact_in_json() {
    let p = project();
    let file = p.events(
        "e.ndjson",
        &[
            ev("ok1", "test.output.hostile", json!({})),
            ev("bad1", "test.output.hostile", json!({"fail": true})),
        ],
    );
    let human = p.cmd(T0).arg("dispatch").arg(&file).output().unwrap();
    assert_inert(&stdout(&human));
    assert_inert(&String::from_utf8_lossy(&human.stderr));

    let list = p.cmd(T0).arg("invocations").output().unwrap();
    assert_inert(&stdout(&list));
    let all: Vec<Value> = lines(&stdout(
        &p.cmd(T0).args(["invocations", "--json"]).output().unwrap(),
    ));
    assert_eq!(all.len(), 2);
    for inv in &all {
        let id = inv["id"].as_str().unwrap();
        let shown = p
            .cmd(T0)
            .args(["invocations", "show", id])
            .output()
            .unwrap();
        let text = stdout(&shown);
        assert_inert(&text);
        if inv["status"] == "succeeded" {
            assert!(text.contains("\\u{1b}]8;;http://evil.example"), "{text}");
            // JSON keeps the exact bytes.
            let exact = p.invocation(id);
            let output = exact["output"].to_string();
            assert!(
                output.contains("\\u001b]8;;http://evil.example\\u0007"),
                "{output}"
            );
        } else {
            assert_eq!(inv["status"], "failed", "{inv}");
            assert!(text.contains("]0;title"), "{text}");
        }
    }
    let inbox = p.cmd(T0).arg("inbox").output().unwrap();
    assert_inert(&stdout(&inbox));
    let notes = p.cmd(T0).arg("notifications").output().unwrap();
    assert_inert(&stdout(&notes));
}
