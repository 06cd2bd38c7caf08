//! `POST /v1/ingest/NAME`: a webhook mapped to events by its adapter (`adapters:` in
//! pap.yaml, or a built-in preset), then decided and answered as `POST /v1/events` is.
//!
//! The adapter is looked up in the project serve runs now, so a reload that adds or changes
//! one takes effect without a restart. An adapter with its own `auth` (a bearer token, an
//! HMAC signature of the body) accepts only that; one without leaves it to `listen.auth`
//! and the `ingest` scope.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{OriginalUri, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::Response;
use subtle::ConstantTimeEq;

use super::auth::Caller;
use super::body::{Parsed, SOURCE};
use super::ingest::{accept_body, answer, off_thread_if_large};
use super::{App, ConnInfo, reply};
use crate::adapter::{Adapter, AdapterAuth};
use crate::event;
use crate::event::input::Location;
use crate::manifest::compiled_listen::Scope;

pub(super) async fn post_webhook(
    State(app): State<App>,
    axum::Extension(conn): axum::Extension<ConnInfo>,
    OriginalUri(uri): OriginalUri,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let adapter = {
        let project = app.project.read().unwrap_or_else(|p| p.into_inner());
        project
            .config
            .adapters
            .iter()
            .find(|a| a.path == uri.path())
            .cloned()
    };
    let Some(adapter) = adapter else {
        return reply::error(
            StatusCode::NOT_FOUND,
            format!(
                "no webhook adapter has this route (adapters: in pap.yaml; built in: {})",
                crate::adapter::presets::routes()
            ),
        );
    };
    let own_auth = adapter.auth != AdapterAuth::default();
    // Checked first, whatever the address did before (a token compare and an HMAC cost
    // next to nothing): only a failure is slowed, so a valid sender behind the same proxy
    // as a failing one still gets in.
    let client = conn.client;
    let refuse = |why: String| match app.auth.too_soon(client) {
        Some(wait) => reply::too_many(
            "too many failed attempts from this address; try again later",
            wait,
        ),
        None => {
            app.auth.note_failure(client);
            reply::unauthorized(format!("adapter `{}`: {why}", adapter.name))
        }
    };
    let caller = if own_auth {
        if let Err(why) = bearer(&adapter, &headers) {
            return refuse(why);
        }
        Caller {
            name: Some(format!("adapter:{}", adapter.name)),
            scopes: vec![Scope::Ingest],
            fingerprint: None,
        }
    } else {
        match app.authorize(&headers, &conn, Scope::Ingest).await {
            Ok(c) => c,
            Err(r) => return r,
        }
    };
    let (bytes, place) = match accept_body(&app, &headers, body).await {
        Ok(b) => b,
        Err(r) => return r,
    };
    if let Err(why) = signature(&adapter, &headers, &bytes) {
        return refuse(why);
    }
    // JSON only, and said so: a browser cannot send that cross-site without a preflight.
    let ct = headers
        .get(header::CONTENT_TYPE)
        .map_or("", |v| v.to_str().unwrap_or("?"));
    if !event::is_json_media_type(ct) {
        return reply::error(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            format!(
                "a webhook body is JSON (Content-Type: application/json); Content-Type is `{}`",
                crate::term::for_humans(ct)
            ),
        );
    }
    let max_event_bytes = app.project_now().config.max_event_bytes;
    let adapter = Arc::new(adapter);
    let route = adapter.path.clone();
    let trace = super::ingest::trace_headers(&headers);
    let size = bytes.len();
    let now = app.clock.now_ms();
    let mapped =
        off_thread_if_large(size, move || map(&adapter, &bytes, max_event_bytes, now)).await;
    drop(place);
    match mapped {
        Some(Ok(parsed)) => answer(&app, &caller, &route, trace, parsed).await,
        Some(Err(why)) => reply::error(StatusCode::BAD_REQUEST, why),
        None => reply::error(StatusCode::INTERNAL_SERVER_ERROR, "mapping the body failed"),
    }
}

