//! Long queues behind a concurrency key, through the real binary: a backlog
//! decided in one group (its ids in hash order, its decision order by sequence) runs at the
//! key's pace, in decision order, never over the limit; a blocked backlog costs an idle serve
//! next to nothing and holds up no other work.
//!
//! Sizes and durations come from the environment, small by default (CI); the book gives
//! the full-size figures and the command (docs/src/reference/triggers.md, concurrency keys):
//! - `PAP_TEST_KEYED_QUEUE` (300) runs queued behind one key, each agent run taking
//!   `PAP_TEST_KEYED_AGENT_SECONDS` (0.4; the figure is 1): at least 13 start within
//!   15 run lengths plus `PAP_TEST_KEYED_SLACK_SECONDS` (3 by default, 0 for the issue's
//!   figure). The slack is for CI, where a debug build runs beside the rest of the suite on 2
//!   cores: each start then costs up to a few hundred ms of process start-up, which at a short
//!   agent's scale is a large share of the run (before the fix, no run started at all);
//! - `PAP_TEST_KEYED_RUNS` (400; the figure is 10,000) no-op runs behind `limit: 1`
//!   take at most twice as long as as many unkeyed ones one at a time, run by `pap serve` or by
//!   the `pap dispatch` that decided them;
//! - `PAP_TEST_BLOCKED_RUNS` (3,000; the 100,000) blocked invocations cost serve under
//!   2% of a core over `PAP_TEST_BLOCKED_CPU_SECONDS` (5; the 60).

use crate::common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::serve::{patience, wait_until};
use serde_json::json;

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A project with trigger `restart` (on `host.disk.full`, under `concurrency: {limit}` when
/// given, one key for all) and trigger `other` (on `host.other.seen`, no key), both for agent
/// `fix`, whose shell `script` is made for the project's `runs.log`. The shell has the event's
/// `n` in `$n`.
pub(super) fn project(
    limit: Option<u32>,
    script: impl FnOnce(&Path) -> String,
) -> tempfile::TempDir {
    let concurrency = limit.map_or(String::new(), |l| {
        format!("  concurrency: {{limit: {l}}}\n")
    });
    let dir = common::shell_agent::project("", &concurrency, |log| {
        format!(
            "in=$(cat); n=${{in#*\\\"n\\\":}}; n=${{n%%[!0-9]*}}; {}",
            script(log)
        )
    });
    std::fs::write(
        dir.path().join("triggers/other.yaml"),
        "pap_version: \"0.2\"\ntrigger:\n  id: other\n  match:\n    type: host.other.seen\n  agent: fix\n",
    )
    .unwrap();
    dir
}

/// An agent that logs `start N NS` and `end N NS` around a sleep of `seconds` (`forever`: until
/// it is stopped).
fn sleeping(seconds: &str) -> impl FnOnce(&Path) -> String {
    let seconds = seconds.to_owned();
    move |log| {
        format!(
            "echo \"start $n $(date +%s%N)\" >> '{log}'; sleep {seconds}; echo \"end $n $(date +%s%N)\" >> '{log}'; echo '{{}}'",
            log = log.display()
        )
    }
}

/// Events `n` = `from`..`to` of `kind`, one file of them in one decision group.
pub(super) fn events(root: &Path, kind: &str, from: usize, to: usize) -> PathBuf {
    let text: String = (from..to)
        .map(|n| {
            format!(
                "{}\n",
                json!({
                    "pap_version": "0.2", "id": format!("e-{n}"), "type": kind,
                    "source": "test", "time": "2026-03-11T06:00:00Z", "data": {"n": n}
                })
            )
        })
        .collect();
    let file = root.join(format!("{kind}-{from}.ndjson"));
    std::fs::write(&file, text).unwrap();
    file
}

/// `pap dispatch --no-run FILE`, which must succeed.
pub(super) fn queue(root: &Path, file: &Path) {
    let out = common::pap_at(root)
        .args(["dispatch", "--no-run", "--json"])
        .arg(file)
        .stdout(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(common::code(&out), 0, "{}", common::stderr(&out));
}

/// One line of runs.log: (`start` or `end`, n, ns when timed).
pub(super) type Line = (String, usize, Option<u128>);

pub(super) fn runs(root: &Path) -> Vec<Line> {
    common::shell_agent::log_fields(root)
        .into_iter()
        .map(|p| {
            let at = p.get(2).map(|t| t.parse().unwrap());
            (p[0].clone(), p[1].parse().unwrap(), at)
        })
        .collect()
}

/// Runs never overlap (by the order of the lines), and start in the order of `n` (the order
/// they were decided in).
pub(super) fn one_at_a_time_in_order(lines: &[Line]) {
    let mut open: Option<usize> = None;
    let mut last = None;
    for (kind, n, _) in lines {
        match kind.as_str() {
            "start" => {
                assert!(open.is_none(), "run {n} started while {open:?} ran");
                assert!(
                    last.is_none_or(|l| l < *n),
                    "run {n} started after run {last:?}: out of decision order"
                );
                open = Some(*n);
                last = Some(*n);
            }
            _ => {
                assert_eq!(open, Some(*n), "run {n} ended, but {open:?} ran");
                open = None;
            }
        }
    }
}

/// `pap serve` with its log beside the project, stopped when dropped.
struct Serve(std::process::Child);

impl Serve {
    fn start(root: &Path, args: &[&str]) -> Serve {
        let log = std::fs::File::create(root.join("serve.log")).unwrap();
        Serve(
            common::pap_at(root)
                .arg("serve")
                .args(args)
                .stdout(std::process::Stdio::null())
                .stderr(log)
                .spawn()
                .unwrap(),
        )
    }

    /// CPU time (user + system) serve has used so far, from /proc.
    fn cpu(&self) -> Duration {
        let text = std::fs::read_to_string(format!("/proc/{}/stat", self.0.id())).unwrap();
        let fields: Vec<&str> = text[text.rfind(')').unwrap() + 2..].split(' ').collect();
        // utime and stime: the 14th and 15th fields, 12th and 13th after the command.
        let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
        let per_second = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
            .ok()
            .flatten()
            .unwrap_or(100) as u64;
        Duration::from_millis(ticks * 1000 / per_second)
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.0.id() as i32),
            nix::sys::signal::Signal::SIGTERM,
        );
        let _ = self.0.wait();
    }
}

