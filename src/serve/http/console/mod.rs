//! The web console at `/`: the inbox (live), approvals with their actions, invocations with
//! filters and transcripts, the audit log, and what is loaded. HTML rendered here and shipped
//! inside the binary (a little plain JavaScript only makes the inbox live); read pages work
//! without it.
//!
//! Reading needs the `read` scope (anonymous has it on a loopback setup without principals).
//! Answering an approval needs a logged-in session of a principal with `approve`, whatever
//! the address: the session's principal is the ATP responder and the audit's actor. Posts
//! carry the session's CSRF token, and pass the `Host`/`Origin` guard like every request;
//! the session cookie is `SameSite=Strict`.

mod html;
mod pages;
mod session;
mod stream;

use crate::storage::cursor::Kind;
use axum::Router;
use axum::extract::{Form, Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::Deserialize;

pub(super) use session::Sessions;

use super::auth::Caller;
use super::{App, ConnInfo};
use crate::agent::answer::{self, Answering};
use crate::manifest::compiled_listen::Scope;
use html::{Header, esc, page, url_part, with_headers};

pub(super) fn routes() -> Router<App> {
    Router::new()
        .route("/", get(inbox))
        .route("/inbox/stream", get(inbox_stream))
        .route("/approvals", get(approvals))
        .route("/approvals/{id}/respond", post(respond))
        .route("/invocations", get(invocations))
        .route("/invocations/{id}", get(invocation))
        .route("/audit", get(audit))
        .route("/manifests", get(manifests))
        .route("/login", get(login_form).post(login))
        .route("/logout", post(logout))
        .route("/static/console.css", get(css))
        .route("/static/console.js", get(js))
}

/// Reads a console request's body whole, within the form size limit and the read timeout,
/// before any handler sees it: a client trickling a form cannot hold a connection longer
/// than `listen.read_timeout`, whoever it is.
pub(super) async fn bounded_form(
    State(app): State<App>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    if request.method() != axum::http::Method::POST {
        return next.run(request).await;
    }
    let (parts, body) = request.into_parts();
    let timeout = app.limits().read_timeout;
    match super::ingest::read_body(&parts.headers, body, FORM_MAX_BYTES, timeout).await {
        Ok(bytes) => {
            let request = axum::extract::Request::from_parts(parts, axum::body::Body::from(bytes));
            next.run(request).await
        }
        Err(r) => r,
    }
}

/// The largest console form accepted (a login, an answer).
const FORM_MAX_BYTES: u64 = 16 * 1024;

/// Who is looking at a page.
struct Viewer {
    caller: Caller,
    session: Option<session::Session>,
}

impl Viewer {
    fn header(&self) -> Header<'_> {
        Header {
            who: self.caller.name.as_deref(),
            csrf: self.session.as_ref().map(|s| s.csrf.as_str()),
        }
    }

    /// The CSRF token to put in approval forms, when this viewer may approve.
    fn approve_csrf(&self) -> Option<&str> {
        let s = self.session.as_ref()?;
        (s.caller.name.is_some() && s.caller.may(Scope::Approve)).then_some(s.csrf.as_str())
    }

    /// Whether this viewer may still read, for what outlives its request (the live inbox's
    /// stream): its session, or else its principal, must be known to the principals in force
    /// (a reload may have removed it), with `read`.
    fn still_reads(&self, app: &App, headers: &HeaderMap) -> impl Fn() -> bool + Send + 'static {
        let app = app.clone();
        let session = self.session.is_some().then(|| headers.clone());
        let caller = self.caller.clone();
        move || {
            let principals = app.auth.principals();
            let now = match &session {
                Some(headers) => app.sessions.of(headers, &principals).map(|s| s.caller),
                None => principals.current(&caller),
            };
            now.is_some_and(|c| c.may(Scope::Read))
        }
    }
}

/// A read page's viewer, as an extractor (its rejection is the answer to send).
impl axum::extract::FromRequestParts<App> for Viewer {
    type Rejection = Response;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        app: &App,
    ) -> Result<Viewer, Response> {
        let conn = parts.extensions.get::<ConnInfo>().copied().ok_or_else(|| {
            super::reply::error(StatusCode::INTERNAL_SERVER_ERROR, "no connection")
        })?;
        viewer(app, &parts.headers, &conn).await
    }
}

