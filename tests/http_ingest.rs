//! `POST /v1/events` with curl as the client: every content type, the status codes that
//! tell a sender whether to retry, who may post, hostile and slow clients, overload, a stop
//! while requests wait, and HTTPS.

use crate::common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::dispatch::ev;
use common::http::{curl, curl_available, post, post_once_allowed, project, serve};
use common::serve::{Project, wait_until};
use common::{code, stderr};
use serde_json::{Value, json};

fn quick(id: &str) -> Value {
    ev(id, "test.quick.happened", json!({"n": 1}))
}

fn quick_ce(id: &str) -> Value {
    json!({"specversion": "1.0", "id": id, "type": "test.quick.happened", "source": "/ce",
           "time": "2026-03-11T05:59:00Z", "data": {"n": 2}})
}

/// POSTs the quick event `id` as application/json to `url`/v1/events.
fn post_quick(url: &str, id: &str) -> common::http::Reply {
    post(
        &format!("{url}/v1/events"),
        "application/json",
        quick(id).to_string().as_bytes(),
        &[],
    )
}

/// [`post_quick`] on another thread, once serve holds it waiting (`PAP_TEST_INGEST_DELAY_MS`).
fn post_quick_waiting(url: &str, id: &str) -> std::thread::JoinHandle<common::http::Reply> {
    let (url2, id) = (url.to_owned(), id.to_owned());
    let handle = std::thread::spawn(move || post_quick(&url2, &id));
    wait_until("the request to wait for its decision", || {
        curl(&[&format!("{url}/readyz")], None).json()["events_waiting"] == 1
    });
    handle
}

fn outcome(line: &Value) -> &str {
    line["triggers"][0]["outcome"].as_str().unwrap_or("")
}

fn succeeded(p: &Project, event_id: &str) -> bool {
    p.invocations_of(event_id)
        .iter()
        .any(|i| i["status"] == "succeeded")
}

#[test]
fn every_content_type_is_decided_answered_as_queued_then_run_once() {
    if !curl_available() {
        return;
    }
    let p = project("");
    let (_serve, url) = serve(&p, &[], &[]);
    let events = format!("{url}/v1/events");

    let one = post(
        &events,
        "application/json",
        quick("j1").to_string().as_bytes(),
        &[],
    );
    assert_eq!(one.status, 200, "{one:?}");
    assert_eq!(one.header("content-type"), Some("application/x-ndjson"));
    let line = &one.lines()[0];
    assert_eq!(line["event_id"], "j1");
    assert_eq!(outcome(line), "queued", "{line}");
    assert!(line["triggers"][0]["invocation_id"].is_string());
    assert_eq!(line["input"], "request:1");

    let array = json!([quick("a1"), quick("a2")]).to_string();
    let r = post(
        &events,
        "application/json; charset=utf-8",
        array.as_bytes(),
        &[],
    );
    assert_eq!(r.status, 200);
    let got: Vec<_> = r.lines().iter().map(|l| l["input"].clone()).collect();
    assert_eq!(got, [json!("request[0]"), json!("request[1]")]);

    let nd = format!("{}\n{}\n", quick("n1"), quick("n2"));
    let r = post(&events, "application/x-ndjson", nd.as_bytes(), &[]);
    assert_eq!(r.status, 200);
    assert_eq!(r.lines().len(), 2);

    let r = post(
        &events,
        "application/cloudevents+json",
        quick_ce("c1").to_string().as_bytes(),
        &[],
    );
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(outcome(&r.lines()[0]), "queued");

    let batch = json!([quick_ce("b1"), quick_ce("b2")]).to_string();
    let r = post(
        &events,
        "application/cloudevents-batch+json",
        batch.as_bytes(),
        &[],
    );
    assert_eq!(r.status, 200, "{r:?}");
    assert!(r.lines().iter().all(|l| outcome(l) == "queued"));

    // Binary mode: the attributes in ce-* headers, the body is the data.
    let r = post(
        &events,
        "application/json",
        br#"{"n": 3}"#,
        &[
            "-H",
            "ce-specversion: 1.0",
            "-H",
            "ce-id: bin1",
            "-H",
            "ce-type: test.quick.happened",
            "-H",
            "ce-source: %2Fbinary",
            "-H",
            "ce-time: 2026-03-11T05:59:00Z",
        ],
    );
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.lines()[0]["event_id"], "bin1");

    // Serve runs what was queued; a re-send is a duplicate and runs nothing more.
    for id in ["j1", "a1", "a2", "n1", "n2", "c1", "b1", "b2", "bin1"] {
        wait_until(&format!("{id} ran"), || succeeded(&p, id));
    }
    let again = post(
        &events,
        "application/json",
        quick("j1").to_string().as_bytes(),
        &[],
    );
    assert_eq!(again.status, 200);
    assert_eq!(outcome(&again.lines()[0]), "duplicate");
    assert_eq!(p.invocations_of("j1").len(), 1);
    let data = &p.invocations_of("bin1")[0];
    assert_eq!(data["event_id"], "bin1");
}