/// Waits until runs.log has a start line for `n`, and returns its time (ns).
fn started(root: &Path, n: usize) -> u128 {
    let mut at = None;
    wait_until(&format!("run {n} to start"), || {
        at = runs(root)
            .into_iter()
            .find(|l| l.0 == "start" && l.1 == n)
            .and_then(|l| l.2);
        at.is_some()
    });
    at.unwrap()
}

/// After the first start, runs follow each other at the key's pace: at least 13 start within
/// 15 run lengths (each run lasting one), one at a time, in decision order.
fn keeps_the_keys_pace(root: &Path, seconds: f64) {
    let first = started(root, 0);
    let slack: f64 = env_or("PAP_TEST_KEYED_SLACK_SECONDS", 3.0);
    let window = Duration::from_secs_f64(15.0 * seconds + slack);
    let deadline = first + window.as_nanos();
    // Wait out the window (and a little: the lines are written by the agents).
    wait_until("the window to pass", || {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        now > deadline + 200_000_000
    });
    let lines = runs(root);
    let within = lines
        .iter()
        .filter(|l| l.0 == "start" && l.2.is_some_and(|t| t <= deadline))
        .count();
    assert!(
        within >= 13,
        "{within} runs started within {window:?} of the first: {lines:?}"
    );
    one_at_a_time_in_order(&lines);
    eprintln!("{within} runs started within {window:?} of the first");
}

#[test]
fn a_queue_decided_in_one_group_runs_at_the_keys_pace_in_decision_order() {
    let queued: usize = env_or("PAP_TEST_KEYED_QUEUE", 300);
    let seconds: f64 = env_or("PAP_TEST_KEYED_AGENT_SECONDS", 0.4);
    let dir = project(Some(1), sleeping(&seconds.to_string()));
    let root = dir.path();
    queue(root, &events(root, "host.disk.full", 0, queued));
    let _serve = Serve::start(root, &[]);
    keeps_the_keys_pace(root, seconds);
}

