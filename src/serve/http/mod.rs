//! `pap serve --listen`: the HTTP side of serve, on serve's own tokio runtime.
//!
//! Connections are accepted here (not by `axum::serve`) so that each one gets what a service
//! left running needs: a bound on open connections, a TLS handshake and header read that
//! must finish within the read timeout (a slow-loris client is dropped, not waited on),
//! and graceful shutdown. Requests go to an axum router; every one passes the `Host`/`Origin`
//! guard and the access log first. Events go to the deciding thread through the
//! [`Decider`](super::decider::Decider); the console's answers and the MCP server's posts
//! (`/mcp`) write the store in short transactions of their own and hand what they leave in
//! the outbox to the deciding thread.

mod access_log;
mod auth;
mod body;
mod client_addr;
mod cloudevents;
mod console;
mod credential_file;
mod guard;
mod health;
mod ingest;
mod limits;
mod list_api;
mod mcp;
mod principals;
mod reload;
mod reply;
mod swap;
mod tls;
mod webhook;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::routing::{get, post};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

use super::decider::Decider;
use crate::manifest::compiled_listen::{ListenConfig, Scope};
use crate::storage::Storage;
use auth::{Auth, AuthError, Caller};
pub use auth::{HashError, hash_password};
use limits::Limits;
use principals::Principals;
pub use reload::{Applied, Prepared, ReloadRefused};
use swap::Swap;

/// 32 random bytes as hex: session tokens, CSRF tokens, the dummy password.
pub fn console_token() -> String {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).expect("the system's randomness");
    crate::text::hex(&bytes)
}

