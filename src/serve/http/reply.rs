//! Answers that are not a route's own: errors as `{"error": "…"}` with the right status and
//! headers.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

/// `{"error": message}` with `status`.
pub(super) fn error(status: StatusCode, message: impl Into<String>) -> Response {
    let body = json!({ "error": message.into() }).to_string();
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        body + "\n",
    )
        .into_response()
}

/// 503 with `Retry-After`: nothing of the request was recorded; send it again later.
pub(super) fn unavailable(message: impl Into<String>, retry_after_secs: u32) -> Response {
    let mut r = error(StatusCode::SERVICE_UNAVAILABLE, message);
    r.headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from(retry_after_secs));
    r
}

/// 401 with a `WWW-Authenticate` challenge.
pub(super) fn unauthorized(message: impl Into<String>) -> Response {
    let mut r = error(StatusCode::UNAUTHORIZED, message);
    r.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static("Bearer realm=\"pap\""),
    );
    r
}

/// 408 for a client too slow to send its body; the connection is closed after it.
pub(super) fn too_slow(message: impl Into<String>) -> Response {
    let mut r = error(StatusCode::REQUEST_TIMEOUT, message);
    r.headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    r
}

/// 429 with `Retry-After` (whole seconds, rounded up): too many failed attempts.
pub(super) fn too_many(message: impl Into<String>, wait: std::time::Duration) -> Response {
    let mut r = error(StatusCode::TOO_MANY_REQUESTS, message);
    let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
    r.headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from(secs.max(1)));
    r
}
