//! `pap serve`: the long-running side (contract section 8).
//!
//! One thread owns the decisions: it claims spool files, fires schedules, expires approvals,
//! picks up events a dead process left in the outbox, and purges old state, deciding with
//! the same pipeline as `pap dispatch`. The invocations it creates go to the [`work`]er,
//! which runs them on the async runtime with bounded concurrency. Everything else talks to
//! this thread through one channel of [`Wake`]s: file-system events, signals, the control
//! socket, and events that finished runs emitted.
//!
//! Every write goes through the store as in any other command (the file is opened per
//! transaction), so `pap dispatch`, `approve` and the listings keep working beside serve.

pub mod conditions;
pub mod control;
pub mod decider;
pub mod http;
pub mod lock;
pub mod log;
pub mod metrics;
mod node;
mod outage;
mod purge;
pub mod recent;
mod reload;
mod restart_only;
mod settings;
mod spool;
mod watch;
mod work;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::time::{Duration, Instant};

use anyhow::Context;
use serde_json::json;

use crate::agent::Runtime;
use crate::clock::Clock;
use crate::dispatcher::{Dispatcher, Format, Pending};
use crate::domain::Runner;
use crate::event::input::{self, Location};
use crate::event::{self, Event, Origin};
use crate::manifest::Project;
use crate::pipeline::Options;
use crate::schedule;
use crate::storage;
pub use settings::{Overrides, Settings};
use spool::{Claimed, Problem, Spool, SpoolError};
use work::Worker;

/// What wakes the deciding thread.
pub enum Wake {
    /// Something may have landed in the spool.
    Spool,
    /// A manifest file changed (reloaded after a short quiet period).
    Manifests,
    /// SIGHUP.
    Reload,
    /// Someone queued work (the control socket).
    Work,
    /// A finished run emitted these events; they wait in the outbox.
    Emitted(Vec<Event>),
    /// Events posted to the HTTP listener, waiting for their answer.
    Ingest(decider::IngestRequest),
    /// SIGINT/SIGTERM.
    Stop,
}

/// How many spool files one transaction decides at most.
const FILE_BATCH: usize = 512;
/// Events per transaction at most. Smaller than `pap dispatch`'s groups: serve reads a batch
/// of files whole before deciding it, so a group's parsed events are all held at once, and a
/// daemon should stay small.
const GROUP_MAX: usize = 8192;
/// How long manifests must be quiet before a reload (editors write in several steps).
const RELOAD_QUIET: Duration = Duration::from_millis(300);
/// How often a purge pass starts (expired keys, old ledger rows, old `done/` files); a pass
/// goes in steps between decisions until it is done (see `purge`).
const PURGE_EVERY: Duration = Duration::from_secs(60);
/// A pass also starts once the clock moved this far since the last: the same as
/// [`PURGE_EVERY`] on the system clock, and more often on a test clock that runs faster
/// (a soak test's month in an hour still purges every hour of its time).
const PURGE_EVERY_CLOCK_MS: i64 = 3_600_000;
/// The longest the deciding thread sleeps: schedules fire within a second of their time.
const TICK: Duration = Duration::from_secs(1);

struct Server {
    root: PathBuf,
    runtime: Runtime,
    rt: tokio::runtime::Runtime,
    spool: Spool,
    /// Whether spool files are taken now (see [`spool::health`]).
    spool_health: spool::Health,
    worker: Worker,
    settings: Settings,
    wakes: Receiver<Wake>,
    stop: Arc<AtomicBool>,
    purger: purge::Purger,
    /// When the last purge pass started: the wall clock's instant and the clock's time.
    last_purge: Option<(Instant, i64)>,
    last_rescan: Instant,
    /// Spool files that arrived by a rename, not yet claimed. The watcher's thread adds to it
    /// directly, so a burst's files are known as renamed the moment serve scans them, not
    /// once their wake-ups have come through the channel.
    renamed: watch::Arrivals,
    /// When a spool file written in place will have settled: look again then.
    settle_at: Option<Instant>,
    reload_at: Option<Instant>,
    /// A notification timer pass is running.
    pumping: Arc<AtomicBool>,
    /// HTTP requests waiting for their decisions.
    ingests: Vec<decider::IngestRequest>,
    listening: Option<http::Listening>,
    /// The listener's view of the project, replaced on a reload.
    shared_project: Option<http::SharedProject>,
    metrics: Arc<metrics::Metrics>,
    recent: Arc<recent::RecentDecisions>,
    /// What `pap status` and `/metrics` show of this serve's troubles.
    conditions: Arc<conditions::Conditions>,
    /// The start-only settings in force (see [`restart_only`]).
    fixed: restart_only::Fixed,
    /// `PAP_DATABASE_URL` named the store at start (pap.yaml's `store:` then does not).
    database_url: bool,
    /// When the manifests in force were loaded (start, or the last reload that applied).
    loaded_at: String,
    /// This serve as a node of the store (listed by `pap status` on a shared database).
    node: storage::Node,
    last_heartbeat: Option<Instant>,
    /// Asked to look at the queue (another command, or the database: several wake-ups in a
    /// burst make one look).
    work_woken: bool,
}

