//! Schedules (`schedules/*.yaml`): each one due on the clock fires its event, decided like any
//! other; a serve that was down fires what it missed as the schedule's `catch_up` says.

use crate::domain::Runner;
use crate::event::{self, Origin};
use crate::schedule;
use crate::storage;

use super::*;

impl Server {
    pub(super) fn fire_schedules(&mut self) {
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
}

#[cfg(test)]
mod tests {
    use super::super::test_server::{invocations, project, server, trigger};

    const HOURLY: &str = "schedule:\n  id: hourly\n  cron: \"0 * * * *\"\n  timezone: UTC\n  catch_up: 1\n  event:\n    type: reports.hourly.due\n";

    #[test]
    fn a_new_schedule_starts_from_now_and_fires_nothing_missed() {
        let dir = project(&[
            ("schedules/hourly.yaml", HOURLY),
            ("triggers/t.yaml", &trigger("t", "reports.hourly.due")),
        ]);
        let mut server = server(dir.path());
        server.fire_schedules();
        assert!(invocations(&server).is_empty());
        let last = server
            .runtime
            .store
            .read(|r| r.schedule_last("hourly"))
            .unwrap();
        assert_eq!(last, Some(server.runtime.clock.now_ms()));
    }

    #[test]
    fn a_schedule_behind_fires_what_catch_up_allows_once() {
        let dir = project(&[
            ("schedules/hourly.yaml", HOURLY),
            ("triggers/t.yaml", &trigger("t", "reports.hourly.due")),
        ]);
        let mut server = server(dir.path());
        let now = server.runtime.clock.now_ms();
        // Three hours behind, at 06:00: 03:00, 04:00 and 05:00 were missed (catch_up fires
        // the last of them) and 06:00 is due.
        server
            .runtime
            .store
            .write(|tx| tx.set_schedule_last("hourly", now - 3 * 3_600_000 - 1))
            .unwrap();

        server.fire_schedules();
        server.fire_schedules();

        let fired: Vec<_> = invocations(&server)
            .into_iter()
            .map(|i| (i.event_id, i.event_type))
            .collect();
        let due = "reports.hourly.due".to_string();
        assert_eq!(
            fired,
            [
                ("sch_hourly_20260311T050000Z".to_string(), due.clone()),
                ("sch_hourly_20260311T060000Z".to_string(), due),
            ],
            "the second pass fired again, or catch_up was not kept"
        );
        let last = server
            .runtime
            .store
            .read(|r| r.schedule_last("hourly"))
            .unwrap();
        assert_eq!(last, Some(now));
    }
}