#[test]
fn bad_bodies_get_the_status_that_tells_a_sender_whether_to_retry() {
    if !curl_available() {
        return;
    }
    let p = project("listen:\n  max_body_bytes: 4096\n");
    let (_serve, url) = serve(&p, &[], &[]);
    let events = format!("{url}/v1/events");

    // Every event invalid: 400 (a retry would be refused again), each line says why.
    let reserved = ev("r1", "pap.agent.invocation.completed", json!({}));
    let r = post(
        &events,
        "application/json",
        reserved.to_string().as_bytes(),
        &[],
    );
    assert_eq!(r.status, 400, "{r:?}");
    let line = &r.lines()[0];
    assert_eq!(line["status"], "invalid");
    assert!(line["error"].as_str().unwrap().contains("pap."), "{line}");

    // One valid, one not: 200, and the valid one is decided.
    let mixed = format!("{}\n{{\"pap_version\": \"0.2\"}}\n", quick("m1"));
    let r = post(&events, "application/x-ndjson", mixed.as_bytes(), &[]);
    assert_eq!(r.status, 200);
    let ls = r.lines();
    assert_eq!(
        (ls[0]["status"].as_str(), ls[1]["status"].as_str()),
        (Some("dispatched"), Some("invalid"))
    );

    let r = post(&events, "application/json", b"", &[]);
    assert_eq!(r.status, 400);
    assert!(r.json()["error"].as_str().unwrap().contains("no events"));

    let r = post(
        &events,
        "text/plain",
        quick("t1").to_string().as_bytes(),
        &[],
    );
    assert_eq!(r.status, 415, "{r:?}");
    let r = curl(
        &["-X", "POST", &events],
        Some(quick("t2").to_string().as_bytes()),
    );
    // curl sends application/x-www-form-urlencoded by default.
    assert_eq!(r.status, 415);

    let big = format!("[{}]", vec![quick("big").to_string(); 40].join(","));
    assert!(big.len() > 4096);
    let r = post(&events, "application/json", big.as_bytes(), &[]);
    assert_eq!(r.status, 413, "{r:?}");
    assert!(
        r.json()["error"]
            .as_str()
            .unwrap()
            .contains("max_body_bytes")
    );

    // Invalid UTF-8 inside a string, and hostile nesting: refused as events, quickly.
    let mut bad = quick("u1").to_string().into_bytes();
    let at = bad.windows(2).position(|w| w == b"u1").unwrap();
    bad[at] = 0xff;
    let r = post(&events, "application/json", &bad, &[]);
    assert_eq!(r.status, 400, "{r:?}");
    let deep = format!("{}{}", "[".repeat(2000), "]".repeat(2000));
    let started = Instant::now();
    let r = post(&events, "application/json", deep.as_bytes(), &[]);
    assert_eq!(r.status, 400);
    assert!(started.elapsed() < Duration::from_secs(5));

    let r = curl(&[&format!("{url}/nowhere")], None);
    assert_eq!(r.status, 404);

    // Nothing of the refused bodies was recorded (m1's run emitted its completion event,
    // which the fixture's follower trigger takes).
    let ids: Vec<String> = p
        .invocations()
        .iter()
        .map(|i| i["event_id"].as_str().unwrap().to_owned())
        .collect();
    assert!(ids.contains(&"m1".to_owned()), "{ids:?}");
    for refused in ["r1", "t1", "t2", "big", "u1"] {
        assert!(
            !ids.iter().any(|id| id == refused),
            "{refused} recorded: {ids:?}"
        );
    }
}

