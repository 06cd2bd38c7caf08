//! Serve's Prometheus metrics (prometheus-client, the Prometheus project's Rust client),
//! served at `GET /metrics` in OpenMetrics or the Prometheus text format, as the scraper asks
//! (see `metrics_format`).
//!
//! Counters and histograms are kept as things happen (events received, decisions, finished
//! runs, commits, schedule fires). What is a state rather than an event (the queue by status,
//! approvals waiting, notifications by status, failing sink deliveries) is read from the
//! store at each scrape, so it is right also for what other processes (`pap dispatch`,
//! `pap approve`) changed. The names and labels are listed in docs/src/reference/metrics.md.
//!
//! Every family is in the scrape from the start, with the label values the project
//! knows at zero (its triggers, agents, routes, sinks, schedules, every status): a dashboard
//! and an `absent()` alert see a series before anything happened. Beside pap's own families
//! are the standard `process_*` ones, the build, the state's bytes, and the last reload.

use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::metrics::info::Info;
use prometheus_client::registry::Registry;

use super::conditions::{Condition, Conditions};
use crate::pipeline::report::EventReport;
use crate::stages::Outcome;
use crate::storage::{self, Storage};

type Labels = Vec<(&'static str, String)>;

/// The kinds of `pap_llm_tokens`: `cached_input` and `cache_write_input` are parts of `input`.
const TOKEN_KINDS: [&str; 4] = ["input", "cached_input", "cache_write_input", "output"];

fn token_labels(agent: &str, model: &str, kind: &str) -> Labels {
    vec![
        ("agent", agent.to_owned()),
        ("model", model.to_owned()),
        ("kind", kind.to_owned()),
    ]
}

fn cost_labels(agent: &str, model: &str, currency: &str) -> Labels {
    vec![
        ("agent", agent.to_owned()),
        ("model", model.to_owned()),
        ("currency", currency.to_owned()),
    ]
}

fn duration_buckets() -> Histogram {
    // 1 ms to about 65 s.
    Histogram::new(exponential_buckets(0.001, 2.0, 17))
}

pub struct Metrics {
    registry: Registry,
    events_received: Family<Labels, Counter>,
    decisions: Family<Labels, Counter>,
    cancellations: Family<Labels, Counter>,
    invocations: Family<Labels, Counter>,
    invocation_seconds: Family<Labels, Histogram, fn() -> Histogram>,
    commit_seconds: Histogram,
    purged: Family<Labels, Counter>,
    purge_step_seconds: Histogram,
    schedule_fires: Family<Labels, Counter>,
    llm_tokens: Family<Labels, Counter>,
    llm_cost: Family<Labels, Counter<f64, AtomicU64>>,
    queue: Family<Labels, Gauge>,
    approvals_waiting: Gauge,
    approval_oldest_seconds: Gauge<f64, AtomicU64>,
    notifications: Family<Labels, Gauge>,
    sink_failures: Family<Labels, Gauge>,
    serve_conditions: Family<Labels, Gauge>,
    reload_success: Gauge,
    reload_last_seconds: Gauge<f64, AtomicU64>,
    state_bytes: Gauge,
    state_free_bytes: Gauge,
    cpu_seconds: Counter<f64, AtomicU64>,
    /// The CPU seconds the counter holds, to add what was used since.
    cpu_counted: std::sync::Mutex<f64>,
    resident_bytes: Gauge,
    open_fds: Gauge,
    start_time_seconds: Gauge<f64, AtomicU64>,
    agent_failing: Family<Labels, Gauge>,
    degraded: Gauge,
    /// Spans started, dropped at a full export queue, and batches not exported: counted by
    /// the telemetry modules, added here at each scrape (`traced` holds what was added).
    trace_spans: Counter,
    trace_dropped: Counter,
    trace_failed: Counter,
    traced: std::sync::Mutex<[u64; 3]>,
    conditions: Arc<Conditions>,
    /// Whether serve is degraded, for `/readyz` and the scrape alike.
    pub(crate) health: super::health::ServeHealth,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new(Default::default())
    }
}