/// The adapter's events of a body, each validated as any event is (the engine's
/// [`crate::adapter::events_of_body`], which `pap adapt` and `pap dispatch --adapter` share).
fn map(
    adapter: &Adapter,
    bytes: &[u8],
    max_event_bytes: u64,
    now: i64,
) -> Result<Vec<Parsed>, String> {
    let events = crate::adapter::events_of_body(adapter, bytes, max_event_bytes, now)
        .map_err(|why| why.to_string())?;
    Ok(events
        .into_iter()
        .map(|e| Parsed {
            input: Location {
                source: Arc::from(SOURCE),
                line: None,
                index: e.index,
            },
            event: e.event,
        })
        .collect())
}

/// The adapter's own bearer token, when it has one; else why the request is refused.
fn bearer(adapter: &Adapter, headers: &HeaderMap) -> Result<(), String> {
    let Some(var) = &adapter.auth.bearer_env else {
        return Ok(());
    };
    let expected = std::env::var(var).unwrap_or_default();
    let presented = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            v.strip_prefix("Bearer ")
                .or_else(|| v.strip_prefix("bearer "))
        })
        .unwrap_or("");
    let digest =
        |s: &str| -> [u8; 32] { <sha2::Sha256 as sha2::Digest>::digest(s.as_bytes()).into() };
    if expected.is_empty() || !bool::from(digest(&expected).ct_eq(&digest(presented))) {
        return Err("it needs its bearer token".into());
    }
    Ok(())
}

/// The adapter's HMAC-SHA256 signature of the raw body, when it has one; else why the
/// request is refused.
///
/// The header may carry several signatures while a secret rotates: PagerDuty sends
/// `v1=SIG1,v1=SIG2` ("if at least one of the signatures matches, the webhook should be
/// considered trusted"), and Standard Webhooks separates them with spaces. The request is
/// accepted when any one verifies. Every candidate is checked, in constant time each, and
/// the verdicts are combined without stopping early, so the time taken does not say which
/// one matched; at most [`MAX_SIGNATURES`] are looked at.
fn signature(adapter: &Adapter, headers: &HeaderMap, body: &[u8]) -> Result<(), String> {
    use hmac::{KeyInit, Mac};
    let Some(h) = &adapter.auth.hmac else {
        return Ok(());
    };
    let refuse = |why: &str| Err(why.to_owned());
    let secret = std::env::var(&h.secret_env).unwrap_or_default();
    if secret.is_empty() {
        tracing::error!(adapter = %adapter.name, variable = %h.secret_env, "the adapter's HMAC secret is not set");
        return refuse("its signature cannot be checked (the secret is not set on the server)");
    }
    let Some(value) = headers.get(h.header.as_str()).and_then(|v| v.to_str().ok()) else {
        return refuse(&format!("the `{}` header is missing", h.header));
    };
    let candidates = signatures(value, &h.prefix);
    if candidates.is_empty() {
        return refuse(&format!(
            "the `{}` header is not `{}HEX` (or several, separated by commas or spaces)",
            h.header, h.prefix
        ));
    }
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(secret.as_bytes())
        .expect("HMAC takes keys of any length");
    mac.update(body);
    let expected = mac.finalize().into_bytes();
    let mut matched = subtle::Choice::from(0);
    for sig in &candidates {
        matched |= expected.as_slice().ct_eq(sig.as_slice());
    }
    if bool::from(matched) {
        Ok(())
    } else {
        refuse("the signature does not match the body")
    }
}

/// The most signatures one header is looked at for (a rotation has two).
const MAX_SIGNATURES: usize = 8;

/// The signatures in a header value: each `PREFIX` + hex, separated by commas or spaces.
/// Pieces that are not one are skipped (PagerDuty may add versions pap does not know).
fn signatures(value: &str, prefix: &str) -> Vec<Vec<u8>> {
    value
        .split(|c: char| c == ',' || c.is_ascii_whitespace())
        .filter_map(|piece| piece.trim().strip_prefix(prefix))
        .filter_map(hex_decode)
        .filter(|sig| !sig.is_empty())
        .take(MAX_SIGNATURES)
        .collect()
}

fn hex_decode(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}
