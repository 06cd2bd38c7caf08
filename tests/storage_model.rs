//! Model-based test of the storage interface: random sequences of transactions (decisions
//! that claim idempotency keys, attempts that take leases and end under their fencing token,
//! stale holders, inbox appends, throttle windows, aborted transactions) run against the real
//! store and against a small in-memory model of what the store must do; every result and the
//! final state must agree. Then the same sequences are cut by real crashes: a child process
//! applies them one acknowledged transaction at a time and is SIGKILLed at a random point; the
//! reopened store must hold exactly every acknowledged transaction, and the one in flight
//! either whole or not at all.
//!
//! Its own harness (`harness = false`): the crash child is this binary started again with
//! `PAP_MODEL_CHILD` set, which the test harness would otherwise report as a test.
//! Scale: `PAP_MODEL_CASES` (sequences, default 48), `PAP_MODEL_CRASHES` (kills, default 12).
//!
//! Both stores run it: the redb file, and PostgreSQL on a server the test starts (a fresh
//! database per sequence; skipped with a note when PostgreSQL is missing, a failure when
//! `PAP_TEST_REQUIRE_POSTGRES` is set).

// A harness around pap reads the system's time to set the clock of what it runs (clippy.toml
// keeps the product to the injected clock).
#![allow(clippy::disallowed_methods)]

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;

use pap::composition;
use pap::domain::{Invocation, Lease, Level, Provocation, Routing, Runner, Status};
use pap::storage::{self, Claimed, RowRef, Sequence, Storage, WriteTx};
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use serde_json::json;

const TTL: i64 = 5_000;
const WINDOW: i64 = 1_000;

#[derive(Debug, Clone)]
enum Op {
    /// Event `event` meets trigger `trigger`, `dt` ms after the last step.
    Decide {
        event: u8,
        trigger: u8,
        dt: u16,
    },
    /// Takes the `pick`th unfinished invocation under a new lease and starts an attempt.
    Start {
        pick: u8,
    },
    /// Ends the `pick`th running invocation, under its current token or (stale) an old one.
    Finish {
        pick: u8,
        stale: bool,
        succeeded: bool,
    },
    Inbox {
        n: u16,
    },
    Throttle {
        trigger: u8,
        dt: u16,
    },
}

#[derive(Debug, Clone)]
struct Plan {
    ops: Vec<Op>,
    abort: bool,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..6u8, 0..3u8, 0..3_000u16).prop_map(|(event, trigger, dt)| Op::Decide { event, trigger, dt }),
        3 => any::<u8>().prop_map(|pick| Op::Start { pick }),
        3 => (any::<u8>(), prop::bool::weighted(0.25), any::<bool>())
            .prop_map(|(pick, stale, succeeded)| Op::Finish { pick, stale, succeeded }),
        1 => any::<u16>().prop_map(|n| Op::Inbox { n }),
        1 => (0..2u8, 0..700u16).prop_map(|(trigger, dt)| Op::Throttle { trigger, dt }),
    ]
}

fn plans() -> impl Strategy<Value = Vec<Plan>> {
    let plan = (
        prop::collection::vec(op(), 1..6),
        prop::bool::weighted(0.15),
    )
        .prop_map(|(ops, abort)| Plan { ops, abort });
    prop::collection::vec(plan, 1..30)
}

/// What the store must hold, as the model sees it.
#[derive(Debug, Clone, Default, PartialEq)]
struct Observed {
    /// id → (status, attempts, lease token)
    invocations: BTreeMap<String, (Status, u32, Option<u64>)>,
    inbox: Vec<String>,
    /// event → (trigger, invocation) per decision, in order
    ledger: BTreeMap<String, Vec<(String, Option<String>)>>,
}

#[derive(Debug, Clone, Default)]
struct Model {
    seen: Observed,
    /// key → expiry
    claims: BTreeMap<(u8, u8), i64>,
    /// id → tokens it held before its current one
    old_tokens: BTreeMap<String, Vec<u64>>,
    /// The greatest token a committed transaction issued.
    max_token: u64,
    throttle: BTreeMap<u8, Vec<i64>>,
    decisions: u64,
}

impl Model {
    fn unfinished(&self, running_only: bool) -> Vec<String> {
        self.seen
            .invocations
            .iter()
            .filter(|(_, (s, _, _))| {
                *s == Status::Running || (!running_only && *s == Status::Queued)
            })
            .map(|(id, _)| id.clone())
            .collect()
    }
}

fn key(event: u8, trigger: u8) -> [u8; 32] {
    let mut k = [0u8; 32];
    k[0] = event;
    k[1] = trigger;
    k[31] = 0xA5;
    k
}

