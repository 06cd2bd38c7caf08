//! A throwaway PostgreSQL server for the test suite (unit and end-to-end tests), started by
//! the tests themselves from the Debian `postgresql` package's binaries: `initdb` into a
//! temporary directory and `pg_ctl` on a unix socket in it. One server per test process,
//! one database per test. `initdb` refuses root, so under root the server runs as an
//! unprivileged user (`PAP_TEST_PG_USER`, else `pap-test`, which `.ci/run` creates, else
//! `postgres`) through `setpriv`.
//!
//! Compiled into test builds only (the `test-clock` feature, which release builds never
//! have).

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};

/// The environment variable CI sets: PostgreSQL missing is then a failure, not a skip.
pub(crate) const REQUIRE_ENV: &str = "PAP_TEST_REQUIRE_POSTGRES";

#[derive(Clone)]
pub struct TestServer {
    /// Holds the data dir and the socket; removed when the process exits.
    dir: PathBuf,
    bin: PathBuf,
    run_as: Option<(u32, u32)>,
    port: u16,
    /// Durable (fsync on, as in production): for benchmarks. The test server is not.
    durable: bool,
}

/// Why there is no test server (PostgreSQL's binaries missing, `initdb` or `pg_ctl`
/// failing), or why a command on it failed: the words a skip note or a failure shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerError(String);

impl std::fmt::Display for ServerError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ServerError {}

impl From<String> for ServerError {
    fn from(why: String) -> ServerError {
        ServerError(why)
    }
}

static SERVER: OnceLock<Result<TestServer, ServerError>> = OnceLock::new();
static NEXT_DB: AtomicU32 = AtomicU32::new(1);

/// The server of this test process, started on first use; `Err` says why there is none.
pub fn server() -> Result<&'static TestServer, ServerError> {
    SERVER.get_or_init(start).as_ref().map_err(Clone::clone)
}

/// The server, or `None` with a skip note naming what goes unchecked; with
/// `PAP_TEST_REQUIRE_POSTGRES` set, a missing server fails the test instead.
pub fn server_or_skip(unchecked: &str) -> Option<&'static TestServer> {
    match server() {
        Ok(s) => Some(s),
        Err(why) => {
            skip_or_fail(unchecked, &why);
            None
        }
    }
}

/// A missing server: a failure under `PAP_TEST_REQUIRE_POSTGRES`, else a skip note.
fn skip_or_fail(unchecked: &str, why: &ServerError) {
    assert!(
        std::env::var_os(REQUIRE_ENV).is_none(),
        "PostgreSQL is required ({REQUIRE_ENV} is set) but cannot start: {why}"
    );
    use std::io::Write;
    let _ = writeln!(
        std::io::stderr(),
        "note: skipped: {unchecked} on PostgreSQL ({why})"
    );
}

impl TestServer {
    /// A new empty database; its URL (a unix socket, trust authentication).
    pub fn database(&self) -> String {
        let name = format!(
            "pap_{}_{}",
            std::process::id(),
            NEXT_DB.fetch_add(1, Ordering::Relaxed)
        );
        self.psql("postgres", &format!("CREATE DATABASE {name}"))
            .unwrap_or_else(|e| panic!("creating test database {name}: {e}"));
        self.url(&name)
    }

    /// A new database with this pap's schema migrated in.
    pub fn migrated_database(&self) -> String {
        let url = self.database();
        let parsed = pap_database_url::parse(&url, super::Origin::Environment, &|_| None)
            .expect("test URL parses");
        super::PgStore::migrate(&parsed, "test").expect("migrating the test database");
        url
    }

    pub fn url(&self, database: &str) -> String {
        let socket: String = percent_encoding::utf8_percent_encode(
            &self.dir.to_string_lossy(),
            percent_encoding::NON_ALPHANUMERIC,
        )
        .to_string();
        format!("postgres://pap@{socket}:{}/{database}", self.port)
    }

