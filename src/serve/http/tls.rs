//! HTTPS: the certificate chain and key of `listen.tls`, read once at start.

use std::path::Path;
use std::sync::Arc;

use anyhow::Context;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls;

use crate::manifest::compiled_listen::TlsFiles;

/// A TLS acceptor for `files` (paths relative to `root` unless absolute): TLS 1.2 and 1.3,
/// HTTP/1.1 announced by ALPN.
pub(super) fn acceptor(files: &TlsFiles, root: &Path) -> anyhow::Result<TlsAcceptor> {
    let cert_path = root.join(&files.cert);
    let key_path = root.join(&files.key);
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&cert_path)
        .and_then(|certs| certs.collect())
        .with_context(|| format!("listen.tls.cert: cannot read {}", cert_path.display()))?;
    if certs.is_empty() {
        anyhow::bail!(
            "listen.tls.cert: {} holds no PEM certificate",
            cert_path.display()
        );
    }
    let key = PrivateKeyDer::from_pem_file(&key_path).with_context(|| {
        format!(
            "listen.tls.key: cannot read a private key from {}",
            key_path.display()
        )
    })?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .context("TLS protocol versions")?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .context("listen.tls: the certificate and the key do not go together")?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}
