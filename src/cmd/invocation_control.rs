//! `pap invocations retry` and `pap invocations cancel`: an operator's control over
//! invocations that ended without success, or that should not go on.

use anyhow::bail;

use super::{Outcome, approve, context, typed_ids};
use crate::cli::{CancelArgs, Cli, RetryArgs};
use crate::control as invocation;
use crate::domain::{Invocation, Lease, Status};
use crate::serve::control;

pub(super) fn retry(cli: &Cli, args: &RetryArgs) -> anyhow::Result<Outcome> {
    let runtime = context::runtime(cli, false)?;
    let rt = context::tokio_runtime()?;
    let _traces = context::traces(&runtime, &rt);
    let (mut dispatcher, captured) = approve::dispatcher(&runtime, &rt, args.json);
    // An approval past its deadline is recorded as expired first, so it can be retried.
    dispatcher.expire_approvals()?;

    let id = match typed_ids::invocation(&*runtime.store, &args.id)? {
        Ok(id) => id,
        Err(outcome) => return Ok(outcome),
    };
    let Some(old) = runtime.store.read(|r| r.invocation(&id))? else {
        bail!("no invocation {id} in this state dir");
    };
    if old.status == Status::Rejected && args.by.is_none() {
        crate::say!(
            "error: {id} was rejected by a person; retrying it overrides that decision, so say who does with --by NAME"
        );
        return Ok(Outcome::Usage);
    }
    let by = context::actor(&args.by);
    let now = runtime.clock.now_ms();
    let state_dir = context::state_dir(cli, &runtime.project);
    let serve = control::running(&state_dir);
    let run_here = serve.is_none() && !args.no_run;
    let project = runtime.project.clone();
    let again = runtime
        .store
        .write(|tx| invocation::retry(tx, &project, &id, &by, now, run_here))?;
    let again = match again {
        Ok(again) => again,
        Err(refused) => bail!("{refused}"),
    };
    let new = again.id.clone();
    if again.status == Status::AwaitingApproval {
        // The short form, as listings show it, to type next.
        let short = typed_ids::short_forms(&*runtime.store, &[new.as_str()])?
            .remove(&new)
            .unwrap_or_else(|| new.clone());
        crate::say!(
            "{new} retries {id} (by {by}) and waits for approval: `pap approve {short}` or `pap reject {short} --reason …`"
        );
        approve::report(&runtime, &new, args.json, &captured)?;
        return Ok(Outcome::Success);
    }
    if !run_here {
        let whom = match &serve {
            Some(s) if control::wake(&state_dir) => {
                format!("the running pap serve (pid {})", s.pid)
            }
            _ => "the next `pap serve`".to_owned(),
        };
        crate::say!("{new} retries {id} (by {by}); queued for {whom}");
        approve::report(&runtime, &new, args.json, &captured)?;
        return Ok(Outcome::Success);
    }
    crate::say!("{new} retries {id} (by {by}); running it");
    approve::run_and_report(&runtime, &rt, &mut dispatcher, &captured, &new, args.json)
}

pub(super) fn cancel(cli: &Cli, args: &CancelArgs) -> anyhow::Result<Outcome> {
    let runtime = context::runtime(cli, false)?;
    let rt = context::tokio_runtime()?;
    let _traces = context::traces(&runtime, &rt);
    let (mut dispatcher, _) = approve::dispatcher(&runtime, &rt, args.json);
    dispatcher.expire_approvals()?;
    let by = context::actor(&args.by);
    let reason = match &args.reason {
        Some(why) => format!("cancelled by {by}: {why}"),
        None => format!("cancelled by {by}"),
    };
    let now = runtime.clock.now_ms();
    let project = runtime.project.clone();

    // Every invocation named (or every unfinished one of the trigger) in one transaction:
    // a kill switch either takes effect for all of them or for none.
    let ids: Vec<String> = match &args.trigger {
        Some(trigger) => {
            let (list, _) = runtime.store.read(|r| {
                r.invocations(
                    &|i| i.trigger == *trigger && !i.internal && !i.status.is_terminal(),
                    None,
                )
            })?;
            if list.is_empty() && project.trigger(trigger).is_none() {
                crate::say!(
                    "error: no trigger {trigger} in the project, and no invocation of it to cancel"
                );
                return Ok(Outcome::Failure);
            }
            list.into_iter().map(|i| i.id).collect()
        }
        None => {
            let mut ids = Vec::with_capacity(args.ids.len());
            for typed in &args.ids {
                match typed_ids::invocation(&*runtime.store, typed)? {
                    Ok(id) => ids.push(id),
                    Err(outcome) => return Ok(outcome),
                }
            }
            ids
        }
    };
    let grace_ms = i64::try_from(args.grace.as_millis()).unwrap_or(i64::MAX / 4);
    let (cancelled, refused, emitted) = runtime.store.write(|tx| {
        let mut cancelled: Vec<(Invocation, Option<Lease>)> = Vec::new();
        let mut refused = Vec::new();
        let mut emitted = Vec::new();
        for id in &ids {
            match invocation::cancel(tx, &project, id, &reason, &by, now, grace_ms)? {
                Ok(done) => {
                    cancelled.push((done.invocation, done.lease));
                    emitted.extend(done.emitted);
                }
                Err(why) => refused.push(why),
            }
        }
        Ok((cancelled, refused, emitted))
    })?;

    // Recorded first, so a runner that outlives its processes finds its lease gone and
    // records nothing over the cancellation.
    let grace = args.grace;
    let state_dir = runtime.store.dir();
    for (inv, lease) in &cancelled {
        let stopped = match (lease, &state_dir) {
            (Some(lease), Some(dir)) if lease.node == crate::liveness::this_node() => {
                crate::agent::groups::read(dir, &inv.id)
                    .map(|group| crate::agent::groups::stop(&group, grace))
            }
            (Some(lease), _) => {
                crate::say!(
                    "  {} runs on another node ({}); its runner stops when it finds its lease gone",
                    inv.id,
                    lease.node
                );
                None
            }
            _ => None,
        };
        if args.json {
            let mut row = crate::views::invocation(inv, false);
            row["stopped_process_group"] = serde_json::json!(stopped);
            println!("{row}");
        } else {
            let how = match stopped {
                Some(true) => " and stopped its process group",
                Some(false) => " (its process group had already ended)",
                None => "",
            };
            crate::say!("cancelled {}{how}", inv.id);
        }
    }
    // Their processes are gone (or were never here): the concurrency slots they kept while
    // stopping are free. One on another node keeps its slot until its runner lets go, or
    // until its stopping time has passed.
    let stopped_here: Vec<String> = cancelled
        .iter()
        .filter(|(inv, lease)| {
            inv.stopping_until.is_some()
                && lease
                    .as_ref()
                    .is_none_or(|l| l.node == crate::liveness::this_node())
        })
        .map(|(inv, _)| inv.id.clone())
        .collect();
    if !stopped_here.is_empty() {
        runtime.store.write(|tx| {
            for id in &stopped_here {
                crate::agent::release_stopping(tx, id)?;
            }
            Ok(())
        })?;
    }
    // Their failure events (status `cancelled`), as a rejection's are decided.
    dispatcher.dispatch_emitted(emitted)?;
    dispatcher.settle_notifications()?;
    for why in &refused {
        crate::say!("error: {why}");
    }
    if cancelled.is_empty() && refused.is_empty() {
        crate::say!(
            "nothing to cancel: {} has no unfinished invocation",
            args.trigger.as_deref().unwrap_or("the selection")
        );
    }
    Ok(if refused.is_empty() {
        Outcome::Success
    } else {
        Outcome::Failure
    })
}