impl Metrics {
    /// `conditions` are serve's, shown at each scrape.
    pub fn new(conditions: Arc<Conditions>) -> Metrics {
        let mut root = Registry::default();
        let registry = root.sub_registry_with_prefix("pap");
        let m = Metrics {
            registry: Registry::default(),
            events_received: Family::default(),
            decisions: Family::default(),
            cancellations: Family::default(),
            invocations: Family::default(),
            invocation_seconds: Family::new_with_constructor(duration_buckets),
            commit_seconds: duration_buckets(),
            purged: Family::default(),
            // 0.1 ms to about 3 s: a step aims at 2 ms.
            purge_step_seconds: Histogram::new(exponential_buckets(0.0001, 2.0, 15)),
            schedule_fires: Family::default(),
            llm_tokens: Family::default(),
            llm_cost: Family::default(),
            queue: Family::default(),
            approvals_waiting: Gauge::default(),
            approval_oldest_seconds: Gauge::default(),
            notifications: Family::default(),
            sink_failures: Family::default(),
            serve_conditions: Family::default(),
            reload_success: Gauge::default(),
            reload_last_seconds: Gauge::default(),
            state_bytes: Gauge::default(),
            state_free_bytes: Gauge::default(),
            cpu_seconds: Counter::default(),
            cpu_counted: std::sync::Mutex::new(0.0),
            resident_bytes: Gauge::default(),
            open_fds: Gauge::default(),
            start_time_seconds: Gauge::default(),
            agent_failing: Family::default(),
            degraded: Gauge::default(),
            trace_spans: Counter::default(),
            trace_dropped: Counter::default(),
            trace_failed: Counter::default(),
            traced: std::sync::Mutex::new([0; 3]),
            health: super::health::ServeHealth::new(conditions.clone()),
            conditions,
        };
        // Loaded at start (serve says when: `reloaded`).
        m.reload_success.set(1);
        registry.register(
            "build",
            "The pap build serving: its version",
            Info::new(vec![("version", env!("CARGO_PKG_VERSION").to_owned())]),
        );
        registry.register(
            "reload_success",
            "1 when serve's last load of the manifests (at start or a reload) was applied, 0 when it was refused",
            m.reload_success.clone(),
        );
        registry.register(
            "reload_last_timestamp_seconds",
            "When serve last loaded the manifests (at start or a reload), applied or refused",
            m.reload_last_seconds.clone(),
        );
        registry.register(
            "state_bytes",
            "Bytes the files of the state directory take (the redb store and its companions)",
            m.state_bytes.clone(),
        );
        registry.register(
            "state_filesystem_free_bytes",
            "Bytes free to pap on the state directory's file system",
            m.state_free_bytes.clone(),
        );
        registry.register(
            "events_received",
            "Events received, by route (an HTTP route, or spool) and validity",
            m.events_received.clone(),
        );
        registry.register(
            "decisions",
            "Decisions made, by trigger and outcome",
            m.decisions.clone(),
        );
        registry.register(
            "cancellations",
            "Work a cancel_on event ended, by trigger and what it was (queued, awaiting_approval, running, debounce, batch)",
            m.cancellations.clone(),
        );
        registry.register(
            "invocations_finished",
            "Invocation runs that ended, by agent and result (succeeded, failed, cancelled, retry_queued)",
            m.invocations.clone(),
        );
        registry.register(
            "invocation_duration_seconds",
            "How long a run took, by agent (all its attempts in this run)",
            m.invocation_seconds.clone(),
        );
        registry.register(
            "commit_duration_seconds",
            "How long one transaction of decisions took to commit durably",
            m.commit_seconds.clone(),
        );
        registry.register(
            "purged",
            "Expired records removed by the purge, by kind (claims, ledger rows, debounce states, …)",
            m.purged.clone(),
        );
        registry.register(
            "purge_step_duration_seconds",
            "How long one purge step (one transaction, which a decision may wait behind) took",
            m.purge_step_seconds.clone(),
        );
        registry.register(
            "schedule_fires",
            "Schedule fires, by schedule",
            m.schedule_fires.clone(),
        );
        registry.register(
            "llm_tokens",
            "Model tokens LLM runs used, by agent, model and kind (input, of which cached_input, and output)",
            m.llm_tokens.clone(),
        );
        registry.register(
            "llm_cost",
            "What LLM runs cost at pap.yaml's prices, by agent, model and currency (runs of a model without a price count nothing)",
            m.llm_cost.clone(),
        );
        registry.register(
            "queue_depth",
            "Invocations not yet ended, by status (read from the store at the scrape)",
            m.queue.clone(),
        );
        registry.register(
            "approvals_waiting",
            "Invocations awaiting approval",
            m.approvals_waiting.clone(),
        );
        registry.register(
            "approval_oldest_age_seconds",
            "How long the oldest approval request has waited (0 when none waits)",
            m.approval_oldest_seconds.clone(),
        );
        registry.register(
            "notifications",
            "Notifications kept in the ledger, by ANP status",
            m.notifications.clone(),
        );
        registry.register(
            "sink_failures",
            "Sink deliveries failed or being retried, by sink",
            m.sink_failures.clone(),
        );
        registry.register(
            "agent_failing",
            "1 while the agent's recent runs all failed (its newest 3 that ended in the last 24h), else 0",
            m.agent_failing.clone(),
        );
        registry.register(
            "degraded",
            "1 while pap is degraded: an agent failing, a sink failing, a refused reload or a spool not taken",
            m.degraded.clone(),
        );
        registry.register(
            "trace_spans",
            "Spans this process started for traces (0 while traces are off: none is made)",
            m.trace_spans.clone(),
        );
        registry.register(
            "trace_spans_dropped",
            "Spans dropped because the export queue was full (traces.max_queue)",
            m.trace_dropped.clone(),
        );
        registry.register(
            "trace_exports_failed",
            "Batches of spans the collector did not take",
            m.trace_failed.clone(),
        );
        registry.register(
            "serve_condition",
            "1 while serve has this condition (spool not taken, reload refused, restart needed; pap status says why), else 0",
            m.serve_conditions.clone(),
        );
        root.register(
            "process_cpu_seconds",
            "User and system CPU time spent, in seconds",
            m.cpu_seconds.clone(),
        );
        root.register(
            "process_resident_memory_bytes",
            "Resident memory size in bytes",
            m.resident_bytes.clone(),
        );
        root.register(
            "process_open_fds",
            "Number of open file descriptors",
            m.open_fds.clone(),
        );
        root.register(
            "process_start_time_seconds",
            "Start time of the process since the Unix epoch, in seconds",
            m.start_time_seconds.clone(),
        );
        Metrics {
            registry: root,
            ..m
        }
    }

