//! `pap schedule list` and `pap schedule next ID`: what the cron schedules will do.

use anyhow::{Context, bail};
use jiff::Timestamp;
use serde_json::json;

use super::{Outcome, context};
use crate::cli::{Cli, ScheduleCommand, ScheduleListArgs, ScheduleNextArgs};
use crate::clock::Clock;
use crate::composition;
use crate::manifest::compiled::Schedule;
use crate::schedule;

pub(super) fn run(cli: &Cli, command: &ScheduleCommand) -> anyhow::Result<Outcome> {
    match command {
        ScheduleCommand::List(args) => list(cli, args),
        ScheduleCommand::Next(args) => next(cli, args),
    }
}

fn list(cli: &Cli, args: &ScheduleListArgs) -> anyhow::Result<Outcome> {
    let project = context::load_project(cli)?;
    let now = Clock::from_env()?.now();
    let store = composition::open_existing(&context::place(cli, &project)?)?;
    if project.schedules.is_empty() && !args.json {
        crate::say!(
            "no schedules (define them under `schedules:` in pap.yaml or in schedules/*.yaml)"
        );
    }
    for s in &project.schedules {
        let last = match &store {
            Some(store) => store.read(|r| r.schedule_last(&s.id))?,
            None => None,
        };
        let next = schedule::next_fires(s, now, 1).into_iter().next();
        let next_utc = next.as_ref().map(|z| format!("{:.0}", z.timestamp()));
        let last_utc = last.map(crate::clock::rfc3339_ms);
        if args.json {
            let row = json!({
                "id": s.id,
                "cron": s.cron_text,
                "timezone": s.timezone_name,
                "enabled": s.enabled,
                "catch_up": s.catch_up,
                "event_type": s.event_type,
                "next_fire": next_utc,
                "last_fire": last_utc,
                "file": s.file,
            });
            crate::out!("{row}")?;
        } else {
            let state = if s.enabled { "" } else { " (disabled)" };
            crate::out!(
                "{}{state}  `{}` {}  emits {}  next {}  last {}",
                s.id,
                s.cron_text,
                s.timezone_name,
                s.event_type,
                next_utc.as_deref().unwrap_or("never"),
                last_utc.as_deref().unwrap_or("never"),
            )?;
        }
    }
    Ok(Outcome::Success)
}

fn next(cli: &Cli, args: &ScheduleNextArgs) -> anyhow::Result<Outcome> {
    let project = context::load_project(cli)?;
    let Some(s) = project.schedule(&args.id) else {
        let known: Vec<&str> = project.schedules.iter().map(|s| s.id.as_str()).collect();
        bail!(
            "no schedule `{}`; the project has: {}",
            args.id,
            if known.is_empty() {
                "none".to_owned()
            } else {
                known.join(", ")
            }
        );
    };
    let after: Timestamp = match &args.after {
        Some(text) => text
            .parse()
            .with_context(|| format!("--after {text:?} is not an RFC 3339 time"))?,
        None => Clock::from_env()?.now(),
    };
    for z in schedule::next_fires(s, after, args.count as usize) {
        print_fire(s, &z, args.json)?;
    }
    Ok(Outcome::Success)
}

fn print_fire(s: &Schedule, z: &jiff::Zoned, json: bool) -> std::io::Result<()> {
    let utc = format!("{:.0}", z.timestamp());
    let local = z.strftime("%Y-%m-%dT%H:%M:%S%:z").to_string();
    if json {
        let row = json!({
            "schedule": s.id,
            "fire_time": utc,
            "local_time": local,
            "timezone": s.timezone_name,
            "event_id": schedule::event_id(&s.id, z.timestamp()),
        });
        crate::out!("{row}")?;
    } else {
        crate::out!("{utc}  {local} {}", s.timezone_name)?;
    }
    Ok(())
}
