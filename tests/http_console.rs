//! The web console: a real headless Chromium logs in, sees an approval request with its
//! event data (a script in it shown as text), approves it through the confirmation step, and
//! the run happens with the audit naming the principal. Around it, with curl: approving
//! needs a logged-in principal with `approve` (on loopback too), a CSRF token and this
//! server's Origin; untrusted text is escaped under a strict Content-Security-Policy.

use crate::common;

use common::dispatch::ev;
use common::http::{curl, curl_available, post, project, serve};
use common::serve::{Project, wait_until};
use common::webdriver::Browser;
use serde_json::{Value, json};

const PASSWORD: &str = "correct horse battery staple";
const FEEDER_TOKEN: &str = "feeder-0123456789abcdef";
const HOSTILE: &str = "<script>alert('pwned')</script><img src=x onerror=alert(2)>";

/// A project with a person who may approve (alice), one who may only read (bob), and a
/// program that posts events (feeder).
fn console_project() -> Project {
    let h = common::http::hash_password(PASSWORD);
    project(&format!(
        "listen:\n  auth:\n    principals:\n      - name: alice\n        password_hash: \"{h}\"\n        scopes: [read, approve]\n      - name: bob\n        password_hash: \"{h}\"\n        scopes: [read]\n      - name: feeder\n        token: ${{FEEDER_TOKEN}}\n        scopes: [ingest]\n"
    ))
}

