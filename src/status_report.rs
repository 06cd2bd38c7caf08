//! What `pap status` reports: is this pap healthy, and if not, what needs a person. Shared
//! by the command and by serve's `GET /status` (and the console). It only reads: what is due
//! (an approval past its deadline) is shown as of now. Its cost does not grow with the queue:
//! counts come from the store's indexes, and only the oldest approvals are read.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde::Serialize;

use crate::clock::rfc3339_ms;
use crate::domain::{Invocation, SinkState, Status};
use crate::serve::control;
use crate::storage::scan::{Next, Only, Order, QueueCounts, Scan, past_half};
use crate::storage::{self, Storage};

/// Queued work this long past its due time is overdue (nothing is taking it).
pub(crate) const OVERDUE_AFTER_MS: i64 = 5 * 60 * 1000;

/// At most this many approvals are listed.
pub(crate) const APPROVALS_LISTED: usize = 20;

#[derive(Debug, Serialize)]
pub(crate) struct Report {
    pub healthy: bool,
    /// What needs a person, one sentence each.
    pub attention: Vec<String>,
    pub serve: Option<ServeState>,
    pub queue: BTreeMap<&'static str, u64>,
    /// How many approvals await an answer as of now (`approvals` lists the oldest few).
    pub approvals_waiting: u64,
    pub approvals: Vec<Approval>,
    pub sinks: Vec<SinkHealth>,
    /// Agents whose recent runs all failed (see `health`): each is also an `attention` line.
    pub agents_failing: Vec<crate::health::AgentFailing>,
    pub schedules: Vec<ScheduleState>,
    pub store: StoreState,
    /// The serve nodes sharing the store (a database), newest word first; empty for redb.
    pub nodes: Vec<NodeState>,
}

#[derive(Debug, Serialize)]
pub(crate) struct NodeState {
    pub id: String,
    pub host: String,
    pub pid: u32,
    pub version: String,
    pub since: String,
    pub last_seen: String,
    /// Heard from within the last 30 seconds (three heartbeats).
    pub alive: bool,
    pub listen: Option<String>,
}

#[derive(Debug, Serialize)]
pub(crate) struct ServeState {
    pub pid: u32,
    pub since: String,
    /// The HTTP listener's URL, when serve listens.
    pub listen: Option<String>,
    /// What is wrong with it though it keeps going: each is also an `attention` line.
    pub conditions: Vec<crate::serve::conditions::Shown>,
}

#[derive(Debug, Serialize)]
pub(crate) struct Approval {
    pub id: String,
    pub short_id: String,
    pub agent: String,
    pub trigger: String,
    pub waiting_since: String,
    pub deadline: Option<String>,
    /// More than half of the time to answer has passed.
    pub past_half: bool,
}

#[derive(Debug, Default, Serialize)]
pub(crate) struct SinkHealth {
    pub sink: String,
    pub failed: usize,
    pub retrying: usize,
    pub last_error: Option<String>,
}

#[derive(Debug, Serialize)]
pub(crate) struct ScheduleState {
    pub id: String,
    pub enabled: bool,
    pub last_fire: Option<String>,
    pub next_fire: Option<String>,
}

#[derive(Debug, Serialize)]
pub(crate) struct StoreState {
    /// `redb`, or `postgresql`.
    pub kind: &'static str,
    /// The redb file, or the database URL without its password.
    pub path: String,
    pub bytes: u64,
    /// What the tables take, largest first (the sum is the live data: a file much larger
    /// has free pages that `pap store compact` gives back). Only `pap status` measures
    /// them (redb walks every page of every table): a probe's `GET /status` leaves them out.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tables: Vec<crate::storage::space::TableSize>,
}

