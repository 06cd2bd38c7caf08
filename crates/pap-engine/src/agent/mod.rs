//! Running invocations: attempts, retries with backoff, the outcome event and follow-ups.
//!
//! The store is written around each attempt, never during one: the file is free for other
//! processes while an agent runs. An attempt cut short by pap's own crash leaves the
//! invocation `running`; it runs again later under the same attempt number, once the
//! previous run's process group (see [`groups`]) is gone, and its history shows both runs.

pub mod answer;
pub mod approvals;
pub mod groups;
mod llm;
pub mod mcp;
pub mod output;
mod renew;
pub mod scratch;
pub use pap_supervise as supervise;
pub mod tokens;

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use crate::clock::Clock;
use crate::command;
use crate::domain::AuditEntry;
use crate::domain::audit::audited;
use crate::domain::lease::HOLD_MARGIN_MS;
use crate::domain::{Holding, Invocation, Lease, Runner, Status};
use crate::emit::{self, Ending, failure_events, put_outbox};
use crate::event::Event;
use crate::liveness::holding_now;
use crate::manifest::Project;
use crate::manifest::compiled::{Agent, ModelSpec, RetryPolicy};
use crate::manifest::compiled_notify::OutcomeKind;
use crate::notify;
use crate::storage::{self, Storage, WriteTx};
use crate::telemetry;

/// Without `limits.max_runtime_seconds`, an attempt may run this long.
pub(crate) const DEFAULT_MAX_RUNTIME: Duration = Duration::from_secs(300);

/// How long a recovery waits for a previous run's processes to go after SIGKILL.
const GROUP_GONE_WITHIN: Duration = Duration::from_secs(10);

/// What became of an invocation this process ran.
#[derive(Debug, Clone)]
pub struct RunResult {
    pub invocation_id: String,
    /// The agent that ran.
    pub agent: String,
    pub succeeded: bool,
    pub attempts: u32,
    /// Ids of every event it emitted (outcome event and follow-ups).
    pub emitted_ids: Vec<String>,
    /// The events themselves, to be dispatched next.
    pub emitted: Vec<Event>,
    pub error: Option<String>,
    /// A retry is queued for later (only when [`Runtime::queue_retries`]); not ended yet.
    pub retry_queued: bool,
    /// An operator cancelled it while this process ran or held it (`pap invocations
    /// cancel`): not a failure of the agent's.
    pub cancelled: bool,
    /// What the last attempt used of its model (LLM agents): the attempt this run made when
    /// retries are queued, as serve queues them.
    pub spend: Option<Spend>,
}

/// Tokens and cost of one LLM attempt, for serve's counters.
#[derive(Debug, Clone, PartialEq)]
pub struct Spend {
    pub model: String,
    pub input_tokens: u64,
    pub cached_input_tokens: u64,
    pub cache_write_input_tokens: u64,
    pub output_tokens: u64,
    pub cost: Option<crate::domain::money::Cost>,
}

#[derive(Clone)]
pub struct Runtime {
    pub project: Arc<Project>,
    pub store: Arc<dyn Storage>,
    pub clock: Clock,
    /// `pap serve`: a failed attempt with retries left goes back to the queue with its due
    /// time, instead of this task waiting out the backoff (which would hold a concurrency
    /// slot for as long as the backoff lasts). `pap dispatch` waits: it returns when done.
    pub queue_retries: bool,
    /// Whose environment runs take their variables from (a provider's key, `${NAME}`), as
    /// their errors name it: a key set in a person's shell but not in serve's is then plain.
    pub environment: Environment,
}

/// The process whose environment a run reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Environment {
    /// `pap serve`, with its pid.
    Serve { pid: u32 },
    /// The command that runs it (`pap dispatch`, `pap test`).
    ThisCommand,
}

impl std::fmt::Display for Environment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Environment::Serve { pid } => write!(f, "pap serve's environment (pid {pid})"),
            Environment::ThisCommand => f.write_str("this command's environment"),
        }
    }
}

/// Why [`Runtime::run`] did not run an invocation to its end.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// Not this process's to run: another live process holds it, or it is no longer
    /// runnable (it ended meanwhile). A worker that meets this simply moves on.
    #[error("{0}")]
    NotOurs(String),
    /// Not started: a concurrency key of it is full, or invocations decided before it wait
    /// for the slots, or its agent's token budget has no room. It stays queued, its lease
    /// given up, for whoever finds room first.
    #[error("{0}")]
    Waiting(Waiting),
    /// The store or the runtime failed.
    #[error(transparent)]
    Failed(anyhow::Error),
}

