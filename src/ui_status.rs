//! The chat-inbox document's `ui://agent/status` (UI server health and readiness), as pap's
//! MCP server reports it: whether a client can show its chat components now (`ui.ready`),
//! and what `/readyz` and `pap status` would say of the serve and the store, gathered
//! cheaply (one short read of the store, a ping of a running serve; never a scan of the
//! queue). The MCP resource only serialises what this returns.

use std::path::Path;

use serde::Serialize;

use crate::clock::rfc3339_ms;
use crate::serve::conditions::Shown;
use crate::storage::Storage;

#[derive(Debug, Serialize)]
pub(crate) struct UiStatus {
    pub ui: Ui,
    /// The store can be read, and its newest inbox id (the chat's watermark).
    pub store: StoreHealth,
    /// The serve running on this state dir, if one answers.
    pub serve: Option<ServeHealth>,
    /// Ready, and no serve condition needs a person.
    pub healthy: bool,
    pub checked_at: String,
}

#[derive(Debug, Serialize)]
pub(crate) struct Ui {
    /// The chat's resources and tools can be used now: the store answers. (The document's
    /// `agentStatus.ui.ready`.)
    pub ready: bool,
    pub server: &'static str,
    pub version: &'static str,
    /// Why it is not ready.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

#[derive(Debug, Serialize)]
pub(crate) struct StoreHealth {
    pub readable: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inbox_last_id: Option<String>,
}

#[derive(Debug, Serialize)]
pub(crate) struct ServeHealth {
    pub pid: u32,
    pub since: String,
    pub listen: Option<String>,
    /// What is wrong with it though it keeps going (`pap status`'s attention lines).
    pub conditions: Vec<Shown>,
}

/// The status as of `now`, of `store` and of a serve on `state_dir` (when the store has one).
pub(crate) fn gather(store: &dyn Storage, state_dir: Option<&Path>, now: i64) -> UiStatus {
    let read = store.read(|r| r.inbox_last());
    let serve = state_dir
        .and_then(crate::serve::control::running)
        .map(|s| ServeHealth {
            pid: s.pid,
            since: s.started_at,
            listen: s.listen,
            conditions: s.conditions,
        });
    let ready = read.is_ok();
    let healthy = ready && serve.as_ref().is_none_or(|s| s.conditions.is_empty());
    UiStatus {
        ui: Ui {
            ready,
            server: "pap",
            version: env!("CARGO_PKG_VERSION"),
            reason: read
                .as_ref()
                .err()
                .map(|e| format!("the store cannot be read: {e}")),
        },
        store: StoreHealth {
            readable: ready,
            inbox_last_id: read.ok().map(|id| id.to_string()),
        },
        serve,
        healthy,
        checked_at: rfc3339_ms(now),
    }
}
