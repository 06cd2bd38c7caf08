//! `pap inbox`: read the human inbox after a watermark, follow it, acknowledge messages,
//! open and close session threads.

use std::io::Write;
use std::time::Duration;

use anyhow::bail;

use super::{Outcome, context};
use crate::cli::{Cli, InboxArgs, InboxCommand, SessionCommand};
use crate::clock::rfc3339_ms;
use crate::composition;
use crate::domain::{InboxMessage, Level};
use crate::notify::inbox::{self, Acked};
use crate::storage::{Stamp, Storage};
use crate::term::Paint;

pub(super) fn run(cli: &Cli, args: &InboxArgs) -> anyhow::Result<Outcome> {
    match &args.command {
        None => {
            let Some(store) = context::store_to_read(cli)? else {
                return Ok(Outcome::Success);
            };
            let limit = args.limit.unwrap_or(usize::MAX);
            let session = args.session.as_deref();
            // A page per read, printed as it comes: a listing of the whole inbox holds a
            // page, never the inbox.
            let (mut shown, mut after) = (0, args.after);
            loop {
                let want = PAGE.min(limit - shown);
                let lines = read(store.as_ref(), after, want, session)?;
                print(&lines, args.json)?;
                shown += lines.len();
                match lines.last() {
                    Some((m, _)) if lines.len() == want && shown < limit => after = m.id,
                    _ => break,
                }
            }
            // Escalations due but not recorded come after every message: with a page that
            // reached the end of the inbox, as lines without an id (--json), or as a count.
            if shown < limit {
                let due = escalations_due(store.as_ref(), session, limit - shown)?;
                if args.json {
                    print_due(&due)?;
                } else {
                    say_due(due.len())?;
                }
            }
            Ok(Outcome::Success)
        }
        Some(InboxCommand::Ack { ids, by }) => {
            let project = context::load_project(cli)?;
            let store = composition::open(&context::place(cli, &project)?)?;
            let now = composition::clock_for(&*store)?.now_ms();
            let user = by
                .clone()
                .unwrap_or_else(|| project.config.notify.user.clone());
            // One transaction per id: a bad id is reported and the others still count.
            let mut failed = false;
            for id in ids {
                match store.write(|tx| inbox::ack(tx, *id, &user, now)) {
                    Ok(Ok(Acked::Delivered { notification })) => {
                        crate::out!("{id}: {notification} delivered")?
                    }
                    Ok(Ok(Acked::Already { notification })) => {
                        crate::out!("{id}: {notification} was already delivered")?
                    }
                    Ok(Err(refused)) => {
                        crate::say!("error: {refused}");
                        failed = true;
                    }
                    Err(e) => {
                        crate::say!("error: {e}");
                        failed = true;
                    }
                }
            }
            Ok(if failed {
                Outcome::Failure
            } else {
                Outcome::Success
            })
        }
        Some(InboxCommand::Watch {
            after,
            interval,
            json,
        }) => watch(&context::place_to_read(cli)?, *after, *interval, *json),
        Some(InboxCommand::Session(cmd)) => {
            let project = context::load_project(cli)?;
            session(&context::place(cli, &project)?, &project, cmd)
        }
    }
}

/// How many inbox messages one read takes before they are printed.
const PAGE: usize = 256;

/// Messages after `after`, each with its notification's live status, as JSON views.
fn read(
    store: &dyn Storage,
    after: u64,
    limit: usize,
    session: Option<&str>,
) -> anyhow::Result<Vec<(InboxMessage, serde_json::Value)>> {
    let now = composition::clock_for(store)?.now_ms();
    Ok(store.read(|r| {
        let n = r;
        let msgs = n.inbox_after(after, limit, &|m| {
            session.is_none_or(|s| m.session.as_deref() == Some(s))
        })?;
        let mut out = Vec::new();
        for m in msgs {
            // As of now: an escalation that is due shows, though nobody recorded it yet.
            let ntf = n
                .notification(&m.notification_id)?
                .map(|ntf| ntf.as_of(now).0);
            let view = inbox::view(&m, ntf.as_ref(), now);
            out.push((m, view));
        }
        Ok(out)
    })?)
}

/// `pap inbox --json`'s lines for the escalations due now (ANP 6.2) that no writer recorded
/// yet, in `session` when one is named, at most `limit`.
fn escalations_due(
    store: &dyn Storage,
    session: Option<&str>,
    limit: usize,
) -> anyhow::Result<Vec<serde_json::Value>> {
    let now = composition::clock_for(store)?.now_ms();
    let keep = |n: &crate::domain::Notification| {
        session.is_none_or(|s| {
            n.routing.address == crate::domain::Address::Session && n.session.as_deref() == Some(s)
        })
    };
    let due = store.read(|r| crate::notify::due::escalations_due(r, now, limit, &keep))?;
    Ok(due
        .iter()
        .map(|n| crate::notify::due::inbox_line(n, now))
        .collect())
}

fn print_due(due: &[serde_json::Value]) -> anyhow::Result<()> {
    let mut out = String::new();
    for v in due {
        out.push_str(&serde_json::to_string(v)?);
        out.push('\n');
    }
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(out.as_bytes())?;
    stdout.flush()?;
    Ok(())
}

/// Says how many notifications handed to an agent are past their deadline: the watchdog of
/// the next pap that writes puts them in this inbox (`--json` shows them now).
fn say_due(due: usize) -> anyhow::Result<()> {
    if due > 0 {
        let p = Paint::for_stdout();
        let line = format!(
            "{due} notification(s) handed to an agent are past their delivery deadline: escalated, they come here when the next pap writes (`pap inbox --json` and `pap notifications --status escalated` show them now)"
        );
        crate::out!("{}", p.yellow(&line))?;
    }
    Ok(())
}

