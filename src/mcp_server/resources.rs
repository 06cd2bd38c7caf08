//! The resources: the inbox (`ui://chat/inbox`, the document's body shape), a session's
//! thread (`ui://chat/session/{id}`), one invocation (`pap://invocations/{id}`), one
//! notification (`pap://notifications/{id}`) and the UI server's health and readiness
//! (`ui://agent/status`, from `crate::ui_status`).

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, percent_decode_str, utf8_percent_encode};
use rmcp::ErrorData as McpError;
use rmcp::model::{
    ListResourceTemplatesResult, ListResourcesResult, ReadResourceResult, Resource,
    ResourceContents, ResourceTemplate,
};
use serde_json::{Value, json};

use super::PapMcp;
use crate::chat::view;

pub(super) const INBOX_URI: &str = "ui://chat/inbox";
pub(super) const STATUS_URI: &str = "ui://agent/status";
const SESSION_PREFIX: &str = "ui://chat/session/";
const INVOCATION_PREFIX: &str = "pap://invocations/";
const NOTIFICATION_PREFIX: &str = "pap://notifications/";
/// The inbox resource holds the newest this many messages; `chat_read_since` pages through
/// all of them.
pub(super) const INBOX_WINDOW: u64 = 200;
/// The most inbox messages one read looks at: a session's thread says where its look began
/// (`scanned_from`), `chat_read_since` where it stopped (`last_id`, `more`).
pub(super) const SCAN_MAX: u64 = 10_000;
const JSON: &str = "application/json";

/// What is percent-encoded in a session's name: all but RFC 3986's unreserved characters,
/// so `incident-db1` is its own URI, as a client expanding the template writes it.
const SESSION_NAME: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

pub(super) fn session_uri(session: &str) -> String {
    format!(
        "{SESSION_PREFIX}{}",
        utf8_percent_encode(session, SESSION_NAME)
    )
}

/// One spelling per resource, for subscriptions: a session URI re-encoded from its name
/// (`ui://chat/session/incident%2Ddb1` and `…/incident-db1` are the same thread).
pub(super) fn canonical(uri: &str) -> String {
    match uri.strip_prefix(SESSION_PREFIX) {
        Some(name) => session_uri(&percent_decode_str(name).decode_utf8_lossy()),
        None => uri.to_owned(),
    }
}

pub(super) fn notification_uri(id: &str) -> String {
    format!("{NOTIFICATION_PREFIX}{id}")
}

/// The notification a `pap://notifications/{id}` URI names.
pub(super) fn notification_id(uri: &str) -> Option<&str> {
    uri.strip_prefix(NOTIFICATION_PREFIX)
}

pub(super) fn invocation_uri(id: &str) -> String {
    format!("{INVOCATION_PREFIX}{id}")
}

pub(super) fn list(server: &PapMcp) -> Result<ListResourcesResult, McpError> {
    let sessions = server
        .shared
        .store
        .read(|r| r.sessions())
        .map_err(store_error)?;
    let mut all = vec![
        Resource::new(INBOX_URI, "inbox")
            .with_mime_type(JSON)
            .with_description(format!(
                "The chat inbox: notifications (author system), agents' posts (assistant) and \
                 people's posts (user), the newest {INBOX_WINDOW}, with last_id as the watermark \
                 for chat_read_since"
            )),
    ];
    all.push(
        Resource::new(STATUS_URI, "status")
            .with_mime_type(JSON)
            .with_description(
                "The UI server's health and readiness: ui.ready says whether the chat can be \
                 used now; the store and the serve running on this state, with its conditions",
            ),
    );
    for (name, _) in sessions {
        all.push(
            Resource::new(session_uri(&name), format!("session {name}"))
                .with_mime_type(JSON)
                .with_description(format!("The thread of session {name}")),
        );
    }
    Ok(ListResourcesResult::with_all_items(all))
}

pub(super) fn templates() -> ListResourceTemplatesResult {
    ListResourceTemplatesResult::with_all_items(vec![
        ResourceTemplate::new(format!("{SESSION_PREFIX}{{id}}"), "session thread")
            .with_mime_type(JSON)
            .with_description("The messages of one session thread (percent-encoded name)"),
        ResourceTemplate::new(format!("{INVOCATION_PREFIX}{{id}}"), "invocation")
            .with_mime_type(JSON)
            .with_description("One invocation with its attempts, transcript and event"),
        ResourceTemplate::new(format!("{NOTIFICATION_PREFIX}{{id}}"), "notification")
            .with_mime_type(JSON)
            .with_description("One notification with its ledger history"),
    ])
}

