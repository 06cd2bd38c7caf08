//! `pap respond FILE`: an ATP response message answers an approval request. Approving runs
//! the invocation as `pap approve` does; rejecting ends it as `pap reject` does. The answer is
//! checked against the request first; the invocation's own transaction makes a racing second
//! answer lose.

use std::io::Read;

use anyhow::{Context, bail};
use serde_json::Value;

use super::{Outcome, approve, context};
use crate::cli::{Cli, RespondArgs};
use crate::composition;
use crate::domain::{Answer, Status};
use crate::notify::atp;

pub(super) fn run(cli: &Cli, args: &RespondArgs) -> anyhow::Result<Outcome> {
    let name = args.file.display().to_string();
    let text = if name == "-" {
        let mut s = String::new();
        std::io::stdin()
            .read_to_string(&mut s)
            .context("reading the response from stdin")?;
        s
    } else {
        std::fs::read_to_string(&args.file).with_context(|| format!("reading {name}"))?
    };
    let value: Value =
        serde_json::from_str(&text).with_context(|| format!("{name} is not a JSON document"))?;
    let response = atp::parse_response(&value)
        .map_err(|e| anyhow::anyhow!("{name}: not a valid ATP response: {e}"))?;

    let project = context::load_project(cli)?;
    let store = composition::open(&context::place(cli, &project)?)?;
    let now = composition::clock_for(&*store)?.now_ms();
    let found = store.read(|r| {
        let n = r;
        let Some(id) = n.atp_lookup(&response.notification_id)? else {
            return Ok(None);
        };
        n.notification(&id)
    })?;
    let Some(request) = found else {
        bail!(
            "{name}: no approval request has the ATP id {} (see `.atp.id` in `pap inbox --json`)",
            response.notification_id
        );
    };
    let atp_obj = request.atp.clone().unwrap_or_default();
    let actions: Vec<&str> = atp_obj["actions"]
        .as_array()
        .map(|a| a.iter().filter_map(|x| x["id"].as_str()).collect())
        .unwrap_or_default();
    if !actions.contains(&response.action_id.as_str()) {
        bail!(
            "{name}: unknown action_id `{}`: this request offers {}",
            response.action_id,
            actions.join(", ")
        );
    }
    if let Some(closed) = &request.closed {
        bail!(
            "{name}: the approval request {} closed unanswered ({}): an expired approval is a denial",
            response.notification_id,
            closed.reason
        );
    }
    if let Some(a) = &request.answer {
        bail!(
            "{name}: the approval request {} was already answered ({})",
            response.notification_id,
            a.action_id
        );
    }
    let invocation = atp_obj["context"]["metadata"]["invocation_id"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    // Judged on pap's clock; `responded_at` is the responder's claim and is only recorded.
    if let Some(deadline) = atp_obj["deadline"]
        .as_str()
        .and_then(|d| d.parse::<jiff::Timestamp>().ok())
        && deadline.as_millisecond() <= now
    {
        bail!(
            "{name}: the approval request {} is past its deadline {deadline} (an expired approval is a denial)",
            response.notification_id
        );
    }
    if let Some(inv) = store.read(|r| r.invocation(&invocation))?
        && inv.status != Status::AwaitingApproval
    {
        bail!(
            "{name}: invocation {invocation} is {}, no longer awaiting approval",
            inv.status.as_str()
        );
    }
    let answer = Answer {
        action_id: response.action_id.clone(),
        responder: response.responder.clone(),
        responded_at: Some(response.responded_at.clone()),
        recorded_at: now,
    };
    let by = response.responder_id.clone();
    match response.action_id.as_str() {
        "approve" => approve::approve_as(
            cli,
            &invocation,
            by,
            Some(format!("ATP response {}", response.notification_id)),
            args.json,
            Some(answer),
        ),
        _ => approve::reject_as(
            cli,
            &invocation,
            by,
            "rejected through an ATP response",
            args.json,
            Some(answer),
        ),
    }
}
