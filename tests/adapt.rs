//! Webhook bodies tried offline: `pap adapt NAME FILE` prints the events a post of
//! the body to `/v1/ingest/NAME` makes, and `pap dispatch --adapter NAME FILE` decides them.
//! Both use serve's own mapping, so the events are the ones serve decides from the same body
//! (checked against a real `pap serve` with curl); a bad element is named by its index and
//! the others still count; an unknown adapter, an oversized body and a body that is not JSON
//! are refused, each with its exit status.

use crate::common;

use std::path::Path;
use std::process::Output;

use common::http::{curl_available, high_severity_trigger, post, project, serve};
use common::serve::Project;
use common::{code, stderr, stdout};
use serde_json::{Value, json};

fn fixture_text(name: &str) -> String {
    std::fs::read_to_string(common::fixture(&format!("webhooks/{name}"))).unwrap()
}

/// `pap adapt NAME FILES…` in the project `p`.
fn adapt(p: &Project, name: &str, files: &[&Path]) -> Output {
    p.cmd().args(["adapt", name]).args(files).output().unwrap()
}

/// `pap dispatch --adapter NAME ARGS… FILE` in the project `p`.
fn dispatch_body(p: &Project, name: &str, args: &[&str], file: &Path) -> Output {
    p.cmd()
        .args(["dispatch", "--adapter", name])
        .args(args)
        .arg(file)
        .output()
        .unwrap()
}

