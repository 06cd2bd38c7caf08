//! pap as an MCP server (`pap mcp` over stdio, `/mcp` on serve's listener): the chat inbox
//! of the chat-inbox document as resources and tools, subscriptions that hear what any
//! process appends, human posts that become events, and approvals a person confirms through
//! elicitation.
//!
//! Where each part lives:
//! - `access`: who a session acts for and what it may do;
//! - `resources`: `ui://chat/inbox`, `ui://chat/session/{id}`, `pap://invocations/{id}`,
//!   `pap://notifications/{id}`;
//! - `tools`: the tool list (dotted names with underscore aliases) and the calls;
//! - `views`: the read-only tools over invocations, the audit log and a dry run;
//! - `approval`: `approval_respond`, through elicitation;
//! - `watch`: what changed in the store (new inbox messages, changed notifications, passed
//!   deadlines), from this process or any other;
//! - `forward`: those changes to each session's client, for what it subscribed to;
//! - `http`: the streamable HTTP service serve mounts at `/mcp`;
//! - `stdio`, `stdio_lines`: `pap mcp`'s transport, which answers broken lines instead of
//!   ignoring them.
//!
//! Nothing here holds the store between requests: every call is one short transaction, so
//! a long-lived `pap mcp` never keeps serve or a dispatch from writing.

mod access;
mod approval;
mod forward;
pub(crate) mod http;
mod resources;
pub(crate) mod stdio;
mod stdio_lines;
mod tools;
mod views;
pub(crate) mod watch;

use std::borrow::Cow;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, Implementation, InitializeRequestParams,
    InitializeResult, ListResourceTemplatesResult, ListResourcesResult, ListToolsResult,
    PaginatedRequestParams, ProtocolVersion, ReadResourceRequestParams, ReadResourceResponse,
    ServerCapabilities, ServerConfig, SubscribeRequestParams, Tool, UnsubscribeRequestParams,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};

pub(crate) use access::Who;

use crate::clock::Clock;
use crate::domain::PostedBy;
use crate::manifest::Project;
use crate::storage::Storage;

/// What became of a post's event once committed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Handoff {
    /// A running serve was told and decides it now.
    Told,
    /// No serve runs for this state dir: the event waits in the outbox for the next one.
    Waiting,
}

/// What every session of one server shares.
pub(crate) struct Shared {
    pub store: Arc<dyn Storage>,
    /// The project as loaded now (serve replaces it on a reload).
    pub project: Box<dyn Fn() -> Arc<Project> + Send + Sync>,
    pub clock: Clock,
    /// Hands events this server left in the outbox (a post's, a rejection's) to whoever
    /// decides them, and wakes serve for approved work. Blocking: called off the runtime.
    pub handoff: Box<dyn Fn(Vec<crate::event::Event>) -> Handoff + Send + Sync>,
    /// Serve itself decides what this server hands off: a post's outbox entry is then
    /// serve's own (its scan leaves it to the handoff); else it is left to any serve.
    pub in_serve: bool,
    /// `PAP_INVOCATION_ID` when this server was started for an agent: posts made through it
    /// name that invocation as their parent, so the cascade depth bounds a chain of them.
    pub parent_invocation: Option<String>,
    pub changes: watch::Changes,
}

/// One MCP session's handler (rmcp makes one per HTTP session; stdio has one).
#[derive(Clone)]
pub(crate) struct PapMcp {
    shared: Arc<Shared>,
    session: Arc<Session>,
}

struct Session {
    /// stdio: the local user. HTTP: the principal of the first authenticated request,
    /// which the session then belongs to.
    who: Mutex<Option<Who>>,
    /// Each request carries its own caller (HTTP).
    per_request: bool,
    subscribed: Mutex<forward::Subscribed>,
    /// The fingerprint of each notification subscribed to, as last told (`forward`).
    seen: Mutex<std::collections::BTreeMap<String, u64>>,
    /// What the inbox's window showed when the session first subscribed to a view of it,
    /// until the first change of notifications is compared with it (`forward`): a change
    /// committed before the watcher read the window is not missed.
    window_seen: Mutex<Option<watch::Baseline>>,
    /// Recorded on this session's posts (`PostedBy::mcp_session`): they are never announced
    /// back to it (no self-echo), even when the watcher sees one before the tool returns.
    nonce: String,
    forwarding: AtomicBool,
}

impl PapMcp {
    /// A stdio session acting as `who`.
    pub(crate) fn local(shared: Arc<Shared>, who: Who) -> PapMcp {
        PapMcp::new(shared, Some(who), false)
    }

    /// An HTTP session: its caller comes with each request (see `http`).
    pub(crate) fn remote(shared: Arc<Shared>) -> PapMcp {
        PapMcp::new(shared, None, true)
    }

    fn new(shared: Arc<Shared>, who: Option<Who>, per_request: bool) -> PapMcp {
        PapMcp {
            shared,
            session: Arc::new(Session {
                who: Mutex::new(who),
                per_request,
                subscribed: Mutex::default(),
                seen: Mutex::default(),
                window_seen: Mutex::default(),
                nonce: crate::notify::atp::uuid_v4(),
                forwarding: AtomicBool::new(false),
            }),
        }
    }

    /// Who makes this request, checked against the session's owner.
    fn who(&self, ctx: &RequestContext<RoleServer>) -> Result<Who, McpError> {
        let mut owner = self.session.who.lock().expect("session");
        if !self.session.per_request {
            return owner
                .clone()
                .ok_or_else(|| McpError::internal_error("no local user", None));
        }
        let caller = ctx
            .extensions
            .get::<axum::http::request::Parts>()
            .and_then(|p| p.extensions.get::<Who>())
            .cloned()
            .ok_or_else(|| McpError::invalid_request("the request carries no caller", None))?;
        match owner.as_ref() {
            Some(first) if first.name != caller.name => Err(McpError::invalid_request(
                "this MCP session belongs to another principal",
                None,
            )),
            _ => {
                *owner = Some(caller.clone());
                Ok(caller)
            }
        }
    }