/// The viewer of a read page: the session's principal, else the request's credentials, else
/// anonymous. Without `read`, a browser is sent to the login page.
async fn viewer(app: &App, headers: &HeaderMap, conn: &ConnInfo) -> Result<Viewer, Response> {
    if let Some(s) = app.sessions.of(headers, &app.auth.principals()) {
        if s.caller.may(Scope::Read) {
            return Ok(Viewer {
                caller: s.caller.clone(),
                session: Some(s),
            });
        }
        return Err(forbidden("this principal does not have the `read` scope"));
    }
    match app.authorize(headers, conn, Scope::Read).await {
        Ok(caller) => Ok(Viewer {
            caller,
            session: None,
        }),
        Err(r) if r.status() == StatusCode::UNAUTHORIZED => Err(see_other("/login")),
        Err(r) => Err(r),
    }
}

fn see_other(to: &str) -> Response {
    let mut r = StatusCode::SEE_OTHER.into_response();
    if let Ok(v) = HeaderValue::from_str(to) {
        r.headers_mut().insert(header::LOCATION, v);
    }
    r
}

fn forbidden(why: &str) -> Response {
    with_headers(
        StatusCode::FORBIDDEN,
        format!("<!doctype html><title>Forbidden</title><p>{}</p>", esc(why)),
    )
}

/// Renders `title` from a store read on the blocking pool.
async fn render(
    app: &App,
    viewer: &Viewer,
    title: &str,
    work: impl FnOnce(&App) -> crate::storage::Result<String> + Send + 'static,
) -> Response {
    let app2 = app.clone();
    match tokio::task::spawn_blocking(move || work(&app2)).await {
        Ok(Ok(body)) => page(title, &viewer.header(), &body),
        Ok(Err(e)) => super::reply::unavailable(format!("the store cannot be read: {e}"), 5),
        Err(_) => super::reply::error(StatusCode::INTERNAL_SERVER_ERROR, "rendering failed"),
    }
}

async fn inbox(State(app): State<App>, v: Viewer) -> Response {
    render(&app, &v, "Inbox", |app| pages::inbox(&*app.store)).await
}

#[derive(Deserialize)]
struct After {
    #[serde(default)]
    after: Option<u64>,
}

async fn inbox_stream(
    State(app): State<App>,
    v: Viewer,
    Query(q): Query<After>,
    headers: HeaderMap,
) -> Response {
    let resume = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok());
    let after = resume.or(q.after).unwrap_or(0);
    let still = v.still_reads(&app, &headers);
    stream::messages(app, after, still).into_response()
}

/// `?after=CURSOR` of a page that lists oldest first.
#[derive(Deserialize)]
struct PageAfter {
    #[serde(default)]
    after: Option<String>,
}

/// `?before=CURSOR` of a page that lists newest first.
#[derive(Deserialize)]
struct PageBefore {
    #[serde(default)]
    before: Option<String>,
}

/// 400 for a cursor that is not one of this listing's.
fn bad_cursor(e: crate::storage::cursor::BadCursor) -> Response {
    super::reply::error(StatusCode::BAD_REQUEST, e.to_string())
}

async fn approvals(State(app): State<App>, v: Viewer, Query(q): Query<PageAfter>) -> Response {
    let after = match crate::storage::pages::parse(Kind::Approvals, q.after.as_deref()) {
        Ok(after) => after,
        Err(e) => return bad_cursor(e),
    };
    let csrf = v.approve_csrf().map(str::to_owned);
    let project = app.project_now();
    render(&app, &v, "Approvals", move |app| {
        pages::approvals(
            &*app.store,
            &project,
            csrf.as_deref(),
            app.clock.now_ms(),
            after,
        )
    })
    .await
}

async fn invocations(
    State(app): State<App>,
    Query(filter): Query<pages::InvocationFilter>,
    Query(q): Query<PageBefore>,
    v: Viewer,
) -> Response {
    let before = match crate::storage::pages::parse(Kind::Invocations, q.before.as_deref()) {
        Ok(before) => before,
        Err(e) => return bad_cursor(e),
    };
    render(&app, &v, "Invocations", move |app| {
        pages::invocations(&*app.store, &filter, app.clock.now_ms(), before)
    })
    .await
}

async fn invocation(State(app): State<App>, Path(id): Path<String>, v: Viewer) -> Response {
    let title = format!("Invocation {id}");
    let missing = id.clone();
    let app2 = app.clone();
    let found = tokio::task::spawn_blocking(move || {
        pages::invocation(&*app2.store, &id, app2.clock.now_ms())
    })
    .await;
    match found {
        Ok(Ok(Some(body))) => page(&title, &v.header(), &body),
        Ok(Ok(None)) => with_headers(
            StatusCode::NOT_FOUND,
            format!(
                "<!doctype html><title>Not found</title><p>No invocation {}.</p>",
                esc(&missing)
            ),
        ),
        Ok(Err(e)) => super::reply::unavailable(format!("the store cannot be read: {e}"), 5),
        Err(_) => super::reply::error(StatusCode::INTERNAL_SERVER_ERROR, "rendering failed"),
    }
}

