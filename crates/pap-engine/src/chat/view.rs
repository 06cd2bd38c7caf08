//! The chat-inbox document's message shape: `id` (a decimal string), `ts`, `author`, `mime`,
//! `content`, with pap's own fields beside them (`kind`, `level`, `routing`, `atp`, …).
//! Outcome notifications have `author: "system"`, an extension of the document's
//! `user`/`assistant`.

use serde_json::{Map, Value, json};

use crate::clock::rfc3339_ms;
use crate::domain::{InboxMessage, Notification};
use crate::storage::ReadTx;

/// One message as of `now`. `n` is the notification a system or narration entry shows, for
/// its live status and approval state.
pub(crate) fn message(msg: &InboxMessage, n: Option<&Notification>, now: i64) -> Value {
    let mut v = json!({
        "id": msg.id.to_string(),
        "ts": rfc3339_ms(msg.ts),
        "author": msg.author,
        "mime": msg.mime.as_deref().unwrap_or("text/plain"),
        "content": msg.content,
        "kind": msg.kind,
        "level": msg.level.as_str(),
    });
    let o = v.as_object_mut().expect("an object");
    if msg.is_post() {
        if let Some(by) = &msg.posted_by {
            let mut by = json!(by);
            if let Some(by) = by.as_object_mut() {
                by.remove("mcp_session");
            }
            o.insert("posted_by".into(), by);
        }
        if let Some(id) = msg.in_reply_to {
            o.insert("in_reply_to".into(), json!(id.to_string()));
        }
    } else {
        // The notification's own view (`pap inbox --json`) minus what is said above.
        let mut full = crate::notify::inbox::view(msg, n, now);
        if let Some(full) = full.as_object_mut() {
            for key in ["id", "created_at", "author", "kind", "level", "content"] {
                full.remove(key);
            }
            merge(o, std::mem::take(full));
        }
    }
    if let Some(s) = &msg.session {
        o.insert("session".into(), json!(s));
    }
    v
}

/// [`message`] as of `now`, with the notification a system or narration entry shows read
/// from `r` (a post has none).
pub fn message_read(r: &dyn ReadTx, msg: &InboxMessage, now: i64) -> crate::storage::Result<Value> {
    let n = match msg.is_post() {
        true => None,
        false => r
            .notification(&msg.notification_id)?
            .map(|n| n.as_of(now).0),
    };
    Ok(message(msg, n.as_ref(), now))
}

/// The `ui://chat/inbox` body (or a session's): the messages and the watermark to read on
/// from. `last_id` is the newest id in the whole inbox, so a client that saw nothing new in
/// a filtered view still moves its watermark.
pub fn body(messages: Vec<Value>, last_id: u64) -> Value {
    json!({"last_id": last_id.to_string(), "messages": messages})
}

/// A notification handed to an agent whose deadline passed (ANP 6.2) and that no writer has
/// put in the inbox yet, as the message it will be: `id` null, `escalation: "due"`. Views
/// list these under `escalations_due`, beside the messages, so the append-only stream and its
/// watermark stay as they are.
pub(crate) fn due(n: &Notification, now: i64) -> Value {
    let mut v = message(&crate::notify::due::entry(n), Some(n), now);
    crate::notify::due::mark(&mut v, n);
    v
}

/// The due escalations of the inbox (or of `session`'s thread) as of `now`, at most `limit`.
pub fn escalations_due(
    r: &dyn ReadTx,
    session: Option<&str>,
    now: i64,
    limit: usize,
) -> crate::storage::Result<Vec<Value>> {
    let keep = |n: &Notification| {
        session.is_none_or(|s| {
            n.routing.address == crate::domain::Address::Session && n.session.as_deref() == Some(s)
        })
    };
    let due = crate::notify::due::escalations_due(r, now, limit, &keep)?;
    Ok(due.iter().map(|n| self::due(n, now)).collect())
}

fn merge(into: &mut Map<String, Value>, from: Map<String, Value>) {
    for (k, v) in from {
        if !v.is_null() {
            into.entry(k).or_insert(v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{Level, PostedBy};

    fn post() -> InboxMessage {
        let mut m = InboxMessage::for_tests("user", "", "Deploy now?");
        m.id = 12;
        m.ts = 1_700_000_000_000;
        m.kind = "chat.user".into();
        m.level = Level::Info;
        m.session = Some("ops".into());
        m.mime = Some("text/markdown".into());
        m.posted_by = Some(PostedBy {
            principal: "ann".into(),
            client: Some("claude-ai".into()),
            client_version: Some("1.0".into()),
            invocation: None,
            mcp_session: Some("secret-nonce".into()),
        });
        m.in_reply_to = Some(11);
        m
    }

    #[test]
    fn a_post_has_the_documents_fields_with_ids_as_decimal_strings() {
        let v = message(&post(), None, 0);
        assert_eq!(v["id"], "12");
        assert_eq!(v["ts"], "2023-11-14T22:13:20.000Z");
        assert_eq!(v["author"], "user");
        assert_eq!(v["mime"], "text/markdown");
        assert_eq!(v["content"], "Deploy now?");
        assert_eq!(v["in_reply_to"], "11");
        assert_eq!(v["session"], "ops");
        assert_eq!(v["posted_by"]["client"], "claude-ai");
        assert!(v["posted_by"].get("mcp_session").is_none(), "{v}");
        assert_eq!(body(vec![v], 14)["last_id"], "14");
    }
}
