//! One HTTP client per process, for the LLM providers and webhook sinks.
//!
//! Building a client loads the system's CA certificates (hundreds of files on a typical host,
//! each read and decoded): that was most of pap's own cost of an LLM invocation when every
//! attempt built one. Shared, the certificates are read once and connections to a provider are
//! kept and reused. Time limits are set per request (and around a whole attempt), never on the
//! client.

use std::sync::OnceLock;
use std::time::Duration;

/// The process's client (cheap to clone: it is a handle).
pub fn shared() -> reqwest::Client {
    static CLIENT: OnceLock<reqwest::Client> = OnceLock::new();
    CLIENT
        .get_or_init(|| {
            reqwest::Client::builder()
                .user_agent(concat!("pap/", env!("CARGO_PKG_VERSION")))
                .connect_timeout(Duration::from_secs(30))
                .build()
                .expect("an HTTP client with default TLS")
        })
        .clone()
}