    /// A load of the manifests (at start, or a reload) at `now` (ms): applied or refused.
    pub fn reloaded(&self, applied: bool, now: i64) {
        self.reload_success.set(i64::from(applied));
        self.reload_last_seconds.set(now as f64 / 1000.0);
    }

    /// Every label value `project` knows, at zero where nothing was counted yet.
    fn prime(&self, project: &crate::manifest::Project) {
        let mut routes = vec!["/v1/events".to_owned(), "spool".to_owned()];
        routes.extend(project.config.adapters.iter().map(|a| a.path.clone()));
        for route in routes {
            for valid in ["true", "false"] {
                let _ = self
                    .events_received
                    .get_or_create(&vec![("route", route.clone()), ("valid", valid.into())]);
            }
        }
        for t in &project.triggers {
            for outcome in Outcome::DECIDED {
                let _ = self.decisions.get_or_create(&vec![
                    ("trigger", t.id.clone()),
                    ("outcome", outcome.as_str().into()),
                ]);
            }
            if t.cancel_on.is_some() {
                for was in CANCELLED_WORK {
                    let _ = self
                        .cancellations
                        .get_or_create(&vec![("trigger", t.id.clone()), ("was", was.into())]);
                }
            }
        }
        for a in &project.agents {
            for result in ["succeeded", "failed", "cancelled", "retry_queued"] {
                let _ = self
                    .invocations
                    .get_or_create(&vec![("agent", a.id.clone()), ("result", result.into())]);
            }
            let _ = self
                .invocation_seconds
                .get_or_create(&vec![("agent", a.id.clone())]);
            let model = match &a.model {
                crate::manifest::compiled::ModelSpec::Anthropic(m)
                | crate::manifest::compiled::ModelSpec::Openai(m) => &m.model_id,
                crate::manifest::compiled::ModelSpec::Command { .. } => continue,
            };
            for kind in TOKEN_KINDS {
                let _ = self
                    .llm_tokens
                    .get_or_create(&token_labels(&a.id, model, kind));
            }
            let _ = self.llm_cost.get_or_create(&cost_labels(
                &a.id,
                model,
                &project.config.prices.currency,
            ));
        }
        for s in &project.schedules {
            let _ = self
                .schedule_fires
                .get_or_create(&vec![("schedule", s.id.clone())]);
        }
        for kind in super::purge::Kind::ALL {
            let _ = self
                .purged
                .get_or_create(&vec![("kind", kind.name().to_owned())]);
        }
    }

