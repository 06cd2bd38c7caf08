//! `pap approve` and `pap reject`: a human's answer to an invocation awaiting approval.
//! An approval runs the invocation to its end before returning; a rejection ends it in its
//! failure event. Deadlines are enforced first, so an expired approval is never honoured.

use std::io::Write;

use super::{Outcome, context, typed_ids};
use crate::agent::Runtime;
use crate::agent::answer::{self, Answering, short_answer};
use crate::cli::{ApproveArgs, Cli, RejectArgs};
use crate::dispatcher::{Dispatcher, Format};
use crate::domain::{Answer, Status};
use crate::pipeline::Options;
use crate::serve::control;
use crate::term::Paint;

pub(super) fn approve(cli: &Cli, args: &ApproveArgs) -> anyhow::Result<Outcome> {
    let by = context::actor(&args.by);
    approve_as(cli, &args.id, by, args.note.clone(), args.json, None)
}

/// Approves `id` as `by`; `answer` is the ATP response that did it (`pap respond`), else the
/// short form's answer is recorded on the approval request.
pub(super) fn approve_as(
    cli: &Cli,
    id: &str,
    by: String,
    note: Option<String>,
    json: bool,
    answer: Option<Answer>,
) -> anyhow::Result<Outcome> {
    let runtime = context::runtime(cli, false)?;
    let rt = context::tokio_runtime()?;
    let _traces = context::traces(&runtime, &rt);
    let (mut dispatcher, captured) = dispatcher(&runtime, &rt, json);
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
        .write_or_refuse(|tx| answer::approve(tx, &id, &answering, serve.is_none()))??;
    if let Some(serve) = serve {
        control::wake(&state_dir);
        crate::say!(
            "approved {id} (by {by}); handed to the running pap serve (pid {}); follow it with `pap invocations show {id}`",
            serve.pid
        );
        report(&runtime, &id, json, &captured)?;
        return Ok(Outcome::Success);
    }
    crate::say!("approved {id} (by {by}); running it");
    run_and_report(&runtime, &rt, &mut dispatcher, &captured, &id, json)
}

/// Runs invocation `id` in this process, prints how it ended, and dispatches what it
/// emitted: exit 0 when it succeeded, 4 when it failed after its retries.
pub(super) fn run_and_report(
    runtime: &Runtime,
    rt: &tokio::runtime::Runtime,
    dispatcher: &mut Dispatcher<'_>,
    captured: &Captured,
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
            dispatcher.settle_notifications()?;
            dispatcher.finish(false)?;
            report(runtime, id, json, captured)?;
            return Ok(Outcome::Success);
        }
        Err(e) => return Err(e.into()),
    };
    // A person reads how it ended first; a script gets one document, written once the
    // emitted events are decided too.
    if !json {
        report(runtime, id, json, captured)?;
    }
    dispatcher.dispatch_emitted(result.emitted)?;
    dispatcher.settle_notifications()?;
    if json {
        // Every line the printer thread has is in `captured` once it is done.
        dispatcher.finish(false)?;
        report(runtime, id, json, captured)?;
    }
    // An operator cancelling it meanwhile is a decision, not the agent's failure.
    Ok(if result.succeeded || result.cancelled {
        Outcome::Success
    } else {
        Outcome::AgentFailed
    })
}

pub(super) fn reject(cli: &Cli, args: &RejectArgs) -> anyhow::Result<Outcome> {
    let by = context::actor(&args.by);
    reject_as(cli, &args.id, by, &args.reason, args.json, None)
}

/// Rejects `id` as `by` for `why`; `answer` as in [`approve_as`].
pub(super) fn reject_as(
    cli: &Cli,
    id: &str,
    by: String,
    why: &str,
    json: bool,
    answer: Option<Answer>,
) -> anyhow::Result<Outcome> {
    let runtime = context::runtime(cli, false)?;
    let rt = context::tokio_runtime()?;
    let _traces = context::traces(&runtime, &rt);
    let (mut dispatcher, captured) = dispatcher(&runtime, &rt, json);
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
        .write_or_refuse(|tx| answer::reject(tx, &runtime.project, &id, &answering, why))??;
    crate::say!("rejected {id} (by {by})");
    if !json {
        report(&runtime, &id, json, &captured)?;
    }
    dispatcher.dispatch_emitted(events)?;
    dispatcher.settle_notifications()?;
    if json {
        dispatcher.finish(false)?;
        report(&runtime, &id, json, &captured)?;
    }
    Ok(Outcome::Success)
}

/// The dispatch lines of the events an answered invocation emitted, kept for the one JSON
/// document `--json` prints (see [`report`]).
#[derive(Clone, Default)]
pub(super) struct Captured(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let mut held = self.0.lock().unwrap_or_else(|p| p.into_inner());
        held.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    /// The JSON lines written so far, taken.
    fn take_lines(&self) -> Vec<serde_json::Value> {
        let mut held = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let text = String::from_utf8_lossy(&std::mem::take(&mut *held)).into_owned();
        text.lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }
}

/// The dispatcher for the events an answered or retried invocation emits. A person sees
/// their dispatch lines on stdout; with `--json` they are captured and become the
/// `dispatched` field of the one document [`report`] prints, so that stdout holds a single
/// JSON document and stderr none.
pub(super) fn dispatcher<'a>(
    runtime: &'a Runtime,
    rt: &'a tokio::runtime::Runtime,
    json: bool,
) -> (Dispatcher<'a>, Captured) {
    let captured = Captured::default();
    let format = if json {
        Format::Json
    } else {
        Format::Human(Paint::for_stdout())
    };
    let out: Box<dyn Write + Send> = if json {
        Box::new(captured.clone())
    } else {
        Box::new(std::io::stdout())
    };
    let dispatcher = Dispatcher::new(
        runtime,
        Options::default(),
        rt,
        4,
        format,
        out,
        Box::new(|f| f()),
    );
    (dispatcher, captured)
}

/// Prints how invocation `id` stands: a line for a person, or with `json` one document, the
/// invocation's JSON view with `dispatched` (the dispatch lines of the events it emitted that
/// this command decided).
pub(super) fn report(
    runtime: &Runtime,
    id: &str,
    json: bool,
    captured: &Captured,
) -> anyhow::Result<()> {
    let inv = runtime
        .store
        .read(|r| r.invocation(id))?
        .ok_or_else(|| anyhow::anyhow!("invocation {id} vanished"))?;
    let mut out = std::io::stdout().lock();
    if json {
        let mut view = crate::views::invocation(&inv, false);
        if let Some(object) = view.as_object_mut() {
            object.insert("dispatched".into(), captured.take_lines().into());
        }
        writeln!(out, "{}", serde_json::to_string(&view)?)?;
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
