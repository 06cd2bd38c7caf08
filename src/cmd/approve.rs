//! `pap approve` and `pap reject`: a human's answer to an invocation awaiting approval.
//! An approval runs the invocation to its end before returning; a rejection ends it in its
//! failure event. Deadlines are enforced first, so an expired approval is never honoured.

use std::io::Write;

use super::{Outcome, context, invocations, typed_ids};
use crate::agent::Runtime;
use crate::agent::answer::{self, Answering, short_answer};
use crate::cli::{ApproveArgs, Cli, RejectArgs};
use crate::dispatcher::{Dispatcher, Format};
use crate::domain::{Answer, Status};
use crate::pipeline::Options;
use crate::serve::control;
use crate::term::Paint;

pub fn approve(cli: &Cli, args: &ApproveArgs) -> anyhow::Result<Outcome> {
    let by = context::actor(&args.by);
    approve_as(cli, &args.id, by, args.note.clone(), args.json, None)
}

/// Approves `id` as `by`; `answer` is the ATP response that did it (`pap respond`), else the
/// short form's answer is recorded on the approval request.
pub fn approve_as(
    cli: &Cli,
    id: &str,
    by: String,
    note: Option<String>,
    json: bool,
    answer: Option<Answer>,
) -> anyhow::Result<Outcome> {
    let runtime = context::runtime(cli, false)?;
    let rt = context::tokio_runtime()?;
    let mut dispatcher = dispatcher(&runtime, &rt, json);
    dispatcher.expire_approvals()?;

    let now = runtime.clock.now_ms();
    let id = match typed_ids::invocation(&*runtime.store, id)? {
        Ok(id) => id,
        Err(outcome) => return Ok(outcome),
    };
    let answer = answer.unwrap_or_else(|| short_answer("approve", &by, now));
    // A running serve takes the run over (contract section 5); else this process runs it,
    // and holds it so that a serve starting meanwhile leaves it alone.
    let state_dir = context::state_dir(cli, &runtime.project);
    let serve = control::running(&state_dir);
    let answering = Answering {
        by: &by,
        note: note.clone(),
        answer,
        now,
    };
    runtime
        .store
        .write(|tx| answer::approve(tx, &id, &answering, serve.is_none()))?;
    if let Some(serve) = serve {
        control::wake(&state_dir);
        crate::say!(
            "approved {id} (by {by}); handed to the running pap serve (pid {}); follow it with `pap invocations show {id}`",
            serve.pid
        );
        report(&runtime, &id, json)?;
        return Ok(Outcome::Success);
    }
    crate::say!("approved {id} (by {by}); running it");
    run_and_report(&runtime, &rt, &mut dispatcher, &id, json)
}

/// Runs invocation `id` in this process, prints how it ended, and dispatches what it
/// emitted: exit 0 when it succeeded, 4 when it failed after its retries.
pub(super) fn run_and_report(
    runtime: &Runtime,
    rt: &tokio::runtime::Runtime,
    dispatcher: &mut Dispatcher<'_>,
    id: &str,
    json: bool,
) -> anyhow::Result<Outcome> {
    let result = match rt.block_on(runtime.run(id)) {
        Ok(result) => result,
        // Its concurrency key or token budget has no room now: it stays queued, decided.
        Err(crate::agent::RunError::Waiting(waiting)) => {
            let why = waiting.why;
            crate::say!(
                "{id} is queued, not started: {why}; pap serve starts it when there is room"
            );
            report(runtime, id, json)?;
            dispatcher.settle_notifications()?;
            return Ok(Outcome::Success);
        }
        Err(e) => return Err(e.into()),
    };
    report(runtime, id, json)?;
    dispatcher.dispatch_emitted(result.emitted)?;
    dispatcher.settle_notifications()?;
    // An operator cancelling it meanwhile is a decision, not the agent's failure.
    Ok(if result.succeeded || result.cancelled {
        Outcome::Success
    } else {
        Outcome::AgentFailed
    })
}

pub fn reject(cli: &Cli, args: &RejectArgs) -> anyhow::Result<Outcome> {
    let by = context::actor(&args.by);
    reject_as(cli, &args.id, by, &args.reason, args.json, None)
}

/// Rejects `id` as `by` for `why`; `answer` as in [`approve_as`].
pub fn reject_as(
    cli: &Cli,
    id: &str,
    by: String,
    why: &str,
    json: bool,
    answer: Option<Answer>,
) -> anyhow::Result<Outcome> {
    let runtime = context::runtime(cli, false)?;
    let rt = context::tokio_runtime()?;
    let mut dispatcher = dispatcher(&runtime, &rt, json);
    dispatcher.expire_approvals()?;

    let now = runtime.clock.now_ms();
    let id = match typed_ids::invocation(&*runtime.store, id)? {
        Ok(id) => id,
        Err(outcome) => return Ok(outcome),
    };
    let answer = answer.unwrap_or_else(|| short_answer("reject", &by, now));
    let answering = Answering {
        by: &by,
        note: None,
        answer,
        now,
    };
    // Checked and ended in one transaction, so a racing answer cannot also win.
    let events = runtime
        .store
        .write(|tx| answer::reject(tx, &runtime.project, &id, &answering, why))?;
    crate::say!("rejected {id} (by {by})");
    report(&runtime, &id, json)?;
    dispatcher.dispatch_emitted(events)?;
    dispatcher.settle_notifications()?;
    Ok(Outcome::Success)
}

pub(super) fn dispatcher<'a>(
    runtime: &'a Runtime,
    rt: &'a tokio::runtime::Runtime,
    json: bool,
) -> Dispatcher<'a> {
    let format = if json {
        Format::Json
    } else {
        Format::Human(Paint::for_stdout())
    };
    // Events emitted by the answered invocation are printed as dispatch lines, on stderr
    // with --json so stdout stays one JSON document.
    let out: Box<dyn Write + Send> = if json {
        Box::new(std::io::stderr())
    } else {
        Box::new(std::io::stdout())
    };
    Dispatcher::new(
        runtime,
        Options::default(),
        rt,
        4,
        format,
        out,
        Box::new(|f| f()),
    )
}

pub(super) fn report(runtime: &Runtime, id: &str, json: bool) -> anyhow::Result<()> {
    let inv = runtime
        .store
        .read(|r| r.invocation(id))?
        .ok_or_else(|| anyhow::anyhow!("invocation {id} vanished"))?;
    let mut out = std::io::stdout().lock();
    if json {
        writeln!(
            out,
            "{}",
            serde_json::to_string(&invocations::view(&inv, false))?
        )?;
    } else {
        let result = match (&inv.status, &inv.error) {
            (Status::Succeeded, _) => format!("succeeded after {} attempt(s)", inv.attempts),
            (s, Some(e)) => format!("{}: {e}", s.as_str()),
            (s, None) => s.as_str().to_owned(),
        };
        // The error quotes an agent's stderr or a provider's body: escaped for the terminal.
        writeln!(
            out,
            "{}",
            crate::term::for_humans(&format!("{id}: {result}"))
        )?;
        if !inv.emitted.is_empty() {
            writeln!(out, "  emitted {}", inv.emitted.join(", "))?;
        }
    }
    Ok(())
}