    /// The process and the state directory (`None` for a store with none).
    fn read_process(&self, state_dir: Option<&std::path::Path>) {
        let p = super::process_metrics::read_process();
        if let Some(cpu) = p.cpu_seconds {
            let mut counted = self.cpu_counted.lock().unwrap_or_else(|e| e.into_inner());
            if cpu > *counted {
                self.cpu_seconds.inc_by(cpu - *counted);
                *counted = cpu;
            }
        }
        let to_i64 = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
        if let Some(b) = p.resident_bytes {
            self.resident_bytes.set(to_i64(b));
        }
        if let Some(n) = p.open_fds {
            self.open_fds.set(to_i64(n));
        }
        if let Some(t) = p.start_time_seconds {
            self.start_time_seconds.set(t);
        }
        if let Some(dir) = state_dir {
            let (used, free) = super::process_metrics::state_bytes(dir);
            self.state_bytes.set(used.map_or(0, to_i64));
            self.state_free_bytes.set(free.map_or(0, to_i64));
        }
    }

    pub fn received(&self, route: &str, valid: usize, invalid: usize) {
        for (flag, n) in [("true", valid), ("false", invalid)] {
            if n > 0 {
                self.events_received
                    .get_or_create(&vec![("route", route.to_owned()), ("valid", flag.into())])
                    .inc_by(n as u64);
            }
        }
    }

    /// One event's decisions.
    pub fn decided(&self, report: &EventReport) {
        for t in &report.triggers {
            if t.outcome == Outcome::Disabled {
                continue;
            }
            self.decision(&t.trigger, t.outcome);
            // A batch this event filled: its invocation's own decision.
            for h in &t.handed_over {
                self.decision(&h.trigger, h.outcome);
            }
        }
        for c in report.cancelled.iter().filter(|c| c.cancelled) {
            self.cancellations
                .get_or_create(&vec![
                    ("trigger", c.trigger.to_string()),
                    ("was", c.was.to_owned()),
                ])
                .inc();
        }
    }

    /// A debounce's or a batch's fire: the decision of the invocation it made.
    pub fn fired(&self, trigger: &str, outcome: Outcome) {
        self.decision(trigger, outcome);
    }

