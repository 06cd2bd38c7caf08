//! The worker: runs queued invocations in the background, at most `max_concurrent` at once.
//!
//! Work arrives two ways: serve's own decisions hand over their invocations, and a scan of
//! the store's work index finds everything else that is due (`--no-run` dispatches,
//! approvals, retries whose backoff has passed, and invocations whose runner died). Before
//! running one, the worker claims it in a transaction (records itself as the runner), so a
//! `pap dispatch` or `pap approve` running beside it never runs the same invocation.

use std::collections::{HashSet, VecDeque};
use std::sync::Arc;
use std::sync::mpsc::Sender;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinSet;
use tracing::Instrument;

use super::Wake;
use super::metrics::Metrics;
use crate::agent::{RunError, RunResult, Runtime};
use crate::domain::Lease;
use crate::domain::lease::HOLD_MARGIN_MS;
use crate::liveness::ThisProcess;
use crate::storage::{self, TakeWork};

/// How many due invocations one scan looks at, at most.
const SCAN_LIMIT: usize = 1024;
/// How many more than it has room for (and than it runs already, which come first in the
/// index) a scan looks at first: a scan after each finished run that read 1,024 ids of a
/// long backlog to take one cost about 2% of a backlog's CPU (perf).
const SCAN_SLACK: usize = 32;
/// How often the store is scanned for due work without being asked.
const SCAN_EVERY: Duration = Duration::from_secs(1);

/// What a scan's first look (a read) found.
enum Found {
    /// Due work nobody holds.
    Some,
    /// None in a full look: there may be more beyond it.
    Beyond,
    None,
}

enum Msg {
    Run(Vec<String>),
    Scan,
    SetRuntime(Runtime),
    SetMax(usize),
    Drain(oneshot::Sender<()>),
    Stop(Duration, oneshot::Sender<usize>),
}

#[derive(Clone)]
pub(super) struct Worker {
    tx: mpsc::UnboundedSender<Msg>,
}

impl Worker {
    pub(super) fn start(
        rt: &tokio::runtime::Runtime,
        runtime: Runtime,
        max: usize,
        wake: Sender<Wake>,
        metrics: Arc<Metrics>,
    ) -> Worker {
        let (tx, rx) = mpsc::unbounded_channel();
        rt.spawn(work_loop(rx, runtime, max.max(1), wake, metrics));
        Worker { tx }
    }

    /// Runs these (already held by this process) when there is room.
    pub(super) fn run(&self, ids: Vec<String>) {
        let _ = self.tx.send(Msg::Run(ids));
    }

    /// Looks for due work now.
    pub(super) fn scan(&self) {
        let _ = self.tx.send(Msg::Scan);
    }

    /// New manifests: runs started from now on use them.
    pub(super) fn set_runtime(&self, runtime: Runtime) {
        let _ = self.tx.send(Msg::SetRuntime(runtime));
    }

    /// A reload's `serve.max_concurrent`: more runs start at once when it grew; when it
    /// shrank, running ones finish and fewer start after them.
    pub(super) fn set_max(&self, max: usize) {
        let _ = self.tx.send(Msg::SetMax(max.max(1)));
    }

    /// Waits until nothing runs and nothing is due (for `--once`).
    pub(super) async fn drain(&self) {
        let (tx, rx) = oneshot::channel();
        if self.tx.send(Msg::Drain(tx)).is_ok() {
            let _ = rx.await;
        }
    }

    /// Stops taking work, lets running invocations finish within `grace`, then puts the rest
    /// back in the queue. Returns how many were put back.
    pub(super) async fn stop(&self, grace: Duration) -> usize {
        let (tx, rx) = oneshot::channel();
        if self.tx.send(Msg::Stop(grace, tx)).is_err() {
            return 0;
        }
        rx.await.unwrap_or(0)
    }
}

struct State {
    runtime: Runtime,
    metrics: Arc<Metrics>,
    max: usize,
    wake: Sender<Wake>,
    running: JoinSet<(String, Result<RunResult, RunError>)>,
    in_flight: HashSet<String>,
    waiting: VecDeque<String>,
    /// Invocations whose run errored (not failed: e.g. their agent left the manifests):
    /// not picked again until the manifests change, so one cannot spin the worker.
    broken: HashSet<String>,
    /// Held by this process, not started because the store was unavailable: taken up again
    /// at the next scan (nobody else may take them while this process holds them).
    after_outage: Vec<String>,
    /// When the last of them failed: they are tried again a scan interval later, not at the
    /// scan every finished run makes (which, while the store fails fast, would spin).
    outage_seen: Option<std::time::Instant>,
    drains: Vec<oneshot::Sender<()>>,
    /// Whether the last scan found nothing to claim.
    idle_scan: bool,
    /// The next scan looks at SCAN_LIMIT ids (a narrow one found too little).
    scan_wide: bool,
}