const PRINCIPALS: &str = "listen:
  auth:
    principals:
      - name: alertmanager
        token: ${AM_TOKEN}
        scopes: [ingest]
      - name: grafana-reader
        token: ${READER_TOKEN}
        scopes: [read]
";

const AM_TOKEN: &str = "am-0123456789abcdef-secret";
const READER_TOKEN: &str = "reader-0123456789abcdef-secret";

#[test]
fn only_a_principal_with_the_ingest_scope_may_post_and_secrets_stay_out_of_the_log() {
    if !curl_available() {
        return;
    }
    let p = project(PRINCIPALS);
    let env = [("AM_TOKEN", AM_TOKEN), ("READER_TOKEN", READER_TOKEN)];
    let (serve, url) = serve(&p, &["--log-format", "json"], &env);
    let events = format!("{url}/v1/events");
    let body = quick("s1").to_string();

    let r = post(&events, "application/json", body.as_bytes(), &[]);
    assert_eq!(r.status, 401, "{r:?}");
    assert!(r.header("www-authenticate").is_some());
    let wrong = "authorization: Bearer wrong-token-0123456789";
    let r = post(&events, "application/json", body.as_bytes(), &["-H", wrong]);
    assert_eq!(r.status, 401);
    // Right after a failure, a further failing attempt from this address is answered 429;
    // a valid token is checked at once all the same (here: valid, without the scope).
    let r = post(&events, "application/json", body.as_bytes(), &["-H", wrong]);
    assert_eq!(r.status, 429, "{r:?}");
    assert!(r.header("retry-after").is_some());
    let reader = format!("authorization: Bearer {READER_TOKEN}");
    let r = post(
        &events,
        "application/json",
        body.as_bytes(),
        &["-H", &reader],
    );
    assert_eq!(r.status, 403, "{r:?}");
    assert!(
        r.json()["error"]
            .as_str()
            .unwrap()
            .contains("grafana-reader")
    );
    let am = format!("authorization: Bearer {AM_TOKEN}");
    let r = post(&events, "application/json", body.as_bytes(), &["-H", &am]);
    assert_eq!(r.status, 200, "{r:?}");
    // Alertmanager's basic_auth: the token as the password.
    let basic = format!("alertmanager:{AM_TOKEN}");
    let body2 = quick("s2").to_string();
    let r = post(
        &events,
        "application/json",
        body2.as_bytes(),
        &["-u", &basic],
    );
    assert_eq!(r.status, 200, "{r:?}");
    // A signature header and a token in the query string are not logged either.
    let r = post(
        &format!("{events}?token={AM_TOKEN}"),
        "application/json",
        body2.as_bytes(),
        &[
            "-H",
            &am,
            "-H",
            "x-hub-signature-256: sha256=deadbeefcafe0123456789",
        ],
    );
    assert_eq!(r.status, 200);

    // Health and readiness need nothing, and carry no report whoever asks; the report is
    // `GET /status`, for `read`.
    let r = curl(&[&format!("{url}/healthz")], None);
    assert_eq!(r.status, 200);
    let r = curl(&[&format!("{url}/readyz")], None);
    assert_eq!(r.status, 200);
    assert!(r.json().get("status").is_none());
    let r = curl(&["-H", &reader, &format!("{url}/readyz")], None);
    assert_eq!(r.status, 200);
    assert!(r.json().get("status").is_none(), "{r:?}");
    let r = curl(&[&format!("{url}/status")], None);
    assert_eq!(r.status, 401, "{r:?}");
    let r = curl(&["-H", &reader, &format!("{url}/status")], None);
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.json()["serve"]["listen"], url.as_str());
    assert!(r.json()["queue"].is_object(), "{r:?}");

    let log = serve.log_text();
    for secret in [
        AM_TOKEN,
        READER_TOKEN,
        "wrong-token-0123456789",
        "deadbeefcafe",
    ] {
        assert!(!log.contains(secret), "the log holds {secret}:\n{log}");
    }
    assert!(log.contains("\"status\":401"), "{log}");
}

