//! One HTTP client per process, for the LLM providers and webhook sinks.
//!
//! Building a client loads the system's CA certificates (hundreds of files on a typical host,
//! each read and decoded): that was most of pap's own cost of an LLM invocation when every
//! attempt built one. Shared, the certificates are read once and connections to a provider are
//! kept and reused. Time limits are set per request (and around a whole attempt), never on the
//! client.

use std::sync::{Once, OnceLock};
use std::time::Duration;

/// Makes ring the process's TLS crypto provider, once, before any HTTP client is built: reqwest
/// is built without a provider of its own (`rustls-no-provider`), and both pap's client and
/// rmcp's HTTP transport read this one. ring and not aws-lc-rs (reqwest's default): the
/// PostgreSQL driver's TLS needs ring anyway, and aws-lc-rs's C build was a minute and a half
/// of every clean build. What it costs: no post-quantum hybrid key exchange (X25519MLKEM768)
/// with providers that offer it; X25519 is negotiated instead.
pub(crate) fn install_tls_provider() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // An error means a provider is installed already (by an embedding program): kept.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// The process's client (cheap to clone: it is a handle).
pub(crate) fn shared() -> reqwest::Client {
    static CLIENT: OnceLock<reqwest::Client> = OnceLock::new();
    CLIENT
        .get_or_init(|| {
            install_tls_provider();
            reqwest::Client::builder()
                .user_agent(concat!("pap/", env!("CARGO_PKG_VERSION")))
                .connect_timeout(Duration::from_secs(30))
                .build()
                .expect("an HTTP client with default TLS")
        })
        .clone()
}

/// An error with its causes (`error sending request: client error (Connect): tcp connect
/// error: Connection refused`), each said once: a cause whose text its parent already
/// carries is left out.
pub(crate) fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = cause.source();
    }
    out
}

#[cfg(test)]
mod tests {
    #[derive(Debug)]
    struct Layer(&'static str, Option<Box<Layer>>);

    impl std::fmt::Display for Layer {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(self.0)
        }
    }

    impl std::error::Error for Layer {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            self.1.as_deref().map(|l| l as _)
        }
    }

    #[test]
    fn each_cause_is_said_once() {
        let e = Layer(
            "error sending request",
            Some(Box::new(Layer(
                "connect",
                Some(Box::new(Layer("Connection refused", None))),
            ))),
        );
        assert_eq!(
            super::error_chain(&e),
            "error sending request: connect: Connection refused"
        );
        let repeated = Layer(
            "io: Connection refused",
            Some(Box::new(Layer("Connection refused", None))),
        );
        assert_eq!(super::error_chain(&repeated), "io: Connection refused");
    }
}