/// Why an attempt did not start, and what it waits for.
#[derive(Debug, Clone)]
pub struct Waiting {
    pub why: String,
    /// The concurrency key it waits for (its index name), or `budget:AGENT` for a token
    /// budget: every invocation waiting for the same one waits for the same thing.
    pub gate: String,
}

impl std::fmt::Display for Waiting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.why)
    }
}

impl From<storage::Error> for RunError {
    fn from(e: storage::Error) -> RunError {
        match e {
            storage::Error::NotOurs(why) => RunError::NotOurs(why),
            lost @ storage::Error::LeaseLost { .. } => RunError::NotOurs(lost.to_string()),
            other => RunError::Failed(other.into()),
        }
    }
}

impl From<anyhow::Error> for RunError {
    fn from(e: anyhow::Error) -> RunError {
        RunError::Failed(e)
    }
}

impl Runtime {
    /// Runs `id` to its end: every attempt it has left, with backoff between them.
    pub async fn run(&self, id: &str) -> Result<RunResult, RunError> {
        match self.run_attempts(id).await {
            Err(RunError::NotOurs(why)) => match self.cancelled(id).await {
                Some(inv) => {
                    // Its processes ended with this run: the slots it kept while stopping
                    // are free.
                    if inv.stopping_until.is_some() {
                        let id = id.to_owned();
                        self.write(move |tx| release_stopping(tx, &id)).await?;
                    }
                    Ok(RunResult {
                        cancelled: true,
                        ..result(&inv, false, Vec::new())
                    })
                }
                None => Err(RunError::NotOurs(why)),
            },
            other => other,
        }
    }

    /// Whether `inv`'s lease is still the one stored (no operator cancelled it, nobody took
    /// it over). A store that cannot be read does not stop the run: its end is checked again.
    pub(crate) fn still_holds(&self, inv: &Invocation) -> bool {
        let token = lease_token(inv);
        match self.store.read(|r| r.invocation(&inv.id)) {
            Ok(Some(now)) => now.lease.as_ref().map_or(0, |l| l.token) == token,
            Ok(None) => false,
            Err(_) => true,
        }
    }

    /// The invocation, if an operator cancelled it.
    async fn cancelled(&self, id: &str) -> Option<Invocation> {
        let store = self.store.clone();
        let id = id.to_owned();
        let inv = tokio::task::spawn_blocking(move || store.read(|r| r.invocation(&id)))
            .await
            .ok()?
            .ok()??;
        (inv.status == Status::Cancelled).then_some(inv)
    }

    async fn run_attempts(&self, id: &str) -> Result<RunResult, RunError> {
        loop {
            let began = std::time::Instant::now();
            let (mut inv, agent, previous) = self.start_attempt(id).await?;
            if let Some((group, killed)) = previous {
                if killed {
                    self.previous_run_gone(id, group).await?;
                }
                if let Some(dir) = self.store.dir() {
                    groups::remove(&dir, id);
                }
            }
            let Some(agent) = agent else {
                // Its manifest was removed after the decision: nothing can run it, and left
                // `running` it would stay so for ever.
                let reason = format!("agent {} is no longer in the project", inv.agent);
                let now = self.clock.now_ms();
                return self.finish_failure(inv, reason, now).await;
            };
            let span = attempt_span(&inv, &agent);
            if let Some(last) = inv.history.last_mut() {
                last.trace = span.context();
            }
            let (mut outcome, mut transcript) = match self.lease_term() {
                None => self.attempt(&inv, &agent, None, &span).await,
                Some(term) => {
                    let (deadline, lapses_at) = tokio::sync::watch::channel(began + term);
                    let token = lease_token(&inv);
                    let lapse_watch = lapses_at.clone();
                    let attempt = self.attempt(&inv, &agent, Some(lapses_at), &span);
                    tokio::pin!(attempt);
                    // The lease's end is looked at first: an attempt that ended after its
                    // lease lapsed (this process was paused) is not this process's to record.
                    let ended = tokio::select! {
                        biased;
                        lapse = self.keep_lease(id, token, term, deadline) => Err(lapse),
                        done = &mut attempt => Ok(done),
                    };
                    let lapsed = std::time::Instant::now() >= *lapse_watch.borrow();
                    match ended {
                        // It ended as its lease lapsed (the supervisor may have killed it
                        // a moment before this process saw the time): not a result.
                        Ok(_) if lapsed => {
                            return Err(self.let_go(id, renew::Lapse::Unrenewed).await);
                        }
                        Ok(done) => done,
                        Err(lapse) => {
                            // The supervisor kills a command agent's group at this same
                            // moment: wait for the run to end, so that nothing of it is
                            // left when the invocation goes back to the queue.
                            let unrenewed = matches!(lapse, renew::Lapse::Unrenewed);
                            if unrenewed && matches!(agent.model, ModelSpec::Command { .. }) {
                                let _ = tokio::time::timeout(GROUP_GONE_WITHIN, &mut attempt).await;
                            }
                            return Err(self.let_go(id, lapse).await);
                        }
                    }
                }
            };
            // Everything the attempt brings back is redacted here, before it is stored or
            // printed anywhere: the record, events, notifications and sinks inherit it.
            redact_attempt(&self.project.redactor, &mut outcome, transcript.as_mut());
            end_attempt_span(span, &outcome, transcript.as_ref());
            if let Some(last) = inv.history.last_mut() {
                last.transcript = transcript;
            }
            let now = self.clock.now_ms();
            match outcome {
                Ok((output, follow_ups)) => {
                    return self
                        .finish_success(inv, &agent, output, follow_ups, now)
                        .await;
                }
                Err(Failure {
                    reason,
                    retry: true,
                }) if inv.attempts < inv.max_attempts => {
                    let delay = backoff(&agent.retry, inv.attempts);
                    let inv = self.record_retry(inv, reason, now, delay).await?;
                    if self.queue_retries {
                        let mut r = result(&inv, false, Vec::new());
                        r.retry_queued = true;
                        return Ok(r);
                    }
                    self.clock.sleep(delay).await;
                }
                Err(Failure { reason, .. }) => {
                    return self.finish_failure(inv, reason, now).await;
                }
            }
        }
    }

