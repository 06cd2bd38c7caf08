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
mod health;
pub mod http;
mod intake;
pub mod lock;
pub mod log;
pub mod metrics;
pub mod metrics_format;
mod node;
mod outage;
mod process_metrics;
mod purge;
pub mod recent;
mod reload;
mod restart_only;
mod schedules;
mod settings;
mod signals;
mod spool;
#[cfg(test)]
mod test_server;
mod upkeep;
mod watch;
mod work;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use anyhow::Context;

use crate::agent::Runtime;
use crate::clock::Clock;
use crate::dispatcher::{Dispatcher, Format};
use crate::event::Event;
use crate::manifest::Project;
use crate::pipeline::Options;
use crate::storage;
pub use settings::{Overrides, Settings};
use spool::Spool;
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
        .write(|tx| crate::stages::concurrency::relimit_waiting(&project, tx))
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
    // Traces, when an endpoint is configured: installed before anything makes a span.
    let traces = crate::telemetry::install(&project.config.traces, rt.handle());
    let root = project.root.clone();
    let runtime = Runtime {
        project: Arc::new(project),
        store,
        clock,
        queue_retries: true,
        environment: crate::agent::Environment::Serve {
            pid: std::process::id(),
        },
    };
    relimit_waiting(&runtime);
    let (wake_tx, wakes) = std::sync::mpsc::channel();
    let stop = Arc::new(AtomicBool::new(false));
    let conditions = Arc::new(conditions::Conditions::default());
    let metrics = Arc::new(metrics::Metrics::new(conditions.clone()));
    metrics.reloaded(true, runtime.clock.now_ms());
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
    // The project as reloads replace it, for the listener and the control socket.
    let shared = Arc::new(std::sync::RwLock::new(runtime.project.clone()));
    let shared_project = Some(shared.clone());
    if let Some(address) = &settings.listen {
        let project = &runtime.project;
        let shared = shared.clone();
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
        signals::signals(&rt, wake_tx.clone(), stop.clone());
        let handlers = control::serve_handlers(control::ServeView {
            started_at,
            listen: listening.as_ref().map(http::Listening::url),
            conditions: conditions.clone(),
            project: shared.clone(),
            wake: wake_tx.clone(),
        });
        match control::listen(state_dir, handlers) {
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
    let mut server = Server::assemble(Parts {
        root,
        runtime,
        rt,
        spool,
        worker,
        settings,
        wakes,
        stop,
        arrivals,
        listening,
        shared_project,
        metrics,
        recent,
        conditions,
        fixed,
        database_url: url_from_env,
        loaded_at,
        node,
    });
    let result = if server.settings.once {
        server.once()
    } else {
        server.serve()
    };
    server.shutdown();
    // The runtime the exporter posts on is still up (the server owns it until it is dropped).
    drop(traces);
    result
}

/// What `run` opened and started, for [`Server::assemble`].
struct Parts {
    root: PathBuf,
    runtime: Runtime,
    rt: tokio::runtime::Runtime,
    spool: Spool,
    worker: Worker,
    settings: Settings,
    wakes: Receiver<Wake>,
    stop: Arc<AtomicBool>,
    arrivals: watch::Arrivals,
    listening: Option<http::Listening>,
    shared_project: Option<http::SharedProject>,
    metrics: Arc<metrics::Metrics>,
    recent: Arc<recent::RecentDecisions>,
    conditions: Arc<conditions::Conditions>,
    fixed: restart_only::Fixed,
    database_url: bool,
    loaded_at: String,
    node: storage::Node,
}

impl Server {
    /// A server at its start: what `run` opened, and nothing done yet (no purge, no rescan,
    /// no reload pending). The unit tests of each pass assemble one the same way.
    fn assemble(p: Parts) -> Server {
        Server {
            root: p.root,
            runtime: p.runtime,
            rt: p.rt,
            spool: p.spool,
            spool_health: spool::Health::new(p.conditions.clone()),
            worker: p.worker,
            settings: p.settings,
            wakes: p.wakes,
            stop: p.stop,
            purger: purge::Purger::new(),
            last_purge: None,
            last_rescan: Instant::now(),
            renamed: p.arrivals,
            settle_at: None,
            reload_at: None,
            pumping: Arc::new(AtomicBool::new(false)),
            ingests: Vec::new(),
            listening: p.listening,
            shared_project: p.shared_project,
            metrics: p.metrics,
            recent: p.recent,
            conditions: p.conditions,
            fixed: p.fixed,
            database_url: p.database_url,
            loaded_at: p.loaded_at,
            node: p.node,
            last_heartbeat: None,
            work_woken: false,
        }
    }

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
            Format::Log(match self.runtime.project.config.serve.log_decisions {
                true => crate::dispatcher::Detail::Info,
                false => crate::dispatcher::Detail::Debug,
            }),
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

    // --- events from elsewhere ----------------------------------------------------------

    // --- schedules ----------------------------------------------------------------------

    // --- upkeep -------------------------------------------------------------------------

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
