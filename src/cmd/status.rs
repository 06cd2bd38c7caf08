//! `pap status`: the report of [`crate::status_report`], for a person or a script.

use std::fmt::Write as _;

use super::{Outcome, context};
use crate::cli::{Cli, StatusArgs};
use crate::composition;
use crate::status_report::{Report, gather};
use crate::term::Paint;

pub(super) fn run(cli: &Cli, args: &StatusArgs) -> anyhow::Result<Outcome> {
    let place = context::place_to_read(cli)?;
    let state_dir = place.state_dir.clone();
    let Some(store) = composition::open_existing(&place)? else {
        crate::say!(
            "error: no state store at {} (nothing was decided here yet, or --state points elsewhere)",
            place.shown()
        );
        return Ok(Outcome::Failure);
    };
    let clock = composition::clock_for(&*store)?;
    let now = clock.now_ms();
    // Schedules come from the project; a broken one is reported, not fatal.
    let project = context::load_project(cli).ok();
    let mut report = gather(&*store, &state_dir, project.as_ref(), now)?;
    if args.tables {
        report.store.tables = store.table_sizes()?;
    }
    if args.json {
        crate::out!("{}", serde_json::to_string(&report)?)?;
    } else {
        let mut text = String::new();
        human(&report, Paint::for_stdout(), &mut text);
        std::io::Write::write_all(&mut std::io::stdout(), text.as_bytes())?;
    }
    Ok(if report.healthy {
        Outcome::Success
    } else {
        Outcome::NeedsAttention
    })
}

fn human(r: &Report, p: Paint, o: &mut String) {
    let verdict = if r.healthy {
        p.green("healthy")
    } else {
        p.red("needs attention")
    };
    let _ = writeln!(o, "pap status: {verdict}");
    for a in &r.attention {
        let _ = writeln!(o, "  {} {a}", p.red("!"));
    }
    match &r.serve {
        Some(s) => {
            let _ = writeln!(o, "serve      running (pid {}, since {})", s.pid, s.since);
            if let Some(url) = &s.listen {
                let _ = writeln!(o, "listen     {url}");
            }
        }
        None => {
            let _ = writeln!(o, "serve      not running");
        }
    }
    let queue = if r.queue.is_empty() {
        "empty".to_owned()
    } else {
        r.queue
            .iter()
            .map(|(k, v)| format!("{v} {k}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let _ = writeln!(o, "queue      {queue}");
    if r.approvals.is_empty() {
        let _ = writeln!(o, "approvals  none waiting");
    } else {
        let shown = if r.approvals_waiting > r.approvals.len() as u64 {
            format!(" (the oldest {})", r.approvals.len())
        } else {
            String::new()
        };
        let _ = writeln!(
            o,
            "approvals  {} waiting, oldest first{shown}:",
            r.approvals_waiting
        );
        for a in &r.approvals {
            let deadline = a.deadline.as_deref().unwrap_or("no deadline");
            let late = if a.past_half {
                p.red(" (past half its deadline)")
            } else {
                String::new()
            };
            let _ = writeln!(
                o,
                "  {}  {} → {}  since {}  deadline {deadline}{late}",
                p.bold(&a.short_id),
                a.trigger,
                a.agent,
                a.waiting_since
            );
        }
    }
    if r.sinks.is_empty() {
        let _ = writeln!(o, "sinks      no failures");
    } else {
        for s in &r.sinks {
            let _ = writeln!(
                o,
                "sink       {}: {} failed, {} retrying{}",
                s.sink,
                s.failed,
                s.retrying,
                s.last_error
                    .as_deref()
                    .map(|e| format!(" (last: {e})"))
                    .unwrap_or_default()
            );
        }
    }
    for s in &r.schedules {
        let _ = writeln!(
            o,
            "schedule   {}{}: last {}, next {}",
            s.id,
            if s.enabled { "" } else { " (disabled)" },
            s.last_fire.as_deref().unwrap_or("never"),
            s.next_fire.as_deref().unwrap_or("never")
        );
    }
    for n in &r.nodes {
        let _ = writeln!(
            o,
            "node       {} ({} pid {}, pap {}{}), since {}, last seen {}{}",
            n.id,
            n.host,
            n.pid,
            n.version,
            n.listen
                .as_deref()
                .map(|l| format!(", {l}"))
                .unwrap_or_default(),
            n.since,
            n.last_seen,
            if n.alive { "" } else { " (gone?)" }
        );
    }
    // The tables' sizes only when asked for (`--tables`): measuring them reads every page.
    let live: u64 = r.store.tables.iter().map(|t| t.bytes).sum();
    let tables = if r.store.tables.is_empty() {
        String::new()
    } else {
        format!("; tables {:.1} MB", live as f64 / 1e6)
    };
    let _ = writeln!(
        o,
        "store      {} {} ({:.1} MB{tables})",
        r.store.kind,
        r.store.path,
        r.store.bytes as f64 / 1e6,
    );
    // The largest few that take a megabyte or more: where the room goes.
    for t in r
        .store
        .tables
        .iter()
        .take(5)
        .filter(|t| t.bytes >= 1_000_000)
    {
        let _ = writeln!(
            o,
            "             {:<22} {:>10} rows  {:>9.1} MB",
            t.name,
            t.rows,
            t.bytes as f64 / 1e6
        );
    }
    crate::term::escape_from(o, 0);
}
