//! Appending a post to the inbox, in the caller's write transaction.
//!
//! A human's post and the event it becomes are committed together: the event goes into the
//! outbox in the same transaction as the message, so a crash after the commit loses neither
//! and whichever process decides outbox events (serve, at once when told) decides it once
//! (deciding removes it from the outbox in the deciding transaction). That outbox entry is
//! pap's orchestrator watermark: a message is handed on exactly when its entry leaves.

use serde_json::{Value, json};

use super::{HUMAN_POSTED, SOURCE};
use crate::clock::rfc3339_ms;
use crate::domain::{InboxMessage, Level, PostedBy, Routing, Runner};
use crate::event::{Event, Origin};
use crate::storage::{self, WriteTx};

/// The longest post, in bytes: a chat message, not a document.
pub(crate) const MAX_CONTENT_BYTES: usize = 32 * 1024;
/// The throttle window human posts are counted in.
const WINDOW_MS: i64 = 60_000;
/// The throttle row that counts human posts (a name no trigger can have: trigger ids have
/// no spaces).
const RATE_ROW: (&str, &str) = ("pap chat", "human posts");

/// `chat.human.post` or `chat.assistant.post`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Author {
    User,
    Assistant,
}

impl Author {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Author::User => "user",
            Author::Assistant => "assistant",
        }
    }
}

#[derive(Clone)]
pub struct Post<'a> {
    pub author: Author,
    pub content: &'a str,
    pub mime: &'a str,
    pub session: Option<&'a str>,
    pub in_reply_to: Option<u64>,
    pub by: PostedBy,
}

/// Limits a post is checked against.
pub struct Limits {
    pub max_posts_per_minute: u32,
    pub max_event_bytes: u64,
}

/// What a post became.
#[derive(Debug, Clone, PartialEq)]
pub struct Posted {
    pub id: u64,
    pub ts: i64,
    /// The event a human's post became (it waits in the outbox to be decided).
    pub event: Option<Event>,
    /// The agent the post's session is bound to, which gets it at its next turn.
    pub session_agent: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum PostError {
    #[error("content is empty")]
    Empty,
    #[error("content is {0} bytes; a post holds at most {MAX_CONTENT_BYTES}")]
    TooLong(usize),
    #[error("mime must be text/markdown or text/plain, not {0:?}")]
    Mime(String),
    #[error("no open session {0:?} (`pap inbox session open NAME` opens one)")]
    NoSession(String),
    #[error("in_reply_to names no inbox message {0}")]
    NoMessage(u64),
    /// Only a person is a user: an agent (its MCP server runs with its invocation's id) that
    /// calls the human's tool would post in a person's name and provoke as one.
    #[error(
        "chat.human.post is a person's: this caller is the agent of invocation {0}, which posts \
         with chat.assistant.post"
    )]
    AgentAsUser(String),
    #[error(
        "{limit} human posts in the last minute already (chat.max_posts_per_minute); \
         try again in {retry_after_s} s"
    )]
    RateLimited { limit: u32, retry_after_s: i64 },
    #[error("the post cannot become an event: {0}")]
    Event(String),
    #[error(transparent)]
    Store(#[from] storage::Error),
}