pub(crate) fn gather(
    store: &dyn Storage,
    state_dir: &Path,
    project: Option<&crate::manifest::Project>,
    now: i64,
) -> anyhow::Result<Report> {
    let serve = control::running(state_dir).map(|s| ServeState {
        pid: s.pid,
        since: s.started_at,
        listen: s.listen,
        conditions: s.conditions,
    });
    let mut attention: Vec<String> = serve
        .iter()
        .flat_map(|s| &s.conditions)
        .map(|c| format!("serve: {} (since {})", c.message, c.since))
        .collect();
    // Counts from the store's indexes, and a page of the oldest approvals: nothing here
    // reads every invocation, however long the queue.
    let (counts, awaiting) = store.read(|r| {
        let counts = r.queue_counts(now, now.saturating_sub(OVERDUE_AFTER_MS))?;
        let mut awaiting: Vec<Invocation> = Vec::new();
        let scan = Scan {
            only: Only::Awaiting,
            ..Scan::all(now)
        };
        r.scan_invocations(&scan, &mut |inv| {
            awaiting.push(inv);
            Ok(if awaiting.len() < APPROVALS_LISTED {
                Next::More
            } else {
                Next::Stop
            })
        })?;
        Ok((counts, awaiting))
    })?;
    let queue = queue_map(&counts);
    let nodes = nodes(store, now)?;
    // Who runs due work: this host's serve (answering on its socket, or alive as the holder
    // of its lock), or a node of a shared store heard from lately.
    let no_runner = serve.is_none()
        && crate::serve::lock::live_holder(state_dir).is_none()
        && !nodes.iter().any(|n| n.alive);
    // What is due now is counted only when nobody would run it (a second count of the index).
    let due = match no_runner {
        true => store.read(|r| r.queue_counts(now, now))?.overdue,
        false => 0,
    };
    if no_runner {
        attention.extend(due_without_a_runner(store, now)?);
    }
    if no_runner && due > 0 {
        attention.push(format!(
            "{} queued invocation(s) due, and no pap serve is running to run them (start `pap serve`, or `pap dispatch` runs what it decides)",
            QueueCounts::said(due)
        ));
    } else if counts.overdue > 0 {
        attention.push(format!(
            "{} queued invocation(s) overdue by more than {} minutes",
            QueueCounts::said(counts.overdue),
            OVERDUE_AFTER_MS / 60_000,
        ));
    }
    let ids: Vec<&str> = awaiting.iter().map(|i| i.id.as_str()).collect();
    let shorts = if ids.is_empty() {
        Default::default()
    } else {
        storage::short_forms::short_forms(store, &ids)?
    };
    let approvals: Vec<Approval> = awaiting
        .iter()
        .map(|i| Approval {
            id: i.id.clone(),
            short_id: shorts.get(&i.id).cloned().unwrap_or_else(|| i.id.clone()),
            agent: i.agent.clone(),
            trigger: i.trigger.clone(),
            waiting_since: rfc3339_ms(i.created_at),
            deadline: i.approval_deadline.map(rfc3339_ms),
            past_half: past_half(i.created_at, i.approval_deadline, now),
        })
        .collect();
    if counts.past_half > 0 {
        attention.push(format!(
            "{} approval(s) waiting past half their deadline",
            QueueCounts::said(counts.past_half)
        ));
    }

    let sinks = sink_health(store, project)?;
    for s in &sinks {
        attention.push(format!(
            "sink {} is failing ({} failed, {} retrying){}",
            s.sink,
            s.failed,
            s.retrying,
            s.last_error
                .as_deref()
                .map(|e| format!(": {e}"))
                .unwrap_or_default()
        ));
    }

    let known = |agent: &str| project.is_none_or(|p| p.agent(agent).is_some());
    let agents_failing = crate::health::failing_agents(store, &known, now)?;
    attention.extend(agents_failing.iter().map(crate::health::failing_sentence));

    let mut schedules = Vec::new();
    match project {
        Some(project) => {
            for s in &project.schedules {
                let last = store.read(|r| r.schedule_last(&s.id))?;
                let next =
                    crate::schedule::next_fires(s, jiff::Timestamp::from_millisecond(now)?, 1)
                        .into_iter()
                        .next();
                schedules.push(ScheduleState {
                    id: s.id.clone(),
                    enabled: s.enabled,
                    last_fire: last.map(rfc3339_ms),
                    next_fire: next.map(|z| format!("{:.0}", z.timestamp())),
                });
            }
        }
        None => attention.push("the project has errors (`pap lint` shows them)".into()),
    }
    let gone = nodes.iter().filter(|n| !n.alive).count();
    if gone > 0 {
        attention.push(format!(
            "{gone} node(s) not heard from for {} s: stopped without saying so, or cut off",
            storage::NODE_GONE_MS / 1000
        ));
    }
    let path = store.location();
    let bytes = match store.bytes()? {
        Some(bytes) => bytes,
        None => store_bytes(state_dir),
    };
    Ok(Report {
        healthy: attention.is_empty(),
        attention,
        serve,
        queue,
        approvals_waiting: counts.waiting(),
        approvals,
        sinks,
        agents_failing,
        schedules,
        nodes,
        store: StoreState {
            kind: store.kind(),
            path: path.display().to_string(),
            bytes,
            tables: Vec::new(),
        },
    })
}

/// What only a running serve does and is due now: a debounce's or a batch's fire (its
/// window ended), a notification's escalation (its delivery deadline passed). Read from the
/// indexes that order them by time: the earliest fire, and the escalations due (a bounded
/// scan of the timer index, as the watchdog reads it).
fn due_without_a_runner(store: &dyn Storage, now: i64) -> anyhow::Result<Vec<String>> {
    let (fire, escalations) = store.read(|r| {
        let fire = r.debounce_next_due()?.filter(|due| *due <= now);
        let escalations = crate::notify::due::escalations_due(r, now, 1_000, &|_| true)?.len();
        Ok((fire, escalations))
    })?;
    let mut out = Vec::new();
    if let Some(since) = fire {
        out.push(format!(
            "a debounce or batch has been due since {} and no pap serve is running to make its invocation (start `pap serve`)",
            rfc3339_ms(since)
        ));
    }
    if escalations > 0 {
        let n = if escalations >= 1_000 {
            "at least 1000".to_owned()
        } else {
            escalations.to_string()
        };
        out.push(format!(
            "{n} notification escalation(s) due, and no pap serve is running to make them (start `pap serve`)"
        ));
    }
    Ok(out)
}

