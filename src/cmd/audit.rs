//! `pap audit`: the append-only log of medium and high risk invocations.

use std::fmt::Write as _;
use std::io::Write;

use serde_json::json;

use super::{Outcome, context};
use crate::cli::{AuditArgs, Cli};
use crate::clock::rfc3339_ms;
use crate::term::Paint;

const HUMAN_PAGE: usize = 50;

pub(super) fn run(cli: &Cli, args: &AuditArgs) -> anyhow::Result<Outcome> {
    let store = context::store_to_read(cli)?;
    if args.json && args.limit.is_none() {
        if let Some(s) = &store {
            stream_json(&**s)?;
        }
        return Ok(Outcome::Success);
    }
    let limit = args.limit.or((!args.json).then_some(HUMAN_PAGE));
    // Each entry with the idempotency key of its invocation's pair (contract section 3).
    let (entries, total) = match &store {
        Some(s) => s.read(|r| {
            let (entries, total) = r.audit(limit)?;
            let mut keyed = Vec::with_capacity(entries.len());
            for e in entries {
                let key = r
                    .invocation(&e.invocation_id)?
                    .and_then(|inv| crate::views::idempotency_key(&inv));
                keyed.push((e, key));
            }
            Ok((keyed, total))
        })?,
        None => (Vec::new(), 0),
    };
    let p = Paint::for_stdout();
    let mut out = String::new();
    for (e, key) in &entries {
        if args.json {
            out.push_str(&json_line(e, key.as_deref()).to_string());
            out.push('\n');
        } else {
            let actor = e
                .actor
                .as_deref()
                .map(|a| format!(" by {a}"))
                .unwrap_or_default();
            let detail = e
                .detail
                .as_deref()
                .map(|d| format!(": {d}"))
                .unwrap_or_default();
            let key = key
                .as_deref()
                .map(|k| format!(" key {k}"))
                .unwrap_or_default();
            let _ = writeln!(
                out,
                "{:>6} {} {:<16} {} ({} → {}, {}){actor}{detail}{}",
                e.seq,
                p.dim(&rfc3339_ms(e.at)),
                e.action,
                e.invocation_id,
                e.trigger,
                e.agent,
                e.risk,
                p.dim(&key)
            );
        }
    }
    if !args.json {
        crate::term::escape_from(&mut out, 0);
        if entries.is_empty() {
            out.push_str("the audit log is empty\n");
        } else if total > entries.len() {
            let _ = writeln!(
                out,
                "{}",
                p.dim(&format!("showing the last {} of {total}", entries.len()))
            );
        }
    }
    std::io::stdout().write_all(out.as_bytes())?;
    Ok(Outcome::Success)
}

/// An entry as `--json` prints it, with the idempotency key of its invocation's pair
/// (contract section 3).
fn json_line(e: &crate::domain::AuditEntry, key: Option<&str>) -> serde_json::Value {
    json!({
        "seq": e.seq, "at": rfc3339_ms(e.at), "action": e.action,
        "invocation_id": e.invocation_id, "trigger": e.trigger, "agent": e.agent,
        "risk": e.risk, "actor": e.actor, "detail": e.detail, "idempotency_key": key,
    })
}

/// How many entries one read takes before they are written.
const PAGE: usize = 256;

/// The whole log (`--json` without `--limit`, as the contract says), oldest first, a page
/// per read, written as it comes: memory holds a page, never the log.
fn stream_json(store: &dyn crate::storage::Storage) -> anyhow::Result<()> {
    use crate::storage::scan::Next;
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let mut after = 0;
    loop {
        let mut page = Vec::new();
        store.read(|r| {
            r.scan_audit(after, &mut |e| {
                let key = r
                    .invocation(&e.invocation_id)?
                    .and_then(|inv| crate::views::idempotency_key(&inv));
                page.push((e, key));
                Ok(if page.len() < PAGE {
                    Next::More
                } else {
                    Next::Stop
                })
            })
        })?;
        for (e, key) in &page {
            serde_json::to_writer(&mut out, &json_line(e, key.as_deref()))?;
            out.write_all(b"\n")?;
        }
        match page.last() {
            Some((e, _)) if page.len() == PAGE => after = e.seq,
            _ => break,
        }
    }
    out.flush()?;
    Ok(())
}