/// Admits what waits for concurrency keys under the limits the manifests say now.
fn relimit_waiting(runtime: &Runtime) {
    let project = runtime.project.clone();
    let any = project.triggers.iter().any(|t| t.concurrency.is_some())
        || project.agents.iter().any(|a| a.concurrency.is_some());
    if !any {
        return;
    }
    if let Err(e) = runtime
        .store
        .write(|tx| crate::pipeline::relimit_waiting(&project, tx))
    {
        outage::report_store(&e, "cannot apply the manifests' concurrency limits");
    }
}

/// The store serve works on, as the composition root (`cmd::serve`) opened it.
pub struct Opened {
    pub store: Arc<dyn storage::Storage>,
    /// The clock every decision is taken on (a shared database's, see
    /// `composition::clock_for`).
    pub clock: Clock,
    /// `PAP_DATABASE_URL` chose the store: pap.yaml's `store:` does not count, even after a
    /// reload.
    pub url_from_env: bool,
}

/// Starts serve and runs until stopped (or, with `once`, until nothing is due). `open` opens
/// the store, once serve holds the state dir's lock.
pub fn run(
    project: Project,
    state_dir: &Path,
    settings: Settings,
    open: impl FnOnce(&Project) -> anyhow::Result<Opened>,
) -> anyhow::Result<()> {
    log::init(settings.log_format);
    std::fs::create_dir_all(state_dir)
        .with_context(|| format!("creating the state dir {}", state_dir.display()))?;
    let started_at = format!("{:.0}", Clock::from_env()?.now());
    let loaded_at = started_at.clone();
    let holder = lock::Holder {
        pid: std::process::id(),
        started_at: started_at.clone(),
        root: project.root.clone(),
        command: None,
    };
    let _lock = lock::acquire(state_dir, &holder)?;
    let Opened {
        store,
        clock,
        url_from_env,
    } = open(&project)?;
    let spool_dir = match &project.config.spool_dir {
        Some(dir) => project.root.join(dir),
        None => state_dir.join("spool"),
    };
    // On a shared store nodes may share the spool directory: each claims into its own.
    let node_id = store.shared().then(|| node::id(state_dir));
    let spool = Spool::open(&spool_dir, node_id.as_deref())
        .with_context(|| format!("opening the spool dir {}", spool_dir.display()))?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        // A blocking-pool thread (store calls, spool reads) lives on through a lull of up to
        // a minute, where tokio's default ends it after 10 s idle. Under a steady load with
        // bursts the pool then keeps its threads instead of starting and ending them every
        // few seconds, and each thread that ended left its allocator pages for another to
        // take: serve's RSS stepped by 2-4 MB at a time.
        .thread_keep_alive(std::time::Duration::from_secs(60))
        .build()
        .context("starting the async runtime")?;
    let root = project.root.clone();
    let runtime = Runtime {
        project: Arc::new(project),
        store,
        clock,
        queue_retries: true,
    };
    relimit_waiting(&runtime);
    let (wake_tx, wakes) = std::sync::mpsc::channel();
    let stop = Arc::new(AtomicBool::new(false));
    let conditions = Arc::new(conditions::Conditions::default());
    let metrics = Arc::new(metrics::Metrics::new(conditions.clone()));
    let recent = Arc::new(recent::RecentDecisions::default());
    let worker = Worker::start(
        &rt,
        runtime.clone(),
        settings.max_concurrent,
        wake_tx.clone(),
        metrics.clone(),
    );

    let arrivals = watch::Arrivals::default();
    let mut _watches = None;
    let mut _changes = None;
    let mut listening = None;
    let mut shared_project = None;
    if let Some(address) = &settings.listen {
        let project = &runtime.project;
        let shared = Arc::new(std::sync::RwLock::new(project.clone()));
        shared_project = Some(shared.clone());
        let listen = &project.config.listen;
        let l = http::start(
            &rt,
            http::Setup {
                address,
                config: listen,
                root: &project.root,
                decider: decider::Decider::new(
                    wake_tx.clone(),
                    listen.max_queued_events,
                    stop.clone(),
                ),
                store: runtime.store.clone(),
                state_dir,
                project: shared,
                metrics: metrics.clone(),
                recent: recent.clone(),
                clock: runtime.clock.clone(),
            },
        )?;
        tracing::info!(url = %l.url(), "listening for HTTP");
        listening = Some(l);
    }
    if !settings.once {
        signals(&rt, wake_tx.clone(), stop.clone());
        let info = {
            let (pid, listen) = (
                std::process::id(),
                listening.as_ref().map(http::Listening::url),
            );
            let conditions = conditions.clone();
            move || {
                json!({
                    "ok": true,
                    "pid": pid,
                    "started_at": started_at,
                    "version": env!("CARGO_PKG_VERSION"),
                    "listen": listen,
                    "conditions": conditions.shown(),
                })
            }
        };
        let poke = wake_tx.clone();
        match control::listen(state_dir, info, move || {
            let _ = poke.send(Wake::Work);
        }) {
            Ok(path) => tracing::debug!(socket = %path.display(), "control socket ready"),
            Err(e) => tracing::warn!(
                error = %e,
                "no control socket: other commands will not hand work to this serve at once (it still finds it within a second)"
            ),
        }
        // On a shared store, work another process frees (queued by `dispatch --no-run`, an
        // approval answered, a node stopping) wakes this one at once instead of at the
        // worker's next look, up to a second later.
        let poke = wake_tx.clone();
        _changes = runtime.store.listen(Box::new(move |change| {
            if change == storage::Change::Work {
                tracing::debug!("woken by the database: work was freed");
                let _ = poke.send(Wake::Work);
            }
        }));
        _watches = Some(watch::start(
            &root,
            &spool.dir,
            wake_tx.clone(),
            arrivals.clone(),
        ));
    }
    // What the first decisions and runs would otherwise look up inside their transactions.
    crate::liveness::warm_up();
    tracing::info!(
        pid = std::process::id(),
        state = %state_dir.display(),
        spool = %spool.dir.display(),
        max_concurrent = settings.max_concurrent,
        triggers = runtime.project.triggers.len(),
        agents = runtime.project.agents.len(),
        schedules = runtime.project.schedules.len(),
        "pap serve started"
    );
    let node = node::this(
        state_dir,
        runtime.clock.now_ms(),
        listening.as_ref().map(http::Listening::url),
    );
    if runtime.store.kind() != "redb" {
        tracing::info!(node = %node.id, store = %runtime.store.location().display(), "joined the nodes sharing the store");
    }
    let fixed = restart_only::Fixed::of(
        &runtime.project.config,
        &settings.overrides,
        url_from_env,
        listening.is_some(),
    );
    let mut server = Server {
        root,
        runtime,
        rt,
        spool,
        spool_health: spool::Health::new(conditions.clone()),
        worker,
        settings,
        wakes,
        stop,
        purger: purge::Purger::new(),
        last_purge: None,
        last_rescan: Instant::now(),
        renamed: arrivals,
        settle_at: None,
        reload_at: None,
        pumping: Arc::new(AtomicBool::new(false)),
        ingests: Vec::new(),
        listening,
        shared_project,
        metrics,
        recent,
        conditions,
        fixed,
        database_url: url_from_env,
        loaded_at,
        node,
        last_heartbeat: None,
        work_woken: false,
    };
    let result = if server.settings.once {
        server.once()
    } else {
        server.serve()
    };
    server.shutdown();
    result
}