#[test]
fn a_queue_posted_over_http_runs_at_the_keys_pace_in_decision_order() {
    if !common::http::curl_available() {
        return;
    }
    let queued: usize = env_or("PAP_TEST_KEYED_QUEUE", 300);
    let seconds: f64 = env_or("PAP_TEST_KEYED_AGENT_SECONDS", 0.4);
    let dir = project(Some(1), sleeping(&seconds.to_string()));
    let root = dir.path();
    let port = common::http::free_port();
    let _serve = Serve::start(root, &["--listen", &format!("127.0.0.1:{port}")]);
    let url = format!("http://127.0.0.1:{port}/v1/events");
    let body = std::fs::read(events(root, "host.disk.full", 0, queued)).unwrap();
    let mut reply = None;
    wait_until("serve to take the post", || {
        let r = common::http::post(&url, "application/x-ndjson", &body, &[]);
        let taken = r.status == 200;
        reply = Some(r);
        taken
    });
    assert_eq!(reply.unwrap().lines().len(), queued);
    keeps_the_keys_pace(root, seconds);
}

/// Waits for `child` (started at `started`) to exit successfully, failing once it takes longer
/// than `within`; returns how long it took.
fn run_to_end(
    root: &Path,
    child: &mut std::process::Child,
    what: &str,
    started: Instant,
    within: Duration,
) -> Duration {
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            assert!(status.success(), "{what} failed: {status}");
            return started.elapsed();
        }
        if started.elapsed() >= within {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "{what} took longer than {within:?}; {} runs so far",
                runs(root).len() / 2
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Runs `pap serve --once ARGS` on what is queued, to its end (see [`run_to_end`]).
fn serve_once(root: &Path, args: &[&str], within: Duration) -> Duration {
    let started = Instant::now();
    let mut serve = Serve::start(root, &[&["--once"], args].concat());
    run_to_end(
        root,
        &mut serve.0,
        &format!("serve --once {args:?}"),
        started,
        within,
    )
}

/// Runs `pap dispatch FILE ARGS` (which runs what it decides) to its end (see
/// [`run_to_end`]).
fn dispatch_and_run(root: &Path, file: &Path, args: &[&str], within: Duration) -> Duration {
    let started = Instant::now();
    let mut child = common::pap_at(root)
        .arg("dispatch")
        .arg(file)
        .args(args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    run_to_end(
        root,
        &mut child,
        &format!("pap dispatch {args:?}"),
        started,
        within,
    )
}

/// `PAP_TEST_KEYED_RUNS` no-op runs behind a key of limit 1, run by `run(root, file, keyed,
/// within)`, take at most twice as long as as many unkeyed ones, and go one at a time in
/// decision order.
fn keyed_runs_against_unkeyed(who: &str, run: impl Fn(&Path, &Path, bool, Duration) -> Duration) {
    let count: usize = env_or("PAP_TEST_KEYED_RUNS", 400);
    let noop = |log: &Path| {
        format!(
            "echo \"start $n\" >> '{log}'; echo \"end $n\" >> '{log}'; echo '{{}}'",
            log = log.display()
        )
    };
    let unkeyed_alone = || {
        let unkeyed = project(None, noop);
        let file = events(unkeyed.path(), "host.disk.full", 0, count);
        let alone = run(unkeyed.path(), &file, false, patience() * 10);
        assert_eq!(runs(unkeyed.path()).len(), 2 * count);
        alone
    };
    let alone = unkeyed_alone();

    let keyed = project(Some(1), noop);
    let file = events(keyed.path(), "host.disk.full", 0, count);
    let behind_key = run(keyed.path(), &file, true, alone * 4);
    let lines = runs(keyed.path());
    assert_eq!(lines.len(), 2 * count, "every run started and ended");
    one_at_a_time_in_order(&lines);
    // Both are wall times on a machine other tests share, and the load changes between two
    // runs (the suite runs on two cores beside its PostgreSQL round): over the bound, the
    // baseline is measured again, and the slower of the two is the load the keyed run met.
    let baseline = if behind_key > alone * 2 {
        alone.max(unkeyed_alone())
    } else {
        alone
    };
    eprintln!(
        "{who}, {count} runs: unkeyed one at a time {alone:?} (baseline {baseline:?}), behind a key of limit 1 {behind_key:?}"
    );
    assert!(
        behind_key <= baseline * 2,
        "{who}: {count} runs behind a key of limit 1 took {behind_key:?}, more than twice the unkeyed {baseline:?}"
    );
}

/// `pap serve` runs a queue behind a key of limit 1 (with room for 4) about as fast as
/// unkeyed work at `--max-concurrent 1`.
#[test]
fn runs_behind_one_key_go_at_most_half_as_fast_as_unkeyed_runs_one_at_a_time() {
    keyed_runs_against_unkeyed("pap serve", |root, file, keyed, within| {
        queue(root, file);
        let room = if keyed { "4" } else { "1" };
        serve_once(root, &["--max-concurrent", room], within)
    });
}

/// `pap dispatch` runs what it decided itself: a queue behind a key costs it a refused start
/// per run that ends (the next in line), not one per waiter each time.
#[test]
fn dispatch_runs_a_queue_behind_one_key_at_most_half_as_fast_as_unkeyed_runs() {
    keyed_runs_against_unkeyed("pap dispatch", |root, file, keyed, within| {
        let jobs = if keyed { "4" } else { "1" };
        dispatch_and_run(root, file, &["-j", jobs], within)
    });
}

#[test]
fn a_key_of_limit_three_runs_three_at_once_never_more() {
    let dir = project(Some(3), sleeping("0.3"));
    let root = dir.path();
    queue(root, &events(root, "host.disk.full", 0, 300));
    let _serve = Serve::start(root, &["--max-concurrent", "8"]);
    wait_until("30 runs to end", || {
        runs(root).iter().filter(|l| l.0 == "end").count() >= 30
    });
    // The most at once, from the agents' own times.
    let mut edges: Vec<(u128, i32)> = runs(root)
        .iter()
        .map(|l| (l.2.unwrap(), if l.0 == "start" { 1 } else { -1 }))
        .collect();
    edges.sort();
    let (mut now, mut most) = (0, 0);
    for (_, step) in edges {
        now += step;
        most = most.max(now);
    }
    assert_eq!(most, 3, "{:?}", runs(root));
}

#[test]
fn a_blocked_backlog_costs_an_idle_serve_little_and_holds_up_no_other_work() {
    if !common::http::curl_available() {
        return;
    }
    let blocked: usize = env_or("PAP_TEST_BLOCKED_RUNS", 3000);
    let window = Duration::from_secs_f64(env_or("PAP_TEST_BLOCKED_CPU_SECONDS", 5.0));
    // Run 0 holds the key until it is stopped; every other waits behind it.
    let dir = project(Some(1), |log| {
        format!(
            "echo \"start $n $(date +%s%N)\" >> '{log}'; if [ \"$n\" = 0 ]; then sleep 600; fi; echo \"end $n $(date +%s%N)\" >> '{log}'; echo '{{}}'",
            log = log.display()
        )
    });
    let root = dir.path();
    queue(root, &events(root, "host.disk.full", 0, blocked + 1));
    let port = common::http::free_port();
    // (A short grace: run 0 is still running when the test ends.)
    let listen = format!("127.0.0.1:{port}");
    let serve = Serve::start(root, &["--listen", &listen, "--grace", "1s"]);
    started(root, 0);
    // Settled: the start's own work is done.
    std::thread::sleep(Duration::from_secs(1));
    let before = serve.cpu();
    std::thread::sleep(window);
    let used = serve.cpu() - before;
    assert!(
        used.as_secs_f64() < 0.02 * window.as_secs_f64(),
        "serve used {used:?} of CPU over {window:?} with {blocked} invocations blocked"
    );
    eprintln!("serve used {used:?} of CPU over {window:?} with {blocked} invocations blocked");
    assert_eq!(runs(root).len(), 1, "only run 0 started: {:?}", runs(root));

    // An event without a key starts at once.
    let other = json!({"pap_version": "0.2", "id": "other", "type": "host.other.seen",
                       "source": "test", "time": "2026-03-11T06:00:00Z", "data": {"n": 999_999}});
    let posted = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let reply = common::http::post(
        &format!("http://127.0.0.1:{port}/v1/events"),
        "application/json",
        other.to_string().as_bytes(),
        &[],
    );
    assert_eq!(reply.status, 200, "{reply:?}");
    let start = started(root, 999_999);
    let waited = Duration::from_nanos((start - posted) as u64);
    assert!(
        waited < Duration::from_secs(1),
        "the unkeyed run started {waited:?} after its post"
    );
    eprintln!("the unkeyed run started {waited:?} after its post");
}
