//! The cluster crash test: three `pap serve` nodes on one PostgreSQL database,
//! fed events that each go to two different nodes (one through its spool, the other over
//! HTTP), while nodes are SIGKILLed and restarted at random, one node is paused with SIGSTOP
//! past its lease and resumed, and PostgreSQL itself is restarted once.
//!
//! After quiescence, from the database and the agent's own records (tests/fixtures/cluster):
//! - every (event, trigger) was decided exactly once (one ledger row each);
//! - every invocation succeeded, and its recorded result is its last run's;
//! - no two runs of one invocation overlapped (the agent notes any earlier run it finds
//!   alive), and a run was repeated only when its node was killed or paused, or the database
//!   restarted, between it and the next run;
//! - the throttled trigger never admitted more than its maximum in any window;
//! - each schedule fire was fired by one node and decided once.
//!
//! Scale: `PAP_TEST_CLUSTER_EVENTS` events (default 1,500; the full run is 20,000,
//! outside CI), fed at `PAP_TEST_CLUSTER_RATE` events a second (default 50); the chaos is
//! drawn from `PAP_TEST_CLUSTER_SEED` (printed, so a failure can be replayed).

use crate::common;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::dispatch::ev;
use common::postgres::{migrated_by_pap, use_database};
use common::serve::{Project, Serve};
use nix::sys::signal::Signal;
use serde_json::{Value, json};

/// The fixture's `serve.lease`.
const LEASE: Duration = Duration::from_secs(3);
/// The fixture's throttle on `t-limited`: 3 per sliding 5 s.
const THROTTLE_MAX: usize = 3;
const THROTTLE_WINDOW_MS: i64 = 5_000;
const NODES: usize = 3;
const BATCH: usize = 25;

fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Wall clock in nanoseconds, as the agent's `date +%s%N` writes it.
fn wall_ns() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos() as i64
}

/// xorshift64*: reproducible chaos from a printed seed.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % n
    }
    fn millis(&mut self, from: u64, to: u64) -> Duration {
        Duration::from_millis(from + self.below(to - from))
    }
}

/// One node: its project (own state dir and spool, same database), its serve while it
/// runs, and its HTTP address.
struct Node {
    id: String,
    /// How many times this node was started: its runs are recorded as `ID#N`, so a run is
    /// tied to the process that started it (a run's start line may come after that process
    /// was killed: the agent reads its input first).
    started: usize,
    project: Project,
    serve: Option<Serve>,
    url: Option<String>,
}

impl Node {
    /// `ID#N`: the node's current process, as its runs record it.
    fn incarnation(&self) -> String {
        format!("{}#{}", self.id, self.started)
    }
}

/// What the chaos did to whom, and when (wall clock ns).
#[derive(Debug, Clone)]
enum Disruption {
    /// From just before SIGKILL to its death. `node` is the incarnation killed (`ID#N`): a run
    /// it started may write its start line after the signal was sent.
    Killed {
        node: String,
        from: i64,
        #[allow(dead_code)] // shown in a failure's message
        to: i64,
    },
    Paused {
        node: String,
        from: i64,
        to: i64,
    },
    DatabaseRestarted {
        from: i64,
        to: i64,
    },
}

struct Cluster {
    nodes: Vec<Node>,
    shared: PathBuf,
}

impl Cluster {
    fn start(&mut self, i: usize) {
        let node = &mut self.nodes[i];
        node.started += 1;
        let incarnation = node.incarnation();
        let shared = self.shared.to_str().unwrap();
        let env = [
            ("PAP_TEST_DIR", shared),
            ("PAP_TEST_NODE", incarnation.as_str()),
            ("PAP_NODE_ID", node.id.as_str()),
            // Failed attempts during an outage (a deadlock among them) are debug lines.
            ("PAP_LOG", "pap=info,pap::serve::outage=debug"),
        ];
        let (serve, url) = common::http::serve(&node.project, &[], &env);
        node.serve = Some(serve);
        node.url = Some(url);
    }

