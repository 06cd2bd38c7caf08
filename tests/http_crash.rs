//! SIGKILL `pap serve` at random moments while curl POSTs thousands of events and sends
//! again each batch that got no 2xx; after the last restart, every event that got a 2xx was
//! decided exactly once (one invocation of its one matching trigger), and none twice.
//!
//! Scale: `PAP_TEST_HTTP_CRASH_EVENTS` (default 2,000, in batches of 20); the seed of the
//! kill times is printed, and `PAP_TEST_HTTP_CRASH_SEED` replays it.

use crate::common;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::dispatch::ev;
use common::http::{curl_available, free_port, post, project};
use common::serve::{Project, patience, wait_until};
use serde_json::json;

const BATCH: usize = 20;

/// A small deterministic generator (xorshift), so a failing run can be replayed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

#[test]
fn every_event_that_got_a_2xx_is_decided_exactly_once_across_sigkills() {
    if !curl_available() {
        return;
    }
    let total: usize = std::env::var("PAP_TEST_HTTP_CRASH_EVENTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2_000);
    let seed: u64 = std::env::var("PAP_TEST_HTTP_CRASH_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
                | 1
        });
    println!("seed {seed} (PAP_TEST_HTTP_CRASH_SEED replays it), {total} events");
    let p: Project = project("");
    let port = free_port();
    let address = format!("127.0.0.1:{port}");
    let url = format!("http://{address}/v1/events");

    let batches: Vec<(Vec<String>, String)> = (0..total)
        .collect::<Vec<_>>()
        .chunks(BATCH)
        .map(|chunk| {
            let ids: Vec<String> = chunk.iter().map(|i| format!("crash-{i}")).collect();
            let body: String = ids
                .iter()
                .map(|id| format!("{}\n", ev(id, "test.quick.happened", json!({}))))
                .collect();
            (ids, body)
        })
        .collect();

    let acked: Arc<Mutex<HashSet<String>>> = Arc::default();
    let done = Arc::new(AtomicBool::new(false));
    let mut serve = p.serve(&["--listen", &address]);
    let client = {
        let (acked, done, url) = (acked.clone(), done.clone(), url.clone());
        std::thread::spawn(move || {
            let mut resent = 0usize;
            for (ids, body) in &batches {
                let started = Instant::now();
                loop {
                    let r = post(
                        &url,
                        "application/x-ndjson",
                        body.as_bytes(),
                        &["--max-time", "10"],
                    );
                    if r.status == 200 {
                        let lines = r.lines();
                        assert_eq!(lines.len(), ids.len(), "{r:?}");
                        acked.lock().unwrap().extend(ids.iter().cloned());
                        break;
                    }
                    // No answer (serve is down) or a 503: send the same batch again.
                    assert!(r.status == 0 || r.status == 503, "unexpected {r:?}");
                    resent += 1;
                    assert!(started.elapsed() < patience(), "a batch never got in");
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
            done.store(true, Ordering::SeqCst);
            resent
        })
    };

    let mut rng = Rng(seed);
    let mut kills = 0;
    while !done.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(30 + rng.next() % 250));
        if done.load(Ordering::SeqCst) {
            break;
        }
        serve.kill();
        kills += 1;
        serve = p.serve(&["--listen", &address]);
    }
    let resent = client.join().unwrap();
    println!("{kills} SIGKILLs, {resent} batches sent again");
    assert!(kills >= 1 || total < 200, "serve was never killed");

    let acked = acked.lock().unwrap().clone();
    assert_eq!(acked.len(), total);
    // Quiescence: every acked event's decision is in the store.
    let mut per_event: HashMap<String, usize> = HashMap::new();
    wait_until("every acked event's invocation", || {
        per_event.clear();
        for i in p.invocations() {
            if i["trigger"] == "t-quick" {
                *per_event
                    .entry(i["event_id"].as_str().unwrap().to_owned())
                    .or_default() += 1;
            }
        }
        acked.iter().all(|id| per_event.contains_key(id))
    });
    let twice: Vec<_> = per_event.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "decided more than once: {twice:?}");
    drop(serve);
}
