//! `pap invocations [show ID]`: what was provoked, and what became of it.

use std::fmt::Write as _;
use std::io::Write;

use anyhow::bail;
use serde_json::Value;

use super::{Outcome, context};
use crate::cli::{Cli, InvocationsArgs, InvocationsCommand};
use crate::clock::rfc3339_ms;
use crate::domain::{Invocation, Transcript};
use crate::term::Paint;

pub(crate) fn run(cli: &Cli, args: &InvocationsArgs) -> anyhow::Result<Outcome> {
    // The two that write open the store for writing themselves.
    match &args.command {
        Some(InvocationsCommand::Retry(retry)) => {
            return super::invocation_control::retry(cli, retry);
        }
        Some(InvocationsCommand::Cancel(cancel)) => {
            return super::invocation_control::cancel(cli, cancel);
        }
        _ => {}
    }
    let store = context::store_to_read(cli)?;
    // What is due is shown as of now (an approval past its deadline has expired); the next
    // pap that writes records it. A listing never writes.
    let now = match &store {
        Some(store) => crate::composition::clock_for(&**store)?.now_ms(),
        None => crate::clock::Clock::from_env()?.now_ms(),
    };
    match &args.command {
        Some(InvocationsCommand::Retry(_) | InvocationsCommand::Cancel(_)) => {
            unreachable!("handled above")
        }
        Some(InvocationsCommand::Show { id, json }) => {
            let found = match &store {
                Some(s) => match super::typed_ids::invocation(&**s, id)? {
                    Ok(id) => s.read(|r| r.invocation(&id))?,
                    Err(outcome) => return Ok(outcome),
                },
                None => None,
            };
            let Some(inv) = found else {
                bail!("no invocation {id} in this state dir");
            };
            let inv = as_of(inv, now);
            let text = if *json {
                format!("{}\n", serde_json::to_string_pretty(&inv.view(true))?)
            } else {
                let p = Paint::for_stdout();
                let mut text = show_human(&inv, p);
                if inv.inv.status == crate::domain::Status::AwaitingApproval {
                    let short = match &store {
                        Some(s) => super::typed_ids::short_forms(&**s, &[inv.inv.id.as_str()])?
                            .remove(&inv.inv.id),
                        None => None,
                    };
                    let project = context::project_quietly(cli);
                    super::approver_view::append(
                        &mut text,
                        &inv.inv,
                        short.as_deref().unwrap_or(&inv.inv.id),
                        project.as_ref(),
                        super::approver_view::terminal_width(),
                        p,
                    );
                }
                crate::term::for_humans(&text).into_owned()
            };
            std::io::stdout().write_all(text.as_bytes())?;
        }
        None => return super::invocation_list::run(store.as_deref(), args, now),
    }
    Ok(Outcome::Success)
}

pub(crate) use crate::views::{AsOf, as_of};

fn status_painted(inv: &Invocation, p: Paint) -> String {
    let s = inv.status.as_str();
    match s {
        "succeeded" => p.green(s),
        "failed" | "rejected" | "expired" => p.red(s),
        "awaiting_approval" => p.yellow(s),
        "cancelled" => p.dim(s),
        _ => s.to_owned(),
    }
}

/// One row of the human listing.
pub(super) fn row_human(shown: &AsOf, short: &str, p: Paint, out: &mut String) {
    let inv = &shown.inv;
    let status = status_painted(inv, p);
    // Pad by the plain width, so colour codes do not break the columns.
    let pad = " ".repeat(18usize.saturating_sub(inv.status.as_str().len()));
    let _ = writeln!(
        out,
        "{}  {status}{pad}{:<9} {} → {}  {}  attempts {}/{}  {}",
        p.bold(short),
        inv.risk,
        inv.trigger,
        inv.agent,
        inv.event_id,
        inv.attempts,
        inv.max_attempts,
        p.dim(&rfc3339_ms(inv.updated_at))
    );
    if shown.recorded.is_some() {
        let _ = writeln!(out, "{}", p.dim(DUE_NOTE));
    }
}