    fn decision(&self, trigger: &str, outcome: Outcome) {
        self.decisions
            .get_or_create(&vec![
                ("trigger", trigger.to_owned()),
                ("outcome", outcome.as_str().into()),
            ])
            .inc();
    }

    pub fn committed(&self, took: Duration) {
        self.commit_seconds.observe(took.as_secs_f64());
    }

    /// One purge step: `removed` records of `kind` in `took`.
    pub fn purge_stepped(&self, kind: &'static str, removed: usize, took: Duration) {
        self.purged
            .get_or_create(&vec![("kind", kind.to_owned())])
            .inc_by(removed as u64);
        self.purge_step_seconds.observe(took.as_secs_f64());
    }

    pub fn run_ended(&self, agent: &str, result: &'static str, took: Duration) {
        self.invocations
            .get_or_create(&vec![
                ("agent", agent.to_owned()),
                ("result", result.into()),
            ])
            .inc();
        self.invocation_seconds
            .get_or_create(&vec![("agent", agent.to_owned())])
            .observe(took.as_secs_f64());
    }

    /// Adds what the telemetry modules counted since the last scrape.
    fn count_traces(&self) {
        let now = [
            pap_engine::telemetry::spans_started(),
            crate::telemetry::spans_dropped(),
            crate::telemetry::failed_exports(),
        ];
        let mut seen = self.traced.lock().unwrap_or_else(|e| e.into_inner());
        for ((counter, now), seen) in [&self.trace_spans, &self.trace_dropped, &self.trace_failed]
            .into_iter()
            .zip(now)
            .zip(seen.iter_mut())
        {
            if now > *seen {
                counter.inc_by(now - *seen);
                *seen = now;
            }
        }
    }

    /// What one LLM attempt of `agent` used and cost.
    pub fn spent(&self, agent: &str, spend: &crate::agent::Spend) {
        for (kind, n) in [
            ("input", spend.input_tokens),
            ("cached_input", spend.cached_input_tokens),
            ("cache_write_input", spend.cache_write_input_tokens),
            ("output", spend.output_tokens),
        ] {
            self.llm_tokens
                .get_or_create(&token_labels(agent, &spend.model, kind))
                .inc_by(n);
        }
        if let Some(cost) = &spend.cost {
            self.llm_cost
                .get_or_create(&cost_labels(agent, &spend.model, &cost.currency))
                .inc_by(cost.micros as f64 / 1e6);
        }
    }

    pub fn schedule_fired(&self, schedule: &str) {
        self.schedule_fires
            .get_or_create(&vec![("schedule", schedule.to_owned())])
            .inc();
    }

