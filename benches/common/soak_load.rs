//! The soak test's project, load and sampling (see `benches/soak.rs`).

use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::soak_report::Sample;

/// The test clock's time when the load starts.
const T0: &str = "2026-03-11T06:00:00Z";

pub(crate) struct Settings {
    pub seconds: u64,
    pub rate: u64,
    pub speed: f64,
    pub interval: u64,
    pub out: PathBuf,
    /// Every `serve.*_retention` of the project (`PAP_SOAK_RETENTION`, e.g. `2d`), so that a
    /// short run reaches the steady state; `None`: pap's defaults (7 and 30 days).
    pub retention: Option<String>,
    /// On PostgreSQL (`PAP_SOAK_STORE=postgres`): a server started here, fsync on.
    pub postgres: bool,
    /// Serve nodes sharing the store (`PAP_SOAK_NODES`, PostgreSQL only).
    pub nodes: usize,
    /// The project's `store_cache` (`PAP_SOAK_STORE_CACHE`, e.g. `1MiB`): how much of serve's
    /// RSS is redb's page cache. `None`: pap's default.
    pub store_cache: Option<String>,
}

impl Settings {
    pub(crate) fn from_env() -> Settings {
        fn var<T: std::str::FromStr>(name: &str, default: T) -> T {
            match std::env::var(name) {
                Ok(v) => v
                    .parse()
                    .unwrap_or_else(|_| panic!("{name}={v:?} is not a valid value")),
                Err(_) => default,
            }
        }
        Settings {
            seconds: var("PAP_SOAK_SECONDS", 180),
            rate: var("PAP_SOAK_RATE", 200),
            speed: var("PAP_SOAK_SPEED", 720.0),
            interval: var("PAP_SOAK_INTERVAL", 5),
            retention: std::env::var("PAP_SOAK_RETENTION").ok(),
            postgres: match std::env::var("PAP_SOAK_STORE").as_deref() {
                Ok("postgres") => true,
                Ok("redb") | Err(_) => false,
                Ok(other) => panic!("PAP_SOAK_STORE={other:?}: expected redb or postgres"),
            },
            nodes: var("PAP_SOAK_NODES", 1),
            store_cache: std::env::var("PAP_SOAK_STORE_CACHE").ok(),
            out: PathBuf::from(var(
                "PAP_SOAK_OUT",
                concat!(env!("CARGO_MANIFEST_DIR"), "/target/soak").to_string(),
            )),
        }
    }
}

/// The running soak: what every load source shares.
struct Shared {
    root: PathBuf,
    /// Node 0's state directory: the other pap processes use it too.
    state: PathBuf,
    /// Each serve node's state directory (its spool) and port.
    nodes: Vec<(PathBuf, u16)>,
    /// The PostgreSQL database every process uses, if any.
    database: Option<String>,
    /// The test clock's settings, for every pap process.
    clock: Vec<(&'static str, String)>,
    stop: AtomicBool,
    next_id: AtomicU64,
    /// When the test clock read `T0`, and how fast it runs.
    started: Instant,
    speed: f64,
    /// (answered at, latency ms) of each HTTP post.
    posts: Mutex<Vec<(Instant, f64)>>,
    errors: Mutex<Vec<String>>,
}

impl Shared {
    fn pap(&self) -> Command {
        self.pap_at(&self.state)
    }

    fn pap_at(&self, state: &Path) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_pap"));
        cmd.arg("--root").arg(&self.root).arg("--state").arg(state);
        cmd.envs(self.clock.iter().map(|(k, v)| (*k, v.as_str())));
        if let Some(url) = &self.database {
            cmd.env("PAP_DATABASE_URL", url);
        }
        cmd.env("NO_COLOR", "1");
        cmd
    }

    /// The node the `n`th file or post goes to.
    fn node(&self, n: u64) -> &(PathBuf, u16) {
        &self.nodes[n as usize % self.nodes.len()]
    }