async fn audit(State(app): State<App>, v: Viewer) -> Response {
    render(&app, &v, "Audit log", |app| pages::audit(&*app.store)).await
}

async fn manifests(State(app): State<App>, v: Viewer) -> Response {
    let project = app.project_now();
    render(&app, &v, "Loaded manifests", move |app| {
        pages::manifests(&*app.store, &project, &app.recent, app.clock.now_ms())
    })
    .await
}

fn login_page(message: Option<&str>) -> Response {
    let note = message
        .map(|m| format!("<p class=\"error\">{}</p>", esc(m)))
        .unwrap_or_default();
    page(
        "Log in",
        &Header {
            who: None,
            csrf: None,
        },
        &format!(
            "{note}<form method=\"post\" action=\"/login\" class=\"login\">\
             <label>Principal <input name=\"name\" autocomplete=\"username\" required></label>\
             <label>Password or token <input name=\"password\" type=\"password\" autocomplete=\"current-password\" required></label>\
             <button type=\"submit\" id=\"login\">Log in</button></form>"
        ),
    )
}

async fn login_form() -> Response {
    login_page(None)
}

#[derive(Deserialize)]
struct LoginForm {
    name: String,
    password: String,
}

async fn login(
    State(app): State<App>,
    axum::Extension(conn): axum::Extension<ConnInfo>,
    Form(form): Form<LoginForm>,
) -> Response {
    match app
        .auth
        .login(&form.name, &form.password, conn.client)
        .await
    {
        Ok(caller) => {
            tracing::info!(principal = %crate::term::for_humans(caller.label()), peer = %conn.client, "console login");
            let token = app.sessions.start(caller);
            let mut r = see_other("/");
            if let Ok(v) = HeaderValue::from_str(&session::set_cookie(&token, app.tls)) {
                r.headers_mut().insert(header::SET_COOKIE, v);
            }
            r
        }
        Err(super::auth::AuthError::TooSoon(wait)) => {
            let mut r = login_page(Some(&format!(
                "Too many failed attempts from this address: try again in {} s.",
                wait.as_secs() + 1
            )));
            *r.status_mut() = StatusCode::TOO_MANY_REQUESTS;
            r
        }
        Err(_) => {
            let mut r = login_page(Some("Unknown principal, or a wrong password."));
            *r.status_mut() = StatusCode::UNAUTHORIZED;
            r
        }
    }
}

#[derive(Deserialize)]
struct CsrfForm {
    csrf: String,
}

async fn logout(
    State(app): State<App>,
    headers: HeaderMap,
    Form(form): Form<CsrfForm>,
) -> Response {
    if let Some(s) = app.sessions.of(&headers, &app.auth.principals())
        && s.csrf_ok(&form.csrf)
    {
        app.sessions.end(&headers);
    }
    let mut r = see_other("/login");
    if let Ok(v) = HeaderValue::from_str(&session::set_cookie("", app.tls)) {
        r.headers_mut().insert(header::SET_COOKIE, v);
    }
    r
}

#[derive(Deserialize)]
struct RespondForm {
    csrf: String,
    action: String,
    #[serde(default)]
    confirmed: Option<String>,
}

/// Flags that make an action ask "are you sure?" first.
const CONFIRM_FLAGS: [&str; 3] = ["irreversible", "destructive", "requires_confirmation"];

