//! `listen:` in pap.yaml, checked: the HTTP listener's address, limits and principals.
//!
//! Secrets are not here: a token is kept as the name of the environment variable that holds
//! it (read when serve starts) or the path of the file that holds it (read at start and at
//! each reload), and a password only as its argon2 hash or the path of the file holding that.
//! The compiled project is cached on disk, so nothing in it may be a secret.

use std::path::PathBuf;
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// What a principal may do over HTTP.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// Post events (`/v1/events`, the webhook adapters).
    Ingest,
    /// Read the console's pages and the read API.
    Read,
    /// Answer approval requests (never anonymous).
    Approve,
    /// Scrape `/metrics`.
    Metrics,
}

impl Scope {
    pub const ALL: [Scope; 4] = [Scope::Ingest, Scope::Read, Scope::Approve, Scope::Metrics];

    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Ingest => "ingest",
            Scope::Read => "read",
            Scope::Approve => "approve",
            Scope::Metrics => "metrics",
        }
    }
}

/// How a principal proves who it is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Credential {
    /// A bearer token held by this environment variable.
    TokenEnv(String),
    /// A bearer token held by this file (relative to the project root unless absolute).
    TokenFile(PathBuf),
    /// An argon2 hash in PHC form.
    PasswordHash(String),
    /// An argon2 hash held by this file (relative to the project root unless absolute).
    PasswordHashFile(PathBuf),
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Principal {
    pub name: String,
    pub credential: Credential,
    pub scopes: Vec<Scope>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TlsFiles {
    /// Relative to the project root unless absolute.
    pub cert: PathBuf,
    pub key: PathBuf,
}

/// `listen:` with defaults applied.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListenConfig {
    /// `HOST:PORT`; `pap serve --listen` wins.
    pub address: Option<String>,
    pub tls: Option<TlsFiles>,
    pub allowed_hosts: Vec<String>,
    pub allow_unauthenticated: bool,
    pub max_body_bytes: u64,
    pub read_timeout: Duration,
    pub max_queued_events: usize,
    pub max_connections: usize,
    pub principals: Vec<Principal>,
    /// `None`: the default (see [`ListenConfig::anonymous_scopes`]).
    pub anonymous: Option<Vec<Scope>>,
    /// Where people reach the console (`https://pap.example.com`, no trailing `/`): links in
    /// messages sent out (a Slack sink's) point there.
    pub public_url: Option<String>,
    /// Peers whose `Forwarded` / `X-Forwarded-For` name the client.
    pub trusted_proxies: Vec<ipnet::IpNet>,
}

impl Default for ListenConfig {
    fn default() -> Self {
        ListenConfig {
            address: None,
            tls: None,
            allowed_hosts: Vec::new(),
            allow_unauthenticated: false,
            max_body_bytes: 10 * 1024 * 1024,
            read_timeout: Duration::from_secs(30),
            max_queued_events: 100_000,
            max_connections: 1024,
            principals: Vec::new(),
            anonymous: None,
            public_url: None,
            trusted_proxies: Vec::new(),
        }
    }
}

impl ListenConfig {
    /// What a request without credentials may do: as configured, else everything but
    /// approving while no principal exists (a loopback-only setup), else nothing.
    pub fn anonymous_scopes(&self) -> Vec<Scope> {
        match &self.anonymous {
            Some(scopes) => scopes
                .iter()
                .copied()
                .filter(|s| *s != Scope::Approve)
                .collect(),
            None if self.principals.is_empty() => {
                vec![Scope::Ingest, Scope::Read, Scope::Metrics]
            }
            None => Vec::new(),
        }
    }
}