    /// Marks the invocation running and counts the attempt (a `running` one left by a crash
    /// keeps its number). Returns the process group recorded for a previous run that did not
    /// end cleanly, and whether a process of it was alive (then it was sent SIGKILL, and must
    /// be gone before this run starts).
    async fn start_attempt(
        &self,
        id: &str,
    ) -> Result<(Invocation, Option<Agent>, Option<(Runner, bool)>), RunError> {
        let id = id.to_owned();
        let state_dir = self.store.dir();
        let now = self.clock.now_ms();
        let project = self.project.clone();
        let lease_term = self.lease_term();
        // What the first run of the unit found and killed: a run again after a deadlock
        // (see `Storage::write`) must report the same, not "nothing left to kill".
        let mut found: Option<(Option<Runner>, bool)> = None;
        let started = self
            .write(move |tx| {
                let mut inv = tx
                    .invocation(&id)?
                    .ok_or_else(|| storage::Error::refused(Gone(id.clone())))?;
                if holding_now(inv.lease.as_ref(), now) == Holding::Other {
                    let holder = inv.lease.as_ref().map_or(0, |l| l.holder.pid);
                    return Err(storage::Error::NotOurs(format!(
                        "invocation {id} is held by another pap process (pid {holder})"
                    )));
                }
                // Concurrency keys: a queued one starts only when there is room for it, as
                // the manifests say now.
                // (Written with those limits, a refused one leaves the due work if the store
                // admitted it under others.)
                crate::stages::concurrency::refresh_limits(&project, &mut inv.concurrency);
                tokens::lock_budget(tx, project.agent(&inv.agent))?;
                if inv.status == Status::Queued
                    && let Some((gate, why)) = tx.concurrency_block(&inv, now)?
                {
                    inv.lease = None;
                    tx.put_invocation(&inv)?;
                    return Ok(Err(Waiting { why, gate }));
                }
                // A token or money budget: the run reserves its most, or waits until it fits.
                if let Some(agent) = project.agent(&inv.agent)
                    && let Err((why, at)) =
                        tokens::reserve(tx, agent, &project.config.prices, &inv, now)?
                {
                    inv.lease = None;
                    if inv.status == Status::Queued {
                        inv.next_attempt_at = Some(at);
                    }
                    tx.put_invocation(&inv)?;
                    let gate = format!("budget:{}", inv.agent);
                    return Ok(Err(Waiting { why, gate }));
                }
                // The processes of a run that did not end cleanly (a crash): killed now if
                // any is left, and waited for before this run starts.
                let (previous, killed) = found
                    .get_or_insert_with(|| {
                        let previous = state_dir.as_deref().and_then(|d| groups::read(d, &id));
                        let killed = previous.as_ref().is_some_and(Runner::kill_group);
                        (previous, killed)
                    })
                    .clone();
                let cut_short = (inv.status == Status::Running)
                    .then(|| (interrupted(previous.as_ref(), killed), previous.clone()));
                // On one node the lease covers the longest the attempt may run, so it never
                // needs renewing: past that the agent is killed. On a shared store it lasts
                // a term and is renewed while the agent runs (see `renew`).
                let token = tx.issue_lease_token()?;
                let lease = match lease_term {
                    Some(term) => {
                        let term = i64::try_from(term.as_millis()).unwrap_or(i64::MAX / 2);
                        Lease::mine(token, now, term).renewed_with_grace(term)
                    }
                    None => {
                        let runtime = project
                            .agent(&inv.agent)
                            .and_then(|a| a.max_runtime)
                            .unwrap_or(DEFAULT_MAX_RUNTIME);
                        let hold = i64::try_from(runtime.as_millis()).unwrap_or(i64::MAX / 2);
                        Lease::mine(token, now, hold.saturating_add(HOLD_MARGIN_MS))
                    }
                };
                inv.start_attempt(lease, cut_short, now)
                    .map_err(|e| storage::Error::NotOurs(e.to_string()))?;
                // A critical notification for the agent rides on its loop from now on, and
                // its queue is delivered with this attempt (JP RFD 011).
                if loops(&project, &inv.agent)
                    && let Some(lease) = &inv.lease
                {
                    notify::agent_loop::opened(tx, &inv.agent, lease.expires_at)?;
                }
                notify::queue::deliver_at_start(tx, &project, &mut inv, now)?;
                if audited(&inv.risk) {
                    tx.audit(AuditEntry::of(
                        &inv,
                        now,
                        "attempt_started",
                        None,
                        Some(format!("attempt {} of {}", inv.attempts, inv.max_attempts)),
                    ))?;
                }
                tx.put_invocation(&inv)?;
                Ok(Ok((inv, previous.map(|g| (g, killed)))))
            })
            .await?;
        let (inv, previous) = started.map_err(RunError::Waiting)?;
        let agent = self.project.agent(&inv.agent).cloned();
        Ok((inv, agent, previous))
    }