    fn urls(&self) -> Vec<Option<String>> {
        self.nodes.iter().map(|n| n.url.clone()).collect()
    }
}

/// The runs the agent recorded for one invocation, in order: (start?, node, pid, ns).
fn runs_of(shared: &Path, invocation: &str) -> Vec<(bool, String, u32, i64)> {
    std::fs::read_to_string(shared.join("runs").join(invocation))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            Some((
                *f.first()? == "start",
                f.get(1)?.to_string(),
                f.get(2)?.parse().ok()?,
                f.get(3)?.parse().ok()?,
            ))
        })
        .collect()
}

/// Rows of `sql` as tab-separated fields.
fn query(server: &pap::pgstore::testing::TestServer, db: &str, sql: &str) -> Vec<Vec<String>> {
    let out = server
        .psql(db, &format!("COPY ({sql}) TO STDOUT"))
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    out.lines()
        .filter(|l| !l.is_empty())
        .map(|l| l.split('\t').map(str::to_owned).collect())
        .collect()
}

#[test]
fn three_nodes_survive_kills_a_pause_and_a_database_restart_deciding_each_event_once() {
    // A server of its own: the test restarts it, and the other tests of the binary share
    // theirs.
    let Some(own_server) = pap::pgstore::testing::private_server_or_skip("the cluster crash test")
    else {
        return;
    };
    let server: &pap::pgstore::testing::TestServer = &own_server;
    if !common::http::curl_available() {
        return;
    }
    let url = migrated_by_pap(server);
    let db = url
        .rsplit('/')
        .next()
        .and_then(|s| s.split('?').next())
        .unwrap()
        .to_owned();
    let total = env_number("PAP_TEST_CLUSTER_EVENTS", 1_500) as usize;
    let rate = env_number("PAP_TEST_CLUSTER_RATE", 50).max(1);
    let seed = env_number("PAP_TEST_CLUSTER_SEED", wall_ns() as u64 | 1);
    eprintln!("cluster crash test: {total} events at {rate}/s, seed {seed}");
    let mut rng = Rng(seed | 1);

    let shared = tempfile::tempdir().unwrap();
    let mut cluster = Cluster {
        nodes: (0..NODES)
            .map(|i| {
                let project = Project {
                    dir: common::fixture_copy("cluster"),
                };
                use_database(project.root(), &url);
                Node {
                    id: format!("n{i}"),
                    started: 0,
                    project,
                    serve: None,
                    url: None,
                }
            })
            .collect(),
        shared: shared.path().to_owned(),
    };
    for i in 0..NODES {
        cluster.start(i);
    }

    // Events: mostly work, one in ten throttled, one in fifty holding its run for 10 s (past
    // a lease and its takeover grace: a paused node's run of it must be killed, or the
    // node that takes it over finds it alive).
    let events: Vec<Value> = (0..total)
        .map(|i| {
            let id = format!("c{i:06}");
            match (i % 10, i % 50) {
                (0, _) => ev(&id, "cluster.limited.due", json!({"n": i})),
                (_, 1) => ev(&id, "cluster.work.due", json!({"n": i, "hold": true})),
                _ => ev(&id, "cluster.work.due", json!({"n": i})),
            }
        })
        .collect();
    let batches: Vec<&[Value]> = events.chunks(BATCH).collect();
    let feed_time = Duration::from_millis((total as u64 * 1000 / rate).max(20_000));
    let per_batch = feed_time / batches.len() as u32;

    // The chaos runs beside the feed, on its own thread: kills at random, one pause past
    // the lease, one database restart.
    let cluster = Arc::new(Mutex::new(cluster));
    let disruptions = Arc::new(Mutex::new(Vec::<Disruption>::new()));
    let feeding = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let chaos = {
        let cluster = cluster.clone();
        let disruptions = disruptions.clone();
        let feeding = feeding.clone();
        let server = server.clone();
        let mut rng = Rng(rng.below(u64::MAX) | 1);
        let shared = shared.path().to_owned();
        std::thread::spawn(move || {
            let began = Instant::now();
            let (mut paused, mut restarted) = (false, false);
            // Kills only while the feed goes on; the pause and the restart happen anyway.
            loop {
                std::thread::sleep(rng.millis(1_500, 4_000));
                let fed = !feeding.load(std::sync::atomic::Ordering::SeqCst);
                let elapsed = began.elapsed().as_secs_f64() / feed_time.as_secs_f64();
                if fed && paused && restarted {
                    break;
                } else if !paused && (elapsed > 0.3 || fed) {
                    paused = true;
                    pause_past_lease(&cluster, &disruptions, &shared);
                } else if !restarted && (elapsed > 0.6 || fed) {
                    restarted = true;
                    let from = wall_ns();
                    server.restart().expect("restart PostgreSQL");
                    disruptions
                        .lock()
                        .unwrap()
                        .push(Disruption::DatabaseRestarted {
                            from,
                            to: wall_ns(),
                        });
                } else if !fed {
                    let i = rng.below(NODES as u64) as usize;
                    let serve = cluster.lock().unwrap().nodes[i].serve.take();
                    if let Some(serve) = serve {
                        let node = cluster.lock().unwrap().nodes[i].incarnation();
                        cluster.lock().unwrap().nodes[i].url = None;
                        let from = wall_ns();
                        serve.kill();
                        disruptions.lock().unwrap().push(Disruption::Killed {
                            node,
                            from,
                            to: wall_ns(),
                        });
                        std::thread::sleep(rng.millis(200, 1_500));
                        cluster.lock().unwrap().start(i);
                    }
                }
            }
            (paused, restarted)
        })
    };

    let started = Instant::now();
    let mut posted_ok = 0;
    for (b, batch) in batches.iter().enumerate() {
        let spool_node = rng.below(NODES as u64) as usize;
        let mut http_node = rng.below(NODES as u64 - 1) as usize;
        if http_node >= spool_node {
            http_node += 1;
        }
        let (project_root, url) = {
            let c = cluster.lock().unwrap();
            (
                c.nodes[spool_node].project.root().to_owned(),
                c.urls()[http_node].clone(),
            )
        };
        // The spool is there whether its node runs or not: the file waits for it.
        drop_into_spool(&project_root, &format!("b{b:05}.ndjson"), batch);
        if let Some(url) = url {
            let body: String = batch.iter().map(|e| format!("{e}\n")).collect();
            let reply = common::http::post(
                &format!("{url}/v1/events"),
                "application/x-ndjson",
                body.as_bytes(),
                &["--max-time", "3"],
            );
            if reply.status == 200 {
                posted_ok += 1;
            }
        }
        let due = per_batch * (b as u32 + 1);
        if let Some(wait) = due.checked_sub(started.elapsed()) {
            std::thread::sleep(wait);
        }
    }
    feeding.store(false, std::sync::atomic::Ordering::SeqCst);
    let (paused, restarted) = chaos.join().expect("the chaos thread");
    assert!(paused && restarted);
    eprintln!(
        "fed {} batches in {:?}; {posted_ok} also accepted over HTTP",
        batches.len(),
        started.elapsed()
    );

    // Quiescence: every event decided, every invocation ended, and a schedule fire seen.
    let expected_decisions = total;
    wait_long("every event decided and every invocation ended", || {
        let decided = query(
            server,
            &db,
            "SELECT count(*) FROM pap_ledger WHERE trigger_id IN ('t-work', 't-limited')",
        );
        let open = query(
            server,
            &db,
            "SELECT count(*) FROM pap_invocations WHERE status NOT IN ('succeeded', 'failed', 'cancelled', 'expired', 'rejected')",
        );
        decided[0][0].parse::<usize>().unwrap() >= expected_decisions && open[0][0] == "0"
    });
    wait_long("a schedule fire decided and run", || {
        let ticks = query(
            server,
            &db,
            "SELECT count(*) FROM pap_invocations WHERE status = 'succeeded' AND record->>'trigger' = 't-tick'",
        );
        ticks[0][0] != "0"
    });

    let disruptions = disruptions.lock().unwrap().clone();
    let cluster = Arc::try_unwrap(cluster)
        .ok()
        .expect("the chaos thread is done")
        .into_inner()
        .unwrap();
    check_decided_once(server, &db, total);
    check_runs(server, &db, shared.path(), &disruptions);
    check_throttle(server, &db);
    check_schedule(server, &db, &cluster);

    // What the nodes logged of conflicts between them (PostgreSQL aborts one side of a
    // deadlock; the unit of work is tried again later).
    let logs: String = cluster
        .nodes
        .iter()
        .map(|n| std::fs::read_to_string(n.project.root().join("serve.log")).unwrap_or_default())
        .collect();
    let mut unavailable: BTreeMap<String, usize> = BTreeMap::new();
    for line in logs.lines().filter(|l| l.contains("unavailable")) {
        // The message: what follows the level and the target, up to its fields.
        let what = line
            .split_once(": ")
            .map_or(line, |(_, rest)| rest)
            .split(" error=")
            .next()
            .unwrap_or_default();
        *unavailable
            .entry(what.chars().take(70).collect())
            .or_default() += 1;
    }
    eprintln!(
        "logged: {} deadlocks, {} lock timeouts; failures while the database was unavailable: {unavailable:?}",
        logs.matches("deadlock detected").count(),
        logs.matches("lock timeout").count(),
    );
    // Every node stops cleanly, and none panicked on the way.
    for node in cluster.nodes {
        let serve = node.serve.expect("every node runs at the end");
        let log = serve.log.clone();
        let (code, _) = serve.terminate();
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        assert!(!text.contains("panicked"), "{}: a panic", node.id);
        assert_eq!(code, 0, "{} stopped with {code}", node.id);
    }
    eprintln!("disruptions: {disruptions:?}");
}

