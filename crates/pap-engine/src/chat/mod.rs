//! The chat inbox as MCP clients see it (chat-inbox spec): people and agents post messages
//! into the inbox beside the notifications, everyone reads after a watermark, and a human's
//! post becomes a `pap.chat.human.posted` event that triggers route like any other.
//!
//! - `post`: appending a post, with its event and its delivery to a session's agent;
//! - `view`: the spec's message shape and the `ui://chat/inbox` body.

pub mod post;
pub mod view;

/// The type of the event a human's post becomes (the reserved `pap.` prefix: only pap
/// emits it).
pub(crate) const HUMAN_POSTED: &str = "pap.chat.human.posted";

/// The `source` of that event.
pub(crate) const SOURCE: &str = "pap://chat";