#[test]
fn a_listener_that_cannot_be_safe_refuses_to_start() {
    let p = project(PRINCIPALS);
    // The token's variable is not set.
    let out = p
        .cmd()
        .args(["serve", "--listen", "127.0.0.1:0"])
        .env_remove("AM_TOKEN")
        .output()
        .unwrap();
    assert_eq!(code(&out), 1);
    assert!(stderr(&out).contains("AM_TOKEN"), "{}", stderr(&out));

    // Every interface, and no principal.
    let open = project("");
    let out = open
        .cmd()
        .args(["serve", "--listen", "0.0.0.0:0"])
        .output()
        .unwrap();
    assert_eq!(code(&out), 1);
    assert!(stderr(&out).contains("no principal"), "{}", stderr(&out));

    let out = open
        .cmd()
        .args(["serve", "--once", "--listen", "127.0.0.1:0"])
        .output()
        .unwrap();
    assert_eq!(code(&out), 2);
    let out = open
        .cmd()
        .args(["serve", "--listen", "localhost"])
        .output()
        .unwrap();
    assert_eq!(code(&out), 2);
    assert!(stderr(&out).contains("HOST:PORT"));
}

#[test]
fn a_foreign_host_or_a_cross_site_origin_is_refused_before_anything_is_recorded() {
    if !curl_available() {
        return;
    }
    let p = project("");
    let (_serve, url) = serve(&p, &[], &[]);
    let events = format!("{url}/v1/events");
    let body = quick("h1").to_string();
    let r = post(
        &events,
        "application/json",
        body.as_bytes(),
        &["-H", "Host: attacker.example"],
    );
    assert_eq!(r.status, 403, "{r:?}");
    assert!(
        r.json()["error"]
            .as_str()
            .unwrap()
            .contains("attacker.example")
    );
    let r = post(
        &events,
        "application/json",
        body.as_bytes(),
        &["-H", "Origin: https://attacker.example"],
    );
    assert_eq!(r.status, 403);
    let r = post(
        &events,
        "text/plain",
        body.as_bytes(),
        &["-H", "Sec-Fetch-Site: cross-site"],
    );
    assert_eq!(r.status, 403);
    assert!(p.invocations().is_empty());
    let r = post(
        &events,
        "application/json",
        body.as_bytes(),
        &["-H", &format!("Origin: {url}")],
    );
    assert_eq!(r.status, 200);
}

fn connect(url: &str) -> TcpStream {
    let addr = url.trim_start_matches("http://");
    let s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s
}