/// Appends `post` at `now`. `owner` is the process that will decide the event at once
/// (serve skips outbox entries whose owner is alive); `None` leaves it to serve.
pub fn post(
    tx: &mut dyn WriteTx,
    limits: &Limits,
    post: Post<'_>,
    owner: Option<&Runner>,
    now: i64,
) -> Result<Posted, PostError> {
    if post.author == Author::User
        && let Some(invocation) = &post.by.invocation
    {
        return Err(PostError::AgentAsUser(invocation.clone()));
    }
    check_content(post.content, post.mime)?;
    if let Some(session) = post.session
        && !tx.session_is_open(session)?
    {
        return Err(PostError::NoSession(session.to_owned()));
    }
    if let Some(id) = post.in_reply_to
        && tx.inbox_message(id)?.is_none()
    {
        return Err(PostError::NoMessage(id));
    }
    if post.author == Author::User {
        admit(tx, limits.max_posts_per_minute, now)?;
    }
    let principal = post.by.principal.clone();
    let id = tx.inbox_append(InboxMessage {
        id: 0,
        ts: now,
        notification_id: String::new(),
        author: post.author.as_str().into(),
        kind: format!("chat.{}", post.author.as_str()),
        level: Level::Info,
        content: post.content.to_owned(),
        routing: Routing::default(),
        user: principal.clone(),
        session: post.session.map(str::to_owned),
        metadata: Default::default(),
        deduplication_key: None,
        supersedes: None,
        atp: None,
        mime: Some(post.mime.to_owned()),
        posted_by: Some(post.by.clone()),
        in_reply_to: post.in_reply_to,
    })?;
    let mut posted = Posted {
        id,
        ts: now,
        event: None,
        session_agent: None,
    };
    // No self-echo toward agents either: only a human's post provokes anything.
    if post.author == Author::Assistant {
        return Ok(posted);
    }
    let value = event_of(id, now, &post);
    let len = serde_json::to_vec(&value).map_or(0, |b| b.len());
    let event = crate::event::validate(value, len, limits.max_event_bytes, Origin::Dispatcher)
        .map_err(|bad| PostError::Event(bad.reason))?;
    tx.outbox_put(&event.id, &event.value, owner)?;
    if let Some(session) = post.session
        && let Some(agent) = tx.session_agent(session)?
    {
        tx.queue_push(&agent, &crate::notify::queue::queued_post(id))?;
        posted.session_agent = Some(agent);
    }
    posted.event = Some(event);
    Ok(posted)
}

fn check_content(content: &str, mime: &str) -> Result<(), PostError> {
    if content.trim().is_empty() {
        return Err(PostError::Empty);
    }
    if content.len() > MAX_CONTENT_BYTES {
        return Err(PostError::TooLong(content.len()));
    }
    if !matches!(mime, "text/markdown" | "text/plain") {
        return Err(PostError::Mime(mime.chars().take(80).collect()));
    }
    Ok(())
}

/// `chat.max_posts_per_minute`, over every human poster together: a chain of posts and
/// agent replies (a model calling `chat.human.post`) cannot outrun it whatever the depth.
fn admit(tx: &mut dyn WriteTx, limit: u32, now: i64) -> Result<(), PostError> {
    let (row, key) = RATE_ROW;
    let mut recent: Vec<i64> = tx
        .throttle_times(row, key)?
        .into_iter()
        .filter(|t| *t > now - WINDOW_MS && *t <= now)
        .collect();
    recent.sort_unstable();
    if recent.len() >= limit as usize {
        let frees_at = recent[recent.len() - limit as usize] + WINDOW_MS;
        return Err(PostError::RateLimited {
            limit,
            retry_after_s: ((frees_at - now) as f64 / 1000.0).ceil().max(1.0) as i64,
        });
    }
    tx.throttle_record(row, key, now, WINDOW_MS)?;
    Ok(())
}