    /// Waits until the previous run's process group (SIGKILLed) is gone. If it does not go,
    /// this attempt does not run: it goes back to the queue, and the group stays recorded,
    /// so the next try checks again. Two runs of one invocation never overlap.
    async fn previous_run_gone(&self, id: &str, group: Runner) -> Result<(), RunError> {
        let waited = group.clone();
        let gone = tokio::task::spawn_blocking(move || waited.wait_group_gone(GROUP_GONE_WITHIN))
            .await
            .unwrap_or(false);
        if gone {
            return Ok(());
        }
        let why = format!(
            "not started: the previous run's processes (group {}) were still alive {}s after SIGKILL",
            group.pid,
            GROUP_GONE_WITHIN.as_secs()
        );
        self.requeue_interrupted(id, &why).await?;
        Err(RunError::NotOurs(why))
    }

    /// One attempt: `Ok((output, follow-up events))` or why it failed, and an LLM agent's
    /// transcript.
    async fn attempt(
        &self,
        inv: &Invocation,
        agent: &Agent,
        lease: Option<tokio::sync::watch::Receiver<std::time::Instant>>,
        span: &telemetry::Span,
    ) -> (
        Result<(Value, Vec<Event>), Failure>,
        Option<crate::domain::Transcript>,
    ) {
        match &agent.model {
            ModelSpec::Command { program, args, env } => {
                // A variable that is not set cannot become set by trying again.
                let mut env = match expand_env(env, self.environment) {
                    Ok(env) => env,
                    Err(reason) => {
                        let retry = false;
                        return (Err(Failure { reason, retry }), None);
                    }
                };
                // The W3C variables OpenTelemetry's SDKs read: a program that traces makes its
                // spans children of this attempt's. With traces off in this process (an
                // approval's run in `pap approve`, say), the invocation's own context is
                // passed on unchanged, so the run still continues the event's trace.
                if let Some(cx) = span.context().or_else(|| inv.trace.clone()) {
                    env.push(("TRACEPARENT".into(), cx.traceparent()));
                    if let Some(state) = cx.tracestate {
                        env.push(("TRACESTATE".into(), state));
                    }
                }
                let result = self
                    .run_command(inv, agent, program, args, env, lease)
                    .await;
                (result, None)
            }
            ModelSpec::Anthropic(_) | ModelSpec::Openai(_) => {
                let (result, transcript) = llm::attempt(self, inv, agent, span).await;
                (result.map(|output| (output, Vec::new())), Some(transcript))
            }
        }
    }

