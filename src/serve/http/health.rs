//! `/healthz` (the process answers) and `/readyz` (it can take events now), for load
//! balancers and orchestrators. Neither needs credentials; `/readyz` carries the body of
//! `pap status --json` only for a caller with the `read` scope.

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use super::{App, ConnInfo, reply};
use crate::manifest::compiled_listen::Scope;

pub async fn healthz() -> Response {
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        "{\"ok\":true}\n",
    )
        .into_response()
}

/// Ready while serve is not stopping and the store can be read. A failing sink or a late
/// approval makes pap *need attention* (`healthy: false` in the report), not unready: taking
/// it out of a load balancer would not help either.
pub async fn readyz(
    State(app): State<App>,
    axum::Extension(conn): axum::Extension<ConnInfo>,
    headers: HeaderMap,
) -> Response {
    if app.decider.stopping() {
        return reply::unavailable("pap serve is stopping", 5);
    }
    let detailed = app.authorize(&headers, &conn, Scope::Read).await.is_ok();
    if !detailed {
        // Cheap for anyone: is the store readable at all? (No scan, no error text.)
        let store = app.store.clone();
        let readable = tokio::task::spawn_blocking(move || store.read(|r| r.inbox_last()).is_ok())
            .await
            .unwrap_or(false);
        return if readable {
            json_ok(json!({ "ready": true, "events_waiting": app.decider.queued() }))
        } else {
            reply::unavailable("the store cannot be read", 5)
        };
    }
    let (store, state_dir) = (app.store.clone(), app.state_dir.clone());
    let project = app
        .project
        .read()
        .unwrap_or_else(|p| p.into_inner())
        .clone();
    let queued = app.decider.queued();
    let now = app.clock.now_ms();
    let report = tokio::task::spawn_blocking(move || {
        crate::status_report::gather(&*store, &state_dir, Some(&project), now)
    })
    .await;
    match report {
        Ok(Ok(report)) => {
            json_ok(json!({ "ready": true, "events_waiting": queued, "status": report }))
        }
        Ok(Err(e)) => reply::unavailable(format!("the store cannot be read: {e:#}"), 5),
        Err(_) => reply::unavailable("the readiness check failed", 5),
    }
}

/// `GET /metrics` (the `metrics` scope): OpenMetrics text.
pub async fn metrics(
    State(app): State<App>,
    axum::Extension(conn): axum::Extension<ConnInfo>,
    headers: HeaderMap,
) -> Response {
    if let Err(r) = app.authorize(&headers, &conn, Scope::Metrics).await {
        return r;
    }
    let (metrics, store) = (app.metrics.clone(), app.store.clone());
    let now = app.clock.now_ms();
    match tokio::task::spawn_blocking(move || metrics.scrape(&*store, now)).await {
        Ok(Ok(text)) => (
            StatusCode::OK,
            [(
                header::CONTENT_TYPE,
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
            )],
            text,
        )
            .into_response(),
        Ok(Err(e)) => reply::unavailable(format!("the store cannot be read: {e:#}"), 5),
        Err(_) => reply::error(StatusCode::INTERNAL_SERVER_ERROR, "the scrape failed"),
    }
}

fn json_ok(body: serde_json::Value) -> Response {
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string() + "\n",
    )
        .into_response()
}