/// Posts a `test.gated.happened` event (its agent is high-risk: it waits for approval).
fn post_gated(url: &str, id: &str) -> String {
    let auth = format!("Authorization: Bearer {FEEDER_TOKEN}");
    let event = ev(
        id,
        "test.gated.happened",
        json!({"summary": HOSTILE, "host": "db-1"}),
    );
    let r = post(
        &format!("{url}/v1/events"),
        "application/json",
        event.to_string().as_bytes(),
        &["-H", &auth],
    );
    assert_eq!(r.status, 200, "{r:?}");
    let line = &r.lines()[0];
    assert_eq!(
        line["triggers"][0]["outcome"], "awaiting_approval",
        "{line}"
    );
    line["triggers"][0]["invocation_id"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// Logs in with curl; returns the cookie jar's path and the CSRF token of the approvals page.
fn login(url: &str, dir: &std::path::Path, who: &str) -> (String, Option<String>) {
    let (jar, r) = common::http::console_login(url, dir, who, PASSWORD);
    let cookie = r.header("set-cookie").unwrap();
    assert!(
        cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"),
        "{cookie}"
    );
    let page = curl(&["-b", &jar, &format!("{url}/approvals")], None);
    assert_eq!(page.status, 200, "{page:?}");
    let csrf = page
        .body
        .split("name=\"csrf\" value=\"")
        .nth(1)
        .map(|rest| rest.split('"').next().unwrap().to_owned());
    (jar, csrf)
}

fn audit(p: &Project) -> Vec<Value> {
    let out = p.cmd().args(["audit", "--json"]).output().unwrap();
    common::dispatch::lines(&String::from_utf8_lossy(&out.stdout))
}

#[test]
fn approving_needs_a_logged_in_principal_with_approve_a_csrf_token_and_this_origin() {
    if !curl_available() {
        return;
    }
    let p = console_project();
    let (_serve, url) = serve(&p, &[], &[("FEEDER_TOKEN", FEEDER_TOKEN)]);
    let inv = post_gated(&url, "g1");
    let respond = format!("{url}/approvals/{inv}/respond");
    let form_ct = "content-type: application/x-www-form-urlencoded";

    // No session: refused, whatever the address (this is loopback).
    let r = curl(
        &["-X", "POST", "-H", form_ct, &respond],
        Some(b"csrf=x&action=approve"),
    );
    assert_eq!(r.status, 401, "{r:?}");
    // Credentials in a header are not a console login either.
    let r = curl(
        &[
            "-X",
            "POST",
            "-H",
            form_ct,
            "-u",
            &format!("alice:{PASSWORD}"),
            &respond,
        ],
        Some(b"csrf=x&action=approve"),
    );
    assert_eq!(r.status, 401);
    // Reading pages needs a principal here (there are principals, so anonymous reads nothing).
    let r = curl(&[&format!("{url}/approvals")], None);
    assert_eq!(r.status, 303);
    assert_eq!(r.header("location"), Some("/login"));

    let dir = tempfile::tempdir().unwrap();
    // Bob may read, not approve: no buttons, and a forged post is refused.
    let (bob, bob_csrf) = login(&url, dir.path(), "bob");
    let page = curl(&["-b", &bob, &format!("{url}/approvals")], None);
    assert!(!page.body.contains("/respond"), "bob sees buttons");
    let body = format!(
        "csrf={}&action=approve&confirmed=yes",
        bob_csrf.unwrap_or_default()
    );
    let r = curl(
        &["-b", &bob, "-X", "POST", "-H", form_ct, &respond],
        Some(body.as_bytes()),
    );
    assert_eq!(r.status, 403, "{r:?}");

    let (alice, csrf) = login(&url, dir.path(), "alice");
    let csrf = csrf.expect("alice's page has forms");
    // The event's script is text: escaped, under a CSP that forbids inline scripts anyway.
    let page = curl(&["-b", &alice, &format!("{url}/approvals")], None);
    assert!(
        !page.body.contains("<script>alert"),
        "unescaped: {}",
        page.body
    );
    assert!(page.body.contains("&lt;script&gt;alert(&apos;pwned&apos;)"));
    let csp = page.header("content-security-policy").unwrap();
    assert!(
        csp.contains("script-src 'self'") && !csp.contains("unsafe-inline"),
        "{csp}"
    );

    // A wrong CSRF token, a foreign Origin: refused, nothing answered.
    let r = curl(
        &["-b", &alice, "-X", "POST", "-H", form_ct, &respond],
        Some(b"csrf=forged&action=approve&confirmed=yes"),
    );
    assert_eq!(r.status, 403);
    let body = format!("csrf={csrf}&action=approve&confirmed=yes");
    let r = curl(
        &[
            "-b",
            &alice,
            "-X",
            "POST",
            "-H",
            form_ct,
            "-H",
            "Origin: https://evil.example",
            &respond,
        ],
        Some(body.as_bytes()),
    );
    assert_eq!(r.status, 403);
    assert_eq!(p.invocation_status(&inv), "awaiting_approval");

    // Without `confirmed`, approving asks first (the action requires confirmation).
    let ask = format!("csrf={csrf}&action=approve");
    let r = curl(
        &["-b", &alice, "-X", "POST", "-H", form_ct, &respond],
        Some(ask.as_bytes()),
    );
    assert_eq!(r.status, 200);
    assert!(r.body.contains("id=\"confirm\""), "{}", r.body);
    assert_eq!(p.invocation_status(&inv), "awaiting_approval");

    let r = curl(
        &["-b", &alice, "-X", "POST", "-H", form_ct, &respond],
        Some(body.as_bytes()),
    );
    assert_eq!(r.status, 303, "{r:?}");
    wait_until("the approved run", || {
        p.invocation_status(&inv) == "succeeded"
    });
    let approved: Vec<Value> = audit(&p)
        .into_iter()
        .filter(|e| e["action"] == "approved")
        .collect();
    assert_eq!(approved.len(), 1);
    assert_eq!(approved[0]["actor"], "alice");
}

#[test]
fn read_pages_render_the_inbox_invocations_audit_and_manifests_without_javascript() {
    if !curl_available() {
        return;
    }
    let p = project("");
    let (_serve, url) = serve(&p, &[], &[]);
    let event = ev("r1", "test.quick.happened", json!({"note": HOSTILE}));
    let r = post(
        &format!("{url}/v1/events"),
        "application/json",
        event.to_string().as_bytes(),
        &[],
    );
    assert_eq!(r.status, 200);
    let inv = r.lines()[0]["triggers"][0]["invocation_id"]
        .as_str()
        .unwrap()
        .to_owned();
    wait_until("r1 ran", || p.invocation_status(&inv) == "succeeded");
    // A high-risk decision: audited, and waiting for approval.
    let gated = ev("r2", "test.gated.happened", json!({"note": HOSTILE}));
    let r = post(
        &format!("{url}/v1/events"),
        "application/json",
        gated.to_string().as_bytes(),
        &[],
    );
    assert_eq!(r.lines()[0]["triggers"][0]["outcome"], "awaiting_approval");
    // Anonymous reads on a loopback setup without principals.
    for (path, needle) in [
        ("/", "id=\"inbox\""),
        ("/invocations?agent=quick", inv.as_str()),
        (&format!("/invocations/{inv}"), "Attempt 1"),
        ("/audit", "decided"),
        (
            "/manifests",
            "<span class=\"outcome\">awaiting_approval</span>",
        ),
        ("/approvals", "Approve gated for test.gated.happened?"),
    ] {
        let r = curl(&[&format!("{url}{path}")], None);
        assert_eq!(r.status, 200, "{path}: {r:?}");
        assert!(r.body.contains(needle), "{path} lacks {needle}: {}", r.body);
        assert!(!r.body.contains("<script>alert"), "{path} is unescaped");
        assert!(r.header("content-security-policy").is_some());
    }
    let r = curl(&[&format!("{url}/invocations/{inv}")], None);
    assert!(r.body.contains("&lt;img src=x onerror=alert(2)&gt;"));
    // Anonymous sees no buttons and cannot answer anything, even here.
    let r = curl(&[&format!("{url}/approvals")], None);
    assert!(!r.body.contains("/respond") && r.body.contains("Log in as a principal"));
    let r = curl(
        &[
            "-X",
            "POST",
            "-H",
            "content-type: application/x-www-form-urlencoded",
            &format!("{url}/approvals/{inv}/respond"),
        ],
        Some(b"csrf=&action=approve&confirmed=yes"),
    );
    assert_eq!(r.status, 401);
}

#[test]
fn a_real_browser_logs_in_sees_the_request_and_approves_it() {
    let Some((chromium, driver)) = common::webdriver::tools() else {
        return;
    };
    let p = console_project();
    let (_serve, url) = serve(&p, &[], &[("FEEDER_TOKEN", FEEDER_TOKEN)]);
    let inv = post_gated(&url, "b1");
    let browser = Browser::start(&driver, &chromium);
    let shots = std::env::var_os("PAP_TEST_SCREENSHOTS").map(std::path::PathBuf::from);

    browser.go(&format!("{url}/approvals"));
    assert!(
        browser.current_url().ends_with("/login"),
        "{}",
        browser.current_url()
    );
    browser.type_into("input[name=name]", "alice");
    browser.type_into("input[name=password]", PASSWORD);
    browser.click("#login");
    wait_until("the inbox after login", || browser.count("#inbox") == 1);

    browser.go(&format!("{url}/approvals"));
    let section = format!("#approval-{inv}");
    let data = browser.text(&format!("{section} pre.json"));
    assert!(data.contains(HOSTILE), "the event data as text: {data}");
    assert!(data.contains("db-1"));
    assert!(!browser.alert_open(), "a script in the event data ran");
    assert_eq!(browser.count("script"), 1, "only the console's own script");
    if let Some(dir) = &shots {
        browser.screenshot(&dir.join("console-approvals.png"));
    }
    browser.click(&format!("{section} button.approve"));
    wait_until("the confirmation page", || browser.count("#confirm") == 1);
    if let Some(dir) = &shots {
        browser.screenshot(&dir.join("console-confirm.png"));
    }
    browser.click("#confirm");
    wait_until("the approved run", || {
        p.invocation_status(&inv) == "succeeded"
    });
    let approved: Vec<Value> = audit(&p)
        .into_iter()
        .filter(|e| e["action"] == "approved" && e["invocation_id"] == inv.as_str())
        .collect();
    assert_eq!(approved.len(), 1);
    assert_eq!(approved[0]["actor"], "alice");

    browser.go(&format!("{url}/invocations/{inv}"));
    assert!(browser.text("main").contains("Approved by alice"));

    // The inbox is live: a message appended meanwhile appears without a reload.
    browser.go(&format!("{url}/"));
    let before = browser.count("#inbox li");
    post_gated(&url, "b2");
    wait_until("the new message on the open page", || {
        browser.count("#inbox li") > before
    });
    assert!(browser.text("#inbox li.new").contains("b2"));
    if let Some(dir) = &shots {
        browser.screenshot(&dir.join("console-inbox.png"));
    }
}

#[test]
fn an_alerts_approval_page_leads_with_what_fired_and_folds_the_json() {
    let Some((chromium, driver)) = common::webdriver::tools() else {
        return;
    };
    let p = console_project();
    std::fs::write(
        p.root().join("triggers/t-am-gated.yaml"),
        "pap_version: \"0.2\"\ntrigger:\n  id: t-am-gated\n  match:\n    type: alertmanager.alert.firing\n  agent: gated\n",
    )
    .unwrap();
    let (_serve, url) = serve(&p, &[], &[("FEEDER_TOKEN", FEEDER_TOKEN)]);
    // The captured Alertmanager body, with a runbook and a link that must never be one.
    let text =
        std::fs::read_to_string(common::fixture("webhooks/alertmanager-v4-captured.json")).unwrap();
    let mut body: Value = serde_json::from_str(&text).unwrap();
    body["alerts"][0]["annotations"]["runbook_url"] = json!("https://runbooks.example/high-value");
    body["alerts"][0]["annotations"]["dashboard"] = json!("javascript:alert(3)");
    let auth = format!("Authorization: Bearer {FEEDER_TOKEN}");
    let r = post(
        &format!("{url}/v1/ingest/alertmanager"),
        "application/json",
        body.to_string().as_bytes(),
        &["-H", &auth],
    );
    assert_eq!(r.status, 200, "{r:?}");
    let line = &r.lines()[0];
    let inv = line["triggers"][0]["invocation_id"]
        .as_str()
        .unwrap()
        .to_owned();

    let browser = Browser::start(&driver, &chromium);
    browser.go(&format!("{url}/login"));
    browser.type_into("input[name=name]", "alice");
    browser.type_into("input[name=password]", PASSWORD);
    browser.click("#login");
    wait_until("the inbox after login", || browser.count("#inbox") == 1);
    browser.go(&format!("{url}/approvals"));
    let section = format!("#approval-{inv}");
    assert_eq!(
        browser.text(&format!("{section} h2")),
        "Approve gated: HighValue (high) on api:8000: poc_metric above 0.5?"
    );
    assert_eq!(
        browser.text(&format!("{section} p.summary")),
        "HighValue (high) on api:8000: poc_metric above 0.5"
    );
    let labels = browser.text(&format!("{section} table.labels"));
    assert!(
        labels.contains("alertname") && labels.contains("HighValue"),
        "{labels}"
    );
    let links = browser.text(&format!("{section} ul.links"));
    assert!(
        links.contains("source") && links.contains("runbook") && links.contains("silence"),
        "{links}"
    );
    assert!(
        !links.contains("dashboard"),
        "a javascript: link is dropped: {links}"
    );
    assert_eq!(browser.count("a[href^='javascript']"), 0);
    let intended = browser.text(&format!("{section} p.intended"));
    assert!(intended.contains("runs at risk high"), "{intended}");
    // The raw JSON is there, folded.
    assert_eq!(browser.text(&format!("{section} details.raw pre.json")), "");
    if let Some(dir) = std::env::var_os("PAP_TEST_SCREENSHOTS").map(std::path::PathBuf::from) {
        browser.screenshot(&dir.join("console-alert-approval.png"));
    }
    browser.click(&format!("{section} details.raw summary"));
    let raw = browser.text(&format!("{section} details.raw pre.json"));
    assert!(raw.contains("948c667b1fc76492"), "{raw}");
}