/// An answer to an approval request from the console: an ATP response by the logged-in
/// principal. Actions flagged irreversible (or asking for confirmation) show a confirmation
/// page first.
async fn respond(
    State(app): State<App>,
    Path(id): Path<String>,
    headers: HeaderMap,
    Form(form): Form<RespondForm>,
) -> Response {
    let Some(s) = app.sessions.of(&headers, &app.auth.principals()) else {
        return super::reply::unauthorized(
            "answering an approval needs a console login of a principal with the `approve` scope",
        );
    };
    if !s.csrf_ok(&form.csrf) {
        return forbidden("the form is stale or forged (CSRF token mismatch); reload the page");
    }
    let Some(name) = s
        .caller
        .name
        .clone()
        .filter(|_| s.caller.may(Scope::Approve))
    else {
        return forbidden("this principal does not have the `approve` scope");
    };
    let store = app.store.clone();
    let lookup_id = id.clone();
    let found = tokio::task::spawn_blocking(move || {
        store.read(|r| {
            let Some(inv) = r.invocation(&lookup_id)? else {
                return Ok(None);
            };
            let request = match &inv.approval_request {
                Some(n) => r.notification(n)?,
                None => None,
            };
            Ok(Some((inv, request)))
        })
    })
    .await;
    let (inv, request) = match found {
        Ok(Ok(Some(found))) => found,
        Ok(Ok(None)) => {
            return super::reply::error(StatusCode::NOT_FOUND, format!("no invocation {id}"));
        }
        _ => return super::reply::unavailable("the store cannot be read", 5),
    };
    let atp = request.and_then(|n| n.atp).unwrap_or_default();
    let action = atp["actions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|a| a["id"] == form.action.as_str())
        .cloned();
    let Some(action) = action else {
        return super::reply::error(
            StatusCode::BAD_REQUEST,
            format!("this request offers no action `{}`", form.action),
        );
    };
    let flags: Vec<&str> = action["flags"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|f| f.as_str())
        .collect();
    let needs_confirming = flags.iter().any(|f| CONFIRM_FLAGS.contains(f));
    if needs_confirming && form.confirmed.as_deref() != Some("yes") {
        let body = format!(
            "<section class=\"confirm\"><p>{} for invocation <a href=\"/invocations/{}\">{}</a> \
             (agent {}, event {}).</p><p>This action is flagged <strong>{}</strong>.</p>\
             <form method=\"post\" action=\"/approvals/{}/respond\">\
             <input type=\"hidden\" name=\"csrf\" value=\"{}\">\
             <input type=\"hidden\" name=\"action\" value=\"{}\">\
             <input type=\"hidden\" name=\"confirmed\" value=\"yes\">\
             <button type=\"submit\" id=\"confirm\" class=\"action {}\">Yes: {}</button> \
             <a href=\"/approvals\">No, go back</a></form></section>",
            esc(action["label"].as_str().unwrap_or(&form.action)),
            url_part(&inv.id),
            esc(&inv.id),
            esc(&inv.agent),
            esc(&inv.event_id),
            esc(&flags.join(", ")),
            url_part(&inv.id),
            esc(&s.csrf),
            esc(&form.action),
            esc(&form.action),
            esc(action["label"].as_str().unwrap_or(&form.action)),
        );
        return page(
            "Confirm",
            &Header {
                who: Some(&name),
                csrf: Some(&s.csrf),
            },
            &body,
        );
    }
    let store = app.store.clone();
    let project = app.project_now();
    let (who, inv_id, action_id) = (name.clone(), inv.id.clone(), form.action.clone());
    let now = app.clock.now_ms();
    let done = tokio::task::spawn_blocking(move || {
        let answering = Answering {
            by: &who,
            note: Some("answered in the web console".into()),
            answer: answer::short_answer(&action_id, &who, now),
            now,
        };
        store.write_or_refuse(|tx| match action_id.as_str() {
            "approve" => {
                answer::approve(tx, &inv_id, &answering, false).map(|r| r.map(|()| Vec::new()))
            }
            _ => answer::reject(
                tx,
                &project,
                &inv_id,
                &answering,
                "rejected in the web console",
            ),
        })
    })
    .await;
    match done {
        Ok(Ok(Ok(events))) => {
            tracing::info!(invocation = %inv.id, action = %form.action, principal = %crate::term::for_humans(&name), "approval answered in the console");
            app.decider.poke(events);
            see_other("/approvals")
        }
        Ok(Ok(Err(refused))) => super::reply::error(StatusCode::CONFLICT, refused.to_string()),
        // The store failed, not the answer: the person may try again.
        Ok(Err(e)) => {
            tracing::error!(invocation = %inv.id, error = %e, "the console's answer could not be recorded");
            super::reply::error(StatusCode::SERVICE_UNAVAILABLE, e.to_string())
        }
        Err(_) => super::reply::error(StatusCode::INTERNAL_SERVER_ERROR, "the answer failed"),
    }
}

async fn css() -> Response {
    static_file(
        include_str!("static/console.css"),
        "text/css; charset=utf-8",
    )
}

async fn js() -> Response {
    static_file(
        include_str!("static/console.js"),
        "text/javascript; charset=utf-8",
    )
}

fn static_file(text: &'static str, content_type: &'static str) -> Response {
    ([(header::CONTENT_TYPE, content_type)], text).into_response()
}
