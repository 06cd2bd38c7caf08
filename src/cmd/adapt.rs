//! `pap adapt NAME FILE…`: the events an HTTP post of each webhook body to the adapter's route
//! would make, printed one JSON line each, so a body can be tried without serve (and piped to
//! `pap dispatch -`). The mapping is serve's own (`adapter::events_of_body`).

use std::io::Write;

use super::{Outcome, context, webhook_body};
use crate::adapter::events_of_body;
use crate::cli::{AdaptArgs, Cli};
use crate::event::input::Source;

pub(super) fn run(cli: &Cli, args: &AdaptArgs) -> anyhow::Result<Outcome> {
    let project = context::load_project(cli)?;
    let adapter = match crate::adapter::named(&project.config.adapters, &args.adapter) {
        Ok(a) => a,
        Err(e) => {
            crate::say!("error: {e:#}");
            return Ok(Outcome::Usage);
        }
    };
    let max_body = project.config.listen.max_body_bytes;
    let max_event = project.config.max_event_bytes;
    // Received now, as a post would be (`refire_after` counts to it).
    let now = crate::clock::Clock::from_env()?.now_ms();
    let mut stdout = std::io::stdout().lock();
    let (mut unreadable, mut invalid) = (false, false);
    for file in &args.files {
        let source = Source::parse(file);
        let name = source.name();
        let body = match webhook_body::read(&source, max_body) {
            Ok(b) => b,
            Err(e) => {
                crate::say!("error: cannot read {name}: {e}");
                unreadable = true;
                continue;
            }
        };
        let events = match events_of_body(adapter, &body, max_event, now) {
            Ok(events) => events,
            Err(why) => {
                crate::say!("error: {name}: {why}");
                invalid = true;
                continue;
            }
        };
        for made in events {
            match made.event {
                Ok(event) => writeln!(stdout, "{}", event.value)?,
                Err(bad) => {
                    let at = made.index.map(|i| format!("[{i}]")).unwrap_or_default();
                    crate::say!("error: {name}{at}: {}", bad.reason);
                    invalid = true;
                }
            }
        }
    }
    stdout.flush()?;
    Ok(if unreadable {
        Outcome::Failure
    } else if invalid {
        Outcome::InvalidEvent
    } else {
        Outcome::Success
    })
}