    async fn run_command(
        &self,
        inv: &Invocation,
        agent: &Agent,
        program: &std::path::Path,
        args: &[String],
        mut env: Vec<(String, String)>,
        lease: Option<tokio::sync::watch::Receiver<std::time::Instant>>,
    ) -> Result<(Value, Vec<Event>), Failure> {
        let max_bytes = self.project.config.max_event_bytes;
        let emit = scratch::emit_file(self.store.dir().as_deref())
            .map_err(|e| Failure::retry(format!("cannot create a scratch dir: {e}")))?;
        let emit_file = &emit.path;
        let stdin = serde_json::to_vec(&json!({
            "invocation_id": inv.id,
            "attempt": inv.attempts,
            "trigger": inv.trigger,
            "agent": inv.agent,
            "event": inv.event,
            "notifications": inv.notifications,
        }))
        .expect("serialisable");
        // After `model.env`, so the `PAP_*` variables are always pap's.
        env.extend([
            ("PAP_INVOCATION_ID".to_owned(), inv.id.clone()),
            ("PAP_ATTEMPT".to_owned(), inv.attempts.to_string()),
            ("PAP_EVENT_ID".to_owned(), inv.event_id.clone()),
            ("PAP_EVENT_TYPE".to_owned(), inv.event_type.clone()),
            ("PAP_TRIGGER_ID".to_owned(), inv.trigger.clone()),
            ("PAP_AGENT_ID".to_owned(), inv.agent.clone()),
            ("PAP_EMIT_FILE".to_owned(), emit_file.display().to_string()),
        ]);
        // A NUL cannot be passed in the environment; such a value (from an event id) is left out.
        env.retain(|(_, v)| !v.contains('\0'));
        // The group is recorded before the program may start, and forgotten when the run
        // is over (however it ends, this future dropped included).
        let record = std::sync::Mutex::new(None);
        let state_dir = self.store.dir();
        let started = |group: &Runner| {
            let Some(dir) = state_dir else { return true };
            let group = Runner {
                since: self.clock.now_ms(),
                ..group.clone()
            };
            match groups::write(&dir, &inv.id, &group) {
                Ok(r) => *record.lock().unwrap_or_else(|e| e.into_inner()) = Some(r),
                Err(e) => tracing::warn!(error = %e, "cannot record the agent's process group"),
            }
            // Recorded first, then checked: a cancel commits first, then reads the record, so
            // either it finds the group to stop or this finds the lease gone.
            self.still_holds(inv)
        };
        let stdout = command::run(command::Spec {
            program,
            args,
            cwd: &self.project.root,
            stdin: [stdin, b"\n".to_vec()].concat(),
            env,
            inherit_env: false,
            timeout: agent.max_runtime.unwrap_or(DEFAULT_MAX_RUNTIME),
            max_output: usize::try_from(max_bytes / 2).unwrap_or(usize::MAX),
            started: Some(Box::new(started)),
            lease,
        })
        .await;
        drop(record);
        // A program that is not there will not be there on the next attempt either.
        let stdout = stdout.map_err(|failed| Failure {
            reason: failed.reason,
            retry: !failed.cannot_start,
        })?;
        let output =
            output::parse(&agent.output, &stdout).map_err(|e| Failure::retry(e.to_string()))?;
        let now = self.clock.now_ms();
        let follow_ups = emit::read_follow_ups(emit_file, inv, &agent.emits, now, max_bytes)
            .map_err(Failure::retry)?;
        Ok((output, follow_ups))
    }

    async fn record_retry(
        &self,
        inv: Invocation,
        reason: String,
        now: i64,
        delay: Duration,
    ) -> Result<Invocation, RunError> {
        let keep = !self.queue_retries;
        let token = lease_token(&inv);
        let project = self.project.clone();
        self.write(move |tx| {
            // A copy per run: a shared store may run the unit again (see `Storage::write`).
            let mut inv = inv.clone();
            tx.check_lease(&inv.id, token)?;
            end_loop(tx, &project, &mut inv, now)?;
            let next_at = now.saturating_add(delay.as_millis() as i64);
            // Kept while this process waits out the backoff itself, so nobody else starts it.
            let holder = keep.then(|| {
                let hold = next_at.saturating_sub(now).saturating_add(HOLD_MARGIN_MS);
                Lease::mine(token, now, hold)
            });
            inv.queue_retry(&reason, next_at, holder, now)
                .map_err(|e| storage::Error::NotOurs(e.to_string()))?;
            tokens::settle(tx, project.agent(&inv.agent), &inv, now)?;
            if audited(&inv.risk) {
                tx.audit(AuditEntry::of(
                    &inv,
                    now,
                    "attempt_failed",
                    None,
                    Some(reason.clone()),
                ))?;
            }
            tx.put_invocation(&inv)?;
            Ok(inv)
        })
        .await
    }