/// Subscriptions are offered where a new inbox message is news: the inbox, a session, a
/// notification (its entry replaced by deduplication or narration).
pub(super) fn check_subscribable(uri: &str) -> Result<(), McpError> {
    if uri == INBOX_URI || uri.starts_with(SESSION_PREFIX) || uri.starts_with(NOTIFICATION_PREFIX) {
        return Ok(());
    }
    Err(McpError::invalid_params(
        format!("{uri} cannot be subscribed to (the inbox, a session and a notification can)"),
        None,
    ))
}

pub(super) fn read(server: &PapMcp, uri: &str) -> Result<ReadResourceResult, McpError> {
    let body = if uri == INBOX_URI {
        inbox(server, None)?
    } else if let Some(name) = uri.strip_prefix(SESSION_PREFIX) {
        let name = percent_decode_str(name).decode_utf8_lossy().into_owned();
        inbox(server, Some(&name))?
    } else if uri == STATUS_URI {
        let store = &server.shared.store;
        serde_json::to_value(crate::ui_status::gather(
            store.as_ref(),
            store.dir().as_deref(),
            server.now(),
        ))
        .map_err(|e| McpError::internal_error(e.to_string(), None))?
    } else if let Some(id) = uri.strip_prefix(INVOCATION_PREFIX) {
        let inv = server
            .shared
            .store
            .read(|r| r.invocation(id))
            .map_err(store_error)?
            .ok_or_else(|| not_found(uri))?;
        let now = server.now();
        let mut inv = inv;
        inv.status = inv.status_at(now);
        crate::views::invocation(&inv, true)
    } else if let Some(id) = uri.strip_prefix(NOTIFICATION_PREFIX) {
        let n = server
            .shared
            .store
            .read(|r| r.notification(id))
            .map_err(store_error)?
            .ok_or_else(|| not_found(uri))?;
        crate::notify::inbox::notification_view(&n.as_of(server.now()).0)
    } else {
        return Err(not_found(uri));
    };
    Ok(ReadResourceResult::new(vec![
        ResourceContents::text(body.to_string(), uri.to_owned()).with_mime_type(JSON),
    ]))
}

/// The inbox body, or a session's: the newest [`INBOX_WINDOW`] messages (a session's among
/// the newest [`SCAN_MAX`] of the inbox, so one read never walks an inbox of any size).
fn inbox(server: &PapMcp, session: Option<&str>) -> Result<Value, McpError> {
    let now = server.now();
    server
        .shared
        .store
        .read(|r| {
            let last = r.inbox_last()?;
            let keep = |m: &crate::domain::InboxMessage| {
                session.is_none_or(|s| m.session.as_deref() == Some(s))
            };
            let after = match session {
                None => last.saturating_sub(INBOX_WINDOW),
                Some(_) => last.saturating_sub(SCAN_MAX),
            };
            let mut msgs = r.inbox_after(after, usize::MAX, &keep)?;
            // Unknown only when it is not open and the whole inbox was looked at.
            if let Some(s) = session
                && msgs.is_empty()
                && after == 0
                && !r.sessions()?.iter().any(|(name, _)| name == s)
            {
                return Ok(None);
            }
            let skip = msgs.len().saturating_sub(INBOX_WINDOW as usize);
            msgs.drain(..skip);
            let mut out = Vec::with_capacity(msgs.len());
            for m in &msgs {
                out.push(view::message_read(r, m, now)?);
            }
            let mut body = view::body(out, last);
            body["escalations_due"] = json!(view::escalations_due(
                r,
                session,
                now,
                INBOX_WINDOW as usize
            )?);
            if session.is_some() && after > 0 {
                // Older messages of the thread were not looked at: chat_read_since with
                // `session` reads them.
                body["scanned_from"] = json!((after + 1).to_string());
            }
            Ok(Some(body))
        })
        .map_err(store_error)?
        .ok_or_else(|| not_found(&session_uri(session.unwrap_or_default())))
}

fn not_found(uri: &str) -> McpError {
    McpError::resource_not_found(
        format!("no such resource: {uri}"),
        Some(json!({"uri": uri})),
    )
}

pub(super) fn store_error(e: crate::storage::Error) -> McpError {
    McpError::internal_error(format!("the store: {e}"), None)
}