/// The lines of `pap adapt`'s stdout, as events.
fn events(out: &Output) -> Vec<Value> {
    stdout(out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// The captured Alertmanager body with a second alert, so the mapping walks `alerts`.
fn two_alerts(dir: &Path) -> std::path::PathBuf {
    let mut body: Value =
        serde_json::from_str(&fixture_text("alertmanager-v4-captured.json")).unwrap();
    let mut second = body["alerts"][0].clone();
    second["fingerprint"] = json!("0123456789abcdef");
    second["labels"]["instance"] = json!("api:8001");
    body["alerts"].as_array_mut().unwrap().push(second);
    let path = dir.join("two-alerts.json");
    std::fs::write(&path, body.to_string()).unwrap();
    path
}

#[test]
fn adapt_prints_the_events_serve_decides_from_the_same_body() {
    let p = project("");
    high_severity_trigger(&p, "t-am-firing", "alertmanager.alert.firing");
    let body = two_alerts(p.root());
    let out = adapt(&p, "alertmanager", &[&body]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let made = events(&out);
    assert_eq!(made.len(), 2, "{made:?}");
    assert_eq!(
        made[0]["id"],
        "am-948c667b1fc76492-firing-2022-10-04T13:32:56.014Z"
    );
    assert_eq!(made[0]["type"], "alertmanager.alert.firing");
    assert_eq!(made[0]["pap_version"], "0.2");
    assert_eq!(made[1]["data"]["labels"]["instance"], "api:8001");
    // The group's fields ride along on each alert's event.
    assert_eq!(made[1]["data"]["receiver"], "webhook_receiver");

    if !curl_available() {
        return;
    }
    let (_serve, url) = serve(&p, &[], &[]);
    let text = std::fs::read(&body).unwrap();
    let r = post(
        &format!("{url}/v1/ingest/alertmanager"),
        "application/json",
        &text,
        &[],
    );
    assert_eq!(r.status, 200, "{r:?}");
    let decided: Vec<(Value, Value)> = r
        .lines()
        .iter()
        .map(|l| (l["event_id"].clone(), l["type"].clone()))
        .collect();
    let printed: Vec<(Value, Value)> = made
        .iter()
        .map(|e| (e["id"].clone(), e["type"].clone()))
        .collect();
    assert_eq!(decided, printed, "serve's events and pap adapt's");
}

#[test]
fn dispatch_with_an_adapter_decides_the_body_once() {
    let p = project("");
    high_severity_trigger(&p, "t-am-firing", "alertmanager.alert.firing");
    let body = two_alerts(p.root());
    let decide = || dispatch_body(&p, "alertmanager", &["--no-run", "--json"], &body);
    let first = decide();
    assert_eq!(code(&first), 0, "{}", stderr(&first));
    let lines: Vec<Value> = stdout(&first)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2, "{lines:?}");
    for (i, line) in lines.iter().enumerate() {
        assert_eq!(line["triggers"][0]["outcome"], "queued", "{line}");
        let input = line["input"].as_str().unwrap();
        assert!(input.ends_with(&format!("two-alerts.json[{i}]")), "{input}");
    }
    // Alertmanager sends a firing alert again at every repeat: decided once.
    let again = decide();
    let outcomes: Vec<String> = stdout(&again)
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            v["triggers"][0]["outcome"].as_str().unwrap().to_owned()
        })
        .collect();
    assert_eq!(outcomes, ["duplicate", "duplicate"]);

    // A dry run of a body from stdin explains, and records nothing.
    let out = p
        .cmd()
        .args([
            "dispatch",
            "--adapter",
            "grafana",
            "--dry-run",
            "--explain",
            "-",
        ])
        .stdin(
            std::fs::File::open(common::fixture(
                "webhooks/grafana-webhook-docs-example.json",
            ))
            .unwrap(),
        )
        .output()
        .unwrap();
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    assert!(
        stdout(&out).contains("grafana.alert.firing"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn a_bad_element_is_named_and_the_others_still_count() {
    let p = project("");
    let mut body: Value =
        serde_json::from_str(&fixture_text("alertmanager-v4-captured.json")).unwrap();
    let mut bad = body["alerts"][0].clone();
    bad["startsAt"] = json!("yesterday");
    body["alerts"].as_array_mut().unwrap().push(bad);
    let path = p.root().join("one-bad.json");
    std::fs::write(&path, body.to_string()).unwrap();

    let out = adapt(&p, "alertmanager", &[&path]);
    assert_eq!(code(&out), 3, "{}", stderr(&out));
    assert_eq!(events(&out).len(), 1);
    let said = stderr(&out);
    assert!(said.contains("one-bad.json[1]"), "{said}");
    assert!(said.contains("adapter `alertmanager`"), "{said}");

    let out = dispatch_body(&p, "alertmanager", &["--json"], &path);
    assert_eq!(code(&out), 3, "{}", stderr(&out));
    let statuses = common::statuses(&out);
    assert_eq!(statuses, ["no_match", "invalid"], "{}", stdout(&out));
}

#[test]
fn unknown_adapters_oversized_and_broken_bodies_are_refused() {
    let p = project("listen:\n  max_body_bytes: 2048\n");
    let out = p
        .cmd()
        .args(["adapt", "x-unknown-0"])
        .arg(common::fixture("webhooks/alertmanager-v4-captured.json"))
        .output()
        .unwrap();
    assert_eq!(code(&out), 2);
    let said = stderr(&out);
    assert!(said.contains("no adapter `x-unknown-0`"), "{said}");
    assert!(said.contains("alertmanager, grafana"), "{said}");
    let out = p
        .cmd()
        .args(["dispatch", "--adapter", "x-unknown-0", "x.json"])
        .output()
        .unwrap();
    assert_eq!(code(&out), 2, "{}", stderr(&out));

    // Bounded as serve bounds a post: listen.max_body_bytes.
    let big = p.root().join("big.json");
    let mut body: Value =
        serde_json::from_str(&fixture_text("alertmanager-v4-captured.json")).unwrap();
    body["commonAnnotations"]["description"] = json!("x".repeat(4096));
    std::fs::write(&big, body.to_string()).unwrap();
    let out = adapt(&p, "alertmanager", &[&big]);
    assert_eq!(code(&out), 1);
    assert!(
        stderr(&out).contains("listen.max_body_bytes"),
        "{}",
        stderr(&out)
    );

    // Not JSON, and JSON without alerts: no events, said once per body.
    let broken = p.root().join("broken.json");
    std::fs::write(&broken, "{\"alerts\": [").unwrap();
    let none = p.root().join("none.json");
    std::fs::write(&none, "{\"status\": \"firing\"}").unwrap();
    let out = p
        .cmd()
        .args(["adapt", "alertmanager"])
        .args([&broken, &none])
        .output()
        .unwrap();
    assert_eq!(code(&out), 3);
    let said = stderr(&out);
    assert!(
        said.contains("broken.json: the body is not valid JSON"),
        "{said}"
    );
    assert!(
        said.contains("none.json: adapter `alertmanager`: the body has no `$.alerts`"),
        "{said}"
    );
    assert!(stdout(&out).is_empty());
}

/// A one-route HTTP server on loopback that keeps every body posted to it (what a real
/// Alertmanager sends), answering 200.
pub(crate) struct Capture {
    pub(crate) url: String,
    pub(crate) bodies: std::sync::Arc<std::sync::Mutex<Vec<Vec<u8>>>>,
}

pub(crate) fn capture() -> Capture {
    use std::io::{BufRead, BufReader, Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let bodies = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let kept = bodies.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let mut reader = BufReader::new(stream);
            let mut length = 0usize;
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 {
                    break;
                }
                let line = line.trim_end();
                if line.is_empty() {
                    break;
                }
                if let Some((name, value)) = line.split_once(':')
                    && name.eq_ignore_ascii_case("content-length")
                {
                    length = value.trim().parse().unwrap_or(0);
                }
            }
            let mut body = vec![0; length];
            if reader.read_exact(&mut body).is_ok() && !body.is_empty() {
                kept.lock().unwrap().push(body);
            }
            let _ = reader
                .get_mut()
                .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
        }
    });
    Capture { url, bodies }
}

