//! Tells one session's client of what the watcher (`watch`) broadcast, for the resources it
//! subscribed to: `notifications/resources/updated` with each URI as the client spelled it.
//! A session never hears of its own posts, nor of agents' posts (no self-echo). A change to
//! a notification that no message tells of (acknowledged in another process) reaches the
//! subscribers of the views showing it (the watcher names those in the inbox's window), and
//! the subscribers of that notification only if it really changed: each session keeps a
//! fingerprint of every notification it subscribed to.

use std::collections::{BTreeMap, BTreeSet};
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use rmcp::model::ResourceUpdatedNotificationParam;
use rmcp::{Peer, RoleServer};
use tokio::sync::broadcast;

use super::Session;
use super::resources::{INBOX_URI, notification_id, notification_uri, session_uri};
use super::watch::Update;
use crate::domain::{InboxMessage, Notification};
use crate::storage::Storage;

/// A session's subscriptions: each resource (its one spelling, `resources::canonical`) with
/// the URIs the client subscribed to it by.
pub(super) type Subscribed = BTreeMap<String, BTreeSet<String>>;

/// What a notification's resource shows, reduced to a number that changes when it does
/// (`0` for one not in the store).
pub(super) fn fingerprint(n: Option<&Notification>) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    match n {
        Some(n) => serde_json::to_string(n).unwrap_or_default().hash(&mut h),
        None => return 0,
    }
    h.finish()
}

/// The URIs a new message updates for a session subscribed to `subscribed`: none for its
/// own post or an agent's post.
pub(super) fn uris_for(
    msg: &InboxMessage,
    subscribed: &BTreeSet<String>,
    own: bool,
) -> Vec<String> {
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

/// The URIs a changed notification updates (its deadline passed, or it is shown in the
/// inbox): the inbox, its thread, itself.
fn uris_changed(id: &str, session: Option<&str>, subscribed: &BTreeSet<String>) -> Vec<String> {
    let mut uris = vec![INBOX_URI.to_owned(), notification_uri(id)];
    uris.extend(session.map(session_uri));
    uris.retain(|u| subscribed.contains(u));
    uris
}

/// Which of the subscribed notifications changed since the session last looked (their
/// fingerprints are updated), read in one snapshot.
async fn changed(session: &Session, store: &Arc<dyn Storage>) -> Vec<String> {
    let ids: Vec<String> = session
        .subscribed
        .lock()
        .expect("session")
        .keys()
        .filter_map(|k| notification_id(k).map(str::to_owned))
        .collect();
    if ids.is_empty() {
        return Vec::new();
    }
    let store = store.clone();
    let read = tokio::task::spawn_blocking(move || {
        store.read(|r| {
            let mut now = Vec::with_capacity(ids.len());
            for id in ids {
                let n = r.notification(&id)?;
                now.push((id, fingerprint(n.as_ref())));
            }
            Ok(now)
        })
    })
    .await;
    let Ok(Ok(now)) = read else {
        return Vec::new();
    };
    let mut seen = session.seen.lock().expect("session");
    now.into_iter()
        .filter(|(id, print)| seen.insert(id.clone(), *print) != Some(*print))
        .map(|(id, _)| notification_uri(&id))
        .collect()
}

/// The notifications of the inbox's window that changed since the session subscribed to a
/// view of it and that no update told of, with their threads: looked at once, at the first
/// change of notifications after the subscription. By then the watcher has read its own
/// window (it reads it before broadcasting), and tells of every later change itself.
async fn window_changed(
    session: &Session,
    store: &Arc<dyn Storage>,
) -> Vec<(String, Option<String>)> {
    let Some(seen) = session.window_seen.lock().expect("session").take() else {
        return Vec::new();
    };
    if seen.is_empty() {
        return Vec::new();
    }
    let store = store.clone();
    let read = tokio::task::spawn_blocking(move || {
        store.read(|r| {
            let mut changed = Vec::new();
            for (id, (print, thread)) in &seen {
                if fingerprint(r.notification(id)?.as_ref()) != *print {
                    changed.push((id.clone(), thread.clone()));
                }
            }
            Ok(changed)
        })
    })
    .await;
    match read {
        Ok(Ok(changed)) => changed,
        _ => Vec::new(),
    }
}

/// Tells `peer` of each broadcast change that touches what `session` subscribed to (read at
/// each change), until its transport closes. A subscriber that fell behind the broadcast
/// hears once of everything it subscribed to, rather than of nothing.
pub(super) async fn forward(
    mut changes: broadcast::Receiver<Update>,
    peer: Peer<RoleServer>,
    session: Arc<Session>,
    store: Arc<dyn Storage>,
) {
    loop {
        let update = changes.recv().await;
        let subscribed = session.subscribed.lock().expect("session").clone();
        let keys: BTreeSet<String> = subscribed.keys().cloned().collect();
        let hit: Vec<String> = match update {
            Ok(Update::Message(msg)) => {
                // Told of by this message (or its own post): no need to compare it later.
                if let Some(seen) = session.window_seen.lock().expect("session").as_mut() {
                    seen.remove(&msg.notification_id);
                }
                let own = msg
                    .posted_by
                    .as_ref()
                    .and_then(|b| b.mcp_session.as_deref())
                    == Some(session.nonce.as_str());
                uris_for(&msg, &keys, own)
            }
            Ok(Update::Changed {
                id,
                session: thread,
                print,
            }) => {
                // Told now: the look at the subscribed ones below does not tell it again.
                if let Some(seen) = session.seen.lock().expect("session").get_mut(&id) {
                    *seen = print;
                }
                if let Some(seen) = session.window_seen.lock().expect("session").as_mut() {
                    seen.remove(&id);
                }
                uris_changed(&id, thread.as_deref(), &keys)
            }
            Ok(Update::Notifications) => {
                let mut hit = changed(&session, &store).await;
                for (id, thread) in window_changed(&session, &store).await {
                    hit.extend(uris_changed(&id, thread.as_deref(), &keys));
                }
                hit
            }
            Err(broadcast::error::RecvError::Lagged(_)) => keys.iter().cloned().collect(),
            Err(broadcast::error::RecvError::Closed) => return,
        };
        // Each URI as the client spelled it when it subscribed.
        let uris: Vec<String> = subscribed
            .into_iter()
            .filter(|(k, _)| hit.contains(k))
            .flat_map(|(_, spellings)| spellings)
            .collect();
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

    #[test]
    fn a_changed_notification_updates_the_inbox_its_thread_and_itself() {
        let subs: BTreeSet<String> = [
            INBOX_URI.to_owned(),
            session_uri("ops"),
            notification_uri("ntf_1"),
            notification_uri("ntf_2"),
        ]
        .into();
        assert_eq!(
            uris_changed("ntf_1", Some("ops"), &subs),
            [
                INBOX_URI.to_owned(),
                notification_uri("ntf_1"),
                session_uri("ops")
            ]
        );
        assert_eq!(fingerprint(None), 0);
    }
}
