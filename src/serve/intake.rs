//! What comes in, decided on serve's one deciding thread: spool files (claimed in batches,
//! written-in-place ones once they settle, a sick spool set aside until it heals), events
//! posted over HTTP (decided together in one group, answered once durable), and events that
//! finished runs emitted (already safe in the outbox; decided here one cascade level deeper).

use std::time::Instant;

use crate::dispatcher::Pending;
use crate::event::Event;
use crate::event::input::{self, Location};
use crate::storage;

use super::spool::{Claimed, Problem, SpoolError};
use super::*;

impl Server {
    /// Files a crash left in `processing/` are dispatched again first.
    /// On a shared spool: dispatches what nodes that are gone left claimed (a node's
    /// heartbeat silent for [`storage::NODE_GONE_MS`], or its entry gone).
    pub(super) fn adopt_spool_files(&mut self) {
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
    pub(super) fn dispatch_claimed(
        &mut self,
        files: Result<Vec<Claimed>, SpoolError>,
        found: &str,
    ) {
        match files {
            Ok(files) if !files.is_empty() => {
                tracing::info!(files = files.len(), "{found}");
                self.dispatch_files(files);
            }
            Ok(_) => {}
            Err(e) => self.spool_failed(&e),
        }
    }

    pub(super) fn resume_spool(&mut self) {
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
    pub(super) fn spool_sound(&mut self) -> bool {
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
    pub(super) fn spool_failed(&mut self, e: &SpoolError) {
        let since = format!("{:.0}", self.runtime.clock.now());
        self.spool_health.failed(e, Instant::now(), &since);
    }

    /// Claims and dispatches ready files until none is left (or serve is stopping).
    pub(super) fn spool_pass(&mut self) {
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
    pub(super) fn dispatch_files(&mut self, claimed: Vec<Claimed>) -> bool {
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

    /// Decides the events HTTP requests posted, several requests per transaction (never
    /// splitting one), and answers each once its transaction is durable.
    pub(super) fn decide_ingests(&mut self) {
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

    pub(super) fn decide_ingest_batch(&mut self, batch: Vec<decider::IngestRequest>) {
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

    pub(super) fn dispatch_emitted(&mut self, events: Vec<Event>) {
        if events.is_empty() {
            return;
        }
        let mut d = self.dispatcher();
        let result = d.dispatch_emitted(events).and_then(|_| d.finish(true));
        if let Err(e) = result {
            outage::report(&e, "cannot decide emitted events (they stay in the outbox)");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_server::{event, invocations, project, server, trigger};

    #[test]
    fn a_spool_pass_decides_the_files_waiting_and_takes_them_out_of_the_spool() {
        let dir = project(&[("triggers/t.yaml", &trigger("t", "host.disk.full"))]);
        let mut server = server(dir.path());
        let spool = server.spool.dir.clone();
        std::fs::write(spool.join("a.json"), event("e-a", "host.disk.full")).unwrap();
        std::fs::write(
            spool.join("b.ndjson"),
            format!(
                "{}\n{}\n",
                event("e-b", "host.disk.full"),
                event("e-c", "host.cpu.hot")
            ),
        )
        .unwrap();
        // Written in place, they wait until they have settled; renamed in (as the watcher
        // reports a rename), they are taken at once.
        server.spool_pass();
        assert!(invocations(&server).is_empty());
        assert!(
            server.settle_at.is_some(),
            "no look-again time for unsettled files"
        );
        for name in ["a.json", "b.ndjson"] {
            server.renamed.add(spool.join(name));
        }

        server.spool_pass();

        let decided: Vec<_> = invocations(&server)
            .into_iter()
            .map(|i| (i.event_id, i.trigger))
            .collect();
        assert_eq!(
            decided,
            [
                ("e-a".to_string(), "t".to_string()),
                ("e-b".into(), "t".into())
            ],
            "one invocation per matching event; cpu.hot matches no trigger"
        );
        let left: Vec<_> = std::fs::read_dir(&spool)
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.path().is_file())
            .collect();
        assert!(left.is_empty(), "files left in the spool: {left:?}");
        // Both files are filed as done, the one whose second event matched nothing too.
        let mut done: Vec<_> = std::fs::read_dir(spool.join("done"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        done.sort();
        assert_eq!(done.len(), 2, "{done:?}");
    }

    #[test]
    fn emitted_events_are_decided_as_they_come() {
        let dir = project(&[("triggers/t.yaml", &trigger("t", "batch.job.done"))]);
        let mut server = server(dir.path());
        let value: serde_json::Value =
            serde_json::from_str(&event("e-emitted", "batch.job.done")).unwrap();
        let emitted =
            crate::event::validate(value, 200, u64::MAX, crate::event::Origin::Dispatcher).unwrap();

        server.dispatch_emitted(vec![emitted]);

        let all = invocations(&server);
        assert_eq!(all.len(), 1, "{all:?}");
        assert_eq!(all[0].event_id, "e-emitted");
        assert_eq!(all[0].trigger, "t");
    }
}