/// The event a human's post becomes. Its id names the message, so deciding it twice (two
/// processes racing over an orphaned outbox entry) is a `duplicate`, never a second run.
fn event_of(id: u64, now: i64, post: &Post<'_>) -> Value {
    json!({
        "pap_version": "0.2",
        "id": format!("pap-chat-{id}-{now}"),
        "type": HUMAN_POSTED,
        "source": SOURCE,
        "time": rfc3339_ms(now),
        "data": {
            "message": {
                "id": id.to_string(),
                "ts": rfc3339_ms(now),
                "author": "user",
                "mime": post.mime,
                "content": post.content,
            },
            "session": post.session,
            "in_reply_to": post.in_reply_to.map(|i| i.to_string()),
            "principal": post.by.principal,
            "client": post.by.client,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_is_checked_before_anything_is_written() {
        assert!(matches!(
            check_content("  ", "text/plain"),
            Err(PostError::Empty)
        ));
        let long = "x".repeat(MAX_CONTENT_BYTES + 1);
        assert!(matches!(
            check_content(&long, "text/plain"),
            Err(PostError::TooLong(_))
        ));
        assert!(matches!(
            check_content("hi", "text/html"),
            Err(PostError::Mime(_))
        ));
        assert!(check_content("hi", "text/markdown").is_ok());
    }

    fn store() -> std::sync::Arc<dyn crate::storage::Storage> {
        std::sync::Arc::new(crate::store::Store::in_memory().unwrap())
    }

    fn by() -> PostedBy {
        PostedBy {
            principal: "ann".into(),
            client: Some("c".into()),
            client_version: None,
            invocation: None,
            mcp_session: None,
        }
    }

    fn human<'a>(content: &'a str, session: Option<&'a str>) -> Post<'a> {
        Post {
            author: Author::User,
            content,
            mime: "text/plain",
            session,
            in_reply_to: None,
            by: by(),
        }
    }

    const LIMITS: Limits = Limits {
        max_posts_per_minute: 2,
        max_event_bytes: 1 << 20,
    };

    #[test]
    fn a_human_post_leaves_its_event_in_the_outbox_in_the_same_transaction() {
        let s = store();
        let posted = s
            .write(|tx| post(tx, &LIMITS, human("hi", None), None, 1_000).map_err(into_store))
            .unwrap();
        let event = posted.event.expect("an event");
        assert_eq!(event.kind, HUMAN_POSTED);
        assert_eq!(event.value["data"]["message"]["id"], posted.id.to_string());
        let outbox = s.read(|r| r.outbox_entries()).unwrap();
        assert_eq!(outbox.len(), 1);
        assert_eq!(outbox[0].0, event.id);
        assert!(outbox[0].1.owner.is_none(), "left to serve");
        // An assistant's post provokes nothing.
        let mut quiet = human("ok", None);
        quiet.author = Author::Assistant;
        let posted = s
            .write(|tx| post(tx, &LIMITS, quiet.clone(), None, 1_001).map_err(into_store))
            .unwrap();
        assert!(posted.event.is_none());
        assert_eq!(s.read(|r| r.outbox_entries()).unwrap().len(), 1);
    }

    #[test]
    fn the_rate_limit_counts_human_posts_in_a_sliding_minute() {
        let s = store();
        for at in [0, 10_000] {
            s.write(|tx| post(tx, &LIMITS, human("x", None), None, at).map_err(into_store))
                .unwrap();
        }
        let refused = s.write(|tx| {
            Ok(matches!(
                post(tx, &LIMITS, human("x", None), None, 30_000),
                Err(PostError::RateLimited {
                    limit: 2,
                    retry_after_s: 30
                })
            ))
        });
        assert!(refused.unwrap());
        // The first left the window at 60 s.
        s.write(|tx| post(tx, &LIMITS, human("x", None), None, 60_001).map_err(into_store))
            .unwrap();
    }

    #[test]
    fn a_post_into_a_bound_session_is_queued_for_its_agent() {
        let s = store();
        s.write(|tx| {
            tx.session_open("ops", 0)?;
            tx.session_bind("ops", Some("worker"))
        })
        .unwrap();
        let posted = s
            .write(|tx| post(tx, &LIMITS, human("look", Some("ops")), None, 5).map_err(into_store))
            .unwrap();
        assert_eq!(posted.session_agent.as_deref(), Some("worker"));
        let queued = s.write(|tx| tx.queue_take("worker")).unwrap();
        assert_eq!(queued, [crate::notify::queue::queued_post(posted.id)]);
        let missing = s.write(|tx| {
            Ok(matches!(
                post(tx, &LIMITS, human("x", Some("nope")), None, 6),
                Err(PostError::NoSession(_))
            ))
        });
        assert!(missing.unwrap());
    }

    fn into_store(e: PostError) -> crate::storage::Error {
        crate::storage::Error::refused(e)
    }

    #[test]
    fn queue_entries_for_posts_round_trip_and_never_match_notification_ids() {
        assert_eq!(
            crate::notify::queue::queued_post_id(&crate::notify::queue::queued_post(42)),
            Some(42)
        );
        assert_eq!(crate::notify::queue::queued_post_id("ntf_01J"), None);
    }
}