    /// Runs SQL through `psql` as the superuser, for what tests do to the server itself.
    pub fn psql(&self, database: &str, sql: &str) -> Result<String, ServerError> {
        let out = Command::new(self.bin.join("psql"))
            .args(["-X", "-q", "-t", "-A", "-v", "ON_ERROR_STOP=1"])
            .arg("-h")
            .arg(&self.dir)
            .args([
                "-p",
                &self.port.to_string(),
                "-U",
                "pap",
                "-d",
                database,
                "-c",
                sql,
            ])
            .output()
            .map_err(|e| format!("psql: {e}"))?;
        if !out.status.success() {
            return Err(String::from_utf8_lossy(&out.stderr).into_owned().into());
        }
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    }

    /// Stops the server (`pg_ctl stop -m fast`: connections are cut, as in an outage).
    pub fn stop(&self) -> Result<(), ServerError> {
        self.pg_ctl(&["stop", "-m", "fast"])
    }

    /// Starts the server again after [`TestServer::stop`].
    pub fn start(&self) -> Result<(), ServerError> {
        self.pg_ctl(&["start"])
    }

    /// Restarts the server (`pg_ctl restart -m immediate`: as after a crash).
    pub fn restart(&self) -> Result<(), ServerError> {
        self.pg_ctl(&["restart", "-m", "immediate"])
    }

    fn pg_ctl(&self, action: &[&str]) -> Result<(), ServerError> {
        let data = self.dir.join("data");
        let log = self.dir.join("log");
        let speed = if self.durable {
            ""
        } else {
            // Safe against a crash of PostgreSQL itself (the crash tests restart it), not
            // of the machine: the test server's data is thrown away anyway.
            "-c fsync=off -c full_page_writes=off "
        };
        let options = format!(
            "-c listen_addresses='' -k {} -p {} {speed}-c max_connections=300",
            self.dir.display(),
            self.port
        );
        let mut args: Vec<String> = vec![
            "-D".into(),
            data.display().to_string(),
            "-l".into(),
            log.display().to_string(),
            "-w".into(),
            "-s".into(),
            "-o".into(),
            options,
        ];
        args.extend(action.iter().map(|a| a.to_string()));
        run(self.command("pg_ctl", &args), "pg_ctl")
    }

    fn command(&self, program: &str, args: &[String]) -> Command {
        let path = self.bin.join(program);
        match self.run_as {
            Some((uid, gid)) => {
                let mut c = Command::new("setpriv");
                c.arg(format!("--reuid={uid}"))
                    .arg(format!("--regid={gid}"))
                    .arg("--clear-groups")
                    .arg(path)
                    .args(args);
                c
            }
            None => {
                let mut c = Command::new(path);
                c.args(args);
                c
            }
        }
    }
}

fn run(mut c: Command, what: &str) -> Result<(), ServerError> {
    let out = c.output().map_err(|e| format!("{what}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{what} failed: {}{}",
            String::from_utf8_lossy(&out.stderr),
            String::from_utf8_lossy(&out.stdout)
        )
        .into())
    }
}

/// The directory of the newest PostgreSQL's binaries (`PAP_TEST_PG_BIN` overrides).
fn binaries() -> Result<PathBuf, ServerError> {
    if let Some(dir) = std::env::var_os("PAP_TEST_PG_BIN") {
        return Ok(PathBuf::from(dir));
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .map_err(|_| "the postgresql package is not installed (no /usr/lib/postgresql)".to_owned())?
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let v: u32 = e.file_name().to_str()?.parse().ok()?;
            let bin = e.path().join("bin");
            bin.join("initdb").is_file().then_some((v, bin))
        })
        .collect();
    versions.sort();
    versions
        .pop()
        .map(|(_, bin)| bin)
        .ok_or_else(|| ServerError::from("no initdb under /usr/lib/postgresql/*/bin".to_owned()))
}

/// Who runs the server: nobody else unless this process is root.
fn server_user() -> Result<Option<(u32, u32)>, ServerError> {
    if !nix::unistd::geteuid().is_root() {
        return Ok(None);
    }
    let wanted = std::env::var("PAP_TEST_PG_USER").ok();
    let names: Vec<&str> = match wanted.as_deref() {
        Some(name) => vec![name],
        None => vec!["pap-test", "postgres"],
    };
    for name in &names {
        if let Ok(Some(user)) = nix::unistd::User::from_name(name) {
            return Ok(Some((user.uid.as_raw(), user.gid.as_raw())));
        }
    }
    Err(format!(
        "running as root, and none of the users {} exists to run PostgreSQL as \
         (initdb refuses root; .ci/run creates pap-test)",
        names.join(", ")
    )
    .into())
}