fn new_invocation(id: &str, seq: u64, event: u8, trigger: u8, now: i64) -> Invocation {
    let provocation = Provocation {
        id: id.into(),
        seq,
        trigger: format!("t{trigger}"),
        agent: "agent".into(),
        event: json!({"id": format!("e{event}"), "data": {"event": event}}),
        event_id: format!("e{event}"),
        event_type: "a.b.c".into(),
        depth: 0,
        risk: "low".into(),
        max_attempts: 3,
    };
    Invocation::new(provocation, None, now)
}

fn lease(token: u64, now: i64) -> Lease {
    Lease {
        holder: Runner {
            pid: 4_000_000,
            since: now,
            started: None,
        },
        node: "model".into(),
        token,
        expires_at: now + TTL,
        grace_ms: 0,
    }
}

fn message(n: u16) -> pap::domain::InboxMessage {
    pap::domain::InboxMessage {
        id: 0,
        ts: 0,
        notification_id: "ntf".into(),
        author: "system".into(),
        kind: "invocation.succeeded".into(),
        level: Level::Info,
        content: format!("m{n}"),
        routing: Routing::default(),
        user: "ann".into(),
        session: None,
        metadata: Default::default(),
        deduplication_key: None,
        supersedes: None,
        atp: None,
        mime: None,
        posted_by: None,
        in_reply_to: None,
    }
}

/// Applies `op` to the store and to the model's draft, checking each result against what the
/// model expects.
fn apply(tx: &mut dyn WriteTx, m: &mut Model, op: &Op, now: &mut i64) -> storage::Result<()> {
    match *op {
        Op::Decide { event, trigger, dt } => {
            *now += i64::from(dt);
            let live = m
                .claims
                .get(&(event, trigger))
                .is_some_and(|exp| *exp > *now);
            match tx.claim(&key(event, trigger), *now, *now + TTL)? {
                Claimed::Live(_) => assert!(live, "store: duplicate; model: free ({op:?})"),
                Claimed::New => {
                    assert!(!live, "store: free; model: duplicate ({op:?})");
                    m.decisions += 1;
                    let id = format!("inv-{event}-{trigger}-{}", m.decisions);
                    let (e, t) = (format!("e{event}"), format!("t{trigger}"));
                    tx.record_decision(
                        &key(event, trigger),
                        RowRef {
                            event_id: &e,
                            trigger: &t,
                            kind: "a.b.c",
                            depth: 0,
                            outcome: "queued",
                            invocation_id: Some(&id),
                            decided_at: *now,
                        },
                    )?;
                    let seq = tx.next(Sequence::Invocation)?;
                    tx.insert_invocation(&new_invocation(&id, seq, event, trigger, *now))?;
                    m.claims.insert((event, trigger), *now + TTL);
                    m.seen
                        .ledger
                        .entry(e)
                        .or_default()
                        .push((t, Some(id.clone())));
                    m.seen.invocations.insert(id, (Status::Queued, 0, None));
                }
            }
        }
        Op::Start { pick } => {
            let ids = m.unfinished(false);
            if ids.is_empty() {
                return Ok(());
            }
            let id = &ids[usize::from(pick) % ids.len()];
            let mut inv = tx
                .invocation(id)?
                .expect("the model's invocation is stored");
            let (status, attempts, token) = m.seen.invocations[id];
            assert_eq!((inv.status, inv.attempts), (status, attempts), "{id}");
            let new = tx.issue_lease_token()?;
            assert!(new > m.max_token, "token {new} after {}", m.max_token);
            m.max_token = new;
            inv.start_attempt(lease(new, *now), None, *now)
                .expect("unfinished starts");
            tx.put_invocation(&inv)?;
            if let Some(old) = token {
                m.old_tokens.entry(id.clone()).or_default().push(old);
            }
            m.seen
                .invocations
                .insert(id.clone(), (Status::Running, inv.attempts, Some(new)));
        }
        Op::Finish {
            pick,
            stale,
            succeeded,
        } => {
            let ids = m.unfinished(true);
            if ids.is_empty() {
                return Ok(());
            }
            let id = &ids[usize::from(pick) % ids.len()];
            let current = m.seen.invocations[id].2;
            let token = if stale {
                m.old_tokens
                    .get(id)
                    .and_then(|t| t.last().copied())
                    .unwrap_or(0)
            } else {
                current.expect("a running invocation has a lease")
            };
            match tx.check_lease(id, token) {
                Err(storage::Error::LeaseLost { current: c, .. }) => {
                    assert!(stale, "the current token {token} was refused");
                    assert_eq!(c, current);
                }
                Err(e) => return Err(e),
                Ok(()) => {
                    assert!(!stale, "stale token {token} accepted for {id}");
                    let mut inv = tx.invocation(id)?.expect("stored");
                    if succeeded {
                        inv.succeed(json!({"ok": true}), vec![], *now)
                    } else {
                        inv.end(Status::Failed, "boom", vec![], *now)
                    }
                    .expect("running ends");
                    tx.put_invocation(&inv)?;
                    let entry = m.seen.invocations.get_mut(id).expect("known");
                    entry.0 = inv.status;
                    entry.2 = None;
                    if let Some(t) = current {
                        m.old_tokens.entry(id.clone()).or_default().push(t);
                    }
                }
            }
        }
        Op::Inbox { n } => {
            let last = tx.inbox_mark()?;
            let id = tx.inbox_append(message(n))?;
            assert!(id > last, "inbox id {id} after {last}");
            m.seen.inbox.push(format!("m{n}"));
        }
        Op::Throttle { trigger, dt } => {
            *now += i64::from(dt);
            let t = format!("t{trigger}");
            let expected = m.throttle.get(&trigger).cloned().unwrap_or_default();
            assert_eq!(tx.throttle_times(&t, "k")?, expected, "window of {t}");
            tx.throttle_record(&t, "k", *now, WINDOW)?;
            let times = m.throttle.entry(trigger).or_default();
            times.retain(|x| *x > *now - WINDOW && *x <= *now);
            times.push(*now);
        }
    }
    Ok(())
}