    /// Reads the states from the store (and the process) and encodes everything, every
    /// label value `project` knows present.
    pub fn scrape(
        &self,
        store: &dyn Storage,
        project: &crate::manifest::Project,
        now: i64,
    ) -> storage::Result<String> {
        self.prime(project);
        self.read_process(store.dir().as_deref());
        // The queue's counts come from the store's indexes (no invocation is read).
        let counts =
            store.read(|r| r.queue_counts(now, now - crate::status_report::OVERDUE_AFTER_MS))?;
        let oldest = counts.oldest_waiting;
        let queue = crate::status_report::queue_map(&counts);
        // Notifications by status as of now (a due escalation counts as escalated, as every
        // reader shows it) and failing deliveries by sink: kept counts, and the due
        // watchdogs from the timer index, never every notification.
        let told = store.read(|r| {
            let mut counts = r.notification_counts()?;
            let due = crate::notify::due::escalations_due(
                r,
                now,
                crate::notify::due::SCAN_JOBS,
                &|_| true,
            )?;
            counts.move_escalated(due.len() as u64);
            Ok(counts)
        })?;
        let to_i64 = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
        // Every status and every configured sink, at zero unless counted.
        let mut notifications: std::collections::BTreeMap<String, i64> = NOTIFY_STATUSES
            .iter()
            .map(|s| ((*s).to_owned(), 0))
            .collect();
        notifications.extend(told.by_status.into_iter().map(|(k, v)| (k, to_i64(v))));
        let mut sinks: std::collections::BTreeMap<String, i64> = project
            .config
            .notify
            .sinks
            .iter()
            .map(|s| (s.name.clone(), 0))
            .collect();
        sinks.extend(
            told.failing_by_sink
                .into_iter()
                .map(|(k, v)| (k, to_i64(v))),
        );
        self.approvals_waiting
            .set(i64::try_from(counts.waiting()).unwrap_or(i64::MAX));
        set_all(
            &self.queue,
            "status",
            QUEUE_STATUSES.iter().map(|s| {
                let n = queue.get(s).copied().unwrap_or(0);
                ((*s).to_owned(), i64::try_from(n).unwrap_or(i64::MAX))
            }),
        );
        self.approval_oldest_seconds
            .set(oldest.map_or(0.0, |at| (now - at).max(0) as f64 / 1000.0));
        set_all(&self.notifications, "status", notifications.into_iter());
        set_all(&self.sink_failures, "sink", sinks.into_iter());
        self.count_traces();
        let health = self.health.snapshot(store, project, now)?;
        set_all(
            &self.agent_failing,
            "agent",
            project.agents.iter().map(|a| {
                let failing = health.agents_failing.iter().any(|f| f.agent == a.id);
                (a.id.clone(), i64::from(failing))
            }),
        );
        self.degraded.set(i64::from(health.degraded()));
        for condition in Condition::ALL {
            self.serve_conditions
                .get_or_create(&vec![("condition", condition.as_str().to_owned())])
                .set(i64::from(self.conditions.holds(condition)));
        }
        let mut text = String::new();
        encode(&mut text, &self.registry).expect("writing to a String");
        Ok(text)
    }
}

/// The statuses of an invocation not yet ended, each always in `pap_queue_depth`.
const QUEUE_STATUSES: [&str; 4] = ["awaiting_approval", "expired", "queued", "running"];

/// Every ANP status, each always in `pap_notifications`.
/// What a `cancel_on` event may end (`Cancellation::was`).
const CANCELLED_WORK: [&str; 5] = [
    "queued",
    "awaiting_approval",
    "running",
    "debounce",
    "batch",
];

const NOTIFY_STATUSES: [&str; 6] = [
    "pending",
    "dispatched",
    "locked",
    "delivered",
    "escalated",
    "failed",
];

/// Replaces a gauge family's values: a label that is gone is dropped, not left stale.
fn set_all(
    family: &Family<Labels, Gauge>,
    label: &'static str,
    values: impl Iterator<Item = (String, i64)>,
) {
    family.clear();
    for (k, v) in values {
        family.get_or_create(&vec![(label, k)]).set(v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_and_histograms_are_encoded_with_their_labels() {
        let m = Metrics::default();
        m.received("/v1/events", 2, 1);
        m.run_ended("quick", "succeeded", Duration::from_millis(30));
        m.committed(Duration::from_millis(2));
        m.schedule_fired("nightly");
        let mut text = String::new();
        encode(&mut text, &m.registry).unwrap();
        assert!(
            text.contains(r#"pap_events_received_total{route="/v1/events",valid="true"} 2"#),
            "{text}"
        );
        assert!(text.contains(r#"pap_events_received_total{route="/v1/events",valid="false"} 1"#));
        assert!(
            text.contains(r#"pap_invocations_finished_total{agent="quick",result="succeeded"} 1"#)
        );
        assert!(text.contains(r#"pap_invocation_duration_seconds_count{agent="quick"} 1"#));
        assert!(text.contains("pap_commit_duration_seconds_count 1"));
        assert!(text.contains(r#"pap_schedule_fires_total{schedule="nightly"} 1"#));
        assert!(text.ends_with("# EOF\n"));
    }
}
