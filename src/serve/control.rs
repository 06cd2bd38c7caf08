//! The local control socket `<state>/serve.sock`: how other `pap` commands find a running
//! serve and hand it work. Only the owner may connect (mode 0600). One JSON request per
//! line, one JSON reply per line:
//!
//! - `{"op":"ping"}` → `{"ok":true,"pid":…,"started_at":…,"version":…,"conditions":[…]}`
//! - `{"op":"wake"}` → `{"ok":true}`: look at the queue now (an approval, `--no-run` work)
//! - `{"op":"environment"}` → `{"ok":true,"pid":…,"view":{…}}`: what serve's environment
//!   gives the project, names only (see `env_view`), for `pap doctor`
//!
//! Decisions and state never travel over the socket: every command reads and writes the
//! store itself (the store takes turns between processes), so a serve that dies mid-request
//! loses nothing. The socket only makes serve react at once instead of at its next scan.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use serde_json::{Value, json};

pub const SOCKET_FILE: &str = "serve.sock";
const CLIENT_TIMEOUT: Duration = Duration::from_secs(2);

/// What a running serve says about itself.
#[derive(Debug, Clone, Deserialize)]
pub struct ServeInfo {
    pub pid: u32,
    pub started_at: String,
    /// The HTTP listener's URL, when serve listens.
    #[serde(default)]
    pub listen: Option<String>,
    /// What is wrong with it though it keeps going (see [`super::conditions`]); a serve of an
    /// earlier release sends none.
    #[serde(default)]
    pub conditions: Vec<super::conditions::Shown>,
}

/// What serve does for each request.
pub struct Handlers {
    /// The reply to a ping, as of then.
    pub info: Box<dyn Fn() -> Value + Send>,
    /// The reply to `environment`, as of then.
    pub environment: Box<dyn Fn() -> Value + Send>,
    /// Called for each wake request.
    pub wake: Box<dyn Fn() + Send>,
}

/// What a running serve answers on its socket from: its start, its listener, its
/// conditions, the project in force (a reload replaces it) and its wake-up channel.
pub(super) struct ServeView {
    pub started_at: String,
    pub listen: Option<String>,
    pub conditions: std::sync::Arc<super::conditions::Conditions>,
    pub project: std::sync::Arc<std::sync::RwLock<std::sync::Arc<crate::manifest::Project>>>,
    pub wake: std::sync::mpsc::Sender<super::Wake>,
}

/// Serve's answers: a ping with its pid, start, version, listener and conditions; its view
/// of the environment the project needs (names only, never a value: `pap doctor`); a wake.
pub(super) fn serve_handlers(view: ServeView) -> Handlers {
    let ServeView {
        started_at,
        listen,
        conditions,
        project,
        wake,
    } = view;
    let pid = std::process::id();
    Handlers {
        info: Box::new(move || {
            json!({
                "ok": true,
                "pid": pid,
                "started_at": started_at,
                "version": env!("CARGO_PKG_VERSION"),
                "listen": listen,
                "conditions": conditions.shown(),
            })
        }),
        environment: Box::new(move || {
            let project = project.read().unwrap_or_else(|p| p.into_inner()).clone();
            json!({
                "ok": true,
                "pid": pid,
                "view": crate::env_view::view(&project, &|name| std::env::var_os(name)),
            })
        }),
        wake: Box::new(move || {
            let _ = wake.send(super::Wake::Work);
        }),
    }
}

/// Listens on the socket on its own thread.
pub fn listen(state_dir: &Path, handlers: Handlers) -> std::io::Result<PathBuf> {
    let path = state_dir.join(SOCKET_FILE);
    // Serve holds the state lock, so any socket file left here is from a dead serve.
    let _ = std::fs::remove_file(&path);
    let listener = UnixListener::bind(&path)?;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))?;
    std::thread::Builder::new()
        .name("pap-control".into())
        .spawn(move || {
            for conn in listener.incoming() {
                let Ok(conn) = conn else { continue };
                let _ = answer(conn, &handlers);
            }
        })?;
    Ok(path)
}

fn answer(conn: UnixStream, handlers: &Handlers) -> std::io::Result<()> {
    conn.set_read_timeout(Some(CLIENT_TIMEOUT))?;
    conn.set_write_timeout(Some(CLIENT_TIMEOUT))?;
    let mut reader = BufReader::new(conn.try_clone()?);
    let mut line = String::new();
    reader.by_ref().take(64 * 1024).read_line(&mut line)?;
    let request: Value = serde_json::from_str(&line).unwrap_or(Value::Null);
    let reply = match request.get("op").and_then(Value::as_str) {
        Some("ping") => (handlers.info)(),
        Some("environment") => (handlers.environment)(),
        Some("wake") => {
            (handlers.wake)();
            json!({"ok": true})
        }
        _ => {
            json!({"ok": false, "error": "unknown request; expected {\"op\":\"ping\"}, {\"op\":\"environment\"} or {\"op\":\"wake\"}"})
        }
    };
    let mut conn = conn;
    conn.write_all(format!("{reply}\n").as_bytes())
}

fn request(state_dir: &Path, op: &str) -> Option<Value> {
    let conn = UnixStream::connect(state_dir.join(SOCKET_FILE)).ok()?;
    conn.set_read_timeout(Some(CLIENT_TIMEOUT)).ok()?;
    conn.set_write_timeout(Some(CLIENT_TIMEOUT)).ok()?;
    let mut writer = conn.try_clone().ok()?;
    writer
        .write_all(format!("{}\n", json!({"op": op})).as_bytes())
        .ok()?;
    let mut line = String::new();
    BufReader::new(conn).read_line(&mut line).ok()?;
    serde_json::from_str(&line).ok()
}

/// The serve running on `state_dir`, if one answers.
pub fn running(state_dir: &Path) -> Option<ServeInfo> {
    serde_json::from_value(request(state_dir, "ping")?).ok()
}

/// What the serve running on `state_dir` says its environment gives the project: its pid
/// and its view; `None` when none answers (or one of an earlier release, which knows no such
/// request).
pub(crate) fn environment(state_dir: &Path) -> Option<(u32, crate::env_view::View)> {
    let reply = request(state_dir, "environment")?;
    let pid = u32::try_from(reply.get("pid")?.as_u64()?).ok()?;
    Some((
        pid,
        serde_json::from_value(reply.get("view")?.clone()).ok()?,
    ))
}

/// Asks a running serve to look at its queue now; false when none answered.
pub fn wake(state_dir: &Path) -> bool {
    request(state_dir, "wake").is_some_and(|v| v["ok"] == true)
}
