//! `POST /v1/events`: events in, one `pap dispatch --json` line per event out, sent once the
//! decisions are durable and before any agent runs.
//!
//! Status: 200 when at least one event was valid (each line says what became of its event);
//! 400 when none was (a sender retrying would only be refused again); 401/403 for who is
//! asking; 408 for a body that did not arrive within the read timeout; 413 over the size
//! limit; 415 for a content type pap does not take; 503 with `Retry-After` when serve is
//! stopping, too many events wait, or the store failed. Whatever the refusal, nothing of the
//! request was recorded: the request's events are one transaction.

use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use http_body_util::{BodyExt, LengthLimitError, Limited};

use super::body::{self, BodyError, Parsed};
use super::{App, ConnInfo, reply};
use crate::dispatcher::Pending;
use crate::manifest::compiled_listen::Scope;
use crate::pipeline::report::EventReport;
use crate::serve::decider::Refused;

/// Bodies larger than this are parsed on the blocking pool, off the async workers.
const PARSE_INLINE_MAX: usize = 64 * 1024;

pub(super) async fn post_events(
    State(app): State<App>,
    axum::Extension(conn): axum::Extension<ConnInfo>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let caller = match app.authorize(&headers, &conn, Scope::Ingest).await {
        Ok(c) => c,
        Err(r) => return r,
    };
    let (bytes, place) = match accept_body(&app, &headers, body).await {
        Ok(b) => b,
        Err(r) => return r,
    };
    let max_event_bytes = app.project_now().config.max_event_bytes;
    let trace = trace_headers(&headers);
    let size = bytes.len();
    let parsed =
        match off_thread_if_large(size, move || body::parse(&headers, &bytes, max_event_bytes))
            .await
        {
            Some(p) => p,
            None => {
                return reply::error(StatusCode::INTERNAL_SERVER_ERROR, "reading the body failed");
            }
        };
    drop(place);
    let parsed = match parsed {
        Ok(p) => p,
        Err(BodyError::Unsupported(why)) => {
            return reply::error(StatusCode::UNSUPPORTED_MEDIA_TYPE, why);
        }
    };
    answer(&app, &caller, "/v1/events", trace, parsed).await
}

/// The `traceparent` and `tracestate` headers (several `tracestate` headers are one list), for
/// events without their own; read only while traces are exported.
pub(super) fn trace_headers(headers: &HeaderMap) -> Option<(String, Option<String>)> {
    if !pap_engine::telemetry::enabled() {
        return None;
    }
    let parent = headers.get("traceparent")?.to_str().ok()?.to_owned();
    let states: Vec<&str> = headers
        .get_all("tracestate")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect();
    Some((parent, (!states.is_empty()).then(|| states.join(","))))
}

/// Runs `work` (parsing a body of `size` bytes) here when small, else on the blocking pool,
/// off the async workers. `None` when it panicked.
pub(super) async fn off_thread_if_large<T: Send + 'static>(
    size: usize,
    work: impl FnOnce() -> T + Send + 'static,
) -> Option<T> {
    if size <= PARSE_INLINE_MAX {
        return Some(work());
    }
    tokio::task::spawn_blocking(work).await.ok()
}

/// Decides `parsed` and answers with one line per event (or the refusal).
pub(super) async fn answer(
    app: &App,
    caller: &super::auth::Caller,
    route: &str,
    trace: Option<(String, Option<String>)>,
    mut parsed: Vec<Parsed>,
) -> Response {
    // How they arrived goes with them: a trigger's `cancel_on` checks who may end what.
    let sender = crate::domain::Sender {
        route: route.to_owned(),
        principal: caller.name.clone(),
    };
    for p in &mut parsed {
        if let Ok(event) = &mut p.event {
            event.sender = Some(sender.clone());
            if pap_engine::telemetry::enabled() {
                let headers = trace.as_ref().map(|(p, s)| (p.as_str(), s.as_deref()));
                event.trace = crate::trace_context::TraceContext::of_event(&event.value, headers);
            }
        }
    }
    let valid = parsed.iter().filter(|p| p.event.is_ok()).count();
    app.metrics.received(route, valid, parsed.len() - valid);
    if parsed.is_empty() {
        return reply::error(StatusCode::BAD_REQUEST, "the body holds no events");
    }
    let (status, reports) = match decide(app, parsed).await {
        Ok(answer) => answer,
        Err(refused) => return refusal(refused),
    };
    tracing::debug!(
        principal = caller.label(),
        events = reports.len(),
        "events posted"
    );
    let mut text = String::with_capacity(reports.len() * 256);
    for r in &reports {
        text.push_str(&serde_json::to_string(r).expect("reports serialise"));
        text.push('\n');
    }
    let mut response = (
        status,
        [(header::CONTENT_TYPE, "application/x-ndjson")],
        text,
    )
        .into_response();
    // The request's one log line says what was decided (see `super::access_log`).
    response
        .extensions_mut()
        .insert(super::access_log::Decided::of(&reports));
    response
}

