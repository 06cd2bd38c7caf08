//! The JSON listings (the `read` scope): `GET /v1/approvals?after=CURSOR&limit=N` (waiting as
//! of now, oldest first) and `GET /v1/invocations?status=&agent=&trigger=&before=CURSOR&limit=N`
//! (newest first). Each answers `{"invocations": [rows as `pap invocations --json` gives
//! them, without the event], "next": CURSOR | null}`: the same pages as the console's.

use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::json;

use super::{App, ConnInfo, reply};
use crate::manifest::compiled_listen::Scope;
use crate::storage::cursor::{self, Kind};
use crate::storage::pages::{self as paging, InvocationFilter, Page};

/// Most rows a request may ask for.
const MOST: usize = 500;

#[derive(Deserialize)]
pub(super) struct Paging {
    #[serde(default)]
    after: Option<String>,
    #[serde(default)]
    before: Option<String>,
    #[serde(default)]
    limit: Option<usize>,
}

impl Paging {
    fn size(&self, default: usize) -> usize {
        self.limit.unwrap_or(default).clamp(1, MOST)
    }
}

pub(super) async fn approvals(
    State(app): State<App>,
    axum::Extension(conn): axum::Extension<ConnInfo>,
    headers: HeaderMap,
    Query(q): Query<Paging>,
) -> Response {
    if let Err(r) = app.authorize(&headers, &conn, Scope::Read).await {
        return r;
    }
    let after = match paging::parse(Kind::Approvals, q.after.as_deref()) {
        Ok(after) => after,
        Err(e) => return reply::error(StatusCode::BAD_REQUEST, e.to_string()),
    };
    let size = q.size(paging::APPROVALS_PAGE);
    let now = app.clock.now_ms();
    let store = app.store.clone();
    answer(
        tokio::task::spawn_blocking(move || paging::approvals(&*store, now, after, size, false))
            .await,
        Kind::Approvals,
        now,
    )
}

pub(super) async fn invocations(
    State(app): State<App>,
    axum::Extension(conn): axum::Extension<ConnInfo>,
    headers: HeaderMap,
    Query(filter): Query<InvocationFilter>,
    Query(q): Query<Paging>,
) -> Response {
    if let Err(r) = app.authorize(&headers, &conn, Scope::Read).await {
        return r;
    }
    let before = match paging::parse(Kind::Invocations, q.before.as_deref()) {
        Ok(before) => before,
        Err(e) => return reply::error(StatusCode::BAD_REQUEST, e.to_string()),
    };
    let size = q.size(paging::INVOCATIONS_PAGE);
    let now = app.clock.now_ms();
    let store = app.store.clone();
    answer(
        tokio::task::spawn_blocking(move || {
            paging::invocations(&*store, &filter, now, before, size)
        })
        .await,
        Kind::Invocations,
        now,
    )
}

fn answer(
    page: Result<crate::storage::Result<Page>, tokio::task::JoinError>,
    kind: Kind,
    now: i64,
) -> Response {
    let page = match page {
        Ok(Ok(page)) => page,
        Ok(Err(e)) => return reply::unavailable(format!("the store cannot be read: {e}"), 5),
        Err(_) => return reply::error(StatusCode::INTERNAL_SERVER_ERROR, "the listing failed"),
    };
    let rows: Vec<serde_json::Value> = page
        .rows
        .into_iter()
        .map(|inv| {
            let seq = inv.seq;
            let mut row = crate::views::as_of(inv, now).view(false);
            row["cursor"] = json!(cursor::encode(kind, seq));
            row
        })
        .collect();
    let body = json!({ "invocations": rows, "next": page.next });
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string() + "\n",
    )
        .into_response()
}