fn signals(rt: &tokio::runtime::Runtime, wake: Sender<Wake>, stop: Arc<AtomicBool>) {
    use tokio::signal::unix::{SignalKind, signal};
    rt.spawn(async move {
        let (Ok(mut term), Ok(mut int), Ok(mut hup)) = (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
            signal(SignalKind::hangup()),
        ) else {
            tracing::error!("cannot install signal handlers");
            return;
        };
        loop {
            let which = tokio::select! {
                _ = term.recv() => "SIGTERM",
                _ = int.recv() => "SIGINT",
                _ = hup.recv() => {
                    let _ = wake.send(Wake::Reload);
                    continue;
                }
            };
            tracing::info!(signal = which, "stopping: no new work is claimed");
            stop.store(true, Ordering::SeqCst);
            let _ = wake.send(Wake::Stop);
        }
    });
}

impl Server {
    fn stopping(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }

    /// The daemon loop.
    fn serve(&mut self) -> anyhow::Result<()> {
        self.resume_spool();
        self.periodic(true);
        while !self.stopping() {
            // While a purge pass has work left, come back when its next step is due.
            let wait = [self.reload_at, self.settle_at]
                .into_iter()
                .flatten()
                .map(|at| at.saturating_duration_since(Instant::now()))
                .fold(TICK, Duration::min)
                .min(self.purger.next_step_in().unwrap_or(TICK));
            let mut spool = false;
            let mut emitted = Vec::new();
            match self.wakes.recv_timeout(wait) {
                Ok(w) => self.note(w, &mut spool, &mut emitted),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break,
            }
            // Take everything else that is waiting, so a burst of file events is one pass.
            while let Ok(w) = self.wakes.try_recv() {
                self.note(w, &mut spool, &mut emitted);
            }
            if std::mem::take(&mut self.work_woken) {
                // What another process left in the outbox for serve (an MCP post, a
                // rejection over MCP), then the queue.
                self.outbox_leftovers();
                self.worker.scan();
            }
            // Posted events first: their senders are waiting for the answer.
            self.decide_ingests();
            if self.stopping() {
                // Emitted events are already safe in the outbox; they are decided at the
                // next start, or below at shutdown.
                self.dispatch_emitted(emitted);
                break;
            }
            if self.reload_at.is_some_and(|at| Instant::now() >= at) {
                self.reload_at = None;
                self.reload();
            }
            self.dispatch_emitted(emitted);
            let rescan = self.last_rescan.elapsed() >= self.settings.rescan;
            if self.settle_at.is_some_and(|at| Instant::now() >= at) {
                self.settle_at = None;
                spool = true;
            }
            if spool || rescan {
                self.spool_pass();
            }
            self.periodic(rescan);
            self.purge_step();
        }
        Ok(())
    }

