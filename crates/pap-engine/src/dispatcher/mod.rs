//! Drives the pipeline over a stream of events: decides them in groups (one transaction per
//! group), runs the invocations a group created, dispatches what those runs emitted, and
//! prints each event's line once its group is committed and its agents have finished.

mod queued;
mod render;
mod settle;
pub(crate) mod stop;

use crate::pipeline::report::TriggerReport;
use std::collections::{HashMap, HashSet};
use std::io::Write;
use stop::Stopped;

use tokio::task::JoinSet;

use crate::agent::{RunError, RunResult, Runtime, Waiting, approvals};
use crate::event::input::Location;
use crate::event::{Event, Invalid};
use crate::pipeline::report::EventReport;
use crate::pipeline::{Decided, Fired, Options, Pipeline, Prepared};
use crate::stages::Outcome;
use crate::storage::{self, WriteTx};
pub use render::{Detail, Format};
pub use stop::Stop;

/// How many events one transaction decides at most. Larger groups amortise the commit (an
/// fsync, and the copy of every B-tree page the group touched); a slow producer still gets a
/// commit per event, since a group never waits for more input. The events themselves are
/// dropped as they are decided; a group holds only its report lines until the commit.
pub const GROUP_MAX: usize = 32_768;

/// What one group's reports may weigh at most, in [`Pending::weight`]s: the reports wait in
/// memory for the commit, so this bounds what a group holds whatever the events match. About
/// 6 MB: 2,730 events of 5 triggers each (the invocation-heavy benchmark), 8,192 of one
/// trigger. A group counted only in events held 32,768 events of 40 triggers each, 650 MB;
/// twice this weight kept 1M decisions about 12 MB above `store_cache` + 64 MB, at a tenth
/// less CPU.
pub const GROUP_WEIGHT_MAX: usize = 16_384;

/// An event waiting to be decided, with where it came from.
#[derive(Clone)]
pub struct Pending {
    pub input: Location,
    pub event: Result<Event, Invalid>,
    /// Emitted by an invocation: it waits in the store's outbox until decided.
    pub emitted: bool,
    /// The store-free part of the decision, when the reading thread computed it already.
    pub prepared: Option<Prepared>,
}

impl Pending {
    /// What its report will weigh, in units of about 400 bytes (one trigger's report): one
    /// for the event, one for each trigger it is decided for, and one for each condition
    /// `--explain` quotes (each holds what its path saw).
    pub fn weight(&self) -> usize {
        1 + self.prepared.as_ref().map_or(0, |p| {
            p.triggers
                .iter()
                .map(|t| 1 + t.conditions.len())
                .sum::<usize>()
        })
    }
}

/// Counts for the summary and the exit status.
#[derive(Debug, Default, Clone)]
pub struct Tally {
    pub events: usize,
    pub invalid: usize,
    pub no_match: usize,
    pub outcomes: HashMap<&'static str, usize>,
    pub succeeded: usize,
    pub failed: usize,
    /// Work ended by events' `cancel_on`.
    pub cancelled: usize,
}

/// Runs a print so that a progress bar on the terminal is hidden meanwhile.
pub type Suspend = Box<dyn Fn(&mut dyn FnMut()) + Send>;

/// Formats and writes report lines on its own thread, so the thread deciding events spends
/// its time on decisions (on a stream, formatting is a fifth of the work).
struct Printer {
    lines: Option<std::sync::mpsc::SyncSender<Vec<EventReport>>>,
    thread: Option<std::thread::JoinHandle<std::io::Result<Box<dyn Write + Send>>>>,
}

impl Printer {
    fn start(format: Format, mut out: Box<dyn Write + Send>, suspend: Suspend) -> Printer {
        // A rendezvous: a decided group waits until the printer has finished the one before,
        // so at most two groups' reports are in memory (one printed, one being decided).
        let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<EventReport>>(0);
        let thread = std::thread::spawn(move || {
            // Written in pieces of about 64 KiB: a group of 32,768 lines never sits in memory
            // as one text.
            const PIECE: usize = 64 * 1024;
            let mut text = String::with_capacity(PIECE + 4096);
            let mut write = |text: &mut String, flush: bool| {
                let mut result = Ok(());
                suspend(&mut || {
                    result = out.write_all(text.as_bytes());
                    if flush && result.is_ok() {
                        result = out.flush();
                    }
                });
                text.clear();
                result
            };
            for reports in rx {
                for r in &reports {
                    format.line(r, &mut text);
                    if text.len() >= PIECE {
                        write(&mut text, false)?;
                    }
                }
                write(&mut text, true)?;
            }
            Ok(out)
        });
        Printer {
            lines: Some(tx),
            thread: Some(thread),
        }
    }

