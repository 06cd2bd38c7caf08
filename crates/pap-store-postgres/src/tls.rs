//! TLS to the database: rustls with ring (the provider pap's HTTPS listener uses), the
//! server's certificate verified by the platform's verifier (the system's roots, as pap's
//! HTTP client does), or against a CA file named by `sslrootcert`.

use std::path::Path;
use std::sync::Arc;

use rustls::ClientConfig;
use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;
use rustls_platform_verifier::BuilderVerifierExt;
use tokio_postgres_rustls::MakeRustlsConnect;

/// A connector that verifies the server against `ca_file`, or the platform's roots.
pub(super) fn connector(ca_file: Option<&Path>) -> Result<MakeRustlsConnect, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS setup: {e}"))?;
    let config = match ca_file {
        Some(path) => {
            let mut roots = rustls::RootCertStore::empty();
            let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(path)
                .map_err(|e| format!("sslrootcert {}: {e}", path.display()))?
                .collect::<Result<_, _>>()
                .map_err(|e| format!("sslrootcert {}: {e}", path.display()))?;
            if certs.is_empty() {
                return Err(format!(
                    "sslrootcert {}: no PEM certificate in it",
                    path.display()
                ));
            }
            for cert in certs {
                roots
                    .add(cert)
                    .map_err(|e| format!("sslrootcert {}: {e}", path.display()))?;
            }
            builder.with_root_certificates(roots).with_no_client_auth()
        }
        None => builder
            .with_platform_verifier()
            .map_err(|e| format!("TLS setup: {e}"))?
            .with_no_client_auth(),
    };
    Ok(MakeRustlsConnect::new(config))
}
