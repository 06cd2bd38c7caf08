//! `pap serve --listen` on the serve fixture, and curl as its client.

use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

use super::dispatch::lines;
use super::serve::{Project, Serve};

/// A serve fixture project whose pap.yaml gains `extra` (a `listen:` section, say).
pub(crate) fn project(extra: &str) -> Project {
    let p = Project::new();
    let path = p.root().join("pap.yaml");
    let mut text = std::fs::read_to_string(&path).unwrap();
    text.push_str(extra);
    std::fs::write(&path, text).unwrap();
    p
}

/// Starts `pap serve --listen 127.0.0.1:0 EXTRA…` and returns it with its URL (from the log).
pub(crate) fn serve(p: &Project, extra: &[&str], env: &[(&str, &str)]) -> (Serve, String) {
    let mut args = vec!["--listen", "127.0.0.1:0"];
    args.extend_from_slice(extra);
    let mut serve = p.serve_with(&args, env);
    let log = serve.log.clone();
    let mut url = None;
    serve.wait_while_alive("the listening line", || {
        url = listening_url(&std::fs::read_to_string(&log).unwrap_or_default());
        url.is_some()
    });
    (serve, url.unwrap())
}

/// The URL of the last `listening for HTTP` line of a serve log (human or JSON).
pub(crate) fn listening_url(log: &str) -> Option<String> {
    let line = log
        .lines()
        .rev()
        .find(|l| l.contains("listening for HTTP"))?;
    if let Ok(json) = serde_json::from_str::<Value>(line) {
        return json["fields"]["url"].as_str().map(str::to_owned);
    }
    let at = line.find("url=")? + 4;
    Some(line[at..].split_whitespace().next()?.to_owned())
}

/// curl, or a skip (a failure where CI requires it).
pub(crate) fn curl_available() -> bool {
    super::required_tool(
        "curl",
        "PAP_TEST_REQUIRE_HTTP_CLIENTS",
        "the HTTP API is not checked with curl",
    )
    .is_some()
}

/// What curl got.
#[derive(Debug)]
pub(crate) struct Reply {
    pub status: u16,
    /// Lower-case names.
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Reply {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The body's NDJSON lines.
    pub(crate) fn lines(&self) -> Vec<Value> {
        lines(&self.body)
    }

    pub(crate) fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {}", self.body))
    }
}

/// Runs curl with `args` (a URL among them), the body from `body` when given.
pub(crate) fn curl(args: &[&str], body: Option<&[u8]>) -> Reply {
    let dir = tempfile::tempdir().unwrap();
    let headers: PathBuf = dir.path().join("h");
    let out_body: PathBuf = dir.path().join("b");
    let mut cmd = Command::new("curl");
    cmd.args(["-sS", "--max-time", "60", "-H", "Expect:", "-D"])
        .arg(&headers)
        .arg("-o")
        .arg(&out_body)
        .args(["-w", "%{http_code}"])
        .args(args);
    if let Some(body) = body {
        let file = dir.path().join("in");
        std::fs::write(&file, body).unwrap();
        cmd.arg("--data-binary").arg(format!("@{}", file.display()));
    }
    let out = cmd.output().expect("curl runs");
    let status: u16 = String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .unwrap_or(0);
    let head = std::fs::read_to_string(&headers).unwrap_or_default();
    let headers = head
        .lines()
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    Reply {
        status,
        headers,
        body: std::fs::read_to_string(&out_body).unwrap_or_default(),
    }
}

/// [`post`], sent again while the answer is 429: a failed credential from this address
/// (127.0.0.1, as every test request) makes the next attempts wait a moment. A 429 is not
/// itself a failure, so asking again does not prolong the wait.
pub(crate) fn post_once_allowed(
    url: &str,
    content_type: &str,
    body: &[u8],
    extra: &[&str],
) -> Reply {
    let mut reply = None;
    super::serve::wait_until("the failed-attempt wait to pass", || {
        let r = post(url, content_type, body, extra);
        let done = r.status != 429;
        reply = Some(r);
        done
    });
    reply.unwrap()
}

/// POSTs `body` to `url` with a content type.
pub(crate) fn post(url: &str, content_type: &str, body: &[u8], extra: &[&str]) -> Reply {
    let ct = format!("content-type: {content_type}");
    let mut args = vec!["-X", "POST", "-H", ct.as_str()];
    args.extend_from_slice(extra);
    args.push(url);
    curl(&args, Some(body))
}