    /// Puts a `running` invocation this process holds back in the queue under the same
    /// attempt number: its attempt was cut short by a shutdown, which is not a failure.
    pub async fn requeue_interrupted(&self, id: &str, why: &str) -> Result<(), RunError> {
        let id = id.to_owned();
        let why = why.to_owned();
        let now = self.clock.now_ms();
        self.write(move |tx| {
            let Some(mut inv) = tx.invocation(&id)? else {
                return Ok(());
            };
            let mine = inv.lease.as_ref().is_some_and(|l| l.is_mine(now));
            if !mine || inv.requeue_interrupted(&why, now).is_err() {
                return Ok(());
            }
            tx.put_invocation(&inv)
        })
        .await
    }

    async fn finish_success(
        &self,
        inv: Invocation,
        agent: &Agent,
        output: Value,
        follow_ups: Vec<Event>,
        now: i64,
    ) -> Result<RunResult, RunError> {
        let max_bytes = self.project.config.max_event_bytes;
        let mut emitted = Vec::new();
        if let Some(kind) = &agent.on_complete_emit {
            emitted.push(
                emit::outcome_event(&inv, kind, Ending::Succeeded(&output), now, max_bytes)
                    .map_err(|e| anyhow::anyhow!("completion event of {}: {e}", inv.id))?,
            );
        }
        emitted.extend(follow_ups);
        let events = emitted.clone();
        let project = self.project.clone();
        let token = lease_token(&inv);
        let inv = self
            .write(move |tx| {
                let mut inv = inv.clone();
                tx.check_lease(&inv.id, token)?;
                end_loop(tx, &project, &mut inv, now)?;
                let ids = events.iter().map(|e| e.id.clone()).collect();
                inv.succeed(output.clone(), ids, now)
                    .map_err(|e| storage::Error::NotOurs(e.to_string()))?;
                tokens::settle(tx, project.agent(&inv.agent), &inv, now)?;
                if audited(&inv.risk) {
                    tx.audit(AuditEntry::of(&inv, now, "succeeded", None, None))?;
                }
                put_outbox(tx, &events, now)?;
                tx.put_invocation(&inv)?;
                if inv.internal {
                    let output = inv.output.clone().unwrap_or_default();
                    notify::reply::turn_ended(tx, &project, &inv, Ok(&output), now)?;
                } else {
                    notify::outcome::invocation_outcome(
                        tx,
                        &project,
                        &inv,
                        OutcomeKind::Succeeded,
                        now,
                    )?;
                }
                Ok(inv)
            })
            .await?;
        Ok(result(&inv, true, emitted))
    }

    async fn finish_failure(
        &self,
        inv: Invocation,
        reason: String,
        now: i64,
    ) -> Result<RunResult, RunError> {
        let project = self.project.clone();
        let token = lease_token(&inv);
        let (inv, emitted) = self
            .write(move |tx| {
                let mut inv = inv.clone();
                tx.check_lease(&inv.id, token)?;
                end_loop(tx, &project, &mut inv, now)?;
                tokens::lock_budget(tx, project.agent(&inv.agent))?;
                let events = end_in_tx(tx, &project, &mut inv, Status::Failed, &reason, None, now)?;
                tokens::settle(tx, project.agent(&inv.agent), &inv, now)?;
                Ok((inv, events))
            })
            .await?;
        Ok(result(&inv, false, emitted))
    }

    /// Runs a store transaction off the async threads (it may wait for another process), and
    /// returns once it is durable: runs that start or end together share one sync (see
    /// `store::group`).
    pub async fn write<T: Send + 'static>(
        &self,
        f: impl FnMut(&mut dyn WriteTx) -> storage::Result<T> + Send + 'static,
    ) -> Result<T, RunError> {
        let store = self.store.clone();
        let value = tokio::task::spawn_blocking(move || store.write_grouped(f))
            .await
            .map_err(|e| RunError::Failed(e.into()))??;
        Ok(value)
    }
}

/// Whether `agent` runs a tool loop (an LLM agent), which notifications can ride on
/// (JP RFD 011).
pub(crate) fn loops(project: &Project, agent: &str) -> bool {
    project
        .agent(agent)
        .is_some_and(|a| !matches!(a.model, ModelSpec::Command { .. }))
}

