//! A reload applies `listen.auth`: a removed principal's token is refused
//! from the next request on, its console session (a real browser's too) and its open streams
//! end; a token in a `token_file` rotates at a reload; principals added to an open listener
//! close it; a reload naming an unset variable is refused as a whole and `pap status` says
//! so; a start-only setting (the address) is named as waiting for a restart while the others
//! apply. Real `pap serve`, driven by curl, signals and files.

use crate::common;

use std::os::unix::fs::PermissionsExt;
use std::process::{Child, Command, Stdio};

use common::dispatch::ev;
use common::http::{curl, curl_available, listening_url, post, serve};
use common::serve::{Project, Serve, wait_until};
use nix::sys::signal::Signal;
use serde_json::{Value, json};

const AM_TOKEN: &str = "am-token-0123456789abcdef";
const OPS_TOKEN: &str = "ops-token-0123456789abcdef";
const ROTATED: &str = "ops-rotated-0123456789abcdef";
const PASSWORD: &str = "correct horse battery staple";

/// The serve fixture; its pap.yaml as copied (with `store:` on PostgreSQL), to add to.
fn fixture() -> (Project, String) {
    let p = Project::new();
    let base = std::fs::read_to_string(p.root().join("pap.yaml")).unwrap();
    (p, base)
}

/// Replaces pap.yaml with `base` and `extra`, whole (renamed in, as an editor or a
/// configuration manager would).
fn set_yaml(p: &Project, base: &str, extra: &str) {
    let tmp = p.root().join(".pap.yaml.tmp");
    std::fs::write(&tmp, format!("{base}{extra}")).unwrap();
    std::fs::rename(&tmp, p.root().join("pap.yaml")).unwrap();
}

/// Writes `text` to `name` under the root with `mode`, renamed in (a rotation).
fn secret_file(p: &Project, name: &str, text: &str, mode: u32) {
    let tmp = p.root().join(format!(".{name}.tmp"));
    std::fs::write(&tmp, text).unwrap();
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(mode)).unwrap();
    std::fs::rename(&tmp, p.root().join(name)).unwrap();
}

/// SIGHUP, then waits until serve logged `outcome` once more than before (`manifests
/// reloaded`, logged last, once everything applied; or `reload refused`).
fn reload(serve: &mut Serve, outcome: &str) {
    let count = |s: &Serve| s.log_text().matches(outcome).count();
    let before = count(serve);
    serve.signal(Signal::SIGHUP);
    let log = serve.log.clone();
    serve.wait_while_alive(&format!("`{outcome}` after SIGHUP"), || {
        std::fs::read_to_string(&log)
            .unwrap_or_default()
            .matches(outcome)
            .count()
            > before
    });
}

fn bearer(token: &str) -> String {
    format!("Authorization: Bearer {token}")
}

/// `GET /invocations` with these curl arguments; the status. Asked again while it is 429:
/// a failed credential from this address (every test request's) makes the next ones wait.
fn read_status(url: &str, extra: &[&str]) -> u16 {
    let target = format!("{url}/invocations");
    let mut args = extra.to_vec();
    args.push(&target);
    let mut status = 0;
    wait_until("the failed-attempt wait to pass", || {
        status = curl(&args, None).status;
        status != 429
    });
    status
}

/// `POST /v1/events` of one event with these curl arguments; the status.
fn ingest_status(url: &str, id: &str, extra: &[&str]) -> u16 {
    let event = ev(id, "test.quick.happened", json!({}));
    post(
        &format!("{url}/v1/events"),
        "application/json",
        event.to_string().as_bytes(),
        extra,
    )
    .status
}

/// `listen.auth` with these principals (YAML list items, indented for `principals:`).
fn auth(principals: &[String]) -> String {
    format!("listen:\n  auth:\n    principals:\n{}", principals.concat())
}

fn token_principal(name: &str, token: &str, scopes: &str) -> String {
    format!("      - name: {name}\n        {token}\n        scopes: [{scopes}]\n")
}

