//! `/mcp`: pap's MCP server (`crate::mcp_server`) on serve's listener. Every request is
//! authenticated like the rest of the API (the same principals and scopes as the console);
//! a caller with none of `read`, `ingest` or `approve` is refused before MCP sees it, and
//! the others get what their scopes allow, tool by tool.
//!
//! A session lives only as long as its principal does: a reload that removes it, changes its
//! credential or leaves it none of those scopes ends its sessions in rmcp, so their open
//! event streams close (a client then has to start again, with credentials that hold).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::{self, Next};
use axum::response::Response;
use tokio_util::sync::CancellationToken;

use rmcp::transport::streamable_http_server::SessionManager as _;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;

use super::auth::{AuthError, Caller};
use super::principals::Principals;
use super::{App, ConnInfo, reply};
use crate::manifest::compiled_listen::Scope;
use crate::mcp_server::{self, Handoff, Shared, Who};

/// The scopes that make `/mcp` of use to a caller: with none of them, it is refused.
const USEFUL: [Scope; 3] = [Scope::Read, Scope::Ingest, Scope::Approve];

/// The MCP sessions on the listener: rmcp's, and who opened each.
#[derive(Clone, Default)]
pub(super) struct Sessions {
    owners: Owners,
    manager: Arc<LocalSessionManager>,
}

impl Sessions {
    /// Ends the sessions whose owner `principals` no longer know, or that may no longer use
    /// `/mcp`; returns how many. Their open streams close once rmcp has let them go.
    pub(super) fn end_unknown(
        &self,
        principals: &Principals,
        rt: &tokio::runtime::Handle,
    ) -> usize {
        let ended = self.owners.end_unknown(principals);
        let n = ended.len();
        let manager = self.manager.clone();
        rt.spawn(async move {
            for id in ended {
                if let Err(e) = manager.close_session(&id.into()).await {
                    tracing::debug!(error = %e, "closing an MCP session");
                }
            }
        });
        n
    }
}

/// Which principal opened each MCP session (`Mcp-Session-Id`). rmcp answers some requests
/// of a session without calling pap's handler (the GET that opens or resumes its event
/// stream, the DELETE that ends it), so ownership is checked here, on every method.
#[derive(Clone, Default)]
struct Owners(Arc<Mutex<HashMap<String, Owner>>>);

/// The caller that opened a session (anonymous too) and when it was last used.
type Owner = (Caller, Instant);

/// An owner entry unused this long is forgotten. rmcp drops an idle session after 5 minutes;
/// one kept alive only by what the server sends (a client that just listens) outlives that,
/// so the bound is generous, and a forgotten session is refused (fail closed): its client
/// opens a new one.
const FORGET_AFTER: Duration = Duration::from_secs(24 * 3600);

impl Owners {
    /// Whether `caller` may use `session`: only the principal that opened it, and only while
    /// pap knows it (the map and rmcp's sessions live and die with this process).
    fn allows(&self, session: &str, caller: &Caller) -> bool {
        let mut owners = self.0.lock().expect("owners");
        match owners.get_mut(session) {
            Some((owner, used))
                if owner.name == caller.name && owner.fingerprint == caller.fingerprint =>
            {
                *used = Instant::now();
                true
            }
            _ => false,
        }
    }

    /// Forgets the sessions whose owner is not current in `principals`, or lacks every
    /// scope `/mcp` is of use for; returns their ids.
    fn end_unknown(&self, principals: &Principals) -> Vec<String> {
        let mut owners = self.0.lock().expect("owners");
        let mut ended = Vec::new();
        owners.retain(|id, (owner, _)| {
            let keep = principals
                .current(owner)
                .is_some_and(|c| USEFUL.iter().any(|s| c.may(*s)));
            if !keep {
                ended.push(id.clone());
            }
            keep
        });
        ended
    }

    fn opened(&self, session: &str, caller: Caller) {
        let mut owners = self.0.lock().expect("owners");
        owners.retain(|_, (_, used)| used.elapsed() < FORGET_AFTER);
        owners.insert(session.to_owned(), (caller, Instant::now()));
    }

    fn ended(&self, session: &str) {
        self.0.lock().expect("owners").remove(session);
    }
}

/// The route, with its authentication.
pub(super) fn routes(app: &App, stop: CancellationToken) -> Router<App> {
    let project = app.project.clone();
    let decider = app.decider.clone();
    let store = app.store.clone();
    let shared = Arc::new(Shared {
        store: store.clone(),
        project: Box::new(move || project.read().unwrap_or_else(|p| p.into_inner()).clone()),
        clock: app.clock.clone(),
        handoff: Box::new(move |events| {
            decider.poke(events);
            Handoff::Told
        }),
        in_serve: true,
        parent_invocation: None,
        changes: mcp_server::watch::start(store, &app.state_dir, app.clock.clone()),
    });
    let owners = app.mcp.owners.clone();
    Router::new()
        .route_service(
            "/mcp",
            mcp_server::http::service(shared, app.mcp.manager.clone(), stop),
        )
        .layer(middleware::from_fn(move |request: Request, next: Next| {
            let owners = owners.clone();
            async move { owned(owners, request, next).await }
        }))
        .layer(middleware::from_fn_with_state(app.clone(), authenticate))
}

const SESSION_HEADER: &str = "mcp-session-id";

/// A request naming a session must come from the principal that opened it; a response that
/// opens one records its owner.
async fn owned(owners: Owners, request: Request, next: Next) -> Response {
    let caller = request.extensions().get::<Caller>().cloned();
    let Some(caller) = caller else {
        return reply::error(StatusCode::INTERNAL_SERVER_ERROR, "no caller");
    };
    let session = request
        .headers()
        .get(SESSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    if let Some(id) = &session
        && !owners.allows(id, &caller)
    {
        return reply::error(
            StatusCode::FORBIDDEN,
            "this MCP session is not yours, or has ended: initialize a new one",
        );
    }
    let deleting = request.method() == axum::http::Method::DELETE;
    let response = next.run(request).await;
    match session {
        // Ended by the client, or gone from rmcp (it answers 404 for an unknown session).
        Some(id)
            if (deleting && response.status().is_success())
                || response.status() == StatusCode::NOT_FOUND =>
        {
            owners.ended(&id)
        }
        Some(_) => {}
        None => {
            if let Some(id) = response
                .headers()
                .get(SESSION_HEADER)
                .and_then(|v| v.to_str().ok())
            {
                owners.opened(id, caller);
            }
        }
    }
    response
}

async fn authenticate(State(app): State<App>, mut request: Request, next: Next) -> Response {
    let Some(conn) = request.extensions().get::<ConnInfo>().copied() else {
        return reply::error(StatusCode::INTERNAL_SERVER_ERROR, "no connection info");
    };
    let caller = match app.auth.identify(request.headers(), conn.client).await {
        Ok(c) => c,
        Err(AuthError::TooSoon(wait)) => {
            return reply::too_many(AuthError::TooSoon(wait).to_string(), wait);
        }
        Err(e) => return reply::unauthorized(e.to_string()),
    };
    if !USEFUL.iter().any(|s| caller.may(*s)) {
        return match caller.name {
            None => reply::unauthorized(
                "/mcp needs a principal with the `read`, `ingest` or `approve` scope (listen.auth)",
            ),
            Some(name) => reply::error(
                StatusCode::FORBIDDEN,
                format!("principal `{name}` has none of the `read`, `ingest` or `approve` scopes"),
            ),
        };
    }
    request
        .extensions_mut()
        .insert(Who::caller(caller.name.clone(), caller.scopes.clone()));
    request.extensions_mut().insert(caller);
    next.run(request).await
}