async fn work_loop(
    mut rx: mpsc::UnboundedReceiver<Msg>,
    runtime: Runtime,
    max: usize,
    wake: Sender<Wake>,
    metrics: Arc<Metrics>,
) {
    let mut s = State {
        runtime,
        metrics,
        max,
        wake,
        running: JoinSet::new(),
        in_flight: HashSet::new(),
        waiting: VecDeque::new(),
        broken: HashSet::new(),
        after_outage: Vec::new(),
        outage_seen: None,
        drains: Vec::new(),
        idle_scan: false,
        scan_wide: false,
    };
    let mut tick = tokio::time::interval(SCAN_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let mut scan = false;
        tokio::select! {
            msg = rx.recv() => match msg {
                None => return,
                Some(Msg::Run(ids)) => s.waiting.extend(ids),
                Some(Msg::Scan) => scan = true,
                Some(Msg::SetRuntime(r)) => {
                    s.runtime = r;
                    s.broken.clear();
                }
                Some(Msg::SetMax(max)) => {
                    s.max = max;
                    scan = true;
                }
                Some(Msg::Drain(done)) => {
                    s.drains.push(done);
                    scan = true;
                }
                Some(Msg::Stop(grace, done)) => {
                    let _ = done.send(s.stop(grace).await);
                    return;
                }
            },
            Some(joined) = s.running.join_next(), if !s.running.is_empty() => {
                s.finished(joined);
                // A slot is free, and the run's end may have admitted the next waiter of a
                // concurrency key it held: look now, not at the next tick (a look that finds
                // nothing is a read).
                scan = true;
            }
            _ = tick.tick() => scan = true,
        }
        s.start_waiting();
        if scan {
            s.scan().await;
            s.start_waiting();
        }
        if !s.drains.is_empty() && s.running.is_empty() && s.waiting.is_empty() && s.idle_scan {
            for d in s.drains.drain(..) {
                let _ = d.send(());
            }
        }
    }
}

impl State {
    fn room(&self) -> usize {
        self.max.saturating_sub(self.in_flight.len())
    }

    fn start_waiting(&mut self) {
        while self.room() > 0 {
            let Some(id) = self.waiting.pop_front() else {
                break;
            };
            if self.in_flight.contains(&id) {
                continue;
            }
            self.spawn(id);
        }
    }

    fn spawn(&mut self, id: String) {
        self.in_flight.insert(id.clone());
        let runtime = self.runtime.clone();
        let metrics = self.metrics.clone();
        let span = tracing::info_span!("invocation", id = %id);
        self.running.spawn(
            async move {
                let started = std::time::Instant::now();
                let result = runtime.run(&id).await;
                if let Ok(r) = &result {
                    let how = match (r.retry_queued, r.cancelled, r.succeeded) {
                        (true, _, _) => "retry_queued",
                        (_, true, _) => "cancelled",
                        (_, _, true) => "succeeded",
                        _ => "failed",
                    };
                    metrics.run_ended(&r.agent, how, started.elapsed());
                    if let Some(spend) = &r.spend {
                        metrics.spent(&r.agent, spend);
                    }
                }
                (id, result)
            }
            .instrument(span),
        );
    }

    fn finished(
        &mut self,
        joined: Result<(String, Result<RunResult, RunError>), tokio::task::JoinError>,
    ) {
        let Ok((id, result)) = joined else {
            // A panicked run: its invocation stays `running` under this process; the next
            // start resumes it.
            tracing::error!("an invocation task panicked");
            return;
        };
        self.in_flight.remove(&id);
        let span = tracing::info_span!("invocation", id = %id);
        let _entered = span.enter();
        match result {
            Ok(r) if r.retry_queued => tracing::warn!(
                attempt = r.attempts,
                error = r.error.as_deref().unwrap_or(""),
                "attempt failed; retry queued"
            ),
            Ok(r) if r.cancelled => tracing::warn!(
                error = r.error.as_deref().unwrap_or(""),
                "cancelled by an operator"
            ),
            Ok(r) => {
                if r.succeeded {
                    tracing::info!(
                        attempts = r.attempts,
                        emitted = r.emitted_ids.len(),
                        "succeeded"
                    );
                } else {
                    tracing::warn!(
                        attempts = r.attempts,
                        error = r.error.as_deref().unwrap_or(""),
                        "failed"
                    );
                }
                if !r.emitted.is_empty() {
                    let _ = self.wake.send(Wake::Emitted(r.emitted));
                }
            }
            Err(RunError::NotOurs(why)) => {
                tracing::debug!(reason = %why, "held by another process; left to it");
            }
            Err(RunError::Waiting(w)) => {
                // Queued still; a later scan starts it once its key admits it.
                tracing::debug!(reason = %w.why, "not started");
            }
            Err(RunError::Failed(e)) if super::outage::is_outage(&e) => {
                // Still queued or held under this process's lease: the next scan runs it.
                super::outage::report(&e, "cannot run the invocation");
                self.after_outage.push(id);
                self.outage_seen = Some(std::time::Instant::now());
            }
            Err(e) => {
                tracing::error!(error = %crate::error_text::describe_error(&e), "cannot run the invocation");
                self.broken.insert(id);
            }
        }
    }