/// A curl that holds the stream at `path` (`/inbox/stream`, `/mcp`) open until the server
/// ends it; returns once serve answered it.
fn stream(serve: &mut Serve, url: &str, path: &str, extra: &[&str]) -> Child {
    let opened = format!("method=GET path={path} status=200");
    let before = serve.log_text().matches(&opened).count();
    let child = Command::new("curl")
        .args(["-sS", "-N", "--max-time", "120", "-o", "/dev/null"])
        .args(extra)
        .arg(format!("{url}{path}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("curl runs");
    let log = serve.log.clone();
    serve.wait_while_alive(&format!("the stream at {path} to open"), || {
        std::fs::read_to_string(&log)
            .unwrap_or_default()
            .matches(&opened)
            .count()
            > before
    });
    child
}

/// Waits for a stream's curl to end (the server closed it); fails if it still runs after
/// the patience.
fn ended(child: &mut Child, what: &str) {
    wait_until(what, || child.try_wait().unwrap().is_some());
}

fn status(p: &Project) -> (i32, Value) {
    let out = p.cmd().args(["status", "--json"]).output().unwrap();
    (common::code(&out), common::json(&out))
}

#[test]
fn a_removed_principal_is_refused_from_the_next_request_and_its_sessions_end() {
    if !curl_available() {
        return;
    }
    let (p, base) = fixture();
    let h = common::http::hash_password(PASSWORD);
    let alice =
        format!("      - name: alice\n        password_hash: \"{h}\"\n        scopes: [read]\n");
    let am = token_principal("am", "token: ${AM_TOKEN}", "ingest, read");
    let ops = token_principal("ops", "token: ${OPS_TOKEN}", "ingest, read");
    set_yaml(&p, &base, &auth(&[am, ops.clone(), alice]));
    let (mut serve, url) = serve(&p, &[], &[("AM_TOKEN", AM_TOKEN), ("OPS_TOKEN", OPS_TOKEN)]);
    let am_auth = bearer(AM_TOKEN);
    assert_eq!(read_status(&url, &["-H", &am_auth]), 200);
    assert_eq!(ingest_status(&url, "r1", &["-H", &am_auth]), 200);
    let dir = tempfile::tempdir().unwrap();
    let (jar, _) = common::http::console_login(&url, dir.path(), "alice", PASSWORD);
    assert_eq!(read_status(&url, &["-b", &jar]), 200);
    // am's live inbox, open across the reload.
    let mut am_stream = stream(&mut serve, &url, "/inbox/stream", &["-H", &am_auth]);

    // am and alice removed.
    set_yaml(&p, &base, &auth(&[ops]));
    reload(&mut serve, "manifests reloaded");
    // A console page sends a caller whose credentials fail to the login page.
    assert_eq!(read_status(&url, &["-H", &am_auth]), 303);
    assert_eq!(
        common::http::post_once_allowed(
            &format!("{url}/v1/events"),
            "application/json",
            ev("r2", "test.quick.happened", json!({}))
                .to_string()
                .as_bytes(),
            &["-H", &am_auth],
        )
        .status,
        401
    );
    // The revoked token's failures never keep the kept principal's valid token out: it is
    // checked at once, with no wait (a plain post, not one that waits out a 429).
    let ops_auth = bearer(OPS_TOKEN);
    let ok = post(
        &format!("{url}/v1/events"),
        "application/json",
        ev("r3", "test.quick.happened", json!({}))
            .to_string()
            .as_bytes(),
        &["-H", &ops_auth],
    );
    assert_eq!(ok.status, 200, "{ok:?}");
    // alice's session ended: her cookie is sent to the login page.
    let r = curl(&["-b", &jar, &format!("{url}/invocations")], None);
    assert_eq!(r.status, 303, "{r:?}");
    assert_eq!(r.header("location"), Some("/login"));
    ended(&mut am_stream, "am's inbox stream to end");
    let log = serve.log_text();
    assert!(
        log.contains("console sessions ended") && log.contains("principal=alice"),
        "{log}"
    );
    assert!(log.contains("principals_removed=am,alice"), "{log}");
}

#[test]
fn a_token_file_rotates_at_a_reload_and_a_loose_one_is_refused() {
    if !curl_available() {
        return;
    }
    let (p, base) = fixture();
    secret_file(&p, "ops.token", &format!("{OPS_TOKEN}\n"), 0o600);
    let ops = token_principal("ops", "token_file: ops.token", "ingest, read");
    set_yaml(&p, &base, &auth(&[ops]));
    let (mut serve, url) = serve(&p, &[], &[]);
    assert_eq!(read_status(&url, &["-H", &bearer(OPS_TOKEN)]), 200);

    secret_file(&p, "ops.token", &format!("{ROTATED}\n"), 0o640);
    reload(&mut serve, "manifests reloaded");
    assert_eq!(read_status(&url, &["-H", &bearer(OPS_TOKEN)]), 303);
    let r = common::http::post_once_allowed(
        &format!("{url}/v1/events"),
        "application/json",
        ev("t1", "test.quick.happened", json!({}))
            .to_string()
            .as_bytes(),
        &["-H", &bearer(ROTATED)],
    );
    assert_eq!(r.status, 200, "{r:?}");

    // A file others may read is refused, and so is the whole reload: the token in force
    // keeps working.
    secret_file(&p, "ops.token", &format!("{OPS_TOKEN}\n"), 0o644);
    reload(&mut serve, "reload refused");
    assert!(
        serve.log_text().contains("chmod 640"),
        "{}",
        serve.log_text()
    );
    assert_eq!(read_status(&url, &["-H", &bearer(ROTATED)]), 200);
    assert!(!serve.log_text().contains(OPS_TOKEN) && !serve.log_text().contains(ROTATED));
}

#[test]
fn principals_added_to_an_open_listener_close_it() {
    if !curl_available() {
        return;
    }
    let (p, base) = fixture();
    let (mut serve, url) = serve(&p, &[], &[("OPS_TOKEN", OPS_TOKEN)]);
    assert_eq!(read_status(&url, &[]), 200);
    assert_eq!(ingest_status(&url, "o1", &[]), 200);
    let mut anonymous = stream(&mut serve, &url, "/inbox/stream", &[]);

    let ops = token_principal("ops", "token: ${OPS_TOKEN}", "ingest, read");
    set_yaml(&p, &base, &auth(&[ops]));
    reload(&mut serve, "manifests reloaded");
    let r = curl(&[&format!("{url}/invocations")], None);
    assert_eq!(r.status, 303, "anonymous is sent to the login page: {r:?}");
    assert_eq!(ingest_status(&url, "o2", &[]), 401);
    assert_eq!(ingest_status(&url, "o3", &["-H", &bearer(OPS_TOKEN)]), 200);
    ended(&mut anonymous, "the anonymous inbox stream to end");
    assert!(serve.log_text().contains("anonymous_changed=true"));
}

#[test]
fn an_mcp_session_ends_with_its_principal() {
    if !curl_available() {
        return;
    }
    let (p, base) = fixture();
    let am = token_principal("am", "token: ${AM_TOKEN}", "read");
    let ops = token_principal("ops", "token: ${OPS_TOKEN}", "read");
    set_yaml(&p, &base, &auth(&[am, ops.clone()]));
    let (mut serve, url) = serve(&p, &[], &[("AM_TOKEN", AM_TOKEN), ("OPS_TOKEN", OPS_TOKEN)]);
    let mcp = format!("{url}/mcp");
    let am_auth = bearer(AM_TOKEN);
    let rpc = |body: Value, session: Option<&str>| {
        let session = session.map(|s| format!("Mcp-Session-Id: {s}"));
        let mut args = vec![
            "-X",
            "POST",
            "-H",
            "Content-Type: application/json",
            "-H",
            "Accept: application/json, text/event-stream",
            "-H",
            &am_auth,
        ];
        if let Some(s) = &session {
            args.extend(["-H", s.as_str()]);
        }
        args.push(&mcp);
        curl(&args, Some(body.to_string().as_bytes()))
    };
    let init = rpc(
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "curl", "version": "1"}}}),
        None,
    );
    assert_eq!(init.status, 200, "{init:?}");
    let session = init.header("mcp-session-id").expect("a session").to_owned();
    let done = rpc(
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        Some(&session),
    );
    assert!(done.status < 300, "{done:?}");
    let session_header = format!("Mcp-Session-Id: {session}");
    let mut events = stream(
        &mut serve,
        &url,
        "/mcp",
        &[
            "-H",
            &am_auth,
            "-H",
            &session_header,
            "-H",
            "Accept: text/event-stream",
        ],
    );
    assert!(
        events.try_wait().unwrap().is_none(),
        "the stream ended at once"
    );

    set_yaml(&p, &base, &auth(&[ops]));
    reload(&mut serve, "manifests reloaded");
    ended(&mut events, "am's MCP event stream to end");
    assert!(
        serve.log_text().contains("MCP sessions ended"),
        "{}",
        serve.log_text()
    );
}