    fn note(&mut self, w: Wake, spool: &mut bool, emitted: &mut Vec<Event>) {
        match w {
            Wake::Spool => *spool = true,
            Wake::Manifests => self.reload_at = Some(Instant::now() + RELOAD_QUIET),
            Wake::Reload => {
                tracing::info!("SIGHUP: reloading the manifests");
                self.reload_at = Some(Instant::now());
            }
            Wake::Work => self.work_woken = true,
            Wake::Emitted(events) => emitted.extend(events),
            Wake::Ingest(request) => self.ingests.push(request),
            Wake::Stop => self.stop.store(true, Ordering::SeqCst),
        }
    }

    /// `--once`: everything due now, until nothing more comes of it.
    fn once(&mut self) -> anyhow::Result<()> {
        self.resume_spool();
        self.periodic(true);
        // Files written in place are waited for while they settle, but not for ever (a
        // writer that keeps one open): past this, they stay in the spool for the next run.
        let settle_limit =
            Instant::now() + self.settings.spool_settle * 10 + Duration::from_secs(5);
        loop {
            self.spool_pass();
            if let Some(at) = self.settle_at.take() {
                if at < settle_limit {
                    std::thread::sleep(at.saturating_duration_since(Instant::now()));
                    continue;
                }
                tracing::warn!("spool files still being written are left for the next run");
            }
            let worker = self.worker.clone();
            self.rt.block_on(worker.drain());
            let mut emitted = Vec::new();
            while let Ok(w) = self.wakes.try_recv() {
                if let Wake::Emitted(events) = w {
                    emitted.extend(events);
                }
            }
            let waiting = self.spool_health.problem().is_none()
                && self.spool.ready(1).is_ok_and(|r| !r.is_empty())
                && Instant::now() < settle_limit;
            if waiting && emitted.is_empty() {
                // Files still there that this pass did not take: do not spin on them.
                std::thread::sleep(Duration::from_millis(20));
            }
            let more = !emitted.is_empty() || waiting;
            self.dispatch_emitted(emitted);
            if !more {
                // Sinks and the watchdog for what this pass's runs produced.
                self.notify_timers();
                return match self.spool_health.problem() {
                    Some(problem) => Err(anyhow::anyhow!("{problem}")),
                    None => Ok(()),
                };
            }
        }
    }

    /// Work that runs on the clock: schedules every tick; approvals, the outbox and purges
    /// on the rescan and purge intervals.
    fn periodic(&mut self, rescan: bool) {
        node::beat(&*self.runtime.store, &self.node, &mut self.last_heartbeat);
        self.fire_schedules();
        self.fire_debounced();
        self.notify_timers();
        if rescan {
            self.last_rescan = Instant::now();
            self.adopt_spool_files();
            self.expire_approvals();
            self.outbox_leftovers();
            self.worker.scan();
        }
        let now = self.runtime.clock.now_ms();
        let purge_due = self.last_purge.is_none_or(|(at, clock)| {
            at.elapsed() >= PURGE_EVERY || now.saturating_sub(clock) >= PURGE_EVERY_CLOCK_MS
        });
        if purge_due || self.settings.once {
            self.last_purge = Some((Instant::now(), now));
            self.purger.start_pass();
            self.sweep_done();
            if self.settings.once {
                self.purge_pass();
            }
        }
    }