/// Writes a batch into a node's spool under a temporary name, then renames it in.
fn drop_into_spool(root: &Path, name: &str, events: &[Value]) {
    let spool = root.join(".pap/spool");
    std::fs::create_dir_all(&spool).unwrap();
    let text: String = events.iter().map(|e| format!("{e}\n")).collect();
    let tmp = spool.join(format!(".{name}.tmp"));
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, spool.join(name)).unwrap();
}

/// Waits for a held run (10 s) to be under way on some node, stops that node past its lease
/// (and the takeover grace after it) until another node has taken the run over, and lets it
/// go on.
fn pause_past_lease(cluster: &Mutex<Cluster>, disruptions: &Mutex<Vec<Disruption>>, shared: &Path) {
    // A held run under way on a node's current process: the last line of its invocation's
    // file is that process's start line, and the run's own process is still there.
    let held = || -> Option<(i32, String, PathBuf)> {
        let c = cluster.lock().unwrap();
        let nodes: Vec<(i32, String)> = c
            .nodes
            .iter()
            .filter_map(|n| Some((n.serve.as_ref()?.pid(), n.incarnation())))
            .collect();
        drop(c);
        std::fs::read_dir(shared.join("runs"))
            .into_iter()
            .flatten()
            .filter_map(|e| e.ok())
            .find_map(|e| {
                let text = std::fs::read_to_string(e.path()).unwrap_or_default();
                let last = text.lines().last()?.to_owned();
                let f: Vec<&str> = last.split_whitespace().collect();
                if f.first() != Some(&"start") || f.last() != Some(&"hold") {
                    return None;
                }
                let alive = Path::new("/proc").join(f.get(2)?).exists();
                let (pid, node) = nodes
                    .iter()
                    .find(|(_, inc)| f.get(1) == Some(&inc.as_str()))?;
                alive.then(|| (*pid, node.clone(), e.path()))
            })
    };
    let until = Instant::now() + Duration::from_secs(60);
    let (pid, node, file) = loop {
        if let Some(found) = held() {
            break found;
        }
        assert!(
            Instant::now() < until,
            "no held run came under way to pause its node"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let from = wall_ns();
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), Signal::SIGSTOP).unwrap();
    // Lapsed after one lease, taken over after another: then wait (on a loaded machine, a
    // while longer) for another node to start the run.
    std::thread::sleep(LEASE * 2 + Duration::from_secs(1));
    let until = Instant::now() + Duration::from_secs(30);
    let taken_over = || {
        std::fs::read_to_string(&file)
            .unwrap_or_default()
            .lines()
            .any(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                f.first() == Some(&"start")
                    && f.get(1) != Some(&node.as_str())
                    && f.get(3).and_then(|t| t.parse::<i64>().ok()) > Some(from)
            })
    };
    while !taken_over() && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(50));
    }
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), Signal::SIGCONT).unwrap();
    disruptions.lock().unwrap().push(Disruption::Paused {
        node,
        from,
        to: wall_ns(),
    });
}