#[test]
fn a_reload_naming_an_unset_variable_is_refused_whole_and_shown_by_pap_status() {
    if !curl_available() {
        return;
    }
    let (p, base) = fixture();
    let am = token_principal("am", "token: ${AM_TOKEN}", "ingest, read, metrics");
    set_yaml(&p, &base, &auth(&[am]));
    let (mut serve, url) = serve(&p, &[], &[("AM_TOKEN", AM_TOKEN)]);
    assert_eq!(status(&p).0, 0, "{:?}", status(&p).1);

    // am removed and bob added with a variable serve's environment does not have, and a
    // new trigger: none of it applies.
    std::fs::write(
        p.root().join("triggers/t-late.yaml"),
        "pap_version: \"0.2\"\ntrigger:\n  id: t-late\n  match:\n    type: test.late.happened\n  agent: quick\n",
    )
    .unwrap();
    let bob = token_principal("bob", "token: ${BOB_TOKEN}", "ingest");
    set_yaml(&p, &base, &auth(&[bob]));
    reload(&mut serve, "reload refused");
    let log = serve.log_text();
    assert!(
        log.contains("BOB_TOKEN") && log.contains("token_file"),
        "the error names the variable and the way out: {log}"
    );
    assert_eq!(read_status(&url, &["-H", &bearer(AM_TOKEN)]), 200);
    let late = ev("l1", "test.late.happened", json!({}));
    let r = post(
        &format!("{url}/v1/events"),
        "application/json",
        late.to_string().as_bytes(),
        &["-H", &bearer(AM_TOKEN)],
    );
    assert_eq!(r.lines()[0]["triggers"], json!([]), "t-late applied: {r:?}");
    let (code, report) = status(&p);
    assert_eq!(code, 5, "{report}");
    let attention = report["attention"].to_string();
    assert!(
        attention.contains("refused") && attention.contains("BOB_TOKEN"),
        "{report}"
    );
    let metrics = curl(&["-H", &bearer(AM_TOKEN), &format!("{url}/metrics")], None);
    assert!(
        metrics
            .body
            .contains("pap_serve_condition{condition=\"reload_refused\"} 1"),
        "{}",
        metrics.body
    );

    // Fixed: the next reload applies it all and the refusal is over.
    let bob = token_principal("bob", "token: ${AM_TOKEN}", "ingest");
    set_yaml(&p, &base, &auth(&[bob]));
    reload(&mut serve, "manifests reloaded");
    assert_eq!(status(&p).0, 0, "{}", status(&p).1);
    let r = post(
        &format!("{url}/v1/events"),
        "application/json",
        ev("l2", "test.late.happened", json!({}))
            .to_string()
            .as_bytes(),
        &["-H", &bearer(AM_TOKEN)],
    );
    assert_eq!(r.lines()[0]["triggers"][0]["trigger"], "t-late", "{r:?}");
}