/// A server of this test's own, for a test that stops or restarts it (an outage, a crash):
/// the shared [`server`] must stay up for every other test of the process, which run
/// beside it in one binary. Stopped and removed when the guard drops; `None` with a skip
/// note as [`server_or_skip`].
pub fn private_server_or_skip(unchecked: &str) -> Option<PrivateServer> {
    let started = new_server(false).and_then(|server| match initdb_and_start(&server) {
        Ok(()) => Ok(server),
        Err(e) => {
            let _ = std::fs::remove_dir_all(&server.dir);
            Err(e)
        }
    });
    match started {
        Ok(server) => Some(PrivateServer(server)),
        Err(why) => {
            skip_or_fail(unchecked, &why);
            None
        }
    }
}

/// A test's own server (see [`private_server_or_skip`]); removed on drop.
pub struct PrivateServer(TestServer);

impl std::ops::Deref for PrivateServer {
    type Target = TestServer;
    fn deref(&self) -> &TestServer {
        &self.0
    }
}

impl Drop for PrivateServer {
    fn drop(&mut self) {
        let _ = self.0.pg_ctl(&["stop", "-m", "immediate"]);
        let _ = std::fs::remove_dir_all(&self.0.dir);
    }
}

/// A server of its own with fsync on, as a production server runs, for benchmarks: stopped
/// and removed by [`TestServer::remove`].
pub fn start_durable() -> Result<TestServer, ServerError> {
    let server = new_server(true)?;
    if let Err(e) = initdb_and_start(&server) {
        let _ = std::fs::remove_dir_all(&server.dir);
        return Err(e);
    }
    Ok(server)
}

impl TestServer {
    /// Stops the server and removes its files.
    pub fn remove(&self) {
        let _ = self.pg_ctl(&["stop", "-m", "fast"]);
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn new_server(durable: bool) -> Result<TestServer, ServerError> {
    let bin = binaries()?;
    let run_as = server_user()?;
    let dir = tempfile::Builder::new()
        .prefix("pap-pg-")
        .tempdir_in("/tmp")
        .map_err(|e| format!("temp dir: {e}"))?
        .keep();
    if let Some((uid, gid)) = run_as {
        nix::unistd::chown(
            &dir,
            Some(nix::unistd::Uid::from_raw(uid)),
            Some(nix::unistd::Gid::from_raw(gid)),
        )
        .map_err(|e| format!("chown {}: {e}", dir.display()))?;
    }
    Ok(TestServer {
        dir,
        bin,
        run_as,
        port: 5432,
        durable,
    })
}

fn start() -> Result<TestServer, ServerError> {
    let server = new_server(false)?;
    let started = initdb_and_start(&server);
    if let Err(e) = started {
        let _ = std::fs::remove_dir_all(&server.dir);
        return Err(e);
    }
    register_stop(&server);
    Ok(server)
}

fn initdb_and_start(server: &TestServer) -> Result<(), ServerError> {
    let data = server.dir.join("data").display().to_string();
    run(
        server.command(
            "initdb",
            &[
                "-D".into(),
                data,
                "-U".into(),
                "pap".into(),
                "-A".into(),
                "trust".into(),
                "--no-sync".into(),
                "--no-instructions".into(),
                "-E".into(),
                "UTF8".into(),
                "--no-locale".into(),
            ],
        ),
        "initdb",
    )?;
    server.pg_ctl(&["start"])
}

static STOP: OnceLock<TestServer> = OnceLock::new();

/// Stops the server and removes its directory when the test process exits.
fn register_stop(server: &TestServer) {
    unsafe extern "C" {
        fn atexit(callback: extern "C" fn()) -> std::ffi::c_int;
    }
    extern "C" fn stop() {
        if let Some(server) = STOP.get() {
            let _ = server.pg_ctl(&["stop", "-m", "immediate"]);
            let _ = std::fs::remove_dir_all(&server.dir);
        }
    }
    if STOP.set(server.clone()).is_ok() {
        // SAFETY: registering a plain function with the C library; it runs once at exit.
        unsafe {
            atexit(stop);
        }
    }
}
