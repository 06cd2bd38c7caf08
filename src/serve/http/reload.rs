//! A reload of a running listener, in two steps so that it is refused as a whole: [`prepare`]
//! reads and checks everything the new project asks of the listener (principals with their
//! environment variables and credential files, the adapters' secrets, the TLS files, the
//! open-listener rule) and changes nothing; [`commit`] then cannot fail. It puts the new
//! principals in force first (a revoked token is refused from the next request on), ends
//! the console and MCP sessions of principals that are gone or changed credential, then
//! applies the limits.
//!
//! [`prepare`]: Listening::prepare
//! [`commit`]: Listening::commit

use std::collections::BTreeMap;

use super::limits::{self, Limits};
use super::principals::{Changes, Principals, ResolveError};
use super::{Listening, check_adapter_secrets, check_open};
use crate::manifest::Project;

/// What a reload will put in force on the listener, all of it read and checked.
pub struct Prepared {
    principals: Principals,
    limits: Limits,
    max_queued_events: usize,
}

/// Why a reload cannot be applied to the listener: each says which setting, and never a
/// secret.
#[derive(Debug, thiserror::Error)]
pub enum ReloadRefused {
    /// A principal's credential cannot be read (an unset variable, a credential file).
    #[error("listen.auth: {0}{hint}", hint = unset_hint(.0))]
    Principals(ResolveError),
    /// An adapter's secret is not in serve's environment.
    #[error(
        "{0:#} (serve reads its environment once, at start: restart serve to read a new variable)"
    )]
    AdapterSecret(anyhow::Error),
    /// The listener would be left open to anyone.
    #[error("{0} (listen.auth would leave this listener without principals)")]
    Open(String),
    /// The TLS files cannot be read.
    #[error("{0:#}")]
    Tls(anyhow::Error),
}

/// What to do about a variable serve does not have.
fn unset_hint(e: &ResolveError) -> String {
    match e {
        ResolveError::Unset { principal, .. } => format!(
            " (serve reads its environment once, at start: restart serve, or give `{principal}` a token_file, which each reload reads)"
        ),
        _ => String::new(),
    }
}

/// What a committed reload changed.
#[derive(Debug, Default)]
pub struct Applied {
    pub principals: Changes,
    /// Console sessions ended, by principal.
    pub console_sessions: BTreeMap<String, usize>,
    pub mcp_sessions: usize,
}

impl Listening {
    /// Everything `project` asks of this listener, read and checked, or why not (a sentence
    /// naming the setting, the principal and the variable or file, never a secret).
    /// `env` is serve's environment.
    pub fn prepare(
        &self,
        project: &Project,
        env: impl Fn(&str) -> Option<String> + Copy,
    ) -> Result<Prepared, ReloadRefused> {
        let config = &project.config.listen;
        let principals =
            Principals::resolve(config, &project.root, env).map_err(ReloadRefused::Principals)?;
        check_adapter_secrets(&project.config.adapters, env)
            .map_err(ReloadRefused::AdapterSecret)?;
        check_open(self.local, &principals, config).map_err(ReloadRefused::Open)?;
        let running = self.app.limits();
        let tls = limits::tls_again(config, &project.root, running.tls.as_ref())
            .map_err(ReloadRefused::Tls)?;
        Ok(Prepared {
            principals,
            limits: Limits::new(config, &self.address, tls),
            max_queued_events: config.max_queued_events,
        })
    }

    /// Puts `prepared` in force; see the module's comment for the order.
    pub fn commit(&self, prepared: Prepared) -> Applied {
        let app = &self.app;
        let before = app.auth.replace(prepared.principals);
        let now = app.auth.principals();
        let applied = Applied {
            principals: now.changes_from(&before),
            console_sessions: app.sessions.end_unknown(&now),
            mcp_sessions: app.mcp.end_unknown(&now, &self.rt),
        };
        app.limits.store(prepared.limits);
        app.decider.set_max_queued(prepared.max_queued_events);
        applied
    }
}
