//! `pap notifications`: the ANP ledger, every notification whatever its route, and one in
//! full (routing, lease, status history, sink deliveries).

use std::io::Write;

use anyhow::bail;

use super::{Outcome, context};
use crate::cli::{Cli, NotificationsArgs, NotificationsCommand};
use crate::clock::rfc3339_ms;
use crate::domain::Notification;
use crate::notify::inbox::notification_view;

const HUMAN_PAGE: usize = 20;

/// Said above a notification whose escalation is due but not yet recorded.
const DUE_NOTE: &str =
    "(past its delivery deadline: the next pap that writes records the escalation)\n";

/// The JSON view as of now, with `recorded_status` when the stored status differs.
fn view_as_of(
    n: &Notification,
    recorded: Option<crate::domain::NotifyStatus>,
) -> serde_json::Value {
    let mut v = notification_view(n);
    if let Some(recorded) = recorded {
        v["recorded_status"] = serde_json::json!(recorded.as_str());
    }
    v
}

pub(super) fn run(cli: &Cli, args: &NotificationsArgs) -> anyhow::Result<Outcome> {
    let store = context::store_to_read(cli)?;
    // What is due is shown as of now; a listing never writes.
    let now = match &store {
        Some(store) => crate::composition::clock_for(&**store)?.now_ms(),
        None => crate::clock::Clock::from_env()?.now_ms(),
    };
    let mut out = String::new();
    match &args.command {
        Some(NotificationsCommand::Show { id, json }) => {
            let found = match &store {
                Some(s) => match super::typed_ids::notification(&**s, id)? {
                    Ok(id) => s.read(|r| r.notification(&id))?,
                    Err(outcome) => return Ok(outcome),
                },
                None => None,
            };
            let Some(n) = found else {
                bail!("no notification {id} in this state dir");
            };
            let (n, recorded) = n.as_of(now);
            if *json {
                out = format!(
                    "{}\n",
                    serde_json::to_string_pretty(&view_as_of(&n, recorded))?
                );
            } else {
                if recorded.is_some() {
                    out.push_str(DUE_NOTE);
                }
                show_human(&n, &mut out);
                crate::term::escape_from(&mut out, 0);
            }
        }
        None if args.json && args.limit.is_none() => {
            if let Some(s) = &store {
                stream_json(&**s, args.status, now)?;
            }
        }
        None => {
            let limit = args.limit.or((!args.json).then_some(HUMAN_PAGE));
            let status = args.status;
            let (list, total) = match &store {
                Some(s) => s.read(|r| {
                    r.notifications(&|n| status.is_none_or(|st| n.status_at(now) == st), limit)
                })?,
                None => (Vec::new(), 0),
            };
            let shown = list.len();
            for n in list {
                let (n, recorded) = n.as_of(now);
                if args.json {
                    out.push_str(&serde_json::to_string(&view_as_of(&n, recorded))?);
                    out.push('\n');
                } else {
                    out.push_str(&crate::term::for_humans(&line(&n)));
                }
            }
            if !args.json && total > shown {
                out.push_str(&format!("({shown} of {total} shown; --limit N for more)\n"));
            }
        }
    }
    std::io::stdout().write_all(out.as_bytes())?;
    Ok(Outcome::Success)
}

/// How many notifications one read takes before they are written.
const PAGE: usize = 256;

/// Every notification `status` keeps (`--json` without `--limit`: all of them, as the
/// contract says), oldest first, a page per read, written as it comes: memory holds a page,
/// never the ledger.
fn stream_json(
    store: &dyn crate::storage::Storage,
    status: Option<crate::domain::NotifyStatus>,
    now: i64,
) -> anyhow::Result<()> {
    use crate::storage::scan::{Next, Order};
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let mut after = None;
    loop {
        let (mut page, mut last, mut looked) = (Vec::new(), after, 0);
        store.read(|r| {
            r.scan_notifications(Order::Oldest, after, &mut |n| {
                looked += 1;
                last = Some(n.seq);
                if status.is_none_or(|st| n.status_at(now) == st) {
                    page.push(n);
                }
                Ok(if looked < PAGE {
                    Next::More
                } else {
                    Next::Stop
                })
            })
        })?;
        for n in page {
            let (n, recorded) = n.as_of(now);
            serde_json::to_writer(&mut out, &view_as_of(&n, recorded))?;
            out.write_all(b"\n")?;
        }
        if looked < PAGE {
            break;
        }
        after = last;
    }
    out.flush()?;
    Ok(())
}

fn line(n: &Notification) -> String {
    format!(
        "{:<10} {:<10} {:<8} {:<30} {}/{}/{} lease {}{}\n",
        n.id,
        n.status.as_str(),
        n.level.as_str(),
        n.kind,
        json_word(&n.routing.address),
        json_word(&n.routing.target),
        json_word(&n.routing.handler),
        n.owner_lease,
        n.agent
            .as_ref()
            .map(|a| format!(" agent {a}"))
            .unwrap_or_default()
    )
}

fn json_word(v: &impl serde::Serialize) -> String {
    serde_json::to_value(v)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

fn show_human(n: &Notification, out: &mut String) {
    out.push_str(&line(n));
    out.push_str(&format!("  {}\n", n.content));
    out.push_str(&format!(
        "  owner {}, created {}",
        n.owner,
        rfc3339_ms(n.created_at)
    ));
    if let Some(d) = n.delivery_deadline {
        out.push_str(&format!(", deadline {}", rfc3339_ms(d)));
    }
    if let Some(a) = n.ack_at {
        out.push_str(&format!(", acknowledged {}", rfc3339_ms(a)));
    }
    out.push('\n');
    if !n.inbox.is_empty() {
        let ids: Vec<String> = n.inbox.iter().map(u64::to_string).collect();
        out.push_str(&format!("  inbox messages {}\n", ids.join(", ")));
    }
    for t in &n.history {
        out.push_str(&format!(
            "  {} {} → {} (lease {}, {}){}\n",
            rfc3339_ms(t.at),
            t.from.map_or("new", |f| f.as_str()),
            t.to.as_str(),
            t.lease,
            t.by,
            t.note
                .as_ref()
                .map(|x| format!(": {x}"))
                .unwrap_or_default()
        ));
    }
    for s in &n.sinks {
        out.push_str(&format!(
            "  sink {} (message {}): {:?} after {} attempt(s){}\n",
            s.sink,
            s.message,
            s.state,
            s.attempts,
            s.error
                .as_ref()
                .map(|e| format!(": {e}"))
                .unwrap_or_default()
        ));
    }
}