    /// Who posted, as the inbox records it: the principal and the client's `clientInfo`.
    fn posted_by(&self, who: &Who, ctx: &RequestContext<RoleServer>) -> PostedBy {
        let client = ctx.client_info();
        PostedBy {
            principal: who.label().to_owned(),
            client: client.as_ref().map(|c| crate::text::clip(&c.name, 200)),
            client_version: client.as_ref().map(|c| crate::text::clip(&c.version, 100)),
            invocation: self.shared.parent_invocation.clone(),
            mcp_session: Some(self.session.nonce.clone()),
        }
    }

    /// Runs the handoff off the async runtime.
    async fn hand_off(&self, events: Vec<crate::event::Event>) -> Handoff {
        let shared = self.shared.clone();
        tokio::task::spawn_blocking(move || (shared.handoff)(events))
            .await
            .unwrap_or(Handoff::Waiting)
    }

    fn project(&self) -> Arc<Project> {
        (self.shared.project)()
    }

    fn now(&self) -> i64 {
        self.shared.clock.now_ms()
    }

    /// Starts telling this session's client of what changes, once.
    fn forward_changes(&self, peer: rmcp::Peer<RoleServer>) {
        if self.session.forwarding.swap(true, Ordering::SeqCst) {
            return;
        }
        tokio::spawn(forward::forward(
            self.shared.changes.subscribe(),
            peer,
            self.session.clone(),
            self.shared.store.clone(),
        ));
    }
}

impl ServerHandler for PapMcp {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_resources()
                .enable_resources_subscribe()
                .enable_tools()
                .build(),
        )
        .with_server_info(Implementation::new("pap", env!("CARGO_PKG_VERSION")))
        .with_instructions(
            "pap's chat inbox: read ui://chat/inbox (or chat_read_since with a watermark), \
             post with chat.human.post (a person's message, which triggers can route to \
             agents) or chat.assistant.post, acknowledge notifications with inbox_ack, and \
             answer approval requests with approval_respond (the client asks the person).",
        )
    }

    /// Subscriptions and elicitation are the initialize-based lifecycle's; a client of the
    /// newer session-less one is told which versions this server speaks.
    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(ProtocolVersion::known_up_to(&ProtocolVersion::V_2025_11_25))
    }

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, McpError> {
        let who = self.who(&context)?;
        tracing::info!(
            principal = who.label(),
            client = %crate::term::for_humans(&request.client_info.name),
            version = %crate::term::for_humans(&request.client_info.version),
            "mcp session"
        );
        context.peer.set_peer_info(request.clone());
        self.negotiate_initialize(&request)
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        self.who(&context)?.require(access::Need::Read)?;
        let this = self.clone();
        tokio::task::spawn_blocking(move || resources::list(&this))
            .await
            .map_err(|e| McpError::internal_error(e.to_string(), None))?
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        self.who(&context)?.require(access::Need::Read)?;
        Ok(resources::templates())
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        self.who(&context)?.require(access::Need::Read)?;
        let this = self.clone();
        let uri = request.uri.clone();
        let read = tokio::task::spawn_blocking(move || resources::read(&this, &uri))
            .await
            .map_err(|e| McpError::internal_error(e.to_string(), None))??;
        Ok(read.into())
    }

    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.who(&context)?.require(access::Need::Read)?;
        resources::check_subscribable(&request.uri)?;
        let key = resources::canonical(&request.uri);
        if let Some(id) = resources::notification_id(&key).map(str::to_owned) {
            // What the client is told of from now on: a change from what it is now.
            let (store, wanted) = (self.shared.store.clone(), id.clone());
            let now = tokio::task::spawn_blocking(move || store.read(|r| r.notification(&wanted)))
                .await
                .map_err(|e| McpError::internal_error(e.to_string(), None))?
                .map_err(resources::store_error)?;
            let print = forward::fingerprint(now.as_ref());
            self.session.seen.lock().expect("session").insert(id, print);
        } else if self.session.window_seen.lock().expect("session").is_none() {
            // A view of the inbox: what it shows now is what a change is measured from.
            let store = self.shared.store.clone();
            let seen = tokio::task::spawn_blocking(move || store.read(|r| watch::baseline(r)))
                .await
                .map_err(|e| McpError::internal_error(e.to_string(), None))?
                .map_err(resources::store_error)?;
            self.session
                .window_seen
                .lock()
                .expect("session")
                .get_or_insert(seen);
        }
        self.session
            .subscribed
            .lock()
            .expect("session")
            .entry(resources::canonical(&request.uri))
            .or_default()
            .insert(request.uri.clone());
        self.forward_changes(context.peer.clone());
        Ok(())
    }

    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.who(&context)?;
        let mut subscribed = self.session.subscribed.lock().expect("session");
        let key = resources::canonical(&request.uri);
        if let Some(spellings) = subscribed.get_mut(&key) {
            spellings.remove(&request.uri);
            if spellings.is_empty() {
                subscribed.remove(&key);
            }
        }
        Ok(())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        self.who(&context)?;
        Ok(ListToolsResult::with_all_items(tools::all()))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        tools::all().into_iter().find(|t| t.name == name)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let who = self.who(&context)?;
        tools::call(self, &who, request, &context)
            .await
            .map(Into::into)
    }
}
