//! `/mcp`: pap's MCP server (`crate::mcp_server`) on serve's listener. Every request is
//! authenticated like the rest of the API (the same principals and scopes as the console);
//! a caller with none of `read`, `ingest` or `approve` is refused before MCP sees it, and
//! the others get what their scopes allow, tool by tool.

use std::sync::Arc;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::{self, Next};
use axum::response::Response;
use tokio_util::sync::CancellationToken;

use super::auth::AuthError;
use super::{App, ConnInfo, reply};
use crate::manifest::compiled_listen::Scope;
use crate::mcp_server::{self, Handoff, Shared, Who};

/// The route, with its authentication.
pub fn routes(app: &App, stop: CancellationToken) -> Router<App> {
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
        changes: mcp_server::watch::start(store, crate::store::inbox_mark_path(&app.state_dir)),
    });
    Router::new()
        .route_service("/mcp", mcp_server::http::service(shared, stop))
        .layer(middleware::from_fn_with_state(app.clone(), authenticate))
}

async fn authenticate(State(app): State<App>, mut request: Request, next: Next) -> Response {
    let Some(conn) = request.extensions().get::<ConnInfo>().copied() else {
        return reply::error(StatusCode::INTERNAL_SERVER_ERROR, "no connection info");
    };
    let caller = match app.auth.identify(request.headers(), conn.peer.ip()).await {
        Ok(c) => c,
        Err(AuthError::TooSoon(wait)) => {
            return reply::too_many(AuthError::TooSoon(wait).to_string(), wait);
        }
        Err(e) => return reply::unauthorized(e.to_string()),
    };
    let useful = [Scope::Read, Scope::Ingest, Scope::Approve];
    if !useful.iter().any(|s| caller.may(*s)) {
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
        .insert(Who::caller(caller.name, caller.scopes));
    next.run(request).await
}