/// The attempt's tool loop ended, in the transaction that records how.
/// What the invocation carried, as the store has it: a running tool loop adds what rode on
/// its requests (JP RFD 011) to the stored record as it takes it, and the copy an attempt
/// ends with must not write over that (even when the attempt was cut short between the
/// take and its own bookkeeping). A critical notification that came too late to ride on
/// the loop forces the agent's turn now (`notify::agent_loop`).
/// Only an LLM agent has a loop, so a command agent's ending reads nothing more.
fn end_loop(
    tx: &mut dyn WriteTx,
    project: &Project,
    inv: &mut Invocation,
    now: i64,
) -> storage::Result<()> {
    if !loops(project, &inv.agent) {
        return Ok(());
    }
    if let Some(stored) = tx.invocation(&inv.id)? {
        inv.notifications = stored.notifications;
    }
    notify::agent_loop::closed(tx, project, &inv.agent, now)
}

/// Frees the concurrency slots a cancelled invocation kept while its processes stopped.
pub fn release_stopping(tx: &mut dyn WriteTx, id: &str) -> storage::Result<()> {
    if let Some(mut inv) = tx.invocation(id)?
        && inv.stopping_until.is_some()
    {
        inv.stopping_until = None;
        tx.put_invocation(&inv)?;
    }
    Ok(())
}

/// An invocation a run was asked to start is no longer in the store (purged meanwhile).
#[derive(Debug, thiserror::Error)]
#[error("invocation {0} is not in the store")]
pub(crate) struct Gone(String);

/// Ends `inv` as failed, rejected or expired inside `tx`, with its `on_failure` event when
/// its agent declares one: the one way retries running out, `pap reject` and approval expiry
/// end an invocation. Returns the events to dispatch.
pub(crate) fn end_in_tx(
    tx: &mut dyn WriteTx,
    project: &Project,
    inv: &mut Invocation,
    status: Status,
    reason: &str,
    actor: Option<String>,
    now: i64,
) -> storage::Result<Vec<Event>> {
    let ending = match status {
        Status::Rejected => Ending::Rejected(reason),
        Status::Expired => Ending::Expired(reason),
        _ => Ending::Failed(reason),
    };
    let events = failure_events(project, inv, ending, now)?;
    let ids = events.iter().map(|e| e.id.clone()).collect();
    // The lifecycle's refusal stays typed (`domain::NotAllowed`) inside the store's error.
    inv.end(status, reason, ids, now)
        .map_err(storage::Error::refused)?;
    if audited(&inv.risk) {
        tx.audit(AuditEntry::of(
            inv,
            now,
            status.as_str(),
            actor,
            Some(reason.to_owned()),
        ))?;
    }
    put_outbox(tx, &events, now)?;
    tx.put_invocation(inv)?;
    if inv.internal {
        notify::reply::turn_ended(tx, project, inv, Err(reason), now)?;
    } else {
        let kind = match status {
            Status::Rejected => OutcomeKind::Rejected,
            Status::Expired => OutcomeKind::Expired,
            _ => OutcomeKind::Failed,
        };
        notify::outcome::invocation_outcome(tx, project, inv, kind, now)?;
    }
    Ok(events)
}

/// The span of one attempt: a child of its trigger's decision (GenAI's `invoke_agent`).
fn attempt_span(inv: &Invocation, agent: &Agent) -> telemetry::Span {
    telemetry::start(
        || format!("invoke_agent {}", agent.id),
        telemetry::Parent::Remote(inv.trace.as_ref()),
        telemetry::Kind::Internal,
        || {
            vec![
                telemetry::Attr::new("gen_ai.operation.name", "invoke_agent"),
                telemetry::Attr::new("gen_ai.agent.name", agent.id.clone()),
                telemetry::Attr::new("pap.invocation.id", inv.id.clone()),
                telemetry::Attr::new("pap.trigger.id", inv.trigger.clone()),
                telemetry::Attr::new("pap.attempt", i64::from(inv.attempts)),
            ]
        },
    )
}

/// Ends an attempt's span with how it went (its error already redacted) and, for an LLM
/// agent, the run's tokens and cost.
fn end_attempt_span(
    span: telemetry::Span,
    outcome: &Result<(Value, Vec<Event>), Failure>,
    transcript: Option<&crate::domain::Transcript>,
) {
    if !span.is_recording() {
        return;
    }
    if let Some(t) = transcript {
        span.set_all([
            telemetry::Attr::new("gen_ai.usage.input_tokens", t.input_tokens as i64),
            telemetry::Attr::new("gen_ai.usage.output_tokens", t.output_tokens as i64),
        ]);
        if let Some(cost) = &t.cost {
            span.set_all([
                telemetry::Attr::new("pap.cost.micros", cost.micros as i64),
                telemetry::Attr::new("pap.cost.currency", cost.currency.clone()),
            ]);
        }
    }
    match outcome {
        Ok(_) => span.set(telemetry::Attr::new("pap.result", "succeeded")),
        Err(f) => {
            span.set(telemetry::Attr::new("pap.result", "failed"));
            span.fail("agent_error", &f.reason);
        }
    }
}

