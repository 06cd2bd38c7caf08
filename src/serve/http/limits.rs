//! The listener's settings a reload may change while it runs: the `Host`/`Origin` names it
//! accepts, the body limit, the read timeout (of headers, TLS handshake and bodies; a
//! connection takes the one in force when it was accepted) and the TLS certificate and key
//! (re-read at each reload, so a renewed certificate is served without a restart). Turning
//! TLS on or off, the address and the connection bound need a restart (see serve's reload).

use std::path::Path;
use std::time::Duration;

use tokio_rustls::TlsAcceptor;

use super::{guard, tls};
use crate::manifest::compiled_listen::ListenConfig;

pub struct Limits {
    pub hosts: guard::Hosts,
    pub max_body_bytes: u64,
    pub read_timeout: Duration,
    /// Set while the listener speaks HTTPS (from start to stop).
    pub tls: Option<TlsAcceptor>,
    /// Peers whose forwarding headers name the client (`listen.trusted_proxies`).
    pub trusted_proxies: Vec<ipnet::IpNet>,
}

impl Limits {
    /// The limits `config` sets for a listener on `address`; `tls` as already read.
    pub fn new(config: &ListenConfig, address: &str, tls: Option<TlsAcceptor>) -> Limits {
        let listen_host = crate::manifest::compile_listen::split_host_port(address)
            .map(|(host, _)| host.to_owned());
        Limits {
            hosts: guard::Hosts::new(&config.allowed_hosts, listen_host.as_deref()),
            max_body_bytes: config.max_body_bytes,
            read_timeout: config.read_timeout,
            tls,
            trusted_proxies: config.trusted_proxies.clone(),
        }
    }
}

/// The TLS acceptor for a reload: the files read again while TLS stays on; while it is on
/// but no longer configured (that waits for a restart), the one in force; none while off.
pub(super) fn tls_again(
    config: &ListenConfig,
    root: &Path,
    running: Option<&TlsAcceptor>,
) -> anyhow::Result<Option<TlsAcceptor>> {
    Ok(match (running, &config.tls) {
        (Some(_), Some(files)) => Some(tls::acceptor(files, root)?),
        (Some(running), None) => Some(running.clone()),
        (None, _) => None,
    })
}
