//! Who an MCP session acts for and what it may do: over stdio the local user (every tool;
//! approving unless `chat.approvers` names others), over HTTP a principal of `listen.auth`
//! with its scopes, checked on every request.

use rmcp::ErrorData as McpError;

use crate::manifest::compiled_listen::Scope;

/// What a tool or resource needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Need {
    /// Resources, `chat_read_since`, the invocation and audit views.
    Read,
    /// `chat.human.post`, `chat.assistant.post`, `inbox_ack` (they change the inbox) and
    /// `event_explain` (a write transaction, rolled back).
    Post,
    /// `approval_respond`.
    Approve,
}

impl Need {
    fn scope(self) -> Scope {
        match self {
            Need::Read => Scope::Read,
            Need::Post => Scope::Ingest,
            Need::Approve => Scope::Approve,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Who {
    /// The principal's name (the local user over stdio); `None` for an anonymous HTTP caller.
    pub name: Option<String>,
    pub scopes: Vec<Scope>,
    /// Over stdio: why approving is refused (`chat.approvers` narrows it).
    pub approve_refused: Option<String>,
}

impl Who {
    /// The local user of a stdio server.
    pub(crate) fn local(user: &str, approvers: Option<&[String]>) -> Who {
        let refused = approvers.filter(|a| !a.iter().any(|n| n == user)).map(|a| {
            format!(
                "`{user}` is not in chat.approvers ({}) in pap.yaml",
                a.join(", ")
            )
        });
        Who {
            name: Some(user.to_owned()),
            scopes: Scope::ALL.to_vec(),
            approve_refused: refused,
        }
    }

    /// An HTTP caller.
    pub(crate) fn caller(name: Option<String>, scopes: Vec<Scope>) -> Who {
        Who {
            name,
            scopes,
            approve_refused: None,
        }
    }

    /// The name posts and answers are recorded under.
    pub(crate) fn label(&self) -> &str {
        self.name.as_deref().unwrap_or("anonymous")
    }

    /// Whether this caller may do `need`; the refusal says what is missing.
    pub(crate) fn require(&self, need: Need) -> Result<(), McpError> {
        if need == Need::Approve {
            if let Some(why) = &self.approve_refused {
                return Err(McpError::invalid_request(
                    format!("not allowed to answer approval requests: {why}"),
                    None,
                ));
            }
            if self.name.is_none() {
                return Err(McpError::invalid_request(
                    "answering an approval request needs an authenticated principal with the `approve` scope",
                    None,
                ));
            }
        }
        if self.scopes.contains(&need.scope()) {
            return Ok(());
        }
        Err(McpError::invalid_request(
            format!(
                "principal `{}` does not have the `{}` scope (listen.auth in pap.yaml)",
                self.label(),
                need.scope().as_str()
            ),
            None,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_local_user_may_do_everything_unless_approvers_are_named() {
        let me = Who::local("ann", None);
        for need in [Need::Read, Need::Post, Need::Approve] {
            assert!(me.require(need).is_ok());
        }
        let narrowed = Who::local("ann", Some(&["bob".to_owned()]));
        assert!(narrowed.require(Need::Read).is_ok());
        let refused = narrowed.require(Need::Approve).unwrap_err();
        assert!(refused.message.contains("chat.approvers"), "{refused:?}");
        assert!(
            Who::local("bob", Some(&["bob".to_owned()]))
                .require(Need::Approve)
                .is_ok()
        );
    }

    #[test]
    fn an_http_caller_has_its_scopes_and_anonymous_never_approves() {
        let reader = Who::caller(Some("dash".into()), vec![Scope::Read]);
        assert!(reader.require(Need::Read).is_ok());
        assert!(
            reader
                .require(Need::Post)
                .unwrap_err()
                .message
                .contains("`ingest`")
        );
        let anon = Who::caller(None, Scope::ALL.to_vec());
        assert!(anon.require(Need::Approve).is_err());
    }
}
