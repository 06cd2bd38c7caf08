//! JP RFD 011 per-tool notification control: an agent manifest's `tools[].notifications`
//! switches keep a tool's notifications of one name from being delivered to an agent.
//!
//! Applied where pap.yaml's `notifications.kinds` is, at delivery from an agent's queue, never
//! at enqueue, so the ledger still records every notification. It never reaches the user's
//! copy: ANP 6.1 requires the user be told of every external call, and that copy was made
//! when the notification was routed.

use crate::domain::{Notification, Transition};
use crate::manifest::Project;
use crate::storage::{self, WriteTx};

/// Whether `n`, taken from `receiver`'s queue, is held back by its tool's switch; if so its
/// history says why (naming the tool and the manifest field), and it is not delivered.
pub(crate) fn held_back(
    tx: &mut dyn WriteTx,
    project: &Project,
    n: &mut Notification,
    receiver: &str,
    by: &str,
    now: i64,
) -> storage::Result<bool> {
    let Some(why) = switched_off(project, n) else {
        return Ok(false);
    };
    n.history.push(Transition {
        at: now,
        from: Some(n.status),
        to: n.status,
        lease: n.owner_lease,
        by: by.to_owned(),
        note: Some(format!("not delivered to {receiver}: {why}")),
    });
    tx.put_notification(n)?;
    Ok(true)
}

/// Why the switches of the tool `n` is about keep it from an agent, or `None` (delivered). The
/// tool is found from what the notification records (`agent`, `tool`, `server`), in the
/// manifest as loaded now: a tool no longer listed has no switch, and its notification is
/// delivered (the default).
fn switched_off(project: &Project, n: &Notification) -> Option<String> {
    let name = n.kind.strip_prefix("tool.")?;
    let text = |key: &str| n.metadata.get(key).and_then(|v| v.as_str());
    let (agent, tool, server) = (text("agent")?, text("tool")?, text("server")?);
    let agent = project.agent(agent)?;
    let (i, spec) = agent
        .tools
        .iter()
        .enumerate()
        .find(|(_, t)| t.name == tool && t.server == server)?;
    if spec.delivers(name) {
        return None;
    }
    Some(format!(
        "tool `{tool}` on `{server}` of agent {} has `{name}` switched off ({} agent.tools[{i}].notifications.{name}); the user was still told",
        agent.id, agent.file
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{NotifyStatus, Party};
    use serde_json::json;

    /// A project whose agent `a` has the external tools `on` and `off` (its `external_call`
    /// switched off) on the MCP server `s`.
    fn project() -> (tempfile::TempDir, Project) {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("agents")).unwrap();
        std::fs::write(
            root.join("pap.yaml"),
            "pap_version: \"0.2\"\nmcp_servers:\n  s:\n    command: \"true\"\n",
        )
        .unwrap();
        std::fs::write(
            root.join("agents/a.yaml"),
            "pap_version: \"0.2\"\nagent:\n  id: a\n  risk_level: low\n  model:\n    provider: anthropic\n    model_id: m\n  tools:\n    - name: on\n      source: mcp://s\n    - name: off\n      source: mcp://s\n      notifications:\n        external_call: false\n",
        )
        .unwrap();
        let loaded = crate::manifest::loader::load(root, &[]);
        let project = loaded
            .project
            .unwrap_or_else(|| panic!("{:?}", loaded.diagnostics));
        (dir, project)
    }

    fn call(tool: &str, agent: &str) -> Notification {
        let mut n = crate::domain::Notification::for_tests(NotifyStatus::Dispatched);
        n.kind = "tool.external_call".into();
        n.routing.target = Party::User;
        n.metadata = json!({"agent": agent, "tool": tool, "server": "s"})
            .as_object()
            .unwrap()
            .clone();
        n
    }

    #[test]
    fn only_the_switched_off_tool_of_the_calling_agent_is_held_back() {
        let (_dir, p) = project();
        let why = switched_off(&p, &call("off", "a")).expect("switched off");
        assert!(
            why.contains("tool `off` on `s` of agent a")
                && why.contains("agents/a.yaml agent.tools[1].notifications.external_call"),
            "{why}"
        );
        assert_eq!(switched_off(&p, &call("on", "a")), None);
        // A tool (or agent) no longer in the manifest has no switch: delivered.
        assert_eq!(switched_off(&p, &call("gone", "a")), None);
        assert_eq!(switched_off(&p, &call("off", "b")), None);
        // Another source's notification is not a tool's, whatever its metadata says.
        let mut other = call("off", "a");
        other.kind = "invocation.succeeded".into();
        assert_eq!(switched_off(&p, &other), None);
    }

    #[test]
    fn a_held_back_notification_keeps_its_status_and_records_why() {
        let (_dir, p) = project();
        let s = crate::store::Store::memory_for_tests();
        let n = call("off", "a");
        s.write(|tx| tx.put_notification(&n)).unwrap();
        let held = s
            .write(|tx| {
                let mut n = tx.notification("ntf_1")?.unwrap();
                held_back(tx, &p, &mut n, "b", "agent:inv_1", 10)
            })
            .unwrap();
        assert!(held);
        let back = s.read(|r| r.notification("ntf_1")).unwrap().unwrap();
        assert_eq!(back.status, NotifyStatus::Dispatched);
        let note = back.history.last().unwrap().note.clone().unwrap();
        assert!(note.starts_with("not delivered to b: tool `off`"), "{note}");
        assert!(
            !s.write(|tx| held_back(tx, &p, &mut call("on", "a"), "b", "x", 10))
                .unwrap()
        );
    }
}