    /// A dispatcher that logs each decision and hands invocations to the worker.
    fn dispatcher(&self) -> Dispatcher<'_> {
        let options = Options {
            no_run: false,
            dry_run: false,
            explain: false,
            // A decision whose key has no room is not handed to the worker (which would try
            // it and give it back); the worker takes it once its key admits it.
            leave_blocked: true,
        };
        let mut d = Dispatcher::new(
            &self.runtime,
            options,
            &self.rt,
            1,
            Format::Log,
            Box::new(std::io::sink()),
            Box::new(|f| f()),
        );
        let worker = self.worker.clone();
        d.defer_runs(move |ids| worker.run(ids));
        d.leave_purge_to_caller();
        let (decided, committed) = (self.metrics.clone(), self.metrics.clone());
        let (recent, clock) = (self.recent.clone(), self.runtime.clock.clone());
        d.observe(crate::dispatcher::Observer {
            decided: Box::new(move |r| {
                decided.decided(r);
                recent.note(r, clock.now_ms());
            }),
            committed: Box::new(move |took| committed.committed(took)),
        });
        d
    }

    // --- the spool ----------------------------------------------------------------------

    /// Files a crash left in `processing/` are dispatched again first.
    /// On a shared spool: dispatches what nodes that are gone left claimed (a node's
    /// heartbeat silent for [`storage::NODE_GONE_MS`], or its entry gone).
    fn adopt_spool_files(&mut self) {
        if !self.runtime.store.shared() || !self.spool_sound() {
            return;
        }
        let nodes = match self.runtime.store.nodes() {
            Ok(nodes) => nodes,
            Err(e) => return outage::report_store(&e, "cannot list the nodes"),
        };
        let now = self.runtime.clock.now_ms();
        let alive: std::collections::HashSet<String> = nodes
            .iter()
            .filter(|n| now - n.last_seen < storage::NODE_GONE_MS)
            .map(|n| spool::node_dir(&n.id))
            .collect();
        let adopted = self.spool.adopt(&|dir| alive.contains(dir));
        self.dispatch_claimed(
            adopted,
            "taking over spool files a node that is gone left claimed",
        );
    }

    /// Dispatches files already claimed (left over, or adopted), saying so.
    fn dispatch_claimed(&mut self, files: Result<Vec<Claimed>, SpoolError>, found: &str) {
        match files {
            Ok(files) if !files.is_empty() => {
                tracing::info!(files = files.len(), "{found}");
                self.dispatch_files(files);
            }
            Ok(_) => {}
            Err(e) => self.spool_failed(&e),
        }
    }

    fn resume_spool(&mut self) {
        test_start_delay();
        // Heard from first: on a shared spool, a node silent for long may otherwise have its
        // claimed files adopted by another while it resumes them.
        node::beat(&*self.runtime.store, &self.node, &mut self.last_heartbeat);
        if !self.spool_sound() {
            return;
        }
        let leftovers = self.spool.leftovers();
        self.dispatch_claimed(
            leftovers,
            "resuming files left in processing/ by a stop or crash",
        );
    }

    /// Whether spool files may be taken now: the spool's directories are checked (at the
    /// backoff's pace while something is wrong with them). When a problem ends, the files it
    /// left claimed are dispatched (again: idempotency makes that harmless).
    fn spool_sound(&mut self) -> bool {
        let now = Instant::now();
        if !self.spool_health.due(now) {
            return false;
        }
        if let Err(e) = self.spool.check() {
            self.spool_failed(&e);
            return false;
        }
        if self.spool_health.sound(now) {
            let leftovers = self.spool.leftovers();
            self.dispatch_claimed(
                leftovers,
                "dispatching files left claimed while the spool could not be used",
            );
        }
        self.spool_health.problem().is_none()
    }

    /// Spool files are not taken until the spool is sound again; `pap status` and
    /// `/metrics` show why.
    fn spool_failed(&mut self, e: &SpoolError) {
        let since = format!("{:.0}", self.runtime.clock.now());
        self.spool_health.failed(e, Instant::now(), &since);
    }

    /// Claims and dispatches ready files until none is left (or serve is stopping).
    fn spool_pass(&mut self) {
        while !self.stopping() {
            if !self.spool_sound() {
                return;
            }
            let ready = match self.spool.ready(FILE_BATCH) {
                Ok(r) => r,
                Err(e) => return self.spool_failed(&e),
            };
            let mut claimed = Vec::new();
            for name in ready {
                let path = self.spool.dir.join(&name);
                let renamed = self.renamed.take(&path);
                match self
                    .spool
                    .readiness(&name, renamed, self.settings.spool_settle)
                {
                    spool::settle::Readiness::Now => {}
                    spool::settle::Readiness::After(wait) => {
                        if renamed {
                            self.renamed.add(path);
                        }
                        let at = Instant::now() + wait;
                        self.settle_at = Some(self.settle_at.map_or(at, |t| t.min(at)));
                        continue;
                    }
                }
                match self.spool.claim(&name) {
                    Ok(Some(c)) => claimed.push(c),
                    Ok(None) => {}
                    Err(e) => {
                        // What is claimed already is dispatched; the rest waits.
                        self.spool_failed(&e);
                        break;
                    }
                }
            }
            if claimed.is_empty() {
                return;
            }
            if !self.dispatch_files(claimed) {
                return;
            }
        }
    }

    /// Decides every event of the claimed files (one transaction per group), then files each
    /// away. False when the store failed: the files go back to the spool for a later pass.
    fn dispatch_files(&mut self, claimed: Vec<Claimed>) -> bool {
        let max_bytes = self.runtime.project.config.max_event_bytes;
        let mut files: Vec<(Claimed, usize, Vec<Problem>)> = Vec::new();
        let mut group: Vec<Pending> = Vec::new();
        let mut result = Ok(());
        {
            let mut d = self.dispatcher();
            for c in &claimed {
                let name = c.name().to_owned();
                let mut valid = 0;
                let mut problems = Vec::new();
                let consumed = std::sync::atomic::AtomicU64::new(0);
                // Not following a link, nor blocking on a FIFO that a writer renamed over the
                // claimed name between the scan and the claim.
                let read = self.spool.open_claimed(c).and_then(|file| {
                    input::read_from(
                        file,
                        name.as_str().into(),
                        max_bytes,
                        &consumed,
                        &mut |item: input::Item| {
                            // Named by the spool file, not its path in processing/.
                            let input = Location {
                                source: name.as_str().into(),
                                ..item.loc
                            };
                            match &item.event {
                                Ok(_) => valid += 1,
                                Err(bad) => problems.push(Problem {
                                    input: input.to_string(),
                                    id: bad.id.clone(),
                                    error: bad.reason.clone(),
                                }),
                            }
                            group.push(Pending {
                                input,
                                event: item.event,
                                emitted: false,
                                prepared: None,
                            });
                        },
                    )
                });
                if let Err(e) = &read
                    && e.kind() == std::io::ErrorKind::NotFound
                {
                    // A shared spool: another node adopted it while this one was silent.
                    tracing::info!(file = %name, "another node took the file over");
                    continue;
                }
                if let Err(e) = read {
                    problems.push(Problem {
                        input: name.clone(),
                        id: None,
                        error: format!("cannot read the file: {e}"),
                    });
                } else if let Some(grew) = self.spool.grew_after_read(c, consumed.into_inner()) {
                    problems.push(Problem {
                        input: name.clone(),
                        id: None,
                        error: grew,
                    });
                }
                self.metrics.received("spool", valid, problems.len());
                files.push((c.clone(), valid, problems));
                if group.len() >= GROUP_MAX && result.is_ok() {
                    result = d.process(std::mem::take(&mut group));
                }
            }
            if !group.is_empty() && result.is_ok() {
                result = d.process(group);
            }
            if result.is_ok() {
                result = d.finish(true);
            }
        }
        if let Err(e) = result {
            outage::report(&e, "cannot decide; the files go back to the spool");
            if outage::is_outage(&e) {
                // Nothing can be decided until the database is back: do not spin on the files.
                std::thread::sleep(outage::PAUSE);
            }
            for c in &claimed {
                let _ = self.spool.unclaim(c);
            }
            return false;
        }
        // Decided. Filed away only into the spool's own directories: one that turned into a
        // link meanwhile leaves the files claimed, dispatched again once it is sound.
        if let Err(e) = self.spool.check() {
            self.spool_failed(&e);
            return false;
        }
        let keep = !self.settings.done_retention.is_zero();
        let now = format!("{:.3}", self.runtime.clock.now());
        for (c, valid, problems) in files {
            let name = c.name();
            match self.spool.finish(&c, valid, &problems, keep, &now) {
                Ok(Some(_)) if problems.is_empty() => {
                    tracing::info!(file = %name, events = valid, "file dispatched")
                }
                Ok(Some(to)) => tracing::warn!(
                    file = %name,
                    events = valid,
                    problems = problems.len(),
                    moved_to = %to.display(),
                    "file had invalid events; its valid events were dispatched"
                ),
                // A shared spool: this node was silent long enough for another to adopt
                // the file, which dispatches it too (the events are duplicates there).
                Ok(None) => tracing::warn!(
                    file = %name,
                    "dispatched; another node took the file over meanwhile"
                ),
                Err(e) => {
                    self.spool_failed(&e);
                    return false;
                }
            }
        }
        true
    }

    // --- events from elsewhere ----------------------------------------------------------

    /// Decides the events HTTP requests posted, several requests per transaction (never
    /// splitting one), and answers each once its transaction is durable.
    fn decide_ingests(&mut self) {
        if self.ingests.is_empty() {
            return;
        }
        decider::test_delay();
        let requests = std::mem::take(&mut self.ingests);
        let mut batch = Vec::new();
        let mut events = 0;
        for request in requests {
            if events > 0 && events + request.events.len() > GROUP_MAX {
                self.decide_ingest_batch(std::mem::take(&mut batch));
                events = 0;
            }
            events += request.events.len();
            batch.push(request);
        }
        if !batch.is_empty() {
            self.decide_ingest_batch(batch);
        }
    }

    fn decide_ingest_batch(&mut self, batch: Vec<decider::IngestRequest>) {
        let mut counts = Vec::with_capacity(batch.len());
        let mut replies = Vec::with_capacity(batch.len());
        let mut events = Vec::new();
        for request in batch {
            let (pending, reply) = request.into_parts();
            counts.push(pending.len());
            events.extend(pending);
            replies.push(reply);
        }
        let decided = {
            let mut d = self.dispatcher();
            let decided = d.decide_queued(events);
            // Once committed, the answer stands: a failure of the log's printer after the
            // commit must not turn it into "nothing was recorded".
            let _ = d.finish(true);
            decided
        };
        match decided {
            Ok((reports, to_run)) => {
                let mut reports = reports.into_iter();
                for (reply, n) in replies.into_iter().zip(counts) {
                    reply.send(Ok(reports.by_ref().take(n).collect()));
                }
                // Only now do the runs start: no agent runs before its sender has the answer.
                if !to_run.is_empty() {
                    self.worker.run(to_run);
                }
            }
            Err(e) => {
                let why = crate::error_text::describe(&e);
                tracing::error!(error = %why, requests = replies.len(), "cannot decide posted events; nothing of them was recorded");
                for reply in replies {
                    reply.send(Err(why.clone()));
                }
            }
        }
    }

    fn dispatch_emitted(&mut self, events: Vec<Event>) {
        if events.is_empty() {
            return;
        }
        let mut d = self.dispatcher();
        let result = d.dispatch_emitted(events).and_then(|_| d.finish(true));
        if let Err(e) = result {
            outage::report(&e, "cannot decide emitted events (they stay in the outbox)");
        }
    }

    /// Events a process put in the outbox and died before deciding.
    fn outbox_leftovers(&mut self) {
        let entries = match self.runtime.store.read(|r| r.outbox_entries()) {
            Ok(e) => e,
            Err(e) => {
                outage::report_store(&e, "cannot read the outbox");
                return;
            }
        };
        let max_bytes = self.runtime.project.config.max_event_bytes;
        let mut events = Vec::new();
        for (id, entry) in entries {
            let orphan = entry
                .owner
                .as_ref()
                .is_none_or(|o| !o.is_current() && !o.is_alive());
            if !orphan {
                continue;
            }
            let len = serde_json::to_vec(&entry.event).map_or(0, |b| b.len());
            match event::validate(entry.event, len, max_bytes, Origin::Dispatcher) {
                Ok(e) => events.push(e),
                Err(bad) => {
                    tracing::error!(event = %id, reason = %bad.reason, "an outbox event is invalid")
                }
            }
        }
        if !events.is_empty() {
            tracing::info!(
                events = events.len(),
                "deciding events left in the outbox (by a process that stopped, or handed to serve)"
            );
            self.dispatch_emitted(events);
        }
    }

    /// Trailing debounces whose burst has gone quiet: one invocation each.
    fn fire_debounced(&mut self) {
        let mut d = self.dispatcher();
        let fired = d.fire_debounced().and_then(|f| d.finish(true).map(|_| f));
        match fired {
            Ok(fired) => {
                for f in fired {
                    match (&f.decided, &f.dropped) {
                        (Some(t), _) => tracing::info!(
                            trigger = %f.trigger,
                            window_key = %f.key,
                            event = %f.event_id,
                            outcome = t.outcome.as_str(),
                            invocation = t.invocation_id.as_deref().unwrap_or(""),
                            reason = %t.reason.as_ref().map(ToString::to_string).unwrap_or_default(),
                            "trailing debounce fired"
                        ),
                        (None, why) => tracing::warn!(
                            trigger = %f.trigger,
                            window_key = %f.key,
                            event = %f.event_id,
                            why = why.as_deref().unwrap_or(""),
                            "trailing debounce dropped"
                        ),
                    }
                }
            }
            Err(e) => outage::report(&e, "cannot fire debounced triggers"),
        }
    }

    fn expire_approvals(&mut self) {
        let mut d = self.dispatcher();
        if let Err(e) = d.expire_approvals().and_then(|_| d.finish(true)) {
            outage::report(&e, "cannot expire approvals");
        }
    }

    /// The ANP watchdog and sink deliveries. A pass runs in the background (a webhook may
    /// take its timeout), one at a time; `--once` waits for it.
    fn notify_timers(&mut self) {
        if self.pumping.swap(true, std::sync::atomic::Ordering::AcqRel) {
            return;
        }
        let (store, project) = (self.runtime.store.clone(), self.runtime.project.clone());
        let now = self.runtime.clock.now_ms();
        let flag = self.pumping.clone();
        let pass = async move {
            match crate::notify::pump::pump(store, project, now).await {
                Ok(p) if p.escalated > 0 => {
                    tracing::warn!(
                        escalated = p.escalated,
                        "watchdog escalated notifications past their deadline"
                    )
                }
                Ok(_) => {}
                Err(e) => outage::report(&e, "notification timers failed"),
            }
            flag.store(false, std::sync::atomic::Ordering::Release);
        };
        if self.settings.once {
            self.rt.block_on(pass);
        } else {
            self.rt.spawn(pass);
        }
    }

    // --- schedules ----------------------------------------------------------------------

    fn fire_schedules(&mut self) {
        let now = self.runtime.clock.now();
        let project = self.runtime.project.clone();
        let max_bytes = project.config.max_event_bytes;
        let mut events = Vec::new();
        let enabled: Vec<_> = project.schedules.iter().filter(|s| s.enabled).collect();
        if enabled.is_empty() {
            return;
        }
        // Looked at on a read, written only when something fires (or a schedule is new):
        // this runs every second, and each commit syncs the file. The write plans again from
        // what it reads itself: on a shared store another node may have fired meanwhile, and
        // its read there holds the schedule's lock to the commit, so each fire time is
        // fired by one node only.
        let lasts = self.runtime.store.read(|r| {
            enabled
                .iter()
                .map(|s| r.schedule_last(&s.id))
                .collect::<storage::Result<Vec<_>>>()
        });
        let lasts = match lasts {
            Ok(l) => l,
            Err(e) => {
                outage::report_store(&e, "cannot read the schedules' last fire times");
                return;
            }
        };
        let plan_from = |s: &crate::manifest::compiled::Schedule, last: Option<i64>| {
            last.map(|last| {
                let last = jiff::Timestamp::from_millisecond(last).unwrap_or(now);
                schedule::plan(s, last, now)
            })
        };
        let idle = |plan: &Option<schedule::Plan>| {
            plan.as_ref()
                .is_some_and(|p| p.fire.is_empty() && p.skipped == 0)
        };
        for (s, last) in enabled.into_iter().zip(lasts) {
            if idle(&plan_from(s, last)) {
                continue;
            }
            let result = self.runtime.store.write(|tx| {
                let plan = plan_from(s, tx.schedule_last(&s.id)?);
                if idle(&plan) {
                    return Ok((Vec::new(), 0));
                }
                let Some(plan) = plan else {
                    // First sight: fires count from now on, never from the past.
                    tx.set_schedule_last(&s.id, now.as_millisecond())?;
                    return Ok((Vec::new(), 0));
                };
                let owner = Runner::current(now.as_millisecond());
                let mut fired = Vec::new();
                for at in &plan.fire {
                    let value = schedule::event(s, *at);
                    let len = serde_json::to_vec(&value).map_or(0, |b| b.len());
                    match event::validate(value, len, max_bytes, Origin::Outside) {
                        Ok(e) => {
                            // In the outbox with the new last-fire time, in one transaction:
                            // a crash after this commit still decides the fire, and never
                            // fires it again.
                            tx.outbox_put(&e.id, &e.value, Some(&owner))?;
                            fired.push(e);
                        }
                        Err(bad) => tracing::error!(schedule = %s.id, reason = %bad.reason, "schedule event is invalid"),
                    }
                }
                tx.set_schedule_last(&s.id, now.as_millisecond())?;
                Ok::<_, storage::Error>((fired, plan.skipped))
            });
            match result {
                Ok((fired, skipped)) => {
                    if skipped > 0 {
                        tracing::warn!(
                            schedule = %s.id,
                            skipped,
                            catch_up = s.catch_up,
                            "fires missed while serve was stopped were skipped"
                        );
                    }
                    for e in &fired {
                        tracing::info!(schedule = %s.id, event = %e.id, "schedule fired");
                        self.metrics.schedule_fired(&s.id);
                    }
                    events.extend(fired);
                }
                Err(e) => tracing::error!(schedule = %s.id, error = %e, "cannot fire the schedule"),
            }
        }
        self.dispatch_emitted(events);
    }

    // --- upkeep -------------------------------------------------------------------------

    /// What a purge step needs: the time, the ledger's cutoff, the debounce periods.
    fn purge_due<T>(&self, f: impl FnOnce(&purge::Due) -> T) -> T {
        let now = self.runtime.clock.now_ms();
        let before =
            |d: Duration| now.saturating_sub(i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
        let s = &self.settings;
        let project = &self.runtime.project;
        let quiet_of = |trigger: &str| {
            project
                .trigger(trigger)
                .and_then(|t| t.debounce.as_ref())
                .map(crate::stages::debounce::quiet_ms)
        };
        f(&purge::Due {
            now,
            cutoffs: purge::Cutoffs {
                ledger: before(s.ledger_retention),
                throttle: now.saturating_sub(crate::stages::throttle::longest_window_ms(project)),
                invocations: before(s.invocation_retention),
                notifications: before(s.notification_retention),
                inbox: before(s.inbox_retention),
                audit: before(s.audit_retention),
            },
            quiet_of: &quiet_of,
        })
    }

    /// One step of the purge pass, if one is due (see `purge`).
    fn purge_step(&mut self) {
        if self.purger.next_step_in() != Some(Duration::ZERO) || self.stopping() {
            return;
        }
        let store = self.runtime.store.clone();
        let mut purger = std::mem::take(&mut self.purger);
        let stepped = self.purge_due(|due| purger.step(&*store, due));
        self.purger = purger;
        match stepped {
            Ok(Some(step)) => {
                self.metrics
                    .purge_stepped(step.kind.name(), step.purged.removed, step.took)
            }
            Ok(None) => {}
            Err(e) => outage::report_store(&e, "cannot purge expired state"),
        }
    }

    /// The whole purge pass at once (`--once`: no decisions wait meanwhile).
    fn purge_pass(&mut self) {
        let store = self.runtime.store.clone();
        let mut purger = std::mem::take(&mut self.purger);
        if let Err(e) = self.purge_due(|due| purger.finish_pass(&*store, due)) {
            outage::report_store(&e, "cannot purge expired state");
        }
        self.purger = purger;
    }

    /// Processed spool files past `done_retention`.
    fn sweep_done(&mut self) {
        if !self.settings.done_retention.is_zero() && self.spool_sound() {
            match self.spool.sweep_done(self.settings.done_retention) {
                Ok(0) => {}
                Ok(n) => tracing::info!(files = n, "removed processed files past their retention"),
                Err(e) => self.spool_failed(&e),
            }
        }
    }

    fn shutdown(&mut self) {
        if let Some(listening) = self.listening.take() {
            // Requests that got in before the stop are decided and answered; the listener
            // then stops accepting and lets answers in flight go out.
            let mut emitted = Vec::new();
            let mut spool = false;
            while let Ok(w) = self.wakes.try_recv() {
                self.note(w, &mut spool, &mut emitted);
            }
            self.decide_ingests();
            self.dispatch_emitted(emitted);
            self.rt.block_on(listening.shutdown(Duration::from_secs(5)));
        }
        let worker = self.worker.clone();
        let grace = self.settings.grace;
        let requeued = self.rt.block_on(worker.stop(grace));
        // Whatever finished during the grace period emitted events: decide them now.
        let mut emitted = Vec::new();
        while let Ok(w) = self.wakes.try_recv() {
            if let Wake::Emitted(events) = w {
                emitted.extend(events);
            }
        }
        self.dispatch_emitted(emitted);
        if let Err(e) = self.runtime.store.node_stopped(&self.node.id) {
            outage::report_store(&e, "cannot take this node off the list of nodes");
        }
        tracing::info!(requeued, "pap serve stopped");
    }
}

/// Tests only (`PAP_TEST_SPOOL_START_DELAY_MS`): a pause between opening the spool and this
/// node's first heartbeat, the moment another node on a shared spool may take it for gone.
fn test_start_delay() {
    #[cfg(feature = "test-clock")]
    if let Some(ms) = std::env::var("PAP_TEST_SPOOL_START_DELAY_MS")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
    {
        std::thread::sleep(Duration::from_millis(ms));
    }
}