    fn send(&mut self, reports: Vec<EventReport>) -> anyhow::Result<()> {
        let sent = self.lines.as_ref().map(|tx| tx.send(reports));
        if let Some(Err(_)) = sent {
            // The printer stopped: its error comes out of `finish`.
            self.lines = None;
        }
        Ok(())
    }

    /// Waits for every line to be written; returns the output for the summary.
    fn finish(&mut self) -> anyhow::Result<Box<dyn Write + Send>> {
        self.lines = None;
        let thread = self.thread.take().expect("finished once");
        Ok(thread.join().expect("printer thread")?)
    }
}

impl Drop for Printer {
    /// Every line sent is written before the dispatcher goes away, summary or not.
    fn drop(&mut self) {
        self.lines = None;
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Resolves when a stop's grace period is over; never without a stop.
async fn grace_over(stop: &mut Option<Stop>) {
    match stop {
        Some(stop) => stop.grace_over().await,
        None => std::future::pending().await,
    }
}

pub struct Dispatcher<'a> {
    pipeline: Pipeline<'a>,
    runtime: Runtime,
    rt: &'a tokio::runtime::Runtime,
    jobs: usize,
    format: Format,
    printer: Printer,
    pub tally: Tally,
    /// `pap serve`: invocations a decision creates go to its workers (bounded, in the
    /// background) instead of running before the group's lines are printed.
    defer: Option<Box<dyn Fn(Vec<String>) + 'a>>,
    /// Takes each event's body once it is decided (see [`Dispatcher::recycle_events`]).
    recycle: Option<Box<dyn FnMut(serde_json::Value) + 'a>>,
    /// `pap dispatch` on SIGINT/SIGTERM: no new runs; running ones get the grace period.
    stop: Option<Stop>,
    /// Runs left queued because another process holds their concurrency slot, with why.
    left_waiting: std::sync::Mutex<HashMap<String, String>>,
    /// Told of each decided event and each commit's duration (serve's metrics).
    observer: Option<Observer<'a>>,
    /// Whether each group's transaction also purges expired claims, as many as it decided
    /// (and a few more): so a process that only dispatches purges at the pace it claims.
    /// `pap serve` purges in steps of its own between decisions instead (see
    /// `upkeep::purge`), so that no decision waits for a purge.
    purge_inline: bool,
}

/// What [`Dispatcher::observe`] calls.
pub struct Observer<'a> {
    pub decided: Box<dyn Fn(&EventReport) + 'a>,
    pub committed: Box<dyn Fn(std::time::Duration) + 'a>,
}

