//! A valid credential is never refused for failures it did not make: a token is checked
//! before the back-off after failed credentials is looked at, so a misconfigured sender (or a
//! guesser) sharing an address with Alertmanager, behind one ingress say, cannot keep its
//! valid posts out. Only further failing attempts are slowed (429), and password logins
//! keep their per-address back-off. Behind `listen.trusted_proxies` the address is the
//! client's, taken from `X-Forwarded-For` or `Forwarded`; from anyone else those headers
//! are ignored. Real `pap serve`, driven by curl and by a keep-alive client.

use crate::common;

use common::dispatch::ev;
use common::http::{KeepAlive, curl_available, hash_password, post, project, serve};
use serde_json::json;

const AM_TOKEN: &str = "am-token-0123456789abcdef";
const PASSWORD: &str = "correct horse battery staple";

/// `am` (ingest, by token) and `alice` (read and approve, by password), and `extra` in
/// `listen:`.
fn principals(listen_extra: &str) -> String {
    format!(
        "listen:\n{listen_extra}  auth:\n    principals:\n      - name: am\n        token: ${{AM_TOKEN}}\n        scopes: [ingest]\n      - name: alice\n        password_hash: \"{}\"\n        scopes: [read, approve]\n",
        hash_password(PASSWORD)
    )
}

fn event(id: &str) -> Vec<u8> {
    ev(id, "test.quick.happened", json!({"n": 1}))
        .to_string()
        .into_bytes()
}

#[test]
fn a_thousand_failing_requests_from_one_address_never_keep_its_valid_token_out() {
    if !curl_available() {
        return;
    }
    let p = project(&principals(""));
    let (serve, url) = serve(&p, &[], &[("AM_TOKEN", AM_TOKEN)]);
    let mut client = KeepAlive::connect(&url);
    let json = "Content-Type: application/json";
    let valid = format!("Authorization: Bearer {AM_TOKEN}");
    let (mut valid_sent, mut failing) = (0, [0u32; 2]);
    for n in 0..1000 {
        // A wrong token and a revoked-looking one, from the same address as the valid one.
        let (status, body) = client.send(
            "POST",
            "/v1/events",
            &[
                json,
                &format!("Authorization: Bearer wrong-token-{n:04}-0123456789"),
            ],
            &event(&format!("bad-{n}")),
        );
        match status {
            401 => failing[0] += 1,
            429 => failing[1] += 1,
            _ => panic!("a failing token got {status}: {body}"),
        }
        if n % 10 == 9 {
            let (status, body) = client.send(
                "POST",
                "/v1/events",
                &[json, &valid],
                &event(&format!("ok-{n}")),
            );
            assert_eq!(status, 200, "valid request {valid_sent}: {body}");
            valid_sent += 1;
        }
    }
    assert_eq!(valid_sent, 100);
    // The first failure is checked and counted (401); right after it the address waits, and
    // the further failures are answered 429 without being counted again.
    assert!(failing[0] >= 1 && failing[1] >= 900, "{failing:?}");
    // Every valid post was decided.
    let decided = p.invocations().len();
    assert!(decided >= 100, "{decided} invocations");
    assert!(!serve.log_text().contains(AM_TOKEN));
}

#[test]
fn a_failed_token_leaves_password_logins_from_its_address_waiting() {
    if !curl_available() {
        return;
    }
    let p = project(&principals(""));
    let (_serve, url) = serve(&p, &[], &[("AM_TOKEN", AM_TOKEN)]);
    let events = format!("{url}/v1/events");
    let r = post(
        &events,
        "application/json",
        &event("x1"),
        &["-H", "Authorization: Bearer nope-0123456789abcdef"],
    );
    assert_eq!(r.status, 401, "{r:?}");
    // A password costs a real check: from a waiting address it is refused unchecked.
    let user = format!("alice:{PASSWORD}");
    let r = common::http::curl(&["-u", &user, &format!("{url}/v1/invocations")], None);
    assert_eq!(r.status, 429, "{r:?}");
    assert!(r.header("retry-after").is_some(), "{r:?}");
    // The valid token is not.
    let bearer = format!("Authorization: Bearer {AM_TOKEN}");
    let r = post(&events, "application/json", &event("x2"), &["-H", &bearer]);
    assert_eq!(r.status, 200, "{r:?}");
}

#[test]
fn behind_a_trusted_proxy_the_forwarded_client_is_the_one_that_waits() {
    if !curl_available() {
        return;
    }
    let p = project(&principals("  trusted_proxies: [127.0.0.0/8]\n"));
    let lint = p.cmd().arg("lint").output().unwrap();
    assert_eq!(common::code(&lint), 0, "{}", common::stdout(&lint));
    let (serve, url) = serve(&p, &[], &[("AM_TOKEN", AM_TOKEN)]);
    let list = format!("{url}/v1/invocations");
    let user = format!("alice:{PASSWORD}");
    let wrong = "alice:wrong password";
    let guesser = "X-Forwarded-For: 198.51.100.66";
    let r = common::http::curl(&["-u", wrong, "-H", guesser, &list], None);
    assert_eq!(r.status, 401, "{r:?}");
    // Another client behind the same proxy logs in at once; the guesser's address waits.
    let other = "Forwarded: for=203.0.113.7;proto=https";
    let r = common::http::curl(&["-u", &user, "-H", other, &list], None);
    assert_eq!(r.status, 200, "{r:?}");
    let r = common::http::curl(&["-u", &user, "-H", guesser, &list], None);
    assert_eq!(r.status, 429, "{r:?}");
    // The log names the client, and the proxy it came through.
    let log = serve.log_text();
    assert!(log.contains("198.51.100.66"), "{log}");
    assert!(log.contains("203.0.113.7"), "{log}");
}

#[test]
fn forwarding_headers_from_an_untrusted_peer_are_ignored() {
    if !curl_available() {
        return;
    }
    // No trusted proxy: the headers are anyone's to write, so the peer is the client.
    let p = project(&principals(""));
    let (serve, url) = serve(&p, &[], &[("AM_TOKEN", AM_TOKEN)]);
    let list = format!("{url}/v1/invocations");
    let user = format!("alice:{PASSWORD}");
    let r = common::http::curl(
        &[
            "-u",
            "alice:wrong",
            "-H",
            "X-Forwarded-For: 198.51.100.66",
            &list,
        ],
        None,
    );
    assert_eq!(r.status, 401, "{r:?}");
    let r = common::http::curl(
        &["-u", &user, "-H", "X-Forwarded-For: 203.0.113.7", &list],
        None,
    );
    assert_eq!(r.status, 429, "{r:?}");
    assert!(!serve.log_text().contains("198.51.100.66"));
}

#[test]
fn a_trusted_proxy_that_is_not_an_address_is_a_lint_error() {
    let p = project("listen:\n  trusted_proxies: [10.0.0.0/8, ingress.local]\n");
    let out = p.cmd().arg("lint").output().unwrap();
    assert_eq!(common::code(&out), 1);
    let text = common::stdout(&out);
    assert!(
        text.contains("trusted proxy `ingress.local` is not an IP address or a CIDR"),
        "{text}"
    );
    assert!(text.contains("pap.yaml:"), "{text}");
}
