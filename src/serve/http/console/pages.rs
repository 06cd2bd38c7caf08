//! The console's read pages, rendered on the server from the store (no script needed).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde_json::{Value, json};

use super::html::{esc, json_block, url_part};
use crate::clock::rfc3339_ms;
use crate::domain::Invocation;
use crate::manifest::Project;
use crate::storage::scan::{Next, Order, Scan};
use crate::storage::{self, Storage};

use crate::storage::pages as paging;

/// Rows a list shows at most.
pub(super) const LIST_MAX: usize = 200;

fn time(ms: i64) -> String {
    esc(&rfc3339_ms(ms))
}

fn status_badge(status: &str) -> String {
    format!("<span class=\"status {0}\">{0}</span>", esc(status))
}

/// The inbox: the latest messages, newest first; `data-after` tells the script where to
/// follow on from (server-sent events).
pub(super) fn inbox(store: &dyn Storage) -> storage::Result<String> {
    let (messages, last) = store.read(|r| {
        let last = r.inbox_last()?;
        let from = last.saturating_sub(LIST_MAX as u64);
        Ok((r.inbox_after(from, LIST_MAX, &|_| true)?, last))
    })?;
    let mut o = format!(
        "<p class=\"hint\">Newest first; new messages appear as they arrive.</p>\
         <ol id=\"inbox\" class=\"messages\" data-after=\"{last}\">"
    );
    for m in messages.iter().rev() {
        let _ = write!(
            o,
            "<li class=\"message {}\"><div class=\"meta\">#{} · {} · {} · {}</div><div class=\"content\">{}</div></li>",
            esc(m.level.as_str()),
            m.id,
            time(m.ts),
            esc(&author(m)),
            esc(&m.kind),
            esc(&m.content)
        );
    }
    o.push_str("</ol>");
    if messages.is_empty() {
        o.push_str("<p class=\"empty\">The inbox is empty.</p>");
    }
    Ok(o)
}

/// Who wrote a message, as the inbox shows it: a post names its principal (`ann (user)`).
fn author(m: &crate::domain::InboxMessage) -> String {
    match &m.posted_by {
        Some(by) => format!("{} ({})", by.principal, m.author),
        None => m.author.clone(),
    }
}

/// One inbox message as the stream sends it (the script builds its element from text).
pub(super) fn inbox_json(m: &crate::domain::InboxMessage) -> Value {
    json!({
        "id": m.id,
        "ts": rfc3339_ms(m.ts),
        "author": author(m),
        "kind": m.kind,
        "level": m.level.as_str(),
        "content": m.content,
    })
}