/// The reports of `parsed`, in order: invalid events reported here, valid ones decided by
/// the deciding thread. 400 when none was valid.
async fn decide(app: &App, parsed: Vec<Parsed>) -> Result<(StatusCode, Vec<EventReport>), Refused> {
    // Each position holds an invalid event's report, or `None` for the next decided one.
    let mut slots: Vec<Option<EventReport>> = Vec::with_capacity(parsed.len());
    let mut valid = Vec::new();
    for p in parsed {
        match p.event {
            Ok(event) => {
                slots.push(None);
                valid.push(Pending {
                    input: p.input,
                    event: Ok(event),
                    emitted: false,
                    prepared: None,
                });
            }
            Err(bad) => slots.push(Some(EventReport::invalid(
                p.input, bad.id, bad.kind, bad.reason,
            ))),
        }
    }
    if valid.is_empty() {
        let reports = slots.into_iter().flatten().collect();
        return Ok((StatusCode::BAD_REQUEST, reports));
    }
    let mut decided = app.decider.decide(valid).await?.into_iter();
    let reports = slots
        .into_iter()
        .map(|slot| {
            slot.or_else(|| decided.next())
                .expect("one report per event")
        })
        .collect();
    Ok((StatusCode::OK, reports))
}

fn refusal(refused: Refused) -> Response {
    match refused {
        Refused::Stopping => reply::unavailable("pap serve is stopping; nothing was recorded", 5),
        Refused::Overloaded => reply::unavailable(
            "too many events are waiting to be decided (listen.max_queued_events); nothing was recorded",
            1,
        ),
        Refused::Failed(why) => reply::unavailable(
            format!("the decisions could not be committed ({why}); nothing was recorded"),
            5,
        ),
    }
}

/// How many request bodies are read and parsed at once, at most: with bodies of up to
/// `listen.max_body_bytes`, this bounds what bodies take in memory whoever sends them.
pub(super) const BODIES_AT_ONCE: usize = 32;

/// The body of a request that brings events, with its place among the bodies being read
/// (held until the body is parsed). Refused at once while serve stops (before it is read),
/// with 503 when no place frees within the read timeout, else read whole within the size and
/// time limits.
pub(super) async fn accept_body(
    app: &App,
    headers: &HeaderMap,
    body: Body,
) -> Result<(Bytes, tokio::sync::OwnedSemaphorePermit), Response> {
    if app.decider.stopping() {
        return Err(reply::unavailable(
            "pap serve is stopping; nothing was recorded",
            5,
        ));
    }
    let limits = app.limits();
    let place = tokio::time::timeout(limits.read_timeout, app.bodies.clone().acquire_owned()).await;
    let Ok(Ok(place)) = place else {
        return Err(reply::unavailable(
            "too many requests are sending bodies at once; nothing was recorded",
            1,
        ));
    };
    let bytes = read_body(headers, body, limits.max_body_bytes, limits.read_timeout).await?;
    Ok((bytes, place))
}

/// The whole body, bounded in size and in time.
pub(super) async fn read_body(
    headers: &HeaderMap,
    body: Body,
    max_bytes: u64,
    timeout: Duration,
) -> Result<Bytes, Response> {
    let too_large = || {
        reply::error(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("the body is larger than {max_bytes} bytes (listen.max_body_bytes)"),
        )
    };
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > max_bytes) {
        return Err(too_large());
    }
    let limited = Limited::new(body, usize::try_from(max_bytes).unwrap_or(usize::MAX));
    match tokio::time::timeout(timeout, limited.collect()).await {
        Err(_) => Err(reply::too_slow(format!(
            "the body did not arrive within {} s (listen.read_timeout); nothing was recorded",
            timeout.as_secs_f64()
        ))),
        Ok(Err(e)) if e.downcast_ref::<LengthLimitError>().is_some() => Err(too_large()),
        Ok(Err(_)) => Err(reply::error(
            StatusCode::BAD_REQUEST,
            "the body could not be read (cut short, or malformed chunked encoding)",
        )),
        Ok(Ok(collected)) => Ok(collected.to_bytes()),
    }
}