#[test]
fn a_changed_address_waits_for_a_restart_while_the_limits_apply() {
    if !curl_available() {
        return;
    }
    let (p, base) = fixture();
    let port = common::http::free_port();
    let listen = |address: &str, max_body: u64| {
        format!("listen:\n  address: \"{address}\"\n  max_body_bytes: {max_body}\n")
    };
    set_yaml(&p, &base, &listen(&format!("127.0.0.1:{port}"), 1 << 20));
    let mut serve = p.serve(&[]);
    let url = listening_url(&serve.log_text()).expect("listening");
    let post_big = |id: &str| {
        let big = ev(id, "test.quick.happened", json!({"pad": "x".repeat(4000)}));
        post(
            &format!("{url}/v1/events"),
            "application/json",
            big.to_string().as_bytes(),
            &[],
        )
        .status
    };
    assert_eq!(post_big("b1"), 200);

    let other = format!("127.0.0.1:{}", common::http::free_port());
    set_yaml(&p, &base, &listen(&other, 2048));
    reload(&mut serve, "manifests reloaded");
    let log = serve.log_text();
    assert!(
        log.contains("needs a restart") && log.contains("listen.address"),
        "{log}"
    );
    // The listener stays where it is, with the new body limit.
    assert_eq!(post_big("b2"), 413);
    let (code, report) = status(&p);
    assert_eq!(code, 5, "{report}");
    assert!(report["attention"].to_string().contains(&other), "{report}");

    // Reverted: nothing waits any more.
    set_yaml(&p, &base, &listen(&format!("127.0.0.1:{port}"), 1 << 20));
    reload(&mut serve, "manifests reloaded");
    assert_eq!(status(&p).0, 0, "{}", status(&p).1);
    assert_eq!(post_big("b3"), 200);
}