fn read_all(s: &mut TcpStream) -> String {
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

#[test]
fn slow_and_truncated_clients_are_cut_off_within_the_read_timeout() {
    let p = project("listen:\n  read_timeout: 1s\n");
    let (_serve, url) = serve(&p, &[], &[]);
    let host = url.trim_start_matches("http://").to_owned();

    // Headers that never end: the connection is closed, nothing answered.
    let mut s = connect(&url);
    let started = Instant::now();
    s.write_all(format!("POST /v1/events HTTP/1.1\r\nHost: {host}\r\nX-Slow: ").as_bytes())
        .unwrap();
    let got = read_all(&mut s);
    let took = started.elapsed();
    assert!(took < Duration::from_secs(10), "{took:?}");
    assert!(!got.contains("200"), "{got}");

    // A body that trickles: 408 once the timeout has passed.
    let mut s = connect(&url);
    let body = quick("slow1").to_string();
    let started = Instant::now();
    s.write_all(
        format!(
            "POST /v1/events HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{}",
            body.len(),
            &body[..10]
        )
        .as_bytes(),
    )
    .unwrap();
    let got = read_all(&mut s);
    assert!(got.starts_with("HTTP/1.1 408"), "{got}");
    assert!(started.elapsed() >= Duration::from_millis(900));

    // A body cut short by the client closing its side: nothing is recorded.
    let mut s = connect(&url);
    s.write_all(
        format!(
            "POST /v1/events HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{}",
            body.len() + 50,
            body
        )
        .as_bytes(),
    )
    .unwrap();
    s.shutdown(std::net::Shutdown::Write).unwrap();
    let got = read_all(&mut s);
    assert!(!got.starts_with("HTTP/1.1 200"), "{got}");
    assert!(p.invocations().is_empty());
}

#[test]
fn past_the_queue_bound_a_request_gets_503_and_nothing_of_it_is_recorded() {
    if !curl_available() {
        return;
    }
    let p = project("listen:\n  max_queued_events: 1\n");
    // Test builds hold posted events a while before deciding them, so the second request
    // finds the first still waiting.
    let (_serve, url) = serve(&p, &[], &[("PAP_TEST_INGEST_DELAY_MS", "2000")]);
    let first = post_quick_waiting(&url, "q1");
    // Ready means "can take events now": not while the queue is at its bound.
    let ready = curl(&[&format!("{url}/readyz")], None);
    assert_eq!(ready.status, 503, "{ready:?}");
    assert_eq!(ready.json()["ready"], false);
    let second = post_quick(&url, "q2");
    assert_eq!(second.status, 503, "{second:?}");
    assert_eq!(second.header("retry-after"), Some("1"));
    let first = first.join().unwrap();
    assert_eq!(first.status, 200, "{first:?}");
    assert!(p.invocations_of("q2").is_empty());
    // Sent again once there is room, it is taken.
    let again = post_quick(&url, "q2");
    assert_eq!(again.status, 200);
}

#[test]
fn a_stop_answers_the_requests_already_taken_and_refuses_the_rest() {
    if !curl_available() {
        return;
    }
    let p = project("");
    let (serve, url) = serve(&p, &[], &[("PAP_TEST_INGEST_DELAY_MS", "1500")]);
    let waiting = post_quick_waiting(&url, "w1");
    serve.signal(nix::sys::signal::Signal::SIGTERM);
    let r = waiting.join().unwrap();
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(serve.wait_exit(), 0);
    assert_eq!(p.invocations_of("w1").len(), 1);
}

#[test]
fn with_a_certificate_the_listener_speaks_https_only() {
    if !curl_available() {
        return;
    }
    let p = project("listen:\n  tls:\n    cert: tls/cert.pem\n    key: tls/key.pem\n");
    common::copy_dir(&common::fixture("tls"), &p.root().join("tls"));
    let (_serve, url) = serve(&p, &[], &[]);
    assert!(url.starts_with("https://"), "{url}");
    let cacert = p.root().join("tls/cert.pem");
    let cacert = cacert.to_str().unwrap();
    let r = post(
        &format!("{url}/v1/events"),
        "application/json",
        quick("tls1").to_string().as_bytes(),
        &["--cacert", cacert],
    );
    assert_eq!(r.status, 200, "{r:?}");
    let plain = url.replace("https://", "http://");
    let r = curl(&[&format!("{plain}/healthz")], None);
    assert_ne!(r.status, 200);
}

#[test]
fn a_password_principal_made_with_hash_password_logs_in_with_basic_auth() {
    if !curl_available() {
        return;
    }
    let mut hash = common::pap()
        .arg("hash-password")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    hash.stdin
        .take()
        .unwrap()
        .write_all(b"correct horse battery\n")
        .unwrap();
    let out = hash.wait_with_output().unwrap();
    assert_eq!(code(&out), 0);
    let phc = String::from_utf8(out.stdout).unwrap().trim().to_owned();
    assert!(phc.starts_with("$argon2id$"), "{phc}");
    let p = project(&format!(
        "listen:\n  auth:\n    principals:\n      - name: alice\n        password_hash: \"{phc}\"\n        scopes: [ingest]\n"
    ));
    let lint = p.cmd().arg("lint").output().unwrap();
    assert_eq!(code(&lint), 0, "{}", common::stdout(&lint));
    let (serve, url) = serve(&p, &[], &[]);
    let events = format!("{url}/v1/events");
    let body = quick("pw1").to_string();
    let r = post(
        &events,
        "application/json",
        body.as_bytes(),
        &["-u", "alice:correct horse battery"],
    );
    assert_eq!(r.status, 200, "{r:?}");
    // A wrong password is refused, and the next attempt from the address waits.
    let r = post(
        &events,
        "application/json",
        body.as_bytes(),
        &["-u", "alice:wrong"],
    );
    assert_eq!(r.status, 401);
    // The address's next attempt, made at once, is refused unchecked (429) until its wait has
    // passed, even with the right password; then it is checked again.
    let right = ["-u", "alice:correct horse battery"];
    let r = post(&events, "application/json", body.as_bytes(), &right);
    assert_eq!(r.status, 429, "{r:?}");
    let again = ["-u", "alice:wrong again"];
    let r = post_once_allowed(&events, "application/json", body.as_bytes(), &again);
    assert_eq!(r.status, 401);
    assert!(!serve.log_text().contains("correct horse"));
}

/// The JSON log lines of a serve, each `(level, message, fields)`.
fn log_lines(serve: &common::serve::Serve) -> Vec<(String, String, Value)> {
    serve
        .log_text()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .map(|v| {
            let level = v["level"].as_str().unwrap_or("").to_owned();
            let message = v["fields"]["message"].as_str().unwrap_or("").to_owned();
            (level, message, v["fields"].clone())
        })
        .collect()
}

/// Logs under load: one INFO line a request, which counts what its events decided; each
/// event's decision per trigger only at DEBUG, or at INFO with `serve.log_decisions: true`.
#[test]
fn a_request_is_one_info_line_with_what_it_decided() {
    if !curl_available() {
        return;
    }
    for full in [false, true] {
        let p = project("");
        if full {
            let path = p.root().join("pap.yaml");
            let text = std::fs::read_to_string(&path).unwrap();
            std::fs::write(
                &path,
                text.replace("serve:\n", "serve:\n  log_decisions: true\n"),
            )
            .unwrap();
        }
        let (serve, url) = serve(&p, &["--log-format", "json"], &[]);
        let events = format!("{url}/v1/events");
        for n in 0..5 {
            let r = post_quick(&url, &format!("l{n}"));
            assert_eq!(r.status, 200, "{r:?}");
        }
        // One request of three events, one of them a repeat and one invalid.
        let body = format!("{}\n{}\nnot json\n", quick("l5"), quick("l0"));
        let r = post(&events, "application/x-ndjson", body.as_bytes(), &[]);
        assert_eq!(r.status, 200, "{r:?}");
        let lines = log_lines(&serve);
        let requests: Vec<&Value> = lines
            .iter()
            .filter(|(level, message, f)| {
                level == "INFO" && message == "http" && f["path"] == "/v1/events"
            })
            .map(|(_, _, f)| f)
            .collect();
        assert_eq!(requests.len(), 6, "{lines:#?}");
        assert_eq!(requests[0]["events"], 1);
        assert_eq!(requests[0]["decided"], "queued:1", "{:?}", requests[0]);
        assert_eq!(requests[5]["events"], 3);
        assert_eq!(
            requests[5]["decided"], "duplicate:1 invalid:1 queued:1",
            "{:?}",
            requests[5]
        );
        let per_event = lines
            .iter()
            .filter(|(level, message, _)| level == "INFO" && message == "decided")
            .count();
        // Full: a line per event and trigger (the seven posted, and the completion events
        // the runs emit); else none at INFO.
        if full {
            assert!(per_event >= 7, "{lines:#?}");
        } else {
            assert_eq!(per_event, 0, "{lines:#?}");
        }
    }
}
