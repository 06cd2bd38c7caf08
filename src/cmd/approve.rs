//! `pap approve` and `pap reject`: a human's answer to an invocation awaiting approval.
//! An approval runs the invocation to its end before returning; a rejection ends it in its
//! failure event. Deadlines are enforced first, so an expired approval is never honoured.

use std::io::Write;

use super::{Outcome, context, invocations, typed_ids};
use crate::agent::{Runtime, end_in_tx};
use crate::cli::{ApproveArgs, Cli, RejectArgs};
use crate::dispatcher::{Dispatcher, Format};
use crate::domain::lease::HOLD_MARGIN_MS;
use crate::domain::{Answer, ApprovalDecision, Invocation, Lease, Status};
use crate::notify::atp;
use crate::pipeline::{Options, audit_entry};
use crate::serve::control;
use crate::storage::{self, WriteTx};
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
    runtime.store.write(|tx| {
        let mut inv = awaiting(tx, &id)?;
        if let Some(request) = &inv.approval_request {
            atp::record_answer(tx, request, answer.clone(), now)?;
        }
        let decision = ApprovalDecision {
            approved: true,
            by: by.clone(),
            at: now,
            note: note.clone(),
        };
        let holder = match serve {
            None => Some(Lease::mine(tx.issue_lease_token()?, now, HOLD_MARGIN_MS)),
            Some(_) => None,
        };
        inv.approve(decision, holder, now)
            .map_err(|e| storage::Error::Conflict(e.to_string()))?;
        tx.audit(audit_entry(
            &inv,
            now,
            "approved",
            Some(by.clone()),
            note.clone(),
        ))?;
        tx.put_invocation(&inv)
    })?;
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
        Err(crate::agent::RunError::Waiting(why)) => {
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
    let reason = format!("rejected by {by}: {why}");
    let answer = answer.unwrap_or_else(|| short_answer("reject", &by, now));
    // Checked and ended in one transaction, so a racing answer cannot also win.
    let events = runtime.store.write(|tx| {
        let mut inv = awaiting(tx, &id)?;
        if let Some(request) = &inv.approval_request {
            atp::record_answer(tx, request, answer.clone(), now)?;
        }
        inv.approval = Some(ApprovalDecision {
            approved: false,
            by: by.clone(),
            at: now,
            note: Some(why.to_owned()),
        });
        end_in_tx(
            tx,
            &runtime.project,
            &mut inv,
            Status::Rejected,
            &reason,
            Some(by.clone()),
            now,
        )
    })?;
    crate::say!("rejected {id} (by {by})");
    report(&runtime, &id, json)?;
    dispatcher.dispatch_emitted(events)?;
    dispatcher.settle_notifications()?;
    Ok(Outcome::Success)
}

/// What `pap approve`/`pap reject` record on the approval request: the same shape as an ATP
/// answer, from the `--by` human.
fn short_answer(action: &str, by: &str, now: i64) -> Answer {
    Answer {
        action_id: action.to_owned(),
        responder: serde_json::json!({"id": by, "type": "human"}),
        responded_at: None,
        recorded_at: now,
    }
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

/// The invocation, if it is awaiting approval (re-read inside the write transaction, so two
/// answers racing cannot both win).
fn awaiting(tx: &mut dyn WriteTx, id: &str) -> storage::Result<Invocation> {
    let inv = tx
        .invocation(id)?
        .ok_or_else(|| storage::Error::Conflict(format!("no invocation {id} in this state dir")))?;
    check_awaiting(&inv)?;
    Ok(inv)
}

fn check_awaiting(inv: &Invocation) -> storage::Result<()> {
    match inv.status {
        Status::AwaitingApproval => Ok(()),
        Status::Expired => Err(storage::Error::Conflict(format!(
            "{} expired: {} (an expired approval is a denial)",
            inv.id,
            inv.error
                .as_deref()
                .unwrap_or("its approval deadline passed")
        ))),
        other => Err(storage::Error::Conflict(format!(
            "{} is {}, not awaiting approval",
            inv.id,
            other.as_str()
        ))),
    }
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
