//! The agent's queue (JP RFD 011): notifications for an agent wait in the store and are
//! delivered all at once in the prompt of its next invocation, grouped by level. Filtering
//! by kind (pap.yaml `notifications.kinds`) happens here, at delivery, never at enqueue.

use super::ledger;
use super::produce::{carried, conflict};
use crate::domain::{Carried, Handler, Invocation, Level, NotifyStatus, Party, Transition};
use crate::manifest::Project;
use crate::storage::{self, WriteTx};

/// Drains `inv.agent`'s queue into `inv.notifications`, in the transaction that starts the
/// attempt. Notifications targeted at the agent become DELIVERED with `inv` as their
/// carrier; the others (ambient awareness of what the user was shown) keep their status.
pub fn deliver_at_start(
    tx: &mut dyn WriteTx,
    project: &Project,
    inv: &mut Invocation,
    now: i64,
) -> storage::Result<()> {
    let ids = tx.queue_take(&inv.agent)?;
    if ids.is_empty() {
        return Ok(());
    }
    let mark = tx.inbox_mark()?;
    let by = format!("agent:{}", inv.id);
    for id in ids {
        let Some(mut n) = tx.notification(&id)? else {
            continue;
        };
        if !project.config.notify.kinds.allows(&n.kind) {
            n.history.push(Transition {
                at: now,
                from: Some(n.status),
                to: n.status,
                lease: n.owner_lease,
                by: by.clone(),
                note: Some(format!(
                    "not delivered to {}: kind {} is switched off in pap.yaml notifications.kinds",
                    inv.agent, n.kind
                )),
            });
            tx.put_notification(&n)?;
            continue;
        }
        let targeted = n.routing.target == Party::Agent && n.routing.handler == Handler::System;
        if targeted && n.status == NotifyStatus::Pending {
            let lease = n.owner_lease;
            ledger::walk(
                &mut n,
                lease,
                &[
                    NotifyStatus::Dispatched,
                    NotifyStatus::Locked,
                    NotifyStatus::Delivered,
                ],
                &by,
                Some(format!("delivered in the prompt of {}", inv.id)),
                now,
            )
            .map_err(conflict)?;
            n.ack_at = Some(now);
            n.delivered_with = Some(inv.id.clone());
        }
        inv.notifications.push(carried(&n, false, mark));
        tx.put_notification(&n)?;
    }
    Ok(())
}

/// The `<pap_notifications>` block of an LLM prompt: JP RFD 011's markdown, grouped by level
/// (most severe first), each line with its id.
pub fn prompt_block(carried: &[Carried]) -> Vec<String> {
    if carried.is_empty() {
        return Vec::new();
    }
    let mut lines = vec![
        "These are notifications from pap, the system that runs you. They are delivered in this \
         message to make you aware of them and will not be delivered again. Lines marked \
         (already seen by the user) are context: do not announce them."
            .to_owned(),
    ];
    if carried.iter().any(|c| c.handle) {
        lines.push(
            "You are the handling agent of the notifications marked HANDLE: your answer is shown \
             to the user in their place, so tell the user what happened and what it means. An \
             empty answer counts as silence, and pap then shows the raw notification instead."
                .to_owned(),
        );
    }
    for level in [Level::Critical, Level::Error, Level::Warning, Level::Info] {
        let group: Vec<&Carried> = carried.iter().filter(|c| c.level == level).collect();
        if group.is_empty() {
            continue;
        }
        let mut title = level.as_str().to_owned();
        title[..1].make_ascii_uppercase();
        lines.push(format!("**{title}:**"));
        for c in group {
            let mut line = format!("- [{}] {}: {}", c.id, c.kind, c.content);
            if c.handle {
                line.push_str(" (HANDLE)");
            }
            if c.seen_by_user {
                line.push_str(" (already seen by the user)");
            }
            if let Some(d) = &c.directive {
                line.push_str(&format!(" Directive: {d}"));
            }
            if let Some(t) = &c.tone_hint {
                line.push_str(&format!(" Tone: {t}"));
            }
            lines.push(line);
        }
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(id: &str, level: Level, seen: bool) -> Carried {
        Carried {
            id: id.into(),
            kind: "invocation.failed".into(),
            level,
            content: format!("content {id}"),
            lease: None,
            handle: false,
            seen_by_user: seen,
            directive: None,
            tone_hint: None,
            inbox_mark: 0,
        }
    }

    #[test]
    fn the_block_groups_by_level_most_severe_first() {
        let lines = prompt_block(&[
            c("ntf_1", Level::Info, true),
            c("ntf_2", Level::Critical, false),
            c("ntf_3", Level::Info, false),
        ]);
        let text = lines.join("\n");
        let critical = text.find("**Critical:**").unwrap();
        let info = text.find("**Info:**").unwrap();
        assert!(critical < info);
        assert!(
            text.contains("- [ntf_1] invocation.failed: content ntf_1 (already seen by the user)")
        );
        assert!(text.find("[ntf_2]").unwrap() < text.find("[ntf_1]").unwrap());
        assert!(prompt_block(&[]).is_empty());
    }
}