impl<'a> Dispatcher<'a> {
    pub fn new(
        runtime: &'a Runtime,
        options: Options,
        rt: &'a tokio::runtime::Runtime,
        jobs: usize,
        format: Format,
        out: Box<dyn Write + Send>,
        suspend: Suspend,
    ) -> Dispatcher<'a> {
        Dispatcher {
            pipeline: Pipeline::new(&runtime.project, options),
            runtime: runtime.clone(),
            rt,
            jobs: jobs.max(1),
            format,
            printer: Printer::start(format, out, suspend),
            tally: Tally::default(),
            defer: None,
            recycle: None,
            stop: None,
            left_waiting: Default::default(),
            observer: None,
            purge_inline: true,
        }
    }

    /// Stops starting runs once `stop` is asked for, and ends running ones at its deadline
    /// (they go back to the queue).
    pub fn stop_on(&mut self, stop: Stop) {
        self.stop = Some(stop);
    }

    /// The stop a signal asked for, if any.
    pub fn stopped(&self) -> Option<stop::Stopped> {
        self.stop.as_ref().and_then(Stop::requested)
    }

    /// Tells `observer` of every event decided and every commit made.
    pub fn observe(&mut self, observer: Observer<'a>) {
        self.observer = Some(observer);
    }

    /// Leaves the purge of expired claims to the caller (see `purge_inline`).
    pub fn leave_purge_to_caller(&mut self) {
        self.purge_inline = false;
    }

    /// Hands the invocations each group creates to `run` instead of running them here.
    pub fn defer_runs(&mut self, run: impl Fn(Vec<String>) + 'a) {
        self.defer = Some(Box::new(run));
    }

    /// Hands each decided event's body to `take` instead of dropping it here. `pap dispatch`
    /// sends them back to the thread that parsed them: freeing memory on the thread that
    /// allocated it is several times cheaper (mimalloc), and this thread is the one that
    /// bounds a stream's rate.
    pub fn recycle_events(&mut self, take: impl FnMut(serde_json::Value) + 'a) {
        self.recycle = Some(Box::new(take));
    }

    fn options(&self) -> Options {
        self.pipeline.options
    }

    /// Expires approvals past their deadline and dispatches the failure events.
    pub fn expire_approvals(&mut self) -> anyhow::Result<()> {
        if self.options().dry_run {
            return Ok(());
        }
        let now = self.runtime.clock.now_ms();
        // Usually nothing is due: a read then spares a commit (and its sync of the file).
        if self
            .runtime
            .store
            .read(|r| r.approvals_due(now))?
            .is_empty()
        {
            return Ok(());
        }
        let project = self.runtime.project.clone();
        let events = self
            .runtime
            .store
            .write(|tx| approvals::expire_due(tx, &project, now))?;
        self.dispatch_emitted(events)
    }

    /// Fires the trailing debounces that are due: their invocations run as decided ones do
    /// (handed to serve's worker, or run here). Returns what fired, for the log.
    pub fn fire_debounced(&mut self) -> anyhow::Result<Vec<Fired>> {
        if self.options().dry_run {
            return Ok(Vec::new());
        }
        let now = self.runtime.clock.now_ms();
        // Usually nothing is due: a read then spares a commit (and its sync of the file).
        let next = self.runtime.store.read(|r| r.debounce_next_due())?;
        if next.is_none_or(|due| due > now) {
            return Ok(Vec::new());
        }
        let pipeline = &self.pipeline;
        let fired = self
            .runtime
            .store
            .write(|tx| pipeline.fire_debounced(tx, now))?;
        let to_run: Vec<String> = fired
            .iter()
            .filter_map(|f| f.decided.as_ref())
            .filter(|t| t.outcome == Outcome::Invoked && t.held)
            .filter_map(|t| t.invocation_id.clone())
            .collect();
        match &self.defer {
            Some(hand_over) => {
                if !to_run.is_empty() {
                    hand_over(to_run);
                }
            }
            None => {
                let results = self.run_all(to_run)?;
                let emitted = results.into_values().flat_map(|r| r.emitted).collect();
                self.dispatch_emitted(emitted)?;
            }
        }
        Ok(fired)
    }

    /// Dispatches events an invocation emitted (they are in the outbox already).
    pub fn dispatch_emitted(&mut self, events: Vec<Event>) -> anyhow::Result<()> {
        if events.is_empty() {
            return Ok(());
        }
        let group = events
            .into_iter()
            .map(|e| Pending {
                input: Location::emitted(),
                event: Ok(e),
                emitted: true,
                prepared: None,
            })
            .collect::<Vec<_>>();
        self.process(group)
    }

    /// Decides one group in one transaction, runs what it invoked, prints its lines, then
    /// does the same for whatever those runs emitted. The group is pulled inside the
    /// transaction, so a caller can hand over events as they arrive.
    pub fn process(&mut self, group: impl IntoIterator<Item = Pending>) -> anyhow::Result<()> {
        let mut decided = self.commit(group)?;
        let to_run: Vec<String> = decided
            .iter()
            .flat_map(|d| d.to_run.iter().cloned())
            .collect();
        let results = match &self.defer {
            Some(hand_over) => {
                if !to_run.is_empty() {
                    hand_over(to_run);
                }
                HashMap::new()
            }
            None => self.run_all(to_run)?,
        };
        let mut next = Vec::new();
        let stopped = self.stopped().filter(|_| self.defer.is_none());
        for d in &mut decided {
            // What its `cancel_on` ended emitted its failure events.
            next.append(&mut d.emitted);
            for t in &mut d.report.triggers {
                // A batch handed over by this event is a run of its own, settled alike.
                for h in &mut t.handed_over {
                    self.settle_report(h, &results, stopped.as_ref(), &mut next);
                }
                self.settle_report(t, &results, stopped.as_ref(), &mut next);
            }
        }
        self.print(decided)?;
        self.dispatch_emitted(next)
    }

    /// Decides one group in one transaction and commits it (durably: the store syncs).
    ///
    /// On a store with one writer the group is pulled inside the transaction (`pap
    /// dispatch` reads its input as the decisions go) and nothing is kept. A store several
    /// processes share (PostgreSQL, `Storage::shared`) gets the whole group first: the
    /// transaction takes every lock the group's decisions need up front, in one order
    /// (`WriteTx::prelock`), and may run again after a deadlock with a process that could
    /// not, replaying a copy of each event.
    fn commit(&mut self, group: impl IntoIterator<Item = Pending>) -> anyhow::Result<Vec<Decided>> {
        let now = self.runtime.clock.now_ms();
        let pipeline = &self.pipeline;
        let recycle = &mut self.recycle;
        let replayable = self.runtime.store.shared();
        let mut source = group.into_iter();
        let mut pulled: Vec<Pending> = Vec::new();
        let mut locks = Vec::new();
        if replayable {
            pulled.extend(source.by_ref());
            for p in &mut pulled {
                if let Ok(event) = &p.event {
                    let prepared = p.prepared.get_or_insert_with(|| pipeline.prepare(event));
                    pipeline.lock_names(prepared, &mut locks);
                }
            }
            locks.sort_unstable();
            locks.dedup();
            if locks.len() > storage::PRELOCK_MAX {
                locks = Vec::new();
            }
        }
        let purge_inline = self.purge_inline;
        let decide = |tx: &mut dyn WriteTx| -> storage::Result<Vec<Decided>> {
            if !locks.is_empty() {
                tx.prelock(&locks)?;
            }
            let mut decided = Vec::with_capacity(pulled.len().max(source.size_hint().0));
            let mut next = 0;
            loop {
                // A shared store's group was pulled before; any other is pulled now.
                let p = match pulled.get(next) {
                    Some(p) => p.clone(),
                    None => match source.next() {
                        Some(p) => p,
                        None => break,
                    },
                };
                next += 1;
                decided.push(match p.event {
                    Ok(event) => {
                        if p.emitted {
                            tx.outbox_remove(&event.id)?;
                        }
                        let (d, body) = pipeline.decide(tx, event, p.prepared, p.input, now)?;
                        if let Some(take) = recycle.as_mut() {
                            take(body);
                        }
                        d
                    }
                    Err(bad) => Decided {
                        report: EventReport::invalid(p.input, bad.id, bad.kind, bad.reason),
                        to_run: Vec::new(),
                        to_stop: Vec::new(),
                        emitted: Vec::new(),
                    },
                });
            }
            if purge_inline {
                let most = decided.len().saturating_add(storage::INLINE_PURGE);
                tx.purge_expired_claims(now, most)?;
            }
            Ok(decided)
        };
        let store = &self.runtime.store;
        let started = std::time::Instant::now();
        // A dry run's store is a private copy (or memory): committing there changes nothing.
        let decided = store.write(decide)?;
        if let Some(o) = &self.observer {
            (o.committed)(started.elapsed());
        }
        // Recorded first, so a runner outliving its processes finds its lease gone.
        let to_stop: Vec<_> = decided
            .iter()
            .flat_map(|d| d.to_stop.iter().cloned())
            .collect();
        if !to_stop.is_empty() {
            let grace = self.runtime.project.config.serve.grace_period;
            crate::agent::groups::stop_cancelled(store.clone(), to_stop, grace);
        }
        Ok(decided)
    }

    /// Runs invocations concurrently, at most `jobs` at a time.
    fn run_all(&self, ids: Vec<String>) -> anyhow::Result<HashMap<String, RunResult>> {
        self.run_each(ids, false)
    }

    /// As `run_all`; with `skip_taken`, an invocation another process took first is left out
    /// instead of being an error.
    ///
    /// A run refused for a concurrency slot (or a token budget) is tried again after a run
    /// of this process ends (which may free the slot): the first refused of each key, in
    /// decision order, since the ones behind it in that key cannot start before it. So a long
    /// queue behind a key costs one refusal per run that ends, not one per waiter. When
    /// nothing of this process runs and it is still refused, the slot is another process's:
    /// it is left queued for `pap serve`, and its id and why go into `self.left_waiting`.
    fn run_each(
        &self,
        ids: Vec<String>,
        skip_taken: bool,
    ) -> anyhow::Result<HashMap<String, RunResult>> {
        if ids.is_empty() {
            return Ok(HashMap::new());
        }
        let jobs = self.jobs;
        let runtime = self.runtime.clone();
        let mut stop = self.stop.clone();
        let left_waiting = &self.left_waiting;
        let order: HashMap<String, usize> = ids
            .iter()
            .enumerate()
            .map(|(i, id)| (id.clone(), i))
            .collect();
        self.rt.block_on(async move {
            let mut waiting: std::collections::VecDeque<String> = ids.into();
            // By decision order (the order of `ids`).
            let mut blocked: std::collections::BTreeMap<usize, (String, Waiting)> =
                Default::default();
            // Once refused a slot, an invocation is free for any process to take: serve may
            // start it before this process tries again.
            let mut ever_blocked: HashSet<String> = HashSet::new();
            let mut tried_idle = false;
            let mut set = JoinSet::new();
            let mut running = HashSet::new();
            let mut results = HashMap::new();
            loop {
                let stopping = stop.as_ref().and_then(Stop::requested);
                while stopping.is_none() && set.len() < jobs {
                    let Some(id) = waiting.pop_front() else { break };
                    running.insert(id.clone());
                    let runtime = runtime.clone();
                    set.spawn(async move {
                        let r = runtime.run(&id).await;
                        (id, r)
                    });
                }
                if set.is_empty() {
                    if blocked.is_empty() || stopping.is_some() || tried_idle {
                        let mut left = left_waiting.lock().expect("left_waiting lock");
                        left.extend(
                            std::mem::take(&mut blocked)
                                .into_values()
                                .map(|(id, w)| (id, w.why)),
                        );
                        break;
                    }
                    // Nothing of ours runs: one more try before leaving them to serve.
                    tried_idle = true;
                    retry_first_of_each_gate(&mut blocked, &mut waiting);
                    continue;
                }
                tokio::select! {
                    joined = set.join_next() => {
                        let (id, r) = joined.expect("not empty")?;
                        running.remove(&id);
                        let r = match r {
                            Ok(r) => r,
                            Err(RunError::NotOurs(_)) if skip_taken => continue,
                            Err(RunError::NotOurs(why)) if ever_blocked.contains(&id) => {
                                let why = format!("taken over by another process while it waited for room ({why})");
                                left_waiting.lock().expect("left_waiting lock").insert(id, why);
                                continue;
                            }
                            Err(RunError::Waiting(w)) => {
                                ever_blocked.insert(id.clone());
                                let at = order.get(&id).copied().unwrap_or(usize::MAX);
                                blocked.insert(at, (id, w));
                                continue;
                            }
                            Err(e) => return Err(e.into()),
                        };
                        results.insert(r.invocation_id.clone(), r);
                        // A slot may be free now: what waited for one goes first.
                        retry_first_of_each_gate(&mut blocked, &mut waiting);
                        tried_idle = false;
                    }
                    () = grace_over(&mut stop) => {
                        // Dropping a run kills its agent's process group.
                        set.abort_all();
                        while set.join_next().await.is_some() {}
                        let signal = stop
                            .as_ref()
                            .and_then(Stop::requested)
                            .map_or("a signal", |s| s.signal);
                        let why = format!(
                            "interrupted: pap dispatch stopped ({signal}) before the attempt ended"
                        );
                        for id in running.drain() {
                            runtime.requeue_interrupted(&id, &why).await.map_err(anyhow::Error::from)?;
                        }
                        break;
                    }
                }
            }
            Ok(results)
        })
    }

    /// Notes on a decision's report how its run went (or why it was left for serve).
    fn settle_report(
        &self,
        t: &mut TriggerReport,
        results: &HashMap<String, RunResult>,
        stopped: Option<&Stopped>,
        next: &mut Vec<Event>,
    ) {
        let Some(id) = t.invocation_id.as_ref() else {
            return;
        };
        let Some(r) = results.get(id) else {
            let left = self
                .left_waiting
                .lock()
                .expect("left_waiting lock")
                .remove(id);
            if let Some(why) = left
                && t.outcome == Outcome::Invoked
            {
                t.outcome = Outcome::Queued;
                t.reason = Some(format!("{why}; queued for pap serve").into());
                return;
            }
            if let Some(s) = stopped
                && t.outcome == Outcome::Invoked
            {
                t.outcome = Outcome::Queued;
                t.reason = Some(
                    format!(
                        "pap dispatch stopped ({}) before the run ended; queued for pap serve",
                        s.signal
                    )
                    .into(),
                );
            }
            return;
        };
        t.result = Some(match (r.succeeded, r.cancelled) {
            (true, _) => "succeeded",
            (false, true) => "cancelled",
            (false, false) => "failed",
        });
        t.attempts = Some(r.attempts);
        t.emitted = Some(r.emitted_ids.clone());
        if t.reason.is_none() {
            t.reason = r.error.clone().filter(|_| !r.succeeded).map(Into::into);
        }
        next.extend(r.emitted.iter().cloned());
    }

    fn print(&mut self, decided: Vec<Decided>) -> anyhow::Result<()> {
        let reports: Vec<EventReport> = decided.into_iter().map(|d| d.report).collect();
        for r in &reports {
            self.count(r);
        }
        self.printer.send(reports)
    }

    fn count(&mut self, r: &EventReport) {
        if let Some(o) = &self.observer {
            (o.decided)(r);
        }
        let t = &mut self.tally;
        t.events += 1;
        match r.status {
            "invalid" => t.invalid += 1,
            "no_match" => t.no_match += 1,
            _ => {}
        }
        t.cancelled += r.cancelled.iter().filter(|c| c.cancelled).count();
        let handed = r.triggers.iter().flat_map(|tr| &tr.handed_over);
        for tr in r.triggers.iter().chain(handed) {
            if tr.outcome == Outcome::Disabled {
                continue;
            }
            *t.outcomes.entry(tr.outcome.as_str()).or_default() += 1;
            match tr.result {
                Some("succeeded") => t.succeeded += 1,
                Some("failed") => t.failed += 1,
                _ => {}
            }
        }
    }

    /// The closing summary (human format only).
    ///
    /// A reader that went away (`pap dispatch … | head -1`) is not an error: every event was
    /// still decided and committed, and the exit code still says how the runs went.
    /// Flushes what is printed and ends with the summary line (human format), unless
    /// `summary` is false.
    pub fn finish(&mut self, summary: bool) -> anyhow::Result<()> {
        let written = self.printer.finish().and_then(|mut out| {
            if let Some(text) = summary
                .then(|| self.format.summary(&self.tally, self.options()))
                .flatten()
            {
                out.write_all(text.as_bytes())?;
            }
            out.flush()?;
            Ok(())
        });
        match written {
            Err(err) if crate::panic_report::is_broken_pipe(&err) => Ok(()),
            other => other,
        }
    }
}

/// Moves the first refused run of each gate (concurrency key or budget), in decision order,
/// to the front of `waiting`: the others of a gate wait behind it anyway.
fn retry_first_of_each_gate(
    blocked: &mut std::collections::BTreeMap<usize, (String, Waiting)>,
    waiting: &mut std::collections::VecDeque<String>,
) {
    let mut gates = HashSet::new();
    let firsts: Vec<usize> = blocked
        .iter()
        .filter(|(_, (_, w))| gates.insert(w.gate.clone()))
        .map(|(at, _)| *at)
        .collect();
    for at in firsts.into_iter().rev() {
        if let Some((id, _)) = blocked.remove(&at) {
            waiting.push_front(id);
        }
    }
}