fn print(lines: &[(InboxMessage, serde_json::Value)], json: bool) -> anyhow::Result<()> {
    let mut out = String::new();
    let paint = Paint::for_stdout();
    for (m, v) in lines {
        if json {
            out.push_str(&serde_json::to_string(v)?);
            out.push('\n');
        } else {
            let start = out.len();
            human(m, v, paint, &mut out);
            crate::term::escape_from(&mut out, start);
        }
    }
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(out.as_bytes())?;
    stdout.flush()?;
    Ok(())
}

fn human(m: &InboxMessage, v: &serde_json::Value, p: Paint, out: &mut String) {
    let level = match m.level {
        Level::Critical | Level::Error => p.red(m.level.as_str()),
        Level::Warning => p.yellow(m.level.as_str()),
        Level::Info => m.level.as_str().to_owned(),
    };
    let status = v["status"].as_str().unwrap_or("");
    let mut head = format!(
        "#{} {} {level:<8} {} [{status}]",
        m.id,
        rfc3339_ms(m.ts),
        m.kind
    );
    if let Some(s) = &m.session {
        head.push_str(&format!(" session {s}"));
    }
    match &m.posted_by {
        Some(by) => head.push_str(&format!(" (by {}, {})", by.principal, m.author)),
        None if m.author != "system" => head.push_str(&format!(" (by {})", m.author)),
        None => {}
    }
    if let Some(old) = m.supersedes {
        head.push_str(&format!(" (replaces #{old})"));
    }
    out.push_str(&head);
    out.push('\n');
    out.push_str(&format!("  {}\n", m.content));
    if let Some(atp) = &m.atp {
        let state = v["approval"]["state"].as_str().unwrap_or("open");
        let inv = atp["context"]["metadata"]["invocation_id"]
            .as_str()
            .unwrap_or("");
        if state == "open" {
            out.push_str(&format!(
                "  approval request {} (deadline {}): `pap approve {inv}`, `pap reject {inv} --reason …`, or `pap respond FILE`\n",
                atp["id"].as_str().unwrap_or(""),
                atp["deadline"].as_str().unwrap_or("none"),
            ));
        } else {
            out.push_str(&format!("  approval request: {state}\n"));
        }
    }
}

/// Polls the store for messages past the last one printed. Reading never writes, so a
/// watcher costs a running serve nothing but turns on the file.
/// Messages one look of `inbox watch` takes.
const WATCH_BATCH: usize = 1000;

fn watch(
    place: &composition::Place,
    after: Option<u64>,
    interval: Duration,
    json: bool,
) -> anyhow::Result<Outcome> {
    let store = composition::open(place)?;
    let mut mark = match after {
        Some(a) => a,
        None => store.read(|r| r.inbox_last())?,
    };
    let pause = interval.max(Duration::from_millis(50));
    let mut seen = None;
    loop {
        // Each read makes a serve that holds the store give it up for a moment: look only
        // when the file changed.
        let now = store.stamp();
        if !Stamp::may_differ(seen, now) {
            std::thread::sleep(pause);
            continue;
        }
        seen = now;
        let lines = read(store.as_ref(), mark, WATCH_BATCH, None)?;
        if lines.len() == WATCH_BATCH {
            // More may wait behind this batch, whatever the file's stamp says.
            seen = None;
        }
        if let Some((last, _)) = lines.last() {
            mark = last.id;
            print(&lines, json)?;
        } else {
            std::thread::sleep(pause);
        }
    }
}

fn session(
    place: &composition::Place,
    project: &crate::manifest::Project,
    cmd: &SessionCommand,
) -> anyhow::Result<Outcome> {
    let store = composition::open(place)?;
    let now = composition::clock_for(&*store)?.now_ms();
    match cmd {
        SessionCommand::Open { name, agent } => {
            check_name(name)?;
            if let Some(agent) = agent
                && project.agent(agent).is_none()
            {
                bail!("no agent {agent} in this project (`pap lint` lists what loads)");
            }
            let new = store.write(|tx| {
                let new = tx.session_open(name, now)?;
                if agent.is_some() || new {
                    tx.session_bind(name, agent.as_deref())?;
                }
                Ok(new)
            })?;
            let bound = agent
                .as_deref()
                .map(|a| format!("; posts in it reach agent {a} at its next turn"))
                .unwrap_or_default();
            crate::out!(
                "session {name} {}{bound}",
                if new { "opened" } else { "was already open" }
            )?;
        }
        SessionCommand::Close { name } => {
            if !store.write(|tx| tx.session_close(name))? {
                bail!("no open session {name}");
            }
            crate::out!("session {name} closed: its notifications go to the user's inbox now")?;
        }
        SessionCommand::List { json } => {
            let sessions = store.read(|r| {
                let mut all = Vec::new();
                for (name, at) in r.sessions()? {
                    let agent = r.session_agent(&name)?;
                    all.push((name, at, agent));
                }
                Ok(all)
            })?;
            for (name, at, agent) in sessions {
                if *json {
                    crate::out!(
                        "{}",
                        serde_json::json!({"name": name, "opened_at": rfc3339_ms(at), "agent": agent})
                    )?;
                } else {
                    let agent = agent.map(|a| format!("  agent {a}")).unwrap_or_default();
                    crate::out!("{name}  opened {}{agent}", rfc3339_ms(at))?;
                }
            }
        }
    }
    Ok(Outcome::Success)
}

fn check_name(name: &str) -> anyhow::Result<()> {
    if name.is_empty() || name.chars().any(|c| c.is_control()) {
        bail!("a session name must be non-empty text without control characters");
    }
    Ok(())
}
