//! `GET /inbox/stream`: new inbox messages as server-sent events, for the live inbox.
//!
//! The store is read once a second for messages after the last one sent (the inbox's ids
//! only grow), so messages appended by any process (serve, a dispatch, an approval) reach
//! the page. `Last-Event-ID` (sent by a reconnecting browser) or `?after=ID` says where to
//! start. The stream ends when serve stops, and when its viewer may no longer read (a reload
//! removed its principal, changed its credential or took `read` away): the page's script
//! then finds the login page.

use std::convert::Infallible;
use std::time::Duration;

use axum::response::sse::{Event, KeepAlive, Sse};
use futures_util::stream::Stream;

use super::pages::inbox_json;
use crate::serve::http::App;

/// Messages one poll sends at most.
const BATCH: usize = 100;

/// The stream of messages after `after`, while `still` holds (asked before each look).
pub(super) fn messages(
    app: App,
    after: u64,
    still: impl Fn() -> bool + Send + 'static,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let stream = futures_util::stream::unfold(
        (app, after, Vec::new(), still),
        |(app, mut after, mut ready, still)| async move {
            loop {
                if app.decider.stopping() || !still() {
                    return None;
                }
                if let Some(event) = ready.pop() {
                    return Some((Ok(event), (app, after, ready, still)));
                }
                tokio::time::sleep(Duration::from_secs(1)).await;
                let store = app.store.clone();
                let from = after;
                let read = tokio::task::spawn_blocking(move || {
                    store.read(|r| r.inbox_after(from, BATCH, &|_| true))
                })
                .await;
                let Ok(Ok(found)) = read else { continue };
                // Popped from the end: keep them in reverse.
                for m in found.iter().rev() {
                    ready.push(
                        Event::default()
                            .id(m.id.to_string())
                            .event("message")
                            .data(inbox_json(m).to_string()),
                    );
                }
                if let Some(m) = found.last() {
                    after = m.id;
                }
            }
        },
    );
    Sse::new(stream).keep_alive(KeepAlive::default())
}
