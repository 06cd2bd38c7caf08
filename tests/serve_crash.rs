//! Crash test for `pap serve`: SIGKILLed again and again at random moments while thousands of
//! events flow through the spool and agents run. After the last restart every (event,
//! trigger) was decided once, no file and no invocation was lost, and invocations a kill
//! interrupted ran again under the same attempt number.

use crate::common;

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use common::dispatch::ev;
use common::serve::Project;
use serde_json::json;

/// Files of `PER_FILE` events: `PAP_CRASH_FILES`, default 40 (800 events), which keeps the
/// test near half a minute in CI; a full-size storm is a run outside CI with a larger figure
/// (docs/src/development.md gives one).
fn files() -> usize {
    std::env::var("PAP_CRASH_FILES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(40)
}
const PER_FILE: usize = 20;
const KILLS: usize = 8;

/// A small deterministic generator: the same kill moments on every run of the test.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self, below: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % below
    }
}

#[test]
fn serve_killed_repeatedly_loses_nothing_and_decides_everything_once() {
    let p = Project::new();
    let files = files();
    let slow = [("PAP_TEST_SLOW", "0.3")];
    // Writer: files land in the spool while serve is killed and restarted.
    let root = p.root().to_path_buf();
    let writer = std::thread::spawn(move || {
        let spool = root.join(".pap/spool");
        std::fs::create_dir_all(&spool).unwrap();
        for f in 0..files {
            let text: String = (0..PER_FILE)
                .map(|i| {
                    let n = f * PER_FILE + i;
                    // One event in ten provokes the slow agent, so kills land mid-run; one in
                    // ten an agent whose completion event provokes a follower.
                    let kind = match n % 10 {
                        0 => "test.slow.happened",
                        1 => "test.quick.happened",
                        _ => "test.plain.happened",
                    };
                    format!("{}\n", ev(&format!("e{n:05}"), kind, json!({"n": n})))
                })
                .collect();
            let tmp = spool.join(format!(".f{f:04}.tmp"));
            std::fs::write(&tmp, text).unwrap();
            std::fs::rename(&tmp, spool.join(format!("f{f:04}.ndjson"))).unwrap();
            std::thread::sleep(Duration::from_millis(15));
        }
    });
    let mut rng = Lcg(0x5eed);
    for _ in 0..KILLS {
        let serve = p.serve_with(&[], &slow);
        std::thread::sleep(Duration::from_millis(150 + rng.next(500)));
        serve.kill();
    }
    writer.join().unwrap();

    // The last start drains everything.
    let mut serve = p.serve_with(&[], &slow);
    let total = files * PER_FILE;
    serve.wait_while_alive("every file filed in done/", || {
        p.files_in("done").len() == files
    });
    serve.wait_while_alive("no work left", || {
        let invs = p.invocations();
        invs.iter().filter(|i| i["trigger"] != "t-follow").count() == total
            && invs.iter().all(|i| i["status"] == "succeeded")
    });
    assert_eq!(serve.terminate().0, 0);

    assert!(p.files_in("processing").is_empty());
    assert!(p.files_in("failed").is_empty());
    let invs = p.invocations();
    // Exactly one invocation per (event, trigger), for the spool's events and for the
    // completion events their runs emitted.
    let mut per_pair: HashMap<(String, String), usize> = HashMap::new();
    for i in &invs {
        let key = (
            i["event_id"].as_str().unwrap().to_owned(),
            i["trigger"].as_str().unwrap().to_owned(),
        );
        *per_pair.entry(key).or_default() += 1;
    }
    let twice: Vec<_> = per_pair.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "decided more than once: {twice:?}");
    let spool_events: HashSet<&str> = invs
        .iter()
        .filter(|i| i["trigger"] != "t-follow")
        .map(|i| i["event_id"].as_str().unwrap())
        .collect();
    assert_eq!(spool_events.len(), total, "an event was lost");
    // Every quick run emitted a completion event, and each provoked the follower once.
    let quick = invs.iter().filter(|i| i["trigger"] == "t-quick").count();
    let follow = invs.iter().filter(|i| i["trigger"] == "t-follow").count();
    assert_eq!(follow, quick, "a completion event was lost");

    // Interrupted runs were retried under their attempt number: every start is attempt 1,
    // and every invocation ended once it was done.
    let runs = p.runs();
    assert!(
        runs.iter().all(|l| l.ends_with(" 1")),
        "a run was counted as a new attempt"
    );
    let ended: HashSet<&str> = runs
        .iter()
        .filter_map(|l| l.strip_prefix("end "))
        .map(|l| l.split(' ').next().unwrap())
        .collect();
    for i in &invs {
        assert!(
            ended.contains(i["id"].as_str().unwrap()),
            "never ran to its end: {i}"
        );
        assert_eq!(i["attempts"], 1, "{i}");
    }
    let restarted = runs.iter().filter(|l| l.starts_with("start")).count() - invs.len();
    eprintln!(
        "{} events, {} invocations, {} runs started again after a kill",
        total,
        invs.len(),
        restarted
    );
}