/// The serve nodes sharing the store (none for redb).
fn nodes(store: &dyn Storage, now: i64) -> storage::Result<Vec<NodeState>> {
    Ok(store
        .nodes()?
        .into_iter()
        .map(|n| NodeState {
            alive: now.saturating_sub(n.last_seen) < storage::NODE_GONE_MS,
            since: crate::clock::rfc3339_ms(n.started_at),
            last_seen: crate::clock::rfc3339_ms(n.last_seen),
            id: n.id,
            host: n.host,
            pid: n.pid,
            version: n.version,
            listen: n.listen,
        })
        .collect())
}

/// How many of the newest notifications the sink health looks at, at most: a delivery older
/// than that does not say whether a sink fails now, and the look stays bounded however many
/// notifications the store keeps.
pub(crate) const SINK_HEALTH_LOOK: usize = 2_000;

/// Sinks that are failing now: those whose latest deliveries (since their last one that was
/// sent) failed for good or are being retried, among the newest [`SINK_HEALTH_LOOK`]
/// notifications. A sink that recovered is healthy again, though older notifications still
/// record the deliveries it failed. A project without sinks has none failing, and reads
/// nothing.
fn sink_health(
    store: &dyn Storage,
    project: Option<&crate::manifest::Project>,
) -> storage::Result<Vec<SinkHealth>> {
    let configured: BTreeSet<&str> = project
        .map(|p| {
            p.config
                .notify
                .sinks
                .iter()
                .map(|s| s.name.as_str())
                .collect()
        })
        .unwrap_or_default();
    if project.is_some() && configured.is_empty() {
        return Ok(Vec::new());
    }
    let mut by_sink: BTreeMap<String, SinkHealth> = BTreeMap::new();
    // Sinks whose newest settled delivery was seen: nothing older changes their state.
    let mut sent: BTreeSet<String> = BTreeSet::new();
    let mut looked = 0;
    store.read(|r| {
        // Newest first: a later delivery says more about the sink's state than an earlier one.
        r.scan_notifications(Order::Newest, None, &mut |n| {
            for d in &n.sinks {
                if sent.contains(&d.sink) {
                    continue;
                }
                let entry = by_sink.entry(d.sink.clone()).or_insert_with(|| SinkHealth {
                    sink: d.sink.clone(),
                    ..SinkHealth::default()
                });
                match d.state {
                    SinkState::Sent => {
                        sent.insert(d.sink.clone());
                        continue;
                    }
                    SinkState::Failed => entry.failed += 1,
                    SinkState::Retrying => entry.retrying += 1,
                    SinkState::Pending => continue,
                }
                if entry.last_error.is_none() {
                    entry.last_error = d.error.clone();
                }
            }
            looked += 1;
            let settled = !configured.is_empty() && configured.iter().all(|s| sent.contains(*s));
            Ok(if settled || looked >= SINK_HEALTH_LOOK {
                Next::Stop
            } else {
                Next::More
            })
        })
    })?;
    Ok(by_sink
        .into_values()
        .filter(|s| s.failed + s.retrying > 0)
        .collect())
}

/// The report's `queue`: each status not yet ended, as of now, with its count (a status
/// without invocations is left out).
pub(crate) fn queue_map(c: &QueueCounts) -> BTreeMap<&'static str, u64> {
    [
        (Status::AwaitingApproval, c.waiting()),
        (Status::Expired, c.expired_unrecorded),
        (Status::Queued, c.queued),
        (Status::Running, c.running),
    ]
    .into_iter()
    .filter(|(_, n)| *n > 0)
    .map(|(s, n)| (s.as_str(), n))
    .collect()
}

fn store_bytes(state_dir: &Path) -> u64 {
    std::fs::metadata(state_dir.join("state.redb")).map_or(0, |m| m.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_json_report_names_every_part() {
        let r = Report {
            healthy: false,
            attention: vec!["x".into()],
            serve: None,
            queue: BTreeMap::from([("queued", 2)]),
            approvals_waiting: 0,
            approvals: Vec::new(),
            agents_failing: Vec::new(),
            sinks: Vec::new(),
            schedules: Vec::new(),
            store: StoreState {
                kind: "redb",
                path: "s".into(),
                bytes: 1,
                tables: Vec::new(),
            },
            nodes: Vec::new(),
        };
        let v = json!(r);
        for key in [
            "healthy",
            "attention",
            "serve",
            "queue",
            "approvals",
            "sinks",
            "schedules",
            "store",
        ] {
            assert!(v.get(key).is_some(), "{key}");
        }
    }
}