/// A command agent's `model.env` with `${NAME}` taken from pap's environment.
fn expand_env(
    env: &std::collections::BTreeMap<String, String>,
    whose: Environment,
) -> Result<Vec<(String, String)>, String> {
    env.iter()
        .map(|(key, value)| {
            crate::interpolate::expand(value, |name| std::env::var(name).ok())
                .map(|v| (key.clone(), v))
                .map_err(|e| format!("model.env {key}: {e} in {whose}"))
        })
        .collect()
}

/// Redacts what one attempt brought back: its output and follow-up events, or why it failed,
/// and an LLM agent's transcript.
fn redact_attempt(
    redactor: &crate::redact::Redactor,
    outcome: &mut Result<(Value, Vec<Event>), Failure>,
    transcript: Option<&mut crate::domain::Transcript>,
) {
    if redactor.is_empty() {
        return;
    }
    match outcome {
        Ok((output, follow_ups)) => {
            redactor.value(output);
            for event in follow_ups {
                redactor.value(&mut event.value);
            }
        }
        Err(failure) => redactor.string(&mut failure.reason),
    }
    for turn in transcript.into_iter().flat_map(|t| t.turns.iter_mut()) {
        redactor.string(&mut turn.text);
        for call in &mut turn.tool_calls {
            redactor.string(&mut call.arguments);
            redactor.string(&mut call.result);
        }
    }
}

/// What the history says of an attempt its runner did not finish.
fn interrupted(group: Option<&Runner>, killed: bool) -> String {
    match group {
        None => "interrupted: pap stopped during the attempt".into(),
        Some(g) if killed => format!(
            "interrupted: pap stopped during the attempt; its processes (group {}) were still running and were killed before the attempt ran again",
            g.pid
        ),
        Some(g) => format!(
            "interrupted: pap stopped during the attempt; its processes (group {}) were gone before the attempt ran again",
            g.pid
        ),
    }
}

/// The fencing token an attempt started under (every attempt starts under a lease; 0, which
/// the store never issues, fails the check).
fn lease_token(inv: &Invocation) -> u64 {
    inv.lease.as_ref().map_or(0, |l| l.token)
}

fn result(inv: &Invocation, succeeded: bool, emitted: Vec<Event>) -> RunResult {
    RunResult {
        invocation_id: inv.id.clone(),
        agent: inv.agent.clone(),
        succeeded,
        attempts: inv.attempts,
        emitted_ids: emitted.iter().map(|e| e.id.clone()).collect(),
        emitted,
        error: inv.error.clone(),
        retry_queued: false,
        cancelled: false,
        spend: inv
            .history
            .last()
            .and_then(|a| a.transcript.as_ref())
            .map(|t| Spend {
                model: t.model.clone(),
                input_tokens: t.input_tokens,
                cached_input_tokens: t.cached_input_tokens,
                cache_write_input_tokens: t.cache_write_input_tokens,
                output_tokens: t.output_tokens,
                cost: t.cost.clone(),
            }),
    }
}

/// Why an attempt failed, and whether another attempt could help.
pub(crate) struct Failure {
    reason: String,
    retry: bool,
}

impl Failure {
    /// A failure another attempt may not meet.
    fn retry(reason: String) -> Failure {
        Failure {
            reason,
            retry: true,
        }
    }
}

/// Contract section 5: the delay before attempt n+1 is `backoff_seconds × 2^(n-1)`.
pub fn backoff(retry: &RetryPolicy, attempt: u32) -> Duration {
    let factor = 2u32.saturating_pow(attempt.saturating_sub(1));
    retry.backoff.saturating_mul(factor)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_from_the_second_attempt() {
        let retry = RetryPolicy {
            max_attempts: 4,
            backoff: Duration::from_secs(5),
        };
        let delays: Vec<u64> = (1..=3).map(|n| backoff(&retry, n).as_secs()).collect();
        assert_eq!(delays, [5, 10, 20]);
        let none = RetryPolicy::default();
        assert_eq!(backoff(&none, 7), Duration::ZERO);
    }
}