#[test]
fn a_real_alertmanager_body_is_adapted_and_decided_offline() {
    let Some(program) = crate::http_clients::alertmanager_and_amtool(
        "pap adapt is not checked on a body a real Alertmanager sent",
    ) else {
        return;
    };
    let p = project("");
    high_severity_trigger(&p, "t-am-firing", "alertmanager.alert.firing");
    let sink = capture();
    let am = crate::http_clients::alertmanager(&p, &program, &sink.url);
    crate::http_clients::amtool(
        &am,
        &["--annotation=summary=p99 above 2s", "instance=api:8000"],
    );
    common::serve::wait_until("Alertmanager's webhook", || {
        !sink.bodies.lock().unwrap().is_empty()
    });
    let body = p.root().join("from-alertmanager.json");
    std::fs::write(&body, &sink.bodies.lock().unwrap()[0]).unwrap();

    let out = adapt(&p, "alertmanager", &[&body]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let made = events(&out);
    assert_eq!(made.len(), 1, "{made:?}");
    assert_eq!(made[0]["type"], "alertmanager.alert.firing");
    assert_eq!(made[0]["data"]["labels"]["alertname"], "PapHighLatency");
    assert_eq!(made[0]["data"]["labels"]["instance"], "api:8000");
    assert_eq!(made[0]["data"]["annotations"]["summary"], "p99 above 2s");

    let decide = || {
        let out = p
            .cmd()
            .args([
                "dispatch",
                "--adapter",
                "alertmanager",
                "--no-run",
                "--json",
            ])
            .arg(&body)
            .output()
            .unwrap();
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        let line: Value = serde_json::from_str(stdout(&out).trim()).unwrap();
        assert_eq!(line["event_id"], made[0]["id"]);
        line["triggers"][0]["outcome"].as_str().unwrap().to_owned()
    };
    assert_eq!(decide(), "queued");
    assert_eq!(decide(), "duplicate");
}