    /// Claims due invocations no live process holds, up to the room there is.
    async fn scan(&mut self) {
        if self.outage_seen.is_none_or(|at| at.elapsed() >= SCAN_EVERY) {
            self.waiting.extend(self.after_outage.drain(..));
        }
        let room = self.room().saturating_sub(self.waiting.len());
        if room == 0 {
            self.idle_scan = false;
            return;
        }
        let mut skip: HashSet<String> = self.in_flight.clone();
        skip.extend(self.waiting.iter().cloned());
        skip.extend(self.broken.iter().cloned());
        let now = self.runtime.clock.now_ms();
        // Running ones come first in the index, then the queued by due time: a narrow look
        // finds what there is room for, unless other processes hold much of the queue (then
        // the next scan looks at all of SCAN_LIMIT).
        let limit = if self.scan_wide {
            SCAN_LIMIT
        } else {
            (skip.len() + room + SCAN_SLACK).min(SCAN_LIMIT)
        };
        self.scan_wide = false;
        // A read first: an idle serve then never commits (each commit syncs the file). Due
        // work is only what may start (a waiter for a concurrency key is due once its key
        // admits it), so a long queue behind a key costs this look nothing.
        let store = self.runtime.store.clone();
        let skipped = skip.clone();
        let candidates = tokio::task::spawn_blocking(move || {
            store.read(|r| {
                let due = r.work_due(now, limit)?;
                let full = due.len() >= limit;
                for id in due {
                    if skipped.contains(&id) {
                        continue;
                    }
                    // Held by another live process (a `pap dispatch` running it): not ours to
                    // take, and no reason to commit.
                    match r.invocation(&id)? {
                        Some(inv)
                            if crate::domain::lease::holding(
                                inv.lease.as_ref(),
                                now,
                                &ThisProcess,
                            ) != crate::domain::Holding::Free => {}
                        _ => return Ok(Found::Some),
                    }
                }
                Ok(if full { Found::Beyond } else { Found::None })
            })
        })
        .await;
        let found = match candidates {
            Ok(Ok(found)) => found,
            _ => Found::Some, // the write below reports the problem
        };
        match found {
            Found::Some => {}
            Found::Beyond if limit < SCAN_LIMIT => {
                // Everything in a narrow look was ours or held: the next look goes further.
                self.scan_wide = true;
                self.idle_scan = true;
                return;
            }
            Found::Beyond | Found::None => {
                self.idle_scan = true;
                return;
            }
        }
        let claimed = self
            .runtime
            .write(move |tx| {
                // Held by this process already (a decision of ours handed it over), or by
                // another live process (that one runs it): not free, left alone. One taken
                // is held until its attempt starts, under a lease of its own, right after.
                let lease = |token| Lease::mine(token, now, HOLD_MARGIN_MS);
                let (claimed, seen_all) = tx.take_due_work(TakeWork {
                    now,
                    limit,
                    room,
                    skip: &skip,
                    facts: &ThisProcess,
                    lease: &lease,
                })?;
                Ok::<_, storage::Error>((claimed, seen_all))
            })
            .await;
        match claimed {
            Ok((ids, seen_all)) => {
                // A full claim may have left due work behind; so may a narrow look that
                // found too little (the next one looks wide).
                let narrow = !seen_all && limit < SCAN_LIMIT && ids.len() < room;
                self.scan_wide = narrow;
                self.idle_scan = ids.len() < room && !narrow;
                for id in ids {
                    self.spawn(id);
                }
            }
            Err(crate::agent::RunError::Failed(e)) => {
                self.idle_scan = true;
                super::outage::report(&e, "cannot read the work queue");
            }
            Err(e) => {
                self.idle_scan = true;
                tracing::error!(error = %crate::error_text::describe_error(&e), "cannot read the work queue");
            }
        }
    }

    async fn stop(&mut self, grace: Duration) -> usize {
        self.waiting.clear();
        if !self.running.is_empty() {
            tracing::info!(
                running = self.running.len(),
                grace_seconds = grace.as_secs_f64(),
                "waiting for running agents"
            );
        }
        let finish = async {
            while let Some(joined) = self.running.join_next().await {
                self.finished(joined);
            }
        };
        // Real time even under a fake clock: this waits for real processes.
        let _ = tokio::time::timeout(grace, finish).await;
        self.running.abort_all();
        while self.running.join_next().await.is_some() {}
        let interrupted: Vec<String> = self.in_flight.drain().collect();
        for id in &interrupted {
            let why = "interrupted: pap serve stopped before the attempt finished";
            match self.runtime.requeue_interrupted(id, why).await {
                Ok(()) => tracing::warn!(invocation = %id, "stopped mid-attempt; queued again"),
                Err(e) => tracing::error!(invocation = %id, error = %e, "cannot queue again"),
            }
        }
        interrupted.len()
    }
}