/// An LLM attempt's turns: what the model said, each tool call with its arguments and result.
fn transcript_human(o: &mut String, t: &Transcript, p: Paint) {
    let _ = writeln!(
        o,
        "    {} {} · {} turns · {}",
        t.provider,
        t.model,
        t.turns.len(),
        crate::views::spend_line(t)
    );
    for (n, turn) in t.turns.iter().enumerate() {
        let _ = writeln!(
            o,
            "    {} {}",
            p.bold(&format!("turn {}", n + 1)),
            p.dim(&format!(
                "{} ms · stop {} · tokens {}/{}",
                turn.request_ms,
                turn.stop_reason.as_deref().unwrap_or("-"),
                turn.input_tokens,
                turn.output_tokens
            ))
        );
        for line in turn.text.lines() {
            let _ = writeln!(o, "      {line}");
        }
        for c in &turn.tool_calls {
            let mut tags = Vec::new();
            if c.external {
                tags.push("external");
            }
            if c.refused {
                tags.push("refused");
            } else if c.is_error {
                tags.push("error");
            }
            let tags = if tags.is_empty() {
                String::new()
            } else {
                format!(" [{}]", tags.join(", "))
            };
            let server = if c.server.is_empty() {
                String::new()
            } else {
                format!(" (mcp://{})", c.server)
            };
            let _ = writeln!(
                o,
                "      → {}{server}{tags} {}",
                p.bold(&c.tool),
                p.dim(&format!("{} ms", c.duration_ms))
            );
            let _ = writeln!(o, "        args   {}", c.arguments);
            let result = if c.is_error {
                p.red(&c.result)
            } else {
                c.result.clone()
            };
            let _ = writeln!(
                o,
                "        result {}",
                result.replace('\n', "\n               ")
            );
        }
    }
}

/// Said under an invocation whose status is due but not yet recorded.
const DUE_NOTE: &str =
    "  (its approval deadline has passed: the next pap that writes records it as expired)";

fn show_human(shown: &AsOf, p: Paint) -> String {
    let inv = &shown.inv;
    let mut o = String::new();
    let _ = writeln!(o, "{}  {}", p.bold(&inv.id), status_painted(inv, p));
    if shown.recorded.is_some() {
        let _ = writeln!(o, "{}", p.dim(DUE_NOTE));
    }
    let row = |o: &mut String, k: &str, v: String| {
        let _ = writeln!(o, "  {:<10}{v}", k);
    };
    row(&mut o, "trigger", inv.trigger.clone());
    if let Some(original) = &inv.retry_of {
        row(&mut o, "retry of", original.clone());
    }
    if let Some(key) = crate::views::idempotency_key(inv) {
        row(&mut o, "key", key);
    }
    row(
        &mut o,
        "agent",
        format!("{} (risk {})", inv.agent, inv.risk),
    );
    row(
        &mut o,
        "event",
        format!("{} {} (depth {})", inv.event_id, inv.event_type, inv.depth),
    );
    // A batch's run gets every event of it: each is listed (bounded; --json has them all).
    if let Some(batch) = crate::stages::batch_text::described(&inv.event) {
        row(&mut o, "batch", format!("{} event(s)", batch.total));
        for line in &batch.lines {
            let _ = writeln!(o, "    {line}");
        }
        if batch.more() > 0 {
            let _ = writeln!(o, "    and {} more (--json has them all)", batch.more());
        }
    }
    row(
        &mut o,
        "attempts",
        format!("{} of {}", inv.attempts, inv.max_attempts),
    );
    row(&mut o, "created", rfc3339_ms(inv.created_at));
    row(&mut o, "updated", rfc3339_ms(inv.updated_at));
    if let Some(d) = inv.approval_deadline {
        row(
            &mut o,
            "deadline",
            format!(
                "{} (approval; no answer by then is a denial)",
                rfc3339_ms(d)
            ),
        );
    }
    if let Some(a) = &inv.approval {
        let verb = if a.approved { "approved" } else { "rejected" };
        let note = a
            .note
            .as_deref()
            .map(|n| format!(": {n}"))
            .unwrap_or_default();
        row(
            &mut o,
            "decision",
            format!("{verb} by {} at {}{note}", a.by, rfc3339_ms(a.at)),
        );
    }
    if let Some(t) = inv.next_attempt_at {
        row(&mut o, "next try", rfc3339_ms(t));
    }
    for a in &inv.history {
        let end = a
            .ended_at
            .map(rfc3339_ms)
            .unwrap_or_else(|| "(running)".into());
        let how = match &a.error {
            Some(e) => format!("failed: {e}"),
            None if a.ended_at.is_some() => "ok".into(),
            None => String::new(),
        };
        row(
            &mut o,
            &format!("attempt {}", a.attempt),
            format!("{} → {end} {how}", rfc3339_ms(a.started_at)),
        );
        if let Some(t) = &a.transcript {
            transcript_human(&mut o, t, p);
        }
    }
    if let Some(out) = &inv.output {
        let text = match out {
            Value::String(s) => s.clone(),
            v => serde_json::to_string_pretty(v).unwrap_or_default(),
        };
        let _ = writeln!(o, "  output");
        for line in text.lines() {
            let _ = writeln!(o, "    {line}");
        }
    }
    if let Some(e) = &inv.error {
        row(&mut o, "error", p.red(e));
    }
    if !inv.emitted.is_empty() {
        row(&mut o, "emitted", inv.emitted.join(", "));
    }
    o
}