/// A header map from pairs, for the unit tests of this module's parts.
#[cfg(test)]
pub(crate) fn test_headers(pairs: &[(&'static str, &str)]) -> axum::http::HeaderMap {
    let mut h = axum::http::HeaderMap::new();
    for (k, v) in pairs {
        h.insert(*k, v.parse().unwrap());
    }
    h
}

/// Where a request came in: the connection's two ends, and the client's address (the peer,
/// or behind a trusted proxy the address it forwarded for: see `client_addr`).
#[derive(Debug, Clone, Copy)]
pub struct ConnInfo {
    pub peer: SocketAddr,
    pub local: SocketAddr,
    pub client: std::net::IpAddr,
}

/// What every handler shares.
#[derive(Clone)]
pub struct App(Arc<AppInner>);

pub struct AppInner {
    pub decider: Decider,
    /// The principals in force (a reload swaps them) and the failed attempts.
    auth: Auth,
    /// What a reload may change of the listener's settings.
    limits: Swap<Limits>,
    pub store: Arc<dyn Storage>,
    pub state_dir: std::path::PathBuf,
    /// The project serve runs now (replaced on a reload).
    pub project: SharedProject,
    pub metrics: Arc<super::metrics::Metrics>,
    pub recent: Arc<super::recent::RecentDecisions>,
    /// Serve's clock (the injected one in test builds), for what is due now.
    pub clock: crate::clock::Clock,
    /// Places among the request bodies read at once (`ingest::BODIES_AT_ONCE`).
    bodies: Arc<Semaphore>,
    /// Console logins.
    sessions: console::Sessions,
    /// MCP sessions on `/mcp`.
    mcp: mcp::Sessions,
    /// The listener speaks HTTPS (session cookies are then `Secure`).
    tls: bool,
}

/// The loaded project, as serve's reloads replace it.
pub type SharedProject = Arc<std::sync::RwLock<Arc<crate::manifest::Project>>>;

impl std::ops::Deref for App {
    type Target = AppInner;
    fn deref(&self) -> &AppInner {
        &self.0
    }
}

impl App {
    /// The project serve runs now.
    pub fn project_now(&self) -> Arc<crate::manifest::Project> {
        self.project
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The listener's settings in force now.
    pub fn limits(&self) -> Arc<Limits> {
        self.limits.load()
    }

    /// The caller, if it may do `scope`; else the 401 or 403 to answer.
    pub async fn authorize(
        &self,
        headers: &axum::http::HeaderMap,
        conn: &ConnInfo,
        scope: Scope,
    ) -> Result<Caller, Response> {
        let caller = match self.auth.identify(headers, conn.client).await {
            Ok(c) => c,
            Err(AuthError::Invalid) => {
                return Err(reply::unauthorized("the credentials are not valid"));
            }
            Err(e @ AuthError::Malformed) => return Err(reply::unauthorized(e.to_string())),
            Err(e @ AuthError::TooSoon(wait)) => return Err(reply::too_many(e.to_string(), wait)),
        };
        if caller.may(scope) {
            return Ok(caller);
        }
        Err(match caller.name {
            None => reply::unauthorized(format!(
                "this needs a principal with the `{}` scope (listen.auth)",
                scope.as_str()
            )),
            Some(name) => reply::error(
                StatusCode::FORBIDDEN,
                format!(
                    "principal `{name}` does not have the `{}` scope",
                    scope.as_str()
                ),
            ),
        })
    }
}

/// What serve hands the listener at start.
pub struct Setup<'a> {
    /// `HOST:PORT`.
    pub address: &'a str,
    pub config: &'a ListenConfig,
    /// The project root, which relative TLS paths are under.
    pub root: &'a Path,
    pub decider: Decider,
    pub store: Arc<dyn Storage>,
    pub state_dir: &'a Path,
    pub project: SharedProject,
    pub metrics: Arc<super::metrics::Metrics>,
    pub recent: Arc<super::recent::RecentDecisions>,
    pub clock: crate::clock::Clock,
}

/// A running listener.
pub struct Listening {
    pub local: SocketAddr,
    /// `http` or `https`.
    pub scheme: &'static str,
    /// `HOST:PORT` as given (its host is one the `Host` guard accepts).
    address: String,
    /// What its handlers share, for a reload to change.
    app: App,
    rt: tokio::runtime::Handle,
    shutdown: tokio::sync::watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
    /// Ends the MCP server's open streams, which would otherwise hold shutdown up.
    mcp_stop: tokio_util::sync::CancellationToken,
}

impl Listening {
    /// `scheme://address` as clients reach it.
    pub fn url(&self) -> String {
        format!("{}://{}", self.scheme, self.local)
    }

    /// Stops accepting, lets requests in flight finish for up to `wait`, then drops the rest.
    pub async fn shutdown(self, wait: Duration) {
        let _ = self.shutdown.send(true);
        self.mcp_stop.cancel();
        let mut task = self.task;
        if tokio::time::timeout(wait, &mut task).await.is_err() {
            task.abort();
        }
    }
}

/// Binds the address and starts accepting. Refuses a non-loopback address without any
/// principal unless `listen.allow_unauthenticated` says so.
pub fn start(rt: &tokio::runtime::Runtime, setup: Setup<'_>) -> anyhow::Result<Listening> {
    let config = setup.config;
    let principals = Principals::resolve(config, setup.root, |name| std::env::var(name).ok())
        .map_err(|why| anyhow::anyhow!("listen.auth: {why}"))?;
    {
        let project = setup.project.read().unwrap_or_else(|p| p.into_inner());
        check_adapter_secrets(&project.config.adapters, |name| std::env::var(name).ok())?;
    }
    let tls = match &config.tls {
        Some(files) => Some(tls::acceptor(files, setup.root)?),
        None => None,
    };
    let listener = rt
        .block_on(TcpListener::bind(setup.address))
        .with_context(|| format!("cannot listen on {}", setup.address))?;
    let local = listener.local_addr().context("the listen address")?;
    check_open(local, &principals, config).map_err(anyhow::Error::msg)?;
    let tls_on = tls.is_some();
    let app = App(Arc::new(AppInner {
        decider: setup.decider,
        auth: Auth::new(principals)?,
        limits: Swap::new(Limits::new(config, setup.address, tls)),
        store: setup.store,
        state_dir: setup.state_dir.to_path_buf(),
        project: setup.project,
        metrics: setup.metrics,
        recent: setup.recent,
        clock: setup.clock,
        bodies: Arc::new(Semaphore::new(ingest::BODIES_AT_ONCE)),
        sessions: console::Sessions::default(),
        mcp: mcp::Sessions::default(),
        tls: tls_on,
    }));
    let mcp_stop = tokio_util::sync::CancellationToken::new();
    // The MCP server's inbox watcher starts on this runtime.
    let router = {
        let _runtime = rt.enter();
        router(app.clone(), mcp_stop.clone())
    };
    let scheme = if tls_on { "https" } else { "http" };
    let (shutdown, stop) = tokio::sync::watch::channel(false);
    let accept = Accept {
        listener,
        app: app.clone(),
        router,
        connections: Arc::new(Semaphore::new(config.max_connections)),
    };
    let task = rt.spawn(accept.run(stop));
    Ok(Listening {
        local,
        scheme,
        address: setup.address.to_owned(),
        app,
        rt: rt.handle().clone(),
        shutdown,
        task,
        mcp_stop,
    })
}

/// A listener anyone who reaches it may use is refused on an address other than loopback,
/// unless `listen.allow_unauthenticated` says so.
fn check_open(
    local: SocketAddr,
    principals: &Principals,
    config: &ListenConfig,
) -> Result<(), String> {
    if !local.ip().is_loopback() && principals.is_empty() && !config.allow_unauthenticated {
        return Err(format!(
            "refusing to listen on {local} (not loopback) with no principal in listen.auth: anyone who reaches the port could post events. Add principals, or set listen.allow_unauthenticated: true to accept that"
        ));
    }
    Ok(())
}

/// Every secret the adapters name is set: an adapter whose secret is missing would refuse
/// every sender, which is better said at start.
fn check_adapter_secrets(
    adapters: &[crate::adapter::Adapter],
    env: impl Fn(&str) -> Option<String>,
) -> anyhow::Result<()> {
    for a in adapters {
        let vars = a
            .auth
            .bearer_env
            .iter()
            .chain(a.auth.hmac.as_ref().map(|h| &h.secret_env));
        for var in vars {
            let value = env(var).unwrap_or_default();
            if value.is_empty() {
                anyhow::bail!(
                    "adapter `{}`: the environment variable {var} that holds its secret is not set",
                    a.name
                );
            }
            if value.len() < auth::MIN_TOKEN_LEN {
                anyhow::bail!(
                    "adapter `{}`: the secret in {var} is {} characters; a secret has at least {} (e.g. `openssl rand -hex 32`)",
                    a.name,
                    value.len(),
                    auth::MIN_TOKEN_LEN
                );
            }
        }
    }
    Ok(())
}

fn router(app: App, mcp_stop: tokio_util::sync::CancellationToken) -> Router {
    use tower_http::set_header::SetResponseHeaderLayer;
    let header = |name, value: &'static str| {
        SetResponseHeaderLayer::overriding(name, HeaderValue::from_static(value))
    };
    Router::new()
        .route("/v1/events", post(ingest::post_events))
        .route("/v1/ingest/{*name}", post(webhook::post_webhook))
        .route("/healthz", get(health::healthz))
        .route("/readyz", get(health::readyz))
        .route("/status", get(health::status))
        .route("/v1/approvals", get(list_api::approvals))
        .route("/v1/invocations", get(list_api::invocations))
        .route("/metrics", get(health::metrics))
        .merge(console::routes().layer(middleware::from_fn_with_state(
            app.clone(),
            console::bounded_form,
        )))
        .merge(mcp::routes(&app, mcp_stop))
        .fallback(not_found)
        .layer(middleware::from_fn_with_state(app.clone(), guard_and_log))
        .layer(header(header::X_CONTENT_TYPE_OPTIONS, "nosniff"))
        .layer(header(header::X_FRAME_OPTIONS, "DENY"))
        // Not `no-referrer`: under it a browser's form posts carry `Origin: null`, which the
        // guard must refuse. `same-origin` sends nothing to other sites either.
        .layer(header(header::REFERRER_POLICY, "same-origin"))
        .layer(header(header::CACHE_CONTROL, "no-store"))
        .with_state(app)
}

async fn not_found() -> Response {
    reply::error(
        StatusCode::NOT_FOUND,
        "no such route (the book's HTTP API page lists the routes)",
    )
}

/// The `Host`/`Origin` guard and one log line per request: method, path (never the query, which could carry a secret), status, duration.
/// Headers are never logged.
async fn guard_and_log(State(app): State<App>, request: Request, next: Next) -> Response {
    let started = Instant::now();
    let method = request.method().clone();
    let path = request.uri().path().to_owned();
    let conn = request.extensions().get::<ConnInfo>().copied();
    let local = conn.map(|c| c.local.ip());
    // The MCP transport specification: Origin is checked on every connection to /mcp,
    // including the GET that opens its event stream.
    let strict = path == "/mcp";
    let response = match guard::check(
        &app.limits().hosts,
        &method,
        request.headers(),
        local,
        app.tls,
        strict,
    ) {
        Ok(()) => next.run(request).await,
        Err(refusal) => reply::error(StatusCode::FORBIDDEN, refusal.message()),
    };
    let status = response.status().as_u16();
    let quiet = matches!(
        path.as_str(),
        "/healthz" | "/readyz" | "/status" | "/metrics"
    ) && status < 400;
    let ms = started.elapsed().as_secs_f64() * 1e3;
    // The client's address; behind a trusted proxy, the proxy's beside it.
    let peer = conn.map(|c| c.client.to_string()).unwrap_or_default();
    let via = conn
        .filter(|c| c.client != c.peer.ip())
        .map(|c| c.peer.to_string());
    let path = crate::term::for_humans(&path).into_owned();
    // What a post decided, on the same line (see `access_log`).
    let decided = response.extensions().get::<access_log::Decided>();
    let events = decided.map(|d| d.events);
    let outcomes = decided.map(|d| d.outcomes.as_str());
    if quiet {
        tracing::debug!(%method, %path, status, ms, %peer, via, "http");
    } else if status >= 400 {
        tracing::warn!(%method, %path, status, ms, %peer, via, events, decided = outcomes, "http");
    } else {
        tracing::info!(%method, %path, status, ms, %peer, via, events, decided = outcomes, "http");
    }
    response
}

/// The accept loop. Each connection takes the read timeout and TLS certificate in force
/// when it is accepted.
struct Accept {
    listener: TcpListener,
    app: App,
    router: Router,
    connections: Arc<Semaphore>,
}

impl Accept {
    async fn run(self, mut stop: tokio::sync::watch::Receiver<bool>) {
        let graceful = hyper_util::server::graceful::GracefulShutdown::new();
        loop {
            // Past the connection bound, wait for one to close before accepting more: the
            // kernel's backlog holds the rest.
            let permit = tokio::select! {
                p = self.connections.clone().acquire_owned() => match p {
                    Ok(p) => p,
                    Err(_) => break,
                },
                _ = stop.changed() => break,
            };
            let (stream, peer) = tokio::select! {
                accepted = self.listener.accept() => match accepted {
                    Ok(a) => a,
                    Err(e) => {
                        // Out of file descriptors and the like: wait a little, go on.
                        tracing::warn!(error = %e, "cannot accept a connection");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                },
                _ = stop.changed() => break,
            };
            let _ = stream.set_nodelay(true);
            let Ok(local) = stream.local_addr() else {
                continue;
            };
            let router = self.router.clone();
            let app = self.app.clone();
            let limits = self.app.limits();
            let tls = limits.tls.clone();
            let timeout = limits.read_timeout;
            let watcher = graceful.watcher();
            tokio::spawn(async move {
                let _permit = permit;
                let service = hyper::service::service_fn(
                    move |mut request: hyper::Request<hyper::body::Incoming>| {
                        // Per request: a proxy's connection carries many clients, and a
                        // reload may change who is trusted.
                        let proxies = &app.limits().trusted_proxies;
                        let client = client_addr::client(peer.ip(), request.headers(), proxies);
                        request.extensions_mut().insert(ConnInfo {
                            peer,
                            local,
                            client,
                        });
                        let router = router.clone();
                        async move {
                            use tower::ServiceExt as _;
                            router.oneshot(request.map(axum::body::Body::new)).await
                        }
                    },
                );
                let mut http = hyper::server::conn::http1::Builder::new();
                http.timer(TokioTimer::new())
                    .header_read_timeout(timeout)
                    .max_buf_size(64 * 1024);
                match tls {
                    None => {
                        let conn = http.serve_connection(TokioIo::new(stream), service);
                        let _ = watcher.watch(conn).await;
                    }
                    Some(acceptor) => {
                        let Ok(Ok(stream)) =
                            tokio::time::timeout(timeout, acceptor.accept(stream)).await
                        else {
                            return;
                        };
                        let conn = http.serve_connection(TokioIo::new(stream), service);
                        let _ = watcher.watch(conn).await;
                    }
                }
            });
        }
        drop(self.listener);
        graceful.shutdown().await;
    }
}
