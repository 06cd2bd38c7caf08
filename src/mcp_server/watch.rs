//! New inbox messages, appended by this process or any other, to the sessions subscribed
//! to them.
//!
//! One watcher per server looks at the store's inbox mark file (`store::INBOX_MARK_FILE`)
//! every [`LOOK_EVERY`]: a read of a few bytes. On a shared store it also hears of other
//! nodes' appends through the store (`Storage::listen`: PostgreSQL's `LISTEN/NOTIFY`). Only when the mark moved does it open the
//! store and read the new messages, which it broadcasts; each subscribed session's forwarder
//! turns them into `notifications/resources/updated` for the URIs it subscribed to, leaving
//! out what that session posted itself and agents' posts (no self-echo).

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use rmcp::model::ResourceUpdatedNotificationParam;
use rmcp::{Peer, RoleServer};
use tokio::sync::broadcast;

use super::resources::{INBOX_URI, notification_uri, session_uri};
use crate::domain::InboxMessage;
use crate::storage::Storage;

/// How often the mark file is looked at: well inside the second a subscriber may wait.
pub const LOOK_EVERY: Duration = Duration::from_millis(100);
/// Messages read per look at most; the next look goes on from there.
const READ_AT_ONCE: usize = 512;

/// Where the watcher broadcasts.
pub type Changes = broadcast::Sender<Arc<InboxMessage>>;

/// A session's subscriptions: each resource (its one spelling, `resources::canonical`) with
/// the URIs the client subscribed to it by.
pub type Subscribed = std::collections::BTreeMap<String, BTreeSet<String>>;

/// The newest inbox id in the store (0 when it cannot be read).
async fn inbox_last(store: &Arc<dyn Storage>) -> u64 {
    let store = store.clone();
    tokio::task::spawn_blocking(move || store.read(|r| r.inbox_last()))
        .await
        .ok()
        .and_then(Result::ok)
        .unwrap_or(0)
}

/// Starts the watcher on the current tokio runtime. It stops when every sender is dropped.
pub fn start(store: Arc<dyn Storage>, mark_file: PathBuf) -> Changes {
    let (changes, _) = broadcast::channel(1024);
    let weak = changes.downgrade();
    tokio::spawn(async move {
        let mut last = inbox_last(&store).await;
        // On a shared store, other nodes' appends are heard of through the store; the mark
        // file only tells of this host's.
        let elsewhere = Arc::new(tokio::sync::Notify::new());
        let _listening = {
            let elsewhere = elsewhere.clone();
            store.listen(Box::new(move |change| {
                if change == crate::storage::Change::Inbox {
                    elsewhere.notify_one();
                }
            }))
        };
        let mut ticker = tokio::time::interval(LOOK_EVERY);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let appended_elsewhere = tokio::select! {
                _ = ticker.tick() => false,
                () = elsewhere.notified() => true,
            };
            let Some(changes) = weak.upgrade() else {
                return;
            };
            if changes.receiver_count() == 0 {
                // Nobody listens: only keep the watermark current.
                last = last.max(read_mark(&mark_file).unwrap_or(0));
                if appended_elsewhere {
                    last = last.max(inbox_last(&store).await);
                }
                continue;
            }
            if !appended_elsewhere && read_mark(&mark_file).is_none_or(|mark| mark <= last) {
                continue;
            }
            let store = store.clone();
            let after = last;
            let read = tokio::task::spawn_blocking(move || {
                store.read(|r| r.inbox_after(after, READ_AT_ONCE, &|_| true))
            })
            .await;
            match read {
                Ok(Ok(messages)) => {
                    for m in messages {
                        last = last.max(m.id);
                        let _ = changes.send(Arc::new(m));
                    }
                }
                Ok(Err(e)) => tracing::warn!(error = %e, "cannot read new inbox messages"),
                Err(_) => {}
            }
        }
    });
    changes
}

/// The mark file's id; `None` when it is missing or being replaced.
fn read_mark(path: &std::path::Path) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// The URIs a new message updates for a session subscribed to `subscribed`: none for its
/// own post or an agent's post.
pub fn uris_for(msg: &InboxMessage, subscribed: &BTreeSet<String>, own: bool) -> Vec<String> {
    if own || msg.author == "assistant" {
        return Vec::new();
    }
    let mut uris = vec![INBOX_URI.to_owned()];
    if let Some(s) = &msg.session {
        uris.push(session_uri(s));
    }
    if !msg.notification_id.is_empty() {
        uris.push(notification_uri(&msg.notification_id));
    }
    uris.retain(|u| subscribed.contains(u));
    uris
}

/// Tells `peer` of each broadcast message that touches what it subscribed to (`subscribed`
/// is read at each message) and that session `nonce` did not post, until its transport
/// closes. A subscriber that fell behind the broadcast hears once of everything it
/// subscribed to, rather than of nothing.
pub async fn forward(
    mut changes: broadcast::Receiver<Arc<InboxMessage>>,
    peer: Peer<RoleServer>,
    subscribed: impl Fn() -> Subscribed + Send + 'static,
    nonce: String,
) {
    loop {
        let subscribed = match changes.recv().await {
            Ok(msg) => {
                let own = msg
                    .posted_by
                    .as_ref()
                    .and_then(|b| b.mcp_session.as_deref())
                    == Some(nonce.as_str());
                let now = subscribed();
                let keys: BTreeSet<String> = now.keys().cloned().collect();
                let hit = uris_for(&msg, &keys, own);
                now.into_iter().filter(|(k, _)| hit.contains(k)).collect()
            }
            Err(broadcast::error::RecvError::Lagged(_)) => subscribed(),
            Err(broadcast::error::RecvError::Closed) => return,
        };
        // Each URI as the client spelled it when it subscribed.
        let uris: Vec<String> = subscribed.into_values().flatten().collect();
        if peer.is_transport_closed() {
            return;
        }
        for uri in uris {
            let sent = peer
                .notify_resource_updated(ResourceUpdatedNotificationParam::new(uri))
                .await;
            if sent.is_err() {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(author: &str, session: Option<&str>, notification: &str) -> InboxMessage {
        let mut m = InboxMessage::for_tests(author, notification, "c");
        m.id = 7;
        m.session = session.map(str::to_owned);
        m
    }

    #[test]
    fn subscribers_hear_user_and_system_messages_but_not_their_own_or_agents_posts() {
        let subs: BTreeSet<String> = [INBOX_URI.to_owned(), session_uri("ops")].into();
        assert_eq!(
            uris_for(&msg("system", None, "ntf_1"), &subs, false),
            [INBOX_URI]
        );
        assert_eq!(
            uris_for(&msg("user", Some("ops"), ""), &subs, false),
            [INBOX_URI.to_owned(), session_uri("ops")]
        );
        assert!(uris_for(&msg("user", None, ""), &subs, true).is_empty());
        assert!(uris_for(&msg("assistant", None, ""), &subs, false).is_empty());
        assert!(uris_for(&msg("user", None, ""), &BTreeSet::new(), false).is_empty());
    }
}