    fn stopping(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    fn error(&self, what: String) {
        let mut errors = self.errors.lock().unwrap();
        if errors.len() < 20 {
            errors.push(what);
        }
    }

    /// The next event of the mix: mostly throttled alerts, some jobs (one in ten fails),
    /// some debounced metrics, a few grave alerts that wait for approval.
    fn event(&self, source: &str) -> String {
        let n = self.next_id.fetch_add(1, Ordering::Relaxed);
        let id = format!("{source}-{n:010}");
        let (kind, data) = match n % 1000 {
            0..=19 => (
                "soak.job.requested",
                format!(r#"{{"host":"h{}","fail":{}}}"#, n % 10, n % 10 == 3),
            ),
            20..=49 => ("soak.metric.high", format!(r#"{{"host":"h{}"}}"#, n % 50)),
            50 => ("soak.alert.grave", r#"{"host":"db"}"#.to_string()),
            _ => ("soak.alert.fired", format!(r#"{{"host":"h{}"}}"#, n % 1000)),
        };
        // The event's time: the test clock's now, a second back (an event from the future
        // is refused).
        let ran = self.started.elapsed().as_secs_f64() * self.speed;
        let at: jiff::Timestamp = T0.parse().unwrap();
        let time = at
            .checked_add(jiff::SignedDuration::from_secs_f64(ran - 1.0))
            .unwrap();
        format!(
            r#"{{"pap_version":"0.2","id":"{id}","type":"{kind}","source":"soak","time":"{time}","data":{data}}}"#
        )
    }

    fn events(&self, source: &str, n: usize) -> String {
        (0..n).map(|_| self.event(source) + "\n").collect()
    }
}

fn write_project(root: &Path, retention: Option<&str>, store_cache: Option<&str>) {
    std::fs::create_dir_all(root.join("triggers")).unwrap();
    std::fs::create_dir_all(root.join("agents")).unwrap();
    let mut config = String::from("pap_version: \"0.2\"\n");
    if let Some(bytes) = store_cache {
        config.push_str(&format!("store_cache: {bytes}\n"));
    }
    config.push_str("serve:\n  max_concurrent: 8\n");
    if let Some(r) = retention {
        // The ledger keeps at least twice the 24 h TTL, notifications twice the approval
        // timeout: pap raises a shorter setting to those.
        for kind in [
            "done",
            "ledger",
            "invocation",
            "notification",
            "inbox",
            "audit",
        ] {
            config.push_str(&format!("  {kind}_retention: {r}\n"));
        }
    }
    std::fs::write(root.join("pap.yaml"), config).unwrap();
    // The job agent fails when its event says so (one job in ten), and is retried once.
    let agents = [
        (
            "worker",
            "low",
            r#"["sh", "-c", "case \"$(cat)\" in *'\"fail\":true'*) exit 1;; esac; echo '{}'"]"#,
            "  on_failure:\n    retry:\n      max_attempts: 2\n      backoff_seconds: 60\n  budget:\n    invocations_per_day: 1000000\n",
        ),
        ("careful", "high", r#"["true"]"#, ""),
    ];
    for (id, risk, command, extra) in agents {
        std::fs::write(
            root.join(format!("agents/{id}.yaml")),
            format!(
                "pap_version: \"0.2\"\nagent:\n  id: {id}\n  risk_level: {risk}\n  model:\n    provider: command\n    command: {command}\n{extra}"
            ),
        )
        .unwrap();
    }
    let triggers = [
        (
            "noisy",
            "soak.alert.fired",
            "worker",
            "  throttle:\n    max_per_window: 2\n    window_seconds: 3600\n",
        ),
        (
            "jobs",
            "soak.job.requested",
            "worker",
            "  concurrency:\n    limit: 2\n    key: $.data.host\n",
        ),
        (
            "metrics",
            "soak.metric.high",
            "worker",
            "  debounce:\n    seconds: 600\n    window_key: $.data.host\n    mode: trailing\n",
        ),
        ("grave", "soak.alert.grave", "careful", ""),
    ];
    for (id, kind, agent, extra) in triggers {
        std::fs::write(
            root.join(format!("triggers/{id}.yaml")),
            format!(
                "pap_version: \"0.2\"\ntrigger:\n  id: {id}\n  match:\n    type: {kind}\n{extra}  agent: {agent}\n"
            ),
        )
        .unwrap();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// One HTTP/1.1 request on a new connection; the status and the body.
fn http(
    port: u16,
    method: &str,
    path: &str,
    kind: &str,
    body: &str,
) -> std::io::Result<(u16, String)> {
    let mut s = TcpStream::connect(("127.0.0.1", port))?;
    s.set_read_timeout(Some(Duration::from_secs(60)))?;
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )?;
    let mut text = String::new();
    s.read_to_string(&mut text)?;
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = text
        .split_once("\r\n\r\n")
        .map_or("", |(_, b)| b)
        .to_owned();
    Ok((status, body))
}

fn rss_mb(pid: u32) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse::<f64>().ok())
        .unwrap_or(0.0)
        / 1024.0
}

/// Runs `each` every `every` until the soak stops.
fn every(
    shared: &Arc<Shared>,
    every: Duration,
    mut each: impl FnMut(&Shared) + Send + 'static,
) -> std::thread::JoinHandle<()> {
    let shared = shared.clone();
    std::thread::spawn(move || {
        let mut next = Instant::now();
        while !shared.stopping() {
            each(&shared);
            next += every;
            if let Some(wait) = next.checked_duration_since(Instant::now()) {
                std::thread::sleep(wait);
            } else {
                next = Instant::now();
            }
        }
    })
}

pub(crate) fn run(settings: &Settings) -> Vec<Sample> {
    let dir = tempfile::tempdir().expect("temp dir");
    let root = dir.path().to_path_buf();
    write_project(
        &root,
        settings.retention.as_deref(),
        settings.store_cache.as_deref(),
    );
    assert!(
        settings.nodes >= 1 && (settings.postgres || settings.nodes == 1),
        "PAP_SOAK_NODES={}: one node on redb, one or more on PostgreSQL",
        settings.nodes
    );
    let nodes: Vec<(PathBuf, u16)> = (0..settings.nodes)
        .map(|i| {
            let state = root.join(if i == 0 {
                "state".to_string()
            } else {
                format!("state-{i}")
            });
            std::fs::create_dir_all(state.join("spool")).unwrap();
            (state, free_port())
        })
        .collect();
    let state = nodes[0].0.clone();
    let server = settings.postgres.then(|| {
        pap::pgstore::testing::start_durable()
            .unwrap_or_else(|why| panic!("cannot start PostgreSQL for the soak: {why}"))
    });
    let database = server.as_ref().map(|s| s.database());
    let epoch = jiff::Timestamp::now().to_string();
    let clock_started = Instant::now();
    let shared = Arc::new(Shared {
        root: root.clone(),
        state: state.clone(),
        nodes,
        database,
        clock: vec![
            ("PAP_NOW", T0.to_string()),
            ("PAP_CLOCK_SPEED", settings.speed.to_string()),
            ("PAP_CLOCK_EPOCH", epoch),
        ],
        stop: AtomicBool::new(false),
        next_id: AtomicU64::new(0),
        started: clock_started,
        speed: settings.speed,
        posts: Mutex::new(Vec::new()),
        errors: Mutex::new(Vec::new()),
    });

    if shared.database.is_some() {
        let migrated = shared
            .pap()
            .args(["store", "migrate"])
            .output()
            .expect("pap store migrate");
        assert!(
            migrated.status.success(),
            "pap store migrate: {}",
            String::from_utf8_lossy(&migrated.stderr)
        );
    }
    // Serve, logging warnings only: a month of "decided" lines would fill the disk.
    let mut serves: Vec<Child> = shared
        .nodes
        .iter()
        .map(|(state, port)| {
            let log = std::fs::File::create(state.join("serve.log")).unwrap();
            shared
                .pap_at(state)
                .env("PAP_LOG", "warn")
                .args(["serve", "--listen", &format!("127.0.0.1:{port}")])
                .stdout(Stdio::null())
                .stderr(log)
                .spawn()
                .expect("pap serve")
        })
        .collect();
    let started = Instant::now();
    for (_, port) in &shared.nodes {
        while http(*port, "GET", "/healthz", "text/plain", "").is_err() {
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "serve did not start"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    let rate = settings.rate as f64;
    let mut threads = Vec::new();
    // Spool files: 40% of the rate, a file every 100 ms.
    let per_file = ((rate * 0.4 * 0.1).round() as usize).max(1);
    threads.push(every(&shared, Duration::from_millis(100), move |s| {
        let n = s.next_id.load(Ordering::Relaxed);
        let spool = s.node(n).0.join("spool");
        let tmp = spool.join(format!(".f{n}.tmp"));
        if std::fs::write(&tmp, s.events("spool", per_file)).is_ok() {
            let _ = std::fs::rename(&tmp, spool.join(format!("f{n}.ndjson")));
        }
    }));
    // HTTP posts: 40% of the rate, every 20 ms, single events and batches in turn.
    let per_post = ((rate * 0.4 * 0.02).round() as usize).max(1);
    let mut turn = 0u64;
    threads.push(every(&shared, Duration::from_millis(20), move |s| {
        turn += 1;
        let (kind, body) = if turn.is_multiple_of(2) || per_post == 1 {
            ("application/json", s.event("http"))
        } else {
            ("application/x-ndjson", s.events("http", per_post * 2 - 1))
        };
        let sent = Instant::now();
        match http(s.node(turn).1, "POST", "/v1/events", kind, &body) {
            Ok((200, _)) => s
                .posts
                .lock()
                .unwrap()
                .push((Instant::now(), sent.elapsed().as_secs_f64() * 1000.0)),
            Ok((code, body)) => s.error(format!("POST /v1/events: {code} {body}")),
            Err(e) => s.error(format!("POST /v1/events: {e}")),
        }
    }));
    // `pap dispatch --no-run` beside serve: 20% of the rate, a process every 5 s.
    let per_dispatch = ((rate * 0.2 * 5.0).round() as usize).max(1);
    threads.push(every(&shared, Duration::from_secs(5), move |s| {
        let n = s.next_id.load(Ordering::Relaxed);
        let file = s.root.join(format!("dispatch-{n}.ndjson"));
        std::fs::write(&file, s.events("dispatch", per_dispatch)).unwrap();
        let out = s
            .pap()
            .args(["dispatch", "--no-run", "--json"])
            .arg(&file)
            .stdout(Stdio::null())
            .output();
        let _ = std::fs::remove_file(&file);
        match out {
            Ok(o) if o.status.success() => {}
            Ok(o) => s.error(format!(
                "pap dispatch: {}",
                String::from_utf8_lossy(&o.stderr)
                    .lines()
                    .last()
                    .unwrap_or("")
            )),
            Err(e) => s.error(format!("pap dispatch: {e}")),
        }
    }));
    // Approvals: every 10 s, the older half of those waiting is approved; the rest expire.
    threads.push(every(&shared, Duration::from_secs(10), |s| {
        let Ok(out) = s
            .pap()
            .args(["invocations", "--status", "awaiting_approval", "--json"])
            .output()
        else {
            return;
        };
        let ids: Vec<String> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter_map(|v| v["id"].as_str().map(str::to_owned))
            .collect();
        for id in ids.iter().take(ids.len() / 2) {
            let _ = s
                .pap()
                .args(["approve", id, "--by", "soak"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
    }));
    // An MCP client subscribed to the inbox, posting every 10 s.
    let mcp = start_mcp(&shared);

    // Sampling.
    let mut samples = Vec::new();
    // Each table's bytes at each sample (`tables.csv`): where the space goes.
    let mut table_sizes = String::from("seconds,table,bytes\n");
    let probe = crate::disk_probe::DiskProbe::start(&root);
    let load_started = Instant::now();
    let mut interval_from = load_started;
    let interval = Duration::from_secs(settings.interval);
    let mut last_runs = finished_runs(&shared).unwrap_or(0.0);
    let mut last_at = Instant::now();
    let mut next = load_started + interval;
    while load_started.elapsed() < Duration::from_secs(settings.seconds) {
        // RSS read every 250 ms; the interval keeps the median of its readings, which a leak
        // raises and a passing excursion does not, either way. Allocator churn goes above the
        // level (a 2 MB swing for half a minute), and it dips below it for moments (the
        // blocking pool's threads come and go, 15 to 17 in one run, each with its stack and
        // heap pages). The lowest reading, used before, caught those dips: a run here
        // read +1.2 MB/min (CI's +1.96) while a 2 s watch of its `RssAnon` stayed within
        // ±0.5 MB of one level from 40 s on.
        let mut readings = Vec::new();
        loop {
            readings.push(serves.iter().map(|c| rss_mb(c.id())).sum::<f64>());
            let left = next.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            std::thread::sleep(left.min(Duration::from_millis(250)));
        }
        readings.sort_by(f64::total_cmp);
        let rss_level = readings[readings.len() / 2];
        next += interval;
        let now = Instant::now();
        let mut lat: Vec<f64> = {
            let mut posts = shared.posts.lock().unwrap();
            let (old, kept): (Vec<_>, Vec<_>) = posts.drain(..).partition(|(at, _)| *at <= now);
            *posts = kept;
            old.into_iter().map(|(_, ms)| ms).collect()
        };
        lat.sort_by(f64::total_cmp);
        let pct = |p: f64| {
            if lat.is_empty() {
                0.0
            } else {
                lat[((lat.len() - 1) as f64 * p).round() as usize]
            }
        };
        let runs = finished_runs(&shared).unwrap_or(last_runs);
        let took = last_at.elapsed().as_secs_f64();
        let (file, live, each) = sizes(&shared);
        let at = load_started.elapsed().as_secs_f64();
        for (name, bytes) in each {
            let _ = writeln!(table_sizes, "{at:.1},{name},{bytes}");
        }
        let sample = Sample {
            t: load_started.elapsed().as_secs_f64(),
            // Every node's, added up: a leak in any shows in the slope.
            rss_mb: rss_level,
            file_mb: file,
            live_mb: live,
            p50_ms: pct(0.5),
            p99_ms: pct(0.99),
            posts: lat.len(),
            runs_per_s: (runs - last_runs) / took,
            disk_max_ms: probe
                .between(interval_from, now)
                .into_iter()
                .fold(0.0, f64::max),
        };
        interval_from = now;
        (last_runs, last_at) = (runs, Instant::now());
        println!(
            "{:>6.0} s  rss {:>6.1} MB  {} {:>7.2} MB  live {:>7.2} MB  p50 {:>6.2} ms  p99 {:>7.2} ms ({} posts)  {:>6.1} runs/s  disk max {:>6.1} ms",
            sample.t,
            sample.rss_mb,
            if settings.postgres { "tables" } else { "file" },
            sample.file_mb,
            sample.live_mb,
            sample.p50_ms,
            sample.p99_ms,
            sample.posts,
            sample.runs_per_s,
            sample.disk_max_ms
        );
        samples.push(sample);
    }
    shared.stop.store(true, Ordering::Relaxed);
    for t in threads {
        let _ = t.join();
    }
    stop_mcp(mcp);
    // What a sync costs on this disk, over the whole run: the fsync cost in the same run.
    println!(
        "disk probe (a 4 KiB append and fdatasync every 20 ms, beside the state): {}",
        crate::disk_probe::summary(probe.between(load_started, Instant::now()))
    );
    probe.stop();
    for serve in &mut serves {
        let _ = Command::new("kill").arg(serve.id().to_string()).status();
        let _ = serve.wait();
    }
    print_largest_tables(&shared);
    std::fs::create_dir_all(&settings.out).expect("output directory");
    std::fs::write(settings.out.join("tables.csv"), table_sizes).expect("writing tables.csv");
    if let Some(server) = server {
        server.remove();
    }
    let errors = shared.errors.lock().unwrap();
    if !errors.is_empty() {
        println!("errors seen ({} shown):", errors.len());
        for e in errors.iter() {
            println!("  {e}");
        }
    }
    let warnings: String = shared
        .nodes
        .iter()
        .map(|(state, _)| std::fs::read_to_string(state.join("serve.log")).unwrap_or_default())
        .collect();
    // The job agent fails one job in ten on purpose: those lines are the load, the rest news.
    let (expected, other): (Vec<&str>, Vec<&str>) = warnings.lines().partition(|l| {
        l.contains("error=\"exited with status 1\"")
            && (l.contains("attempt failed; retry queued") || l.contains(" failed attempts="))
    });
    println!(
        "serve logged {} warnings for the failing jobs (the load's), and {} others{}",
        expected.len(),
        other.len(),
        if other.is_empty() { "" } else { "; the last:" }
    );
    for l in other.iter().rev().take(5) {
        println!("  {l}");
    }
    samples
}

/// The state file's size and the live data (the tables' pages), in MB. On PostgreSQL the
/// "file" is the tables' total size (heap, indexes and TOAST: `pg_total_relation_size`, as
/// `pap status` shows it), and there is no live figure (0).
/// Also each table's bytes, for `tables.csv`.
fn sizes(shared: &Shared) -> (f64, f64, Vec<(String, u64)>) {
    let each: Vec<(String, u64)> = shared
        .pap()
        .args(["status", "--json", "--tables"])
        .output()
        .ok()
        .and_then(|o| serde_json::from_slice::<serde_json::Value>(&o.stdout).ok())
        .and_then(|v| v["store"]["tables"].as_array().cloned())
        .unwrap_or_default()
        .iter()
        .map(|t| {
            (
                t["name"].as_str().unwrap_or("?").to_owned(),
                t["bytes"].as_u64().unwrap_or(0),
            )
        })
        .collect();
    let tables: u64 = each.iter().map(|(_, b)| b).sum();
    if shared.database.is_some() {
        return (tables as f64 / 1e6, 0.0, each);
    }
    let file = std::fs::metadata(shared.state.join("state.redb")).map_or(0, |m| m.len());
    (file as f64 / 1e6, tables as f64 / 1e6, each)
}

/// The five largest tables at the end, from `pap status --json`: where the space went.
fn print_largest_tables(shared: &Shared) {
    let Some(status) = shared
        .pap()
        .args(["status", "--json", "--tables"])
        .output()
        .ok()
        .and_then(|o| serde_json::from_slice::<serde_json::Value>(&o.stdout).ok())
    else {
        return;
    };
    let tables = status["store"]["tables"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let largest: Vec<String> = tables
        .iter()
        .take(5)
        .map(|t| {
            format!(
                "{} {:.2} MB ({} rows)",
                t["name"].as_str().unwrap_or("?"),
                t["bytes"].as_u64().unwrap_or(0) as f64 / 1e6,
                t["rows"].as_u64().unwrap_or(0)
            )
        })
        .collect();
    println!("largest tables at the end: {}", largest.join(", "));
}

/// `pap_invocations_finished_total`, summed over agents, results and nodes.
fn finished_runs(shared: &Shared) -> Option<f64> {
    let mut sum = 0.0;
    for (_, port) in &shared.nodes {
        let (_, body) = http(*port, "GET", "/metrics", "text/plain", "").ok()?;
        sum += body
            .lines()
            .filter(|l| l.starts_with("pap_invocations_finished_total"))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum::<f64>();
    }
    Some(sum)
}

struct Mcp {
    child: Child,
    threads: Vec<std::thread::JoinHandle<()>>,
}

fn start_mcp(shared: &Arc<Shared>) -> Mcp {
    let mut child = shared
        .pap()
        .arg("mcp")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("pap mcp");
    let mut stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    let send = |stdin: &mut std::process::ChildStdin, msg: serde_json::Value| {
        writeln!(stdin, "{msg}").and_then(|_| stdin.flush())
    };
    let _ = send(
        &mut stdin,
        serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "soak", "version": "0"}}}),
    );
    let _ = send(
        &mut stdin,
        serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    );
    let _ = send(
        &mut stdin,
        serde_json::json!({"jsonrpc": "2.0", "id": 2, "method": "resources/subscribe",
            "params": {"uri": "ui://chat/inbox"}}),
    );
    // Reads everything the server says (updates included), so it never blocks on a pipe.
    let reader = {
        let shared = shared.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if line.contains("\"error\"") {
                    shared.error(format!("pap mcp: {line}"));
                }
            }
        })
    };
    let mut n = 10;
    let stdin = Mutex::new(stdin);
    let poster = every(shared, Duration::from_secs(10), move |_| {
        n += 1;
        let _ = send(
            &mut stdin.lock().unwrap(),
            serde_json::json!({"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": {
                "name": "chat_human_post", "arguments": {"content": format!("soak ping {n}")}}}),
        );
    });
    Mcp {
        child,
        threads: vec![reader, poster],
    }
}

fn stop_mcp(mut mcp: Mcp) {
    let _ = mcp.child.kill();
    let _ = mcp.child.wait();
    for t in mcp.threads {
        let _ = t.join();
    }
}