/// A trigger on `kind` whose high-severity events (`$.data.labels.severity`) provoke the
/// serve fixture's `quick` agent.
pub(crate) fn high_severity_trigger(p: &Project, id: &str, kind: &str) {
    std::fs::write(
        p.root().join(format!("triggers/{id}.yaml")),
        format!(
            "pap_version: \"0.2\"\ntrigger:\n  id: {id}\n  match:\n    type: {kind}\n  filter:\n    - path: $.data.labels.severity\n      operator: eq\n      value: high\n  agent: quick\n"
        ),
    )
    .unwrap();
}

/// A free loopback port (bound, read, released).
pub(crate) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// An argon2 hash of `password`, as `pap hash-password` prints it for pap.yaml.
pub(crate) fn hash_password(password: &str) -> String {
    use std::io::Write as _;
    let mut child = super::pap()
        .arg("hash-password")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(format!("{password}\n").as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

/// Logs in at the console of `url` with curl as `who`; returns the cookie jar (in `dir`) and
/// the login's answer (a 303 with the session cookie).
pub(crate) fn console_login(
    url: &str,
    dir: &std::path::Path,
    who: &str,
    password: &str,
) -> (String, Reply) {
    let jar = dir.join(format!("{who}.cookies")).display().to_string();
    let form = format!("name={who}&password={}", password.replace(' ', "+"));
    let r = curl(
        &[
            "-c",
            &jar,
            "-X",
            "POST",
            "-H",
            "content-type: application/x-www-form-urlencoded",
            &format!("{url}/login"),
        ],
        Some(form.as_bytes()),
    );
    assert_eq!(r.status, 303, "{r:?}");
    (jar, r)
}

/// One HTTP/1.1 connection kept alive for many requests: for tests that send hundreds of
/// requests, where a curl process each would take most of the time. It sends what it is
/// given and reads each answer whole (by `Content-Length`, or chunk by chunk).
pub(crate) struct KeepAlive {
    reader: std::io::BufReader<std::net::TcpStream>,
    host: String,
}

impl KeepAlive {
    /// Connects to `url`'s `host:port` (plain HTTP).
    pub(crate) fn connect(url: &str) -> KeepAlive {
        let host = url
            .trim_start_matches("http://")
            .split('/')
            .next()
            .unwrap()
            .to_owned();
        KeepAlive {
            reader: std::io::BufReader::new(Self::open(&host)),
            host,
        }
    }

    fn open(host: &str) -> std::net::TcpStream {
        let stream = std::net::TcpStream::connect(host).unwrap();
        stream
            .set_read_timeout(Some(std::time::Duration::from_secs(60)))
            .unwrap();
        stream
    }

    /// Sends `method path` with `headers` (`Name: value`) and `body`; the status and body.
    pub(crate) fn send(
        &mut self,
        method: &str,
        path: &str,
        headers: &[&str],
        body: &[u8],
    ) -> (u16, String) {
        use std::io::{BufRead, Read, Write};
        let mut head = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nContent-Length: {}\r\n",
            self.host,
            body.len()
        );
        for h in headers {
            head.push_str(h);
            head.push_str("\r\n");
        }
        head.push_str("\r\n");
        let mut line = String::new();
        // The server closes a connection after an answer that left the body unread (a
        // refusal): then the request is sent again on a new one.
        for _ in 0..2 {
            let stream = self.reader.get_mut();
            let sent = stream
                .write_all(head.as_bytes())
                .and_then(|()| stream.write_all(body));
            line.clear();
            if sent.is_ok() && self.reader.read_line(&mut line).unwrap_or(0) > 0 {
                break;
            }
            self.reader = std::io::BufReader::new(Self::open(&self.host));
        }
        let status: u16 = line.split(' ').nth(1).unwrap().parse().unwrap();
        let (mut length, mut chunked) = (0usize, false);
        loop {
            line.clear();
            self.reader.read_line(&mut line).unwrap();
            let l = line.trim_end();
            if l.is_empty() {
                break;
            }
            let (name, value) = l.split_once(':').unwrap();
            match name.trim().to_ascii_lowercase().as_str() {
                "content-length" => length = value.trim().parse().unwrap(),
                "transfer-encoding" => chunked = value.contains("chunked"),
                _ => {}
            }
        }
        let mut body = Vec::new();
        if chunked {
            loop {
                line.clear();
                self.reader.read_line(&mut line).unwrap();
                let size = usize::from_str_radix(line.trim(), 16).unwrap();
                let mut chunk = vec![0; size + 2];
                self.reader.read_exact(&mut chunk).unwrap();
                if size == 0 {
                    break;
                }
                body.extend_from_slice(&chunk[..size]);
            }
        } else {
            body.resize(length, 0);
            self.reader.read_exact(&mut body).unwrap();
        }
        (status, String::from_utf8_lossy(&body).into_owned())
    }
}
