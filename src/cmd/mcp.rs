//! `pap mcp`: the MCP server on stdin/stdout, acting as the local user.

use std::sync::{Arc, Mutex};

use anyhow::Context;
use rmcp::ServiceExt;

use super::{Outcome, context};
use crate::cli::{Cli, McpArgs};
use crate::composition;
use crate::mcp_server::{Handoff, PapMcp, Shared, Who, watch};
use crate::storage::Storage;

pub(super) fn run(cli: &Cli, args: &McpArgs) -> anyhow::Result<Outcome> {
    // stderr only: stdout is the MCP channel.
    crate::serve::log::init_at(crate::serve::log::LogFormat::Human, "warn");
    let project = context::load_project(cli)?;
    let state_dir = context::state_dir(cli, &project);
    // Closed after every request's transaction: a client may stay connected for days, and
    // serve should never have to ask it for the file.
    let store = composition::open_transient(&context::place(cli, &project)?)?;
    let user = args
        .as_user
        .clone()
        .unwrap_or_else(|| project.config.notify.user.clone());
    if user.is_empty() || user.chars().any(char::is_control) {
        anyhow::bail!("--as: a user name is non-empty text without control characters");
    }
    let who = Who::local(&user, project.config.chat.approvers.as_deref());
    let clock = composition::clock_for(&*store)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let current = Arc::new(Mutex::new(Arc::new(project)));
    let reload = {
        let root = cli.root().canonicalize().context("the project root")?;
        let state = cli.state.clone();
        move || -> Arc<crate::manifest::Project> {
            // Manifests edited while a client stays connected take effect at the next call
            // (the cache makes an unchanged project cheap); a broken edit keeps the last good.
            let mut held = current.lock().expect("project");
            if let Some(fresh) = context::project_at(&root, state.as_deref()) {
                *held = Arc::new(fresh);
            }
            held.clone()
        }
    };
    let parent_invocation = std::env::var("PAP_INVOCATION_ID")
        .ok()
        .filter(|v| !v.is_empty());
    let handoff = handoff(store.clone(), state_dir.clone());
    let watch_clock = clock.clone();
    let served = rt.block_on(async move {
        let shared = Arc::new(Shared {
            store: store.clone(),
            project: Box::new(reload),
            clock,
            handoff: Box::new(handoff),
            in_serve: false,
            parent_invocation,
            changes: watch::start(store, &state_dir, watch_clock),
        });
        let running = PapMcp::local(shared, who)
            .serve(crate::mcp_server::stdio::transport())
            .await
            .context("the MCP handshake on stdin/stdout failed")?;
        running
            .waiting()
            .await
            .context("the MCP session ended with an error")?;
        anyhow::Ok(())
    });
    // Blocking reads of stdin do not end with the session: do not wait for them.
    rt.shutdown_background();
    served?;
    Ok(Outcome::Success)
}

/// Gives what this process left in the outbox to a running serve: the entries are disowned
/// (a rejection's failure events are this process's until then), then serve is woken. With
/// no serve, they wait for the next one to start.
fn handoff(
    store: Arc<dyn Storage>,
    state_dir: std::path::PathBuf,
) -> impl Fn(Vec<crate::event::Event>) -> Handoff + Send + Sync + 'static {
    move |events| {
        if !events.is_empty() {
            let disowned = store.write(|tx| {
                for e in &events {
                    tx.outbox_put(&e.id, &e.value, None)?;
                }
                Ok(())
            });
            if let Err(e) = disowned {
                tracing::warn!(error = %e, "cannot hand events to serve; they stay in the outbox");
            }
        }
        match crate::serve::control::wake(&state_dir) {
            true => Handoff::Told,
            false => Handoff::Waiting,
        }
    }
}
