//! `/healthz` (the process answers) and `/readyz` (it can take events now), for load
//! balancers and orchestrators: neither needs credentials, and neither reads more than one
//! small value. `GET /status` (the `read` scope) is `pap status --json`, and `/metrics`.

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use super::{App, ConnInfo, reply};
use crate::manifest::compiled_listen::Scope;
use crate::serve::metrics_format;

pub(super) async fn healthz() -> Response {
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        "{\"ok\":true}\n",
    )
        .into_response()
}

/// Ready means only "can take events now": serve is not stopping, its queue of events to
/// decide has room, and the store can be read (one small read, the same for every caller: a
/// probe never gathers the status report, which is `GET /status`). A failing sink or agent, a
/// refused reload or a late approval makes pap *need attention* (`healthy: false` in the
/// report), not unready: taking it out of a load balancer would not help. The body's
/// `degraded` says it is so (worked out at most every 15 s, see `serve::health`).
pub(super) async fn readyz(State(app): State<App>) -> Response {
    if app.decider.stopping() {
        return reply::unavailable("pap serve is stopping", 5);
    }
    if app.decider.full() {
        let mut r = json_reply(
            StatusCode::SERVICE_UNAVAILABLE,
            json!({
                "ready": false,
                "events_waiting": app.decider.queued(),
                "error": "too many events are waiting to be decided (listen.max_queued_events)",
            }),
        );
        r.headers_mut()
            .insert(header::RETRY_AFTER, axum::http::HeaderValue::from(1));
        return r;
    }
    let store = app.store.clone();
    let readable = tokio::task::spawn_blocking(move || store.read(|r| r.inbox_last()).is_ok())
        .await
        .unwrap_or(false);
    // Degraded or not, it is ready: a failing agent must not take the node out of a Service
    // nor stop deliveries. The body says so, with no names and no error text (the probe may
    // be anonymous); `GET /status` says what and why. The probe only reads the last answer:
    // a stale one is worked out again in the background, never on the probe's time.
    let now = app.clock.now_ms();
    if app.metrics.health.stale(now) {
        let inner = app.clone();
        let project = app.project_now();
        tokio::task::spawn_blocking(move || {
            let _ = inner.metrics.health.snapshot(&*inner.store, &project, now);
        });
    }
    let degraded = app.metrics.health.last().is_some_and(|h| h.degraded());
    let answer = readable.then_some(degraded);
    if let Some(degraded) = answer {
        json_ok(json!({
            "ready": true,
            "degraded": degraded,
            "events_waiting": app.decider.queued(),
        }))
    } else {
        reply::unavailable("the store cannot be read", 5)
    }
}

/// `GET /status` (the `read` scope): the report of `pap status --json`, the same object. 200
/// whenever it was gathered (whether pap is healthy is in the body, `healthy`); 503 when the
/// store cannot be read. Its cost does not grow with the queue (see `status_report`).
pub(super) async fn status(
    State(app): State<App>,
    axum::Extension(conn): axum::Extension<ConnInfo>,
    headers: HeaderMap,
) -> Response {
    if let Err(r) = app.authorize(&headers, &conn, Scope::Read).await {
        return r;
    }
    let (store, state_dir) = (app.store.clone(), app.state_dir.clone());
    let project = app
        .project
        .read()
        .unwrap_or_else(|p| p.into_inner())
        .clone();
    let now = app.clock.now_ms();
    let report = tokio::task::spawn_blocking(move || {
        crate::status_report::gather(&*store, &state_dir, Some(&project), now)
    })
    .await;
    match report {
        Ok(Ok(report)) => json_ok(json!(report)),
        Ok(Err(e)) => reply::unavailable(format!("the store cannot be read: {e:#}"), 5),
        Err(_) => reply::error(StatusCode::INTERNAL_SERVER_ERROR, "the report failed"),
    }
}

/// `GET /metrics` (the `metrics` scope): OpenMetrics when the scraper asks for it, the
/// Prometheus text format 0.0.4 otherwise.
pub(super) async fn metrics(
    State(app): State<App>,
    axum::Extension(conn): axum::Extension<ConnInfo>,
    headers: HeaderMap,
) -> Response {
    if let Err(r) = app.authorize(&headers, &conn, Scope::Metrics).await {
        return r;
    }
    let (metrics, store) = (app.metrics.clone(), app.store.clone());
    let project = app.project_now();
    let now = app.clock.now_ms();
    let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok());
    let format = metrics_format::Format::negotiate(accept);
    let scrape = move || {
        metrics
            .scrape(&*store, &project, now)
            .map(|text| match format {
                metrics_format::Format::OpenMetrics => text,
                metrics_format::Format::Text => metrics_format::to_text(&text),
            })
    };
    match tokio::task::spawn_blocking(scrape).await {
        Ok(Ok(text)) => (
            StatusCode::OK,
            [
                (header::CONTENT_TYPE, format.content_type()),
                (header::VARY, "Accept"),
            ],
            text,
        )
            .into_response(),
        Ok(Err(e)) => reply::unavailable(format!("the store cannot be read: {e:#}"), 5),
        Err(_) => reply::error(StatusCode::INTERNAL_SERVER_ERROR, "the scrape failed"),
    }
}

fn json_ok(body: serde_json::Value) -> Response {
    json_reply(StatusCode::OK, body)
}

fn json_reply(code: StatusCode, body: serde_json::Value) -> Response {
    (
        code,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string() + "\n",
    )
        .into_response()
}
