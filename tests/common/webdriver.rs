//! A WebDriver session on a real headless Chromium, through chromedriver (W3C WebDriver over
//! HTTP, spoken with curl). Debian's `chromium` and `chromium-driver` packages; as root,
//! Chromium needs `--no-sandbox`.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use serde_json::{Value, json};

use super::http::curl;
use super::serve::wait_until;

pub(crate) struct Browser {
    driver: Child,
    base: String,
    session: String,
    _profile: tempfile::TempDir,
}

fn call(method: &str, url: &str, body: Option<&Value>) -> Value {
    let text = body.map(|b| b.to_string());
    let mut args = vec!["-X", method, "-H", "content-type: application/json", url];
    if text.is_none() && method == "POST" {
        args.push("--data-binary");
        args.push("{}");
    }
    let r = curl(&args, text.as_deref().map(str::as_bytes));
    let v: Value = serde_json::from_str(&r.body)
        .unwrap_or_else(|e| panic!("webdriver {method} {url}: {e}: {}", r.body));
    if r.status != 200 {
        panic!("webdriver {method} {url}: {} {}", r.status, v);
    }
    v["value"].clone()
}

/// Chromium and chromedriver, with curl to speak to the driver; or a skip (a failure where CI
/// requires them).
pub(crate) fn tools() -> Option<(PathBuf, PathBuf)> {
    let why = "the console is not driven by a real browser";
    let chromium = super::required_tool("chromium", "PAP_TEST_REQUIRE_HTTP_CLIENTS", why)?;
    let driver = super::required_tool("chromedriver", "PAP_TEST_REQUIRE_HTTP_CLIENTS", why)?;
    super::http::curl_available().then_some((chromium, driver))
}

impl Browser {
    /// Starts chromedriver and a headless Chromium session.
    pub(crate) fn start(chromedriver: &Path, chromium: &Path) -> Browser {
        let port = super::http::free_port();
        let driver = Command::new(chromedriver)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start chromedriver");
        let base = format!("http://127.0.0.1:{port}");
        let status = format!("{base}/status");
        wait_until("chromedriver to be ready", || {
            let r = curl(&[status.as_str()], None);
            r.status == 200
                && serde_json::from_str::<Value>(&r.body).is_ok_and(|v| v["value"]["ready"] == true)
        });
        let profile = tempfile::tempdir().unwrap();
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": chromium.display().to_string(),
                "args": [
                    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                    "--disable-background-networking", "--disable-component-update",
                    "--disable-sync", "--no-first-run", "--disable-quic",
                    "--window-size=1280,1000",
                    format!("--user-data-dir={}", profile.path().display()),
                ]
            }
        }}});
        let v = call("POST", &format!("{base}/session"), Some(&caps));
        let session = v["sessionId"].as_str().expect("a session id").to_owned();
        Browser {
            driver,
            base,
            session,
            _profile: profile,
        }
    }

    fn url(&self, rest: &str) -> String {
        format!("{}/session/{}{rest}", self.base, self.session)
    }

    pub(crate) fn go(&self, url: &str) {
        call("POST", &self.url("/url"), Some(&json!({"url": url})));
    }

    pub(crate) fn current_url(&self) -> String {
        call("GET", &self.url("/url"), None)
            .as_str()
            .unwrap_or("")
            .to_owned()
    }

    /// The element `css` selects (the first), or a failure.
    pub(crate) fn find(&self, css: &str) -> String {
        let v = call(
            "POST",
            &self.url("/element"),
            Some(&json!({"using": "css selector", "value": css})),
        );
        v.as_object()
            .and_then(|o| o.values().next())
            .and_then(Value::as_str)
            .unwrap_or_else(|| panic!("no element {css}"))
            .to_owned()
    }

    /// How many elements `css` selects.
    pub(crate) fn count(&self, css: &str) -> usize {
        call(
            "POST",
            &self.url("/elements"),
            Some(&json!({"using": "css selector", "value": css})),
        )
        .as_array()
        .map_or(0, Vec::len)
    }

    pub(crate) fn type_into(&self, css: &str, text: &str) {
        let el = self.find(css);
        call(
            "POST",
            &self.url(&format!("/element/{el}/value")),
            Some(&json!({"text": text})),
        );
    }

    pub(crate) fn click(&self, css: &str) {
        let el = self.find(css);
        call("POST", &self.url(&format!("/element/{el}/click")), None);
    }

    pub(crate) fn text(&self, css: &str) -> String {
        let el = self.find(css);
        call("GET", &self.url(&format!("/element/{el}/text")), None)
            .as_str()
            .unwrap_or("")
            .to_owned()
    }

    /// Whether a JavaScript dialog (an `alert()`) is open.
    pub(crate) fn alert_open(&self) -> bool {
        let r = curl(&[self.url("/alert/text").as_str()], None);
        r.status == 200
    }

    /// A PNG of the page, written to `path`.
    pub(crate) fn screenshot(&self, path: &PathBuf) {
        use base64::Engine as _;
        let v = call("GET", &self.url("/screenshot"), None);
        let png = base64::engine::general_purpose::STANDARD
            .decode(v.as_str().unwrap_or(""))
            .unwrap();
        std::fs::write(path, png).unwrap();
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = curl(&["-X", "DELETE", &self.url("")], None);
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}