/// Runs one planned transaction; the model takes the draft only when the store committed.
fn run_plan(store: &dyn Storage, model: &mut Model, plan: &Plan, now: &mut i64) {
    let mut draft = model.clone();
    let result = store.write(|tx| {
        for op in &plan.ops {
            apply(tx, &mut draft, op, now)?;
        }
        if plan.abort {
            return Err(storage::Error::Unchanged);
        }
        Ok(())
    });
    match result {
        Ok(()) => *model = draft,
        Err(storage::Error::Unchanged) if plan.abort => {}
        Err(e) => panic!("store failed: {e}"),
    }
}

/// What the store holds, in the model's terms.
fn observe(store: &dyn Storage) -> Observed {
    store
        .read(|r| {
            let mut seen = Observed::default();
            for inv in r.invocations(&|_| true, None)?.0 {
                let token = inv.lease.as_ref().map(|l| l.token);
                seen.invocations
                    .insert(inv.id.clone(), (inv.status, inv.attempts, token));
            }
            seen.inbox = r
                .inbox_after(0, usize::MAX, &|_| true)?
                .into_iter()
                .map(|m| m.content)
                .collect();
            for event in 0..6u8 {
                let e = format!("e{event}");
                let rows: Vec<_> = r
                    .ledger(&e)?
                    .into_iter()
                    .map(|row| (row.trigger, row.invocation_id))
                    .collect();
                if !rows.is_empty() {
                    seen.ledger.insert(e, rows);
                }
            }
            Ok(seen)
        })
        .expect("the store reads")
}

/// The plan of crash run `seed`, the same in the parent and the child.
fn plan_of(seed: u64) -> Vec<Plan> {
    let mut bytes = [0u8; 32];
    bytes[..8].copy_from_slice(&seed.to_le_bytes());
    let rng = TestRng::from_seed(RngAlgorithm::ChaCha, &bytes);
    let mut runner = TestRunner::new_with_rng(Config::default(), rng);
    plans().new_tree(&mut runner).expect("a plan").current()
}

fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Which store the model runs against.
#[derive(Clone, Copy)]
enum Backend {
    Redb,
    Postgres(&'static pap::pgstore::testing::TestServer),
}

impl Backend {
    fn name(self) -> &'static str {
        match self {
            Backend::Redb => "redb",
            Backend::Postgres(_) => "PostgreSQL",
        }
    }

    /// A fresh, empty state: its place, and what keeps its directory alive.
    fn fresh(self) -> (composition::Place, tempfile::TempDir, Option<String>) {
        let dir = tempfile::tempdir().expect("temp dir");
        let database = match self {
            Backend::Redb => None,
            Backend::Postgres(server) => Some(server.migrated_database()),
        };
        (place(dir.path(), database.as_deref()), dir, database)
    }
}

/// The state in `dir`, in the database at `url` when there is one.
fn place(dir: &Path, url: Option<&str>) -> composition::Place {
    match url {
        Some(url) => composition::Place {
            database: Some(
                pap::database_url::parse(url, pap::database_url::Origin::Environment, &|_| None)
                    .expect("test URL"),
            ),
            ..composition::Place::file(dir.to_path_buf())
        },
        None => composition::Place::file(dir.to_path_buf()),
    }
}