/// Approvals waiting, oldest first, a page after `after` (a cursor's sequence number), each
/// with its event data, agent, effective risk and the ATP request's actions as buttons (for a
/// viewer who may approve); how many wait in all comes from the store's counts.
pub(super) fn approvals(
    store: &dyn Storage,
    project: &Project,
    csrf: Option<&str>,
    now: i64,
    after: Option<u64>,
) -> storage::Result<String> {
    let page = paging::approvals(store, now, after, paging::APPROVALS_PAGE, true)?;
    let waiting = store.read(|r| r.queue_counts(now, i64::MIN))?.waiting();
    let mut o = String::new();
    if page.rows.is_empty() {
        o.push_str("<p class=\"empty\">No approval request waits here.</p>");
    } else {
        let _ = write!(
            o,
            "<p class=\"hint\">{waiting} waiting, oldest first, {} a page.</p>",
            paging::APPROVALS_PAGE
        );
    }
    for inv in &page.rows {
        let request = match &inv.approval_request {
            Some(id) => store.read(|r| r.notification(id))?,
            None => None,
        };
        let atp = request.and_then(|n| n.atp).unwrap_or(Value::Null);
        let _ = write!(
            o,
            "<section class=\"approval\" id=\"approval-{id}\"><h2>{title}</h2>\
             <dl><dt>invocation</dt><dd><a href=\"/invocations/{idu}\">{id}</a></dd>\
             <dt>trigger</dt><dd>{trigger}</dd><dt>agent</dt><dd>{agent}</dd>\
             <dt>effective risk</dt><dd class=\"risk {risk}\">{risk}</dd>\
             <dt>event</dt><dd>{event_id} ({event_type})</dd>\
             <dt>waiting since</dt><dd>{since}</dd><dt>deadline</dt><dd>{deadline}</dd></dl>",
            id = esc(&inv.id),
            idu = url_part(&inv.id),
            title = esc(atp["context"]["title"].as_str().unwrap_or("Approve?")),
            trigger = esc(&inv.trigger),
            agent = esc(&inv.agent),
            risk = esc(&inv.risk),
            event_id = esc(&inv.event_id),
            event_type = esc(&inv.event_type),
            since = time(inv.created_at),
            deadline = inv.approval_deadline.map_or("none".into(), time),
        );
        let data = json_block(&clipped(inv.event.get("data").unwrap_or(&Value::Null)));
        o.push_str(&batch_block(&inv.event));
        match alert_block(&inv.event) {
            // An alert: what fired and where to look first, the raw JSON folded.
            Some(block) => {
                o.push_str(&block);
                o.push_str(&intended(project, inv));
                let _ = write!(
                    o,
                    "<details class=\"raw\"><summary>Event data (JSON)</summary>{data}</details>"
                );
            }
            None => {
                let _ = write!(o, "<h3>Event data</h3>{data}");
                o.push_str(&intended(project, inv));
            }
        }
        match csrf {
            Some(csrf) => {
                o.push_str("<div class=\"actions\">");
                for action in atp["actions"].as_array().into_iter().flatten() {
                    let id = action["id"].as_str().unwrap_or("");
                    let flags: Vec<&str> = action["flags"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(Value::as_str)
                        .collect();
                    let _ = write!(
                        o,
                        "<form method=\"post\" action=\"/approvals/{}/respond\" class=\"inline\">\
                         <input type=\"hidden\" name=\"csrf\" value=\"{}\">\
                         <input type=\"hidden\" name=\"action\" value=\"{}\">\
                         <button type=\"submit\" class=\"action {}\" data-action=\"{}\">{}</button>{}</form>",
                        url_part(&inv.id),
                        esc(csrf),
                        esc(id),
                        esc(id),
                        esc(id),
                        esc(action["label"].as_str().unwrap_or(id)),
                        if flags.is_empty() {
                            String::new()
                        } else {
                            format!(" <small class=\"flags\">{}</small>", esc(&flags.join(", ")))
                        }
                    );
                }
                o.push_str("</div>");
            }
            None => o.push_str(
                "<p class=\"hint\">Log in as a principal with the <code>approve</code> scope to answer.</p>",
            ),
        }
        o.push_str("</section>");
    }
    if let Some(next) = &page.next {
        let _ = write!(
            o,
            "<p class=\"more\"><a href=\"/approvals?after={}\">Next page →</a></p>",
            url_part(next)
        );
    }
    Ok(o)
}

/// Every event of a batch the run would act on (bounded), when the event is a batch's.
fn batch_block(event: &Value) -> String {
    let Some(batch) = crate::stages::batch_text::described(event) else {
        return String::new();
    };
    let mut o = format!(
        "<h3 class=\"batch\">This run gets a batch of {} event(s)</h3><ol class=\"batch\">",
        batch.total
    );
    for line in &batch.lines {
        let _ = write!(o, "<li>{}</li>", esc(line));
    }
    o.push_str("</ol>");
    if batch.more() > 0 {
        let _ = write!(
            o,
            "<p class=\"hint\">and {} more (the invocation's page has its whole event)</p>",
            batch.more()
        );
    }
    o
}

/// An alert's summary, labels and links (an alert adapter's `data`), when the event is one.
fn alert_block(event: &Value) -> Option<String> {
    let (summary, links) = crate::adapter::alert_lead(event)?;
    let mut o = format!("<p class=\"summary\">{}</p>", esc(summary));
    if let Some(labels) = event["data"]["labels"]
        .as_object()
        .filter(|l| !l.is_empty())
    {
        o.push_str("<table class=\"labels\"><tbody>");
        for (name, value) in labels {
            let value = value
                .as_str()
                .map_or_else(|| value.to_string(), str::to_owned);
            let _ = write!(o, "<tr><th>{}</th><td>{}</td></tr>", esc(name), esc(&value));
        }
        o.push_str("</tbody></table>");
    }
    if !links.is_empty() {
        o.push_str("<ul class=\"links\">");
        for (title, url) in links {
            // Only http(s) URLs reach here (`alert_lead`); escaped as any attribute.
            let _ = write!(
                o,
                "<li><a href=\"{}\" rel=\"noopener noreferrer\">{}</a></li>",
                esc(url),
                esc(title)
            );
        }
        o.push_str("</ul>");
    }
    Some(o)
}

/// What approving lets the agent do: its effective risk, and its tools with each one's risk.
fn intended(project: &Project, inv: &crate::domain::Invocation) -> String {
    let Some(agent) = project.agent(&inv.agent) else {
        return String::new();
    };
    let tools: Vec<String> = agent
        .tools
        .iter()
        .map(|t| format!("{} ({})", esc(&t.name), esc(t.risk.as_str())))
        .collect();
    let tools = if tools.is_empty() {
        "none: it runs its command or answers without tools".to_owned()
    } else {
        tools.join(", ")
    };
    format!(
        "<p class=\"intended\">If approved, {} runs at risk <span class=\"risk {}\">{}</span>. Tools: {tools}</p>",
        esc(&agent.id),
        esc(&inv.risk),
        esc(&inv.risk)
    )
}

/// Event data as a page shows it: clipped past [`DATA_SHOWN`] bytes of JSON (the whole
/// event is on the invocation's own page), so a page's size does not follow its events'.
fn clipped(data: &Value) -> Value {
    let text = data.to_string();
    if text.len() <= DATA_SHOWN {
        return data.clone();
    }
    let mut end = DATA_SHOWN;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    Value::String(format!(
        "{}… (clipped; the invocation's page shows it whole)",
        &text[..end]
    ))
}

/// Bytes of an event's data a list page shows.
const DATA_SHOWN: usize = 16 * 1024;

pub(super) use crate::storage::pages::InvocationFilter;

/// Invocations `filter` keeps, newest first, a page before `before`.
pub(super) fn invocations(
    store: &dyn Storage,
    filter: &InvocationFilter,
    now: i64,
    before: Option<u64>,
) -> storage::Result<String> {
    let page = paging::invocations(store, filter, now, before, paging::INVOCATIONS_PAGE)?;
    let value = |v: &Option<String>| esc(v.as_deref().unwrap_or(""));
    let mut o = format!(
        "<form method=\"get\" action=\"/invocations\" class=\"filters\">\
         <label>status <input name=\"status\" value=\"{}\"></label> \
         <label>agent <input name=\"agent\" value=\"{}\"></label> \
         <label>trigger <input name=\"trigger\" value=\"{}\"></label> \
         <button type=\"submit\">Filter</button></form>\
         <p class=\"hint\">Newest first, {} a page.</p>\
         <table><thead><tr><th>invocation</th><th>status</th><th>trigger</th><th>agent</th>\
         <th>event</th><th>created</th><th>attempts</th></tr></thead><tbody>",
        value(&filter.status),
        value(&filter.agent),
        value(&filter.trigger),
        paging::INVOCATIONS_PAGE
    );
    let list = &page.rows;
    for i in list {
        let _ = write!(
            o,
            "<tr><td><a href=\"/invocations/{}\">{}</a></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            url_part(&i.id),
            esc(&i.id),
            status_badge(i.status_at(now).as_str()),
            esc(&i.trigger),
            esc(&i.agent),
            esc(&i.event_id),
            time(i.created_at),
            i.attempts
        );
    }
    o.push_str("</tbody></table>");
    if let Some(next) = &page.next {
        let query = |k: &str, v: &Option<String>| {
            v.as_deref()
                .filter(|v| !v.is_empty())
                .map(|v| format!("{k}={}&", url_part(v)))
                .unwrap_or_default()
        };
        let why = if page.budget_spent {
            format!(
                "No more match among the last {} looked at; older ones →",
                paging::SCAN_BUDGET
            )
        } else {
            "Older →".to_owned()
        };
        let _ = write!(
            o,
            "<p class=\"more\"><a href=\"/invocations?{}{}{}before={}\">{why}</a></p>",
            query("status", &filter.status),
            query("agent", &filter.agent),
            query("trigger", &filter.trigger),
            url_part(next)
        );
    }
    Ok(o)
}

/// One invocation: its fields, the event, the output, and each attempt with its transcript.
pub(super) fn invocation(
    store: &dyn Storage,
    id: &str,
    now: i64,
) -> storage::Result<Option<String>> {
    let Some(i) = store.read(|r| r.invocation(id))? else {
        return Ok(None);
    };
    let mut o = format!(
        "<dl><dt>status</dt><dd>{}</dd><dt>trigger</dt><dd>{}</dd><dt>agent</dt><dd>{}</dd>\
         <dt>risk</dt><dd>{}</dd><dt>event</dt><dd>{} ({})</dd><dt>created</dt><dd>{}</dd>\
         <dt>attempts</dt><dd>{} of {}</dd><dt>error</dt><dd>{}</dd></dl>",
        status_badge(i.status_at(now).as_str()),
        esc(&i.trigger),
        esc(&i.agent),
        esc(&i.risk),
        esc(&i.event_id),
        esc(&i.event_type),
        time(i.created_at),
        i.attempts,
        i.max_attempts,
        esc(i.error.as_deref().unwrap_or("none"))
    );
    if let Some(a) = &i.approval {
        let _ = write!(
            o,
            "<p>{} by {} at {}{}</p>",
            if a.approved { "Approved" } else { "Rejected" },
            esc(&a.by),
            time(a.at),
            a.note
                .as_deref()
                .map(|n| format!(": {}", esc(n)))
                .unwrap_or_default()
        );
    }
    let _ = write!(o, "<h2>Event</h2>{}", json_block(&i.event));
    if let Some(output) = &i.output {
        let _ = write!(o, "<h2>Output</h2>{}", json_block(output));
    }
    for a in &i.history {
        let _ = write!(
            o,
            "<h2>Attempt {}</h2><p>started {}{}{}</p>",
            a.attempt,
            time(a.started_at),
            a.ended_at
                .map(|t| format!(", ended {}", time(t)))
                .unwrap_or_default(),
            a.error
                .as_deref()
                .map(|e| format!(": {}", esc(e)))
                .unwrap_or_default()
        );
        if let Some(t) = &a.transcript {
            let _ = write!(
                o,
                "<h3>Transcript</h3><p class=\"spend\">{} {} · {} turns · {}</p>{}",
                esc(&t.provider),
                esc(&t.model),
                t.turns.len(),
                esc(&crate::views::spend_line(t)),
                json_block(&serde_json::to_value(t).unwrap_or(Value::Null))
            );
        }
    }
    Ok(Some(o))
}

pub(super) fn audit(store: &dyn Storage) -> storage::Result<String> {
    let (entries, total) = store.read(|r| r.audit(Some(LIST_MAX)))?;
    let mut o = format!(
        "<p class=\"hint\">{total} entries; the latest {} shown, newest first.</p>\
         <table><thead><tr><th>at</th><th>action</th><th>actor</th><th>invocation</th>\
         <th>trigger</th><th>agent</th><th>note</th></tr></thead><tbody>",
        entries.len()
    );
    for e in entries.iter().rev() {
        let note = serde_json::to_value(e)
            .ok()
            .and_then(|v| v.get("note").and_then(Value::as_str).map(str::to_owned))
            .unwrap_or_default();
        let _ = write!(
            o,
            "<tr><td>{}</td><td>{}</td><td class=\"actor\">{}</td><td><a href=\"/invocations/{}\">{}</a></td><td>{}</td><td>{}</td><td>{}</td></tr>",
            time(e.at),
            esc(&e.action),
            esc(e.actor.as_deref().unwrap_or("")),
            url_part(&e.invocation_id),
            esc(&e.invocation_id),
            esc(&e.trigger),
            esc(&e.agent),
            esc(&note)
        );
    }
    o.push_str("</tbody></table>");
    Ok(o)
}

/// What is loaded: triggers, agents and schedules, with their latest invocations.
pub(super) fn manifests(
    store: &dyn Storage,
    project: &Project,
    recent: &crate::serve::recent::RecentDecisions,
    now: i64,
) -> storage::Result<String> {
    // The latest invocation of each trigger and agent: the newest 5,000 at most, without
    // their events, each kept only while it is the latest of its trigger or agent.
    let mut by_trigger: BTreeMap<String, Invocation> = BTreeMap::new();
    let mut by_agent: BTreeMap<String, Invocation> = BTreeMap::new();
    let scan = Scan {
        order: Order::Newest,
        ..Scan::all(now)
    };
    store.read(|r| {
        let mut looked = 0;
        r.scan_invocations(&scan, &mut |i| {
            looked += 1;
            if !by_agent.contains_key(&i.agent) {
                by_agent.insert(i.agent.clone(), i.clone());
            }
            if !by_trigger.contains_key(&i.trigger) {
                by_trigger.insert(i.trigger.clone(), i);
            }
            Ok(if looked < 5_000 {
                Next::More
            } else {
                Next::Stop
            })
        })
    })?;
    let last = |i: Option<&Invocation>| match i {
        Some(i) => format!(
            "<a href=\"/invocations/{}\">{}</a> {} ({})",
            url_part(&i.id),
            time(i.created_at),
            status_badge(i.status_at(now).as_str()),
            esc(&i.event_id)
        ),
        None => "none recently".into(),
    };
    let mut o = String::from(
        "<h2>Triggers</h2><table><thead><tr><th>trigger</th><th>event type</th><th>agent</th>\
         <th>enabled</th><th>last decision (this serve)</th><th>latest invocation</th></tr></thead><tbody>",
    );
    for t in &project.triggers {
        let decision = recent.of(&t.id).map_or("none yet".into(), |d| {
            format!(
                "<span class=\"outcome\">{}</span> {} ({})",
                esc(d.outcome),
                time(d.at),
                esc(&d.event_id)
            )
        });
        let _ = write!(
            o,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{decision}</td><td>{}</td></tr>",
            esc(&t.id),
            esc(t.pattern.as_str()),
            esc(&t.agent_id),
            t.enabled,
            last(by_trigger.get(t.id.as_str()))
        );
    }
    o.push_str(
        "</tbody></table><h2>Agents</h2><table><thead><tr><th>agent</th><th>effective risk</th>\
         <th>provider</th><th>latest invocation</th></tr></thead><tbody>",
    );
    for a in &project.agents {
        let _ = write!(
            o,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&a.id),
            esc(a.effective_risk.as_str()),
            match a.model {
                crate::manifest::compiled::ModelSpec::Anthropic(_) => "anthropic",
                crate::manifest::compiled::ModelSpec::Openai(_) => "openai",
                crate::manifest::compiled::ModelSpec::Command { .. } => "command",
            },
            last(by_agent.get(a.id.as_str()))
        );
    }
    o.push_str(
        "</tbody></table><h2>Schedules</h2><table><thead><tr><th>schedule</th><th>cron</th>\
         <th>event type</th><th>last fire</th><th>next fire</th></tr></thead><tbody>",
    );
    let at = jiff::Timestamp::from_millisecond(now).unwrap_or(jiff::Timestamp::UNIX_EPOCH);
    for s in &project.schedules {
        let last_fire = store.read(|r| r.schedule_last(&s.id))?;
        let next = crate::schedule::next_fires(s, at, 1)
            .into_iter()
            .next()
            .map(|z| z.timestamp().to_string());
        let _ = write!(
            o,
            "<tr><td>{}</td><td>{} ({})</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&s.id),
            esc(&s.cron_text),
            esc(&s.timezone_name),
            esc(&s.event_type),
            last_fire.map_or("never".into(), time),
            esc(next.as_deref().unwrap_or("never"))
        );
    }
    o.push_str("</tbody></table>");
    Ok(o)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chat::post::{Author, Limits, Post, post};
    use crate::domain::PostedBy;

    #[test]
    fn a_post_in_the_inbox_names_its_principal_and_is_escaped() {
        let store = crate::store::Store::memory_for_tests();
        let limits = Limits {
            max_posts_per_minute: 5,
            max_event_bytes: 1 << 20,
        };
        store
            .write(|tx| {
                let p = Post {
                    author: Author::User,
                    content: "<b>deploy?</b>",
                    mime: "text/plain",
                    session: None,
                    in_reply_to: None,
                    by: PostedBy {
                        principal: "ann".into(),
                        client: None,
                        client_version: None,
                        invocation: None,
                        mcp_session: None,
                    },
                };
                post(tx, &limits, p, None, 1_000).map_err(storage::Error::refused)
            })
            .unwrap();
        let html = inbox(store.as_ref()).unwrap();
        assert!(html.contains("ann (user)"), "{html}");
        assert!(html.contains("&lt;b&gt;deploy?&lt;/b&gt;"), "{html}");
        let msg = store.read(|r| r.inbox_message(1)).unwrap().unwrap();
        assert_eq!(inbox_json(&msg)["author"], "ann (user)");
    }
}