/// Polls `cond` until it holds, with room for a full-size run (`PAP_TEST_PATIENCE` seconds
/// when set, else three minutes plus a second per 20 events).
fn wait_long(what: &str, mut cond: impl FnMut() -> bool) {
    let default = 180 + env_number("PAP_TEST_CLUSTER_EVENTS", 1_500) / 20;
    let patience = Duration::from_secs(env_number("PAP_TEST_PATIENCE", default));
    let started = Instant::now();
    while !cond() {
        assert!(started.elapsed() < patience, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// Every event sent was decided once for its trigger: one ledger row per (event, trigger).
fn check_decided_once(server: &pap::pgstore::testing::TestServer, db: &str, total: usize) {
    let twice = query(
        server,
        db,
        "SELECT event_id, trigger_id, count(*) FROM pap_ledger GROUP BY 1, 2 HAVING count(*) <> 1",
    );
    assert!(twice.is_empty(), "decided more than once: {twice:?}");
    let rows = query(
        server,
        db,
        "SELECT count(DISTINCT event_id) FROM pap_ledger WHERE trigger_id IN ('t-work', 't-limited')",
    );
    assert_eq!(
        rows[0][0].parse::<usize>().unwrap(),
        total,
        "every event decided"
    );
    let outcomes = query(
        server,
        db,
        "SELECT trigger_id, outcome, count(*) FROM pap_ledger GROUP BY 1, 2 ORDER BY 1, 2",
    );
    eprintln!("decisions: {outcomes:?}");
}

/// Every invocation succeeded with its last run's result; runs never overlapped; a run was
/// repeated only across a disruption of its node (or of the database).
fn check_runs(
    server: &pap::pgstore::testing::TestServer,
    db: &str,
    shared: &Path,
    disruptions: &[Disruption],
) {
    let overlaps = std::fs::read_to_string(shared.join("overlap.log")).unwrap_or_default();
    if !overlaps.is_empty() {
        let details: Vec<String> = overlaps
            .lines()
            .filter_map(|l| l.split_whitespace().next())
            .map(|id| {
                let history = query(
                    server,
                    db,
                    &format!("SELECT record->'history' FROM pap_invocations WHERE id = '{id}'"),
                );
                format!("{id}: runs {:?}\nhistory {history:?}", runs_of(shared, id))
            })
            .collect();
        panic!(
            "runs overlapped:\n{overlaps}\n{}\ndisruptions: {disruptions:?}",
            details.join("\n")
        );
    }
    let rows = query(
        server,
        db,
        "SELECT id, status, record->'output'->>'run' FROM pap_invocations",
    );
    let mut repeated = 0;
    let mut by_status: BTreeMap<String, usize> = BTreeMap::new();
    for row in &rows {
        let (id, status, run) = (&row[0], &row[1], &row[2]);
        *by_status.entry(status.clone()).or_default() += 1;
        assert_eq!(status, "succeeded", "invocation {id}");
        let runs = runs_of(shared, id);
        let starts: Vec<&(bool, String, u32, i64)> = runs.iter().filter(|r| r.0).collect();
        let last = starts.last().unwrap_or_else(|| panic!("{id} never ran"));
        assert_eq!(
            run,
            &last.2.to_string(),
            "{id}: the recorded result is the last run's ({runs:?})"
        );
        for pair in starts.windows(2) {
            repeated += 1;
            let (earlier, later) = (pair[0], pair[1]);
            let explained = disruptions.iter().any(|d| match d {
                // The process that started the run was killed before the next run began.
                Disruption::Killed { node, from, .. } => *node == earlier.1 && *from <= later.3,
                Disruption::Paused { node, from, to } => {
                    *node == earlier.1 && *to >= earlier.3 && *from <= later.3
                }
                Disruption::DatabaseRestarted { from, to } => *to >= earlier.3 && *from <= later.3,
            });
            assert!(
                explained,
                "{id}: run {} on {} was repeated without a disruption ({runs:?}, {disruptions:?})",
                earlier.2, earlier.1
            );
        }
    }
    // The paused node's held run was taken over by another node while it was paused (its
    // own run killed by its supervisor: the overlap check above).
    for d in disruptions {
        if let Disruption::Paused { node, from, to } = d {
            let taken_over = rows.iter().any(|row| {
                let runs = runs_of(shared, &row[0]);
                let before = runs.iter().any(|r| r.0 && r.1 == *node && r.3 < *from);
                let during = runs
                    .iter()
                    .any(|r| r.0 && r.1 != *node && r.3 > *from && r.3 < *to);
                before && during
            });
            assert!(
                taken_over,
                "no run of the paused node {node} was taken over"
            );
        }
    }
    eprintln!(
        "invocations: {by_status:?}; {repeated} runs repeated after {} disruptions",
        disruptions.len()
    );
    assert!(rows.len() > 1);
}

/// No window of the throttled trigger admitted more than its maximum.
fn check_throttle(server: &pap::pgstore::testing::TestServer, db: &str) {
    let admitted: Vec<i64> = query(
        server,
        db,
        "SELECT decided_at FROM pap_ledger WHERE trigger_id = 't-limited' AND invocation_id IS NOT NULL ORDER BY decided_at",
    )
    .iter()
    .map(|r| r[0].parse().unwrap())
    .collect();
    assert!(
        !admitted.is_empty(),
        "the throttled trigger admitted nothing"
    );
    for w in admitted.windows(THROTTLE_MAX + 1) {
        assert!(
            w[THROTTLE_MAX] - w[0] >= THROTTLE_WINDOW_MS,
            "{} admitted within {} ms: {w:?}",
            THROTTLE_MAX + 1,
            w[THROTTLE_MAX] - w[0]
        );
    }
    eprintln!("throttle: {} admitted", admitted.len());
}

/// Each schedule fire was fired by one node and decided once.
fn check_schedule(server: &pap::pgstore::testing::TestServer, db: &str, cluster: &Cluster) {
    let mut fired: HashMap<String, usize> = HashMap::new();
    for node in &cluster.nodes {
        let log = std::fs::read_to_string(node.project.root().join("serve.log")).unwrap();
        for line in log.lines().filter(|l| l.contains("schedule fired")) {
            if let Some(at) = line.find("event=") {
                let id = line[at + 6..].split_whitespace().next().unwrap_or("");
                *fired.entry(id.trim_matches('"').to_owned()).or_default() += 1;
            }
        }
    }
    assert!(!fired.is_empty(), "no schedule fired");
    for (event, times) in &fired {
        assert_eq!(*times, 1, "schedule event {event} fired by {times} nodes");
    }
    let ticks = query(
        server,
        db,
        "SELECT event_id, count(*) FROM pap_ledger WHERE trigger_id = 't-tick' GROUP BY 1",
    );
    assert_eq!(ticks.len(), fired.len(), "{ticks:?} vs {fired:?}");
    assert!(ticks.iter().all(|r| r[1] == "1"), "{ticks:?}");
    eprintln!("schedule: {} fires", fired.len());
}