/// Random sequences against the store, reopened now and then.
fn sequences_agree_with_the_model(backend: Backend) {
    let cases = env_number("PAP_MODEL_CASES", 48) as u32;
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    });
    let result = runner.run(&(plans(), any::<u64>()), |(plans, reopen_at)| {
        let (place, _dir, _) = backend.fresh();
        let mut store: Arc<dyn Storage> = composition::open(&place).expect("store");
        let mut model = Model::default();
        let mut now = 1_000_000;
        for (i, plan) in plans.iter().enumerate() {
            run_plan(store.as_ref(), &mut model, plan, &mut now);
            if (i as u64 + reopen_at).is_multiple_of(7) {
                drop(store);
                store = composition::open(&place).expect("reopen");
                prop_assert_eq!(&observe(store.as_ref()), &model.seen);
            }
        }
        prop_assert_eq!(&observe(store.as_ref()), &model.seen);
        Ok(())
    });
    if let Err(e) = result {
        panic!("{}: the store and the model disagree: {e}", backend.name());
    }
    println!(
        "storage model ({}): {cases} random sequences agree with the model",
        backend.name()
    );
}

/// The child of a crash run: applies its plan one transaction per line read from stdin, and
/// acknowledges each commit on stdout.
fn crash_child(dir: &Path, database: Option<&str>, seed: u64) {
    let store = composition::open(&place(dir, database)).expect("store");
    let mut model = Model::default();
    let mut now = 1_000_000;
    let stdin = std::io::stdin();
    let mut out = std::io::stdout();
    for (i, plan) in plan_of(seed).iter().enumerate() {
        let mut go = String::new();
        if stdin.lock().read_line(&mut go).unwrap_or(0) == 0 {
            return;
        }
        run_plan(store.as_ref(), &mut model, plan, &mut now);
        writeln!(out, "ack {}", i + 1)
            .and_then(|()| out.flush())
            .expect("stdout");
    }
}

/// Kills the child at random points; the reopened store holds every acknowledged
/// transaction and the one in flight whole or not at all.
fn crashes_lose_nothing_acknowledged(backend: Backend) {
    let crashes = env_number("PAP_MODEL_CRASHES", 12);
    let exe = std::env::current_exe().expect("test binary");
    for seed in 0..crashes {
        let plans = plan_of(seed);
        // The model after each prefix of the plan.
        let mut states = vec![Observed::default()];
        let (mut model, mut now) = (Model::default(), 1_000_000);
        {
            let (place, _dir, _) = backend.fresh();
            let store = composition::open(&place).expect("store");
            for plan in &plans {
                run_plan(store.as_ref(), &mut model, plan, &mut now);
                states.push(model.seen.clone());
            }
        }
        let (place, dir, database) = backend.fresh();
        let mut child = Command::new(&exe)
            .env("PAP_MODEL_CHILD", dir.path())
            .env("PAP_MODEL_DATABASE", database.unwrap_or_default())
            .env("PAP_MODEL_SEED", seed.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("child");
        let mut stdin = child.stdin.take().expect("stdin");
        let mut acks = BufReader::new(child.stdout.take().expect("stdout"));
        // Let `before` transactions through acknowledged, start one more, and kill the
        // child `delay_us` into it (before, during or after its commit).
        let before = (seed * 7919) as usize % plans.len();
        let delay_us = (seed * 104_729) % 3_000;
        let mut acked = 0;
        for _ in 0..before {
            stdin.write_all(b"go\n").expect("child stdin");
            let mut line = String::new();
            acks.read_line(&mut line).expect("ack");
            assert_eq!(line.trim(), format!("ack {}", acked + 1), "seed {seed}");
            acked += 1;
        }
        stdin.write_all(b"go\n").expect("child stdin");
        std::thread::sleep(std::time::Duration::from_micros(delay_us));
        child.kill().expect("SIGKILL");
        child.wait().expect("reaped");
        let store = composition::open(&place).expect("the store reopens after a crash");
        let found = observe(store.as_ref());
        assert!(
            found == states[acked] || found == states[acked + 1],
            "seed {seed}: after {acked} acknowledged transactions the store holds neither \
             that state nor the next one:\n{found:#?}\nexpected:\n{:#?}",
            states[acked]
        );
    }
    println!(
        "storage model ({}): {crashes} crash points kept every acknowledged transaction",
        backend.name()
    );
}

fn main() {
    if let Some(dir) = std::env::var_os("PAP_MODEL_CHILD") {
        let seed = env_number("PAP_MODEL_SEED", 0);
        let database = std::env::var("PAP_MODEL_DATABASE").unwrap_or_default();
        crash_child(
            Path::new(&dir),
            Some(database.as_str()).filter(|d| !d.is_empty()),
            seed,
        );
        return;
    }
    sequences_agree_with_the_model(Backend::Redb);
    crashes_lose_nothing_acknowledged(Backend::Redb);
    if let Some(server) = pap::pgstore::testing::server_or_skip("the storage model") {
        sequences_agree_with_the_model(Backend::Postgres(server));
        crashes_lose_nothing_acknowledged(Backend::Postgres(server));
    }
}
