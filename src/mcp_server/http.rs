//! The streamable HTTP side: rmcp's service, one [`PapMcp`] per MCP session. Serve mounts it
//! at `/mcp` behind its own guard (Host, and Origin on every method, as the MCP transport
//! specification requires) and its principals, which hand each request's caller to the
//! session in the request's extensions; rmcp's own Host check is therefore off (serve's,
//! with `listen.allowed_hosts`, is the one that counts).

use std::sync::Arc;
use std::time::Duration;

use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio_util::sync::CancellationToken;

use super::{PapMcp, Shared};

pub(crate) type Service = StreamableHttpService<PapMcp, LocalSessionManager>;

/// The service, its sessions kept by `sessions` (which serve also uses to end those of a
/// principal a reload removed); cancelling `stop` ends its open streams (serve's shutdown).
pub(crate) fn service(
    shared: Arc<Shared>,
    sessions: Arc<LocalSessionManager>,
    stop: CancellationToken,
) -> Service {
    StreamableHttpService::new(
        move || Ok(PapMcp::remote(shared.clone())),
        sessions,
        StreamableHttpServerConfig::default()
            .disable_allowed_hosts()
            .with_sse_keep_alive(Some(Duration::from_secs(15)))
            .with_cancellation_token(stop),
    )
}