#[test]
fn a_real_browser_session_ends_when_its_principal_is_removed() {
    let Some((chromium, driver)) = common::webdriver::tools() else {
        return;
    };
    let (p, base) = fixture();
    let h = common::http::hash_password(PASSWORD);
    let person = |name: &str| {
        format!("      - name: {name}\n        password_hash: \"{h}\"\n        scopes: [read]\n")
    };
    set_yaml(&p, &base, &auth(&[person("alice"), person("bob")]));
    let (mut serve, url) = serve(&p, &[], &[]);
    let browser = common::webdriver::Browser::start(&driver, &chromium);
    browser.go(&format!("{url}/invocations"));
    assert!(browser.current_url().ends_with("/login"));
    browser.type_into("input[name=name]", "alice");
    browser.type_into("input[name=password]", PASSWORD);
    browser.click("#login");
    wait_until("the inbox after login", || browser.count("#inbox") == 1);
    browser.go(&format!("{url}/invocations"));
    assert!(
        browser.current_url().ends_with("/invocations"),
        "{}",
        browser.current_url()
    );

    set_yaml(&p, &base, &auth(&[person("bob")]));
    reload(&mut serve, "manifests reloaded");
    browser.go(&format!("{url}/invocations"));
    assert!(
        browser.current_url().ends_with("/login"),
        "alice's session outlived her: {}",
        browser.current_url()
    );
}

#[test]
fn a_renewed_certificate_is_served_after_a_reload_and_dropping_tls_waits_for_a_restart() {
    if !curl_available() {
        return;
    }
    let (p, base) = fixture();
    let tls = p.root().join("tls");
    common::copy_dir(&common::fixture("tls"), &tls);
    let with_tls = "listen:\n  tls:\n    cert: tls/cert.pem\n    key: tls/key.pem\n";
    set_yaml(&p, &base, with_tls);
    let (mut serve, url) = serve(&p, &[], &[]);
    assert!(url.starts_with("https://"), "{url}");
    let trusting = |cert: &str| {
        let ca = tls.join(cert).display().to_string();
        curl(&["--cacert", &ca, &format!("{url}/healthz")], None).status
    };
    assert_eq!(trusting("cert.pem"), 200);
    assert_eq!(
        trusting("renewed-cert.pem"),
        0,
        "the renewed one is not served yet"
    );

    // Renewed in place (as certbot does), then a reload: new connections get it.
    for (from, to) in [
        ("renewed-cert.pem", "cert.pem"),
        ("renewed-key.pem", "key.pem"),
    ] {
        std::fs::copy(tls.join(from), tls.join(format!("{to}.new"))).unwrap();
        std::fs::rename(tls.join(format!("{to}.new")), tls.join(to)).unwrap();
    }
    std::fs::copy(
        common::fixture("tls/cert.pem"),
        tls.join("previous-cert.pem"),
    )
    .unwrap();
    reload(&mut serve, "manifests reloaded");
    assert_eq!(trusting("renewed-cert.pem"), 200);
    assert_eq!(trusting("previous-cert.pem"), 0);

    // TLS off waits for a restart: the listener keeps speaking HTTPS, and says why.
    set_yaml(&p, &base, "");
    reload(&mut serve, "manifests reloaded");
    assert_eq!(trusting("renewed-cert.pem"), 200);
    let log = serve.log_text();
    assert!(
        log.contains("needs a restart") && log.contains("\"listen.tls\" running=on configured=off"),
        "{log}"
    );
    let (code, report) = status(&p);
    assert_eq!(code, 5, "{report}");
    assert!(
        report["attention"]
            .to_string()
            .contains("listen.tls (on → off)"),
        "{report}"
    );
}
